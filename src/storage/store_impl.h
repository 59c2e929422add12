#pragma once

// Private to src/storage: the pieces the object store's files share.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <deque>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <type_traits>
#include <variant>
#include <unordered_map>

#include "hots3/storage/block_cache.h"
#include "hots3/storage/buffer_pool.h"
#include "hots3/storage/catalog.h"
#include "hots3/storage/extent_allocator.h"
#include "hots3/storage/object_store.h"

namespace hots3::storage::detail {

// The operations one stream has in flight (device writes of a writer, read-ahead of a reader).
// One waiter at a time, on the stream's worker; completions resume it through the executor.
class Pipeline {
 public:
  explicit Pipeline(boost::asio::any_io_executor executor) : executor_(std::move(executor)) {}

  void started() noexcept { ++inflight_; }
  void finished(error_code ec);
  // Waits until fewer than `limit` operations are in flight.
  boost::asio::awaitable<void> wait_below(unsigned limit);
  // Waits for one completion (or returns at once if nothing is in flight).
  boost::asio::awaitable<void> wait_any();

  [[nodiscard]] unsigned inflight() const noexcept { return inflight_; }
  [[nodiscard]] error_code error() const noexcept { return error_; }
  [[nodiscard]] const boost::asio::any_io_executor& executor() const noexcept { return executor_; }

 private:
  boost::asio::any_io_executor executor_;
  unsigned inflight_ = 0;
  error_code error_;
  std::function<void()> waiter_;
};

// Epoch-based reclamation of device space. Readers enter an epoch before they look an object
// up and leave when they are done; space retired in epoch E is freed once every reader that
// entered at or before E has left. So a reader that found a version keeps its extents readable
// however often the key is overwritten meanwhile, and nothing freed can be read by mistake.
class Retirement {
 public:
  Retirement(ExtentAllocator& allocator, BlockCache& cache) : allocator_(allocator), cache_(cache) {}

  std::uint64_t enter();
  void leave(std::uint64_t epoch);
  // `version`'s cache entries are dropped now; `extents` go back to the allocator once no
  // earlier reader remains. REQUIRES: the transaction that unreferenced them is durable.
  void retire(ExtentList extents, std::int64_t version);
  // Space no reader can be using: never committed (aborted writes), or multipart parts (never
  // read). Free at once.
  void release_now(const ExtentList& extents);

  [[nodiscard]] std::uint64_t pending_bytes() const;
  [[nodiscard]] bool is_retired(std::int64_t version) const;

 private:
  struct Retired {
    std::uint64_t epoch;
    ExtentList extents;
    std::int64_t version;
  };
  void collect();  // REQUIRES: mutex_ held

  ExtentAllocator& allocator_;
  BlockCache& cache_;
  mutable std::mutex mutex_;
  std::uint64_t current_ = 1;
  std::map<std::uint64_t, std::uint64_t> readers_;  // epoch → readers in it
  std::deque<Retired> retired_;
  std::uint64_t pending_bytes_ = 0;
};

// Holds an epoch for as long as it lives (a reader's shared state).
class EpochGuard {
 public:
  explicit EpochGuard(Retirement& r) : retirement_(r), epoch_(r.enter()) {}
  ~EpochGuard() { retirement_.leave(epoch_); }
  EpochGuard(const EpochGuard&) = delete;
  EpochGuard& operator=(const EpochGuard&) = delete;
  EpochGuard(EpochGuard&&) = delete;
  EpochGuard& operator=(EpochGuard&&) = delete;

 private:
  Retirement& retirement_;
  std::uint64_t epoch_;
};

// Object layouts (extents with their checksums) by version, so that repeated ranged reads of an
// object (training reads shards in 8 MiB ranges) do not reload them from the catalog. Layouts
// are immutable once built; versions are never reused, so nothing needs invalidating — old
// ones simply age out. Bounded by the bytes of checksums held.
class LayoutCache {
 public:
  using Layout = std::vector<ExtentRecord>;
  explicit LayoutCache(std::uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  std::shared_ptr<const Layout> find(std::int64_t version);
  void insert(std::int64_t version, std::shared_ptr<const Layout> layout);
  static std::uint64_t cost(const Layout& layout);

 private:
  struct Item {
    std::int64_t version;
    std::shared_ptr<const Layout> layout;
    std::uint64_t bytes;
  };
  std::mutex mutex_;
  std::list<Item> lru_;  // most recent first
  std::unordered_map<std::int64_t, std::list<Item>::iterator> index_;
  std::uint64_t bytes_ = 0;
  std::uint64_t capacity_bytes_;
};

class MetadataCache;

// Everything a writer or reader needs from the store.
struct StoreCore {
  StoreOptions options;
  std::shared_ptr<Device> device;
  std::unique_ptr<Catalog> catalog;
  std::unique_ptr<ExtentAllocator> allocator;
  std::unique_ptr<BlockCache> cache;
  std::unique_ptr<Retirement> retirement;
  std::unique_ptr<LayoutCache> layouts;
  std::unique_ptr<MetadataCache> metadata;
  // Threads for catalog reads that cost more than an index lookup (listings, the layouts of
  // large objects): workers wait for them without blocking. Set by the store.
  boost::asio::thread_pool* catalog_readers = nullptr;
};

template <class F>
boost::asio::awaitable<std::invoke_result_t<F>> run_catalog_read(F read) {
  co_return read();
}

// Runs `read` (a catalog read returning Result<T>) on the catalog reader threads. Not itself a
// coroutine, and callers keep the returned awaitable in a variable before awaiting it: GCC 12
// destroys temporaries that live across a co_await twice.
template <class F>
boost::asio::awaitable<std::invoke_result_t<F>> on_catalog_reader(StoreCore& core, F read) {
  return boost::asio::co_spawn(core.catalog_readers->get_executor(), run_catalog_read(std::move(read)),
                               boost::asio::use_awaitable);
}

// The current version of (bucket, key) with its inline data: from the metadata cache, or read
// from the catalog and cached. nullptr when there is none.
Result<std::shared_ptr<const ObjectRecord>> lookup_object(StoreCore& core, std::int64_t bucket_id, std::string_view key);

// The writer implementation (object_writer.cc) and its accessors for the store.
// Errors: kNoSpace when a declared size cannot be reserved. Without `inline_allowed` the data
// always goes to the device (multipart parts).
Result<std::unique_ptr<ObjectWriter>> make_writer(StoreCore& core, BufferPool& pool,
                                                  boost::asio::any_io_executor executor,
                                                  std::optional<std::uint64_t> size_bytes, bool inline_allowed);
// The data of a finished writer, for the commit transaction.
struct WrittenData {
  std::vector<ExtentRecord> extents;
  std::optional<std::string> inline_data;
  std::uint64_t size_bytes = 0;
  std::array<std::uint8_t, 16> md5{};
};
// REQUIRES: writer finished without error.
WrittenData written_data(ObjectWriter& writer);
// After a durable commit: the writer's space now belongs to the catalog.
void mark_committed(ObjectWriter& writer);

// The reader implementation (object_reader.cc).
boost::asio::awaitable<Result<std::unique_ptr<ObjectReader>>> open_reader(StoreCore& core, BufferPool& pool,
                                                                           std::int64_t bucket_id, std::string key);

}  // namespace hots3::storage::detail

namespace hots3::storage::detail {

// Object metadata (with inline data) by (bucket, key), so that HEAD and GET of hot objects
// need no SQLite read transaction (each costs file-lock system calls and a shared-memory mutex
// that every worker contends for). Exact, not eventually consistent: every change goes
// through this store, which invalidates after the change is durable and before its client is
// answered; a lookup that raced a change does not insert what it read (the shard's generation
// moved on meanwhile). Bounded by bytes, LRU per shard.
class MetadataCache {
 public:
  explicit MetadataCache(std::uint64_t capacity_bytes);

  struct Miss {
    std::uint64_t generation;  // pass back to insert()
  };
  // The cached record, or what insert() needs after the caller read the catalog.
  std::variant<std::shared_ptr<const ObjectRecord>, Miss> find(std::int64_t bucket_id, std::string_view key);
  // Caches `record` (nullptr: "no such key") unless the key changed since find().
  void insert(std::int64_t bucket_id, std::string_view key, std::shared_ptr<const ObjectRecord> record, Miss miss);
  // After a durable change of the key.
  void invalidate(std::int64_t bucket_id, std::string_view key);

 private:
  struct Entry {
    std::string key;  // bucket id + '/' + object key
    std::shared_ptr<const ObjectRecord> record;
    std::uint64_t bytes;
  };
  struct Shard {
    std::mutex mutex;
    std::list<Entry> lru;  // most recent first
    std::unordered_map<std::string_view, std::list<Entry>::iterator> index;
    std::uint64_t bytes = 0;
    std::uint64_t generation = 0;
  };
  static constexpr std::size_t kShards = 16;
  Shard& shard_of(const std::string& id);
  static std::string id_of(std::int64_t bucket_id, std::string_view key);

  std::uint64_t capacity_bytes_per_shard_;
  std::array<Shard, kShards> shards_;
};

}  // namespace hots3::storage::detail
