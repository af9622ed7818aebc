// The SentencePiece tokenizer trained on the corpus mixture (libsentencepiece's BPE
// trainer: byte fallback, identity normalization, digits split, BOS/EOS), its
// conversion to the Vocab that GGUF stores, and the corpora encoded as token files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clone/tokenizer/tokenizer.h"

namespace cln::train {

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

// Token files: "CLTK", u32 version 1, u32 vocab size, u64 tokenizer fingerprint, u64 count,
// then count u16 tokens: BOS document EOS, BOS document EOS, ...
struct TokenFile {
  uint32_t n_vocab = 0;
  uint64_t fingerprint = 0;  // vocab_fingerprint() of the tokenizer that wrote it
  std::vector<uint16_t> tokens;
  int64_t n_docs = 0;  // BOS tokens, counted by the reader
};
// A hash of the pieces, in order: a model and a token file agree iff these are equal.
uint64_t vocab_fingerprint(const Vocab& v);
void write_token_file(const std::string& path, const TokenFile& f);
// Throws cln::Error naming the file if it is missing, truncated or not a token file.
TokenFile read_token_file(const std::string& path, int32_t bos);

// Encodes every domain's splits into data_dir/tokens/<name>.<split>.tok.
// Throws if a split has no documents.
void encode_corpora(const std::string& data_dir, const std::string& model_path, bool verbose);

// Path of one token file.
std::string token_file_path(const std::string& data_dir, const std::string& name,
                            const std::string& split);

}  // namespace cln::train
