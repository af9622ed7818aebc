// clone sim: serve a workload on a modelled device with every DVFS controller under every
// co-runner pattern; print a markdown table, write CSVs and PNG plots, and a frequency
// timeline (layers x tokens) of one request.
#include <cstdio>

#include "clone/core/error.h"
#include "clone/core/plot.h"
#include "clone/device/cost_model.h"
#include "clone/device/perturb.h"
#include "clone/dvfs/report.h"
#include "clone/dvfs/runner.h"
#include "clone/engine/model_config.h"
#include "clone/workload/replay.h"
#include "common.h"
#include "subcommand.h"

namespace cmd_sim {

using namespace cln;

struct Opts {
  std::string profile = "orin-nx-16gb", model = "gemma-2b", workload = "chat", out = "sim-out";
  std::vector<std::string> corunners{"idle", "web-search", "video", "bursty"};
  std::vector<std::string> controllers{"performance", "powersave", "schedutil", "podgov",
                                       "static",      "learned",   "oracle"};
  std::string sfu = "off", lpu = "off", policy, mode, perturb;
  std::vector<std::string> modes;
  double setting_switch_ms = 1;
  bool open_loop = false, no_plots = false;
  int experts = 0, lora_bank = 0;
  size_t requests = 100;
  uint64_t seed = 42;
  double slo_scale = 1;
  std::vector<double> noise{0};
  double length_reserve = 0;
  int64_t decode_horizon = dvfs::kDecodeHorizon;
  int64_t n_batch = 512, timeline = 0;
  std::string timeline_corunner;
};

std::vector<bool> switch_values(const std::string& v) {
  if (v == "both") return {false, true};
  return {v == "on"};
}

int run(const Opts& o) {
  auto prof = device::DeviceProfile::find(o.profile);
  ModelConfig mc = cli::model_shape(o.model);
  auto reqs = workload::load_workload(o.workload, o.requests, o.seed, o.slo_scale);
  if (o.lora_bank > 0 && o.experts <= 0)
    fail("--lora-bank needs --lora-experts (active experts per pass) > 0");
  workload::assign_expert_sets(reqs, o.lora_bank, o.seed);
  const std::vector<bool> sfus = switch_values(o.sfu), lpus = switch_values(o.lpu);
  dvfs::SimReport report(o.corunners, o.controllers, o.timeline);
  const size_t total_runs = sfus.size() * lpus.size() * o.noise.size();
  size_t run_i = 0;
  for (bool sfu : sfus)
    for (bool lpu : lpus) {
      device::CostOptions co;
      co.sfu = sfu, co.lpu = lpu, co.n_experts = o.experts, co.mode = o.mode;
      auto model = std::make_shared<const device::CostModel>(prof, mc, co);
      // The board as it really is, when --perturb says the fitted model is off.
      std::shared_ptr<const device::CostModel> board;
      if (!o.perturb.empty())
        board =
            std::make_shared<const device::CostModel>(device::perturbed(prof, o.perturb), mc, co);
      if (model->offloaded())
        std::printf(
            "note: %s does not fit in %s's memory; %.0f%% of the weights stream from storage every "
            "pass\n",
            mc.name.c_str(), prof.name.c_str(), 100 * (1 - model->resident_fraction()));
      for (double noise : o.noise) {
        ++run_i;
        dvfs::SweepSpec sp;
        sp.controllers = o.controllers;
        sp.corunners = o.corunners;
        sp.corunner_seed = o.seed;
        sp.policy.learned_path = o.policy;
        sp.policy.n_batch = o.n_batch;
        sp.predictor.noise = noise;
        sp.predictor.reserve = o.length_reserve;
        sp.run.n_batch = o.n_batch;
        sp.run.decode_horizon = o.decode_horizon;
        sp.run.closed_loop = !o.open_loop;
        sp.run.timeline_request = o.timeline;
        sp.timeline_corunner = o.timeline_corunner;
        sp.device_model = board;
        sp.modes = o.modes;
        sp.setting_switch_s = o.setting_switch_ms * 1e-3;
        sp.progress = [&](const std::string& s) {
          std::fprintf(stderr, "[sfu %s, lpu %s, noise %.2f, %zu/%zu] %s\n", sfu ? "on" : "off",
                       lpu ? "on" : "off", noise, run_i, total_runs, s.c_str());
        };
        report.add({sfu, lpu, noise}, dvfs::sweep(model, reqs, sp));
      }
    }
  std::string modes;
  for (const auto& m : o.modes) modes += (modes.empty() ? "" : ",") + m;
  if (!modes.empty()) modes = ", the mode chosen per request among " + modes;
  std::printf("## %s on %s%s%s%s%s%s, %zu requests (%s workload, seed %llu)\n\n%s\n",
              mc.name.c_str(), prof.name.c_str(), o.mode.empty() ? "" : " in mode ", o.mode.c_str(),
              modes.c_str(), o.perturb.empty() ? "" : ", board perturbed: ", o.perturb.c_str(),
              reqs.size(), o.workload.c_str(), static_cast<unsigned long long>(o.seed),
              report.summary().markdown().c_str());
  if (!report.judged().rows().empty())
    std::printf("## learned policy vs the others\n\n%s\n", report.judged().markdown().c_str());
  if (report.has_ablation())
    std::printf(
        "## accelerator ablation: totals over %zu requests (%d active LoRA experts per pass, %d "
        "expert sets; changes vs the first setting)\n\n%s\n",
        reqs.size(), o.experts, o.lora_bank, report.ablation().markdown().c_str());
  if (report.infeasible() > 0)
    std::printf(
        "infeasible: %zu of %zu request runs could not meet their SLO even at the top clock "
        "(co-runner included); they count as misses and are flagged in requests.csv\n",
        report.infeasible(), report.request_runs());
  if (report.infeasible() == report.request_runs())
    fail("SLO infeasible: no request of this workload can meet its SLO on ", prof.name,
         " even at the top clock; loosen --slo-scale");
  report.write(o.out);
  bool plotted = false;
  if (!o.no_plots) {
    if (plot::gnuplot_available()) {
      dvfs::plot_report(o.out, report);
      plotted = true;
    } else {
      std::printf("gnuplot not found: CSVs written, no PNG plots\n");
    }
  }
  std::printf("wrote %s/{summary,judged,requests,timeline}.csv%s\n", o.out.c_str(),
              plotted ? " and PNG plots" : "");
  return 0;
}

const cli::Register reg{
    "sim", "simulate serving a workload on a device profile with every DVFS controller",
    [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      app.add_option("--profile", o->profile, "device profile name or JSON path")
          ->capture_default_str();
      auto* mode =
          app.add_option("--mode", o->mode,
                         "run in one of the profile's power modes (nvpmodel preset: clock caps, "
                         "cores, memory clock), e.g. 15W; default none (the profile's top clocks)");
      auto* perturb =
          app.add_option("--perturb", o->perturb,
                         "the simulated board differs from the profile the controllers plan with: "
                         "factor=scale,... (e.g. core_bytes_per_cycle=0.8,board_idle_w=1.5)");
      app.add_option("--modes", o->modes,
                     "every controller chooses, per request, the power mode (GPU cap and "
                     "cores, memory clock, CPU clock) among these (comma-separated, or all), "
                     "and its GPU clock per layer inside it (dvfs/settings.h)")
          ->delimiter(',')
          ->excludes(mode)
          ->excludes(perturb);
      app.add_option("--setting-switch-ms", o->setting_switch_ms,
                     "with --modes: the stall when a request changes mode (an estimate)")
          ->check(CLI::NonNegativeNumber)
          ->capture_default_str();
      app.add_option("--model", o->model,
                     "model shapes: preset (gemma-2b, llama2-7b, tinyllama-1.1b) or a .gguf")
          ->capture_default_str();
      app.add_option("--workload", o->workload,
                     "chat | code (generated) | azure-conv | azure-code (replayed) | CSV path")
          ->capture_default_str();
      app.add_option("-n,--requests", o->requests, "requests to serve")
          ->capture_default_str()
          ->check(CLI::Range(1, 1000000));
      app.add_option("--seed", o->seed, "seed for the workload and co-runner traces")
          ->capture_default_str();
      app.add_option("--corunner", o->corunners,
                     "co-runner patterns (idle, web-search, video, bursty, const:<s>, CSV)")
          ->delimiter(',')
          ->capture_default_str();
      app.add_option("--controllers", o->controllers, "controllers to compare")
          ->delimiter(',')
          ->capture_default_str();
      app.add_option("--sfu", o->sfu,
                     "accelerator SFU (fast near-continuous DVFS): off | on | both")
          ->check(CLI::IsMember({"off", "on", "both"}))
          ->capture_default_str();
      app.add_option("--lpu", o->lpu,
                     "accelerator LPU (LoRA experts resident on chip): off | on | both")
          ->check(CLI::IsMember({"off", "on", "both"}))
          ->capture_default_str();
      app.add_option("--lora-experts", o->experts, "active LoRA experts per pass (rank 8)")
          ->capture_default_str()
          ->check(CLI::Range(0, 64));
      app.add_option("--lora-bank", o->lora_bank,
                     "expert sets requests draw from (seeded); a new set is swapped in "
                     "between requests (0: one fixed set)")
          ->capture_default_str()
          ->check(CLI::Range(0, 1 << 20));
      app.add_option("--slo-scale", o->slo_scale, "multiply every SLO target (>1 looser)")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
      app.add_option("--length-noise", o->noise,
                     "output-length predictor noise sigma(s) (log-normal), e.g. 0,0.25,0.5")
          ->delimiter(',')
          ->capture_default_str();
      app.add_option("--length-reserve", o->length_reserve,
                     "plan for the predicted length times exp(this x the noise sigma): a "
                     "reserve for the predictor's error, in its standard deviations")
          ->capture_default_str()
          ->check(CLI::Range(-5.0, 5.0));
      app.add_option("--decode-horizon", o->decode_horizon,
                     "the controller plans a decode over at most this many tokens ahead (0: the "
                     "whole predicted rest)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      app.add_option("--policy", o->policy,
                     "learned policy weights (default: the shipped ones for the profile trained "
                     "for the model shape nearest this one, <models>/dvfs[/base]/<profile>.json)");
      app.add_option("--n-batch", o->n_batch, "prefill pass length (the engine's batch)")
          ->capture_default_str()
          ->check(CLI::Range(1, 1 << 20));
      app.add_option("--timeline-request", o->timeline,
                     "request id whose clock timeline is plotted (-1: none)")
          ->capture_default_str();
      app.add_option("--timeline-corunner", o->timeline_corunner,
                     "co-runner pattern of the timeline's run (default: the first)");
      app.add_flag("--open-loop", o->open_loop,
                   "requests arrive at their trace times (queueing) instead of after a think time");
      app.add_flag("--no-plots", o->no_plots, "CSV only");
      app.add_option("--out", o->out, "output folder")->capture_default_str();
      cli::add_resource_flags(app, {Resource::Profiles, Resource::Models, Resource::Shared});
      return [o] { return run(*o); };
    }};

}  // namespace cmd_sim
