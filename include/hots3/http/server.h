#pragma once

// The HTTP/1.1 server: one listener per worker (SO_REUSEPORT), each connection handed at accept
// to the least loaded worker and kept there, keep-alive, pipelining (in order), streamed bodies
// both ways, optional TLS, limits and timeouts from config::HttpConfig, /health/live and
// /health/ready, and the access log. Everything else goes to the Handler.

#include "hots3/config/config.h"
#include "hots3/http/handler.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace hots3::http {

struct ServerStats {
  std::uint64_t connections_active = 0;
  std::uint64_t connections_total = 0;
  std::uint64_t connections_rejected = 0;  // over connections_max
  std::uint64_t requests_total = 0;
  std::uint64_t connections_max = 0;  // the limit in effect
};

class Server {
 public:
  // `contexts`: one io_context per worker; the caller runs each on its own thread and keeps
  // them alive until after shutdown() returns. `handler` must outlive the server.
  Server(const config::HttpConfig& config, Handler& handler,
         std::vector<boost::asio::io_context*> contexts);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  Server(Server&&) = delete;
  Server& operator=(Server&&) = delete;

  // Binds the listening sockets and starts accepting on every worker. Throws
  // std::runtime_error when the address cannot be bound or the TLS files cannot be loaded.
  void start();

  // Loads the certificate chain and key of `tls` into a new TLS context, which the connections
  // accepted from then on use (those open keep theirs); false when the files hold what the
  // context in use was loaded from (nothing changes). Throws std::runtime_error, naming the
  // file, when either cannot be read or loaded or the key is not the certificate's; the context
  // in use stays. REQUIRES: TLS is on (the config's tls.enabled() at construction).
  bool reload_tls(const config::TlsConfig& tls);
  // A new limit of open connections, for the connections accepted from now on.
  void set_connections_max(std::uint64_t n) noexcept;

  // The bound port (useful with port 0).
  [[nodiscard]] std::uint16_t port() const noexcept;

  // Graceful stop: stops accepting, closes idle connections, lets requests in flight finish for
  // up to `grace`, then closes what is left. Blocks until every connection is gone.
  // REQUIRES: not called from a worker thread; the workers are still running.
  void shutdown(std::chrono::milliseconds grace);

  // Ends the grace period of shutdown() now, or makes a later shutdown() skip it: connections
  // still busy are closed at once (a second SIGTERM). Callable from any thread.
  void stop_now() noexcept;

  [[nodiscard]] ServerStats stats() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hots3::http
