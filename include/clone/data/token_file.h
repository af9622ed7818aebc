// Token files: a corpus split encoded once with the shipped tokenizer, read by training
// and evaluation without tokenizing again.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "clone/tokenizer/tokenizer.h"

namespace cln::data {

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

// Reads a token file and checks it was written with `vocab` (size and fingerprint);
// `source` names where the vocabulary came from in the error message.
TokenFile read_token_file(const std::string& path, const Vocab& vocab, const std::string& source);

// Path of one token file.
std::string token_file_path(const std::string& data_dir, const std::string& name,
                            const std::string& split);

}  // namespace cln::data
