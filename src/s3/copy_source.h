#pragma once

// Private to src/s3: the source of a copy.

#include "errors.h"

#include "hots3/config/config.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace hots3::s3 {

// "bucket/key" or "/bucket/key" (URL-encoded) → (bucket, key). Errors: InvalidArgument.
std::variant<std::pair<std::string, std::string>, Error> parse_copy_source(std::string_view header);

// CopyObject and UploadPartCopy copy at most what a single PUT may write (S3: 5 GiB, from
// single_put_max). Errors: InvalidRequest.
std::optional<Error> check_copy_size(std::uint64_t bytes, const config::S3Config& config);

}  // namespace hots3::s3
