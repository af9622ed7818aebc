// clone eval domains: per-domain perplexity of a model on a split of the corpora, beside a
// unigram. clone eval texts: the same protocol on text files off the corpora.
#include <cstdio>
#include <memory>

#include "clone/eval/domains.h"
#include "clone/eval/nll.h"
#include "clone/tokenizer/tokenizer.h"
#include "subcommand.h"

namespace cmd_eval {

struct Opts {
  std::string model, data = "out/data", split = "test", out;
  std::vector<std::string> files;
  int64_t seq_len = 256, max_tokens = 65536;
  int threads = 2;
};

int print(const Opts& o, const std::vector<cln::eval::DomainPerplexity>& rows) {
  const std::string md =
      "Up to " + std::to_string(o.max_tokens / o.seq_len) + " evenly spaced windows of " +
      std::to_string(o.seq_len) +
      " tokens per row, each run from an empty cache, every prediction scored "
      "(eval::even_windows); unigram with add-one smoothing fitted on the training split.\n\n" +
      cln::eval::domain_table(rows).markdown();
  std::fputs(md.c_str(), stdout);
  if (!o.out.empty()) cln::eval::domain_table(rows).write(o.out);
  return 0;
}

const cln::cli::Register reg{
    "eval", "Perplexity of a model per corpus domain, or on any text files", [](CLI::App& app) {
      app.require_subcommand(1);
      auto o = std::make_shared<Opts>();
      CLI::App* dom = app.add_subcommand("domains", "every domain's split of the corpora");
      CLI::App* txt =
          app.add_subcommand("texts", "text files (tokenized with the model's tokenizer)");
      for (CLI::App* a : {dom, txt}) {
        a->add_option("-m,--model", o->model, "model GGUF")->required()->check(CLI::ExistingFile);
        a->add_option("--data", o->data, "folder written by `clone data build`")
            ->capture_default_str();
        a->add_option("--seq-len", o->seq_len, "window length")
            ->capture_default_str()
            ->check(CLI::Range(int64_t{2}, int64_t{65536}));
        a->add_option("--max-tokens", o->max_tokens, "scored tokens per row, at most")
            ->capture_default_str()
            ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
        a->add_option("--threads", o->threads, "threads")
            ->capture_default_str()
            ->check(CLI::Range(1, 256));
        a->add_option("--out", o->out, "also write the table (.md/.csv/.json)");
      }
      dom->add_option("--split", o->split, "train, valid or test")
          ->capture_default_str()
          ->check(CLI::IsMember({"train", "valid", "test"}));
      txt->add_option("files", o->files, "text files")->required()->check(CLI::ExistingFile);
      return [o, dom] {
        using namespace cln;
        const auto model = Model::load(o->model);
        if (dom->parsed()) {
          const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
          return print(*o, eval::domain_perplexity(model, tok.vocab(), o->model, o->data, o->split,
                                                   o->seq_len, o->max_tokens, o->threads));
        }
        return print(*o, eval::text_perplexity(model, o->files, o->data, o->seq_len, o->max_tokens,
                                               o->threads));
      };
    }};

}  // namespace cmd_eval
