#include "hots3/common/md5.h"

#include "hots3/common/digest.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace hots3 {
namespace {

using Bytes = std::vector<std::byte>;

Bytes random_bytes(std::mt19937_64& rng, std::size_t n) {
  Bytes out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

std::string hex(const std::array<std::uint8_t, 16>& d) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (std::uint8_t b : d) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

// The reference: OpenSSL's MD5.
std::string openssl_md5(std::span<const std::byte> data) { return hex(hots3::md5(data)); }

TEST(Md5, Rfc1321TestSuite) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "d41d8cd98f00b204e9800998ecf8427e"},
      {"a", "0cc175b9c0f1b6a831c399e269772661"},
      {"abc", "900150983cd24fb0d6963f7d28e17f72"},
      {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
      {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
      {"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
       "57edf4a22be3c955ac49da2e2107b67a"}};
  for (const auto& [text, want] : cases) {
    Md5 md5;
    md5.update(std::as_bytes(std::span(text.data(), text.size())));
    EXPECT_EQ(hex(md5.finish()), want) << text;
  }
}

// Every length around the 64-byte block and its padding boundary, in uneven pieces.
TEST(Md5, MatchesOpenSslAtEveryLength) {
  std::mt19937_64 rng(1);
  const Bytes data = random_bytes(rng, 300);
  for (std::size_t n = 0; n <= data.size(); ++n) {
    const auto message = std::span(data).first(n);
    Md5 md5;
    for (std::size_t at = 0; at < n;) {
      const std::size_t piece = std::min<std::size_t>(n - at, rng() % 70);
      md5.update(message.subspan(at, piece));
      at += piece;
    }
    ASSERT_EQ(hex(md5.finish()), openssl_md5(message)) << n;
  }
}

// Many streams at once: lane counts from 1 to over 8 (so lanes are refilled), streams of
// different lengths that finish at different blocks, pieces that split blocks, and streams
// that sit out some rounds.
TEST(Md5, UpdateManyEqualsOneStreamAtATime) {
  std::mt19937_64 rng(2);
  for (std::size_t count : {1U, 2U, 3U, 7U, 8U, 9U, 17U, 40U}) {
    std::vector<Bytes> messages;
    for (std::size_t i = 0; i < count; ++i) messages.push_back(random_bytes(rng, rng() % 20000));
    std::vector<Md5> streams(count);
    std::vector<std::size_t> at(count, 0);
    for (bool more = true; more;) {
      more = false;
      std::vector<Md5*> batch;
      std::vector<std::span<const std::byte>> pieces;
      for (std::size_t i = 0; i < count; ++i) {
        if (at[i] == messages[i].size()) continue;
        more = true;
        if (rng() % 4 == 0) continue;  // sits this round out
        const std::size_t n = std::min<std::size_t>(messages[i].size() - at[i], rng() % 5000);
        batch.push_back(&streams[i]);
        pieces.push_back(std::span(messages[i]).subspan(at[i], n));
        at[i] += n;
      }
      Md5::update_many(batch, pieces);
    }
    for (std::size_t i = 0; i < count; ++i) {
      ASSERT_EQ(streams[i].length(), messages[i].size());
      ASSERT_EQ(hex(streams[i].finish()), openssl_md5(messages[i])) << count << " streams, #" << i;
    }
  }
}

}  // namespace
}  // namespace hots3
