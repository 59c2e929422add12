#pragma once

// Private to src/s3: helpers the operations share.

#include "errors.h"
#include "s3_xml.h"
#include "service.h"

#include "hots3/aws/checksum.h"
#include "hots3/storage/object_store.h"

#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace hots3::s3 {

inline constexpr std::uint64_t kKeyBytesMax = 1024;
inline constexpr std::uint64_t kPartBytesMin = 5ULL * 1024 * 1024;  // every part but the last
inline constexpr std::uint32_t kPartNumberMax = 10000;

std::string owner_id(std::string_view user);
void write_owner(XmlWriter& xml, std::string_view user);
// The one ACL a hots3 bucket or object has: its owner has full control.
std::string owner_full_control_acl(std::string_view owner);
bool valid_bucket_name(std::string_view name);

// Keys: UTF-8 without NUL, 1 to 1024 bytes. Errors: KeyTooLongError, InvalidArgument.
std::optional<Error> validate_key(std::string_view key);

// ?versionId on an object read: hots3 keeps no versions, so "null" (the version of every object
// in a bucket that never had versioning) is the current object and any other id names a version
// that does not exist. Errors: InvalidArgument (empty), NoSuchVersion.
std::optional<Error> check_version_id(const Request& r);

// Content headers and x-amz-meta-* of a write; refuses what hots3 does not do (SSE, tagging,
// object lock, other storage classes, public ACLs) with NotImplemented.
std::variant<storage::ObjectSpec, Error> object_spec(const Request& r,
                                                     const config::S3Config& config);

// If-None-Match: * and If-Match: <etag> on a write.
std::variant<storage::WriteCondition, Error> write_condition(const Request& r);

// GET/HEAD preconditions in S3's (RFC 9110's) order; `copy_source` reads the
// x-amz-copy-source-if-* forms instead (which never answer 304).
std::optional<Error> read_conditions(const Request& r, const storage::ObjectRecord& object,
                                     bool copy_source);

// Does one entity tag of a list ("a", W/"b", *) match `etag`?
bool etag_matches(std::string_view list, std::string_view etag);

std::string quoted(std::string_view etag);
std::string unquoted(std::string_view etag);

// The stored checksum of `object` for the header x-amz-checksum-<alg> and its type.
struct StoredChecksum {
  std::string header;  // "x-amz-checksum-crc32"
  std::string xml;     // "ChecksumCRC32"
  std::string value;
};
std::vector<StoredChecksum> stored_checksums(const storage::ChecksumSet& set);

// "bucket/key" or "/bucket/key" (URL-encoded) → (bucket, key). Errors: InvalidArgument.
std::variant<std::pair<std::string, std::string>, Error> parse_copy_source(std::string_view header);

// CopyObject and UploadPartCopy copy at most what a single PUT may write (S3: 5 GiB, from
// single_put_max). Errors: InvalidRequest.
std::optional<Error> check_copy_size(std::uint64_t bytes, const config::S3Config& config);

void set_checksum(storage::ChecksumSet& set, aws::ChecksumAlgorithm algorithm, std::string value);

class Body;
// Streams the request body into a new writer (its size reserved first, so a full device is
// refused before "100 Continue") and finishes it. Sends the error and returns nullptr on failure.
asio::awaitable<std::unique_ptr<storage::ObjectWriter>> receive(Service& s, Request& r, Body& body,
                                                                bool for_part,
                                                                std::uint64_t max_bytes);

}  // namespace hots3::s3
