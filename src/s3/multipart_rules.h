#pragma once

// Private to src/s3: the rules of multipart uploads (and of appends, which S3 Express makes
// parts of an object), as pure functions of their inputs: the handlers parse, ask the store, and
// render; what S3 decides in between is here, and unit-tested (tests/unit/s3).

#include "errors.h"
#include "request_xml.h"

#include "hots3/aws/checksum.h"
#include "hots3/storage/object_store.h"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace hots3::s3 {

inline constexpr std::uint64_t kPartBytesMin = 5ULL * 1024 * 1024;  // every part but the last
inline constexpr std::uint32_t kPartNumberMax = 10000;

// A partNumber: a whole number from 1 to 10,000, nothing else. nullopt otherwise.
std::optional<std::uint32_t> parse_part_number(std::string_view text);
// S3's InvalidArgument for a partNumber that is not one (with the value, when there is one).
Error invalid_part_number(std::optional<std::string_view> value = std::nullopt);

// What an upload's checksum settings (x-amz-checksum-algorithm and -type at its creation) make
// of the completed object's checksum.
struct UploadChecksums {
  std::optional<aws::ChecksumAlgorithm> algorithm;  // the upload's, if it named one
  bool composite = true;                            // COMPOSITE (the default) or FULL_OBJECT
  // The object's checksum algorithm: the upload's, else S3's default CRC64NVME.
  [[nodiscard]] aws::ChecksumAlgorithm object_algorithm() const {
    return algorithm.value_or(aws::ChecksumAlgorithm::kCrc64Nvme);
  }
  // A FULL_OBJECT checksum (combined from the parts' CRCs), as opposed to a composite one.
  [[nodiscard]] bool full_object() const { return !algorithm || !composite; }
};
UploadChecksums upload_checksums(const storage::UploadRecord& upload);

// The completion of `upload` from the parts the client listed and the parts stored (ordered by
// number): which parts, in order, and the object's ETag and checksum. `claimed` is the object
// checksum the client sent with Complete, if any (compared, not trusted). Errors, in S3's order:
// InvalidPartOrder, InvalidPart (not stored, another ETag, another checksum), InvalidRequest (a
// composite upload's part listed without its checksum, a part stored without one),
// EntityTooSmall (a part but the last under 5 MiB), BadDigest (the claimed checksum differs).
// `consecutive` (a directory bucket's rule): the parts listed are 1, 2, 3 and so on, none left out
// (InvalidPartOrder otherwise).
std::variant<storage::ObjectStore::CompletionPlan, Error> plan_completion(
    const storage::UploadRecord& upload, const std::vector<storage::PartRecord>& stored,
    const std::vector<ListedPart>& listed, const std::optional<std::string>& claimed,
    bool consecutive = false);

// InvalidRequest when the client's checksum algorithm on Complete is not the object's.
std::optional<Error> check_claimed_algorithm(const UploadChecksums& upload,
                                             std::optional<aws::ChecksumAlgorithm> claimed);

// ---- appends ------------------------------------------------------------------------------
//
// S3 Express semantics: the offset must be the object's current size (0 creates an object that
// does not exist); each append adds a part (10,000 at most); the object keeps its metadata, and a
// request may not set user metadata on an existing object. A full-object CRC (CRC32, CRC32C,
// CRC64NVME) is carried on over the new bytes; other checksums end with the first append.

// x-amz-write-offset-bytes: a whole number of bytes, else InvalidArgument.
std::variant<std::uint64_t, Error> parse_write_offset(std::string_view text);

// What an append to `base` (nullopt: there is no object) will make, decided before any data.
struct AppendPlan {
  std::uint64_t offset = 0;  // == the base's size
  std::uint32_t parts = 0;   // the new version's part count; 0 for a new object
  // The base's full-object CRC, carried on over the appended bytes.
  std::optional<std::pair<aws::ChecksumAlgorithm, std::uint64_t>> extended_crc;
  // The checksum the appended bytes are verified against (the client's algorithm, else the
  // extended CRC's).
  std::optional<aws::ChecksumAlgorithm> body_algorithm;
};
// Errors, in S3's order: InvalidWriteOffset, PreconditionFailed (If-None-Match, If-Match),
// NoSuchKey (If-Match without an object), InvalidRequest (user metadata for an existing object),
// TooManyParts, InvalidRequest (another checksum algorithm than the object's).
std::variant<AppendPlan, Error> plan_append(const std::optional<storage::ObjectRecord>& base,
                                            std::uint64_t offset,
                                            const storage::WriteCondition& condition,
                                            const storage::ObjectSpec& requested,
                                            std::optional<aws::ChecksumAlgorithm> body_algorithm,
                                            std::string_view key);

// The appended data, as the writer and the request body saw it.
struct AppendedData {
  std::string etag;  // the writer's (what a new object's ETag is)
  // The writer's digest, which the chained ETag is made of: of the appended bytes, after the
  // base's when an inline base is rewritten with them.
  std::array<std::uint8_t, 16> digest{};
  std::uint64_t bytes = 0;
  std::optional<std::pair<aws::ChecksumAlgorithm, std::string>> checksum;  // verified
  std::uint64_t crc = 0;  // plan.extended_crc carried on over the bytes
};
// The new version: its spec and the part boundaries to add. A new object takes the request's
// spec; an extended one keeps the base's headers and metadata, and an ETag chained from the
// previous one (every version has its own).
struct AppendedVersion {
  storage::ObjectSpec spec;
  std::vector<storage::ObjectPartRecord> new_parts;
};
AppendedVersion appended_version(const std::optional<storage::ObjectRecord>& base,
                                 storage::ObjectSpec requested, const AppendPlan& plan,
                                 const AppendedData& data);

}  // namespace hots3::s3
