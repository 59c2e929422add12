#include "object_response.h"

#include "conditions.h"
#include "multipart_rules.h"
#include "names.h"
#include "object_spec.h"
#include "range.h"
#include "time_format.h"

#include "hots3/common/text.h"

#include <algorithm>

namespace hots3::s3 {
namespace {

std::string content_range(const BodySelection& s, std::uint64_t size_bytes) {
  return "bytes " + std::to_string(s.offset_bytes) + "-" +
         std::to_string(s.offset_bytes + s.length_bytes - 1) + "/" + std::to_string(size_bytes);
}

}  // namespace

std::variant<std::optional<std::uint32_t>, Error> requested_part(const Request& r) {
  const std::string* text = r.param("partNumber");
  if (text == nullptr) return std::optional<std::uint32_t>();
  const auto number = parse_part_number(*text);
  if (!number) return invalid_part_number(*text);
  if (r.header("range")) {
    return Error(Code::kInvalidRequest,
                 "Cannot specify both Range header and partNumber query parameter");
  }
  return number;
}

std::variant<BodySelection, Error> select_body(
    const Request& r, const storage::ObjectRecord& object, std::optional<std::uint32_t> part_number,
    const std::optional<storage::ObjectPartRecord>& part) {
  BodySelection s;
  s.length_bytes = object.size_bytes;
  if (part_number) {
    s.part_number = part_number;
    if (object.parts_count == 0) {
      // An object in one piece is its own part 1.
      if (*part_number != 1) return Error(Code::kInvalidPartNumber);
      return s;
    }
    if (!part) return Error(Code::kInvalidPartNumber);
    s.offset_bytes = part->offset_bytes;
    s.length_bytes = part->size_bytes;
    s.partial = true;
    s.part_checksum = part->checksum;
    return s;
  }
  if (auto range = r.header("range")) {
    const RangeResult parsed = parse_range(*range, object.size_bytes);
    if (parsed.kind == RangeResult::Kind::kUnsatisfiable) {
      return Error(Code::kInvalidRange)
          .with("RangeRequested", std::string(*range))
          .with("ActualObjectSize", std::to_string(object.size_bytes));
    }
    if (parsed.kind == RangeResult::Kind::kRange) {
      s.offset_bytes = parsed.offset;
      s.length_bytes = parsed.length;
      s.partial = true;
    }
  }
  return s;
}

void add_object_headers(http::Response& head, const Request& r, const storage::ObjectRecord& object,
                        const BodySelection& selection) {
  auto header_or_override = [&](const char* name, const char* param,
                                const std::optional<std::string>& stored) {
    if (const std::string* v = r.param(param)) {
      head.add(name, *v);
    } else if (stored) {
      head.add(name, *stored);
    }
  };
  header_or_override("Content-Type", "response-content-type", object.headers.content_type);
  header_or_override("Content-Language", "response-content-language",
                     object.headers.content_language);
  header_or_override("Expires", "response-expires", object.headers.expires);
  header_or_override("Cache-Control", "response-cache-control", object.headers.cache_control);
  header_or_override("Content-Disposition", "response-content-disposition",
                     object.headers.content_disposition);
  header_or_override("Content-Encoding", "response-content-encoding",
                     object.headers.content_encoding);
  head.add("Last-Modified", http_date(object.created_ms));
  head.add("ETag", quoted(object.etag));
  // S3 names the class of an object that is not STANDARD: a directory bucket's all are not.
  if (is_directory_bucket(r.bucket)) head.add("x-amz-storage-class", "EXPRESS_ONEZONE");
  head.add("Accept-Ranges", "bytes");
  for (const auto& [name, value] : object.user_metadata) head.add("x-amz-meta-" + name, value);
  if (selection.part_number) {
    head.add("x-amz-mp-parts-count",
             std::to_string(std::max<std::uint32_t>(object.parts_count, 1)));
  }
  if (selection.partial) head.add("Content-Range", content_range(selection, object.size_bytes));
  // Checksums for the whole object and for a part that has its own; S3 has none for ranges.
  if (auto mode = r.header("x-amz-checksum-mode"); mode && iequals(*mode, "ENABLED")) {
    const auto stored = stored_checksums(object.checksums);
    if (!selection.partial) {
      for (const auto& c : stored) head.add(c.header, c.value);
      if (object.checksums.type) head.add("x-amz-checksum-type", *object.checksums.type);
    } else if (selection.part_checksum && !stored.empty()) {
      // A multipart object has the one checksum of its upload's algorithm; so has each part.
      head.add(stored.front().header, *selection.part_checksum);
    }
  }
  head.content_length = selection.length_bytes;
}

}  // namespace hots3::s3
