#pragma once

// Private to src/s3: what a write says about the object it makes.

#include "errors.h"
#include "request.h"

#include "hots3/aws/checksum.h"
#include "hots3/config/config.h"
#include "hots3/storage/object_store.h"

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace hots3::s3 {

// Content headers and x-amz-meta-* of a write; refuses what hots3 does not do (SSE, tagging,
// object lock, other storage classes, public ACLs) with NotImplemented.
std::variant<storage::ObjectSpec, Error> object_spec(const Request& r,
                                                     const config::S3Config& config);

// The stored checksum of `object` for the header x-amz-checksum-<alg> and its type.
struct StoredChecksum {
  std::string header;  // "x-amz-checksum-crc32"
  std::string xml;     // "ChecksumCRC32"
  std::string value;
};
std::vector<StoredChecksum> stored_checksums(const storage::ChecksumSet& set);

// The ETag of a single-part object: the hex of its writer's digest (the data's MD5 where the store
// computes MD5s).
std::string data_etag(const storage::ObjectWriter& writer);

void set_checksum(storage::ChecksumSet& set, aws::ChecksumAlgorithm algorithm, std::string value);
std::optional<std::string> checksum_of(const storage::ChecksumSet& set,
                                       aws::ChecksumAlgorithm algorithm);

}  // namespace hots3::s3
