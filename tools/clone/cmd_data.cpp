// clone data build: install the Debian sources, clean them into per-domain corpora with
// hash splits, generate the task datasets, train the tokenizer and encode the corpora.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "clone/core/error.h"
#include "clone/data/corpus.h"
#include "clone/data/tokenizer_train.h"
#include "subcommand.h"

namespace cmd_data {

struct Opts {
  std::string out = "out/data";
  bool install = false;
  bool skip_corpora = false;
  int vocab = 4096;
  double tokenizer_mb = 3.0;
  int threads = 2;
};

int build(const Opts& o) {
  using namespace cln;
  if (o.vocab < 300 || o.vocab > 65536) fail("--vocab must be in [300, 65536], got ", o.vocab);
  if (o.install) {
    std::string cmd = "DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends";
    for (const auto& p : data::source_packages()) cmd += " " + p;
    std::fprintf(stderr, "data: %s\n", cmd.c_str());
    if (std::system(cmd.c_str()) != 0) fail("installing the source packages failed (run as root?)");
  }
  if (!o.skip_corpora) {
    data::BuildOptions b;
    b.out = o.out;
    data::build_corpora(b);
  }
  data::TokenizerTrainOptions t;
  t.data_dir = o.out;
  t.vocab_size = o.vocab;
  t.bytes_per_domain = static_cast<size_t>(o.tokenizer_mb * 1e6);
  t.threads = o.threads;
  t.verbose = false;
  const std::string model = data::train_tokenizer(t);
  std::fprintf(stderr, "data: tokenizer %s (%d pieces)\n", model.c_str(), o.vocab);
  data::encode_corpora(o.out, model, true);
  return 0;
}

const cln::cli::Register reg{
    "data", "Build the training corpora, task datasets and tokenizer", [](CLI::App& app) {
      auto o = std::make_shared<Opts>();
      app.require_subcommand(1);
      CLI::App* b = app.add_subcommand(
          "build",
          "Clean the Debian sources into corpora/<domain>/{train,valid,test}.jsonl, "
          "generate tasks/, train tokenizer.model, write tokens/");
      b->add_option("--out", o->out, "output folder")->capture_default_str();
      b->add_flag("--install", o->install,
                  "apt-get install the source packages first (dict-gcide dict-foldoc jargon-text "
                  "bible-kjv-text bible-kjv fortune-mod fortunes fortunes-min wordnet-base)");
      b->add_flag("--skip-corpora", o->skip_corpora, "reuse the corpora already in --out");
      b->add_option("--vocab", o->vocab, "tokenizer vocabulary size")
          ->capture_default_str()
          ->check(CLI::Range(300, 65536));
      b->add_option("--tokenizer-mb", o->tokenizer_mb, "tokenizer training text per domain, MB")
          ->capture_default_str()
          ->check(CLI::Range(0.01, 1000.0));
      b->add_option("--threads", o->threads, "threads for tokenizer training")
          ->capture_default_str()
          ->check(CLI::Range(1, 256));
      return [o] { return build(*o); };
    }};

}  // namespace cmd_data
