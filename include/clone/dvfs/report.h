// What `clone sim` makes of its sweeps: the summary table (one row per setting, co-runner
// and controller), the learned policy judged against the others, the per-request rows, the
// accelerator ablation (CLONE vs CLONE-HW: totals per SFU/LPU setting against the first),
// the co-runner x controller pivots the bar charts read, the clock timeline of one request;
// written as CSVs and drawn as PNGs (through core/plot.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "clone/core/table.h"
#include "clone/dvfs/runner.h"

namespace cln::dvfs {

// The setting one sweep ran under: the accelerators and the output-length predictor noise.
struct Setting {
  bool sfu = false, lpu = false;
  double noise = 0;
};

// The learned controller against the others under one co-runner pattern. Energies compare
// the mean energy per request: saving_vs_X = 100 * (1 - E_learned / E_X) (positive: learned
// spends less), learned_vs_oracle = 100 * (E_learned / E_oracle - 1) (positive: learned
// spends more); NaN where X did not run.
struct Judgement {
  std::string corunner;
  double learned_att = 0, performance_att = 0, att_gap = 0;  // SLO attainment, % and points
  double learned_vs_oracle_pct = 0;
  // On feasible requests only (mean energy per feasible request; attainment among them):
  // below 0 here would be a bug of the oracle, not a win of the policy.
  double learned_vs_oracle_feasible_pct = 0, learned_att_feasible = 0;
  double saving_vs_performance_pct = 0, saving_vs_powersave_pct = 0, saving_vs_schedutil_pct = 0,
         saving_vs_static_pct = 0, saving_vs_podgov_pct = 0;
};
// One judgement per pattern of `corunners` (in that order) that has a learned summary.
std::vector<Judgement> judge(const std::vector<Summary>& summaries,
                             const std::vector<std::string>& corunners);

class SimReport {
 public:
  // The co-runner patterns and controllers of the sweeps (their order is the tables'), and
  // the request id whose timeline is recorded (for its title).
  SimReport(std::vector<std::string> corunners, std::vector<std::string> controllers,
            int64_t timeline_request = -1);

  // One sweep, in the order they ran. The first setting gives the pivots and is the
  // ablation's baseline; the ablation takes the settings with the first noise value.
  void add(const Setting& s, const SweepResult& r);

  const Table& summary() const { return summary_; }
  const Table& judged() const { return judged_; }
  const Table& requests() const { return requests_; }
  const Table& ablation() const { return ablation_; }
  bool has_ablation() const { return accel_seen_.size() > 1; }  // more than one SFU/LPU setting

  // Pivot of the first setting: metric (one of pivot_metrics()) per co-runner x controller;
  // 0 where that pair did not run.
  static const std::vector<std::string>& pivot_metrics();
  double pivot(const std::string& metric, const std::string& corunner,
               const std::string& controller) const;

  const std::vector<TimelinePoint>& timeline() const { return timeline_; }
  const std::string& timeline_title() const { return timeline_title_; }
  const std::vector<std::string>& corunners() const { return corunners_; }
  const std::vector<std::string>& controllers() const { return controllers_; }

  size_t infeasible() const { return infeasible_; }  // request runs no clock could serve in time
  size_t request_runs() const { return runs_; }

  // Writes summary.csv, judged.csv, requests.csv, pivot_<metric>.csv, timeline.csv (when a
  // timeline was recorded) and ablation.csv (when has_ablation()) into dir (created).
  void write(const std::string& dir) const;

 private:
  std::vector<std::string> corunners_, controllers_;
  int64_t timeline_request_;
  Table summary_, judged_, requests_, ablation_;
  std::map<std::string, std::map<std::string, std::map<std::string, double>>> pivots_;
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> baseline_;
  std::vector<std::pair<bool, bool>> accel_seen_;
  size_t settings_ = 0, infeasible_ = 0, runs_ = 0;
  double first_noise_ = 0;
  std::vector<TimelinePoint> timeline_;
  std::string timeline_title_;
};

// Draws, from the CSVs SimReport::write put in dir: energy.png, slo.png, switches.png
// (clustered bars: x = co-runner, one bar per controller), ttft.png and tpot.png (P50 and
// P99 side by side) and, with a timeline, timeline.png (the clock at every layer boundary
// over the passes, the co-runner's intensity below). Throws cln::Error without gnuplot.
void plot_report(const std::string& dir, const SimReport& r);

}  // namespace cln::dvfs
