#include "clone/eval/samples.h"

#include <algorithm>
#include <cstdio>

#include "clone/core/error.h"
#include "clone/core/stats.h"
#include "clone/data/corpus.h"
#include "clone/data/token_file.h"
#include "clone/engine/context.h"
#include "clone/engine/generate.h"
#include "clone/engine/model.h"
#include "clone/tokenizer/tokenizer.h"

namespace cln::eval {

namespace {

// Documents of a token stream: the spans after each BOS, up to the next BOS, with a
// trailing EOS removed.
std::vector<std::vector<int32_t>> split_documents(const std::vector<uint16_t>& t, int32_t bos,
                                                  int32_t eos) {
  std::vector<std::vector<int32_t>> docs;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] != bos) continue;
    std::vector<int32_t> d;
    size_t j = i + 1;
    for (; j < t.size() && t[j] != bos; ++j) d.push_back(t[j]);
    if (!d.empty() && d.back() == eos) d.pop_back();
    docs.push_back(std::move(d));
    i = j - 1;
  }
  return docs;
}

}  // namespace

std::vector<DomainSamples> sample_domains(const SampleOptions& o) {
  if (o.per_domain < 1 || o.prompt_tokens < 1 || o.max_new < 1)
    fail("samples: documents, prompt length and limit must be at least 1");
  const auto model = Model::load(o.model);
  const Tokenizer tok = Tokenizer::from_gguf(model->gguf());
  Context ctx(model, {1 + o.prompt_tokens + o.max_new, o.threads, 512});
  std::vector<DomainSamples> out;
  uint64_t seed = o.sampling.seed;
  for (const std::string& d : data::domain_names()) {
    const std::string path = data::token_file_path(o.data_dir, d, "test");
    const data::TokenFile f = data::read_token_file(path, tok.vocab(), o.model);
    std::vector<std::vector<int32_t>> docs;
    for (auto& doc : split_documents(f.tokens, tok.bos(), tok.eos()))
      if (static_cast<int64_t>(doc.size()) > o.prompt_tokens) docs.push_back(std::move(doc));
    if (docs.empty())
      fail(path, ": no test document is longer than the ", o.prompt_tokens, "-token prompt");
    DomainSamples s;
    s.domain = d;
    s.n = std::min<int64_t>(o.per_domain, static_cast<int64_t>(docs.size()));
    std::vector<double> gen_len, doc_len;
    for (int64_t k = 0; k < s.n; ++k) {
      const auto& doc = docs[static_cast<size_t>(k * static_cast<int64_t>(docs.size()) / s.n)];
      std::vector<int32_t> prompt = {tok.bos()};
      prompt.insert(prompt.end(), doc.begin(), doc.begin() + o.prompt_tokens);
      GenerateParams gp;
      gp.max_new = o.max_new;
      gp.sampling = o.sampling;
      gp.sampling.seed = seed++;
      gp.eos = tok.eos();
      ctx.reset();
      const Generation g = generate(ctx, prompt, gp);
      const std::vector<int32_t>& gen = g.tokens;
      const bool eos = g.stop == StopReason::Eos;
      s.ended_with_eos += eos;
      gen_len.push_back(static_cast<double>(gen.size()));
      doc_len.push_back(static_cast<double>(doc.size()) - static_cast<double>(o.prompt_tokens));
      s.examples.push_back({tok.decode(std::span(prompt).subspan(1)), tok.decode(gen),
                            static_cast<int64_t>(gen.size()), eos});
    }
    s.median_generated = median(gen_len);
    s.median_document = median(doc_len);
    out.push_back(std::move(s));
  }
  return out;
}

Table eos_table(const std::vector<DomainSamples>& s) {
  Table t({"domain", "documents", "stopped with EOS (%)", "median generated tokens",
           "median real tokens"});
  t.set_precision(1);
  for (const auto& d : s)
    t.add({d.domain, static_cast<long long>(d.n),
           100.0 * static_cast<double>(d.ended_with_eos) / static_cast<double>(d.n),
           d.median_generated, d.median_document});
  return t;
}

std::string samples_markdown(const std::vector<DomainSamples>& s, int64_t examples_per_domain) {
  std::string md = eos_table(s).markdown();
  for (const auto& d : s) {
    md += "\n## " + d.domain + "\n";
    const auto n = std::min<int64_t>(examples_per_domain, static_cast<int64_t>(d.examples.size()));
    for (int64_t i = 0; i < n; ++i) {
      const auto& e = d.examples[static_cast<size_t>(i)];
      // Indented block: the texts hold markdown-looking characters of their own.
      std::string body =
          "\u00ab" + e.prompt + "\u00bb" + e.continuation + (e.eos ? " [EOS]" : " [limit]");
      std::string quoted = "\n    ";
      for (char c : body) {
        if (c == '\n')
          quoted += "\n    ";
        else
          quoted += c;
      }
      md += quoted + "\n";
    }
  }
  return md;
}

}  // namespace cln::eval
