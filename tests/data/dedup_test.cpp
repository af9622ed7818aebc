// The near-duplicate split: on a corpus built with the leaks an audit found (a fortune with
// other line wrapping, an entry carried inside a longer one, a text covered by two others),
// no held-out document has more than half its 8-grams in train; the old split by the hash
// of the exact text fails the same check on the same corpus.
#include <gtest/gtest.h>

#include <algorithm>

#include "clone/core/rng.h"
#include "clone/data/corpus.h"
#include "clone/data/dedup.h"

namespace cln::data {
namespace {

const char* kWords[] = {"the",   "cat",  "sat",   "on",   "mat",   "and",  "dog",  "ran",
                        "far",   "away", "from",  "home", "light", "word", "code", "def",
                        "river", "old",  "stone", "tree", "blue",  "sky",  "cold", "wind"};

std::string random_text(Rng& r, int words) {
  std::string s;
  for (int k = 0; k < words; ++k) s += std::string(k ? " " : "") + kWords[r.below(24)];
  return s;
}

// Re-wraps a text: other line breaks, other case at the start.
std::string rewrap(const std::string& s) {
  std::string o;
  int n = 0;
  for (char c : s) o += (c == ' ' && ++n % 5 == 0) ? '\n' : c;
  o[0] = static_cast<char>(std::toupper(o[0]));
  return o;
}

std::vector<std::string> leaky_corpus() {
  Rng r(7);
  std::vector<std::string> docs;
  for (int i = 0; i < 3000; ++i) {
    const std::string t = random_text(r, 20 + static_cast<int>(r.below(40)));
    docs.push_back(t);
    if (i % 3 == 0) docs.push_back(rewrap(t));  // the same text, wrapped otherwise
    if (i % 5 == 0) docs.push_back(random_text(r, 30) + " " + t + " " + random_text(r, 10));
    if (i % 7 == 0) {  // covered by two documents that each hold half of it
      const std::string a = random_text(r, 30), b = random_text(r, 30);
      docs.push_back(a + " " + random_text(r, 30));
      docs.push_back(random_text(r, 30) + " " + b);
      docs.push_back(a + " " + b);
    }
  }
  return docs;
}

TEST(Dedup, ShinglesIgnoreWrappingAndCase) {
  EXPECT_EQ(shingles("the cat sat on the mat and the dog ran"),
            shingles("The cat sat on\nthe mat and\tthe  dog ran"));
  EXPECT_NE(shingles("the cat sat on the mat and the dog ran"),
            shingles("the cat sat on the mat and a dog ran"));
  EXPECT_EQ(shingles("one two three four five six seven eight nine ten").size(), 3u);
  EXPECT_EQ(shingles("short text").size(), 1u);  // under 8 words: one shingle
  EXPECT_TRUE(shingles(" \n ").empty());
}

TEST(Dedup, NoHeldOutDocumentIsMoreThanHalfTrainAndTheOldSplitFails) {
  const std::vector<std::string> docs = leaky_corpus();
  const std::vector<std::string_view> v(docs.begin(), docs.end());
  const SplitResult r = split_by_cluster(v);
  const std::vector<double> ov = train_overlap(v, r.split);
  int64_t held = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    if (r.split[i] == Split::Train) continue;
    ++held;
    EXPECT_LE(ov[i], 0.5) << "held-out document " << i << " is " << 100 * ov[i] << "% train";
  }
  EXPECT_GT(held, static_cast<int64_t>(docs.size()) / 20);  // about 10% stays held out
  EXPECT_GT(r.clusters, 900);  // the rewrapped and embedded copies form clusters
  // Every rewrapped copy sits in its original's split.
  for (size_t i = 0; i + 1 < docs.size(); ++i)
    if (docs[i + 1].size() == docs[i].size() && shingles(docs[i]) == shingles(docs[i + 1])) {
      EXPECT_EQ(r.split[i], r.split[i + 1]) << i;
    }
  // The old rule (hash of the exact text) leaks: many held-out documents are mostly train.
  std::vector<Split> old;
  for (const auto& d : docs) old.push_back(split_of(d));
  const std::vector<double> ov_old = train_overlap(v, old);
  int64_t leaks = 0;
  for (size_t i = 0; i < docs.size(); ++i) leaks += old[i] != Split::Train && ov_old[i] > 0.5;
  EXPECT_GT(leaks, 50);
}

TEST(Dedup, GeneratedDataFilesAreRecognised) {
  std::string table = "# generated from a mapping file\nimport codecs\n\ndecoding_table = (\n";
  for (int i = 0; i < 200; ++i) table += "    '\\x" + std::to_string(10 + i % 80) + "'     #  0x" + std::to_string(i) + " -> CONTROL\n";
  table += ")\n";
  EXPECT_TRUE(is_generated_data(table));
  std::string code = "def f(x):\n";
  for (int i = 0; i < 200; ++i) code += "    y = x + " + std::to_string(i) + "\n    x = g(y, 'a')\n";
  EXPECT_FALSE(is_generated_data(code));
  EXPECT_TRUE(is_data_line("    'abc', 0x1F, -3.5,  # comment"));
  EXPECT_TRUE(is_data_line("  u'\\u00e9': (1, 2),"));
  EXPECT_FALSE(is_data_line("    x = 'abc'"));
  EXPECT_FALSE(is_data_line("    'unterminated"));
}

}  // namespace
}  // namespace cln::data
