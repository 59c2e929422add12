#pragma once

// Private to src/http: how a connection parses a request head, in one place for the session and
// for the fuzz harness that feeds it hostile bytes. Beast's parser does the HTTP/1.1 syntax;
// what Beast accepts but hots3 must not (framings two parties could read differently) is
// checked here.

#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>

#include <cstdint>
#include <string_view>

namespace hots3::http::detail {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::buffer_body>;

// Sets the limits every request is parsed under: at most `header_bytes_max` of request line and
// headers; no body limit here (the handler decides what body size it accepts).
void limit_request_parser(RequestParser& parser, std::uint64_t header_bytes_max);

// Feeds the bytes that have arrived of a request head (`available`, `waiting` of them still to
// come from the socket after these) to the parser and returns how many it took; `head_bytes`
// counts what the head has taken so far. `ec`: as Beast sets it (need_more while the head is
// incomplete), or header_limit once the head would pass `header_bytes_max` in all (the parser's
// head may then be complete: the request is refused all the same). Beast alone
// bounds only the unparsed rest of a head: fed in small pieces, a head of small fields would grow
// without end.
std::size_t put_head(RequestParser& parser, std::string_view available, std::uint64_t& head_bytes,
                     std::uint64_t header_bytes_max, boost::beast::error_code& ec);

// Whether the request says unambiguously where its body ends. Transfer-Encoding is accepted only
// as exactly one "chunked" on HTTP/1.1 without a Content-Length: any other coding ("chunked,
// identity", "xchunked", "identity"), a repeated header, or both framings at once would let a
// proxy in front and this server disagree on where the body ends, and the rest of the body be
// read as a request of its own (request smuggling; RFC 9112 section 6.1: answer 400 and close).
bool body_framing_clear(const RequestParser::value_type& message);

}  // namespace hots3::http::detail
