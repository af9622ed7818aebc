#include "clone/dvfs/batch_cosim.h"

#include <algorithm>

#include "clone/core/error.h"

namespace cln::dvfs {

struct BatchCoSim::Live {
  workload::Request req;
  std::unique_ptr<Policy> policy;
  std::optional<RequestDriver> driver;
  double energy_j = 0;
  std::map<double, int64_t> mhz_layers;
  std::vector<std::vector<float>> timeline;
  bool feasible = true;
  std::optional<Measured> measured;
  double admitted_real_s = 0;
  std::string mode;
};

BatchCoSim::BatchCoSim(const ModelConfig& model, const CoSimOptions& opt) : opt_(opt) {
  if (opt.controller == "oracle")
    fail(
        "the oracle controller plans with each request's future, which a server does not "
        "know: use learned, mpc, static, schedutil, performance or powersave");
  model_ =
      std::make_shared<const device::CostModel>(device::DeviceProfile::find(opt.device), model);
  dev_.emplace(model_, device::CorunnerTrace::make(opt.corunner, opt.corunner_seed));
  po_.learned_path = opt.policy_path;
  po_.n_batch = opt.n_batch;
  if (opt.controller == "learned") po_.learned_net = load_learned_net(*model_, opt.policy_path);
  (void)make_policy(opt.controller, model_, po_);  // an unknown name fails here, not later
  if (!opt.modes.empty()) {
    st_ = make_settings(*model_, opt.modes);
    st_->switch_s = opt.setting_switch_s;
    for (const auto& m : st_->models) {
      PolicyOptions p = po_;
      if (opt.controller == "learned") p.learned_net = load_learned_net(*m, opt.policy_path);
      st_po_.push_back(std::move(p));
    }
  }
  if (opt.backend == "linux") {
    real_ = std::make_unique<RealBoard>(opt.sysfs_root, opt.knob, model_->levels());
    (void)real_->meter();  // the rails' first sample: energy counts from here
  } else if (opt.backend != "sim")
    fail("unknown device backend \"", opt.backend, "\": use sim or linux");
}

BatchCoSim::~BatchCoSim() = default;

std::string BatchCoSim::mode() const {
  return st_ && mode_ >= 0 ? st_->names[static_cast<size_t>(mode_)] : std::string();
}

void BatchCoSim::admit(int64_t id, const std::string& slo, int64_t prompt, int64_t predicted_output,
                       double ttft_target_s, double tpot_target_s) {
  if (live_.count(id)) fail("batch co-simulation: request ", id, " was admitted twice");
  if (!(ttft_target_s > 0) || !(tpot_target_s > 0))
    fail("batch co-simulation: request ", id, " has no SLO targets");
  auto l = std::make_unique<Live>();
  l->req.id = id;
  l->req.slo = slo;
  l->req.prompt = prompt;
  l->req.output = std::max<int64_t>(1, predicted_output);
  l->req.ttft_target_s = ttft_target_s;
  l->req.tpot_target_s = tpot_target_s;
  const double arrival = dev_->now_s();
  if (real_) {
    l->measured.emplace();
    l->measured->board = real_->name();
  }
  if (st_) {
    l->feasible = feasible_in_fastest(*dev_, *st_, l->req, arrival, opt_.n_batch);
    if (live_.empty()) {  // the board is idle: this request chooses its mode
      const int chosen = choose_setting(opt_.controller, *st_, *dev_, l->req, arrival,
                                        l->req.output, opt_.n_batch, po_);
      if (chosen != mode_) {
        l->energy_j += switch_setting(*dev_, *st_, chosen);
        mode_ = chosen;
        model_ = st_->models[static_cast<size_t>(chosen)];
        if (real_) l->measured->mode_set = real_->apply_mode(*model_);
      }
    }
    l->mode = st_->names[static_cast<size_t>(mode_)];
    l->policy = make_policy(opt_.controller, model_, st_po_[static_cast<size_t>(mode_)]);
  } else {
    l->policy = make_policy(opt_.controller, model_, po_);
    l->feasible = feasible_at_top(*dev_, l->req, arrival, opt_.n_batch);
  }
  l->driver.emplace(*dev_, *l->policy, l->req, arrival, l->req.output, opt_.n_batch);
  l->driver->set_decode_horizon(opt_.decode_horizon);
  if (real_) l->admitted_real_s = real_->now_s();
  live_.emplace(id, std::move(l));
}

void BatchCoSim::charge_embedding(int64_t id, int layers, int64_t tokens) {
  const auto it = live_.find(id);
  if (it == live_.end()) fail("batch co-simulation: request ", id, " was not admitted");
  const int nl = model_->n_layer();
  if (layers < 0 || layers > nl)
    fail("batch co-simulation: the embedding runs ", layers, " of ", nl, " layers");
  const double e0 = dev_->energy_j();
  for (int il = 0; il < layers; ++il) dev_->on_layer(LayerEvent{Phase::Prefill, il, nl, 0, tokens});
  it->second->energy_j += dev_->energy_j() - e0;
}

void BatchCoSim::begin_pass(std::vector<BatchItem> items) {
  for (const BatchItem& it : items) {
    if (!live_.count(it.id)) fail("batch co-simulation: request ", it.id, " was not admitted");
    if (it.n_tokens < 1) fail("batch co-simulation: request ", it.id, " runs no tokens");
  }
  pass_ = std::move(items);
}

LayerHook BatchCoSim::hook() {
  return [this](const LayerEvent& ev) { on_event(ev); };
}

void BatchCoSim::on_event(const LayerEvent& ev) {
  if (pass_.empty()) fail("batch co-simulation: a pass ran without begin_pass()");
  // Each request's controller on its own view of this layer; the highest clock wins.
  int level = 0;
  for (const BatchItem& it : pass_) {
    const LayerEvent mine{it.phase, ev.layer, ev.n_layer, it.pos, it.n_tokens};
    level = std::max(level, live_.at(it.id)->driver->decide(mine));
  }
  const double e0 = dev_->energy_j();
  level = std::clamp(level, 0, model_->max_level());
  dev_->set_level(level);
  if (real_) {
    share_measured(real_->on_layer(level));
    ran_ = pass_;
    const double real_mhz = real_->mhz_now();
    for (const BatchItem& it : pass_) ++live_.at(it.id)->measured->mhz_layers[real_mhz];
  }
  // The batched layer: every request's rows and attention, the weights read once.
  const device::Work shared = model_->work(ev.layer, Phase::Decode, 0, 0);
  device::Work w;
  int64_t rows = 0;
  for (const BatchItem& it : pass_) {
    const device::Work x = model_->work(ev.layer, it.phase, it.pos, it.n_tokens);
    w.flops += x.flops - shared.flops;
    w.dram_bytes += x.dram_bytes - shared.dram_bytes;
    w.stream_bytes += x.stream_bytes - shared.stream_bytes;
    w.lpu_flops += x.lpu_flops - shared.lpu_flops;
    rows += it.n_tokens;
  }
  w.fixed = shared.fixed;  // the layer's fixed cost, once for the batch
  w.flops += shared.flops, w.dram_bytes += shared.dram_bytes;
  w.stream_bytes += shared.stream_bytes, w.lpu_flops += shared.lpu_flops;
  dev_->on_work(w);
  const double spent = dev_->energy_j() - e0;
  const double mhz = model_->levels()[static_cast<size_t>(dev_->level())].mhz;
  for (const BatchItem& it : pass_) {
    Live& l = *live_.at(it.id);
    l.energy_j += spent * static_cast<double>(it.n_tokens) / static_cast<double>(rows);
    ++l.mhz_layers[mhz];
    if (ev.layer == 0 || l.timeline.empty()) l.timeline.emplace_back();
    l.timeline.back().push_back(static_cast<float>(mhz));
  }
}

// The real board's energy since the last layer boundary belongs to those who ran that
// layer, by rows (requests that have left since get none).
void BatchCoSim::share_measured(double energy_j) {
  int64_t rows = 0;
  for (const BatchItem& it : ran_)
    if (live_.count(it.id)) rows += it.n_tokens;
  for (const BatchItem& it : ran_) {
    const auto l = live_.find(it.id);
    if (l == live_.end()) continue;
    l->second->measured->energy_j +=
        energy_j * static_cast<double>(it.n_tokens) / static_cast<double>(rows);
  }
}

BatchRequestResult BatchCoSim::finish(int64_t id) {
  const auto it = live_.find(id);
  if (it == live_.end()) fail("batch co-simulation: request ", id, " was not admitted");
  if (real_) {
    share_measured(real_->meter());  // its last layer
    it->second->measured->time_s = real_->now_s() - it->second->admitted_real_s;
  }
  BatchRequestResult out;
  out.r = it->second->driver->finish();
  out.r.energy_j = it->second->energy_j;
  out.r.feasible = it->second->feasible;
  out.mhz_layers = std::move(it->second->mhz_layers);
  out.measured = std::move(it->second->measured);
  out.timeline = std::move(it->second->timeline);
  out.mode = it->second->mode;
  live_.erase(it);
  std::erase_if(pass_, [&](const BatchItem& b) { return b.id == id; });
  return out;
}

}  // namespace cln::dvfs
