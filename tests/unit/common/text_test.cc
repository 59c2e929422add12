#include "hots3/common/text.h"

#include "hots3/common/hex.h"
#include "hots3/common/random.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <set>

namespace hots3 {
namespace {

TEST(Text, CaseAndSpaceAreAsciiOnly) {
  EXPECT_TRUE(iequals("X-Amz-Content-SHA256", "x-amz-content-sha256"));
  EXPECT_FALSE(iequals("x-amz-date", "x-amz-dat"));
  EXPECT_FALSE(iequals("a", "b"));
  EXPECT_FALSE(iequals("\xc3\x89", "\xc3\xa9"));  // not Unicode-aware, on purpose
  EXPECT_TRUE(istarts_with("X-Amz-Meta-Owner", "x-amz-meta-"));
  EXPECT_FALSE(istarts_with("x-am", "x-amz-"));
  EXPECT_EQ(lower("Content-MD5"), "content-md5");
  EXPECT_EQ(trim(" \t value \r\n"), "value");
  EXPECT_EQ(trim("   "), "");
}

// The comparison folds eight bytes at a time: every pair of byte values, at every place of a
// word and of the tail, compares as folding each byte alone would (only A-Z meet a-z).
TEST(Text, EveryPairOfBytesComparesAsAsciiFolding) {
  for (unsigned x = 0; x < 256; ++x) {
    for (unsigned y = 0; y < 256; ++y) {
      const char cx = static_cast<char>(x);
      const char cy = static_cast<char>(y);
      const bool expected = x == y || (to_lower(cx) == to_lower(cy));
      for (const std::size_t at : {0U, 5U, 7U, 8U, 12U, 15U, 16U}) {
        std::string a(17, 'q');
        std::string b(17, 'Q');
        a[at] = cx;
        b[at] = cy;
        ASSERT_EQ(iequals(a, b), expected) << x << " " << y << " at " << at;
        ASSERT_EQ(
            iequals(std::string_view(a).substr(0, at + 1), std::string_view(b).substr(0, at + 1)),
            expected)
            << x << " " << y << " at the end of " << at + 1;
      }
    }
  }
}

// The byte test reads words too: a byte of every value, at every place of a word and of the
// tail, among bytes that are not below the limit, is found exactly when it is below the limit.
TEST(Text, EveryByteBelowALimitIsFoundWherever) {
  for (const unsigned limit : {1U, 14U, 32U, 128U}) {
    for (std::size_t length = 1; length <= 17; ++length) {
      for (std::size_t at = 0; at < length; ++at) {
        for (unsigned c = 0; c < 256; ++c) {
          std::string text(length, static_cast<char>(0xFF));
          text[at] = static_cast<char>(c);
          ASSERT_EQ(has_byte_below(text, static_cast<unsigned char>(limit)), c < limit)
              << "limit " << limit << ", byte " << c << " at " << at << " of " << length;
        }
      }
    }
  }
}

TEST(Text, DecimalsAreWholeUnsignedNumbersThatFit) {
  EXPECT_EQ(parse_decimal<std::uint32_t>("0"), 0U);
  EXPECT_EQ(parse_decimal<std::uint32_t>("4294967295"), 4294967295U);
  EXPECT_EQ(parse_decimal<std::uint64_t>("18446744073709551615"), 18446744073709551615ULL);
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "1x", "0x10", "4294967296"})
    EXPECT_FALSE(parse_decimal<std::uint32_t>(bad).has_value()) << bad;
}

TEST(Hex, RoundTripsAndRefusesWhatIsNotHex) {
  const std::uint8_t bytes[] = {0x00, 0x9f, 0xff, 0x10};
  EXPECT_EQ(to_hex(bytes), "009fff10");
  EXPECT_EQ(from_hex("009FfF10"), std::string("\x00\x9f\xff\x10", 4));
  EXPECT_FALSE(from_hex("abc").has_value());
  EXPECT_FALSE(from_hex("zz").has_value());
  EXPECT_EQ(hex_value('g'), -1);
  std::array<std::uint8_t, 256> every{};  // each byte value, written and read back
  for (std::size_t b = 0; b < every.size(); ++b) every[b] = static_cast<std::uint8_t>(b);
  std::string written = "x";
  append_hex(written, every);
  ASSERT_EQ(written.size(), 513U);
  for (std::size_t b = 0; b < every.size(); ++b) {
    EXPECT_EQ(written.substr(1 + 2 * b, 2), fmt::format("{:02x}", b));
  }
  EXPECT_EQ(from_hex(std::string_view(written).substr(1)),
            std::string(reinterpret_cast<const char*>(every.data()), every.size()));
}

TEST(Random, StringsUseTheAlphabetAndDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string s = random_string(20, "AB");
    ASSERT_EQ(s.size(), 20U);
    EXPECT_EQ(s.find_first_not_of("AB"), std::string::npos);
    seen.insert(s);
  }
  EXPECT_GT(seen.size(), 95U);
  EXPECT_NE(random_u64(), random_u64());
}

}  // namespace
}  // namespace hots3
