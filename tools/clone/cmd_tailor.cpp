// clone tailor: CLONE's offline customisation of a model for one device and workload
// (prune/tailor.h): the generative search over per-layer pruning ratios, seeded with every
// baseline, judged on validation perplexity and the device model's latency and energy; the
// best is cut and recovered (distilled from the dense model) into the model to ship.
// Under `mpirun -np N` (a build with MPI) the candidate evaluations are spread over the ranks
// with the same result.
#include <cstdio>
#include <memory>

#include "clone/core/error.h"
#include "clone/prune/ranks.h"
#include "clone/prune/tailor.h"
#include "subcommand.h"

namespace cmd_tailor {

struct Opts {
  cln::prune::TailorOptions t;
  std::string units = "taylor", workload = "chat";
  bool puzzle_only = false;
};

const cln::cli::Register reg{
    "tailor",
    "Tailor a model to a device: per-layer pruning ratios by the generative search within a "
    "latency and an energy budget, the best cut (<out>/pruned.gguf) and recovered by "
    "distillation from the dense model; writes <out>/model.gguf and a report",
    [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      app.add_option("-m,--model", o->t.model, "dense model GGUF")
          ->required()
          ->check(CLI::ExistingFile);
      app.add_option("--profile", o->t.profile, "device profile (name or JSON)")
          ->capture_default_str();
      app.add_option("--workload", o->workload, "chat (128 in, 242 out) or custom")
          ->capture_default_str()
          ->check(CLI::IsMember({"chat", "custom"}));
      app.add_option("--prompt-tokens", o->t.workload.prompt, "the request's prompt length")
          ->capture_default_str();
      app.add_option("--output-tokens", o->t.workload.output, "the request's output length")
          ->capture_default_str();
      app.add_option("--latency-budget", o->t.latency_budget,
                     "TPOT budget as a share of the dense model's on the profile")
          ->capture_default_str()
          ->check(CLI::Range(0.01, 1.0));
      app.add_option("--energy-budget", o->t.energy_budget,
                     "request energy budget as a share of the dense model's")
          ->capture_default_str()
          ->check(CLI::Range(0.01, 1.0));
      app.add_option(
             "--dvfs", o->t.workload.dvfs,
             "DVFS controller serving each candidate's request (performance: the top "
             "clock; learned, static, mpc, mpc-switch, oracle: to a TPOT target at the budget)")
          ->capture_default_str()
          ->check(
              CLI::IsMember({"performance", "learned", "static", "mpc", "mpc-switch", "oracle"}));
      app.add_option("--dvfs-policy", o->t.workload.dvfs_policy,
                     "the learned controller's weights (clone dvfs train --out); default: the "
                     "shipped ones for the profile and the model shape nearest this one")
          ->check(CLI::ExistingFile);
      app.add_option("--units", o->units,
                     "importance that picks the units: taylor, wanda, magnitude")
          ->capture_default_str()
          ->check(CLI::IsMember({"taylor", "wanda", "magnitude"}));
      app.add_option("--data", o->t.data_dir, "corpora (clone data build)")->capture_default_str();
      app.add_option("--out", o->t.out_dir, "report folder (resumes from its candidates.jsonl)")
          ->capture_default_str();
      app.add_option("--rounds", o->t.rounds, "search rounds")->capture_default_str();
      app.add_option("--per-round", o->t.per_round, "proposals per round")->capture_default_str();
      app.add_option("--random-samples", o->t.random_samples,
                     "random ratio vectors among the samples")
          ->capture_default_str();
      auto* no_puzzle = app.add_flag("!--no-puzzle", o->t.puzzle,
                                     "leave the Puzzle-style optimiser out of the samples");
      app.add_flag("--puzzle-only", o->puzzle_only,
                   "the Puzzle baseline alone: its variant library and exact optimiser, no "
                   "other samples and no search rounds")
          ->excludes(no_puzzle);
      app.add_option("--val-windows", o->t.val.windows, "validation windows per domain")
          ->capture_default_str();
      app.add_option("--val-len", o->t.val.seq_len, "validation window length")
          ->capture_default_str();
      app.add_option("--calib-seqs", o->t.calib_seqs, "calibration windows (importance)")
          ->capture_default_str();
      app.add_option("--calib-len", o->t.calib_len, "tokens per calibration window")
          ->capture_default_str();
      o->t.recovery.sched.steps = 1000;
      app.add_option("--recover-steps", o->t.recovery.sched.steps,
                     "steps of recovery of the best (8 x 256 tokens each, in <out>/recover/); 0: "
                     "model.gguf is the cut model itself")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      app.add_option("--recover-lr", o->t.recovery.sched.lr,
                     "recovery's peak learning rate (20 steps of warm-up, cosine to a tenth)")
          ->capture_default_str()
          ->check(CLI::PositiveNumber);
      app.add_option("--recover-lora-rank", o->t.recovery.lora_rank,
                     "recovery by LoRA then merge: an adapter of this rank on every matrix of "
                     "the frozen cut, folded in at the end; 0: every weight trains")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{0}, int64_t{4096}));
      app.add_option("--kd-weight", o->t.recovery.kd_weight,
                     "recovery's loss: this share KL to the dense model's next-token "
                     "distribution, the rest cross entropy; 0: plain fine-tuning")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 1.0));
      app.add_option("--seed", o->t.seed, "seed of the search")->capture_default_str();
      app.add_option("-t,--threads", o->t.threads, "threads")->capture_default_str();
      return [o] {
        o->t.units = cln::prune::method_from_name(o->units);
        if (o->puzzle_only) o->t.baselines = false, o->t.random_samples = 0, o->t.rounds = 0;
        o->t.workload.name = o->workload;
        if (o->workload == "chat") o->t.workload.prompt = 128, o->t.workload.output = 242;
        o->t.log = [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
        const cln::prune::TailorResult r = cln::prune::tailor(o->t);
        if (cln::prune::Ranks::world().rank() == 0) {  // one report, whatever the ranks
          cln::prune::write_report(o->t, r);
          std::printf("%s/summary.md\n", o->t.out_dir.c_str());
        }
        return r.feasible ? 0 : 3;
      };
    }};

}  // namespace cmd_tailor
