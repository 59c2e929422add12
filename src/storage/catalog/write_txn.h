#pragma once

// Private to src/storage/catalog: the writer's transaction, WriteTxn's implementation. Every
// method runs on the writer thread inside its batch's transaction.

#include "storage/catalog/catalog.h"
#include "storage/catalog/rows.h"
#include "storage/catalog/sqlite.h"
#include "storage/checksum.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hots3::storage::detail {

// The versions `where` (SQL on objects) whose rows are their write-back jobs, their marks taken
// (WriteTxnImpl::materialize_tier_jobs gives each job a row).
#define H3_MATERIALIZE(where)                                                                   \
  "UPDATE objects SET tier_implied = NULL WHERE tier_implied = 1 AND tier_state = 0 AND " where \
  " RETURNING bucket_id, key, id, size, created_ms"

class WriteTxnImpl final : public WriteTxn {
 public:
  WriteTxnImpl(Connection& c, std::int64_t& next_id, std::int64_t tier_delay_ms)
      : c_(c), next_id_(next_id), tier_delay_ms_(tier_delay_ms) {}

  std::int64_t next_id() override { return next_id_++; }

  // How much the bytes owed to upstreams (the sizes of queued uploads) changed in this
  // transaction: applied to the catalog's count when it commits.
  [[nodiscard]] std::int64_t owed_delta() const noexcept { return owed_delta_; }
  void set_owed_delta(std::int64_t delta) noexcept { owed_delta_ = delta; }

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
  void forget() {
    last_bucket_.reset();
    implied_.reset();
  }

  Result<BucketRecord> create_bucket(std::string_view name, std::string_view owner,
                                     std::int64_t created_ms) override {
    forget();
    H3_TRY(auto existing, find_bucket_on(c_, name));
    if (existing) return errc::kAlreadyExists;
    auto q = c_.query("INSERT INTO buckets(name, owner, created_ms) VALUES (?1, ?2, ?3)");
    q.bind(1, name).bind(2, owner).bind(3, created_ms);
    H3_TRY(q.run());
    return BucketRecord{sqlite3_last_insert_rowid(c_.handle()),
                        std::string(name),
                        std::string(owner),
                        created_ms,
                        BucketTier::kNone,
                        {}};
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
    // (Ids are reused: a later bucket must not find this one's pins or prefetch jobs.)
    for (const char* sql : {"DELETE FROM tier_pins WHERE bucket_id = ?1",
                            "DELETE FROM prefetches WHERE bucket_id = ?1"}) {
      auto q_rows = c_.query(sql);
      q_rows.bind(1, bucket_id);
      H3_TRY(q_rows.run());
    }
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
    // The version whose upload imply_tier_job left to its row carries the mark.
    const bool implied = implied_ && implied_->object_id == o.id;
    auto q = c_.query(
        implied ? (if_absent ? H3_INSERT_IMPLIED_OBJECT " ON CONFLICT(bucket_id, key) DO NOTHING"
                             : H3_INSERT_IMPLIED_OBJECT)
                : (if_absent ? H3_INSERT_OBJECT " ON CONFLICT(bucket_id, key) DO NOTHING"
                             : H3_INSERT_OBJECT));
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
    q.bind_optional(24, o.upstream_etag);
    if (o.validated_ms) {
      q.bind(25, *o.validated_ms);
    } else {
      q.bind_null(25);
    }
    H3_TRY(q.run());
    if (if_absent && c_.changes() == 0) {
      // The key has a version: whether it leaves the job implied is decided while it is there.
      if (implied) H3_TRY(settle_implied_tier_job(nullptr));
      return false;
    }
    if (implied) implied_.reset();
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
    if (implied_) H3_TRY(settle_implied_tier_job(&object_id));
    H3_TRY(ExtentList freed, delete_extents(c_, object_id));
    H3_TRY(ExtentList chunks, delete_chunks(object_id));
    freed.insert(freed.end(), chunks.begin(), chunks.end());
    for (const char* sql :
         {"DELETE FROM inline_data WHERE object_id = ?1",
          "DELETE FROM object_parts WHERE object_id = ?1",
          "DELETE FROM ended_uploads WHERE object_id = ?1", "DELETE FROM objects WHERE id = ?1"}) {
      auto q = c_.query(sql);
      q.bind(1, object_id);
      H3_TRY(q.run());
    }
    return freed;
  }

  Result<void> set_bucket_tier(std::int64_t bucket_id, BucketTier tier,
                               std::string_view upstream) override {
    forget();
    // What the bucket owes stays owed, as rows, whatever its binding becomes.
    H3_TRY(materialize_tier_jobs(H3_MATERIALIZE("bucket_id = ?1"),
                                 [&](Query& m) { m.bind(1, bucket_id); }));
    auto q = c_.query("UPDATE buckets SET tier_mode = ?2, upstream = ?3 WHERE id = ?1");
    q.bind(1, bucket_id).bind(2, static_cast<std::int64_t>(tier));
    if (upstream.empty()) {
      q.bind_null(3);
    } else {
      q.bind(3, upstream);
    }
    H3_TRY(q.run());
    if (c_.changes() == 0) return errc::kNotFound;
    return {};
  }

  // What a job of `key` holds, let go before it is replaced or removed: the bytes it owes, and
  // its upstream upload's parts (that upload is now an orphan, which the uploader's sweep aborts
  // upstream). An implied job (no row) goes with its version's mark.
  struct Released {
    bool row = false;          // the key's job has a row, still there
    std::string implied_etag;  // the ETag of the version whose implied job went ("" = none)
    std::int64_t implied_first_ms = 0;  // and when that version was written
  };
  Result<Released> release_tier_job(std::int64_t bucket_id, std::string_view key) {
    auto old = c_.query("SELECT size, seq FROM tier_jobs WHERE bucket_id = ?1 AND key = ?2");
    old.bind(1, bucket_id).bind(2, key);
    H3_TRY(bool row, old.step());
    if (!row) {
      // Its upload may be under way: that version's ETag goes with the next job of the key.
      auto implied = c_.query(
          "UPDATE objects SET tier_implied = NULL WHERE bucket_id = ?1 AND key = ?2 AND "
          "tier_implied = 1 AND tier_state = 0 RETURNING size, etag, created_ms");
      implied.bind(1, bucket_id).bind(2, key);
      H3_TRY(bool had, implied.step());
      Released released;
      if (had) {
        owed_delta_ -= implied.int64(0);
        released.implied_etag = std::string(implied.text(1));
        released.implied_first_ms = implied.int64(2);
        H3_TRY(implied.step());  // (the statement's end)
      }
      return released;
    }
    owed_delta_ -= old.int64(0);
    auto parts = c_.query("DELETE FROM tier_parts WHERE seq = ?1");
    parts.bind(1, old.int64(1));
    H3_TRY(parts.run());
    return Released{true, {}, 0};
  }

  // Gives the implied jobs of the versions H3_MATERIALIZE(where) takes (SQL on objects, its
  // parameters bound by `bind`) rows of their own, their seqs and due times kept, and takes the
  // versions' marks: a job does so before it holds state of its own, and every job of a span, a
  // bucket or the store before a change that must see each as a row. Moves no owed bytes.
  template <typename Bind>
  Result<void> materialize_tier_jobs(const char* sql, const Bind& bind) {
    auto marked = c_.query(sql);
    bind(marked);
    for (;;) {
      H3_TRY(bool row, marked.step());
      if (!row) break;
      auto q = c_.query(
          "INSERT INTO tier_jobs(bucket_id, key, seq, object_id, size, first_ms, due_ms) VALUES "
          "(?1, ?2, ?3, ?3, ?4, ?5, ?6) ON CONFLICT(bucket_id, key) DO NOTHING");
      q.bind(1, marked.int64(0)).bind(2, marked.text(1)).bind(3, marked.int64(2));
      q.bind(4, marked.int64(3)).bind(5, marked.int64(4)).bind(6, marked.int64(4) + tier_delay_ms_);
      H3_TRY(q.run());
    }
    return {};
  }
  // The implied job `job` names, if it is one and still its key's.
  Result<void> materialize_tier_job(const TierJob& job) {
    if (!job.object_id || *job.object_id != job.seq) return {};
    return materialize_tier_jobs(H3_MATERIALIZE("id = ?1 AND bucket_id = ?2"),
                                 [&](Query& q) { q.bind(1, job.seq).bind(2, job.bucket_id); });
  }
  Result<void> materialize_key_tier_job(std::int64_t bucket_id, std::string_view key) {
    return materialize_tier_jobs(H3_MATERIALIZE("bucket_id = ?1 AND key = ?2"),
                                 [&](Query& q) { q.bind(1, bucket_id).bind(2, key); });
  }

  Result<void> queue_tier_job(std::int64_t bucket_id, std::string_view key,
                              std::optional<std::int64_t> object_id, std::uint64_t size_bytes,
                              std::int64_t now_ms, std::int64_t due_ms,
                              std::string_view source_key) override {
    const std::int64_t seq = next_id();
    H3_TRY(const Released released, release_tier_job(bucket_id, key));
    // The dirty age counts from the oldest change not yet upstream.
    const std::int64_t first_ms =
        released.implied_etag.empty() ? now_ms : std::min(now_ms, released.implied_first_ms);
    const auto bind = [&](Query& q) {
      q.bind(1, bucket_id).bind(2, key).bind(3, seq);
      if (object_id) {
        q.bind(4, *object_id);
      } else {
        q.bind_null(4);
      }
      q.bind(5, static_cast<std::int64_t>(size_bytes)).bind(6, first_ms).bind(7, due_ms);
      if (source_key.empty()) {
        q.bind_null(8);
      } else {
        q.bind(8, source_key);
      }
    };
    owed_delta_ += static_cast<std::int64_t>(size_bytes);
    if (!released.row) {
      auto fresh = c_.query(
          "INSERT INTO tier_jobs(bucket_id, key, seq, object_id, size, first_ms, due_ms, "
          "source_key, prior_etags) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
      bind(fresh);
      if (released.implied_etag.empty()) {
        fresh.bind_null(9);
      } else {
        fresh.bind(9, released.implied_etag + " ");  // (as the upsert below writes them)
      }
      return fresh.run();
    }
    auto q = c_.query(
        "INSERT INTO tier_jobs(bucket_id, key, seq, object_id, size, first_ms, due_ms, "
        "source_key) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(bucket_id, key) DO "
        "UPDATE SET seq = excluded.seq, object_id = excluded.object_id, size = excluded.size, "
        "due_ms = excluded.due_ms, attempts = 0, state = 0, last_error = NULL, upload_id = NULL, "
        "source_key = excluded.source_key, prior_etags = substr(coalesce((SELECT etag FROM "
        "objects WHERE id = tier_jobs.object_id) || ' ', '') || coalesce(tier_jobs.prior_etags, "
        "''), 1, 400)");
    bind(q);
    return q.run();
  }

  Result<void> imply_tier_job(std::int64_t bucket_id, std::string_view key, std::int64_t object_id,
                              std::uint64_t size_bytes, std::int64_t now_ms,
                              std::int64_t due_ms) override {
    // A job of the key: the new job takes its place as a row, as any other change's does.
    auto q = c_.query("SELECT 1 FROM tier_jobs WHERE bucket_id = ?1 AND key = ?2");
    q.bind(1, bucket_id).bind(2, key);
    H3_TRY(const bool row, q.step());
    if (row) return queue_tier_job(bucket_id, key, object_id, size_bytes, now_ms, due_ms, {});
    // So must a version of the key not known to be upstream (its upload may be under way, or
    // lost), but most writes are of new keys: the version in the way is looked at only when
    // there is one, by the new version's insert or the delete that makes room for it.
    implied_ = Implied{bucket_id, std::string(key), object_id, size_bytes, now_ms, due_ms, false};
    owed_delta_ += static_cast<std::int64_t>(size_bytes);
    return {};
  }

  // The implied job left pending by imply_tier_job meets a version in its way: the key's (its
  // insert found one), or the one `object_id` names, about to be deleted, if it is the key's.
  // Unless that version is upstream already, the job takes a row after all.
  Result<void> settle_implied_tier_job(const std::int64_t* object_id) {
    if (!implied_ || implied_->settled) return {};
    auto q = c_.query(
        "SELECT id, tier_state NOT IN (1, 2) FROM objects WHERE bucket_id = ?1 AND key = ?2");
    q.bind(1, implied_->bucket_id).bind(2, std::string_view(implied_->key));
    H3_TRY(const bool found, q.step());
    if (!found || (object_id != nullptr && q.int64(0) != *object_id)) return {};
    if (q.int64(1) == 0) {
      implied_->settled = true;
      return {};
    }
    H3_TRY(q.step());  // (the statement's end, before queue_tier_job writes)
    const Implied p = std::move(*implied_);
    implied_.reset();
    owed_delta_ -= static_cast<std::int64_t>(p.size_bytes);
    return queue_tier_job(p.bucket_id, p.key, p.object_id, p.size_bytes, p.now_ms, p.due_ms, {});
  }

  Result<std::optional<TierSeen>> find_tier_seen(std::int64_t bucket_id,
                                                 std::string_view key) override {
    return find_tier_seen_on(c_, bucket_id, key);
  }

  Result<void> set_tier_seen(std::int64_t bucket_id, std::string_view key,
                             const TierSeen* seen) override {
    if (seen == nullptr) {
      auto q = c_.query("DELETE FROM tier_seen WHERE bucket_id = ?1 AND key = ?2");
      q.bind(1, bucket_id).bind(2, key);
      return q.run();
    }
    auto q = c_.query(
        "INSERT OR REPLACE INTO tier_seen(bucket_id, key, etag, ours) VALUES (?1, ?2, ?3, ?4)");
    q.bind(1, bucket_id).bind(2, key).bind(3, std::string_view(seen->etag));
    q.bind(4, std::string_view(seen->ours));
    return q.run();
  }

  Result<bool> finish_tier_job(const TierJob& job) override {
    auto q = c_.query("DELETE FROM tier_jobs WHERE bucket_id = ?1 AND key = ?2 AND seq = ?3");
    q.bind(1, job.bucket_id).bind(2, std::string_view(job.key)).bind(3, job.seq);
    H3_TRY(q.run());
    if (c_.changes() == 0) {
      if (!job.object_id || *job.object_id != job.seq) return false;
      // An implied job: its version's mark goes (uploaded or not, it is owed no more).
      auto implied = c_.query(
          "UPDATE objects SET tier_implied = NULL WHERE id = ?1 AND bucket_id = ?2 AND key = ?3 "
          "AND tier_implied = 1 AND tier_state = 0");
      implied.bind(1, job.seq).bind(2, job.bucket_id).bind(3, std::string_view(job.key));
      H3_TRY(implied.run());
      if (c_.changes() == 0) return false;
      owed_delta_ -= static_cast<std::int64_t>(job.size_bytes);
      return true;
    }
    owed_delta_ -= static_cast<std::int64_t>(job.size_bytes);
    auto parts = c_.query("DELETE FROM tier_parts WHERE seq = ?1");
    parts.bind(1, job.seq);
    H3_TRY(parts.run());
    return true;
  }

  Result<std::optional<TierJob>> find_tier_job(std::int64_t bucket_id,
                                               std::string_view key) override {
    return find_tier_job_on(c_, bucket_id, key, tier_delay_ms_);
  }

  Result<void> drop_tier_job(std::int64_t bucket_id, std::string_view key) override {
    H3_TRY(const Released released, release_tier_job(bucket_id, key));
    if (!released.row) return {};
    auto q = c_.query("DELETE FROM tier_jobs WHERE bucket_id = ?1 AND key = ?2");
    q.bind(1, bucket_id).bind(2, key);
    return q.run();
  }

  Result<void> add_prior_etag(std::int64_t bucket_id, std::string_view key,
                              std::string_view etag) override {
    H3_TRY(materialize_key_tier_job(bucket_id, key));
    auto q = c_.query(
        "UPDATE tier_jobs SET prior_etags = substr(?3 || ' ' || coalesce(prior_etags, ''), 1, "
        "400) WHERE bucket_id = ?1 AND key = ?2");
    q.bind(1, bucket_id).bind(2, key).bind(3, etag);
    return q.run();
  }

  Result<bool> set_tier_upload(const TierJob& job, std::string_view upload_id) override {
    H3_TRY(materialize_tier_job(job));
    auto q = c_.query(
        "UPDATE tier_jobs SET upload_id = ?4 WHERE bucket_id = ?1 AND key = ?2 AND seq = ?3");
    q.bind(1, job.bucket_id).bind(2, std::string_view(job.key)).bind(3, job.seq);
    if (upload_id.empty()) {
      q.bind_null(4);
    } else {
      q.bind(4, upload_id);
    }
    H3_TRY(q.run());
    if (c_.changes() == 0) return false;
    if (upload_id.empty()) {
      auto parts = c_.query("DELETE FROM tier_parts WHERE seq = ?1");
      parts.bind(1, job.seq);
      H3_TRY(parts.run());
    }
    return true;
  }

  Result<bool> add_tier_part(const TierJob& job, const TierPart& part) override {
    {
      auto q = c_.query(
          "SELECT EXISTS(SELECT 1 FROM tier_jobs WHERE bucket_id = ?1 AND key = ?2 AND seq = ?3)");
      q.bind(1, job.bucket_id).bind(2, std::string_view(job.key)).bind(3, job.seq);
      H3_TRY(q.step());
      if (q.int64(0) == 0) return false;
    }
    auto q = c_.query(
        "INSERT OR REPLACE INTO tier_parts(seq, part_number, size, etag) VALUES (?1, ?2, ?3, ?4)");
    q.bind(1, job.seq)
        .bind(2, static_cast<std::int64_t>(part.part_number))
        .bind(3, part.size_bytes)
        .bind(4, std::string_view(part.etag));
    H3_TRY(q.run());
    return true;
  }

  Result<bool> defer_tier_job(const TierJob& job, std::int64_t due_ms, std::string_view error,
                              bool park) override {
    H3_TRY(materialize_tier_job(job));
    auto q = c_.query(
        "UPDATE tier_jobs SET due_ms = ?4, attempts = attempts + 1, last_error = ?5, state = ?6 "
        "WHERE bucket_id = ?1 AND key = ?2 AND seq = ?3");
    q.bind(1, job.bucket_id).bind(2, std::string_view(job.key)).bind(3, job.seq);
    q.bind(4, due_ms).bind(5, error).bind(6, park ? 1 : 0);
    H3_TRY(q.run());
    return c_.changes() != 0;
  }

  Result<void> postpone_tier_jobs(std::span<const TierJob> jobs, std::int64_t due_ms) override {
    for (const TierJob& job : jobs) {
      H3_TRY(materialize_tier_job(job));
      auto q = c_.query(
          "UPDATE tier_jobs SET due_ms = ?4 WHERE bucket_id = ?1 AND key = ?2 AND seq = ?3 AND "
          "state = 0");
      q.bind(1, job.bucket_id).bind(2, std::string_view(job.key)).bind(3, job.seq);
      q.bind(4, due_ms);
      H3_TRY(q.run());
    }
    return {};
  }

  Result<std::uint64_t> queue_local_objects(std::int64_t bucket_id, std::int64_t now_ms) override {
    std::int64_t count = 0;
    {
      auto q = c_.query(
          "SELECT count(*) FROM objects WHERE bucket_id = ?1 AND tier_state = 0 AND "
          "tier_implied IS NULL");
      q.bind(1, bucket_id);
      H3_TRY(q.step());
      count = q.int64(0);
    }
    // Their seqs come from the id sequence, one each, in the order the versions were written.
    const std::int64_t base = next_id_;
    next_id_ += count;
    auto q = c_.query(
        "INSERT INTO tier_jobs(bucket_id, key, seq, object_id, size, first_ms, due_ms) "
        "SELECT bucket_id, key, ?2 + row_number() OVER (ORDER BY id) - 1, id, size, ?3, ?3 "
        "FROM objects WHERE bucket_id = ?1 AND tier_state = 0 AND tier_implied IS NULL "
        "ON CONFLICT(bucket_id, key) DO NOTHING");
    q.bind(1, bucket_id).bind(2, base).bind(3, now_ms);
    H3_TRY(q.run());
    const auto queued = static_cast<std::uint64_t>(c_.changes());
    // The rows just inserted are the ones with this transaction's seqs.
    auto sum = c_.query("SELECT coalesce(sum(size), 0) FROM tier_jobs WHERE seq >= ?1");
    sum.bind(1, base);
    H3_TRY(sum.step());
    owed_delta_ += sum.int64(0);
    return queued;
  }

  Result<std::int64_t> expedite_tier_jobs(std::int64_t bucket_id, const KeySpan& span,
                                          std::int64_t now_ms) override {
    H3_TRY(materialize_tier_jobs(H3_MATERIALIZE("bucket_id = ?1 AND key >= ?2 AND key < ?3"),
                                 [&](Query& m) {
                                   m.bind(1, bucket_id);
                                   bind_key_span(m, span, 2);
                                 }));
    auto q = c_.query(
        "UPDATE tier_jobs SET due_ms = ?4 WHERE bucket_id = ?1 AND key >= ?2 AND key < ?3 "
        "AND state = 0 AND attempts = 0 AND due_ms > ?4");
    q.bind(1, bucket_id).bind(4, now_ms);
    bind_key_span(q, span, 2);
    H3_TRY(q.run());
    auto last = c_.query(
        "SELECT coalesce(max(seq), 0) FROM tier_jobs WHERE bucket_id = ?1 AND key >= ?2 AND "
        "key < ?3");
    last.bind(1, bucket_id);
    bind_key_span(last, span, 2);
    H3_TRY(last.step());
    return last.int64(0);
  }

  Result<DeviceLoss> lose_device_data() override {
    DeviceLoss loss;
    H3_TRY(materialize_tier_jobs(H3_MATERIALIZE("1"), [](Query&) {}));
    // Lost: what only the device held, a version whose upload a job still owes included (one
    // the upstream lost, to be sent again).
    H3_TRY(c_.exec(
        "UPDATE objects SET tier_state = 3 WHERE is_inline = 0 AND size > 0 AND (tier_state = 0 "
        "OR (tier_state = 1 AND id IN (SELECT object_id FROM tier_jobs WHERE object_id IS NOT "
        "NULL)))"));
    {
      auto q = c_.query(
          "SELECT count(*), coalesce(sum(size), 0) FROM objects WHERE tier_state = 1 AND "
          "is_inline = 0 AND size > 0");
      H3_TRY(q.step());
      loss.evicted = q.uint64(0);
      loss.evicted_bytes = q.uint64(1);
    }
    H3_TRY(c_.exec(
        "UPDATE objects SET tier_state = 2 WHERE tier_state = 1 AND is_inline = 0 AND size > 0"));
    H3_TRY(c_.exec("DELETE FROM parts"));
    loss.parts = static_cast<std::uint64_t>(c_.changes());
    H3_TRY(c_.exec("DELETE FROM tier_chunks"));
    loss.chunks = static_cast<std::uint64_t>(c_.changes());
    H3_TRY(c_.exec("DELETE FROM extents"));
    // Their jobs park, owing no bytes (none will be sent: a cap on what is owed must not count
    // them), and let go of their upstream multipart uploads (orphans then, aborted as such).
    H3_TRY(c_.exec(
        "DELETE FROM tier_parts WHERE seq IN (SELECT j.seq FROM tier_jobs j JOIN objects o ON o.id "
        "= j.object_id WHERE o.tier_state = 3)"));
    {
      auto q = c_.query(
          "UPDATE tier_jobs SET state = 1, last_error = ?1, size = 0, upload_id = NULL WHERE "
          "object_id IN (SELECT id FROM objects WHERE tier_state = 3)");
      q.bind(1, std::string_view(kLostCause));
      H3_TRY(q.run());
    }
    auto q = c_.query(
        "SELECT b.name, o.key, o.size, o.etag, coalesce(CASE WHEN s.ours = o.etag THEN "
        "j.source_key "
        "END, '') FROM objects o JOIN buckets b ON b.id = o.bucket_id LEFT JOIN tier_jobs j ON "
        "j.bucket_id = o.bucket_id AND j.key = o.key AND j.object_id = o.id LEFT JOIN tier_seen s "
        "ON s.bucket_id = o.bucket_id AND s.key = j.source_key WHERE o.tier_state = 3 ORDER BY "
        "b.name, o.key");
    for (;;) {
      H3_TRY(bool row, q.step());
      if (!row) break;
      loss.lost.push_back({std::string(q.text(0)), std::string(q.text(1)), q.uint64(2),
                           std::string(q.text(3)), std::string(q.text(4))});
    }
    return loss;
  }

  Result<std::uint64_t> unpark_tier_jobs(std::int64_t now_ms) override {
    auto q = c_.query("UPDATE tier_jobs SET state = 0, due_ms = ?1 WHERE state = 1");
    q.bind(1, now_ms);
    H3_TRY(q.run());
    return static_cast<std::uint64_t>(c_.changes());
  }

  Result<void> set_object_uploaded(std::int64_t object_id,
                                   std::optional<std::string_view> upstream_etag,
                                   std::int64_t now_ms) override {
    // (Not an evicted version: its data is not here, whatever went up. A lost one the upstream
    // now holds, copied there from the key it was renamed or copied from, is evicted.)
    auto q = c_.query(
        "UPDATE objects SET tier_state = CASE tier_state WHEN 3 THEN 2 ELSE ?2 END, upstream_etag "
        "= ?3, clean_ms = ?4 WHERE id = ?1 AND tier_state != 2");
    q.bind(1, object_id)
        .bind(2, static_cast<std::int64_t>(TierState::kLocalAndUpstream))
        .bind(4, now_ms);
    if (upstream_etag) {
      q.bind(3, *upstream_etag);
    } else {
      q.bind_null(3);
    }
    return q.run();
  }

  Result<std::vector<ObjectRecord>> evictable_objects(std::int64_t bucket_id, const KeySpan& span,
                                                      std::string_view after,
                                                      std::size_t limit) override {
    auto q = c_.query("SELECT " H3_OBJECT_COLUMNS_O
                      " FROM objects o WHERE o.bucket_id = ?1 AND o.key >= ?2 AND o.key < ?3 "
                      "AND o.tier_state = 1 AND o.is_inline = 0 AND NOT EXISTS (SELECT 1 FROM "
                      "tier_jobs j WHERE j.bucket_id = ?1 AND (j.key = o.key OR j.source_key = "
                      "o.key)) AND NOT h3_pinned(?1, o.key) AND o.key > ?5 ORDER BY o.key "
                      "LIMIT ?4");
    q.bind(1, bucket_id);
    bind_key_span(q, span, 2);
    q.bind(4, static_cast<std::int64_t>(limit)).bind(5, after);
    return read_objects(q);
  }

  Result<std::int64_t> insert_prefetch(const PrefetchRecord& job) override {
    {
      auto q = c_.query("SELECT EXISTS(SELECT 1 FROM buckets WHERE id = ?1)");
      q.bind(1, job.bucket_id);
      H3_TRY(q.step());
      if (q.int64(0) == 0) return errc::kNotFound;
    }
    std::string keys;
    for (const std::string& key : job.keys) {
      if (!keys.empty()) keys += '\n';
      keys += key;
    }
    {
      // Ended jobs are kept to be asked about, the bucket's last kEndedPrefetchesKept.
      auto q = c_.query(
          "DELETE FROM prefetches WHERE bucket_id = ?1 AND ended_ms IS NOT NULL AND id NOT IN "
          "(SELECT id FROM prefetches WHERE bucket_id = ?1 AND ended_ms IS NOT NULL ORDER BY id "
          "DESC LIMIT ?2)");
      q.bind(1, job.bucket_id).bind(2, static_cast<std::int64_t>(kEndedPrefetchesKept - 1));
      H3_TRY(q.run());
    }
    auto q = c_.query(
        "INSERT INTO prefetches(bucket_id, prefix, keys, objects, bytes, created_ms) VALUES (?1, "
        "?2, ?3, ?4, ?5, ?6)");
    q.bind(1, job.bucket_id).bind(2, std::string_view(job.prefix));
    if (job.keys.empty()) {
      q.bind_null(3);
    } else {
      q.bind(3, std::string_view(keys));
    }
    q.bind(4, job.objects).bind(5, job.bytes).bind(6, job.created_ms);
    H3_TRY(q.run());
    return c_.last_insert_rowid();
  }

  Result<void> advance_prefetch(std::int64_t id, std::string_view after, std::uint64_t failed,
                                std::int64_t ended_ms) override {
    auto q = c_.query(
        "UPDATE prefetches SET after = ?2, failed = ?3, ended_ms = nullif(?4, 0) WHERE id = ?1");
    q.bind(1, id).bind(2, after).bind(3, failed).bind(4, ended_ms);
    return q.run();
  }

  Result<void> add_pin(std::int64_t bucket_id, const KeySpan& span) override {
    {
      // A pin racing the bucket's deletion must not leave a rule a later bucket of the same id
      // would find.
      auto q = c_.query("SELECT EXISTS(SELECT 1 FROM buckets WHERE id = ?1)");
      q.bind(1, bucket_id);
      H3_TRY(q.step());
      if (q.int64(0) == 0) return errc::kNotFound;
    }
    {
      // No rule lies under a prefix rule: readers of the rules look at one prefix for a key.
      // With none nested, the only prefix that may hold the span is the last one at or before it.
      auto q = c_.query(
          "SELECT key FROM tier_pins WHERE bucket_id = ?1 AND prefix = 1 AND key <= ?2 ORDER BY "
          "key DESC LIMIT 1");
      q.bind(1, bucket_id).bind(2, std::string_view(span.text));
      H3_TRY(bool row, q.step());
      if (row && span.text.starts_with(q.text(0))) return {};
    }
    if (!span.exact) H3_TRY(remove_pins(bucket_id, span));
    auto q = c_.query(
        "INSERT INTO tier_pins(bucket_id, key, prefix) VALUES (?1, ?2, ?3) ON CONFLICT DO "
        "NOTHING");
    q.bind(1, bucket_id).bind(2, std::string_view(span.text)).bind(3, span.exact ? 0 : 1);
    return q.run();
  }

  Result<std::uint64_t> remove_pins(std::int64_t bucket_id, const KeySpan& span) override {
    auto q = c_.query(span.exact ? "DELETE FROM tier_pins WHERE bucket_id = ?1 AND key = ?2 AND "
                                   "prefix = 0"
                                 : "DELETE FROM tier_pins WHERE bucket_id = ?1 AND key >= ?2 AND "
                                   "key < ?3");
    q.bind(1, bucket_id);
    if (span.exact) {
      q.bind(2, std::string_view(span.text));
    } else {
      bind_key_span(q, span, 2);
    }
    H3_TRY(q.run());
    return static_cast<std::uint64_t>(c_.changes());
  }

  Result<void> set_accessed(std::int64_t object_id, std::int64_t accessed_ms) override {
    auto q = c_.query("UPDATE objects SET accessed_ms = ?2 WHERE id = ?1 AND accessed_ms < ?2");
    q.bind(1, object_id).bind(2, accessed_ms);
    return q.run();
  }

  Result<std::optional<EvictedVersion>> evict_if_evictable(std::int64_t object_id) override {
    // The key as it is now: a rename keeps the version id.
    auto q = c_.query(
        "UPDATE objects SET tier_state = 2 WHERE id = ?1 AND tier_state = 1 AND is_inline = 0 "
        "AND NOT EXISTS (SELECT 1 FROM tier_jobs j WHERE j.bucket_id = objects.bucket_id AND "
        "(j.key = objects.key OR j.source_key = objects.key)) AND NOT h3_pinned(bucket_id, key) "
        "RETURNING key");
    q.bind(1, object_id);
    H3_TRY(bool row, q.step());
    if (!row) return std::optional<EvictedVersion>{};
    EvictedVersion evicted{std::string(q.text(0)), {}};
    H3_TRY(q.step());  // (the statement's end)
    H3_TRY(evicted.freed, delete_extents(c_, object_id));
    return std::optional<EvictedVersion>(std::move(evicted));
  }

  Result<ExtentList> evict_object(std::int64_t object_id) override {
    H3_TRY(ExtentList freed, delete_extents(c_, object_id));
    auto q = c_.query("UPDATE objects SET tier_state = ?2 WHERE id = ?1");
    q.bind(1, object_id).bind(2, static_cast<std::int64_t>(TierState::kUpstreamOnly));
    H3_TRY(q.run());
    return freed;
  }

  Result<bool> insert_chunk(const ChunkRecord& chunk, const std::vector<ExtentRecord>& extents,
                            std::int64_t now_ms) override {
    auto q = c_.query(
        "INSERT INTO tier_chunks(id, object_id, chunk, size, created_ms) SELECT ?1, ?2, ?3, ?4, "
        "?5 WHERE EXISTS (SELECT 1 FROM objects WHERE id = ?2 AND tier_state = 2) "
        "ON CONFLICT (object_id, chunk) DO NOTHING");
    q.bind(1, chunk.id)
        .bind(2, chunk.object_id)
        .bind(3, static_cast<std::int64_t>(chunk.index))
        .bind(4, chunk.size_bytes)
        .bind(5, now_ms);
    H3_TRY(q.run());
    if (c_.changes() == 0) return false;
    H3_TRY(insert_extents(c_, chunk.id, extents));
    return true;
  }

  Result<std::vector<ChunkRecord>> oldest_chunks(std::string_view bucket_ids,
                                                 std::string_view held_ids,
                                                 std::int64_t kept_before_ms,
                                                 std::size_t limit) override {
    auto q = c_.query(
        "SELECT c.id, c.object_id, c.chunk, c.size FROM tier_chunks c JOIN objects o ON o.id = "
        "c.object_id WHERE c.created_ms < ?2 AND o.bucket_id IN (SELECT value FROM "
        "json_each(?1)) AND c.object_id NOT IN (SELECT value FROM json_each(?4)) ORDER BY "
        "c.created_ms, c.id LIMIT ?3");
    q.bind(1, bucket_ids)
        .bind(2, kept_before_ms)
        .bind(3, static_cast<std::int64_t>(limit))
        .bind(4, held_ids);
    return read_chunks(q);
  }

  Result<std::optional<std::int64_t>> find_chunk(std::int64_t object_id,
                                                 std::uint32_t index) override {
    auto q = c_.query("SELECT id FROM tier_chunks WHERE object_id = ?1 AND chunk = ?2");
    q.bind(1, object_id).bind(2, static_cast<std::int64_t>(index));
    H3_TRY(bool row, q.step());
    if (!row) return std::optional<std::int64_t>{};
    return std::optional<std::int64_t>(q.int64(0));
  }

  Result<std::vector<ChunkRecord>> span_chunks(std::int64_t bucket_id, const KeySpan& span,
                                               std::size_t limit) override {
    auto q = c_.query(
        "SELECT c.id, c.object_id, c.chunk, c.size FROM objects o JOIN tier_chunks c ON "
        "c.object_id = o.id WHERE o.bucket_id = ?1 AND o.key >= ?2 AND o.key < ?3 LIMIT ?4");
    q.bind(1, bucket_id);
    bind_key_span(q, span, 2);
    q.bind(4, static_cast<std::int64_t>(limit));
    return read_chunks(q);
  }

  Result<ExtentList> delete_chunks(std::int64_t object_id) override {
    ExtentList freed;
    std::vector<std::int64_t> ids;
    {
      auto q = c_.query("SELECT id FROM tier_chunks WHERE object_id = ?1");
      q.bind(1, object_id);
      for (;;) {
        H3_TRY(bool row, q.step());
        if (!row) break;
        ids.push_back(q.int64(0));
      }
    }
    for (const std::int64_t id : ids) {
      H3_TRY(ExtentList gone, delete_chunk(id));
      freed.insert(freed.end(), gone.begin(), gone.end());
    }
    return freed;
  }

  Result<ExtentList> delete_chunk(std::int64_t chunk_id) override {
    H3_TRY(ExtentList freed, delete_extents(c_, chunk_id));
    auto q = c_.query("DELETE FROM tier_chunks WHERE id = ?1");
    q.bind(1, chunk_id);
    H3_TRY(q.run());
    return freed;
  }

  Result<bool> adopt_chunks(std::int64_t stub_id, std::int64_t new_id,
                            std::uint64_t size_bytes) override {
    std::vector<ChunkRecord> chunks;
    {
      auto q = c_.query(
          "SELECT id, object_id, chunk, size FROM tier_chunks WHERE object_id = ?1 ORDER BY chunk");
      q.bind(1, stub_id);
      H3_TRY(chunks, read_chunks(q));
    }
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      if (chunks[i].index != i ||
          chunks[i].size_bytes != tier_chunk_bytes(size_bytes, chunks[i].index))
        return false;
    }
    if (chunks.empty() ||
        tier_chunk_bytes(size_bytes, static_cast<std::uint32_t>(chunks.size())) != 0)
      return false;
    for (const ChunkRecord& c : chunks) {
      auto u = c_.query(
          "UPDATE extents SET owner_id = ?2, logical_offset = logical_offset + ?3 WHERE "
          "owner_id = ?1");
      u.bind(1, c.id).bind(2, new_id).bind(3, std::uint64_t{c.index} * kTierChunkBytes);
      H3_TRY(u.run());
    }
    auto d = c_.query("DELETE FROM tier_chunks WHERE object_id = ?1");
    d.bind(1, stub_id);
    H3_TRY(d.run());
    return true;
  }

  Result<bool> refill_object(std::int64_t stub_id, std::int64_t new_id,
                             const std::vector<ExtentRecord>& extents,
                             std::int64_t now_ms) override {
    // Fetched back, the version is no longer one freshly written here: min_resident does not
    // keep it (clean_ms 0), or a scan of data uploaded lately would push out the reused set.
    auto q = c_.query(
        "UPDATE objects SET id = ?2, tier_state = ?3, accessed_ms = ?5, clean_ms = 0, validated_ms "
        "= "
        "?5 WHERE id = ?1 AND tier_state = ?4");
    q.bind(1, stub_id)
        .bind(2, new_id)
        .bind(3, static_cast<std::int64_t>(TierState::kLocalAndUpstream))
        .bind(4, static_cast<std::int64_t>(TierState::kUpstreamOnly))
        .bind(5, now_ms);
    H3_TRY(q.run());
    if (c_.changes() == 0) return false;
    for (const char* sql : {"UPDATE object_parts SET object_id = ?2 WHERE object_id = ?1",
                            "UPDATE ended_uploads SET object_id = ?2 WHERE object_id = ?1",
                            "UPDATE tier_jobs SET object_id = ?2 WHERE object_id = ?1"}) {
      auto u = c_.query(sql);
      u.bind(1, stub_id).bind(2, new_id);
      H3_TRY(u.run());
    }
    H3_TRY(insert_extents(c_, new_id, extents));
    return true;
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
    // Under its new name the version is not upstream, whatever it was under the old one.
    auto q = c_.query(
        "UPDATE objects SET bucket_id = ?2, key = ?3, tier_state = 0, upstream_etag = NULL "
        "WHERE id = ?1");
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
    auto q = c_.query("INSERT INTO uploads(" H3_UPLOAD_COLUMNS
                      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
                      "nullif(?16, ''))");
    q.bind(1, u.id)
        .bind(2, std::string_view(u.upload_id))
        .bind(3, u.bucket_id)
        .bind(4, std::string_view(u.key))
        .bind(5, u.created_ms)
        .bind(6, std::string_view(u.owner));
    bind_headers(q, 7, u.headers);
    q.bind_blob(13, encode_metadata(u.user_metadata))
        .bind_optional(14, u.checksum_algorithm)
        .bind_optional(15, u.checksum_type)
        .bind(16, std::string_view(u.tier_upload_id));
    return q.run();
  }

  Result<std::optional<UploadRecord>> find_upload(std::string_view upload_id) override {
    return find_upload_on(c_, upload_id);
  }

  Result<ExtentList> put_part(const UploadRecord& upload, const PartRecord& p,
                              const std::vector<ExtentRecord>& extents,
                              std::string_view tier_upload_id) override {
    const std::int64_t upload_row = upload.id;
    if (!p.tier_etag.empty() && tier_upload_id != upload.tier_upload_id) {
      auto q = c_.query("UPDATE uploads SET tier_upload_id = ?2 WHERE id = ?1");
      q.bind(1, upload_row).bind(2, tier_upload_id);
      H3_TRY(q.run());
      if (!upload.tier_upload_id.empty()) {
        auto forget = c_.query("UPDATE parts SET tier_etag = NULL WHERE upload = ?1");
        forget.bind(1, upload_row);
        H3_TRY(forget.run());
      }
    }
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
        "crc64nvme, sha1, sha256, tier_etag) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, nullif(?12, ''))");
    q.bind(1, p.id)
        .bind(2, upload_row)
        .bind(3, static_cast<std::int64_t>(p.part_number))
        .bind(4, p.size_bytes)
        .bind(5, std::string_view(p.etag))
        .bind(6, p.created_ms);
    bind_checksums(q, 7, p.checksums);
    q.bind(12, std::string_view(p.tier_etag));
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
      auto q = c_.query(
          "INSERT INTO ended_uploads(upload_id, object_id, ended_ms) SELECT upload_id, ?2, ?3 "
          "FROM uploads WHERE id = ?1");
      q.bind(1, upload_row).bind(2, object.id).bind(3, object.created_ms);
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

  Result<void> record_abort(std::int64_t upload_row, std::int64_t now_ms) override {
    auto q = c_.query(
        "INSERT INTO ended_uploads(upload_id, object_id, ended_ms) SELECT upload_id, NULL, ?2 "
        "FROM uploads WHERE id = ?1");
    q.bind(1, upload_row).bind(2, now_ms);
    H3_TRY(q.run());
    auto prune = c_.query("DELETE FROM ended_uploads WHERE object_id IS NULL AND ended_ms < ?1");
    prune.bind(1, now_ms - kAbortRemembered.count());
    return prune.run();
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
  std::int64_t tier_delay_ms_;
  std::int64_t owed_delta_ = 0;
  // The job imply_tier_job left to its version (`object_id`, inserted next), with what it was
  // asked, until that version goes in or the job takes a row; `settled` once a version of the
  // key in the way was looked at and found upstream.
  struct Implied {
    std::int64_t bucket_id;
    std::string key;
    std::int64_t object_id;
    std::uint64_t size_bytes;
    std::int64_t now_ms;
    std::int64_t due_ms;
    bool settled;
  };
  std::optional<Implied> implied_;
  std::optional<std::pair<std::string, std::optional<BucketRecord>>> last_bucket_;
};

}  // namespace hots3::storage::detail
