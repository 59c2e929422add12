#pragma once

// Private to src/storage. The catalog: buckets, objects, their extents and block checksums,
// multipart uploads and parts, and tiering state, in SQLite (WAL, synchronous=FULL, prepared
// statements only). The schema and its migrations are in schema.h beside this file.
//
// Reads run on the calling thread, each thread with its own read-only connection (WAL readers
// never wait for the writer). Writes go to one writer thread that runs every write queued
// while it was busy in one transaction (group commit); when one of them fails, the batch is run
// again with each write inside its own savepoint, so that one failing write does not undo the
// others. A syncer thread beside it flushes the WAL once for all the transactions committed
// since its last flush; a checkpointer thread copies the WAL back into the database. A write
// completes only once its transaction is durable.
//
// Keys compare as bytes (SQLite's BINARY collation over UTF-8), the order S3 lists them in.

#include "storage/device/format.h"

#include "hots3/common/result.h"
#include "hots3/storage/records.h"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hots3::storage {

class WriteTxn;

struct CatalogOptions {
  std::string path;             // the database file
  std::size_t batch_max = 512;  // writes per group commit
  // Whether a key is pinned (never evicted): eviction's queries ask for each candidate. Called
  // on the catalog's threads; must be thread-safe and quick.
  std::function<bool(std::int64_t bucket_id, std::string_view key)> pinned{};
  // Write-back's coalescing delay: a change is due this long after it was acknowledged.
  std::int64_t tier_delay_ms = 0;
};

// A version eviction may take, as Catalog::eviction_candidates finds it.
struct EvictionCandidate {
  std::int64_t id = 0;
  std::int64_t bucket_id = 0;
  std::string key;
  std::uint64_t size_bytes = 0;
};

// What WriteTxn::evict_if_evictable took: the version's key now, and its extents.
struct EvictedVersion {
  std::string key;
  ExtentList freed;
};

class Catalog {
 public:
  // Opens or creates the database and applies migrations. Throws std::runtime_error (a newer
  // schema than this build knows, an unreadable file).
  static std::unique_ptr<Catalog> open(const CatalogOptions& options);
  ~Catalog();  // stop(), then closes every connection
  Catalog(const Catalog&) = delete;
  Catalog& operator=(const Catalog&) = delete;
  Catalog(Catalog&&) = delete;
  Catalog& operator=(Catalog&&) = delete;

  // Finishes the queued writes, stops the writer thread and truncates the WAL.
  void stop();

  [[nodiscard]] int schema_version() const noexcept;

  // ---- reads: on the calling thread ----------------------------------------------------
  Result<std::optional<DeviceUuid>> device_uuid();
  Result<std::optional<BucketRecord>> find_bucket(std::string_view name);
  Result<std::vector<BucketRecord>> list_buckets();
  // Queued (not parked) write-back jobs due by `now_ms`, in acknowledgement order; at most `max`.
  Result<std::vector<TierJob>> due_tier_jobs(std::int64_t now_ms, std::size_t max);
  // Every job of a bucket, parked ones included, in acknowledgement order; without
  // `with_implied`, only those with rows of their own (every delete is one).
  Result<std::vector<TierJob>> tier_jobs(std::int64_t bucket_id, bool with_implied);
  // A bucket's parked jobs, the longest parked first, at most `max`.
  Result<std::vector<TierJob>> parked_tier_jobs(std::int64_t bucket_id, std::size_t max);
  // The key's job, parked or not; none when it owes the upstream nothing.
  Result<std::optional<TierJob>> tier_job(std::int64_t bucket_id, std::string_view key);
  Result<std::vector<TierBacklog>> tier_backlog();  // per bucket owing anything
  // Per bucket of the JSON array `bucket_ids` holding any version: where the data is, and what
  // eviction may take of what was clean (uploaded) before `clean_before_ms`.
  Result<std::vector<TierSpace>> tier_space(std::string_view bucket_ids,
                                            std::int64_t clean_before_ms);
  // Versions of the buckets `bucket_ids` (a JSON array) whose data may go (as
  // WriteTxn::evictable_objects), clean (uploaded) before `clean_before_ms`: the `each` most
  // recently read, most recent first, then the `each` least recently read (those not already
  // listed), least recent last.
  Result<std::vector<EvictionCandidate>> eviction_candidates(std::string_view bucket_ids,
                                                             std::int64_t clean_before_ms,
                                                             std::size_t each);
  // Every pin rule (tier_pins), by bucket id.
  Result<std::vector<std::pair<std::int64_t, KeySpan>>> pin_rules();
  // The bytes of the current versions of `span` that are pinned (`pinned`) or not (h3_pinned).
  Result<std::uint64_t> span_bytes(std::int64_t bucket_id, const KeySpan& span, bool pinned);
  // Up to `limit` versions of `span` in `state` (only pinned ones with `pinned_only`), in key
  // order after `after`.
  Result<std::vector<ObjectRecord>> versions_in_state(std::int64_t bucket_id, const KeySpan& span,
                                                      TierState state, std::string_view after,
                                                      std::size_t limit, bool pinned_only);
  // The evicted versions of `span`: how many, and their bytes.
  Result<std::pair<std::uint64_t, std::uint64_t>> evicted_totals(std::int64_t bucket_id,
                                                                 const KeySpan& span);
  // The prefetch jobs of a bucket (of every bucket when 0; only those not ended with `running`),
  // oldest first.
  Result<std::vector<PrefetchRecord>> prefetches(std::int64_t bucket_id, bool running);
  // Whether a job older than `seq` (parked ones included) waits under `prefix` of a bucket.
  Result<bool> tier_jobs_before(std::int64_t bucket_id, std::string_view prefix, std::int64_t seq);
  // The parts of job `seq`'s upstream upload the upstream confirmed, by part number.
  Result<std::vector<TierPart>> tier_parts(std::int64_t seq);
  // The upstream uploads jobs and write-through uploads still use (the rest under a binding's
  // prefix are orphans).
  Result<std::vector<std::string>> tier_upload_ids();
  // What the upstream holds under `key`, as the uploader last saw it (none: nothing it knows of).
  Result<std::optional<TierSeen>> tier_seen(std::int64_t bucket_id, std::string_view key);
  // Whether a queued job would copy its data from `key` upstream (its delete waits for them), or
  // a parked one of a version lost before upload that can only be copied from there.
  Result<bool> tier_copy_pending(std::int64_t bucket_id, std::string_view key);
  // What `span` of the bucket still owes, of the jobs up to `up_to_seq`.
  Result<TierOwed> tier_owed(std::int64_t bucket_id, const KeySpan& span, std::int64_t up_to_seq);
  Result<bool> bucket_empty(std::int64_t bucket_id);
  Result<std::optional<ObjectRecord>> find_object(std::int64_t bucket_id, std::string_view key);
  // The same with the inline data (small objects) filled in, in one statement: a small GET
  // costs one read transaction.
  Result<std::optional<ObjectRecord>> find_object_with_data(std::int64_t bucket_id,
                                                            std::string_view key);
  // The current version of (bucket, key) with its inline data and its extents (with their
  // checksums if its size is at most `checksums_size_max`), all read in one read transaction.
  // Reading the object and then its extents in two transactions can find a version whose rows
  // a concurrent overwrite, append or delete removes in between; this cannot. nullopt: no key.
  struct ObjectLayout {
    ObjectRecord object;
    std::vector<ExtentRecord> extents;  // logical order; empty for inline objects
  };
  Result<std::optional<ObjectLayout>> find_object_layout(std::int64_t bucket_id,
                                                         std::string_view key,
                                                         std::uint64_t checksums_size_max);
  // The extents of an object in logical order; their checksums only if asked for (a large
  // object's checksums are large: readers load them per extent with extent_checksums).
  Result<std::vector<ExtentRecord>> object_extents(std::int64_t object_id,
                                                   bool with_checksums = false);
  Result<std::vector<std::uint32_t>> extent_checksums(std::int64_t row_id);
  Result<std::optional<std::string>> inline_data(std::int64_t object_id);
  Result<std::vector<ObjectPartRecord>> object_parts(std::int64_t object_id);
  // Up to `limit` of the chunks kept of an evicted version with an index in [first, last], by
  // index (an index range).
  Result<std::vector<ChunkRecord>> object_chunks(std::int64_t object_id, std::uint32_t first,
                                                 std::uint32_t last, std::size_t limit);
  // One part of a completed multipart object (an index lookup), or nullopt.
  Result<std::optional<ObjectPartRecord>> object_part(std::int64_t object_id,
                                                      std::uint32_t part_number);
  // A page costs what it returns: a delimiter listing skips each common prefix with one seek.
  Result<ListPage> list_objects(std::int64_t bucket_id, const ListQuery& query);
  Result<std::optional<UploadRecord>> find_upload(std::string_view upload_id);
  // How an upload ended, while that is remembered (an index lookup).
  Result<std::optional<EndedUpload>> ended_upload(std::string_view upload_id);
  Result<std::vector<PartRecord>> list_parts(std::int64_t upload_row, std::uint32_t after_part,
                                             std::uint32_t max_parts);
  Result<std::vector<ExtentRecord>> part_extents(std::int64_t part_id, bool with_checksums = false);
  Result<UploadListPage> list_uploads(std::int64_t bucket_id, const UploadListQuery& query);
  // Open uploads in a bucket and of an owner, each counted up to `limit` (enough to enforce a cap
  // of `limit`, without reading further).
  Result<UploadCounts> count_uploads(std::int64_t bucket_id, std::string_view owner,
                                     std::uint64_t limit);
  // Uploads created before `created_before_ms` (abandoned-upload cleanup).
  Result<std::vector<UploadRecord>> uploads_older_than(std::int64_t created_before_ms,
                                                       std::size_t limit);
  // Every extent any object or part references (start-up rebuild of the free space, check).
  Result<ExtentList> all_extents();
  struct Counts {
    std::uint64_t buckets = 0, objects = 0, uploads = 0, parts = 0, extents = 0;
  };
  Result<Counts> counts();

  // ---- writes: on the writer thread, group-committed -----------------------------------
  using WriteFn = std::function<Result<void>(WriteTxn&)>;
  // Runs `fn` in the next group commit; completes on the caller's executor once the commit is
  // durable (or failed: then the write's own error, or the commit's). `fn` runs on the writer
  // thread and must not block on anything but the catalog. It may run more than once, from
  // the start, after its batch was rolled back (when a write of the batch failed after it had
  // changed something): outside the catalog it may only assign its results. `on_durable`, if
  // given, runs once the write succeeded and is durable, before the caller resumes, on the
  // thread that makes commits durable: the on_durable of all writes run one at a time, in
  // commit order. It must be quick and must not touch the catalog.
  boost::asio::awaitable<Result<void>> write(WriteFn fn, std::function<void()> on_durable = {});
  // The same, blocking the calling thread (start-up, tools, tests). Never on a worker.
  Result<void> write_blocking(WriteFn fn);

  // Bytes acknowledged in write-back buckets and not yet upstream (queued uploads, parked ones
  // included), as of the last commit: kept in memory, so a request may ask.
  [[nodiscard]] std::uint64_t tier_owed_bytes() const noexcept;

  using WriterStats = CatalogWriterStats;
  [[nodiscard]] WriterStats writer_stats() const noexcept;

 private:
  struct Impl;
  explicit Catalog(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The writer's view inside Catalog::write. Every method runs on the writer thread.
class WriteTxn {
 public:
  virtual ~WriteTxn() = default;
  WriteTxn() = default;
  WriteTxn(const WriteTxn&) = delete;
  WriteTxn& operator=(const WriteTxn&) = delete;
  WriteTxn(WriteTxn&&) = delete;
  WriteTxn& operator=(WriteTxn&&) = delete;

  // A new version/part id, larger than every id issued before in this run.
  virtual std::int64_t next_id() = 0;
  virtual Result<void> set_device_uuid(const DeviceUuid& uuid) = 0;

  virtual Result<std::optional<BucketRecord>> find_bucket(std::string_view name) = 0;
  // Errors: kAlreadyExists.
  virtual Result<BucketRecord> create_bucket(std::string_view name, std::string_view owner,
                                             std::int64_t created_ms) = 0;
  // Errors: kConflict when objects or uploads remain.
  virtual Result<void> delete_bucket(std::int64_t bucket_id) = 0;

  virtual Result<std::optional<ObjectRecord>> find_object(std::int64_t bucket_id,
                                                          std::string_view key) = 0;
  // Inserts `object` (its id must come from next_id()) with its extents or inline data.
  // REQUIRES: no object with the same key (delete_object first).
  virtual Result<void> insert_object(const ObjectRecord& object,
                                     const std::vector<ExtentRecord>& extents) = 0;
  // The same where the key may have an object: then nothing is written and the result is false.
  // A put of a new key needs no lookup before its insert.
  virtual Result<bool> insert_object_if_absent(const ObjectRecord& object,
                                               const std::vector<ExtentRecord>& extents) = 0;
  // Removes the object row, its extents, inline data, part table and kept chunks; returns the
  // device extents it held (free them once the commit is durable and no reader uses them).
  virtual Result<ExtentList> delete_object(std::int64_t object_id) = 0;
  virtual Result<void> update_object_metadata(const ObjectRecord& object) = 0;
  // Renames an object (same bucket or another) without touching its data; the version is then
  // local only (TierState::kLocal).
  virtual Result<void> move_object(std::int64_t object_id, std::int64_t bucket_id,
                                   std::string_view key) = 0;
  // Gives version `from_object_id`'s data to version `to_object_id`: its extents (with their
  // logical offsets and block checksums) and its part table move over unchanged, so an append
  // keeps the data it extends without copying it. delete_object(from) then frees nothing.
  virtual Result<void> move_object_data(std::int64_t from_object_id, std::int64_t to_object_id) = 0;
  // Adds rows to an object's part table (GET/HEAD ?partNumber=N).
  virtual Result<void> insert_object_parts(std::int64_t object_id,
                                           const std::vector<ObjectPartRecord>& parts) = 0;

  virtual Result<void> insert_upload(const UploadRecord& upload) = 0;
  virtual Result<std::optional<UploadRecord>> find_upload(std::string_view upload_id) = 0;
  // Inserts a part of `upload`; returns the device extents of the part it replaces (if any). A
  // part teed into an upstream upload (`tier_etag` set) records that upload as the upload's;
  // when it is another than the one recorded, the other parts' upstream ETags are forgotten.
  virtual Result<ExtentList> put_part(const UploadRecord& upload, const PartRecord& part,
                                      const std::vector<ExtentRecord>& extents,
                                      std::string_view tier_upload_id = {}) = 0;
  virtual Result<std::vector<PartRecord>> parts(std::int64_t upload_row) = 0;
  // Turns the listed parts (in order) into `object`'s data without copying it: their extents
  // move to the object, shifted to the parts' offsets in it. Parts not listed are deleted and
  // their extents returned, as is the upload row.
  virtual Result<ExtentList> complete_upload(
      std::int64_t upload_row, const ObjectRecord& object,
      const std::vector<std::pair<PartRecord, std::uint64_t>>& parts_and_offsets,
      const std::vector<ObjectPartRecord>& part_table) = 0;
  // Deletes the upload, its parts and their extents; returns the device extents.
  virtual Result<ExtentList> delete_upload(std::int64_t upload_row) = 0;
  // Remembers that the upload was aborted (for kAbortRemembered; older ones are forgotten).
  virtual Result<void> record_abort(std::int64_t upload_row, std::int64_t now_ms) = 0;

  // ---- write-back to an upstream ----
  virtual Result<void> set_bucket_tier(std::int64_t bucket_id, BucketTier tier,
                                       std::string_view upstream) = 0;
  // Records that `key` changed to version `object_id` (none: deleted), replacing the key's
  // pending job if any (keeping the time of its oldest change, and its version's ETag among the
  // prior ones: REQUIRES that version's row is still there); due at `due_ms`. `source_key`:
  // the key of the bucket the version was renamed or copied from ("" = none).
  virtual Result<void> queue_tier_job(std::int64_t bucket_id, std::string_view key,
                                      std::optional<std::int64_t> object_id,
                                      std::uint64_t size_bytes, std::int64_t now_ms,
                                      std::int64_t due_ms, std::string_view source_key) = 0;
  // As queue_tier_job for the upload of a new version `object_id` of `key`, called before the
  // version's row is inserted and before the version it replaces (if any) is deleted: when the
  // key has no job and that version is upstream already, the job is implied by the new version's
  // row (insert_object marks it) and no job row is written. REQUIRES the same transaction
  // inserts the version next (insert_object or insert_object_if_absent, which looks at a version
  // in the way, or delete_object of that version first).
  virtual Result<void> imply_tier_job(std::int64_t bucket_id, std::string_view key,
                                      std::int64_t object_id, std::uint64_t size_bytes,
                                      std::int64_t now_ms, std::int64_t due_ms) = 0;
  // What the upstream was last seen to hold under `key` (none: nothing, or never seen).
  virtual Result<std::optional<TierSeen>> find_tier_seen(std::int64_t bucket_id,
                                                         std::string_view key) = 0;
  // Records what the upstream holds under `key` (nullptr: nothing).
  virtual Result<void> set_tier_seen(std::int64_t bucket_id, std::string_view key,
                                     const TierSeen* seen) = 0;
  // Removes `job` if it is still its key's (same seq): false when a newer change replaced it.
  virtual Result<bool> finish_tier_job(const TierJob& job) = 0;
  // The job queued for `key`, if any.
  virtual Result<std::optional<TierJob>> find_tier_job(std::int64_t bucket_id,
                                                       std::string_view key) = 0;
  // Removes whatever is queued for `key` (a write-through commit made the upstream current).
  virtual Result<void> drop_tier_job(std::int64_t bucket_id, std::string_view key) = 0;
  // Adds `etag` to the ETags of versions of ours the key's queued job may replace upstream.
  virtual Result<void> add_prior_etag(std::int64_t bucket_id, std::string_view key,
                                      std::string_view etag) = 0;
  // Reschedules `job` if it is still its key's: one more attempt, due at `due_ms`, parked or not.
  virtual Result<bool> defer_tier_job(const TierJob& job, std::int64_t due_ms,
                                      std::string_view error, bool park) = 0;
  // Moves each of `jobs` that is still its key's and queued to `due_ms`, its attempts untouched.
  virtual Result<void> postpone_tier_jobs(std::span<const TierJob> jobs, std::int64_t due_ms) = 0;
  // Queues the upload of every version of a bucket that is only here (tier_state 0) and has no
  // job yet, due at `now_ms`, in the order they were written; returns how many.
  virtual Result<std::uint64_t> queue_local_objects(std::int64_t bucket_id,
                                                    std::int64_t now_ms) = 0;
  // Records the upstream multipart upload of `job` ("" = none any more, its parts forgotten);
  // false when the job is no longer its key's.
  virtual Result<bool> set_tier_upload(const TierJob& job, std::string_view upload_id) = 0;
  // Records a part of it the upstream confirmed; false when the job is no longer its key's.
  virtual Result<bool> add_tier_part(const TierJob& job, const TierPart& part) = 0;
  // Makes the jobs of `span` that wait out the coalescing delay (not a retry's back-off) due at
  // `now_ms`; returns the highest seq of the span's jobs (0: none).
  virtual Result<std::int64_t> expedite_tier_jobs(std::int64_t bucket_id, const KeySpan& span,
                                                  std::int64_t now_ms) = 0;
  // The device's data is gone (a blank device in its place): every extent row goes, with the
  // kept chunks and the parts of unfinished uploads. A version the upstream holds becomes an
  // evicted one (reads fetch it back); one whose data only the device held (not inline: that is
  // in the catalog) becomes lost (TierState::kLost), its job parked. Returns what it changed, and
  // every lost version (those of earlier runs too).
  virtual Result<DeviceLoss> lose_device_data() = 0;
  // Makes every parked job due at `now_ms` (the cause may be mended); returns how many.
  virtual Result<std::uint64_t> unpark_tier_jobs(std::int64_t now_ms) = 0;
  // Marks a version as upstream too (tier_state) since `now_ms`, with the upstream's ETag where
  // it differs.
  virtual Result<void> set_object_uploaded(std::int64_t object_id,
                                           std::optional<std::string_view> upstream_etag,
                                           std::int64_t now_ms) = 0;
  // Up to `limit` versions of `span`, in key order after `after`, whose data may go: upstream
  // too, not inline, and needed by no queued change of the bucket (the key's own, or a copy's
  // from it).
  virtual Result<std::vector<ObjectRecord>> evictable_objects(std::int64_t bucket_id,
                                                              const KeySpan& span,
                                                              std::string_view after,
                                                              std::size_t limit) = 0;
  // A pin rule: one key, or every key under a prefix (rules under a new prefix rule go, as it
  // holds them).
  virtual Result<void> add_pin(std::int64_t bucket_id, const KeySpan& span) = 0;
  // A new prefetch job (its id is set); errors: kNotFound when its bucket is gone.
  virtual Result<std::int64_t> insert_prefetch(const PrefetchRecord& job) = 0;
  // The job is done up to key `after`, with `failed` given up in all; ended once `ended_ms`.
  virtual Result<void> advance_prefetch(std::int64_t id, std::string_view after,
                                        std::uint64_t failed, std::int64_t ended_ms) = 0;
  // Removes the rules of `span` (a prefix: every rule under it); returns how many.
  virtual Result<std::uint64_t> remove_pins(std::int64_t bucket_id, const KeySpan& span) = 0;
  // When the version was last read (times kept in memory, written in batches).
  virtual Result<void> set_accessed(std::int64_t object_id, std::int64_t accessed_ms) = 0;
  // The version's data goes (its extents are returned); its row stays, upstream only.
  virtual Result<ExtentList> evict_object(std::int64_t object_id) = 0;
  // The same, if the version may still go (as evictable_objects); none when it may not.
  virtual Result<std::optional<EvictedVersion>> evict_if_evictable(std::int64_t object_id) = 0;
  // Keeps `chunk` (its id from next_id()) of an evicted version with its extents; false when the
  // version is no longer evicted or the chunk is kept already.
  virtual Result<bool> insert_chunk(const ChunkRecord& chunk,
                                    const std::vector<ExtentRecord>& extents,
                                    std::int64_t now_ms) = 0;
  // Up to `limit` kept chunks: of versions of the buckets `bucket_ids` but not of `held_ids`
  // (JSON arrays), kept before `kept_before_ms`, the oldest first; of the versions of `span`.
  virtual Result<std::vector<ChunkRecord>> oldest_chunks(std::string_view bucket_ids,
                                                         std::string_view held_ids,
                                                         std::int64_t kept_before_ms,
                                                         std::size_t limit) = 0;
  virtual Result<std::vector<ChunkRecord>> span_chunks(std::int64_t bucket_id, const KeySpan& span,
                                                       std::size_t limit) = 0;
  // Removes a version's kept chunks (or one chunk, by its id); returns their device extents.
  virtual Result<ExtentList> delete_chunks(std::int64_t object_id) = 0;
  virtual Result<ExtentList> delete_chunk(std::int64_t chunk_id) = 0;
  // The id of kept chunk `index` of a version, if it is kept.
  virtual Result<std::optional<std::int64_t>> find_chunk(std::int64_t object_id,
                                                         std::uint32_t index) = 0;
  // Moves the extents of every kept chunk of the evicted version `stub_id` (of `size_bytes`) to
  // `new_id`, at their offsets in the version, and removes the chunks: what refill_object then
  // gives the version. false (nothing changed): not every chunk is kept at its size.
  virtual Result<bool> adopt_chunks(std::int64_t stub_id, std::int64_t new_id,
                                    std::uint64_t size_bytes) = 0;
  // An evicted version gets data again, as version `new_id` read at `now_ms` (the row, its parts
  // and what refers to it move to the new id). false: `stub_id` is not an evicted version.
  virtual Result<bool> refill_object(std::int64_t stub_id, std::int64_t new_id,
                                     const std::vector<ExtentRecord>& extents,
                                     std::int64_t now_ms) = 0;
};

}  // namespace hots3::storage
