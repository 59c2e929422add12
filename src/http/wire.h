#pragma once

// Private to src/http: the bytes of HTTP/1.1 response heads, chunk lines, request ids and
// access-log lines. No I/O; unit-tested in tests/unit/http.

#include "hots3/http/handler.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace hots3::http::detail {

// "HTTP/1.1 200 OK\r\n"
void append_status_line(std::string& out, unsigned status);

// The reason phrase for a status code ("Not Found"); "Unknown" for codes without one.
std::string_view reason_phrase(unsigned status) noexcept;

// "Name: value\r\n". CR, LF and NUL in either are replaced by spaces: a header value can never
// split the response.
void append_header(std::string& out, std::string_view name, std::string_view value);

// The headers a handler gave `response`: its fixed lines, its request-id header (with
// `request_id`) if it names one, then the lines it added (Response::add wrote them as
// append_header does).
void append_response_headers(std::string& out, const Response& response,
                             std::string_view request_id);

// "1f40\r\n" into `out` (at least 20 bytes); returns its length.
std::size_t format_chunk_line(std::size_t size_bytes, char* out) noexcept;

// 16 upper-case hex digits, unique per (seed, counter), into `out`.
void format_request_id(std::uint64_t seed, std::uint64_t counter, char (&out)[16]) noexcept;

// `target` JSON-escaped, with the values of the query parameters that carry secrets (a name
// containing "signature", X-Amz-Security-Token; any case, judged after percent-decoding)
// replaced by "REDACTED": presigned URLs must not leak from logs.
void append_redacted_target(std::string& out, std::string_view target);

// One JSON line for the access log, its target redacted as above; logged at `second`
// ("YYYY-MM-DDTHH:MM:SS", see iso_second) and `millis` past it.
std::string format_access_line(const RequestHead& head, unsigned status, std::uint64_t in_bytes,
                               std::uint64_t out_bytes, std::int64_t duration_us,
                               std::string_view second, unsigned millis);

}  // namespace hots3::http::detail
