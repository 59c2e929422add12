#pragma once

// An http::Exchange over strings, for unit tests of request handlers: the request is given as a
// method, a target, headers and a body; the handler reads the body back in pieces of a chosen size
// (or finds the client gone part-way); the response is kept (status, headers, body) for the test
// to look at. No socket and no HTTP parser: the handler sees exactly what the test gives it, as
// the HTTP core would hand it over (Content-Length and chunked framing read from the headers).

#include "hots3/common/errc.h"
#include "hots3/common/text.h"
#include "hots3/http/handler.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hots3::test {

class FakeExchange final : public http::Exchange {
 public:
  struct Request {
    std::string method = "GET";
    std::string target = "/";  // as sent: path and query, percent-encoded
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    std::size_t piece_bytes = 64 * 1024;  // read_body hands out at most this much per call
    // The client goes away after sending this many body bytes (read_body: kClosed).
    std::optional<std::size_t> cut_after;
  };

  explicit FakeExchange(Request request) : request_(std::move(request)) {
    for (const auto& [name, value] : request_.headers) views_.push_back({name, value});
    head_.method = method_of(request_.method);
    head_.method_string = request_.method;
    head_.target = request_.target;
    head_.headers = views_;
    head_.request_id = "0123456789ABCDEF";
    head_.remote_address = "127.0.0.1";
    head_.started = std::chrono::steady_clock::now();
    if (auto length = head_.find("content-length")) {
      head_.content_length = std::stoull(std::string(*length));
    }
    if (auto te = head_.find("transfer-encoding")) head_.chunked = iequals(*te, "chunked");
    if (auto expect = head_.find("expect"))
      head_.expects_continue = iequals(*expect, "100-continue");
  }

  // ---- http::Exchange

  [[nodiscard]] const http::RequestHead& request() const noexcept override { return head_; }

  boost::asio::awaitable<Result<std::size_t>> read_body(std::span<std::byte> buffer) override {
    body_read_ = true;
    const std::size_t end = std::min(request_.body.size(), request_.cut_after.value_or(SIZE_MAX));
    if (read_ == end && end < request_.body.size()) co_return errc::kClosed;
    const std::size_t n = std::min({buffer.size(), request_.piece_bytes, end - read_});
    std::memcpy(buffer.data(), request_.body.data() + read_, n);
    read_ += n;
    if (n == 0) complete_ = true;
    co_return n;
  }

  [[nodiscard]] bool body_complete() const noexcept override { return complete_; }

  boost::asio::awaitable<Result<void>> write_head(http::Response response) override {
    response_ = std::move(response);
    started_ = true;
    co_return Result<void>{};
  }

  boost::asio::awaitable<Result<void>> write_body(std::span<const std::byte> data) override {
    body_.append(reinterpret_cast<const char*>(data.data()), data.size());
    co_return Result<void>{};
  }

  boost::asio::awaitable<Result<void>> finish() override {
    finished_ = true;
    co_return Result<void>{};
  }

  [[nodiscard]] bool response_started() const noexcept override { return started_; }
  [[nodiscard]] Counts counts() const noexcept override {
    return {started_ ? response_.status : 0U, read_, body_.size()};
  }

  // ---- what the handler answered

  [[nodiscard]] unsigned status() const { return response_.status; }
  [[nodiscard]] std::optional<std::string> header(std::string_view name) const {
    if (auto value = response_.find(name)) return std::string(*value);
    return std::nullopt;
  }
  [[nodiscard]] const std::string& body() const { return body_; }
  [[nodiscard]] const http::Response& response() const { return response_; }
  [[nodiscard]] bool finished() const { return finished_; }
  // Whether the handler asked for the body at all ("100 Continue" would have gone out).
  [[nodiscard]] bool body_read() const { return body_read_; }

 private:
  static http::Method method_of(std::string_view m) {
    if (m == "GET") return http::Method::kGet;
    if (m == "HEAD") return http::Method::kHead;
    if (m == "PUT") return http::Method::kPut;
    if (m == "POST") return http::Method::kPost;
    if (m == "DELETE") return http::Method::kDelete;
    if (m == "OPTIONS") return http::Method::kOptions;
    return http::Method::kOther;
  }

  Request request_;
  std::vector<http::HeaderView> views_;
  http::RequestHead head_;
  std::size_t read_ = 0;
  bool complete_ = false;
  bool body_read_ = false;
  http::Response response_;
  bool started_ = false;
  bool finished_ = false;
  std::string body_;
};

}  // namespace hots3::test
