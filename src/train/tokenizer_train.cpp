// Tokenizer training with libsentencepiece and the encoded corpora.
#include "clone/train/tokenizer_train.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "clone/core/error.h"
#include "clone/train/corpus.h"

namespace cln::train {
namespace fs = std::filesystem;

namespace {

// Feeds the sampled lines to the trainer without a temporary file.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string>* lines) : lines_(lines) {}
  bool done() const override { return i_ >= lines_->size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return (*lines_)[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>* lines_;
  size_t i_ = 0;
};

}  // namespace

std::string train_tokenizer(const TokenizerTrainOptions& o) {
  const std::string model_path =
      o.model_path.empty() ? (fs::path(o.data_dir) / "tokenizer.model").string() : o.model_path;
  // Sample: each domain's training documents in hash order until its byte budget is
  // spent, so every domain weighs alike whatever its size, and the sample is fixed.
  std::vector<std::string> lines;
  for (const std::string& domain : domain_names()) {
    std::vector<std::string> docs =
        read_jsonl_texts((fs::path(o.data_dir) / "corpus" / domain / "train.jsonl").string());
    if (docs.empty()) fail("tokenizer: domain '", domain, "' has no training documents");
    std::vector<std::pair<uint64_t, size_t>> order;
    for (size_t i = 0; i < docs.size(); ++i) order.push_back({fnv1a64(docs[i]), i});
    std::sort(order.begin(), order.end());
    size_t bytes = 0;
    for (auto [h, i] : order) {
      if (bytes >= o.bytes_per_domain) break;
      size_t p = 0;
      const std::string& d = docs[i];
      while (p <= d.size()) {
        size_t e = d.find('\n', p);
        if (e == std::string::npos) e = d.size();
        if (e > p) lines.emplace_back(d.substr(p, std::min<size_t>(e - p, 8192)));
        p = e + 1;
      }
      bytes += d.size();
    }
  }
  if (o.verbose)
    std::fprintf(stderr, "tokenizer: training BPE, vocab %d, on %zu lines\n", o.vocab_size,
                 lines.size());
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"byte_fallback", "true"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "true"},
      {"split_digits", "true"},
      {"allow_whitespace_only_pieces", "true"},
      {"character_coverage", "0.9995"},
      {"max_sentence_length", "16384"},
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"num_threads", std::to_string(o.threads)},
      {"minloglevel", o.verbose ? "0" : "2"},
  };
  LineIterator it(&lines);
  std::string proto;
  const auto st = sentencepiece::SentencePieceTrainer::Train(args, &it, &proto);
  if (!st.ok()) fail("tokenizer: SentencePiece training failed: ", st.ToString());
  const std::string tmp = model_path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(proto.data(), static_cast<std::streamsize>(proto.size()));
    if (!f) fail("cannot write ", tmp);
  }
  fs::rename(tmp, model_path);
  return model_path;
}

Vocab vocab_from_sentencepiece(const std::string& model_path) {
  sentencepiece::SentencePieceProcessor sp;
  const auto st = sp.Load(model_path);
  if (!st.ok()) fail("cannot load SentencePiece model ", model_path, ": ", st.ToString());
  Vocab v;
  const int n = sp.GetPieceSize();
  for (int i = 0; i < n; ++i) {
    v.tokens.push_back(sp.IdToPiece(i));
    v.scores.push_back(sp.GetScore(i));
    TokenType t = TokenType::Normal;
    if (sp.IsUnknown(i))
      t = TokenType::Unknown;
    else if (sp.IsControl(i))
      t = TokenType::Control;
    else if (sp.IsByte(i))
      t = TokenType::Byte;
    else if (sp.IsUnused(i))
      t = TokenType::Unused;
    v.types.push_back(t);
  }
  v.bos = sp.bos_id();
  v.eos = sp.eos_id();
  v.unk = sp.unk_id();
  v.pad = sp.pad_id();
  v.add_bos = true;
  v.add_space_prefix = true;
  return v;
}

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

std::string token_file_path(const std::string& data_dir, const std::string& name,
                            const std::string& split) {
  return (fs::path(data_dir) / "tokens" / (name + "." + split + ".tok")).string();
}

void encode_corpora(const std::string& data_dir, const std::string& model_path, bool verbose) {
  sentencepiece::SentencePieceProcessor sp;
  const auto st = sp.Load(model_path);
  if (!st.ok()) fail("cannot load SentencePiece model ", model_path, ": ", st.ToString());
  if (sp.GetPieceSize() > 65536) fail("token files hold 16-bit ids; the vocabulary is too big");
  const Vocab v = vocab_from_sentencepiece(model_path);
  fs::create_directories(fs::path(data_dir) / "tokens");
  for (const std::string& domain : domain_names()) {
    for (const char* split : {"train", "valid", "test"}) {
      const std::vector<std::string> docs = read_jsonl_texts(
          (fs::path(data_dir) / "corpus" / domain / (std::string(split) + ".jsonl")).string());
      if (docs.empty()) fail("domain '", domain, "' has no ", split, " documents");
      TokenFile f;
      f.n_vocab = static_cast<uint32_t>(v.tokens.size());
      f.fingerprint = vocab_fingerprint(v);
      std::vector<int> ids;
      for (const std::string& d : docs) {
        const auto s = sp.Encode(d, &ids);
        if (!s.ok()) fail("encoding a ", domain, " document failed: ", s.ToString());
        f.tokens.push_back(static_cast<uint16_t>(v.bos));
        for (int id : ids) f.tokens.push_back(static_cast<uint16_t>(id));
        f.tokens.push_back(static_cast<uint16_t>(v.eos));
      }
      write_token_file(token_file_path(data_dir, domain, split), f);
      if (verbose)
        std::fprintf(stderr, "tokens: %-10s %-5s %9zu tokens, %6zu documents\n", domain.c_str(),
                     split, f.tokens.size(), docs.size());
    }
  }
}

}  // namespace cln::train
