// What a write says about the object it makes: content headers, user metadata, checksums.

#include "object_spec.h"

#include "names.h"

#include "hots3/common/hex.h"
#include "hots3/common/text.h"

namespace hots3::s3 {

std::variant<storage::ObjectSpec, Error> object_spec(const Request& r,
                                                     const config::S3Config& config) {
  for (std::string_view h :
       {"x-amz-server-side-encryption", "x-amz-server-side-encryption-customer-algorithm",
        "x-amz-server-side-encryption-aws-kms-key-id", "x-amz-tagging", "x-amz-object-lock-mode",
        "x-amz-object-lock-retain-until-date", "x-amz-object-lock-legal-hold",
        "x-amz-website-redirect-location", "x-amz-grant-read", "x-amz-grant-write",
        "x-amz-grant-full-control", "x-amz-grant-read-acp", "x-amz-grant-write-acp"}) {
    if (r.header(h))
      return Error(Code::kNotImplemented,
                   "The header " + std::string(h) + " is not supported by hots3.");
  }
  if (auto acl = r.header("x-amz-acl");
      acl && *acl != "private" && *acl != "bucket-owner-full-control") {
    return Error(Code::kNotImplemented, "Only the private canned ACL is supported.");
  }
  if (auto cls = r.header("x-amz-storage-class"); cls && *cls != storage_class(r.bucket)) {
    // A directory bucket has one class (S3 Express's); hots3 has no other for the rest.
    if (is_directory_bucket(r.bucket))
      return Error(Code::kInvalidStorageClass, "A directory bucket stores EXPRESS_ONEZONE only.");
    return Error(Code::kNotImplemented, "Only the STANDARD storage class is supported.");
  }
  storage::ObjectSpec spec;
  auto copy_header = [&](std::string_view name, std::optional<std::string>& out) {
    if (auto v = r.header(name)) out = std::string(*v);
  };
  copy_header("content-type", spec.headers.content_type);
  copy_header("content-disposition", spec.headers.content_disposition);
  copy_header("content-language", spec.headers.content_language);
  copy_header("cache-control", spec.headers.cache_control);
  copy_header("expires", spec.headers.expires);
  if (auto enc = r.header("content-encoding")) {
    // aws-chunked is transfer framing, not a property of the object: it leaves the list, and
    // the rest stays as the client wrote it ("deflate, gzip" stays "deflate, gzip").
    std::string kept;
    std::size_t at = 0;
    while (at <= enc->size()) {
      const auto comma = enc->find(',', at);
      const std::string_view item =
          enc->substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
      if (!iequals(trim(item), "aws-chunked") && !trim(item).empty()) {
        if (!kept.empty()) kept += ",";
        kept += kept.empty() ? trim(item) : item;
      }
      if (comma == std::string_view::npos) break;
      at = comma + 1;
    }
    if (!kept.empty()) spec.headers.content_encoding = kept;
  }
  if (!spec.headers.content_type) spec.headers.content_type = "binary/octet-stream";
  std::uint64_t metadata_bytes = 0;
  for (const auto& h : r.head.headers) {
    if (h.name.size() > 11 && iequals(h.name.substr(0, 11), "x-amz-meta-")) {
      std::string name(h.name.substr(11));
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      metadata_bytes += name.size() + h.value.size();
      spec.user_metadata.emplace_back(std::move(name), std::string(h.value));
    }
  }
  if (metadata_bytes > config.metadata_max_bytes) {
    return Error(Code::kMetadataTooLarge)
        .with("Size", std::to_string(metadata_bytes))
        .with("MaxSizeAllowed", std::to_string(config.metadata_max_bytes));
  }
  return spec;
}

std::vector<StoredChecksum> stored_checksums(const storage::ChecksumSet& set) {
  std::vector<StoredChecksum> out;
  auto add = [&](const std::optional<std::string>& v, const char* header, const char* xml) {
    if (v) out.push_back({header, xml, *v});
  };
  add(set.crc32, "x-amz-checksum-crc32", "ChecksumCRC32");
  add(set.crc32c, "x-amz-checksum-crc32c", "ChecksumCRC32C");
  add(set.crc64nvme, "x-amz-checksum-crc64nvme", "ChecksumCRC64NVME");
  add(set.sha1, "x-amz-checksum-sha1", "ChecksumSHA1");
  add(set.sha256, "x-amz-checksum-sha256", "ChecksumSHA256");
  return out;
}

void set_checksum(storage::ChecksumSet& set, aws::ChecksumAlgorithm algorithm, std::string value) {
  switch (algorithm) {
    case aws::ChecksumAlgorithm::kCrc32:
      set.crc32 = std::move(value);
      break;
    case aws::ChecksumAlgorithm::kCrc32c:
      set.crc32c = std::move(value);
      break;
    case aws::ChecksumAlgorithm::kCrc64Nvme:
      set.crc64nvme = std::move(value);
      break;
    case aws::ChecksumAlgorithm::kSha1:
      set.sha1 = std::move(value);
      break;
    case aws::ChecksumAlgorithm::kSha256:
      set.sha256 = std::move(value);
      break;
  }
}

std::optional<std::string> checksum_of(const storage::ChecksumSet& set, aws::ChecksumAlgorithm a) {
  switch (a) {
    case aws::ChecksumAlgorithm::kCrc32:
      return set.crc32;
    case aws::ChecksumAlgorithm::kCrc32c:
      return set.crc32c;
    case aws::ChecksumAlgorithm::kCrc64Nvme:
      return set.crc64nvme;
    case aws::ChecksumAlgorithm::kSha1:
      return set.sha1;
    case aws::ChecksumAlgorithm::kSha256:
      return set.sha256;
  }
  return std::nullopt;
}

std::string data_etag(const storage::ObjectWriter& writer) { return to_hex(writer.digest()); }

}  // namespace hots3::s3
