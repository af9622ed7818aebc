// SentencePiece-style BPE over a GGUF "llama" vocabulary.
//
// Encoding follows SentencePiece's BPE model (bpe_model.cc) with the normalizer settings
// that Llama vocabularies imply (identity rule, dummy prefix, whitespace kept):
//   1. normalize: each malformed UTF-8 byte becomes U+FFFD, ' ' becomes U+2581, and a
//      U+2581 is prepended to non-empty text when add_space_prefix is set;
//   2. split into characters; user-defined pieces are matched first (longest at each
//      position) and frozen;
//   3. repeatedly merge the adjacent pair whose concatenation is a piece with the highest
//      score (ties: leftmost), using a max-heap of candidate pairs with lazy deletion;
//   4. map symbols to ids: merged unused pieces are split back into the pair that last
//      proposed them; characters not in the vocabulary fall back to byte tokens, or to one
//      unknown token per run of unknown characters when there are no byte tokens.
#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <string>
#include <unordered_map>

#include "clone/core/error.h"
#include "clone/tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace cln {

namespace {

struct SvHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using PieceMap = std::unordered_map<std::string, int32_t, SvHash, std::equal_to<>>;

constexpr std::string_view kSpace = "\xE2\x96\x81";         // U+2581, SentencePiece's space
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";   // U+FFFD
constexpr std::string_view kUnkSurface = " \xE2\x81\x87 ";  // " U+2047 ", SentencePiece's

// Pieces BPE may form: SentencePiece keeps normal, user-defined and unused pieces in its
// piece table and everything else (unknown, control, byte) apart.
bool mergeable(TokenType t) {
  return t == TokenType::Normal || t == TokenType::UserDefined || t == TokenType::Unused ||
         t == TokenType::Undefined;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xAB>" -> 0xAB, or -1.
int parse_byte_piece(std::string_view p) {
  if (p.size() != 6 || p.substr(0, 3) != "<0x" || p[5] != '>') return -1;
  const int hi = hex_digit(p[3]), lo = hex_digit(p[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

}  // namespace

struct Tokenizer::Index {
  PieceMap pieces;        // mergeable pieces -> id (the last id wins for duplicates, as llama.cpp)
  PieceMap user_defined;  // user-defined pieces -> id, matched before BPE
  std::vector<size_t> user_defined_lengths;  // distinct byte lengths, longest first
  std::array<int32_t, 256> byte_id;          // byte -> id of <0xXX>, or -1
  bool has_bytes = false;
};

namespace {

// One symbol of the text being merged: a span of the normalized text, linked to its
// neighbours. A symbol absorbed into its left neighbour gets len 0.
struct Symbol {
  uint32_t start;
  uint32_t len;
  int32_t prev;
  int32_t next;
  bool frozen;  // a user-defined piece: never merged
};

// A candidate merge of symbols left and right; stale once either has changed, which the
// combined length detects (a symbol only grows, or empties when absorbed).
struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t len;
};

// Max-heap order: higher score first, then the leftmost pair.
struct BigramLess {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

Tokenizer::Tokenizer(Vocab v) : v_(std::move(v)) {
  const size_t n = v_.tokens.size();
  if (v_.scores.size() != n || v_.types.size() != n)
    fail("tokenizer: vocabulary arrays disagree in length: ", n, " tokens, ", v_.scores.size(),
         " scores, ", v_.types.size(), " token types");
  if (n == 0) fail("tokenizer: the vocabulary is empty");
  if (n > static_cast<size_t>(INT32_MAX))
    fail("tokenizer: vocabulary of ", n, " tokens is too big");
  auto check_id = [&](int32_t id, const char* what) {
    if (id < -1 || id >= static_cast<int64_t>(n))
      fail("tokenizer: ", what, " token id ", id, " is outside the vocabulary of ", n, " tokens");
  };
  check_id(v_.bos, "BOS");
  check_id(v_.eos, "EOS");
  check_id(v_.unk, "unknown");
  check_id(v_.pad, "padding");

  auto idx = std::make_shared<Index>();
  idx->byte_id.fill(-1);
  idx->pieces.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    const std::string& p = v_.tokens[i];
    const TokenType t = v_.types[i];
    if (static_cast<int32_t>(t) < 0 || static_cast<int32_t>(t) > 6)
      fail("tokenizer: token ", i, " has unknown token type ", static_cast<int32_t>(t));
    if (t == TokenType::Byte) {
      const int b = parse_byte_piece(p);
      if (b < 0) fail("tokenizer: byte token ", i, " is \"", p, "\", expected <0xXX>");
      idx->byte_id[static_cast<size_t>(b)] = id;
      idx->has_bytes = true;
    } else if (mergeable(t) && !p.empty()) {
      idx->pieces.insert_or_assign(p, id);
      if (t == TokenType::UserDefined) idx->user_defined.insert_or_assign(p, id);
    }
  }
  for (auto& [p, id] : idx->user_defined) idx->user_defined_lengths.push_back(p.size());
  auto& lens = idx->user_defined_lengths;
  std::sort(lens.begin(), lens.end(), std::greater<>());
  lens.erase(std::unique(lens.begin(), lens.end()), lens.end());
  index_ = std::move(idx);
}

bool Tokenizer::byte_fallback() const {
  return index_->has_bytes;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos) const {
  const Index& ix = *index_;
  std::vector<int32_t> out;
  if (add_bos && v_.bos >= 0) out.push_back(v_.bos);
  if (text.empty()) return out;
  // Offsets into the normalized text (at most 3 bytes per input byte, plus the prefix)
  // are 32-bit.
  if (text.size() > UINT32_MAX / 4) fail("tokenizer: text of ", text.size(), " bytes is too long");

  // 1. Normalize, remembering where each character starts.
  std::string norm;
  norm.reserve(text.size() + text.size() / 2 + kSpace.size());
  std::vector<uint32_t> char_start;
  char_start.reserve(text.size() + 1);
  if (v_.add_space_prefix) {
    char_start.push_back(0);
    norm += kSpace;
  }
  for (size_t i = 0; i < text.size();) {
    char_start.push_back(static_cast<uint32_t>(norm.size()));
    const size_t len = utf8_valid_char_len(text.substr(i));
    if (len == 0) {
      norm += kReplacement;
      i += 1;
    } else if (text[i] == ' ') {
      norm += kSpace;
      i += 1;
    } else {
      norm.append(text.data() + i, len);
      i += len;
    }
  }
  char_start.push_back(static_cast<uint32_t>(norm.size()));
  const std::string_view nv(norm);

  // 2. Symbols: characters, or whole user-defined pieces.
  std::vector<Symbol> sym;
  sym.reserve(char_start.size());
  for (size_t c = 0; c + 1 < char_start.size();) {
    const uint32_t start = char_start[c];
    uint32_t len = 0;
    for (size_t ulen : ix.user_defined_lengths) {
      const size_t end = start + ulen;
      // norm is well-formed UTF-8, so a match ends on a character boundary unless the
      // next byte is a continuation byte (possible only for a malformed piece).
      if (end <= norm.size() && (end == norm.size() || (nv[end] & 0xC0) != 0x80) &&
          ix.user_defined.count(nv.substr(start, ulen))) {
        len = static_cast<uint32_t>(ulen);
        break;
      }
    }
    const bool frozen = len > 0;
    size_t c_end = c + 1;
    while (char_start[c_end] < start + len) ++c_end;
    len = char_start[c_end] - start;
    const int32_t i = static_cast<int32_t>(sym.size());
    sym.push_back({start, len, i - 1, i + 1, frozen});
    c = c_end;
  }
  sym.back().next = -1;

  // 3. Merge by score. Unused pieces formed by a merge are split back afterwards into the
  // pair that most recently proposed them (SentencePiece's rev_merge), kept as
  // (start, left length, total length) in the normalized text.
  struct Split {
    uint32_t start, left_len, len;
  };
  std::unordered_map<int32_t, Split> rev_merge;
  std::vector<Bigram> heap;
  heap.reserve(sym.size());
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0 || sym[l].frozen || sym[r].frozen) return;
    const uint32_t len = sym[l].len + sym[r].len;
    const auto it = ix.pieces.find(nv.substr(sym[l].start, len));
    if (it == ix.pieces.end()) return;
    const int32_t id = it->second;
    heap.push_back({v_.scores[id], l, r, len});
    std::push_heap(heap.begin(), heap.end(), BigramLess{});
    if (v_.types[id] == TokenType::Unused) rev_merge[id] = {sym[l].start, sym[l].len, len};
  };
  for (int32_t i = 1; i < static_cast<int32_t>(sym.size()); ++i) try_add(i - 1, i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), BigramLess{});
    const Bigram b = heap.back();
    heap.pop_back();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  // 4. Symbols to ids.
  out.reserve(out.size() + sym.size());
  bool prev_unk = false;
  auto unknown = [&](std::string_view s) {
    if (ix.has_bytes) {
      for (char ch : s) {
        const int32_t id = ix.byte_id[static_cast<uint8_t>(ch)];
        if (id >= 0) {
          out.push_back(id);
        } else if (v_.unk >= 0) {
          out.push_back(v_.unk);
        } else {
          fail("tokenizer: byte token <0x", "0123456789ABCDEF"[static_cast<uint8_t>(ch) >> 4],
               "0123456789ABCDEF"[ch & 15], "> is missing and there is no unknown token");
        }
      }
      prev_unk = false;
      return;
    }
    if (v_.unk < 0)
      fail(
          "tokenizer: the text has characters outside the vocabulary, which has neither byte "
          "tokens nor an unknown token");
    // A run of unknown characters gives one unknown token, as SentencePiece does.
    if (!prev_unk) out.push_back(v_.unk);
    prev_unk = true;
  };
  std::function<void(uint32_t, uint32_t)> emit = [&](uint32_t start, uint32_t len) {
    const std::string_view s = nv.substr(start, len);
    const auto it = ix.pieces.find(s);
    if (it != ix.pieces.end()) {
      const int32_t id = it->second;
      if (v_.types[id] != TokenType::Unused) {
        out.push_back(id);
        prev_unk = false;
        return;
      }
      const auto rm = rev_merge.find(id);
      if (rm != rev_merge.end()) {
        const Split sp = rm->second;
        emit(sp.start, sp.left_len);
        emit(sp.start + sp.left_len, sp.len - sp.left_len);
        return;
      }
      // an unused piece that is a single character: not produced from text
    }
    unknown(s);
  };
  for (int32_t i = 0; i >= 0; i = sym[i].next) emit(sym[i].start, sym[i].len);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  if (id < 0 || id >= n_vocab())
    fail("tokenizer: token id ", id, " is outside the vocabulary of ", n_vocab(), " tokens");
  const std::string& p = v_.tokens[id];
  switch (v_.types[id]) {
    case TokenType::Byte:
      return std::string(1, static_cast<char>(parse_byte_piece(p)));
    case TokenType::Unknown:
      return std::string(kUnkSurface);
    case TokenType::Control:
    case TokenType::Unused:
      return {};
    default:
      break;
  }
  std::string s;
  s.reserve(p.size());
  for (size_t i = 0; i < p.size();) {
    if (p.compare(i, kSpace.size(), kSpace) == 0) {
      s += ' ';
      i += kSpace.size();
    } else {
      s += p[i++];
    }
  }
  return s;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string s;
  bool first = true;
  for (int32_t id : ids) {
    std::string piece = token_to_piece(id);
    if (piece.empty()) continue;
    // The space that add_space_prefix put before the text comes back at the start of the
    // first text piece; SentencePiece's decoder drops it.
    const TokenType t = v_.types[id];
    if (first && v_.add_space_prefix &&
        (t == TokenType::Normal || t == TokenType::UserDefined || t == TokenType::Undefined)) {
      if (v_.tokens[id].compare(0, kSpace.size(), kSpace) == 0) piece.erase(0, 1);
    }
    first = false;
    s += piece;
  }
  return s;
}

}  // namespace cln
