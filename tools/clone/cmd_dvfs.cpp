// clone dvfs train: trains the learned DVFS controller in the simulator (deterministic
// for a seed) and writes the weights and the training log beside them.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "clone/core/error.h"
#include "clone/device/cost_model.h"
#include "clone/dvfs/train.h"
#include "common.h"
#include "subcommand.h"

namespace cmd_dvfs {

using namespace cln;

struct Opts {
  std::string profile = "orin-nx-16gb", model = "gemma-2b", out, mode;
  dvfs::TrainOptions t;
};

int train(Opts& o) {
  auto prof = device::DeviceProfile::find(o.profile);
  ModelConfig mc = cli::model_shape(o.model);
  if (mc.name.empty()) mc.name = o.model;        // a GGUF without general.name
  if (!o.mode.empty()) (void)prof.mode(o.mode);  // an error naming the profile's modes
  o.t.mode = o.mode;
  const std::string stem = prof.name + (o.mode.empty() ? "" : "." + o.mode);
  std::string out =
      o.out.empty() ? resource_path(Resource::Models, "dvfs/" + stem + ".json") : o.out;
  std::string log_path =
      out.substr(0, out.size() - (out.ends_with(".json") ? 5 : 0)) + ".train.log";
  std::ofstream log(log_path);
  if (!log) fail("cannot write ", log_path);
  o.t.log = [&](const std::string& s) {
    std::printf("%s\n", s.c_str());
    std::fflush(stdout);
    log << s << "\n";
  };
  std::ostringstream cmd;
  cmd << "clone dvfs train --profile " << o.profile << (o.mode.empty() ? "" : " --mode " + o.mode)
      << " --model " << o.model << " --seed " << o.t.seed << " --requests "
      << o.t.requests_per_pattern << " --rounds " << o.t.rounds << " --hidden " << o.t.hidden
      << " --epochs " << o.t.epochs << " --decode-horizon " << o.t.decode_horizon;
  if (o.t.relative_share > 0)
    cmd << " --relative-slo " << o.t.relative_share << " --relative-range " << o.t.relative_lo
        << "," << o.t.relative_hi;
  o.t.log("command: " + cmd.str());
  auto r = dvfs::train_policy(prof, mc, o.t);
  std::ostringstream meta;
  meta << "{\"profile\":\"" << prof.name << "\",\"mode\":\"" << o.mode << "\",\"model\":\""
       << mc.name << "\",\"model_params\":" << mc.n_params() << ",\"seed\":" << o.t.seed
       << ",\"samples\":" << r.samples << ",\"decode_horizon\":" << o.t.decode_horizon
       << ",\"mse\":" << r.final_mse << ",\"params\":" << r.net.n_params();
  if (o.t.relative_share > 0)
    meta << ",\"relative_slo\":" << o.t.relative_share << ",\"relative_range\":[" << o.t.relative_lo
         << "," << o.t.relative_hi << "]";
  meta << ",\"method\":\"DAgger imitation of the MPC teacher\"}";
  r.net.save(out, meta.str());
  o.t.log("wrote " + out + " (" + std::to_string(r.net.n_params()) + " parameters)");
  return 0;
}

const cli::Register reg{
    "dvfs", "DVFS controllers: train the learned policy", [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      app.require_subcommand(1);
      auto* t = app.add_subcommand(
          "train", "train the MLP controller by DAgger imitation of the MPC teacher");
      t->add_option("--profile", o->profile, "device profile")->capture_default_str();
      t->add_option("--model", o->model,
                    "model shape: a preset (gemma-2b, llama2-7b, tinyllama-1.1b, base) or a .gguf")
          ->capture_default_str();
      t->add_option("--mode", o->mode,
                    "train in one of the profile's power modes (weights <profile>.<mode>.json, "
                    "which the learned policy then uses in that mode)");
      t->add_option("--out", o->out, "weights file (default <models>/dvfs/<profile>.json)");
      t->add_option("--seed", o->t.seed, "seed (same seed, same weights)")->capture_default_str();
      t->add_option("--requests", o->t.requests_per_pattern,
                    "requests per co-runner pattern per round")
          ->capture_default_str()
          ->check(CLI::Range(1, 100000));
      t->add_option("--rounds", o->t.rounds, "DAgger rounds (1 = behaviour cloning)")
          ->capture_default_str()
          ->check(CLI::Range(1, 50));
      t->add_option("--hidden", o->t.hidden, "hidden units (the net must stay under 1K parameters)")
          ->capture_default_str()
          ->check(CLI::Range(1, 90));
      t->add_option("--epochs", o->t.epochs, "epochs per round")
          ->capture_default_str()
          ->check(CLI::Range(1, 10000));
      t->add_option("--decode-horizon", o->t.decode_horizon,
                    "the controller plans a decode over at most this many tokens ahead, in "
                    "training as when it runs (0: the whole predicted rest)")
          ->capture_default_str()
          ->check(CLI::NonNegativeNumber);
      t->add_option("--relative-slo", o->t.relative_share,
                    "share of the training requests whose SLOs are set relative to the top "
                    "clock's own times for them (for models far smaller than the SLO classes "
                    "assume, e.g. the base model; 0: class SLOs only)")
          ->capture_default_str()
          ->check(CLI::Range(0.0, 1.0));
      auto* range = t->add_option_function<std::vector<double>>(
          "--relative-range",
          [o](const std::vector<double>& v) {
            if (v.size() != 2 || !(v[0] >= 1.0) || !(v[1] > v[0]))
              cln::fail("--relative-range: expected LO,HI with 1 <= LO < HI, e.g. 1.02,2");
            o->t.relative_lo = v[0], o->t.relative_hi = v[1];
          },
          "the relative SLOs' range: targets LO..HI x the top clock's times (default 1.02,2)");
      range->delimiter(',');
      cli::add_resource_flags(*t, {Resource::Profiles, Resource::Models});
      return [o] { return train(*o); };
    }};

}  // namespace cmd_dvfs
