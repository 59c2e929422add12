#pragma once

// Write-back to an upstream S3: the buckets bound in [[tier.bucket]] (mode "writeback") keep a
// job per changed key in the catalog (storage::TierJob, queued in the transaction that
// acknowledges the change); the uploader drains them to the upstream. It runs on a thread of its
// own with its own io_context (attached to the store like a worker, for its device reads), so
// upstream I/O, waits and retries never run on a request's worker.
//
// A job leaves the queue only in the transaction that records the upstream's confirmation; a
// failure the upstream may get over (a refused connection, a timeout, 5xx, 429) is retried with
// exponential back-off and full jitter, without end; an answer no retry changes (400, 403, 404
// NoSuchBucket, 412) parks the job with its error, kept for an operator.
//
// The upstream key is upstream_prefix + key, byte for byte, with the object's content headers
// and user metadata; a single-part object goes up as one PUT with Content-MD5, a multipart one
// keeps its part boundaries (each part with its Content-MD5), so that the upstream's ETag is
// ours. An upstream that answers 429 or 503 gets fewer attempts at once (halved, then grown
// back by one per window of successes), and write_bytes_per_s caps what is sent to it.
//
// Uploads are conditional on what the upstream held under the key when last seen (If-Match, or
// If-None-Match: * for a key never seen): another writer's version there is a conflict, settled
// by writeback.on_conflict and counted. A rename or copy of a version the upstream already
// holds is an upstream copy, not a second upload.

#include "hots3/common/metrics.h"
#include "hots3/config/config.h"
#include "hots3/http/handler.h"
#include "hots3/tier/readthrough.h"
#include "hots3/tier/writethrough.h"

#include <cstdint>
#include <memory>
#include <string>

namespace hots3::storage {
class ObjectStore;
}

namespace hots3::tier {

// What the uploader has done since it started.
struct UploaderStats {
  std::uint64_t uploaded = 0;    // objects the upstream confirmed
  std::uint64_t deleted = 0;     // upstream deletes confirmed
  std::uint64_t bytes = 0;       // bytes of the objects the upstream confirmed
  std::uint64_t sent_bytes = 0;  // bytes sent, confirmed or not (a part sent again counts again)
  std::uint64_t retried = 0;     // failed attempts to be retried
  std::uint64_t parked = 0;      // jobs parked
  std::uint64_t slowdowns = 0;   // times an upstream's 429 or 503 halved its concurrency
  std::uint64_t conflicts = 0;   // keys another writer had changed upstream
  std::uint64_t evicted = 0;     // versions whose space eviction by watermark gave back
  std::uint64_t evicted_bytes = 0;
  std::uint64_t evicted_young = 0;  // of them, uploaded less than evict.min_resident before
};

class Uploader final : public WriteThrough, public ReadThrough {
 public:
  // Reads each upstream's credentials file (throws config::ConfigError when one cannot be
  // read). `bucket_owner` owns the bound buckets that do not exist yet. `rebind`: a bucket whose
  // upstream, upstream bucket or prefix changed (or that is no longer bound) may still owe
  // changes to the old binding; otherwise start() refuses that.
  Uploader(storage::ObjectStore& store, const config::TierConfig& tier, std::string bucket_owner,
           bool rebind = false);
  ~Uploader() override;  // stop()
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;
  Uploader(Uploader&&) = delete;
  Uploader& operator=(Uploader&&) = delete;

  // Binds the configured buckets (creating the missing ones; the binding, without secrets, goes
  // into the catalog as JSON) and starts draining. Blocks until the buckets are bound. Throws
  // config::ConfigError for a changed binding that still owes changes (without `rebind`), and
  // std::runtime_error when the catalog refuses a binding.
  void start();
  // Ends the uploads under way (their jobs stay queued: a later start sends them again) and
  // joins the thread. Call before the store shuts down. Blocking; idempotent.
  void stop();

  [[nodiscard]] UploaderStats stats() const;

  // Write-through PUTs of the bound buckets ("writethrough"; see writethrough.h). A PUT started
  // before start() or after stop() fails.
  std::unique_ptr<UpstreamPut> put(std::int64_t bucket_id, std::string key, std::uint64_t length,
                                   const storage::ContentHeaders& headers,
                                   const storage::Metadata& metadata,
                                   std::vector<http::Header> more) override;
  std::unique_ptr<UpstreamPut> put_part(std::int64_t bucket_id, const storage::UploadRecord& upload,
                                        std::uint32_t part_number, std::uint64_t length,
                                        std::vector<http::Header> more) override;
  boost::asio::awaitable<void> adopt_parts(std::int64_t bucket_id, std::string key,
                                           std::string upload_id, std::string teed_id,
                                           std::int64_t object_id,
                                           std::vector<storage::TierPart> held) override;
  void abort_parts(const storage::UploadRecord& upload) override;

  // Read-through of evicted versions (see readthrough.h). A read started before start() or after
  // stop() fails.
  std::unique_ptr<UpstreamRead> read(std::int64_t bucket_id, std::string key, std::string etag,
                                     std::uint64_t offset, std::uint64_t length, bool whole,
                                     std::uint64_t keep_size, Traffic traffic) override;
  boost::asio::awaitable<Result<http::ClientReply>> ask(std::int64_t bucket_id,
                                                        UpstreamQuery query) override;
  [[nodiscard]] Freshness freshness(std::int64_t bucket_id, std::string_view key) const override;
  [[nodiscard]] bool reachable(std::int64_t bucket_id) const override;
  [[nodiscard]] bool admits(std::int64_t bucket_id, std::string_view key,
                            std::uint64_t size) const override;
  void count_read(std::int64_t bucket_id, CacheAnswer answer, std::uint64_t bytes) override;
  void count_coalesced(std::int64_t bucket_id) override;
  void count_revalidation(std::int64_t bucket_id, RevalidationResult result) override;
  void observe_cold_ttfb(std::int64_t bucket_id, std::chrono::microseconds time) override;
  [[nodiscard]] std::uint64_t evictable_bytes() const override;

  // Reads every upstream's credentials file again (SIGHUP: a rotated key) and retries the parked
  // jobs with them. false (logged) when a file cannot be read: the credentials in use stay.
  bool reload_credentials();
  // Applies the rate limits of `upstreams` (requests_per_s, write_bytes_per_s, read_bytes_per_s,
  // bytes_per_s; SIGHUP) to the upstreams of the same names, for what waits from now on; logs
  // each change.
  void set_limits(const std::vector<config::UpstreamConfig>& upstreams);

  // The health report (/health/upstream): per upstream, whether it answers ("unknown" until a
  // first exchange ends, which counts as not ok) and the cause of its last failure; per bound
  // bucket, whether its upstream bucket can be used, what it owes (queued by action, parked, the
  // age of the oldest change not yet upstream), where its data is (dirty, clean, evicted; pinned
  // and evictable bytes; up to kSpaceInterval old), its reads since start (hits, misses, the hit
  // ratio), and a state: "ok", "degraded" (an upstream failing, a parked job) or "behind"
  // (un-uploaded data older than writeback.max_dirty_age); then the device against the
  // watermarks. 200 when all is ok, else 503. No secret and no key appears in it. As JSON, or as
  // text for people; of every bound bucket, or only of `bucket` (its state is then the bucket's;
  // 404 when it is not bound). Up to a second old; callable from any thread.
  [[nodiscard]] http::Probe health(bool text, std::string_view bucket = {}) const;
  // The same report's figures as Prometheus families (hots3_tier_*): per upstream its state and
  // traffic, per bound bucket its state, queue, oldest owed change, where its data is and its
  // reads, and the watermarks. Nothing before the first report. Callable from any thread.
  void write_metrics(metrics::Writer& w) const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace hots3::tier
