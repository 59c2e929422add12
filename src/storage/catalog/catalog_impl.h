#pragma once

// Private to src/storage/catalog: the catalog's state and threads (Catalog::Impl), shared by
// open/stop (catalog.cc), the commit pipeline (commit_pipeline.cc) and the reads (reads.cc).

#include "storage/catalog/catalog.h"
#include "storage/catalog/rows.h"
#include "storage/catalog/sqlite.h"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace hots3::storage {

namespace detail {

namespace asio = boost::asio;

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
  std::function<void(error_code, detail::ResumeBatch*)> done;
};

}  // namespace detail

struct Catalog::Impl {
  CatalogOptions options;
  std::unique_ptr<detail::Connection> writer;
  std::unique_ptr<detail::Connection>
      checkpointer;  // run_checkpointer's: checkpoints beside the writer
  int schema_version = 0;
  std::int64_t next_id = 1;

  std::mutex queue_mutex;
  std::condition_variable queue_ready;
  std::deque<detail::Pending> queue;
  bool stopping = false;
  std::thread writer_thread;
  std::atomic<std::uint64_t> writes{0};
  std::atomic<std::uint64_t> commits{0};
  std::atomic<std::uint64_t> writer_checkpoints{0};
  std::atomic<std::uint64_t> writer_checkpoints_at_limit{0};
  std::atomic<std::uint64_t> writer_checkpoint_ns{0};
  metrics::Histogram batch_seconds;     // run_batch: BEGIN to COMMIT
  metrics::Histogram sync_seconds;      // the syncer: one flush of the WAL
  metrics::SizeHistogram batch_writes;  // run_batch: writes per batch
  // The sum of tier_jobs.size (bytes acknowledged and not yet upstream), kept by the writer.
  std::atomic<std::int64_t> tier_owed_bytes{0};

  // Committed writes waiting for the WAL to reach the disk (see run_syncer).
  struct Unsynced {
    std::function<void(error_code, detail::ResumeBatch*)> done;
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
  std::unordered_map<std::thread::id, std::unique_ptr<detail::Connection>> readers;

  detail::Connection& reader() {
    // The connection of the calling thread; the common case is one lookup under a mutex that
    // is held for nanoseconds.
    std::lock_guard lock(readers_mutex);
    auto& slot = readers[std::this_thread::get_id()];
    if (!slot) {
      slot = std::make_unique<detail::Connection>(options.path, detail::Connection::Mode::kReadOnly,
                                                  false);
      detail::configure_reader(*slot);
      detail::register_pinned(*slot, options.pinned);
    }
    return *slot;
  }

  // The writer, syncer and checkpointer threads.
  void start_threads();
  void run_writer();
  void run_batch(std::deque<detail::Pending>& batch);
  // `owed_delta`: the change in tier_owed_bytes of the writes that stand.
  bool run_writes(std::deque<detail::Pending>& batch, std::vector<error_code>& results,
                  bool savepoints, error_code& lost, std::int64_t& owed_delta);
  void run_syncer();
  void write_back_chunk(std::unique_lock<std::mutex>& sync_lock);
  void run_checkpointer();
  error_code sync_wal();
  int checkpoint(detail::Connection& c);
};

}  // namespace hots3::storage
