#include "storage/catalog/rows.h"

#include "storage/checksum.h"

#include "hots3/common/logging.h"

#include <fmt/format.h>

namespace hots3::storage::detail {

std::string encode_metadata(const Metadata& metadata) {
  std::string out;
  for (const auto& [name, value] : metadata) {
    out += name;
    out += '\0';
    out += value;
    out += '\0';
  }
  return out;
}

Metadata decode_metadata(std::span<const std::byte> blob) {
  Metadata out;
  const std::string_view text(reinterpret_cast<const char*>(blob.data()), blob.size());
  std::size_t at = 0;
  while (at < text.size()) {
    const auto name_end = text.find('\0', at);
    if (name_end == std::string_view::npos) break;
    const auto value_end = text.find('\0', name_end + 1);
    if (value_end == std::string_view::npos) break;
    out.emplace_back(std::string(text.substr(at, name_end - at)),
                     std::string(text.substr(name_end + 1, value_end - name_end - 1)));
    at = value_end + 1;
  }
  return out;
}

std::string prefix_successor(std::string prefix) {
  while (!prefix.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(prefix.back());
    if (last != 0xFF) {
      ++last;
      return prefix;
    }
    prefix.pop_back();
  }
  return prefix;
}

std::string upper_bound_of(const std::string& prefix) {
  std::string upper = prefix_successor(prefix);
  if (upper.empty()) upper.assign(1025, '\xff');
  return upper;
}

Result<std::vector<ChunkRecord>> read_chunks(Query& q) {
  std::vector<ChunkRecord> out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    out.push_back({q.int64(0), q.int64(1), static_cast<std::uint32_t>(q.int64(2)), q.uint64(3)});
  }
  return out;
}

void bind_key_span(Query& q, const KeySpan& span, int first_parameter) {
  q.bind(first_parameter, std::string_view(span.text));
  q.bind(first_parameter + 1, span.exact ? span.text + '\0' : upper_bound_of(span.text));
}

ObjectRecord read_object(const Query& q) {
  ObjectRecord o;
  o.bucket_id = q.int64(0);
  o.key = std::string(q.text(1));
  o.id = q.int64(2);
  o.size_bytes = q.uint64(3);
  o.etag = std::string(q.text(4));
  o.parts_count = static_cast<std::uint32_t>(q.int64(5));
  o.created_ms = q.int64(6);
  o.accessed_ms = q.int64(7);
  o.tier_state = static_cast<TierState>(q.int64(8));
  if (q.int64(9) != 0) o.inline_data.emplace();  // the data itself is read on demand
  o.headers.content_type = q.optional_text(10);
  o.headers.content_encoding = q.optional_text(11);
  o.headers.content_disposition = q.optional_text(12);
  o.headers.content_language = q.optional_text(13);
  o.headers.cache_control = q.optional_text(14);
  o.headers.expires = q.optional_text(15);
  o.user_metadata = decode_metadata(q.blob(16));
  o.checksums.crc32 = q.optional_text(17);
  o.checksums.crc32c = q.optional_text(18);
  o.checksums.crc64nvme = q.optional_text(19);
  o.checksums.sha1 = q.optional_text(20);
  o.checksums.sha256 = q.optional_text(21);
  o.checksums.type = q.optional_text(22);
  o.upstream_etag = q.optional_text(23);
  if (!q.is_null(24)) o.validated_ms = q.int64(24);
  return o;
}

Result<std::vector<ObjectRecord>> read_objects(Query& q) {
  std::vector<ObjectRecord> found;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    found.push_back(read_object(q));
  }
  return found;
}

void bind_headers(Query& q, int first, const ContentHeaders& h) {
  q.bind_optional(first, h.content_type)
      .bind_optional(first + 1, h.content_encoding)
      .bind_optional(first + 2, h.content_disposition)
      .bind_optional(first + 3, h.content_language)
      .bind_optional(first + 4, h.cache_control)
      .bind_optional(first + 5, h.expires);
}

void bind_checksums(Query& q, int first, const ChecksumSet& c) {
  q.bind_optional(first, c.crc32)
      .bind_optional(first + 1, c.crc32c)
      .bind_optional(first + 2, c.crc64nvme)
      .bind_optional(first + 3, c.sha1)
      .bind_optional(first + 4, c.sha256);
}

UploadRecord read_upload(const Query& q) {
  UploadRecord u;
  u.id = q.int64(0);
  u.upload_id = std::string(q.text(1));
  u.bucket_id = q.int64(2);
  u.key = std::string(q.text(3));
  u.created_ms = q.int64(4);
  u.owner = std::string(q.text(5));
  u.headers.content_type = q.optional_text(6);
  u.headers.content_encoding = q.optional_text(7);
  u.headers.content_disposition = q.optional_text(8);
  u.headers.content_language = q.optional_text(9);
  u.headers.cache_control = q.optional_text(10);
  u.headers.expires = q.optional_text(11);
  u.user_metadata = decode_metadata(q.blob(12));
  u.checksum_algorithm = q.optional_text(13);
  u.checksum_type = q.optional_text(14);
  u.tier_upload_id = q.optional_text(15).value_or("");
  return u;
}

ListEntry read_list_entry(const Query& q) {
  ListEntry e;
  e.key = std::string(q.text(0));
  e.size_bytes = q.uint64(1);
  e.etag = std::string(q.text(2));
  e.created_ms = q.int64(3);
  e.parts_count = static_cast<std::uint32_t>(q.int64(4));
  static constexpr const char* kAlgorithms[] = {"CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"};
  for (int i = 0; i < 5; ++i) {
    if (q.int64(5 + i) != 0) {
      e.checksum_algorithm = kAlgorithms[i];
      break;
    }
  }
  return e;
}

PartRecord read_part(const Query& q) {
  PartRecord p;
  p.id = q.int64(0);
  p.part_number = static_cast<std::uint32_t>(q.int64(1));
  p.size_bytes = q.uint64(2);
  p.etag = std::string(q.text(3));
  p.created_ms = q.int64(4);
  p.checksums.crc32 = q.optional_text(5);
  p.checksums.crc32c = q.optional_text(6);
  p.checksums.crc64nvme = q.optional_text(7);
  p.checksums.sha1 = q.optional_text(8);
  p.checksums.sha256 = q.optional_text(9);
  p.tier_etag = q.optional_text(10).value_or("");
  return p;
}

ObjectPartRecord read_object_part(const Query& q) {
  return {static_cast<std::uint32_t>(q.int64(0)), q.uint64(1), q.uint64(2), q.optional_text(3)};
}

Result<std::vector<ExtentRecord>> read_extents(Connection& c, std::int64_t owner_id,
                                               bool with_checksums) {
  auto q =
      c.query(with_checksums
                  ? "SELECT id, logical_offset, length, device_offset, device_length, checksums "
                    "FROM extents "
                    "WHERE owner_id = ?1 ORDER BY logical_offset"
                  : "SELECT id, logical_offset, length, device_offset, device_length FROM extents "
                    "WHERE owner_id = ?1 ORDER BY logical_offset");
  q.bind(1, owner_id);
  std::vector<ExtentRecord> out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    ExtentRecord e;
    e.row_id = q.int64(0);
    e.logical_offset_bytes = q.uint64(1);
    e.length_bytes = q.uint64(2);
    e.device = {q.uint64(3), q.uint64(4)};
    if (with_checksums) e.checksums = decode_checksums(q.blob(5));
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::optional<ObjectRecord>> find_object_on(Connection& c, std::int64_t bucket_id,
                                                   std::string_view key) {
  auto q = c.query("SELECT " H3_OBJECT_COLUMNS " FROM objects WHERE bucket_id = ?1 AND key = ?2");
  q.bind(1, bucket_id).bind(2, key);
  H3_TRY(bool row, q.step());
  if (!row) return std::optional<ObjectRecord>{};
  return std::optional<ObjectRecord>(read_object(q));
}

Result<std::optional<BucketRecord>> find_bucket_on(Connection& c, std::string_view name) {
  auto q = c.query("SELECT " H3_BUCKET_COLUMNS " FROM buckets WHERE name = ?1");
  q.bind(1, name);
  H3_TRY(bool row, q.step());
  if (!row) return std::optional<BucketRecord>{};
  return std::optional<BucketRecord>(read_bucket(q));
}

BucketRecord read_bucket(const Query& q) {
  return BucketRecord{q.int64(0),
                      std::string(q.text(1)),
                      std::string(q.text(2)),
                      q.int64(3),
                      static_cast<BucketTier>(q.int64(4)),
                      std::string(q.text(5))};
}

TierJob read_tier_job(const Query& q) {
  TierJob job;
  job.bucket_id = q.int64(0);
  job.key = std::string(q.text(1));
  job.seq = q.int64(2);
  if (!q.is_null(3)) job.object_id = q.int64(3);
  job.size_bytes = static_cast<std::uint64_t>(q.int64(4));
  job.first_ms = q.int64(5);
  job.due_ms = q.int64(6);
  job.attempts = static_cast<std::uint32_t>(q.int64(7));
  job.parked = q.int64(8) != 0;
  job.last_error = std::string(q.text(9));
  job.upload_id = q.optional_text(10).value_or(std::string());
  job.source_key = q.optional_text(11).value_or(std::string());
  job.prior_etags = q.optional_text(12).value_or(std::string());
  return job;
}

TierJob read_implied_job(const Query& q, std::int64_t delay_ms) {
  TierJob job = read_tier_job(q);
  job.due_ms = job.first_ms + delay_ms;
  return job;
}

Result<std::optional<UploadRecord>> find_upload_on(Connection& c, std::string_view upload_id) {
  auto q = c.query("SELECT " H3_UPLOAD_COLUMNS " FROM uploads WHERE upload_id = ?1");
  q.bind(1, upload_id);
  H3_TRY(bool row, q.step());
  if (!row) return std::optional<UploadRecord>{};
  return std::optional<UploadRecord>(read_upload(q));
}

Result<std::optional<TierJob>> find_tier_job_on(Connection& c, std::int64_t bucket_id,
                                                std::string_view key, std::int64_t delay_ms) {
  auto q =
      c.query("SELECT " H3_TIER_JOB_COLUMNS " FROM tier_jobs WHERE bucket_id = ?1 AND key = ?2");
  q.bind(1, bucket_id).bind(2, key);
  H3_TRY(bool row, q.step());
  if (row) return std::optional<TierJob>(read_tier_job(q));
  auto implied = c.query("SELECT " H3_IMPLIED_JOB_COLUMNS_O
                         " FROM objects o INDEXED BY objects_key WHERE o.bucket_id = ?1 AND "
                         "o.key = ?2 AND " H3_IMPLIED_JOB_WHERE_O);
  implied.bind(1, bucket_id).bind(2, key);
  H3_TRY(row, implied.step());
  if (!row) return std::optional<TierJob>{};
  return std::optional<TierJob>(read_implied_job(implied, delay_ms));
}

Result<std::optional<TierSeen>> find_tier_seen_on(Connection& c, std::int64_t bucket_id,
                                                  std::string_view key) {
  auto q = c.query("SELECT etag, ours FROM tier_seen WHERE bucket_id = ?1 AND key = ?2");
  q.bind(1, bucket_id).bind(2, key);
  H3_TRY(bool row, q.step());
  if (!row) return std::optional<TierSeen>{};
  return std::optional<TierSeen>(TierSeen{std::string(q.text(0)), std::string(q.text(1))});
}

Result<ExtentList> delete_extents(Connection& c, std::int64_t owner_id) {
  ExtentList freed;
  {
    auto q = c.query("SELECT device_offset, device_length FROM extents WHERE owner_id = ?1");
    q.bind(1, owner_id);
    for (;;) {
      H3_TRY(bool row, q.step());
      if (!row) break;
      freed.push_back({q.uint64(0), q.uint64(1)});
    }
  }
  auto d = c.query("DELETE FROM extents WHERE owner_id = ?1");
  d.bind(1, owner_id);
  H3_TRY(d.run());
  return freed;
}

Result<void> insert_extents(Connection& c, std::int64_t owner_id,
                            const std::vector<ExtentRecord>& extents, std::uint64_t offset_shift) {
  for (const ExtentRecord& e : extents) {
    auto q = c.query(
        "INSERT INTO extents(owner_id, logical_offset, length, device_offset, device_length, "
        "checksums) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    q.bind(1, owner_id)
        .bind(2, e.logical_offset_bytes + offset_shift)
        .bind(3, e.length_bytes)
        .bind(4, e.device.offset_bytes)
        .bind(5, e.device.length_bytes)
        .bind_blob(6, encode_checksums(e.checksums));
    H3_TRY(q.run());
  }
  return {};
}

void register_pinned(Connection& c,
                     const std::function<bool(std::int64_t, std::string_view)>& pinned) {
  const auto call = [](sqlite3_context* context, int, sqlite3_value** argv) {
    const auto& is_pinned =
        *static_cast<const std::function<bool(std::int64_t, std::string_view)>*>(
            sqlite3_user_data(context));
    const auto* key = reinterpret_cast<const char*>(sqlite3_value_text(argv[1]));
    const auto length = static_cast<std::size_t>(sqlite3_value_bytes(argv[1]));
    const bool pinned_key = is_pinned && key != nullptr &&
                            is_pinned(sqlite3_value_int64(argv[0]), std::string_view(key, length));
    sqlite3_result_int(context, pinned_key ? 1 : 0);
  };
  // Not deterministic: pins change while a connection lives.
  if (sqlite3_create_function_v2(c.handle(), "h3_pinned", 2, SQLITE_UTF8,
                                 const_cast<void*>(static_cast<const void*>(&pinned)), call,
                                 nullptr, nullptr, nullptr) != SQLITE_OK) {
    throw std::runtime_error("catalog: cannot register h3_pinned");
  }
}

void configure_reader(Connection& c) {
  c.exec_or_throw(
      "PRAGMA query_only = ON;"
      "PRAGMA cache_size = -16384;"     // 16 MiB per reader
      "PRAGMA mmap_size = 2147418112;"  // point lookups straight from the page cache (SQLite caps
                                        // it at 2 GiB)
      "PRAGMA temp_store = MEMORY;");
}

Result<std::string> verified_inline_data(const Query& q, int data, std::int64_t object_id) {
  const auto blob = q.blob(data);
  const std::uint32_t computed = block_checksum(blob);
  if (q.is_null(data + 1) || static_cast<std::uint32_t>(q.int64(data + 1)) != computed) {
    log::error(
        "catalog: the inline data of object id {} fails its checksum (stored {}, computed {:08x}): "
        "not sent",
        object_id,
        q.is_null(data + 1) ? std::string("none") : fmt::format("{:08x}", q.uint64(data + 1)),
        computed);
    count_checksum_failure();
    return errc::kCorrupt;
  }
  return std::string(reinterpret_cast<const char*>(blob.data()), blob.size());
}

}  // namespace hots3::storage::detail
