// What S3 accepts as bucket names, keys and version ids.

#include "names.h"

#include "hots3/common/text.h"

namespace hots3::s3 {

namespace {

bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// The prefixes S3 keeps for itself, in names of either kind of bucket.
bool reserved_prefix(std::string_view name) {
  for (std::string_view prefix : {"xn--", "sthree-", "amzn-s3-demo-"}) {
    if (name.starts_with(prefix)) return true;
  }
  return false;
}

}  // namespace

bool valid_bucket_name(std::string_view name) {
  // Amazon S3's rules for general purpose buckets.
  if (name.size() < 3 || name.size() > 63) return false;
  for (char c : name) {
    if (!lower_alnum(c) && c != '.' && c != '-') return false;
  }
  if (!lower_alnum(name.front()) || !lower_alnum(name.back())) return false;
  if (name.find("..") != std::string_view::npos) return false;
  if (reserved_prefix(name)) return false;
  for (std::string_view suffix : {"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"}) {
    if (name.ends_with(suffix)) return false;
  }
  // Not an IPv4 address.
  int dots = 0;
  bool digits_only = true;
  for (char c : name) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      digits_only = false;
    }
  }
  return !(digits_only && dots == 3);
}

std::optional<std::string_view> directory_bucket_zone(std::string_view name) {
  constexpr std::string_view kSuffix = "--x-s3";
  if (name.size() < 3 || name.size() > 63 || !name.ends_with(kSuffix)) return std::nullopt;
  for (char c : name) {
    if (!lower_alnum(c) && c != '-') return std::nullopt;
  }
  if (reserved_prefix(name)) return std::nullopt;
  const std::string_view rest = name.substr(0, name.size() - kSuffix.size());
  const std::size_t split = rest.rfind("--");
  if (split == std::string_view::npos || split == 0) return std::nullopt;
  const std::string_view base = rest.substr(0, split);
  const std::string_view zone = rest.substr(split + 2);
  if (zone.empty() || !lower_alnum(base.front()) || !lower_alnum(base.back()) ||
      !lower_alnum(zone.front()) || !lower_alnum(zone.back())) {
    return std::nullopt;
  }
  return zone;
}

std::optional<Error> validate_key(std::string_view key) {
  if (key.size() > kKeyBytesMax)
    return Error(Code::kKeyTooLong)
        .with("Size", std::to_string(key.size()))
        .with("MaxSizeAllowed", "1024");
  if (!valid_utf8(key)) return Error(Code::kInvalidArgument, "Object key is not valid UTF-8.");
  // NUL ends a C string: a key holding one would be cut short wherever a library takes one, and
  // no XML 1.0 document can carry it, even as a character reference.
  if (key.find('\0') != std::string_view::npos)
    return Error(Code::kInvalidArgument, "Object key must not contain NUL.");
  return std::nullopt;
}

std::optional<Error> check_version_id(const Request& r) {
  const std::string* version = r.param("versionId");
  if (version == nullptr || *version == "null") return std::nullopt;
  if (version->empty()) {
    return Error(Code::kInvalidArgument, "Version id cannot be the empty string")
        .with("ArgumentName", "versionId")
        .with("ArgumentValue", "");
  }
  // S3 answers 400 for an id that is not of its own making and 404 for one that is; hots3 makes
  // none, so every id is one it does not have.
  return Error(Code::kNoSuchVersion).with("Key", r.key).with("VersionId", *version);
}

std::string_view storage_class(std::string_view name) {
  return is_directory_bucket(name) ? "EXPRESS_ONEZONE" : "STANDARD";
}

}  // namespace hots3::s3
