// Multipart upload operations: CreateMultipartUpload, UploadPart (and UploadPartCopy),
// CompleteMultipartUpload, AbortMultipartUpload, ListParts, ListMultipartUploads.

#include "acl.h"
#include "body.h"
#include "conditions.h"
#include "copy_source.h"
#include "multipart_rules.h"
#include "names.h"
#include "object_spec.h"
#include "range.h"
#include "request_xml.h"
#include "s3_xml.h"
#include "service.h"
#include "time_format.h"

#include "hots3/common/digest.h"
#include "hots3/common/hex.h"
#include "hots3/common/logging.h"
#include "hots3/common/text.h"
#include "hots3/common/units.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace hots3::s3 {
namespace {

// The upload named by ?uploadId, if it belongs to this bucket and key.
std::variant<storage::UploadRecord, Error> upload_of(Service& s, const Request& r,
                                                     const storage::BucketRecord& bucket) {
  const std::string* id = r.param("uploadId");
  if (id == nullptr || id->empty()) return Error(Code::kNoSuchUpload).with("UploadId", "");
  auto upload = s.store().find_upload(*id);
  if (!upload) return from_errc(upload.error());
  if (!*upload || (*upload)->bucket_id != bucket.id || (*upload)->key != r.key)
    return Error(Code::kNoSuchUpload).with("UploadId", *id);
  return std::move(**upload);
}

// ---- a long CompleteMultipartUpload keeps its connection alive ------------------------------
//
// S3 answers a Complete that takes a while with "200 OK" at once and then white space every few
// seconds until the result, so that neither the client nor a proxy times out; a failure after
// that is an Error XML document in the 200 body (the SDKs look for one). hots3 sends the XML
// declaration, then a space every keep-alive period (at most one a second).

constexpr std::string_view kXmlDeclaration = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";

// What a completion running beside its request shares with it (on the request's worker).
struct PendingCompletion {
  explicit PendingCompletion(const asio::any_io_executor& executor) : wake(executor) {}
  asio::steady_timer wake;  // cancelled when the result is in
  std::optional<Result<storage::ObjectRecord>> result;
};

// The XML after its declaration line: the rest of a document whose declaration is already out.
std::string_view after_declaration(std::string_view xml) {
  if (xml.starts_with("<?xml")) {
    const auto end = xml.find("?>");
    if (end != std::string_view::npos) xml.remove_prefix(end + 2);
  }
  while (!xml.empty() && (xml.front() == '\n' || xml.front() == '\r')) xml.remove_prefix(1);
  return xml;
}

// The response of a Complete, once its result is known: an ordinary response, or the rest of the
// 200 body that keep-alive white space has already started.
class CompletionResponse {
 public:
  CompletionResponse(Service& s, Request& r) : s_(s), r_(r) {}

  // Runs `completion` to its end. While it runs longer than `keepalive` (0: from the start),
  // the 200 head and white space go out (a space at least every second). A client that went
  // away does not stop the completion: it ends either way.
  asio::awaitable<Result<storage::ObjectRecord>> run(
      asio::awaitable<Result<storage::ObjectRecord>> completion,
      std::chrono::milliseconds keepalive) {
    auto executor = co_await asio::this_coro::executor;
    auto pending = std::make_shared<PendingCompletion>(executor);
    asio::co_spawn(executor, std::move(completion),
                   [pending](const std::exception_ptr& e, Result<storage::ObjectRecord> result) {
                     pending->result =
                         e ? Result<storage::ObjectRecord>(errc::kInternal) : std::move(result);
                     pending->wake.cancel();
                   });
    const auto period = std::max<std::chrono::milliseconds>(keepalive, std::chrono::seconds(1));
    if (keepalive.count() == 0) co_await keep_alive();
    std::chrono::milliseconds wait = keepalive;
    while (!pending->result) {
      pending->wake.expires_after(streaming_ ? period : wait);
      co_await pending->wake.async_wait(
          asio::as_tuple(asio::use_awaitable));  // cancelled: the result is in
      if (!pending->result) co_await keep_alive();
    }
    co_return std::move(*pending->result);
  }

  asio::awaitable<void> error(Error e) {
    if (!streaming_) co_return co_await s_.send_error(r_, std::move(e));
    log::info("request {}: CompleteMultipartUpload failed after its 200 head: {}",
              r_.head.request_id, code_name(e.code));
    co_await rest(error_body(e, r_.resource(), r_.head.request_id, s_.host_id()));
  }

  asio::awaitable<void> xml(std::string body) {
    if (!streaming_) co_return co_await s_.send_xml(r_, 200, std::move(body));
    co_await rest(std::move(body));
  }

 private:
  asio::awaitable<void> keep_alive() {
    if (client_gone_) co_return;
    Result<void> sent;
    if (!streaming_) {
      streaming_ = true;
      http::Response head = s_.response(200);
      head.add("Content-Type", "application/xml");
      head.content_length.reset();  // chunked: the length is not known yet
      sent = co_await r_.exchange.write_head(std::move(head));
      std::string first(kXmlDeclaration);
      first += ' ';
      if (sent)
        sent =
            co_await r_.exchange.write_body(std::as_bytes(std::span(first.data(), first.size())));
    } else {
      sent = co_await r_.exchange.write_body(std::as_bytes(std::span(" ", 1)));
    }
    if (!sent) client_gone_ = true;
  }

  asio::awaitable<void> rest(std::string document) {
    const std::string_view body = after_declaration(document);
    if (!client_gone_) {
      auto sent =
          co_await r_.exchange.write_body(std::as_bytes(std::span(body.data(), body.size())));
      if (!sent) client_gone_ = true;
    }
    // (After a failed write the exchange is closing; finish() just ends it.)
    co_await r_.exchange.finish();
  }

  Service& s_;
  Request& r_;
  bool streaming_ = false;
  bool client_gone_ = false;
};

}  // namespace

asio::awaitable<void> create_multipart_upload(Service& s, Request& r) {
  if (auto e = validate_key(r.key)) co_return co_await s.send_error(r, std::move(*e));
  auto bucket = co_await s.bucket_for(r, Access::kWrite);
  if (!bucket) co_return;
  if (auto e = Service::upstream_key_fits(*bucket, r.key))
    co_return co_await s.send_error(r, std::move(*e));
  auto spec = object_spec(r, s.config());
  if (auto* e = std::get_if<Error>(&spec)) co_return co_await s.send_error(r, std::move(*e));
  auto pinning = pin_on_write(s, r, *bucket, 0);
  const bool go_on = co_await std::move(pinning);
  if (!go_on) co_return;
  std::optional<std::string> algorithm;
  std::optional<std::string> type;
  if (auto a = r.header("x-amz-checksum-algorithm")) {
    auto parsed = aws::parse_checksum_algorithm(*a);
    if (!parsed)
      co_return co_await s.send_error(
          r, Error(Code::kInvalidRequest, "Checksum algorithm provided is unsupported."));
    algorithm = std::string(aws::checksum_name(*parsed));
    // S3's defaults: CRC64NVME is full-object only; the others are composite unless asked.
    type = *parsed == aws::ChecksumAlgorithm::kCrc64Nvme ? "FULL_OBJECT" : "COMPOSITE";
  }
  if (auto t = r.header("x-amz-checksum-type")) {
    if (*t != "COMPOSITE" && *t != "FULL_OBJECT")
      co_return co_await s.send_error(
          r, Error(Code::kInvalidRequest, "Value for x-amz-checksum-type header is invalid."));
    if (!algorithm)
      co_return co_await s.send_error(r, Error(Code::kInvalidRequest,
                                               "The x-amz-checksum-type header can only be used "
                                               "with the x-amz-checksum-algorithm header."));
    const bool sha = *algorithm == "SHA1" || *algorithm == "SHA256";
    if ((*t == "FULL_OBJECT" && sha) || (*t == "COMPOSITE" && *algorithm == "CRC64NVME")) {
      co_return co_await s.send_error(
          r, Error(Code::kInvalidRequest, "The " + *algorithm +
                                              " checksum algorithm does not support the " +
                                              std::string(*t) + " checksum type."));
    }
    type = std::string(*t);
  }
  // Counted before creating, not in the creating transaction (which would hold up every commit
  // behind the count): concurrent creates may pass a cap by as many as race it.
  const auto& limits = s.config().multipart;
  auto open = co_await s.store().count_uploads(
      bucket->id, r.auth.user->name,
      std::max(limits.open_uploads_max_per_bucket, limits.open_uploads_max_per_user));
  if (!open) co_return co_await s.send_error(r, from_errc(open.error()));
  if (open->in_bucket >= limits.open_uploads_max_per_bucket ||
      open->of_owner >= limits.open_uploads_max_per_user) {
    const bool bucket_full = open->in_bucket >= limits.open_uploads_max_per_bucket;
    co_return co_await s.send_error(
        r,
        Error(Code::kInvalidRequest, fmt::format("Too many multipart uploads in progress {} (at "
                                                 "most {}): complete or abort some first.",
                                                 bucket_full ? "in this bucket" : "for this user",
                                                 bucket_full ? limits.open_uploads_max_per_bucket
                                                             : limits.open_uploads_max_per_user)));
  }
  auto upload = co_await s.store().create_upload(*bucket, r.key, r.auth.user->name,
                                                 std::get<storage::ObjectSpec>(std::move(spec)),
                                                 algorithm, type);
  if (!upload) co_return co_await s.send_error(r, from_errc(upload.error()));
  http::Response head = s.response(200);
  if (algorithm) head.add("x-amz-checksum-algorithm", *algorithm);
  if (type) head.add("x-amz-checksum-type", *type);
  XmlWriter xml("InitiateMultipartUploadResult");
  xml.element("Bucket", bucket->name);
  xml.element("Key", r.key);
  xml.element("UploadId", upload->upload_id);
  co_await s.send_xml(r, 200, xml.finish(), std::move(head));
}

namespace {

// A part's data, written and finished, with its checksums.
struct WrittenPart {
  std::unique_ptr<storage::ObjectWriter> writer;
  storage::ChecksumSet checksums;
  storage::TeedPart teed;  // write-through: where the upstream holds it too
};

// UploadPartCopy: the part's data comes from an existing object (or a range of it), checksummed
// with the upload's algorithm, or CRC64NVME for the object's default FULL_OBJECT checksum.
asio::awaitable<std::variant<WrittenPart, Error>> copy_part(
    Service& s, Request& r, std::string_view copy_source,
    std::optional<aws::ChecksumAlgorithm> upload_algorithm) {
  auto named = parse_copy_source(copy_source);
  if (auto* e = std::get_if<Error>(&named)) co_return std::move(*e);
  const auto& [bucket_name, key] = std::get<std::pair<std::string, std::string>>(named);
  auto bucket = copy_source_bucket(s.store(), r, bucket_name);
  if (auto* e = std::get_if<Error>(&bucket)) co_return std::move(*e);
  auto opened =
      co_await open_copy_source(s.store(), r, std::get<storage::BucketRecord>(bucket).id, key);
  if (auto* e = std::get_if<Error>(&opened)) co_return std::move(*e);
  storage::ObjectReader& reader = *std::get<std::unique_ptr<storage::ObjectReader>>(opened);
  std::pair<std::uint64_t, std::uint64_t> range{0, reader.object().size_bytes};
  if (auto header = r.header("x-amz-copy-source-range")) {
    auto parsed = parse_copy_source_range(*header, reader.object().size_bytes);
    if (auto* e = std::get_if<Error>(&parsed)) co_return std::move(*e);
    range = std::get<std::pair<std::uint64_t, std::uint64_t>>(parsed);
  }
  if (auto e = check_copy_size(range.second, s.config())) co_return std::move(*e);
  reader.set_range(range.first, range.second);
  auto created = co_await s.store().create_writer(range.second, true);
  if (!created) co_return from_errc(created.error());
  WrittenPart part{std::move(*created), {}, {}};
  aws::Checksummer checksummer(upload_algorithm.value_or(aws::ChecksumAlgorithm::kCrc64Nvme));
  if (auto e = co_await copy_data(reader, *part.writer, &checksummer)) co_return std::move(*e);
  set_checksum(part.checksums, checksummer.algorithm(), checksummer.base64());
  co_return part;
}

// UploadPart: the part's data is the request body (in a write-through bucket, teed to the
// upstream upload as it comes). Sends the error and returns nullopt on failure.
asio::awaitable<std::optional<WrittenPart>> receive_part(
    Service& s, Request& r, const storage::BucketRecord& bucket,
    const storage::UploadRecord& upload, std::uint32_t number,
    std::optional<aws::ChecksumAlgorithm> upload_algorithm) {
  auto requested = read_checksum_request(r);
  if (auto* e = std::get_if<Error>(&requested)) {
    co_await s.send_error(r, std::move(*e));
    co_return std::nullopt;
  }
  ChecksumRequest wanted = std::get<ChecksumRequest>(std::move(requested));
  if (wanted.algorithm && upload_algorithm && *wanted.algorithm != *upload_algorithm) {
    co_await s.send_error(r, Error(Code::kInvalidRequest,
                                   "Checksum Type mismatch occurred, expected checksum Type: " +
                                       std::string(aws::checksum_name(*upload_algorithm)) +
                                       ", actual checksum Type: " +
                                       std::string(aws::checksum_name(*wanted.algorithm))));
    co_return std::nullopt;
  }
  if (!wanted.algorithm) wanted.algorithm = upload_algorithm;  // computed for the Complete
  // An upload created without an algorithm gets S3's default, a FULL_OBJECT CRC64NVME: each
  // part keeps its own CRC64NVME (whatever else its client sent) for Complete to combine.
  const DefaultCrc64 crc64 = upload_algorithm ? DefaultCrc64::kNo : DefaultCrc64::kAlways;
  const bool md5_here = md5_in_body(s.store(), wanted);
  std::vector<http::Header> vouched;
  if (wanted.content_md5) {
    vouched.push_back({"Content-MD5", aws::base64_encode(std::string_view(*wanted.content_md5))});
  }
  Body body(r, std::move(wanted), crc64, md5_here);
  std::unique_ptr<tier::UpstreamPut> passage;
  if (storage::writes_through(bucket.tier) && s.write_through() != nullptr &&
      body.declared_length() && !body.failed()) {
    passage = s.write_through()->put_part(bucket.id, upload, number, *body.declared_length(),
                                          std::move(vouched));
  }
  WrittenPart part;
  part.writer = co_await receive(s, r, body, true, s.config().single_put_max_bytes, passage.get());
  if (!part.writer) co_return std::nullopt;
  if (passage) {
    std::string expected = s.store().digest_is_md5() ? data_etag(*part.writer) : std::string();
    // (Called apart: GCC 12 mishandles temporaries with destructors inside a co_await.)
    auto finishing = passage->finish(std::move(expected), 0);
    tier::UpstreamAnswer teed = co_await std::move(finishing);
    if (teed.kind != tier::UpstreamAnswer::Kind::kStored) {
      log::info("request {}: part {} stays for the Complete to send: {}", r.head.request_id, number,
                teed.cause);
    } else if (!teed.etag.empty()) {
      part.teed = {std::move(teed.upload_id), std::move(teed.etag)};
    }
  }
  if (const auto& c = body.checksum()) set_checksum(part.checksums, c->first, c->second);
  if (const auto& c = body.crc64nvme()) part.checksums.crc64nvme = *c;
  co_return part;
}

}  // namespace

asio::awaitable<void> upload_part(Service& s, Request& r) {
  auto bucket = co_await s.bucket_for(r, Access::kWrite);
  if (!bucket) co_return;
  if (auto e = s.tier_budget(*bucket, r.head.content_length.value_or(0)))
    co_return co_await s.send_error(r, std::move(*e));
  const std::string* number_param = r.param("partNumber");
  const auto number = number_param ? parse_part_number(*number_param) : std::nullopt;
  if (!number) {
    co_return co_await s.send_error(
        r, invalid_part_number(number_param ? std::optional<std::string_view>(*number_param)
                                            : std::nullopt));
  }
  auto found = upload_of(s, r, *bucket);
  if (auto* e = std::get_if<Error>(&found)) co_return co_await s.send_error(r, std::move(*e));
  const storage::UploadRecord& upload = std::get<storage::UploadRecord>(found);
  const std::optional<aws::ChecksumAlgorithm> upload_algorithm =
      upload.checksum_algorithm ? aws::parse_checksum_algorithm(*upload.checksum_algorithm)
                                : std::nullopt;
  const auto copy_source = r.header("x-amz-copy-source");
  std::optional<WrittenPart> written;
  if (copy_source) {
    auto copied = co_await copy_part(s, r, *copy_source, upload_algorithm);
    if (auto* e = std::get_if<Error>(&copied)) co_return co_await s.send_error(r, std::move(*e));
    written = std::get<WrittenPart>(std::move(copied));
  } else {
    written = co_await receive_part(s, r, *bucket, upload, *number, upload_algorithm);
    if (!written) co_return;
  }
  std::string etag = data_etag(*written->writer);
  // (Called apart: GCC 12 mishandles temporaries with destructors inside a co_await.)
  auto committing = s.store().commit_part(std::move(written->writer), upload.upload_id, *number,
                                          written->checksums, etag, std::move(written->teed));
  auto part = co_await std::move(committing);
  if (!part) {
    if (part.error() == errc::kNotFound)
      co_return co_await s.send_error(
          r, Error(Code::kNoSuchUpload).with("UploadId", upload.upload_id));
    co_return co_await s.send_error(r, from_errc(part.error()));
  }
  http::Response head = s.response(200);
  // The part's checksum goes back to the client: SDKs put it in their Complete request.
  for (const auto& c : stored_checksums(part->checksums)) head.add(c.header, c.value);
  if (copy_source) {
    XmlWriter xml("CopyPartResult");
    xml.element("LastModified", iso8601(part->created_ms));
    xml.element("ETag", quoted(part->etag));
    for (const auto& c : stored_checksums(part->checksums)) xml.element(c.xml, c.value);
    co_return co_await s.send_xml(r, 200, xml.finish(), std::move(head));
  }
  head.add("ETag", quoted(part->etag));
  co_await s.send_empty(r, 200, std::move(head));
}

namespace {

std::string completion_result(const storage::BucketRecord& bucket, const std::string& key,
                              const storage::ObjectRecord& object) {
  XmlWriter xml("CompleteMultipartUploadResult");
  xml.element("Location", "/" + bucket.name + "/" + key);
  xml.element("Bucket", bucket.name);
  xml.element("Key", key);
  xml.element("ETag", quoted(object.etag));
  for (const auto& c : stored_checksums(object.checksums)) xml.element(c.xml, c.value);
  if (object.checksums.type) xml.element("ChecksumType", *object.checksums.type);
  return xml.finish();
}

// A Complete retried after the first one succeeded (its answer lost on the way, so the SDK
// sends it again) finds no upload. It gets the first answer again while the object that upload
// made is still the key's current version, as S3 keeps a completed upload answerable; once the
// key holds something else, NoSuchUpload.
std::shared_ptr<const storage::ObjectRecord> completed_object(Service& s, const Request& r,
                                                              const storage::BucketRecord& bucket) {
  const std::string* id = r.param("uploadId");
  if (id == nullptr || id->empty()) return nullptr;
  auto ended = s.store().ended_upload(*id);
  if (!ended || !*ended || !(*ended)->object_id) return nullptr;
  auto current = s.store().head(bucket.id, r.key);
  if (!current || !*current || (*current)->id != *(*ended)->object_id) return nullptr;
  return std::move(*current);
}

// An Abort retried after the first one succeeded gets its 204 again, for kAbortRemembered.
bool was_aborted(Service& s, const Request& r) {
  const std::string* id = r.param("uploadId");
  if (id == nullptr || id->empty()) return false;
  auto ended = s.store().ended_upload(*id);
  return ended && *ended && !(*ended)->object_id &&
         now_ms() - (*ended)->ended_ms < storage::kAbortRemembered.count();
}

}  // namespace

asio::awaitable<void> complete_multipart_upload(Service& s, Request& r) {
  auto bucket = co_await s.bucket_for(r, Access::kWrite);
  if (!bucket) co_return;
  const auto upstream = s.wants_upstream(r, *bucket);
  if (const auto* e = std::get_if<Error>(&upstream)) co_return co_await s.send_error(r, *e);
  auto found = upload_of(s, r, *bucket);
  if (auto* e = std::get_if<Error>(&found)) {
    if (auto done = completed_object(s, r, *bucket)) {
      // A retry whose first answer was lost: it gets the same promise as the first.
      if (std::get<bool>(upstream)) {
        auto waiting = s.wait_upstream_for(*bucket, r.key);
        if (auto waited = co_await std::move(waiting))
          co_return co_await s.send_error(r, std::move(*waited));
      }
      co_return co_await s.send_xml(r, 200, completion_result(*bucket, r.key, *done));
    }
    co_return co_await s.send_error(r, std::move(*e));
  }
  const storage::UploadRecord upload = std::get<storage::UploadRecord>(std::move(found));
  // The parts are here already; the object they make is owed to the upstream only from now.
  if (auto e = s.tier_budget(*bucket, 0)) co_return co_await s.send_error(r, std::move(*e));
  auto condition = write_condition(r);
  if (auto* e = std::get_if<Error>(&condition)) co_return co_await s.send_error(r, std::move(*e));
  auto requested = read_checksum_request(r);
  if (auto* e = std::get_if<Error>(&requested)) co_return co_await s.send_error(r, std::move(*e));
  // A checksum header on Complete is the client's idea of the whole object's checksum
  // (composite "-N" form or not); it is compared below, not computed over this XML body.
  const std::optional<std::string> claimed_object_checksum =
      std::get<ChecksumRequest>(requested).header_value;
  const std::optional<aws::ChecksumAlgorithm> claimed_algorithm =
      std::get<ChecksumRequest>(requested).algorithm;
  Body body(r, ChecksumRequest{}, DefaultCrc64::kNo, false);
  auto text = co_await body.read_all(4 * kMiB);
  if (!text) co_return co_await s.send_error(r, body.error());
  auto parsed = parse_complete_request(*text);
  if (auto* e = std::get_if<Error>(&parsed)) co_return co_await s.send_error(r, std::move(*e));
  const std::vector<ListedPart> listed = std::get<std::vector<ListedPart>>(std::move(parsed));

  if (auto e = check_claimed_algorithm(upload_checksums(upload), claimed_algorithm)) {
    co_return co_await s.send_error(r, std::move(*e));
  }
  std::optional<Error> plan_error;
  // Write-through: the upstream upload the parts were teed into, and the parts it holds as they
  // are here, of those numbered as the object's job numbers them (1..N).
  std::string teed_id;
  std::vector<storage::TierPart> teed_parts;
  auto plan = [&](const storage::UploadRecord& up, const std::vector<storage::PartRecord>& parts)
      -> Result<storage::ObjectStore::CompletionPlan> {
    auto planned =
        plan_completion(up, parts, listed, claimed_object_checksum, is_directory_bucket(r.bucket));
    if (auto* e = std::get_if<Error>(&planned)) {
      plan_error = std::move(*e);
      return errc::kInvalidArgument;
    }
    auto& chosen = std::get<storage::ObjectStore::CompletionPlan>(planned);
    teed_id = up.tier_upload_id;
    teed_parts.clear();
    for (std::size_t i = 0; i < chosen.parts.size() && chosen.parts[i].part_number == i + 1; ++i) {
      const storage::PartRecord& p = chosen.parts[i];
      if (p.tier_etag == p.etag) teed_parts.push_back({p.part_number, p.size_bytes, p.etag});
    }
    return std::move(chosen);
  };
  // With x-hots3-durability: upstream, the wait for the upstream is part of the completion, so
  // that the client hears from the connection meanwhile as it does while parts are joined.
  std::optional<Error> upstream_error;
  auto complete = [&]() -> asio::awaitable<Result<storage::ObjectRecord>> {
    auto joining = s.store().complete_upload(upload.upload_id, plan,
                                             std::get<storage::WriteCondition>(condition));
    auto joined = co_await std::move(joining);
    if (!joined || !std::get<bool>(upstream)) co_return joined;
    if (storage::writes_through(bucket->tier) && s.write_through() != nullptr) {
      // The parts teed as they came: the job sends only what the upstream lacks.
      auto adopting =
          s.write_through()->adopt_parts(bucket->id, r.key, upload.upload_id, std::move(teed_id),
                                         joined->id, std::move(teed_parts));
      co_await std::move(adopting);
    }
    auto waiting = s.wait_upstream_for(*bucket, r.key);
    upstream_error = co_await std::move(waiting);
    if (upstream_error) co_return errc::kUnavailable;
    co_return joined;
  };
  // The plan refers to this frame's locals: run() returns only once the completion has ended.
  CompletionResponse respond(s, r);
  auto completing = complete();
  auto completed =
      co_await respond.run(std::move(completing), s.config().multipart.complete_keepalive);
  if (!completed) {
    if (plan_error) co_return co_await respond.error(std::move(*plan_error));
    if (upstream_error) co_return co_await respond.error(std::move(*upstream_error));
    if (completed.error() == errc::kNotFound) {
      // The same Complete sent twice at once: the other one completed it.
      if (auto done = completed_object(s, r, *bucket))
        co_return co_await respond.xml(completion_result(*bucket, r.key, *done));
      co_return co_await respond.error(
          std::get<storage::WriteCondition>(condition).if_match
              ? Error(Code::kNoSuchKey).with("Key", r.key)
              : Error(Code::kNoSuchUpload).with("UploadId", upload.upload_id));
    }
    co_return co_await respond.error(from_errc(completed.error()));
  }
  co_await respond.xml(completion_result(*bucket, r.key, *completed));
}

asio::awaitable<void> abort_multipart_upload(Service& s, Request& r) {
  auto bucket = co_await s.bucket_for(r, Access::kWrite);
  if (!bucket) co_return;
  auto found = upload_of(s, r, *bucket);
  if (auto* e = std::get_if<Error>(&found)) {
    if (was_aborted(s, r)) co_return co_await s.send_empty(r, 204, s.response(204));
    co_return co_await s.send_error(r, std::move(*e));
  }
  auto aborted = co_await s.store().abort_upload(std::get<storage::UploadRecord>(found).upload_id);
  if (!aborted) {
    if (aborted.error() == errc::kNotFound) {
      if (was_aborted(s, r)) co_return co_await s.send_empty(r, 204, s.response(204));
      co_return co_await s.send_error(
          r, Error(Code::kNoSuchUpload).with("UploadId", *r.param("uploadId")));
    }
    co_return co_await s.send_error(r, from_errc(aborted.error()));
  }
  if (storage::writes_through(bucket->tier) && s.write_through() != nullptr) {
    s.write_through()->abort_parts(std::get<storage::UploadRecord>(found));
  }
  co_await s.send_empty(r, 204, s.response(204));
}

asio::awaitable<void> list_parts(Service& s, Request& r) {
  auto bucket = co_await s.bucket_for(r, Access::kRead);
  if (!bucket) co_return;
  auto found = upload_of(s, r, *bucket);
  if (auto* e = std::get_if<Error>(&found)) co_return co_await s.send_error(r, std::move(*e));
  const storage::UploadRecord& upload = std::get<storage::UploadRecord>(found);
  std::uint32_t max_parts = 1000;
  std::uint32_t marker = 0;
  for (auto [name, out] :
       {std::pair{"max-parts", &max_parts}, std::pair{"part-number-marker", &marker}}) {
    if (const std::string* v = r.param(name)) {
      std::uint32_t n = 0;
      auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
      if (ec != std::errc{} || end != v->data() + v->size()) {
        co_return co_await s.send_error(
            r, Error(Code::kInvalidArgument,
                     std::string("Provided ") + name + " not an integer or within integer range")
                   .with("ArgumentName", name));
      }
      *out = n;
    }
  }
  max_parts = std::min<std::uint32_t>(max_parts, 1000);
  auto parts = co_await s.store().list_parts(upload.id, marker, max_parts + 1);
  if (!parts) co_return co_await s.send_error(r, from_errc(parts.error()));
  const bool truncated = parts->size() > max_parts;
  if (truncated) parts->resize(max_parts);
  XmlWriter xml("ListPartsResult");
  xml.element("Bucket", bucket->name);
  xml.element("Key", upload.key);
  xml.element("UploadId", upload.upload_id);
  xml.open("Initiator");
  xml.element("ID", owner_id(upload.owner));
  xml.element("DisplayName", upload.owner);
  xml.close();
  write_owner(xml, bucket->owner);
  xml.element("StorageClass", storage_class(bucket->name));
  xml.element("PartNumberMarker", static_cast<std::uint64_t>(marker));
  if (!parts->empty())
    xml.element("NextPartNumberMarker", static_cast<std::uint64_t>(parts->back().part_number));
  xml.element("MaxParts", static_cast<std::uint64_t>(max_parts));
  xml.element("IsTruncated", truncated);
  if (upload.checksum_algorithm) xml.element("ChecksumAlgorithm", *upload.checksum_algorithm);
  if (upload.checksum_type) xml.element("ChecksumType", *upload.checksum_type);
  for (const auto& p : *parts) {
    xml.open("Part");
    xml.element("PartNumber", static_cast<std::uint64_t>(p.part_number));
    xml.element("LastModified", iso8601(p.created_ms));
    xml.element("ETag", quoted(p.etag));
    xml.element("Size", p.size_bytes);
    for (const auto& c : stored_checksums(p.checksums)) xml.element(c.xml, c.value);
    xml.close();
  }
  co_await s.send_xml(r, 200, xml.finish());
}

asio::awaitable<void> list_multipart_uploads(Service& s, Request& r) {
  auto bucket = co_await s.bucket_for(r, Access::kRead);
  if (!bucket) co_return;
  storage::UploadListQuery q;
  if (const std::string* v = r.param("prefix")) q.prefix = *v;
  if (const std::string* v = r.param("delimiter")) q.delimiter = *v;
  if (const std::string* v = r.param("key-marker")) q.key_marker = *v;
  if (const std::string* v = r.param("upload-id-marker")) q.upload_id_marker = *v;
  bool url = false;
  if (const std::string* v = r.param("encoding-type")) {
    if (*v != "url")
      co_return co_await s.send_error(
          r, Error(Code::kInvalidArgument, "Invalid Encoding Method specified in Request")
                 .with("ArgumentName", "encoding-type"));
    url = true;
  }
  if (const std::string* v = r.param("max-uploads")) {
    std::uint32_t n = 0;
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc{} || end != v->data() + v->size()) {
      co_return co_await s.send_error(
          r, Error(Code::kInvalidArgument,
                   "Provided max-uploads not an integer or within integer range")
                 .with("ArgumentName", "max-uploads"));
    }
    q.max_uploads = std::min<std::uint32_t>(n, 1000);
  }
  auto page = co_await s.store().list_uploads(bucket->id, q);
  if (!page) co_return co_await s.send_error(r, from_errc(page.error()));
  auto text = [&](std::string_view v) { return url ? aws::uri_encode(v, false) : std::string(v); };
  XmlWriter xml("ListMultipartUploadsResult");
  xml.element("Bucket", bucket->name);
  xml.element("KeyMarker", text(q.key_marker));
  xml.element("UploadIdMarker", q.upload_id_marker);
  if (page->truncated) {
    xml.element("NextKeyMarker", text(page->next_key_marker));
    xml.element("NextUploadIdMarker", page->next_upload_id_marker);
  }
  if (!q.delimiter.empty()) xml.element("Delimiter", text(q.delimiter));
  xml.element("Prefix", text(q.prefix));
  xml.element("MaxUploads", static_cast<std::uint64_t>(q.max_uploads));
  if (url) xml.element("EncodingType", "url");
  xml.element("IsTruncated", page->truncated);
  for (const auto& u : page->uploads) {
    xml.open("Upload");
    xml.element("Key", text(u.key));
    xml.element("UploadId", u.upload_id);
    xml.open("Initiator");
    xml.element("ID", owner_id(u.owner));
    xml.element("DisplayName", u.owner);
    xml.close();
    write_owner(xml, bucket->owner);
    xml.element("StorageClass", storage_class(bucket->name));
    xml.element("Initiated", iso8601(u.created_ms));
    if (u.checksum_algorithm) xml.element("ChecksumAlgorithm", *u.checksum_algorithm);
    xml.close();
  }
  for (const auto& prefix : page->common_prefixes) {
    xml.open("CommonPrefixes");
    xml.element("Prefix", text(prefix));
    xml.close();
  }
  co_await s.send_xml(r, 200, xml.finish());
}

}  // namespace hots3::s3
