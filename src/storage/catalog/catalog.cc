// The catalog: opening (and migrating) the database, stopping, and queueing writes.

#include "storage/catalog/catalog_impl.h"
#include "storage/catalog/rows.h"
#include "storage/catalog/schema.h"
#include "storage/catalog/sqlite.h"
#include "storage/catalog/wal_vfs.h"
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

namespace asio = boost::asio;
using detail::Connection;
using namespace detail;  // the row mapping (rows.h)

namespace {

// h3_block_checksum(blob): checksum.h's block_checksum, for migrations that fill checksums in.
void block_checksum_sql(sqlite3_context* context, int, sqlite3_value** argv) {
  const auto* data = static_cast<const std::byte*>(sqlite3_value_blob(argv[0]));
  const auto n = static_cast<std::size_t>(sqlite3_value_bytes(argv[0]));
  sqlite3_result_int64(context, static_cast<sqlite3_int64>(block_checksum({data, n})));
}

// The writer's settings, its checkpoint hook (counting the WAL's frames into `wal_frames`) and the
// SQL functions migrations use.
void configure_writer(Connection& w, std::atomic<int>& wal_frames, const std::string& path) {
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
      [](void* counter, sqlite3*, const char*, int frames) {
        static_cast<std::atomic<int>*>(counter)->store(frames, std::memory_order_relaxed);
        return SQLITE_OK;
      },
      &wal_frames);
  if (sqlite3_create_function_v2(w.handle(), "h3_block_checksum", 1,
                                 SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr, block_checksum_sql,
                                 nullptr, nullptr, nullptr) != SQLITE_OK) {
    throw std::runtime_error("catalog " + path + ": cannot register h3_block_checksum");
  }
}

std::int64_t single_integer(Connection& w, const char* sql, const std::string& path,
                            const char* what) {
  auto q = w.query(sql);
  if (auto row = q.step(); !row || !*row)
    throw std::runtime_error("catalog " + path + ": cannot read " + what);
  return q.int64(0);
}

// Brings the schema to this build's version, one migration per transaction; returns it. A
// catalog of a newer hots3 is refused.
int migrate(Connection& w, const std::string& path) {
  auto version = static_cast<int>(single_integer(w, "PRAGMA user_version", path, "the schema"));
  const auto latest = static_cast<int>(detail::kMigrations.size());
  if (version > latest) {
    throw std::runtime_error("catalog " + path + " has schema version " + std::to_string(version) +
                             ", newer than this hots3 (" + std::to_string(latest) + ")");
  }
  for (; version < latest; ++version) {
    const auto started = std::chrono::steady_clock::now();
    w.exec_or_throw("BEGIN IMMEDIATE");
    w.exec_or_throw(detail::kMigrations[static_cast<std::size_t>(version)]);
    w.exec_or_throw(("PRAGMA user_version = " + std::to_string(version + 1)).c_str());
    w.exec_or_throw("COMMIT");
    if (version > 0) {
      // Some migrations rewrite a table (3: every object's row, 4.5 s for 10^6 objects here).
      log::info("catalog migrated to schema version {} in {} ms", version + 1,
                std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - started)
                    .count());
    }
  }
  return version;
}

}  // namespace

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
  configure_writer(w, impl->wal_frames, options.path);
  register_pinned(w, impl->options.pinned);
  impl->schema_version = migrate(w, options.path);
  // Ids go on after every one in use; a job's seq counts too, as a delete's job is the only row
  // that holds its id.
  impl->next_id = single_integer(w,
                                 "SELECT max(coalesce((SELECT max(id) FROM objects), 0), "
                                 "coalesce((SELECT max(id) FROM parts), 0), "
                                 "coalesce((SELECT max(id) FROM uploads), 0), "
                                 "coalesce((SELECT max(id) FROM tier_chunks), 0), "
                                 "coalesce((SELECT max(seq) FROM tier_jobs), 0))",
                                 options.path, "ids") +
                  1;
  impl->tier_owed_bytes = single_integer(
      w,
      "SELECT (SELECT coalesce(sum(size), 0) FROM tier_jobs) + (SELECT "
      "coalesce(sum(size), 0) FROM objects WHERE tier_implied = 1 AND tier_state = 0)",
      options.path, "tier_jobs");
  impl->checkpointer = std::make_unique<Connection>(options.path, Connection::Mode::kReadWrite,
                                                    false, detail::wal_batching_vfs());
  // A connection opens the WAL on its first read; until then a checkpoint through it does nothing
  // (sqlite3_wal_checkpoint_v2 reports -1 frames) and the writer would do them all.
  impl->checkpointer->exec_or_throw("SELECT 1 FROM meta LIMIT 1");
  impl->db_fd = ::open(options.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (impl->db_fd < 0) {
    throw std::runtime_error("catalog " + options.path +
                             ": cannot open it for writeback: " + errno_text(errno));
  }
  impl->start_threads();
  return std::unique_ptr<Catalog>(new Catalog(std::move(impl)));
}

void Catalog::Impl::start_threads() {
  writer_thread = std::thread([this] {
    pthread_setname_np(pthread_self(), "h3-catalog");
    run_writer();
  });
  syncer_thread = std::thread([this] {
    pthread_setname_np(pthread_self(), "h3-catalog-sync");
    run_syncer();
  });
  checkpointer_thread = std::thread([this] {
    pthread_setname_np(pthread_self(), "h3-catalog-ckpt");
    (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
    run_checkpointer();
  });
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
  return {impl_->writes.load(),
          impl_->commits.load(),
          impl_->writer_checkpoints.load(),
          impl_->writer_checkpoints_at_limit.load(),
          impl_->writer_checkpoint_ns.load(),
          impl_->batch_seconds.snapshot(),
          impl_->sync_seconds.snapshot(),
          impl_->batch_writes.snapshot()};
}

std::uint64_t Catalog::tier_owed_bytes() const noexcept {
  return static_cast<std::uint64_t>(
      std::max<std::int64_t>(0, impl_->tier_owed_bytes.load(std::memory_order_relaxed)));
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

}  // namespace hots3::storage
