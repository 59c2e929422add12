#pragma once

// The fixed handler of the HTTP core's tests: the routes tests/support/http_test_server.cc lists.
// Served by that program (for the Python tests and bench/http) and in-process by the C++ tests of
// the HTTP client.

#include "hots3/http/handler.h"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/crc.hpp>
#include <fmt/format.h>

#include <array>
#include <charconv>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace hots3::test {

namespace asio = boost::asio;
using hots3::http::Exchange;
using hots3::http::Method;
using hots3::http::Response;

inline constexpr std::size_t kPieceBytes = 64 * 1024;

inline std::uint64_t number_after(std::string_view target, std::string_view prefix) {
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

}  // namespace hots3::test
