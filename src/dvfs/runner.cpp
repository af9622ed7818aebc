#include "clone/dvfs/runner.h"
#include "clone/core/rng.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "clone/core/error.h"
#include "clone/core/stats.h"
#include "clone/device/calibrate.h"

namespace cln::dvfs {

int64_t LengthPredictor::predict(const workload::Request& r) const {
  if (noise <= 0) return r.output;
  Rng rng(seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(r.id));
  return std::max<int64_t>(
      1, std::llround(static_cast<double>(r.output) * std::exp(noise * (rng.normal() + reserve))));
}

namespace {

// What a controller is told of a request when its service begins.
RequestInfo info_for(const workload::Request& r, double arrival_s, double start_s,
                     int64_t predicted) {
  RequestInfo i;
  i.prompt = r.prompt;
  i.predicted_output = std::max<int64_t>(1, predicted);
  i.true_output = r.output;
  i.ttft_target_s = r.ttft_target_s;
  i.tpot_target_s = r.tpot_target_s;
  i.arrival_s = arrival_s;
  i.start_s = start_s;
  return i;
}

}  // namespace

RequestDriver::RequestDriver(device::SimDevice& dev, Policy& pol, const workload::Request& r,
                             double arrival_s, int64_t predicted_output, int64_t n_batch,
                             std::vector<TimelinePoint>* timeline,
                             const device::CostModel* planning)
    : dev_(dev),
      plan_(planning ? planning : &dev.model()),
      pol_(pol),
      req_(r),
      tl_(timeline),
      e0_(dev.energy_j()),
      sw0_(dev.switches()) {
  if (r.ttft_target_s <= 0 || r.tpot_target_s <= 0)
    fail("request ", r.id, ": no SLO targets (ttft_target_s, tpot_target_s must be positive)");
  info_ = info_for(r, arrival_s, dev.now_s(), predicted_output);
  est_ = estimate(*plan_, r.prompt, info_.predicted_output, n_batch);
  if (pol_.reads_forecast()) forecast();
  pol_.begin(info_, &dev_);
}

void RequestDriver::on_event(const LayerEvent& ev) {
  const double corunner = dev_.corunner_intensity();  // what the controller saw
  const int level = decide(ev);
  const auto& m = dev_.model();
  dev_.set_level(std::clamp(level, 0, m.max_level()));
  if (tl_)
    tl_->push_back({pass_, ev.phase, ev.layer, dev_.now_s() - info_.arrival_s,
                    m.levels()[static_cast<size_t>(dev_.level())].mhz, corunner});
  dev_.on_layer(ev);
}

int RequestDriver::decide(const LayerEvent& ev) {
  if (ev.phase == Phase::Decode && phase_ == Phase::Prefill) {
    first_ = dev_.now_s();
    phase_ = Phase::Decode;
  }
  if (ev.layer == 0) {
    ++pass_;
    pass_start_ = dev_.now_s();
    if (ev.phase == Phase::Decode) ++decode_passes_;
  }
  const auto& m = *plan_;
  State s;
  s.phase = ev.phase;
  s.layer = ev.layer;
  s.n_layer = ev.n_layer;
  s.pos = ev.pos;
  s.n_tokens = ev.n_tokens;
  s.now_s = dev_.now_s();
  s.corunner = dev_.corunner_intensity();
  s.ttft_target_s = info_.ttft_target_s;
  s.tpot_target_s = info_.tpot_target_s;
  s.prompt = info_.prompt;
  s.ttft_est_s = est_.prefill_s;
  s.tpot_est_s = est_.decode_token_s;
  s.level = dev_.level();
  s.util = dev_.last_util();
  s.last_layer_s = dev_.last_cost().time_s;
  s.elapsed_s = s.now_s - info_.arrival_s;
  const bool ahead = pol_.reads_forecast();
  if (ahead && s.now_s - fc_.made_at_s() >= kForecastEvery_s) forecast();
  size_t l = static_cast<size_t>(ev.layer);
  if (ev.phase == Phase::Prefill) {
    s.tokens_done = 0;
    s.predicted_remaining = info_.predicted_output;
    s.phase_elapsed_s = s.elapsed_s;
    s.budget_left_s = info_.ttft_target_s - s.elapsed_s;
    // Passes before this one, this pass's layers before and from this one, later passes.
    size_t pass = static_cast<size_t>(ev.pos / est_.n_batch);
    double before = 0, done = 0, left = 0;
    for (size_t p = 0; p < est_.prefill_pass_s.size(); ++p)
      for (size_t k = 0; k < est_.prefill_pass_s[p].size(); ++k) {
        double t = est_.prefill_pass_s[p][k];
        if (p < pass)
          before += t;
        else if (p == pass && k < l)
          done += t;
        else
          left += t;
      }
    s.work_left_s = left;
    s.slack_s = info_.ttft_target_s * (before + done) / est_.prefill_s - s.elapsed_s;
  } else {
    int64_t j = decode_passes_ - 1;  // decode passes before this one
    s.tokens_done = 1 + j;
    s.predicted_remaining = std::max<int64_t>(1, info_.predicted_output - s.tokens_done);
    if (horizon_ > 0) s.predicted_remaining = std::min(s.predicted_remaining, horizon_);
    s.phase_elapsed_s = s.now_s - first_;
    double dpred = static_cast<double>(j + s.predicted_remaining);
    s.budget_left_s = info_.tpot_target_s * dpred - s.phase_elapsed_s;
    double done = 0, left = 0;
    for (size_t k = 0; k < est_.decode_layer_s.size(); ++k)
      (k < l ? done : left) += est_.decode_layer_s[k];
    // The tokens still to come, at the time of the one in their middle.
    const int64_t more = s.predicted_remaining - 1;
    left += est_.decode_token_at(s.pos + (1 + more) / 2) * static_cast<double>(more);
    s.work_left_s = left;
    s.slack_s = info_.tpot_target_s * (static_cast<double>(j) + done / est_.decode_token_s) -
                s.phase_elapsed_s;
  }
  // The rest of the phase is planned for the co-runner as loaded as the forecast says it may
  // be over the time the phase has left.
  const double horizon = std::max(s.budget_left_s, 0.0), contention = m.profile().fit.contention;
  s.corunner_ahead = ahead ? fc_.mean_load(horizon) : s.corunner;
  s.burst_reserve_s = ahead ? fc_.burst_reserve_s(horizon, contention) : 0.0;
  // A burst under way now is planned to go on (as the MPC teacher plans the later layers).
  s.work_left_s /= std::max(1e-3, 1 - contention * std::max(s.corunner, s.corunner_ahead));
  return pol_.decide(s);
}

void RequestDriver::forecast() {
  const device::SimDevice& dev = dev_;
  fc_ = LoadForecast([&dev](double t) { return dev.corunner_at(t); }, dev.now_s(), fc_opt_);
}

RequestResult RequestDriver::finish() {
  RequestResult r;
  double now = dev_.now_s();
  if (first_ < 0) first_ = now;
  r.id = req_.id;
  r.slo = req_.slo;
  r.prompt = req_.prompt;
  r.output = 1 + decode_passes_;
  r.predicted = info_.predicted_output;
  r.queue_s = info_.start_s - info_.arrival_s;
  r.ttft_s = first_ - info_.arrival_s;
  r.e2e_s = now - info_.arrival_s;
  r.tpot_s = decode_passes_ > 0 ? (now - first_) / static_cast<double>(decode_passes_) : 0;
  r.energy_j = dev_.energy_j() - e0_;
  r.switches = dev_.switches() - sw0_;
  r.ttft_target_s = req_.ttft_target_s;
  r.tpot_target_s = req_.tpot_target_s;
  r.met = r.ttft_s <= req_.ttft_target_s + 1e-9 && r.tpot_s <= req_.tpot_target_s + 1e-9;
  return r;
}

bool feasible_at_top(const device::SimDevice& dev, const workload::Request& r, double arrival_s,
                     int64_t n_batch) {
  device::SimDevice d = dev;
  d.set_level(d.model().max_level());
  double first = -1;
  device::for_each_request_event(d.model().n_layer(), r.prompt, r.output, n_batch,
                                 [&](const LayerEvent& ev) {
                                   if (ev.phase == Phase::Decode && first < 0) first = d.now_s();
                                   d.on_layer(ev);
                                   return true;
                                 });
  if (first < 0) first = d.now_s();
  bool ok = first - arrival_s <= r.ttft_target_s + 1e-9;
  if (r.output > 1)
    ok = ok && (d.now_s() - first) / static_cast<double>(r.output - 1) <= r.tpot_target_s + 1e-9;
  return ok;
}

namespace {

// Serves every request in turn: arrival (closed or open loop), the co-runner's phase, the
// LoRA expert set, then `pick` chooses the request's controller (and may switch the
// device's setting, returning what that cost) and the request runs on the device.
template <class Pick>
std::vector<RequestResult> serve_all(device::SimDevice& dev,
                                     const std::vector<workload::Request>& reqs,
                                     const LengthPredictor& pred, const RunOptions& opt,
                                     Pick pick) {
  std::vector<RequestResult> out;
  out.reserve(reqs.size());
  double nominal = dev.now_s();  // controller-independent schedule for the co-runner's phase
  // ...in the setting the device starts in, whichever a controller then chooses.
  const std::shared_ptr<const device::CostModel> nominal_model = dev.model_ptr();
  int32_t loaded = -1;  // LoRA expert set in memory
  for (const auto& r : reqs) {
    double arrival = opt.closed_loop ? dev.now_s() + r.think_s : r.arrival_s;
    dev.idle_until(arrival);
    if (opt.closed_loop) {
      nominal += r.think_s;
      dev.anchor_corunner(nominal);
      Estimates e = estimate(*nominal_model, r.prompt, r.output, opt.n_batch);
      nominal += e.prefill_s + e.decode_token_s * static_cast<double>(r.output - 1);
    }
    // Switching LoRA experts between requests: read the new set from storage into DRAM, or
    // with the LPU swap the on-chip resident set. The request waits for it (its TTFT and
    // the controller's slack include it) and pays for it.
    double swap_j = 0;
    if (r.expert_set >= 0 && r.expert_set != loaded && dev.model().options().n_experts > 0) {
      swap_j = dev.model().expert_swap_j();
      dev.charge(dev.model().expert_swap_s(), swap_j);
      loaded = r.expert_set;
    }
    const int64_t predicted = pred.predict(r);
    bool feas = true;
    double pick_j = 0;
    Policy& pol = pick(r, arrival, predicted, feas, pick_j);
    std::vector<TimelinePoint>* tl = r.id == opt.timeline_request ? opt.timeline : nullptr;
    RequestDriver drv(dev, pol, r, arrival, predicted, opt.n_batch, tl, opt.planning);
    drv.set_decode_horizon(opt.decode_horizon);
    device::for_each_request_event(dev.model().n_layer(), r.prompt, r.output, opt.n_batch,
                                   [&](const LayerEvent& ev) {
                                     drv.on_event(ev);
                                     return true;
                                   });
    RequestResult res = drv.finish();
    res.feasible = feas;
    res.energy_j += swap_j + pick_j;
    out.push_back(res);
  }
  return out;
}
}  // namespace

std::vector<RequestResult> run_workload(device::SimDevice& dev, Policy& pol,
                                        const std::vector<workload::Request>& reqs,
                                        const LengthPredictor& pred, const RunOptions& opt) {
  return serve_all(
      dev, reqs, pred, opt,
      [&](const workload::Request& r, double arrival, int64_t, bool& feas, double&) -> Policy& {
        feas = feasible_at_top(dev, r, arrival, opt.n_batch);
        return pol;
      });
}

double switch_setting(device::SimDevice& dev, const Settings& st, int i) {
  if (i < 0 || i >= static_cast<int>(st.models.size()))
    fail("settings: setting ", i, " of ", st.models.size());
  const double e0 = dev.energy_j();
  dev.set_model(st.models[static_cast<size_t>(i)], st.switch_s, 0);
  return dev.energy_j() - e0;
}

bool feasible_in_fastest(const device::SimDevice& dev, const Settings& st,
                         const workload::Request& r, double arrival_s, int64_t n_batch,
                         const std::function<void(device::SimDevice&)>& before) {
  const int f = fastest_setting(st, info_for(r, arrival_s, dev.now_s(), r.output), n_batch);
  device::SimDevice d = dev;
  switch_setting(d, st, f);
  if (before) before(d);
  return feasible_at_top(d, r, arrival_s, n_batch);
}

int choose_setting(const std::string& controller, const Settings& st, const device::SimDevice& dev,
                   const workload::Request& r, double arrival_s, int64_t predicted, int64_t n_batch,
                   const PolicyOptions& popt) {
  if (st.models.empty()) fail("settings: none to choose between");
  const RequestInfo info = info_for(r, arrival_s, dev.now_s(), predicted);
  if (controller == "performance") return fastest_setting(st, info, n_batch);
  if (controller == "oracle") {
    // The oracle's own plan in every setting, replayed from this state; the cheapest that
    // meets the SLO, else the fastest.
    int chosen = -1;
    double best = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < st.models.size(); ++i) {
      device::SimDevice d = dev;
      const double e0 = d.energy_j();
      switch_setting(d, st, static_cast<int>(i));
      auto trial = make_policy("oracle", st.models[i], popt);
      RequestDriver drv(d, *trial, r, arrival_s, predicted, n_batch);
      device::for_each_request_event(d.model().n_layer(), r.prompt, r.output, n_batch,
                                     [&](const LayerEvent& ev) {
                                       drv.on_event(ev);
                                       return true;
                                     });
      const RequestResult res = drv.finish();
      const double e = d.energy_j() - e0;
      if (res.met && e < best) best = e, chosen = static_cast<int>(i);
    }
    return chosen >= 0 ? chosen : fastest_setting(st, info, n_batch);
  }
  // Online: by the co-runner's observed past, as the controllers plan.
  const LoadForecast fc([&dev](double t) { return dev.corunner_at(t); }, dev.now_s());
  return cheapest_setting(st, info, dev.corunner_intensity(), n_batch, &fc);
}

std::vector<RequestResult> run_workload_settings(device::SimDevice& dev,
                                                 const std::string& controller, const Settings& st,
                                                 const std::vector<workload::Request>& reqs,
                                                 const LengthPredictor& pred, const RunOptions& opt,
                                                 const PolicyOptions& popt) {
  if (st.models.empty()) fail("settings: none to choose between");
  if (opt.planning) fail("settings: a perturbed board (--perturb) is not supported with --modes");
  std::vector<std::unique_ptr<Policy>> pols;
  for (const auto& m : st.models) pols.push_back(make_policy(controller, m, popt));
  return serve_all(dev, reqs, pred, opt,
                   [&](const workload::Request& r, double arrival, int64_t predicted, bool& feas,
                       double& pick_j) -> Policy& {
                     feas = feasible_in_fastest(dev, st, r, arrival, opt.n_batch);
                     const int chosen = choose_setting(controller, st, dev, r, arrival, predicted,
                                                       opt.n_batch, popt);
                     pick_j = switch_setting(dev, st, chosen);
                     return *pols[static_cast<size_t>(chosen)];
                   });
}

Summary summarize(const std::string& controller, const std::string& corunner,
                  const std::vector<RequestResult>& rs) {
  Summary s;
  s.controller = controller;
  s.corunner = corunner;
  s.n = rs.size();
  std::vector<double> ttft, tpot, e_feas;
  double met = 0, met_feas = 0, feas = 0, sw = 0, tokens = 0;
  for (const auto& r : rs) {
    s.energy_j += r.energy_j;
    if (r.feasible)
      e_feas.push_back(r.energy_j);
    else
      s.energy_infeasible_j += r.energy_j;
    ttft.push_back(r.ttft_s);
    if (r.output > 1) tpot.push_back(r.tpot_s);
    met += r.met;
    if (r.feasible)
      feas += 1, met_feas += r.met;
    else
      ++s.infeasible;
    sw += static_cast<double>(r.switches);
    tokens += static_cast<double>(r.output);
  }
  double n = std::max<double>(1, static_cast<double>(rs.size()));
  s.energy_j /= n;
  for (double e : e_feas) s.energy_feasible_j += e;
  if (!e_feas.empty()) s.energy_feasible_j /= static_cast<double>(e_feas.size());
  if (s.infeasible > 0) s.energy_infeasible_j /= static_cast<double>(s.infeasible);
  s.energy_feasible_p50_j = percentile(e_feas, 50);
  s.energy_feasible_p90_j = percentile(e_feas, 90);
  s.ttft_p50 = percentile(ttft, 50), s.ttft_p99 = percentile(ttft, 99);
  s.tpot_p50 = percentile(tpot, 50), s.tpot_p99 = percentile(tpot, 99);
  s.attainment = 100 * met / n;
  s.attainment_feasible = feas > 0 ? 100 * met_feas / feas : 0;
  s.switches_per_token = tokens > 0 ? sw / tokens : 0;
  return s;
}

SweepResult sweep(std::shared_ptr<const device::CostModel> model,
                  const std::vector<workload::Request>& reqs, const SweepSpec& spec) {
  SweepResult out;
  std::unique_ptr<Settings> settings;
  if (!spec.modes.empty()) {
    settings = std::make_unique<Settings>(make_settings(*model, spec.modes));
    settings->switch_s = spec.setting_switch_s;
  }
  for (const auto& pat : spec.corunners) {
    device::CorunnerTrace trace = device::CorunnerTrace::make(pat, spec.corunner_seed);
    for (const auto& name : spec.controllers) {
      auto pol = make_policy(name, model, spec.policy);
      device::SimDevice dev(spec.device_model ? spec.device_model : model, trace);
      RunOptions ro = spec.run;
      if (spec.device_model) ro.planning = model.get();
      std::vector<TimelinePoint> tl;
      bool want_tl = out.timeline.empty() && ro.timeline_request >= 0 &&
                     (name == "learned" || spec.controllers.size() == 1) &&
                     (spec.timeline_corunner.empty() || spec.timeline_corunner == pat);
      ro.timeline = want_tl ? &tl : nullptr;
      auto rs = spec.modes.empty() ? run_workload(dev, *pol, reqs, spec.predictor, ro)
                                   : run_workload_settings(dev, name, *settings, reqs,
                                                           spec.predictor, ro, spec.policy);
      if (want_tl && !tl.empty()) {
        out.timeline = std::move(tl);
        out.timeline_controller = name;
        out.timeline_corunner = pat;
      }
      out.summaries.push_back(summarize(name, pat, rs));
      out.results.push_back(std::move(rs));
      if (spec.progress) {
        const Summary& s = out.summaries.back();
        std::ostringstream os;
        os << "[" << out.summaries.size() << "/" << spec.corunners.size() * spec.controllers.size()
           << "] " << pat << " / " << name << ": " << s.n << " requests, " << s.energy_j
           << " J/request, SLO " << s.attainment << "%";
        spec.progress(os.str());
      }
    }
  }
  return out;
}

}  // namespace cln::dvfs
