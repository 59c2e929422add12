#include "hots3/storage/catalog.h"

#include "schema.h"
#include "sqlite.h"
#include "wal_vfs.h"

#include "hots3/common/assert.h"
#include "hots3/common/logging.h"
#include "hots3/storage/checksum.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <future>
#include <mutex>
#include <pthread.h>
#include <set>
#include <sys/resource.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>

namespace hots3::storage {

namespace asio = boost::asio;
using detail::Connection;
using detail::Query;

namespace {

// Checkpoints (copying the WAL back into the database) run on a thread of their own, beside
// the writer, each time the WAL has grown by kCheckpointFrames. A page rewritten by many commits
// in that window is copied once: with SQLite's default period of 1,000 frames the copying cost
// a tenth of the small-put rate on 2 cores, with 4,000 nothing measurable. Under a steady stream
// of commits such a checkpoint never catches up with the last commit, and SQLite starts the WAL
// over only after one has, which the writer alone can do: it stops while it copies the rest and
// flushes the database. So from kCloseInFrames the checkpointer closes in on the last commit,
// checkpoint after checkpoint, until fewer than kWriterCopyFrames are left to the writer; at
// kWriterCheckpointFrames (64 MiB of 4 KiB pages) the writer checkpoints whatever is left.
constexpr int kCheckpointFrames = 4000;
constexpr int kCloseInFrames = 12000;
constexpr int kWriterCopyFrames = 500;
constexpr int kWriterCheckpointFrames = 16000;

// The database pages a checkpoint copied are written back by the syncer between flushes of the
// WAL (see run_syncer), a piece of the file of this size at a time.
constexpr std::int64_t kWritebackChunk = 1 << 20;

// ---- encodings ---------------------------------------------------------------------------

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

// The smallest string greater than every string that starts with `prefix` ("" if none: the
// prefix is empty or all 0xFF). Keys compare as bytes.
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

// An exclusive upper bound for keys that start with `prefix`, usable by the index range scan.
// With no prefix: a string above every key (keys are UTF-8 of at most 1024 bytes, and 0xFF
// never occurs in UTF-8).
std::string upper_bound_of(const std::string& prefix) {
  std::string upper = prefix_successor(prefix);
  if (upper.empty()) upper.assign(1025, '\xff');
  return upper;
}

// ---- row mapping ---------------------------------------------------------------------------

#define H3_OBJECT_COLUMNS                                                              \
  "bucket_id, key, id, size, etag, parts_count, created_ms, accessed_ms, tier_state, " \
  "is_inline, content_type, content_encoding, content_disposition, content_language, " \
  "cache_control, expires, user_metadata, crc32, crc32c, crc64nvme, sha1, sha256, checksum_type"

// An object's row, the values bound as ?1..?23 in H3_OBJECT_COLUMNS' order (insert_object_rows).
#define H3_INSERT_OBJECT                                                                        \
  "INSERT INTO objects(" H3_OBJECT_COLUMNS                                                      \
  ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, " \
  "?19, "                                                                                       \
  "?20, ?21, ?22, ?23)"

// The same columns qualified for a join with the objects table as "o".
#define H3_OBJECT_COLUMNS_O                                                                \
  "o.bucket_id, o.key, o.id, o.size, o.etag, o.parts_count, o.created_ms, o.accessed_ms, " \
  "o.tier_state, o.is_inline, o.content_type, o.content_encoding, o.content_disposition, " \
  "o.content_language, o.cache_control, o.expires, o.user_metadata, o.crc32, o.crc32c, "   \
  "o.crc64nvme, "                                                                          \
  "o.sha1, o.sha256, o.checksum_type"

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
  return o;
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

#define H3_UPLOAD_COLUMNS                                                              \
  "id, upload_id, bucket_id, key, created_ms, owner, content_type, content_encoding, " \
  "content_disposition, content_language, cache_control, expires, user_metadata, "     \
  "checksum_algorithm, checksum_type"

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
  return u;
}

#define H3_PART_COLUMNS \
  "id, part_number, size, etag, created_ms, crc32, crc32c, crc64nvme, sha1, sha256"

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
  return p;
}

#define H3_OBJECT_PART_COLUMNS "part_number, offset, size, checksum"

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
  auto q = c.query("SELECT id, name, owner, created_ms FROM buckets WHERE name = ?1");
  q.bind(1, name);
  H3_TRY(bool row, q.step());
  if (!row) return std::optional<BucketRecord>{};
  return std::optional<BucketRecord>(
      BucketRecord{q.int64(0), std::string(q.text(1)), std::string(q.text(2)), q.int64(3)});
}

Result<std::optional<UploadRecord>> find_upload_on(Connection& c, std::string_view upload_id) {
  auto q = c.query("SELECT " H3_UPLOAD_COLUMNS " FROM uploads WHERE upload_id = ?1");
  q.bind(1, upload_id);
  H3_TRY(bool row, q.step());
  if (!row) return std::optional<UploadRecord>{};
  return std::optional<UploadRecord>(read_upload(q));
}

// Deletes the extents of an owner, returning their device ranges.
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
                            const std::vector<ExtentRecord>& extents,
                            std::uint64_t offset_shift = 0) {
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

void configure_reader(Connection& c) {
  c.exec_or_throw(
      "PRAGMA query_only = ON;"
      "PRAGMA cache_size = -16384;"     // 16 MiB per reader
      "PRAGMA mmap_size = 2147418112;"  // point lookups straight from the page cache (SQLite caps
                                        // it at 2 GiB)
      "PRAGMA temp_store = MEMORY;");
}

// ---- the writer ---------------------------------------------------------------------------

class WriteTxnImpl final : public WriteTxn {
 public:
  WriteTxnImpl(Connection& c, std::int64_t& next_id) : c_(c), next_id_(next_id) {}

  std::int64_t next_id() override { return next_id_++; }

  Result<void> set_device_uuid(const DeviceUuid& uuid) override {
    auto q = c_.query("INSERT OR REPLACE INTO meta(key, value) VALUES ('device_uuid', ?1)");
    q.bind_blob(1, std::as_bytes(std::span(uuid)));
    return q.run();
  }

  // Every PUT asks whether its bucket still exists; a batch's writes mostly go to one bucket,
  // so the last answer is kept until the transaction changes buckets or a write is rolled back
  // (one SELECT per batch instead of one per write).
  Result<std::optional<BucketRecord>> find_bucket(std::string_view name) override {
    if (last_bucket_ && last_bucket_->first == name) return last_bucket_->second;
    H3_TRY(auto found, find_bucket_on(c_, name));
    last_bucket_.emplace(std::string(name), found);
    return found;
  }
  // After a change of buckets or a ROLLBACK TO: what the last lookup saw may be gone.
  void forget() { last_bucket_.reset(); }

  Result<BucketRecord> create_bucket(std::string_view name, std::string_view owner,
                                     std::int64_t created_ms) override {
    forget();
    H3_TRY(auto existing, find_bucket_on(c_, name));
    if (existing) return errc::kAlreadyExists;
    auto q = c_.query("INSERT INTO buckets(name, owner, created_ms) VALUES (?1, ?2, ?3)");
    q.bind(1, name).bind(2, owner).bind(3, created_ms);
    H3_TRY(q.run());
    return BucketRecord{sqlite3_last_insert_rowid(c_.handle()), std::string(name),
                        std::string(owner), created_ms};
  }

  Result<void> delete_bucket(std::int64_t bucket_id) override {
    forget();
    {
      auto q = c_.query(
          "SELECT EXISTS(SELECT 1 FROM objects WHERE bucket_id = ?1) OR "
          "EXISTS(SELECT 1 FROM uploads WHERE bucket_id = ?1)");
      q.bind(1, bucket_id);
      H3_TRY(q.step());
      if (q.int64(0) != 0) return errc::kConflict;
    }
    auto q = c_.query("DELETE FROM buckets WHERE id = ?1");
    q.bind(1, bucket_id);
    H3_TRY(q.run());
    if (c_.changes() == 0) return errc::kNotFound;
    return {};
  }

  Result<std::optional<ObjectRecord>> find_object(std::int64_t bucket_id,
                                                  std::string_view key) override {
    return find_object_on(c_, bucket_id, key);
  }

  Result<void> insert_object(const ObjectRecord& o,
                             const std::vector<ExtentRecord>& extents) override {
    H3_TRY(insert_object_rows(o, extents, /*if_absent=*/false));
    return {};
  }

  Result<bool> insert_object_if_absent(const ObjectRecord& o,
                                       const std::vector<ExtentRecord>& extents) override {
    return insert_object_rows(o, extents, /*if_absent=*/true);
  }

  Result<bool> insert_object_rows(const ObjectRecord& o, const std::vector<ExtentRecord>& extents,
                                  bool if_absent) {
    auto q = c_.query(if_absent ? H3_INSERT_OBJECT " ON CONFLICT(bucket_id, key) DO NOTHING"
                                : H3_INSERT_OBJECT);
    q.bind(1, o.bucket_id)
        .bind(2, std::string_view(o.key))
        .bind(3, o.id)
        .bind(4, o.size_bytes)
        .bind(5, std::string_view(o.etag))
        .bind(6, static_cast<std::int64_t>(o.parts_count))
        .bind(7, o.created_ms)
        .bind(8, o.accessed_ms)
        .bind(9, static_cast<std::int64_t>(o.tier_state))
        .bind(10, o.inline_data ? 1 : 0);
    bind_headers(q, 11, o.headers);
    q.bind_blob(17, encode_metadata(o.user_metadata));
    bind_checksums(q, 18, o.checksums);
    q.bind_optional(23, o.checksums.type);
    H3_TRY(q.run());
    if (if_absent && c_.changes() == 0) return false;
    if (o.inline_data) {
      auto d = c_.query("INSERT INTO inline_data(object_id, data, checksum) VALUES (?1, ?2, ?3)");
      d.bind(1, o.id).bind_blob(2, *o.inline_data);
      d.bind(3,
             static_cast<std::int64_t>(block_checksum(std::as_bytes(std::span(*o.inline_data)))));
      H3_TRY(d.run());
    }
    H3_TRY(insert_extents(c_, o.id, extents));
    return true;
  }

  Result<ExtentList> delete_object(std::int64_t object_id) override {
    H3_TRY(ExtentList freed, delete_extents(c_, object_id));
    for (const char* sql :
         {"DELETE FROM inline_data WHERE object_id = ?1",
          "DELETE FROM object_parts WHERE object_id = ?1",
          "DELETE FROM tier_queue WHERE object_id = ?1", "DELETE FROM objects WHERE id = ?1"}) {
      auto q = c_.query(sql);
      q.bind(1, object_id);
      H3_TRY(q.run());
    }
    return freed;
  }

  Result<void> update_object_metadata(const ObjectRecord& o) override {
    auto q = c_.query(
        "UPDATE objects SET content_type = ?2, content_encoding = ?3, content_disposition = ?4, "
        "content_language = ?5, cache_control = ?6, expires = ?7, user_metadata = ?8, "
        "created_ms = ?9 WHERE id = ?1");
    q.bind(1, o.id);
    bind_headers(q, 2, o.headers);
    q.bind_blob(8, encode_metadata(o.user_metadata)).bind(9, o.created_ms);
    H3_TRY(q.run());
    if (c_.changes() == 0) return errc::kNotFound;
    return {};
  }

  Result<void> move_object(std::int64_t object_id, std::int64_t bucket_id,
                           std::string_view key) override {
    auto q = c_.query("UPDATE objects SET bucket_id = ?2, key = ?3 WHERE id = ?1");
    q.bind(1, object_id).bind(2, bucket_id).bind(3, key);
    H3_TRY(q.run());
    if (c_.changes() == 0) return errc::kNotFound;
    return {};
  }

  Result<void> move_object_data(std::int64_t from_object_id, std::int64_t to_object_id) override {
    for (const char* sql : {"UPDATE extents SET owner_id = ?2 WHERE owner_id = ?1",
                            "UPDATE object_parts SET object_id = ?2 WHERE object_id = ?1"}) {
      auto q = c_.query(sql);
      q.bind(1, from_object_id).bind(2, to_object_id);
      H3_TRY(q.run());
    }
    return {};
  }

  Result<void> insert_object_parts(std::int64_t object_id,
                                   const std::vector<ObjectPartRecord>& parts) override {
    for (const ObjectPartRecord& p : parts) {
      auto q = c_.query(
          "INSERT INTO object_parts(object_id, part_number, offset, size, checksum) "
          "VALUES (?1, ?2, ?3, ?4, ?5)");
      q.bind(1, object_id)
          .bind(2, static_cast<std::int64_t>(p.part_number))
          .bind(3, p.offset_bytes)
          .bind(4, p.size_bytes)
          .bind_optional(5, p.checksum);
      H3_TRY(q.run());
    }
    return {};
  }

  Result<void> insert_upload(const UploadRecord& u) override {
    auto q =
        c_.query("INSERT INTO uploads(" H3_UPLOAD_COLUMNS
                 ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)");
    q.bind(1, u.id)
        .bind(2, std::string_view(u.upload_id))
        .bind(3, u.bucket_id)
        .bind(4, std::string_view(u.key))
        .bind(5, u.created_ms)
        .bind(6, std::string_view(u.owner));
    bind_headers(q, 7, u.headers);
    q.bind_blob(13, encode_metadata(u.user_metadata))
        .bind_optional(14, u.checksum_algorithm)
        .bind_optional(15, u.checksum_type);
    return q.run();
  }

  Result<std::optional<UploadRecord>> find_upload(std::string_view upload_id) override {
    return find_upload_on(c_, upload_id);
  }

  Result<ExtentList> put_part(std::int64_t upload_row, const PartRecord& p,
                              const std::vector<ExtentRecord>& extents) override {
    ExtentList freed;
    {
      auto q = c_.query("SELECT id FROM parts WHERE upload = ?1 AND part_number = ?2");
      q.bind(1, upload_row).bind(2, static_cast<std::int64_t>(p.part_number));
      H3_TRY(bool row, q.step());
      if (row) {
        const std::int64_t old = q.int64(0);
        H3_TRY(freed, delete_extents(c_, old));
        auto d = c_.query("DELETE FROM parts WHERE id = ?1");
        d.bind(1, old);
        H3_TRY(d.run());
      }
    }
    auto q = c_.query(
        "INSERT INTO parts(id, upload, part_number, size, etag, created_ms, crc32, crc32c, "
        "crc64nvme, sha1, sha256) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
    q.bind(1, p.id)
        .bind(2, upload_row)
        .bind(3, static_cast<std::int64_t>(p.part_number))
        .bind(4, p.size_bytes)
        .bind(5, std::string_view(p.etag))
        .bind(6, p.created_ms);
    bind_checksums(q, 7, p.checksums);
    H3_TRY(q.run());
    H3_TRY(insert_extents(c_, p.id, extents));
    return freed;
  }

  Result<std::vector<PartRecord>> parts(std::int64_t upload_row) override {
    auto q =
        c_.query("SELECT " H3_PART_COLUMNS " FROM parts WHERE upload = ?1 ORDER BY part_number");
    q.bind(1, upload_row);
    std::vector<PartRecord> out;
    for (;;) {
      H3_TRY(bool row, q.step());
      if (!row) break;
      out.push_back(read_part(q));
    }
    return out;
  }

  Result<ExtentList> complete_upload(
      std::int64_t upload_row, const ObjectRecord& object,
      const std::vector<std::pair<PartRecord, std::uint64_t>>& parts_and_offsets,
      const std::vector<ObjectPartRecord>& part_table) override {
    ExtentList freed;
    std::vector<std::int64_t> kept;
    for (const auto& [part, offset] : parts_and_offsets) {
      auto q = c_.query(
          "UPDATE extents SET owner_id = ?1, logical_offset = logical_offset + ?2 WHERE owner_id = "
          "?3");
      q.bind(1, object.id).bind(2, offset).bind(3, part.id);
      H3_TRY(q.run());
      kept.push_back(part.id);
    }
    // Parts the client did not list are dropped with the upload.
    std::sort(kept.begin(), kept.end());
    H3_TRY(auto all, parts(upload_row));
    for (const PartRecord& p : all) {
      if (!std::binary_search(kept.begin(), kept.end(), p.id)) {
        H3_TRY(auto gone, delete_extents(c_, p.id));
        freed.insert(freed.end(), gone.begin(), gone.end());
      }
    }
    {
      auto q = c_.query("DELETE FROM parts WHERE upload = ?1");
      q.bind(1, upload_row);
      H3_TRY(q.run());
    }
    {
      auto q = c_.query("DELETE FROM uploads WHERE id = ?1");
      q.bind(1, upload_row);
      H3_TRY(q.run());
    }
    H3_TRY(insert_object(object, {}));
    H3_TRY(insert_object_parts(object.id, part_table));
    return freed;
  }

  Result<ExtentList> delete_upload(std::int64_t upload_row) override {
    ExtentList freed;
    H3_TRY(auto all, parts(upload_row));
    for (const PartRecord& p : all) {
      H3_TRY(auto gone, delete_extents(c_, p.id));
      freed.insert(freed.end(), gone.begin(), gone.end());
    }
    for (const char* sql :
         {"DELETE FROM parts WHERE upload = ?1", "DELETE FROM uploads WHERE id = ?1"}) {
      auto q = c_.query(sql);
      q.bind(1, upload_row);
      H3_TRY(q.run());
    }
    return freed;
  }

 private:
  Connection& c_;
  std::int64_t& next_id_;
  std::optional<std::pair<std::string, std::optional<BucketRecord>>> last_bucket_;
};

// The coroutines that the syncer resumes after one flush, one post per worker rather than one
// per write: a post from a foreign thread may wake the worker's event loop (a futex, an
// epoll_ctl), and with 64 writers of 4 KiB objects a flush answers about 47 writes.
class ResumeBatch {
 public:
  ResumeBatch() = default;
  ~ResumeBatch() {
    for (auto& [executor, fns] : groups_) {
      asio::post(executor, [fns = std::move(fns)] {
        for (const auto& fn : fns) fn();
      });
    }
  }
  ResumeBatch(const ResumeBatch&) = delete;
  ResumeBatch& operator=(const ResumeBatch&) = delete;
  ResumeBatch(ResumeBatch&&) = delete;
  ResumeBatch& operator=(ResumeBatch&&) = delete;

  void add(const asio::any_io_executor& executor, std::function<void()> fn) {
    auto group = std::find_if(groups_.begin(), groups_.end(),
                              [&](const auto& g) { return g.first == executor; });
    if (group == groups_.end()) group = groups_.insert(groups_.end(), {executor, {}});
    group->second.push_back(std::move(fn));
  }

 private:
  std::vector<std::pair<asio::any_io_executor, std::vector<std::function<void()>>>> groups_;
};

// `done` gets the syncer's batch of resumptions, or null where a write is answered alone.
struct Pending {
  Catalog::WriteFn fn;
  std::function<void(error_code, ResumeBatch*)> done;
};

}  // namespace

namespace {

// The inline data in column `data` of `q`, checked against its checksum in column data + 1.
// A mismatch is corruption: logged, and the bytes never leave the catalog.
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
    return errc::kCorrupt;
  }
  return std::string(reinterpret_cast<const char*>(blob.data()), blob.size());
}

// h3_block_checksum(blob): checksum.h's block_checksum, for migrations that fill checksums in.
void block_checksum_sql(sqlite3_context* context, int, sqlite3_value** argv) {
  const auto* data = static_cast<const std::byte*>(sqlite3_value_blob(argv[0]));
  const auto n = static_cast<std::size_t>(sqlite3_value_bytes(argv[0]));
  sqlite3_result_int64(context, static_cast<sqlite3_int64>(block_checksum({data, n})));
}

}  // namespace

// ---- Catalog::Impl ---------------------------------------------------------------------------

struct Catalog::Impl {
  CatalogOptions options;
  std::unique_ptr<Connection> writer;
  std::unique_ptr<Connection> checkpointer;  // run_checkpointer's: checkpoints beside the writer
  int schema_version = 0;
  std::int64_t next_id = 1;

  std::mutex queue_mutex;
  std::condition_variable queue_ready;
  std::deque<Pending> queue;
  bool stopping = false;
  std::thread writer_thread;
  std::atomic<std::uint64_t> writes{0};
  std::atomic<std::uint64_t> commits{0};
  std::atomic<std::uint64_t> writer_checkpoints{0};
  std::atomic<std::uint64_t> writer_checkpoints_at_limit{0};
  std::atomic<std::uint64_t> writer_checkpoint_ns{0};

  // Committed writes waiting for the WAL to reach the disk (see run_syncer).
  struct Unsynced {
    std::function<void(error_code, ResumeBatch*)> done;
    error_code result;
  };
  std::mutex sync_mutex;
  std::condition_variable sync_ready;
  std::vector<Unsynced> unsynced;
  std::set<std::int64_t> unwritten_chunks;  // of the database, in kWritebackChunk (see run_syncer)
  bool sync_stopping = false;
  std::thread syncer_thread;
  int wal_fd = -1;
  int db_fd = -1;  // the database, for its writeback
  std::atomic<bool> wal_sync_failed{false};
  std::atomic<int> wal_frames{0};  // in the WAL after the last commit
  int checkpointed_frames = 0;     // the syncer's: wal_frames at its last checkpoint request

  // Checkpoints beside the writer, asked for by the syncer (see run_checkpointer).
  std::mutex checkpoint_mutex;
  std::condition_variable checkpoint_ready;
  bool checkpoint_wanted = false;
  bool checkpoint_stopping = false;
  std::thread checkpointer_thread;
  std::atomic<bool> wal_restart_ready{false};  // the checkpointer has left little for the writer

  std::mutex readers_mutex;
  std::unordered_map<std::thread::id, std::unique_ptr<Connection>> readers;

  Connection& reader() {
    // The connection of the calling thread; the common case is one lookup under a mutex that
    // is held for nanoseconds.
    std::lock_guard lock(readers_mutex);
    auto& slot = readers[std::this_thread::get_id()];
    if (!slot) {
      slot = std::make_unique<Connection>(options.path, Connection::Mode::kReadOnly, false);
      configure_reader(*slot);
    }
    return *slot;
  }

  void run_writer();
  void run_batch(std::deque<Pending>& batch);
  bool run_writes(std::deque<Pending>& batch, std::vector<error_code>& results, bool savepoints,
                  error_code& lost);
  void run_syncer();
  void write_back_chunk(std::unique_lock<std::mutex>& sync_lock);
  void run_checkpointer();
  error_code sync_wal();
  int checkpoint(Connection& c);
};

void Catalog::Impl::run_writer() {
  for (;;) {
    std::deque<Pending> batch;
    {
      std::unique_lock lock(queue_mutex);
      queue_ready.wait(lock, [this] { return stopping || !queue.empty(); });
      if (queue.empty()) return;  // stopping, and everything queued has been written
      while (!queue.empty() && batch.size() < options.batch_max) {
        batch.push_back(std::move(queue.front()));
        queue.pop_front();
      }
    }
    run_batch(batch);
  }
}

// Runs the writes of a batch in the open transaction and records each one's result. Without
// savepoints (a SAVEPOINT and a RELEASE around every write cost a quarter of the writer's time
// per small put: the statements, and every page a write touched copied aside in case it failed)
// a write that fails before it changes anything leaves nothing to undo, and one that fails
// after a change ends the run: true, the batch must run again with savepoints. When a write's
// failure rolled the whole transaction back (disk full, I/O error), the run ends too and `lost`
// says why.
bool Catalog::Impl::run_writes(std::deque<Pending>& batch, std::vector<error_code>& results,
                               bool savepoints, error_code& lost) {
  Connection& w = *writer;
  WriteTxnImpl txn(w, next_id);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    results[i] = {};
    if (savepoints) {
      if (auto s = w.query("SAVEPOINT w").run(); !s) {
        results[i] = s.error();
        continue;
      }
    }
    const sqlite3_int64 changes_before = sqlite3_total_changes64(w.handle());
    Result<void> r = batch[i].fn(txn);
    if (r) {
      if (savepoints) {
        if (auto rel = w.query("RELEASE w").run(); !rel) results[i] = rel.error();
      }
      continue;
    }
    if (sqlite3_get_autocommit(w.handle()) != 0) {
      // The writes before this one went with the transaction, and without a transaction the
      // next SAVEPOINT would start one of its own.
      lost = r.error();
      return false;
    }
    results[i] = r.error();
    txn.forget();
    if (savepoints) {
      (void)w.query("ROLLBACK TO w").run();  // cannot fail: the savepoint exists
      (void)w.query("RELEASE w").run();
    } else if (sqlite3_total_changes64(w.handle()) != changes_before) {
      // A failed statement's own changes are undone by SQLite; these are earlier statements'.
      return true;
    }
  }
  return false;
}

void Catalog::Impl::run_batch(std::deque<Pending>& batch) {
  // Transaction control through prepared statements: parsing BEGIN, COMMIT and the savepoints
  // of a replay for every batch cost more than many of the writes themselves.
  Connection& w = *writer;
  std::vector<error_code> results(batch.size());
  error_code commit_error;
  if (wal_sync_failed.load(std::memory_order_relaxed)) {
    // The disk lost committed writes once: nothing more is promised durable.
    commit_error = errc::kIoError;
  } else if (auto begun = w.query("BEGIN IMMEDIATE").run(); !begun) {
    commit_error = begun.error();
  } else {
    if (run_writes(batch, results, /*savepoints=*/false, commit_error)) {
      // A write failed after changing something, and only a savepoint undoes one write alone:
      // the batch runs again from the start, each write in a savepoint of its own.
      if (auto r = w.query("ROLLBACK").run(); !r) {
        commit_error = r.error();
      } else if (auto again = w.query("BEGIN IMMEDIATE").run(); !again) {
        commit_error = again.error();
      } else {
        (void)run_writes(batch, results, /*savepoints=*/true, commit_error);
      }
    }
    if (!commit_error) {
      Result<void> committed;
      {
        const detail::DeferWalFlush flushed_by_the_syncer;
        committed = w.query("COMMIT").run();
      }
      if (!committed) {
        commit_error = committed.error();
        (void)w.exec("ROLLBACK");  // the transaction may already be gone; both are fine
      }
    }
  }
  writes.fetch_add(batch.size(), std::memory_order_relaxed);
  commits.fetch_add(1, std::memory_order_relaxed);
  if (commit_error) {
    for (auto& pending : batch) pending.done(commit_error, nullptr);
    return;
  }
  {
    std::lock_guard lock(sync_mutex);
    for (std::size_t i = 0; i < batch.size(); ++i)
      unsynced.push_back({std::move(batch[i].done), results[i]});
  }
  sync_ready.notify_one();
  const bool closed_in = wal_restart_ready.exchange(false, std::memory_order_relaxed);
  if (closed_in || wal_frames.load(std::memory_order_relaxed) >= kWriterCheckpointFrames) {
    const auto started = std::chrono::steady_clock::now();
    if (checkpoint(w) < 0) {
      // Another checkpoint in progress (the syncer's periodic one) made this one give up: again
      // after the next batch.
      wal_restart_ready.store(closed_in, std::memory_order_relaxed);
      return;
    }
    writer_checkpoints.fetch_add(1, std::memory_order_relaxed);
    if (!closed_in) writer_checkpoints_at_limit.fetch_add(1, std::memory_order_relaxed);
    writer_checkpoint_ns.fetch_add(
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now() - started)
                                       .count()),
        std::memory_order_relaxed);
  }
}

// Returns how many of the WAL's frames are in the database now; -1 when it did nothing because
// another checkpoint was running or it failed.
int Catalog::Impl::checkpoint(Connection& c) {
  // PASSIVE: copies what no reader still needs and never waits; SQLITE_BUSY means another
  // checkpoint is running. Outside DeferWalFlush, so the WAL is flushed before it is copied.
  int copied = 0;
  const int rc =
      sqlite3_wal_checkpoint_v2(c.handle(), "main", SQLITE_CHECKPOINT_PASSIVE, nullptr, &copied);
  if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
    log::warn("catalog: checkpoint failed: {}", sqlite3_errmsg(c.handle()));
  }
  return rc == SQLITE_OK ? copied : -1;
}

// The second half of group commit. The writer's COMMIT leaves the transaction in the WAL in
// the page cache (DeferWalFlush); this thread makes the WAL durable with one fdatasync for every
// commit made since the last, and only then answers the writes. The writer meanwhile runs the next
// batch, so the disk's flush latency and the writeback's CPU overlap the next transaction
// instead of stalling it. Readers can see a committed write before it is answered, as a GET
// racing a PUT can on S3; nothing acts on a write (frees space, acknowledges) before this.
//
// Between flushes it also starts the writeback of the database pages the checkpointer copied,
// a chunk at a time while no commit waits, and one chunk after each flush regardless. When the
// checkpointer flushed the database itself after each checkpoint, megabytes of it went to the
// disk at once, and a flush of the WAL in their wake took milliseconds: 4% of the flushes
// took 39% of the syncer's flushing time (64 writers of 4 KiB objects, 8 s).
void Catalog::Impl::run_syncer() {
  std::vector<Unsynced> todo;
  for (;;) {
    {
      std::unique_lock lock(sync_mutex);
      // At least one chunk even when a commit waits: a stream of commits must not starve it.
      while (!unwritten_chunks.empty()) {
        write_back_chunk(lock);
        if (!unsynced.empty() || sync_stopping) break;
      }
      sync_ready.wait(
          lock, [this] { return sync_stopping || !unsynced.empty() || !unwritten_chunks.empty(); });
      if (unsynced.empty()) {
        if (sync_stopping) return;  // every commit has been answered
        continue;                   // chunks to write back
      }
      todo.swap(unsynced);
    }
    const error_code synced = sync_wal();
    {
      ResumeBatch resumed;
      for (auto& u : todo) u.done(synced ? synced : u.result, &resumed);
    }
    todo.clear();
    const int frames = wal_frames.load(std::memory_order_relaxed);
    if (frames < checkpointed_frames) checkpointed_frames = 0;  // the WAL started over
    if (!synced && frames >= checkpointed_frames + kCheckpointFrames) {
      {
        std::lock_guard lock(checkpoint_mutex);
        checkpoint_wanted = true;
      }
      checkpoint_ready.notify_one();
      checkpointed_frames = frames;
    }
  }
}

// Starts writing back the database's first unwritten chunk, without waiting for it: an early
// writeback that durability does not depend on (SQLite flushes the database before the WAL
// starts over), so a failure is left to that flush to report.
void Catalog::Impl::write_back_chunk(std::unique_lock<std::mutex>& sync_lock) {
  const std::int64_t chunk = *unwritten_chunks.begin();
  unwritten_chunks.erase(unwritten_chunks.begin());
  sync_lock.unlock();
  (void)::sync_file_range(db_fd, chunk * kWritebackChunk, kWritebackChunk, SYNC_FILE_RANGE_WRITE);
  sync_lock.lock();
}

// Copies the WAL into the database when the syncer asks, on a thread of its own: a checkpoint of
// 4,000 frames reads and writes 16 MiB (about 10 ms here), and while the syncer ran them itself,
// every commit made meanwhile waited for its flush behind them. The thread runs at nice 10: on a
// machine with few cores it yields them to the writer, the one thread every write passes through
// (64 writers of 4 KiB objects, 2 cores: 24-26k puts/s with checkpoints on the syncer, 28-29k on
// this thread).
//
// SQLite flushes the database only in a checkpoint that copies the whole WAL, here the writer's
// when the WAL starts over; that flush waited for every page the checkpoints before it had
// copied, and the writer stopped for 28-42 ms five times a second. So the pages each checkpoint
// wrote (recorded by the VFS) go to the syncer, which starts their writeback between its
// flushes: the writer's flush waits only for little more than the frames it copies itself.
// Closing in on the last commit first, this thread leaves it fewer than kWriterCopyFrames.
void Catalog::Impl::run_checkpointer() {
  std::vector<std::int64_t> written;  // database offsets, then their chunks
  for (;;) {
    {
      std::unique_lock lock(checkpoint_mutex);
      checkpoint_ready.wait(lock, [this] { return checkpoint_stopping || checkpoint_wanted; });
      if (checkpoint_stopping) return;
      checkpoint_wanted = false;
    }
    // From kCloseInFrames, checkpoints follow one another while each gets further (a reader of
    // an older snapshot can hold them back) until little is left for the writer.
    for (int before = -1;;) {
      // From the limit on the WAL is the writer's to start over, and its checkpoint gives up
      // while one of this thread's runs: back to back, they held the WAL over the limit.
      if (wal_frames.load(std::memory_order_relaxed) >= kWriterCheckpointFrames) break;
      written.clear();
      int copied = 0;
      {
        const detail::RecordDatabaseWrites record(written);
        copied = checkpoint(*checkpointer);
      }
      if (!written.empty()) {
        // A few chunks from thousands of page writes, before taking the lock that every
        // commit's hand-over to the syncer takes too.
        for (std::int64_t& at : written) at /= kWritebackChunk;
        std::sort(written.begin(), written.end());
        written.erase(std::unique(written.begin(), written.end()), written.end());
        {
          std::lock_guard lock(sync_mutex);
          unwritten_chunks.insert(written.begin(), written.end());
        }
        sync_ready.notify_one();
      }
      // In the WAL now, commits made while this one copied included; fewer than it
      // copied: the WAL has started over since.
      const int frames = wal_frames.load(std::memory_order_relaxed);
      if (copied <= before || frames < copied || frames < kCloseInFrames ||
          wal_restart_ready.load(std::memory_order_relaxed)) {
        break;
      }
      before = copied;
      if (frames - copied < kWriterCopyFrames) {
        wal_restart_ready.store(true, std::memory_order_relaxed);
        break;
      }
    }
  }
}

error_code Catalog::Impl::sync_wal() {
  if (wal_sync_failed.load(std::memory_order_relaxed)) return errc::kIoError;
  const std::string wal = options.path + "-wal";
  if (wal_fd < 0) {
    // SQLite made the WAL when the writer opened the database, and keeps it (truncating it at
    // most) while the writer is open. Its directory entry is flushed once, as SQLite itself
    // does on a new journal's first sync.
    wal_fd = ::open(wal.c_str(), O_RDONLY | O_CLOEXEC);
    if (wal_fd < 0) {
      log::error("catalog: cannot open {} to flush it: {}", wal, std::strerror(errno));
      return errc::kIoError;
    }
    const auto slash = options.path.find_last_of('/');
    const std::string dir =
        slash == std::string::npos ? "." : options.path.substr(0, slash == 0 ? 1 : slash);
    if (const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
      (void)::fsync(d);
      ::close(d);
    }
  }
  // The link count alone, not fstat: asking for a file's times makes the kernel (6.13 and later,
  // "multigrain" timestamps) give the next write a fine-grained, hence new, mtime, and every
  // fdatasync then writes the inode as well (4 KiB writes, each flushed and then fstat'ed or not,
  // alternated: 2,400-2,800 flushes/s against 2,900-3,700).
  if (struct statx st{};
      ::statx(wal_fd, "", AT_EMPTY_PATH, STATX_NLINK, &st) == 0 && st.stx_nlink == 0) {
    // SQLite removed the WAL (only ever after folding all of it into the database): flush the
    // one it writes now.
    ::close(wal_fd);
    wal_fd = -1;
    return sync_wal();
  }
  if (::fdatasync(wal_fd) != 0) {
    // After a failed flush the kernel may have dropped the dirty pages: which commits survived
    // is unknown. Refuse every later write rather than acknowledge one that may be lost.
    wal_sync_failed.store(true, std::memory_order_relaxed);
    log::error("catalog: flushing {} failed: {}; writes are refused from now on", wal,
               std::strerror(errno));
    return errc::kIoError;
  }
  return {};
}

Catalog::Catalog(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<Catalog> Catalog::open(const CatalogOptions& options) {
  // SQLite keeps allocation statistics behind one process-wide mutex by default; every
  // connection on every worker would contend for it.
  static std::once_flag configured;
  std::call_once(configured, [] { sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); });
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->writer = std::make_unique<Connection>(options.path, Connection::Mode::kReadWrite, true,
                                              detail::wal_batching_vfs());
  Connection& w = *impl->writer;
  // WAL: readers never wait for the writer. synchronous=FULL: every commit syncs the WAL; the
  // writer's COMMIT runs under DeferWalFlush, where that sync only hands the commit's frames to
  // the kernel, and run_syncer flushes them before any write is answered.
  w.exec_or_throw(
      "PRAGMA journal_mode = WAL;"
      "PRAGMA synchronous = FULL;"
      "PRAGMA foreign_keys = OFF;"
      "PRAGMA cache_size = -65536;"
      "PRAGMA temp_store = MEMORY;"
      "PRAGMA journal_size_limit = 67108864;");
  // Checkpoints are ours (see kCheckpointFrames): this hook replaces SQLite's automatic one.
  sqlite3_wal_hook(
      w.handle(),
      [](void* self, sqlite3*, const char*, int frames) {
        static_cast<Impl*>(self)->wal_frames.store(frames, std::memory_order_relaxed);
        return SQLITE_OK;
      },
      impl.get());
  if (sqlite3_create_function_v2(w.handle(), "h3_block_checksum", 1,
                                 SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr, block_checksum_sql,
                                 nullptr, nullptr, nullptr) != SQLITE_OK) {
    throw std::runtime_error("catalog " + options.path + ": cannot register h3_block_checksum");
  }
  {
    auto q = w.query("PRAGMA user_version");
    if (auto row = q.step(); !row || !*row) {
      throw std::runtime_error("catalog " + options.path + ": cannot read the schema version");
    }
    impl->schema_version = static_cast<int>(q.int64(0));
  }
  if (impl->schema_version > static_cast<int>(detail::kMigrations.size())) {
    throw std::runtime_error("catalog " + options.path + " has schema version " +
                             std::to_string(impl->schema_version) + ", newer than this hots3 (" +
                             std::to_string(detail::kMigrations.size()) + ")");
  }
  while (impl->schema_version < static_cast<int>(detail::kMigrations.size())) {
    const int to = impl->schema_version + 1;
    const auto started = std::chrono::steady_clock::now();
    w.exec_or_throw("BEGIN IMMEDIATE");
    w.exec_or_throw(detail::kMigrations[static_cast<std::size_t>(impl->schema_version)]);
    w.exec_or_throw(("PRAGMA user_version = " + std::to_string(to)).c_str());
    w.exec_or_throw("COMMIT");
    if (impl->schema_version > 0) {
      // Some migrations rewrite a table (3: every object's row, 4.5 s for 10^6 objects here).
      log::info("catalog migrated to schema version {} in {} ms", to,
                std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - started)
                    .count());
    }
    impl->schema_version = to;
  }
  {
    auto q = w.query(
        "SELECT max(coalesce((SELECT max(id) FROM objects), 0), coalesce((SELECT max(id) FROM "
        "parts), 0), "
        "coalesce((SELECT max(id) FROM uploads), 0))");
    if (auto row = q.step(); !row || !*row)
      throw std::runtime_error("catalog " + options.path + ": cannot read ids");
    impl->next_id = q.int64(0) + 1;
  }
  impl->checkpointer = std::make_unique<Connection>(options.path, Connection::Mode::kReadWrite,
                                                    false, detail::wal_batching_vfs());
  // A connection opens the WAL on its first read; until then a checkpoint through it does nothing
  // (sqlite3_wal_checkpoint_v2 reports -1 frames) and the writer would do them all.
  impl->checkpointer->exec_or_throw("SELECT 1 FROM meta LIMIT 1");
  impl->db_fd = ::open(options.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (impl->db_fd < 0) {
    throw std::runtime_error("catalog " + options.path +
                             ": cannot open it for writeback: " + std::strerror(errno));
  }
  Impl* raw = impl.get();
  impl->writer_thread = std::thread([raw] {
    pthread_setname_np(pthread_self(), "h3-catalog");
    raw->run_writer();
  });
  impl->syncer_thread = std::thread([raw] {
    pthread_setname_np(pthread_self(), "h3-catalog-sync");
    raw->run_syncer();
  });
  impl->checkpointer_thread = std::thread([raw] {
    pthread_setname_np(pthread_self(), "h3-catalog-ckpt");
    (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
    raw->run_checkpointer();
  });
  return std::unique_ptr<Catalog>(new Catalog(std::move(impl)));
}

Catalog::~Catalog() {
  stop();
  impl_->readers.clear();
}

void Catalog::stop() {
  {
    std::lock_guard lock(impl_->queue_mutex);
    if (impl_->stopping) return;
    impl_->stopping = true;
  }
  impl_->queue_ready.notify_all();
  impl_->writer_thread.join();
  {
    std::lock_guard lock(impl_->sync_mutex);
    impl_->sync_stopping = true;
  }
  impl_->sync_ready.notify_all();
  impl_->syncer_thread.join();
  {
    std::lock_guard lock(impl_->checkpoint_mutex);
    impl_->checkpoint_stopping = true;
  }
  impl_->checkpoint_ready.notify_all();
  impl_->checkpointer_thread.join();
  if (impl_->wal_fd >= 0) ::close(impl_->wal_fd);
  if (impl_->db_fd >= 0) ::close(impl_->db_fd);
  // Fold the WAL back into the database and truncate it: a clean close leaves one file.
  if (auto r = impl_->writer->exec("PRAGMA wal_checkpoint(TRUNCATE)"); !r) {
    log::warn("catalog: final checkpoint failed: {}", r.error().message());
  }
}

int Catalog::schema_version() const noexcept { return impl_->schema_version; }

Catalog::WriterStats Catalog::writer_stats() const noexcept {
  return {impl_->writes.load(), impl_->commits.load(), impl_->writer_checkpoints.load(),
          impl_->writer_checkpoints_at_limit.load(), impl_->writer_checkpoint_ns.load()};
}

asio::awaitable<Result<void>> Catalog::write(WriteFn fn, std::function<void()> on_durable) {
  constexpr auto kToken = asio::as_tuple(asio::use_awaitable);
  auto [ec] = co_await asio::async_initiate<decltype(kToken), void(error_code)>(
      [this, &fn, &on_durable](auto handler) {
        auto guard = asio::make_work_guard(asio::get_associated_executor(handler));
        auto shared = std::make_shared<decltype(handler)>(std::move(handler));
        Pending pending{
            std::move(fn), [shared, guard = std::move(guard), on_durable = std::move(on_durable)](
                               error_code result, ResumeBatch* batch) mutable {
              // The syncer answers commits in order: so run the on_durable actions.
              if (!result && on_durable) on_durable();
              // Resume the writer's coroutine on its own worker.
              auto executor = guard.get_executor();
              auto resume = [shared, result, g = std::move(guard)]() mutable { (*shared)(result); };
              if (batch != nullptr) {
                batch->add(executor, std::move(resume));
              } else {
                asio::post(executor, std::move(resume));
              }
            }};
        {
          std::lock_guard lock(impl_->queue_mutex);
          H3_ASSERT(!impl_->stopping, "catalog write after stop()");
          impl_->queue.push_back(std::move(pending));
        }
        impl_->queue_ready.notify_one();
      },
      kToken);
  if (ec) co_return ec;
  co_return Result<void>{};
}

Result<void> Catalog::write_blocking(WriteFn fn) {
  std::promise<error_code> promise;
  auto future = promise.get_future();
  {
    std::lock_guard lock(impl_->queue_mutex);
    H3_ASSERT(!impl_->stopping, "catalog write after stop()");
    impl_->queue.push_back(
        {std::move(fn), [&promise](error_code ec, ResumeBatch*) { promise.set_value(ec); }});
  }
  impl_->queue_ready.notify_one();
  const error_code ec = future.get();
  if (ec) return ec;
  return {};
}

// ---- reads -----------------------------------------------------------------------------------

Result<std::optional<DeviceUuid>> Catalog::device_uuid() {
  auto q = impl_->reader().query("SELECT value FROM meta WHERE key = 'device_uuid'");
  H3_TRY(bool row, q.step());
  if (!row) return std::optional<DeviceUuid>{};
  const auto blob = q.blob(0);
  if (blob.size() != sizeof(DeviceUuid)) return errc::kCorrupt;
  DeviceUuid uuid{};
  std::memcpy(uuid.data(), blob.data(), uuid.size());
  return std::optional<DeviceUuid>(uuid);
}

Result<std::optional<BucketRecord>> Catalog::find_bucket(std::string_view name) {
  return find_bucket_on(impl_->reader(), name);
}

Result<std::vector<BucketRecord>> Catalog::list_buckets() {
  auto q = impl_->reader().query("SELECT id, name, owner, created_ms FROM buckets ORDER BY name");
  std::vector<BucketRecord> out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    out.push_back({q.int64(0), std::string(q.text(1)), std::string(q.text(2)), q.int64(3)});
  }
  return out;
}

Result<bool> Catalog::bucket_empty(std::int64_t bucket_id) {
  auto q = impl_->reader().query(
      "SELECT NOT (EXISTS(SELECT 1 FROM objects WHERE bucket_id = ?1) OR "
      "EXISTS(SELECT 1 FROM uploads WHERE bucket_id = ?1))");
  q.bind(1, bucket_id);
  H3_TRY(q.step());
  return q.int64(0) != 0;
}

Result<std::optional<ObjectRecord>> Catalog::find_object(std::int64_t bucket_id,
                                                         std::string_view key) {
  return find_object_on(impl_->reader(), bucket_id, key);
}

namespace {
Result<std::optional<ObjectRecord>> find_object_with_data_on(Connection& c, std::int64_t bucket_id,
                                                             std::string_view key) {
  auto q = c.query("SELECT " H3_OBJECT_COLUMNS_O
                   ", i.data, i.checksum FROM objects o LEFT JOIN inline_data i "
                   "ON i.object_id = o.id WHERE o.bucket_id = ?1 AND o.key = ?2");
  q.bind(1, bucket_id).bind(2, key);
  H3_TRY(bool row, q.step());
  if (!row) return std::optional<ObjectRecord>{};
  ObjectRecord o = read_object(q);
  if (o.inline_data) {
    if (q.is_null(23)) return errc::kCorrupt;
    H3_TRY(*o.inline_data, verified_inline_data(q, 23, o.id));
  }
  return std::optional<ObjectRecord>(std::move(o));
}
}  // namespace

Result<std::optional<ObjectRecord>> Catalog::find_object_with_data(std::int64_t bucket_id,
                                                                   std::string_view key) {
  return find_object_with_data_on(impl_->reader(), bucket_id, key);
}

Result<std::optional<Catalog::ObjectLayout>> Catalog::find_object_layout(
    std::int64_t bucket_id, std::string_view key, std::uint64_t checksums_size_max) {
  Connection& c = impl_->reader();
  // One read transaction: both statements see the same snapshot of the WAL.
  H3_TRY(c.exec("BEGIN"));
  auto read = [&]() -> Result<std::optional<ObjectLayout>> {
    H3_TRY(auto object, find_object_with_data_on(c, bucket_id, key));
    if (!object) return std::optional<ObjectLayout>{};
    ObjectLayout layout;
    if (!object->inline_data) {
      H3_TRY(layout.extents, read_extents(c, object->id, object->size_bytes <= checksums_size_max));
    }
    layout.object = std::move(*object);
    return std::optional<ObjectLayout>(std::move(layout));
  };
  auto result = read();
  // A read transaction changes nothing: ending it cannot lose anything, whatever the result.
  if (auto ended = c.exec(result ? "COMMIT" : "ROLLBACK"); !ended && result) return ended.error();
  return result;
}

Result<std::vector<ExtentRecord>> Catalog::object_extents(std::int64_t object_id,
                                                          bool with_checksums) {
  return read_extents(impl_->reader(), object_id, with_checksums);
}

Result<std::vector<ExtentRecord>> Catalog::part_extents(std::int64_t part_id, bool with_checksums) {
  return read_extents(impl_->reader(), part_id, with_checksums);
}

Result<std::vector<std::uint32_t>> Catalog::extent_checksums(std::int64_t row_id) {
  auto q = impl_->reader().query("SELECT checksums FROM extents WHERE id = ?1");
  q.bind(1, row_id);
  H3_TRY(bool row, q.step());
  if (!row) return errc::kNotFound;
  return decode_checksums(q.blob(0));
}

Result<std::optional<std::string>> Catalog::inline_data(std::int64_t object_id) {
  auto q = impl_->reader().query("SELECT data, checksum FROM inline_data WHERE object_id = ?1");
  q.bind(1, object_id);
  H3_TRY(bool row, q.step());
  if (!row) return std::optional<std::string>{};
  H3_TRY(auto data, verified_inline_data(q, 0, object_id));
  return std::optional<std::string>(std::move(data));
}

Result<std::vector<ObjectPartRecord>> Catalog::object_parts(std::int64_t object_id) {
  auto q = impl_->reader().query("SELECT " H3_OBJECT_PART_COLUMNS
                                 " FROM object_parts WHERE object_id = ?1 ORDER BY part_number");
  q.bind(1, object_id);
  std::vector<ObjectPartRecord> out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    out.push_back(read_object_part(q));
  }
  return out;
}

Result<std::optional<ObjectPartRecord>> Catalog::object_part(std::int64_t object_id,
                                                             std::uint32_t part_number) {
  auto q = impl_->reader().query("SELECT " H3_OBJECT_PART_COLUMNS
                                 " FROM object_parts WHERE object_id = ?1 AND part_number = ?2");
  q.bind(1, object_id).bind(2, static_cast<std::int64_t>(part_number));
  H3_TRY(bool row, q.step());
  if (!row) return std::optional<ObjectPartRecord>{};
  return std::optional<ObjectPartRecord>(read_object_part(q));
}

Result<ListPage> Catalog::list_objects(std::int64_t bucket_id, const ListQuery& query) {
  Connection& c = impl_->reader();
  ListPage page;
  const std::string upper = upper_bound_of(query.prefix);
  // The scan position: keys >= `from` (inclusive) or > `from` (exclusive).
  std::string from = query.prefix;
  bool exclusive = false;
  if (query.start_after >= from) {
    from = query.start_after;
    exclusive = true;
  }
  const std::size_t want = query.max_keys;
  auto emitted = [&] { return page.objects.size() + page.common_prefixes.size(); };
  bool more = true;
  while (more) {
    // Rows are fetched in runs; a common prefix ends the run with a seek past it.
    auto q = c.query(
        exclusive ? "SELECT key, size, etag, created_ms, parts_count, crc32 IS NOT NULL, crc32c IS "
                    "NOT NULL, "
                    "crc64nvme IS NOT NULL, sha1 IS NOT NULL, sha256 IS NOT NULL FROM objects "
                    "WHERE bucket_id = ?1 AND key > ?2 AND key < ?3 ORDER BY key LIMIT ?4"
                  : "SELECT key, size, etag, created_ms, parts_count, crc32 IS NOT NULL, crc32c IS "
                    "NOT NULL, "
                    "crc64nvme IS NOT NULL, sha1 IS NOT NULL, sha256 IS NOT NULL FROM objects "
                    "WHERE bucket_id = ?1 AND key >= ?2 AND key < ?3 ORDER BY key LIMIT ?4");
    q.bind(1, bucket_id).bind(2, std::string_view(from)).bind(3, std::string_view(upper));
    q.bind(4, static_cast<std::int64_t>(want - emitted() + 1));
    more = false;
    for (;;) {
      H3_TRY(bool row, q.step());
      if (!row) break;
      ++page.rows_read;
      const std::string_view key = q.text(0);
      if (!query.delimiter.empty()) {
        const auto pos = key.find(query.delimiter, query.prefix.size());
        if (pos != std::string_view::npos) {
          std::string common(key.substr(0, pos + query.delimiter.size()));
          // Seek past everything under this prefix: one index search, however many keys.
          from = upper_bound_of(common);
          exclusive = false;
          more = true;
          // A prefix at or before the marker was returned on an earlier page.
          if (common <= query.start_after && !query.start_after.empty()) break;
          if (emitted() == want) {
            page.truncated = true;
            more = false;
            break;
          }
          page.common_prefixes.push_back(common);
          page.last = std::move(common);
          break;
        }
      }
      if (emitted() == want) {
        page.truncated = true;
        more = false;
        break;
      }
      ListEntry e;
      e.key = std::string(key);
      e.size_bytes = q.uint64(1);
      e.etag = std::string(q.text(2));
      e.created_ms = q.int64(3);
      e.parts_count = static_cast<std::uint32_t>(q.int64(4));
      static constexpr const char* kAlgorithms[] = {"CRC32", "CRC32C", "CRC64NVME", "SHA1",
                                                    "SHA256"};
      for (int i = 0; i < 5; ++i) {
        if (q.int64(5 + i) != 0) {
          e.checksum_algorithm = kAlgorithms[i];
          break;
        }
      }
      page.last = e.key;
      from = e.key;
      exclusive = true;
      page.objects.push_back(std::move(e));
      more = true;  // the run may have ended at LIMIT: fetch the next run
    }
    if (page.truncated) break;
    if (want == 0) break;
  }
  return page;
}

Result<std::optional<UploadRecord>> Catalog::find_upload(std::string_view upload_id) {
  return find_upload_on(impl_->reader(), upload_id);
}

Result<std::vector<PartRecord>> Catalog::list_parts(std::int64_t upload_row,
                                                    std::uint32_t after_part,
                                                    std::uint32_t max_parts) {
  auto q = impl_->reader().query(
      "SELECT " H3_PART_COLUMNS
      " FROM parts WHERE upload = ?1 AND part_number > ?2 ORDER BY part_number LIMIT ?3");
  q.bind(1, upload_row)
      .bind(2, static_cast<std::int64_t>(after_part))
      .bind(3, static_cast<std::int64_t>(max_parts));
  std::vector<PartRecord> out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    out.push_back(read_part(q));
  }
  return out;
}

Result<UploadListPage> Catalog::list_uploads(std::int64_t bucket_id, const UploadListQuery& query) {
  Connection& c = impl_->reader();
  UploadListPage page;
  const std::string upper = upper_bound_of(query.prefix);
  // One key's uploads in the order they were initiated (S3's order): by row id, which grows
  // with each CreateMultipartUpload. The scan starts after (key, id) = (from, after_id); it is
  // resumed with a seek past every common prefix, like the objects' listing: a page costs what
  // it returns, not the bucket's number of uploads.
  std::string from = query.prefix;
  std::int64_t after_id = -1;  // -1: from `from` inclusive; else after this id of `from`
  if (!query.key_marker.empty() && query.key_marker >= from) {
    from = query.key_marker;
    after_id = std::numeric_limits<std::int64_t>::max();  // after every upload of the marker key
    if (!query.upload_id_marker.empty()) {
      H3_TRY(auto marker, find_upload_on(c, query.upload_id_marker));
      // An upload-id marker that is gone (completed or aborted since): that key's uploads are
      // listed again rather than lost.
      after_id = marker && marker->bucket_id == bucket_id && marker->key == query.key_marker
                     ? marker->id
                     : 0;
    }
  }
  const std::size_t want = query.max_uploads;
  auto emitted = [&] { return page.uploads.size() + page.common_prefixes.size(); };
  for (bool more = want > 0; more;) {
    auto q = c.query("SELECT " H3_UPLOAD_COLUMNS
                     " FROM uploads WHERE bucket_id = ?1 AND key < ?3 AND "
                     "(key > ?2 OR (key = ?2 AND id > ?4)) ORDER BY key, id LIMIT ?5");
    q.bind(1, bucket_id)
        .bind(2, std::string_view(from))
        .bind(3, std::string_view(upper))
        .bind(4, after_id);
    q.bind(5, static_cast<std::int64_t>(want - emitted() + 1));
    more = false;
    for (;;) {
      H3_TRY(bool row, q.step());
      if (!row) break;
      UploadRecord u = read_upload(q);
      ++page.rows_read;
      if (!query.delimiter.empty()) {
        const auto pos = u.key.find(query.delimiter, query.prefix.size());
        if (pos != std::string::npos) {
          std::string common = u.key.substr(0, pos + query.delimiter.size());
          // Seek past everything under this prefix: one index search, however many uploads.
          from = upper_bound_of(common);
          after_id = -1;
          more = true;
          // A prefix at or before the marker was returned on an earlier page.
          if (!query.key_marker.empty() && common <= query.key_marker) break;
          if (emitted() == want) {
            page.truncated = true;
            more = false;
            break;
          }
          page.next_key_marker = common;
          page.next_upload_id_marker.clear();
          page.common_prefixes.push_back(std::move(common));
          break;
        }
      }
      if (emitted() == want) {
        page.truncated = true;
        more = false;
        break;
      }
      from = u.key;
      after_id = u.id;
      page.next_key_marker = u.key;
      page.next_upload_id_marker = u.upload_id;
      page.uploads.push_back(std::move(u));
      more = true;  // the run may have ended at LIMIT: fetch the next run
    }
  }
  return page;
}

Result<Catalog::UploadCounts> Catalog::count_uploads(std::int64_t bucket_id, std::string_view owner,
                                                     std::uint64_t limit) {
  auto q = impl_->reader().query(
      "SELECT (SELECT count(*) FROM (SELECT 1 FROM uploads WHERE bucket_id = ?1 LIMIT ?3)), "
      "(SELECT count(*) FROM (SELECT 1 FROM uploads WHERE owner = ?2 LIMIT ?3))");
  q.bind(1, bucket_id).bind(2, owner).bind(3, static_cast<std::int64_t>(limit));
  H3_TRY(q.step());
  return UploadCounts{q.uint64(0), q.uint64(1)};
}

Result<std::vector<UploadRecord>> Catalog::uploads_older_than(std::int64_t created_before_ms,
                                                              std::size_t limit) {
  auto q =
      impl_->reader().query("SELECT " H3_UPLOAD_COLUMNS
                            " FROM uploads WHERE created_ms < ?1 ORDER BY created_ms LIMIT ?2");
  q.bind(1, created_before_ms).bind(2, static_cast<std::int64_t>(limit));
  std::vector<UploadRecord> out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    out.push_back(read_upload(q));
  }
  return out;
}

Result<ExtentList> Catalog::all_extents() {
  auto q = impl_->reader().query("SELECT device_offset, device_length FROM extents");
  ExtentList out;
  for (;;) {
    H3_TRY(bool row, q.step());
    if (!row) break;
    out.push_back({q.uint64(0), q.uint64(1)});
  }
  return out;
}

Result<Catalog::Counts> Catalog::counts() {
  Connection& c = impl_->reader();
  auto q = c.query(
      "SELECT (SELECT count(*) FROM buckets), (SELECT count(*) FROM objects), (SELECT count(*) "
      "FROM uploads), "
      "(SELECT count(*) FROM parts), (SELECT count(*) FROM extents)");
  H3_TRY(q.step());
  return Counts{q.uint64(0), q.uint64(1), q.uint64(2), q.uint64(3), q.uint64(4)};
}

#undef H3_OBJECT_COLUMNS
#undef H3_OBJECT_COLUMNS_O
#undef H3_UPLOAD_COLUMNS
#undef H3_PART_COLUMNS

}  // namespace hots3::storage
