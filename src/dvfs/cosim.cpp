#include "clone/dvfs/cosim.h"

#include <cstdio>
#include <fstream>
#include <iomanip>

#include "clone/core/error.h"
#include "clone/core/resources.h"

namespace cln::dvfs {

CoSim::CoSim(const ModelConfig& model, const CoSimOptions& opt, int64_t prompt_tokens,
             int64_t max_output)
    : opt_(opt) {
  model_ =
      std::make_shared<const device::CostModel>(device::DeviceProfile::find(opt.device), model);
  req_.prompt = prompt_tokens;  // before the SLO class: its TTFT target grows with the prompt
  if (!opt.slo.empty()) workload::apply_slo(req_, workload::slo_class(opt.slo));
  if (opt.ttft_target_s > 0) req_.ttft_target_s = opt.ttft_target_s;
  if (opt.tpot_target_s > 0) req_.tpot_target_s = opt.tpot_target_s;
  if (req_.ttft_target_s <= 0 || req_.tpot_target_s <= 0)
    fail("co-simulation on ", opt.device,
         " needs SLO targets: an SLO class (chatbot, smart-reply, code-completion) or both a "
         "TTFT and a TPOT target (clone run: --slo CLASS, or both --ttft-ms and --tpot-ms)");
  req_.slo = opt.slo.empty() ? "custom" : opt.slo;
  req_.output = std::max<int64_t>(1, max_output);
  dev_.emplace(model_, device::CorunnerTrace::make(opt.corunner, opt.corunner_seed));
  PolicyOptions po;
  po.learned_path = opt.policy_path;
  po.n_batch = opt.n_batch;
  policy_ = make_policy(opt.controller, model_, po);  // an unknown name fails here
  const double arrival = dev_->now_s();
  const int nl = model_->n_layer();
  if (opt.embed_layers > 0 && (opt.embed_layers > nl || opt.embed_tokens < 1))
    fail("co-simulation: the router's embedding runs ", opt.embed_layers, " of ", nl,
         " layers over ", opt.embed_tokens, " tokens");
  // The router's embedding, which the request's passes wait for.
  const auto embed = [&](device::SimDevice& d) {
    for (int il = 0; il < opt.embed_layers; ++il)
      d.on_layer(LayerEvent{Phase::Prefill, il, nl, 0, opt.embed_tokens});
  };
  if (!opt.modes.empty()) {
    // The mode first (from the board as the request finds it), then everything in it;
    // feasible when the fastest mode's top clock, embedding included, meets the SLO.
    Settings st = make_settings(*model_, opt.modes);
    st.switch_s = opt.setting_switch_s;
    const int64_t told = opt.predicted > 0 ? opt.predicted : req_.output;
    feasible_ = feasible_in_fastest(*dev_, st, req_, arrival, opt.n_batch, embed);
    const int chosen =
        choose_setting(opt.controller, st, *dev_, req_, arrival, told, opt.n_batch, po);
    pre_j_ += switch_setting(*dev_, st, chosen);
    model_ = st.models[static_cast<size_t>(chosen)];
    mode_ = st.names[static_cast<size_t>(chosen)];
    policy_ = make_policy(opt.controller, model_, po);  // the mode's (its learned net)
  }
  const double e0 = dev_->energy_j();
  embed(*dev_);
  pre_j_ += dev_->energy_j() - e0;
  if (opt.modes.empty()) feasible_ = feasible_at_top(*dev_, req_, arrival, opt.n_batch);
  driver_.emplace(*dev_, *policy_, req_, arrival, opt.predicted > 0 ? opt.predicted : req_.output,
                  opt.n_batch);
  driver_->set_decode_horizon(opt.decode_horizon);
  if (opt.backend == "linux") {
    real_ = std::make_unique<RealBoard>(opt.sysfs_root, opt.knob, model_->levels());
    measured_.emplace();
    measured_->board = real_->name();
    if (!mode_.empty()) measured_->mode_set = real_->apply_mode(*model_);
    (void)real_->meter();  // the rails' first sample: energy counts from here
    real_t0_ = real_->now_s();
  } else if (opt.backend != "sim") {
    fail("unknown device backend \"", opt.backend, "\": use sim or linux");
  }
}

LayerHook CoSim::hook() {
  return [this](const LayerEvent& ev) { on_event(ev); };
}

void CoSim::on_event(const LayerEvent& ev) {
  if (ev.layer == 0) {
    ++pass_;
    if (ev.phase == Phase::Decode) ++decode_passes_;
  }
  const double t0 = dev_->now_s(), e0 = dev_->energy_j();
  const double s = dev_->corunner_intensity();
  driver_->on_event(ev);  // the controller picks the clock, the device charges the layer
  if (real_) {            // the same clock on the board itself, before the layer runs there
    measured_->energy_j += real_->on_layer(dev_->level());
    ++measured_->mhz_layers[real_->mhz_now()];
  }
  const double mhz = model_->levels()[static_cast<size_t>(dev_->level())].mhz;
  const int64_t token = ev.phase == Phase::Prefill ? ev.pos : decode_passes_;
  rows_.push_back({pass_, ev.phase, ev.layer, token, ev.n_tokens, mhz, t0, dev_->now_s() - t0,
                   dev_->energy_j() - e0, s});
}

RequestResult CoSim::finish() {
  RequestResult r = driver_->finish();
  r.feasible = feasible_;
  r.energy_j += pre_j_;
  if (real_) {
    measured_->energy_j += real_->meter();
    measured_->time_s = real_->now_s() - real_t0_;
  }
  return r;
}

std::string CoSim::summary_line(const RequestResult& r) const {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "%s on %s, controller %s, co-runner %s: prompt %lld tokens, %lld generated | TTFT "
                "%.1f ms (target %.1f) | TPOT %.2f ms (target %.2f) | end-to-end %.1f ms | energy "
                "%.4f J | SLO %s%s | %lld frequency switches",
                model_->model().name.empty() ? "unnamed model" : model_->model().name.c_str(),
                model_->profile().name.c_str(), opt_.controller.c_str(), opt_.corunner.c_str(),
                static_cast<long long>(r.prompt), static_cast<long long>(r.output), r.ttft_s * 1e3,
                r.ttft_target_s * 1e3, r.tpot_s * 1e3, r.tpot_target_s * 1e3, r.e2e_s * 1e3,
                r.energy_j, r.met ? "met" : "missed",
                r.feasible ? "" : " (infeasible: the top clock cannot meet it either)",
                static_cast<long long>(r.switches));
  std::string line = buf;
  if (opt_.controller == "learned") {
    // Which weights: the default ones depend on the model's shape (default_learned_path).
    std::string w = opt_.policy_path.empty() ? default_learned_path(*model_) : opt_.policy_path;
    const std::string models = resource_dir(Resource::Models) + "/";
    if (opt_.policy_path.empty() && w.starts_with(models))
      w = "<models>/" + w.substr(models.size());
    line += " | learned weights " + w;
  }
  if (!mode_.empty()) line += " | power mode " + mode_;
  if (measured_) {
    std::snprintf(buf, sizeof buf, " | measured on %s: %.1f ms, %.4f J", measured_->board.c_str(),
                  measured_->time_s * 1e3, measured_->energy_j);
    line += buf;
  }
  return line;
}

void CoSim::write_trace(const std::string& path) const {
  std::ofstream f(path);
  if (!f) fail("cannot write the trace ", path);
  f << std::setprecision(17);
  f << "pass,phase,layer,token,n_tokens,mhz,t_start_s,time_s,energy_j,corunner\n";
  for (const auto& x : rows_)
    f << x.pass << "," << (x.phase == Phase::Prefill ? "prefill" : "decode") << "," << x.layer
      << "," << x.token << "," << x.n_tokens << "," << x.mhz << "," << x.t_start_s << ","
      << x.time_s << "," << x.energy_j << "," << x.corunner << "\n";
  if (!f) fail("error writing the trace ", path);
}

}  // namespace cln::dvfs
