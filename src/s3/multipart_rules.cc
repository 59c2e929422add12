#include "multipart_rules.h"

#include "conditions.h"
#include "object_spec.h"

#include "hots3/aws/etag.h"
#include "hots3/common/text.h"

#include <algorithm>
#include <charconv>

namespace hots3::s3 {
namespace {

Error missing_part_checksum(std::uint32_t number, aws::ChecksumAlgorithm algorithm) {
  return Error(Code::kInvalidRequest, "Part " + std::to_string(number) + " has no " +
                                          std::string(aws::checksum_name(algorithm)) +
                                          " checksum.");
}

Error checksum_mismatch(aws::ChecksumAlgorithm algorithm) {
  return Error(Code::kBadDigest, "The " + std::string(aws::checksum_name(algorithm)) +
                                     " you specified did not match the calculated checksum.");
}

// The full-object CRC an append can extend (CRCs continue over appended bytes; SHAs and
// composite checksums cannot).
std::optional<std::pair<aws::ChecksumAlgorithm, std::uint64_t>> extendable_crc(
    const storage::ChecksumSet& c) {
  if (c.type.value_or("") != "FULL_OBJECT") return std::nullopt;
  for (const auto algorithm : {aws::ChecksumAlgorithm::kCrc32, aws::ChecksumAlgorithm::kCrc32c,
                               aws::ChecksumAlgorithm::kCrc64Nvme}) {
    if (auto value = checksum_of(c, algorithm)) {
      if (auto crc = aws::crc_from_base64(algorithm, *value)) return std::pair{algorithm, *crc};
      return std::nullopt;
    }
  }
  return std::nullopt;
}

// The algorithm of the checksum an object keeps (appends must use the same one).
std::optional<aws::ChecksumAlgorithm> stored_algorithm(const storage::ChecksumSet& c) {
  if (c.crc32) return aws::ChecksumAlgorithm::kCrc32;
  if (c.crc32c) return aws::ChecksumAlgorithm::kCrc32c;
  if (c.crc64nvme) return aws::ChecksumAlgorithm::kCrc64Nvme;
  if (c.sha1) return aws::ChecksumAlgorithm::kSha1;
  if (c.sha256) return aws::ChecksumAlgorithm::kSha256;
  return std::nullopt;
}

}  // namespace

std::optional<std::uint32_t> parse_part_number(std::string_view text) {
  std::uint32_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size() || n < 1 ||
      n > kPartNumberMax) {
    return std::nullopt;
  }
  return n;
}

Error invalid_part_number(std::optional<std::string_view> value) {
  Error e =
      Error(Code::kInvalidArgument, "Part number must be an integer between 1 and 10000, inclusive")
          .with("ArgumentName", "partNumber");
  if (value) e.with("ArgumentValue", std::string(*value));
  return e;
}

UploadChecksums upload_checksums(const storage::UploadRecord& upload) {
  UploadChecksums c;
  if (upload.checksum_algorithm)
    c.algorithm = aws::parse_checksum_algorithm(*upload.checksum_algorithm);
  c.composite = upload.checksum_type.value_or("COMPOSITE") == "COMPOSITE";
  return c;
}

std::optional<Error> check_claimed_algorithm(const UploadChecksums& upload,
                                             std::optional<aws::ChecksumAlgorithm> claimed) {
  if (!claimed || *claimed == upload.object_algorithm()) return std::nullopt;
  return Error(Code::kInvalidRequest,
               "Checksum Type mismatch occurred, expected checksum Type: " +
                   lower(aws::checksum_name(upload.object_algorithm())) +
                   ", actual checksum Type: " + lower(aws::checksum_name(*claimed)));
}

std::variant<storage::ObjectStore::CompletionPlan, Error> plan_completion(
    const storage::UploadRecord& upload, const std::vector<storage::PartRecord>& stored,
    const std::vector<ListedPart>& listed, const std::optional<std::string>& claimed,
    bool consecutive) {
  const UploadChecksums checksums = upload_checksums(upload);
  const std::optional<aws::ChecksumAlgorithm>& algorithm = checksums.algorithm;
  const aws::ChecksumAlgorithm object_algorithm = checksums.object_algorithm();
  storage::ObjectStore::CompletionPlan chosen;
  chosen.spec.headers = upload.headers;
  chosen.spec.user_metadata = upload.user_metadata;
  std::optional<aws::Checksummer> composite_sum;
  if (algorithm && checksums.composite) composite_sum.emplace(*algorithm);
  // FULL_OBJECT: the CRC of the whole object, combined from the parts' CRCs and sizes. It is
  // left out (never guessed) when a part has none: parts stored before hots3 kept default
  // CRC64NVMEs.
  std::optional<std::uint64_t> full_crc;
  if (checksums.full_object()) full_crc = 0;  // the CRC of nothing
  // S3's order of checks: the list's order first, then each part.
  for (std::size_t i = 1; i < listed.size(); ++i) {
    if (listed[i].number <= listed[i - 1].number) return Error(Code::kInvalidPartOrder);
  }
  for (std::size_t i = 0; consecutive && i < listed.size(); ++i) {
    if (listed[i].number != i + 1) {
      return Error(Code::kInvalidPartOrder,
                   "In a directory bucket the parts are numbered from 1 with none left out.");
    }
  }
  std::vector<std::string_view> part_md5s;
  part_md5s.reserve(listed.size());
  for (std::size_t i = 0; i < listed.size(); ++i) {
    const ListedPart& want = listed[i];
    // `stored` is ordered by number: a search, not a scan (10,000 parts stay cheap).
    auto it = std::lower_bound(
        stored.begin(), stored.end(), want.number,
        [](const auto& p, std::uint32_t number) { return p.part_number < number; });
    if (it != stored.end() && it->part_number != want.number) it = stored.end();
    // A part checksum in the list must be the part's (S3 answers InvalidPart otherwise).
    const bool checksums_match =
        it != stored.end() &&
        std::all_of(want.checksums.begin(), want.checksums.end(), [&](const auto& c) {
          const auto kept = checksum_of(it->checksums, c.first);
          return !kept || *kept == c.second;
        });
    if (it == stored.end() || it->etag != want.etag || !checksums_match) {
      return Error(Code::kInvalidPart)
          .with("UploadId", upload.upload_id)
          .with("PartNumber", std::to_string(want.number))
          .with("ETag", want.etag);
    }
    // An upload created with a (composite) checksum algorithm needs each part's checksum.
    if (composite_sum && std::none_of(want.checksums.begin(), want.checksums.end(),
                                      [&](const auto& c) { return c.first == *algorithm; })) {
      return Error(Code::kInvalidRequest,
                   "The upload was created using a " + lower(aws::checksum_name(*algorithm)) +
                       " checksum. The complete request must include the checksum for each "
                       "part. It was missing for part " +
                       std::to_string(want.number) + " in the request.");
    }
    if (i + 1 < listed.size() && it->size_bytes < kPartBytesMin) {
      return Error(Code::kEntityTooSmall)
          .with("ProposedSize", std::to_string(it->size_bytes))
          .with("MinSizeAllowed", std::to_string(kPartBytesMin))
          .with("PartNumber", std::to_string(want.number))
          .with("ETag", want.etag);
    }
    part_md5s.emplace_back(it->etag);
    if (composite_sum) {
      auto value = checksum_of(it->checksums, *algorithm);
      auto raw = value ? aws::base64_decode(*value) : std::nullopt;
      if (!raw) return missing_part_checksum(want.number, *algorithm);
      composite_sum->update(std::as_bytes(std::span(raw->data(), raw->size())));
    }
    if (full_crc) {
      const auto value = checksum_of(it->checksums, object_algorithm);
      const auto part_crc = value ? aws::crc_from_base64(object_algorithm, *value) : std::nullopt;
      full_crc = part_crc ? std::optional(aws::crc_combine(object_algorithm, *full_crc, *part_crc,
                                                           it->size_bytes))
                          : std::nullopt;
      // Every part of an upload with a FULL_OBJECT algorithm has its checksum (UploadPart).
      if (!full_crc && algorithm) return missing_part_checksum(want.number, object_algorithm);
    }
    chosen.parts.push_back(*it);
  }
  chosen.spec.etag = aws::multipart_etag(part_md5s, chosen.parts.size());
  if (composite_sum) {
    const std::string count = "-" + std::to_string(chosen.parts.size());
    const std::string value = composite_sum->base64() + count;
    if (claimed && unquoted(*claimed) != value && unquoted(*claimed) + count != value) {
      return checksum_mismatch(*algorithm);
    }
    set_checksum(chosen.spec.checksums, *algorithm, value);
    chosen.spec.checksums.type = "COMPOSITE";
  }
  if (full_crc) {
    const std::string value = aws::crc_to_base64(object_algorithm, *full_crc);
    if (claimed && *claimed != value) return checksum_mismatch(object_algorithm);
    set_checksum(chosen.spec.checksums, object_algorithm, value);
    chosen.spec.checksums.type = "FULL_OBJECT";
  }
  return chosen;
}

std::variant<std::uint64_t, Error> parse_write_offset(std::string_view text) {
  std::uint64_t offset = 0;
  if (auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), offset);
      ec != std::errc{} || end != text.data() + text.size() || text.empty()) {
    return Error(Code::kInvalidArgument, "x-amz-write-offset-bytes must be a non-negative integer.")
        .with("ArgumentName", "x-amz-write-offset-bytes")
        .with("ArgumentValue", std::string(text));
  }
  return offset;
}

std::variant<AppendPlan, Error> plan_append(const std::optional<storage::ObjectRecord>& base,
                                            std::uint64_t offset,
                                            const storage::WriteCondition& condition,
                                            const storage::ObjectSpec& requested,
                                            std::optional<aws::ChecksumAlgorithm> body_algorithm,
                                            std::string_view key) {
  const std::uint64_t size = base ? base->size_bytes : 0;
  if (offset != size) {
    return Error(Code::kInvalidWriteOffset)
        .with("WriteOffsetBytes", std::to_string(offset))
        .with("ObjectSize", std::to_string(size));
  }
  if (condition.if_none_match_any && base)
    return Error(Code::kPreconditionFailed).with("Condition", "If-None-Match");
  if (condition.if_match) {
    if (!base) return Error(Code::kNoSuchKey).with("Key", std::string(key));
    if (!etag_matches(*condition.if_match, base->etag))
      return Error(Code::kPreconditionFailed).with("Condition", "If-Match");
  }
  AppendPlan plan;
  plan.offset = offset;
  plan.body_algorithm = body_algorithm;
  if (!base) return plan;
  if (!requested.user_metadata.empty()) {
    return Error(Code::kInvalidRequest,
                 "Cannot specify both a write offset value and user-defined object metadata for "
                 "existing objects.");
  }
  plan.parts = base->parts_count == 0 ? 2 : base->parts_count + 1;
  if (plan.parts > kPartNumberMax) return Error(Code::kTooManyParts);
  const auto kept = stored_algorithm(base->checksums);
  if (body_algorithm && kept && *body_algorithm != *kept) {
    return Error(Code::kInvalidRequest,
                 "Checksum Type mismatch occurred, expected checksum Type: " +
                     lower(aws::checksum_name(*kept)) +
                     ", actual checksum Type: " + lower(aws::checksum_name(*body_algorithm)) + ".");
  }
  plan.extended_crc = extendable_crc(base->checksums);
  if (!plan.body_algorithm && plan.extended_crc) plan.body_algorithm = plan.extended_crc->first;
  return plan;
}

AppendedVersion appended_version(const std::optional<storage::ObjectRecord>& base,
                                 storage::ObjectSpec requested, const AppendPlan& plan,
                                 const AppendedData& data) {
  AppendedVersion version;
  if (!base) {
    version.spec = std::move(requested);
    version.spec.etag = data.etag;
    if (data.checksum) {
      set_checksum(version.spec.checksums, data.checksum->first, data.checksum->second);
      version.spec.checksums.type = "FULL_OBJECT";
    }
    return version;
  }
  version.spec.headers = base->headers;
  version.spec.user_metadata = base->user_metadata;
  if (const auto& crc = plan.extended_crc) {
    set_checksum(version.spec.checksums, crc->first, aws::crc_to_base64(crc->first, data.crc));
    version.spec.checksums.type = "FULL_OBJECT";
  }
  version.spec.etag = aws::appended_etag(base->etag, data.digest, plan.parts);
  if (base->parts_count == 0) version.new_parts.push_back({1, 0, plan.offset, std::nullopt});
  std::optional<std::string> part_checksum;
  if (data.checksum) part_checksum = data.checksum->second;
  version.new_parts.push_back({plan.parts, plan.offset, data.bytes, part_checksum});
  return version;
}

}  // namespace hots3::s3
