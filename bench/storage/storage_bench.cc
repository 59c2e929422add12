// hots3-storage-bench: the storage engine alone (no HTTP, no S3), driven through the
// ObjectStore API. bench/storage/run.sh puts each figure next to fio on the same device file.
//
//   seqwrite   STREAMS writers, each writing objects of SIZE bytes (declared size)
//   seqread    the same objects read back in full (cache off: every byte from the device)
//   randread   CONCURRENCY readers doing random BS-byte ranged reads of one large object
//   smallput   CONCURRENCY writers of SIZE-byte (inline) objects, each durable on return; the rate
//              and each put's latency (p50, p99, p99.9)
//   hotread    repeated full reads of one SIZE object through the cache, copied out
//   scale      with COUNT objects of SIZE bytes in the bucket (filled once, kept across runs in
//              --data), in 1000-key "directories" d0000/, d0001/, ...: the start-up time (free
//              space rebuilt from the catalog), HEAD and GET p50/p99 of random keys and of the
//              same keys again (warm_*), listing one directory (1000 keys) and the root with
//              delimiter "/" (one seek per directory)
//   complete   one multipart upload of COUNT parts of SIZE bytes (written by CONCURRENCY writers),
//              then the time of its CompleteMultipartUpload (metadata only: no data is copied)
//
// Output: one line "name value unit" per figure (and a JSON line with --json).

#include "storage/device/device.h"

#include "hots3/common/hex.h"
#include "hots3/common/logging.h"
#include "hots3/common/units.h"
#include "hots3/common/worker_pool.h"
#include "hots3/storage/object_store.h"

#include <CLI/CLI.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <random>
#include <thread>

namespace {

namespace asio = boost::asio;
using hots3::Result;
using namespace hots3::storage;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string mode;
  std::string data_dir = "./bench-data";
  std::string device;
  std::string size_text = "256MiB";
  std::string bs_text = "4KiB";
  std::string device_size_text = "16GiB";
  std::string cache_text = "0";
  std::string metadata_cache_text = "64MiB";
  unsigned threads = 0;
  unsigned streams = 4;
  unsigned concurrency = 32;
  unsigned objects = 8;
  std::uint64_t count = 1000;
  double seconds = 10;
  std::string engine = "auto";
  bool fast_etag = false;
  std::size_t depth = 4;
};

constexpr std::size_t kSinkBytes = 8 << 20;
constexpr std::size_t kReadBytes = 1 << 20;  // as fio bs=1M

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double us_since(Clock::time_point t) { return since(t) * 1e6; }

// The p-quantile of `v` (sorted in place). REQUIRES: !v.empty()
double percentile(std::vector<double>& v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

std::vector<std::byte> payload(std::size_t n) {
  std::vector<std::byte> out(n);
  std::mt19937_64 random(42);
  for (std::size_t i = 0; i < n; i += 8) {
    const std::uint64_t v = random();
    std::memcpy(out.data() + i, &v, std::min<std::size_t>(8, n - i));
  }
  return out;
}

class Bench {
 public:
  explicit Bench(const Args& args) : args_(args) { open(); }

  ~Bench() { close(); }
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;
  Bench(Bench&&) = delete;
  Bench& operator=(Bench&&) = delete;

  void open() {
    StoreOptions o;
    o.data_dir = args_.data_dir;
    o.device_path = args_.device;
    o.device_size_bytes = hots3::parse_size_bytes(args_.device_size_text).value();
    o.cache_bytes = hots3::parse_size_bytes(args_.cache_text).value();
    o.metadata_cache_bytes = hots3::parse_size_bytes(args_.metadata_cache_text).value();
    o.engine = args_.engine == "posix"      ? DeviceOptions::Engine::kPosix
               : args_.engine == "io_uring" ? DeviceOptions::Engine::kUring
                                            : DeviceOptions::Engine::kAuto;
    o.compute_md5 = !args_.fast_etag;
    o.stream_depth = args_.depth;
    o.io_buffers_per_worker = std::max<std::size_t>(32, args_.depth * args_.streams + 8);
    store_ = ObjectStore::open(o);
    workers_ = std::make_unique<hots3::WorkerPool>(args_.threads);
    for (auto* c : workers_->contexts()) store_->attach(*c);
    workers_->start();
    auto bucket = store_->find_bucket("bench").value();
    if (!bucket) bucket = run(0, store_->create_bucket("bench", "bench")).value();
    bucket_ = *bucket;
  }

  void close() {
    store_->shutdown();
    workers_->stop();
    workers_.reset();
    store_.reset();
  }

  template <class T>
  T run(std::size_t worker, asio::awaitable<T> op) {
    std::promise<T> p;
    auto f = p.get_future();
    auto* context = workers_->contexts()[worker % workers_->size()];
    asio::co_spawn(*context, std::move(op), [&p](const std::exception_ptr& e, T v) {
      if (e) {
        p.set_exception(e);
      } else {
        p.set_value(std::move(v));
      }
    });
    return f.get();
  }

  // Runs `n` copies of `make(i)` concurrently spread over the workers; waits for all.
  template <class F>
  void parallel(unsigned n, F make) {
    std::vector<std::future<int>> done;
    for (unsigned i = 0; i < n; ++i) {
      done.push_back(std::async(std::launch::async, [this, i, &make] { return run(i, make(i)); }));
    }
    for (auto& d : done) d.get();
  }

  asio::awaitable<Result<ObjectRecord>> put(std::string key, std::span<const std::byte> data) {
    H3_CO_TRY(auto w, co_await store_->create_writer(data.size()));
    for (std::size_t at = 0; at < data.size(); at += 1 << 20) {
      H3_CO_TRY(
          co_await w->write(data.subspan(at, std::min<std::size_t>(1 << 20, data.size() - at))));
    }
    H3_CO_TRY(co_await w->finish());
    ObjectSpec spec;
    spec.etag = hots3::to_hex(w->digest());
    co_return co_await store_->commit_object(std::move(w), bucket_, std::move(key), spec, {});
  }

  // Reads the range; copies each piece into `sink` when given, always to its start (as read(2)
  // into one buffer would: fio's reference does the same).
  asio::awaitable<Result<std::uint64_t>> read(std::string key, std::uint64_t offset,
                                              std::uint64_t length, std::byte* sink) {
    H3_CO_TRY(auto r, co_await store_->open_reader(bucket_.id, key));
    if (length != 0) r->set_range(offset, length);
    std::uint64_t total = 0;
    for (;;) {
      H3_CO_TRY(auto piece, co_await r->next());
      if (piece.empty()) break;
      if (sink != nullptr) {
        if (piece.size() > kSinkBytes) throw std::runtime_error("piece larger than the sink");
        std::memcpy(sink + total % kReadBytes, piece.data(), piece.size());
      }
      total += piece.size();
    }
    co_return total;
  }

  void seqwrite() {
    const std::uint64_t size = hots3::parse_size_bytes(args_.size_text).value();
    const auto data = payload(size);
    const auto start = Clock::now();
    parallel(args_.streams, [&](unsigned s) -> asio::awaitable<int> {
      for (unsigned i = s; i < args_.objects; i += args_.streams) {
        auto r = co_await put("seq-" + std::to_string(i), data);
        if (!r) throw std::runtime_error("put: " + r.error().message());
      }
      co_return 0;
    });
    const double t = since(start);
    report("seqwrite_MBps", static_cast<double>(size) * args_.objects / t / 1e6, "MB/s");
  }

  void seqread() {
    std::atomic<std::uint64_t> bytes{0};
    const auto start = Clock::now();
    parallel(args_.streams, [&](unsigned s) -> asio::awaitable<int> {
      for (unsigned i = s; i < args_.objects; i += args_.streams) {
        auto r = co_await read("seq-" + std::to_string(i), 0, 0, nullptr);
        if (!r) throw std::runtime_error("read: " + r.error().message());
        bytes += *r;
      }
      co_return 0;
    });
    report("seqread_MBps", static_cast<double>(bytes.load()) / since(start) / 1e6, "MB/s");
  }

  void randread() {
    const std::uint64_t bs = hots3::parse_size_bytes(args_.bs_text).value();
    const std::uint64_t size = hots3::parse_size_bytes(args_.size_text).value();
    if (!store_->head(bucket_.id, "rand").value()) {
      const auto data = payload(size);
      if (!run(0, put("rand", data))) throw std::runtime_error("put failed");
    }
    std::atomic<std::uint64_t> ops{0};
    std::vector<std::vector<double>> latencies_us(args_.concurrency);
    const auto deadline = Clock::now() + std::chrono::duration<double>(args_.seconds);
    const auto start = Clock::now();
    parallel(args_.concurrency, [&](unsigned c) -> asio::awaitable<int> {
      std::mt19937_64 random(c);
      const std::uint64_t blocks = size / bs;
      auto& mine = latencies_us[c];
      while (Clock::now() < deadline) {
        const std::uint64_t offset = (random() % blocks) * bs;
        const auto t = Clock::now();
        auto r = co_await read("rand", offset, bs, nullptr);
        if (!r) throw std::runtime_error("read: " + r.error().message());
        ++ops;
        mine.push_back(us_since(t));
      }
      co_return 0;
    });
    const double rate = static_cast<double>(ops.load()) / since(start);
    std::vector<double> all;
    for (const auto& l : latencies_us) all.insert(all.end(), l.begin(), l.end());
    const std::string name = "randread_" + args_.bs_text;
    report(name + "_IOPS", rate, "IOPS");
    if (!all.empty()) {
      report(name + "_p50_us", percentile(all, 0.5), "us");
      report(name + "_p99_us", percentile(all, 0.99), "us");
    }
  }

  void smallput() {
    const std::uint64_t size = hots3::parse_size_bytes(args_.size_text).value();
    const auto data = payload(size);
    std::atomic<std::uint64_t> ops{0};
    std::vector<std::vector<double>> latency_us(args_.concurrency);  // one per writer: no sharing
    const auto deadline = Clock::now() + std::chrono::duration<double>(args_.seconds);
    const auto start = Clock::now();
    parallel(args_.concurrency, [&](unsigned c) -> asio::awaitable<int> {
      for (std::uint64_t i = 0; Clock::now() < deadline; ++i) {
        const auto at = Clock::now();
        auto r = co_await put(fmt::format("small/{}/{}", c, i), data);
        if (!r) throw std::runtime_error("put: " + r.error().message());
        latency_us[c].push_back(us_since(at));
        ++ops;
      }
      co_return 0;
    });
    const auto stats = store_->stats();
    report("smallput_ops", static_cast<double>(ops.load()) / since(start), "ops/s");
    std::vector<double> all;
    for (const auto& one : latency_us) all.insert(all.end(), one.begin(), one.end());
    report("smallput_p50_us", percentile(all, 0.5), "us");
    report("smallput_p99_us", percentile(all, 0.99), "us");
    report("smallput_p999_us", percentile(all, 0.999), "us");
    const auto& writer = stats.catalog_writer;
    report("smallput_writes_per_commit",
           static_cast<double>(writer.writes) /
               std::max<double>(1, static_cast<double>(writer.commits)),
           "");
    // The writer's stops to let the WAL start over, and how many of them the checkpointer had
    // not closed in on (each a longer stop: see catalog.cc).
    report("smallput_writer_checkpoints", static_cast<double>(writer.writer_checkpoints), "");
    report("smallput_writer_checkpoints_at_limit",
           static_cast<double>(writer.writer_checkpoints_at_limit), "");
    report("smallput_writer_checkpoint_mean_us",
           static_cast<double>(writer.writer_checkpoint_ns) / 1000.0 /
               std::max<double>(1, static_cast<double>(writer.writer_checkpoints)),
           "us");
  }

  void complete() {
    const std::uint64_t size = hots3::parse_size_bytes(args_.size_text).value();
    const auto data = payload(size);
    const auto parts = static_cast<std::uint32_t>(args_.count);
    auto upload =
        run(0, store_->create_upload(bucket_, "multipart", "bench", {}, std::nullopt, std::nullopt))
            .value();
    std::atomic<std::uint32_t> next{1};
    const auto start = Clock::now();
    parallel(args_.concurrency, [&](unsigned) -> asio::awaitable<int> {
      for (std::uint32_t n = next++; n <= parts; n = next++) {
        auto w = (co_await store_->create_writer(data.size(), /*for_part=*/true)).value();
        if (!co_await w->write(data) || !co_await w->finish())
          throw std::runtime_error("part write failed");
        std::string etag = hots3::to_hex(w->digest());
        auto committing = store_->commit_part(std::move(w), upload.upload_id, n, {}, etag, {});
        auto part = co_await std::move(committing);
        if (!part) throw std::runtime_error("commit_part: " + part.error().message());
      }
      co_return 0;
    });
    report("complete_parts_per_s", parts / since(start), "parts/s");
    const auto completing = Clock::now();
    auto object = run(
        0, store_->complete_upload(
               upload.upload_id,
               [&](const UploadRecord&,
                   const std::vector<PartRecord>& all) -> Result<ObjectStore::CompletionPlan> {
                 ObjectStore::CompletionPlan plan;
                 plan.parts = all;
                 plan.spec.etag = fmt::format("00000000000000000000000000000000-{}", all.size());
                 return plan;
               },
               {}));
    const double seconds = since(completing);
    if (!object || object->parts_count != parts) throw std::runtime_error("complete failed");
    report("complete_parts", parts, "parts");
    report("complete_ms", seconds * 1e3, "ms");
  }

  void hotread() {
    const std::uint64_t size = hots3::parse_size_bytes(args_.size_text).value();
    const auto data = payload(size);
    if (!run(0, put("hot", data))) throw std::runtime_error("put failed");
    // Page-aligned, as fio's buffers are: a copy whose source and destination disagree modulo
    // 64 bytes runs at a third of the speed on this CPU ("rep movsb"), and a std::vector's
    // memory starts 16 bytes into a page.
    const std::unique_ptr<std::byte, decltype(&std::free)> sink(
        static_cast<std::byte*>(std::aligned_alloc(4096, kSinkBytes)), &std::free);
    // Warm: read until every block is cached, and until the cache has touched all its memory:
    // it prefaults in the background after start-up, and first touches on these VMs cost
    // several microseconds per page, enough to halve the copy speed of the other core.
    for (int i = 0; i < 600; ++i) {
      run(0, read("hot", 0, 0, sink.get()));
      const auto stats = store_->stats();
      if (stats.cache_used_bytes >= size &&
          stats.cache_prefaulted_bytes >= stats.cache_capacity_bytes)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const auto start = Clock::now();
    std::uint64_t bytes = 0;
    while (since(start) < args_.seconds) bytes += run(0, read("hot", 0, 0, sink.get())).value();
    report("hotread_MBps", static_cast<double>(bytes) / since(start) / 1e6, "MB/s");
  }

  void scale() {
    const std::uint64_t size = hots3::parse_size_bytes(args_.size_text).value();
    const auto data = payload(size);
    const auto key_of = [](std::uint64_t i) {
      return fmt::format("d{:04}/{:06}", i / 1000, i % 1000);
    };
    // Fill up to COUNT (a previous run's objects are kept: the last key tells how far it got).
    std::uint64_t have = 0;
    for (std::uint64_t probe = args_.count; probe > 0; probe /= 2) {
      if (store_->head(bucket_.id, key_of(probe - 1)).value()) {
        have = probe;
        break;
      }
    }
    std::atomic<std::uint64_t> next{have};
    const auto fill_start = Clock::now();
    parallel(64, [&](unsigned) -> asio::awaitable<int> {
      for (;;) {
        const std::uint64_t i = next++;
        if (i >= args_.count) break;
        auto r = co_await put(key_of(i), data);
        if (!r) throw std::runtime_error("put: " + r.error().message());
      }
      co_return 0;
    });
    if (args_.count > have) {
      report("fill_puts_per_s", static_cast<double>(args_.count - have) / since(fill_start),
             "ops/s");
    }

    // A restart: the free space is rebuilt from the catalog.
    close();
    auto t = Clock::now();
    open();
    report("startup_ms", since(t) * 1000, "ms");
    report("startup_rebuild_ms", static_cast<double>(store_->stats().startup_rebuild.count()),
           "ms");

    // HEAD and GET of 20,000 random keys just after the start (the catalog's pages not yet
    // touched by this process), then of the same keys again (warm_: with the metadata cache on,
    // from the cache, as a training job's second epoch reads them).
    std::vector<std::string> keys;
    std::mt19937_64 random(1);
    for (int i = 0; i < 20000; ++i) keys.push_back(key_of(random() % args_.count));
    const auto head_and_get = [&](const std::string& prefix) {
      std::vector<double> head_us, get_us;
      for (const std::string& key : keys) {
        t = Clock::now();
        if (!store_->head(bucket_.id, key).value()) throw std::runtime_error("missing " + key);
        head_us.push_back(us_since(t));
        t = Clock::now();
        run(0, read(key, 0, 0, nullptr)).value();
        get_us.push_back(us_since(t));
      }
      report(prefix + "head_p50_us", percentile(head_us, 0.5), "us");
      report(prefix + "head_p99_us", percentile(head_us, 0.99), "us");
      report(prefix + "get_p50_us", percentile(get_us, 0.5), "us");
      report(prefix + "get_p99_us", percentile(get_us, 0.99), "us");
    };
    head_and_get("");
    head_and_get("warm_");

    // One directory in the middle, then the root (one common prefix per directory).
    const auto list_ms = [&](ListQuery q, std::size_t want) {
      const auto at = Clock::now();
      constexpr int kRounds = 20;
      for (int i = 0; i < kRounds; ++i) {
        auto page = run(0, store_->list_objects(bucket_.id, q)).value();
        if (page.objects.size() + page.common_prefixes.size() != want)
          throw std::runtime_error("short listing");
      }
      return since(at) * 1000 / kRounds;
    };
    const std::uint64_t directories = (args_.count + 999) / 1000;
    ListQuery dir;
    dir.prefix = fmt::format("d{:04}/", directories / 2);
    dir.delimiter = "/";
    dir.max_keys = 1000;
    report("list_directory_ms",
           list_ms(dir, std::min<std::uint64_t>(1000, args_.count - directories / 2 * 1000)), "ms");
    ListQuery root;
    root.delimiter = "/";
    root.max_keys = 1000;
    report("list_root_ms", list_ms(root, std::min<std::uint64_t>(1000, directories)), "ms");
  }

  void report(const std::string& name, double value, const std::string& unit) {
    std::printf("%s %.1f %s\n", name.c_str(), value, unit.c_str());
    std::fflush(stdout);
  }

 private:
  const Args& args_;
  std::unique_ptr<ObjectStore> store_;
  std::unique_ptr<hots3::WorkerPool> workers_;
  BucketRecord bucket_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hots3 storage engine benchmark"};
  Args a;
  app.add_option("mode", a.mode, "seqwrite|seqread|randread|smallput|hotread|scale|complete")
      ->required();
  app.add_option("--data", a.data_dir);
  app.add_option("--device", a.device);
  app.add_option("--device-size", a.device_size_text);
  app.add_option("--size", a.size_text);
  app.add_option("--bs", a.bs_text);
  app.add_option("--cache", a.cache_text);
  app.add_option("--metadata-cache", a.metadata_cache_text);
  app.add_option("--threads", a.threads);
  app.add_option("--streams", a.streams);
  app.add_option("--concurrency", a.concurrency);
  app.add_option("--objects", a.objects);
  app.add_option("--count", a.count);
  app.add_option("--seconds", a.seconds);
  app.add_option("--engine", a.engine);
  app.add_option("--depth", a.depth);
  app.add_flag("--fast-etag", a.fast_etag);
  CLI11_PARSE(app, argc, argv);
  hots3::log::Options log_options;
  log_options.level = hots3::log::Level::kWarn;
  log_options.access_log_path = "";
  hots3::log::init(log_options);
  try {
    Bench bench(a);
    if (a.mode == "seqwrite")
      bench.seqwrite();
    else if (a.mode == "seqread")
      bench.seqread();
    else if (a.mode == "randread")
      bench.randread();
    else if (a.mode == "smallput")
      bench.smallput();
    else if (a.mode == "hotread")
      bench.hotread();
    else if (a.mode == "scale")
      bench.scale();
    else if (a.mode == "complete")
      bench.complete();
    else
      throw std::runtime_error("unknown mode " + a.mode);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "storage_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
