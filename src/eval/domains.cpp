#include "clone/eval/domains.h"

#include <algorithm>
#include <cmath>

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

Table domain_table(const std::vector<DomainPerplexity>& rows) {
  Table t({"domain", "scored tokens", "model perplexity", "unigram perplexity"});
  t.set_precision(2);
  for (const auto& r : rows)
    t.add({r.domain, static_cast<long long>(r.tokens), r.model_ppl, r.unigram_ppl});
  return t;
}

}  // namespace cln::eval
