#include "s3/client_tokens.h"

#include <gtest/gtest.h>

#include <string>

namespace hots3::s3 {
namespace {

using namespace std::literals;

TEST(ClientTokens, ARetryWithTheSameParametersIsTheSameRename) {
  ClientTokens tokens;
  EXPECT_EQ(tokens.find("alice/1", "t", "a\0b"sv), ClientTokens::Seen::kNew);
  tokens.remember("alice/1", "t", "a\0b"sv);
  EXPECT_EQ(tokens.find("alice/1", "t", "a\0b"sv), ClientTokens::Seen::kSame);
  EXPECT_EQ(tokens.find("alice/1", "t", "a\0c"sv), ClientTokens::Seen::kDifferent);
}

TEST(ClientTokens, AnotherUsersTokenOfTheSameSpellingIsAnotherToken) {
  ClientTokens tokens;
  tokens.remember("alice/1", "t", "p");
  EXPECT_EQ(tokens.find("bob/1", "t", "p"), ClientTokens::Seen::kNew);
  EXPECT_EQ(tokens.find("bob/1", "t", "q"), ClientTokens::Seen::kNew);
  EXPECT_EQ(tokens.find("alice/2", "t", "p"), ClientTokens::Seen::kNew);
  // Moving the boundary between scope and token makes no match either.
  EXPECT_EQ(tokens.find("alice/1t", "", "p"), ClientTokens::Seen::kNew);
}

TEST(ClientTokens, MemoryIsBoundedInTokensWhateverTheyCarry) {
  ClientTokens tokens(1000);
  const std::string conditions(64 * 1024, 'x');  // a header section of conditions per rename
  for (int i = 0; i < 3000; ++i)
    tokens.remember("u/1", "token-" + std::to_string(i), conditions + std::to_string(i));
  EXPECT_EQ(tokens.size(), 1000U);
  // The oldest are forgotten first; the newest are still known, by their digests alone.
  EXPECT_EQ(tokens.find("u/1", "token-0", conditions + "0"), ClientTokens::Seen::kNew);
  EXPECT_EQ(tokens.find("u/1", "token-2999", conditions + "2999"), ClientTokens::Seen::kSame);
  static_assert(ClientTokens::kBytesPerToken < 256,
                "a token costs a few digests, never what it came with");
}

}  // namespace
}  // namespace hots3::s3
