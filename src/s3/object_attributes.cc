#include "object_attributes.h"

#include "object_spec.h"
#include "s3_xml.h"

#include "hots3/common/text.h"

namespace hots3::s3 {
namespace {

Error invalid(std::string message, std::string_view argument) {
  return Error(Code::kInvalidArgument, std::move(message))
      .with("ArgumentName", std::string(argument));
}

}  // namespace

std::variant<AttributesRequest, Error> attributes_request(const Request& r) {
  AttributesRequest asked;
  auto list = r.header("x-amz-object-attributes");
  if (!list || trim(*list).empty())
    return invalid(
        "The x-amz-object-attributes header specifying the attributes to be retrieved "
        "is either missing or empty",
        "x-amz-object-attributes");
  std::size_t at = 0;
  while (at <= list->size()) {
    const auto comma = list->find(',', at);
    const std::string_view name = trim(
        list->substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at));
    if (name == "ETag") {
      asked.etag = true;
    } else if (name == "Checksum") {
      asked.checksum = true;
    } else if (name == "ObjectParts") {
      asked.object_parts = true;
    } else if (name == "StorageClass") {
      asked.storage_class = true;
    } else if (name == "ObjectSize") {
      asked.object_size = true;
    } else {
      return invalid("Invalid attribute name specified.", "x-amz-object-attributes");
    }
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  if (auto text = r.header("x-amz-max-parts")) {
    auto n = parse_decimal<std::uint32_t>(*text);
    if (!n)
      return invalid("Provided max-parts not an integer or within integer range", "max-parts");
    asked.max_parts = std::min<std::uint32_t>(*n, 1000);
  }
  if (auto text = r.header("x-amz-part-number-marker")) {
    auto n = parse_decimal<std::uint32_t>(*text);
    if (!n) {
      return invalid("Provided part-number-marker not an integer or within integer range",
                     "part-number-marker");
    }
    asked.part_number_marker = *n;
  }
  return asked;
}

std::string attributes_response(const AttributesRequest& asked, const storage::ObjectRecord& object,
                                const std::vector<storage::ObjectPartRecord>& parts,
                                std::string_view storage_class) {
  const std::vector<StoredChecksum> stored = stored_checksums(object.checksums);
  XmlWriter xml("GetObjectAttributesResponse");
  if (asked.etag) xml.element("ETag", object.etag);  // without quotes, unlike the header
  if (asked.checksum && !stored.empty()) {
    xml.open("Checksum");
    for (const auto& c : stored) xml.element(c.xml, c.value);
    if (object.checksums.type) xml.element("ChecksumType", *object.checksums.type);
    xml.close();
  }
  if (asked.object_parts && !parts.empty()) {
    xml.open("ObjectParts");
    xml.element("PartsCount", static_cast<std::uint64_t>(parts.size()));
    xml.element("PartNumberMarker", static_cast<std::uint64_t>(asked.part_number_marker));
    std::uint32_t listed = 0;
    std::uint32_t last = asked.part_number_marker;
    bool truncated = false;
    for (const auto& part : parts) {
      if (part.part_number <= asked.part_number_marker) continue;
      if (listed == asked.max_parts) {
        truncated = true;
        break;
      }
      ++listed;
      last = part.part_number;
    }
    xml.element("NextPartNumberMarker", static_cast<std::uint64_t>(last));
    xml.element("MaxParts", static_cast<std::uint64_t>(asked.max_parts));
    xml.element("IsTruncated", truncated);
    for (const auto& part : parts) {
      if (part.part_number <= asked.part_number_marker) continue;
      if (part.part_number > last) break;
      xml.open("Part");
      xml.element("PartNumber", static_cast<std::uint64_t>(part.part_number));
      xml.element("Size", part.size_bytes);
      // The object's checksum is of its upload's algorithm; so is each part's.
      if (part.checksum && !stored.empty()) xml.element(stored.front().xml, *part.checksum);
      xml.close();
    }
    xml.close();
  }
  if (asked.storage_class) xml.element("StorageClass", storage_class);
  if (asked.object_size) xml.element("ObjectSize", object.size_bytes);
  return xml.finish();
}

}  // namespace hots3::s3
