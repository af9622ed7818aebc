// clone device probe | show | calibrate | cost: what this machine offers for DVFS and power
// measurement; a profile's contents; the fit of a profile to the paper's measurements; what
// a model's request costs on boards (the tailoring search's judgement, for any GGUF).
#include <cstdio>

#include <nlohmann/json.hpp>
#include "clone/core/error.h"
#include "clone/core/table.h"
#include "clone/device/calibrate.h"
#include "clone/device/host.h"
#include "clone/device/linux.h"
#include "clone/device/profile.h"
#include "clone/device/public_calibration.h"
#include "clone/engine/model_config.h"
#include "clone/gguf/gguf.h"
#include "clone/prune/evaluate.h"
#include "common.h"
#include "subcommand.h"

namespace cmd_device {

using namespace cln;

struct Opts {
  std::string root = "/", out, profile = "orin-nx-16gb", public_dir, report;
  std::string probe_profile;  // probe --profile: its power modes against this board
  bool write = false, no_measure = false;
  // cost
  std::string model, dense;
  std::vector<std::string> profiles{"orin-nx-16gb"};
  prune::Workload workload;
  double latency_budget = 0, energy_budget = 0, ppl = 0;
};

int probe(const Opts& o) {
  auto pr = device::probe_linux(o.root);
  std::printf("%s", pr.report().c_str());
  if (!o.probe_profile.empty()) {  // which of its power modes clone can put on this board
    const auto p = device::DeviceProfile::find(o.probe_profile);
    if (p.modes.empty()) std::printf("profile %s has no power modes\n", p.name.c_str());
    for (const auto& m : p.modes) {
      const auto why = device::power_mode_blockers(pr, p, m);
      std::printf("power mode %s of %s: %s", m.name.c_str(), p.name.c_str(),
                  why.empty() ? "can be put on this board (--modes)" : "cannot:");
      for (size_t i = 0; i < why.size(); ++i) std::printf("%s %s", i ? ";" : "", why[i].c_str());
      std::printf("\n");
    }
  }
  if (!o.out.empty()) {
    const auto facts = device::read_host_facts();
    const auto lim = o.no_measure ? device::HostLimits{} : device::measure_host_limits(facts.cores);
    auto p = device::host_profile(pr, facts, lim);
    p.save(o.out);
    const auto& u = p.compute();
    std::printf(
        "host profile written to %s: %d cores, %zu levels up to %.0f MHz, %.1f FLOP/cycle, %.1f "
        "GB/s\n",
        o.out.c_str(), u.cores, u.levels.size(), u.fmax_mhz(), u.work_per_cycle,
        p.memory.peak_bandwidth() / 1e9);
  }
  return 0;
}

int show(const Opts& o) {
  auto p = device::DeviceProfile::find(o.profile);
  std::printf("%s\n", p.to_json().dump(2).c_str());
  return 0;
}

std::string profile_path(const Opts& o, const device::DeviceProfile& p) {
  return o.profile.find('/') != std::string::npos ? o.profile
                                                  : device::profile_dir() + "/" + p.name + ".json";
}

// Fit to the public Jetson measurements: time and rail power factors on the fit models,
// error on every cell, per split and power mode.
int calibrate_public(const Opts& o) {
  auto p = device::DeviceProfile::find(o.profile);
  const auto data = device::load_jetson_public(o.public_dir);
  const auto before = device::evaluate_public(p, data);
  const auto r = device::fit_public(p, data);
  std::printf("## shipped profile\n%s\n", device::public_error_table(before).markdown().c_str());
  std::printf("## refit (%d evaluations; time loss %.4g, power loss %.4g on the fit models)\n%s\n",
              r.evaluations, r.time_loss, r.power_loss,
              device::public_error_table(r.points).markdown().c_str());
  std::printf(
      "fitted: compute_efficiency %.4f, dram_efficiency %.4f, core_bytes_per_cycle %.2f, "
      "overhead_kcycles %.3f, host_overhead_kcycles %.3f, layer_overhead_us %.3f;\n"
      "rail: static_w_per_v %.4f, dynamic_w_per_ghz_v2 %.4f, idle_activity %.4f, pj_per_byte "
      "%.3f, host_activity %.4f\n",
      r.fit.compute_efficiency, r.fit.dram_efficiency, r.fit.core_bytes_per_cycle,
      r.fit.overhead_kcycles, r.fit.host_overhead_kcycles, r.fit.layer_overhead_us,
      r.power.static_w_per_v, r.power.dynamic_w_per_ghz_v2, r.power.idle_activity,
      r.power.pj_per_byte, r.fit.host_activity);
  const auto mlc = device::mlc_check(p, o.public_dir);
  std::printf(
      "## second check, shipped profile: MLC INT4 decode, Orin Nano original vs Super (no cell "
      "of it is fitted)\n%s\n",
      device::mlc_table(mlc).markdown().c_str());
  for (const auto& s : mlc.skipped) std::printf("skipped %s: no shape in models.json\n", s.c_str());
  if (!o.report.empty()) {
    device::mlc_table(mlc).write(o.report + "-mlc.md");
    device::public_error_table(r.points).write(o.report + ".md");
    device::public_cells_table(r.points).write(o.report + ".csv");
    std::printf("wrote %s.md and %s.csv\n", o.report.c_str(), o.report.c_str());
  }
  if (o.write) {
    p.fit = r.fit;
    p.compute().power = r.power;
    const std::string path = profile_path(o, p);
    p.save(path);
    std::printf("wrote %s\n", path.c_str());
  }
  return 0;
}

int calibrate(const Opts& o) {
  if (!o.public_dir.empty()) return calibrate_public(o);
  auto p = device::DeviceProfile::find(o.profile);
  const device::Fit* shared = nullptr;
  device::Fit nx_fit;
  if (p.name.find("orin-nano") != std::string::npos) {
    nx_fit = device::DeviceProfile::find("orin-nx-16gb").fit;
    shared = &nx_fit;
  }
  auto before = device::paper_points(p);
  auto r = device::fit_to_paper(p, shared);
  Table t({"measurement", "paper", "shipped profile", "err %", "refit", "refit err %"});
  for (size_t i = 0; i < r.points.size(); ++i)
    t.add({r.points[i].what, r.points[i].measured, before[i].modelled, 100 * before[i].rel_err(),
           r.points[i].modelled, 100 * r.points[i].rel_err()});
  t.set_precision(3);
  std::printf("%s\n", t.markdown().c_str());
  std::printf("fitted (%d evaluations, loss %.3g):", r.evaluations, r.loss);
  std::printf(
      " compute_efficiency %.4f, core_bytes_per_cycle %.2f, overlap %.4f, contention %.4f\n",
      r.fit.compute_efficiency, r.fit.core_bytes_per_cycle, r.fit.overlap, r.fit.contention);
  if (o.write) {
    p.fit = r.fit;
    const std::string path = profile_path(o, p);
    p.save(path);
    std::printf("wrote %s\n", path.c_str());
  }
  return 0;
}

// A model's request (prompt + output tokens, idle board, top clock: the performance governor,
// or --dvfs) on each profile, as the tailoring search costs a candidate; with --dense, the
// budgets as shares of the dense model's cost on the same profile; with --ppl, the search's
// score there.
int cost(const Opts& o) {
  const auto shape = [](const std::string& path) {
    return ModelConfig::from_gguf(*GgufFile::open(path));
  };
  const ModelConfig m = shape(o.model);
  const bool budgets = !o.dense.empty();
  if (!budgets && (o.latency_budget > 0 || o.energy_budget > 0))
    fail(
        "device cost: --latency-budget and --energy-budget are shares of the dense model's "
        "cost: give --dense");
  const bool controlled = o.workload.dvfs != "performance";
  if (!o.workload.dvfs_policy.empty() && o.workload.dvfs != "learned")
    fail(
        "device cost: --dvfs-policy gives the learned controller's weights, but the controller "
        "is ",
        o.workload.dvfs, " (add --dvfs learned)");
  if (controlled && !(budgets && o.latency_budget > 0))
    fail("device cost: --dvfs ", o.workload.dvfs,
         " serves the request to a TPOT target at the latency budget: give --dense and "
         "--latency-budget");
  prune::Workload top = o.workload;
  top.dvfs = "performance";
  Table t({"profile", "TTFT ms", "TPOT ms", "energy J", "TPOT budget ms", "energy budget J",
           "within", "score"});
  for (const std::string& name : o.profiles) {
    const auto p = device::DeviceProfile::find(name);
    // The budgets: shares of the dense model's cost at the top clock; a controller serves
    // the request to them (TPOT at the budget, TTFT at the dense model's), as in tailoring.
    const prune::DeviceCost d =
        budgets ? prune::device_cost(shape(o.dense), p, top) : prune::DeviceCost{};
    const prune::DeviceCost c =
        prune::device_cost(m, p, prune::with_budget_targets(o.workload, d, o.latency_budget));
    prune::Budget b;
    std::string within = "", score = "";
    if (budgets) {
      b.latency_s = o.latency_budget * d.tpot_s;
      b.energy_j = o.energy_budget * d.energy_j;
      within = (b.latency_s <= 0 || c.tpot_s <= b.latency_s) &&
                       (b.energy_j <= 0 || c.energy_j <= b.energy_j)
                   ? "yes"
                   : "no";
    }
    if (o.ppl > 0) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", prune::search_score(o.ppl, c, b));
      score = buf;
    }
    using Cell = Table::Cell;
    t.add({p.name, 1e3 * c.ttft_s, 1e3 * c.tpot_s, c.energy_j,
           budgets ? Cell{1e3 * b.latency_s} : Cell{""}, budgets ? Cell{b.energy_j} : Cell{""},
           within, score});
  }
  t.set_precision(4);
  std::printf("%s\n", t.markdown().c_str());
  return 0;
}

const cli::Register reg{
    "device", "device profiles: probe this machine, show a profile, calibrate", [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      auto mode = std::make_shared<int>(0);
      app.require_subcommand(1);
      auto* p = app.add_subcommand("probe",
                                   "what frequency knobs and power rails this machine exposes; "
                                   "optionally write a host profile");
      p->add_option("--root", o->root, "sysfs root to inspect")->capture_default_str();
      p->add_option("--out", o->out,
                    "write the measured host profile here (e.g. profiles/host.json)");
      p->add_flag("--no-measure", o->no_measure, "skip the FLOP/bandwidth measurement");
      p->add_option("--profile", o->probe_profile,
                    "also say which of this profile's power modes can be put on the board "
                    "(clone run/serve --modes with --backend linux)");
      p->callback([mode] { *mode = 1; });
      auto* s = app.add_subcommand("show", "print a profile (name or path) after validation");
      s->add_option("profile", o->profile, "profile name or JSON path")->capture_default_str();
      s->callback([mode] { *mode = 2; });
      cli::add_resource_flags(*s, {Resource::Profiles});
      auto* c = app.add_subcommand(
          "calibrate",
          "fit a profile's factors to the paper's Gemma-2B measurements, or with --public to "
          "public llama.cpp measurements of the board");
      c->add_option("--profile", o->profile,
                    "orin-nx-16gb or orin-nano-8gb (paper), orin-nano-super-8gb (--public), or a "
                    "path")
          ->capture_default_str();
      c->add_option("--public", o->public_dir,
                    "folder of public measurements (data/jetson-public): fit to them instead");
      c->add_option("--report", o->report,
                    "with --public: write <report>.md (errors) and <report>.csv (every cell)");
      c->add_flag("--write", o->write, "write the refitted factors back into the profile");
      c->callback([mode] { *mode = 3; });
      cli::add_resource_flags(*c, {Resource::Profiles});
      auto* k = app.add_subcommand(
          "cost",
          "a model's request on boards as the tailoring search costs it (idle board, top clock); "
          "with --dense the budgets, with --ppl the search score");
      k->add_option("-m,--model", o->model, "model GGUF (dense or pruned)")
          ->required()
          ->check(CLI::ExistingFile);
      k->add_option("--profile", o->profiles, "device profiles (names or paths)")
          ->capture_default_str();
      k->add_option("--prompt-tokens", o->workload.prompt, "the request's prompt length")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
      k->add_option("--output-tokens", o->workload.output, "the request's output length")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
      k->add_option("--dvfs", o->workload.dvfs,
                    "DVFS controller serving the request (performance: the top clock; learned, "
                    "static, mpc, mpc-switch, oracle: to a TPOT target at --latency-budget)")
          ->capture_default_str()
          ->check(
              CLI::IsMember({"performance", "learned", "static", "mpc", "mpc-switch", "oracle"}));
      k->add_option("--dvfs-policy", o->workload.dvfs_policy,
                    "the learned controller's weights (clone dvfs train --out); default: the "
                    "shipped ones for the profile and the model shape nearest this one")
          ->check(CLI::ExistingFile);
      k->add_option("--dense", o->dense, "the dense model the budgets are shares of")
          ->check(CLI::ExistingFile);
      k->add_option("--latency-budget", o->latency_budget, "TPOT budget, share of the dense's")
          ->check(CLI::Range(0.01, 1.0));
      k->add_option("--energy-budget", o->energy_budget, "energy budget, share of the dense's")
          ->check(CLI::Range(0.01, 1.0));
      k->add_option("--ppl", o->ppl, "the model's perplexity: print the search score")
          ->check(CLI::PositiveNumber);
      k->callback([mode] { *mode = 4; });
      cli::add_resource_flags(*k, {Resource::Profiles});
      return [o, mode] {
        switch (*mode) {
          case 1:
            return probe(*o);
          case 2:
            return show(*o);
          case 3:
            return calibrate(*o);
          default:
            return cost(*o);
        }
      };
    }};

}  // namespace cmd_device
