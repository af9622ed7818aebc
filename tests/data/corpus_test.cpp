// Corpus cleaning, dictd parsing, the hash split and the generated tasks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "clone/core/error.h"
#include "clone/core/hash.h"
#include "clone/data/corpus.h"
#include "fixture.h"

namespace cln::data {
namespace {

TEST(Corpus, ReflowJoinsParagraphLines) {
  EXPECT_EQ(reflow("  cruft \\kruhft\\\n   n. junk\n\n\n  2. more\n"),
            "cruft \\kruhft\\ n. junk\n2. more");
  EXPECT_EQ(reflow("\n \n"), "");
}

TEST(Corpus, DictdNumbers) {
  EXPECT_EQ(dictd_b64("A"), 0u);
  EXPECT_EQ(dictd_b64("B"), 1u);
  EXPECT_EQ(dictd_b64("BA"), 64u);
  EXPECT_EQ(dictd_b64("/"), 63u);
  EXPECT_THROW(dictd_b64("a-b"), Error);
}

// The split is the document's hash mod 1000: below 900 train, below 950 valid, else test.
// The hash is FNV-1a 64: the published test vectors, and splits computed by a separate
// Python implementation (h = 14695981039346656037; per byte h ^= byte, h *= 1099511628211
// mod 2^64).
TEST(Corpus, SplitOfKnownDocuments) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(fnv1a64("document 0"), 14136518262925373188ull);
  // "document i": hash mod 1000 is 188, 902, 113, 961 and 999 for i = 0, 20, 21, 14, 30.
  EXPECT_EQ(split_of("document 0"), Split::Train);
  EXPECT_EQ(split_of("document 20"), Split::Valid);
  EXPECT_EQ(split_of("document 21"), Split::Train);
  EXPECT_EQ(split_of("document 35"), Split::Valid);  // 944
  EXPECT_EQ(split_of("document 14"), Split::Test);   // 961
  EXPECT_EQ(split_of("document 30"), Split::Test);   // 999
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 20000; ++i)
    ++counts[static_cast<int>(split_of("document " + std::to_string(i)))];
  EXPECT_EQ(counts[0], 18009);
  EXPECT_EQ(counts[1], 996);
  EXPECT_EQ(counts[2], 995);
}

TEST(Corpus, Utf8Validation) {
  EXPECT_TRUE(valid_utf8("plain"));
  EXPECT_TRUE(valid_utf8("caf\xc3\xa9 \xe2\x80\x9cq\xe2\x80\x9d \xf0\x9f\x98\x80"));
  EXPECT_FALSE(valid_utf8("bad \xc3"));
  EXPECT_FALSE(valid_utf8("bad \xc0\xaf"));
  EXPECT_FALSE(valid_utf8("\xff"));
}

TEST(Corpus, DictdEntriesFromAFixture) {
  const std::string dir = testing::temp_dir("dictd");
  const std::string dict =
      "00-database-url\n   x\n"
      "cat \\cat\\ n.\n   1. A small animal. [1913 Webster]\n\n"
      "dog\n   <zoology> A {loyal} animal.\n\n   (1994-11-08)\n";
  std::ofstream(dir + "/d.dict") << dict;
  const size_t cat = dict.find("cat"), dog = dict.find("dog");
  auto b64 = [](size_t v) {
    const std::string a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string s;
    do {
      s.insert(s.begin(), a[v % 64]);
      v /= 64;
    } while (v);
    return s;
  };
  std::ofstream(dir + "/d.index") << "00-database-url\tA\t" << b64(cat) << "\n"
                                  << "cat\t" << b64(cat) << "\t" << b64(dog - cat) << "\n"
                                  << "kitty\t" << b64(cat) << "\t" << b64(dog - cat) << "\n"
                                  << "dog\t" << b64(dog) << "\t" << b64(dict.size() - dog) << "\n";
  SourcePaths p;
  p.gcide_dict = dir + "/d.dict";
  p.gcide_index = dir + "/d.index";
  p.foldoc_dict = p.gcide_dict;
  p.foldoc_index = p.gcide_index;
  p.jargon_txt = dir + "/jargon.txt";
  std::ofstream(p.jargon_txt) << "intro\n   :frob: /frob/, n.\n\n   A {thing}.\n   more.\n\n"
                              << "   :grok: vt.\n\n   To understand.\n";
  const auto dictionary = read_domain("dictionary", p);
  ASSERT_EQ(dictionary.size(), 2u);  // kitty points at cat's entry: kept once
  EXPECT_EQ(dictionary[0], "cat \\cat\\ n. 1. A small animal.");
  const auto computing = read_domain("computing", p);
  ASSERT_EQ(computing.size(), 4u);
  EXPECT_EQ(computing[1], "dog <zoology> A loyal animal.");
  EXPECT_EQ(computing[2], "frob: /frob/, n.\nA thing. more.");
  EXPECT_EQ(computing[3], "grok: vt.\nTo understand.");
  p.gcide_index = dir + "/missing.index";
  EXPECT_THROW(read_domain("dictionary", p), Error);
}

}  // namespace
}  // namespace cln::data
