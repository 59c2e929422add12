// x-amz-copy-source of CopyObject and UploadPartCopy (and x-amz-rename-source of RenameObject).

#include "copy_source.h"

#include "hots3/aws/sigv4.h"

namespace hots3::s3 {

std::variant<std::pair<std::string, std::string>, Error> parse_copy_source(
    std::string_view header) {
  std::string_view source = header;
  if (const auto q = source.find('?'); q != std::string_view::npos) {
    const std::string_view version = source.substr(q + 1);
    if (version != "versionId=null" && !version.empty()) {
      // hots3 keeps no versions but the current ("null") one.
      return Error(Code::kNoSuchVersion)
          .with("VersionId", std::string(version.substr(version.find('=') + 1)));
    }
    source = source.substr(0, q);
  }
  auto decoded = aws::percent_decode(source);
  if (!decoded)
    return Error(Code::kInvalidArgument, "Invalid copy source encoding")
        .with("ArgumentName", "x-amz-copy-source");
  std::string_view s = *decoded;
  if (!s.empty() && s.front() == '/') s.remove_prefix(1);
  const auto slash = s.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 == s.size()) {
    return Error(Code::kInvalidArgument,
                 "Copy Source must mention the source bucket and key: sourcebucket/sourcekey")
        .with("ArgumentName", "x-amz-copy-source");
  }
  return std::pair{std::string(s.substr(0, slash)), std::string(s.substr(slash + 1))};
}

std::optional<Error> check_copy_size(std::uint64_t bytes, const config::S3Config& config) {
  if (bytes <= config.single_put_max_bytes) return std::nullopt;
  return Error(
      Code::kInvalidRequest,
      "The specified copy source is larger than the maximum allowable size for a copy source: " +
          std::to_string(config.single_put_max_bytes));
}

}  // namespace hots3::s3
