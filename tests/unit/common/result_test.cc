#include "hots3/common/result.h"

#include <gtest/gtest.h>

#include <string>

namespace hots3 {
namespace {

Result<int> parse_positive(int value) {
  if (value <= 0) return errc::kInvalidArgument;
  return value;
}

Result<std::string> describe(int value) {
  H3_TRY(int v, parse_positive(value));
  return std::to_string(v * 2);
}

Result<void> check(int value) {
  H3_TRY(parse_positive(value));
  return {};
}

TEST(Result, TryBindsTheValueOrPropagatesTheError) {
  EXPECT_EQ(describe(21).value(), "42");
  EXPECT_EQ(describe(-1).error(), errc::kInvalidArgument);
  EXPECT_TRUE(check(1).has_value());
  EXPECT_EQ(check(0).error(), errc::kInvalidArgument);
}

TEST(Errc, HasACategoryAndMessages) {
  const error_code ec = errc::kNoSpace;
  EXPECT_STREQ(ec.category().name(), "hots3");
  EXPECT_EQ(ec.message(), "no space left on the device");
  EXPECT_TRUE(ec == errc::kNoSpace);
  EXPECT_FALSE(ec == errc::kNotFound);
}

}  // namespace
}  // namespace hots3
