#pragma once

// The Range header of GetObject: one byte range ("bytes=a-b", "bytes=a-", "bytes=-n").
// Like S3, anything else (other units, several ranges, bad syntax) is ignored and the whole
// object is sent; a well-formed range that selects nothing is unsatisfiable (416).

#include <cstdint>
#include <string_view>

namespace hots3::s3 {

struct RangeResult {
  enum class Kind : std::uint8_t { kWhole, kRange, kUnsatisfiable } kind = Kind::kWhole;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

RangeResult parse_range(std::string_view header, std::uint64_t size);

}  // namespace hots3::s3
