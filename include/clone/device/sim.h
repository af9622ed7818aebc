// The simulated device: a virtual clock and energy meter. Each on_layer() charges that
// layer's cost (cost_model.h) at the current level and the co-runner's intensity at the
// current time. Analytic runs call on_layer() from shapes alone; co-simulation calls it
// from the engine's layer hook while the host really computes: same events, same totals.
#pragma once

#include <memory>

#include "clone/device/backend.h"
#include "clone/device/corunner.h"
#include "clone/device/cost_model.h"

namespace cln::device {

class SimDevice : public DeviceBackend {
 public:
  SimDevice(std::shared_ptr<const CostModel> model, CorunnerTrace corunner);

  std::string name() const override { return "sim:" + model_->profile().name; }
  const std::vector<OperatingPoint>& levels() const override { return model_->levels(); }
  int level() const override { return level_; }
  void set_level(int i) override;
  void on_layer(const LayerEvent& ev) override;
  // Charges work that is not one event's: a batched pass's layer (dvfs/batch_cosim.h).
  void on_work(const Work& w);
  double now_s() const override { return now_; }
  double energy_j() const override { return energy_; }
  // Of energy_j: the compute rail's share (Cost::rail_j summed over the layers run).
  double rail_energy_j() const { return rail_; }
  double corunner_intensity() const override { return corunner_.at(now_ + shift_); }
  double last_util() const override { return last_.util; }
  int64_t switches() const override { return switches_; }

  const CostModel& model() const { return *model_; }
  std::shared_ptr<const CostModel> model_ptr() const { return model_; }
  const CorunnerTrace& corunner() const { return corunner_; }
  const Cost& last_cost() const { return last_; }
  // Co-runner intensity at device time t (t + the phase shift, see anchor_corunner).
  double corunner_at(double t) const { return corunner_.at(t + shift_); }
  // Make the co-runner trace read its time t_trace now, so that every controller meets
  // the same co-runner phase at the start of the same request however long earlier ones took.
  void anchor_corunner(double t_trace) { shift_ = t_trace - now_; }
  // Idle until device time t (the board's idle draw is not charged to any request).
  void idle_until(double t) { now_ = std::max(now_, t); }
  // Run from now on in another setting of the board's knobs (a power mode's memory clock, CPU
  // clock, cores and GPU cap: another cost model of the same board and model). Changing it
  // stalls the board switch_s (the board's idle draw charged) plus switch_j; the clock level
  // is kept where the new setting has it, else its top.
  void set_model(std::shared_ptr<const CostModel> m, double switch_s, double switch_j);
  // Charge a fixed delay with its energy (loading LoRA experts, for instance).
  void charge(double time_s, double energy_j) { now_ += time_s, energy_ += energy_j; }

 private:
  std::shared_ptr<const CostModel> model_;
  CorunnerTrace corunner_;
  int level_;
  double now_ = 0, energy_ = 0, shift_ = 0, rail_ = 0;
  int64_t switches_ = 0;
  Cost last_;
};

}  // namespace cln::device
