// The catalog's commit pipeline: the writer thread (group commit, each write in a savepoint),
// the syncer (one WAL flush for every transaction committed since the last, the database's
// pages written back between flushes) and the checkpointer.

#include "storage/catalog/catalog_impl.h"
#include "storage/catalog/schema.h"
#include "storage/catalog/sqlite.h"
#include "storage/catalog/wal_vfs.h"
#include "storage/catalog/write_txn.h"
#include "storage/checksum.h"

#include "hots3/common/assert.h"
#include "hots3/common/logging.h"
#include "hots3/common/text.h"

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

using detail::Connection;
using namespace detail;  // the row mapping (rows.h)

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
                               bool savepoints, error_code& lost, std::int64_t& owed_delta) {
  Connection& w = *writer;
  WriteTxnImpl txn(w, next_id, options.tier_delay_ms);
  owed_delta = 0;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    results[i] = {};
    owed_delta = txn.owed_delta();  // up to the last write that stands
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
      if (!results[i]) owed_delta = txn.owed_delta();
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
    txn.set_owed_delta(owed_delta);
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
  const auto began = std::chrono::steady_clock::now();
  std::vector<error_code> results(batch.size());
  error_code commit_error;
  std::int64_t owed_delta = 0;
  if (wal_sync_failed.load(std::memory_order_relaxed)) {
    // The disk lost committed writes once: nothing more is promised durable.
    commit_error = errc::kIoError;
  } else if (auto begun = w.query("BEGIN IMMEDIATE").run(); !begun) {
    commit_error = begun.error();
  } else {
    if (run_writes(batch, results, /*savepoints=*/false, commit_error, owed_delta)) {
      // A write failed after changing something, and only a savepoint undoes one write alone:
      // the batch runs again from the start, each write in a savepoint of its own.
      if (auto r = w.query("ROLLBACK").run(); !r) {
        commit_error = r.error();
      } else if (auto again = w.query("BEGIN IMMEDIATE").run(); !again) {
        commit_error = again.error();
      } else {
        (void)run_writes(batch, results, /*savepoints=*/true, commit_error, owed_delta);
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
  batch_seconds.observe_us(
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                     std::chrono::steady_clock::now() - began)
                                     .count()));
  batch_writes.observe(batch.size());
  writes.fetch_add(batch.size(), std::memory_order_relaxed);
  commits.fetch_add(1, std::memory_order_relaxed);
  if (commit_error) {
    for (auto& pending : batch) pending.done(commit_error, nullptr);
    return;
  }
  if (owed_delta != 0) tier_owed_bytes.fetch_add(owed_delta, std::memory_order_relaxed);
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
      // Another checkpoint in progress (the checkpointer's) made this one give up: again
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
    const auto sync_began = std::chrono::steady_clock::now();
    const error_code synced = sync_wal();
    sync_seconds.observe_us(
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                       std::chrono::steady_clock::now() - sync_began)
                                       .count()));
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
      log::error("catalog: cannot open {} to flush it: {}", wal, errno_text(errno));
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
               errno_text(errno));
    return errc::kIoError;
  }
  return {};
}

}  // namespace hots3::storage
