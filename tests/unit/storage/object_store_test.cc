#include "hots3/storage/object_store.h"

#include "storage/block_cache.h"
#include "storage/buffer_pool.h"
#include "storage/catalog/catalog.h"
#include "storage/device/fault_device.h"
#include "storage/device/format.h"
#include "test_support.h"

#include "hots3/common/clock.h"
#include "hots3/common/digest.h"
#include "hots3/common/hex.h"
#include "hots3/common/worker_pool.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <tuple>

namespace hots3::storage {
namespace {

namespace asio = boost::asio;
using test::run_on;
using Bytes = std::vector<std::byte>;
constexpr std::uint64_t kMiB = 1024 * 1024;

enum class Engine { kUring, kPosix, kFault };

// The ETag the S3 layer would give these bytes: the writer's digest in hex.
std::string etag_of(const ObjectWriter& writer) { return to_hex(writer.digest()); }

// Every byte `reader` gives, in order.
asio::awaitable<Result<Bytes>> read_all(ObjectReader& reader) {
  Bytes out;
  for (;;) {
    H3_CO_TRY(auto piece, co_await reader.next());
    if (piece.empty()) break;
    out.insert(out.end(), piece.begin(), piece.end());
  }
  co_return out;
}

// An object spec with nothing but that ETag.
ObjectSpec spec_of(const ObjectWriter& writer) {
  ObjectSpec spec;
  spec.etag = etag_of(writer);
  return spec;
}

class StoreTest : public ::testing::TestWithParam<Engine> {
 protected:
  void SetUp() override {
    if (GetParam() == Engine::kUring && !uring_available())
      GTEST_SKIP() << "io_uring_setup is refused here";
    options_.data_dir = dir_.file("data");
    options_.device_size_bytes = 256 * kMiB;
    options_.cache_bytes = 0;
    options_.io_buffers_per_worker = 16;
    options_.engine = GetParam() == Engine::kPosix ? IoEngine::kPosix : IoEngine::kUring;
    if (GetParam() == Engine::kFault) fault_ = std::make_shared<FaultDevice>(256 * kMiB);
    open();
  }

  void TearDown() override { close(); }

  void open() {
    store_ = fault_ ? ObjectStore::open(options_, fault_) : ObjectStore::open(options_);
    workers_ = std::make_unique<WorkerPool>(2);
    for (auto* context : workers_->contexts()) store_->attach(*context);
    workers_->start();
    bucket_ = run([&]() -> asio::awaitable<BucketRecord> {
      auto existing = store_->find_bucket("b").value();
      if (existing) co_return *existing;
      co_return (co_await store_->create_bucket("b", "owner")).value();
    }());
  }

  // A restart: the store stops as on SIGTERM (queued catalog writes finish, nothing more).
  void close() {
    if (!store_) return;
    store_->shutdown();
    workers_->stop();
    workers_.reset();
    store_.reset();
  }

  template <class T>
  T run(asio::awaitable<T> op, int worker = 0) {
    return run_on(*workers_->contexts()[static_cast<std::size_t>(worker)], std::move(op));
  }
  void run(asio::awaitable<void> op, int worker = 0) {
    run_on(*workers_->contexts()[static_cast<std::size_t>(worker)], std::move(op));
  }

  // Writes `data` in uneven pieces; `declare` passes the size up front.
  asio::awaitable<Result<ObjectRecord>> put_async(std::string key, Bytes data, bool declare,
                                                  WriteCondition condition = {},
                                                  ObjectSpec spec = {}) {
    H3_CO_TRY(auto writer, co_await store_->create_writer(
                               declare ? std::optional<std::uint64_t>(data.size()) : std::nullopt));
    std::size_t at = 0;
    std::size_t piece = 1;
    while (at < data.size()) {
      const std::size_t n = std::min(piece, data.size() - at);
      H3_CO_TRY(co_await writer->write(std::span(data).subspan(at, n)));
      at += n;
      piece = piece * 3 + 7;  // 1, 10, 37, ... odd sizes across buffer boundaries
      if (piece > 3 * kMiB) piece = 333333;
    }
    H3_CO_TRY(co_await writer->finish());
    if (spec.etag.empty()) spec.etag = etag_of(*writer);
    co_return co_await store_->commit_object(std::move(writer), bucket_, std::move(key),
                                             std::move(spec), condition);
  }

  // `data` put as `key` in bucket "b" made write-back, its upload done, then evicted: its stub.
  ObjectRecord evicted_stub(const std::string& key, const Bytes& data) {
    EXPECT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kWriteback, "{}")).has_value());
    const ObjectRecord put_as = put(key, data).value();
    for (const TierJob& job : run(store_->tier_jobs(bucket_.id, true)).value()) {
      EXPECT_TRUE(run(store_->finish_tier_job(job, TierSeen{put_as.etag, put_as.etag})).value());
    }
    EXPECT_EQ(run(store_->evict_objects(bucket_.id, {key, true})).value().objects, 1U);
    return *store_->head(bucket_.id, key).value();
  }

  Result<ObjectRecord> put(const std::string& key, const Bytes& data, bool declare = true,
                           WriteCondition c = {}) {
    return run(put_async(key, data, declare, c));
  }

  asio::awaitable<Result<Bytes>> get_async(
      std::string key, std::optional<std::pair<std::uint64_t, std::uint64_t>> range) {
    H3_CO_TRY(auto reader, co_await store_->open_reader(bucket_.id, key));
    if (range) reader->set_range(range->first, range->second);
    co_return co_await read_all(*reader);
  }

  Result<Bytes> get(const std::string& key,
                    std::optional<std::pair<std::uint64_t, std::uint64_t>> range = std::nullopt) {
    return run(get_async(key, range));
  }

  std::uint64_t used() const { return store_->stats().used_bytes; }

  test::TempDir dir_;
  StoreOptions options_;
  std::shared_ptr<FaultDevice> fault_;
  std::unique_ptr<ObjectStore> store_;  // destroyed after the workers (see close())
  std::unique_ptr<WorkerPool> workers_;
  BucketRecord bucket_;
};

std::string md5_hex(const Bytes& data) { return to_hex(md5(data)); }

TEST_P(StoreTest, RoundTripsAtEverySizeBoundary) {
  const std::vector<std::size_t> sizes = {
      0, 1, 4095, 4096, 4097, 65536, kMiB - 1, kMiB + 1, 3 * kMiB + 12345, 17 * kMiB + 5};
  std::uint32_t seed = 0;
  for (const bool declare : {true, false}) {
    for (const std::size_t size : sizes) {
      const std::string key = "obj-" + std::to_string(size) + (declare ? "-d" : "-u");
      const Bytes data = test::pattern_bytes(size, ++seed);
      auto put_result = put(key, data, declare);
      ASSERT_TRUE(put_result.has_value()) << key << ": " << put_result.error().message();
      EXPECT_EQ(put_result->size_bytes, size);
      EXPECT_EQ(put_result->etag, md5_hex(data)) << key;
      auto head = store_->head(bucket_.id, key).value();
      ASSERT_TRUE(head != nullptr);
      EXPECT_EQ(head->size_bytes, size);
      EXPECT_EQ(head->inline_data.has_value(), size <= options_.inline_max_bytes) << key;
      auto got = get(key);
      ASSERT_TRUE(got.has_value()) << key << ": " << got.error().message();
      ASSERT_EQ(got->size(), size) << key;
      EXPECT_TRUE(*got == data) << key;
    }
  }
}

TEST_P(StoreTest, AStreamOfUnknownSizeGrowsInPlace) {
  // Regression: growing the last extent in place after the cursor had reached its end.
  const Bytes data = test::pattern_bytes(150 * kMiB + 3, 77);
  const std::uint64_t before = used();
  ASSERT_TRUE(put("stream", data, false).has_value());
  EXPECT_EQ(used(), before + 150 * kMiB + 4096);  // the unused tail of the last growth is back
  EXPECT_TRUE(get("stream").value() == data);
  auto tail = get("stream", std::pair{std::uint64_t{128 * kMiB - 10}, std::uint64_t{20}});
  EXPECT_TRUE(std::equal(tail->begin(), tail->end(),
                         data.begin() + static_cast<std::ptrdiff_t>(128 * kMiB - 10)));
}

TEST_P(StoreTest, RangesAreExact) {
  const Bytes data = test::pattern_bytes(5 * kMiB + 777, 3);
  ASSERT_TRUE(put("r", data).has_value());
  std::mt19937 random(11);
  for (int i = 0; i < 60; ++i) {
    std::uint64_t a = std::uniform_int_distribution<std::uint64_t>(0, data.size() - 1)(random);
    std::uint64_t n =
        std::uniform_int_distribution<std::uint64_t>(1, i % 2 ? 5000 : 3 * kMiB)(random);
    n = std::min<std::uint64_t>(n, data.size() - a);
    auto got = get("r", std::pair{a, n});
    ASSERT_TRUE(got.has_value());
    ASSERT_EQ(got->size(), n);
    EXPECT_TRUE(std::equal(got->begin(), got->end(), data.begin() + static_cast<std::ptrdiff_t>(a)))
        << a << "+" << n;
  }
  auto last = get("r", std::pair{data.size() - 1, std::uint64_t{1}});
  EXPECT_EQ(last->at(0), data.back());
}

TEST_P(StoreTest, SlowReaderOfAnOverwrittenKeyGetsExactlyTheOldBytes) {
  const Bytes first = test::pattern_bytes(6 * kMiB, 100);
  ASSERT_TRUE(put("k", first).has_value());
  const std::uint64_t used_one = used();
  run([&]() -> asio::awaitable<void> {
    auto reader = (co_await store_->open_reader(bucket_.id, "k")).value();
    Bytes got;
    auto piece = (co_await reader->next()).value();
    got.insert(got.end(), piece.begin(), piece.end());
    // The key is overwritten many times while the reader is half-way.
    for (std::uint32_t i = 0; i < 12; ++i) {
      // Built before the co_await: GCC 12 destroys temporaries of a co_await expression twice.
      auto overwrite = put_async("k", test::pattern_bytes(6 * kMiB, 200 + i), i % 2 == 0);
      auto r = co_await std::move(overwrite);
      EXPECT_TRUE(r.has_value());
    }
    for (;;) {
      piece = (co_await reader->next()).value();
      if (piece.empty()) break;
      got.insert(got.end(), piece.begin(), piece.end());
    }
    EXPECT_TRUE(got == first) << "the reader saw a mix of versions";
    // While it was reading, the old space could not be reused.
    EXPECT_GT(store_->stats().pending_free_bytes, 0U);
  }());
  // Reader gone: only the current version's space is used.
  EXPECT_EQ(used(), used_one);
  EXPECT_EQ(store_->stats().pending_free_bytes, 0U);
  EXPECT_TRUE(get("k").value() == test::pattern_bytes(6 * kMiB, 211));
}

// The metadata cache follows a change as it becomes durable, before its writer resumes (in commit
// order, on the thread that makes commits durable): an overwrite puts its version in, an append or
// a delete, or a rename onto the key, drops the old one. Held here by holding the committing
// worker, so the window between "durable" and "the writer resumes" stays open: a reader on another
// worker must meanwhile find and read what the key holds now (the new version whole, or nothing
// after a delete). So does any other write of the same commit once it resumes: else, looking the
// key up after its own write failed on the change, it would take the replaced version for the
// current one.
TEST_P(StoreTest, AChangeReachesTheMetadataCacheBeforeItsWriterResumes) {
  enum class Change { kOverwrite, kAppend, kDelete, kRename };
  for (const Change change :
       {Change::kOverwrite, Change::kAppend, Change::kDelete, Change::kRename}) {
    const std::string key = "k" + std::to_string(static_cast<int>(change));
    const Bytes old_value = test::pattern_bytes(3 * kMiB + 5, 70);
    const auto old_version = put(key, old_value).value();
    // The metadata cache now holds the old version; its layout is not loaded yet.
    ASSERT_EQ(store_->head(bucket_.id, key).value()->id, old_version.id);
    const Bytes piece = test::pattern_bytes(kMiB + 7, 71);
    Bytes new_value = piece;
    if (change == Change::kAppend)
      new_value.insert(new_value.begin(), old_value.begin(), old_value.end());
    const std::string source = key + "-source";  // what a rename moves onto the key
    if (change == Change::kRename) {
      ASSERT_TRUE(put(source, piece).has_value());
    }

    std::promise<void> gate;
    std::shared_future<void> held = gate.get_future().share();
    asio::io_context& committer = *workers_->contexts()[1];
    const std::uint64_t commits_before = store_->stats().catalog_writer.commits;
    auto changed = std::async(std::launch::async, [&]() -> Result<void> {
      return run(
          [&]() -> asio::awaitable<Result<void>> {
            std::unique_ptr<ObjectWriter> w;
            if (change == Change::kOverwrite || change == Change::kAppend) {
              H3_CO_TRY(w, co_await store_->create_writer(std::uint64_t{piece.size()},
                                                          change == Change::kAppend));
              H3_CO_TRY(co_await w->write(piece));
              H3_CO_TRY(co_await w->finish());
            }
            // Runs once this coroutine waits for its commit, and holds the worker until released:
            // the commit's completion waits behind it. Posted from another thread: a handler a
            // worker posts to itself waits in that thread's private queue until the running
            // handler returns, and a commit that completes before then (a busy machine) would be
            // queued ahead of it.
            std::thread([&committer, held] {
              asio::post(committer, [held] { held.wait(); });
            }).join();
            if (change == Change::kOverwrite) {
              ObjectSpec spec = spec_of(*w);
              H3_CO_TRY(co_await store_->commit_object(std::move(w), bucket_, key, spec, {}));
            } else if (change == Change::kAppend) {
              ObjectSpec spec;
              spec.etag = "appended";
              H3_CO_TRY(co_await store_->append_object(std::move(w), bucket_, key, old_version.id,
                                                       false, spec, {}));
            } else if (change == Change::kDelete) {
              H3_CO_TRY(co_await store_->delete_object(bucket_.id, key));
            } else {
              H3_CO_TRY(co_await store_->rename_object(bucket_.id, source, key, {}));
            }
            co_return Result<void>{};
          }(),
          1);
    });
    // (Not ASSERT: the held worker must be let go below, or the write's future never ends.)
    EXPECT_TRUE(
        test::wait_until([&] { return store_->stats().catalog_writer.commits > commits_before; }));
    // Counted at the commit, followed by the cache once the flush after it is done: wait for that.
    EXPECT_TRUE(test::wait_until([&] {
      const auto now = store_->head(bucket_.id, key).value();
      return change == Change::kDelete ? now == nullptr : now && now->id != old_version.id;
    }));
    auto got = get(key);
    gate.set_value();
    ASSERT_TRUE(changed.get().has_value());
    if (change == Change::kDelete) {
      ASSERT_FALSE(got.has_value());
      EXPECT_EQ(got.error(), errc::kNotFound);
    } else {
      ASSERT_TRUE(got.has_value()) << got.error().message();
      EXPECT_EQ(got->size(), new_value.size());
      EXPECT_TRUE(*got == new_value);
    }
    EXPECT_TRUE(get(key) == got);
  }
}

// The MD5 of every value a key may hold (noted before its commit), and the check of a read
// against them: "no such key", or a whole version, byte for byte.
class KnownVersions {
 public:
  void note(const Bytes& value) {
    std::lock_guard lock(mutex_);
    md5s_.insert(md5_hex(value));
  }
  [[nodiscard]] bool holds(const Bytes& value) {
    std::lock_guard lock(mutex_);
    return md5s_.count(md5_hex(value)) != 0;
  }
  // True for a whole known version; counts "no such key" as absent and anything else as a
  // failure (reported).
  bool check(const Result<Bytes>& got, const std::string& key) {
    if (!got) {
      if (got.error() == errc::kNotFound) {
        ++absent;
      } else {
        ++failures;
        ADD_FAILURE() << "read of " << key << " failed: " << got.error().message();
      }
      return false;
    }
    if (!holds(*got)) {
      ++failures;
      ADD_FAILURE() << "read " << got->size() << " bytes that no version of " << key << " held";
      return false;
    }
    return true;
  }

  std::atomic<int> absent{0};
  std::atomic<int> failures{0};

 private:
  std::mutex mutex_;
  std::set<std::string> md5s_;
};

// A commit between two reads: open_reader finds the version (often in the metadata cache) and then
// loads its extent rows in a second read; a commit of the key in between (overwrite, append,
// delete, rename) takes those rows. A reader must then see the key's next state, never an empty or
// partial layout. One thread changes one key every way it can while others open and read it:
// every read is "no such key" or a whole version that was written, byte for byte.
TEST_P(StoreTest, ReadersRacingEveryChangeOfTheirKeySeeWholeVersionsOnly) {
  close();
  options_.extent_row_max_bytes = 256 * 1024;  // several extent rows per object
  open();
  KnownVersions versions;
  std::atomic<bool> stop{false};
  std::atomic<int> whole_reads{0}, opens{0};
  auto whole_reader = [&](int worker) {
    while (!stop) {
      if (versions.check(run(get_async("hot", std::nullopt), worker), "hot")) ++whole_reads;
    }
  };
  // Opens as fast as it can (the race is between the lookup and the layout load) and reads the
  // last bytes, which only a complete layout has.
  auto quick_reader = [&](int worker) {
    while (!stop) {
      auto r = run(
          [&]() -> asio::awaitable<Result<std::size_t>> {
            H3_CO_TRY(auto reader, co_await store_->open_reader(bucket_.id, "hot"));
            const std::uint64_t size = reader->object().size_bytes;
            reader->set_range(size - 3, 3);
            std::size_t n = 0;
            for (;;) {
              H3_CO_TRY(auto piece, co_await reader->next());
              if (piece.empty()) break;
              n += piece.size();
            }
            co_return n;
          }(),
          worker);
      ++opens;
      if (!r && r.error() == errc::kNotFound) continue;
      if (!r || *r != 3) {
        ++versions.failures;
        ADD_FAILURE() << "ranged read of the last bytes: "
                      << (r ? std::to_string(*r) + " bytes" : r.error().message());
      }
    }
  };
  std::vector<std::future<void>> readers;
  readers.push_back(std::async(std::launch::async, whole_reader, 0));
  readers.push_back(std::async(std::launch::async, whole_reader, 1));
  readers.push_back(std::async(std::launch::async, quick_reader, 0));
  readers.push_back(std::async(std::launch::async, quick_reader, 1));

  std::optional<Bytes> current;  // what the key holds (this thread is its only writer)
  std::uint64_t allocated = 0;   // device bytes it holds: every writer's data rounds up to a block
  auto blocks = [](std::size_t n) { return std::uint64_t{(n + 4095) / 4096 * 4096}; };
  std::mt19937 random(3);
  for (std::uint32_t i = 0; i < 240; ++i) {
    const std::size_t size = std::uniform_int_distribution<std::size_t>(5000, 1300 * 1024)(random);
    const int change = current ? static_cast<int>(i % 6) : 0;
    if (change <= 1) {  // overwrite (or create)
      Bytes value = test::pattern_bytes(size, 1000 + i);
      versions.note(value);
      ASSERT_TRUE(put("hot", value, change == 0).has_value());
      allocated = blocks(value.size());
      current = std::move(value);
    } else if (change == 2) {  // append: the new version takes over the base version's rows
      const Bytes piece = test::pattern_bytes(size / 4 + 1, 5000 + i);
      Bytes whole = *current;
      whole.insert(whole.end(), piece.begin(), piece.end());
      versions.note(whole);
      const std::int64_t base = store_->head(bucket_.id, "hot").value()->id;
      auto appended = run(
          [&]() -> asio::awaitable<Result<ObjectRecord>> {
            H3_CO_TRY(auto w, co_await store_->create_writer(std::uint64_t{piece.size()}, true));
            H3_CO_TRY(co_await w->write(piece));
            H3_CO_TRY(co_await w->finish());
            ObjectSpec spec;
            spec.etag = "appended-" + std::to_string(i);
            co_return co_await store_->append_object(std::move(w), bucket_, "hot", base, false,
                                                     spec, {});
          }(),
          1);
      ASSERT_TRUE(appended.has_value()) << appended.error().message();
      allocated += blocks(piece.size());
      current = std::move(whole);
    } else if (change == 3) {  // rename away and back: the version keeps its rows
      ASSERT_TRUE(run(store_->rename_object(bucket_.id, "hot", "aside", {})).has_value());
      ASSERT_TRUE(run(store_->rename_object(bucket_.id, "aside", "hot", {})).has_value());
    } else if (change == 4) {
      ASSERT_TRUE(run(store_->delete_object(bucket_.id, "hot")).value().has_value());
      current.reset();
      allocated = 0;
    } else {  // a small (inline) version replaces a large one
      Bytes value = test::pattern_bytes(size % 3000 + 100, 9000 + i);
      versions.note(value);
      ASSERT_TRUE(put("hot", value).has_value());
      allocated = 0;  // inline: in the catalog
      current = std::move(value);
    }
  }
  stop = true;
  for (auto& r : readers) r.get();
  EXPECT_EQ(versions.failures.load(), 0);
  EXPECT_GT(whole_reads.load(), 0);
  EXPECT_GT(opens.load(), 0);
  // Nothing leaked either: only the last version holds space.
  EXPECT_EQ(used(), allocated);
  EXPECT_EQ(store_->stats().pending_free_bytes, 0U);
  std::cout << "[          ] " << whole_reads << " whole reads, " << opens << " quick opens, "
            << versions.absent << " found no key\n";
}

// Readers beside writers, under load: several threads read the same few keys while two others
// overwrite and delete them, on a device so small that freed space is reused many times over, with
// the block cache on. Every read returns a whole version the key held (a reader whose space was
// freed and rewritten under it would return a mix, or fail its checksums), and once all keys are
// deleted the space in use is back where it started, with nothing left pending.
TEST_P(StoreTest, ConcurrentReadersAndWritersOnASmallDeviceSeeWholeVersionsAndLeakNothing) {
  close();
  options_.data_dir = dir_.file("small");
  options_.device_size_bytes = 32 * kMiB;
  options_.cache_bytes = 4 * kMiB;
  // Small I/Os with little read-ahead: a reader's reads spread over its whole, paced read.
  options_.io_buffer_bytes = 128 * 1024;
  options_.io_buffers_per_worker = 32;
  options_.stream_depth = 2;
  if (fault_) fault_ = std::make_shared<FaultDevice>(32 * kMiB);
  open();
  const std::uint64_t baseline = used();
  const std::array<std::string, 3> keys{"s0", "s1", "s2"};
  KnownVersions versions;
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0}, writes{0}, deletes{0}, full{0};
  std::atomic<std::uint64_t> written_bytes{0};
  // Reads the key piece by piece, pausing between pieces so that writers on the other worker
  // replace and delete it meanwhile.
  auto paced_get = [&](std::string key) -> asio::awaitable<Result<Bytes>> {
    H3_CO_TRY(auto reader, co_await store_->open_reader(bucket_.id, key));
    asio::steady_timer timer(co_await asio::this_coro::executor);
    Bytes out;
    for (;;) {
      H3_CO_TRY(auto piece, co_await reader->next());
      if (piece.empty()) break;
      out.insert(out.end(), piece.begin(), piece.end());
      timer.expires_after(std::chrono::microseconds(200));
      co_await timer.async_wait(asio::use_awaitable);
    }
    co_return out;
  };
  auto reader = [&](int worker, unsigned seed) {
    std::mt19937 random(seed);
    while (!stop) {
      const std::string& key = keys[random() % keys.size()];
      if (versions.check(run(paced_get(key), worker), key)) ++reads;
    }
  };
  std::atomic<std::uint32_t> seeds{1};
  auto writer = [&](int worker, unsigned seed) {
    std::mt19937 random(seed);
    for (int i = 0; i < 150; ++i) {
      const std::string& key = keys[random() % keys.size()];
      if (random() % 5 == 0) {
        auto deleted = run(store_->delete_object(bucket_.id, key), worker);
        EXPECT_TRUE(deleted.has_value());
        ++deletes;
        continue;
      }
      const std::size_t size =
          std::uniform_int_distribution<std::size_t>(8 * 1024, 1536 * 1024)(random);
      Bytes value = test::pattern_bytes(size, seeds++);
      versions.note(value);
      // Sizes declared: a stream of unknown size reserves up to 64 MiB at a time, the whole device.
      auto stored = run(put_async(key, std::move(value), true), worker);
      if (!stored && stored.error() == errc::kNoSpace) {
        ++full;  // readers may hold a few old versions: a full device refuses, it never waits
        continue;
      }
      EXPECT_TRUE(stored.has_value()) << stored.error().message();
      ++writes;
      written_bytes += size;
    }
  };
  std::vector<std::future<void>> readers;
  for (unsigned i = 0; i < 3; ++i)
    readers.push_back(std::async(std::launch::async, reader, static_cast<int>(i % 2), i + 10));
  std::vector<std::future<void>> writers;
  for (unsigned i = 0; i < 2; ++i)
    writers.push_back(std::async(std::launch::async, writer, static_cast<int>(i), i + 20));
  for (auto& w : writers) w.get();
  stop = true;
  for (auto& r : readers) r.get();

  EXPECT_EQ(versions.failures.load(), 0);
  EXPECT_GT(reads.load(), 0);
  EXPECT_GT(written_bytes.load(), 4 * options_.device_size_bytes) << "space was not reused";
  EXPECT_LT(full.load(), writes.load()) << "the device was full most of the time";
  for (const std::string& key : keys) {
    auto got = get(key);
    if (got) {
      EXPECT_TRUE(versions.holds(*got)) << key;
    }
    EXPECT_TRUE(run(store_->delete_object(bucket_.id, key)).has_value());
  }
  EXPECT_EQ(store_->stats().pending_free_bytes, 0U);
  EXPECT_EQ(used(), baseline);
  std::cout << "[          ] " << reads << " reads, " << versions.absent << " found no key, "
            << writes << " writes (" << written_bytes / kMiB << " MiB), " << deletes << " deletes, "
            << full << " refused for space\n";
}

// A reader dropped while its read-ahead is in flight (a client that went away) must not give
// the pool a buffer the device is still reading into: the next stream to take that buffer would
// see its bytes change under it. Every free buffer is taken and marked right after the drop;
// none may change once the abandoned reads complete.
// More streams on one worker than its pool has buffers, each holding the piece it was handed
// while its consumer sends it (here: yields to the others) before it asks for the next, as a
// GET does. Every stream must finish with its bytes: a reader that waited for a buffer while
// holding one deadlocked all of them once every buffer was some stream's current piece.
TEST_P(StoreTest, MoreStreamsThanBuffersAllFinish) {
  const Bytes data = test::pattern_bytes(6 * kMiB + 5, 22);
  ASSERT_TRUE(put("many", data).has_value());
  const std::size_t streams = 3 * options_.io_buffers_per_worker;
  auto& context = *workers_->contexts()[0];
  std::atomic<std::size_t> finished{0};
  std::atomic<std::size_t> intact{0};
  std::promise<void> all_done;
  for (std::size_t i = 0; i < streams; ++i) {
    asio::co_spawn(
        context,
        [&]() -> asio::awaitable<void> {
          Bytes out;
          if (auto reader = co_await store_->open_reader(bucket_.id, "many")) {
            for (;;) {
              auto piece = co_await (*reader)->next();
              if (!piece || piece->empty()) break;
              out.insert(out.end(), piece->begin(), piece->end());
              co_await asio::post(co_await asio::this_coro::executor,
                                  asio::use_awaitable);  // "sending"
            }
          }
          if (out == data) ++intact;
          if (++finished == streams) all_done.set_value();
        },
        asio::detached);
  }
  // Not a timing assertion: a deadlock never finishes, a working reader finishes in seconds.
  ASSERT_EQ(all_done.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready)
      << finished.load() << " of " << streams
      << " streams finished; the others wait for buffers forever";
  EXPECT_EQ(intact.load(), streams);
}

TEST_P(StoreTest, ADroppedReaderKeepsItsInFlightBuffersFromOtherStreams) {
  const Bytes data = test::pattern_bytes(12 * kMiB, 21);
  ASSERT_TRUE(put("ahead", data).has_value());
  run([&]() -> asio::awaitable<void> {
    auto executor = co_await asio::this_coro::executor;
    BufferPool* pool = BufferPool::of(
        static_cast<asio::io_context&>(asio::query(executor, asio::execution::context)));
    EXPECT_NE(pool, nullptr);
    if (pool == nullptr) co_return;
    for (int attempt = 0; attempt < 5; ++attempt) {
      auto reader = (co_await store_->open_reader(bucket_.id, "ahead")).value();
      EXPECT_FALSE((co_await reader->next()).value().empty());  // and the next reads are started
      reader.reset();
      std::vector<IoBuffer> taken;
      while (auto buffer = pool->try_acquire()) {
        std::memset(buffer->data(), 0xA5, buffer->size());
        taken.push_back(std::move(*buffer));
      }
      // Let whatever was in flight complete.
      asio::steady_timer timer(executor, std::chrono::milliseconds(100));
      co_await timer.async_wait(asio::use_awaitable);
      for (const IoBuffer& buffer : taken) {
        const auto bytes = buffer.bytes();
        EXPECT_TRUE(std::all_of(bytes.begin(), bytes.end(), [](std::byte b) {
          return b == std::byte{0xA5};
        })) << "a read of the dropped reader wrote into a buffer another stream held";
      }
    }
  }());
}

TEST_P(StoreTest, DeleteFreesSpaceAndForgetsTheKey) {
  const std::uint64_t empty = used();
  ASSERT_TRUE(put("d", test::pattern_bytes(2 * kMiB, 5)).has_value());
  EXPECT_EQ(used(), empty + 2 * kMiB);
  auto deleted = run(store_->delete_object(bucket_.id, "d")).value();
  ASSERT_TRUE(deleted.has_value());
  EXPECT_EQ(used(), empty);
  EXPECT_EQ(get("d").error(), errc::kNotFound);
  EXPECT_FALSE(run(store_->delete_object(bucket_.id, "d")).value().has_value());
}

TEST_P(StoreTest, AFullDeviceRefusesTheWriterAndKeepsEverythingElse) {
  const Bytes keep = test::pattern_bytes(100 * kMiB, 6);
  ASSERT_TRUE(put("keep", keep).has_value());
  const std::uint64_t before = used();
  // Declared too large: refused before any data is taken.
  auto declared = run(store_->create_writer(std::uint64_t{200 * kMiB}));
  EXPECT_EQ(declared.error(), errc::kNoSpace);
  // Unknown size: fails while writing.
  auto streamed = put("overflow", test::pattern_bytes(200 * kMiB, 7), false);
  EXPECT_EQ(streamed.error(), errc::kNoSpace);
  EXPECT_EQ(used(), before);
  EXPECT_EQ(get("overflow").error(), errc::kNotFound);
  EXPECT_TRUE(get("keep").value() == keep);
  // The space is usable again.
  EXPECT_TRUE(put("fits", test::pattern_bytes(100 * kMiB, 8)).has_value());
}

// A stream of unknown size grows its reservation 64 MiB at a time; on a nearly full device it
// takes what is left, so an object that fits is stored.
TEST_P(StoreTest, AStreamOfUnknownSizeFitsIntoTheLastFreeSpace) {
  const Bytes big = test::pattern_bytes(200 * kMiB, 11);
  ASSERT_TRUE(put("big", big).has_value());
  ASSERT_LT(store_->stats().free_bytes, 64 * kMiB);
  const std::uint64_t before = used();
  const Bytes small = test::pattern_bytes(100 * 1000, 12);  // larger than an inline object
  const Bytes medium = test::pattern_bytes(20 * kMiB + 5, 13);
  const auto blocks = [](std::size_t n) {
    return (n + kChecksumBlockBytes - 1) / kChecksumBlockBytes * kChecksumBlockBytes;
  };
  ASSERT_TRUE(put("small", small, false).has_value());
  ASSERT_TRUE(put("medium", medium, false).has_value());
  EXPECT_TRUE(get("small").value() == small);
  EXPECT_TRUE(get("medium").value() == medium);
  // Only the bytes written stay reserved.
  EXPECT_EQ(used(), before + blocks(small.size()) + blocks(medium.size()));
  // A stream under way holds no more than it needs: a declared PUT of most of what is left
  // still fits beside it.
  const std::uint64_t left = store_->stats().free_bytes;
  const Bytes head_of_stream = test::pattern_bytes(100 * 1000, 15);
  const Bytes beside = test::pattern_bytes(static_cast<std::size_t>(left - 8 * kMiB), 16);
  auto streamed = run([&]() -> asio::awaitable<Result<ObjectRecord>> {
    H3_CO_TRY(auto writer, co_await store_->create_writer(std::nullopt));
    H3_CO_TRY(co_await writer->write(head_of_stream));
    auto put_beside = put_async("beside", beside, true);
    auto declared = co_await std::move(put_beside);
    EXPECT_TRUE(declared.has_value()) << declared.error().message();
    H3_CO_TRY(co_await writer->finish());
    ObjectSpec spec = spec_of(*writer);
    co_return co_await store_->commit_object(std::move(writer), bucket_, "streamed", spec, {});
  }());
  ASSERT_TRUE(streamed.has_value()) << streamed.error().message();
  EXPECT_TRUE(get("streamed").value() == head_of_stream);
  ASSERT_TRUE(run(store_->delete_object(bucket_.id, "beside")).value().has_value());
  ASSERT_TRUE(run(store_->delete_object(bucket_.id, "streamed")).value().has_value());
  // More than is left still fails cleanly.
  EXPECT_EQ(put("too-big", test::pattern_bytes(60 * kMiB, 14), false).error(), errc::kNoSpace);
  EXPECT_EQ(used(), before + blocks(small.size()) + blocks(medium.size()));
}

TEST_P(StoreTest, ConditionalWrites) {
  ASSERT_TRUE(put("c", test::pattern_bytes(10, 1)).has_value());
  WriteCondition none_match;
  none_match.if_none_match_any = true;
  EXPECT_EQ(put("c", test::pattern_bytes(10, 2), true, none_match).error(),
            errc::kPreconditionFailed);
  WriteCondition match;
  match.if_match = md5_hex(test::pattern_bytes(10, 1));
  EXPECT_TRUE(put("c", test::pattern_bytes(10, 3), true, match).has_value());
  EXPECT_EQ(put("c", test::pattern_bytes(10, 4), true, match).error(), errc::kPreconditionFailed);
  match.if_match = "x";
  EXPECT_EQ(put("missing", test::pattern_bytes(10, 4), true, match).error(), errc::kNotFound);
}

TEST_P(StoreTest, RacingCreateOnlyWritersHaveOneWinner) {
  const std::uint64_t before = used();
  WriteCondition none_match;
  none_match.if_none_match_any = true;
  std::vector<std::future<Result<ObjectRecord>>> results;
  for (int i = 0; i < 8; ++i) {
    results.push_back(std::async(std::launch::async, [&, i] {
      return run(put_async("race", test::pattern_bytes(3 * kMiB, static_cast<std::uint32_t>(i)),
                           true, none_match),
                 i % 2);
    }));
  }
  int won = 0;
  for (auto& f : results) {
    auto r = f.get();
    if (r) {
      ++won;
    } else {
      EXPECT_EQ(r.error(), errc::kPreconditionFailed);
    }
  }
  EXPECT_EQ(won, 1);
  EXPECT_EQ(used(), before + 3 * kMiB);  // the losers' space is back
}

// Streams on one worker share the MD5 lanes: each ETag must still be the MD5 of its own bytes,
// whatever the sizes (streams finish at different buffers; small objects pass through the lanes
// whole when they finish) and however writes interleave.
TEST_P(StoreTest, ConcurrentWritersOnOneWorkerEachGetTheirOwnMd5) {
  std::vector<Bytes> data;
  std::vector<std::future<Result<ObjectRecord>>> results;
  for (std::uint32_t i = 0; i < 10; ++i)
    data.push_back(test::pattern_bytes(static_cast<std::size_t>(i) * kMiB + 1000 * i + 1, i));
  for (std::uint32_t i = 0; i < 10; ++i)
    data.push_back(test::pattern_bytes(options_.inline_max_bytes / (i + 1) - i, 100 + i));
  for (std::uint32_t i = 0; i < data.size(); ++i) {
    results.push_back(std::async(std::launch::async, [&, i] {
      // Two of unknown size (each grows its reservation by 64 MiB at a time).
      return run(put_async("md5/" + std::to_string(i), data[i], i % 5 != 0), 0);
    }));
  }
  for (std::uint32_t i = 0; i < data.size(); ++i) {
    auto r = results[i].get();
    ASSERT_TRUE(r.has_value()) << i << ": " << r.error().message();
    EXPECT_EQ(r->etag, md5_hex(data[i])) << i;
  }
}

TEST_P(StoreTest, RepeatedReadsComeFromTheCache) {
  close();
  options_.cache_bytes = 64 * kMiB;
  open();
  const Bytes data = test::pattern_bytes(2 * kMiB, 9);
  ASSERT_TRUE(put("hot", data).has_value());
  // Blocks are cached only into prefaulted memory. The prefaulter runs at idle priority, so on a
  // busy machine it can take seconds: wait until it has room for the object twice over.
  ASSERT_TRUE(
      test::wait_until([&] { return store_->stats().cache_prefaulted_bytes >= 2 * data.size(); }));
  ASSERT_TRUE(get("hot").value() == data);
  const auto cold = store_->stats();
  ASSERT_TRUE(get("hot").value() == data);
  const auto warm = store_->stats();
  EXPECT_GE(warm.cache_hits - cold.cache_hits, data.size() / BlockCache::kBlockBytes);
  // An overwrite is never served stale.
  const Bytes newer = test::pattern_bytes(2 * kMiB, 10);
  ASSERT_TRUE(put("hot", newer).has_value());
  EXPECT_TRUE(get("hot").value() == newer);
  EXPECT_TRUE(get("hot", std::pair{std::uint64_t{5}, std::uint64_t{100000}}).value() ==
              Bytes(newer.begin() + 5, newer.begin() + 100005));
}

TEST_P(StoreTest, MultipartCompletesWithoutCopyingAndAbortFreesSpace) {
  const std::uint64_t before = used();
  auto upload = run(store_->create_upload(bucket_, "mp", "owner", {}, std::string("CRC32"),
                                          std::string("COMPOSITE")))
                    .value();
  std::vector<Bytes> parts;
  for (std::uint32_t n = 1; n <= 3; ++n) {
    parts.push_back(test::pattern_bytes(n == 3 ? 1000 : 5 * kMiB + n, n));
    auto part = run([&, n]() -> asio::awaitable<Result<PartRecord>> {
      H3_CO_TRY(auto w, co_await store_->create_writer(parts.back().size(), true));
      H3_CO_TRY(co_await w->write(parts.back()));
      H3_CO_TRY(co_await w->finish());
      std::string etag = etag_of(*w);
      auto committing = store_->commit_part(std::move(w), upload.upload_id, n, {}, etag, {});
      co_return co_await std::move(committing);
    }());
    ASSERT_TRUE(part.has_value()) << part.error().message();
    EXPECT_EQ(part->etag, md5_hex(parts.back()));
  }
  const std::uint64_t with_parts = used();
  auto object = run(store_->complete_upload(
      upload.upload_id,
      [](const UploadRecord&,
         const std::vector<PartRecord>& all) -> Result<ObjectStore::CompletionPlan> {
        ObjectStore::CompletionPlan plan;
        plan.parts = all;
        plan.spec.etag = "deadbeef-3";
        return plan;
      },
      {}));
  ASSERT_TRUE(object.has_value());
  EXPECT_EQ(object->parts_count, 3U);
  EXPECT_EQ(used(), with_parts);  // no data copied
  Bytes whole;
  for (const auto& p : parts) whole.insert(whole.end(), p.begin(), p.end());
  EXPECT_TRUE(get("mp").value() == whole);
  const auto table = run(store_->object_parts(object->id)).value();
  ASSERT_EQ(table.size(), 3U);
  EXPECT_EQ(table[2].offset_bytes, 2 * (5 * kMiB) + 3);
  // The completed upload names the version it made (for a retried Complete) while it exists.
  EXPECT_EQ(store_->ended_upload(upload.upload_id).value()->object_id, object->id);
  EXPECT_FALSE(store_->ended_upload("no-such-upload").value().has_value());
  // An aborted upload leaves nothing behind.
  auto second =
      run(store_->create_upload(bucket_, "mp2", "owner", {}, std::nullopt, std::nullopt)).value();
  run([&]() -> asio::awaitable<void> {
    auto w = (co_await store_->create_writer(std::uint64_t{6 * kMiB}, true)).value();
    EXPECT_TRUE((co_await w->write(test::pattern_bytes(6 * kMiB, 50))).has_value());
    EXPECT_TRUE((co_await w->finish()).has_value());
    std::string etag = etag_of(*w);
    auto committing = store_->commit_part(std::move(w), second.upload_id, 1, {}, etag, {});
    EXPECT_TRUE((co_await std::move(committing)).has_value());
  }());
  EXPECT_GT(used(), with_parts);
  EXPECT_TRUE(run(store_->abort_upload(second.upload_id)).has_value());
  EXPECT_EQ(used(), with_parts);
  EXPECT_EQ(run(store_->abort_upload(second.upload_id)).error(), errc::kNotFound);
  // An abort is remembered as one (no version).
  ASSERT_TRUE(store_->ended_upload(second.upload_id).value().has_value());
  EXPECT_FALSE(store_->ended_upload(second.upload_id).value()->object_id.has_value());
  EXPECT_TRUE(run(store_->delete_object(bucket_.id, "mp")).has_value());
  EXPECT_EQ(used(), before);
  EXPECT_FALSE(store_->ended_upload(upload.upload_id).value().has_value());
}

// Parts are never read by an ObjectReader: the space of a replaced part, of an aborted or
// abandoned upload and of a part left out of a completion is free as soon as the catalog says so,
// even while long GETs of other objects are running.
TEST_P(StoreTest, ReplacedPartsAndAbortedUploadsFreeTheirSpaceAtOnce) {
  ASSERT_TRUE(put("dataset", test::pattern_bytes(3 * kMiB, 40)).has_value());
  const std::uint64_t base = used();
  auto upload_part = [&](const std::string& upload_id, std::uint32_t n, std::size_t size,
                         std::uint32_t seed) {
    return run([&, n, size, seed]() -> asio::awaitable<Result<PartRecord>> {
      H3_CO_TRY(auto w, co_await store_->create_writer(std::uint64_t{size}, true));
      H3_CO_TRY(co_await w->write(test::pattern_bytes(size, seed)));
      H3_CO_TRY(co_await w->finish());
      std::string etag = etag_of(*w);
      auto committing = store_->commit_part(std::move(w), upload_id, n, {}, etag, {});
      co_return co_await std::move(committing);
    }());
  };
  auto upload =
      run(store_->create_upload(bucket_, "ckpt", "owner", {}, std::nullopt, std::nullopt)).value();
  // A reader of another object holds its epoch all along.
  std::unique_ptr<ObjectReader> reader;
  run([&]() -> asio::awaitable<void> {
    reader = (co_await store_->open_reader(bucket_.id, "dataset")).value();
    EXPECT_FALSE((co_await reader->next()).value().empty());
  }());
  ASSERT_TRUE(upload_part(upload.upload_id, 1, 6 * kMiB, 1).has_value());
  ASSERT_TRUE(upload_part(upload.upload_id, 2, 2 * kMiB, 2).has_value());
  EXPECT_EQ(used(), base + 8 * kMiB);
  // Re-uploading part 1 replaces it: the 6 MiB are free at once, the reader notwithstanding.
  ASSERT_TRUE(upload_part(upload.upload_id, 1, 5 * kMiB, 3).has_value());
  EXPECT_EQ(used(), base + 7 * kMiB);
  EXPECT_EQ(store_->stats().pending_free_bytes, 0U);
  // A part the completion leaves out is free at once too.
  ASSERT_TRUE(upload_part(upload.upload_id, 3, kMiB, 4).has_value());
  auto object = run(store_->complete_upload(
      upload.upload_id,
      [](const UploadRecord&,
         const std::vector<PartRecord>& all) -> Result<ObjectStore::CompletionPlan> {
        ObjectStore::CompletionPlan plan;
        plan.parts = {all[0], all[1]};
        plan.spec.etag = "00-2";
        return plan;
      },
      {}));
  ASSERT_TRUE(object.has_value());
  EXPECT_EQ(used(), base + 7 * kMiB);
  // An aborted upload, and one aborted for its age.
  auto aborted =
      run(store_->create_upload(bucket_, "a", "owner", {}, std::nullopt, std::nullopt)).value();
  ASSERT_TRUE(upload_part(aborted.upload_id, 1, 4 * kMiB, 5).has_value());
  auto abandoned =
      run(store_->create_upload(bucket_, "b", "owner", {}, std::nullopt, std::nullopt)).value();
  ASSERT_TRUE(upload_part(abandoned.upload_id, 1, 4 * kMiB, 6).has_value());
  EXPECT_EQ(used(), base + 15 * kMiB);
  EXPECT_TRUE(run(store_->abort_upload(aborted.upload_id)).has_value());
  EXPECT_EQ(used(), base + 11 * kMiB);
  EXPECT_EQ(run(store_->abort_uploads_older_than(std::chrono::hours(1))).value(), 0U);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(run(store_->abort_uploads_older_than(std::chrono::milliseconds(1))).value(), 1U);
  EXPECT_EQ(used(), base + 7 * kMiB);
  EXPECT_EQ(store_->stats().pending_free_bytes, 0U);
  EXPECT_FALSE(store_->find_upload(abandoned.upload_id).value().has_value());
  run([&]() -> asio::awaitable<void> {
    reader.reset();
    co_return;
  }());
  EXPECT_EQ(get("ckpt").value().size(), 7 * kMiB);
}

TEST_P(StoreTest, RenameMovesWithoutCopying) {
  const Bytes data = test::pattern_bytes(3 * kMiB, 12);
  ASSERT_TRUE(put("from", data).has_value());
  ASSERT_TRUE(put("taken", test::pattern_bytes(10, 1)).has_value());
  const std::uint64_t before = used();
  // The check sees both objects inside the transaction (If-None-Match: * on the destination).
  auto no_overwrite = [](const ObjectRecord& source,
                         const std::optional<ObjectRecord>& target) -> Result<void> {
    EXPECT_EQ(source.key, "from");
    if (target) return errc::kPreconditionFailed;
    return {};
  };
  EXPECT_EQ(run(store_->rename_object(bucket_.id, "from", "taken", no_overwrite)).error(),
            errc::kPreconditionFailed);
  EXPECT_TRUE(get("taken").value() == test::pattern_bytes(10, 1));
  EXPECT_TRUE(run(store_->rename_object(bucket_.id, "from", "to", no_overwrite)).has_value());
  EXPECT_EQ(used(), before);
  EXPECT_EQ(get("from").error(), errc::kNotFound);
  EXPECT_TRUE(get("to").value() == data);
  EXPECT_EQ(run(store_->rename_object(bucket_.id, "nothing", "x", {})).error(), errc::kNotFound);
  // Replacing a destination frees its space (once no reader needs it).
  EXPECT_TRUE(run(store_->rename_object(bucket_.id, "to", "taken", {})).has_value());
  EXPECT_EQ(used(), before);
  EXPECT_TRUE(get("taken").value() == data);
  EXPECT_EQ(get("to").error(), errc::kNotFound);
}

// S3 Express appends: the new version keeps the extents it extends (no data copied), a reader
// of the old version still reads exactly it, and a stale base version loses.
TEST_P(StoreTest, AppendKeepsTheDataItExtends) {
  auto append = [&](const std::string& key, const Bytes& piece, std::int64_t base, bool has_base,
                    std::vector<ObjectPartRecord> parts) {
    return run([&, key, base, has_base, parts]() -> asio::awaitable<Result<ObjectRecord>> {
      H3_CO_TRY(auto w, co_await store_->create_writer(std::uint64_t{piece.size()}, !has_base));
      H3_CO_TRY(co_await w->write(piece));
      H3_CO_TRY(co_await w->finish());
      ObjectSpec spec;
      spec.etag = "appended-" + std::to_string(parts.size());
      co_return co_await store_->append_object(std::move(w), bucket_, key, base, has_base, spec,
                                               parts);
    }());
  };
  const Bytes first = test::pattern_bytes(5 * kMiB + 3, 60);
  auto base = put("log", first).value();
  const std::uint64_t used_first = used();
  const Bytes second = test::pattern_bytes(kMiB + 5, 61);
  std::unique_ptr<ObjectReader> old_reader;
  run([&]() -> asio::awaitable<void> {
    old_reader = (co_await store_->open_reader(bucket_.id, "log")).value();
  }());
  auto appended =
      append("log", second, base.id, false,
             {{1, 0, first.size(), std::nullopt}, {2, first.size(), second.size(), std::nullopt}});
  ASSERT_TRUE(appended.has_value()) << appended.error().message();
  EXPECT_EQ(appended->size_bytes, first.size() + second.size());
  EXPECT_EQ(appended->parts_count, 2U);
  EXPECT_EQ(used(), used_first + kMiB + 4096);  // only the new data took space
  Bytes whole = first;
  whole.insert(whole.end(), second.begin(), second.end());
  EXPECT_TRUE(get("log").value() == whole);
  auto tail = get("log", std::pair{std::uint64_t{first.size() - 2}, std::uint64_t{10}}).value();
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(),
                         whole.begin() + static_cast<std::ptrdiff_t>(first.size() - 2)));
  const auto table = run(store_->object_parts(appended->id)).value();
  ASSERT_EQ(table.size(), 2U);
  EXPECT_EQ(table[1].offset_bytes, first.size());
  run([&]() -> asio::awaitable<void> {  // the reader of the base version reads exactly it
    Bytes got;
    for (;;) {
      auto piece = (co_await old_reader->next()).value();
      if (piece.empty()) break;
      got.insert(got.end(), piece.begin(), piece.end());
    }
    EXPECT_TRUE(got == first);
    old_reader.reset();
  }());
  // A second append to the version that was replaced loses, and its data's space is back.
  EXPECT_EQ(append("log", second, base.id, false, {{3, 0, 1, std::nullopt}}).error(),
            errc::kPreconditionFailed);
  EXPECT_EQ(used(), used_first + kMiB + 4096);
  // Appending again keeps the part table; base 0 creates a key that does not exist, only.
  auto third = append("log", Bytes(10, std::byte{7}), appended->id, false,
                      {{3, whole.size(), 10, std::nullopt}});
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->parts_count, 3U);
  EXPECT_EQ(run(store_->object_parts(third->id)).value().size(), 3U);
  EXPECT_EQ(get("log").value().size(), whole.size() + 10);
  EXPECT_EQ(append("log", Bytes(10), 0, false, {}).error(), errc::kPreconditionFailed);
  auto created = append("new", Bytes(5000, std::byte{1}), 0, false, {});
  ASSERT_TRUE(created.has_value());
  EXPECT_EQ(created->parts_count, 0U);
  // An inline base: the caller rewrote it into the writer; the result may be inline again.
  auto small = put("small", test::pattern_bytes(100, 62)).value();
  Bytes both = test::pattern_bytes(100, 62);
  const Bytes more = test::pattern_bytes(50, 63);
  both.insert(both.end(), more.begin(), more.end());
  auto grown = append("small", both, small.id, true,
                      {{1, 0, 100, std::nullopt}, {2, 100, 50, std::nullopt}});
  ASSERT_TRUE(grown.has_value());
  EXPECT_EQ(grown->size_bytes, 150U);
  EXPECT_TRUE(get("small").value() == both);
  EXPECT_TRUE(store_->head(bucket_.id, "small").value()->inline_data.has_value());
  EXPECT_EQ(run(store_->object_parts(grown->id)).value().size(), 2U);
  // Deleting the appended object frees all of it.
  EXPECT_TRUE(run(store_->delete_object(bucket_.id, "log")).has_value());
  EXPECT_TRUE(run(store_->delete_object(bucket_.id, "new")).has_value());
  EXPECT_EQ(used(), used_first - (5 * kMiB + 4096));
}

// HEAD and GET answer from the metadata cache: every acknowledged change must be visible to
// the next lookup, from any worker, including the change from "no such key".
TEST_P(StoreTest, EveryAcknowledgedChangeIsVisibleToTheNextLookup) {
  auto head_etag = [&](const std::string& key, int worker) {
    return run(
        [&]() -> asio::awaitable<std::string> {
          auto found = store_->head(bucket_.id, key).value();
          co_return found ? found->etag : std::string("none");
        }(),
        worker);
  };
  EXPECT_EQ(head_etag("c", 1), "none");  // cached as absent
  const auto first = put("c", test::pattern_bytes(100, 1)).value();
  EXPECT_EQ(head_etag("c", 1), first.etag);
  EXPECT_TRUE(get("c").value() == test::pattern_bytes(100, 1));
  const auto second = put("c", test::pattern_bytes(200, 2)).value();  // inline overwrite
  EXPECT_EQ(head_etag("c", 1), second.etag);
  EXPECT_TRUE(get("c").value() == test::pattern_bytes(200, 2));

  ObjectSpec spec;
  spec.user_metadata = {{"color", "blue"}};
  ASSERT_TRUE(run(store_->replace_metadata(bucket_.id, "c", second.etag, spec)).has_value());
  auto replaced = store_->head(bucket_.id, "c").value();
  ASSERT_TRUE(replaced != nullptr);
  EXPECT_EQ(replaced->user_metadata, spec.user_metadata);

  EXPECT_EQ(head_etag("d", 1), "none");
  ASSERT_TRUE(run(store_->rename_object(bucket_.id, "c", "d", {})).has_value());
  EXPECT_EQ(head_etag("c", 1), "none");
  EXPECT_EQ(head_etag("d", 1), second.etag);
  EXPECT_TRUE(get("d").value() == test::pattern_bytes(200, 2));

  ASSERT_TRUE(run(store_->delete_object(bucket_.id, "d")).value().has_value());
  EXPECT_EQ(head_etag("d", 1), "none");
  EXPECT_EQ(get("d").error(), errc::kNotFound);

  // Readers on one worker hammering the key while another overwrites it: once a put is
  // acknowledged, no later lookup sees an older version.
  std::atomic<bool> stop{false};
  std::atomic<int> version{0};
  std::atomic<int> stale{0};
  auto reader = std::async(std::launch::async, [&] {
    while (!stop) {
      const int acknowledged = version.load();
      auto found = store_->head(bucket_.id, "r").value();
      const int seen = found ? static_cast<int>(found->size_bytes) : 0;
      if (seen < acknowledged) ++stale;
    }
  });
  for (int i = 1; i <= 300; ++i) {
    ASSERT_TRUE(put("r", test::pattern_bytes(static_cast<std::size_t>(i), 3)).has_value());
    version = i;
  }
  stop = true;
  reader.get();
  EXPECT_EQ(stale.load(), 0);
}

// A written object's record goes into the metadata cache as it is acknowledged: the HEADs that
// follow read no catalog row (a small object's first GET reads its bytes, the next ones not),
// and what they see is what the catalog holds (compared after a restart, which starts with an
// empty cache) — also when writers race on one key, whose last committed version must be the
// one cached.
TEST_P(StoreTest, WrittenObjectsAreReadBackFromTheMetadataCache) {
  ObjectSpec spec;
  spec.headers.content_type = "application/x-tar";
  spec.user_metadata = {{"shard", "7"}};
  spec.checksums.crc32 = "AAAAAA==";
  ASSERT_TRUE(run(put_async("small", test::pattern_bytes(100, 1), true, {}, spec)).has_value());
  ASSERT_TRUE(run(put_async("big", test::pattern_bytes(kMiB, 2), true, {}, spec)).has_value());
  std::vector<std::future<Result<ObjectRecord>>> racers;
  for (int w = 0; w < 4; ++w) {
    racers.push_back(std::async(std::launch::async, [&, w] {
      Result<ObjectRecord> last = errc::kNotFound;
      for (int i = 0; i < 40; ++i) {
        last = run(put_async("race",
                             test::pattern_bytes(static_cast<std::size_t>(50 + i),
                                                 static_cast<std::uint32_t>(w)),
                             true),
                   w % 2);
      }
      return last;
    }));
  }
  for (auto& r : racers) ASSERT_TRUE(r.get().has_value());

  const StoreStats before = store_->stats();
  std::map<std::string, ObjectRecord> cached;
  for (const char* key : {"small", "big", "race"})
    cached[key] = *store_->head(bucket_.id, key).value();
  StoreStats after = store_->stats();
  EXPECT_EQ(after.metadata_cache_misses, before.metadata_cache_misses);
  EXPECT_EQ(after.metadata_cache_hits, before.metadata_cache_hits + 3);
  EXPECT_GT(after.metadata_cache_entries, 0u);
  const Bytes small = get("small").value();
  const Bytes race = get("race").value();
  EXPECT_TRUE(get("small").value() == small);
  after = store_->stats();
  EXPECT_EQ(after.metadata_cache_misses, before.metadata_cache_misses + 2);
  EXPECT_EQ(after.metadata_cache_hits, before.metadata_cache_hits + 4);

  close();
  open();
  for (const auto& [key, c] : cached) {
    const auto stored = store_->head(bucket_.id, key).value();
    ASSERT_TRUE(stored != nullptr) << key;
    EXPECT_EQ(c.id, stored->id) << key;
    EXPECT_EQ(c.etag, stored->etag) << key;
    EXPECT_EQ(c.size_bytes, stored->size_bytes) << key;
    EXPECT_EQ(c.created_ms, stored->created_ms) << key;
    EXPECT_EQ(c.parts_count, stored->parts_count) << key;
    EXPECT_EQ(c.headers, stored->headers) << key;
    EXPECT_EQ(c.user_metadata, stored->user_metadata) << key;
    EXPECT_EQ(c.checksums, stored->checksums) << key;
  }
  EXPECT_TRUE(get("small").value() == small);
  EXPECT_TRUE(get("race").value() == race);
}

// The metadata cache stays within its bytes while written keys go through it: the least
// recently used records leave, each key's latest version is what a HEAD sees, and a deleted
// key is gone from it.
TEST_P(StoreTest, TheMetadataCacheKeepsToItsSizeAndToTheLatestVersions) {
  close();
  options_.metadata_cache_bytes = 64 * 1024;  // 4 KiB a shard: a few records each
  open();
  constexpr int kKeys = 400;
  std::map<std::string, ObjectRecord> latest;
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < kKeys; ++i) {
      const std::string key = "k" + std::to_string(i);
      latest[key] = put(key, test::pattern_bytes(static_cast<std::size_t>(10 + round),
                                                 static_cast<std::uint32_t>(i)))
                        .value();
    }
  }
  ASSERT_TRUE(run(store_->delete_object(bucket_.id, "k7")).has_value());
  latest.erase("k7");
  StoreStats stats = store_->stats();
  EXPECT_LE(stats.metadata_cache_used_bytes, stats.metadata_cache_capacity_bytes);
  EXPECT_GT(stats.metadata_cache_entries, 0u);
  EXPECT_LT(stats.metadata_cache_entries, static_cast<std::uint64_t>(kKeys))
      << "nothing was evicted";

  // The most recent writes are cached; the first ones were evicted and come from the catalog.
  const auto before = store_->stats();
  EXPECT_EQ(store_->head(bucket_.id, "k399").value()->id, latest["k399"].id);
  EXPECT_EQ(store_->stats().metadata_cache_hits, before.metadata_cache_hits + 1);
  EXPECT_EQ(store_->head(bucket_.id, "k0").value()->id, latest["k0"].id);
  EXPECT_EQ(store_->stats().metadata_cache_misses, before.metadata_cache_misses + 1);
  for (const auto& [key, record] : latest) {
    const auto head = store_->head(bucket_.id, key).value();
    ASSERT_TRUE(head != nullptr) << key;
    EXPECT_EQ(head->id, record.id) << key;
    EXPECT_EQ(head->size_bytes, 11u) << key;
  }
  EXPECT_EQ(store_->head(bucket_.id, "k7").value(), nullptr);
  stats = store_->stats();
  EXPECT_LE(stats.metadata_cache_used_bytes, stats.metadata_cache_capacity_bytes);
}

TEST_P(StoreTest, ListsThroughTheReaderThread) {
  for (const char* key : {"p/1", "p/2", "q"})
    ASSERT_TRUE(put(key, test::pattern_bytes(5, 1)).has_value());
  ListQuery q;
  q.delimiter = "/";
  auto page = run(store_->list_objects(bucket_.id, q)).value();
  ASSERT_EQ(page.objects.size(), 1U);
  EXPECT_EQ(page.common_prefixes, std::vector<std::string>{"p/"});
}

TEST_P(StoreTest, DataSurvivesARestart) {
  const Bytes big = test::pattern_bytes(9 * kMiB, 31);
  ASSERT_TRUE(put("big", big).has_value());
  ASSERT_TRUE(put("small", test::pattern_bytes(100, 32)).has_value());
  const std::uint64_t before = used();
  close();
  if (fault_) fault_->crash(FaultDevice::Crash::kLoseUnflushed);
  open();
  EXPECT_EQ(used(), before);
  EXPECT_TRUE(get("big").value() == big);
  EXPECT_TRUE(get("small").value() == test::pattern_bytes(100, 32));
}

// ---- write-back jobs ----------------------------------------------------------------------------

// The keys and versions of the bucket's write-back jobs, in acknowledgement order ("-" for a
// delete).
std::vector<std::pair<std::string, std::string>> queued(
    const std::vector<TierJob>& jobs, const std::map<std::int64_t, std::string>& names = {}) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const TierJob& j : jobs) {
    std::string what = "-";
    if (j.object_id) {
      const auto it = names.find(*j.object_id);
      what = it == names.end() ? std::to_string(*j.object_id) : it->second;
    }
    out.emplace_back(j.key, what);
  }
  return out;
}

TEST_P(StoreTest, ANewVersionsWriteBackJobIsItsRowUntilTheJobHoldsStateOfItsOwn) {
  ASSERT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kWriteback, "{}")).has_value());
  const auto n = put("n", test::pattern_bytes(300, 1)).value();
  // No job row: the version's own, in the same transaction, is the job (seq: the version's id).
  EXPECT_TRUE(run(store_->tier_jobs(bucket_.id, false)).value().empty());
  auto jobs = run(store_->tier_jobs(bucket_.id, true)).value();
  ASSERT_EQ(jobs.size(), 1U);
  EXPECT_EQ(jobs[0].key, "n");
  EXPECT_EQ(jobs[0].seq, n.id);
  EXPECT_EQ(jobs[0].object_id, n.id);
  EXPECT_EQ(jobs[0].size_bytes, 300U);
  EXPECT_EQ(jobs[0].first_ms, n.created_ms);
  EXPECT_EQ(jobs[0].due_ms, n.created_ms + options_.tier_delay.count());
  EXPECT_EQ(store_->tier_owed_bytes(), 300U);
  auto backlog = run(store_->tier_backlog()).value();
  ASSERT_EQ(backlog.size(), 1U);
  EXPECT_EQ(std::make_tuple(backlog[0].jobs, backlog[0].bytes, backlog[0].uploads),
            std::make_tuple(1U, 300U, 1U));
  EXPECT_TRUE(run(store_->due_tier_jobs(jobs[0].due_ms - 1, 10)).value().empty());
  ASSERT_EQ(run(store_->due_tier_jobs(jobs[0].due_ms, 10)).value().size(), 1U);
  // A restart counts it as owed, from the catalog.
  close();
  open();
  EXPECT_EQ(store_->tier_owed_bytes(), 300U);

  // A retry gives it a row, with the same seq; nothing more is owed.
  EXPECT_TRUE(run(store_->defer_tier_job(jobs[0], jobs[0].due_ms + 1000, "503", false)).value());
  jobs = run(store_->tier_jobs(bucket_.id, false)).value();
  ASSERT_EQ(jobs.size(), 1U);
  EXPECT_EQ(jobs[0].seq, n.id);
  EXPECT_EQ(jobs[0].attempts, 1U);
  EXPECT_EQ(run(store_->tier_jobs(bucket_.id, true)).value().size(), 1U);
  EXPECT_EQ(store_->tier_owed_bytes(), 300U);

  // A newer version replacing one whose upload may be under way takes a row, which keeps the
  // older one's ETag and time.
  const auto m1 = put("m", test::pattern_bytes(10, 2)).value();
  const auto m2 = put("m", test::pattern_bytes(20, 3)).value();
  jobs = run(store_->tier_jobs(bucket_.id, false)).value();
  ASSERT_EQ(jobs.size(), 2U);
  EXPECT_EQ(jobs[1].object_id, m2.id);
  EXPECT_EQ(jobs[1].prior_etags, m1.etag + " ");
  EXPECT_EQ(jobs[1].first_ms, m1.created_ms);
  EXPECT_EQ(store_->tier_owed_bytes(), 300U + 20U);

  // An implied job's upload confirmed: the version is upstream too, owing nothing.
  const auto p = put("p", test::pattern_bytes(40, 4)).value();
  TierJob p_job = run(store_->tier_jobs(bucket_.id, true)).value().back();
  ASSERT_EQ(p_job.seq, p.id);
  EXPECT_TRUE(run(store_->finish_tier_job(p_job, TierSeen{p.etag, p.etag})).value());
  EXPECT_EQ(store_->head(bucket_.id, "p").value()->tier_state, TierState::kLocalAndUpstream);
  EXPECT_EQ(store_->tier_owed_bytes(), 300U + 20U);
  EXPECT_FALSE(run(store_->finish_tier_job(p_job, TierSeen{p.etag, p.etag})).value());
  // ... and a version written over an uploaded one is implied again.
  const auto p2 = put("p", test::pattern_bytes(50, 5)).value();
  EXPECT_EQ(run(store_->tier_jobs(bucket_.id, false)).value().size(), 2U);
  p_job = run(store_->tier_jobs(bucket_.id, true)).value().back();
  EXPECT_EQ(p_job.seq, p2.id);
  EXPECT_EQ(store_->tier_owed_bytes(), 300U + 20U + 50U);
  // Ended without an upload of its own (another writer's version kept upstream): it is owed no
  // more, and stays here, not to be sent again.
  EXPECT_TRUE(run(store_->finish_tier_job(p_job, TierSeen{"theirs", ""})).value());
  EXPECT_EQ(store_->head(bucket_.id, "p").value()->tier_state, TierState::kLocal);
  EXPECT_EQ(run(store_->tier_jobs(bucket_.id, true)).value().size(), 2U);
  EXPECT_EQ(store_->tier_owed_bytes(), 300U + 20U);

  // A flush makes every job of its span a row, due at once.
  const auto f = put("f/1", test::pattern_bytes(60, 6)).value();
  const std::int64_t last = run(store_->expedite_tier_jobs(bucket_.id, {"f/", false})).value();
  EXPECT_EQ(last, f.id);
  jobs = run(store_->tier_jobs(bucket_.id, false)).value();
  ASSERT_EQ(jobs.size(), 3U);
  EXPECT_EQ(jobs[2].key, "f/1");
  EXPECT_LE(jobs[2].due_ms, now_ms());
  EXPECT_EQ(store_->tier_owed_bytes(), 300U + 20U + 60U);

  // Deleted before its upload: the delete's job replaces it.
  const auto g = put("g", test::pattern_bytes(70, 7)).value();
  ASSERT_TRUE(run(store_->delete_object(bucket_.id, "g")).value().has_value());
  jobs = run(store_->tier_jobs(bucket_.id, true)).value();
  ASSERT_EQ(jobs.back().key, "g");
  EXPECT_FALSE(jobs.back().object_id.has_value());
  EXPECT_EQ(jobs.back().prior_etags, g.etag + " ");
  EXPECT_EQ(store_->tier_owed_bytes(), 300U + 20U + 60U);

  // The version in the way is looked at however it goes, found by the new one's insert or
  // deleted first (a write with If-Match): not upstream, the job takes a row...
  const auto h1 = put("h", test::pattern_bytes(80, 8)).value();
  WriteCondition match;
  match.if_match = h1.etag;
  const auto h2 = put("h", test::pattern_bytes(90, 9), true, match).value();
  jobs = run(store_->tier_jobs(bucket_.id, false)).value();
  ASSERT_EQ(jobs.back().key, "h");
  EXPECT_EQ(jobs.back().object_id, h2.id);
  EXPECT_EQ(jobs.back().prior_etags, h1.etag + " ");
  EXPECT_EQ(store_->tier_owed_bytes(), 300U + 20U + 60U + 90U);
  // ... upstream, it is implied.
  EXPECT_TRUE(run(store_->finish_tier_job(jobs.back(), TierSeen{h2.etag, h2.etag})).value());
  match.if_match = h2.etag;
  const auto h3 = put("h", test::pattern_bytes(100, 10), true, match).value();
  EXPECT_NE(run(store_->tier_jobs(bucket_.id, false)).value().back().key, "h");
  EXPECT_EQ(run(store_->tier_jobs(bucket_.id, true)).value().back().seq, h3.id);
  EXPECT_EQ(store_->tier_owed_bytes(), 300U + 20U + 60U + 100U);
  // A write its condition refuses queues nothing and owes nothing: on its way to the refusal it
  // made the job of the version in its way (h3, not upstream) a row, undone with it.
  WriteCondition create_only;
  create_only.if_none_match_any = true;
  EXPECT_EQ(put("h", test::pattern_bytes(110, 11), true, create_only).error(),
            errc::kPreconditionFailed);
  jobs = run(store_->tier_jobs(bucket_.id, true)).value();
  EXPECT_EQ(jobs.back().seq, h3.id);
  EXPECT_EQ(jobs.back().object_id, h3.id);
  EXPECT_NE(run(store_->tier_jobs(bucket_.id, false)).value().back().key, "h");
  EXPECT_EQ(store_->tier_owed_bytes(), 300U + 20U + 60U + 100U);
}

TEST_P(StoreTest, EveryChangeInAWriteBackBucketQueuesItsJobInTheSameTransaction) {
  ASSERT_TRUE(put("before", test::pattern_bytes(10, 1)).has_value());
  ASSERT_TRUE(
      run(store_->set_bucket_tier("b", BucketTier::kWriteback, R"({"upstream":"g"})")).has_value());
  // What the bucket held before it was bound goes up too.
  const auto bound_jobs = run(store_->tier_jobs(bucket_.id, true)).value();
  ASSERT_EQ(bound_jobs.size(), 1U);
  EXPECT_EQ(bound_jobs[0].key, "before");
  EXPECT_EQ(bound_jobs[0].size_bytes, 10U);
  EXPECT_EQ(store_->find_bucket("b").value()->tier, BucketTier::kWriteback);
  const auto a1 = put("a", test::pattern_bytes(5000, 2)).value();
  const auto c = put("c", test::pattern_bytes(100, 3)).value();
  ASSERT_TRUE(run(store_->delete_object(bucket_.id, "before")).value().has_value());
  ASSERT_TRUE(run(store_->rename_object(bucket_.id, "c", "d", {})).has_value());
  std::map<std::int64_t, std::string> names{{a1.id, "a1"}, {c.id, "c"}};
  auto jobs = run(store_->tier_jobs(bucket_.id, true)).value();
  using Q = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(queued(jobs, names), (Q{{"a", "a1"}, {"before", "-"}, {"c", "-"}, {"d", "c"}}));
  EXPECT_EQ(jobs[0].size_bytes, 5000U);
  EXPECT_EQ(jobs[3].size_bytes, 100U);
  EXPECT_EQ(jobs[3].source_key, "c");  // renamed: the upstream may hold its data under c
  EXPECT_EQ(jobs[0].source_key, "");
  const std::int64_t first_ms = jobs[0].first_ms;
  EXPECT_GE(jobs[0].due_ms, first_ms + options_.tier_delay.count());

  // A newer change of a key replaces its pending job: only the final state goes up, in the
  // order of its own acknowledgement, and the dirty age counts from the oldest change.
  const auto a2 = put("a", test::pattern_bytes(7000, 4)).value();
  names[a2.id] = "a2";
  jobs = run(store_->tier_jobs(bucket_.id, true)).value();
  EXPECT_EQ(queued(jobs, names), (Q{{"before", "-"}, {"c", "-"}, {"d", "c"}, {"a", "a2"}}));
  EXPECT_EQ(jobs[3].first_ms, first_ms);
  EXPECT_EQ(jobs[3].size_bytes, 7000U);
  const auto backlog = run(store_->tier_backlog()).value();
  ASSERT_EQ(backlog.size(), 1U);
  EXPECT_EQ(backlog[0].bucket_id, bucket_.id);
  EXPECT_EQ(backlog[0].jobs, 4U);
  EXPECT_EQ(backlog[0].bytes, 7100U);
  EXPECT_LE(backlog[0].oldest_first_ms, first_ms);  // "before" is owed since the binding
  // By action: two deletes ("before", "c"), an upload ("a") and a copy of what c holds ("d").
  EXPECT_EQ(std::make_tuple(backlog[0].uploads, backlog[0].copies, backlog[0].deletes),
            std::make_tuple(1U, 1U, 2U));
  // The count kept in memory for admission follows the queue: replaced jobs owe nothing more.
  EXPECT_EQ(store_->tier_owed_bytes(), 7100U);

  // Nothing is due before the delay.
  EXPECT_TRUE(run(store_->due_tier_jobs(first_ms, 100)).value().empty());
  const std::int64_t later = jobs[3].due_ms;
  ASSERT_EQ(run(store_->due_tier_jobs(later, 100)).value().size(), 4U);

  // A job replaced while it was uploaded does not leave: the newer one stays queued.
  const TierJob old_a = jobs[3];
  const auto a3 = put("a", test::pattern_bytes(10, 5)).value();
  EXPECT_FALSE(run(store_->finish_tier_job(old_a, std::nullopt)).value());
  EXPECT_EQ(run(store_->tier_jobs(bucket_.id, true)).value().back().object_id, a3.id);
  EXPECT_EQ(store_->head(bucket_.id, "a").value()->tier_state, TierState::kLocal);

  // A confirmed upload leaves the queue and marks its version as upstream too.
  const TierJob current_a = run(store_->tier_jobs(bucket_.id, true)).value().back();
  EXPECT_EQ(store_->tier_owed_bytes(), 100U + 10U);
  EXPECT_TRUE(run(store_->finish_tier_job(current_a, TierSeen{a3.etag, a3.etag})).value());
  EXPECT_EQ(store_->head(bucket_.id, "a").value()->tier_state, TierState::kLocalAndUpstream);
  EXPECT_EQ(store_->tier_owed_bytes(), 100U);
  const auto seen = run(store_->tier_seen(bucket_.id, "a")).value();
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->etag, a3.etag);
  EXPECT_EQ(seen->ours, a3.etag);

  // Failures: retried later, or parked (kept, never due) with the error.
  const TierJob d = run(store_->tier_jobs(bucket_.id, true)).value().back();
  ASSERT_EQ(d.key, "d");
  EXPECT_TRUE(run(store_->defer_tier_job(d, later + 1000, "503 SlowDown", false)).value());
  auto deferred = run(store_->tier_jobs(bucket_.id, true)).value().back();
  EXPECT_EQ(deferred.attempts, 1U);
  EXPECT_EQ(deferred.last_error, "503 SlowDown");
  EXPECT_EQ(queued(run(store_->due_tier_jobs(later, 100)).value()),
            (Q{{"before", "-"}, {"c", "-"}}));
  EXPECT_TRUE(run(store_->defer_tier_job(deferred, later, "403 AccessDenied", true)).value());
  EXPECT_EQ(run(store_->due_tier_jobs(later + 5000, 100)).value().size(), 2U);
  EXPECT_EQ(run(store_->tier_backlog()).value().at(0).parked, 1U);
  const auto parked = run(store_->parked_tier_jobs(bucket_.id, 10)).value();
  ASSERT_EQ(parked.size(), 1U);
  EXPECT_EQ(std::make_pair(parked[0].key, parked[0].last_error),
            std::make_pair(std::string("d"), std::string("403 AccessDenied")));
  EXPECT_TRUE(run(store_->parked_tier_jobs(bucket_.id, 0)).value().empty());
  EXPECT_EQ(run(store_->unpark_tier_jobs()).value(), 1U);
  EXPECT_TRUE(run(store_->parked_tier_jobs(bucket_.id, 10)).value().empty());
  EXPECT_EQ(run(store_->tier_backlog()).value().at(0).parked, 0U);
  EXPECT_EQ(run(store_->due_tier_jobs(later + 5000, 100)).value().size(), 3U);

  // A renamed version is not upstream under its new name.
  ASSERT_TRUE(run(store_->rename_object(bucket_.id, "a", "e", {})).has_value());
  EXPECT_EQ(store_->head(bucket_.id, "e").value()->tier_state, TierState::kLocal);

  EXPECT_EQ(store_->tier_owed_bytes(), 100U + 10U);  // d's version, and a's moved to e

  // The binding and the queue survive a restart; an unbound bucket queues nothing.
  close();
  open();
  EXPECT_EQ(store_->tier_owed_bytes(), 100U + 10U);
  EXPECT_EQ(store_->find_bucket("b").value()->tier, BucketTier::kWriteback);
  EXPECT_EQ(store_->find_bucket("b").value()->upstream, R"({"upstream":"g"})");
  EXPECT_EQ(run(store_->tier_jobs(bucket_.id, true)).value().size(), 5U);
  ASSERT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kNone, "")).has_value());
  ASSERT_TRUE(put("f", test::pattern_bytes(10, 6)).has_value());
  EXPECT_EQ(run(store_->tier_jobs(bucket_.id, true)).value().size(), 5U);
  EXPECT_EQ(run(store_->set_bucket_tier("nope", BucketTier::kNone, "")).error(), errc::kNotFound);
}

// A job's seq comes from the id sequence and may be the last id given out: a delete's job has no
// row anywhere else. A restart starts the sequence after it, so a later job never takes it.
TEST_P(StoreTest, ARestartNeverGivesAJobsSeqOutAgain) {
  ASSERT_TRUE(
      run(store_->set_bucket_tier("b", BucketTier::kWriteback, R"({"upstream":"g"})")).has_value());
  ASSERT_TRUE(put("gone", test::pattern_bytes(10, 1)).has_value());
  ASSERT_TRUE(put("kept", test::pattern_bytes(20, 2)).has_value());
  ASSERT_TRUE(run(store_->delete_object(bucket_.id, "gone")).value().has_value());
  const auto before = run(store_->tier_jobs(bucket_.id, true)).value();
  ASSERT_EQ(before.size(), 2U);
  close();
  open();
  // Each of these takes two ids (its version and its job's seq): the first two would reach the
  // delete's seq from a sequence that restarted after the last version.
  ASSERT_TRUE(put("new1", test::pattern_bytes(30, 3)).has_value());
  ASSERT_TRUE(put("new2", test::pattern_bytes(40, 4)).has_value());
  const auto after = run(store_->tier_jobs(bucket_.id, true)).value();
  std::vector<std::string> keys;
  std::set<std::int64_t> seqs;
  for (const TierJob& j : after) {
    keys.push_back(j.key);
    seqs.insert(j.seq);
  }
  EXPECT_EQ(keys, (std::vector<std::string>{"kept", "gone", "new1", "new2"}));
  EXPECT_EQ(seqs.size(), 4U);
  EXPECT_EQ(after[1].seq, before[1].seq);
  EXPECT_GT(after[2].seq, before[1].seq);
}

// A job that waits for others moves on in the due order, its attempts untouched; one replaced or
// parked meanwhile is left as it is.
TEST_P(StoreTest, PostponedJobsMoveOnAndKeepTheirAttempts) {
  ASSERT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kWriteback, "{}")).has_value());
  ASSERT_TRUE(put("a", test::pattern_bytes(10, 1)).has_value());
  ASSERT_TRUE(put("b", test::pattern_bytes(10, 2)).has_value());
  ASSERT_TRUE(put("c", test::pattern_bytes(10, 3)).has_value());
  const auto jobs = run(store_->tier_jobs(bucket_.id, true)).value();
  ASSERT_EQ(jobs.size(), 3U);
  ASSERT_TRUE(run(store_->defer_tier_job(jobs[0], jobs[0].due_ms, "503 SlowDown", false)).value());
  ASSERT_TRUE(run(store_->defer_tier_job(jobs[2], jobs[2].due_ms, "HTTP 403", true)).value());
  ASSERT_TRUE(put("b", test::pattern_bytes(10, 4)).has_value());  // replaces b's job
  const std::int64_t later = jobs[2].due_ms + 60'000;
  ASSERT_TRUE(run(store_->postpone_tier_jobs(jobs, later)).has_value());
  const auto after = run(store_->tier_jobs(bucket_.id, true)).value();
  ASSERT_EQ(after.size(), 3U);
  EXPECT_EQ(after[0].key, "a");
  EXPECT_EQ(after[0].due_ms, later);
  EXPECT_EQ(after[0].attempts, 1U);
  EXPECT_EQ(after[0].last_error, "503 SlowDown");
  EXPECT_EQ(after[1].key, "c");  // parked: not due again by a postponement
  EXPECT_EQ(after[1].due_ms, jobs[2].due_ms);
  EXPECT_TRUE(after[1].parked);
  EXPECT_EQ(after[2].key, "b");  // the newer change's job
  EXPECT_NE(after[2].due_ms, later);
}

TEST_P(StoreTest, AnUpstreamUploadAndItsPartsLastAsLongAsItsJob) {
  ASSERT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kWriteback, "{}")).has_value());
  ASSERT_TRUE(put("big", test::pattern_bytes(3000, 1)).has_value());
  TierJob job = run(store_->tier_jobs(bucket_.id, true)).value().at(0);
  EXPECT_TRUE(job.upload_id.empty());
  ASSERT_TRUE(run(store_->set_tier_upload(job, "up-1")).value());
  ASSERT_TRUE(run(store_->add_tier_part(job, {2, 1000, "e2"})).value());
  ASSERT_TRUE(run(store_->add_tier_part(job, {1, 1000, "e1"})).value());
  // Kept across a restart, with the parts in order.
  close();
  open();
  job = run(store_->tier_jobs(bucket_.id, true)).value().at(0);
  EXPECT_EQ(job.upload_id, "up-1");
  auto parts = run(store_->tier_parts(job.seq)).value();
  ASSERT_EQ(parts.size(), 2U);
  EXPECT_EQ(parts[0].part_number, 1U);
  EXPECT_EQ(parts[0].size_bytes, 1000U);
  EXPECT_EQ(parts[1].etag, "e2");
  EXPECT_EQ(run(store_->tier_upload_ids()).value(), std::vector<std::string>{"up-1"});
  // Forgotten ("" ), its parts go too.
  ASSERT_TRUE(run(store_->set_tier_upload(job, "")).value());
  EXPECT_TRUE(run(store_->tier_parts(job.seq)).value().empty());
  EXPECT_TRUE(run(store_->tier_upload_ids()).value().empty());
  // A newer change of the key replaces the job: the old upload is no job's any more, its parts
  // are gone, and nothing more can be recorded for it.
  ASSERT_TRUE(run(store_->set_tier_upload(job, "up-2")).value());
  ASSERT_TRUE(run(store_->add_tier_part(job, {1, 1000, "e1"})).value());
  ASSERT_TRUE(put("big", test::pattern_bytes(4000, 2)).has_value());
  EXPECT_TRUE(run(store_->tier_parts(job.seq)).value().empty());
  EXPECT_TRUE(run(store_->tier_upload_ids()).value().empty());
  EXPECT_FALSE(run(store_->set_tier_upload(job, "up-3")).value());
  EXPECT_FALSE(run(store_->add_tier_part(job, {2, 1000, "e2"})).value());
  // The job's end takes its parts with it.
  const TierJob newer = run(store_->tier_jobs(bucket_.id, true)).value().at(0);
  ASSERT_TRUE(run(store_->set_tier_upload(newer, "up-4")).value());
  ASSERT_TRUE(run(store_->add_tier_part(newer, {1, 4000, "e"})).value());
  ASSERT_TRUE(run(store_->finish_tier_job(newer, std::nullopt)).value());
  EXPECT_TRUE(run(store_->tier_parts(newer.seq)).value().empty());
}

TEST_P(StoreTest, ExpeditedJobsAreDueNowAndWhatIsOwedIsCountedUpToASeq) {
  ASSERT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kWriteback, "{}")).has_value());
  ASSERT_TRUE(put("ckpt/a", test::pattern_bytes(10, 1)).has_value());
  ASSERT_TRUE(put("ckpt/b", test::pattern_bytes(10, 2)).has_value());
  ASSERT_TRUE(put("ckpt-other", test::pattern_bytes(10, 3)).has_value());
  const std::int64_t now = now_ms();
  EXPECT_TRUE(run(store_->due_tier_jobs(now, 10)).value().empty());  // the coalescing delay
  bool woken = false;
  store_->set_tier_wake([&woken] { woken = true; });
  const std::int64_t last = run(store_->expedite_tier_jobs(bucket_.id, {"ckpt/", false})).value();
  EXPECT_TRUE(woken);
  const auto due = run(store_->due_tier_jobs(now_ms(), 10)).value();
  ASSERT_EQ(due.size(), 2U);  // the prefix's, not "ckpt-other"
  EXPECT_EQ(due[1].seq, last);
  EXPECT_EQ(run(store_->tier_owed(bucket_.id, {"ckpt/", false}, last)).value().jobs, 2U);
  EXPECT_EQ(run(store_->tier_owed(bucket_.id, {"ckpt/a", true}, last)).value().jobs, 1U);
  EXPECT_EQ(run(store_->tier_owed(bucket_.id, {"ckpt", true}, last)).value().jobs, 0U);
  // A change made after the wait began is not waited for; a parked one is counted apart.
  ASSERT_TRUE(put("ckpt/c", test::pattern_bytes(10, 4)).has_value());
  EXPECT_EQ(run(store_->tier_owed(bucket_.id, {"ckpt/", false}, last)).value().jobs, 2U);
  ASSERT_TRUE(run(store_->defer_tier_job(due[0], now, "HTTP 403", true)).value());
  const TierOwed owed = run(store_->tier_owed(bucket_.id, {"ckpt/", false}, last)).value();
  EXPECT_EQ(owed.parked, 1U);
  EXPECT_EQ(owed.parked_error, "HTTP 403");
  ASSERT_TRUE(run(store_->finish_tier_job(due[1], std::nullopt)).value());
  EXPECT_EQ(run(store_->tier_owed(bucket_.id, {"ckpt/", false}, last)).value().jobs, 1U);
  // Nothing owed: 0.
  EXPECT_EQ(run(store_->expedite_tier_jobs(bucket_.id, {"none/", false})).value(), 0);
}

// The data of `stub` (an evicted version) written again, as a read-through does.
asio::awaitable<Result<ObjectRecord>> fill_async(ObjectStore& store, ObjectRecord stub,
                                                 Bytes data) {
  H3_CO_TRY(auto writer, co_await store.create_writer(data.size(), /*for_part=*/true));
  H3_CO_TRY(co_await writer->write(data));
  H3_CO_TRY(co_await writer->finish());
  co_return co_await store.fill_object(std::move(writer), std::move(stub));
}

TEST_P(StoreTest, ALostDeviceLeavesWhatTheUpstreamHoldsEvictedAndNamesTheRestLost) {
  if (fault_) GTEST_SKIP() << "recover opens the device file";
  ASSERT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kWriteback, "{}")).has_value());
  const ObjectRecord clean = put("clean", test::pattern_bytes(kMiB, 51)).value();
  for (const TierJob& job : run(store_->tier_jobs(bucket_.id, true)).value())
    ASSERT_TRUE(run(store_->finish_tier_job(job, TierSeen{clean.etag, clean.etag})).value());
  const ObjectRecord dirty = put("dirty", test::pattern_bytes(kMiB, 52)).value();
  const Bytes small = test::pattern_bytes(100, 53);  // inline: its data is in the catalog
  ASSERT_TRUE(put("small", small).has_value());
  close();
  const std::string device = options_.data_dir + "/device.img";
  std::filesystem::remove(device);
  EXPECT_THROW(recover_store(options_), std::runtime_error);  // never a device of its own making
  std::ofstream(device).close();
  std::filesystem::resize_file(device, 256 * kMiB);               // a new device: sparse, all zeros
  EXPECT_THROW(ObjectStore::open(options_), std::runtime_error);  // not by itself

  const DeviceLoss loss = recover_store(options_);
  EXPECT_EQ(loss.evicted, 1U);
  EXPECT_EQ(loss.evicted_bytes, kMiB);
  ASSERT_EQ(loss.lost.size(), 1U);
  EXPECT_EQ(loss.lost[0].key, "dirty");
  EXPECT_EQ(loss.lost[0].etag, dirty.etag);
  EXPECT_THROW(recover_store(options_), std::runtime_error);  // the device is the store's now
  open();
  EXPECT_EQ(store_->head(bucket_.id, "clean").value()->tier_state, TierState::kUpstreamOnly);
  EXPECT_EQ(store_->head(bucket_.id, "dirty").value()->tier_state, TierState::kLost);
  EXPECT_EQ(get("small").value(), small);
  EXPECT_EQ(get("dirty").error(), errc::kLost);
  EXPECT_EQ(run(store_->rename_object(bucket_.id, "dirty", "elsewhere", {})).error(), errc::kLost);
  // (The small one's upload is still owed, and can still be made.)
  const auto jobs = run(store_->tier_jobs(bucket_.id, true)).value();
  ASSERT_EQ(jobs.size(), 2U);
  for (const TierJob& job : jobs) {
    EXPECT_EQ(job.parked, job.key == "dirty") << job.key;
    EXPECT_EQ(job.last_error, job.key == "dirty" ? kLostCause : "") << job.key;
  }

  // Settled only while the key still holds that lost version; then the job goes with it.
  EXPECT_EQ(run(store_->settle_lost(bucket_, "dirty", clean.id, std::nullopt, {})).error(),
            errc::kPreconditionFailed);
  EXPECT_EQ(run(store_->settle_lost(bucket_, "dirty", dirty.id, std::nullopt, {})).value(),
            std::nullopt);
  EXPECT_EQ(store_->head(bucket_.id, "dirty").value(), nullptr);
  const auto left = run(store_->tier_jobs(bucket_.id, true)).value();
  ASSERT_EQ(left.size(), 1U);
  EXPECT_EQ(left[0].key, "small");
}

TEST_P(StoreTest, EvictionKeepsTheRecordAndAFillBringsTheDataBack) {
  ASSERT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kWriteback, "{}")).has_value());
  const Bytes data = test::pattern_bytes(3 * kMiB + 5, 31);
  std::map<std::string, ObjectRecord> put_as;
  put_as["e/k"] = put("e/k", data).value();
  put_as["e/owed"] = put("e/owed", test::pattern_bytes(kMiB, 32)).value();
  put_as["e/small"] = put("e/small", test::pattern_bytes(100, 33)).value();  // inline
  put_as["f/k"] = put("f/k", test::pattern_bytes(kMiB, 34)).value();
  put_as["e/src"] = put("e/src", test::pattern_bytes(kMiB, 36)).value();
  put_as["e/held"] = put("e/held", test::pattern_bytes(kMiB, 37)).value();
  // All but one are upstream.
  for (const TierJob& job : run(store_->tier_jobs(bucket_.id, true)).value()) {
    if (job.key == "e/owed") continue;
    const std::string& etag = put_as.at(job.key).etag;
    ASSERT_TRUE(run(store_->finish_tier_job(job, TierSeen{etag, etag})).value());
  }
  // A queued copy of e/src: its job may fall back to sending e/src's data from here.
  storage::ObjectSpec copied;
  copied.copied_from = "e/src";
  ASSERT_TRUE(
      run(put_async("f/copy", test::pattern_bytes(kMiB, 36), true, {}, copied)).has_value());
  // A write-through PUT of e/held under way: its job would bring the upstream back to the
  // version here, from its data.
  ASSERT_TRUE(run(store_->hold_tier_key(bucket_.id, "e/held", "next-etag")).value().has_value());

  // Only what is upstream and has extents goes, under the prefix only; its record stays.
  const std::uint64_t before = used();
  const Evicted evicted = run(store_->evict_objects(bucket_.id, {"e/", false})).value();
  EXPECT_EQ(evicted.objects, 1U);
  EXPECT_EQ(evicted.bytes, data.size());
  EXPECT_LE(used() + data.size(), before);
  const auto stub = store_->head(bucket_.id, "e/k").value();
  ASSERT_TRUE(stub);
  EXPECT_EQ(stub->tier_state, TierState::kUpstreamOnly);
  EXPECT_EQ(stub->etag, put_as["e/k"].etag);
  EXPECT_EQ(stub->size_bytes, data.size());
  EXPECT_EQ(get("e/k").error(), errc::kUnavailable);
  EXPECT_TRUE(get("e/owed").has_value());
  EXPECT_TRUE(get("e/src").has_value());
  EXPECT_TRUE(get("e/held").has_value());
  EXPECT_TRUE(get("e/small").has_value());
  EXPECT_TRUE(get("f/k").has_value());
  EXPECT_EQ(run(store_->evict_objects(bucket_.id, {"e/", false})).value().objects, 0U);
  // What would need its data here again is refused: a rename (uploaded anew), a metadata
  // replacement (its job may send the data), an append (keeps it).
  EXPECT_EQ(run(store_->rename_object(bucket_.id, "e/k", "e/k2", {})).error(), errc::kUnavailable);
  EXPECT_EQ(run(store_->replace_metadata(bucket_.id, "e/k", stub->etag, {})).error(),
            errc::kUnavailable);

  // Not the stub's size: refused. Its data: local again, the same version to clients (ETag,
  // Last-Modified) under a new version id.
  EXPECT_EQ(run(fill_async(*store_, *stub, test::pattern_bytes(100, 1))).error(),
            errc::kInvalidArgument);
  const auto filled = run(fill_async(*store_, *stub, data)).value();
  EXPECT_NE(filled.id, stub->id);
  EXPECT_EQ(filled.etag, stub->etag);
  EXPECT_EQ(filled.created_ms, stub->created_ms);
  EXPECT_EQ(store_->head(bucket_.id, "e/k").value()->tier_state, TierState::kLocalAndUpstream);
  EXPECT_TRUE(get("e/k").value() == data);
  // A fill of a stub that is no longer the key's version is refused: the newer one stays.
  ASSERT_EQ(run(store_->evict_objects(bucket_.id, {"e/k", true})).value().objects, 1U);
  const auto stub2 = store_->head(bucket_.id, "e/k").value();
  const Bytes newer = test::pattern_bytes(2000, 35);
  ASSERT_TRUE(put("e/k", newer).has_value());
  EXPECT_EQ(run(fill_async(*store_, *stub2, data)).error(), errc::kPreconditionFailed);
  EXPECT_TRUE(get("e/k").value() == newer);

  // Evicted versions stay evicted across a restart.
  ASSERT_EQ(run(store_->evict_objects(bucket_.id, {"f/", false})).value().objects, 1U);
  close();
  open();
  EXPECT_EQ(store_->head(bucket_.id, "f/k").value()->tier_state, TierState::kUpstreamOnly);
  EXPECT_EQ(get("f/k").error(), errc::kUnavailable);
}

// `data` kept as chunk `index` of the evicted `version`, as a ranged read-through does.
asio::awaitable<Result<bool>> keep_chunk_async(ObjectStore& store, ObjectRecord version,
                                               std::uint32_t index, Bytes data) {
  H3_CO_TRY(auto writer, co_await store.create_writer(data.size(), /*for_part=*/true));
  H3_CO_TRY(co_await writer->write(data));
  H3_CO_TRY(co_await writer->finish());
  co_return co_await store.keep_chunk(std::move(writer), std::move(version), index);
}

asio::awaitable<Result<Bytes>> read_chunk_async(ObjectStore& store, ObjectRecord version,
                                                std::uint32_t index) {
  H3_CO_TRY(auto reader, co_await store.open_chunk_reader(std::move(version), index));
  co_return co_await read_all(*reader);
}

// Chunk `index` of `data`.
Bytes chunk_of(const Bytes& data, std::uint32_t index) {
  const std::size_t begin = index * kTierChunkBytes;
  const std::size_t end = std::min<std::size_t>(begin + kTierChunkBytes, data.size());
  return {data.begin() + static_cast<std::ptrdiff_t>(begin),
          data.begin() + static_cast<std::ptrdiff_t>(end)};
}

// The indexes of the chunks kept of version `id`.
std::vector<std::uint32_t> kept_indexes(ObjectStore& store, std::int64_t id) {
  std::vector<std::uint32_t> out;
  for (const ChunkRecord& c : store.object_chunks(id, 0, UINT32_MAX, 100).value()) {
    out.push_back(c.index);
  }
  return out;
}

TEST_P(StoreTest, ChunksOfAnEvictedVersionAreKeptReadBackAndFreedWithIt) {
  const Bytes data = test::pattern_bytes(2 * kTierChunkBytes + 3 * kMiB + 3, 51);
  const ObjectRecord stub = evicted_stub("p/k", data);
  auto chunk = [&](std::uint32_t index) { return chunk_of(data, index); };
  auto indexes = [&](std::int64_t id) { return kept_indexes(*store_, id); };

  // Only a chunk's own size; only once.
  EXPECT_EQ(run(keep_chunk_async(*store_, stub, 1, chunk(2))).error(), errc::kInvalidArgument);
  const std::uint64_t before = used();
  EXPECT_TRUE(run(keep_chunk_async(*store_, stub, 1, chunk(1))).value());
  EXPECT_FALSE(run(keep_chunk_async(*store_, stub, 1, chunk(1))).value());
  EXPECT_TRUE(run(keep_chunk_async(*store_, stub, 2, chunk(2))).value());
  EXPECT_EQ(used(), before + kTierChunkBytes + 3 * kMiB + 4096);  // the duplicate's space is back
  EXPECT_EQ(indexes(stub.id), (std::vector<std::uint32_t>{1, 2}));
  EXPECT_TRUE(run(read_chunk_async(*store_, stub, 1)).value() == chunk(1));
  EXPECT_EQ(run(read_chunk_async(*store_, stub, 0)).error(), errc::kNotFound);
  // The version itself stays evicted: a whole read goes upstream.
  EXPECT_EQ(get("p/k").error(), errc::kUnavailable);

  // Kept across a restart, and their ids are never given out again: an object written and
  // deleted after it takes nothing of theirs. (With the block cache on from here: chunks read
  // under their version's id must never hand out another chunk's blocks.)
  close();
  options_.cache_bytes = 64 * kMiB;
  open();
  EXPECT_EQ(indexes(stub.id), (std::vector<std::uint32_t>{1, 2}));
  for (int n = 0; n < 4; ++n) {
    ASSERT_TRUE(put("p/other" + std::to_string(n), test::pattern_bytes(kMiB, 53)).has_value());
    ASSERT_TRUE(run(store_->delete_object(bucket_.id, "p/other" + std::to_string(n))).has_value());
  }
  EXPECT_TRUE(run(read_chunk_async(*store_, stub, 1)).value() == chunk(1));
  EXPECT_TRUE(run(read_chunk_async(*store_, stub, 2)).value() == chunk(2));

  // Eviction by watermark frees chunks first, the oldest first.
  const std::int64_t all = now_ms() + 60'000;
  Evicted evicted =
      run(store_->evict_coldest({bucket_.id + 1000}, 1, all, EvictionOrder::kLeastRecentlyRead))
          .value();
  EXPECT_EQ(evicted.bytes, 0U);
  evicted =
      run(store_->evict_coldest({bucket_.id}, 1, all, EvictionOrder::kLeastRecentlyRead)).value();
  EXPECT_EQ(evicted.objects, 0U);
  EXPECT_EQ(evicted.bytes, kTierChunkBytes);
  EXPECT_EQ(indexes(stub.id), (std::vector<std::uint32_t>{2}));
  // Evicting the prefix frees the chunks of its evicted versions too.
  evicted = run(store_->evict_objects(bucket_.id, {"p/", false})).value();
  EXPECT_EQ(evicted.objects, 0U);
  EXPECT_EQ(evicted.bytes, 3 * kMiB + 3);
  EXPECT_TRUE(indexes(stub.id).empty());
  EXPECT_EQ(used(), before);

  // A fill of the whole version replaces its chunks. (Chunk 0 likely lands where chunk 1 was,
  // whose blocks were cached.)
  EXPECT_TRUE(run(keep_chunk_async(*store_, stub, 0, chunk(0))).value());
  EXPECT_TRUE(run(read_chunk_async(*store_, stub, 0)).value() == chunk(0));
  const std::uint64_t chunked = used();
  const ObjectRecord filled = run(fill_async(*store_, stub, data)).value();
  EXPECT_TRUE(indexes(stub.id).empty());
  EXPECT_EQ(used(), chunked - kTierChunkBytes + data.size() + 4093);
  // A version that is not evicted keeps no chunk.
  EXPECT_FALSE(run(keep_chunk_async(*store_, filled, 0, chunk(0))).value());

  // Chunks go with their version when the key is overwritten.
  ASSERT_EQ(run(store_->evict_objects(bucket_.id, {"p/", false})).value().objects, 1U);
  const ObjectRecord stub2 = *store_->head(bucket_.id, "p/k").value();
  const std::uint64_t evicted_used = used();
  EXPECT_TRUE(run(keep_chunk_async(*store_, stub2, 0, chunk(0))).value());
  EXPECT_EQ(used(), evicted_used + kTierChunkBytes);
  ASSERT_TRUE(put("p/k", test::pattern_bytes(100, 52)).has_value());  // inline
  EXPECT_TRUE(indexes(stub2.id).empty());
  EXPECT_EQ(used(), evicted_used);
  EXPECT_FALSE(run(keep_chunk_async(*store_, stub2, 1, chunk(1))).value());
}

TEST_P(StoreTest, AVersionIsMadeWholeFromItsChunksOnceEveryOneIsKept) {
  const Bytes data = test::pattern_bytes(2 * kTierChunkBytes + 5 * kMiB + 7, 54);
  const ObjectRecord stub = evicted_stub("w/k", data);
  EXPECT_TRUE(run(keep_chunk_async(*store_, stub, 0, chunk_of(data, 0))).value());
  EXPECT_TRUE(run(keep_chunk_async(*store_, stub, 2, chunk_of(data, 2))).value());
  // Not while one is missing.
  EXPECT_EQ(run(store_->fill_from_chunks(stub)).error(), errc::kPreconditionFailed);
  EXPECT_EQ(kept_indexes(*store_, stub.id), (std::vector<std::uint32_t>{0, 2}));

  // Held chunks are left alone by eviction by watermark; once let go, they may go.
  const std::int64_t all = now_ms() + 60'000;
  {
    const std::shared_ptr<void> hold = store_->hold_chunks(stub.id);
    { const std::shared_ptr<void> second = store_->hold_chunks(stub.id); }
    const Evicted evicted =
        run(store_->evict_coldest({bucket_.id}, 1, all, EvictionOrder::kLeastRecentlyRead)).value();
    EXPECT_EQ(evicted.bytes, 0U);  // (held still: by the first)
  }
  EXPECT_EQ(run(store_->evict_coldest({bucket_.id}, 1, all, EvictionOrder::kLeastRecentlyRead))
                .value()
                .bytes,
            kTierChunkBytes);
  EXPECT_EQ(kept_indexes(*store_, stub.id), (std::vector<std::uint32_t>{2}));

  // Every chunk kept: the version takes their data, none written again and none freed.
  EXPECT_TRUE(run(keep_chunk_async(*store_, stub, 1, chunk_of(data, 1))).value());
  EXPECT_TRUE(run(keep_chunk_async(*store_, stub, 0, chunk_of(data, 0))).value());
  const std::uint64_t before = used();
  const ObjectRecord filled = run(store_->fill_from_chunks(stub)).value();
  EXPECT_NE(filled.id, stub.id);
  EXPECT_EQ(filled.etag, stub.etag);
  EXPECT_EQ(used(), before);
  EXPECT_TRUE(kept_indexes(*store_, stub.id).empty());
  EXPECT_EQ(store_->head(bucket_.id, "w/k").value()->tier_state, TierState::kLocalAndUpstream);
  EXPECT_TRUE(get("w/k").value() == data);
  // Once only: the version is no longer evicted.
  EXPECT_EQ(run(store_->fill_from_chunks(stub)).error(), errc::kPreconditionFailed);
  close();
  open();
  EXPECT_TRUE(get("w/k").value() == data);
}

TEST_P(StoreTest, PrefetchJobsAreKeptWithHowFarTheyGot) {
  ASSERT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kWriteback, "{}")).has_value());
  for (const char* key : {"ds/a", "ds/b", "ds/c", "other"}) {
    const auto put_as = put(key, test::pattern_bytes(kMiB, 41)).value();
    const auto job = run(store_->tier_job(bucket_.id, key)).value().value();
    ASSERT_TRUE(run(store_->finish_tier_job(job, TierSeen{put_as.etag, put_as.etag})).value());
  }
  ASSERT_EQ(run(store_->evict_objects(bucket_.id, {"ds/", false})).value().objects, 3U);
  EXPECT_EQ(run(store_->evicted_totals(bucket_.id, {"ds/", false})).value(),
            std::make_pair(std::uint64_t{3}, std::uint64_t{3 * kMiB}));
  EXPECT_EQ(run(store_->evicted_totals(bucket_.id, {"ds/a", true})).value().first, 1U);
  const auto after_a = run(store_->versions_in_state(bucket_.id, {"ds/", false},
                                                     TierState::kUpstreamOnly, "ds/a", 10, false))
                           .value();
  ASSERT_EQ(after_a.size(), 2U);
  EXPECT_EQ(after_a[0].key, "ds/b");
  EXPECT_TRUE(run(store_->versions_in_state(bucket_.id, {"ds/", false}, TierState::kUpstreamOnly,
                                            "", 10, true))
                  .value()
                  .empty());  // none is pinned

  PrefetchRecord whole;
  whole.bucket_id = bucket_.id;
  whole.prefix = "ds/";
  whole.objects = 3;
  whole.bytes = 3 * kMiB;
  whole.created_ms = 1000;
  PrefetchRecord listed = whole;
  listed.prefix = "";
  listed.keys = {"ds/a", "ds/c"};
  const std::int64_t first = run(store_->begin_prefetch(whole)).value();
  const std::int64_t second = run(store_->begin_prefetch(listed)).value();
  EXPECT_LT(first, second);
  ASSERT_TRUE(run(store_->advance_prefetch(first, "ds/b", 1, 0)).has_value());
  ASSERT_TRUE(run(store_->advance_prefetch(second, "ds/c", 0, 2000)).has_value());
  // Kept across a restart, as it was left.
  close();
  open();
  const auto jobs = run(store_->prefetches(bucket_.id, false)).value();
  ASSERT_EQ(jobs.size(), 2U);
  EXPECT_EQ(std::make_tuple(jobs[0].id, jobs[0].prefix, jobs[0].keys.size(), jobs[0].after,
                            jobs[0].failed, jobs[0].ended_ms),
            std::make_tuple(first, std::string("ds/"), std::size_t{0}, std::string("ds/b"),
                            std::uint64_t{1}, std::int64_t{0}));
  EXPECT_EQ(jobs[1].keys, (std::vector<std::string>{"ds/a", "ds/c"}));
  EXPECT_EQ(jobs[1].ended_ms, 2000);
  EXPECT_EQ(run(store_->prefetches(0, false)).value().size(), 2U);
  EXPECT_EQ(run(store_->prefetches(0, true)).value().size(), 1U);  // the one not ended
  EXPECT_TRUE(run(store_->prefetches(bucket_.id + 1000, false)).value().empty());
  whole.bucket_id = bucket_.id + 1000;  // a bucket that is gone
  EXPECT_EQ(run(store_->begin_prefetch(whole)).error(), errc::kNotFound);
}

TEST_P(StoreTest, EvictionByWatermarkTakesTheLeastRecentlyReadFirst) {
  ASSERT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kWriteback, "{}")).has_value());
  std::map<std::string, ObjectRecord> put_as;
  for (const char* key : {"a", "b", "c", "d", "owed"}) {
    put_as[key] = put(key, test::pattern_bytes(kMiB, 40)).value();
  }
  for (const TierJob& job : run(store_->tier_jobs(bucket_.id, true)).value()) {
    if (job.key == "owed") continue;
    const std::string& etag = put_as.at(job.key).etag;
    ASSERT_TRUE(run(store_->finish_tier_job(job, TierSeen{etag, etag})).value());
  }
  // Read after they were written (times are in milliseconds): c, then a, then d; b is unread.
  for (const char* key : {"c", "a", "d"}) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    ASSERT_TRUE(get(key).has_value());
  }
  const std::int64_t all = now_ms() + 60'000;  // written before: every one
  constexpr auto kLru = EvictionOrder::kLeastRecentlyRead;
  auto state = [&](const char* key) { return store_->head(bucket_.id, key).value()->tier_state; };

  // Only the buckets named.
  EXPECT_EQ(run(store_->evict_coldest({bucket_.id + 1000}, 10 * kMiB, all, kLru)).value().objects,
            0U);
  // Enough for one byte: the coldest whole version, b.
  Evicted evicted = run(store_->evict_coldest({bucket_.id}, 1, all, kLru)).value();
  EXPECT_EQ(evicted.objects, 1U);
  EXPECT_EQ(evicted.bytes, kMiB);
  EXPECT_EQ(state("b"), TierState::kUpstreamOnly);
  EXPECT_EQ(state("c"), TierState::kLocalAndUpstream);
  // Where the data is: what eviction may take is the clean versions written before the time
  // given, never the one owed.
  const auto space = run(store_->tier_space({bucket_.id, bucket_.id + 1000}, all)).value();
  ASSERT_EQ(space.size(), 1U);
  EXPECT_EQ(space[0].bucket_id, bucket_.id);
  EXPECT_EQ(std::vector<std::uint64_t>(
                {space[0].objects, space[0].bytes, space[0].dirty_objects, space[0].dirty_bytes,
                 space[0].clean_objects, space[0].clean_bytes, space[0].remote_objects,
                 space[0].remote_bytes, space[0].pinned_bytes, space[0].evictable_bytes}),
            std::vector<std::uint64_t>({5, 5 * kMiB, 1, kMiB, 3, 3 * kMiB, 1, kMiB, 0, 3 * kMiB}));
  EXPECT_EQ(
      run(store_->tier_space({bucket_.id}, put_as["a"].created_ms)).value()[0].evictable_bytes, 0U);
  // c is read again, the latest; the read times outlive a restart. Then a and d go, in the
  // order they were read.
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  ASSERT_TRUE(get("c").has_value());
  close();
  open();
  evicted = run(store_->evict_coldest({bucket_.id}, kMiB + 1, all, kLru)).value();
  EXPECT_EQ(evicted.objects, 2U);
  EXPECT_EQ(state("a"), TierState::kUpstreamOnly);
  EXPECT_EQ(state("d"), TierState::kUpstreamOnly);
  EXPECT_EQ(state("c"), TierState::kLocalAndUpstream);
  // Written since the bound: kept, however much is asked for; un-uploaded data never goes.
  EXPECT_EQ(run(store_->evict_coldest({bucket_.id}, 10 * kMiB, put_as["c"].created_ms, kLru))
                .value()
                .objects,
            0U);
  evicted = run(store_->evict_coldest({bucket_.id}, 10 * kMiB, all, kLru)).value();
  EXPECT_EQ(evicted.objects, 1U);
  EXPECT_EQ(state("c"), TierState::kUpstreamOnly);
  EXPECT_EQ(state("owed"), TierState::kLocal);
}

TEST_P(StoreTest, HitsWriteNothingAndEvictionSavesTheirTimesAtMostOnceASecond) {
  ASSERT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kWriteback, "{}")).has_value());
  std::map<std::string, ObjectRecord> put_as;
  for (const char* key : {"a", "b", "c", "d"}) {
    put_as[key] = put(key, test::pattern_bytes(kMiB, 43)).value();
  }
  for (const TierJob& job : run(store_->tier_jobs(bucket_.id, true)).value()) {
    const std::string& etag = put_as.at(job.key).etag;
    ASSERT_TRUE(run(store_->finish_tier_job(job, TierSeen{etag, etag})).value());
  }
  const auto writes = [&] { return store_->stats().catalog_writer.writes; };
  const std::uint64_t before_reads = writes();
  for (const char* key : {"a", "b", "c", "d"}) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(get(key).has_value());
  }
  EXPECT_EQ(writes(), before_reads);  // 40 hits, no catalog write
  const std::int64_t all = now_ms() + 60'000;
  constexpr auto kLru = EvictionOrder::kLeastRecentlyRead;
  auto state = [&](const char* key) { return store_->head(bucket_.id, key).value()->tier_state; };
  // The first eviction saves the times: a, read first, goes.
  std::uint64_t at = writes();
  ASSERT_EQ(run(store_->evict_coldest({bucket_.id}, 1, all, kLru)).value().objects, 1U);
  const std::uint64_t saving_pass = writes() - at;
  EXPECT_EQ(state("a"), TierState::kUpstreamOnly);
  // b is read again; an eviction within the second saves nothing, yet knows b was just read:
  // c goes, the least recently read by the catalog's times but for b.
  ASSERT_TRUE(get("b").has_value());
  at = writes();
  ASSERT_EQ(run(store_->evict_coldest({bucket_.id}, 1, all, kLru)).value().objects, 1U);
  EXPECT_EQ(writes() - at + 1, saving_pass);
  EXPECT_EQ(state("b"), TierState::kLocalAndUpstream);
  EXPECT_EQ(state("c"), TierState::kUpstreamOnly);
  // A second later the times are saved again (d's read last: b goes).
  std::this_thread::sleep_for(std::chrono::milliseconds(1010));
  ASSERT_TRUE(get("d").has_value());
  at = writes();
  ASSERT_EQ(run(store_->evict_coldest({bucket_.id}, 1, all, kLru)).value().objects, 1U);
  EXPECT_EQ(writes() - at, saving_pass);
  EXPECT_EQ(state("b"), TierState::kUpstreamOnly);
  EXPECT_EQ(state("d"), TierState::kLocalAndUpstream);
}

TEST_P(StoreTest, AVersionUploadedLateIsAsYoungToEvictionAsOneUploadedAtOnce) {
  ASSERT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kWriteback, "{}")).has_value());
  const ObjectRecord written = put("ckpt", test::pattern_bytes(kMiB, 42)).value();
  // The upload is confirmed well after the write (an upstream that was down meanwhile).
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::int64_t bound = now_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  for (const TierJob& job : run(store_->tier_jobs(bucket_.id, true)).value()) {
    ASSERT_TRUE(run(store_->finish_tier_job(job, TierSeen{written.etag, written.etag})).value());
  }
  ASSERT_LT(written.created_ms, bound);
  constexpr auto kLru = EvictionOrder::kLeastRecentlyRead;
  EXPECT_EQ(run(store_->tier_space({bucket_.id}, bound)).value()[0].evictable_bytes, 0U);
  EXPECT_EQ(run(store_->evict_coldest({bucket_.id}, 10 * kMiB, bound, kLru)).value().objects, 0U);
  EXPECT_EQ(store_->head(bucket_.id, "ckpt").value()->tier_state, TierState::kLocalAndUpstream);
  // Once uploaded before the bound, it may go.
  const std::int64_t later = now_ms() + 1;
  EXPECT_EQ(run(store_->tier_space({bucket_.id}, later)).value()[0].evictable_bytes, kMiB);
  EXPECT_EQ(run(store_->evict_coldest({bucket_.id}, 10 * kMiB, later, kLru)).value().objects, 1U);
}

// min_resident keeps what was written here: a version fetched back after its eviction, or one
// learnt from the upstream (however recent its Last-Modified), was not, and may go first.
TEST_P(StoreTest, AVersionFromTheUpstreamIsNotYoungToEviction) {
  ASSERT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kWriteback, "{}")).has_value());
  const Bytes data = test::pattern_bytes(kMiB, 45);
  const ObjectRecord written = put("k", data).value();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const std::int64_t bound = now_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  for (const TierJob& job : run(store_->tier_jobs(bucket_.id, true)).value()) {
    ASSERT_TRUE(run(store_->finish_tier_job(job, TierSeen{written.etag, written.etag})).value());
  }
  constexpr auto kLru = EvictionOrder::kLeastRecentlyRead;
  const auto evictable = [&] {
    return run(store_->tier_space({bucket_.id}, bound)).value()[0].evictable_bytes;
  };
  EXPECT_EQ(evictable(), 0U);  // uploaded after the bound: young
  ASSERT_EQ(run(store_->evict_coldest({bucket_.id}, kMiB, now_ms() + 1, kLru)).value().objects, 1U);
  const ObjectRecord evicted = *store_->head(bucket_.id, "k").value();
  ASSERT_TRUE(run(fill_async(*store_, evicted, data)).has_value());
  EXPECT_EQ(store_->head(bucket_.id, "k").value()->tier_state, TierState::kLocalAndUpstream);
  EXPECT_EQ(evictable(), kMiB);

  ObjectRecord learnt;
  learnt.key = "u";
  learnt.size_bytes = data.size();
  learnt.etag = written.etag;
  learnt.created_ms = now_ms();  // its Last-Modified upstream: after the bound
  const auto stub =
      run(store_->take_upstream_state(bucket_, "u", 0, learnt, {}, std::nullopt)).value();
  ASSERT_TRUE(stub.has_value());
  ASSERT_TRUE(run(fill_async(*store_, *stub, data)).has_value());
  EXPECT_EQ(evictable(), 2 * kMiB);
  EXPECT_EQ(run(store_->evict_coldest({bucket_.id}, 2 * kMiB, bound, kLru)).value().objects, 2U);
}

TEST_P(StoreTest, EvictionByWatermarkTakesTheLeastOftenReadFirst) {
  ASSERT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kWriteback, "{}")).has_value());
  std::map<std::string, ObjectRecord> put_as;
  for (const char* key : {"a", "b", "c", "d", "e", "f"}) {
    put_as[key] = put(key, test::pattern_bytes(kMiB, 41)).value();
  }
  for (const TierJob& job : run(store_->tier_jobs(bucket_.id, true)).value()) {
    const std::string& etag = put_as.at(job.key).etag;
    ASSERT_TRUE(run(store_->finish_tier_job(job, TierSeen{etag, etag})).value());
  }
  // a read 3 times, b twice, c, e and f once (e before f), d never.
  for (const char* key : {"a", "a", "b", "a", "b", "c", "e", "f"}) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    ASSERT_TRUE(get(key).has_value());
  }
  const std::int64_t all = now_ms() + 60'000;
  auto next_out = [&] {
    EXPECT_EQ(run(store_->evict_coldest({bucket_.id}, 1, all, EvictionOrder::kLeastOftenRead))
                  .value()
                  .objects,
              1U);
    std::string gone;
    for (const auto& [key, _] : put_as) {
      if (store_->head(bucket_.id, key).value()->tier_state == TierState::kUpstreamOnly &&
          put_as[key].tier_state != TierState::kUpstreamOnly) {
        gone = key;
        put_as[key].tier_state = TierState::kUpstreamOnly;
      }
    }
    return gone;
  };
  // Never read first; among those read once, the last to come first (f, put after e: in a loop,
  // it is the one read again last); the often read last, and counts beyond twice do not rank: a
  // (read 3 times) and b (twice) are equals, and b came last.
  EXPECT_EQ(next_out(), "d");
  EXPECT_EQ(next_out(), "f");
  EXPECT_EQ(next_out(), "e");
  EXPECT_EQ(next_out(), "c");
  EXPECT_EQ(next_out(), "b");
  // An evicted key is still known as often read: filled again, b stays while g, written and read
  // once meanwhile, goes, though b came last. The reads that missed count nothing (else b would
  // be ahead of a, and a would go next).
  put_as["g"] = put("g", test::pattern_bytes(kMiB, 42)).value();
  const TierJob g_job = run(store_->tier_jobs(bucket_.id, true)).value().at(0);
  ASSERT_TRUE(
      run(store_->finish_tier_job(g_job, TierSeen{put_as["g"].etag, put_as["g"].etag})).value());
  put_as["g"].tier_state = TierState::kLocalAndUpstream;
  ASSERT_TRUE(get("g").has_value());
  EXPECT_EQ(get("b").error(), errc::kUnavailable);
  EXPECT_EQ(get("b").error(), errc::kUnavailable);
  const auto stub = store_->head(bucket_.id, "b").value();
  ASSERT_TRUE(run(fill_async(*store_, *stub, test::pattern_bytes(kMiB, 41))).has_value());
  put_as["b"].tier_state = TierState::kLocalAndUpstream;
  EXPECT_EQ(next_out(), "g");
  EXPECT_EQ(next_out(), "b");
}

TEST_P(StoreTest, WriteBackRemembersWhatTheUpstreamHoldsAndWhereCopiesComeFrom) {
  ASSERT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kWriteback, "{}")).has_value());
  const auto k = put("k", test::pattern_bytes(100, 1)).value();
  auto job = run(store_->tier_jobs(bucket_.id, true)).value().at(0);
  EXPECT_EQ(run(store_->tier_seen(bucket_.id, "k")).value(), std::nullopt);
  // The upstream answered with an ETag of its own: remembered with ours.
  ASSERT_TRUE(run(store_->finish_tier_job(job, TierSeen{"theirs-1", k.etag})).value());
  EXPECT_EQ(store_->head(bucket_.id, "k").value()->tier_state, TierState::kLocalAndUpstream);
  EXPECT_EQ(run(store_->tier_seen(bucket_.id, "k")).value()->etag, "theirs-1");

  // A copy in the bucket and a metadata replacement name their source; a copy from elsewhere
  // (no source) does not.
  storage::ObjectSpec spec;
  spec.copied_from = "k";
  const auto copy = run(put_async("copy", test::pattern_bytes(100, 1), true, {}, spec)).value();
  ASSERT_TRUE(run(store_->replace_metadata(bucket_.id, "k", k.etag, {})).has_value());
  auto jobs = run(store_->tier_jobs(bucket_.id, true)).value();
  ASSERT_EQ(jobs.size(), 2U);
  EXPECT_EQ(jobs[0].key, "copy");
  EXPECT_EQ(jobs[0].source_key, "k");
  EXPECT_EQ(jobs[1].key, "k");
  EXPECT_EQ(jobs[1].source_key, "k");
  // Its source's upstream delete waits for such a job; a parked one does not hold it.
  EXPECT_TRUE(run(store_->tier_copy_pending(bucket_.id, "k")).value());
  EXPECT_FALSE(run(store_->tier_copy_pending(bucket_.id, "copy")).value());
  ASSERT_TRUE(run(store_->defer_tier_job(jobs[0], 0, "HTTP 403", true)).value());
  ASSERT_TRUE(run(store_->finish_tier_job(jobs[1], TierSeen{"theirs-1", k.etag})).value());
  EXPECT_FALSE(run(store_->tier_copy_pending(bucket_.id, "k")).value());
  (void)copy;

  // A conflict: the upstream holds another writer's version; ours is not marked as upstream.
  ASSERT_TRUE(put("k", test::pattern_bytes(100, 2)).has_value());
  job = run(store_->tier_jobs(bucket_.id, true)).value().back();
  ASSERT_EQ(job.key, "k");
  ASSERT_TRUE(run(store_->finish_tier_job(job, TierSeen{"other", ""})).value());
  EXPECT_EQ(store_->head(bucket_.id, "k").value()->tier_state, TierState::kLocal);
  EXPECT_EQ(run(store_->tier_seen(bucket_.id, "k")).value()->ours, "");
  // A correction, and a confirmed delete, forget or replace what was seen; all of it persists.
  ASSERT_TRUE(run(store_->set_tier_seen(bucket_.id, "k", TierSeen{"other-2", ""})).has_value());
  close();
  open();
  EXPECT_EQ(run(store_->tier_seen(bucket_.id, "k")).value()->etag, "other-2");
  ASSERT_TRUE(run(store_->delete_object(bucket_.id, "k")).has_value());
  job = run(store_->tier_jobs(bucket_.id, true)).value().back();
  ASSERT_EQ(job.key, "k");
  ASSERT_TRUE(run(store_->finish_tier_job(job, std::nullopt)).value());
  EXPECT_EQ(run(store_->tier_seen(bucket_.id, "k")).value(), std::nullopt);

  // A job keeps the ETags of the versions it replaced (any may be upstream unconfirmed), newest
  // first; a delete adds none.
  const auto p1 = put("p", test::pattern_bytes(10, 3)).value();
  const auto p2 = put("p", test::pattern_bytes(10, 4)).value();
  ASSERT_TRUE(run(store_->delete_object(bucket_.id, "p")).has_value());
  const auto p3 = put("p", test::pattern_bytes(10, 5)).value();
  job = run(store_->tier_jobs(bucket_.id, true)).value().back();
  ASSERT_EQ(job.key, "p");
  EXPECT_EQ(job.object_id, p3.id);
  EXPECT_EQ(job.prior_etags, p2.etag + " " + p1.etag + " ");
  // A superseded upload that reached the upstream is what it holds, for the next one.
  TierJob old = job;
  ASSERT_TRUE(put("p", test::pattern_bytes(10, 6)).has_value());
  EXPECT_FALSE(run(store_->finish_tier_job(old, TierSeen{p3.etag, p3.etag})).value());
  EXPECT_EQ(run(store_->tier_seen(bucket_.id, "p")).value()->etag, p3.etag);
}

TEST_P(StoreTest, WriteThroughCommitsWhatTheUpstreamHoldsAndHoldsTheKeyUntilThen) {
  ASSERT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kWritethrough, "{}")).has_value());
  // A change other than a write-through PUT queues a job, as in write-back.
  const auto v1 = put("k", test::pattern_bytes(100, 1)).value();
  ASSERT_EQ(run(store_->tier_jobs(bucket_.id, true)).value().size(), 1U);
  EXPECT_EQ(store_->tier_owed_bytes(), 100U);

  // Before the upstream may take v2: the key's job is kept, and v2's ETag is one it replaces.
  EXPECT_EQ(run(store_->hold_tier_key(bucket_.id, "k", "v2-etag")).value(), std::nullopt);
  EXPECT_EQ(run(store_->tier_jobs(bucket_.id, true)).value().at(0).prior_etags.substr(0, 7),
            "v2-etag");
  // The commit of a version the upstream holds drops what was queued for the key and records
  // what the upstream holds: nothing is owed, nothing will be sent.
  storage::ObjectSpec spec;
  spec.upstream_etag = "up-etag";
  const auto v2 = run(put_async("k", test::pattern_bytes(200, 2), true, {}, spec)).value();
  EXPECT_TRUE(run(store_->tier_jobs(bucket_.id, true)).value().empty());
  EXPECT_EQ(store_->tier_owed_bytes(), 0U);
  EXPECT_EQ(store_->head(bucket_.id, "k").value()->tier_state, TierState::kLocalAndUpstream);
  const auto seen = run(store_->tier_seen(bucket_.id, "k")).value();
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->etag, "up-etag");
  EXPECT_EQ(seen->ours, v2.etag);

  // A hold on a key with no job queues one for the state here (due after the delay), which a
  // PUT the upstream refused cancels.
  auto held = run(store_->hold_tier_key(bucket_.id, "k", "v3-etag")).value();
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->object_id, v2.id);
  EXPECT_EQ(held->prior_etags.substr(0, 7), "v3-etag");
  EXPECT_GT(held->due_ms, now_ms());
  EXPECT_EQ(store_->tier_owed_bytes(), 200U);
  ASSERT_TRUE(run(store_->cancel_tier_job(*held)).has_value());
  EXPECT_TRUE(run(store_->tier_jobs(bucket_.id, true)).value().empty());
  EXPECT_EQ(store_->tier_owed_bytes(), 0U);

  // A PUT the upstream took but the commit refused: the state here goes up again, at once; for a
  // key with no version here, as an upstream delete.
  ASSERT_TRUE(run(store_->resend_tier_key(bucket_.id, "absent", "v4-etag")).has_value());
  const auto jobs = run(store_->tier_jobs(bucket_.id, true)).value();
  ASSERT_EQ(jobs.size(), 1U);
  EXPECT_EQ(jobs[0].key, "absent");
  EXPECT_FALSE(jobs[0].object_id.has_value());
  EXPECT_LE(jobs[0].due_ms, now_ms());
  EXPECT_EQ(jobs[0].prior_etags.substr(0, 7), "v4-etag");
  (void)v1;
}

TEST_P(StoreTest, CompletedUploadsAppendsAndNewMetadataQueueTheirVersions) {
  ASSERT_TRUE(run(store_->set_bucket_tier("b", BucketTier::kWriteback, "{}")).has_value());
  auto upload = run(store_->create_upload(bucket_, "mp", "owner", {}, {}, {})).value();
  const Bytes data = test::pattern_bytes(6 * kMiB, 7);
  ASSERT_TRUE(run([&]() -> asio::awaitable<Result<PartRecord>> {
                H3_CO_TRY(auto w, co_await store_->create_writer(data.size(), true));
                H3_CO_TRY(co_await w->write(data));
                H3_CO_TRY(co_await w->finish());
                std::string etag = etag_of(*w);
                auto committing =
                    store_->commit_part(std::move(w), upload.upload_id, 1, {}, etag, {});
                co_return co_await std::move(committing);
              }())
                  .has_value());
  EXPECT_TRUE(run(store_->tier_jobs(bucket_.id, true)).value().empty());  // parts are not objects
  auto object =
      run(store_->complete_upload(upload.upload_id,
                                  [](const UploadRecord&, const std::vector<PartRecord>& all)
                                      -> Result<ObjectStore::CompletionPlan> {
                                    ObjectStore::CompletionPlan plan;
                                    plan.parts = all;
                                    plan.spec.etag = "deadbeef-1";
                                    return plan;
                                  },
                                  {}))
          .value();
  auto jobs = run(store_->tier_jobs(bucket_.id, true)).value();
  ASSERT_EQ(jobs.size(), 1U);
  EXPECT_EQ(jobs[0].object_id, object.id);
  EXPECT_EQ(jobs[0].size_bytes, data.size());
  ObjectSpec spec;
  spec.etag = object.etag;
  spec.headers.content_type = "text/plain";
  const auto updated =
      run(store_->replace_metadata(bucket_.id, "mp", object.etag, std::move(spec))).value();
  jobs = run(store_->tier_jobs(bucket_.id, true)).value();
  ASSERT_EQ(jobs.size(), 1U);
  EXPECT_EQ(jobs[0].object_id, updated.id);
  EXPECT_GT(jobs[0].seq, 0);
}

std::string engine_name(const ::testing::TestParamInfo<Engine>& param_info) {
  switch (param_info.param) {
    case Engine::kUring:
      return "Uring";
    case Engine::kPosix:
      return "Posix";
    case Engine::kFault:
      return "Fault";
  }
  return "?";
}

INSTANTIATE_TEST_SUITE_P(Engines, StoreTest,
                         ::testing::Values(Engine::kUring, Engine::kPosix, Engine::kFault),
                         engine_name);

// ---- faults (FaultDevice only) -----------------------------------------------------------------

class FaultStoreTest : public StoreTest {};

TEST_P(FaultStoreTest, BitRotIsAnErrorNeverData) {
  const Bytes data = test::pattern_bytes(2 * kMiB, 40);
  ASSERT_TRUE(put("rot", data).has_value());
  const auto head = *store_->head(bucket_.id, "rot").value();
  // Find the object's device offset through the catalog and flip one bit in its second block.
  close();
  {
    auto catalog =
        Catalog::open({(std::filesystem::path(options_.data_dir) / "catalog.db").string()});
    const auto extents = catalog->object_extents(head.id).value();
    ASSERT_FALSE(extents.empty());
    fault_->flip_bit(extents[0].device.offset_bytes + 4096 + 17, 3);
  }
  open();
  EXPECT_EQ(get("rot").error(), errc::kChecksumMismatch);
  // Ranges that avoid the damaged block still read.
  auto tail = get("rot", std::pair{std::uint64_t{kMiB}, std::uint64_t{kMiB}});
  ASSERT_TRUE(tail.has_value());
  EXPECT_TRUE(std::equal(tail->begin(), tail->end(), data.begin() + kMiB));
}

TEST_P(FaultStoreTest, CrashLosesOnlyUnacknowledgedWrites) {
  for (const auto mode : {FaultDevice::Crash::kLoseUnflushed, FaultDevice::Crash::kTearUnflushed,
                          FaultDevice::Crash::kKeepUnflushed}) {
    std::map<std::string, Bytes> acked;
    for (std::uint32_t i = 0; i < 6; ++i) {
      const std::string key = "acked-" + std::to_string(i);
      Bytes data =
          test::pattern_bytes(kMiB * (i + 1) + i, i + static_cast<std::uint32_t>(mode) * 10);
      ASSERT_TRUE(put(key, data, i % 2 == 0).has_value());
      acked[key] = std::move(data);
    }
    // Written and flushed but never committed (as if the process died before the catalog
    // commit), and half-written and unflushed. Only the device and the catalog outlive a crash:
    // the writers' in-memory bookkeeping is gone either way.
    run([&]() -> asio::awaitable<void> {
      auto w = (co_await store_->create_writer(std::uint64_t{4 * kMiB})).value();
      EXPECT_TRUE((co_await w->write(test::pattern_bytes(4 * kMiB, 999))).has_value());
      EXPECT_TRUE((co_await w->finish()).has_value());
    }());
    run([&]() -> asio::awaitable<void> {
      auto w = (co_await store_->create_writer(std::nullopt)).value();
      EXPECT_TRUE((co_await w->write(test::pattern_bytes(3 * kMiB, 998))).has_value());
    }());
    close();
    fault_->crash(mode, 7);
    open();
    std::uint64_t expected_used = 0;
    for (const auto& [key, data] : acked) {
      auto got = get(key);
      ASSERT_TRUE(got.has_value()) << key << ": " << got.error().message();
      EXPECT_TRUE(*got == data) << key;
      expected_used += (data.size() + 4095) / 4096 * 4096;
    }
    // No leak: the allocator holds exactly what the catalog references.
    EXPECT_EQ(used(), expected_used);
    for (const auto& [key, data] : acked)
      ASSERT_TRUE(run(store_->delete_object(bucket_.id, key)).has_value());
  }
}

TEST_P(FaultStoreTest, DeviceErrorsFailTheWriteCleanly) {
  const std::uint64_t before = used();
  fault_->fail_range(0, 256 * kMiB);
  auto r = put("eio", test::pattern_bytes(2 * kMiB, 1));
  EXPECT_EQ(r.error(), errc::kIoError);
  fault_->clear_faults();
  fault_->fail_flushes(true);
  EXPECT_EQ(put("eio", test::pattern_bytes(2 * kMiB, 1)).error(), errc::kIoError);
  fault_->clear_faults();
  EXPECT_EQ(used(), before);
  EXPECT_EQ(get("eio").error(), errc::kNotFound);
  EXPECT_TRUE(put("eio", test::pattern_bytes(2 * kMiB, 1)).has_value());
}

// Space of a writer: its data rounded up to whole blocks (inline objects take none).
std::uint64_t allocation_of(std::size_t size, bool may_be_inline = true) {
  if (may_be_inline && size <= 4096) return 0;
  return (std::uint64_t{size} + 4095) / 4096 * 4096;
}

// A crash between data and commit: the process dies after writers' data reached the device
// (flushed, or half-written) and before their catalog commits: overwrites, an append, a multipart
// part and new keys are in flight. After the restart every acknowledged value reads back exactly,
// nothing in flight is visible, and the space used is exactly what the live objects were given,
// computed here from what this test wrote (so a leak or a double free shows, whatever the store's
// counters say).
TEST_P(FaultStoreTest, CrashBetweenDataAndCommitLeaksNothingAndLosesNothing) {
  const auto modes = {FaultDevice::Crash::kLoseUnflushed, FaultDevice::Crash::kTearUnflushed,
                      FaultDevice::Crash::kScatterUnflushed, FaultDevice::Crash::kKeepUnflushed};
  std::uint32_t round = 0;
  for (const auto mode : modes) {
    ++round;
    std::map<std::string, Bytes> acked;
    std::uint64_t expected_used = 0;
    for (std::uint32_t i = 0; i < 5; ++i) {
      const std::string key = "acked-" + std::to_string(i);
      Bytes data = test::pattern_bytes(i == 4 ? 3000 : kMiB * i + 4096 * i + 7, round * 100 + i);
      ASSERT_TRUE(put(key, data, i % 2 == 0).has_value());
      expected_used += allocation_of(data.size());
      acked[key] = std::move(data);
    }
    // An acknowledged append: its version holds the base's blocks and its own.
    const Bytes tail = test::pattern_bytes(100000, round * 100 + 50);
    const auto base = *store_->head(bucket_.id, "acked-2").value();
    auto append = [&](const Bytes& piece, std::int64_t base_id, bool commit) {
      return run([&, base_id, commit]() -> asio::awaitable<Result<void>> {
        H3_CO_TRY(auto w, co_await store_->create_writer(std::uint64_t{piece.size()}, true));
        H3_CO_TRY(co_await w->write(piece));
        H3_CO_TRY(co_await w->finish());
        if (!commit) co_return Result<void>{};  // the process dies before the commit
        ObjectSpec spec;
        spec.etag = "appended";
        H3_CO_TRY(co_await store_->append_object(std::move(w), bucket_, "acked-2", base_id, false,
                                                 spec, {}));
        co_return Result<void>{};
      }());
    };
    ASSERT_TRUE(append(tail, base.id, true).has_value());
    acked["acked-2"].insert(acked["acked-2"].end(), tail.begin(), tail.end());
    expected_used += allocation_of(tail.size(), false);
    // An upload with one acknowledged part.
    auto upload =
        run(store_->create_upload(bucket_, "mp", "owner", {}, std::nullopt, std::nullopt)).value();
    auto part = [&](std::uint32_t n, std::size_t size, bool commit) {
      return run([&, n, size, commit]() -> asio::awaitable<Result<void>> {
        H3_CO_TRY(auto w, co_await store_->create_writer(std::uint64_t{size}, true));
        H3_CO_TRY(co_await w->write(test::pattern_bytes(size, n)));
        H3_CO_TRY(co_await w->finish());
        std::string etag = etag_of(*w);
        if (commit) {
          auto committing = store_->commit_part(std::move(w), upload.upload_id, n, {}, etag, {});
          H3_CO_TRY(co_await std::move(committing));
        }
        co_return Result<void>{};
      }());
    };
    ASSERT_TRUE(part(1, 2 * kMiB + 1, true).has_value());
    expected_used += allocation_of(2 * kMiB + 1, false);

    // In flight when the process dies: written and flushed, never committed.
    run([&]() -> asio::awaitable<void> {
      for (const char* key : {"acked-1", "acked-3", "new-key"}) {  // two overwrites, one new key
        auto w = (co_await store_->create_writer(std::uint64_t{3 * kMiB})).value();
        EXPECT_TRUE((co_await w->write(test::pattern_bytes(3 * kMiB, 999))).has_value()) << key;
        EXPECT_TRUE((co_await w->finish()).has_value()) << key;
      }
    }());
    ASSERT_TRUE(append(test::pattern_bytes(kMiB, 998),
                       store_->head(bucket_.id, "acked-2").value()->id, false)
                    .has_value());
    ASSERT_TRUE(part(2, kMiB, false).has_value());
    // And half-written, never flushed.
    run([&]() -> asio::awaitable<void> {
      auto w = (co_await store_->create_writer(std::nullopt)).value();
      EXPECT_TRUE((co_await w->write(test::pattern_bytes(5 * kMiB + 3, 997))).has_value());
    }());
    close();
    fault_->crash(mode, round);
    open();
    for (const auto& [key, data] : acked) {
      auto got = get(key);
      ASSERT_TRUE(got.has_value()) << key << ": " << got.error().message();
      EXPECT_TRUE(*got == data) << key;
    }
    EXPECT_EQ(get("new-key").error(), errc::kNotFound);
    const auto parts =
        run(store_->list_parts(store_->find_upload(upload.upload_id).value()->id, 0, 100)).value();
    ASSERT_EQ(parts.size(), 1U);
    EXPECT_EQ(parts[0].size_bytes, 2 * kMiB + 1);
    EXPECT_EQ(used(), expected_used);
    EXPECT_EQ(store_->stats().pending_free_bytes, 0U);
    // Clean up for the next round; everything must come back.
    for (const auto& [key, data] : acked)
      ASSERT_TRUE(run(store_->delete_object(bucket_.id, key)).has_value());
    ASSERT_TRUE(run(store_->abort_upload(upload.upload_id)).has_value());
    EXPECT_EQ(used(), 0U);
  }
}

// A failing device read: a device read that fails (EIO) is an error to that reader, never data, and
// only to it: other objects, other ranges of the same object and writes go on; the block cache
// keeps nothing of the failed read, so the object reads whole once the device recovers.
TEST_P(FaultStoreTest, ReadErrorsReachTheReaderAndNothingElse) {
  close();
  options_.cache_bytes = 64 * kMiB;
  open();
  const Bytes bad = test::pattern_bytes(6 * kMiB + 100, 80);
  const Bytes good = test::pattern_bytes(3 * kMiB, 81);
  const Bytes small = test::pattern_bytes(200, 82);
  ASSERT_TRUE(put("bad", bad).has_value());
  ASSERT_TRUE(put("good", good).has_value());
  ASSERT_TRUE(put("small", small).has_value());
  const auto id = store_->head(bucket_.id, "bad").value()->id;
  close();
  std::uint64_t failing_at = 0;
  {
    auto catalog =
        Catalog::open({(std::filesystem::path(options_.data_dir) / "catalog.db").string()});
    const auto extents = catalog->object_extents(id).value();
    ASSERT_FALSE(extents.empty());
    ASSERT_EQ(extents[0].logical_offset_bytes, 0U);
    ASSERT_GE(extents[0].length_bytes, 5 * kMiB);
    failing_at = extents[0].device.offset_bytes + 4 * kMiB + 8192;  // logical 4 MiB + 8 KiB
  }
  open();
  fault_->fail_range(failing_at, 4096);
  for (int attempt = 0; attempt < 2; ++attempt) {
    // Streamed: what comes before the failure is exact, then the error, and nothing after it.
    auto streamed = run([&]() -> asio::awaitable<std::pair<Bytes, error_code>> {
      auto reader = (co_await store_->open_reader(bucket_.id, "bad")).value();
      Bytes got;
      for (;;) {
        auto piece = co_await reader->next();
        if (!piece) co_return std::pair{got, piece.error()};
        if (piece->empty()) co_return std::pair{got, error_code{}};
        got.insert(got.end(), piece->begin(), piece->end());
      }
    }());
    EXPECT_EQ(streamed.second, errc::kIoError) << attempt;
    EXPECT_LE(streamed.first.size(), 4 * kMiB + 8192);
    EXPECT_TRUE(std::equal(streamed.first.begin(), streamed.first.end(), bad.begin())) << attempt;
    EXPECT_EQ(
        get("bad", std::pair{std::uint64_t{4 * kMiB + 8192 + 100}, std::uint64_t{10}}).error(),
        errc::kIoError);
    // Everything else is served meanwhile.
    EXPECT_TRUE(get("good").value() == good);
    EXPECT_TRUE(get("small").value() == small);
    auto head = get("bad", std::pair{std::uint64_t{0}, std::uint64_t{4 * kMiB}});
    ASSERT_TRUE(head.has_value()) << head.error().message();
    EXPECT_TRUE(std::equal(head->begin(), head->end(), bad.begin()));
    auto after = get("bad", std::pair{std::uint64_t{5 * kMiB}, std::uint64_t{kMiB + 100}});
    ASSERT_TRUE(after.has_value()) << after.error().message();
    EXPECT_TRUE(std::equal(after->begin(), after->end(),
                           bad.begin() + static_cast<std::ptrdiff_t>(5 * kMiB)));
    EXPECT_TRUE(put("written-meanwhile-" + std::to_string(attempt), test::pattern_bytes(kMiB, 83))
                    .has_value());
  }
  fault_->clear_faults();
  EXPECT_TRUE(get("bad").value() == bad);
}

// A torn write after a power loss: a device that acknowledges flushes it did not do loses power; of
// each write, any sectors may have reached the medium (later ones without earlier ones: not a
// prefix). The catalog, durable on its own, references data that is partly missing: every block of
// it reads back exactly or fails its checksum, never as other bytes.
TEST_P(FaultStoreTest, TornWritesThatAreNotAPrefixFailTheirChecksums) {
  std::map<std::string, Bytes> written;
  fault_->ignore_flushes(true);
  for (std::uint32_t i = 0; i < 6; ++i) {
    const std::string key = "torn-" + std::to_string(i);
    Bytes data = test::pattern_bytes(256 * 1024 + 1000 * i + 1, 90 + i);
    ASSERT_TRUE(put(key, data).has_value());
    written[key] = std::move(data);
  }
  close();
  fault_->crash(FaultDevice::Crash::kScatterUnflushed, 5);
  fault_->clear_faults();
  open();
  std::uint64_t kept = 0;
  std::uint64_t lost = 0;
  bool lost_before_kept = false;  // the tear is not a prefix of the write
  for (const auto& [key, data] : written) {
    bool lost_here = false;
    for (std::uint64_t at = 0; at < data.size(); at += 4096) {
      const std::uint64_t n = std::min<std::uint64_t>(4096, data.size() - at);
      auto block = get(key, std::pair{at, n});
      if (block) {
        ASSERT_EQ(block->size(), n);
        EXPECT_TRUE(std::equal(block->begin(), block->end(),
                               data.begin() + static_cast<std::ptrdiff_t>(at)))
            << key << " block at " << at << " is other bytes";
        ++kept;
        if (lost_here) lost_before_kept = true;
      } else {
        EXPECT_EQ(block.error(), errc::kChecksumMismatch) << key << " at " << at;
        ++lost;
        lost_here = true;
      }
    }
    if (lost_here) {
      EXPECT_EQ(get(key).error(), errc::kChecksumMismatch) << key;
    }
  }
  EXPECT_GT(kept, 0U);
  EXPECT_GT(lost, 0U);
  EXPECT_TRUE(lost_before_kept) << "the crash tore only prefixes: the test proved nothing";
}

INSTANTIATE_TEST_SUITE_P(Faults, FaultStoreTest, ::testing::Values(Engine::kFault), engine_name);

// ---- identity ----------------------------------------------------------------------------------

TEST(StoreIdentity, ACatalogRefusesAnotherDevice) {
  test::TempDir dir;
  StoreOptions a;
  a.data_dir = dir.file("a");
  a.device_size_bytes = 64 * kMiB;
  StoreOptions b = a;
  b.data_dir = dir.file("b");
  ObjectStore::open(a)->shutdown();
  ObjectStore::open(b)->shutdown();
  // b's catalog with a's device.
  StoreOptions mixed = b;
  mixed.device_path = dir.file("a/device.img");
  try {
    ObjectStore::open(mixed);
    FAIL() << "opened a device that belongs to another catalog";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("but the catalog belongs to device"), std::string::npos)
        << e.what();
  }
  // A file that is not a hots3 device is never formatted over.
  {
    std::ofstream junk(dir.file("junk.img"), std::ios::binary);
    junk << std::string(4096, 'J');
    junk.seekp(64 * kMiB - 1);
    junk << 'x';
  }
  StoreOptions foreign = a;
  foreign.data_dir = dir.file("c");
  foreign.device_path = dir.file("junk.img");
  EXPECT_THROW(ObjectStore::open(foreign), std::runtime_error);
}

// The UUID in the superblock of the device file at `path`, or "none".
std::string device_uuid_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes(kSuperblockBytes, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  auto sb = decode_superblock(std::as_bytes(std::span(bytes)));
  return sb ? format_uuid(sb->uuid) : std::string("none");
}

TEST(StoreIdentity, ANewCatalogTakesOverAnotherStoresDeviceOnlyWhenForced) {
  test::TempDir dir;
  StoreOptions a;
  a.data_dir = dir.file("a");
  a.device_size_bytes = 64 * kMiB;
  ObjectStore::open(a)->shutdown();
  const std::string device = dir.file("a/device.img");
  const std::string old_uuid = device_uuid_of(device);
  ASSERT_NE(old_uuid, "none");

  StoreOptions fresh = a;
  fresh.data_dir = dir.file("fresh");
  fresh.device_path = device;
  try {
    ObjectStore::open(fresh);
    FAIL() << "a new catalog took over another store's device";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("belongs to another hots3 store (device UUID " + old_uuid + ")"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("device UUID: none"), std::string::npos) << what;
    EXPECT_NE(what.find("--force-format"), std::string::npos) << what;
  }
  EXPECT_EQ(device_uuid_of(device), old_uuid);  // refused means untouched
  ObjectStore::open(a)->shutdown();             // and its own catalog still opens it

  fresh.force_format = true;
  ObjectStore::open(fresh)->shutdown();
  const std::string new_uuid = device_uuid_of(device);
  EXPECT_NE(new_uuid, old_uuid);
  EXPECT_NE(new_uuid, "none");
  fresh.force_format = false;
  ObjectStore::open(fresh)->shutdown();                    // the device is this catalog's now
  EXPECT_THROW(ObjectStore::open(a), std::runtime_error);  // and no longer the old one's
}

}  // namespace
}  // namespace hots3::storage
