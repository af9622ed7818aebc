// The tokenizer as GGUF files carry it: the golden vocabulary written by llama.cpp's tools
// must reproduce llama.cpp's ids exactly; to_gguf/from_gguf round-trip; bad tokenizer keys
// give a clear cln::Error; `clone tokenize` prints what the library computes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "clone/core/error.h"
#include "clone/gguf/gguf.h"
#include "clone/tokenizer/tokenizer.h"

namespace cln {
namespace {

namespace fs = std::filesystem;
const std::string kGolden = CLONE_SHARED_DIR "/data/golden-gguf/";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "[1, 259, ...]" -> ids
std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::string num;
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      num += c;
    } else if (!num.empty()) {
      ids.push_back(std::stoi(num));
      num.clear();
    }
  }
  if (!num.empty()) ids.push_back(std::stoi(num));
  return ids;
}

std::string temp_path(const std::string& name) {
  const fs::path dir = fs::path(CLONE_BINARY_DIR) / "test-tmp" / "tokenizer";
  fs::create_directories(dir);
  return (dir / name).string();
}

TEST(TokenizerGguf, GoldenIdsFromLlamaCpp) {
  const auto f = GgufFile::open(kGolden + "golden-f32.gguf");
  const Tokenizer tok = Tokenizer::from_gguf(*f);
  EXPECT_EQ(tok.n_vocab(), 1024);
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_TRUE(tok.byte_fallback());
  EXPECT_TRUE(tok.vocab().add_bos);
  EXPECT_TRUE(tok.vocab().add_space_prefix);  // no key: llama.cpp's default
  const std::string text = read_file(kGolden + "jargon-slice.txt");
  const std::vector<int32_t> want = parse_ids(read_file(kGolden + "jargon-slice.ids"));
  ASSERT_EQ(want.size(), 10400u);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> got = tok.encode(text, true);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "at token " << i;
  std::printf("encoded %zu bytes into %zu tokens in %.2f ms\n", text.size(), got.size(), ms);
  // Milliseconds, not seconds (generous for sanitizer builds).
  EXPECT_LT(ms, 250.0);
  // And back: the text has no malformed UTF-8 and no literal U+2581.
  EXPECT_EQ(tok.decode(got), text);
}

TEST(TokenizerGguf, SameVocabularyInEveryGoldenFile) {
  const Tokenizer ref = Tokenizer::from_gguf(*GgufFile::open(kGolden + "golden-f32.gguf"));
  for (const char* name : {"golden-q8_0.gguf", "golden-q4_0.gguf", "golden-per-layer-f32.gguf",
                           "golden-per-layer-q8_0.gguf", "golden-per-layer-q4_0.gguf"}) {
    const Tokenizer t = Tokenizer::from_gguf(*GgufFile::open(kGolden + name));
    // Pieces, scores and types: all that encoding depends on.
    EXPECT_EQ(t.vocab().tokens, ref.vocab().tokens) << name;
    EXPECT_EQ(t.vocab().scores, ref.vocab().scores) << name;
    EXPECT_EQ(t.vocab().types, ref.vocab().types) << name;
    EXPECT_EQ(t.bos(), ref.bos()) << name;
    EXPECT_EQ(t.eos(), ref.eos()) << name;
  }
}

TEST(TokenizerGguf, RoundTripThroughGgufWriter) {
  Vocab v = Tokenizer::from_gguf(*GgufFile::open(kGolden + "golden-f32.gguf")).vocab();
  v.types[700] = TokenType::UserDefined;
  v.types[701] = TokenType::Unused;
  v.scores[702] = -1.5f;
  v.pad = 2;
  v.add_bos = false;
  v.add_space_prefix = false;
  const Tokenizer tok(v);
  GgufWriter w;
  w.set("general.architecture", GgufValue::str("llama"));
  tok.to_gguf(w);
  const std::string path = temp_path("roundtrip.gguf");
  w.write(path);
  const auto f = GgufFile::open(path);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "llama");
  const Tokenizer back = Tokenizer::from_gguf(*f);
  const Vocab& b = back.vocab();
  EXPECT_EQ(b.tokens, v.tokens);
  EXPECT_EQ(b.scores, v.scores);
  EXPECT_EQ(b.types, v.types);
  EXPECT_EQ(b.bos, v.bos);
  EXPECT_EQ(b.eos, v.eos);
  EXPECT_EQ(b.unk, v.unk);
  EXPECT_EQ(b.pad, 2);
  EXPECT_FALSE(b.add_bos);
  EXPECT_FALSE(b.add_space_prefix);
}

// Writes a GGUF whose tokenizer keys are the golden ones changed by edit, and expects
// from_gguf to throw an error that names the file and contains needle.
void expect_bad(const std::string& name, const std::function<void(GgufWriter&)>& edit,
                const std::string& needle) {
  const Tokenizer good = Tokenizer::from_gguf(*GgufFile::open(kGolden + "golden-f32.gguf"));
  GgufWriter w;
  w.set("general.architecture", GgufValue::str("llama"));
  good.to_gguf(w);
  edit(w);
  const std::string path = temp_path(name + ".gguf");
  w.write(path);
  const auto f = GgufFile::open(path);
  try {
    Tokenizer::from_gguf(*f);
    ADD_FAILURE() << name << ": no error, expected one containing \"" << needle << "\"";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << name << ": " << msg;
    EXPECT_NE(msg.find(path), std::string::npos)
        << name << ": message does not name the file: " << msg;
  }
}

TEST(TokenizerGguf, BadTokenizerKeys) {
  expect_bad(
      "gpt2", [](GgufWriter& w) { w.set("tokenizer.ggml.model", GgufValue::str("gpt2")); },
      "\"gpt2\"");
  expect_bad(
      "short-scores",
      [](GgufWriter& w) {
        w.set("tokenizer.ggml.scores", GgufValue::arr_f32({0.0, 1.0}));
      },
      "disagree in length: 1024 tokens but 2 scores");
  expect_bad(
      "long-types",
      [](GgufWriter& w) {
        w.set("tokenizer.ggml.token_type", GgufValue::arr_i32(std::vector<int64_t>(1025, 1)));
      },
      "disagree in length: 1024 tokens but 1025 token types");
  expect_bad(
      "short-tokens",
      [](GgufWriter& w) {
        w.set("tokenizer.ggml.tokens", GgufValue::arr_str({"<unk>", "<s>", "</s>"}));
      },
      "disagree in length");
  expect_bad(
      "no-model", [](GgufWriter& w) { w.set("tokenizer.ggml.model", GgufValue::u32(1)); },
      "tokenizer.ggml.model");
  expect_bad(
      "tokens-not-strings",
      [](GgufWriter& w) { w.set("tokenizer.ggml.tokens", GgufValue::arr_f32({1.0})); },
      "tokenizer.ggml.tokens");
  expect_bad(
      "bad-type",
      [](GgufWriter& w) {
        std::vector<int64_t> t(1024, 1);
        t[500] = 42;
        w.set("tokenizer.ggml.token_type", GgufValue::arr_i32(t));
      },
      "token_type[500] = 42");
  expect_bad(
      "bos-outside",
      [](GgufWriter& w) { w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(5000)); },
      "BOS token id 5000");
}

TEST(TokenizerGguf, FileWithoutTokenizer) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::str("llama"));
  const std::string path = temp_path("no-tokenizer.gguf");
  w.write(path);
  try {
    Tokenizer::from_gguf(*GgufFile::open(path));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.model is missing"), std::string::npos)
        << e.what();
  }
}

// `clone tokenize` on the golden file prints llama.cpp's ids in the .ids file's own format.
TEST(TokenizeCommand, GoldenIds) {
  const std::string out = temp_path("jargon.ids");
  const std::string cmd = std::string(CLONE_CLI) + " tokenize -m " + kGolden +
                          "golden-f32.gguf -f " + kGolden + "jargon-slice.txt --ids > " + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  EXPECT_EQ(read_file(out), read_file(kGolden + "jargon-slice.ids"));
  // The table: one token a line, id then the piece.
  const std::string table = temp_path("table.txt");
  const std::string cmd2 = std::string(CLONE_CLI) + " tokenize -m " + kGolden +
                           "golden-f32.gguf -p 'Hi \xE2\x94\x80' > " + table;
  ASSERT_EQ(std::system(cmd2.c_str()), 0) << cmd2;
  EXPECT_EQ(read_file(table),
            "     1  <s>\n"
            "   397  \xE2\x96\x81H\n"
            "   278  i\n"
            "   259  \xE2\x96\x81\n"
            "   229  <0xE2>\n"
            "   151  <0x94>\n"
            "   131  <0x80>\n");
  // Bad input: a clear error and exit code 1.
  const std::string cmd3 = std::string(CLONE_CLI) + " tokenize -m " + kGolden +
                           "jargon-slice.txt -p x 2> " + temp_path("err.txt");
  const int rc = std::system(cmd3.c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 1) << rc;
  EXPECT_NE(read_file(temp_path("err.txt")).find("clone: error:"), std::string::npos);
}

}  // namespace
}  // namespace cln
