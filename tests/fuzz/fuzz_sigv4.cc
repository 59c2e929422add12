// SigV4 and SigV2 parsing and canonicalisation over what a client controls: the Authorization
// header, the query string (presigned URLs), the path, the signed headers and their values.
// Besides "no crash", percent-decoding undoes SigV4's encoding.

#include "hots3/s3/auth/sigv4.h"

#include <cstddef>
#include <cstdint>
#include <fuzzer/FuzzedDataProvider.h>
#include <string>
#include <vector>

namespace auth = hots3::s3::auth;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const std::string authorization = in.ConsumeRandomLengthString(2048);
  const std::string raw_query = in.ConsumeRandomLengthString(4096);
  const std::string raw_path = in.ConsumeRandomLengthString(1024);
  std::vector<std::pair<std::string, std::string>> headers;
  while (in.remaining_bytes() > 0 && headers.size() < 16) {
    headers.emplace_back(in.ConsumeRandomLengthString(64), in.ConsumeRandomLengthString(256));
  }

  (void)auth::parse_authorization(authorization);
  const auto query = auth::parse_query(raw_query);
  const auto path = auth::percent_decode(raw_path);
  if (path) {
    // Decoding what SigV4 encodes gives back the path, slashes kept or encoded.
    if (auth::percent_decode(auth::uri_encode(*path, false)) != *path) __builtin_trap();
    if (auth::percent_decode(auth::uri_encode(*path, true)) != *path) __builtin_trap();
  }
  if (!query) return 0;
  (void)auth::v2_canonical_resource(raw_path, *query);
  auto presigned = auth::parse_presigned_v4(*query);
  std::vector<std::string> signed_headers;
  if (auto* p = std::get_if<auth::PresignedV4>(&presigned)) {
    signed_headers = p->authorization.signed_headers;
  } else {
    for (const auto& h : headers) signed_headers.push_back(h.first);
  }
  const auth::CanonicalInput input{
      .method = "PUT",
      .path = path ? std::string_view(*path) : std::string_view("/"),
      .query = &*query,
      .exclude_query = "X-Amz-Signature",
      .header_values =
          [&headers](std::string_view name) {
            std::vector<std::string_view> values;
            for (const auto& h : headers) {
              if (h.first == name) values.emplace_back(h.second);
            }
            return values;
          },
      .signed_headers = &signed_headers,
      .payload_hash = auth::kEmptySha256,
  };
  const std::string canonical = auth::canonical_request(input);
  const auth::SigningScope scope{"20261127", "us-east-1", "s3"};
  const std::string to_sign = auth::string_to_sign("20261127T000000Z", scope, canonical);
  (void)auth::signatures_equal(auth::sign(auth::signing_key("secret", scope), to_sign),
                               authorization);
  return 0;
}
