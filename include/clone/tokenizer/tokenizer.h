// The SentencePiece-style vocabulary stored in GGUF (tokenizer.ggml.model = "llama"):
// tokens, scores and token types, BOS/EOS/UNK ids, byte-fallback tokens <0x00>..<0xFF>.
// Encoding gives the same ids as libsentencepiece's BPE model on the same vocabulary.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cln {

class GgufFile;
class GgufWriter;

// ggml's token types
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

struct Vocab {
  std::vector<std::string> tokens;  // pieces, with U+2581 for spaces
  std::vector<float> scores;
  std::vector<TokenType> types;
  int32_t bos = 1, eos = 2, unk = 0;
  int32_t pad = -1;
  bool add_bos = true;
  bool add_space_prefix = true;  // prepend U+2581 to the text, as SentencePiece does
};

class Tokenizer {
 public:
  explicit Tokenizer(Vocab v);
  // Reads tokenizer.ggml.* keys; throws cln::Error if the model kind is not "llama"
  // or arrays disagree in length.
  static Tokenizer from_gguf(const GgufFile& f);
  // Writes the tokenizer.ggml.* keys.
  void to_gguf(GgufWriter& w) const;

  // SentencePiece BPE encoding. Invalid UTF-8 is handled as SentencePiece does: each
  // malformed byte becomes U+FFFD before tokenizing. Control and unused tokens are never
  // produced from text. Throws cln::Error only if the text needs an unknown token and
  // the vocabulary has neither byte tokens nor an unknown token.
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const;
  // The bytes one token stands for (byte tokens give their byte; U+2581 becomes a space;
  // control and unused tokens give nothing; the unknown token gives " \u2047 " as in
  // SentencePiece). Throws cln::Error for an id outside the vocabulary.
  std::string token_to_piece(int32_t id) const;
  // Whole text; drops the leading space that add_space_prefix introduced.
  std::string decode(std::span<const int32_t> ids) const;

  const Vocab& vocab() const { return v_; }
  int32_t n_vocab() const { return static_cast<int32_t>(v_.tokens.size()); }
  int32_t bos() const { return v_.bos; }
  int32_t eos() const { return v_.eos; }
  // True when the vocabulary has byte tokens <0xXX>: unknown characters become their bytes.
  bool byte_fallback() const;

 private:
  Vocab v_;
  // internal lookup structures are built in the constructor (piece -> id map, byte ids)
  struct Index;
  std::shared_ptr<const Index> index_;
};

}  // namespace cln
