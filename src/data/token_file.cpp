#include "clone/data/token_file.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "clone/core/error.h"
#include "clone/core/hash.h"

namespace cln::data {
namespace fs = std::filesystem;

uint64_t vocab_fingerprint(const Vocab& v) {
  std::string all;
  for (const std::string& t : v.tokens) {
    all += t;
    all += '\0';
  }
  return fnv1a64(all);
}

void write_token_file(const std::string& path, const TokenFile& f) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream o(tmp, std::ios::binary);
    if (!o) fail("cannot write ", tmp);
    const uint32_t version = 1;
    const uint64_t count = f.tokens.size();
    o.write("CLTK", 4);
    o.write(reinterpret_cast<const char*>(&version), 4);
    o.write(reinterpret_cast<const char*>(&f.n_vocab), 4);
    o.write(reinterpret_cast<const char*>(&f.fingerprint), 8);
    o.write(reinterpret_cast<const char*>(&count), 8);
    o.write(reinterpret_cast<const char*>(f.tokens.data()),
            static_cast<std::streamsize>(count * sizeof(uint16_t)));
    if (!o) fail("cannot write ", tmp);
  }
  fs::rename(tmp, path);
}

TokenFile read_token_file(const std::string& path, int32_t bos) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open token file ", path, " (run `clone data build` first)");
  char magic[4];
  uint32_t version = 0;
  TokenFile f;
  uint64_t count = 0;
  in.read(magic, 4);
  in.read(reinterpret_cast<char*>(&version), 4);
  in.read(reinterpret_cast<char*>(&f.n_vocab), 4);
  in.read(reinterpret_cast<char*>(&f.fingerprint), 8);
  in.read(reinterpret_cast<char*>(&count), 8);
  if (!in || std::memcmp(magic, "CLTK", 4) != 0) fail(path, ": not a clone token file");
  if (version != 1) fail(path, ": token file version ", version, " (expected 1)");
  const auto size = fs::file_size(path);
  if (size != 28 + count * 2)
    fail(path, ": truncated: header says ", count, " tokens, file holds ", (size - 28) / 2);
  f.tokens.resize(count);
  in.read(reinterpret_cast<char*>(f.tokens.data()), static_cast<std::streamsize>(count * 2));
  if (!in) fail(path, ": cannot read its tokens");
  for (uint16_t t : f.tokens) {
    if (t >= f.n_vocab) fail(path, ": token ", t, " is outside its vocabulary of ", f.n_vocab);
    f.n_docs += t == bos;
  }
  return f;
}

TokenFile read_token_file(const std::string& path, const Vocab& vocab, const std::string& source) {
  TokenFile f = read_token_file(path, vocab.bos);
  if (f.n_vocab != vocab.tokens.size() || f.fingerprint != vocab_fingerprint(vocab))
    fail(path, " was encoded with another tokenizer than the one in ", source,
         " (rebuild with `clone data build`)");
  return f;
}

std::string token_file_path(const std::string& data_dir, const std::string& name,
                            const std::string& split) {
  return (fs::path(data_dir) / "tokens" / (name + "." + split + ".tok")).string();
}

}  // namespace cln::data
