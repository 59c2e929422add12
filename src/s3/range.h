#pragma once

// The Range header of GetObject: one byte range ("bytes=a-b", "bytes=a-", "bytes=-n").
// Like S3, anything else (other units, several ranges, bad syntax) is ignored and the whole
// object is sent; a well-formed range that selects nothing is unsatisfiable (416).

#include <cstdint>
#include <optional>
#include <string_view>

namespace hots3::s3 {

struct RangeResult {
  enum class Kind : std::uint8_t { kWhole, kRange, kUnsatisfiable } kind = Kind::kWhole;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

RangeResult parse_range(std::string_view header, std::uint64_t size);

// The syntax alone: "bytes=first-last", "bytes=first-" (no last) or "bytes=-n" (no first, last
// = n); nullopt for anything else, including last < first. UploadPartCopy's
// x-amz-copy-source-range takes only the first form.
struct ByteRange {
  std::optional<std::uint64_t> first;
  std::optional<std::uint64_t> last;
};
std::optional<ByteRange> parse_byte_range(std::string_view header);

}  // namespace hots3::s3
