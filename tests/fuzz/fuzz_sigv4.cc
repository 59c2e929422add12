// SigV4 and SigV2 parsing and canonicalisation over what a client controls: the Authorization
// header, the query string (presigned URLs), the path, the signed headers and their values.
// Besides "no crash", percent-decoding undoes SigV4's encoding.

#include "hots3/aws/sigv4.h"

#include <cstddef>
#include <cstdint>
#include <fuzzer/FuzzedDataProvider.h>
#include <string>
#include <vector>

namespace aws = hots3::aws;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider in(data, size);
  const std::string authorization = in.ConsumeRandomLengthString(2048);
  const std::string raw_query = in.ConsumeRandomLengthString(4096);
  const std::string raw_path = in.ConsumeRandomLengthString(1024);
  std::vector<std::pair<std::string, std::string>> headers;
  while (in.remaining_bytes() > 0 && headers.size() < 16) {
    headers.emplace_back(in.ConsumeRandomLengthString(64), in.ConsumeRandomLengthString(256));
  }

  (void)aws::parse_authorization(authorization);
  const auto query = aws::parse_query(raw_query);
  const auto path = aws::percent_decode(raw_path);
  if (path) {
    // Decoding what SigV4 encodes gives back the path, slashes kept or encoded.
    if (aws::percent_decode(aws::uri_encode(*path, false)) != *path) __builtin_trap();
    if (aws::percent_decode(aws::uri_encode(*path, true)) != *path) __builtin_trap();
  }
  if (!query) return 0;
  (void)aws::v2_canonical_resource(raw_path, *query);
  auto presigned = aws::parse_presigned_v4(*query);
  std::vector<std::string> signed_headers;
  if (auto* p = std::get_if<aws::PresignedV4>(&presigned)) {
    signed_headers = p->authorization.signed_headers;
  } else {
    for (const auto& h : headers) signed_headers.push_back(h.first);
  }
  const aws::CanonicalInput input{
      .method = "PUT",
      .path = path ? std::string_view(*path) : std::string_view("/"),
      .query = &*query,
      .exclude_query = "X-Amz-Signature",
      .header_values =
          [&headers](std::string_view name, std::vector<std::string_view>& values) {
            for (const auto& h : headers) {
              if (h.first == name) values.emplace_back(h.second);
            }
          },
      .signed_headers = &signed_headers,
      .payload_hash = aws::kEmptySha256,
  };
  const std::string canonical = aws::canonical_request(input);
  const aws::SigningScope scope{"20261127", "us-east-1", "s3"};
  const std::string to_sign = aws::string_to_sign("20261127T000000Z", scope, canonical);
  (void)aws::signatures_equal(aws::sign(aws::signing_key("secret", scope), to_sign), authorization);
  return 0;
}
