#include "clone/eval/domains.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "clone/core/error.h"
#include "clone/data/corpus.h"
#include "clone/data/token_file.h"
#include "clone/engine/context.h"
#include "clone/eval/nll.h"

namespace cln::eval {

std::vector<DomainPerplexity> domain_perplexity(std::shared_ptr<const Model> model,
                                                const Vocab& vocab, const std::string& source,
                                                const std::string& data_dir,
                                                const std::string& split, int64_t seq_len,
                                                int64_t max_tokens, int threads) {
  Context ctx(model, {seq_len, threads, seq_len});
  std::vector<DomainPerplexity> rows;
  for (const std::string& d : data::domain_names()) {
    const data::TokenFile train =
        data::read_token_file(data::token_file_path(data_dir, d, "train"), vocab, source);
    const data::TokenFile test =
        data::read_token_file(data::token_file_path(data_dir, d, split), vocab, source);
    const Windows w = even_windows(static_cast<int64_t>(test.tokens.size()), seq_len,
                                   std::max<int64_t>(1, max_tokens / seq_len));
    const NllResult r = windowed_nll(ctx, std::span<const uint16_t>(test.tokens), w);
    const double uni =
        unigram_nll(train.tokens, static_cast<int64_t>(vocab.tokens.size()), test.tokens, w);
    rows.push_back({d, r.scored, r.ppl(), std::exp(uni)});
  }
  return rows;
}

std::vector<DomainPerplexity> text_perplexity(std::shared_ptr<const Model> model,
                                              const std::vector<std::string>& files,
                                              const std::string& data_dir, int64_t seq_len,
                                              int64_t max_tokens, int threads) {
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  const std::string source = model->gguf().path();
  std::vector<uint16_t> train;
  for (const std::string& d : data::domain_names()) {
    const data::TokenFile f =
        data::read_token_file(data::token_file_path(data_dir, d, "train"), tok.vocab(), source);
    train.insert(train.end(), f.tokens.begin(), f.tokens.end());
  }
  Context ctx(model, {seq_len, threads, seq_len});
  std::vector<DomainPerplexity> rows;
  for (const std::string& path : files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot open ", path);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    std::vector<uint16_t> ids;
    for (int32_t t : tok.encode(text, true)) ids.push_back(static_cast<uint16_t>(t));
    const Windows w = even_windows(static_cast<int64_t>(ids.size()), seq_len,
                                   std::max<int64_t>(1, max_tokens / seq_len));
    const NllResult r = windowed_nll(ctx, std::span<const uint16_t>(ids), w);
    const double uni = unigram_nll(train, tok.n_vocab(), ids, w);
    rows.push_back(
        {std::filesystem::path(path).filename().string(), r.scored, r.ppl(), std::exp(uni)});
  }
  return rows;
}

Table domain_table(const std::vector<DomainPerplexity>& rows) {
  Table t({"domain", "scored tokens", "model perplexity", "unigram perplexity"});
  t.set_precision(2);
  for (const auto& r : rows)
    t.add({r.domain, static_cast<long long>(r.tokens), r.model_ppl, r.unigram_ppl});
  return t;
}

}  // namespace cln::eval
