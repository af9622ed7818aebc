// The generated tasks: answers computed here another way, splits that keep items which
// give each other away together, enough test items, and baselines that a plausible bug
// in their rule would change.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "clone/core/error.h"
#include "clone/data/tasks.h"

namespace cln::data {
namespace {

std::map<std::string, std::string> answers(const std::string& task) {
  std::map<std::string, std::string> m;
  for (const auto& it : make_task(task)) m[it.item.prompt] = it.item.answer;
  return m;
}

std::map<std::string, Split> splits(const std::string& task) {
  std::map<std::string, Split> m;
  for (const auto& it : make_task(task)) m[it.item.prompt] = it.split;
  return m;
}

TEST(Tasks, AnswersAreRight) {
  const auto add = answers("addition");
  EXPECT_EQ(add.size(), 10000u);
  EXPECT_EQ(add.at("37+45="), "82");
  EXPECT_EQ(add.at("99+99="), "198");
  const auto sub = answers("subtraction");
  EXPECT_EQ(sub.size(), 5050u);  // 0 <= b <= a <= 99
  EXPECT_EQ(sub.at("82-45="), "37");
  EXPECT_EQ(sub.count("45-82="), 0u);
  const auto rev = answers("digit_reverse");
  EXPECT_EQ(rev.size(), 9000u);
  EXPECT_EQ(rev.at("reverse 3810="), "0183");
  EXPECT_EQ(answers("add_words").at("37+45 in words:"), " eighty-two");
}

TEST(Tasks, NumberWords) {
  EXPECT_EQ(number_words(0), "zero");
  EXPECT_EQ(number_words(13), "thirteen");
  EXPECT_EQ(number_words(40), "forty");
  EXPECT_EQ(number_words(99), "ninety-nine");
  EXPECT_EQ(number_words(100), "one hundred");
  EXPECT_EQ(number_words(305), "three hundred five");
  EXPECT_EQ(number_words(4012), "four thousand twelve");
  EXPECT_EQ(number_words(4312), "four thousand three hundred twelve");
  EXPECT_EQ(number_words(9999), "nine thousand nine hundred ninety-nine");
  EXPECT_THROW(number_words(10000), Error);
  // All 10000 are distinct: a wrong place word would merge two numbers.
  std::set<std::string> seen;
  for (const auto& [p, a] : answers("number_words")) seen.insert(a);
  EXPECT_EQ(seen.size(), 10000u);
}

TEST(Tasks, SplitsKeepGiveawaysTogetherAndHoldEnoughTestItems) {
  const auto add = splits("addition");
  for (int a = 0; a < 100; ++a)
    for (int b = 0; b < 100; ++b)
      ASSERT_EQ(add.at(std::to_string(a) + "+" + std::to_string(b) + "="),
                add.at(std::to_string(b) + "+" + std::to_string(a) + "="));
  const auto sub = splits("subtraction");
  for (int a = 0; a < 100; ++a)
    for (int b = 0; b <= a; ++b)
      ASSERT_EQ(sub.at(std::to_string(a) + "-" + std::to_string(b) + "="),
                sub.at(std::to_string(a) + "-" + std::to_string(a - b) + "="));
  const auto rev = splits("digit_reverse");
  for (int n = 1000; n < 10000; ++n) {
    const std::string s = std::to_string(n), r(s.rbegin(), s.rend());
    if (r[0] != '0') {
      ASSERT_EQ(rev.at("reverse " + s + "="), rev.at("reverse " + r + "="));
    }
  }
  for (const std::string& t : task_names()) {
    std::map<Split, int> n;
    for (const auto& it : make_task(t)) ++n[it.split];
    EXPECT_GE(n[Split::Test], 500) << t;
    EXPECT_GT(n[Split::Train], 3 * n[Split::Test]) << t;
  }
  for (const auto& it : make_task("add_words")) ASSERT_EQ(it.split, Split::Test);
}

TEST(Tasks, BaselineRules) {
  // Digit by digit without carries or borrows.
  EXPECT_EQ(surface_rule("addition", "37+45="), "72");
  EXPECT_EQ(surface_rule("addition", "5+95="), "90");
  EXPECT_EQ(surface_rule("addition", "12+34="), "46");  // no carry: right
  EXPECT_EQ(surface_rule("subtraction", "82-45="), "43");
  EXPECT_EQ(surface_rule("subtraction", "87-45="), "42");
  EXPECT_EQ(surface_rule("number_words", "407 in words:"), "four zero seven");
  EXPECT_EQ(surface_rule("digit_reverse", "reverse 3819="), "9813");
  EXPECT_EQ(surface_rule("add_words", "37+45 in words:"), "seventy-two");
  EXPECT_EQ(copy_input("addition", "37+45="), "37");
  EXPECT_EQ(copy_input("digit_reverse", "reverse 3819="), "3819");
  // The addition rule is right exactly when no column carries: 55 * 55 of 10000 pairs.
  int right = 0;
  for (const auto& it : make_task("addition")) right += surface_rule("addition", it.item.prompt) == it.item.answer;
  EXPECT_EQ(right, 55 * 55);
}

}  // namespace
}  // namespace cln::data
