#pragma once

// The time formats of S3: RFC 1123 in headers (Last-Modified, Date), ISO 8601 with
// milliseconds in XML, and the compact ISO 8601 of SigV4 (x-amz-date).

#include "hots3/common/clock.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace hots3::s3 {

std::string http_date(std::int64_t ms);  // "Sun, 06 Nov 1994 08:49:37 GMT"
std::string iso8601(std::int64_t ms);    // "2026-11-22T02:16:54.123Z"
// RFC 1123, RFC 850 and asctime forms (RFC 9110 §5.6.7), as conditional headers may use.
std::optional<std::int64_t> parse_http_date(std::string_view text);
// "2026-11-22T02:16:54.123Z", the fraction optional.
std::optional<std::int64_t> parse_iso8601(std::string_view text);
// "20261121T235311Z"
std::optional<std::int64_t> parse_amz_date(std::string_view text);

}  // namespace hots3::s3
