// The request fields S3 operations parse from headers and the path: Range, HTTP and ISO 8601
// dates, entity-tag lists, bucket names, keys, copy sources.

#include "s3/acl.h"
#include "s3/conditions.h"
#include "s3/copy_source.h"
#include "s3/multipart_rules.h"
#include "s3/names.h"
#include "s3/object_spec.h"
#include "s3/range.h"
#include "s3/time_format.h"

#include <cstddef>
#include <cstdint>
#include <fuzzer/FuzzedDataProvider.h>
#include <string>

namespace s3 = hots3::s3;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const std::uint64_t object_size = in.ConsumeIntegral<std::uint64_t>();
  const std::string a = in.ConsumeRandomLengthString(1100);
  const std::string b = in.ConsumeRemainingBytesAsString();

  const auto range = s3::parse_range(a, object_size);
  if (range.kind == s3::RangeResult::Kind::kRange &&
      (range.length == 0 || range.offset >= object_size ||
       range.length > object_size - range.offset)) {
    __builtin_trap();  // a range outside the object
  }
  (void)s3::parse_byte_range(a);
  (void)s3::parse_http_date(a);
  (void)s3::parse_amz_date(a);
  (void)s3::etag_matches(a, b);
  (void)s3::valid_bucket_name(a);
  (void)s3::validate_key(a);
  (void)s3::parse_copy_source(a);
  (void)s3::unquoted(a);
  return 0;
}
