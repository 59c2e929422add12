// What S3 Express One Zone offers beyond the S3 standard, for the checkpoint path: RenameObject
// (an atomic rename in one metadata transaction, instead of copy + delete) and appends
// (PutObject with x-amz-write-offset-bytes, for shards and logs written in pieces).

#include "acl.h"
#include "body.h"
#include "conditions.h"
#include "copy_source.h"
#include "multipart_rules.h"
#include "names.h"
#include "object_spec.h"
#include "service.h"
#include "time_format.h"

#include "hots3/common/digest.h"
#include "hots3/common/hex.h"
#include "hots3/common/text.h"

#include <cctype>
#include <charconv>

namespace hots3::s3 {
namespace {

// ---- preconditions of a rename ------------------------------------------------------------
//
// Both sides in RFC 9110's order (If-Match before If-Unmodified-Since, If-None-Match before
// If-Modified-Since); a rename is a write, so every failed condition is 412, never 304.

struct Conditions {
  std::optional<std::string> if_match;
  std::optional<std::string> if_none_match;
  std::optional<std::int64_t> if_modified_since_ms;
  std::optional<std::int64_t> if_unmodified_since_ms;
  // The header names, for the error's Condition element.
  std::string prefix;
};

Conditions conditions_of(const Request& r, std::string prefix) {
  Conditions c;
  auto text = [&](const char* name) -> std::optional<std::string> {
    if (auto v = r.header(prefix + name)) return std::string(*v);
    return std::nullopt;
  };
  auto date = [&](const char* name) -> std::optional<std::int64_t> {
    // An unparsable date is ignored, as RFC 9110 (and S3, for GET) has it.
    if (auto v = r.header(prefix + name)) return parse_http_date(*v);
    return std::nullopt;
  };
  c.if_match = text("if-match");
  c.if_none_match = text("if-none-match");
  c.if_modified_since_ms = date("if-modified-since");
  c.if_unmodified_since_ms = date("if-unmodified-since");
  c.prefix = std::move(prefix);
  return c;
}

// nullopt when `object` (nullopt: there is none) satisfies the conditions. If-Match and
// If-Modified-Since need an object ("renames the object if the destination exists and ..."),
// If-Unmodified-Since and If-None-Match hold without one.
std::optional<Error> check(const Conditions& c,
                           const std::optional<storage::ObjectRecord>& object) {
  auto failed = [&](const char* name) {
    return Error(Code::kPreconditionFailed).with("Condition", c.prefix + name);
  };
  const std::optional<std::int64_t> modified_s =
      object ? std::optional<std::int64_t>(object->created_ms / 1000) : std::nullopt;
  if (c.if_match) {
    if (!object || !etag_matches(*c.if_match, object->etag)) return failed("If-Match");
  } else if (c.if_unmodified_since_ms && modified_s &&
             *modified_s > *c.if_unmodified_since_ms / 1000) {
    return failed("If-Unmodified-Since");
  }
  if (c.if_none_match) {
    if (object && etag_matches(*c.if_none_match, object->etag)) return failed("If-None-Match");
  } else if (c.if_modified_since_ms &&
             (!modified_s || *modified_s <= *c.if_modified_since_ms / 1000)) {
    return failed("If-Modified-Since");
  }
  return std::nullopt;
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

bool valid_client_token(std::string_view token) {
  return !token.empty() && token.size() <= 64 &&
         std::all_of(token.begin(), token.end(), [](char c) { return c >= 33 && c <= 126; });
}

}  // namespace

// ---- RenameObject ---------------------------------------------------------------------------

asio::awaitable<void> rename_object(Service& s, Request& r) {
  if (auto e = validate_key(r.key)) co_return co_await s.send_error(r, std::move(*e));
  auto header = r.header("x-amz-rename-source");
  if (!header || header->empty()) {
    co_return co_await s.send_error(
        r, Error(Code::kInvalidRequest,
                 "Missing required header for this request: x-amz-rename-source"));
  }
  auto source = parse_copy_source(*header);
  if (auto* e = std::get_if<Error>(&source)) {
    Error error = std::move(*e);
    for (auto& [name, value] : error.details) {
      if (name == "ArgumentName") value = "x-amz-rename-source";
    }
    if (error.code == Code::kInvalidArgument)
      error.message = "Rename Source must mention the bucket and the key: /bucket/key";
    co_return co_await s.send_error(r, std::move(error));
  }
  const auto [source_bucket, source_key] =
      std::get<std::pair<std::string, std::string>>(std::move(source));
  if (auto e = validate_key(source_key)) co_return co_await s.send_error(r, std::move(*e));
  auto bucket = co_await s.bucket_for(r, Access::kWrite);
  if (!bucket) co_return;
  if (source_bucket != bucket->name) {
    co_return co_await s.send_error(
        r, Error(Code::kInvalidRequest,
                 "The source and the destination of a rename must be in the same bucket."));
  }
  std::optional<std::string> token;
  if (auto t = r.header("x-amz-client-token")) {
    if (!valid_client_token(*t)) {
      co_return co_await s.send_error(
          r, Error(Code::kInvalidArgument,
                   "x-amz-client-token must be 1 to 64 ASCII characters from 33 to 126.")
                 .with("ArgumentName", "x-amz-client-token"));
    }
    token = std::string(*t);
  }
  const Conditions on_source = conditions_of(r, "x-amz-rename-source-");
  const Conditions on_target = conditions_of(r, "");

  // What a retry with the same token must repeat exactly: the object names and every condition.
  std::string parameters;
  std::string token_scope;
  if (token) {
    token_scope = r.auth.user->name + '/' + std::to_string(bucket->id);
    parameters = source_key + '\0' + r.key;
    for (std::string_view h :
         {"if-match", "if-none-match", "if-modified-since", "if-unmodified-since",
          "x-amz-rename-source-if-match", "x-amz-rename-source-if-none-match",
          "x-amz-rename-source-if-modified-since", "x-amz-rename-source-if-unmodified-since"}) {
      parameters += '\0';
      parameters += r.header(h).value_or("-");
    }
    switch (s.client_tokens().find(token_scope, *token, parameters)) {
      case ClientTokens::Seen::kSame:
        co_return co_await s.send_empty(r, 200, s.response(r, 200));
      case ClientTokens::Seen::kDifferent:
        co_return co_await s.send_error(r, Code::kIdempotencyParameterMismatch);
      case ClientTokens::Seen::kNew:
        break;
    }
  }

  // Decided in the rename's transaction: neither object can change between check and rename.
  std::optional<Error> refused;
  auto decide = [&](const storage::ObjectRecord& from,
                    const std::optional<storage::ObjectRecord>& target) -> Result<void> {
    refused = check(on_source, from);
    if (!refused) refused = check(on_target, target);
    if (refused) return errc::kPreconditionFailed;
    return {};
  };
  auto renamed = co_await s.store().rename_object(bucket->id, source_key, r.key, decide);
  if (!renamed) {
    if (refused) co_return co_await s.send_error(r, std::move(*refused));
    if (renamed.error() == errc::kNotFound)
      co_return co_await s.send_error(r, Error(Code::kNoSuchKey).with("Key", source_key));
    co_return co_await s.send_error(r, from_errc(renamed.error()));
  }
  if (token) s.client_tokens().remember(token_scope, *token, parameters);
  co_await s.send_empty(r, 200, s.response(r, 200));
}

// ---- PutObject with x-amz-write-offset-bytes (append) ----------------------------------------
//
// S3 Express semantics: the offset must be the object's current size (0 creates an object that
// does not exist); each append adds a part (10,000 at most); the object keeps its metadata, and a
// request may not set user metadata on an existing object. hots3 keeps the data it extends where
// it is (the new version re-uses the old version's extents; an inline object is rewritten, it is
// a few KiB), so an append costs what it writes. Two appends at one offset: one wins, the other
// gets InvalidWriteOffset. The ETag of an appended object is opaque, in the multipart form
// "<md5 of the previous ETag and the new data's MD5>-<parts>" (not the MD5 of the data, which
// clients must then not expect); a full-object CRC (CRC32, CRC32C, CRC64NVME) is carried on over
// the new bytes, other checksums end with the first append.

asio::awaitable<void> append_object(Service& s, Request& r, storage::BucketRecord bucket) {
  const std::string_view text = *r.header("x-amz-write-offset-bytes");
  std::uint64_t offset = 0;
  if (auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), offset);
      ec != std::errc{} || end != text.data() + text.size() || text.empty()) {
    co_return co_await s.send_error(
        r, Error(Code::kInvalidArgument, "x-amz-write-offset-bytes must be a non-negative integer.")
               .with("ArgumentName", "x-amz-write-offset-bytes")
               .with("ArgumentValue", std::string(text)));
  }
  auto spec = object_spec(r, s.config());
  if (auto* e = std::get_if<Error>(&spec)) co_return co_await s.send_error(r, std::move(*e));
  auto condition = write_condition(r);
  if (auto* e = std::get_if<Error>(&condition)) co_return co_await s.send_error(r, std::move(*e));
  const storage::WriteCondition& when = std::get<storage::WriteCondition>(condition);
  auto requested = read_checksum_request(r);
  if (auto* e = std::get_if<Error>(&requested)) co_return co_await s.send_error(r, std::move(*e));
  ChecksumRequest wanted = std::get<ChecksumRequest>(std::move(requested));

  // The version appended to. An inline one is read now: its bytes go into the new version.
  auto head = s.store().head(bucket.id, r.key);
  if (!head) co_return co_await s.send_error(r, from_errc(head.error()));
  std::optional<storage::ObjectRecord> base;
  if (*head) base = **head;
  std::unique_ptr<storage::ObjectReader> base_reader;
  if (base && base->inline_data) {
    auto opened = co_await s.store().open_reader(bucket.id, r.key);
    if (!opened && opened.error() != errc::kNotFound)
      co_return co_await s.send_error(r, from_errc(opened.error()));
    base.reset();
    if (opened) {
      base = (*opened)->object();
      if (base->inline_data) base_reader = std::move(*opened);
    }
  }
  const bool inline_base = base_reader != nullptr;
  const std::uint64_t base_size = base ? base->size_bytes : 0;

  if (offset != base_size) {
    co_return co_await s.send_error(r, Error(Code::kInvalidWriteOffset)
                                           .with("WriteOffsetBytes", std::to_string(offset))
                                           .with("ObjectSize", std::to_string(base_size)));
  }
  if (when.if_none_match_any && base)
    co_return co_await s.send_error(
        r, Error(Code::kPreconditionFailed).with("Condition", "If-None-Match"));
  if (when.if_match) {
    if (!base) co_return co_await s.send_error(r, Error(Code::kNoSuchKey).with("Key", r.key));
    if (!etag_matches(*when.if_match, base->etag))
      co_return co_await s.send_error(
          r, Error(Code::kPreconditionFailed).with("Condition", "If-Match"));
  }
  storage::ObjectSpec object = std::get<storage::ObjectSpec>(std::move(spec));
  if (base && !object.user_metadata.empty()) {
    co_return co_await s.send_error(r, Error(Code::kInvalidRequest,
                                             "Cannot specify both a write offset value and "
                                             "user-defined object metadata for existing objects."));
  }
  const std::uint32_t parts = !base ? 0 : base->parts_count == 0 ? 2 : base->parts_count + 1;
  if (parts > kPartNumberMax) co_return co_await s.send_error(r, Code::kTooManyParts);
  const auto extendable = base ? extendable_crc(base->checksums) : std::nullopt;
  if (base) {
    const auto kept = stored_algorithm(base->checksums);
    if (wanted.algorithm && kept && *wanted.algorithm != *kept) {
      co_return co_await s.send_error(
          r, Error(Code::kInvalidRequest,
                   "Checksum Type mismatch occurred, expected checksum Type: " +
                       lower(aws::checksum_name(*kept)) + ", actual checksum Type: " +
                       lower(aws::checksum_name(*wanted.algorithm)) + "."));
    }
    if (!wanted.algorithm && extendable) wanted.algorithm = extendable->first;
  }

  // The new data (after the inline base's bytes, which are rewritten with it).
  const bool md5_here =
      wanted.content_md5.has_value() && (inline_base || !s.store().digest_is_md5());
  Body body(r, std::move(wanted), DefaultCrc64::kWhenNoneAsked, md5_here);
  const auto declared = body.declared_length();
  const std::string empty_body = "Request body cannot be empty when 'write offset' is specified.";
  if (declared && *declared == 0)
    co_return co_await s.send_error(r, Error(Code::kInvalidRequest, empty_body));
  const std::uint64_t max_bytes = s.config().single_put_max_bytes;
  if (!declared && !r.head.chunked) co_return co_await s.send_error(r, Code::kMissingContentLength);
  if (declared && *declared > max_bytes) {
    co_return co_await s.send_error(r, Error(Code::kEntityTooLarge)
                                           .with("ProposedSize", std::to_string(*declared))
                                           .with("MaxSizeAllowed", std::to_string(max_bytes)));
  }
  std::optional<std::uint64_t> reserve = declared;
  if (reserve && inline_base) *reserve += base_size;
  // Data after kept extents is never inline; a new object or a rewritten inline one may be.
  auto created = co_await s.store().create_writer(reserve, base && !inline_base);
  if (!created) co_return co_await s.send_error(r, from_errc(created.error()));
  std::unique_ptr<storage::ObjectWriter> writer = std::move(*created);
  if (inline_base) {
    for (;;) {
      auto piece = co_await base_reader->next();
      if (!piece) co_return co_await s.send_error(r, from_errc(piece.error()));
      if (piece->empty()) break;
      if (auto w = co_await writer->write(*piece); !w)
        co_return co_await s.send_error(r, from_errc(w.error()));
    }
    base_reader.reset();
  }
  std::uint64_t crc = extendable ? extendable->second : 0;  // carried on over the new bytes
  for (;;) {
    auto piece = co_await body.next();
    if (!piece) co_return co_await s.send_error(r, body.error());
    if (piece->empty()) break;
    if (body.payload_bytes() > max_bytes) co_return co_await s.send_error(r, Code::kEntityTooLarge);
    if (extendable) crc = aws::crc_update(extendable->first, crc, *piece);
    if (auto w = co_await writer->write(*piece); !w)
      co_return co_await s.send_error(r, from_errc(w.error()));
  }
  if (body.payload_bytes() == 0)
    co_return co_await s.send_error(r, Error(Code::kInvalidRequest, empty_body));
  if (auto f = co_await writer->finish(); !f)
    co_return co_await s.send_error(r, from_errc(f.error()));
  std::optional<std::array<std::uint8_t, 16>> md5;
  if (!md5_here && s.store().digest_is_md5()) md5 = writer->digest();
  if (auto e = body.verify(md5)) co_return co_await s.send_error(r, std::move(*e));

  std::vector<storage::ObjectPartRecord> new_parts;
  const std::optional<std::string> part_checksum =
      body.checksum() ? std::optional<std::string>(body.checksum()->second) : std::nullopt;
  if (!base) {
    object.etag = data_etag(*writer);
    if (const auto& c = body.checksum()) {
      set_checksum(object.checksums, c->first, c->second);
      object.checksums.type = "FULL_OBJECT";
    }
  } else {
    object = storage::ObjectSpec{};
    object.headers = base->headers;
    object.user_metadata = base->user_metadata;
    if (extendable) {
      set_checksum(object.checksums, extendable->first, aws::crc_to_base64(extendable->first, crc));
      object.checksums.type = "FULL_OBJECT";
    }
    // ETag: chained from the previous one, so that every version has its own.
    object.etag = appended_etag(base->etag, writer->digest(), parts);
    if (base->parts_count == 0) new_parts.push_back({1, 0, base_size, std::nullopt});
    new_parts.push_back({parts, base_size, body.payload_bytes(), part_checksum});
  }
  auto committed =
      co_await s.store().append_object(std::move(writer), bucket, r.key, base ? base->id : 0,
                                       inline_base, std::move(object), std::move(new_parts));
  if (!committed) {
    // Another write of the key came first: the offset is no longer its size.
    if (committed.error() == errc::kPreconditionFailed) {
      co_return co_await s.send_error(
          r, Error(Code::kInvalidWriteOffset).with("WriteOffsetBytes", std::to_string(offset)));
    }
    if (committed.error() == errc::kNotFound)
      co_return co_await s.send_error(r, Error(Code::kNoSuchBucket).with("BucketName", r.bucket));
    co_return co_await s.send_error(r, from_errc(committed.error()));
  }
  http::Response response = s.response(r, 200);
  response.add("ETag", quoted(committed->etag));
  response.add("x-amz-object-size", std::to_string(committed->size_bytes));
  for (const auto& c : stored_checksums(committed->checksums)) response.add(c.header, c.value);
  if (committed->checksums.type) response.add("x-amz-checksum-type", *committed->checksums.type);
  co_await s.send_empty(r, 200, std::move(response));
}

}  // namespace hots3::s3
