// Tokenizer training with libsentencepiece and the encoded corpora.
#include "clone/data/tokenizer_train.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "clone/core/error.h"
#include "clone/core/hash.h"
#include "clone/data/corpus.h"
#include "clone/data/token_file.h"

namespace cln::data {
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

}  // namespace cln::data
