// clone length train: the output-length predictor (serve/length.h), trained on what the
// base model and its experts generate from the training prompts of each source and judged
// on held-out prompts.
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "clone/core/error.h"
#include "clone/serve/length.h"
#include "common.h"
#include "subcommand.h"

namespace cmd_length {

struct Opts {
  std::string base, out = "models/length/predictor.json", report, embedder = "hidden:4";
  std::vector<std::string> experts, plain;
  cln::serve::CollectOptions c;
  int64_t test_per_source = 100;
  int hidden = 32;
};

int train(Opts& o) {
  using namespace cln;
  for (const auto& [src, path] : cli::expert_specs(o.experts)) o.c.sources.emplace_back(src, path);
  for (const auto& s : o.plain) o.c.sources.emplace_back(s, "");
  if (o.c.sources.empty()) fail("give the sources: --expert source=adapter or --source name");
  auto model = Model::load(o.base);
  serve::CollectOptions test = o.c;
  test.split = "test";
  test.per_source = o.test_per_source;
  test.seed = o.c.seed + 1;
  const auto train_set = serve::collect_lengths(model, o.c);
  const auto test_set = serve::collect_lengths(model, test);
  auto emb = serve::make_hidden_embedder(o.embedder, model, std::max(1, o.c.threads));
  auto m = serve::OutputLengthModel::train(train_set, *emb, o.c.max_new, o.hidden, o.c.seed);
  nlohmann::json prov = {{"base", o.base},
                         {"experts", o.experts},
                         {"base_only_sources", o.plain},
                         {"per_source", o.c.per_source},
                         {"max_new", o.c.max_new},
                         {"temperature", o.c.temperature},
                         {"seed", o.c.seed}};
  m.save(o.out, prov.dump());
  const serve::LengthEval r = serve::evaluate_lengths(m, *emb, train_set, test_set);
  char head[512];
  std::snprintf(head, sizeof head,
                "Output-length predictor (%s + log prompt length -> MLP, %d hidden): held-out "
                "test prompts, lengths sampled at temperature %.2g up to %lld tokens. RMS of "
                "log(predicted / true): predictor %.3f, source mean %.3f.\n\n",
                o.embedder.c_str(), o.hidden, o.c.temperature, static_cast<long long>(o.c.max_new),
                r.log_sigma_model, r.log_sigma_source_mean);
  const std::string md = std::string(head) + serve::length_table(r).markdown();
  std::fputs(md.c_str(), stdout);
  if (!o.report.empty()) cli::write_text_file(o.report, md);
  return 0;
}

const cln::cli::Register reg{
    "length", "The output-length predictor the DVFS controller plans with", [](CLI::App& app) {
      app.require_subcommand(1);
      auto o = std::make_shared<Opts>();
      CLI::App* tr = app.add_subcommand("train", "collect lengths, fit, judge on held-out prompts");
      tr->add_option("--base", o->base, "base model GGUF")->required()->check(CLI::ExistingFile);
      tr->add_option("--data", o->c.data_dir, "folder written by `clone data build`")->required();
      tr->add_option("--expert", o->experts, "source=adapter: the expert that serves a source");
      tr->add_option("--source", o->plain, "a source served by the base model alone");
      tr->add_option("--per-source", o->c.per_source, "training prompts per source")
          ->capture_default_str();
      tr->add_option("--test-per-source", o->test_per_source, "held-out prompts per source")
          ->capture_default_str();
      tr->add_option("--max-new", o->c.max_new, "generation cap (the predictor's cap)")
          ->capture_default_str();
      tr->add_option("--temperature", o->c.temperature, "sampling temperature")
          ->capture_default_str();
      tr->add_option("--embedder", o->embedder, "hidden:<layers>")->capture_default_str();
      tr->add_option("--hidden", o->hidden, "MLP hidden units")->capture_default_str();
      tr->add_option("--seed", o->c.seed, "seed")->capture_default_str();
      tr->add_option("-t,--threads", o->c.threads, "threads")->capture_default_str();
      tr->add_option("--out", o->out, "predictor JSON")->capture_default_str();
      tr->add_option("--report", o->report, "markdown table of the held-out judgement");
      return [o] { return train(*o); };
    }};

}  // namespace cmd_length
