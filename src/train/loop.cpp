#include "clone/train/loop.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "clone/core/duration.h"
#include "clone/core/error.h"
#include "clone/core/plot.h"
#include "clone/train/checkpoint.h"
#include "clone/train/trainer.h"

namespace cln::train {
namespace fs = std::filesystem;

void plot_loss(const std::string& dir) {
  plot::LinePlot p;
  p.figure = {(fs::path(dir) / "loss.png").string(), 900, 500};
  p.title = "training loss";
  p.xlabel = "step";
  p.ylabel = "loss (nats/token)";
  p.series = {{(fs::path(dir) / "loss.csv").string(), 1, 3, "train", "lines lw 1"},
              {(fs::path(dir) / "valid.csv").string(), 1, 2, "valid", "linespoints lw 2"}};
  try {
    plot::line_plot(p);
  } catch (const Error& e) {  // a missing plotter must not stop a training run
    std::fprintf(stderr, "train: no loss plot (%s); the curve is in %s/loss.csv\n", e.what(),
                 dir.c_str());
  }
}

LoopOptions RunOptions::loop(const std::string& dir, const std::string& label,
                             const std::string& meta_json) const {
  LoopOptions lo;
  lo.dir = dir;
  lo.label = label;
  lo.sched = sched;
  lo.n_seq = batch;
  lo.seq_len = seq_len;
  lo.log_every = log_every;
  lo.eval_every = eval_every;
  lo.ckpt_every = ckpt_every;
  lo.stop_after = stop_after;
  lo.resume = resume;
  lo.verbose = verbose;
  lo.meta_json = meta_json;
  return lo;
}

TrainReport run_loop(const LlamaModel& model, AdamW& opt, kernels::ThreadPool& pool,
                     const LoopOptions& o, const LoopCallbacks& cb) {
  if (!cb.batch) fail(o.label, ": no batch source");
  fs::create_directories(o.dir);
  const std::string ckpt = (fs::path(o.dir) / "checkpoint.bin").string();
  const std::string loss_csv = (fs::path(o.dir) / "loss.csv").string();
  const std::string valid_csv = (fs::path(o.dir) / "valid.csv").string();
  int64_t start = 0;
  if (o.resume && fs::exists(ckpt)) {
    start = resume_run(ckpt, opt, o.meta_json, o.resume_keys);
    truncate_csv(loss_csv, start);
    truncate_csv(valid_csv, start);
  } else {
    std::ofstream(loss_csv, std::ios::trunc) << "step,lr,loss,grad_norm,tokens_per_s\n";
    if (cb.validate) std::ofstream(valid_csv, std::ios::trunc) << "step,valid_loss\n";
  }
  std::ofstream csv(loss_csv, std::ios::app);
  std::ofstream log((fs::path(o.dir) / "train.log").string(),
                    start > 0 ? std::ios::app : std::ios::trunc);
  const auto say = [&](const char* line) {
    if (!o.verbose) return;
    std::fputs(line, stderr);
    log << line;
    log.flush();
  };

  if (start > 0) {
    // In train.log too, so the step log shows every interruption and any new step count.
    char b[512];
    std::snprintf(b, sizeof b, "%s: resumed from %s at step %lld of %lld (lr %.2e)\n",
                  o.label.c_str(), ckpt.c_str(), static_cast<long long>(start),
                  static_cast<long long>(o.sched.steps), o.sched.at(start));
    say(b);
  }

  TrainReport rep;
  rep.first_step = start;
  int64_t last_ckpt = start;
  const double tokens_per_step = static_cast<double>(o.n_seq * o.seq_len);
  double seconds = 0;
  std::vector<int32_t> tokens, targets;
  int64_t step = start;
  for (; step < o.sched.steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    cb.batch(step, &tokens, &targets);
    Graph g(&pool);
    const TensorP logits = model.forward(g, tokens, o.n_seq, o.seq_len);
    const TensorP loss =
        cb.loss ? cb.loss(g, logits, tokens, targets) : op::cross_entropy(g, logits, targets);
    const double lv = loss->data()[0];
    if (!std::isfinite(lv))
      fail(o.label, " stopped: the loss is ", lv, " at step ", step, "; the checkpoint of step ",
           last_ckpt, " in ", ckpt, " is intact (lower --lr or check the data)");
    g.backward(loss);
    const double lr = o.sched.at(step);
    const double gnorm = opt.step(lr);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    seconds += dt;
    rep.losses.push_back(lv);
    char row[160];
    std::snprintf(row, sizeof row, "%lld,%.9g,%.9g,%.9g,%.1f\n", static_cast<long long>(step), lr,
                  lv, gnorm, tokens_per_step / dt);
    csv << row;
    csv.flush();
    const int64_t done = step + 1 - start;
    if ((step + 1) % o.log_every == 0 || step == start) {
      const double eta =
          static_cast<double>(o.sched.steps - step - 1) * seconds / static_cast<double>(done);
      char b[256];
      std::snprintf(b, sizeof b,
                    "%s step %6lld/%lld | loss %.4f | lr %.2e | gnorm %.3f | %.0f tok/s | "
                    "elapsed %s | ETA %s\n",
                    o.label.c_str(), static_cast<long long>(step + 1),
                    static_cast<long long>(o.sched.steps), lv, lr, gnorm,
                    tokens_per_step * static_cast<double>(done) / seconds, hms(seconds).c_str(),
                    hms(eta).c_str());
      say(b);
    }
    const bool last = step + 1 == o.sched.steps;
    if (cb.validate && ((o.eval_every > 0 && (step + 1) % o.eval_every == 0) || last)) {
      const auto [mean, parts] = cb.validate();
      char vrow[64];
      std::snprintf(vrow, sizeof vrow, "%lld,%.9g\n", static_cast<long long>(step), mean);
      std::ofstream(valid_csv, std::ios::app) << vrow;
      char b[512];
      std::snprintf(b, sizeof b, "valid @%lld: mean %.4f |%s\n", static_cast<long long>(step + 1),
                    mean, parts.c_str());
      say(b);
    }
    const bool stopping = o.stop_after >= 0 && step + 1 >= o.stop_after;
    if ((o.ckpt_every > 0 && (step + 1) % o.ckpt_every == 0) || last || stopping) {
      save_checkpoint(ckpt, o.meta_json, step + 1, opt);
      last_ckpt = step + 1;
      plot_loss(o.dir);
    }
    if (stopping) {
      ++step;
      break;
    }
  }
  rep.last_step = step;
  rep.done = step >= o.sched.steps;
  rep.tokens_per_s =
      seconds > 0 ? tokens_per_step * static_cast<double>(step - start) / seconds : 0;
  return rep;
}

}  // namespace cln::train
