// Directory buckets' own operations (S3 Express One Zone): CreateSession, which hands out the
// session credentials the SDKs sign a directory bucket's requests with, and
// ListDirectoryBuckets; ListBuckets lists the general purpose buckets.

#include "acl.h"
#include "names.h"
#include "s3_xml.h"
#include "service.h"
#include "time_format.h"

#include "hots3/aws/checksum.h"

#include <algorithm>
#include <charconv>

namespace hots3::s3 {
namespace {

std::optional<std::uint64_t> whole_number(const std::string& text) {
  std::uint64_t n = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, n);
  if (text.empty() || ec != std::errc{} || p != end) return std::nullopt;
  return n;
}

Error invalid_argument(std::string message, std::string name, const std::string& value) {
  return Error(Code::kInvalidArgument, std::move(message))
      .with("ArgumentName", std::move(name))
      .with("ArgumentValue", value.substr(0, 256));
}

// S3's ListBuckets (general purpose buckets) or ListDirectoryBuckets, as `directory` says.
asio::awaitable<void> list_some_buckets(Service& s, Request& r, bool directory) {
  std::uint64_t max = 1000;
  std::string after;
  if (directory) {
    if (const std::string* m = r.param("max-directory-buckets")) {
      auto n = whole_number(*m);
      if (!n || *n > 1000) {
        Error e = invalid_argument("max-directory-buckets must be 0 to 1000.",
                                   "max-directory-buckets", *m);
        co_return co_await s.send_error(r, std::move(e));
      }
      max = *n == 0 ? 1000 : *n;
    }
    if (const std::string* token = r.param("continuation-token")) {
      auto decoded = aws::base64_decode(*token);
      if (!decoded) {
        Error e = invalid_argument("The continuation token provided is incorrect.",
                                   "continuation-token", *token);
        co_return co_await s.send_error(r, std::move(e));
      }
      after = std::move(*decoded);
    }
  }
  auto buckets = s.store().list_buckets();
  if (!buckets) co_return co_await s.send_error(r, from_errc(buckets.error()));
  std::sort(buckets->begin(), buckets->end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  XmlWriter xml(directory ? "ListAllMyDirectoryBucketsResult" : "ListAllMyBucketsResult");
  if (!directory) write_owner(xml, r.auth.user->name);
  xml.open("Buckets");
  std::uint64_t listed = 0;
  std::string last;
  bool more = false;
  for (const auto& b : *buckets) {
    if (is_directory_bucket(b.name) != directory || b.name <= after) continue;
    if (!allowed(*r.auth.user, b, Access::kRead)) continue;
    if (listed == max) {
      more = true;
      break;
    }
    xml.open("Bucket");
    xml.element("Name", b.name);
    xml.element("CreationDate", iso8601(b.created_ms));
    if (directory) xml.element("BucketRegion", s.config().region);
    xml.close();
    ++listed;
    last = b.name;
  }
  xml.close();
  if (more) xml.element("ContinuationToken", aws::base64_encode(last));
  co_await s.send_xml(r, 200, xml.finish());
}

}  // namespace

asio::awaitable<void> list_buckets(Service& s, Request& r) {
  co_await list_some_buckets(s, r, false);
}

asio::awaitable<void> list_buckets_or_directory_buckets(Service& s, Request& r) {
  // The SDKs send ListDirectoryBuckets as GET / signed for s3express (botocore), or with
  // x-id=ListDirectoryBuckets (the JavaScript and Go SDKs); ListBuckets is signed for s3.
  const std::string* x_id = r.param("x-id");
  const bool directory = x_id != nullptr ? *x_id == "ListDirectoryBuckets" : r.auth.s3express;
  co_await list_some_buckets(s, r, directory);
}

asio::awaitable<void> create_session(Service& s, Request& r) {
  if (r.auth.session != SessionMode::kNone) {
    co_return co_await s.send_error(
        r, Error(Code::kAccessDenied,
                 "A session is created with the user's own credentials, not a session's."));
  }
  SessionMode wanted = SessionMode::kNone;
  if (auto mode = r.header("x-amz-create-session-mode")) {
    if (*mode == "ReadWrite") {
      wanted = SessionMode::kReadWrite;
    } else if (*mode == "ReadOnly") {
      wanted = SessionMode::kReadOnly;
    } else {
      Error e = invalid_argument("x-amz-create-session-mode must be ReadWrite or ReadOnly.",
                                 "x-amz-create-session-mode", std::string(*mode));
      co_return co_await s.send_error(r, std::move(e));
    }
  }
  if (!directory_bucket_zone(r.bucket)) {
    co_return co_await s.send_error(
        r, Error(Code::kInvalidRequest,
                 "Sessions are for directory buckets (names ending in --<zone>--x-s3)."));
  }
  const config::UserConfig& user = *r.auth.user;
  auto found = s.store().find_bucket(r.bucket);
  if (!found) co_return co_await s.send_error(r, from_errc(found.error()));
  bool writable = false;
  bool readable = false;
  if (*found) {
    writable = allowed(user, **found, Access::kWrite);
    readable = writable || allowed(user, **found, Access::kRead);
  } else if (may_create_bucket(user, r.bucket)) {
    // The SDKs create a directory bucket with a session for it (their CreateBucket is signed
    // with one), so whoever may create the bucket may have a session for it before it exists.
    writable = readable = true;
  } else {
    co_return co_await s.send_error(r, Error(Code::kNoSuchBucket).with("BucketName", r.bucket));
  }
  // With no mode asked for, the most the caller may have (S3's rule): ReadWrite, else ReadOnly.
  const SessionMode mode = wanted != SessionMode::kNone ? wanted
                           : writable                   ? SessionMode::kReadWrite
                                                        : SessionMode::kReadOnly;
  if ((mode == SessionMode::kReadWrite && !writable) || !readable)
    co_return co_await s.send_error(r, Code::kAccessDenied);
  const SessionCredentials c = s.sessions().create(user, r.bucket, mode);
  XmlWriter xml("CreateSessionResult");
  xml.open("Credentials");
  xml.element("SessionToken", c.token);
  xml.element("SecretAccessKey", c.secret_key);
  xml.element("AccessKeyId", c.access_key);
  xml.element("Expiration", iso8601(c.expires_ms));
  xml.close();
  co_await s.send_xml(r, 200, xml.finish());
}

asio::awaitable<void> advance_session_clock(Service& s, Request& r) {
  if (!s.config().test_hooks) {
    co_return co_await s.send_error(
        r, Error(Code::kNotImplemented, "The session clock moves only with s3.test_hooks on."));
  }
  if (!r.auth.user->admin) co_return co_await s.send_error(r, Code::kAccessDenied);
  const std::string* seconds = r.param("advance-seconds");
  const std::string text = seconds != nullptr ? *seconds : std::string();
  const auto n = whole_number(text);
  if (!n || *n > 86400) {
    Error e = invalid_argument("advance-seconds must be 0 to 86400.", "advance-seconds", text);
    co_return co_await s.send_error(r, std::move(e));
  }
  s.sessions().advance(std::chrono::seconds(*n));
  co_await s.send_empty(r, 204, s.response(204));
}

}  // namespace hots3::s3
