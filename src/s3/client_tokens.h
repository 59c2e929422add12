#pragma once

// Private to src/s3: the x-amz-client-token memory of RenameObject. A rename retried with the
// same token and the same parameters succeeds without renaming again (its source is gone by
// then); with other parameters it is IdempotencyParameterMismatch.
//
// Tokens are the client's choice and so is what comes with them (up to a whole header section of
// conditions), so nothing of either is kept as sent: a token is remembered as a SHA-256 of its
// scope and spelling, its parameters as another, and every remembered token costs the same few
// bytes. At most `tokens_max` are kept, the oldest forgotten first; a restart forgets them all (a
// retry after one fails with NoSuchKey, as a rename without a token does).
//
// Thread-safety: every method may be called from any worker.

#include <array>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <string_view>
#include <unordered_map>

namespace hots3::s3 {

class ClientTokens {
 public:
  enum class Seen : std::uint8_t { kNew, kSame, kDifferent };
  static constexpr std::size_t kTokensMax = 100'000;

  explicit ClientTokens(std::size_t tokens_max = kTokensMax) : tokens_max_(tokens_max) {}

  // `scope` keeps apart what must never match: the same token sent by two users, or for two
  // buckets, names two different renames.
  Seen find(std::string_view scope, std::string_view token, std::string_view parameters);
  void remember(std::string_view scope, std::string_view token, std::string_view parameters);

  [[nodiscard]] std::size_t size() const;
  // What one remembered token costs, whatever it and its parameters hold (the list and map
  // nodes of the standard library included, as a bound).
  static constexpr std::size_t kBytesPerToken = 2 * 32 + 128;

 private:
  using Hash = std::array<std::uint8_t, 32>;
  struct HashOfHash {
    std::size_t operator()(const Hash& h) const noexcept;
  };
  struct Entry {
    Hash token;
    Hash parameters;
  };

  const std::size_t tokens_max_;
  mutable std::mutex mutex_;
  std::list<Entry> order_;  // newest first
  std::unordered_map<Hash, std::list<Entry>::iterator, HashOfHash> index_;
};

}  // namespace hots3::s3
