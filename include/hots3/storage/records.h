#pragma once

// The records the store keeps and hands out: buckets, objects (with their content headers, user
// metadata, checksums, parts and tier state), multipart uploads and parts, and listing pages. The
// catalog stores them; the S3 layer reads and writes them through ObjectStore.

#include "hots3/common/metrics.h"
#include "hots3/storage/extent.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hots3::storage {

using Metadata = std::vector<std::pair<std::string, std::string>>;

// How a bucket is bound to an upstream S3. In kWriteback every change of a key leaves an upload
// job (TierJob) in the transaction that acknowledges it.
// kCache fronts an upstream bucket that others also write: keys it does not hold are looked up
// there, and writes go through to it as in kWritethrough.
enum class BucketTier : std::uint8_t { kNone = 0, kWriteback, kWritethrough, kCache };

// Whether a write is acknowledged only once the upstream holds it too.
inline bool writes_through(BucketTier tier) {
  return tier == BucketTier::kWritethrough || tier == BucketTier::kCache;
}

struct BucketRecord {
  std::int64_t id = 0;
  std::string name;
  std::string owner;
  std::int64_t created_ms = 0;
  BucketTier tier = BucketTier::kNone;
  std::string upstream;  // the binding as JSON, without secrets; "" = none
};

// Checksums as clients send them (base64 of the big-endian value), or as computed.
struct ChecksumSet {
  std::optional<std::string> crc32;
  std::optional<std::string> crc32c;
  std::optional<std::string> crc64nvme;
  std::optional<std::string> sha1;
  std::optional<std::string> sha256;
  std::optional<std::string> type;  // "FULL_OBJECT" or "COMPOSITE"
  bool operator==(const ChecksumSet&) const = default;
};

// Headers an object keeps (S3 returns them on GET and HEAD).
struct ContentHeaders {
  std::optional<std::string> content_type;
  std::optional<std::string> content_encoding;
  std::optional<std::string> content_disposition;
  std::optional<std::string> content_language;
  std::optional<std::string> cache_control;
  std::optional<std::string> expires;
  bool operator==(const ContentHeaders&) const = default;
};

enum class TierState : std::uint8_t {
  kLocal = 0,         // only here
  kLocalAndUpstream,  // here and safely upstream
  kUpstreamOnly,      // evicted: the data is upstream, the row stays for HEAD and LIST
  // Lost before upload: its data went with a lost device before it reached the upstream (tier
  // recover). Reads answer 500 until the operator takes the upstream's version or forgets it.
  kLost,
};
// Why a job of a version lost before upload is parked (tier status shows it).
inline constexpr const char* kLostCause =
    "lost before upload: its data went with a lost device (hots3 tier recover)";

struct ObjectRecord {
  std::int64_t id = 0;  // version id: unique for every stored version, never reused in a run
  std::int64_t bucket_id = 0;
  std::string key;
  std::uint64_t size_bytes = 0;
  std::string etag;               // without quotes
  std::uint32_t parts_count = 0;  // > 0 for multipart objects
  std::int64_t created_ms = 0;    // Last-Modified
  std::int64_t accessed_ms = 0;   // the creation time, until reads are tracked (tiering)
  TierState tier_state = TierState::kLocal;
  ContentHeaders headers;
  Metadata user_metadata;
  ChecksumSet checksums;
  std::optional<std::string> inline_data;  // small objects live in the catalog
  // The upstream's ETag of this version where it is not `etag` (an appended object's, sent in
  // parts of another size).
  std::optional<std::string> upstream_etag;
  // When the upstream was last known to hold this version, as the catalog has it (its data was
  // fetched, or its record learnt, then): a bucket's revalidation rule counts from it after a
  // restart. Later confirmations are kept in memory only.
  std::optional<std::int64_t> validated_ms;
};

// A partial object: the chunks of an evicted version that ranged GETs fetched and kept, each
// kTierChunkBytes of the version from index * kTierChunkBytes (the last one shorter).
inline constexpr std::uint64_t kTierChunkBytes = 8ULL << 20;
// The bytes chunk `index` of an object of `object_bytes` holds (0: past its end).
inline constexpr std::uint64_t tier_chunk_bytes(std::uint64_t object_bytes, std::uint32_t index) {
  const std::uint64_t begin = std::uint64_t{index} * kTierChunkBytes;
  return begin >= object_bytes ? 0 : std::min(kTierChunkBytes, object_bytes - begin);
}
struct ChunkRecord {
  std::int64_t id = 0;  // owns the chunk's extents (the shared id sequence)
  std::int64_t object_id = 0;
  std::uint32_t index = 0;
  std::uint64_t size_bytes = 0;
};

// A run of an object's (or part's) data on the device.
struct ExtentRecord {
  std::int64_t row_id = 0;                 // the catalog row (set when read back)
  std::uint64_t logical_offset_bytes = 0;  // within the object or part
  std::uint64_t length_bytes = 0;          // data bytes
  Extent device;                           // allocated device range (a multiple of the block size)
  std::vector<std::uint32_t> checksums;    // per 4 KiB block of the data (checksum.h)
};

struct PartRecord {
  std::int64_t id = 0;
  std::uint32_t part_number = 0;
  std::uint64_t size_bytes = 0;
  std::string etag;
  std::int64_t created_ms = 0;
  ChecksumSet checksums;
  // Write-through: the part's ETag in the upstream upload it was teed into ("" if not there).
  std::string tier_etag;
};

// How a multipart upload ended: a retried Complete or Abort is answered from it.
struct EndedUpload {
  std::optional<std::int64_t> object_id;  // the version a completion made; none: aborted
  std::int64_t ended_ms = 0;
};
// How long an abort is remembered.
inline constexpr std::chrono::milliseconds kAbortRemembered = std::chrono::hours(1);

// Write-through: where a part was teed upstream, the upstream upload and its ETag there.
struct TeedPart {
  std::string upload_id;
  std::string etag;
};

struct UploadRecord {
  std::int64_t id = 0;
  std::string upload_id;  // the opaque id clients see
  std::int64_t bucket_id = 0;
  std::string key;
  std::int64_t created_ms = 0;
  std::string owner;
  ContentHeaders headers;
  Metadata user_metadata;
  std::optional<std::string> checksum_algorithm;  // "CRC32", ...
  std::optional<std::string> checksum_type;       // "COMPOSITE" or "FULL_OBJECT"
  // Write-through: the upstream upload its parts are teed into ("" before the first is).
  std::string tier_upload_id;
};

// Where a completed multipart object's parts start (GET/HEAD ?partNumber=N).
struct ObjectPartRecord {
  std::uint32_t part_number = 0;
  std::uint64_t offset_bytes = 0;
  std::uint64_t size_bytes = 0;
  std::optional<std::string> checksum;  // the part's checksum of the upload's algorithm
};

struct ListQuery {
  std::string prefix;
  std::string delimiter;    // any string; "" = none
  std::string start_after;  // exclusive
  std::uint32_t max_keys = 1000;
};

struct ListEntry {
  std::string key;
  std::uint64_t size_bytes = 0;
  std::string etag;
  std::int64_t created_ms = 0;
  std::uint32_t parts_count = 0;
  std::optional<std::string> checksum_algorithm;
};

struct ListPage {
  std::vector<ListEntry> objects;
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string last;             // the last key or prefix returned: the next page starts after it
  std::uint64_t rows_read = 0;  // catalog rows the listing stepped over (what the page cost)
};

struct UploadListQuery {
  std::string prefix;
  std::string delimiter;
  std::string key_marker;
  std::string upload_id_marker;
  std::uint32_t max_uploads = 1000;
};

struct UploadListPage {
  std::vector<UploadRecord> uploads;
  std::vector<std::string> common_prefixes;
  bool truncated = false;
  std::string next_key_marker;
  std::string next_upload_id_marker;
  std::uint64_t rows_read = 0;  // upload rows the page read (what it costs)
};

// A key's change in a write-back bucket that the upstream does not have yet: its final state,
// to put (the version object_id) or to delete. One per key; a newer change replaces it.
struct TierJob {
  std::int64_t bucket_id = 0;
  std::string key;
  std::int64_t seq = 0;                   // acknowledgement order (from the id sequence)
  std::optional<std::int64_t> object_id;  // the version to upload; none: delete upstream
  std::uint64_t size_bytes = 0;           // bytes to upload
  std::int64_t first_ms = 0;  // acknowledgement of the oldest change of the key not yet upstream
  std::int64_t due_ms = 0;    // not before
  std::uint32_t attempts = 0;
  bool parked = false;  // an answer no retry changes (403, 400): an operator must act
  std::string last_error;
  std::string upload_id;  // the upstream multipart upload under way for it ("" = none)
  // A key of the bucket this version was renamed or copied from ("" = none): when the upstream
  // holds that key's data, an upstream copy replaces the upload.
  std::string source_key;
  // The ETags of versions of the key this job replaced, newest first, space-separated (a few
  // hundred bytes at most): one may be upstream although its upload was never confirmed.
  std::string prior_etags;
};

// A version lost before upload, as tier recover reports it.
struct LostVersion {
  std::string bucket;
  std::string key;
  std::uint64_t size_bytes = 0;
  std::string etag;
  // Where the upstream holds its data all the same (a key it was renamed or copied from, whose
  // upstream copy is ours): its job copies it there, and it becomes evicted. "" = truly lost.
  std::string upstream_source;
};

// What losing the device's data did to the catalog (tier recover).
struct DeviceLoss {
  std::uint64_t evicted = 0;  // versions the upstream holds: now evicted, read through
  std::uint64_t evicted_bytes = 0;
  std::uint64_t parts = 0;   // parts of unfinished multipart uploads, to be sent again
  std::uint64_t chunks = 0;  // kept chunks of evicted versions
  std::vector<LostVersion> lost;
};

// What the upstream holds under a key, as the uploader last saw it.
struct TierSeen {
  std::string etag;  // the upstream's ETag
  std::string ours;  // our ETag of the version it holds; "" when it is not ours (a conflict)
  bool operator==(const TierSeen&) const = default;
};

// A part of a job's upstream multipart upload that the upstream confirmed.
struct TierPart {
  std::uint32_t part_number = 0;
  std::uint64_t size_bytes = 0;
  std::string etag;
  bool operator==(const TierPart&) const = default;
};

// What write-back owes the upstream for one bucket.
struct TierBacklog {
  std::int64_t bucket_id = 0;
  std::uint64_t jobs = 0;
  std::uint64_t bytes = 0;
  std::uint64_t parked = 0;
  std::int64_t oldest_first_ms = 0;  // 0 = nothing owed
  // The jobs by what they will do upstream: upload a version, copy it from another key the
  // upstream holds (a rename or copy here), delete the key.
  std::uint64_t uploads = 0;
  std::uint64_t copies = 0;
  std::uint64_t deletes = 0;
};

// A prefetch job: the evicted versions of every key under a prefix, or of a list of keys, are
// fetched back (as RestoreObject fetches one) by a job that outlives a restart.
struct PrefetchRecord {
  std::int64_t id = 0;
  std::int64_t bucket_id = 0;
  std::string prefix;
  std::vector<std::string> keys;  // only these (sorted, unique); empty: every key under prefix
  std::string after;              // the keys up to this one are done (fetched or given up)
  std::uint64_t objects = 0;      // evicted versions to fetch when it began
  std::uint64_t bytes = 0;
  std::uint64_t failed = 0;  // versions whose fetch was given up
  std::int64_t created_ms = 0;
  std::int64_t ended_ms = 0;  // 0 while it runs
};

// Ended prefetch jobs kept per bucket (to be asked about); older ones go as new ones begin.
inline constexpr std::size_t kEndedPrefetchesKept = 20;

// Where the data of a bound bucket's versions is, and what eviction could free now.
struct TierSpace {
  std::int64_t bucket_id = 0;
  std::uint64_t objects = 0;
  std::uint64_t bytes = 0;
  std::uint64_t dirty_objects = 0;  // here only (not yet upstream)
  std::uint64_t dirty_bytes = 0;
  std::uint64_t clean_objects = 0;  // here and upstream
  std::uint64_t clean_bytes = 0;
  std::uint64_t remote_objects = 0;  // upstream only (evicted)
  std::uint64_t remote_bytes = 0;
  std::uint64_t pinned_bytes = 0;     // here, and kept from eviction by a pin
  std::uint64_t evictable_bytes = 0;  // what eviction may take now
  std::uint64_t lost_objects = 0;     // lost before upload (tier recover), until settled
  std::uint64_t lost_bytes = 0;
};

// Which keys of a bucket an expedite or a wait for the upstream covers.
struct KeySpan {
  std::string text;    // the key, or the prefix
  bool exact = false;  // the one key `text`, or every key starting with it
};

// What a bucket still owes the upstream under a KeySpan, of the jobs up to a seq.
struct TierOwed {
  std::uint64_t jobs = 0;    // parked ones included
  std::uint64_t parked = 0;  // no retry will change their answer
  std::string parked_error;  // one parked job's error
};

// The catalog writer's counters (StoreStats).
struct CatalogWriterStats {
  std::uint64_t writes = 0;
  std::uint64_t commits = 0;  // fsyncs; writes / commits is the group-commit factor
  // The writer's own checkpoints, after which the WAL starts over: the writer stops for each.
  std::uint64_t writer_checkpoints = 0;
  std::uint64_t writer_checkpoints_at_limit = 0;  // the checkpointer had not closed in on it
  std::uint64_t writer_checkpoint_ns = 0;         // the writer's time in them
  // A batch's transaction, BEGIN to COMMIT (into the WAL's pages), and a flush of the WAL that
  // makes the batches since the last one durable: a write's answer waits for both.
  metrics::Histogram::Snapshot batch_seconds;
  metrics::Histogram::Snapshot sync_seconds;
  metrics::SizeHistogram::Snapshot batch_writes;  // writes per batch (group commit at work)
};

// Open uploads in a bucket and of an owner, each counted up to a limit.
struct UploadCounts {
  std::uint64_t in_bucket = 0;
  std::uint64_t of_owner = 0;
};

}  // namespace hots3::storage
