// Per-domain perplexity of a model on one split of the corpora, beside a unigram model
// fitted on each domain's training split: the table the trainer writes after training.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "clone/core/table.h"
#include "clone/engine/model.h"
#include "clone/tokenizer/tokenizer.h"

namespace cln::eval {

struct DomainPerplexity {
  std::string domain;
  int64_t tokens = 0;  // predictions scored
  double model_ppl = 0, unigram_ppl = 0;
};

// Scores `split` of every domain with even_windows(seq_len, max_tokens / seq_len windows)
// (nll.h). The token files must have been written with `vocab` (source names it in errors).
std::vector<DomainPerplexity> domain_perplexity(std::shared_ptr<const Model> model,
                                                const Vocab& vocab, const std::string& source,
                                                const std::string& data_dir,
                                                const std::string& split, int64_t seq_len,
                                                int64_t max_tokens, int threads);
// Rows: domain, scored tokens, model perplexity, unigram perplexity.
Table domain_table(const std::vector<DomainPerplexity>& rows);

// Text files off the corpora (a licence, a rendered man page, a C header): each tokenized
// with the model's tokenizer and scored with the same protocol, beside a unigram fitted on
// the training splits of all domains together. Rows are named by file.
std::vector<DomainPerplexity> text_perplexity(std::shared_ptr<const Model> model,
                                              const std::vector<std::string>& files,
                                              const std::string& data_dir, int64_t seq_len,
                                              int64_t max_tokens, int threads);

}  // namespace cln::eval
