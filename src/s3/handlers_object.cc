// Object operations: PutObject, GetObject/HeadObject, DeleteObject, DeleteObjects, CopyObject,
// and the object sub-resources (acl, tagging).

#include "body.h"
#include "range.h"
#include "request_xml.h"
#include "s3_xml.h"
#include "service.h"
#include "shared.h"
#include "time_format.h"

#include "hots3/common/logging.h"
#include "hots3/common/text.h"

#include <charconv>
#include <cstring>

namespace hots3::s3 {

// ---- shared helpers -------------------------------------------------------------------------

std::string quoted(std::string_view etag) { return "\"" + std::string(etag) + "\""; }

std::string unquoted(std::string_view etag) {
  std::string_view e = etag;
  while (!e.empty() && (e.front() == ' ' || e.front() == '\t')) e.remove_prefix(1);
  while (!e.empty() && (e.back() == ' ' || e.back() == '\t')) e.remove_suffix(1);
  if (e.starts_with("W/")) e.remove_prefix(2);
  if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
  return std::string(e);
}

namespace {

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // the continuation bytes must all be there
    for (std::size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

}  // namespace

bool etag_matches(std::string_view list, std::string_view etag) {
  std::size_t at = 0;
  while (at <= list.size()) {
    const auto comma = list.find(',', at);
    const std::string item = unquoted(
        list.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at));
    if (item == "*" || item == etag) return true;
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return false;
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
  if (auto cls = r.header("x-amz-storage-class"); cls && *cls != "STANDARD") {
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
    // aws-chunked is transfer framing, not a property of the object; drop it from the list.
    std::string kept;
    std::size_t at = 0;
    while (at <= enc->size()) {
      const auto comma = enc->find(',', at);
      std::string_view item =
          enc->substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
      if (!item.empty() && !iequals(item, "aws-chunked")) {
        if (!kept.empty()) kept += ",";
        kept += item;
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

std::variant<storage::WriteCondition, Error> write_condition(const Request& r) {
  storage::WriteCondition c;
  if (auto none = r.header("if-none-match")) {
    if (unquoted(*none) != "*")
      return Error(Code::kNotImplemented, "If-None-Match on writes supports only \"*\".");
    c.if_none_match_any = true;
  }
  if (auto match = r.header("if-match")) c.if_match = unquoted(*match);
  return c;
}

std::optional<Error> read_conditions(const Request& r, const storage::ObjectRecord& object,
                                     bool copy_source) {
  const std::string prefix = copy_source ? "x-amz-copy-source-" : "";
  const std::int64_t modified_s = object.created_ms / 1000;
  const auto if_match = r.header(prefix + "if-match");
  const auto if_none_match = r.header(prefix + "if-none-match");
  const auto if_unmodified = r.header(prefix + "if-unmodified-since");
  const auto if_modified = r.header(prefix + "if-modified-since");
  const std::string condition_prefix = copy_source ? "x-amz-copy-source-" : "";
  if (if_match) {
    if (!etag_matches(*if_match, object.etag))
      return Error(Code::kPreconditionFailed).with("Condition", condition_prefix + "If-Match");
  } else if (if_unmodified) {
    if (auto t = parse_http_date(*if_unmodified); t && modified_s > *t / 1000) {
      return Error(Code::kPreconditionFailed)
          .with("Condition", condition_prefix + "If-Unmodified-Since");
    }
  }
  if (if_none_match) {
    if (etag_matches(*if_none_match, object.etag)) {
      if (copy_source)
        return Error(Code::kPreconditionFailed)
            .with("Condition", "x-amz-copy-source-If-None-Match");
      return Error(Code::kNotModified);
    }
  } else if (if_modified) {
    if (auto t = parse_http_date(*if_modified); t && modified_s <= *t / 1000) {
      if (copy_source)
        return Error(Code::kPreconditionFailed)
            .with("Condition", "x-amz-copy-source-If-Modified-Since");
      return Error(Code::kNotModified);
    }
  }
  return std::nullopt;
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

// Streams a body into a new writer. Returns the writer (finished) or sends the error.
asio::awaitable<std::unique_ptr<storage::ObjectWriter>> receive(Service& s, Request& r, Body& body,
                                                                bool for_part,
                                                                std::uint64_t max_bytes) {
  if (body.failed()) {
    co_await s.send_error(r, body.error());
    co_return nullptr;
  }
  const auto declared = body.declared_length();
  if (!declared && r.head.method == http::Method::kPut && !r.head.chunked) {
    co_await s.send_error(r, Code::kMissingContentLength);
    co_return nullptr;
  }
  if (declared && *declared > max_bytes) {
    co_await s.send_error(r, Error(Code::kEntityTooLarge)
                                 .with("ProposedSize", std::to_string(*declared))
                                 .with("MaxSizeAllowed", std::to_string(max_bytes)));
    co_return nullptr;
  }
  // Reserved before the body is read: a full device answers before "100 Continue".
  auto writer = co_await s.store().create_writer(declared, for_part);
  if (!writer) {
    co_await s.send_error(r, from_errc(writer.error()));
    co_return nullptr;
  }
  for (;;) {
    auto piece = co_await body.next();
    if (!piece) {
      co_await s.send_error(r, body.error());
      co_return nullptr;
    }
    if (piece->empty()) break;
    if (body.payload_bytes() > max_bytes) {
      co_await s.send_error(r, Code::kEntityTooLarge);
      co_return nullptr;
    }
    if (auto w = co_await (*writer)->write(*piece); !w) {
      co_await s.send_error(r, from_errc(w.error()));
      co_return nullptr;
    }
  }
  if (auto f = co_await (*writer)->finish(); !f) {
    co_await s.send_error(r, from_errc(f.error()));
    co_return nullptr;
  }
  co_return std::move(*writer);
}

// ---- PutObject ------------------------------------------------------------------------------

asio::awaitable<void> put_object(Service& s, Request& r) {
  if (auto e = validate_key(r.key)) co_return co_await s.send_error(r, std::move(*e));
  auto bucket = co_await s.bucket_for(r, Access::kWrite);
  if (!bucket) co_return;
  if (r.header("x-amz-write-offset-bytes"))
    co_return co_await append_object(s, r, std::move(*bucket));
  auto spec = object_spec(r, s.config());
  if (auto* e = std::get_if<Error>(&spec)) co_return co_await s.send_error(r, std::move(*e));
  auto condition = write_condition(r);
  if (auto* e = std::get_if<Error>(&condition)) co_return co_await s.send_error(r, std::move(*e));
  auto checksums = read_checksum_request(r);
  if (auto* e = std::get_if<Error>(&checksums)) co_return co_await s.send_error(r, std::move(*e));
  const bool md5_here =
      !s.store().etag_is_md5() && std::get<ChecksumRequest>(checksums).content_md5.has_value();
  Body body(r, std::get<ChecksumRequest>(std::move(checksums)), DefaultCrc64::kWhenNoneAsked,
            md5_here);
  auto writer = co_await receive(s, r, body, false, s.config().single_put_max_bytes);
  if (!writer) co_return;
  std::optional<std::array<std::uint8_t, 16>> md5;
  if (s.store().etag_is_md5()) md5 = writer->md5();
  if (auto e = body.verify(md5)) co_return co_await s.send_error(r, std::move(*e));
  storage::ObjectSpec object = std::get<storage::ObjectSpec>(std::move(spec));
  if (const auto& c = body.checksum()) {
    set_checksum(object.checksums, c->first, c->second);
    object.checksums.type = "FULL_OBJECT";
  }
  auto committed =
      co_await s.store().commit_object(std::move(writer), *bucket, r.key, std::move(object),
                                       std::get<storage::WriteCondition>(condition));
  if (!committed) {
    if (committed.error() == errc::kNotFound) {
      // If-Match without an object, or the bucket went away meanwhile.
      co_return co_await s.send_error(
          r, std::get<storage::WriteCondition>(condition).if_match
                 ? Error(Code::kNoSuchKey).with("Key", r.key)
                 : Error(Code::kNoSuchBucket).with("BucketName", r.bucket));
    }
    co_return co_await s.send_error(r, from_errc(committed.error()));
  }
  http::Response head = s.response(r, 200);
  head.add("ETag", quoted(committed->etag));
  for (const auto& c : stored_checksums(committed->checksums)) head.add(c.header, c.value);
  if (committed->checksums.type) head.add("x-amz-checksum-type", *committed->checksums.type);
  co_await s.send_empty(r, 200, std::move(head));
}

// ---- GetObject / HeadObject -----------------------------------------------------------------

asio::awaitable<void> get_object(Service& s, Request& r, bool head_only) {
  auto bucket = co_await s.bucket_for(r, Access::kRead);
  if (!bucket) co_return;
  if (auto e = check_version_id(r)) co_return co_await s.send_error(r, std::move(*e));
  // HEAD needs the record only: from the metadata cache, without a small object's bytes (and
  // without a reader, which would load them).
  std::unique_ptr<storage::ObjectReader> reader;
  std::shared_ptr<const storage::ObjectRecord> record;
  if (head_only) {
    auto found = s.store().head(bucket->id, r.key);
    if (!found) co_return co_await s.send_error(r, from_errc(found.error()));
    record = std::move(*found);
  } else {
    auto opened = co_await s.store().open_reader(bucket->id, r.key);
    if (!opened && opened.error() != errc::kNotFound)
      co_return co_await s.send_error(r, from_errc(opened.error()));
    if (opened) reader = std::move(*opened);
  }
  if (!reader && !record)
    co_return co_await s.send_error(r, Error(Code::kNoSuchKey).with("Key", r.key));
  const storage::ObjectRecord& object = reader ? reader->object() : *record;
  if (auto e = read_conditions(r, object, false)) {
    if (e->code == Code::kNotModified) {
      http::Response head = s.response(r, 304);
      head.add("ETag", quoted(object.etag));
      head.add("Last-Modified", http_date(object.created_ms));
      co_return co_await s.send_empty(r, 304, std::move(head));
    }
    co_return co_await s.send_error(r, std::move(*e));
  }

  // What to send: a part, a range, or everything.
  std::uint64_t offset = 0;
  std::uint64_t length = object.size_bytes;
  bool partial = false;
  std::optional<std::uint32_t> part_number;
  std::optional<std::string> part_checksum;  // of the upload's algorithm, when the part has one
  if (const std::string* pn = r.param("partNumber")) {
    std::uint32_t n = 0;
    auto [end, ec] = std::from_chars(pn->data(), pn->data() + pn->size(), n);
    if (ec != std::errc{} || end != pn->data() + pn->size() || n < 1 || n > kPartNumberMax) {
      co_return co_await s.send_error(
          r, Error(Code::kInvalidArgument,
                   "Part number must be an integer between 1 and 10000, inclusive")
                 .with("ArgumentName", "partNumber")
                 .with("ArgumentValue", *pn));
    }
    if (r.header("range"))
      co_return co_await s.send_error(
          r, Error(Code::kInvalidRequest,
                   "Cannot specify both Range header and partNumber query parameter"));
    part_number = n;
    if (object.parts_count == 0) {
      if (n != 1) co_return co_await s.send_error(r, Code::kInvalidPartNumber);
    } else {
      auto part = s.store().object_part(object.id, n);
      if (!part) co_return co_await s.send_error(r, from_errc(part.error()));
      if (!*part) co_return co_await s.send_error(r, Code::kInvalidPartNumber);
      offset = (*part)->offset_bytes;
      length = (*part)->size_bytes;
      partial = true;
      part_checksum = (*part)->checksum;
    }
  } else if (auto range = r.header("range")) {
    const RangeResult parsed = parse_range(*range, object.size_bytes);
    if (parsed.kind == RangeResult::Kind::kUnsatisfiable) {
      http::Response head = s.response(r, 416);
      head.add("Content-Range", "bytes */" + std::to_string(object.size_bytes));
      if (head_only) co_return co_await s.send_empty(r, 416, std::move(head));
      head.add("Content-Type", "application/xml");
      Error e = Error(Code::kInvalidRange)
                    .with("RangeRequested", std::string(*range))
                    .with("ActualObjectSize", std::to_string(object.size_bytes));
      co_await r.exchange.respond(std::move(head),
                                  error_body(e, r.resource(), r.head.request_id, s.host_id()));
      co_return;
    }
    if (parsed.kind == RangeResult::Kind::kRange) {
      offset = parsed.offset;
      length = parsed.length;
      partial = true;
    }
  }

  http::Response head = s.response(r, partial ? 206 : 200);
  auto header_or_override = [&](const char* name, const char* param,
                                const std::optional<std::string>& stored) {
    if (const std::string* v = r.param(param)) {
      head.add(name, *v);
    } else if (stored) {
      head.add(name, *stored);
    }
  };
  header_or_override("Content-Type", "response-content-type", object.headers.content_type);
  header_or_override("Content-Language", "response-content-language",
                     object.headers.content_language);
  header_or_override("Expires", "response-expires", object.headers.expires);
  header_or_override("Cache-Control", "response-cache-control", object.headers.cache_control);
  header_or_override("Content-Disposition", "response-content-disposition",
                     object.headers.content_disposition);
  header_or_override("Content-Encoding", "response-content-encoding",
                     object.headers.content_encoding);
  head.add("Last-Modified", http_date(object.created_ms));
  head.add("ETag", quoted(object.etag));
  head.add("Accept-Ranges", "bytes");
  for (const auto& [name, value] : object.user_metadata) head.add("x-amz-meta-" + name, value);
  if (partial && !part_number) {
    head.add("Content-Range", "bytes " + std::to_string(offset) + "-" +
                                  std::to_string(offset + length - 1) + "/" +
                                  std::to_string(object.size_bytes));
  }
  if (part_number) {
    head.add("x-amz-mp-parts-count",
             std::to_string(std::max<std::uint32_t>(object.parts_count, 1)));
    if (partial) {
      head.add("Content-Range", "bytes " + std::to_string(offset) + "-" +
                                    std::to_string(offset + length - 1) + "/" +
                                    std::to_string(object.size_bytes));
    }
  }
  // Checksums for the whole object and for a part that has its own; S3 has none for ranges.
  if (auto mode = r.header("x-amz-checksum-mode"); mode && iequals(*mode, "ENABLED")) {
    const auto stored = stored_checksums(object.checksums);
    if (!partial) {
      for (const auto& c : stored) head.add(c.header, c.value);
      if (object.checksums.type) head.add("x-amz-checksum-type", *object.checksums.type);
    } else if (part_checksum && !stored.empty()) {
      // A multipart object has the one checksum of its upload's algorithm; so has each part.
      head.add(stored.front().header, *part_checksum);
    }
  }
  head.content_length = length;
  if (head_only) co_return co_await s.send_empty(r, head.status, std::move(head));

  reader->set_range(offset, length);
  if (!co_await r.exchange.write_head(std::move(head))) co_return;
  for (;;) {
    auto piece = co_await reader->next();
    if (!piece) {
      // The head is out: all that is left is to cut the body short (the client sees an
      // incomplete response, never wrong bytes).
      log::error("request {}: GET {}/{} failed after {} bytes: {}", r.head.request_id, r.bucket,
                 log::escaped(r.key), offset, piece.error().message());
      break;
    }
    if (piece->empty()) break;
    if (!co_await r.exchange.write_body(*piece)) co_return;
  }
  co_await r.exchange.finish();
}

// ---- DeleteObject / DeleteObjects -------------------------------------------------------------

asio::awaitable<void> delete_object(Service& s, Request& r) {
  auto bucket = co_await s.bucket_for(r, Access::kWrite);
  if (!bucket) co_return;
  if (auto e = check_version_id(r)) co_return co_await s.send_error(r, std::move(*e));
  auto deleted = co_await s.store().delete_object(bucket->id, r.key);
  if (!deleted) co_return co_await s.send_error(r, from_errc(deleted.error()));
  co_await s.send_empty(r, 204, s.response(r, 204));
}

asio::awaitable<void> delete_objects(Service& s, Request& r) {
  auto bucket = co_await s.bucket_for(r, Access::kWrite);
  if (!bucket) co_return;
  auto checksums = read_checksum_request(r);
  if (auto* e = std::get_if<Error>(&checksums)) co_return co_await s.send_error(r, std::move(*e));
  const ChecksumRequest& wanted = std::get<ChecksumRequest>(checksums);
  // S3 wants proof of integrity: Content-MD5, or (2025 SDKs) an x-amz-checksum-* value instead,
  // as a header or a trailer. x-amz-sdk-checksum-algorithm alone names an algorithm but vouches
  // for nothing.
  if (!wanted.content_md5 && !wanted.header_value && !wanted.in_trailer) {
    co_return co_await s.send_error(
        r, Error(Code::kInvalidRequest,
                 "Missing required header for this request: Content-MD5 OR x-amz-checksum-*"));
  }
  const bool md5 = wanted.content_md5.has_value();
  Body body(r, std::get<ChecksumRequest>(std::move(checksums)), DefaultCrc64::kNo, md5);
  auto text = co_await body.read_all(2 * 1024 * 1024);
  if (!text) co_return co_await s.send_error(r, body.error());
  auto parsed = parse_delete_request(*text);
  if (auto* e = std::get_if<Error>(&parsed)) co_return co_await s.send_error(r, std::move(*e));
  const DeleteRequest& request = std::get<DeleteRequest>(parsed);
  XmlWriter xml("DeleteResult");
  for (const auto& [key, version] : request.objects) {
    std::optional<Error> failed = validate_key(key);
    if (!failed && version && *version != "null")
      failed = Error(Code::kNoSuchVersion);  // hots3 keeps none
    if (!failed && key.empty()) failed = Error(Code::kInvalidArgument, "The key is empty.");
    if (!failed) {
      auto deleted = co_await s.store().delete_object(bucket->id, key);
      if (!deleted) failed = from_errc(deleted.error());
    }
    if (failed) {
      xml.open("Error");
      xml.element("Key", key);
      if (version) xml.element("VersionId", *version);
      xml.element("Code", code_name(failed->code));
      xml.element("Message", failed->message.empty() ? default_message(failed->code)
                                                     : std::string_view(failed->message));
      xml.close();
    } else if (!request.quiet) {
      xml.open("Deleted");
      xml.element("Key", key);
      if (version) xml.element("VersionId", *version);
      xml.close();
    }
  }
  co_await s.send_xml(r, 200, xml.finish());
}

// ---- CopyObject -------------------------------------------------------------------------------

asio::awaitable<void> copy_object(Service& s, Request& r) {
  if (auto e = validate_key(r.key)) co_return co_await s.send_error(r, std::move(*e));
  auto source = parse_copy_source(*r.header("x-amz-copy-source"));
  if (auto* e = std::get_if<Error>(&source)) co_return co_await s.send_error(r, std::move(*e));
  const auto [source_bucket_name, source_key] =
      std::get<std::pair<std::string, std::string>>(source);
  auto bucket = co_await s.bucket_for(r, Access::kWrite);
  if (!bucket) co_return;
  auto source_bucket = s.store().find_bucket(source_bucket_name);
  if (!source_bucket) co_return co_await s.send_error(r, from_errc(source_bucket.error()));
  if (!*source_bucket)
    co_return co_await s.send_error(
        r, Error(Code::kNoSuchBucket).with("BucketName", source_bucket_name));
  if (!s.allowed(*r.auth.user, **source_bucket, Access::kRead))
    co_return co_await s.send_error(r, Code::kAccessDenied);

  std::string directive = "COPY";
  if (auto d = r.header("x-amz-metadata-directive")) directive = std::string(*d);
  if (directive != "COPY" && directive != "REPLACE") {
    co_return co_await s.send_error(r, Error(Code::kInvalidArgument, "Unknown metadata directive.")
                                           .with("ArgumentName", "x-amz-metadata-directive"));
  }
  auto spec = object_spec(r, s.config());
  if (auto* e = std::get_if<Error>(&spec)) co_return co_await s.send_error(r, std::move(*e));
  auto condition = write_condition(r);
  if (auto* e = std::get_if<Error>(&condition)) co_return co_await s.send_error(r, std::move(*e));

  auto opened = co_await s.store().open_reader((*source_bucket)->id, source_key);
  if (!opened) {
    if (opened.error() == errc::kNotFound)
      co_return co_await s.send_error(r, Error(Code::kNoSuchKey).with("Key", source_key));
    co_return co_await s.send_error(r, from_errc(opened.error()));
  }
  storage::ObjectReader& reader = **opened;
  const storage::ObjectRecord& src = reader.object();
  if (auto e = read_conditions(r, src, true)) co_return co_await s.send_error(r, std::move(*e));
  // A copy is bounded as a single PUT is (S3: 5 GiB); larger objects copy with UploadPartCopy.
  if (auto e = check_copy_size(src.size_bytes, s.config()))
    co_return co_await s.send_error(r, std::move(*e));

  const bool same = (*source_bucket)->id == bucket->id && source_key == r.key;
  storage::ObjectSpec target;
  if (directive == "REPLACE") {
    target = std::get<storage::ObjectSpec>(std::move(spec));
    target.checksums = src.checksums;  // the data is the same, so are its checksums
  } else {
    target.headers = src.headers;
    target.user_metadata = src.user_metadata;
    target.checksums = src.checksums;
  }
  storage::ObjectRecord result;
  if (same) {
    if (directive != "REPLACE") {
      co_return co_await s.send_error(r, Error(Code::kInvalidRequest,
                                               "This copy request is illegal because it is trying "
                                               "to copy an object to itself without changing the "
                                               "object's metadata, storage class, website redirect "
                                               "location or encryption attributes."));
    }
    // Copy onto itself: the metadata changes, the data stays where it is.
    auto replaced =
        co_await s.store().replace_metadata(bucket->id, r.key, src.etag, std::move(target));
    if (!replaced) co_return co_await s.send_error(r, from_errc(replaced.error()));
    result = std::move(*replaced);
  } else {
    auto writer = co_await s.store().create_writer(src.size_bytes);
    if (!writer) co_return co_await s.send_error(r, from_errc(writer.error()));
    for (;;) {
      auto piece = co_await reader.next();
      if (!piece) co_return co_await s.send_error(r, from_errc(piece.error()));
      if (piece->empty()) break;
      if (auto w = co_await (*writer)->write(*piece); !w)
        co_return co_await s.send_error(r, from_errc(w.error()));
    }
    if (auto f = co_await (*writer)->finish(); !f)
      co_return co_await s.send_error(r, from_errc(f.error()));
    if (src.parts_count > 0)
      target.etag = std::nullopt;  // a copy is a single-part object: MD5 ETag
    auto committed =
        co_await s.store().commit_object(std::move(*writer), *bucket, r.key, std::move(target),
                                         std::get<storage::WriteCondition>(condition));
    if (!committed) {
      if (committed.error() == errc::kNotFound)
        co_return co_await s.send_error(r, Error(Code::kNoSuchKey).with("Key", r.key));
      co_return co_await s.send_error(r, from_errc(committed.error()));
    }
    result = std::move(*committed);
  }
  XmlWriter xml("CopyObjectResult");
  xml.element("LastModified", iso8601(result.created_ms));
  xml.element("ETag", quoted(result.etag));
  for (const auto& c : stored_checksums(result.checksums)) xml.element(c.xml, c.value);
  co_await s.send_xml(r, 200, xml.finish());
}

// ---- object sub-resources ---------------------------------------------------------------------

asio::awaitable<void> object_subresource(Service& s, Request& r) {
  const bool write = r.head.method != http::Method::kGet;
  auto bucket = co_await s.bucket_for(r, write ? Access::kWrite : Access::kRead);
  if (!bucket) co_return;
  if (auto e = check_version_id(r)) co_return co_await s.send_error(r, std::move(*e));
  auto object = s.store().head(bucket->id, r.key);
  if (!object) co_return co_await s.send_error(r, from_errc(object.error()));
  if (!*object) co_return co_await s.send_error(r, Error(Code::kNoSuchKey).with("Key", r.key));
  if (r.has_param("acl")) {
    if (r.head.method == http::Method::kGet) {
      co_return co_await s.send_xml(r, 200, owner_full_control_acl(bucket->owner));
    }
    if (r.head.method == http::Method::kPut) {
      // Setting the ACL hots3 objects have anyway ("owner: full control") is accepted, as a
      // canned header or as the policy GetObjectAcl returned (s3cmd cp copies it over).
      bool owner_only = false;
      if (auto acl = r.header("x-amz-acl"))
        owner_only = (*acl == "private" || *acl == "bucket-owner-full-control");
      if (r.head.has_body()) {
        auto checksums = read_checksum_request(r);
        if (auto* e = std::get_if<Error>(&checksums))
          co_return co_await s.send_error(r, std::move(*e));
        Body body(r, std::get<ChecksumRequest>(std::move(checksums)), DefaultCrc64::kNo, false);
        auto text = co_await body.read_all(64 * 1024);
        if (!text) co_return co_await s.send_error(r, body.error());
        auto parsed = acl_is_owner_full_control(*text, owner_id(bucket->owner));
        if (auto* e = std::get_if<Error>(&parsed))
          co_return co_await s.send_error(r, std::move(*e));
        owner_only = std::get<bool>(parsed);
      }
      if (owner_only) co_return co_await s.send_empty(r, 200, s.response(r, 200));
      co_return co_await s.send_error(
          r, Error(Code::kNotImplemented, "Only the owner-full-control ACL is supported."));
    }
  }
  if (r.has_param("tagging") && r.head.method == http::Method::kGet) {
    // hots3 objects carry no tags: the empty tag set is the truth.
    XmlWriter xml("Tagging");
    xml.open("TagSet");
    xml.close();
    co_return co_await s.send_xml(r, 200, xml.finish());
  }
  co_await s.send_error(
      r, Error(Code::kNotImplemented, "This object sub-resource is not supported by hots3."));
}

}  // namespace hots3::s3
