// x-amz-copy-source of CopyObject and UploadPartCopy (and x-amz-rename-source of RenameObject).

#include "copy_source.h"

#include "authorization.h"
#include "conditions.h"
#include "range.h"

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

std::variant<std::pair<std::uint64_t, std::uint64_t>, Error> parse_copy_source_range(
    std::string_view header, std::uint64_t size) {
  auto invalid = [header](std::string message) {
    return Error(Code::kInvalidArgument, std::move(message))
        .with("ArgumentName", "x-amz-copy-source-range")
        .with("ArgumentValue", std::string(header));
  };
  const auto parsed = parse_byte_range(header);
  if (!parsed || !parsed->first || !parsed->last) {
    return invalid(
        "The x-amz-copy-source-range value must be of the form bytes=first-last where first and "
        "last are the zero-based offsets of the first and last bytes to copy");
  }
  if (*parsed->last >= size)
    return invalid("Range specified is not valid for source object of size: " +
                   std::to_string(size));
  return std::pair{*parsed->first, *parsed->last - *parsed->first + 1};
}

std::variant<storage::BucketRecord, Error> copy_source_bucket(storage::ObjectStore& store,
                                                              const Request& r,
                                                              const std::string& name) {
  auto found = store.find_bucket(name);
  if (!found) return from_errc(found.error());
  if (!*found) return Error(Code::kNoSuchBucket).with("BucketName", name);
  if (!allowed(*r.auth.user, **found, Access::kRead)) return Error(Code::kAccessDenied);
  return std::move(**found);
}

boost::asio::awaitable<std::variant<std::unique_ptr<storage::ObjectReader>, Error>>
open_copy_source(storage::ObjectStore& store, const Request& r, std::int64_t bucket_id,
                 const std::string& key) {
  auto opened = co_await store.open_reader(bucket_id, key);
  if (!opened) {
    if (opened.error() == errc::kNotFound) co_return Error(Code::kNoSuchKey).with("Key", key);
    co_return from_errc(opened.error());
  }
  if (auto e = read_conditions(r, (*opened)->object(), true)) co_return std::move(*e);
  co_return std::move(*opened);
}

boost::asio::awaitable<std::optional<Error>> copy_data(storage::ObjectReader& reader,
                                                       storage::ObjectWriter& writer,
                                                       aws::Checksummer* checksummer) {
  for (;;) {
    auto piece = co_await reader.next();
    if (!piece) co_return from_errc(piece.error());
    if (piece->empty()) break;
    if (checksummer != nullptr) checksummer->update(*piece);
    if (auto w = co_await writer.write(*piece); !w) co_return from_errc(w.error());
  }
  if (auto f = co_await writer.finish(); !f) co_return from_errc(f.error());
  co_return std::nullopt;
}

}  // namespace hots3::s3
