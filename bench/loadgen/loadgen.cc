// hots3-loadgen: an S3 load generator in the spirit of MinIO's warp, for hots3 or any other S3
// endpoint (and, with --plain, any HTTP server such as nginx, to show the machine's ceiling and
// that the generator is not the bottleneck).
//
//   put        PUT new objects of --size (or sizes between --size and --size-max)
//   get        GET whole objects, picked at random from --objects prepared ones
//   range      GET --range-size ranges at random aligned offsets of the prepared objects
//   head       HEAD random prepared objects
//   list       ListObjectsV2 pages (--max-keys) of random "directories" (--dirs) or the root
//   delete     DELETE prepared objects, each once
//   mixed      --mix of get, head, put (new keys) and delete (of this run's own puts)
//   multipart  whole multipart uploads of --size in --part-size parts, --part-concurrency at once
//   checkpoint what a training job does: --writers shards of --shard-size by multipart at once,
//              a manifest with If-None-Match: *, the previous checkpoint removed by
//              DeleteObjects; then --readers read the shards back in --read-size ranged GETs
//
// Every workload is bounded by --duration and --ops (whichever comes first), after --warmup.
// Reports ops/s, MB/s, latency percentiles, errors, the generator's own CPU time and, with
// --server-pid, the server's CPU seconds per GB moved and its peak RSS; as a table and JSON.

#include "s3_client.h"

#include "hots3/aws/checksum.h"
#include "hots3/common/digest.h"
#include "hots3/common/units.h"
#include "hots3/http/client.h"

#include <CLI/CLI.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>

namespace hots3::bench {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using asio::awaitable;
using asio::use_awaitable;

struct Options {
  std::string endpoint = "http://127.0.0.1:9000";
  std::string access_key;
  std::string secret_key;
  std::string region = "us-east-1";
  bool plain = false;
  bool express = false;
  std::string bucket = "loadgen";
  std::string prefix = "lg/";
  std::string workload = "get";
  std::string size_text = "1MiB";
  std::string size_max_text;
  std::uint64_t objects = 100;
  unsigned concurrency = 16;
  unsigned threads = 2;
  std::string duration_text = "10s";
  std::uint64_t ops = 0;
  std::string warmup_text = "0s";
  std::string range_text = "1MiB";
  std::string part_text = "8MiB";
  unsigned part_concurrency = 4;
  std::string mix = "get=60,head=10,put=20,delete=10";
  unsigned dirs = 0;
  std::string delimiter;
  unsigned max_keys = 1000;
  bool list_root = false;
  bool prepare = true;
  bool verify = false;
  bool overwrite = false;
  int server_pid = 0;
  std::string json_path;
  std::string payload_text = "64MiB";
  // checkpoint
  unsigned writers = 8;
  std::string shard_text = "1GiB";
  unsigned rounds = 2;
  unsigned readers = 8;
  std::string read_text = "8MiB";
};

enum Op : std::uint8_t { kPut, kGet, kRange, kHead, kList, kDelete, kMultipart, kPart, kOpCount };
constexpr std::array<std::string_view, kOpCount> kOpNames = {"PUT",  "GET",    "GET-RANGE", "HEAD",
                                                             "LIST", "DELETE", "MULTIPART", "PART"};

struct OpStats {
  std::uint64_t ops = 0;
  std::uint64_t bytes = 0;
  std::uint64_t errors = 0;
  std::vector<std::uint32_t> latency_us;
  std::map<std::string, std::uint64_t> error_kinds;  // "503", "connect: ...", "verify"

  void merge(const OpStats& o) {
    ops += o.ops;
    bytes += o.bytes;
    errors += o.errors;
    latency_us.insert(latency_us.end(), o.latency_us.begin(), o.latency_us.end());
    for (const auto& [k, n] : o.error_kinds) error_kinds[k] += n;
  }
};
using Stats = std::array<OpStats, kOpCount>;

// ---- the server's CPU time and memory, from /proc ---------------------------------------------
struct ProcessSample {
  double cpu_s = 0;
  std::uint64_t rss_bytes = 0;
};

std::optional<ProcessSample> sample_process(int pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 2));
  std::vector<std::string> f((std::istream_iterator<std::string>(fields)),
                             std::istream_iterator<std::string>());
  if (f.size() < 22) return std::nullopt;
  // After the command: state(0) ... utime(11) stime(12) ... rss(21) in pages.
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  ProcessSample s;
  s.cpu_s = (std::stod(f[11]) + std::stod(f[12])) / ticks;
  s.rss_bytes = std::stoull(f[21]) * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  return s;
}

double own_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}
// Samples the server's RSS every 20 ms while alive, for its peak; and the CPU time of the server
// and of the generator itself from `from` (the end of the warm-up, whose requests are not
// counted either) to finish().
class ServerWatch {
 public:
  ServerWatch(int pid, Clock::time_point from) : pid_(pid) {
    if (pid_ != 0) {
      auto s = sample_process(pid_);
      if (!s) throw std::runtime_error(fmt::format("no process {}", pid_));
      start_ = *s;
    }
    own_start_ = own_cpu_s();
    thread_ = std::thread([this, from] {
      bool started = Clock::now() >= from;
      while (!stop_) {
        const auto now = Clock::now();
        if (!started && now >= from) {
          started = true;
          own_start_ = own_cpu_s();
          if (pid_ != 0) {
            if (auto s = sample_process(pid_)) start_ = *s;
          }
        }
        if (pid_ != 0) {
          if (auto s = sample_process(pid_)) peak_rss_ = std::max(peak_rss_.load(), s->rss_bytes);
        }
        auto pause = std::chrono::duration_cast<Clock::duration>(std::chrono::milliseconds(20));
        if (!started) pause = std::min(pause, from - now);
        std::this_thread::sleep_for(pause);
      }
    });
  }
  ~ServerWatch() { finish(); }
  ServerWatch(const ServerWatch&) = delete;
  ServerWatch& operator=(const ServerWatch&) = delete;
  ServerWatch(ServerWatch&&) = delete;
  ServerWatch& operator=(ServerWatch&&) = delete;

  void finish() {
    if (!thread_.joinable()) return;
    stop_ = true;
    thread_.join();
    own_cpu_s_ = own_cpu_s() - own_start_;
    if (pid_ == 0) return;
    if (auto s = sample_process(pid_)) {
      cpu_s_ = s->cpu_s - start_.cpu_s;
      peak_rss_ = std::max(peak_rss_.load(), s->rss_bytes);
    }
  }
  [[nodiscard]] bool active() const { return pid_ != 0; }
  [[nodiscard]] double cpu_s() const { return cpu_s_; }
  [[nodiscard]] double loadgen_cpu_s() const { return own_cpu_s_; }
  [[nodiscard]] std::uint64_t peak_rss_bytes() const { return peak_rss_; }

 private:
  int pid_;
  ProcessSample start_;
  double own_start_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> peak_rss_{0};
  double cpu_s_ = 0;
  double own_cpu_s_ = 0;
  std::thread thread_;
};

// Waits for a number of coroutines spawned on the same (single-threaded) executor.
class WaitGroup {
 public:
  explicit WaitGroup(asio::any_io_executor ex) : timer_(std::move(ex), Clock::time_point::max()) {}
  void add() { ++count_; }
  void done() {
    if (--count_ == 0) timer_.cancel();
  }
  awaitable<void> wait() {
    while (count_ > 0) {
      boost::system::error_code ec;  // cancelled is the signal, not a failure
      co_await timer_.async_wait(asio::redirect_error(use_awaitable, ec));
    }
  }

 private:
  asio::steady_timer timer_;
  std::size_t count_ = 0;
};

// The statuses that count as success for a request (up to three).
struct Expected {
  unsigned a = 200, b = 0, c = 0;
  [[nodiscard]] bool has(unsigned status) const {
    return status == a || status == b || status == c;
  }
};

class LoadGen {
 public:
  explicit LoadGen(Options o)
      : o_(std::move(o)),
        payload_(static_cast<std::size_t>(parse_size_bytes(o_.payload_text).value())),
        size_(parse_size_bytes(o_.size_text).value()),
        size_max_(o_.size_max_text.empty() ? size_ : parse_size_bytes(o_.size_max_text).value()),
        range_(parse_size_bytes(o_.range_text).value()),
        part_(parse_size_bytes(o_.part_text).value()),
        duration_(parse_duration(o_.duration_text).value()),
        warmup_(parse_duration(o_.warmup_text).value()) {
    if (!http::parse_endpoint(o_.endpoint))
      throw std::runtime_error("--endpoint must be http(s)://HOST:PORT");
    endpoint_ = o_.endpoint;
    credentials_ = {o_.access_key, o_.secret_key, "", o_.region, o_.express};
    if (o_.express && !o_.bucket.ends_with("--x-s3"))
      throw std::runtime_error("--express needs a directory bucket: --bucket base--zone--x-s3");
    if (!o_.plain && (credentials_.access_key.empty() || credentials_.secret_key.empty())) {
      throw std::runtime_error(
          "credentials: --access-key/--secret-key or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or "
          "--plain)");
    }
  }

  int main() {
    if (!o_.plain) ensure_bucket();
    if (o_.express) create_session();
    if (o_.workload == "checkpoint") return checkpoint();
    static const std::map<std::string, bool> kNeedsObjects = {
        {"put", false}, {"get", true},    {"range", true}, {"head", true},
        {"list", true}, {"delete", true}, {"mixed", true}, {"multipart", false}};
    auto it = kNeedsObjects.find(o_.workload);
    if (it == kNeedsObjects.end()) throw std::runtime_error("unknown --workload " + o_.workload);
    if (it->second && o_.prepare) prepare_objects();
    measure();
    return report() ? 0 : 1;
  }

 private:
  Connection connection(asio::any_io_executor ex) const {
    return Connection(std::move(ex), endpoint_, o_.plain ? nullptr : &credentials_, payload_);
  }
  std::string path(std::string_view key) const { return fmt::format("/{}/{}", o_.bucket, key); }

  std::string object_key(std::uint64_t i) const {
    if (o_.dirs > 0) return fmt::format("{}d{:04}/obj-{:07}", o_.prefix, i % o_.dirs, i);
    return fmt::format("{}obj-{:07}", o_.prefix, i);
  }
  static std::uint64_t origin_of(std::uint64_t i) { return i * 1048573ULL; }
  std::uint64_t size_of(std::uint64_t i) const {
    if (size_max_ <= size_) return size_;
    // Log-uniform between size and size_max, fixed per object.
    std::mt19937_64 r(i);
    const double lo = std::log(static_cast<double>(size_));
    const double hi = std::log(static_cast<double>(size_max_));
    return static_cast<std::uint64_t>(std::exp(std::uniform_real_distribution<double>(lo, hi)(r)));
  }

  // Runs `n` client coroutines spread over --threads io_contexts until all are done.
  template <class Make>
  void run_clients(unsigned n, Make make) {
    std::vector<std::unique_ptr<asio::io_context>> contexts;
    for (unsigned t = 0; t < std::max(1U, o_.threads); ++t)
      contexts.push_back(std::make_unique<asio::io_context>(1));
    std::mutex failed_mutex;
    std::exception_ptr failed;
    for (unsigned i = 0; i < n; ++i) {
      auto& ctx = *contexts[i % contexts.size()];
      asio::co_spawn(ctx, make(i, ctx.get_executor()), [&](const std::exception_ptr& e) {
        if (!e) return;
        std::lock_guard lock(failed_mutex);
        if (!failed) failed = e;
      });
    }
    std::vector<std::thread> threads;
    for (auto& c : contexts) threads.emplace_back([&c] { c->run(); });
    for (auto& t : threads) t.join();
    if (failed) std::rethrow_exception(failed);
  }

  // One request, timed and recorded. Returns the response when its status was expected.
  awaitable<std::optional<Response>> timed(Connection& c, Stats& st, Op op, const Request& r,
                                           Expected expected, bool record,
                                           std::size_t keep_body = 0) {
    const auto start = Clock::now();
    auto response = co_await c.send(r, keep_body);
    const auto us =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count();
    OpStats& s = st[op];
    std::optional<Response> ok;
    std::string error;
    if (!response) {
      error = response.error().message();
    } else if (!expected.has(response->status)) {
      error = std::to_string(response->status);
    } else if (!response->verified) {
      error = "verify";
    } else {
      ok = std::move(*response);
    }
    if (record) {
      ++s.ops;
      s.latency_us.push_back(static_cast<std::uint32_t>(std::min<std::int64_t>(us, UINT32_MAX)));
      if (ok) s.bytes += r.body.empty() ? r.body_bytes + ok->body_bytes : ok->body_bytes;
      if (!ok) {
        ++s.errors;
        ++s.error_kinds[error];
      }
    }
    co_return ok;
  }

  Request put_request(const std::string& key, std::uint64_t size, std::uint64_t origin) const {
    Request r;
    r.method = "PUT";
    r.path = path(key);
    r.body_bytes = size;
    r.body_origin = origin;
    r.headers.emplace_back("Content-Type", "application/octet-stream");
    return r;
  }

  void ensure_bucket() {
    run_clients(1, [this](unsigned, asio::any_io_executor ex) -> awaitable<void> {
      Connection c = connection(ex);
      Request r;
      r.method = "PUT";
      r.path = "/" + o_.bucket;
      if (o_.express) {
        // base--zone--x-s3: a directory bucket in that zone.
        const std::string_view name = std::string_view(o_.bucket).substr(0, o_.bucket.size() - 6);
        const std::string_view zone = name.substr(name.rfind("--") + 2);
        r.body = fmt::format(
            "<CreateBucketConfiguration><Location><Type>AvailabilityZone</Type><Name>{}</Name>"
            "</Location><Bucket><Type>Directory</Type></Bucket></CreateBucketConfiguration>",
            zone);
      }
      auto response = co_await c.send(r, 4096);
      if (!response) throw std::runtime_error("create bucket: " + response.error().message());
      // 200 created; 409 BucketAlreadyOwnedByYou is fine too (the bucket is there).
      if (response->status != 200 &&
          response->body.find("BucketAlreadyOwnedByYou") == std::string::npos) {
        throw std::runtime_error(
            fmt::format("create bucket: {} {}", response->status, response->body));
      }
    });
  }

  // S3 Express: the session every later request is signed with, as the SDKs make it
  // (CreateSession, signed with the user's keys for s3express). It lasts five minutes: longer
  // runs would see ExpiredToken.
  void create_session() {
    run_clients(1, [this](unsigned, asio::any_io_executor ex) -> awaitable<void> {
      Connection c = connection(ex);
      Request r;
      r.path = "/" + o_.bucket;
      r.query = {{"session", ""}};
      auto response = co_await c.send(r, 4096);
      if (!response || response->status != 200) {
        throw std::runtime_error(fmt::format(
            "create session: {}", response ? response->body : response.error().message()));
      }
      credentials_ = {xml_value(response->body, "AccessKeyId"),
                      xml_value(response->body, "SecretAccessKey"),
                      xml_value(response->body, "SessionToken"), o_.region, true};
    });
  }

  void prepare_objects() {
    const auto start = Clock::now();
    std::atomic<std::uint64_t> next{0};
    std::atomic<std::uint64_t> failures{0};
    run_clients(o_.concurrency, [&](unsigned, asio::any_io_executor ex) -> awaitable<void> {
      Connection c = connection(ex);
      Stats unused;
      for (std::uint64_t i = next++; i < o_.objects; i = next++) {
        if (!co_await timed(c, unused, kPut, put_request(object_key(i), size_of(i), origin_of(i)),
                            Expected{200, 201, 204}, true))
          ++failures;
      }
    });
    if (failures > 0)
      throw std::runtime_error(fmt::format("prepare: {} PUTs failed", failures.load()));
    std::cerr << fmt::format("prepared {} objects in {:.1f} s\n", o_.objects,
                             std::chrono::duration<double>(Clock::now() - start).count());
  }

  // A whole multipart upload on `conns` (one part in flight per connection). Returns whether it
  // completed; parts are recorded as kPart, the upload as kMultipart.
  awaitable<bool> multipart_upload(std::vector<Connection>& conns, Stats& st,
                                   const std::string& key, std::uint64_t size, std::uint64_t origin,
                                   bool record) {
    const auto start = Clock::now();
    Request create;
    create.method = "POST";
    create.path = path(key);
    create.query = {{"uploads", ""}};
    auto created = co_await timed(conns[0], st, kMultipart, create, Expected{200}, false, 4096);
    std::string upload_id = created ? xml_value(created->body, "UploadId") : "";
    bool ok = !upload_id.empty();
    const std::uint64_t parts = std::max<std::uint64_t>(1, (size + part_ - 1) / part_);
    std::vector<std::string> etags(parts);
    std::uint64_t next = 0;
    if (ok) {
      WaitGroup group(co_await asio::this_coro::executor);
      for (auto& c : conns) {
        group.add();
        asio::co_spawn(
            co_await asio::this_coro::executor,
            [&, connection = &c]() -> awaitable<void> {
              for (std::uint64_t p = next++; p < parts && ok; p = next++) {
                const std::uint64_t offset = p * part_;
                Request r = put_request(key, std::min(part_, size - offset), origin + offset);
                r.query = {{"partNumber", std::to_string(p + 1)}, {"uploadId", upload_id}};
                r.headers.clear();
                auto response = co_await timed(*connection, st, kPart, r, Expected{200}, record);
                if (!response)
                  ok = false;
                else
                  etags[p] = response->etag;
              }
              group.done();
            },
            asio::detached);
      }
      co_await group.wait();
    }
    if (ok) {
      Request complete;
      complete.method = "POST";
      complete.path = path(key);
      complete.query = {{"uploadId", upload_id}};
      complete.body = "<CompleteMultipartUpload>";
      for (std::uint64_t p = 0; p < parts; ++p) {
        complete.body +=
            fmt::format("<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>", p + 1, etags[p]);
      }
      complete.body += "</CompleteMultipartUpload>";
      auto done =
          co_await timed(conns[0], st, kMultipart, complete, Expected{200}, false, 64 * 1024);
      // A Complete that fails late answers 200 with an error document.
      ok = done && done->body.find("<Error>") == std::string::npos;
    } else if (!upload_id.empty()) {
      Request abort;
      abort.method = "DELETE";
      abort.path = path(key);
      abort.query = {{"uploadId", upload_id}};
      co_await conns[0].send(abort);
    }
    if (record) {
      OpStats& s = st[kMultipart];
      ++s.ops;
      s.latency_us.push_back(static_cast<std::uint32_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count()));
      if (ok)
        s.bytes += size;
      else {
        ++s.errors;
        ++s.error_kinds["upload"];
      }
    }
    co_return ok;
  }

  void measure() {
    std::vector<Stats> per_client(o_.concurrency);
    std::atomic<std::uint64_t> started_ops{0};
    std::atomic<std::uint64_t> next_object{0};
    std::atomic<std::uint64_t> next_new{0};
    std::vector<std::pair<Op, unsigned>> mix;
    unsigned mix_total = 0;
    if (o_.workload == "mixed") {
      std::istringstream in(o_.mix);
      std::string item;
      while (std::getline(in, item, ',')) {
        const auto eq = item.find('=');
        const std::string name = item.substr(0, eq);
        const unsigned weight = static_cast<unsigned>(std::stoul(item.substr(eq + 1)));
        const Op op = name == "get"      ? kGet
                      : name == "head"   ? kHead
                      : name == "put"    ? kPut
                      : name == "delete" ? kDelete
                                         : throw std::runtime_error("--mix: " + name);
        mix.emplace_back(op, weight);
        mix_total += weight;
      }
    }
    measure_start_ = Clock::now() + warmup_;
    ServerWatch watch(o_.server_pid, measure_start_);
    const auto deadline = measure_start_ + duration_;
    run_clients(o_.concurrency, [&](unsigned client, asio::any_io_executor ex) -> awaitable<void> {
      Stats& st = per_client[client];
      std::vector<Connection> conns;
      for (unsigned i = 0;
           i < (o_.workload == "multipart" ? std::max(1U, o_.part_concurrency) : 1U); ++i) {
        conns.push_back(connection(ex));
      }
      Connection& c = conns[0];
      std::mt19937_64 random(client * 7919ULL + 1);
      std::vector<std::uint64_t> own;  // mixed: this client's objects, for its deletes
      for (;;) {
        const auto now = Clock::now();
        if (now >= deadline) break;
        const bool record = now >= measure_start_;
        if (record && o_.ops > 0 && started_ops++ >= o_.ops) break;
        Op op = kGet;
        if (o_.workload == "put")
          op = kPut;
        else if (o_.workload == "range")
          op = kRange;
        else if (o_.workload == "head")
          op = kHead;
        else if (o_.workload == "list")
          op = kList;
        else if (o_.workload == "delete")
          op = kDelete;
        else if (o_.workload == "multipart")
          op = kMultipart;
        else if (o_.workload == "mixed") {
          unsigned pick = static_cast<unsigned>(random() % mix_total);
          for (const auto& [m, w] : mix) {
            if (pick < w) {
              op = m;
              break;
            }
            pick -= w;
          }
          if (op == kDelete && own.empty()) op = kPut;
        }
        const std::uint64_t i = o_.objects == 0 ? 0 : random() % o_.objects;
        switch (op) {
          case kGet: {
            Request r;
            r.path = path(object_key(i));
            if (o_.verify) r.verify_against = std::pair{origin_of(i), std::uint64_t{0}};
            co_await timed(c, st, kGet, r, Expected{200}, record);
            break;
          }
          case kRange: {
            const std::uint64_t size = size_of(i);
            const std::uint64_t slots = size > range_ ? size / range_ : 1;
            const std::uint64_t offset = (random() % slots) * range_;
            Request r;
            r.path = path(object_key(i));
            r.headers.emplace_back(
                "Range", fmt::format("bytes={}-{}", offset, std::min(size, offset + range_) - 1));
            if (o_.verify) r.verify_against = std::pair{origin_of(i), offset};
            co_await timed(c, st, kRange, r, Expected{206}, record);
            break;
          }
          case kHead: {
            Request r;
            r.method = "HEAD";
            r.path = path(object_key(i));
            co_await timed(c, st, kHead, r, Expected{200}, record);
            break;
          }
          case kList: {
            Request r;
            r.path = "/" + o_.bucket;
            const std::string prefix = o_.list_root || o_.dirs == 0
                                           ? o_.prefix
                                           : fmt::format("{}d{:04}/", o_.prefix, i % o_.dirs);
            r.query = {
                {"list-type", "2"}, {"prefix", prefix}, {"max-keys", std::to_string(o_.max_keys)}};
            if (!o_.delimiter.empty()) r.query.emplace_back("delimiter", o_.delimiter);
            co_await timed(c, st, kList, r, Expected{200}, record);
            break;
          }
          case kDelete: {
            std::uint64_t target = 0;
            std::string key;
            if (o_.workload == "mixed") {
              target = own.back();
              own.pop_back();
              key = fmt::format("{}new-{:09}", o_.prefix, target);
            } else {
              target = next_object++;
              if (target >= o_.objects) co_return;
              key = object_key(target);
            }
            Request r;
            r.method = "DELETE";
            r.path = path(key);
            co_await timed(c, st, kDelete, r, Expected{200, 204}, record);
            break;
          }
          case kPut: {
            // --overwrite: PUT keeps replacing --objects keys (bounded space, as on nginx).
            const std::uint64_t n =
                o_.overwrite && o_.objects > 0 ? next_new++ % o_.objects : next_new++;
            const std::uint64_t size = size_of(n);
            if (co_await timed(
                    c, st, kPut,
                    put_request(fmt::format("{}new-{:09}", o_.prefix, n), size, origin_of(n)),
                    Expected{200, 201, 204}, record)) {
              own.push_back(n);
            }
            break;
          }
          case kMultipart: {
            const std::uint64_t n = next_new++;
            co_await multipart_upload(conns, st, fmt::format("{}mp-{:09}", o_.prefix, n),
                                      size_of(n), origin_of(n), record);
            break;
          }
          default:
            break;
        }
      }
    });
    end_ = Clock::now();
    watch.finish();
    own_cpu_s_ = watch.loadgen_cpu_s();
    server_cpu_s_ = watch.cpu_s();
    server_peak_rss_ = watch.peak_rss_bytes();
    server_watched_ = watch.active();
    for (const auto& s : per_client) {
      for (std::size_t k = 0; k < kOpCount; ++k) stats_[k].merge(s[k]);
    }
  }

  static double pct(std::vector<std::uint32_t>& v, double p) {
    if (v.empty()) return 0;
    const auto k = static_cast<std::size_t>(
        std::min<double>(static_cast<double>(v.size()) - 1,
                         std::ceil(p / 100.0 * static_cast<double>(v.size())) - 1));
    return v[k] / 1000.0;
  }

  // Prints the table, writes the JSON; false when any operation failed.
  bool report() {
    const double seconds =
        std::max(1e-9, std::chrono::duration<double>(end_ - measure_start_).count());
    std::uint64_t total_bytes = 0;
    std::uint64_t total_errors = 0;
    fmt::print("workload {}  size {}{}  concurrency {}  threads {}  endpoint {}{}\n", o_.workload,
               format_size(size_), size_max_ > size_ ? ".." + format_size(size_max_) : "",
               o_.concurrency, o_.threads, o_.endpoint, o_.plain ? " (plain HTTP)" : "");
    fmt::print("{:<10} {:>9} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}\n", "op", "ops",
               "ops/s", "MB/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "errors");
    std::string json = fmt::format(
        R"({{"workload":"{}","size_bytes":{},"concurrency":{},"threads":{},"seconds":{:.3f},"ops":{{)",
        o_.workload, size_, o_.concurrency, o_.threads, seconds);
    bool first = true;
    for (std::size_t k = 0; k < kOpCount; ++k) {
      OpStats& s = stats_[k];
      if (s.ops == 0) continue;
      std::sort(s.latency_us.begin(), s.latency_us.end());
      const double ops_s = static_cast<double>(s.ops - s.errors) / seconds;
      const double mbs = static_cast<double>(s.bytes) / seconds / 1e6;
      if (k != kPart) {
        total_bytes += s.bytes;
      }
      total_errors += s.errors;
      fmt::print(
          "{:<10} {:>9} {:>10.1f} {:>10.1f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>7}\n",
          kOpNames[k], s.ops, ops_s, mbs, pct(s.latency_us, 50), pct(s.latency_us, 90),
          pct(s.latency_us, 99), pct(s.latency_us, 99.9),
          s.latency_us.empty() ? 0.0 : s.latency_us.back() / 1000.0, s.errors);
      for (const auto& [kind, n] : s.error_kinds) fmt::print("           error {}: {}\n", kind, n);
      json += fmt::format(
          R"({}"{}":{{"ops":{},"errors":{},"ops_per_s":{:.2f},"mb_per_s":{:.2f},"p50_ms":{:.3f},"p90_ms":{:.3f},"p99_ms":{:.3f},"p999_ms":{:.3f},"max_ms":{:.3f}}})",
          first ? "" : ",", kOpNames[k], s.ops, s.errors, ops_s, mbs, pct(s.latency_us, 50),
          pct(s.latency_us, 90), pct(s.latency_us, 99), pct(s.latency_us, 99.9),
          s.latency_us.empty() ? 0.0 : s.latency_us.back() / 1000.0);
      first = false;
    }
    json += "}";
    fmt::print("loadgen: cpu {:.2f} s ({:.0f}% of one core)\n", own_cpu_s_,
               100 * own_cpu_s_ / seconds);
    json += fmt::format(R"(,"loadgen_cpu_s":{:.3f})", own_cpu_s_);
    if (server_watched_) {
      const double gb = static_cast<double>(total_bytes) / 1e9;
      fmt::print("server: cpu {:.2f} s ({:.2f} s per GB), peak RSS {}\n", server_cpu_s_,
                 gb > 0 ? server_cpu_s_ / gb : 0.0, format_size(server_peak_rss_));
      json += fmt::format(
          R"(,"server_cpu_s":{:.3f},"server_cpu_s_per_gb":{:.4f},"server_peak_rss_bytes":{})",
          server_cpu_s_, gb > 0 ? server_cpu_s_ / gb : 0.0, server_peak_rss_);
    }
    json += "}\n";
    if (!o_.json_path.empty()) std::ofstream(o_.json_path) << json;
    return total_errors == 0;
  }

  // ---- checkpoint --------------------------------------------------------------------------
  std::string shard_key(unsigned round, unsigned w) const {
    return fmt::format("{}ckpt-{:04}/shard-{:02}", o_.prefix, round, w);
  }
  std::string manifest_key(unsigned round) const {
    return fmt::format("{}ckpt-{:04}/manifest.json", o_.prefix, round);
  }

  int checkpoint() {
    const std::uint64_t shard = parse_size_bytes(o_.shard_text).value();
    const std::uint64_t read_size = parse_size_bytes(o_.read_text).value();
    bool ok = true;
    std::string rounds_json;
    ServerWatch watch(o_.server_pid, Clock::now());
    double best_write_gbs = 0;
    for (unsigned round = 0; round < o_.rounds; ++round) {
      // 1. Every writer saves its shard at once; the checkpoint is durable when the last
      //    Complete and then the manifest have answered 200.
      std::vector<Stats> per_writer(o_.writers);
      std::atomic<unsigned> failed{0};
      const auto start = Clock::now();
      run_clients(o_.writers, [&](unsigned w, asio::any_io_executor ex) -> awaitable<void> {
        std::vector<Connection> conns;
        for (unsigned i = 0; i < std::max(1U, o_.part_concurrency); ++i)
          conns.push_back(connection(ex));
        if (!co_await multipart_upload(conns, per_writer[w], shard_key(round, w), shard,
                                       origin_of(w), true))
          ++failed;
      });
      bool manifest_ok = false;
      bool deleted_ok = true;
      double delete_s = 0;
      run_clients(1, [&](unsigned, asio::any_io_executor ex) -> awaitable<void> {
        Connection c = connection(ex);
        Request m;
        m.method = "PUT";
        m.path = path(manifest_key(round));
        m.body = fmt::format(R"({{"round":{},"shards":{}}})", round, o_.writers);
        m.headers.emplace_back("If-None-Match", "*");
        m.headers.emplace_back("Content-Type", "application/json");
        auto response = co_await c.send(m);
        manifest_ok = response && response->status == 200;
        co_return;
      });
      const double ttd = std::chrono::duration<double>(Clock::now() - start).count();
      if (round > 0) {
        // 2. The previous checkpoint goes, in one DeleteObjects.
        const auto del_start = Clock::now();
        run_clients(1, [&](unsigned, asio::any_io_executor ex) -> awaitable<void> {
          Connection c = connection(ex);
          Request d;
          d.method = "POST";
          d.path = "/" + o_.bucket;
          d.query = {{"delete", ""}};
          d.body = "<Delete><Quiet>true</Quiet>";
          for (unsigned w = 0; w < o_.writers; ++w)
            d.body += "<Object><Key>" + shard_key(round - 1, w) + "</Key></Object>";
          d.body += "<Object><Key>" + manifest_key(round - 1) + "</Key></Object></Delete>";
          const auto digest = md5(std::as_bytes(std::span(d.body.data(), d.body.size())));
          d.headers.emplace_back("Content-MD5",
                                 aws::base64_encode(std::as_bytes(std::span(digest))));
          auto response = co_await c.send(d, 64 * 1024);
          deleted_ok = response && response->status == 200 &&
                       response->body.find("<Error>") == std::string::npos;
        });
        delete_s = std::chrono::duration<double>(Clock::now() - del_start).count();
      }
      const double gbs = static_cast<double>(shard) * o_.writers / ttd / 1e9;
      best_write_gbs = std::max(best_write_gbs, gbs);
      const bool round_ok = failed == 0 && manifest_ok && deleted_ok;
      ok = ok && round_ok;
      fmt::print(
          "checkpoint {}: {} x {} in {:.2f} s to durable = {:.3f} GB/s; manifest {}; previous "
          "deleted in {:.3f} s{}\n",
          round, o_.writers, format_size(shard), ttd, gbs, manifest_ok ? "ok" : "FAILED", delete_s,
          round_ok ? "" : "  FAILED");
      rounds_json += fmt::format(
          R"({}{{"round":{},"time_to_durable_s":{:.3f},"gb_per_s":{:.4f},"delete_s":{:.4f},"ok":{}}})",
          round == 0 ? "" : ",", round, ttd, gbs, delete_s, round_ok);
    }
    // 3. Loading the last checkpoint: every reader streams its shard in ranged GETs.
    const unsigned last = o_.rounds - 1;
    std::vector<Stats> per_reader(o_.readers);
    const auto read_start = Clock::now();
    run_clients(o_.readers, [&](unsigned reader, asio::any_io_executor ex) -> awaitable<void> {
      Connection c = connection(ex);
      const unsigned w = reader % o_.writers;
      for (std::uint64_t offset = 0; offset < shard; offset += read_size) {
        Request r;
        r.path = path(shard_key(last, w));
        r.headers.emplace_back(
            "Range", fmt::format("bytes={}-{}", offset, std::min(shard, offset + read_size) - 1));
        if (o_.verify) r.verify_against = std::pair{origin_of(w), offset};
        co_await timed(c, per_reader[reader], kRange, r, Expected{206}, true);
      }
    });
    const double read_s = std::chrono::duration<double>(Clock::now() - read_start).count();
    Stats reads;
    for (auto& s : per_reader) reads[kRange].merge(s[kRange]);
    const double read_gbs = static_cast<double>(reads[kRange].bytes) / read_s / 1e9;
    std::sort(reads[kRange].latency_us.begin(), reads[kRange].latency_us.end());
    fmt::print(
        "load: {} readers, {} ranges, {:.3f} GB/s, range p50 {:.2f} ms p99 {:.2f} ms, errors {}\n",
        o_.readers, format_size(read_size), read_gbs, pct(reads[kRange].latency_us, 50),
        pct(reads[kRange].latency_us, 99), reads[kRange].errors);
    ok = ok && reads[kRange].errors == 0;
    watch.finish();
    const double own = watch.loadgen_cpu_s();
    fmt::print("loadgen: cpu {:.2f} s\n", own);
    std::string json = fmt::format(
        R"({{"workload":"checkpoint","writers":{},"shard_bytes":{},"part_bytes":{},"part_concurrency":{},"rounds":[{}],"best_write_gb_per_s":{:.4f},"read_gb_per_s":{:.4f},"read_p50_ms":{:.3f},"read_p99_ms":{:.3f},"loadgen_cpu_s":{:.3f})",
        o_.writers, shard, part_, o_.part_concurrency, rounds_json, best_write_gbs, read_gbs,
        pct(reads[kRange].latency_us, 50), pct(reads[kRange].latency_us, 99), own);
    if (watch.active()) {
      fmt::print("server: cpu {:.2f} s, peak RSS {}\n", watch.cpu_s(),
                 format_size(watch.peak_rss_bytes()));
      json += fmt::format(R"(,"server_cpu_s":{:.3f},"server_peak_rss_bytes":{})", watch.cpu_s(),
                          watch.peak_rss_bytes());
    }
    json += fmt::format(R"(,"ok":{}}})", ok) + "\n";
    if (!o_.json_path.empty()) std::ofstream(o_.json_path) << json;
    return ok ? 0 : 1;
  }

  Options o_;
  Payload payload_;
  Endpoint endpoint_;
  Credentials credentials_;
  std::uint64_t size_;
  std::uint64_t size_max_;
  std::uint64_t range_;
  std::uint64_t part_;
  std::chrono::milliseconds duration_;
  std::chrono::milliseconds warmup_;
  Clock::time_point measure_start_;
  Clock::time_point end_;
  Stats stats_;
  double own_cpu_s_ = 0;
  double server_cpu_s_ = 0;
  std::uint64_t server_peak_rss_ = 0;
  bool server_watched_ = false;
};

}  // namespace
}  // namespace hots3::bench

int main(int argc, char** argv) {
  hots3::bench::Options o;
  if (const char* v = std::getenv("AWS_ACCESS_KEY_ID")) o.access_key = v;
  if (const char* v = std::getenv("AWS_SECRET_ACCESS_KEY")) o.secret_key = v;
  if (const char* v = std::getenv("AWS_DEFAULT_REGION")) o.region = v;
  CLI::App app("hots3-loadgen: an S3 load generator (warp-style) for hots3 or any S3 endpoint");
  app.add_option("--endpoint", o.endpoint, "http://HOST:PORT")->capture_default_str();
  app.add_option("--access-key", o.access_key, "default: $AWS_ACCESS_KEY_ID");
  app.add_option("--secret-key", o.secret_key, "default: $AWS_SECRET_ACCESS_KEY");
  app.add_option("--region", o.region)->capture_default_str();
  app.add_flag("--plain", o.plain,
               "unsigned requests to a plain HTTP server (nginx): paths /BUCKET/KEY");
  app.add_flag("--express", o.express,
               "S3 Express: --bucket is a directory bucket, made if missing, and every request "
               "is signed with a session (runs of at most five minutes)");
  app.add_option("--bucket", o.bucket)->capture_default_str();
  app.add_option("--prefix", o.prefix, "key prefix")->capture_default_str();
  app.add_option("--workload", o.workload,
                 "put get range head list delete mixed multipart checkpoint")
      ->capture_default_str();
  app.add_option("--size", o.size_text, "object size")->capture_default_str();
  app.add_option("--size-max", o.size_max_text,
                 "random sizes between --size and this (log-uniform)");
  app.add_option("--objects", o.objects, "objects prepared and read")->capture_default_str();
  app.add_option("--concurrency,-c", o.concurrency, "clients, one connection each")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "generator threads")->capture_default_str();
  app.add_option("--duration", o.duration_text)->capture_default_str();
  app.add_option("--ops", o.ops, "stop after this many operations (0: --duration only)")
      ->capture_default_str();
  app.add_option("--warmup", o.warmup_text, "run this long before measuring")
      ->capture_default_str();
  app.add_option("--range-size", o.range_text)->capture_default_str();
  app.add_option("--part-size", o.part_text)->capture_default_str();
  app.add_option("--part-concurrency", o.part_concurrency, "parts in flight per upload")
      ->capture_default_str();
  app.add_option("--mix", o.mix, "mixed workload weights")->capture_default_str();
  app.add_option("--dirs", o.dirs, "spread objects over this many directories d0000/ ...")
      ->capture_default_str();
  app.add_option("--delimiter", o.delimiter, "list with this delimiter");
  app.add_option("--max-keys", o.max_keys)->capture_default_str();
  app.add_flag("--list-root", o.list_root, "list the prefix itself, not one directory");
  app.add_flag("--prepare,!--no-prepare", o.prepare, "reuse objects a previous run prepared");
  app.add_flag("--verify", o.verify, "check every byte read");
  app.add_flag("--overwrite", o.overwrite,
               "put: replace --objects keys in turn instead of new keys");
  app.add_option("--server-pid", o.server_pid, "report this process's CPU time and peak RSS");
  app.add_option("--json", o.json_path, "write the figures as JSON here");
  app.add_option("--payload", o.payload_text, "random bytes bodies are cut from")
      ->capture_default_str();
  app.add_option("--writers", o.writers, "checkpoint: shards saved at once")->capture_default_str();
  app.add_option("--shard-size", o.shard_text, "checkpoint: bytes per shard")
      ->capture_default_str();
  app.add_option("--rounds", o.rounds, "checkpoint: checkpoints saved (each deletes the previous)")
      ->capture_default_str();
  app.add_option("--readers", o.readers, "checkpoint: readers loading it back")
      ->capture_default_str();
  app.add_option("--read-size", o.read_text, "checkpoint: ranged GET size")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    hots3::bench::LoadGen gen(o);
    return gen.main();
  } catch (const std::exception& e) {
    std::cerr << "hots3-loadgen: " << e.what() << "\n";
    return 2;
  }
}
