#pragma once

// The object store: buckets and objects on a Device, described by the Catalog. No HTTP and no
// S3 here; the S3 layer turns requests into these calls.
//
// Durability (docs/ARCHITECTURE.md, "Durability"): a committed write has its data written and
// flushed before its catalog transaction commits, and the transaction is durable before
// commit_object() returns. Overwrites are atomic (one transaction switches the key to the new
// version). Space of a replaced or deleted version is freed only after that transaction is durable
// and no reader that could see the old version is still reading (epochs). Written-but-uncommitted
// space is free after a crash: free space is rebuilt from the catalog at start-up.
//
// Threads: every coroutine here runs on a worker (an io_context the store was opened with) and
// completes there. Catalog writes go to the catalog's writer thread; long catalog reads
// (listings) to a reader thread; device I/O to the worker's ring.

#include "hots3/common/result.h"
#include "hots3/common/units.h"
#include "hots3/storage/io_engine.h"
#include "hots3/storage/records.h"

#include <boost/asio/awaitable.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace hots3::storage {

class Device;  // a block device or a file under the store (tests open stores over their own)

struct StoreOptions {
  std::string data_dir = "./data";
  std::string device_path;              // "" = <data_dir>/device.img
  std::uint64_t device_size_bytes = 0;  // size of a new device file; 0 = automatic
  IoEngine engine = IoEngine::kAuto;
  std::uint64_t inline_max_bytes = 4096;           // objects up to this size live in the catalog
  std::uint64_t cache_bytes = 0;                   // block cache; 0 = none
  std::uint64_t metadata_cache_bytes = 64 * kMiB;  // hot objects' metadata and inline data
  std::size_t io_buffer_bytes = kMiB;              // one device I/O
  std::size_t io_buffers_per_worker = 32;          // the worker's pool (bounds streaming memory)
  std::size_t stream_depth = 4;                    // I/Os in flight per stream
  std::uint64_t extent_row_max_bytes = 16 * kMiB;  // data per catalog extent row
  // Writers compute the MD5 of their data (what S3 makes ETags of); false: a 16-byte digest of
  // the data's block checksums instead, which costs nothing more.
  bool compute_md5 = true;
  // A new catalog refuses a device another store formatted (its data would silently become
  // free space); true (serve --force-format) formats it anew with a new UUID instead.
  bool force_format = false;
  // Write-back: a change of a key waits this long before its job is due, so that a newer change
  // (a rewrite, a delete, a rename) replaces it and only the final state goes up.
  std::chrono::milliseconds tier_delay{5'000};
  // Write-back exposure: past this many bytes owed to upstreams, tier_budget_allows() refuses
  // more. 0: half the device's data area.
  std::uint64_t tier_owed_max_bytes = 0;
  // Past this share of the device allocated (percent; 0: no limit), writes into write-back
  // buckets are refused too (tier_budget_allows), and fetched data is not kept
  // (tier_fill_allows): the evictor cannot free dirty data, and must stay ahead of the inflow.
  unsigned tier_full_percent = 0;

  // The catalog's database file in `data_dir`: its presence is what makes a data directory an
  // existing store.
  [[nodiscard]] std::string catalog_path() const;
  // device_path, or the file device.img in data_dir without one.
  [[nodiscard]] std::string device_file() const;
};

// What a write may require of the object it replaces (checked in the commit transaction).
struct WriteCondition {
  bool if_none_match_any = false;       // If-None-Match: *   → kPreconditionFailed if it exists
  std::optional<std::string> if_match;  // If-Match: <etag>   → kPreconditionFailed if it differs,
                                        //                      kNotFound if there is none
};

// What a conditional delete requires of the current version; nothing when all are unset.
struct DeleteCondition {
  std::optional<std::string> if_match;          // an ETag, or "*": the key must exist
  std::optional<std::int64_t> last_modified_s;  // Last-Modified, in whole seconds
  std::optional<std::uint64_t> size_bytes;
};

// The metadata a new object version gets.
struct ObjectSpec {
  ContentHeaders headers;
  Metadata user_metadata;
  ChecksumSet checksums;
  std::string etag;  // the caller's (the S3 layer decides ETags); required by every commit
  // The key of the same bucket the data was copied from ("" = none): write-back may then copy
  // it upstream instead of uploading it.
  std::string copied_from;
  // Write-through: the upstream already holds this version under the key, with this ETag. The
  // commit then records it as upstream instead of queueing its upload, and drops what was still
  // queued for the key (an older state the upstream no longer needs).
  std::optional<std::string> upstream_etag;
};

// Which versions eviction by watermark takes first.
enum class EvictionOrder {
  // Read from the device (hit) never lately, then once, then more often (by key: a key evicted
  // and fetched again is still known), and among equals the version that came to the device
  // last: a scan does not flush what is read often, and epochs over more than the device holds,
  // in a loop or shuffled, keep hitting one part of it.
  kLeastOftenRead,
  kLeastRecentlyRead,
};

// What evict_objects freed.
struct Evicted {
  std::uint64_t objects = 0;
  std::uint64_t bytes = 0;
};

// Pin rules a bucket may have (keys and prefixes pinned by command or by a write's header).
inline constexpr std::size_t kMaxPinRules = 100'000;
// How long a count of a bucket's pinned bytes stands (ObjectStore::pin).
inline constexpr std::int64_t kPinCountMs = 5'000;

// What ObjectStore::pin did, and the counts it went by.
struct PinOutcome {
  bool pinned = false;  // false: the cap would be passed (or too_many_rules), nothing changed
  bool too_many_rules = false;     // the bucket has kMaxPinRules already
  std::uint64_t pinned_bytes = 0;  // the bucket's pinned versions before
  std::uint64_t adding_bytes = 0;  // what the pin adds (versions not pinned yet, and incoming)
  std::uint64_t max_bytes = 0;     // the bucket's cap
};

struct StoreStats {
  std::uint64_t device_bytes = 0;
  std::uint64_t used_bytes = 0;
  std::uint64_t free_bytes = 0;
  std::uint64_t pending_free_bytes = 0;  // retired, waiting for readers to finish
  // The free space's fragmentation: its runs (extents), and the longest (the largest write
  // placed in one piece).
  std::uint64_t free_extents = 0;
  std::uint64_t largest_free_bytes = 0;
  std::string io_engine;
  std::uint64_t cache_capacity_bytes = 0;
  std::uint64_t cache_prefaulted_bytes = 0;  // memory of the cache touched so far (at start-up)
  std::uint64_t cache_used_bytes = 0;
  std::uint64_t cache_hits = 0;
  std::uint64_t cache_misses = 0;
  std::uint64_t cache_evictions = 0;
  std::uint64_t checksum_failures = 0;  // stored blocks a read found damaged, since start
  std::uint64_t metadata_cache_capacity_bytes =
      0;  // records of hot objects (and small objects' data)
  std::uint64_t metadata_cache_used_bytes = 0;
  std::uint64_t metadata_cache_entries = 0;
  std::uint64_t metadata_cache_hits = 0;
  std::uint64_t metadata_cache_misses = 0;
  CatalogWriterStats catalog_writer;
  std::chrono::milliseconds startup_rebuild{0};
  // Device operations in flight now (the queue depth) and their times, by read, write, flush.
  std::uint64_t device_io_in_flight = 0;
  std::array<metrics::Histogram::Snapshot, 3> device_io_seconds;
};

class ObjectStore;

// A streaming write: data buffer by buffer as it arrives, then finish(), then commit (or
// abort). MD5 (for the ETag) and the block checksums are computed as the data goes by, and
// device writes run while further data is received. Destroying an uncommitted writer aborts
// it: its space returns to the allocator once the device writes in flight have completed.
class ObjectWriter {
 public:
  virtual ~ObjectWriter() = default;
  ObjectWriter() = default;
  ObjectWriter(const ObjectWriter&) = delete;
  ObjectWriter& operator=(const ObjectWriter&) = delete;
  ObjectWriter(ObjectWriter&&) = delete;
  ObjectWriter& operator=(ObjectWriter&&) = delete;

  // Errors: kNoSpace, kTooLarge (more than the declared size), kIoError.
  virtual boost::asio::awaitable<Result<void>> write(std::span<const std::byte> data) = 0;
  // All data is in: writes the rest and flushes the device. After it, size() and digest() are
  // final. Errors: kInvalidArgument (less than the declared size), kIoError.
  virtual boost::asio::awaitable<Result<void>> finish() = 0;
  [[nodiscard]] virtual std::uint64_t size() const noexcept = 0;
  // The data's MD5 when the store computes MD5s (StoreOptions::compute_md5), else a 16-byte
  // digest of its block checksums: unique to the data, and free.
  [[nodiscard]] virtual const std::array<std::uint8_t, 16>& digest() const noexcept = 0;
};

// A streaming read of one version of an object, pinned from open to destruction: its data
// stays readable even if the key is overwritten or deleted meanwhile.
class ObjectReader {
 public:
  virtual ~ObjectReader() = default;
  ObjectReader() = default;
  ObjectReader(const ObjectReader&) = delete;
  ObjectReader& operator=(const ObjectReader&) = delete;
  ObjectReader(ObjectReader&&) = delete;
  ObjectReader& operator=(ObjectReader&&) = delete;

  [[nodiscard]] virtual const ObjectRecord& object() const noexcept = 0;
  // Sets the byte range [offset, offset + length) to read (default: the whole object).
  // REQUIRES: within the object; called before the first next().
  virtual void set_range(std::uint64_t offset_bytes, std::uint64_t length_bytes) = 0;
  // The next piece of the range, in order; empty at the end. Valid until the next call.
  // Several device reads run ahead of the caller. Errors: kChecksumMismatch (stored data is
  // damaged: nothing of the damaged block is returned), kIoError.
  virtual boost::asio::awaitable<Result<std::span<const std::byte>>> next() = 0;
};

class ObjectStore {
 public:
  // Opens (or creates and formats) the device and the catalog in options.data_dir, checks that
  // they belong together (device UUID) and rebuilds the free space. Throws std::runtime_error
  // with a clear message (start-up).
  static std::unique_ptr<ObjectStore> open(const StoreOptions& options);
  // The same over a device opened by the caller (tests: a FaultDevice that outlives a
  // simulated crash and restart).
  static std::unique_ptr<ObjectStore> open(const StoreOptions& options,
                                           std::shared_ptr<Device> device);

  // Sets up a worker (its ring and buffer pool). Call for every worker before it runs; the
  // store must outlive the worker's io_context (coroutines it destroys may hold store objects).
  virtual void attach(boost::asio::io_context& worker) = 0;
  virtual ~ObjectStore() = default;
  ObjectStore() = default;
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;
  ObjectStore(ObjectStore&&) = delete;
  ObjectStore& operator=(ObjectStore&&) = delete;

  // Stops accepting work, completes queued catalog writes and closes the catalog. Call after
  // the HTTP server has stopped and before the workers stop. Blocking.
  virtual void shutdown() = 0;

  // ---- buckets ----
  virtual Result<std::optional<BucketRecord>> find_bucket(std::string_view name) = 0;
  virtual Result<std::vector<BucketRecord>> list_buckets() = 0;
  // Errors: kAlreadyExists.
  virtual boost::asio::awaitable<Result<BucketRecord>> create_bucket(std::string name,
                                                                     std::string owner) = 0;
  // Errors: kNotFound, kConflict (not empty).
  virtual boost::asio::awaitable<Result<void>> delete_bucket(std::string name) = 0;

  // ---- objects ----
  // The current version's metadata (an index lookup on the calling worker, or none: from the
  // metadata cache, shared, not copied); nullptr when there is none. An inline object has
  // inline_data set, its bytes loaded or not: a reader gives them.
  virtual Result<std::shared_ptr<const ObjectRecord>> head(std::int64_t bucket_id,
                                                           std::string_view key) = 0;
  // Pins and opens the current version. Errors: kNotFound.
  virtual boost::asio::awaitable<Result<std::unique_ptr<ObjectReader>>> open_reader(
      std::int64_t bucket_id, std::string key) = 0;
  // A writer for new data; `size_bytes` when known in advance (it is then reserved at once
  // and enforced). `for_part`: data for commit_part (never stored inline).
  // Errors: kNoSpace.
  virtual boost::asio::awaitable<Result<std::unique_ptr<ObjectWriter>>> create_writer(
      std::optional<std::uint64_t> size_bytes, bool for_part = false) = 0;
  // Commits a finished writer's data as (bucket, key), replacing the current version if the
  // condition holds. Errors: kPreconditionFailed, kNotFound (bucket gone, or If-Match without
  // an object).
  virtual boost::asio::awaitable<Result<ObjectRecord>> commit_object(
      std::unique_ptr<ObjectWriter> writer, const BucketRecord& bucket, std::string key,
      ObjectSpec spec, WriteCondition condition) = 0;
  // Appends a finished writer's data to version `base_version` of (bucket, key) (S3 Express's
  // PutObject with x-amz-write-offset-bytes): the new version keeps the base version's extents
  // and part table, without copying its data, followed by the writer's data; `new_parts` are
  // added to its part table. `writer_has_base`: the
  // caller wrote the base version's data (an inline object) into the writer first, so nothing
  // is kept. `base_version` 0: the key must not exist; the writer's data becomes the object.
  // A concurrent write of the key since the caller looked wins: the append is refused.
  // Errors: kPreconditionFailed (the current version is not `base_version`), kNotFound (the
  // bucket went away).
  virtual boost::asio::awaitable<Result<ObjectRecord>> append_object(
      std::unique_ptr<ObjectWriter> writer, const BucketRecord& bucket, std::string key,
      std::int64_t base_version, bool writer_has_base, ObjectSpec spec,
      std::vector<ObjectPartRecord> new_parts) = 0;
  // Deletes the current version if it meets `condition`; returns it (nullopt if there was none).
  // Errors: kPreconditionFailed (it does not), kNotFound (if_match set and no current version).
  virtual boost::asio::awaitable<Result<std::optional<ObjectRecord>>> delete_object(
      std::int64_t bucket_id, std::string key, DeleteCondition condition) = 0;
  boost::asio::awaitable<Result<std::optional<ObjectRecord>>> delete_object(std::int64_t bucket_id,
                                                                            std::string key) {
    return delete_object(bucket_id, std::move(key), DeleteCondition{});
  }
  // Replaces the metadata of the current version (S3: copy onto itself) if its ETag is still
  // `etag`. Errors: kNotFound, kPreconditionFailed.
  virtual boost::asio::awaitable<Result<ObjectRecord>> replace_metadata(std::int64_t bucket_id,
                                                                        std::string key,
                                                                        std::string etag,
                                                                        ObjectSpec spec) = 0;
  // What a rename requires of its source and of the object it replaces (if any), decided inside
  // the rename's transaction; an error refuses the rename with that error. Empty: no condition.
  using RenameCheck = std::function<Result<void>(const ObjectRecord& source,
                                                 const std::optional<ObjectRecord>& target)>;
  // Moves an object to a new key in one transaction (no data is copied), replacing what the key
  // held. Errors: kNotFound (no source), and whatever `check` returns.
  virtual boost::asio::awaitable<Result<ObjectRecord>> rename_object(std::int64_t bucket_id,
                                                                     std::string from,
                                                                     std::string to,
                                                                     RenameCheck check) = 0;
  // One page of keys (on a reader thread; the worker waits without blocking).
  virtual boost::asio::awaitable<Result<ListPage>> list_objects(std::int64_t bucket_id,
                                                                ListQuery query) = 0;

  // ---- multipart ----
  virtual boost::asio::awaitable<Result<UploadRecord>> create_upload(
      const BucketRecord& bucket, std::string key, std::string owner, ObjectSpec spec,
      std::optional<std::string> checksum_algorithm, std::optional<std::string> checksum_type) = 0;
  virtual Result<std::optional<UploadRecord>> find_upload(std::string_view upload_id) = 0;
  // How an upload ended: the version a completion made while that version exists (it may have
  // been renamed since), or an abort for kAbortRemembered.
  virtual Result<std::optional<EndedUpload>> ended_upload(std::string_view upload_id) = 0;
  // Open uploads in the bucket and of the owner, each counted up to `limit` (on a reader thread).
  virtual boost::asio::awaitable<Result<UploadCounts>> count_uploads(std::int64_t bucket_id,
                                                                     std::string owner,
                                                                     std::uint64_t limit) = 0;
  // Commits a finished writer's data as part `part_number` of the upload, with `etag`,
  // replacing an earlier part with that number; `teed`: where the upstream holds it too (empty:
  // nowhere). Errors: kNotFound (no such upload).
  virtual boost::asio::awaitable<Result<PartRecord>> commit_part(
      std::unique_ptr<ObjectWriter> writer, std::string upload_id, std::uint32_t part_number,
      ChecksumSet checksums, std::string etag, TeedPart teed) = 0;

  // What a completion turns the upload into, decided from the upload and its parts inside the
  // commit transaction (so parts cannot change under the decision).
  struct CompletionPlan {
    ObjectSpec spec;                // with its ETag (the multipart one)
    std::vector<PartRecord> parts;  // the parts that make up the object, in order
  };
  using PlanFn =
      std::function<Result<CompletionPlan>(const UploadRecord&, const std::vector<PartRecord>&)>;
  // Builds the object from the parts' extents without copying data. Errors: kNotFound (no such
  // upload), kPreconditionFailed, and whatever `plan` returns.
  virtual boost::asio::awaitable<Result<ObjectRecord>> complete_upload(
      std::string upload_id, PlanFn plan, WriteCondition condition) = 0;
  // Errors: kNotFound.
  virtual boost::asio::awaitable<Result<void>> abort_upload(std::string upload_id) = 0;
  virtual boost::asio::awaitable<Result<std::vector<PartRecord>>> list_parts(
      std::int64_t upload_row, std::uint32_t after_part, std::uint32_t max_parts) = 0;
  virtual boost::asio::awaitable<Result<UploadListPage>> list_uploads(std::int64_t bucket_id,
                                                                      UploadListQuery query) = 0;
  // Part boundaries of a completed multipart object (up to 10,000 rows: on a catalog reader).
  virtual boost::asio::awaitable<Result<std::vector<ObjectPartRecord>>> object_parts(
      std::int64_t object_id) = 0;
  // One of them (an index lookup: GET/HEAD with partNumber), or nullopt.
  virtual Result<std::optional<ObjectPartRecord>> object_part(std::int64_t object_id,
                                                              std::uint32_t part_number) = 0;
  // Aborts uploads created before `age` ago; returns how many.
  virtual boost::asio::awaitable<Result<std::size_t>> abort_uploads_older_than(
      std::chrono::milliseconds age) = 0;

  // ---- write-back to an upstream S3 (driven by the tier module) ----
  // Binds bucket `name` (kNone: unbinds); `upstream` is the binding as JSON, without secrets.
  // From then on every change of a key in a kWriteback bucket queues a TierJob in the
  // transaction that makes it; becoming kWriteback queues every version only here, in the same
  // transaction. Errors: kNotFound.
  virtual boost::asio::awaitable<Result<void>> set_bucket_tier(std::string name, BucketTier tier,
                                                               std::string upstream) = 0;
  // Queued jobs due by `now_ms`, in acknowledgement order, at most `max`.
  virtual boost::asio::awaitable<Result<std::vector<TierJob>>> due_tier_jobs(std::int64_t now_ms,
                                                                             std::size_t max) = 0;
  // A bucket's jobs, parked ones included, in acknowledgement order; without `with_implied`,
  // only those with rows of their own (every delete has one).
  virtual boost::asio::awaitable<Result<std::vector<TierJob>>> tier_jobs(std::int64_t bucket_id,
                                                                         bool with_implied) = 0;
  // A bucket's parked jobs (an operator must act on them), the longest parked first, at most
  // `max`.
  virtual boost::asio::awaitable<Result<std::vector<TierJob>>> parked_tier_jobs(
      std::int64_t bucket_id, std::size_t max) = 0;
  // The key's job, parked or not; none when the key owes the upstream nothing.
  virtual boost::asio::awaitable<Result<std::optional<TierJob>>> tier_job(std::int64_t bucket_id,
                                                                          std::string key) = 0;
  // What each bucket with queued jobs owes, by bucket id.
  virtual boost::asio::awaitable<Result<std::vector<TierBacklog>>> tier_backlog() = 0;
  // Per bound bucket of `bucket_ids` holding any version: where its data is, and what eviction
  // may take of what was clean (uploaded) before `clean_before_ms` (one pass over their catalog
  // rows).
  virtual boost::asio::awaitable<Result<std::vector<TierSpace>>> tier_space(
      std::vector<std::int64_t> bucket_ids, std::int64_t clean_before_ms) = 0;
  // Bytes acknowledged in write-back buckets and not yet upstream, all buckets together (from
  // memory: cheap enough for every write to ask).
  [[nodiscard]] virtual std::uint64_t tier_owed_bytes() const noexcept = 0;
  // Whether a write of `incoming` more bytes into a write-back bucket stays within the bytes
  // that may be owed (StoreOptions::tier_owed_max_bytes). One object larger than the budget is
  // let in when nothing is owed, or it could never be written.
  [[nodiscard]] virtual bool tier_budget_allows(std::uint64_t incoming) const noexcept = 0;
  [[nodiscard]] virtual std::uint64_t tier_owed_max_bytes() const noexcept = 0;
  // Whether `incoming` more bytes fetched from an upstream may be kept here
  // (StoreOptions::tier_full_percent).
  [[nodiscard]] virtual bool tier_fill_allows(std::uint64_t incoming) const noexcept = 0;
  // How often `key` of `bucket_id` was read lately while not only local, from the device or
  // through (counts of opened readers: an estimate, never below the truth), the read under way
  // included.
  [[nodiscard]] virtual unsigned reads_lately(std::int64_t bucket_id,
                                              std::string_view key) const noexcept = 0;
  // Whether a change acknowledged before `job` (parked ones included) is still owed under
  // `prefix` of its bucket: a commit marker waits for them.
  virtual boost::asio::awaitable<Result<bool>> tier_jobs_before(const TierJob& job,
                                                                std::string prefix) = 0;
  // The upstream confirmed `job`: it leaves the queue and what the upstream now holds under the
  // key is recorded (`seen`; none: nothing), in one transaction; when that is the job's version
  // (seen->ours set), the version is marked as upstream too, with the upstream's ETag where it
  // differs from ours. false: a newer change of the key replaced the job meanwhile, and that
  // one stays queued.
  virtual boost::asio::awaitable<Result<bool>> finish_tier_job(TierJob job,
                                                               std::optional<TierSeen> seen) = 0;
  // What the upstream holds under `key` as the uploader last saw it (none: nothing it knows of),
  // and a correction of it (a 412 showed another writer's version, or none).
  virtual boost::asio::awaitable<Result<std::optional<TierSeen>>> tier_seen(std::int64_t bucket_id,
                                                                            std::string key) = 0;
  virtual boost::asio::awaitable<Result<void>> set_tier_seen(std::int64_t bucket_id,
                                                             std::string key,
                                                             std::optional<TierSeen> seen) = 0;
  // Write-through. A PUT whose version the upstream may hold (as `attempted`, its ETag there)
  // without it being committed here: the key's state here (its version, or its absence) must go
  // up again, and an upstream version `attempted` is then replaced without counting a conflict.
  // hold_tier_key, before the upstream may take the PUT: a job for the key, queued as any change
  // (a crash before the commit leaves it to bring the upstream back); the job it queued, none
  // when the key had one already (which is kept, and now also replaces `attempted`).
  // resend_tier_key, after a PUT the upstream took but the commit refused: the same, due at once.
  // cancel_tier_job: the job hold_tier_key queued, when the upstream did not take the PUT.
  virtual boost::asio::awaitable<Result<std::optional<TierJob>>> hold_tier_key(
      std::int64_t bucket_id, std::string key, std::string attempted) = 0;
  virtual boost::asio::awaitable<Result<void>> resend_tier_key(std::int64_t bucket_id,
                                                               std::string key,
                                                               std::string attempted) = 0;
  virtual boost::asio::awaitable<Result<void>> cancel_tier_job(TierJob job) = 0;
  // Whether a queued job copies its data upstream from `key`: the key's upstream delete waits.
  virtual boost::asio::awaitable<Result<bool>> tier_copy_pending(std::int64_t bucket_id,
                                                                 std::string key) = 0;
  // A job's upstream multipart upload, kept across restarts so that a restart re-sends only
  // the parts in flight: its id ("" = none any more; its parts are forgotten) and each part the
  // upstream confirmed. false: a newer change replaced the job.
  virtual boost::asio::awaitable<Result<bool>> set_tier_upload(TierJob job,
                                                               std::string upload_id) = 0;
  virtual boost::asio::awaitable<Result<bool>> add_tier_part(TierJob job, TierPart part) = 0;
  virtual boost::asio::awaitable<Result<std::vector<TierPart>>> tier_parts(std::int64_t seq) = 0;
  // The upstream uploads that jobs and write-through uploads still use: any other under a
  // binding's prefix is an orphan.
  virtual boost::asio::awaitable<Result<std::vector<std::string>>> tier_upload_ids() = 0;
  // A client waits for `span`'s changes to reach the upstream (x-hots3-durability, a flush):
  // those waiting out the coalescing delay become due now, and the uploader is woken
  // (set_tier_wake). Returns the highest seq of the span's jobs, 0 when nothing is owed.
  virtual boost::asio::awaitable<Result<std::int64_t>> expedite_tier_jobs(std::int64_t bucket_id,
                                                                          KeySpan span) = 0;
  // What `span` still owes, of the jobs up to `up_to_seq` (a newer change's job is not waited
  // for: it replaced what the waiter wrote).
  virtual boost::asio::awaitable<Result<TierOwed>> tier_owed(std::int64_t bucket_id, KeySpan span,
                                                             std::int64_t up_to_seq) = 0;
  // Called after each expedite, on the caller's thread: must be quick and thread-safe.
  // REQUIRES: before the store serves requests (the uploader sets it as it starts).
  virtual void set_tier_wake(std::function<void()> wake) = 0;
  // Every parked job due again now (its cause may be mended: credentials, a missing bucket);
  // returns how many.
  virtual boost::asio::awaitable<Result<std::uint64_t>> unpark_tier_jobs() = 0;
  // One more failed attempt: due again at `due_ms`, or parked (kept, not retried) with `error`.
  // false: a newer change replaced the job.
  virtual boost::asio::awaitable<Result<bool>> defer_tier_job(TierJob job, std::int64_t due_ms,
                                                              std::string error, bool park) = 0;
  // Jobs that wait for others (a delete for the copy of its data, a commit marker for its
  // prefix) due again at `due_ms`, their attempts untouched: the due jobs read at a time are not
  // all ones that cannot go yet. Those replaced or parked meanwhile are left alone.
  virtual boost::asio::awaitable<Result<void>> postpone_tier_jobs(std::vector<TierJob> jobs,
                                                                  std::int64_t due_ms) = 0;

  // ---- tiering: eviction and read-through ----
  // Frees the device space of the versions of `span` that are safely upstream (kLocalAndUpstream),
  // not inline, and needed by no queued change of the bucket (the key's own, or a copy's from
  // it): each becomes kUpstreamOnly, its row kept for HEAD and LIST. A reader that opened a
  // version before keeps reading it.
  virtual boost::asio::awaitable<Result<Evicted>> evict_objects(std::int64_t bucket_id,
                                                                KeySpan span) = 0;
  // Eviction by watermark: frees `bytes` (or what it can) from the versions of the buckets
  // `bucket_ids` that evict_objects would free, clean (uploaded) before `clean_before_ms`, in
  // `order`. The read times kept in memory are saved first, unless they were less than a second
  // ago: in least-recently-read order the versions read since then go last.
  virtual boost::asio::awaitable<Result<Evicted>> evict_coldest(
      std::vector<std::int64_t> bucket_ids, std::uint64_t bytes, std::int64_t clean_before_ms,
      EvictionOrder order) = 0;
  // ---- tiering: pins (keys never evicted) ----
  // A bound bucket's pins by glob, and the bytes its pinned versions may hold (unset: a quarter
  // of the device).
  virtual void set_pins(std::int64_t bucket_id, std::vector<std::string> globs,
                        std::optional<std::uint64_t> max_bytes) = 0;
  [[nodiscard]] virtual bool pinned(std::int64_t bucket_id, std::string_view key) const = 0;
  // The bytes the bucket's pinned versions may hold (set_pins; a quarter of the device unset).
  [[nodiscard]] virtual std::uint64_t pin_max_bytes(std::int64_t bucket_id) const = 0;
  // Spans that together hold every pinned key of the bucket (none when nothing is pinned).
  [[nodiscard]] virtual std::vector<KeySpan> pin_spans(std::int64_t bucket_id) const = 0;
  // Pins `span` (one key, or every key under a prefix, also those written later), unless the
  // bucket's pinned bytes and what the pin adds would pass its cap: then nothing changes. What
  // it adds: the span's current versions not pinned yet, or, for a write of the key (`writing`),
  // the bytes it brings (the version it replaces goes). A span a rule covers already is pinned
  // whatever the count. The pinned bytes are counted afresh at most every kPinCountMs (a count
  // scans the pinned spans); pins in between are added to the last count.
  virtual boost::asio::awaitable<Result<PinOutcome>> pin(std::int64_t bucket_id, KeySpan span,
                                                         std::optional<std::uint64_t> writing) = 0;
  // Removes the pins of `span` (a prefix: every one under it); globs stay. Returns how many.
  virtual boost::asio::awaitable<Result<std::uint64_t>> unpin(std::int64_t bucket_id,
                                                              KeySpan span) = 0;
  // Up to `limit` versions of `span` in `state` (only pinned ones with `pinned_only`), in key
  // order after `after`.
  virtual boost::asio::awaitable<Result<std::vector<ObjectRecord>>> versions_in_state(
      std::int64_t bucket_id, KeySpan span, TierState state, std::string after, std::size_t limit,
      bool pinned_only) = 0;
  // The evicted versions of `span`: how many, and their bytes.
  virtual boost::asio::awaitable<Result<std::pair<std::uint64_t, std::uint64_t>>> evicted_totals(
      std::int64_t bucket_id, KeySpan span) = 0;
  // Prefetch jobs: a new one (its id; errors: kNotFound when the bucket is gone; the bucket's
  // ended jobs past the last kEndedPrefetchesKept go), what one has done (`after`, `failed`;
  // ended at `ended_ms` unless 0), and those of a bucket (of every bucket when 0; only those not
  // ended with `running`), oldest first.
  virtual boost::asio::awaitable<Result<std::int64_t>> begin_prefetch(PrefetchRecord job) = 0;
  virtual boost::asio::awaitable<Result<void>> advance_prefetch(std::int64_t id, std::string after,
                                                                std::uint64_t failed,
                                                                std::int64_t ended_ms) = 0;
  virtual boost::asio::awaitable<Result<std::vector<PrefetchRecord>>> prefetches(
      std::int64_t bucket_id, bool running) = 0;
  // Saves the read times kept in memory (versions the upstream also holds) to the catalog.
  virtual boost::asio::awaitable<Result<void>> save_access_times() = 0;
  // Gives the evicted version `stub` the data of a finished writer (made with for_part, so that
  // it has extents), fetched from the upstream: it becomes kLocalAndUpstream under a new version
  // id, keeping its ETag, Last-Modified, headers, metadata, checksums and part table. Errors:
  // kPreconditionFailed (the key's current version is no longer `stub`, evicted), kInvalidArgument
  // (not the stub's size).
  virtual boost::asio::awaitable<Result<ObjectRecord>> fill_object(
      std::unique_ptr<ObjectWriter> writer, ObjectRecord stub) = 0;

  // ---- tiering: partial objects ----
  // Up to `limit` of the chunks kept of the evicted version `object_id` with an index in
  // [first, last], by index (an index range, on the caller's thread).
  virtual Result<std::vector<ChunkRecord>> object_chunks(std::int64_t object_id,
                                                         std::uint32_t first, std::uint32_t last,
                                                         std::size_t limit) = 0;
  // A reader of kept chunk `index` of the evicted `version`, its offsets within the chunk.
  // Errors: kNotFound (not kept, or no longer).
  virtual boost::asio::awaitable<Result<std::unique_ptr<ObjectReader>>> open_chunk_reader(
      ObjectRecord version, std::uint32_t index) = 0;
  // Drops the kept chunks of `version` with an index in [first, last] (stored bytes that are
  // damaged, or fetched bytes that the version's check refused).
  virtual boost::asio::awaitable<Result<void>> forget_chunks(ObjectRecord version,
                                                             std::uint32_t first,
                                                             std::uint32_t last) = 0;
  // Keeps the data of a finished writer (made with for_part) as chunk `index` of the evicted
  // `version`. false (and the writer's space freed): the version is no longer the key's
  // current, evicted one, or the chunk is kept already. Errors: kInvalidArgument (not the
  // chunk's size).
  virtual boost::asio::awaitable<Result<bool>> keep_chunk(std::unique_ptr<ObjectWriter> writer,
                                                          ObjectRecord version,
                                                          std::uint32_t index) = 0;
  // Gives the evicted version `stub` the data of its kept chunks, once a whole fetch kept every
  // one and checked their bytes; as fill_object otherwise. Errors: kPreconditionFailed (the key's
  // current version is no longer `stub`, evicted, or a chunk is missing).
  virtual boost::asio::awaitable<Result<ObjectRecord>> fill_from_chunks(ObjectRecord stub) = 0;
  // While the returned hold lives, eviction by watermark leaves the kept chunks of `version_id`
  // alone: a whole fetch keeps them one by one, and would lose its start before its end.
  [[nodiscard]] virtual std::shared_ptr<void> hold_chunks(std::int64_t version_id) = 0;

  // Makes `key`'s state here what the upstream of `bucket` holds, learnt from it: `stub` (its
  // size, ETag, Last-Modified, headers, metadata, checksums, parts_count; `parts` its part table)
  // recorded as an evicted version (kUpstreamOnly, without data: its first read is a
  // read-through), or, without one, no version. Only while the key's current version is
  // `replacing` (0: none), is not one written here and not yet upstream, and the key owes the
  // upstream no change (a delete not yet confirmed there hides what the upstream still holds).
  // A replaced version's data is freed once its readers are done. With `seen_before` (the ETag
  // the key's tier_seen held when the upstream was asked, "" for none), only while it holds it
  // still: a change confirmed upstream meanwhile (a delete) makes the answer stale. Returns the
  // stub as recorded. Errors: kPreconditionFailed (the key is not in that state), kNotFound (no
  // such bucket).
  virtual boost::asio::awaitable<Result<std::optional<ObjectRecord>>> take_upstream_state(
      const BucketRecord& bucket, std::string key, std::int64_t replacing,
      std::optional<ObjectRecord> stub, std::vector<ObjectPartRecord> parts,
      std::optional<std::string> seen_before) = 0;

  // Settles `key`'s version `lost` (kLost, see recover_store): the upstream's version `stub`
  // (learnt from it, as take_upstream_state takes one) takes its place, or, without one, the key
  // holds no version here (forgotten); the upload its job owed is dropped. Returns the stub as
  // recorded. Errors: kPreconditionFailed (the key's version is no longer that lost one),
  // kNotFound (no such bucket).
  virtual boost::asio::awaitable<Result<std::optional<ObjectRecord>>> settle_lost(
      const BucketRecord& bucket, std::string key, std::int64_t lost,
      std::optional<ObjectRecord> stub, std::vector<ObjectPartRecord> parts) = 0;

  [[nodiscard]] virtual StoreStats stats() const = 0;
  // Whether writers' digest() is the MD5 of the data (StoreOptions::compute_md5).
  [[nodiscard]] virtual bool digest_is_md5() const noexcept = 0;
};

// `hots3 tier recover`: a stopped store whose device was lost, with a new blank device (all
// zeros) in its place, goes on with its catalog. The device gets the catalog's identity; the
// versions the upstream holds become evicted ones (reads fetch them back); those whose data was
// only on the device become lost (TierState::kLost): reads of them answer 500 until the
// operator takes the upstream's version or forgets the key. Throws std::runtime_error when the
// store cannot be recovered so (no catalog, a device that is not blank, a running server).
DeviceLoss recover_store(const StoreOptions& options);

}  // namespace hots3::storage
