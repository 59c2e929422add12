#include "hots3/common/units.h"

#include <gtest/gtest.h>

namespace hots3 {
namespace {

TEST(ParseSizeBytes, AcceptsNumbersAndUnits) {
  EXPECT_EQ(parse_size_bytes("0").value(), 0U);
  EXPECT_EQ(parse_size_bytes("4096").value(), 4096U);
  EXPECT_EQ(parse_size_bytes("17B").value(), 17U);
  EXPECT_EQ(parse_size_bytes("4k").value(), 4096U);
  EXPECT_EQ(parse_size_bytes("64KiB").value(), 64U * 1024);
  EXPECT_EQ(parse_size_bytes("2KB").value(), 2000U);
  EXPECT_EQ(parse_size_bytes("16G").value(), 16 * kGiB);
  EXPECT_EQ(parse_size_bytes("16 GiB").value(), 16 * kGiB);
  EXPECT_EQ(parse_size_bytes(" 3TB ").value(), 3'000'000'000'000U);
  EXPECT_EQ(parse_size_bytes("1TiB").value(), kTiB);
}

TEST(ParseSizeBytes, RejectsMalformedAndOverflow) {
  EXPECT_EQ(parse_size_bytes("").error(), errc::kInvalidArgument);
  EXPECT_EQ(parse_size_bytes("GiB").error(), errc::kInvalidArgument);
  EXPECT_EQ(parse_size_bytes("-1").error(), errc::kInvalidArgument);
  EXPECT_EQ(parse_size_bytes("1.5G").error(), errc::kInvalidArgument);
  EXPECT_EQ(parse_size_bytes("12 parsecs").error(), errc::kInvalidArgument);
  EXPECT_EQ(parse_size_bytes("99999999999999999999").error(), errc::kTooLarge);
  EXPECT_EQ(parse_size_bytes("20000000TiB").error(), errc::kTooLarge);
}

TEST(ParseDuration, Units) {
  using std::chrono::milliseconds;
  EXPECT_EQ(parse_duration("250ms").value(), milliseconds(250));
  EXPECT_EQ(parse_duration("10s").value(), milliseconds(10'000));
  EXPECT_EQ(parse_duration("10").value(), milliseconds(10'000));
  EXPECT_EQ(parse_duration("5m").value(), milliseconds(300'000));
  EXPECT_EQ(parse_duration("2h").value(), milliseconds(7'200'000));
  EXPECT_EQ(parse_duration("7d").value(), milliseconds(7LL * 24 * 3600 * 1000));
  EXPECT_EQ(parse_duration("3 days").error(), errc::kInvalidArgument);
  EXPECT_EQ(parse_duration("s").error(), errc::kInvalidArgument);
}

TEST(FormatSize, PicksTheLargestUnit) {
  EXPECT_EQ(format_size(17), "17 B");
  EXPECT_EQ(format_size(64 * kKiB), "64 KiB");
  EXPECT_EQ(format_size(3 * kGiB / 2), "1.5 GiB");
  EXPECT_EQ(format_size(1020 * kMiB), "1020 MiB");  // not 1.02e+03
  EXPECT_EQ(format_size(250 * kKiB), "250 KiB");
}

}  // namespace
}  // namespace hots3
