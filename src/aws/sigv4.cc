#include "hots3/aws/sigv4.h"

#include "hots3/aws/checksum.h"
#include "hots3/common/assert.h"
#include "hots3/common/digest.h"
#include "hots3/common/hex.h"
#include "hots3/common/text.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <tuple>
#include <utility>

namespace hots3::aws {
namespace {

constexpr std::string_view kUpperHex = "0123456789ABCDEF";
constexpr std::size_t kCredentialFieldBytesMax = 128;

// The SigV4 unreserved set: A-Z a-z 0-9 - _ . ~ (RFC 3986), nothing else.
constexpr std::array<bool, 256> make_unreserved() {
  std::array<bool, 256> t{};
  for (int c = 'A'; c <= 'Z'; ++c) t[static_cast<std::size_t>(c)] = true;
  for (int c = 'a'; c <= 'z'; ++c) t[static_cast<std::size_t>(c)] = true;
  for (int c = '0'; c <= '9'; ++c) t[static_cast<std::size_t>(c)] = true;
  for (char c : std::string_view("-_.~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}
constexpr std::array<bool, 256> kUnreserved = make_unreserved();

bool all_digits(std::string_view s) noexcept {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A header value as SigV4 canonicalises it: trimmed, inner runs of whitespace made one space.
void append_canonical_value(std::string& out, std::string_view value) {
  value = trim(value);
  // Runs without whitespace are appended whole (a session token is one of 150 characters).
  while (!value.empty()) {
    std::size_t run = 0;
    while (run < value.size() && !is_space(value[run])) ++run;
    out.append(value.substr(0, run));
    value.remove_prefix(run);
    if (value.empty()) break;
    while (is_space(value.front())) value.remove_prefix(1);  // trimmed: a character follows
    out.push_back(' ');
  }
}

// "AK/20261121/us-east-1/s3/aws4_request" -> access key + scope.
std::optional<std::string> parse_credential(std::string_view credential, Authorization& out) {
  std::array<std::string_view, 5> parts{};
  std::size_t n = 0;
  for (std::size_t start = 0;;) {
    const std::size_t slash = credential.find('/', start);
    if (n == parts.size()) return "the Credential has too many '/'-separated parts";
    parts[n++] = credential.substr(start, slash == std::string_view::npos ? slash : slash - start);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (n != parts.size() || parts[0].empty() || parts[2].empty() || parts[3].empty()) {
    return "the Credential is mal-formed; expecting "
           "\"<ACCESS-KEY>/YYYYMMDD/REGION/SERVICE/aws4_request\"";
  }
  if (parts[1].size() != 8 || !all_digits(parts[1])) {
    return "the Credential's date '" + std::string(parts[1]) + "' is not YYYYMMDD";
  }
  if (parts[4] != "aws4_request") {
    return "the Credential must end with 'aws4_request', not '" + std::string(parts[4]) + "'";
  }
  // Regions and services are short names; a scope is part of every cached signing key's name,
  // so a client-chosen one of any length would be memory the client chooses to pin.
  if (parts[0].size() > kCredentialFieldBytesMax || parts[2].size() > kCredentialFieldBytesMax ||
      parts[3].size() > kCredentialFieldBytesMax) {
    return "the Credential's access key, region and service must each be at most " +
           std::to_string(kCredentialFieldBytesMax) + " bytes";
  }
  out.access_key.assign(parts[0]);
  out.scope.date.assign(parts[1]);
  out.scope.region.assign(parts[2]);
  out.scope.service.assign(parts[3]);
  return std::nullopt;
}

// What a character of a signed header name or of a signature is written as (lower case), or -1
// where it is refused: whitespace and ',' in a name, all but hex digits in a signature.
using CharMap = std::array<std::int16_t, 256>;
constexpr CharMap make_char_map(bool hex_only) {
  CharMap map{};
  for (int c = 0; c < 256; ++c) {
    const char ch = static_cast<char>(c);
    const bool refused = hex_only ? hex_value(ch) < 0 : is_space(ch) || ch == ',';
    map[static_cast<std::size_t>(c)] =
        refused ? std::int16_t{-1}
                : static_cast<std::int16_t>(static_cast<std::uint8_t>(to_lower(ch)));
  }
  return map;
}
constexpr CharMap kSignedHeaderChars = make_char_map(false);
constexpr CharMap kSignatureChars = make_char_map(true);

// `target` = `text` mapped by `map`, in the string's own room when it has enough; false (target
// then undefined) if `map` refuses a character of it.
bool assign_mapped(std::string& target, std::string_view text, const CharMap& map) {
  target.resize(text.size());
  char* out = target.data();
  int refused = 0;
  for (const char c : text) {
    const int mapped = map[static_cast<unsigned char>(c)];
    refused |= mapped;  // (only -1 sets the sign bit)
    *out++ = static_cast<char>(mapped);
  }
  return refused >= 0;
}

std::optional<std::string> parse_signed_headers(std::string_view list, Authorization& out) {
  std::size_t count = 0;  // (the list's strings are assigned again, not made again)
  for (std::size_t start = 0;;) {
    const std::size_t semi = list.find(';', start);
    const std::string_view name =
        list.substr(start, semi == std::string_view::npos ? semi : semi - start);
    if (count == out.signed_headers.size()) out.signed_headers.emplace_back();
    if (name.empty() || !assign_mapped(out.signed_headers[count++], name, kSignedHeaderChars)) {
      return "the SignedHeaders list '" + std::string(list) + "' is mal-formed";
    }
    if (semi == std::string_view::npos) break;
    start = semi + 1;
  }
  out.signed_headers.resize(count);
  return std::nullopt;
}

std::optional<std::string> parse_signature(std::string_view signature, Authorization& out) {
  if (signature.size() != 64 || !assign_mapped(out.signature, signature, kSignatureChars)) {
    return "the Signature must be 64 hexadecimal characters";
  }
  return std::nullopt;
}

// The sub-resources that SigV2 puts into the canonicalised resource (as botocore's
// HmacV1Auth.QSAOfInterest and verify.py's V2_SUBRESOURCES). Sorted, for binary_search.
constexpr std::array<std::string_view, 28> kV2SubResources = {
    "acl",
    "cors",
    "delete",
    "encryption",
    "lifecycle",
    "location",
    "logging",
    "notification",
    "object-lock",
    "partNumber",
    "policy",
    "replication",
    "requestPayment",
    "response-cache-control",
    "response-content-disposition",
    "response-content-encoding",
    "response-content-language",
    "response-content-type",
    "response-expires",
    "restore",
    "tagging",
    "torrent",
    "uploadId",
    "uploads",
    "versionId",
    "versioning",
    "versions",
    "website",
};
static_assert(std::is_sorted(kV2SubResources.begin(), kV2SubResources.end()));

}  // namespace

// ---- primitives ----------------------------------------------------------------------------
bool is_signature_hex(std::string_view text) noexcept {
  return text.size() == 64 &&
         std::all_of(text.begin(), text.end(), [](char c) { return hex_value(c) >= 0; });
}

std::array<std::uint8_t, 32> hmac_sha256(std::span<const std::uint8_t> key, std::string_view data) {
  return hots3::hmac_sha256(key, data);
}

std::array<std::uint8_t, 20> hmac_sha1(std::string_view key, std::string_view data) {
  return hots3::hmac_sha1(std::span(reinterpret_cast<const std::uint8_t*>(key.data()), key.size()),
                          data);
}

std::string sha256_hex(std::string_view data) {
  return to_hex(hots3::sha256(std::as_bytes(std::span(data.data(), data.size()))));
}

bool signatures_equal(std::string_view a, std::string_view b) noexcept {
  // The length of a signature is public (64 hex digits, 28 base64 characters); its content is not.
  if (a.size() != b.size()) return false;
  return a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// ---- encoding --------------------------------------------------------------------------------
namespace {

void append_uri_encoded(std::string& out, std::string_view bytes, bool encode_slash) {
  // Runs that stay as they are (most of a key) are appended whole.
  std::size_t run = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    const auto u = static_cast<unsigned char>(c);
    if (kUnreserved[u] || (c == '/' && !encode_slash)) continue;
    out.append(bytes.substr(run, i - run));
    const char escaped[3] = {'%', kUpperHex[u >> 4], kUpperHex[u & 15]};
    out.append(escaped, 3);
    run = i + 1;
  }
  out.append(bytes.substr(run));
}

}  // namespace

std::string uri_encode(std::string_view bytes, bool encode_slash) {
  std::string out;
  out.reserve(bytes.size() + bytes.size() / 2);
  append_uri_encoded(out, bytes, encode_slash);
  return out;
}

std::optional<std::string> percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int hi = hex_value(text[i + 1]);
    const int lo = hex_value(text[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi << 4 | lo));
    i += 2;
  }
  return out;
}

std::optional<std::vector<QueryParameter>> parse_query(std::string_view raw) {
  std::vector<QueryParameter> out;
  while (!raw.empty()) {
    const std::size_t amp = raw.find('&');
    const std::string_view part = raw.substr(0, amp);
    raw = amp == std::string_view::npos ? std::string_view() : raw.substr(amp + 1);
    if (part.empty()) continue;  // "a=1&&b=2", a trailing '&'
    const std::size_t eq = part.find('=');
    auto name = percent_decode(part.substr(0, eq));
    auto value =
        percent_decode(eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1));
    if (!name || !value) return std::nullopt;
    out.push_back(QueryParameter{std::move(*name), std::move(*value)});
  }
  return out;
}

// ---- SigV4 -----------------------------------------------------------------------------------
namespace {
// "date/region/service/aws4_request", appended: the strings to sign write it in place.
void append_scope(std::string& out, const SigningScope& scope) {
  out.append(scope.date).append("/").append(scope.region).append("/").append(scope.service);
  out.append("/aws4_request");
}
}  // namespace

std::string SigningScope::to_string() const {
  std::string out;
  out.reserve(date.size() + region.size() + service.size() + 16);
  append_scope(out, *this);
  return out;
}

std::variant<Authorization, ParseError> parse_authorization(std::string_view header_value) {
  Authorization out;
  if (auto e = parse_authorization(header_value, out)) return std::move(*e);
  return out;
}

std::optional<ParseError> parse_authorization(std::string_view header_value, Authorization& out) {
  const auto error = [](std::string_view what) {
    return ParseError{"The authorization header is malformed; " + std::string(what) + "."};
  };
  std::string_view rest = trim(header_value);
  if (rest.substr(0, kAlgorithm.size()) != kAlgorithm || rest.size() == kAlgorithm.size() ||
      !is_space(rest[kAlgorithm.size()])) {
    return error("expecting 'AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...'");
  }
  rest = trim(rest.substr(kAlgorithm.size()));

  bool have_credential = false;
  bool have_signed_headers = false;
  bool have_signature = false;
  // The parts are separated by "," with optional whitespace around it: AWS SDKs write ", ",
  // s3cmd and minio-go a bare ",".
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view part = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (part.empty()) return error("empty component (two commas in a row?)");
    const std::size_t eq = part.find('=');
    if (eq == std::string_view::npos)
      return error("component '" + std::string(part) + "' has no '='");
    const std::string_view key = trim(part.substr(0, eq));
    const std::string_view value = trim(part.substr(eq + 1));
    std::optional<std::string> problem;
    if (iequals(key, "Credential")) {
      if (std::exchange(have_credential, true)) return error("Credential given twice");
      problem = parse_credential(value, out);
    } else if (iequals(key, "SignedHeaders")) {
      if (std::exchange(have_signed_headers, true)) return error("SignedHeaders given twice");
      problem = parse_signed_headers(value, out);
    } else if (iequals(key, "Signature")) {
      if (std::exchange(have_signature, true)) return error("Signature given twice");
      problem = parse_signature(value, out);
    } else {
      return error("unknown component '" + std::string(key) + "'");
    }
    if (problem) return error(*problem);
  }
  if (!have_credential) return error("missing Credential");
  if (!have_signed_headers) return error("missing SignedHeaders");
  if (!have_signature) return error("missing Signature");
  return std::nullopt;
}

std::variant<PresignedV4, ParseError> parse_presigned_v4(const std::vector<QueryParameter>& query) {
  const auto error = [](std::string_view what) {
    return ParseError{
        "Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, "
        "X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters; " +
        std::string(what) + "."};
  };
  constexpr std::array<std::string_view, 6> kNames = {"X-Amz-Algorithm",     "X-Amz-Credential",
                                                      "X-Amz-Date",          "X-Amz-Expires",
                                                      "X-Amz-SignedHeaders", "X-Amz-Signature"};
  std::array<const std::string*, kNames.size()> values{};
  for (const auto& p : query) {
    // Case-sensitive, as AWS signs and matches them.
    for (std::size_t i = 0; i < kNames.size(); ++i) {
      if (p.name != kNames[i]) continue;
      if (values[i] != nullptr) return error(std::string(kNames[i]) + " is given twice");
      values[i] = &p.value;
    }
  }
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    if (values[i] == nullptr) return error(std::string(kNames[i]) + " is missing");
  }
  const std::string& algorithm = *values[0];
  const std::string& credential = *values[1];
  const std::string& date = *values[2];
  const std::string& expires = *values[3];
  const std::string& signed_headers = *values[4];
  const std::string& signature = *values[5];

  if (algorithm != kAlgorithm)
    return error("X-Amz-Algorithm must be AWS4-HMAC-SHA256, not '" + algorithm + "'");
  PresignedV4 out;
  if (auto problem = parse_credential(credential, out.authorization))
    return error("X-Amz-Credential: " + *problem);
  if (auto problem = parse_signed_headers(signed_headers, out.authorization)) {
    return error("X-Amz-SignedHeaders: " + *problem);
  }
  if (auto problem = parse_signature(signature, out.authorization))
    return error("X-Amz-Signature: " + *problem);
  if (date.size() != 16 || date[8] != 'T' || date[15] != 'Z' ||
      !all_digits(std::string_view(date).substr(0, 8)) ||
      !all_digits(std::string_view(date).substr(9, 6))) {
    return error("X-Amz-Date '" + date + "' is not YYYYMMDDTHHMMSSZ");
  }
  if (std::string_view(date).substr(0, 8) != out.authorization.scope.date) {
    return error("the X-Amz-Credential date is not the date of X-Amz-Date");
  }
  out.amz_date = date;
  // At most 7 digits before converting, so the parse cannot overflow.
  if (!all_digits(expires) || expires.size() > 7) {
    return error("X-Amz-Expires must be a number of seconds from 1 to 604800");
  }
  std::uint64_t seconds = 0;
  std::from_chars(expires.data(), expires.data() + expires.size(), seconds);
  if (seconds < 1 || seconds > static_cast<std::uint64_t>(kPresignedLifetimeSecondsMax))
    return error("X-Amz-Expires must be a number of seconds from 1 to 604800");
  out.expires_s = seconds;
  return out;
}

std::string canonical_request(const CanonicalInput& input) {
  H3_ASSERT(input.signed_headers != nullptr && input.header_values);
  std::string out;
  out.reserve(512);
  out.append(input.method).push_back('\n');

  // The path arrives decoded and is encoded exactly once (S3 does not double-encode); an empty
  // path is "/".
  if (input.path.empty()) {
    out.push_back('/');
  } else {
    append_uri_encoded(out, input.path, false);
  }
  out.push_back('\n');

  // Query: every parameter (value-less ones as "name="), strictly encoded, sorted by encoded
  // name, then encoded value.
  if (input.query != nullptr) {
    std::vector<std::pair<std::string, std::string>> pairs;
    pairs.reserve(input.query->size());
    for (const auto& p : *input.query) {
      if (!input.exclude_query.empty() && p.name == input.exclude_query) continue;
      pairs.emplace_back(uri_encode(p.name, true), uri_encode(p.value, true));
    }
    std::sort(pairs.begin(), pairs.end());
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      if (i > 0) out.push_back('&');
      out.append(pairs[i].first).append("=").append(pairs[i].second);
    }
  }
  out.push_back('\n');

  // Headers, in the order signed (clients list them sorted). A repeated header's values are
  // joined with ','. A signed header that is absent gets no line (the signature then fails).
  thread_local std::vector<std::string_view> values;  // (its capacity kept from request to request)
  for (const std::string& name : *input.signed_headers) {
    values.clear();
    input.header_values(name, values);
    if (values.empty()) continue;
    out.append(name).push_back(':');
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (i > 0) out.push_back(',');
      append_canonical_value(out, values[i]);
    }
    out.push_back('\n');
  }
  out.push_back('\n');

  for (std::size_t i = 0; i < input.signed_headers->size(); ++i) {
    if (i > 0) out.push_back(';');
    out.append((*input.signed_headers)[i]);
  }
  out.push_back('\n');
  out.append(input.payload_hash);
  return out;
}

std::string string_to_sign(std::string_view amz_date, const SigningScope& scope,
                           std::string_view canonical_request) {
  std::string out;
  out.reserve(kAlgorithm.size() + amz_date.size() + scope.date.size() + scope.region.size() +
              scope.service.size() + 64 + 20);
  out.append(kAlgorithm).append("\n").append(amz_date).append("\n");
  append_scope(out, scope);
  out.append("\n");
  append_hex(
      out,
      hots3::sha256(std::as_bytes(std::span(canonical_request.data(), canonical_request.size()))));
  return out;
}

SigningKey signing_key(std::string_view secret_key, const SigningScope& scope) {
  std::string seed = "AWS4";
  seed.append(secret_key);
  const auto as_key = [](const std::string& s) {
    return std::span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
  };
  SigningKey k = hmac_sha256(as_key(seed), scope.date);
  OPENSSL_cleanse(seed.data(), seed.size());
  k = hmac_sha256(k, scope.region);
  k = hmac_sha256(k, scope.service);
  return hmac_sha256(k, "aws4_request");
}

std::string sign(const SigningKey& key, std::string_view string_to_sign) {
  return to_hex(hmac_sha256(key, string_to_sign));
}

std::string chunk_string_to_sign(std::string_view amz_date, const SigningScope& scope,
                                 std::string_view previous_signature,
                                 std::string_view chunk_sha256_hex) {
  std::string out;
  out.reserve(amz_date.size() + 320);  // the other fields are short and fixed-size
  out.append("AWS4-HMAC-SHA256-PAYLOAD\n").append(amz_date).append("\n");
  append_scope(out, scope);
  out.append("\n");
  out.append(previous_signature)
      .append("\n")
      .append(kEmptySha256)
      .append("\n")
      .append(chunk_sha256_hex);
  return out;
}

std::string trailer_string_to_sign(std::string_view amz_date, const SigningScope& scope,
                                   std::string_view previous_signature,
                                   std::string_view trailer_sha256_hex) {
  std::string out;
  out.reserve(amz_date.size() + 256);
  out.append("AWS4-HMAC-SHA256-TRAILER\n").append(amz_date).append("\n");
  append_scope(out, scope);
  out.append("\n");
  out.append(previous_signature).append("\n").append(trailer_sha256_hex);
  return out;
}

// ---- SigV2 -----------------------------------------------------------------------------------
std::string v2_canonical_resource(std::string_view raw_path,
                                  const std::vector<QueryParameter>& query) {
  std::vector<const QueryParameter*> subs;
  for (const auto& p : query) {
    if (std::binary_search(kV2SubResources.begin(), kV2SubResources.end(),
                           std::string_view(p.name))) {
      subs.push_back(&p);
    }
  }
  std::sort(subs.begin(), subs.end(), [](const QueryParameter* a, const QueryParameter* b) {
    return std::tie(a->name, a->value) < std::tie(b->name, b->value);
  });
  std::string out(raw_path);
  for (std::size_t i = 0; i < subs.size(); ++i) {
    out.push_back(i == 0 ? '?' : '&');
    out.append(subs[i]->name);
    // Values decoded, as signed; a sub-resource without a value ("?acl", "?uploads=") is the bare
    // name.
    if (!subs[i]->value.empty()) out.append("=").append(subs[i]->value);
  }
  return out;
}

std::string v2_string_to_sign(std::string_view method, std::string_view content_md5,
                              std::string_view content_type, std::string_view expires,
                              std::string_view canonical_amz_headers,
                              std::string_view canonical_resource) {
  std::string out;
  out.reserve(method.size() + content_md5.size() + content_type.size() + expires.size() +
              canonical_amz_headers.size() + canonical_resource.size() + 4);
  out.append(method)
      .append("\n")
      .append(content_md5)
      .append("\n")
      .append(content_type)
      .append("\n");
  out.append(expires).append("\n").append(canonical_amz_headers).append(canonical_resource);
  return out;
}

std::string v2_sign(std::string_view secret_key, std::string_view string_to_sign) {
  const auto mac = hmac_sha1(secret_key, string_to_sign);
  return base64_encode(std::as_bytes(std::span(mac)));
}

}  // namespace hots3::aws
