// clone's tokenizer against libsentencepiece (the reference SentencePiece implementation):
// the same vocabulary must give the same ids.
//   1. A BPE model that spm trains here with Llama's settings, converted to a clone Vocab
//      the way a GGUF converter does, on a text with Unicode, whitespace runs, unknown
//      characters, and on random UTF-8 and random bytes.
//   2. Random vocabularies written straight into SentencePiece's model format: score ties,
//      unused and user-defined pieces, control pieces, with and without byte fallback.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "clone/tokenizer/tokenizer.h"
#include "tokenizer/spm_proto.h"

namespace cln {
namespace {

using namespace std::string_literals;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Multilingual lines for training, so the model has pieces for accented letters, CJK and
// emoji (repeated so that they also get merges).
const char* const kMultilingual[] = {
    "Le cœur a ses raisons que la raison ne connaît point. Où est la gare ? Déjà vu, crème brûlée.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein. Schöne Grüße aus München!",
    "El niño comió paella en la playa; ¿qué más quería? Mañana será otro día.",
    "東京は日本の首都です。私は毎日コーヒーを飲みます。中文的字符也在这里。",
    "Привет, как дела? Я люблю читать книги. Ελληνικά γράμματα: αβγδε.",
    "Emoji: 😀 😂 👍 🚀 ❤️ — and symbols: → ← ∑ ∞ ± × ÷ °C €100 £5 "
    "¥7.",
    "\tindented with a tab\tand  double  spaces   and    four    spaces",
    "    def f(x):\n        return x + 1  # code with indentation",
};

// Feeds sentences to the trainer from memory.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(std::vector<std::string> lines) : lines_(std::move(lines)) {}
  bool done() const override { return i_ >= lines_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return lines_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  std::vector<std::string> lines_;
  size_t i_ = 0;
};

std::vector<std::string> training_lines() {
  std::vector<std::string> lines;
  std::istringstream jargon(read_file(CLONE_SHARED_DIR "/data/golden-gguf/jargon-slice.txt"));
  for (std::string l; std::getline(jargon, l);)
    if (!l.empty()) lines.push_back(l);
  for (int rep = 0; rep < 20; ++rep)
    for (const char* l : kMultilingual) lines.push_back(l);
  return lines;
}

// Trains a BPE model the way Llama's tokenizer was trained, as far as encoding can tell.
// Every flag is set on purpose:
//   model_type=bpe                  GGUF "llama" vocabularies are SentencePiece BPE models:
//                                   merges by piece score.
//   vocab_size=800                  small but large enough for multi-character pieces;
//   hard_vocab_limit=false          (the corpus may not support exactly 800).
//   byte_fallback=true              Llama vocabularies hold <0x00>..<0xFF>; characters
//                                   outside the vocabulary become their UTF-8 bytes.
//   character_coverage=1.0          every character of the corpus gets a piece, so the
//                                   unknown characters in the tests are exactly the unseen.
//   normalization_rule_name=identity  GGUF carries no normalizer and Llama's is identity;
//                                   the default nmt_nfkc would rewrite text before encoding.
//   add_dummy_prefix=true           Llama prepends U+2581 (GGUF add_space_prefix, default on).
//   remove_extra_whitespaces=false  Llama keeps space runs, leading and trailing spaces.
//   split_by_whitespace=true, split_digits=true, allow_whitespace_only_pieces=true
//                                   as Llama was trained: pieces do not span words, digits
//                                   stay single, and runs of U+2581 become pieces, which
//                                   the whitespace tests then exercise.
//   unk_id=0 bos_id=1 eos_id=2 pad_id=-1   Llama's special ids.
//   num_threads=1 shuffle_input_sentence=false input_sentence_size=0   deterministic;
//   minloglevel=1                   and quiet.
std::string train_model(const std::string& extra_flags) {
  const std::string args =
      "--model_type=bpe --vocab_size=800 --hard_vocab_limit=false --byte_fallback=true "
      "--character_coverage=1.0 --normalization_rule_name=identity --add_dummy_prefix=true "
      "--remove_extra_whitespaces=false --split_by_whitespace=true --split_digits=true "
      "--allow_whitespace_only_pieces=true --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 "
      "--num_threads=1 --shuffle_input_sentence=false --input_sentence_size=0 --minloglevel=1 "
      "" +
      extra_flags;
  LineIterator it(training_lines());
  std::string model;
  const auto st = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
  if (!st.ok()) throw std::runtime_error("spm training failed: " + st.ToString());
  return model;
}

// What a GGUF converter writes for a SentencePiece model: every piece with its score and
// type, SentencePiece's special ids, add_space_prefix from the normalizer.
Vocab vocab_from_spm(const sentencepiece::SentencePieceProcessor& sp, const std::string& model) {
  const std::vector<test::SpmPiece> proto = test::read_spm_pieces(model);
  EXPECT_EQ(proto.size(), static_cast<size_t>(sp.GetPieceSize()));
  Vocab v;
  for (int i = 0; i < sp.GetPieceSize(); ++i) {
    v.tokens.push_back(sp.IdToPiece(i));
    v.scores.push_back(sp.GetScore(i));
    TokenType t = TokenType::Normal;
    if (sp.IsUnknown(i))
      t = TokenType::Unknown;
    else if (sp.IsControl(i))
      t = TokenType::Control;
    else if (sp.IsUnused(i))
      t = TokenType::Unused;
    else if (sp.IsByte(i))
      t = TokenType::Byte;
    else if (proto[static_cast<size_t>(i)].type == 4)
      t = TokenType::UserDefined;
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

std::vector<int32_t> spm_ids(const sentencepiece::SentencePieceProcessor& sp, std::string_view s) {
  std::vector<int> ids;
  const auto st = sp.Encode(s, &ids);
  if (!st.ok()) throw std::runtime_error("spm encode failed: " + st.ToString());
  return {ids.begin(), ids.end()};
}

std::string escape(std::string_view s) {
  std::string o;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      o += static_cast<char>(c);
    } else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02X", c);
      o += b;
    }
  }
  return o;
}

// The test text: everything a tokenizer can get wrong.
const std::vector<std::string> kTexts = {
    "",
    " ",
    "  ",
    "\t",
    "\n",
    "Hello world",
    " leading space",
    "   three leading spaces",
    "trailing space ",
    "trailing spaces   ",
    "runs  of   spaces    between     words      here",
    "tabs\tand\nnewlines\r\n\tmixed \t \n ",
    "Le cœur a ses raisons que la raison ne connaît point.",
    "Schöne Grüße, Ünïcödé, ñandú, façade, naïve, Ångström",
    "東京は日本の首都です。中文的字符也在这里。",
    "Emoji 😀👍🚀 and ❤️ with a ZWJ family 👨‍👩‍👧 and flags 🇫🇷",
    "Unknown scripts: नमस्ते, สวัสดี, ሰላም, 안녕하세요, 🦄🧬",
    "Rare symbols ⟨⟩ ℵ ∮ ☃ ♞ and private use \xEE\x80\x80 and U+FFFD \xEF\xBF\xBD",
    "Digits 1234567890 and 3.14159 and 1e-5",
    "A literal \xE2\x96\x81 lower one eighth block, and <s> </s> <unk> <0x41> as text",
    "NUL\0inside"s,
    "┌──────┬──────┐\n│ box  │ draw │\n└──────┴──────┘",
    "The Jargon File is a glossary of hacker slang; the JARGON FILE, hackish.",
    "\xC3\x28 invalid \xA0\xA1 continuation \xF0\x28\x8C\xBC truncated \xE2\x82 end \xFF",
    "overlong \xC0\xAF and surrogate \xED\xA0\x80 and above max \xF4\x90\x80\x80",
};

class SpmTrained : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new std::string(train_model(""));
    sp_ = new sentencepiece::SentencePieceProcessor();
    const auto st = sp_->LoadFromSerializedProto(*model_);
    ASSERT_TRUE(st.ok()) << st.ToString();
    tok_ = new Tokenizer(vocab_from_spm(*sp_, *model_));
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete sp_;
    delete model_;
  }
  static std::string* model_;
  static sentencepiece::SentencePieceProcessor* sp_;
  static Tokenizer* tok_;
};
std::string* SpmTrained::model_ = nullptr;
sentencepiece::SentencePieceProcessor* SpmTrained::sp_ = nullptr;
Tokenizer* SpmTrained::tok_ = nullptr;

// The protobuf field numbers spm_proto.h relies on, read back from a model spm wrote.
TEST_F(SpmTrained, ModelFileHasTheFieldsWeRelyOn) {
  const auto trainer = test::read_submessage(*model_, 2);
  EXPECT_EQ(trainer.varint.at(3), 2u);                         // model_type BPE
  EXPECT_EQ(trainer.varint.at(35), 1u);                        // byte_fallback
  EXPECT_EQ(trainer.varint.at(40), 0u);                        // unk_id
  EXPECT_EQ(trainer.varint.at(41), 1u);                        // bos_id
  EXPECT_EQ(trainer.varint.at(42), 2u);                        // eos_id
  EXPECT_EQ(static_cast<int64_t>(trainer.varint.at(43)), -1);  // pad_id
  const auto norm = test::read_submessage(*model_, 3);
  EXPECT_EQ(norm.bytes.find(1)->second, "identity");
  EXPECT_EQ(norm.varint.at(3), 1u);  // add_dummy_prefix
  EXPECT_EQ(norm.varint.at(4), 0u);  // remove_extra_whitespaces
  // The vocabulary looks like Llama's: specials, 256 bytes, then merges with falling scores.
  const Vocab& v = tok_->vocab();
  ASSERT_GT(v.tokens.size(), 600u);
  EXPECT_EQ(v.types[0], TokenType::Unknown);
  EXPECT_EQ(v.types[1], TokenType::Control);
  EXPECT_EQ(v.tokens[3], "<0x00>");
  EXPECT_EQ(v.types[258], TokenType::Byte);
  EXPECT_TRUE(tok_->byte_fallback());
  size_t whitespace_pieces = 0;
  for (const auto& t : v.tokens) whitespace_pieces += t == "\xE2\x96\x81\xE2\x96\x81";
  EXPECT_EQ(whitespace_pieces, 1u) << "expected a piece for two spaces";
}

TEST_F(SpmTrained, SameIdsOnTestTexts) {
  size_t n_bytes_fallback = 0;
  for (const std::string& t : kTexts) {
    const auto want = spm_ids(*sp_, t);
    const auto got = tok_->encode(t, false);
    EXPECT_EQ(got, want) << "text: \"" << escape(t) << "\"";
    for (int32_t id : got) n_bytes_fallback += tok_->vocab().types[id] == TokenType::Byte;
  }
  EXPECT_GT(n_bytes_fallback, 20u) << "the test texts should exercise byte fallback";
  // With BOS: the same ids after it.
  auto with_bos = tok_->encode("Hello world", true);
  ASSERT_FALSE(with_bos.empty());
  EXPECT_EQ(with_bos[0], 1);
  with_bos.erase(with_bos.begin());
  EXPECT_EQ(with_bos, spm_ids(*sp_, "Hello world"));
}

TEST_F(SpmTrained, SameIdsOnWholeJargonSlice) {
  const std::string text = read_file(CLONE_SHARED_DIR "/data/golden-gguf/jargon-slice.txt");
  EXPECT_EQ(tok_->encode(text, false), spm_ids(*sp_, text));
  std::string all;
  for (const auto& t : kTexts) all += t;
  EXPECT_EQ(tok_->encode(all, false), spm_ids(*sp_, all));
}

TEST_F(SpmTrained, DecodeMatchesSentencePieceOnValidText) {
  for (const std::string& t : kTexts) {
    if (t.find('\xFF') != std::string::npos || t.find("\xC3\x28") != std::string::npos ||
        t.find("overlong") != std::string::npos)
      continue;  // malformed UTF-8 comes back as U+FFFD, tested elsewhere
    const auto ids = tok_->encode(t, true);
    // A literal U+2581 in the text means a space to SentencePiece, and comes back as one.
    std::string back = t;
    for (size_t p; (p = back.find("\xE2\x96\x81")) != std::string::npos;) back.replace(p, 3, " ");
    EXPECT_EQ(tok_->decode(ids), back) << "text: \"" << escape(t) << "\"";
    std::string want;
    const auto st = sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &want);
    ASSERT_TRUE(st.ok());
    EXPECT_EQ(tok_->decode(ids), want) << "text: \"" << escape(t) << "\"";
  }
}

// Random strings of code points: mostly ones the model knows, some it does not, spaces.
TEST_F(SpmTrained, SameIdsOnRandomUtf8) {
  std::mt19937 rng(1234);
  std::vector<std::string> pool;
  for (const char* l : kMultilingual) {
    const std::string s(l);
    for (size_t i = 0; i < s.size();) {
      size_t n = 1;
      const auto c = static_cast<unsigned char>(s[i]);
      n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      pool.push_back(s.substr(i, n));
      i += n;
    }
  }
  for (int k = 0; k < 30; ++k) pool.push_back(" ");
  auto encode_cp = [](uint32_t cp) {
    std::string o;
    if (cp < 0x80) {
      o += static_cast<char>(cp);
    } else if (cp < 0x800) {
      o += static_cast<char>(0xC0 | (cp >> 6));
      o += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      o += static_cast<char>(0xE0 | (cp >> 12));
      o += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      o += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      o += static_cast<char>(0xF0 | (cp >> 18));
      o += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      o += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      o += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return o;
  };
  for (int iter = 0; iter < 3000; ++iter) {
    const int len = static_cast<int>(rng() % 40);
    std::string s;
    for (int i = 0; i < len; ++i) {
      const auto r = rng() % 10;
      if (r < 7) {
        s += pool[rng() % pool.size()];
      } else {
        auto cp = static_cast<uint32_t>(rng() % 0x110000);
        if (cp >= 0xD800 && cp < 0xE000) cp = 0x20;
        if (r == 7) cp = static_cast<uint32_t>(rng() % 0x80);
        s += encode_cp(cp);
      }
    }
    ASSERT_EQ(tok_->encode(s, false), spm_ids(*sp_, s)) << "text: \"" << escape(s) << "\"";
  }
}

// Random bytes: malformed UTF-8 of every kind, mixed with spaces and valid characters.
TEST_F(SpmTrained, SameIdsOnRandomBytes) {
  std::mt19937 rng(99);
  const std::vector<std::string> bits = {
      " ",    "a",    "e",        "\xE2\x96\x81", "\xC3\xA9", "\xE6\x97\xA5", "\xF0\x9F\x98\x80",
      "\x80", "\xC3", "\xE6\x97", "\xF0\x9F"};
  for (int iter = 0; iter < 3000; ++iter) {
    const int len = static_cast<int>(rng() % 30);
    std::string s;
    for (int i = 0; i < len; ++i) {
      if (rng() % 2)
        s += static_cast<char>(rng() % 256);
      else
        s += bits[rng() % bits.size()];
    }
    ASSERT_EQ(tok_->encode(s, false), spm_ids(*sp_, s)) << "bytes: \"" << escape(s) << "\"";
  }
}

// A trained model with user-defined and control symbols.
TEST(SpmTrainedSymbols, UserDefinedAndControlSymbols) {
  const std::string model =
      train_model("--user_defined_symbols=<br>,@@,\xE2\x96\x81the --control_symbols=<ctl>,<sep>");
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.LoadFromSerializedProto(model).ok());
  const Tokenizer tok(vocab_from_spm(sp, model));
  size_t n_user = 0;
  for (TokenType t : tok.vocab().types) n_user += t == TokenType::UserDefined;
  EXPECT_EQ(n_user, 3u);
  for (const std::string t :
       {"line<br>break", "@@@@@", "the other theme", "<ctl> is not a control token <sep>",
        "<br><br>x@@y", " the the  the", "<b r>"}) {
    EXPECT_EQ(tok.encode(t, false), spm_ids(sp, t)) << "text: \"" << escape(t) << "\"";
  }
  for (const std::string& t : kTexts)
    EXPECT_EQ(tok.encode(t, false), spm_ids(sp, t)) << "text: \"" << escape(t) << "\"";
}

// Random vocabularies over a small alphabet, written as SentencePiece models: many merges
// compete, scores tie, unused pieces must be split back, user-defined pieces win first,
// control pieces are never formed, and without byte tokens unknown runs give one <unk>.
// Control pieces here are never a single character: SentencePiece would emit such a
// control id for that character in plain text, which clone deliberately never does.
TEST(SpmRandomVocab, SameIdsAsSentencePiece) {
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {
      "a", "b", "c", "d", "\xE2\x96\x81", "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80", "\t"};
  for (int m = 0; m < 300; ++m) {
    test::SpmModelSpec spec;
    spec.byte_fallback = m % 3 != 0;
    spec.pieces.push_back({"<unk>", 0.0f, 2});
    spec.pieces.push_back({"<s>", 0.0f, 3});
    spec.pieces.push_back({"</s>", 0.0f, 3});
    if (spec.byte_fallback) {
      for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        spec.pieces.push_back({name, 0.0f, 6});
      }
    }
    std::set<std::string> seen = {"<unk>", "<s>", "</s>"};
    // Most single characters (a missing one is unknown text).
    for (const auto& ch : alphabet) {
      if (rng() % 8 == 0) continue;
      spec.pieces.push_back({ch, -static_cast<float>(rng() % 4), 1});
      seen.insert(ch);
    }
    const int n_multi = 5 + static_cast<int>(rng() % 40);
    for (int k = 0; k < n_multi; ++k) {
      std::string p;
      const int len = 2 + static_cast<int>(rng() % 4);
      for (int i = 0; i < len; ++i) p += alphabet[rng() % alphabet.size()];
      if (!seen.insert(p).second) continue;
      const auto r = rng() % 20;
      const int type = r < 15 ? 1 : r < 17 ? 5 : r < 19 ? 4 : 3;  // normal, unused, user, control
      const float score = type == 4 ? 0.0f : -static_cast<float>(rng() % 6);  // many ties
      spec.pieces.push_back({p, score, type});
    }
    const std::string model = test::write_spm_model(spec);
    sentencepiece::SentencePieceProcessor sp;
    const auto st = sp.LoadFromSerializedProto(model);
    ASSERT_TRUE(st.ok()) << st.ToString();
    const Tokenizer tok(vocab_from_spm(sp, model));
    ASSERT_EQ(tok.byte_fallback(), spec.byte_fallback);
    for (int t = 0; t < 60; ++t) {
      std::string s;
      const int len = static_cast<int>(rng() % 16);
      for (int i = 0; i < len; ++i) {
        const auto r = rng() % 12;
        if (r < 9)
          s += alphabet[rng() % alphabet.size()];
        else if (r < 11)
          s += ' ';
        else
          s += "x";  // never in the vocabulary
      }
      ASSERT_EQ(tok.encode(s, false), spm_ids(sp, s))
          << "model " << m << " text: \"" << escape(s) << "\"";
    }
  }
}

}  // namespace
}  // namespace cln
