#include "request_parser.h"

#include "hots3/common/text.h"
#include "hots3/http/handler.h"

#include <boost/asio/buffer.hpp>

#include <string_view>

namespace hots3::http::detail {

namespace bhttp = boost::beast::http;

void limit_request_parser(RequestParser& parser, std::uint64_t header_bytes_max) {
  parser.header_limit(static_cast<std::uint32_t>(header_bytes_max));
  parser.body_limit(boost::none);
}

std::size_t put_head(RequestParser& parser, std::string_view available, std::uint64_t& head_bytes,
                     std::uint64_t header_bytes_max, boost::beast::error_code& ec) {
  ec = {};
  std::size_t used = 0;
  if (!available.empty()) {
    used = parser.put(boost::asio::buffer(available.data(), available.size()), ec);
    head_bytes += used;
    if (head_bytes > header_bytes_max) {
      ec = bhttp::error::header_limit;
      return used;
    }
    if (parser.is_header_done()) return used;
  }
  if (!ec) ec = bhttp::error::need_more;
  if (ec == bhttp::error::need_more && head_bytes + (available.size() - used) > header_bytes_max) {
    ec = bhttp::error::header_limit;
  }
  return used;
}

bool body_framing_clear(const RequestParser::value_type& message) {
  const auto codings = message.count(bhttp::field::transfer_encoding);
  if (codings == 0) return true;
  if (codings > 1 || message.version() < 11 || message.count(bhttp::field::content_length) > 0)
    return false;
  std::string_view value = message[bhttp::field::transfer_encoding];
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  return iequals(value, "chunked");
}

}  // namespace hots3::http::detail
