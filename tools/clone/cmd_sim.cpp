// clone sim: serve a workload on a modelled device with every DVFS controller under every
// co-runner pattern; print a markdown table, write CSVs and PNG plots, and a frequency
// timeline (layers x tokens) of one request.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "clone/core/error.h"
#include "clone/core/table.h"
#include "clone/device/cost_model.h"
#include "clone/dvfs/runner.h"
#include "clone/engine/model_config.h"
#include "clone/gguf/gguf.h"
#include "clone/workload/workload.h"
#include "common.h"
#include "subcommand.h"

namespace {

using namespace cln;

struct Opts {
  std::string profile = "orin-nx-16gb", model = "gemma-2b", workload = "chat", out = "sim-out";
  std::vector<std::string> corunners{"idle", "web-search", "video", "bursty"};
  std::vector<std::string> controllers{"performance", "powersave", "schedutil",
                                       "static",      "learned",   "oracle"};
  std::string sfu = "off", lpu = "off", policy;
  bool open_loop = false, no_plots = false;
  int experts = 0, lora_bank = 0;
  size_t requests = 100;
  uint64_t seed = 42;
  double slo_scale = 1;
  std::vector<double> noise{0};
  int64_t n_batch = 512, timeline = 0;
  std::string timeline_corunner;
};

ModelConfig load_model(const std::string& m) {
  if (m.ends_with(".gguf")) return ModelConfig::from_gguf(*GgufFile::open(m));
  return device::model_preset(m);
}

std::vector<workload::Request> load_workload(const Opts& o) {
  std::vector<workload::Request> reqs;
  if (o.workload == "chat" || o.workload == "code") {
    workload::GeneratorSpec g;
    g.kind = o.workload, g.n = o.requests, g.seed = o.seed, g.slo_scale = o.slo_scale;
    return workload::generate(g);
  }
  bool azure = o.workload.rfind("azure-", 0) == 0;
  if (azure)
    reqs = workload::load_azure(workload::azure_trace_path(o.workload.substr(6)), o.requests);
  else
    reqs = workload::load_csv(o.workload);
  // Replayed lengths; SLO classes as the generator would assign them, think times seeded.
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> think(0.1);
  std::uniform_real_distribution<double> u(0, 1);
  for (auto& r : reqs) {
    r.think_s = think(rng);
    r.output = std::min<int64_t>(r.output, 2048);
    r.prompt = std::min<int64_t>(r.prompt, 4096 - r.output);
    if (r.slo.empty()) {
      const char* cls = o.workload == "azure-code" ? "code-completion"
                                                   : (u(rng) < 0.7 ? "chatbot" : "smart-reply");
      workload::apply_slo(r, workload::slo_class(cls), o.slo_scale);
    }
  }
  if (reqs.size() > o.requests) reqs.resize(o.requests);
  return reqs;
}

// Each request is served with one of lora_bank expert sets (seeded, uniform): consecutive
// requests with different sets make the device swap experts between them.
void assign_expert_sets(std::vector<workload::Request>& reqs, int lora_bank, uint64_t seed) {
  if (lora_bank <= 0) return;
  std::mt19937_64 rng(seed ^ 0x10a5e7ull);
  std::uniform_int_distribution<int32_t> pick(0, lora_bank - 1);
  for (auto& r : reqs) r.expert_set = pick(rng);
}

std::vector<bool> switch_values(const std::string& v) {
  if (v == "both") return {false, true};
  return {v == "on"};
}

void gnuplot(const std::string& script) {
  FILE* p = popen("gnuplot 2>&1", "w");
  if (!p) return;
  std::fputs(script.c_str(), p);
  pclose(p);
}

void plots(const std::string& dir, const std::vector<std::string>& corunners,
           const std::vector<std::string>& ctl, bool has_timeline, const std::string& tl_title) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    std::printf("gnuplot not found: CSVs written, no PNG plots\n");
    return;
  }
  // Clustered bars: x = co-runner pattern, one bar per controller; scale converts the
  // CSV's unit (seconds) to the plotted one.
  struct M {
    const char* col;
    const char* ylabel;
    double scale;
  };
  auto bars = [&](std::ostringstream& g, const M& m, const char* title) {
    g << "set title '" << title << "'\nset ylabel '" << m.ylabel << "'\nplot ";
    for (size_t c = 0; c < ctl.size(); ++c)
      g << (c ? ", " : "") << "'" << dir << "/pivot_" << m.col << ".csv' every ::1 using ($"
        << c + 2 << "*" << m.scale << ")" << (c == 0 ? ":xtic(1)" : "") << " title '" << ctl[c]
        << "'";
    g << "\n";
  };
  const std::string style =
      "set style data histograms\nset style histogram cluster gap 1\n"
      "set style fill solid 0.85 border -1\nset datafile separator ','\n"
      "set key outside right top\nset yrange [0:*]\nset grid ytics\n"
      "set xlabel 'co-runner pattern'\n";
  struct One {
    M m;
    const char* file;
    const char* title;
  };
  const One singles[] = {
      {{"energy_j", "energy per request (J)", 1}, "energy.png", "Energy per request"},
      {{"slo_attainment_pct", "requests meeting TTFT and TPOT (%)", 1},
       "slo.png",
       "SLO attainment"},
      {{"switches_per_token", "switches per output token", 1},
       "switches.png",
       "DVFS frequency switches"}};
  for (const auto& x : singles) {
    std::ostringstream g;
    g << "set terminal pngcairo size 900,460 font 'sans,11'\nset output '" << dir << "/" << x.file
      << "'\n"
      << style;
    bars(g, x.m, x.title);
    gnuplot(g.str());
  }
  // Latency percentiles: P50 and P99 side by side.
  struct Pair {
    M p50, p99;
    const char* file;
    const char* name;
  };
  const Pair pairs[] = {
      {{"ttft_p50_s", "TTFT (s)", 1}, {"ttft_p99_s", "TTFT (s)", 1}, "ttft.png", "TTFT"},
      {{"tpot_p50_s", "TPOT (ms)", 1e3}, {"tpot_p99_s", "TPOT (ms)", 1e3}, "tpot.png", "TPOT"}};
  for (const auto& x : pairs) {
    std::ostringstream g;
    g << "set terminal pngcairo size 1300,460 font 'sans,11'\nset output '" << dir << "/" << x.file
      << "'\n"
      << style << "set multiplot layout 1,2\nunset key\n";
    bars(g, x.p50, (std::string(x.name) + " P50").c_str());
    g << "set key outside right top\n";
    bars(g, x.p99, (std::string(x.name) + " P99").c_str());
    g << "unset multiplot\n";
    gnuplot(g.str());
  }
  (void)corunners;
  if (has_timeline) {
    // Top: the clock at every layer boundary (x: pass, y: layer); bottom: the co-runner's
    // intensity during each pass, on the same x axis.
    std::ostringstream g;
    const std::string csv = dir + "/timeline.csv";
    g << "set terminal pngcairo size 1000,620 font 'sans,11'\nset output '" << dir
      << "/timeline.png'\nset datafile separator ','\n"
      << "stats '" << csv << "' every ::1 using 1 nooutput\n"
      << "set xrange [-0.5:STATS_max + 0.5]\nset multiplot\n"
      << "set lmargin at screen 0.08\nset rmargin at screen 0.86\n"
      << "set tmargin at screen 0.92\nset bmargin at screen 0.40\n"
      << "set title 'GPU clock at every layer boundary: " << tl_title << "'\n"
      << "set ylabel 'layer (top row: output head)'\nset cblabel 'GPU clock (MHz)'\n"
      << "set format x ''\nset view map\nset palette rgbformulae 33,13,10\n"
      << "set autoscale yfix\n"
      << "plot '" << csv << "' every ::1 using 1:3:5 with image notitle\n"
      << "unset title\nset tmargin at screen 0.36\nset bmargin at screen 0.10\n"
      << "set format x '%g'\nset xlabel 'pass (prefill passes first, then one per output token)'\n"
      << "set ylabel 'co-runner intensity'\nset yrange [0:1.05]\nset ytics 0,0.5,1\nset grid "
         "ytics\n"
      << "plot '" << csv << "' every ::1 using 1:6 with lines lw 2 lc rgb '#444444' notitle\n"
      << "unset multiplot\n";
    gnuplot(g.str());
  }
}

int run(const Opts& o) {
  auto prof = device::DeviceProfile::find(o.profile);
  ModelConfig mc = load_model(o.model);
  auto reqs = load_workload(o);
  if (o.lora_bank > 0 && o.experts <= 0)
    fail("--lora-bank needs --lora-experts (active experts per pass) > 0");
  assign_expert_sets(reqs, o.lora_bank, o.seed);
  std::filesystem::create_directories(o.out);
  const std::vector<bool> sfus = switch_values(o.sfu), lpus = switch_values(o.lpu);
  Table table({"sfu", "lpu", "noise", "corunner", "controller", "requests", "infeasible",
               "energy_j", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s",
               "slo_attainment_pct", "attainment_feasible_pct", "switches_per_token"});
  Table per_req({"sfu",     "lpu",      "noise",         "corunner", "controller",
                 "id",      "slo",      "prompt",        "output",   "predicted",
                 "queue_s", "ttft_s",   "ttft_target_s", "tpot_s",   "tpot_target_s",
                 "e2e_s",   "energy_j", "switches",      "met",      "feasible"});
  Table judged({"sfu", "lpu", "noise", "corunner", "learned_att_pct", "performance_att_pct",
                "att_gap_points", "learned_vs_oracle_energy_pct", "saving_vs_performance_pct",
                "saving_vs_powersave_pct", "saving_vs_schedutil_pct", "saving_vs_static_pct"});
  std::map<std::string, std::map<std::string, double>> pivot_src[7];
  const char* pcols[7] = {"energy_j",   "slo_attainment_pct", "ttft_p99_s",        "tpot_p99_s",
                          "ttft_p50_s", "tpot_p50_s",         "switches_per_token"};
  std::vector<dvfs::TimelinePoint> timeline;
  std::string tl_title;
  // The paper's CLONE vs CLONE-HW ablation: totals over the workload per accelerator setting.
  Table ablation({"corunner", "controller", "sfu", "lpu", "energy_total_j", "latency_total_s",
                  "ttft_mean_s", "tpot_mean_s", "slo_attainment_pct", "switches",
                  "energy_vs_baseline_pct", "latency_vs_baseline_pct"});
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> baseline;
  size_t total_runs = sfus.size() * lpus.size() * o.noise.size(), run_i = 0;
  std::size_t infeasible_all = 0, n_all = 0;
  for (bool sfu : sfus)
    for (bool lpu : lpus) {
      device::CostOptions co;
      co.sfu = sfu, co.lpu = lpu, co.n_experts = o.experts;
      auto model = std::make_shared<const device::CostModel>(prof, mc, co);
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
        sp.run.n_batch = o.n_batch;
        sp.run.closed_loop = !o.open_loop;
        sp.run.timeline_request = o.timeline;
        sp.timeline_corunner = o.timeline_corunner;
        sp.progress = [&](const std::string& s) {
          std::fprintf(stderr, "[sfu %s, lpu %s, noise %.2f, %zu/%zu] %s\n", sfu ? "on" : "off",
                       lpu ? "on" : "off", noise, run_i, total_runs, s.c_str());
        };
        auto res = dvfs::sweep(model, reqs, sp);
        std::string sfu_s = sfu ? "on" : "off", lpu_s = lpu ? "on" : "off";
        std::map<std::pair<std::string, std::string>, dvfs::Summary> by;
        for (size_t i = 0; i < res.summaries.size(); ++i) {
          const auto& s = res.summaries[i];
          by[{s.corunner, s.controller}] = s;
          table.add({sfu_s, lpu_s, noise, s.corunner, s.controller, static_cast<long long>(s.n),
                     static_cast<long long>(s.infeasible), s.energy_j, s.ttft_p50, s.ttft_p99,
                     s.tpot_p50, s.tpot_p99, s.attainment, s.attainment_feasible,
                     s.switches_per_token});
          if (run_i == 1) {
            double v[7] = {s.energy_j, s.attainment, s.ttft_p99,          s.tpot_p99,
                           s.ttft_p50, s.tpot_p50,   s.switches_per_token};
            for (int k = 0; k < 7; ++k) pivot_src[k][s.corunner][s.controller] = v[k];
          }
          infeasible_all += s.infeasible, n_all += s.n;
          if (noise == o.noise.front()) {
            double e = 0, lat = 0, ttft = 0, tpot = 0;
            long long sw = 0;
            for (const auto& r : res.results[i])
              e += r.energy_j, lat += r.e2e_s, ttft += r.ttft_s, tpot += r.tpot_s, sw += r.switches;
            const double n = static_cast<double>(std::max<size_t>(1, res.results[i].size()));
            auto key = std::make_pair(s.corunner, s.controller);
            if (!baseline.count(key)) baseline[key] = {e, lat};  // the first setting: both off
            const auto& b = baseline[key];
            ablation.add({s.corunner, s.controller, sfu_s, lpu_s, e, lat, ttft / n, tpot / n,
                          s.attainment, sw, 100 * (e / b.first - 1), 100 * (lat / b.second - 1)});
          }
          for (const auto& r : res.results[i])
            per_req.add({sfu_s,
                         lpu_s,
                         noise,
                         s.corunner,
                         s.controller,
                         static_cast<long long>(r.id),
                         r.slo,
                         static_cast<long long>(r.prompt),
                         static_cast<long long>(r.output),
                         static_cast<long long>(r.predicted),
                         r.queue_s,
                         r.ttft_s,
                         r.ttft_target_s,
                         r.tpot_s,
                         r.tpot_target_s,
                         r.e2e_s,
                         r.energy_j,
                         static_cast<long long>(r.switches),
                         static_cast<long long>(r.met),
                         static_cast<long long>(r.feasible)});
        }
        for (const auto& c : o.corunners) {
          auto has = [&](const char* n) { return by.count({c, n}) > 0; };
          if (!has("learned")) continue;
          const auto& l = by[{c, "learned"}];
          auto saving = [&](const char* n) {
            return has(n) ? 100 * (1 - l.energy_j / by[{c, n}].energy_j) : NAN;
          };
          double perf_att = has("performance") ? by[{c, "performance"}].attainment : NAN;
          judged.add({sfu_s, lpu_s, noise, c, l.attainment, perf_att, l.attainment - perf_att,
                      has("oracle") ? 100 * (l.energy_j / by[{c, "oracle"}].energy_j - 1) : NAN,
                      saving("performance"), saving("powersave"), saving("schedutil"),
                      saving("static")});
        }
        if (timeline.empty() && !res.timeline.empty()) {
          timeline = res.timeline;
          tl_title = "request " + std::to_string(o.timeline) + ", " + res.timeline_controller +
                     ", " + res.timeline_corunner + ", SFU " + sfu_s + ", LPU " + lpu_s;
        }
      }
    }
  table.set_precision(3);
  judged.set_precision(2);
  std::printf("## %s on %s, %zu requests (%s workload, seed %llu)\n\n%s\n", mc.name.c_str(),
              prof.name.c_str(), reqs.size(), o.workload.c_str(),
              static_cast<unsigned long long>(o.seed), table.markdown().c_str());
  if (!judged.rows().empty())
    std::printf("## learned policy vs the others\n\n%s\n", judged.markdown().c_str());
  if (sfus.size() * lpus.size() > 1) {
    ablation.set_precision(2);
    std::printf(
        "## accelerator ablation: totals over %zu requests (%d active LoRA experts per pass, %d "
        "expert sets; changes vs the first setting)\n\n%s\n",
        reqs.size(), o.experts, o.lora_bank, ablation.markdown().c_str());
    ablation.write(o.out + "/ablation.csv");
  }
  if (infeasible_all > 0)
    std::printf(
        "infeasible: %zu of %zu request runs could not meet their SLO even at the top clock "
        "(co-runner included); they count as misses and are flagged in requests.csv\n",
        infeasible_all, n_all);
  if (infeasible_all == n_all)
    fail("SLO infeasible: no request of this workload can meet its SLO on ", prof.name,
         " even at the top clock; loosen --slo-scale");
  table.write(o.out + "/summary.csv");
  judged.write(o.out + "/judged.csv");
  per_req.write(o.out + "/requests.csv");
  for (int k = 0; k < 7; ++k) {
    std::ofstream pv(o.out + "/pivot_" + pcols[k] + ".csv");
    pv << "corunner";
    for (const auto& c : o.controllers) pv << "," << c;
    pv << "\n";
    for (const auto& cr : o.corunners) {
      pv << cr;
      for (const auto& c : o.controllers) pv << "," << pivot_src[k][cr][c];
      pv << "\n";
    }
  }
  if (!timeline.empty()) {
    std::ofstream tl(o.out + "/timeline.csv");
    tl << "pass,phase,layer,t_s,mhz,corunner\n";
    for (const auto& p : timeline)
      tl << p.pass << "," << (p.phase == Phase::Prefill ? "prefill" : "decode") << "," << p.layer
         << "," << p.t_s << "," << p.mhz << "," << p.corunner << "\n";
  }
  if (!o.no_plots) plots(o.out, o.corunners, o.controllers, !timeline.empty(), tl_title);
  std::printf("wrote %s/{summary,judged,requests,timeline}.csv%s\n", o.out.c_str(),
              o.no_plots ? "" : " and PNG plots");
  return 0;
}

const cli::Register reg{
    "sim", "simulate serving a workload on a device profile with every DVFS controller",
    [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      app.add_option("--profile", o->profile, "device profile name or JSON path")
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
      app.add_option("--policy", o->policy,
                     "learned policy weights (default <models>/dvfs/<profile>.json)");
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

}  // namespace
