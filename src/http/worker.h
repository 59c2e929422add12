#pragma once

// Private to src/http: per-worker state shared by the listener (server.cc) and the
// connections (session.cc). Everything in a Worker is touched only on that worker's thread,
// except the atomics in Shared.

#include "hots3/common/clock.h"
#include "hots3/config/config.h"
#include "hots3/http/handler.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace boost::asio::ssl {
class context;
}

namespace hots3::http::detail {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
// What connection deadlines are measured on: they are set several times per request and checked
// by a sweeper that runs every few milliseconds at best, so a clock a tick behind serves.
using DeadlineClock = CoarseSteadyClock;

struct Worker;

// State shared by all workers of one server. Held by shared_ptr: every connection coroutine
// keeps it alive, because a coroutine frame stuck in a handler past the shutdown grace period
// is only destroyed with its io_context, which may be after the Server object.
struct Shared {
  Shared(const config::HttpConfig& c, Handler& h) : config(c), handler(h) {}

  const config::HttpConfig config;  // a copy: outlives the caller's Config if need be
  Handler& handler;
  // Set when TLS is configured; a reload points it at a new context (connections keep theirs).
  std::atomic<asio::ssl::context*> tls{nullptr};
  std::atomic<std::uint64_t> connections_max{config.connections_max};  // a reload may change it
  std::vector<std::unique_ptr<Worker>> workers;

  std::atomic<std::uint64_t> connections_active{0};
  std::atomic<std::uint64_t> connections_total{0};
  std::atomic<std::uint64_t> connections_rejected{0};
  std::atomic<std::uint64_t> requests_total{0};
  std::mutex balance_mutex;  // a new connection's choice of worker (see Worker::load)

  // shutdown() waits here for connections_active to reach zero, or for stop_now().
  std::mutex mutex;
  std::condition_variable all_closed;
  bool stop_now = false;  // guarded by mutex
};

class Connection;

struct Worker {
  Worker(unsigned i, asio::io_context& c, Shared& s) : index(i), context(c), shared(s) {
    sweeper.emplace(c);
  }

  unsigned index;
  asio::io_context& context;
  Shared& shared;
  // Both reset by ~Server while the io_context is still alive (Asio objects must not outlive
  // their context's services).
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::steady_timer> sweeper;
  Clock::duration sweep_interval{};
  bool draining = false;  // shutdown began: finish the current request, then close
  bool stopped = false;   // the sweeper has exited

  // Connections of this worker (intrusive list; Connection links and unlinks itself).
  Connection* connections = nullptr;
  // Connections assigned to this worker and not yet ended (read by the other workers' accept
  // loops, which hand each new connection to the least loaded worker).
  std::atomic<std::uint32_t> load{0};

  // Request ids: a per-worker random seed mixed with a counter.
  std::uint64_t id_seed = 0;
  std::uint64_t id_counter = 0;

  // The current second, formatted once a second: IMF-fixdate (RFC 9110 §5.6.7) for the Date
  // header, ISO 8601 ("YYYY-MM-DDTHH:MM:SS") for the access log.
  std::time_t date_second = 0;
  char date[32] = {};
  char iso_second[20] = {};
};

// The part of a connection the worker's sweeper needs: its deadline and how to end it.
class Connection {
 public:
  explicit Connection(Worker& worker);
  virtual ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  Connection(Connection&&) = delete;
  Connection& operator=(Connection&&) = delete;

  // Called by the sweeper when now >= deadline(): abort what the connection waits for.
  virtual void expire() = 0;
  // Close at once (end of the shutdown grace period, or idle during shutdown).
  virtual void close_now() = 0;

  [[nodiscard]] DeadlineClock::time_point deadline() const noexcept { return deadline_; }
  [[nodiscard]] bool idle() const noexcept { return idle_; }
  // Whether the connection has begun a request: an idle one that has not was just opened (its
  // first request may be on its way), one that has is kept alive between requests.
  [[nodiscard]] bool used() const noexcept { return used_; }
  [[nodiscard]] Connection* next() const noexcept { return next_; }

 protected:
  void arm(std::chrono::milliseconds timeout) noexcept {
    deadline_ = DeadlineClock::now() + timeout;
  }
  void disarm() noexcept { deadline_ = DeadlineClock::time_point::max(); }

  Worker& worker_;
  bool idle_ = false;  // waiting for the next request (or the first)
  bool used_ = false;  // a request has begun on it

 private:
  DeadlineClock::time_point deadline_ = DeadlineClock::time_point::max();
  Connection* prev_ = nullptr;
  Connection* next_ = nullptr;
};

// Takes over an accepted socket: TLS detection (when configured), then the HTTP session.
// Runs on `worker`'s thread.
// `keep_alive` is the Shared that `worker` belongs to.
void start_connection(std::shared_ptr<Shared> keep_alive, Worker& worker, tcp::socket socket);

// The current Date header value of this worker ("Sun, 06 Nov 1994 08:49:37 GMT").
std::string_view http_date(Worker& worker) noexcept;
// The second `now` (the current one) as "YYYY-MM-DDTHH:MM:SS", from the same cache.
std::string_view iso_second(Worker& worker, std::time_t now) noexcept;

}  // namespace hots3::http::detail
