#pragma once

// Private to src/storage: what every writer and reader of the store shares (StoreCore), and how
// they reach the catalog's readers.

#include "storage/access_times.h"
#include "storage/block_cache.h"
#include "storage/buffer_pool.h"
#include "storage/catalog/catalog.h"
#include "storage/extent_allocator.h"
#include "storage/layout_cache.h"
#include "storage/pipeline.h"
#include "storage/read_frequency.h"
#include "storage/retirement.h"

#include "hots3/storage/object_store.h"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <atomic>
#include <functional>
#include <type_traits>
#include <vector>

namespace hots3::storage::detail {

class MetadataCache;
class Pins;

// Everything a writer or reader needs from the store.
struct StoreCore {
  StoreOptions options;
  std::shared_ptr<Device> device;
  std::unique_ptr<Pins> pins;  // before the catalog, whose queries ask it
  std::unique_ptr<Catalog> catalog;
  std::unique_ptr<ExtentAllocator> allocator;
  std::unique_ptr<BlockCache> cache;
  std::unique_ptr<Retirement> retirement;
  std::unique_ptr<LayoutCache> layouts;
  std::unique_ptr<MetadataCache> metadata;
  std::unique_ptr<AccessTimes> access;  // reads of versions the upstream also holds
  // Reads of keys the upstream also holds: served from the device (hits), which eviction goes by,
  // and read through (misses), which admission adds for a second miss.
  std::unique_ptr<ReadFrequency> frequency;
  std::unique_ptr<ReadFrequency> misses;
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
// A reader of kept chunk `index` of the evicted `version`: its bytes from 0 to the chunk's size.
// Errors: kNotFound (not kept, or no longer).
Result<std::unique_ptr<ObjectReader>> open_chunk_reader(StoreCore& core, BufferPool& pool,
                                                        const ObjectRecord& version,
                                                        std::uint32_t index,
                                                        boost::asio::any_io_executor executor);

}  // namespace hots3::storage::detail
