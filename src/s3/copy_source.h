#pragma once

// Private to src/s3: the source of a copy: naming it, opening it, copying from it.

#include "errors.h"
#include "request.h"

#include "hots3/aws/checksum.h"
#include "hots3/config/config.h"
#include "hots3/storage/object_store.h"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>
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

// UploadPartCopy's x-amz-copy-source-range: "bytes=first-last" only (no suffix, no open end),
// inside a source of `size` bytes (S3 refuses a range past the end rather than cutting it short,
// as GET does) → (offset, length). Errors: InvalidArgument.
std::variant<std::pair<std::uint64_t, std::uint64_t>, Error> parse_copy_source_range(
    std::string_view header, std::uint64_t size);

// The source bucket, which the caller must be allowed to read. Errors: NoSuchBucket,
// AccessDenied.
std::variant<storage::BucketRecord, Error> copy_source_bucket(storage::ObjectStore& store,
                                                              const Request& r,
                                                              const std::string& name);

// The source object, opened, its x-amz-copy-source-if-* conditions checked. Errors: NoSuchKey,
// PreconditionFailed.
boost::asio::awaitable<std::variant<std::unique_ptr<storage::ObjectReader>, Error>>
open_copy_source(storage::ObjectStore& store, const Request& r, std::int64_t bucket_id,
                 const std::string& key);

// Copies what `reader` yields into `writer` and finishes it; the checksummer, if given, sees
// every byte.
boost::asio::awaitable<std::optional<Error>> copy_data(storage::ObjectReader& reader,
                                                       storage::ObjectWriter& writer,
                                                       aws::Checksummer* checksummer = nullptr);

}  // namespace hots3::s3
