// The benchmarks' median: the upper middle of the sorted values, and 0 for none.
#include <gtest/gtest.h>

#include "runtime/median.hpp"

namespace attnsel::runtime {
namespace {

TEST(Median, IsTheMiddleOfTheSortedValues) {
  EXPECT_DOUBLE_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(median({5.0}), 5.0);
}

TEST(Median, TakesTheUpperMiddleOfAnEvenCount) { EXPECT_DOUBLE_EQ(median({4.0, 1.0, 3.0, 2.0}), 3.0); }

TEST(Median, OfNoValuesIsZero) { EXPECT_DOUBLE_EQ(median({}), 0.0); }

}  // namespace
}  // namespace attnsel::runtime
