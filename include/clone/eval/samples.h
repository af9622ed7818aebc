// Does a trained model write like each domain, and does it stop where a document would?
// For every domain, test documents are cut after a short prompt and the model continues
// them (seeded sampling) until it emits EOS or reaches a limit. The report holds the
// continuations and, per domain, how often the model stopped on its own and how long
// its texts were next to the real documents'.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clone/core/table.h"
#include "clone/engine/sampler.h"

namespace cln::eval {

struct SampleOptions {
  std::string model;                  // GGUF with its tokenizer
  std::string data_dir = "out/data";  // tokens/<domain>.test.tok
  int64_t per_domain = 20;            // documents continued per domain (evenly spaced)
  int64_t prompt_tokens = 8;          // tokens of each document given as the prompt
  int64_t max_new = 192;              // generation limit (a stop without EOS counts as such)
  SamplerParams sampling{0.8f, 40, 0.95f, 1234};
  int threads = 2;
};

struct DomainSamples {
  std::string domain;
  int64_t n = 0;
  int64_t ended_with_eos = 0;
  double median_generated = 0;  // tokens after the prompt, EOS excluded
  double median_document = 0;   // the real documents' tokens after the same prompt
  // (prompt, continuation, stopped with EOS) of every document continued
  struct Example {
    std::string prompt, continuation;
    int64_t n_generated = 0;  // tokens of the continuation (EOS excluded)
    bool eos = false;
  };
  std::vector<Example> examples;
};

// Throws cln::Error if the token files were encoded with another tokenizer or a domain
// has no test document longer than the prompt.
std::vector<DomainSamples> sample_domains(const SampleOptions& o);

// Rows: domain, documents, stopped with EOS (%), median length generated / real.
Table eos_table(const std::vector<DomainSamples>& s);
// Markdown: the EOS table, then each domain's examples.
std::string samples_markdown(const std::vector<DomainSamples>& s, int64_t examples_per_domain);

}  // namespace cln::eval
