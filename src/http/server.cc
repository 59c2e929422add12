#include "hots3/http/server.h"

#include "wire.h"
#include "worker.h"

#include "hots3/common/assert.h"
#include "hots3/common/digest.h"
#include "hots3/common/logging.h"
#include "hots3/common/random.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <system_error>
#include <unistd.h>

namespace hots3::http {

namespace asio = boost::asio;
using detail::Clock;
using detail::Connection;
using detail::DeadlineClock;
using detail::tcp;
using detail::Worker;

namespace detail {

Connection::Connection(Worker& worker) : worker_(worker) {
  next_ = worker_.connections;
  if (next_ != nullptr) next_->prev_ = this;
  worker_.connections = this;
}

Connection::~Connection() {
  if (prev_ != nullptr) prev_->next_ = next_;
  if (next_ != nullptr) next_->prev_ = prev_;
  if (worker_.connections == this) worker_.connections = next_;
}

namespace {
void format_second(Worker& worker, std::time_t now) noexcept {
  if (now == worker.date_second) return;
  std::tm tm{};
  gmtime_r(&now, &tm);
  H3_ASSERT(std::strftime(worker.date, sizeof worker.date, "%a, %d %b %Y %H:%M:%S GMT", &tm) > 0);
  H3_ASSERT(std::strftime(worker.iso_second, sizeof worker.iso_second, "%Y-%m-%dT%H:%M:%S", &tm) ==
            19);
  worker.date_second = now;
}
}  // namespace

std::string_view http_date(Worker& worker) noexcept {
  format_second(worker, std::time(nullptr));
  return worker.date;
}

std::string_view iso_second(Worker& worker, std::time_t now) noexcept {
  format_second(worker, now);
  return {worker.iso_second, 19};
}

}  // namespace detail

struct Server::Impl {
  Impl(const config::HttpConfig& c, Handler& h, std::vector<asio::io_context*> contexts)
      : shared_ptr(std::make_shared<detail::Shared>(c, h)),
        shared(*shared_ptr),
        workers(shared.workers) {
    H3_ASSERT(!contexts.empty());
    for (unsigned i = 0; i < contexts.size(); ++i) {
      auto& worker = workers.emplace_back(std::make_unique<Worker>(i, *contexts[i], shared));
      worker->id_seed = random_u64();
      worker->sweep_interval = sweep_interval(c);
    }
  }

  // The sweeper checks deadlines a few times per shortest timeout: timeouts cost one
  // comparison per connection and tick, not a timer per operation.
  static Clock::duration sweep_interval(const config::HttpConfig& c) {
    const auto shortest =
        std::min({c.header_timeout, c.idle_timeout, c.body_stall_timeout, c.send_stall_timeout});
    return std::clamp<Clock::duration>(shortest / 8, std::chrono::milliseconds(5),
                                       std::chrono::milliseconds(500));
  }

  void open_acceptors();
  static asio::awaitable<void> accept_loop(std::shared_ptr<detail::Shared> keep_alive,
                                           Worker& worker);
  static asio::awaitable<void> sweep_loop(std::shared_ptr<detail::Shared> keep_alive,
                                          Worker& worker);
  static void reject(Worker& worker, tcp::socket socket);

  std::shared_ptr<detail::Shared> shared_ptr;
  detail::Shared& shared;
  std::vector<std::unique_ptr<Worker>>& workers;
  // Every TLS context loaded, the last in use: a connection keeps the one it began with. A
  // context is made only for files that changed (their SHA-256 is that of the last one's), so
  // SIGHUPs that rotate logs add none.
  std::vector<std::unique_ptr<asio::ssl::context>> tls;
  std::array<std::uint8_t, 32> tls_files_sha256{};
  std::uint16_t port = 0;
  bool started = false;
};

namespace {

// Draining: how long a connection opened just before the listener closed may take to send its
// first request, which is then answered (clients send it at once; a silent one must not hold
// the stop for the whole grace period).
constexpr auto kFirstRequestWhileDraining = std::chrono::seconds(1);

asio::ip::address resolve_host(const std::string& host) {
  if (host == "localhost") return asio::ip::address_v4::loopback();
  boost::system::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) throw std::runtime_error("listen address '" + host + "' is not an IP address");
  return address;
}

// SO_REUSEPORT lets another process of the same user bind the same port and share its
// connections with us (a second hots3 left running, serving other data): the workers' sockets
// would bind without complaint. A probe without SO_REUSEPORT binds only where nobody listens.
void ensure_port_free(const tcp::endpoint& endpoint, const config::ListenAddress& listen) {
  if (endpoint.port() == 0) return;
  asio::io_context context;
  tcp::acceptor probe(context);
  boost::system::error_code ec;
  probe.open(endpoint.protocol(), ec);
  if (!ec) probe.set_option(asio::socket_base::reuse_address(true), ec);  // TIME_WAIT is no owner
  if (!ec) probe.bind(endpoint, ec);
  if (ec == boost::system::errc::address_in_use) {
    throw std::system_error(
        ec, "cannot listen on " + listen.host + ":" + std::to_string(endpoint.port()) +
                ": the port is in use by another program; stop it, or choose another port "
                "with --listen ADDRESS:PORT (or http.listen in the configuration file)");
  }
  // Any other failure is reported by the real bind, with the same words as ever.
}

}  // namespace

void Server::Impl::open_acceptors() {
  const auto& listen = shared.config.listen;
  tcp::endpoint endpoint(resolve_host(listen.host), listen.port);
  ensure_port_free(endpoint, listen);
  for (auto& worker : workers) {
    auto& acceptor = worker->acceptor.emplace(worker->context);
    boost::system::error_code ec;
    acceptor.open(endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) {
      // Each worker has its own listening socket on the same port; the kernel spreads new
      // connections over them, and a connection stays on the worker that accepted it.
      const int one = 1;
      if (::setsockopt(acceptor.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
        ec.assign(errno, boost::system::system_category());
      }
    }
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      throw std::system_error(
          ec, "cannot listen on " + listen.host + ":" + std::to_string(endpoint.port()));
    }
    // With port 0 the first bind picks the port; the other workers join it.
    endpoint.port(acceptor.local_endpoint().port());
  }
  port = endpoint.port();
}

void Server::Impl::reject(Worker& worker, tcp::socket socket) {
  // Over connections_max: answer 503 without reading the request and close. The socket's send
  // buffer takes the few hundred bytes at once, so a non-blocking write is enough.
  // Like every answer, it carries a request id of its own (S3 clients log it; support asks).
  char request_id[16];
  detail::format_request_id(worker.id_seed, worker.id_counter++, request_id);
  std::string body;
  Response response = worker.shared.handler.protocol_error(
      ProtocolError::kTooManyConnections, std::string_view(request_id, sizeof request_id), body);
  std::string wire;
  detail::append_status_line(wire, response.status);
  detail::append_header(wire, "Date", detail::http_date(worker));
  detail::append_response_headers(wire, response, std::string_view(request_id, sizeof request_id));
  detail::append_header(wire, "Content-Length", std::to_string(body.size()));
  wire += "Connection: close\r\n\r\n";
  wire += body;
  boost::system::error_code ec;
  socket.non_blocking(true, ec);
  // Best effort: a client that cannot take 300 bytes gets only the close.
  socket.write_some(asio::buffer(wire), ec);
  socket.shutdown(tcp::socket::shutdown_send, ec);
  socket.close(ec);
}

asio::awaitable<void> Server::Impl::accept_loop(std::shared_ptr<detail::Shared> keep_alive,
                                                Worker& worker) {
  detail::Shared& shared = worker.shared;
  for (;;) {
    auto [ec, socket] = co_await worker.acceptor->async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::operation_aborted || !worker.acceptor->is_open()) co_return;
    if (ec) {
      // EMFILE/ENFILE/ENOBUFS: back off instead of spinning on a full descriptor table.
      log::warn("accept failed on worker {}: {}", worker.index, ec.message());
      asio::steady_timer pause(worker.context, std::chrono::milliseconds(50));
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    if (shared.connections_active.load(std::memory_order_relaxed) >=
        shared.connections_max.load(std::memory_order_relaxed)) {
      shared.connections_rejected.fetch_add(1, std::memory_order_relaxed);
      reject(worker, std::move(socket));
      continue;
    }
    shared.connections_active.fetch_add(1, std::memory_order_relaxed);
    shared.connections_total.fetch_add(1, std::memory_order_relaxed);
    // SO_REUSEPORT spreads connections by a hash of their addresses, not by load: 8 clients
    // often land 6 and 2 (or 7 and 1) on two workers, and the busy worker's hashing and I/O
    // then bound them all while the other idles. So the connection goes to the least loaded
    // worker (this one on a tie), whose io_context takes it over from here.
    Worker* target = &worker;
    {
      // Two workers accepting at once must not both count the same load as the lowest.
      std::lock_guard lock(shared.balance_mutex);
      for (auto& other : shared.workers) {
        if (other->load.load(std::memory_order_relaxed) <
            target->load.load(std::memory_order_relaxed)) {
          target = other.get();
        }
      }
      target->load.fetch_add(1, std::memory_order_relaxed);
    }
    if (target == &worker) {
      detail::start_connection(keep_alive, worker, std::move(socket));
      continue;
    }
    // A socket that cannot move starts closed on the target and ends at once, giving back the
    // counts taken above.
    boost::system::error_code move_error;
    const auto protocol = socket.local_endpoint(move_error).protocol();
    const int fd = move_error ? -1 : socket.release(move_error);
    asio::post(target->context, [keep_alive, target, protocol, fd] {
      tcp::socket moved(target->context);
      boost::system::error_code assign_error;
      if (fd >= 0) moved.assign(protocol, fd, assign_error);
      if (fd >= 0 && assign_error) ::close(fd);
      detail::start_connection(keep_alive, *target, std::move(moved));
    });
  }
}

asio::awaitable<void> Server::Impl::sweep_loop(std::shared_ptr<detail::Shared> /*keep_alive*/,
                                               Worker& worker) {
  while (!worker.stopped) {
    worker.sweeper->expires_after(worker.sweep_interval);
    co_await worker.sweeper->async_wait(asio::as_tuple(asio::use_awaitable));  // cancelled on stop
    if (worker.stopped) break;
    const auto now = DeadlineClock::now();
    for (Connection* c = worker.connections; c != nullptr;) {
      Connection* next = c->next();  // expire()/close_now() never unlink synchronously
      // (An idle connection's deadline is idle_timeout after it began to wait.)
      if (worker.draining && c->idle() &&
          (c->used() || now - (c->deadline() - worker.shared.config.idle_timeout) >=
                            kFirstRequestWhileDraining)) {
        c->close_now();
      } else if (now >= c->deadline()) {
        c->expire();
      }
      c = next;
    }
  }
}

Server::Server(const config::HttpConfig& config, Handler& handler,
               std::vector<asio::io_context*> contexts)
    : impl_(std::make_unique<Impl>(config, handler, std::move(contexts))) {}

Server::~Server() {
  // The listeners and timers die here, while the io_contexts are still alive. Connection
  // coroutines that are still suspended keep the rest (Shared) alive until their io_context
  // destroys them.
  for (auto& worker : impl_->workers) {
    worker->acceptor.reset();
    worker->sweeper.reset();
  }
  impl_->shared.tls = nullptr;
  impl_->tls.clear();
}

void Server::start() {
  H3_ASSERT(!impl_->started);
  if (impl_->shared.config.tls.enabled()) reload_tls(impl_->shared.config.tls);
  impl_->open_acceptors();
  for (auto& worker : impl_->workers) {
    Worker& w = *worker;
    asio::co_spawn(w.context, Impl::accept_loop(impl_->shared_ptr, w), asio::detached);
    asio::co_spawn(w.context, Impl::sweep_loop(impl_->shared_ptr, w), asio::detached);
  }
  impl_->started = true;
}

std::uint16_t Server::port() const noexcept { return impl_->port; }

bool Server::reload_tls(const config::TlsConfig& tls) {
  H3_ASSERT(tls.enabled());
  const auto read = [](const std::string& path, const char* what) {
    std::ifstream in(path, std::ios::binary);
    std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (!in.good() && !in.eof())
      throw std::runtime_error(std::string(what) + path + ": cannot be read");
    if (text.empty()) throw std::runtime_error(std::string(what) + path + ": empty or missing");
    return text;
  };
  const std::string certificate = read(tls.certificate_path, "TLS certificate ");
  const std::string key = read(tls.private_key_path, "TLS private key ");
  const std::string both = certificate + '\0' + key;
  const auto sha256 = hots3::sha256(std::as_bytes(std::span(both)));
  const std::lock_guard lock(impl_->shared.mutex);
  if (!impl_->tls.empty() && sha256 == impl_->tls_files_sha256) return false;
  auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                       asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use);
  boost::system::error_code ec;
  context->use_certificate_chain(asio::buffer(certificate), ec);
  if (ec) throw std::runtime_error("TLS certificate " + tls.certificate_path + ": " + ec.message());
  // OpenSSL refuses a key that is not the certificate's: a rotation caught between its two
  // files keeps the pair in use.
  context->use_private_key(asio::buffer(key), asio::ssl::context::pem, ec);
  if (ec) throw std::runtime_error("TLS private key " + tls.private_key_path + ": " + ec.message());
  impl_->tls.push_back(std::move(context));
  impl_->tls_files_sha256 = sha256;
  impl_->shared.tls.store(impl_->tls.back().get(), std::memory_order_release);
  return true;
}

void Server::set_connections_max(std::uint64_t n) noexcept {
  impl_->shared.connections_max.store(n, std::memory_order_relaxed);
}

void Server::shutdown(std::chrono::milliseconds grace) {
  if (!impl_->started) return;
  detail::Shared& shared = impl_->shared;
  // 1. Stop accepting; idle connections are closed by the next sweep, busy ones close after
  //    their current response (they answer with "Connection: close"). Connections the kernel
  //    completed and nobody accepted yet would be reset by the close, once their clients had
  //    sent a request: they are accepted first and answered as any other. From the close on,
  //    connection attempts are refused.
  for (auto& worker : impl_->workers) {
    asio::post(worker->context, [&w = *worker, keep_alive = impl_->shared_ptr] {
      w.draining = true;
      if (!w.acceptor) return;
      boost::system::error_code ec;
      w.acceptor->non_blocking(true, ec);
      while (!ec) {
        tcp::socket socket(w.context);
        w.acceptor->accept(socket, ec);
        if (ec) break;
        w.shared.connections_active.fetch_add(1, std::memory_order_relaxed);
        w.shared.connections_total.fetch_add(1, std::memory_order_relaxed);
        w.load.fetch_add(1, std::memory_order_relaxed);
        detail::start_connection(keep_alive, w, std::move(socket));
      }
      w.acceptor->close(ec);  // closing a listener cannot fail in a way that matters
    });
  }
  auto wait_closed = [&](std::chrono::milliseconds limit, bool until_stop_now) {
    std::unique_lock lock(shared.mutex);
    shared.all_closed.wait_for(lock, limit, [&] {
      return shared.connections_active.load(std::memory_order_acquire) == 0 ||
             (until_stop_now && shared.stop_now);
    });
    return shared.connections_active.load(std::memory_order_acquire) == 0;
  };
  // 2. Give requests in flight the grace period (or less, on stop_now()).
  if (!wait_closed(grace, true)) {
    bool now = false;
    {
      std::lock_guard lock(shared.mutex);
      now = shared.stop_now;
    }
    if (now) {
      log::warn("shutdown: closing {} busy connection(s) now", shared.connections_active.load());
    } else {
      log::warn("shutdown: {} connection(s) still busy after {} ms; closing them",
                shared.connections_active.load(), grace.count());
    }
    for (auto& worker : impl_->workers) {
      asio::post(worker->context, [&w = *worker] {
        for (Connection* c = w.connections; c != nullptr;) {
          Connection* next = c->next();
          c->close_now();
          c = next;
        }
      });
    }
    // Closed sockets complete their pending operations at once. A handler waiting on something
    // else is given a moment; after that its coroutine is destroyed with its io_context.
    if (!wait_closed(std::chrono::seconds(2), false)) {
      log::error("shutdown: {} connection(s) did not close; abandoning them",
                 shared.connections_active.load());
    }
  }
  // 3. Stop the sweepers so the workers' io_contexts run out of work.
  for (auto& worker : impl_->workers) {
    asio::post(worker->context, [&w = *worker] {
      w.stopped = true;
      w.sweeper->cancel();
    });
  }
}

void Server::stop_now() noexcept {
  detail::Shared& shared = impl_->shared;
  std::lock_guard lock(shared.mutex);
  shared.stop_now = true;
  shared.all_closed.notify_all();
}

ServerStats Server::stats() const noexcept {
  const auto& s = impl_->shared;
  return {s.connections_active.load(), s.connections_total.load(), s.connections_rejected.load(),
          s.requests_total.load(), s.connections_max.load()};
}

}  // namespace hots3::http
