#pragma once

// Private to src/s3: what GetObject and HeadObject answer, as pure functions of the request and
// the object's record: which bytes (all, a Range, a part) and which headers.

#include "errors.h"
#include "request.h"

#include "hots3/http/handler.h"
#include "hots3/storage/object_store.h"

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

namespace hots3::s3 {

// The bytes of an object a response carries.
struct BodySelection {
  std::uint64_t offset_bytes = 0;
  std::uint64_t length_bytes = 0;
  bool partial = false;                      // 206 Partial Content
  std::optional<std::uint32_t> part_number;  // ?partNumber
  std::optional<std::string> part_checksum;  // the part's own, of the upload's algorithm
};

// The part a GET or HEAD names with ?partNumber, if any. Errors: InvalidArgument (not a part
// number), InvalidRequest (a Range as well).
std::variant<std::optional<std::uint32_t>, Error> requested_part(const Request& r);

// What to send of `object`: part `part_number` (`part` is its record, looked up by the caller,
// when the object has parts), the Range, or all of it. An unparsable Range is ignored, as S3 does.
// Errors: InvalidPartNumber, InvalidRange (with ActualObjectSize: a 416).
std::variant<BodySelection, Error> select_body(
    const Request& r, const storage::ObjectRecord& object, std::optional<std::uint32_t> part_number,
    const std::optional<storage::ObjectPartRecord>& part);

// The object's headers in a GET or HEAD response: content headers (or their response-*
// overrides), Last-Modified, ETag, Accept-Ranges, user metadata, Content-Range, the part count,
// and the checksums when x-amz-checksum-mode asks for them (none for a range); and
// Content-Length.
void add_object_headers(http::Response& head, const Request& r, const storage::ObjectRecord& object,
                        const BodySelection& selection);

}  // namespace hots3::s3
