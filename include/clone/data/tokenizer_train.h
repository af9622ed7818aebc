// The SentencePiece tokenizer trained on the corpus mixture (libsentencepiece's BPE
// trainer: byte fallback, identity normalization, digits split, BOS/EOS), its
// conversion to the Vocab that GGUF stores, and the corpora encoded as token files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clone/tokenizer/tokenizer.h"

namespace cln::data {

struct TokenizerTrainOptions {
  std::string data_dir = "out/data";  // reads corpus/<domain>/train.jsonl
  std::string model_path;  // the SentencePiece model written (default data_dir/tokenizer.model)
  int vocab_size = 4096;
  size_t bytes_per_domain = 3u << 20;  // training text per domain, documents taken in hash order
  int threads = 2;
  bool verbose = true;
};

// Trains and writes the SentencePiece model; returns its path.
std::string train_tokenizer(const TokenizerTrainOptions& o);

// The vocabulary of a SentencePiece model in clone's (and GGUF's) form.
Vocab vocab_from_sentencepiece(const std::string& model_path);

// Encodes every domain's splits into data_dir/tokens/<name>.<split>.tok.
// Throws if a split has no documents.
void encode_corpora(const std::string& data_dir, const std::string& model_path, bool verbose);

}  // namespace cln::data
