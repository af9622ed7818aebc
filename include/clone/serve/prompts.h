// The prompts an expert is keyed by and judged on: for a domain, the first tokens of its
// documents; for a task, its items' prompts. Training prompts make an expert's router key,
// held-out (test) prompts judge the router.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clone/tokenizer/tokenizer.h"

namespace cln::serve {

struct PromptSet {
  std::string source;                         // the domain or task it comes from
  std::vector<std::vector<int32_t>> prompts;  // BOS first
  // Domains: the document's next tokens after the prompt (for perplexity); tasks: the answer.
  std::vector<std::vector<int32_t>> continuations;
  std::vector<std::string> answers;  // tasks: the expected answer text
};

// Up to n prompts of `split`, evenly spaced over it. A domain's prompt is the first
// prompt_tokens tokens of a document with at least prompt_tokens + continuation_tokens, the
// continuation the tokens after it; a task's prompt is an item's prompt.
PromptSet prompt_set(const std::string& data_dir, const std::string& source,
                     const std::string& split, const Tokenizer& tok, const std::string& tok_source,
                     int64_t n, int64_t prompt_tokens = 64, int64_t continuation_tokens = 128);

// Every item of a source's split: a domain's documents cut to their first max_tokens tokens
// (BOS first), a task's prompts.
std::vector<std::vector<int32_t>> source_heads(const std::string& data_dir,
                                               const std::string& source, const std::string& split,
                                               const Tokenizer& tok, const std::string& tok_source,
                                               int64_t max_tokens);

// The token length (BOS included) of every document of a domain's split, in file order.
std::vector<int64_t> document_lengths(const std::string& data_dir, const std::string& domain,
                                      const std::string& split, const Tokenizer& tok,
                                      const std::string& tok_source);

}  // namespace cln::serve
