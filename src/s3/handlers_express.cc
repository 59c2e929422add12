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

// x-amz-client-token: nullopt when absent; InvalidArgument unless 1 to 64 printable ASCII
// characters.
std::variant<std::optional<std::string>, Error> client_token(const Request& r) {
  const auto token = r.header("x-amz-client-token");
  if (!token) return std::optional<std::string>();
  if (token->empty() || token->size() > 64 ||
      !std::all_of(token->begin(), token->end(), [](char c) { return c >= 33 && c <= 126; })) {
    return Error(Code::kInvalidArgument,
                 "x-amz-client-token must be 1 to 64 ASCII characters from 33 to 126.")
        .with("ArgumentName", "x-amz-client-token");
  }
  return std::optional<std::string>(*token);
}

// What a retry with the same client token must repeat exactly: the object names and every
// condition.
std::string rename_parameters(const Request& r, std::string_view source_key) {
  std::string parameters = std::string(source_key) + '\0' + r.key;
  for (std::string_view h :
       {"if-match", "if-none-match", "if-modified-since", "if-unmodified-since",
        "x-amz-rename-source-if-match", "x-amz-rename-source-if-none-match",
        "x-amz-rename-source-if-modified-since", "x-amz-rename-source-if-unmodified-since"}) {
    parameters += '\0';
    parameters += r.header(h).value_or("-");
  }
  return parameters;
}

// The source of a rename: x-amz-rename-source, "/bucket/key" → (bucket, key).
std::variant<std::pair<std::string, std::string>, Error> rename_source(const Request& r) {
  auto header = r.header("x-amz-rename-source");
  if (!header || header->empty()) {
    return Error(Code::kInvalidRequest,
                 "Missing required header for this request: x-amz-rename-source");
  }
  auto source = parse_copy_source(*header);
  if (auto* e = std::get_if<Error>(&source)) {
    Error error = std::move(*e);
    for (auto& [name, value] : error.details) {
      if (name == "ArgumentName") value = "x-amz-rename-source";
    }
    if (error.code == Code::kInvalidArgument)
      error.message = "Rename Source must mention the bucket and the key: /bucket/key";
    return error;
  }
  auto named = std::get<std::pair<std::string, std::string>>(std::move(source));
  if (auto e = validate_key(named.second)) return std::move(*e);
  return named;
}

}  // namespace

// ---- RenameObject ---------------------------------------------------------------------------

asio::awaitable<void> rename_object(Service& s, Request& r) {
  if (auto e = validate_key(r.key)) co_return co_await s.send_error(r, std::move(*e));
  auto source = rename_source(r);
  if (auto* e = std::get_if<Error>(&source)) co_return co_await s.send_error(r, std::move(*e));
  const auto& [source_bucket, source_key] = std::get<std::pair<std::string, std::string>>(source);
  auto bucket = co_await s.bucket_for(r, Access::kWrite);
  if (!bucket) co_return;
  if (source_bucket != bucket->name) {
    co_return co_await s.send_error(
        r, Error(Code::kInvalidRequest,
                 "The source and the destination of a rename must be in the same bucket."));
  }
  if (auto e = Service::upstream_key_fits(*bucket, r.key))
    co_return co_await s.send_error(r, std::move(*e));
  if (auto up = s.wants_upstream(r, *bucket); std::holds_alternative<Error>(up))
    co_return co_await s.send_error(r, std::get<Error>(std::move(up)));
  auto token = client_token(r);
  if (auto* e = std::get_if<Error>(&token)) co_return co_await s.send_error(r, std::move(*e));
  const std::optional<std::string>& client = std::get<std::optional<std::string>>(token);
  const Conditions on_source = conditions_of(r, "x-amz-rename-source-");
  const Conditions on_target = conditions_of(r, "");

  std::string parameters;
  std::string token_scope;
  if (client) {
    token_scope = r.auth.user->name + '/' + std::to_string(bucket->id);
    parameters = rename_parameters(r, source_key);
    switch (s.client_tokens().find(token_scope, *client, parameters)) {
      case ClientTokens::Seen::kSame:
        co_return co_await s.send_empty(r, 200, s.response(200));
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
  if (client) s.client_tokens().remember(token_scope, *client, parameters);
  // The new name first: the old one's upstream delete waits for its copy there.
  auto confirming = s.upstream_confirms(r, *bucket, {r.key, source_key});
  if (auto e = co_await std::move(confirming)) co_return co_await s.send_error(r, std::move(*e));
  co_await s.send_empty(r, 200, s.response(200));
}

// ---- PutObject with x-amz-write-offset-bytes (append) ----------------------------------------
//
// The rules are in multipart_rules. hots3 keeps the data it extends where it is (the new version
// re-uses the old version's extents; an inline object is rewritten, it is a few KiB), so an
// append costs what it writes. Two appends at one offset: one wins, the other gets
// InvalidWriteOffset. The ETag of an appended object is opaque, in the multipart form (not the
// MD5 of the data, which clients must then not expect).

namespace {

// The version an append extends (none: a new object). An inline one comes with its reader: its
// bytes are rewritten into the new version.
struct AppendBase {
  std::optional<storage::ObjectRecord> object;
  std::unique_ptr<storage::ObjectReader> inline_reader;
};

asio::awaitable<Result<AppendBase>> append_base(storage::ObjectStore& store, std::int64_t bucket_id,
                                                const std::string& key) {
  H3_CO_TRY(auto head, store.head(bucket_id, key));
  AppendBase base;
  if (head) base.object = *head;
  if (!base.object || !base.object->inline_data) co_return base;
  // Read through a reader, which holds the version it opened.
  auto opened = co_await store.open_reader(bucket_id, key);
  if (!opened && opened.error() != errc::kNotFound) co_return opened.error();
  base.object.reset();
  if (opened) {
    base.object = (*opened)->object();
    if (base.object->inline_data) base.inline_reader = std::move(*opened);
  }
  co_return base;
}

const char* const kEmptyAppend = "Request body cannot be empty when 'write offset' is specified.";

// The declared length of an append's body: present (or chunked), not 0, within a single PUT's.
std::optional<Error> check_append_length(const Request& r, const Body& body,
                                         std::uint64_t max_bytes) {
  const auto declared = body.declared_length();
  if (declared && *declared == 0) return Error(Code::kInvalidRequest, kEmptyAppend);
  if (!declared && !r.head.chunked) return Error(Code::kMissingContentLength);
  if (declared && *declared > max_bytes) {
    return Error(Code::kEntityTooLarge)
        .with("ProposedSize", std::to_string(*declared))
        .with("MaxSizeAllowed", std::to_string(max_bytes));
  }
  return std::nullopt;
}

// Writes the inline base's bytes (if any), then the body's, carrying the plan's CRC on over the
// latter; finishes the writer and verifies the body. Fills `data`.
asio::awaitable<std::optional<Error>> write_append(storage::ObjectWriter& writer, Body& body,
                                                   storage::ObjectReader* inline_base,
                                                   const AppendPlan& plan, bool md5_in_body,
                                                   std::uint64_t max_bytes, AppendedData& data) {
  for (; inline_base != nullptr;) {
    auto piece = co_await inline_base->next();
    if (!piece) co_return from_errc(piece.error());
    if (piece->empty()) break;
    if (auto w = co_await writer.write(*piece); !w) co_return from_errc(w.error());
  }
  data.crc = plan.extended_crc ? plan.extended_crc->second : 0;
  for (;;) {
    auto piece = co_await body.next();
    if (!piece) co_return body.error();
    if (piece->empty()) break;
    if (body.payload_bytes() > max_bytes) co_return Error(Code::kEntityTooLarge);
    if (plan.extended_crc) data.crc = aws::crc_update(plan.extended_crc->first, data.crc, *piece);
    if (auto w = co_await writer.write(*piece); !w) co_return from_errc(w.error());
  }
  if (body.payload_bytes() == 0) co_return Error(Code::kInvalidRequest, kEmptyAppend);
  if (auto f = co_await writer.finish(); !f) co_return from_errc(f.error());
  std::optional<std::array<std::uint8_t, 16>> md5;
  if (!md5_in_body) md5 = writer.digest();
  if (auto e = body.verify(md5)) co_return e;
  data.etag = data_etag(writer);
  data.digest = writer.digest();
  data.bytes = body.payload_bytes();
  data.checksum = body.checksum();
  co_return std::nullopt;
}

}  // namespace

asio::awaitable<void> append_object(Service& s, Request& r, storage::BucketRecord bucket) {
  auto offset = parse_write_offset(*r.header("x-amz-write-offset-bytes"));
  if (auto* e = std::get_if<Error>(&offset)) co_return co_await s.send_error(r, std::move(*e));
  auto spec = object_spec(r, s.config());
  if (auto* e = std::get_if<Error>(&spec)) co_return co_await s.send_error(r, std::move(*e));
  auto condition = write_condition(r);
  if (auto* e = std::get_if<Error>(&condition)) co_return co_await s.send_error(r, std::move(*e));
  auto requested = read_checksum_request(r);
  if (auto* e = std::get_if<Error>(&requested)) co_return co_await s.send_error(r, std::move(*e));
  ChecksumRequest wanted = std::get<ChecksumRequest>(std::move(requested));

  auto base = co_await append_base(s.store(), bucket.id, r.key);
  if (!base) co_return co_await s.send_error(r, from_errc(base.error()));
  auto planned = plan_append(base->object, std::get<std::uint64_t>(offset),
                             std::get<storage::WriteCondition>(condition),
                             std::get<storage::ObjectSpec>(spec), wanted.algorithm, r.key);
  if (auto* e = std::get_if<Error>(&planned)) co_return co_await s.send_error(r, std::move(*e));
  const AppendPlan plan = std::get<AppendPlan>(std::move(planned));

  const bool inline_base = base->inline_reader != nullptr;
  // The MD5 of what the client sent is the writer's only when the writer holds nothing else.
  const bool md5_in_body =
      wanted.content_md5.has_value() && (inline_base || !s.store().digest_is_md5());
  wanted.algorithm = plan.body_algorithm;
  Body body(r, std::move(wanted), DefaultCrc64::kWhenNoneAsked, md5_in_body);
  const std::uint64_t max_bytes = s.config().single_put_max_bytes;
  if (auto e = check_append_length(r, body, max_bytes))
    co_return co_await s.send_error(r, std::move(*e));
  std::optional<std::uint64_t> reserve = body.declared_length();
  if (reserve && inline_base) *reserve += plan.offset;
  // Data after kept extents is never inline; a new object or a rewritten inline one may be.
  auto created = co_await s.store().create_writer(reserve, base->object && !inline_base);
  if (!created) co_return co_await s.send_error(r, from_errc(created.error()));
  std::unique_ptr<storage::ObjectWriter> writer = std::move(*created);
  AppendedData data;
  if (auto e = co_await write_append(*writer, body, base->inline_reader.get(), plan, md5_in_body,
                                     max_bytes, data)) {
    co_return co_await s.send_error(r, std::move(*e));
  }
  base->inline_reader.reset();

  AppendedVersion version =
      appended_version(base->object, std::get<storage::ObjectSpec>(std::move(spec)), plan, data);
  auto committed = co_await s.store().append_object(
      std::move(writer), bucket, r.key, base->object ? base->object->id : 0, inline_base,
      std::move(version.spec), std::move(version.new_parts));
  if (!committed) {
    // Another write of the key came first: the offset is no longer its size.
    if (committed.error() == errc::kPreconditionFailed) {
      co_return co_await s.send_error(
          r,
          Error(Code::kInvalidWriteOffset).with("WriteOffsetBytes", std::to_string(plan.offset)));
    }
    if (committed.error() == errc::kNotFound)
      co_return co_await s.send_error(r, Error(Code::kNoSuchBucket).with("BucketName", r.bucket));
    co_return co_await s.send_error(r, from_errc(committed.error()));
  }
  auto confirming = s.upstream_confirms(r, bucket, {r.key});
  if (auto e = co_await std::move(confirming)) co_return co_await s.send_error(r, std::move(*e));
  http::Response response = s.response(200);
  response.add("ETag", quoted(committed->etag));
  response.add("x-amz-object-size", std::to_string(committed->size_bytes));
  for (const auto& c : stored_checksums(committed->checksums)) response.add(c.header, c.value);
  if (committed->checksums.type) response.add("x-amz-checksum-type", *committed->checksums.type);
  co_await s.send_empty(r, 200, std::move(response));
}

}  // namespace hots3::s3
