// Who signed a request: SigV4 in the Authorization header, SigV4 presigned URLs, SigV2 presigned
// URLs, verified against the configured users' keys.

#include "authentication.h"

#include "time_format.h"

#include "hots3/common/clock.h"
#include "hots3/common/logging.h"
#include "hots3/common/text.h"
#include "hots3/common/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace hots3::s3 {

Authenticator::UserTable::UserTable(std::vector<config::UserConfig> all) : users(std::move(all)) {
  for (const auto& u : users) {
    by_access_key.emplace(u.access_key, &u);
    by_name.emplace(u.name, &u);
  }
}

Authenticator::Authenticator(const config::S3Config& config, std::vector<config::UserConfig> users)
    : config_(config),
      sessions_(config.session_key, [this](std::string_view name) -> const config::UserConfig* {
        const UserTable& t = table();
        auto it = t.by_name.find(name);
        return it == t.by_name.end() ? nullptr : it->second;
      }) {
  tables_.push_back(std::make_unique<const UserTable>(std::move(users)));
  table_.store(tables_.back().get(), std::memory_order_release);
}

bool Authenticator::set_users(std::vector<config::UserConfig> users) {
  const std::lock_guard lock(tables_mutex_);
  if (users == tables_.back()->users) return false;
  tables_.push_back(std::make_unique<const UserTable>(std::move(users)));
  table_.store(tables_.back().get(), std::memory_order_release);
  // What the old users' keys verified is no use now (entries of the new users come back on their
  // next request); entries a verification in flight still adds name an old user and are skipped.
  const std::lock_guard keys_lock(keys_mutex_);
  signing_keys_.clear();
  return true;
}

std::optional<aws::SigningKey> Authenticator::verified_signing_key(const config::UserConfig& user,
                                                                   const aws::SigningScope& scope,
                                                                   std::string_view string_to_sign,
                                                                   std::string_view signature) {
  // (Written into this thread's buffer: the name is looked up, and kept only when new.)
  thread_local std::string id;
  id.assign(user.access_key).append("/").append(scope.date).append("/").append(scope.region);
  id.append("/").append(scope.service);
  std::optional<aws::SigningKey> key;
  {
    std::lock_guard lock(keys_mutex_);
    if (auto it = signing_keys_.find(id); it != signing_keys_.end() && it->second.user == &user)
      key = it->second.key;
  }
  const bool cached = key.has_value();
  if (!cached) key = aws::signing_key(user.secret_key, scope);
  if (!aws::signatures_equal(aws::sign(*key, string_to_sign), signature)) return std::nullopt;
  // Only a key that verified a signature is kept: anyone who knows an access key id (every
  // presigned URL shows one) could otherwise fill the cache with scopes of their choosing.
  if (!cached) {
    std::lock_guard lock(keys_mutex_);
    if (signing_keys_.size() >= 4096) signing_keys_.clear();  // days and regions pass; stay bounded
    signing_keys_.insert_or_assign(id, CachedKey{.user = &user, .key = *key});
  }
  return key;
}

const config::UserConfig* Authenticator::user_for(std::string_view access_key) const {
  const UserTable& t = table();
  auto it = t.by_access_key.find(access_key);
  return it == t.by_access_key.end() ? nullptr : it->second;
}

std::optional<Error> Authenticator::authenticate(Request& r) {
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

std::optional<Error> Authenticator::payload_mode(Request& r, std::string_view value) {
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
constexpr std::size_t kEchoBytesMax = 8 * kKiB;
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
  // (Signed header names are lower-case; the request's are compared without a lower-case copy.)
  auto is_signed = [&](std::string_view name) {
    return std::any_of(signed_headers.begin(), signed_headers.end(),
                       [name](const std::string& s) { return iequals(s, name); });
  };
  std::string missing;
  if (!is_signed("host")) missing = "host";
  for (const auto& h : r.head.headers) {
    if (h.name.size() < 6 || !iequals(h.name.substr(0, 6), "x-amz-") || is_signed(h.name)) continue;
    const std::string name = lower(h.name);
    if (missing.find(name) != std::string::npos) continue;
    if (!missing.empty()) missing += ',';
    missing += name;
  }
  if (missing.empty()) return std::nullopt;
  return Error(Code::kAccessDenied,
               "There were headers present in the request which were not signed")
      .with("HeadersNotSigned", missing.substr(0, kEchoBytesMax));
}

// The scope's service must be s3 (or s3express: the SDKs sign requests for directory buckets
// so), and with `region_check` its region this endpoint's. `code` and `context` say where the
// scope was ("The authorization header is malformed").
std::optional<Error> check_scope(const aws::SigningScope& scope, const config::S3Config& config,
                                 Code code, std::string_view context) {
  if (scope.service != "s3" && scope.service != "s3express") {
    return Error(code, std::string(context) + "; incorrect service \"" + scope.service +
                           "\". This endpoint belongs to \"s3\".");
  }
  if (config.region_check && scope.region != config.region) {
    return Error(code, std::string(context) + "; the region '" + scope.region +
                           "' is wrong; expecting '" + config.region + "'")
        .with("Region", config.region);
  }
  return std::nullopt;
}

// The canonical request of `r` and the string to sign made of it, as SigV4 defines them.
struct SignedText {
  std::string canonical;
  std::string to_sign;
};
SignedText signed_text(const Request& r, const aws::Authorization& a, std::string_view amz_date,
                       std::string_view payload_hash, std::string_view exclude_query) {
  const aws::CanonicalInput input{
      .method = r.head.method_string,
      .path = r.path,
      .query = &r.query,
      .exclude_query = exclude_query,
      .header_values =
          [&r](std::string_view name, std::vector<std::string_view>& values) {
            for (const auto& h : r.head.headers) {
              if (iequals(h.name, name)) values.push_back(h.value);
            }
          },
      .signed_headers = &a.signed_headers,
      .payload_hash = payload_hash,
  };
  SignedText text;
  text.canonical = aws::canonical_request(input);
  text.to_sign = aws::string_to_sign(amz_date, a.scope, text.canonical);
  return text;
}

// A presigned URL is good from its X-Amz-Date (less the allowed skew) for X-Amz-Expires seconds.
std::optional<Error> check_presigned_window(std::int64_t signed_at_ms, std::uint64_t expires_s,
                                            std::chrono::milliseconds skew) {
  const std::int64_t now = coarse_now_ms();
  const std::int64_t expires_ms = signed_at_ms + static_cast<std::int64_t>(expires_s) * 1000;
  if (signed_at_ms > now + skew.count()) {
    // S3's words and details (X-Amz-Date in epoch milliseconds, as S3 writes it).
    return Error(Code::kAccessDenied, "Request is not yet valid")
        .with("X-Amz-Date", std::to_string(signed_at_ms))
        .with("Expires", iso8601(expires_ms))
        .with("ServerTime", iso8601(now));
  }
  if (now > expires_ms) {
    return Error(Code::kExpiredPresignedRequest)
        .with("X-Amz-Expires", std::to_string(expires_s))
        .with("Expires", iso8601(expires_ms))
        .with("ServerTime", iso8601(now));
  }
  return std::nullopt;
}

}  // namespace

std::optional<Error> Authenticator::authenticate_v4_header(Request& r,
                                                           std::string_view authorization) {
  // This thread's, its strings' room kept from request to request (nothing here waits, and
  // nothing keeps a reference to it).
  thread_local aws::Authorization a;
  if (auto e = aws::parse_authorization(authorization, a))
    return Error(Code::kAuthorizationHeaderMalformed, e->message);
  // Signed with S3 Express session credentials: their token says whose they are.
  const auto token = r.header("x-amz-s3session-token");
  const config::UserConfig* user = token ? nullptr : user_for(a.access_key);
  if (!token && user == nullptr)
    return Error(Code::kInvalidAccessKeyId).with("AWSAccessKeyId", a.access_key);
  if (auto e = check_scope(a.scope, config_, Code::kAuthorizationHeaderMalformed,
                           "The authorization header is malformed"))
    return e;
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
  const std::int64_t now = coarse_now_ms();
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

  const SignedText text = signed_text(r, a, *amz_date, *content_sha256, {});
  std::optional<aws::SigningKey> key;
  if (token) {
    auto verified = verify_session(r, a, *token, text.to_sign, text.canonical);
    if (auto* e = std::get_if<Error>(&verified)) return std::move(*e);
    key = std::get<aws::SigningKey>(verified);
  } else {
    key = verified_signing_key(*user, a.scope, text.to_sign, a.signature);
    if (!key) return signature_mismatch(a.access_key, text.to_sign, a.signature, text.canonical);
    r.auth.user = user;
  }
  r.auth.s3express = a.scope.service == "s3express";
  if (r.auth.payload == Payload::kStreamingSigned ||
      r.auth.payload == Payload::kStreamingSignedTrailer) {
    r.auth.signing =
        aws::AwsChunkedDecoder::Signing{*key, std::string(*amz_date), a.scope, a.signature};
  }
  return std::nullopt;
}

std::variant<aws::SigningKey, Error> Authenticator::verify_session(
    Request& r, const aws::Authorization& a, std::string_view token,
    const std::string& string_to_sign, const std::string& canonical_request) {
  if (a.scope.service != "s3express") {
    return Error(
        Code::kAuthorizationHeaderMalformed,
        "Session credentials sign for the service \"s3express\", not \"" + a.scope.service + "\".");
  }
  auto verified =
      sessions_.verify(a.access_key, token, r.bucket, a.scope, string_to_sign, a.signature);
  if (auto* e = std::get_if<Error>(&verified)) {
    if (e->code == Code::kSignatureDoesNotMatch)
      return signature_mismatch(a.access_key, string_to_sign, a.signature, canonical_request);
    return std::move(*e);
  }
  const auto& v = std::get<Sessions::Verified>(verified);
  r.auth.user = v.user;
  r.auth.session = v.mode;
  return v.signing_key;
}

std::optional<Error> Authenticator::authenticate_v4_query(Request& r) {
  auto parsed = aws::parse_presigned_v4(r.query);
  if (auto* e = std::get_if<aws::ParseError>(&parsed))
    return Error(Code::kAuthorizationQueryParametersError, e->message);
  auto& p = std::get<aws::PresignedV4>(parsed);
  const std::string* token = r.param("X-Amz-S3session-Token");
  const config::UserConfig* user =
      token != nullptr ? nullptr : user_for(p.authorization.access_key);
  if (token == nullptr && user == nullptr)
    return Error(Code::kInvalidAccessKeyId).with("AWSAccessKeyId", p.authorization.access_key);
  if (auto e = check_scope(p.authorization.scope, config_, Code::kAuthorizationQueryParametersError,
                           "Error parsing the X-Amz-Credential parameter"))
    return e;
  if (auto e = unsigned_headers(r, p.authorization.signed_headers)) return e;
  const auto signed_at = parse_amz_date(p.amz_date);
  if (!signed_at)
    return Error(Code::kAuthorizationQueryParametersError,
                 "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"");
  if (auto e = check_presigned_window(
          *signed_at, p.expires_s,
          std::chrono::duration_cast<std::chrono::milliseconds>(config_.clock_skew_max)))
    return e;
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
  const SignedText text =
      signed_text(r, p.authorization, p.amz_date, payload_hash, "X-Amz-Signature");
  if (token != nullptr) {
    auto verified = verify_session(r, p.authorization, *token, text.to_sign, text.canonical);
    if (auto* e = std::get_if<Error>(&verified)) return std::move(*e);
  } else {
    if (!verified_signing_key(*user, p.authorization.scope, text.to_sign,
                              p.authorization.signature)) {
      return signature_mismatch(p.authorization.access_key, text.to_sign, p.authorization.signature,
                                text.canonical);
    }
    r.auth.user = user;
  }
  r.auth.s3express = p.authorization.scope.service == "s3express";
  return std::nullopt;
}

std::optional<Error> Authenticator::authenticate_v2_query(Request& r) {
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

}  // namespace hots3::s3
