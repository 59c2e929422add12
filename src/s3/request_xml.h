#pragma once

// Private to src/s3: the XML request bodies of S3 operations, parsed into plain values. Pure
// functions over the body's text (no I/O), so that the rules are unit-tested and fuzzed apart
// from the handlers that act on them. Each returns the S3 error a malformed body gets.

#include "errors.h"

#include "hots3/aws/checksum.h"
#include "hots3/storage/object_store.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace hots3::s3 {

// DeleteObjects: <Delete><Quiet>?<Object><Key/><VersionId/>?</Object>...</Delete>, 1 to 1000
// objects. Errors: MalformedXML.
struct DeleteRequest {
  bool quiet = false;
  struct Object {
    std::string key;
    std::optional<std::string> version_id;
    storage::DeleteCondition condition;  // <ETag>, <LastModifiedTime>, <Size>
  };
  std::vector<Object> objects;
};
std::variant<DeleteRequest, Error> parse_delete_request(std::string_view body);

// CompleteMultipartUpload: the parts as listed (number, ETag unquoted, the part checksums the
// client names), in the client's order; order and existence are the completion's to check.
// Errors: MalformedXML (no parts, a part without PartNumber or ETag, a number that is not one,
// an unknown Checksum* element).
struct ListedPart {
  std::uint32_t number = 0;
  std::string etag;
  std::vector<std::pair<aws::ChecksumAlgorithm, std::string>> checksums;  // <ChecksumCRC32> ...
};
std::variant<std::vector<ListedPart>, Error> parse_complete_request(std::string_view body);

// CreateBucket's optional CreateBucketConfiguration; an empty body is no configuration. A
// general purpose bucket's gives a LocationConstraint; a directory bucket's a Location (Type,
// Name) and a Bucket (Type, DataRedundancy), never with a LocationConstraint.
struct BucketConfiguration {
  std::optional<std::string> location_constraint;
  std::optional<std::string> location_type;  // AvailabilityZone, LocalZone
  std::optional<std::string> location_name;  // the zone
  std::optional<std::string> bucket_type;    // Directory
  std::optional<std::string> data_redundancy;
};
// Errors: MalformedXML.
std::variant<BucketConfiguration, Error> parse_create_bucket_configuration(std::string_view body);

// PutBucketAcl / PutObjectAcl: whether the policy grants exactly FULL_CONTROL to `owner_id` and
// nothing else (the one ACL hots3 objects have). Errors: MalformedXML.
std::variant<bool, Error> acl_is_owner_full_control(std::string_view body,
                                                    std::string_view owner_id);

// RestoreObject's optional RestoreRequest (Days, GlacierJobParameters, ...: an object is restored
// for as long as eviction leaves it, so they change nothing). Errors: MalformedXML (another root,
// Days that are not a positive number), NotImplemented (a SELECT request).
std::optional<Error> check_restore_request(std::string_view body);

}  // namespace hots3::s3
