#pragma once

// Private to src/storage: the SQLite VFS of the catalog's writer and checkpointer. It is the
// default (unix) VFS except for the write-ahead log, whose frames it gathers in memory and
// hands to the kernel in large writes (64 KiB pieces) when SQLite syncs, reads, sizes or truncates
// the log (SQLite writes a frame as two pwrites, header and page: at 64 writes per commit that was
// most of the writer's time). What SQLite reads back is always in the file first, and nothing
// is published to readers before the sync that follows a commit's last frame, so readers never
// miss a frame.
//
// Within a DeferWalFlush scope the sync of the log only hands the frames to the kernel: the
// caller takes over making them durable (Catalog's syncer does one fdatasync for several
// commits). Everywhere else, a checkpoint included, a sync is a real one.

#include <cstdint>
#include <vector>

namespace hots3::storage::detail {

// Registers the VFS once (thread-safe) and returns its name, for sqlite3_open_v2.
const char* wal_batching_vfs();

class DeferWalFlush {
 public:
  DeferWalFlush();
  ~DeferWalFlush();
  DeferWalFlush(const DeferWalFlush&) = delete;
  DeferWalFlush& operator=(const DeferWalFlush&) = delete;
  DeferWalFlush(DeferWalFlush&&) = delete;
  DeferWalFlush& operator=(DeferWalFlush&&) = delete;
};

// Within a RecordDatabaseWrites scope, the file offset of every write this thread makes to a
// main database file (not a log) is appended to `out`: the checkpointer's, so that the catalog
// knows which parts of the database a checkpoint left to write back.
class RecordDatabaseWrites {
 public:
  explicit RecordDatabaseWrites(std::vector<std::int64_t>& out);
  ~RecordDatabaseWrites();
  RecordDatabaseWrites(const RecordDatabaseWrites&) = delete;
  RecordDatabaseWrites& operator=(const RecordDatabaseWrites&) = delete;
  RecordDatabaseWrites(RecordDatabaseWrites&&) = delete;
  RecordDatabaseWrites& operator=(RecordDatabaseWrites&&) = delete;
};

}  // namespace hots3::storage::detail
