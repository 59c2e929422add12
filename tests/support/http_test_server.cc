// hots3-http-test-server: the HTTP core (src/http) with a small fixed handler and nothing of
// S3 or storage. Integration tests drive the core's behaviour through it; bench/http drives its
// speed against nginx serving the same bytes.
//
//   GET  /bytes/N        N bytes (the repeating pattern "0123456789abcdef"), Content-Length
//   GET  /chunked/N      the same bytes, Transfer-Encoding: chunked, in 64 KiB pieces
//   GET  /slow/MS        "done\n" after MS milliseconds (shutdown tests)
//   PUT  /sink           reads the body; answers "<bytes> <crc32 hex>\n"
//   PUT  /limited        like /sink, but refuses a Content-Length over 1 MiB with 413 without
//                        reading (100-continue reject)
//   GET  /fail           throws inside the handler (the core answers 500)
//   anything else        404
//
// Usage: hots3-http-test-server [--config FILE] [--listen ADDR:PORT] [--port-file FILE]
//                                [--threads N]

#include "hots3/common/logging.h"
#include "hots3/common/worker_pool.h"
#include "hots3/config/config.h"
#include "hots3/http/server.h"

#include <CLI/CLI.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/crc.hpp>

#include <charconv>
#include <functional>
#include <string>
#include <thread>

namespace {

namespace asio = boost::asio;
using hots3::http::Exchange;
using hots3::http::Method;
using hots3::http::Response;

constexpr std::size_t kPieceBytes = 64 * 1024;

std::uint64_t number_after(std::string_view target, std::string_view prefix) {
  std::uint64_t value = 0;
  const auto digits = target.substr(prefix.size());
  std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return value;
}

class TestHandler final : public hots3::http::Handler {
 public:
  TestHandler() {
    for (std::size_t i = 0; i < pattern_.size(); ++i) {
      pattern_[i] = static_cast<std::byte>("0123456789abcdef"[i % 16]);
    }
  }

  asio::awaitable<void> handle(Exchange& exchange) override {
    const auto& request = exchange.request();
    const std::string_view target = request.target;
    if (request.method == Method::kGet || request.method == Method::kHead) {
      if (target.starts_with("/bytes/"))
        co_return co_await send_bytes(exchange, number_after(target, "/bytes/"), false);
      if (target.starts_with("/chunked/"))
        co_return co_await send_bytes(exchange, number_after(target, "/chunked/"), true);
      if (target.starts_with("/slow/")) {
        asio::steady_timer timer(co_await asio::this_coro::executor,
                                 std::chrono::milliseconds(number_after(target, "/slow/")));
        co_await timer.async_wait(asio::use_awaitable);
        co_await exchange.respond(Response(200), "done\n");
        co_return;
      }
      if (target == "/thread") {  // which worker thread serves this connection
        co_await exchange.respond(
            Response(200),
            std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())));
        co_return;
      }
      if (target == "/fail") throw std::runtime_error("handler failure requested by /fail");
    }
    if (request.method == Method::kPut || request.method == Method::kPost) {
      if (target == "/limited" && request.content_length.value_or(0) > 1024 * 1024) {
        co_await exchange.respond(Response(413), "too large\n");
        co_return;
      }
      if (target == "/sink" || target == "/limited") co_return co_await sink(exchange);
    }
    co_await exchange.respond(Response(404), "no such test resource\n");
  }

 private:
  asio::awaitable<void> send_bytes(Exchange& exchange, std::uint64_t size, bool chunked) {
    Response response(200);
    response.add("Content-Type", "application/octet-stream");
    if (chunked) {
      response.content_length.reset();
    } else {
      response.content_length = size;
    }
    if (!co_await exchange.write_head(std::move(response))) co_return;
    if (exchange.request().method != Method::kHead) {
      std::uint64_t left = size;
      while (left > 0) {
        const std::size_t n =
            static_cast<std::size_t>(std::min<std::uint64_t>(left, pattern_.size()));
        if (!co_await exchange.write_body(std::span(pattern_.data(), n))) co_return;
        left -= n;
      }
    }
    co_await exchange.finish();
  }

  static asio::awaitable<void> sink(Exchange& exchange) {
    std::vector<std::byte> buffer(kPieceBytes);
    boost::crc_32_type crc;
    std::uint64_t total = 0;
    for (;;) {
      auto n = co_await exchange.read_body(buffer);
      if (!n) {
        Response response(n.error() == hots3::errc::kTimedOut ? 408U : 400U);
        co_await exchange.respond(std::move(response), n.error().message() + "\n");
        co_return;
      }
      if (*n == 0) break;
      crc.process_bytes(buffer.data(), *n);
      total += *n;
    }
    co_await exchange.respond(Response(200), fmt::format("{} {:08x}\n", total, crc.checksum()));
  }

  // Pieces of 1 MiB: the way the S3 layer streams objects.
  std::array<std::byte, 1024 * 1024> pattern_{};
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"HTTP core test server"};
  std::string config_path, listen, port_file;
  int threads = -1;
  app.add_option("--config", config_path);
  app.add_option("--listen", listen);
  app.add_option("--port-file", port_file);
  app.add_option("--threads", threads);
  CLI11_PARSE(app, argc, argv);

  // Before any thread starts: a SIGTERM sent the instant the port file appears must stop the
  // server cleanly, as it does hots3 (see hots3::StopSignals).
  hots3::StopSignals signals;
  hots3::config::Config config;
  config.log.access_log_path = "";
  if (!config_path.empty()) hots3::config::apply_file(config, config_path);
  if (!listen.empty()) config.http.listen = hots3::config::parse_listen(listen);
  if (threads >= 0) config.http.threads = static_cast<unsigned>(threads);
  hots3::log::init(config.log);

  hots3::WorkerPool workers(config.http.threads);
  auto handler = std::make_unique<TestHandler>();
  hots3::http::Server server(config.http, *handler, workers.contexts());
  server.start();
  workers.start();
  if (!port_file.empty()) {
    hots3::write_file_atomically(port_file, std::to_string(server.port()) + "\n");
  }
  signals.wait();
  {
    const hots3::StopSignals::Watch again(signals, [&server](int second) {
      hots3::log::warn("received {} again: closing connections now", hots3::signal_name(second));
      server.stop_now();
    });
    server.shutdown(config.http.shutdown_grace);
  }
  workers.stop();
  hots3::log::shutdown();
  return 0;
}
