// The S3 request path: locate (path-style or virtual-hosted bucket, key), authenticate (SigV4
// header, SigV4 presigned, SigV2 presigned), route to the operation, and render errors.

#include "s3_xml.h"
#include "service.h"
#include "time_format.h"

#include "hots3/aws/checksum.h"
#include "hots3/common/clock.h"
#include "hots3/common/logging.h"
#include "hots3/common/random.h"
#include "hots3/common/text.h"
#include "hots3/s3/s3.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <random>
#include <span>
#include <variant>

namespace hots3::s3 {

namespace {

bool glob_match(std::string_view pattern, std::string_view text) {
  // '*' any run, '?' one character; iterative with backtracking to the last '*'.
  std::size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// The name of a query parameter given more than once, if any.
std::optional<std::string> repeated_parameter(const std::vector<aws::QueryParameter>& query) {
  if (query.size() < 2) return std::nullopt;
  std::vector<std::string_view> names;
  names.reserve(query.size());
  for (const auto& p : query) names.emplace_back(p.name);
  std::sort(names.begin(), names.end());
  const auto twice = std::adjacent_find(names.begin(), names.end());
  if (twice == names.end()) return std::nullopt;
  return std::string(*twice);
}

// The name of a header given more than once among those S3 reads as one value (Authorization,
// Host, Range, Expect, Content-*, If-*, X-Amz-*), if any. Others (Via, Accept, ...) may repeat.
std::optional<std::string_view> repeated_header(std::span<const http::HeaderView> headers) {
  auto starts = [](std::string_view name, std::string_view prefix) {
    return name.size() >= prefix.size() && iequals(name.substr(0, prefix.size()), prefix);
  };
  std::array<std::string_view, 32> small{};
  std::vector<std::string_view> large;
  std::size_t count = 0;
  for (const auto& h : headers) {
    const std::string_view name = h.name;
    if (!(starts(name, "x-amz-") || starts(name, "content-") || starts(name, "if-") ||
          iequals(name, "authorization") || iequals(name, "host") || iequals(name, "range") ||
          iequals(name, "expect"))) {
      continue;
    }
    if (count < small.size()) {
      small[count] = name;
    } else {
      if (large.empty()) large.assign(small.begin(), small.end());
      large.push_back(name);
    }
    ++count;
  }
  std::span<std::string_view> names =
      large.empty() ? std::span(small.data(), count) : std::span(large);
  auto less = [](std::string_view a, std::string_view b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
      return std::tolower(static_cast<unsigned char>(x)) <
             std::tolower(static_cast<unsigned char>(y));
    });
  };
  std::sort(names.begin(), names.end(), less);
  const auto twice = std::adjacent_find(names.begin(), names.end(), iequals);
  if (twice == names.end()) return std::nullopt;
  return *twice;
}

}  // namespace

std::string Request::resource() const {
  if (bucket.empty()) return "/";
  return key.empty() ? "/" + bucket : "/" + bucket + "/" + key;
}

Service::Service(storage::ObjectStore& store, const config::S3Config& config,
                 std::vector<config::UserConfig> users)
    : store_(store), config_(config), users_(std::move(users)) {
  for (const auto& u : users_) by_access_key_.emplace(u.access_key, &u);
  std::array<std::byte, 24> id{};
  random_bytes(id);
  host_id_ = aws::base64_encode(id);
}

std::optional<aws::SigningKey> Service::verified_signing_key(const config::UserConfig& user,
                                                             const aws::SigningScope& scope,
                                                             std::string_view string_to_sign,
                                                             std::string_view signature) {
  std::string id = user.access_key;
  id += '/';
  id += scope.to_string();
  std::optional<aws::SigningKey> key;
  {
    std::lock_guard lock(keys_mutex_);
    if (auto it = signing_keys_.find(id); it != signing_keys_.end()) key = it->second;
  }
  const bool cached = key.has_value();
  if (!cached) key = aws::signing_key(user.secret_key, scope);
  if (!aws::signatures_equal(aws::sign(*key, string_to_sign), signature)) return std::nullopt;
  // Only a key that verified a signature is kept: anyone who knows an access key id (every
  // presigned URL shows one) could otherwise fill the cache with scopes of their choosing.
  if (!cached) {
    std::lock_guard lock(keys_mutex_);
    if (signing_keys_.size() >= 4096) signing_keys_.clear();  // days and regions pass; stay bounded
    signing_keys_.emplace(std::move(id), *key);
  }
  return key;
}

const config::UserConfig* Service::user_for(std::string_view access_key) const {
  auto it = by_access_key_.find(std::string(access_key));
  return it == by_access_key_.end() ? nullptr : it->second;
}

http::Response Service::response(const Request& r, unsigned status) const {
  http::Response response(status);
  response.add("x-amz-request-id", std::string(r.head.request_id));
  response.add("x-amz-id-2", host_id_);
  response.add("Server", "hots3");
  return response;
}

asio::awaitable<void> Service::send_error(Request& r, Error error) {
  const unsigned status = http_status(error.code);
  http::Response head = response(r, status);
  if (error.code == Code::kNotModified || r.head.method == http::Method::kHead) {
    // HEAD and 304 carry no body (rclone HEADs every key; a body would break the framing).
    co_await send_empty(r, status, std::move(head));
    co_return;
  }
  head.add("Content-Type", "application/xml");
  std::string body = error_body(error, r.resource(), r.head.request_id, host_id_);
  co_await r.exchange.respond(std::move(head), std::move(body));
}

asio::awaitable<void> Service::send_xml(Request& r, unsigned status, std::string body,
                                        http::Response head) {
  head.status = status;
  head.add("Content-Type", "application/xml");
  co_await r.exchange.respond(std::move(head), std::move(body));
}

asio::awaitable<void> Service::send_empty(Request& r, unsigned status, http::Response head) {
  head.status = status;
  if (r.head.method == http::Method::kHead && head.content_length) {
    // HEAD keeps the Content-Length of what a GET would send; the core sends no body.
    // (The result is bound to a variable: GCC 12 miscompiles `if (co_await ...)` here.)
    auto started = co_await r.exchange.write_head(std::move(head));
    if (started) co_await r.exchange.finish();
    co_return;
  }
  co_await r.exchange.respond(std::move(head), std::string());
}

http::Response Service::protocol_error(http::ProtocolError error, std::string_view request_id,
                                       std::string& body) {
  Error e(Code::kInvalidRequest);
  unsigned status = 400;
  switch (error) {
    case http::ProtocolError::kBadRequest:
      e = Error(Code::kInvalidRequest, "The request could not be parsed.");
      break;
    case http::ProtocolError::kHeaderTooLarge:
      e = Code::kRequestHeaderSectionTooLarge;
      break;
    case http::ProtocolError::kRequestTimeout:
      e = Code::kRequestTimeout;
      break;
    case http::ProtocolError::kTooManyConnections:
      e = Code::kSlowDown;
      break;
    case http::ProtocolError::kUnsupportedVersion:
      e = Error(Code::kInvalidRequest, "Only HTTP/1.0 and HTTP/1.1 are supported.");
      break;
    case http::ProtocolError::kInternalError:
      e = Code::kInternalError;
      break;
  }
  status = http_status(e.code);
  body = error_body(e, "", request_id, host_id_);
  http::Response response(status);
  response.add("Content-Type", "application/xml");
  response.add("x-amz-request-id", std::string(request_id));
  response.add("x-amz-id-2", host_id_);
  response.add("Server", "hots3");
  return response;
}

// ---- locating the bucket and key -----------------------------------------------------------

std::optional<Error> Service::locate(Request& r) {
  const std::string_view target = r.head.target;
  if (target.empty() || target.front() != '/') return Error(Code::kInvalidURI);
  const auto question = target.find('?');
  r.raw_path = target.substr(0, question);
  r.raw_query =
      question == std::string_view::npos ? std::string_view{} : target.substr(question + 1);
  auto path = aws::percent_decode(r.raw_path);
  auto query = aws::parse_query(r.raw_query);
  if (!path || !query) return Error(Code::kInvalidURI);
  r.path = std::move(*path);
  r.query = std::move(*query);
  if (auto repeated = repeated_header(r.head.headers)) {
    // The same for headers: SigV4 signs a repeated header's values joined, an operation reads
    // the first (and two Authorization headers could be read differently by a proxy in front).
    return Error(Code::kInvalidArgument,
                 "The header " + std::string(repeated->substr(0, 256)) + " appears more than once.")
        .with("ArgumentName", std::string(repeated->substr(0, 256)));
  }
  if (auto repeated = repeated_parameter(r.query)) {
    // SigV4 signs every value of a repeated parameter, sorted; an operation reads the first. The
    // same signature would then cover both orders, and a reordering would change what it does.
    return Error(Code::kInvalidArgument,
                 "The query parameter " + repeated->substr(0, 256) + " appears more than once.")
        .with("ArgumentName", repeated->substr(0, 256));
  }

  // Virtual-hosted style: "<bucket>.<domain>[:port]".
  if (!config_.domain.empty()) {
    if (auto host = r.header("host")) {
      std::string_view h = *host;
      if (const auto colon = h.rfind(':');
          colon != std::string_view::npos && h.find(']') == std::string_view::npos)
        h = h.substr(0, colon);
      const std::string suffix = "." + config_.domain;
      if (h.size() > suffix.size() && lower(h.substr(h.size() - suffix.size())) == lower(suffix)) {
        r.bucket = std::string(h.substr(0, h.size() - suffix.size()));
        r.key = r.path.substr(1);
        r.virtual_host = true;
        return std::nullopt;
      }
    }
  }
  // Path style: "/bucket/key" (the key keeps every further '/', leading ones included).
  const std::string_view rest = std::string_view(r.path).substr(1);
  const auto slash = rest.find('/');
  r.bucket = std::string(rest.substr(0, slash));
  r.key = slash == std::string_view::npos ? std::string() : std::string(rest.substr(slash + 1));
  return std::nullopt;
}

// ---- authentication -------------------------------------------------------------------------

std::optional<Error> Service::authenticate(Request& r) {
  if (auto authorization = r.header("authorization")) {
    if (authorization->starts_with("AWS4-HMAC-SHA256"))
      return authenticate_v4_header(r, *authorization);
    if (authorization->starts_with("AWS ")) {
      return Error(
          Code::kInvalidRequest,
          "Signature Version 2 header authentication is not supported; use AWS4-HMAC-SHA256.");
    }
    return Error(Code::kAuthorizationHeaderMalformed, "Unsupported authorization type");
  }
  if (r.has_param("X-Amz-Algorithm") || r.has_param("X-Amz-Signature"))
    return authenticate_v4_query(r);
  if (r.has_param("AWSAccessKeyId") || r.has_param("Signature")) return authenticate_v2_query(r);
  return Error(Code::kAccessDenied, "Anonymous requests are not allowed.");
}

std::optional<Error> Service::payload_mode(Request& r, std::string_view value) {
  Authenticated& a = r.auth;
  if (value == "UNSIGNED-PAYLOAD") {
    a.payload = Payload::kUnsigned;
  } else if (value == "STREAMING-AWS4-HMAC-SHA256-PAYLOAD") {
    a.payload = Payload::kStreamingSigned;
  } else if (value == "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER") {
    a.payload = Payload::kStreamingSignedTrailer;
  } else if (value == "STREAMING-UNSIGNED-PAYLOAD-TRAILER") {
    a.payload = Payload::kStreamingUnsignedTrailer;
  } else if (value.size() == 64 &&
             value.find_first_not_of("0123456789abcdefABCDEF") == std::string_view::npos) {
    a.payload = Payload::kSha256;
    a.payload_sha256 = lower(value);
  } else {
    return Error(
        Code::kInvalidArgument,
        "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, "
        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, or a "
        "valid sha256 value.");
  }
  return std::nullopt;
}

namespace {

// S3's SignatureDoesNotMatch details: what the server signed, for the client to compare. The
// canonical request holds the signed headers, up to the whole header section: echoed in full
// (and again as hex bytes, three characters a byte) a small request would draw a reply many
// times its size. Each text is sent whole only up to kEchoBytesMax, its bytes form only up to
// kEchoHexBytesMax; real requests stay well within both.
constexpr std::size_t kEchoBytesMax = 8 * 1024;
constexpr std::size_t kEchoHexBytesMax = 1024;

Error signature_mismatch(std::string_view access_key, const std::string& string_to_sign,
                         std::string_view provided, const std::string& canonical_request) {
  auto bytes = [](const std::string& s) {
    std::string out;
    out.reserve(s.size() * 3);
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (i != 0) out += ' ';
      out += fmt::format("{:02x}", static_cast<unsigned char>(s[i]));
    }
    return out;
  };
  Error e(Code::kSignatureDoesNotMatch);
  e.with("AWSAccessKeyId", std::string(access_key.substr(0, kEchoBytesMax)))
      .with("StringToSign", string_to_sign.substr(0, kEchoBytesMax))
      .with("SignatureProvided", std::string(provided.substr(0, kEchoBytesMax)));
  if (string_to_sign.size() <= kEchoHexBytesMax) e.with("StringToSignBytes", bytes(string_to_sign));
  if (!canonical_request.empty() && canonical_request.size() <= kEchoBytesMax) {
    e.with("CanonicalRequest", canonical_request);
    if (canonical_request.size() <= kEchoHexBytesMax)
      e.with("CanonicalRequestBytes", bytes(canonical_request));
  }
  return e;
}

// SigV4 must sign the Host header (a signature without it would be good for any endpoint the
// request is replayed against) and every x-amz-* header the request carries: S3's rule, because
// those headers decide what a request does. An unsigned one could be added by anyone holding a
// presigned URL or replaying a request within the clock skew, and would be acted on as the
// signer's: x-amz-copy-source turns a PUT into a copy of whatever the signer may read,
// x-amz-write-offset-bytes into an append, x-amz-rename-source into a rename.
std::optional<Error> unsigned_headers(const Request& r,
                                      const std::vector<std::string>& signed_headers) {
  auto is_signed = [&](std::string_view lower_name) {
    return std::find(signed_headers.begin(), signed_headers.end(), lower_name) !=
           signed_headers.end();
  };
  std::string missing;
  if (!is_signed("host")) missing = "host";
  for (const auto& h : r.head.headers) {
    if (h.name.size() < 6 || !iequals(h.name.substr(0, 6), "x-amz-")) continue;
    const std::string name = lower(h.name);
    if (is_signed(name) || missing.find(name) != std::string::npos) continue;
    if (!missing.empty()) missing += ',';
    missing += name;
  }
  if (missing.empty()) return std::nullopt;
  return Error(Code::kAccessDenied,
               "There were headers present in the request which were not signed")
      .with("HeadersNotSigned", missing.substr(0, kEchoBytesMax));
}

}  // namespace

std::optional<Error> Service::authenticate_v4_header(Request& r, std::string_view authorization) {
  auto parsed = aws::parse_authorization(authorization);
  if (auto* e = std::get_if<aws::ParseError>(&parsed))
    return Error(Code::kAuthorizationHeaderMalformed, e->message);
  auto& a = std::get<aws::Authorization>(parsed);
  const config::UserConfig* user = user_for(a.access_key);
  if (user == nullptr) return Error(Code::kInvalidAccessKeyId).with("AWSAccessKeyId", a.access_key);
  if (a.scope.service != "s3") {
    return Error(Code::kAuthorizationHeaderMalformed,
                 "The authorization header is malformed; incorrect service \"" + a.scope.service +
                     "\". This endpoint belongs to \"s3\".");
  }
  if (config_.region_check && a.scope.region != config_.region) {
    return Error(Code::kAuthorizationHeaderMalformed,
                 "The authorization header is malformed; the region '" + a.scope.region +
                     "' is wrong; expecting '" + config_.region + "'")
        .with("Region", config_.region);
  }
  if (auto e = unsigned_headers(r, a.signed_headers)) return e;
  auto amz_date = r.header("x-amz-date");
  if (!amz_date)
    return Error(Code::kAccessDenied,
                 "AWS authentication requires a valid Date or x-amz-date header");
  const auto signed_at = parse_amz_date(*amz_date);
  if (!signed_at)
    return Error(Code::kAccessDenied,
                 "AWS authentication requires a valid Date or x-amz-date header");
  if (amz_date->substr(0, 8) != a.scope.date) {
    return Error(Code::kAuthorizationHeaderMalformed,
                 "Invalid credential date \"" + a.scope.date +
                     "\". This date is not the same as X-Amz-Date: \"" +
                     std::string(amz_date->substr(0, 8)) + "\".");
  }
  const std::int64_t now = now_ms();
  const std::int64_t skew_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.clock_skew_max).count();
  if (*signed_at > now + skew_ms || *signed_at < now - skew_ms) {
    return Error(Code::kRequestTimeTooSkewed)
        .with("RequestTime", std::string(*amz_date))
        .with("ServerTime", iso8601(now))
        .with("MaxAllowedSkewMilliseconds", std::to_string(skew_ms));
  }
  auto content_sha256 = r.header("x-amz-content-sha256");
  if (!content_sha256)
    return Error(Code::kInvalidRequest,
                 "Missing required header for this request: x-amz-content-sha256");
  if (auto e = payload_mode(r, *content_sha256)) return e;

  const aws::CanonicalInput input{
      .method = r.head.method_string,
      .path = r.path,
      .query = &r.query,
      .exclude_query = {},
      .header_values =
          [&r](std::string_view name) {
            std::vector<std::string_view> values;
            for (const auto& h : r.head.headers) {
              if (iequals(h.name, name)) values.push_back(h.value);
            }
            return values;
          },
      .signed_headers = &a.signed_headers,
      .payload_hash = *content_sha256,
  };
  const std::string canonical = aws::canonical_request(input);
  const std::string to_sign = aws::string_to_sign(*amz_date, a.scope, canonical);
  auto key = verified_signing_key(*user, a.scope, to_sign, a.signature);
  if (!key) return signature_mismatch(a.access_key, to_sign, a.signature, canonical);
  r.auth.user = user;
  if (r.auth.payload == Payload::kStreamingSigned ||
      r.auth.payload == Payload::kStreamingSignedTrailer) {
    r.auth.signing =
        aws::AwsChunkedDecoder::Signing{*key, std::string(*amz_date), a.scope, a.signature};
  }
  return std::nullopt;
}

std::optional<Error> Service::authenticate_v4_query(Request& r) {
  auto parsed = aws::parse_presigned_v4(r.query);
  if (auto* e = std::get_if<aws::ParseError>(&parsed))
    return Error(Code::kAuthorizationQueryParametersError, e->message);
  auto& p = std::get<aws::PresignedV4>(parsed);
  const config::UserConfig* user = user_for(p.authorization.access_key);
  if (user == nullptr)
    return Error(Code::kInvalidAccessKeyId).with("AWSAccessKeyId", p.authorization.access_key);
  if (p.authorization.scope.service != "s3") {
    return Error(Code::kAuthorizationQueryParametersError,
                 "Error parsing the X-Amz-Credential parameter; incorrect service \"" +
                     p.authorization.scope.service + "\". This endpoint belongs to \"s3\".");
  }
  if (config_.region_check && p.authorization.scope.region != config_.region) {
    return Error(Code::kAuthorizationQueryParametersError,
                 "Error parsing the X-Amz-Credential parameter; the region '" +
                     p.authorization.scope.region + "' is wrong; expecting '" + config_.region +
                     "'")
        .with("Region", config_.region);
  }
  if (auto e = unsigned_headers(r, p.authorization.signed_headers)) return e;
  const auto signed_at = parse_amz_date(p.amz_date);
  if (!signed_at)
    return Error(Code::kAuthorizationQueryParametersError,
                 "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"");
  const std::int64_t now = now_ms();
  const std::int64_t skew_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(config_.clock_skew_max).count();
  if (*signed_at > now + skew_ms) {
    // S3's words and details (X-Amz-Date in epoch milliseconds, as S3 writes it).
    return Error(Code::kAccessDenied, "Request is not yet valid")
        .with("X-Amz-Date", std::to_string(*signed_at))
        .with("Expires", iso8601(*signed_at + static_cast<std::int64_t>(p.expires_s) * 1000))
        .with("ServerTime", iso8601(now));
  }
  if (now > *signed_at + static_cast<std::int64_t>(p.expires_s) * 1000) {
    return Error(Code::kExpiredPresignedRequest)
        .with("X-Amz-Expires", std::to_string(p.expires_s))
        .with("Expires", iso8601(*signed_at + static_cast<std::int64_t>(p.expires_s) * 1000))
        .with("ServerTime", iso8601(now));
  }
  const std::string* hash_param = r.param("X-Amz-Content-Sha256");
  const std::string payload_hash = hash_param != nullptr ? *hash_param : "UNSIGNED-PAYLOAD";
  if (auto e = payload_mode(r, payload_hash)) return e;
  if (r.auth.payload != Payload::kSha256 && r.auth.payload != Payload::kUnsigned) {
    // An aws-chunked stream is signed chunk by chunk from the seed signature of an Authorization
    // header; a URL signed once cannot vouch for chunks (S3 takes none on presigned requests).
    return Error(Code::kInvalidRequest,
                 "Presigned requests do not take aws-chunked payloads: "
                 "sign UNSIGNED-PAYLOAD or the payload's SHA-256.");
  }
  const aws::CanonicalInput input{
      .method = r.head.method_string,
      .path = r.path,
      .query = &r.query,
      .exclude_query = "X-Amz-Signature",
      .header_values =
          [&r](std::string_view name) {
            std::vector<std::string_view> values;
            for (const auto& h : r.head.headers) {
              if (iequals(h.name, name)) values.push_back(h.value);
            }
            return values;
          },
      .signed_headers = &p.authorization.signed_headers,
      .payload_hash = payload_hash,
  };
  const std::string canonical = aws::canonical_request(input);
  const std::string to_sign = aws::string_to_sign(p.amz_date, p.authorization.scope, canonical);
  if (!verified_signing_key(*user, p.authorization.scope, to_sign, p.authorization.signature)) {
    return signature_mismatch(p.authorization.access_key, to_sign, p.authorization.signature,
                              canonical);
  }
  r.auth.user = user;
  return std::nullopt;
}

std::optional<Error> Service::authenticate_v2_query(Request& r) {
  if (!config_.sigv2) {
    return Error(Code::kInvalidRequest,
                 "The authorization mechanism you have provided is not supported. Please use "
                 "AWS4-HMAC-SHA256.");
  }
  const std::string* access_key_param = r.param("AWSAccessKeyId");
  const std::string* expires_param = r.param("Expires");
  const std::string* signature_param = r.param("Signature");
  if (access_key_param == nullptr || expires_param == nullptr || signature_param == nullptr) {
    return Error(Code::kAccessDenied,
                 "Query-string authentication requires the Signature, Expires and AWSAccessKeyId "
                 "parameters");
  }
  const std::string& access_key = *access_key_param;
  const std::string& expires = *expires_param;
  const std::string& signature = *signature_param;
  const config::UserConfig* user = user_for(access_key);
  if (user == nullptr) return Error(Code::kInvalidAccessKeyId).with("AWSAccessKeyId", access_key);
  std::int64_t expires_s = 0;
  if (auto [p, ec] = std::from_chars(expires.data(), expires.data() + expires.size(), expires_s);
      ec != std::errc{} || p != expires.data() + expires.size() || expires_s < 0) {
    return Error(Code::kAccessDenied,
                 "Invalid date (should be seconds since epoch): " + expires.substr(0, 64));
  }
  // Compared in seconds: a client-chosen Expires times 1000 could overflow.
  const std::int64_t now_s = now_ms() / 1000;
  if (now_s > expires_s) {
    return Error(Code::kExpiredPresignedRequest)
        .with("Expires", http_date(expires_s * 1000))
        .with("ServerTime", http_date(now_ms()));
  }
  if (expires_s - now_s > aws::kPresignedLifetimeSecondsMax) {
    // The lifetime SigV4 URLs have at most (X-Amz-Expires); without it a leaked URL would be
    // good for ever.
    // (Expires is echoed as sent: in milliseconds it could overflow.)
    return Error(Code::kAccessDenied, "Expires must be at most 604800 seconds (7 days) from now")
        .with("Expires", expires.substr(0, 32))
        .with("ServerTime", http_date(now_ms()));
  }
  // CanonicalizedAmzHeaders: x-amz-* headers, lower-cased, sorted, "name:value\n".
  std::vector<std::pair<std::string, std::string>> amz;
  for (const auto& h : r.head.headers) {
    std::string name = lower(h.name);
    if (name.starts_with("x-amz-")) amz.emplace_back(std::move(name), std::string(h.value));
  }
  std::sort(amz.begin(), amz.end());
  std::string amz_headers;
  for (std::size_t i = 0; i < amz.size(); ++i) {
    if (i > 0 && amz[i].first == amz[i - 1].first) {
      amz_headers.back() = ',';
      amz_headers += amz[i].second + "\n";
      continue;
    }
    amz_headers += amz[i].first + ":" + amz[i].second + "\n";
  }
  const std::string path =
      r.virtual_host ? "/" + r.bucket + std::string(r.raw_path) : std::string(r.raw_path);
  const std::string to_sign =
      aws::v2_string_to_sign(r.head.method_string, r.header("content-md5").value_or(""),
                             r.header("content-type").value_or(""), expires, amz_headers,
                             aws::v2_canonical_resource(path, r.query));
  if (!aws::signatures_equal(aws::v2_sign(user->secret_key, to_sign), signature)) {
    return signature_mismatch(access_key, to_sign, signature, "");
  }
  r.auth.user = user;
  r.auth.payload = Payload::kUnsigned;
  return std::nullopt;
}

// ---- authorization --------------------------------------------------------------------------

bool Service::allowed(const config::UserConfig& user, const storage::BucketRecord& bucket,
                      Access access) const {
  if (user.admin || bucket.owner == user.name) return true;
  if (access == Access::kOwner) return false;
  return std::any_of(user.grants.begin(), user.grants.end(), [&](const config::Grant& g) {
    return glob_match(g.bucket, bucket.name) && (g.owner.empty() || g.owner == bucket.owner) &&
           (access == Access::kRead ? g.read : g.write);
  });
}

bool Service::may_create_bucket(const config::UserConfig& user, std::string_view name) const {
  if (user.admin) return true;
  return std::any_of(user.create_buckets.begin(), user.create_buckets.end(),
                     [&](const std::string& pattern) { return glob_match(pattern, name); });
}

asio::awaitable<std::optional<storage::BucketRecord>> Service::bucket_for(Request& r,
                                                                          Access access) {
  auto found = store_.find_bucket(r.bucket);
  if (!found) {
    co_await send_error(r, from_errc(found.error()));
    co_return std::nullopt;
  }
  if (!*found) {
    co_await send_error(r, Error(Code::kNoSuchBucket).with("BucketName", r.bucket));
    co_return std::nullopt;
  }
  if (!allowed(*r.auth.user, **found, access)) {
    co_await send_error(r, Code::kAccessDenied);
    co_return std::nullopt;
  }
  co_return std::move(*found);
}

// ---- routing --------------------------------------------------------------------------------

asio::awaitable<void> Service::handle(http::Exchange& exchange) {
  Request r(exchange);
  if (auto e = locate(r)) co_return co_await send_error(r, std::move(*e));
  if (auto e = authenticate(r)) {
    log::debug("request {}: {} {}: authentication failed: {}", r.head.request_id,
               r.head.method_string, http::loggable_target(r.head.target), code_name(e->code));
    co_return co_await send_error(r, std::move(*e));
  }
  co_await dispatch(r);
}

// Routing is an allow-list. S3 picks an operation by the method, by what the path names (the
// service, a bucket, an object) and by a sub-resource parameter (?acl, ?uploads, ?metadataTable,
// ...). Every operation hots3 implements is a row of kRoutes. A request naming a sub-resource
// that no row takes for its method answers NotImplemented and never falls through to the plain
// operation: DELETE /bucket?metadataTable taken as DeleteBucket would delete the bucket, PUT
// /bucket/key?retention taken as PutObject would overwrite the object. Parameters that are not
// sub-resources (list-type, prefix, x-id=PutObject, a typo) select nothing and are left to the
// operation, which ignores what it does not know, as S3 does.

namespace {

enum class Target : std::uint8_t { kService, kBucket, kObject };
using Operation = asio::awaitable<void> (*)(Service&, Request&);

struct Route {
  http::Method method;
  Target target;
  std::string_view subresource;  // "" = none
  Operation operation;
};

// Every sub-resource of the S3 API (the REST paths of its operations), implemented or not.
// A request naming one of these is routed by it; hots3 implements the ones in kRoutes.
constexpr std::string_view kSubresources[] = {"abac",
                                              "accelerate",
                                              "acl",
                                              "analytics",
                                              "annotation",
                                              "attributes",
                                              "cors",
                                              "delete",
                                              "encryption",
                                              "intelligent-tiering",
                                              "inventory",
                                              "legal-hold",
                                              "lifecycle",
                                              "location",
                                              "logging",
                                              "metadataAnnotationTable",
                                              "metadataConfiguration",
                                              "metadataInventoryTable",
                                              "metadataJournalTable",
                                              "metadataTable",
                                              "metrics",
                                              "notification",
                                              "object-lock",
                                              "ownershipControls",
                                              "policy",
                                              "policyStatus",
                                              "publicAccessBlock",
                                              "renameObject",
                                              "replication",
                                              "requestPayment",
                                              "restore",
                                              "retention",
                                              "select",
                                              "session",
                                              "tagging",
                                              "torrent",
                                              "uploadId",
                                              "uploads",
                                              "versioning",
                                              "versions",
                                              "website"};

asio::awaitable<void> list_objects_v1_or_v2(Service& s, Request& r) {
  const std::string* list_type = r.param("list-type");
  co_await list_objects(s, r, list_type != nullptr && *list_type == "2");
}
asio::awaitable<void> get_object_body(Service& s, Request& r) { co_await get_object(s, r, false); }
asio::awaitable<void> head_object(Service& s, Request& r) { co_await get_object(s, r, true); }
// PUT /bucket/key: CopyObject when x-amz-copy-source names a source, else PutObject (which
// takes x-amz-write-offset-bytes, an append, as well).
asio::awaitable<void> put_or_copy_object(Service& s, Request& r) {
  if (r.header("x-amz-copy-source")) co_return co_await copy_object(s, r);
  co_await put_object(s, r);
}

using http::Method;
constexpr Route kRoutes[] = {
    {Method::kGet, Target::kService, "", list_buckets},

    {Method::kGet, Target::kBucket, "", list_objects_v1_or_v2},
    {Method::kGet, Target::kBucket, "location", get_bucket_location},
    {Method::kGet, Target::kBucket, "uploads", list_multipart_uploads},
    // Bucket configuration hots3 does not have: answered truthfully (none, owner only).
    {Method::kGet, Target::kBucket, "acl", bucket_subresource},
    {Method::kGet, Target::kBucket, "versioning", bucket_subresource},
    {Method::kGet, Target::kBucket, "policy", bucket_subresource},
    {Method::kGet, Target::kBucket, "cors", bucket_subresource},
    {Method::kGet, Target::kBucket, "lifecycle", bucket_subresource},
    {Method::kGet, Target::kBucket, "tagging", bucket_subresource},
    {Method::kGet, Target::kBucket, "encryption", bucket_subresource},
    {Method::kHead, Target::kBucket, "", head_bucket},
    {Method::kPut, Target::kBucket, "", create_bucket},
    {Method::kPut, Target::kBucket, "acl", bucket_subresource},  // the owner-only ACL it has
    {Method::kDelete, Target::kBucket, "", delete_bucket},
    {Method::kPost, Target::kBucket, "delete", delete_objects},

    {Method::kGet, Target::kObject, "", get_object_body},
    {Method::kHead, Target::kObject, "", head_object},
    {Method::kPut, Target::kObject, "", put_or_copy_object},
    {Method::kDelete, Target::kObject, "", delete_object},
    {Method::kGet, Target::kObject, "acl", object_subresource},
    {Method::kPut, Target::kObject, "acl", object_subresource},  // the owner-only ACL it has
    {Method::kGet, Target::kObject, "tagging", object_subresource},
    {Method::kPut, Target::kObject, "renameObject", rename_object},  // S3 Express
    {Method::kPost, Target::kObject, "uploads", create_multipart_upload},
    {Method::kPut, Target::kObject, "uploadId", upload_part},  // and UploadPartCopy
    {Method::kPost, Target::kObject, "uploadId", complete_multipart_upload},
    {Method::kDelete, Target::kObject, "uploadId", abort_multipart_upload},
    {Method::kGet, Target::kObject, "uploadId", list_parts},
};

// What routing found: the operation, or why there is none.
std::variant<Operation, Error> route(const Request& r) {
  const Target target = r.bucket.empty() ? Target::kService
                        : r.key.empty()  ? Target::kBucket
                                         : Target::kObject;
  std::string_view subresource;
  for (const auto& p : r.query) {
    if (std::find(std::begin(kSubresources), std::end(kSubresources), p.name) ==
        std::end(kSubresources))
      continue;
    if (!subresource.empty() && subresource != p.name) {
      return Error(Code::kNotImplemented, "A request with both the " + std::string(subresource) +
                                              " and the " + p.name +
                                              " sub-resource is not supported.");
    }
    subresource = p.name;
  }
  // UploadPart names its upload; a partNumber without one is still a part upload (to no upload:
  // NoSuchUpload), never a PutObject that would replace the object.
  if (subresource.empty() && r.head.method == Method::kPut && target == Target::kObject &&
      r.has_param("partNumber")) {
    subresource = "uploadId";
  }
  for (const Route& row : kRoutes) {
    if (row.target == target && row.subresource == subresource && row.method == r.head.method)
      return row.operation;
  }
  if (!subresource.empty()) {
    return Error(Code::kNotImplemented, "The " + std::string(subresource) +
                                            " sub-resource is not implemented by hots3 for " +
                                            std::string(r.head.method_string) + ".");
  }
  // POST with no sub-resource is an HTML form upload (PostObject), which hots3 does not do.
  if (r.head.method == Method::kPost)
    return Error(Code::kNotImplemented, "This POST request is not supported.");
  return Error(Code::kMethodNotAllowed);
}

}  // namespace

asio::awaitable<void> Service::dispatch(Request& r) {
  auto routed = route(r);
  if (auto* e = std::get_if<Error>(&routed)) co_return co_await send_error(r, std::move(*e));
  co_await std::get<Operation>(routed)(*this, r);
}

std::unique_ptr<http::Handler> make_handler(storage::ObjectStore& store,
                                            const config::S3Config& config,
                                            std::vector<config::UserConfig> users) {
  return std::make_unique<Service>(store, config, std::move(users));
}

}  // namespace hots3::s3
