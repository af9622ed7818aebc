#include "clone/serve/prompts.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>

#include "clone/core/error.h"
#include "clone/data/corpus.h"
#include "clone/data/tasks.h"
#include "clone/data/token_file.h"

namespace cln::serve {

namespace {
// A domain's documents in `split`: the spans after each BOS, as [begin, end) token offsets.
std::vector<std::pair<size_t, size_t>> documents(const data::TokenFile& f, const Tokenizer& tok) {
  std::vector<std::pair<size_t, size_t>> docs;
  for (size_t i = 0; i < f.tokens.size(); ++i) {
    if (f.tokens[i] != tok.bos()) continue;
    size_t j = i + 1;
    while (j < f.tokens.size() && f.tokens[j] != tok.bos()) ++j;
    docs.emplace_back(i, j);
    i = j - 1;
  }
  return docs;
}
}  // namespace

std::vector<int64_t> document_lengths(const std::string& data_dir, const std::string& domain,
                                      const std::string& split, const Tokenizer& tok,
                                      const std::string& tok_source) {
  const data::TokenFile f = data::read_token_file(data::token_file_path(data_dir, domain, split),
                                                  tok.vocab(), tok_source);
  std::vector<int64_t> lengths;
  for (const auto& [b, e] : documents(f, tok)) lengths.push_back(static_cast<int64_t>(e - b));
  return lengths;
}

std::vector<std::vector<int32_t>> source_heads(const std::string& data_dir,
                                               const std::string& source, const std::string& split,
                                               const Tokenizer& tok, const std::string& tok_source,
                                               int64_t max_tokens) {
  if (max_tokens < 1) fail("source heads: at least one token");
  const auto& domains = data::domain_names();
  if (std::find(domains.begin(), domains.end(), source) == domains.end())
    return prompt_set(data_dir, source, split, tok, tok_source, INT64_MAX).prompts;
  const data::TokenFile f = data::read_token_file(data::token_file_path(data_dir, source, split),
                                                  tok.vocab(), tok_source);
  std::vector<std::vector<int32_t>> heads;
  for (const auto& [b, e] : documents(f, tok)) {
    const size_t end = std::min(e, b + static_cast<size_t>(max_tokens));
    heads.emplace_back(f.tokens.begin() + static_cast<std::ptrdiff_t>(b),
                       f.tokens.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return heads;
}

PromptSet prompt_set(const std::string& data_dir, const std::string& source,
                     const std::string& split, const Tokenizer& tok, const std::string& tok_source,
                     int64_t n, int64_t prompt_tokens, int64_t continuation_tokens) {
  if (n < 1) fail("prompt set: at least one prompt");
  PromptSet s;
  s.source = source;
  const auto& domains = data::domain_names();
  if (std::find(domains.begin(), domains.end(), source) != domains.end()) {
    const data::TokenFile f = data::read_token_file(data::token_file_path(data_dir, source, split),
                                                    tok.vocab(), tok_source);
    // Documents long enough for prompt and continuation.
    std::vector<std::pair<size_t, size_t>> docs;
    for (const auto& d : documents(f, tok))
      if (static_cast<int64_t>(d.second - d.first) >= prompt_tokens + continuation_tokens)
        docs.push_back(d);
    if (docs.empty())
      fail(source, " (", split, "): no document of ", prompt_tokens + continuation_tokens,
           " tokens");
    const auto m = std::min<int64_t>(n, static_cast<int64_t>(docs.size()));
    for (int64_t k = 0; k < m; ++k) {
      const size_t b = docs[static_cast<size_t>(k * static_cast<int64_t>(docs.size()) / m)].first;
      const auto at = [&](int64_t o) {
        return static_cast<int32_t>(f.tokens[b + static_cast<size_t>(o)]);
      };
      std::vector<int32_t> p, c;
      for (int64_t o = 0; o < prompt_tokens; ++o) p.push_back(at(o));
      for (int64_t o = prompt_tokens; o < prompt_tokens + continuation_tokens; ++o)
        c.push_back(at(o));
      s.prompts.push_back(std::move(p));
      s.continuations.push_back(std::move(c));
    }
    return s;
  }
  const std::string path =
      (std::filesystem::path(data_dir) / "tasks" / source / (split + ".jsonl")).string();
  const std::vector<data::TaskItem> items = data::read_jsonl_tasks(path);
  if (items.empty()) fail(path, ": no items");
  const auto m = std::min<int64_t>(n, static_cast<int64_t>(items.size()));
  for (int64_t k = 0; k < m; ++k) {
    const data::TaskItem& it =
        items[static_cast<size_t>(k * static_cast<int64_t>(items.size()) / m)];
    s.prompts.push_back(tok.encode(it.prompt, true));
    s.continuations.emplace_back();
    s.answers.push_back(it.answer);
  }
  return s;
}

}  // namespace cln::serve
