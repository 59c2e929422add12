#pragma once

// Private to src/storage: the pieces the object store's files share.

#include "hots3/storage/block_cache.h"
#include "hots3/storage/buffer_pool.h"
#include "hots3/storage/catalog.h"
#include "hots3/storage/extent_allocator.h"
#include "hots3/storage/object_store.h"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <atomic>
#include <functional>
#include <list>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

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

// Epoch-based reclamation of device space, SRCU-style (as Linux's sleepable RCU). Readers
// enter before they look an object up and leave when they are done; space retired while some
// reader might still use it is freed only once every such reader has left. So a reader that
// found a version keeps its extents readable however often the key is overwritten meanwhile,
// and nothing freed can be read by mistake.
//
// Readers count themselves in one of two phase parities, in a counter slot picked by their
// thread (a cache line of its own): enter is a load of the phase and one atomic add, leave one
// atomic subtract, both on a line other threads rarely write — no lock, no allocation, so the
// read path of every worker scales. The mutex is taken by retire() and by a leave() that
// empties its slot's count of a closed phase while space waits; never by any other enter or
// leave. Nothing ever blocks waiting for readers: space comes back on the leave() that lets it.
//
// Why it is safe: a reader that found a version entered before it looked, and its lookup
// happened before the change that unreferenced the version (else it would have seen the
// change), which happens before retire(). So every look at the reader's counter made after
// retire() sees it until it leaves. Space is freed once both parities have been seen empty
// after its retire(), whichever parity such a reader counted in.
//
// Why it is not starved: a busy parity need not ever be empty by itself, so the reclaimer
// flips the current phase (once the other parity is empty): new readers count in the other
// parity and the old one drains as its readers leave. Space retired in the current phase
// waits in open_ until a flip, then in closing_ until the closed parity has drained: two
// generations of readers at most. A flip is only needed while something waits.
class Retirement {
 public:
  static constexpr std::size_t kSlots = 64;
  struct alignas(64) Slot {
    std::array<std::atomic<std::uint64_t>, 2> readers{};  // by phase parity
  };
  struct Ticket {
    Slot* slot;
    unsigned phase;  // parity: 0 or 1
  };

  Retirement(ExtentAllocator& allocator, BlockCache& cache)
      : allocator_(allocator), cache_(cache) {}

  // Lock-free; the ticket goes back to leave(), from any thread, exactly once.
  Ticket enter() noexcept;
  // May free space that this reader was the last to hold (then it takes the mutex).
  void leave(Ticket ticket);
  // `version`'s cache entries are dropped now; `extents` go back to the allocator once no
  // reader that entered before this call remains (at once if none). REQUIRES: the transaction
  // that unreferenced them is durable and the metadata cache no longer hands the version out.
  void retire(ExtentList extents, std::int64_t version);
  // Space no reader can be using: never committed (aborted writes), or multipart parts (never
  // read). Free at once.
  void release_now(const ExtentList& extents);

  // Bytes retired and not yet freed.
  [[nodiscard]] std::uint64_t pending_bytes() const noexcept { return pending_bytes_.load(); }
  // Whether `version` has been retired and not yet freed. One atomic load when nothing waits
  // (the common case), else a lookup in one of several small sharded sets.
  [[nodiscard]] bool is_retired(std::int64_t version) const;

 private:
  struct Retired {
    ExtentList extents;
    std::int64_t version;
    std::uint64_t bytes;
  };
  struct alignas(64) VersionShard {
    std::mutex mutex;
    std::unordered_map<std::int64_t, unsigned> versions;  // version → times retired, pending
  };
  static constexpr std::size_t kVersionShards = 16;
  VersionShard& version_shard(std::int64_t version) const noexcept;
  // Whether no reader counts in `parity` (as seen now; readers may enter it later).
  [[nodiscard]] bool drained(unsigned parity) const noexcept;
  // Moves retired space along as far as the readers allow (flipping the phase if that helps)
  // and returns what may be freed now. REQUIRES: mutex_ held.
  std::vector<Retired> collect();
  // Frees collected space; called without mutex_ (a cache erase per block can take a while).
  void reclaim(std::vector<Retired> batch);

  ExtentAllocator& allocator_;
  BlockCache& cache_;
  std::array<Slot, kSlots> slots_{};
  std::atomic<unsigned> phase_{0};  // where readers enter; stored only under mutex_
  std::mutex mutex_;                // the reclaimer's state below
  std::vector<Retired> open_;       // retired since the last flip
  std::vector<Retired> closing_;    // retired before it: free once the closed parity drains
  std::atomic<std::uint64_t> pending_bytes_{0};
  std::atomic<std::uint64_t> pending_versions_{
      0};  // entries of open_ and closing_, and being freed
  mutable std::array<VersionShard, kVersionShards> versions_;
};

// Holds an epoch for as long as it lives (a reader's shared state).
class EpochGuard {
 public:
  explicit EpochGuard(Retirement& r) : retirement_(r), ticket_(r.enter()) {}
  ~EpochGuard() { retirement_.leave(ticket_); }
  EpochGuard(const EpochGuard&) = delete;
  EpochGuard& operator=(const EpochGuard&) = delete;
  EpochGuard(EpochGuard&&) = delete;
  EpochGuard& operator=(EpochGuard&&) = delete;

 private:
  Retirement& retirement_;
  Retirement::Ticket ticket_;
};

// Object layouts (extents with their checksums) by version, so that repeated ranged reads of an
// object (training reads shards in 8 MiB ranges) do not reload them from the catalog. Layouts
// are immutable once built; versions are never reused, so nothing needs invalidating — old
// ones simply age out. Bounded by the bytes of checksums held (all shards together).
//
// Split into shards by version, each with its own mutex and LRU, so that workers reading
// different objects never contend; a hit locks one shard. An insertion over the budget evicts
// the least recently used layouts of its own shard first, then of the others.
class LayoutCache {
 public:
  using Layout = std::vector<ExtentRecord>;
  explicit LayoutCache(std::uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  std::shared_ptr<const Layout> find(std::int64_t version);
  void insert(std::int64_t version, std::shared_ptr<const Layout> layout);
  static std::uint64_t cost(const Layout& layout);
  [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_.load(); }

 private:
  struct Item {
    std::int64_t version;
    std::shared_ptr<const Layout> layout;
    std::uint64_t bytes;
  };
  struct alignas(64) Shard {
    std::mutex mutex;
    std::list<Item> lru;  // most recent first
    std::unordered_map<std::int64_t, std::list<Item>::iterator> index;
  };
  static constexpr std::size_t kShards = 16;
  static std::size_t shard_index(std::int64_t version) noexcept;

  const std::uint64_t capacity_bytes_;
  std::atomic<std::uint64_t> bytes_{0};
  std::array<Shard, kShards> shards_;
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
  return boost::asio::co_spawn(core.catalog_readers->get_executor(),
                               run_catalog_read(std::move(read)), boost::asio::use_awaitable);
}

// The current version of (bucket, key): from the metadata cache, or read from the catalog and
// cached. With `with_data`, an inline object comes with its bytes; without (HEAD), its
// inline_data may be empty: HEAD of an inline object reads no inline data, which is most of
// the catalog's bytes when objects are small. nullptr when there is none.
Result<std::shared_ptr<const ObjectRecord>> lookup_object(StoreCore& core, std::int64_t bucket_id,
                                                          std::string_view key,
                                                          bool with_data = true);

// The writer implementation (object_writer.cc) and its accessors for the store.
// Errors: kNoSpace when a declared size cannot be reserved. Without `inline_allowed` the data
// always goes to the device (multipart parts).
Result<std::unique_ptr<ObjectWriter>> make_writer(StoreCore& core, BufferPool& pool,
                                                  boost::asio::any_io_executor executor,
                                                  std::optional<std::uint64_t> size_bytes,
                                                  bool inline_allowed);
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
boost::asio::awaitable<Result<std::unique_ptr<ObjectReader>>> open_reader(StoreCore& core,
                                                                          BufferPool& pool,
                                                                          std::int64_t bucket_id,
                                                                          std::string key);

}  // namespace hots3::storage::detail
