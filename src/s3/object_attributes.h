#pragma once

// Private to src/s3: GetObjectAttributes (GET /bucket/key?attributes), as pure functions of the
// request and the object's record: which attributes were asked for, and the answer's XML.

#include "errors.h"
#include "request.h"

#include "hots3/storage/object_store.h"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace hots3::s3 {

// What x-amz-object-attributes, x-amz-max-parts and x-amz-part-number-marker ask for.
struct AttributesRequest {
  bool etag = false;
  bool checksum = false;
  bool object_parts = false;
  bool storage_class = false;
  bool object_size = false;
  std::uint32_t max_parts = 1000;
  std::uint32_t part_number_marker = 0;  // parts after this one
};

// Errors: InvalidArgument (no attribute named, an unknown one, a bad number).
std::variant<AttributesRequest, Error> attributes_request(const Request& r);

// The GetObjectAttributesResponse document. `parts` are all of a multipart object's parts in
// order (empty for an object in one piece, which has no ObjectParts); `storage_class` its bucket's.
std::string attributes_response(const AttributesRequest& asked, const storage::ObjectRecord& object,
                                const std::vector<storage::ObjectPartRecord>& parts,
                                std::string_view storage_class);

}  // namespace hots3::s3
