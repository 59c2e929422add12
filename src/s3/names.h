#pragma once

// Private to src/s3: bucket names, keys and version ids as S3 accepts them.

#include "errors.h"
#include "request.h"

#include <cstdint>
#include <optional>
#include <string_view>

namespace hots3::s3 {

inline constexpr std::uint64_t kKeyBytesMax = 1024;

// Amazon S3's rules for general purpose bucket names.
bool valid_bucket_name(std::string_view name);

// A directory bucket's name, base--zone--x-s3 (S3 Express One Zone's rules: 3 to 63 characters
// of lowercase letters, digits and '-', no dots, the suffix required): its zone, or nullopt when
// `name` is not one. hots3 takes any zone as its own.
std::optional<std::string_view> directory_bucket_zone(std::string_view name);

// Whether the bucket `name`, which exists, is a directory bucket: only a directory bucket's name
// could be made with this suffix (cheaper than directory_bucket_zone, for the request path).
inline bool is_directory_bucket(std::string_view name) { return name.ends_with("--x-s3"); }

// The storage class of every object in the bucket `name` (which exists): EXPRESS_ONEZONE in a
// directory bucket (the only class S3 Express has), STANDARD in the others.
std::string_view storage_class(std::string_view name);

// Keys: UTF-8 without NUL, 1 to 1024 bytes. Errors: KeyTooLongError, InvalidArgument.
std::optional<Error> validate_key(std::string_view key);

// ?versionId on an object read: hots3 keeps no versions, so "null" (the version of every object
// in a bucket that never had versioning) is the current object and any other id names a version
// that does not exist. Errors: InvalidArgument (empty), NoSuchVersion.
std::optional<Error> check_version_id(const Request& r);

}  // namespace hots3::s3
