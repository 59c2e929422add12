// Object operations: PutObject, GetObject/HeadObject, DeleteObject, DeleteObjects, CopyObject,
// and the object sub-resources (acl, tagging).

#include "acl.h"
#include "body.h"
#include "conditions.h"
#include "copy_source.h"
#include "multipart_rules.h"
#include "names.h"
#include "object_attributes.h"
#include "object_response.h"
#include "object_spec.h"
#include "range.h"
#include "read_through.h"
#include "request_xml.h"
#include "s3_xml.h"
#include "service.h"
#include "time_format.h"
#include "upstream_view.h"

#include "hots3/common/logging.h"
#include "hots3/common/text.h"
#include "hots3/common/units.h"

#include <charconv>
#include <cstring>

namespace hots3::s3 {

namespace {

// The upstream PUT of a write-through bucket's PUT, fed with its body as it arrives, with what
// the client vouched for it in headers (Content-MD5, a checksum). The body's length must be known
// up front (S3 requires it of a PUT anyway).
std::variant<std::unique_ptr<tier::UpstreamPut>, Error> open_passage(
    Service& s, const Request& r, const storage::BucketRecord& bucket,
    const storage::ObjectSpec& object, const ChecksumRequest& checksums,
    std::optional<std::uint64_t> length) {
  if (s.write_through() == nullptr) {
    return Error(Code::kServiceUnavailable, "The bucket's upstream is not served by this server.");
  }
  if (!length) return Error(Code::kMissingContentLength);
  std::vector<http::Header> vouched;
  if (checksums.content_md5) {
    vouched.push_back(
        {"Content-MD5", aws::base64_encode(std::string_view(*checksums.content_md5))});
  }
  if (checksums.algorithm && checksums.header_value) {
    vouched.push_back(
        {std::string(aws::checksum_header(*checksums.algorithm)), *checksums.header_value});
  }
  if (bucket.tier == storage::BucketTier::kCache) {
    // Others write the upstream too: what the client's conditions are about is what it holds,
    // which decides them (the version here may be older, or not here at all).
    for (const char* name : {"If-Match", "If-None-Match"}) {
      if (const auto v = r.header(name)) vouched.push_back({name, std::string(*v)});
    }
  }
  return s.write_through()->put(bucket.id, r.key, *length, object.headers, object.user_metadata,
                                std::move(vouched));
}

// Write-through, once the body is here and verified: the upstream takes the version before it
// is visible here. Its ETag there is the MD5 S3 gives a single PUT; another one means the bytes
// differ (or the upstream makes other ETags): the version is then committed and sent again as a
// write-back upload (with Content-MD5), which the request waits for like any write of the bucket.
// The error to answer when the upstream did not take it, or may have without saying so (the
// job held for the key then brings the upstream back to the state here); otherwise `sent_up` is
// the ETag the upstream holds, and object.upstream_etag is set when it is this version's.
asio::awaitable<std::optional<Error>> finish_passage(Service& s, const Request& r,
                                                     const storage::BucketRecord& bucket,
                                                     tier::UpstreamPut& passage,
                                                     storage::ObjectSpec& object,
                                                     std::string& sent_up) {
  // Before the upstream may take the version: a job that brings the upstream back to the state
  // here, should the server stop before the commit. Not in cache mode: the upstream is the truth
  // there, which others write, and the state here may be no more than what was seen of it (a
  // key never read here would be deleted); a version here that falls behind is revalidated.
  Result<std::optional<storage::TierJob>> held = std::optional<storage::TierJob>();
  if (bucket.tier != storage::BucketTier::kCache) {
    auto hold = s.store().hold_tier_key(bucket.id, r.key, object.etag);
    held = co_await std::move(hold);
    if (!held) co_return from_errc(held.error());
  }
  std::string expected = s.store().digest_is_md5() ? object.etag : std::string();
  // (Called apart: GCC 12 mishandles temporaries with destructors inside a co_await.)
  auto finishing = passage.finish(std::move(expected), *held ? (*held)->seq : 0);
  const tier::UpstreamAnswer answer = co_await std::move(finishing);
  using enum tier::UpstreamAnswer::Kind;
  if (answer.kind != kStored) {
    if (*held && answer.kind != kUnknown) {
      auto cancel = s.store().cancel_tier_job(std::move(**held));
      if (auto cancelled = co_await std::move(cancel); !cancelled) {
        log::warn("request {}: {}: {}", r.head.request_id, r.key, cancelled.error().message());
      }
    }
    co_return upstream_refusal(answer);
  }
  sent_up = answer.etag;
  if (!s.store().digest_is_md5() || answer.etag == object.etag) {
    object.upstream_etag = answer.etag;
  }
  co_return std::nullopt;
}

// For a GET whose version changed under it (found upstream, or replaced by a revalidation):
// a reader of `record` when it has data here (a version written or fetched meanwhile), which
// then replaces it; else it stays, to be read through. The error opening one answers.
asio::awaitable<std::optional<Error>> open_if_local(
    Service& s, std::int64_t bucket_id, bool head_only,
    std::shared_ptr<const storage::ObjectRecord>& record,
    std::unique_ptr<storage::ObjectReader>& reader) {
  if (head_only || !record || record->tier_state == storage::TierState::kUpstreamOnly) {
    co_return std::nullopt;
  }
  auto opening = s.store().open_reader(bucket_id, record->key);
  auto opened = co_await std::move(opening);
  if (!opened) co_return from_errc(opened.error());
  reader = std::move(*opened);
  record.reset();
  co_return std::nullopt;
}

// A failed (conditional) delete as S3 reports it.
Error delete_error(error_code e, std::string_view key) {
  if (e == errc::kNotFound) return Error(Code::kNoSuchKey).with("Key", std::string(key));
  return from_errc(e);
}

// Whether some chunks of the evicted `object` are kept here (a partial object).
bool partial(Service& s, const storage::ObjectRecord& object) {
  auto chunks = s.store().object_chunks(object.id, 0, UINT32_MAX, 1);
  return chunks && !chunks->empty();
}

}  // namespace

// ---- PutObject ------------------------------------------------------------------------------

asio::awaitable<void> put_object(Service& s, Request& r) {
  if (auto e = validate_key(r.key)) co_return co_await s.send_error(r, std::move(*e));
  auto bucket = co_await s.bucket_for(r, Access::kWrite);
  if (!bucket) co_return;
  if (auto e = Service::upstream_key_fits(*bucket, r.key))
    co_return co_await s.send_error(r, std::move(*e));
  if (auto e = s.tier_budget(*bucket, r.head.content_length.value_or(0)))
    co_return co_await s.send_error(r, std::move(*e));
  const auto upstream = s.wants_upstream(r, *bucket);
  if (const auto* e = std::get_if<Error>(&upstream)) co_return co_await s.send_error(r, *e);
  if (r.header("x-amz-write-offset-bytes"))
    co_return co_await append_object(s, r, std::move(*bucket));
  auto spec = object_spec(r, s.config());
  if (auto* e = std::get_if<Error>(&spec)) co_return co_await s.send_error(r, std::move(*e));
  auto condition = write_condition(r);
  if (auto* e = std::get_if<Error>(&condition)) co_return co_await s.send_error(r, std::move(*e));
  auto checksums = read_checksum_request(r);
  if (auto* e = std::get_if<Error>(&checksums)) co_return co_await s.send_error(r, std::move(*e));
  auto pinning = pin_on_write(s, r, *bucket, r.head.content_length.value_or(0));
  const bool go_on = co_await std::move(pinning);
  if (!go_on) co_return;
  const bool md5_here = md5_in_body(s.store(), std::get<ChecksumRequest>(checksums));
  storage::ObjectSpec object = std::get<storage::ObjectSpec>(std::move(spec));
  const ChecksumRequest& vouched = std::get<ChecksumRequest>(checksums);
  Body body(r, vouched, DefaultCrc64::kWhenNoneAsked, md5_here);
  std::unique_ptr<tier::UpstreamPut> passage;
  if (storage::writes_through(bucket->tier) && !body.failed()) {
    auto opened = open_passage(s, r, *bucket, object, vouched, body.declared_length());
    if (auto* e = std::get_if<Error>(&opened)) co_return co_await s.send_error(r, std::move(*e));
    passage = std::get<std::unique_ptr<tier::UpstreamPut>>(std::move(opened));
  }
  auto writer = co_await receive(s, r, body, false, s.config().single_put_max_bytes, passage.get());
  if (!writer) co_return;
  object.etag = data_etag(*writer);
  if (const auto& c = body.checksum()) {
    set_checksum(object.checksums, c->first, c->second);
    object.checksums.type = "FULL_OBJECT";
  }
  std::string sent_up;  // the ETag of what the upstream may hold of this PUT
  if (passage) {
    auto finishing = finish_passage(s, r, *bucket, *passage, object, sent_up);
    if (auto e = co_await std::move(finishing)) co_return co_await s.send_error(r, std::move(*e));
  }
  const bool through = object.upstream_etag.has_value();
  if (through && bucket->tier == storage::BucketTier::kCache) {
    // The upstream took it under the client's conditions: the state here follows.
    std::get<storage::WriteCondition>(condition) = {};
  }
  auto committed =
      co_await s.store().commit_object(std::move(writer), *bucket, r.key, std::move(object),
                                       std::get<storage::WriteCondition>(condition));
  if (!sent_up.empty() && (!committed || !through) && bucket->tier != storage::BucketTier::kCache) {
    // The upstream may hold a version that is not (or not yet) the one here: the key's state
    // here goes up again, replacing it.
    auto resend = s.store().resend_tier_key(bucket->id, r.key, sent_up);
    if (auto resent = co_await std::move(resend); !resent) {
      log::warn("request {}: queueing {} for the upstream again failed: {}", r.head.request_id,
                r.key, resent.error().message());
    }
  }
  passage.reset();  // the key is free for its queued change, which the request may wait for
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
  if (std::get<bool>(upstream) && !through) {
    // (Called apart: GCC 12 mishandles temporaries with destructors inside a co_await.)
    auto waiting = s.wait_upstream_for(*bucket, r.key);
    if (auto e = co_await std::move(waiting)) co_return co_await s.send_error(r, std::move(*e));
  }
  http::Response head = s.response(200);
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
    if (record && record->tier_state == storage::TierState::kLost)
      co_return co_await s.send_error(r, from_errc(errc::kLost));
  } else {
    auto opening = s.store().open_reader(bucket->id, r.key);
    auto opened = co_await std::move(opening);
    if (!opened && opened.error() == errc::kUnavailable && s.read_through() != nullptr) {
      // Evicted: the record says what to send, and the data comes from the upstream.
      auto found = s.store().head(bucket->id, r.key);
      if (found && *found && (*found)->tier_state == storage::TierState::kUpstreamOnly) {
        record = std::move(*found);
      }
    }
    if (!opened && !record && opened.error() != errc::kNotFound)
      co_return co_await s.send_error(r, from_errc(opened.error()));
    if (opened) reader = std::move(*opened);
  }
  // Whether the upstream was just asked about the key (its answer is as fresh as can be).
  bool looked_up = false;
  if (!reader && !record && bucket->tier != storage::BucketTier::kNone &&
      s.read_through() != nullptr && !r.header("x-hots3-local") &&
      !known_missing(s, r, bucket->id)) {
    // Not here: the upstream may hold it (written there by others, or before this catalog).
    auto looking = look_up_upstream(s, *bucket, r.key);
    auto looked = co_await std::move(looking);
    if (auto* failed = std::get_if<Error>(&looked)) {
      // In cache mode others write the bucket, and what is here says nothing of a key it lacks.
      // In the other modes hots3 writes it, and answers from here while the upstream cannot
      // (any other error, a refusal or the catalog's, is the answer).
      if (bucket->tier == storage::BucketTier::kCache || failed->code != Code::kServiceUnavailable)
        co_return co_await s.send_error(r, std::move(*failed));
    } else {
      record = std::get<std::shared_ptr<const storage::ObjectRecord>>(std::move(looked));
      looked_up = true;
      if (!record) note_missing(s, r, bucket->id);
      auto opening = open_if_local(s, bucket->id, head_only, record, reader);
      if (auto e = co_await std::move(opening)) co_return co_await s.send_error(r, std::move(*e));
    }
  }
  // When the read asked the upstream: what it found (x-hots3-revalidation), and what answers
  // the read if the version here does (x-hots3-cache: revalidated or stale).
  std::optional<tier::RevalidationResult> revalidation;
  std::optional<tier::CacheAnswer> checked;
  if ((reader || record) && !looked_up && bucket->tier != storage::BucketTier::kNone &&
      s.read_through() != nullptr) {
    const tier::Freshness rules = s.read_through()->freshness(bucket->id, r.key);
    const storage::ObjectRecord& here = reader ? reader->object() : *record;
    if (revalidation_due(s, r, here, rules)) {
      auto asking = revalidate(s, *bucket, here, rules);
      auto asked = co_await std::move(asking);
      if (auto* e = std::get_if<Error>(&asked)) co_return co_await s.send_error(r, std::move(*e));
      Revalidated& found = std::get<Revalidated>(asked);
      revalidation = found.kind;
      switch (found.kind) {
        case Revalidated::Kind::kCurrent:
        case Revalidated::Kind::kRequeued:
        case Revalidated::Kind::kKept:
          checked = tier::CacheAnswer::kRevalidated;
          break;
        case Revalidated::Kind::kLost: {
          Error lost(Code::kInternalError,
                     "The object's data was lost: it had been evicted here, and the upstream no "
                     "longer holds it.");
          lost.headers.emplace_back("x-hots3-tier", "lost");
          lost.headers.emplace_back("x-hots3-revalidation", "lost");
          co_return co_await s.send_error(r, std::move(lost));
        }
        case Revalidated::Kind::kStale:
          checked = tier::CacheAnswer::kStale;
          break;
        case Revalidated::Kind::kReplaced: {
          reader.reset();
          record = std::move(found.now);
          auto opening = open_if_local(s, bucket->id, head_only, record, reader);
          if (auto e = co_await std::move(opening))
            co_return co_await s.send_error(r, std::move(*e));
          break;
        }
        case Revalidated::Kind::kGone:
        case Revalidated::Kind::kFailed:  // (never: an Error)
          reader.reset();
          record.reset();
          break;
      }
    }
  }
  // (x-hots3-revalidation is for `hots3 tier reconcile`.)
  const std::string_view found_upstream =
      revalidation ? tier::revalidation_result_name(*revalidation) : std::string_view();
  if (!reader && !record) {
    Error e = Error(Code::kNoSuchKey).with("Key", r.key);
    if (revalidation) e.headers.emplace_back("x-hots3-revalidation", found_upstream);
    co_return co_await s.send_error(r, std::move(e));
  }
  const storage::ObjectRecord& object = reader ? reader->object() : *record;
  if (auto e = read_conditions(r, object, false)) {
    if (e->code == Code::kNotModified) {
      http::Response head = s.response(304);
      head.add("ETag", quoted(object.etag));
      head.add("Last-Modified", http_date(object.created_ms));
      co_return co_await s.send_empty(r, 304, std::move(head));
    }
    co_return co_await s.send_error(r, std::move(*e));
  }

  // What to send: a part, a range, or everything.
  auto requested = requested_part(r);
  if (auto* e = std::get_if<Error>(&requested)) co_return co_await s.send_error(r, std::move(*e));
  const auto part_number = std::get<std::optional<std::uint32_t>>(requested);
  std::optional<storage::ObjectPartRecord> part;
  if (part_number && object.parts_count > 0) {
    auto found = s.store().object_part(object.id, *part_number);
    if (!found) co_return co_await s.send_error(r, from_errc(found.error()));
    part = std::move(*found);
  }
  auto selected = select_body(r, object, part_number, part);
  if (auto* e = std::get_if<Error>(&selected)) co_return co_await s.send_error(r, std::move(*e));
  const BodySelection& selection = std::get<BodySelection>(selected);
  http::Response head = s.response(selection.partial ? 206 : 200);
  add_object_headers(head, r, object, selection);
  if (bucket->tier != storage::BucketTier::kNone) {
    // As S3 tells of an archived object: its data here (restored), or being fetched (a restore or
    // a read under way); an evicted one that is neither says nothing.
    if (object.tier_state != storage::TierState::kUpstreamOnly) {
      head.add("x-amz-restore", "ongoing-request=\"false\"");
    } else if (s.fill_flights().restoring(object.id)) {
      head.add("x-amz-restore", "ongoing-request=\"true\"");
    }
    // Where the version's data is: here only (not yet upstream), in both places, upstream only
    // (evicted) with some chunks kept here, or none; and whether eviction may take it.
    head.add("x-hots3-tier", object.tier_state == storage::TierState::kLocal              ? "dirty"
                             : object.tier_state == storage::TierState::kLocalAndUpstream ? "clean"
                             : partial(s, object) ? "partial"
                                                  : "remote");
    head.add("x-hots3-pinned", s.store().pinned(bucket->id, object.key) ? "true" : "false");
  }
  // (A read-through says "miss" itself.)
  if (checked && (head_only || reader))
    head.add("x-hots3-cache", std::string(tier::cache_answer_name(*checked)));
  if (revalidation) head.add("x-hots3-revalidation", std::string(found_upstream));
  const unsigned status = head.status;
  if (head_only) co_return co_await s.send_empty(r, status, std::move(head));
  if (!reader) {
    auto reading = read_through(s, r, *record, selection, std::move(head));
    co_await std::move(reading);
    co_return;
  }
  if (bucket->tier != storage::BucketTier::kNone) {
    if (s.read_through() != nullptr) {
      s.read_through()->count_read(bucket->id, checked.value_or(tier::CacheAnswer::kHit),
                                   selection.length_bytes);
    }
    if (!checked) head.add("x-hots3-cache", "hit");
  }
  co_await send_local(r, *reader, selection, std::move(head));
}

// ---- DeleteObject / DeleteObjects -------------------------------------------------------------

asio::awaitable<void> delete_object(Service& s, Request& r) {
  auto bucket = co_await s.bucket_for(r, Access::kWrite);
  if (!bucket) co_return;
  if (auto e = check_version_id(r)) co_return co_await s.send_error(r, std::move(*e));
  if (auto up = s.wants_upstream(r, *bucket); std::holds_alternative<Error>(up))
    co_return co_await s.send_error(r, std::get<Error>(std::move(up)));
  auto condition = delete_condition(r);
  if (auto* e = std::get_if<Error>(&condition)) co_return co_await s.send_error(r, std::move(*e));
  auto deleted = co_await s.store().delete_object(
      bucket->id, r.key, std::get<storage::DeleteCondition>(std::move(condition)));
  if (!deleted) co_return co_await s.send_error(r, delete_error(deleted.error(), r.key));
  auto confirming = s.upstream_confirms(r, *bucket, {r.key});
  if (auto e = co_await std::move(confirming)) co_return co_await s.send_error(r, std::move(*e));
  co_await s.send_empty(r, 204, s.response(204));
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
  auto text = co_await body.read_all(2 * kMiB);
  if (!text) co_return co_await s.send_error(r, body.error());
  auto parsed = parse_delete_request(*text);
  if (auto* e = std::get_if<Error>(&parsed)) co_return co_await s.send_error(r, std::move(*e));
  const DeleteRequest& request = std::get<DeleteRequest>(parsed);
  if (auto up = s.wants_upstream(r, *bucket); std::holds_alternative<Error>(up))
    co_return co_await s.send_error(r, std::get<Error>(std::move(up)));
  std::vector<std::optional<Error>> failures(request.objects.size());
  std::vector<std::string> deleted_keys;
  std::vector<std::size_t> deleted_at;
  for (std::size_t i = 0; i < request.objects.size(); ++i) {
    const auto& [key, version, condition] = request.objects[i];
    std::optional<Error>& failed = failures[i];
    failed = validate_key(key);
    if (!failed && version && *version != "null")
      failed = Error(Code::kNoSuchVersion);  // hots3 keeps none
    if (!failed && key.empty()) failed = Error(Code::kInvalidArgument, "The key is empty.");
    if (!failed) {
      auto deleted = co_await s.store().delete_object(bucket->id, key, condition);
      if (!deleted) failed = delete_error(deleted.error(), key);
    }
    if (!failed) {
      deleted_keys.push_back(key);
      deleted_at.push_back(i);
    }
  }
  // Deleted here; a key's own error when it must be gone upstream too and is not yet.
  auto confirming = s.upstream_confirms_each(r, *bucket, std::move(deleted_keys));
  auto confirmed = co_await std::move(confirming);
  for (std::size_t j = 0; j < confirmed.size(); ++j) failures[deleted_at[j]] = confirmed[j];
  XmlWriter xml("DeleteResult");
  for (std::size_t i = 0; i < request.objects.size(); ++i) {
    const auto& [key, version, condition] = request.objects[i];
    const std::optional<Error>& failed = failures[i];
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

namespace {

// The spec of a copy's target: the request's (REPLACE) or the source's (COPY); the data is the
// same, so are its checksums.
storage::ObjectSpec copy_target(const storage::ObjectRecord& source, bool replace,
                                storage::ObjectSpec requested) {
  storage::ObjectSpec target;
  if (replace) {
    target = std::move(requested);
  } else {
    target.headers = source.headers;
    target.user_metadata = source.user_metadata;
  }
  target.checksums = source.checksums;
  return target;
}

// A copy to another key: the data is read and written again, and is a single-part object (a
// multipart source too).
asio::awaitable<std::variant<storage::ObjectRecord, Error>> copy_to(
    Service& s, storage::ObjectReader& reader, const storage::BucketRecord& bucket,
    const std::string& key, storage::ObjectSpec target, const storage::WriteCondition& when) {
  auto writer = co_await s.store().create_writer(reader.object().size_bytes);
  if (!writer) co_return from_errc(writer.error());
  if (auto e = co_await copy_data(reader, **writer)) co_return std::move(*e);
  target.etag = data_etag(**writer);
  auto committed =
      co_await s.store().commit_object(std::move(*writer), bucket, key, std::move(target), when);
  if (!committed) {
    if (committed.error() == errc::kNotFound) co_return Error(Code::kNoSuchKey).with("Key", key);
    co_return from_errc(committed.error());
  }
  co_return std::move(*committed);
}

}  // namespace

asio::awaitable<void> copy_object(Service& s, Request& r) {
  if (auto e = validate_key(r.key)) co_return co_await s.send_error(r, std::move(*e));
  auto named = parse_copy_source(*r.header("x-amz-copy-source"));
  if (auto* e = std::get_if<Error>(&named)) co_return co_await s.send_error(r, std::move(*e));
  const auto [source_bucket_name, source_key] =
      std::get<std::pair<std::string, std::string>>(named);
  auto bucket = co_await s.bucket_for(r, Access::kWrite);
  if (!bucket) co_return;
  if (auto e = Service::upstream_key_fits(*bucket, r.key))
    co_return co_await s.send_error(r, std::move(*e));
  auto source_bucket = copy_source_bucket(s.store(), r, source_bucket_name);
  if (auto* e = std::get_if<Error>(&source_bucket))
    co_return co_await s.send_error(r, std::move(*e));
  const std::int64_t source_bucket_id = std::get<storage::BucketRecord>(source_bucket).id;

  const std::string directive(r.header("x-amz-metadata-directive").value_or("COPY"));
  if (directive != "COPY" && directive != "REPLACE") {
    co_return co_await s.send_error(r, Error(Code::kInvalidArgument, "Unknown metadata directive.")
                                           .with("ArgumentName", "x-amz-metadata-directive"));
  }
  auto spec = object_spec(r, s.config());
  if (auto* e = std::get_if<Error>(&spec)) co_return co_await s.send_error(r, std::move(*e));
  auto condition = write_condition(r);
  if (auto* e = std::get_if<Error>(&condition)) co_return co_await s.send_error(r, std::move(*e));
  if (auto up = s.wants_upstream(r, *bucket); std::holds_alternative<Error>(up))
    co_return co_await s.send_error(r, std::get<Error>(std::move(up)));
  auto opened = co_await open_copy_source(s.store(), r, source_bucket_id, source_key);
  if (auto* e = std::get_if<Error>(&opened)) co_return co_await s.send_error(r, std::move(*e));
  storage::ObjectReader& reader = *std::get<std::unique_ptr<storage::ObjectReader>>(opened);
  const storage::ObjectRecord& src = reader.object();
  // A copy is bounded as a single PUT is (S3: 5 GiB); larger objects copy with UploadPartCopy.
  if (auto e = check_copy_size(src.size_bytes, s.config()))
    co_return co_await s.send_error(r, std::move(*e));
  if (auto e = s.tier_budget(*bucket, src.size_bytes))
    co_return co_await s.send_error(r, std::move(*e));

  storage::ObjectSpec target =
      copy_target(src, directive == "REPLACE", std::get<storage::ObjectSpec>(std::move(spec)));
  if (source_bucket_id == bucket->id) target.copied_from = source_key;
  std::variant<storage::ObjectRecord, Error> result;
  if (source_bucket_id != bucket->id || source_key != r.key) {
    result = co_await copy_to(s, reader, *bucket, r.key, std::move(target),
                              std::get<storage::WriteCondition>(condition));
  } else if (directive != "REPLACE") {
    result = Error(Code::kInvalidRequest,
                   "This copy request is illegal because it is trying to copy an object to itself "
                   "without changing the object's metadata, storage class, website redirect "
                   "location or encryption attributes.");
  } else {
    // Copy onto itself: the metadata changes, the data stays where it is.
    auto replaced =
        co_await s.store().replace_metadata(bucket->id, r.key, src.etag, std::move(target));
    if (replaced) {
      result = std::move(*replaced);
    } else {
      result = from_errc(replaced.error());
    }
  }
  if (auto* e = std::get_if<Error>(&result)) co_return co_await s.send_error(r, std::move(*e));
  auto confirming = s.upstream_confirms(r, *bucket, {r.key});
  if (auto e = co_await std::move(confirming)) co_return co_await s.send_error(r, std::move(*e));
  const auto& copied = std::get<storage::ObjectRecord>(result);
  XmlWriter xml("CopyObjectResult");
  xml.element("LastModified", iso8601(copied.created_ms));
  xml.element("ETag", quoted(copied.etag));
  for (const auto& c : stored_checksums(copied.checksums)) xml.element(c.xml, c.value);
  co_await s.send_xml(r, 200, xml.finish());
}

// ---- GetObjectAttributes ---------------------------------------------------------------------

asio::awaitable<void> get_object_attributes(Service& s, Request& r) {
  auto bucket = co_await s.bucket_for(r, Access::kRead);
  if (!bucket) co_return;
  if (auto e = check_version_id(r)) co_return co_await s.send_error(r, std::move(*e));
  auto requested = attributes_request(r);
  if (auto* e = std::get_if<Error>(&requested)) co_return co_await s.send_error(r, std::move(*e));
  const AttributesRequest& asked = std::get<AttributesRequest>(requested);
  auto found = s.store().head(bucket->id, r.key);
  if (!found) co_return co_await s.send_error(r, from_errc(found.error()));
  if (!*found) co_return co_await s.send_error(r, Error(Code::kNoSuchKey).with("Key", r.key));
  const storage::ObjectRecord& object = **found;
  if (object.tier_state == storage::TierState::kLost)
    co_return co_await s.send_error(r, from_errc(errc::kLost));
  std::vector<storage::ObjectPartRecord> parts;
  if (asked.object_parts && object.parts_count > 0) {
    auto listed = co_await s.store().object_parts(object.id);
    if (!listed) co_return co_await s.send_error(r, from_errc(listed.error()));
    parts = std::move(*listed);
  }
  http::Response head = s.response(200);
  head.add("Last-Modified", http_date(object.created_ms));
  co_await s.send_xml(r, 200, attributes_response(asked, object, parts, storage_class(r.bucket)),
                      std::move(head));
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
        auto reading = read_small_body(r);
        auto text = co_await std::move(reading);
        if (auto* e = std::get_if<Error>(&text)) co_return co_await s.send_error(r, std::move(*e));
        auto parsed =
            acl_is_owner_full_control(std::get<std::string>(text), owner_id(bucket->owner));
        if (auto* e = std::get_if<Error>(&parsed))
          co_return co_await s.send_error(r, std::move(*e));
        owner_only = std::get<bool>(parsed);
      }
      if (owner_only) co_return co_await s.send_empty(r, 200, s.response(200));
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
