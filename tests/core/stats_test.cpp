#include "clone/core/stats.h"

#include <gtest/gtest.h>

namespace cln {
namespace {

TEST(Stats, PercentileInterpolatesBetweenRanksLikeNumpy) {
  // numpy.percentile([4, 1, 3, 2], [0, 25, 50, 90, 100]) = [1, 1.75, 2.5, 3.7, 4]
  const std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 25), 1.75);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4.0);
  EXPECT_DOUBLE_EQ(percentile(v, 150), 4.0);  // clamped
}

TEST(Stats, MedianOfOddAndEvenCountsAndOfNothing) {
  EXPECT_DOUBLE_EQ(median({5, 1, 9}), 5.0);
  EXPECT_DOUBLE_EQ(median({5, 1, 9, 7}), 6.0);
  EXPECT_DOUBLE_EQ(median({}), 0.0);
  EXPECT_DOUBLE_EQ(median({-2}), -2.0);
}

}  // namespace
}  // namespace cln
