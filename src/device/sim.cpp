#include "clone/device/sim.h"

#include <algorithm>

#include "clone/core/error.h"

namespace cln::device {

SimDevice::SimDevice(std::shared_ptr<const CostModel> model, CorunnerTrace corunner)
    : model_(std::move(model)), corunner_(std::move(corunner)), level_(model_->max_level()) {}

void SimDevice::set_level(int i) {
  if (i < 0 || i > model_->max_level())
    fail("sim: frequency level ", i, " out of range [0, ", model_->max_level(), "]");
  if (i == level_) return;
  level_ = i;
  ++switches_;
  now_ += model_->switch_time_s();
  energy_ += model_->switch_cost_j();
}

void SimDevice::set_model(std::shared_ptr<const CostModel> m, double switch_s, double switch_j) {
  if (!m) fail("sim: no cost model to switch to");
  if (m == model_) return;
  model_ = std::move(m);
  level_ = std::min(level_, model_->max_level());
  now_ += switch_s;
  energy_ += switch_j + switch_s * model_->board_idle_w();
}

void SimDevice::on_layer(const LayerEvent& ev) {
  on_work(model_->work(ev.layer, ev.phase, ev.pos, ev.n_tokens));
}

void SimDevice::on_work(const Work& w) {
  last_ = model_->cost(w, level_, corunner_.at(now_ + shift_));
  now_ += last_.time_s;
  energy_ += last_.energy_j;
  rail_ += last_.rail_j;
}

}  // namespace cln::device
