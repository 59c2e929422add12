#pragma once

// Private to src/storage: the catalog schema and its migrations. PRAGMA user_version holds the
// version; kMigrations[i] takes a database from version i to i + 1. Never edit a released
// migration: add one.

#include <array>

namespace hots3::storage::detail {

inline constexpr std::array<const char*, 17> kMigrations = {
    // 0 → 1: the first schema.
    R"sql(
CREATE TABLE meta(
  key   TEXT PRIMARY KEY,
  value BLOB NOT NULL
) WITHOUT ROWID;

CREATE TABLE buckets(
  id         INTEGER PRIMARY KEY,
  name       TEXT NOT NULL UNIQUE,
  owner      TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  upstream   TEXT              -- tiering: the bucket's upstream (JSON); NULL = none
);

-- One row per key: the current version. Keyed by (bucket, key) so that a listing is a range
-- scan in S3's order (BINARY collation = byte order of UTF-8).
CREATE TABLE objects(
  bucket_id           INTEGER NOT NULL,
  key                 TEXT NOT NULL,
  id                  INTEGER NOT NULL UNIQUE,  -- version id; owns extents
  size                INTEGER NOT NULL,
  etag                TEXT NOT NULL,
  parts_count         INTEGER NOT NULL DEFAULT 0,
  created_ms          INTEGER NOT NULL,
  accessed_ms         INTEGER NOT NULL,
  tier_state          INTEGER NOT NULL DEFAULT 0,  -- 0 local, 1 local+upstream, 2 upstream only
  is_inline           INTEGER NOT NULL DEFAULT 0,
  content_type        TEXT,
  content_encoding    TEXT,
  content_disposition TEXT,
  content_language    TEXT,
  cache_control       TEXT,
  expires             TEXT,
  user_metadata       BLOB,   -- name NUL value NUL ...
  crc32               TEXT,
  crc32c              TEXT,
  crc64nvme           TEXT,
  sha1                TEXT,
  sha256              TEXT,
  checksum_type       TEXT,
  PRIMARY KEY (bucket_id, key)
) WITHOUT ROWID;

-- Small objects' data, apart from the listing rows so that listings stay dense.
CREATE TABLE inline_data(
  object_id INTEGER PRIMARY KEY,
  data      BLOB NOT NULL
);

-- Where data lives on the device. owner_id is an objects.id or a parts.id (one id sequence
-- serves both), so completing a multipart upload only re-points its parts' extents.
CREATE TABLE extents(
  id             INTEGER PRIMARY KEY,
  owner_id       INTEGER NOT NULL,
  logical_offset INTEGER NOT NULL,
  length         INTEGER NOT NULL,   -- data bytes
  device_offset  INTEGER NOT NULL,
  device_length  INTEGER NOT NULL,   -- allocated bytes, a multiple of the block size
  checksums      BLOB NOT NULL       -- per 4 KiB block, 4 bytes little-endian each
);
CREATE INDEX extents_owner ON extents(owner_id, logical_offset);

-- Part boundaries of completed multipart objects (GET/HEAD ?partNumber=N).
CREATE TABLE object_parts(
  object_id   INTEGER NOT NULL,
  part_number INTEGER NOT NULL,
  offset      INTEGER NOT NULL,
  size        INTEGER NOT NULL,
  checksum    TEXT,
  PRIMARY KEY (object_id, part_number)
) WITHOUT ROWID;

CREATE TABLE uploads(
  id                  INTEGER PRIMARY KEY,
  upload_id           TEXT NOT NULL UNIQUE,
  bucket_id           INTEGER NOT NULL,
  key                 TEXT NOT NULL,
  created_ms          INTEGER NOT NULL,
  owner               TEXT NOT NULL,
  content_type        TEXT,
  content_encoding    TEXT,
  content_disposition TEXT,
  content_language    TEXT,
  cache_control       TEXT,
  expires             TEXT,
  user_metadata       BLOB,
  checksum_algorithm  TEXT,
  checksum_type       TEXT
);
CREATE INDEX uploads_key ON uploads(bucket_id, key, upload_id);
CREATE INDEX uploads_age ON uploads(created_ms);

CREATE TABLE parts(
  id          INTEGER PRIMARY KEY,  -- from the shared id sequence; owns extents
  upload      INTEGER NOT NULL,
  part_number INTEGER NOT NULL,
  size        INTEGER NOT NULL,
  etag        TEXT NOT NULL,
  created_ms  INTEGER NOT NULL,
  crc32       TEXT,
  crc32c      TEXT,
  crc64nvme   TEXT,
  sha1        TEXT,
  sha256      TEXT,
  UNIQUE (upload, part_number)
);

-- Work for the tiering mover (copy upstream, evict local data), kept across restarts.
CREATE TABLE tier_queue(
  id            INTEGER PRIMARY KEY,
  object_id     INTEGER NOT NULL,
  action        INTEGER NOT NULL,   -- 1 copy upstream, 2 evict the local data
  not_before_ms INTEGER NOT NULL,
  attempts      INTEGER NOT NULL DEFAULT 0,
  last_error    TEXT
);
CREATE INDEX tier_queue_due ON tier_queue(not_before_ms);
)sql",
    // 1 → 2: inline data gets its own checksum (block_checksum of the whole data; reads verify
    // it as they verify extents' blocks), computed here for the rows that predate it by
    // h3_block_checksum(), which Catalog::open registers on its writer; and the tiering mover
    // finds the coldest objects through an index on the last access.
    R"sql(
ALTER TABLE inline_data ADD COLUMN checksum INTEGER;  -- NULL only if damaged: reads refuse it
UPDATE inline_data SET checksum = h3_block_checksum(data);
CREATE INDEX IF NOT EXISTS objects_accessed ON objects(accessed_ms);
)sql",
    // 2 → 3: objects becomes a table in version order (its id is the rowid) with a unique index
    // by key. Keyed by (bucket, key), its leaves were kept 90% full and a PUT into the middle of
    // the key order rewrote a leaf with its two neighbours and their parent about once in four
    // puts; now a commit's rows share the last leaf and only the narrow key index is balanced
    // (WAL pages per durable 4 KiB put 3.2 -> 2.7), and the separate index on id is gone.
    R"sql(
CREATE TABLE objects_v3(  -- the columns of objects, in its order
  bucket_id           INTEGER NOT NULL,
  key                 TEXT NOT NULL,
  id                  INTEGER PRIMARY KEY,  -- version id; owns extents
  size                INTEGER NOT NULL,
  etag                TEXT NOT NULL,
  parts_count         INTEGER NOT NULL DEFAULT 0,
  created_ms          INTEGER NOT NULL,
  accessed_ms         INTEGER NOT NULL,
  tier_state          INTEGER NOT NULL DEFAULT 0,  -- 0 local, 1 local+upstream, 2 upstream only
  is_inline           INTEGER NOT NULL DEFAULT 0,
  content_type        TEXT,
  content_encoding    TEXT,
  content_disposition TEXT,
  content_language    TEXT,
  cache_control       TEXT,
  expires             TEXT,
  user_metadata       BLOB,   -- name NUL value NUL ...
  crc32               TEXT,
  crc32c              TEXT,
  crc64nvme           TEXT,
  sha1                TEXT,
  sha256              TEXT,
  checksum_type       TEXT
);
INSERT INTO objects_v3 SELECT * FROM objects ORDER BY id;
DROP TABLE objects;
ALTER TABLE objects_v3 RENAME TO objects;
-- Listings are range scans of this index in S3's order (BINARY collation = byte order of UTF-8).
CREATE UNIQUE INDEX objects_key ON objects(bucket_id, key);
CREATE INDEX objects_accessed ON objects(accessed_ms);
)sql",
    // 3 → 4: uploads are listed in S3's order (key, then initiation, which is the id) by seeks
    // in an index of that order, not by reading a bucket's every upload row; and counted per
    // owner (the cap on a user's open uploads) through an index of their own.
    R"sql(
DROP INDEX uploads_key;
CREATE INDEX uploads_listing ON uploads(bucket_id, key, id);
CREATE INDEX uploads_owner ON uploads(owner);
)sql",
    // 4 → 5: an ended upload stays answerable, so that a retried Complete or Abort (its first
    // answer lost) gets that answer again: a completion while the object it made is the key's
    // current version (its row goes with that version), an abort for an hour.
    R"sql(
CREATE TABLE ended_uploads(
  upload_id           TEXT PRIMARY KEY,
  object_id           INTEGER,          -- the version a completion made; NULL: aborted
  ended_ms            INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX ended_uploads_object ON ended_uploads(object_id);
CREATE INDEX ended_uploads_aborted ON ended_uploads(ended_ms) WHERE object_id IS NULL;
)sql",
    // 5 → 6: write-back to an upstream S3. A bucket bound to an upstream keeps its mode (and the
    // binding, without secrets, as JSON in `upstream`); every acknowledged change of a key in a
    // write-back bucket leaves one job in the same transaction, so no acknowledged write can
    // lack its upload after any crash. One row per key: a newer write of the key replaces the
    // pending one (only the final state goes up), its `seq` (from the id sequence) the order of
    // acknowledgement. tier_queue, never written, gives way.
    R"sql(
ALTER TABLE buckets ADD COLUMN tier_mode INTEGER NOT NULL DEFAULT 0;  -- 0 none, 1 writeback, 2 writethrough, 3 cache
ALTER TABLE objects ADD COLUMN upstream_etag TEXT;  -- the upstream's ETag where it differs from ours
DROP TABLE tier_queue;
CREATE TABLE tier_jobs(
  bucket_id  INTEGER NOT NULL,
  key        TEXT NOT NULL,
  seq        INTEGER NOT NULL,   -- acknowledgement order of the change it carries
  object_id  INTEGER,            -- the version to upload; NULL: delete the key upstream
  size       INTEGER NOT NULL,   -- bytes still to upload (0 for a delete)
  first_ms   INTEGER NOT NULL,   -- acknowledgement of the oldest change not yet upstream
  due_ms     INTEGER NOT NULL,   -- not before: the coalescing delay, then the retry back-off
  attempts   INTEGER NOT NULL DEFAULT 0,
  state      INTEGER NOT NULL DEFAULT 0,  -- 0 queued, 1 parked (an answer no retry can change)
  last_error TEXT,
  PRIMARY KEY (bucket_id, key)
) WITHOUT ROWID;
CREATE UNIQUE INDEX tier_jobs_seq ON tier_jobs(seq);
CREATE INDEX tier_jobs_due ON tier_jobs(state, due_ms);
)sql",
    // 6 → 7: a large object's upload to the upstream survives a restart. The job keeps the id
    // of its upstream multipart upload, and tier_parts the parts the upstream confirmed, so a
    // kill -9 re-sends only the parts that were in flight. The index on seq goes: no query
    // needs it (a job is found by its key, due ones by due_ms), and every write-back PUT paid
    // for it (seqs are unique by the id sequence that makes them).
    R"sql(
DROP INDEX tier_jobs_seq;
ALTER TABLE tier_jobs ADD COLUMN upload_id TEXT;  -- the upstream multipart upload under way
CREATE TABLE tier_parts(
  seq         INTEGER NOT NULL,  -- tier_jobs.seq of the job the upload is for
  part_number INTEGER NOT NULL,
  size        INTEGER NOT NULL,  -- of the part: a part of another size is not this one
  etag        TEXT NOT NULL,     -- as the upstream answered
  PRIMARY KEY (seq, part_number)
) WITHOUT ROWID;
)sql",
    // 7 → 8: what the upstream holds under each key the uploader wrote or saw there, so that an
    // upload is conditional on it (If-Match on that ETag, If-None-Match: * for a key it never
    // saw) and a rename or copy of data already upstream becomes an upstream copy. Versions
    // uploaded before start it off. A job made by a rename or copy names its source key; an
    // upstream delete of that key waits for it. A job keeps the ETags of the versions it
    // replaced: one of them may have reached the upstream unconfirmed (a kill after the
    // upstream's answer), which is not another writer's.
    R"sql(
CREATE TABLE tier_seen(
  bucket_id INTEGER NOT NULL,
  key       TEXT NOT NULL,
  etag      TEXT NOT NULL,  -- the upstream's ETag of what it holds
  ours      TEXT NOT NULL,  -- our ETag of the version it holds; '' when not ours (a conflict)
  PRIMARY KEY (bucket_id, key)
) WITHOUT ROWID;
INSERT INTO tier_seen(bucket_id, key, etag, ours)
  SELECT bucket_id, key, coalesce(upstream_etag, etag), etag FROM objects WHERE tier_state = 1;
ALTER TABLE tier_jobs ADD COLUMN source_key TEXT;  -- the data is upstream under this key too
ALTER TABLE tier_jobs ADD COLUMN prior_etags TEXT;  -- ETags of versions it replaced, newest first
CREATE INDEX tier_jobs_source ON tier_jobs(bucket_id, source_key) WHERE source_key IS NOT NULL;
)sql",
    // 8 → 9: eviction by watermark takes the least recently read versions the upstream holds
    // first; this index holds only those, in that order.
    R"sql(
CREATE INDEX objects_evictable ON objects(accessed_ms) WHERE tier_state = 1 AND is_inline = 0;
)sql",
    // 9 → 10: pins by command or by a write's header: a pinned key's versions are never evicted.
    // A rule pins one key, or every key under a prefix (also keys written later). Pins by the
    // binding's globs are configuration, not rows.
    R"sql(
CREATE TABLE tier_pins(
  bucket_id INTEGER NOT NULL,
  key       TEXT NOT NULL,     -- the key, or the prefix
  prefix    INTEGER NOT NULL,  -- 1: every key starting with `key`
  PRIMARY KEY (bucket_id, key, prefix)
) WITHOUT ROWID;
)sql",
    // 10 → 11: prefetch jobs, which fetch a prefix's (or a list's) evicted versions back and
    // outlive a restart: a job goes on after the last key it finished.
    R"sql(
CREATE TABLE prefetches(
  id         INTEGER PRIMARY KEY,
  bucket_id  INTEGER NOT NULL,
  prefix     TEXT NOT NULL,           -- every key under it, unless keys names some
  keys       TEXT,                    -- the keys asked for, sorted, one per line; NULL: all
  after      TEXT NOT NULL DEFAULT '',  -- the keys up to this one are done
  objects    INTEGER NOT NULL,        -- evicted versions to fetch when it began
  bytes      INTEGER NOT NULL,
  failed     INTEGER NOT NULL DEFAULT 0,  -- versions whose fetch was given up
  created_ms INTEGER NOT NULL,
  ended_ms   INTEGER                  -- NULL while it runs
);
)sql",
    // 11 → 12: partial objects. A ranged GET of an evicted version keeps the chunks it fetched
    // (8 MiB each, by offset) while the version stays evicted: each chunk owns its extents under
    // an id of its own (the shared id sequence), so the version itself still owns none. A
    // chunk's rows go with its version's (delete, refill) and before whole versions when space
    // is needed, oldest first.
    R"sql(
CREATE TABLE tier_chunks(
  id         INTEGER PRIMARY KEY,   -- from the shared id sequence; owns extents
  object_id  INTEGER NOT NULL,      -- the evicted version (objects.id)
  chunk      INTEGER NOT NULL,      -- holds the version's bytes from chunk * 8 MiB
  size       INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  UNIQUE (object_id, chunk)
);
CREATE INDEX tier_chunks_age ON tier_chunks(created_ms);
)sql",
    // 12 -> 13: tier_jobs becomes a table in acknowledgement order (seq is the rowid) with a unique
    // index by key, as objects did at 3: keyed by (bucket, key) a write-back PUT put its whole job
    // row into the middle of the key order, and a batch of PUTs rewrote as many leaves as it had
    // insertion points; now the rows of a commit share the last leaf and only the narrow key
    // index is balanced. A newer change of a key moves its row to the end with its new seq.
    R"sql(
CREATE TABLE tier_jobs_v13(  -- the columns of tier_jobs, in its order
  bucket_id   INTEGER NOT NULL,
  key         TEXT NOT NULL,
  seq         INTEGER PRIMARY KEY,  -- acknowledgement order of the change it carries
  object_id   INTEGER,
  size        INTEGER NOT NULL,
  first_ms    INTEGER NOT NULL,
  due_ms      INTEGER NOT NULL,
  attempts    INTEGER NOT NULL DEFAULT 0,
  state       INTEGER NOT NULL DEFAULT 0,
  last_error  TEXT,
  upload_id   TEXT,
  source_key  TEXT,
  prior_etags TEXT
);
-- Until now a restart started the id sequence after the last version, part or chunk, not after
-- the last job, so a later job could share a seq with one still queued (and the parts the
-- upstream confirmed for it). The first of each seq by key keeps it, the others get seqs after
-- every id in use, and every job of a shared seq starts its upstream upload over.
CREATE TEMP TABLE tier_jobs_shared AS
  SELECT seq FROM tier_jobs GROUP BY seq HAVING count(*) > 1;
INSERT INTO tier_jobs_v13
  SELECT bucket_id, key, CASE WHEN n = 1 THEN seq ELSE (SELECT max(
             coalesce((SELECT max(id) FROM objects), 0), coalesce((SELECT max(id) FROM parts), 0),
             coalesce((SELECT max(id) FROM uploads), 0),
             coalesce((SELECT max(id) FROM tier_chunks), 0),
             coalesce((SELECT max(seq) FROM tier_jobs), 0))) + again END,
         object_id, size, first_ms, due_ms, attempts, state, last_error,
         CASE WHEN seq IN tier_jobs_shared THEN NULL ELSE upload_id END, source_key, prior_etags
  FROM (SELECT *, row_number() OVER (PARTITION BY seq ORDER BY bucket_id, key) AS n,
               row_number() OVER (ORDER BY seq, bucket_id, key) AS again FROM tier_jobs)
  ORDER BY n > 1, seq, bucket_id, key;
DELETE FROM tier_parts WHERE seq IN tier_jobs_shared;
DROP TABLE tier_jobs_shared;
DROP TABLE tier_jobs;
ALTER TABLE tier_jobs_v13 RENAME TO tier_jobs;
CREATE UNIQUE INDEX tier_jobs_key ON tier_jobs(bucket_id, key);
CREATE INDEX tier_jobs_due ON tier_jobs(state, due_ms);
CREATE INDEX tier_jobs_source ON tier_jobs(bucket_id, source_key) WHERE source_key IS NOT NULL;
)sql",
    // 13 -> 14: a write-through multipart upload's upstream side outlives a restart: the upstream
    // upload its parts are teed into, and each part's ETag there, kept with the upload and its
    // parts (and gone with them), so that the Complete after a restart sends only what the
    // upstream lacks and the orphan sweep spares an upload a client may still finish.
    R"sql(
ALTER TABLE uploads ADD COLUMN tier_upload_id TEXT;  -- the upstream upload its parts are teed into
ALTER TABLE parts ADD COLUMN tier_etag TEXT;         -- the part's ETag in that upload
)sql",
    // 14 -> 15: a write-back change that makes a new version and replaces none still waiting
    // (a new key's PUT, most of a checkpoint's or a dataset's writes) leaves no job row: its
    // version's row says that it is owed (tier_implied = 1 while tier_state = 0), in the same
    // transaction, and an index of just those versions, in acknowledgement order, is where the
    // uploader finds them. A job row, with its three indexes, is written only when such a job
    // needs state of its own (a retry, a multipart upload, a newer change replacing it), and
    // the version's mark then goes. Every other change still leaves a row.
    R"sql(
ALTER TABLE objects ADD COLUMN tier_implied INTEGER;  -- 1: the version's upload is owed, no job row
CREATE INDEX objects_implied ON objects(id) WHERE tier_implied = 1 AND tier_state = 0;
)sql",
    // 15 -> 16: a version uploaded long after it was written (an upstream down for a while) is as
    // fresh to eviction as one uploaded at once: evict.min_resident counts from its upload.
    R"sql(
ALTER TABLE objects ADD COLUMN clean_ms INTEGER;  -- when its upload was confirmed; NULL: at created_ms
)sql",
    // 16 -> 17: a version fetched from the upstream (or learnt there) keeps when that was, so
    // that a restart does not make every version of a bucket with a revalidation period ask again.
    R"sql(
ALTER TABLE objects ADD COLUMN validated_ms INTEGER;  -- the upstream last known to hold it; NULL: never asked
)sql",
};

}  // namespace hots3::storage::detail
