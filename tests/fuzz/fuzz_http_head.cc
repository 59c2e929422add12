// The HTTP request head and body framing as a connection parses them: Beast's parser with the
// limits hots3 sets, then hots3's own framing checks, then the body (Content-Length or chunked)
// read the way a handler reads it. Input: the bytes a client sends.

#include "http/request_parser.h"

#include "hots3/common/text.h"
#include "hots3/http/handler.h"

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace bhttp = boost::beast::http;
  using hots3::http::detail::RequestParser;
  // The first byte chooses how the bytes arrive: in pieces of 1 to 256 bytes, or all at once.
  if (size == 0) return 0;
  const std::size_t piece = data[0] == 0 ? size : data[0];
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  constexpr std::uint64_t kHeaderBytesMax = 8 * 1024;
  hots3::http::detail::HeadText text;
  RequestParser parser(text);
  hots3::http::detail::limit_request_parser(parser, kHeaderBytesMax);
  boost::beast::error_code ec;
  std::uint64_t head_bytes = 0;
  std::size_t arrived = 0;   // bytes of input the socket has delivered
  std::string_view pending;  // delivered and not yet taken by the parser
  for (;;) {
    const std::size_t used =
        hots3::http::detail::put_head(parser, pending, head_bytes, kHeaderBytesMax, ec);
    pending.remove_prefix(used);
    if (ec != bhttp::error::need_more) break;
    if (arrived == input.size()) return 0;  // the client stopped mid-head
    const std::size_t more = std::min(piece, input.size() - arrived);
    pending = input.substr(arrived - pending.size(), pending.size() + more);
    arrived += more;
  }
  if (ec) return 0;
  if (!parser.is_header_done() || head_bytes > kHeaderBytesMax)
    __builtin_trap();  // a head the server must refuse
  input = input.substr(arrived - pending.size());
  // What serve() reads of the head.
  for (const auto& header : parser.headers()) {
    (void)hots3::iequals(header.name, "expect");
  }
  (void)parser.method_string();
  (void)parser.content_length();
  (void)parser.keep_alive();
  (void)hots3::http::loggable_target(parser.target());
  if (!hots3::http::detail::body_framing_clear(parser)) return 0;
  // The body, into small buffers as a handler would take it.
  std::array<char, 64> buffer{};
  for (int rounds = 0; !parser.is_done() && rounds < 100000; ++rounds) {
    auto& body = parser.body;
    body.data = buffer.data();
    body.size = buffer.size();
    const std::size_t used = parser.put(boost::asio::buffer(input.data(), input.size()), ec);
    input.remove_prefix(used);
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec || (used == 0 && body.size == buffer.size())) break;
  }
  return 0;
}
