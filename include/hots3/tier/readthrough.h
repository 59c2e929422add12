#pragma once

// Read-through: the data of an evicted version (kUpstreamOnly) comes back from its bucket's
// upstream. The S3 layer reads an UpstreamRead piece by piece on its worker, writing each to the
// client (and, for a whole object, to the device); the tier module runs the upstream GET on its
// own thread, admitted under the upstream's requests_per_s like every other request to it.

#include "hots3/common/result.h"
#include "hots3/http/client.h"
#include "hots3/tier/traffic.h"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hots3::tier {

class UpstreamRead {
 public:
  UpstreamRead() = default;
  // Before the end: the upstream GET is cut off.
  virtual ~UpstreamRead() = default;
  UpstreamRead(const UpstreamRead&) = delete;
  UpstreamRead& operator=(const UpstreamRead&) = delete;
  UpstreamRead(UpstreamRead&&) = delete;
  UpstreamRead& operator=(UpstreamRead&&) = delete;

  // The next piece, in order (valid until the next call); empty once every byte asked for has
  // come. Errors: kPreconditionFailed (the upstream holds another version of the key now),
  // kNotFound (the key is gone upstream), kUnavailable (the upstream failed or cannot be
  // reached, or its answer ended early).
  virtual boost::asio::awaitable<Result<std::span<const std::byte>>> next() = 0;

  // Once the first piece has come, of a read that may keep its bytes: whether the bucket's
  // admission rule keeps them on the device (else they only stream through).
  [[nodiscard]] virtual bool admitted() const = 0;
};

// A request of the S3 layer's own to a bound bucket's upstream (a bucket in cache mode learns
// from it what it does not hold): HEAD of a key, or a listing of the bucket.
struct UpstreamQuery {
  std::string method = "GET";
  std::string key;  // a local key, sent as upstream_prefix + key; "" for the bucket itself
  std::vector<std::pair<std::string, std::string>> query;  // decoded
  std::vector<http::Header> headers;
  // The class its answer counts in on the upstream's link (it never waits there: the answers
  // are small).
  Traffic traffic = Traffic::kForeground;
};

// How reads and listings of a bound bucket are checked against its upstream (the binding's
// revalidate, on_upstream_error, on_upstream_delete and list; see config::TierBucketConfig).
struct Freshness {
  std::optional<std::chrono::milliseconds> revalidate_after;  // nullopt: never; 0: every read
  bool serve_stale = true;
  bool keep_upstream_deleted = false;
  bool list_local = false;  // a cache-mode bucket lists its catalog, not the upstream
  // How long a key the upstream did not hold is answered 404 without asking again (0: never).
  std::chrono::milliseconds negative_ttl{0};
};

// What a GET of a bound bucket's version was answered from, as its x-hots3-cache says.
enum class CacheAnswer : std::uint8_t {
  kHit,          // the device
  kMiss,         // the upstream
  kPartial,      // the device for the chunks kept, the upstream for the others
  kRevalidated,  // the device, once the upstream said the version is current
  kStale,        // the device, the upstream not saying whether the version is current
};
inline constexpr std::size_t kCacheAnswers = 5;
constexpr std::string_view cache_answer_name(CacheAnswer a) {
  constexpr std::string_view kNames[kCacheAnswers] = {"hit", "miss", "partial", "revalidated",
                                                      "stale"};
  return kNames[static_cast<std::size_t>(a)];
}

// What asking the upstream about a version kept here found.
enum class RevalidationResult : std::uint8_t {
  kCurrent,   // it holds the same version
  kReplaced,  // it holds another, which replaces the one here
  kGone,      // it holds none, and neither does the bucket now
  kStale,     // it did not say; the version here is served all the same
  kFailed,    // it did not say, and the read fails
  kRequeued,  // it had lost the version uploaded from here, which goes up again
  kKept,      // it deleted the version, which the bucket keeps (on_upstream_delete = keep)
  kLost,      // it had lost the version whose data was only there (evicted here): nobody has it
};
inline constexpr std::size_t kRevalidationResults = 8;
constexpr std::string_view revalidation_result_name(RevalidationResult r) {
  constexpr std::string_view kNames[kRevalidationResults] = {"current", "replaced", "gone", "stale",
                                                             "failed",  "requeued", "kept", "lost"};
  return kNames[static_cast<std::size_t>(r)];
}

class ReadThrough {
 public:
  ReadThrough() = default;
  virtual ~ReadThrough() = default;
  ReadThrough(const ReadThrough&) = delete;
  ReadThrough& operator=(const ReadThrough&) = delete;
  ReadThrough(ReadThrough&&) = delete;
  ReadThrough& operator=(ReadThrough&&) = delete;

  // Bytes [offset, offset + length) of `key` (local name) of a bound bucket, from the version
  // whose upstream ETag is `etag` (sent as If-Match: a version replaced upstream meanwhile is
  // refused, never mixed in). `whole`: the range is the whole object (a plain GET, not a Range).
  // `keep_size`: the version's size when the bytes may be kept (a whole object, chunks of it);
  // the binding's admission rule then decides (UpstreamRead::admitted); 0: they pass through.
  // `traffic`: whose turn its bytes take on the upstream's link (kForeground when a client waits
  // for them, kPrefetch when none does).
  virtual std::unique_ptr<UpstreamRead> read(std::int64_t bucket_id, std::string key,
                                             std::string etag, std::uint64_t offset,
                                             std::uint64_t length, bool whole,
                                             std::uint64_t keep_size, Traffic traffic) = 0;

  // Sends `query` to the upstream of `bucket_id` (under its requests_per_s, its failures counted
  // in its health like any other request's) and returns the whole answer, whatever its status.
  // Errors: kUnavailable (it cannot be reached or is not answering, or the bucket is not bound).
  virtual boost::asio::awaitable<Result<http::ClientReply>> ask(std::int64_t bucket_id,
                                                                UpstreamQuery query) = 0;
  // The rules of `bucket_id` for `key` (revalidation may differ by prefix; never revalidated when
  // the bucket is not bound). Callable from any thread.
  [[nodiscard]] virtual Freshness freshness(std::int64_t bucket_id, std::string_view key) const = 0;
  // Whether a read of `bucket_id`'s upstream would be tried now: false while it does not
  // answer and its next trial is not due (a read would fail at once), or it is not bound.
  // Callable from any thread.
  [[nodiscard]] virtual bool reachable(std::int64_t bucket_id) const = 0;
  // Whether the binding's admission rule keeps what is read of `key` (a version of `size`
  // bytes), as a read asked for now would find (UpstreamRead::admitted). Callable from any
  // thread.
  [[nodiscard]] virtual bool admits(std::int64_t bucket_id, std::string_view key,
                                    std::uint64_t size) const = 0;
  // Counts a GET of a bound bucket's version by what answered it, and the bytes it asked for
  // (the hit ratio of the health report and the metrics: hit, revalidated and stale are served
  // from here). Callable from any thread.
  virtual void count_read(std::int64_t bucket_id, CacheAnswer answer, std::uint64_t bytes) = 0;
  // Counts a read that waited for another's fetch of the same version or chunk instead of
  // asking the upstream itself. Callable from any thread.
  virtual void count_coalesced(std::int64_t bucket_id) = 0;
  // Counts a revalidation of a version kept here by its result. Callable from any thread.
  virtual void count_revalidation(std::int64_t bucket_id, RevalidationResult result) = 0;
  // A miss's time to first byte: from the read's start to its answer's head, sent once the
  // upstream's first bytes are in. Callable from any thread.
  virtual void observe_cold_ttfb(std::int64_t bucket_id, std::chrono::microseconds time) = 0;
  // What eviction may take of the bound buckets, as last read (every few seconds; 0 before the
  // first reading). Callable from any thread.
  [[nodiscard]] virtual std::uint64_t evictable_bytes() const = 0;
};

}  // namespace hots3::tier
