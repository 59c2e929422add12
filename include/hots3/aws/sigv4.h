#pragma once

// AWS Signature Version 4 (header and presigned-query forms) and the Version 2 presigned URLs
// that boto3's generate_presigned_url and s3cmd signurl still produce. Pure functions over
// strings: the router gathers the request's parts, this computes and compares signatures.
// The rules, with the quirks real clients exercise, are in tests/data/wire/README.md (the
// 26-point checklist) and are pinned by tests built from its captures
// (tests/unit/aws/wire_captures_test.cc re-verifies every one of them).
//
// OpenSSL (HMAC, SHA-256) stays in the .cc files.

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace hots3::aws {

inline constexpr std::string_view kEmptySha256 =
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
inline constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";
// The longest a presigned URL may be valid (S3: 7 days), SigV4's X-Amz-Expires and SigV2's Expires.
inline constexpr std::int64_t kPresignedLifetimeSecondsMax = 604800;

// ---- primitives ---------------------------------------------------------------------------
using SigningKey = std::array<std::uint8_t, 32>;
std::array<std::uint8_t, 32> hmac_sha256(std::span<const std::uint8_t> key, std::string_view data);
std::array<std::uint8_t, 20> hmac_sha1(std::string_view key, std::string_view data);
std::string sha256_hex(std::string_view data);
// 64 hex digits, the form of a SigV4 signature.
bool is_signature_hex(std::string_view text) noexcept;
// Constant-time comparison of two signatures (hex or base64 text); different lengths are unequal.
bool signatures_equal(std::string_view a, std::string_view b) noexcept;

// ---- encoding -----------------------------------------------------------------------------
// SigV4 URI encoding: every byte except A-Z a-z 0-9 - _ . ~ becomes %XX (upper-case hex); '/'
// too when `encode_slash` (query components), not in paths.
std::string uri_encode(std::string_view bytes, bool encode_slash);
// Percent-decoding of a path or query component ('+' stays '+'). nullopt on a malformed '%'.
std::optional<std::string> percent_decode(std::string_view text);

struct QueryParameter {
  std::string name;   // decoded
  std::string value;  // decoded; "" for "?uploads" and "?uploads="
};
// Splits a raw query string at '&' and the first '=' and decodes the parts, in wire order;
// empty parts ("a=1&&b=2", a trailing '&') are skipped. nullopt on malformed percent-encoding.
std::optional<std::vector<QueryParameter>> parse_query(std::string_view raw);

// ---- SigV4 --------------------------------------------------------------------------------
struct SigningScope {
  std::string date;                             // YYYYMMDD
  std::string region;                           // as the client signed it
  std::string service;                          // "s3"
  [[nodiscard]] std::string to_string() const;  // "date/region/service/aws4_request"
};

struct ParseError {
  std::string message;  // for AuthorizationHeaderMalformed / AuthorizationQueryParametersError
};

// "AWS4-HMAC-SHA256 Credential=AK/20261121/us-east-1/s3/aws4_request, SignedHeaders=a;b,
// Signature=hex" with ", " or a bare "," between the parts (s3cmd, minio-go), in any order, the
// part names in any case. Each part exactly once; the credential's access key, region and service
// at most 128 bytes each; anything else is a ParseError whose message says what is wrong ("The
// authorization header is malformed; missing Signature.").
struct Authorization {
  std::string access_key;
  SigningScope scope;
  std::vector<std::string> signed_headers;  // lower-case, in the order listed
  std::string signature;                    // lower-case hex
};
std::variant<Authorization, ParseError> parse_authorization(std::string_view header_value);
// The same into `out`, whose strings keep their room (a server parses one per request); after a
// ParseError `out` holds nothing of use.
std::optional<ParseError> parse_authorization(std::string_view header_value, Authorization& out);

// X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date, X-Amz-Expires, X-Amz-SignedHeaders,
// X-Amz-Signature from a presigned URL's (decoded) query. The names are case-sensitive, as AWS
// sends them; each must appear once. ParseError also when X-Amz-Date is not YYYYMMDDTHHMMSSZ or
// not on the credential's date, or X-Amz-Expires is not 1..604800. Whether the URL has expired
// is the caller's check (it has the clock).
struct PresignedV4 {
  Authorization authorization;
  std::string amz_date;         // YYYYMMDDTHHMMSSZ
  std::uint64_t expires_s = 0;  // 1 .. 604800
};
std::variant<PresignedV4, ParseError> parse_presigned_v4(const std::vector<QueryParameter>& query);

// The request as SigV4 canonicalises it:
//   METHOD \n URI-encoded path \n sorted query \n "name:value\n" per signed header \n
//   signed;header;names \n payload hash
// Query parameters are strictly encoded and sorted by encoded name, then value; a value-less
// one is "name=". Header values are trimmed, inner whitespace runs become one space, and a
// repeated header's values are joined with ','. A signed header with no value gets no line
// (so the signature cannot match).
struct CanonicalInput {
  std::string_view method;
  std::string_view path;  // decoded ("/bucket/odd key+plus"): it is encoded once here
  const std::vector<QueryParameter>* query = nullptr;  // decoded
  std::string_view exclude_query;                      // "X-Amz-Signature" for presigned requests
  // Appends to `out` all values of a header, given its lower-case name (several for a repeated
  // header). (One vector serves every signed header: none is made per header and request.)
  std::function<void(std::string_view name, std::vector<std::string_view>& out)> header_values;
  const std::vector<std::string>* signed_headers = nullptr;  // lower-case
  // x-amz-content-sha256 as sent ("UNSIGNED-PAYLOAD" if absent); for presigned URLs the query's
  // X-Amz-Content-Sha256 if there (js-v3 puts it there), else "UNSIGNED-PAYLOAD".
  std::string_view payload_hash;
};
std::string canonical_request(const CanonicalInput& input);
std::string string_to_sign(std::string_view amz_date, const SigningScope& scope,
                           std::string_view canonical_request);
SigningKey signing_key(std::string_view secret_key, const SigningScope& scope);
std::string sign(const SigningKey& key, std::string_view string_to_sign);  // lower-case hex

// aws-chunked signatures: each chunk's chains the previous one (the seed signature first).
std::string chunk_string_to_sign(std::string_view amz_date, const SigningScope& scope,
                                 std::string_view previous_signature,
                                 std::string_view chunk_sha256_hex);
std::string trailer_string_to_sign(std::string_view amz_date, const SigningScope& scope,
                                   std::string_view previous_signature,
                                   std::string_view trailer_sha256_hex);

// ---- SigV2 presigned URLs (AWSAccessKeyId, Expires, Signature) ------------------------------
// StringToSign = METHOD \n Content-MD5 \n Content-Type \n Expires \n
//                CanonicalizedAmzHeaders CanonicalizedResource
// where CanonicalizedAmzHeaders is "name:value\n" per x-amz-* header (lower-case names, sorted,
// values trimmed, repeats joined with ','; x-amz-date left out of presigned URLs) and
// CanonicalizedResource is the path as sent (still percent-encoded, not re-encoded) plus the
// sub-resources S3 signs (acl, cors, delete, lifecycle, location, logging, notification,
// object-lock, partNumber, policy, replication, requestPayment, restore, tagging, torrent,
// uploadId, uploads, versionId, versioning, versions, website, encryption and the six
// response-* overrides), sorted, with their decoded values: "?acl&partNumber=2&uploadId=x".
// Other parameters (AWSAccessKeyId, Expires, Signature, prefix, ...) are not signed. A
// sub-resource with an empty value is written bare ("uploads", not "uploads=").
std::string v2_canonical_resource(std::string_view raw_path,
                                  const std::vector<QueryParameter>& query);
std::string v2_string_to_sign(std::string_view method, std::string_view content_md5,
                              std::string_view content_type, std::string_view expires,
                              std::string_view canonical_amz_headers,
                              std::string_view canonical_resource);
std::string v2_sign(std::string_view secret_key,
                    std::string_view string_to_sign);  // base64(HMAC-SHA1)

}  // namespace hots3::aws
