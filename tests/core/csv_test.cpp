#include "clone/core/csv.h"

#include <gtest/gtest.h>

#include "clone/core/error.h"

namespace cln {
namespace {

std::string error_of(const std::string& text) {
  try {
    (void)CsvTable::parse(text, "t.csv");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Csv, QuotedFieldsHoldCommasLineBreaksAndDoubledQuotes) {
  const auto t = CsvTable::parse(
      "a,b,c\r\n"
      "1,\"x, y\",\"say \"\"hi\"\"\"\n"
      "\n"
      "2,\"two\nlines\",\n"
      "3,,\"\"",
      "t.csv");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t.at(0, "b"), "x, y");
  EXPECT_EQ(t.at(0, "c"), "say \"hi\"");
  EXPECT_EQ(t.at(1, "b"), "two\nlines");
  EXPECT_TRUE(t.empty(1, "c"));
  EXPECT_TRUE(t.empty(2, "b"));
  EXPECT_TRUE(t.empty(2, "c"));
  EXPECT_DOUBLE_EQ(t.number(2, "a"), 3);
  // The row after a quoted line break starts on line 6 of the text.
  EXPECT_EQ(t.where(2), "t.csv:6");
}

TEST(Csv, ErrorsNameFileLineAndColumn) {
  EXPECT_EQ(error_of("a,b\n1,2,3\n"), "t.csv:2: 3 fields, the header has 2");
  EXPECT_EQ(error_of("a,b\n1,\"2\n"), "t.csv:2: a quoted field is never closed");
  EXPECT_EQ(error_of("a,b\n1,x\"y\"\n"),
            "t.csv:2: a quote inside an unquoted field (quote the whole field)");
  EXPECT_EQ(error_of("a,a\n"), "t.csv:1: column \"a\" appears twice");
  EXPECT_EQ(error_of(""), "t.csv: no header row");
  const auto t = CsvTable::parse("a,b\n1,\n2.5x,3", "t.csv");
  EXPECT_THROW((void)t.at(0, "c"), Error);
  try {
    (void)t.number(0, "b");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "t.csv:2: column \"b\" is empty");
  }
  try {
    (void)t.number(1, "a");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "t.csv:3: column \"a\": \"2.5x\" is not a number");
  }
}

}  // namespace
}  // namespace cln
