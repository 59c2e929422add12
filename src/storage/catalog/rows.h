#pragma once

// Private to src/storage/catalog: how records map to rows and back (the column lists, the
// encodings of metadata, the statements that read a record by its key), shared by the writer's
// transaction and the readers.

#include "storage/catalog/sqlite.h"

#include "hots3/common/result.h"
#include "hots3/storage/records.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#define H3_OBJECT_COLUMNS                                                                          \
  "bucket_id, key, id, size, etag, parts_count, created_ms, accessed_ms, tier_state, "             \
  "is_inline, content_type, content_encoding, content_disposition, content_language, "             \
  "cache_control, expires, user_metadata, crc32, crc32c, crc64nvme, sha1, sha256, checksum_type, " \
  "upstream_etag, validated_ms"
// How many: the first column after them is this index.
constexpr int kObjectColumns = 25;

// An object's row, the values bound as ?1..?25 in H3_OBJECT_COLUMNS' order (insert_object_rows).
// A version recorded as the upstream's (evicted, tier_state 2: learnt there) was never written
// here, and min_resident does not keep it: clean_ms 0.
#define H3_INSERT_OBJECT                                                                        \
  "INSERT INTO objects(" H3_OBJECT_COLUMNS                                                      \
  ", clean_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, " \
  "?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, CASE ?9 WHEN 2 THEN 0 END)"

// The same, for a version whose row is its write-back job (see H3_IMPLIED_JOB_COLUMNS_O).
#define H3_INSERT_IMPLIED_OBJECT                                                               \
  "INSERT INTO objects(" H3_OBJECT_COLUMNS                                                     \
  ", tier_implied) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, " \
  "?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, 1)"

// The same columns qualified for a join with the objects table as "o".
#define H3_OBJECT_COLUMNS_O                                                                \
  "o.bucket_id, o.key, o.id, o.size, o.etag, o.parts_count, o.created_ms, o.accessed_ms, " \
  "o.tier_state, o.is_inline, o.content_type, o.content_encoding, o.content_disposition, " \
  "o.content_language, o.cache_control, o.expires, o.user_metadata, o.crc32, o.crc32c, "   \
  "o.crc64nvme, "                                                                          \
  "o.sha1, o.sha256, o.checksum_type, o.upstream_etag, o.validated_ms"

#define H3_UPLOAD_COLUMNS                                                              \
  "id, upload_id, bucket_id, key, created_ms, owner, content_type, content_encoding, " \
  "content_disposition, content_language, cache_control, expires, user_metadata, "     \
  "checksum_algorithm, checksum_type, tier_upload_id"

#define H3_PART_COLUMNS \
  "id, part_number, size, etag, created_ms, crc32, crc32c, crc64nvme, sha1, sha256, tier_etag"

#define H3_OBJECT_PART_COLUMNS "part_number, offset, size, checksum"

// What a listing shows of an object (read_list_entry).
#define H3_LIST_ENTRY_COLUMNS                                                         \
  "key, size, etag, created_ms, parts_count, crc32 IS NOT NULL, crc32c IS NOT NULL, " \
  "crc64nvme IS NOT NULL, sha1 IS NOT NULL, sha256 IS NOT NULL"

namespace hots3::storage::detail {

std::string encode_metadata(const Metadata& metadata);

Metadata decode_metadata(std::span<const std::byte> blob);

// The smallest string greater than every string that starts with `prefix` ("" if none: the
// prefix is empty or all 0xFF). Keys compare as bytes.
std::string prefix_successor(std::string prefix);

// An exclusive upper bound for keys that start with `prefix`, usable by the index range scan.
// With no prefix: a string above every key (keys are UTF-8 of at most 1024 bytes, and 0xFF
// never occurs in UTF-8).
std::string upper_bound_of(const std::string& prefix);
// Binds the bounds of a KeySpan for "key >= ?N AND key < ?N+1". The one key k is [k, k + NUL):
// keys compare as bytes, and nothing lies between a key and that successor.
void bind_key_span(Query& q, const KeySpan& span, int first_parameter);
// Every row `q` yields as a kept chunk: (id, object_id, chunk, size).
Result<std::vector<ChunkRecord>> read_chunks(Query& q);

// Registers h3_pinned(bucket_id, key) on `c`: whether `pinned` (CatalogOptions::pinned) holds the
// key pinned; false for every key when it is empty. `pinned` must outlive the connection.
void register_pinned(Connection& c,
                     const std::function<bool(std::int64_t, std::string_view)>& pinned);

// The versions (`o`) of the buckets in the JSON array ?1 clean before ?2 (uploaded then, or
// written then when clean at once) whose data eviction by watermark may take: upstream, not
// inline, needed by no queued job (the key's own or a copy's), not pinned.
// The conditions of the partial index objects_evictable, so that it gives the order;
// `+bucket_id` keeps the planner off objects_key, which would read and sort every row of the
// buckets.
#define H3_EVICTABLE_VERSIONS                                                                    \
  "o.tier_state = 1 AND o.is_inline = 0 AND coalesce(o.clean_ms, o.created_ms) < ?2 AND "        \
  "+o.bucket_id IN (SELECT value FROM json_each(?1)) AND NOT EXISTS (SELECT 1 FROM tier_jobs j " \
  "WHERE j.bucket_id = o.bucket_id AND (j.key = o.key OR j.source_key = o.key)) AND NOT "        \
  "h3_pinned(o.bucket_id, o.key)"

ObjectRecord read_object(const Query& q);
// Every row `q` still yields, read as above.
Result<std::vector<ObjectRecord>> read_objects(Query& q);

void bind_headers(Query& q, int first, const ContentHeaders& h);

void bind_checksums(Query& q, int first, const ChecksumSet& c);

UploadRecord read_upload(const Query& q);

PartRecord read_part(const Query& q);

ObjectPartRecord read_object_part(const Query& q);

ListEntry read_list_entry(const Query& q);

Result<std::vector<ExtentRecord>> read_extents(Connection& c, std::int64_t owner_id,
                                               bool with_checksums);

Result<std::optional<ObjectRecord>> find_object_on(Connection& c, std::int64_t bucket_id,
                                                   std::string_view key);

Result<std::optional<BucketRecord>> find_bucket_on(Connection& c, std::string_view name);

// A bucket's row, selected as H3_BUCKET_COLUMNS.
#define H3_BUCKET_COLUMNS "id, name, owner, created_ms, tier_mode, upstream"
BucketRecord read_bucket(const Query& q);

// A write-back job's row, selected as H3_TIER_JOB_COLUMNS.
#define H3_TIER_JOB_COLUMNS                                                               \
  "bucket_id, key, seq, object_id, size, first_ms, due_ms, attempts, state, last_error, " \
  "upload_id, source_key, prior_etags"
TierJob read_tier_job(const Query& q);
// A version's implied job (tier_implied = 1 while tier_state = 0: see the schema), selected from
// objects as "o" in H3_TIER_JOB_COLUMNS' order: its seq and object_id are the version's id, its
// first change the version's write; read by read_implied_job, which adds the coalescing delay.
#define H3_IMPLIED_JOB_COLUMNS_O                                                         \
  "o.bucket_id, o.key, o.id, o.id, o.size, o.created_ms, o.created_ms, 0, 0, '', NULL, " \
  "NULL, NULL"
#define H3_IMPLIED_JOB_WHERE_O "o.tier_implied = 1 AND o.tier_state = 0"
TierJob read_implied_job(const Query& q, std::int64_t delay_ms);

Result<std::optional<UploadRecord>> find_upload_on(Connection& c, std::string_view upload_id);
// The write-back job of `key`: its row, or its current version's implied job (none: no job).
Result<std::optional<TierJob>> find_tier_job_on(Connection& c, std::int64_t bucket_id,
                                                std::string_view key, std::int64_t delay_ms);
// What the upstream holds under `key`, as the uploader last saw it (none: nothing it knows of).
Result<std::optional<TierSeen>> find_tier_seen_on(Connection& c, std::int64_t bucket_id,
                                                  std::string_view key);

// Deletes the extents of an owner, returning their device ranges.
Result<ExtentList> delete_extents(Connection& c, std::int64_t owner_id);

Result<void> insert_extents(Connection& c, std::int64_t owner_id,
                            const std::vector<ExtentRecord>& extents,
                            std::uint64_t offset_shift = 0);

void configure_reader(Connection& c);

// The inline data in column `data` of `q`, checked against its checksum in column data + 1.
// A mismatch is corruption: logged, and the bytes never leave the catalog.
Result<std::string> verified_inline_data(const Query& q, int data, std::int64_t object_id);

}  // namespace hots3::storage::detail
