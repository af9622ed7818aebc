// The tokenizer on small hand-made vocabularies, where each expected id sequence can be
// worked out by hand from SentencePiece's BPE rules; decoding; bad vocabularies; speed.
#include <gtest/gtest.h>

#include <chrono>
#include <tuple>

#include "clone/core/error.h"
#include "clone/tokenizer/tokenizer.h"

namespace cln {
namespace {

constexpr const char* kSp = "\xE2\x96\x81";  // U+2581

struct Piece {
  std::string text;
  float score;
  TokenType type = TokenType::Normal;
};

// <unk> <s> </s>, then the 256 byte tokens if asked, then the given pieces.
Vocab make_vocab(const std::vector<Piece>& pieces, bool bytes, bool space_prefix = false) {
  Vocab v;
  auto add = [&](std::string t, float s, TokenType ty) {
    v.tokens.push_back(std::move(t));
    v.scores.push_back(s);
    v.types.push_back(ty);
  };
  add("<unk>", 0, TokenType::Unknown);
  add("<s>", 0, TokenType::Control);
  add("</s>", 0, TokenType::Control);
  if (bytes) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      add(name, 0, TokenType::Byte);
    }
  }
  for (const Piece& p : pieces) add(p.text, p.score, p.type);
  v.add_space_prefix = space_prefix;
  return v;
}

// The id of a piece, by text.
int32_t id_of(const Tokenizer& t, std::string_view piece) {
  for (int32_t i = 0; i < t.n_vocab(); ++i)
    if (t.vocab().tokens[i] == piece && t.vocab().types[i] != TokenType::Byte) return i;
  ADD_FAILURE() << "no piece " << piece;
  return -1;
}
int32_t byte_id(int b) {
  return 3 + b;
}

std::vector<std::string> pieces_of(const Tokenizer& t, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(t.vocab().tokens[id]);
  return out;
}
using Pieces = std::vector<std::string>;

TEST(Tokenizer, MergesHighestScoreFirst) {
  const Tokenizer t(
      make_vocab({{"a", -10}, {"b", -10}, {"c", -10}, {"ab", -2}, {"bc", -1}}, false));
  // "bc" outscores "ab"; then "a"+"bc" is not a piece, so it stops there.
  EXPECT_EQ(pieces_of(t, t.encode("abc", false)), (Pieces{"a", "bc"}));
  // "ab" first, then "ab"+"c" = "abc" even though its score is lower than "bc"'s.
  const Tokenizer t2(
      make_vocab({{"a", -10}, {"b", -10}, {"c", -10}, {"ab", -1}, {"bc", -2}, {"abc", -5}}, false));
  EXPECT_EQ(pieces_of(t2, t2.encode("abc", false)), (Pieces{"abc"}));
}

TEST(Tokenizer, TiesGoToTheLeftmostPair) {
  const Tokenizer t(make_vocab({{"a", 0}, {"aa", -1}}, false));
  EXPECT_EQ(pieces_of(t, t.encode("aaa", false)), (Pieces{"aa", "a"}));
  const Tokenizer t2(make_vocab({{"a", 0}, {"b", 0}, {"ab", -1}, {"ba", -1}}, false));
  EXPECT_EQ(pieces_of(t2, t2.encode("aba", false)), (Pieces{"ab", "a"}));
  EXPECT_EQ(pieces_of(t2, t2.encode("bab", false)), (Pieces{"ba", "b"}));
}

TEST(Tokenizer, SpacesBecomeU2581AndPrefixIsAdded) {
  const std::string sp = kSp;
  const Tokenizer t(make_vocab({{sp, 0}, {"a", 0}, {"b", 0}, {sp + "a", -1}, {sp + sp, -2}}, false,
                               /*space_prefix=*/true));
  EXPECT_EQ(pieces_of(t, t.encode("a b", false)), (Pieces{sp + "a", sp, "b"}));
  // U+2581 U+2581 a: the pair (U+2581, a) outscores (U+2581, U+2581).
  EXPECT_EQ(pieces_of(t, t.encode(" a", false)), (Pieces{sp, sp + "a"}));
  EXPECT_EQ(pieces_of(t, t.encode("   ", false)), (Pieces{sp + sp, sp + sp}));
  EXPECT_EQ(pieces_of(t, t.encode("a ", false)), (Pieces{sp + "a", sp}));
  // Empty text: nothing, not even the prefix.
  EXPECT_TRUE(t.encode("", false).empty());
  EXPECT_EQ(t.encode("", true), (std::vector<int32_t>{1}));
  EXPECT_EQ(t.encode("a", true), (std::vector<int32_t>{1, id_of(t, sp + "a")}));
}

TEST(Tokenizer, ByteFallbackForUnknownCharacters) {
  const Tokenizer t(make_vocab({{"a", 0}}, true));
  EXPECT_TRUE(t.byte_fallback());
  // U+00E9 is C3 A9; U+1F600 is F0 9F 98 80.
  EXPECT_EQ(t.encode("a\xC3\xA9\xF0\x9F\x98\x80", false),
            (std::vector<int32_t>{id_of(t, "a"), byte_id(0xC3), byte_id(0xA9), byte_id(0xF0),
                                  byte_id(0x9F), byte_id(0x98), byte_id(0x80)}));
  // Tabs and newlines are characters like any other.
  EXPECT_EQ(t.encode("\t\n", false), (std::vector<int32_t>{byte_id('\t'), byte_id('\n')}));
}

TEST(Tokenizer, OneUnknownTokenPerRunWithoutByteTokens) {
  const Tokenizer t(make_vocab({{"a", 0}}, false));
  EXPECT_FALSE(t.byte_fallback());
  EXPECT_EQ(t.encode("xyaz\xC3\xA9q", false), (std::vector<int32_t>{0, id_of(t, "a"), 0}));
  Vocab v = make_vocab({{"a", 0}}, false);
  v.unk = -1;
  const Tokenizer no_unk(std::move(v));
  EXPECT_EQ(no_unk.encode("aa", false),
            (std::vector<int32_t>{id_of(no_unk, "a"), id_of(no_unk, "a")}));
  EXPECT_THROW(no_unk.encode("ax", false), Error);
}

TEST(Tokenizer, ControlTokensAreNeverProducedFromText) {
  const Tokenizer t(make_vocab(
      {{"<", 0}, {"s", 0}, {">", 0}, {"ab", 5, TokenType::Control}, {"a", 0}, {"b", 0}}, true));
  // "<s>" the text is three characters, not BOS; "ab" is a control piece, not formed.
  EXPECT_EQ(pieces_of(t, t.encode("<s>", false)), (Pieces{"<", "s", ">"}));
  EXPECT_EQ(pieces_of(t, t.encode("ab", false)), (Pieces{"a", "b"}));
  // Byte tokens are only fallback: "<0x41>" as text is not the byte token for 'A'.
  for (int32_t id : t.encode("<0x41>", false)) EXPECT_NE(id, byte_id('A'));
}

TEST(Tokenizer, UnusedPiecesAreSplitBack) {
  const Tokenizer t(make_vocab(
      {{"a", 0}, {"b", 0}, {"c", 0}, {"ab", -1, TokenType::Unused}, {"abc", -2}}, false));
  // "ab" (unused) helps to reach "abc" ...
  EXPECT_EQ(pieces_of(t, t.encode("abc", false)), (Pieces{"abc"}));
  // ... but is never produced itself.
  EXPECT_EQ(pieces_of(t, t.encode("ab", false)), (Pieces{"a", "b"}));
  EXPECT_EQ(pieces_of(t, t.encode("abab", false)), (Pieces{"a", "b", "a", "b"}));
}

TEST(Tokenizer, UserDefinedPiecesMatchFirst) {
  const Tokenizer t(
      make_vocab({{"a", 0}, {"b", 0}, {"ab", 10}, {"ba", 0, TokenType::UserDefined}}, false));
  // "ba" is cut out before merging, although "ab" would outscore it.
  EXPECT_EQ(pieces_of(t, t.encode("aba", false)), (Pieces{"a", "ba"}));
  EXPECT_EQ(pieces_of(t, t.encode("abab", false)), (Pieces{"a", "ba", "b"}));
}

TEST(Tokenizer, MalformedUtf8BecomesReplacementCharacter) {
  const Tokenizer t(make_vocab({{"a", 0}}, true));
  const std::vector<int32_t> fffd = {byte_id(0xEF), byte_id(0xBF), byte_id(0xBD)};
  auto times = [](std::vector<int32_t> v, int n) {
    std::vector<int32_t> o;
    for (int i = 0; i < n; ++i) o.insert(o.end(), v.begin(), v.end());
    return o;
  };
  EXPECT_EQ(t.encode("\xFF", false), fffd);
  EXPECT_EQ(t.encode("\xC3", false), fffd);                    // truncated
  EXPECT_EQ(t.encode("\xC0\xAF", false), times(fffd, 2));      // overlong '/'
  EXPECT_EQ(t.encode("\xED\xA0\x80", false), times(fffd, 3));  // surrogate
  EXPECT_EQ(
      t.encode("\xE2\x82"
               "a",
               false),
      (std::vector<int32_t>{fffd[0], fffd[1], fffd[2], fffd[0], fffd[1], fffd[2], id_of(t, "a")}));
  // Text that ends inside a character is not read past its end.
  const std::string buf = "a\xF0\x9F\x98\x80";
  EXPECT_EQ(t.encode(std::string_view(buf).substr(0, 3), false).size(), 1u + 2 * 3);
}

TEST(Tokenizer, TokenToPieceAndDecode) {
  const std::string sp = kSp;
  const Tokenizer t(make_vocab({{sp, 0}, {"a", 0}, {sp + "a", -1}, {"b", 0}}, true, true));
  EXPECT_EQ(t.token_to_piece(id_of(t, sp + "a")), " a");
  EXPECT_EQ(t.token_to_piece(byte_id(0x41)), "A");
  EXPECT_EQ(t.token_to_piece(byte_id(0xFF)), "\xFF");
  EXPECT_EQ(t.token_to_piece(1), "");                // control
  EXPECT_EQ(t.token_to_piece(0), " \xE2\x81\x87 ");  // unknown, as SentencePiece shows it
  EXPECT_THROW(t.token_to_piece(-1), Error);
  EXPECT_THROW(t.token_to_piece(t.n_vocab()), Error);
  for (const std::string s :
       {"a b", "  a", "a  ", "b\xC3\xA9\xF0\x9F\x98\x80\n\tb", " ", "ab ba"}) {
    EXPECT_EQ(t.decode(t.encode(s, true)), s) << s;
  }
  // Byte tokens that do not form whole characters still come back as the raw bytes.
  const std::vector<int32_t> raw = {1, byte_id(0xE2), byte_id(0x82)};
  EXPECT_EQ(t.decode(raw), "\xE2\x82");
}

TEST(Tokenizer, BadVocabularies) {
  auto expect_error = [](Vocab v, const std::string& needle) {
    try {
      Tokenizer t(std::move(v));
      ADD_FAILURE() << "no error, expected one mentioning " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  Vocab v = make_vocab({{"a", 0}}, true);
  v.scores.pop_back();
  expect_error(v, "disagree in length");
  v = make_vocab({{"a", 0}}, true);
  v.types.push_back(TokenType::Normal);
  expect_error(v, "disagree in length");
  v = make_vocab({{"a", 0}}, true);
  v.tokens[10] = "<0xZZ>";
  expect_error(v, "<0xZZ>");
  v = make_vocab({{"a", 0}}, true);
  v.bos = static_cast<int32_t>(v.tokens.size());
  expect_error(v, "BOS token id");
  v = make_vocab({{"a", 0}}, true);
  v.types[5] = static_cast<TokenType>(9);
  expect_error(v, "token type 9");
  expect_error(Vocab{}, "empty");
}

// SentencePiece merging is O(n log n) with a heap; a quadratic rescan would take seconds
// here (a long run of one character, where every pair is a candidate at every step).
TEST(Tokenizer, LongInputsAreFast) {
  std::vector<Piece> pieces = {{"a", 0}, {"b", 0}};
  std::string p = "a";
  for (int i = 1; i <= 6; ++i) {  // a, aa, aaaa, ... 64 a's
    p += p;
    pieces.push_back({p, -static_cast<float>(i)});
  }
  pieces.push_back({"ab", -0.5f});
  pieces.push_back({"c", 0});
  const Tokenizer t(make_vocab(pieces, true));
  const std::string text = std::string(200000, 'a') + "c" + std::string(100000, 'b') + "c" + [] {
    std::string s;
    for (int i = 0; i < 50000; ++i) s += "ab";
    return s;
  }();
  const auto t0 = std::chrono::steady_clock::now();
  const auto ids = t.encode(text, false);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(ids.size(), 200000u / 64 + 1 + 100000u + 1 + 50000u);
  EXPECT_LT(ms, 2000.0) << "encoding 400 KB took " << ms << " ms";
  std::printf("encode of %zu bytes into %zu tokens: %.1f ms\n", text.size(), ids.size(), ms);
}

}  // namespace
}  // namespace cln
