// clone prune: structured pruning of a model by one importance method at given per-layer
// ratios (or ShortGPT's layer-half removal, or an explicit plan), written as a GGUF that
// this engine and llama.cpp load. No recovery here: `clone tailor` (to come) adds it.
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "clone/core/error.h"
#include "clone/prune/select.h"
#include "clone/prune/surgery.h"
#include "common.h"
#include "subcommand.h"

namespace cmd_prune {

struct Opts {
  std::string model, out, method = "magnitude", ratios_file, plan_file, plan_out, data = "out/data";
  double ratio = -1, attn_ratio = -1, ffn_ratio = -1, global = -1;
  int remove_halves = -1;
  int64_t calib_seqs = 32, calib_len = 128;
  uint64_t seed = 1;
  int threads = 2;
};

std::vector<double> per_layer(const nlohmann::json& j, const char* key, int64_t n) {
  if (!j.contains(key) || !j[key].is_array())
    cln::fail("ratios file: '", key, "' must be a list of ", n, " numbers");
  std::vector<double> v;
  for (const auto& x : j[key]) {
    if (!x.is_number()) cln::fail("ratios file: '", key, "' holds a non-number: ", x.dump());
    v.push_back(x.get<double>());
  }
  return v;
}

int run(const Opts& o) {
  using namespace cln;
  const auto f = GgufFile::open(o.model);
  const ModelConfig c = ModelConfig::from_gguf(*f);
  prune::PrunePlan plan;
  std::string how;
  if (!o.plan_file.empty()) {
    plan = prune::PrunePlan::from_json(cli::read_text_file(o.plan_file));
    plan.validate(c);
    how = "plan " + o.plan_file;
  } else {
    const prune::Method m = prune::method_from_name(o.method);
    prune::Ratios r;
    if (!o.ratios_file.empty()) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(cli::read_text_file(o.ratios_file));
      } catch (const nlohmann::json::exception& e) {
        fail(o.ratios_file, ": not JSON: ", e.what());
      }
      r = {per_layer(j, "attn", c.n_layer()), per_layer(j, "ffn", c.n_layer())};
    } else if (o.remove_halves < 0 && o.global < 0) {
      const double base = o.ratio >= 0 ? o.ratio : 0.0;
      r = prune::Ratios::uniform(c.n_layer(), base);
      if (o.attn_ratio >= 0) r.attn.assign(r.attn.size(), o.attn_ratio);
      if (o.ffn_ratio >= 0) r.ffn.assign(r.ffn.size(), o.ffn_ratio);
    }
    if (o.remove_halves < 0 && o.global < 0) r.validate(c);  // before any long calibration pass
    train::LlamaModel model = train::LlamaModel::from_gguf(*f);
    prune::Calibration cal;
    if (m != prune::Method::Magnitude && m != prune::Method::Random) {
      cal = prune::calibration_from_data(o.data, Tokenizer::from_gguf(*f).vocab(), o.calib_seqs,
                                         o.calib_len, o.seed);
      cal.threads = o.threads;
    }
    const prune::Scores s = prune::score(m, model, cal, o.seed);
    if (o.remove_halves >= 0) r = prune::remove_halves(c, s, o.remove_halves);
    if (o.global >= 0) r = prune::global_ratios(c, s, o.global);
    plan = prune::plan_from_ratios(c, s, r);
    how = o.method;
    if (o.remove_halves >= 0) how += ", " + std::to_string(o.remove_halves) + " halves";
    if (o.global >= 0) {
      char share[32];
      std::snprintf(share, sizeof share, "%g", o.global);
      how += ", global ranking, " + std::string(share) + " of the weights";
    }
  }
  prune::write_pruned(*f, plan, o.out, {{"clone.pruning.method", how}});
  if (!o.plan_out.empty()) cli::write_text_file(o.plan_out, plan.to_json() + "\n");
  const ModelConfig pc = plan.shape(c);
  std::fputs(plan.summary(c).c_str(), stdout);
  std::printf("%s: %lld -> %lld parameters (%.1f%%), by %s\n", o.out.c_str(),
              static_cast<long long>(c.n_params()), static_cast<long long>(pc.n_params()),
              100.0 * static_cast<double>(pc.n_params()) / static_cast<double>(c.n_params()),
              how.c_str());
  return 0;
}

const cln::cli::Register reg{
    "prune", "Structured pruning: importance by one method, per-layer ratios, surgery",
    [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      app.add_option("-m,--model", o->model, "dense model GGUF")
          ->required()
          ->check(CLI::ExistingFile);
      app.add_option("-o,--out", o->out, "pruned model GGUF")->required();
      app.add_option("--method", o->method, "magnitude, wanda, taylor, block, random")
          ->capture_default_str()
          ->check(CLI::IsMember({"magnitude", "wanda", "taylor", "block", "random"}));
      app.add_option("--ratio", o->ratio, "share removed in every layer, attention and FFN")
          ->check(CLI::Range(0.0, 1.0));
      app.add_option("--attn-ratio", o->attn_ratio, "share of query heads removed per layer")
          ->check(CLI::Range(0.0, 1.0));
      app.add_option("--ffn-ratio", o->ffn_ratio, "share of FFN channels removed per layer")
          ->check(CLI::Range(0.0, 1.0));
      app.add_option("--ratios", o->ratios_file,
                     "per-layer ratios, JSON {\"attn\": [...], \"ffn\": [...]}")
          ->check(CLI::ExistingFile);
      app.add_option("--remove-halves", o->remove_halves,
                     "with --method block: remove this many layer halves (ShortGPT)")
          ->check(CLI::NonNegativeNumber);
      app.add_option("--global", o->global,
                     "FLAP-style: rank every head and channel by its score standardised within "
                     "its layer and kind, remove the lowest until this share of the prunable "
                     "weights is gone (per-layer ratios follow)")
          ->check(CLI::Range(0.0, 1.0));
      app.add_option("--plan", o->plan_file, "an explicit plan (JSON, as --plan-out writes)")
          ->check(CLI::ExistingFile);
      app.add_option("--plan-out", o->plan_out, "write the plan used");
      app.add_option("--data", o->data, "corpora for calibration (clone data build)")
          ->capture_default_str();
      app.add_option("--calib-seqs", o->calib_seqs, "calibration windows")->capture_default_str();
      app.add_option("--calib-len", o->calib_len, "tokens per calibration window")
          ->capture_default_str();
      app.add_option("--seed", o->seed, "seed (calibration windows, random scores)")
          ->capture_default_str();
      app.add_option("-t,--threads", o->threads, "threads")->capture_default_str();
      return [o] {
        const int given = (o->ratio >= 0 || o->attn_ratio >= 0 || o->ffn_ratio >= 0) +
                          !o->ratios_file.empty() + (o->remove_halves >= 0) +
                          !o->plan_file.empty() + (o->global >= 0);
        if (given != 1)
          cln::fail(
              "give one of --ratio/--attn-ratio/--ffn-ratio, --ratios, --remove-halves, "
              "--global or --plan");
        if (o->global >= 0 && o->method == "block")
          cln::fail("--global ranks heads and channels; --method block scores layer halves");
        if ((o->remove_halves >= 0) != (o->method == "block") && o->plan_file.empty())
          cln::fail(o->remove_halves >= 0
                        ? "--remove-halves needs --method block"
                        : "--method block removes whole halves: give --remove-halves N");
        return run(*o);
      };
    }};

}  // namespace cmd_prune
