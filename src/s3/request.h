#pragma once

// Private to src/s3: an HTTP request as the S3 layer sees it: where it points (bucket and key,
// path-style or virtual-hosted), its decoded query, and who signed it how.

#include "errors.h"

#include "hots3/aws/chunked.h"
#include "hots3/aws/sigv4.h"
#include "hots3/config/config.h"
#include "hots3/http/handler.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hots3::s3 {

// How the request body is protected (x-amz-content-sha256).
enum class Payload : std::uint8_t {
  kSha256,                    // hex digest of the body: verified as it streams
  kUnsigned,                  // UNSIGNED-PAYLOAD
  kStreamingSigned,           // STREAMING-AWS4-HMAC-SHA256-PAYLOAD
  kStreamingSignedTrailer,    // STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER
  kStreamingUnsignedTrailer,  // STREAMING-UNSIGNED-PAYLOAD-TRAILER
};

// A request signed with S3 Express session credentials (sessions.h) does what the session's
// mode allows, in the session's bucket only.
enum class SessionMode : std::uint8_t { kNone, kReadWrite, kReadOnly };

struct Authenticated {
  const config::UserConfig* user = nullptr;
  SessionMode session = SessionMode::kNone;  // kNone: signed with the user's own keys
  bool s3express = false;                    // the credential scope's service is s3express
  Payload payload = Payload::kUnsigned;
  std::string payload_sha256;                              // kSha256: the expected hex digest
  std::optional<aws::AwsChunkedDecoder::Signing> signing;  // signed streaming modes
};

struct Request {
  explicit Request(http::Exchange& e) : exchange(e), head(e.request()) {}

  http::Exchange& exchange;
  const http::RequestHead& head;
  std::string_view raw_path;  // as sent, still percent-encoded
  std::string_view raw_query;
  std::string path;  // decoded
  std::vector<aws::QueryParameter> query;
  std::string bucket;  // "" for service-level requests
  std::string key;     // "" for bucket-level requests
  bool virtual_host = false;
  Authenticated auth;

  [[nodiscard]] std::optional<std::string_view> header(std::string_view name) const {
    return head.find(name);
  }
  [[nodiscard]] const std::string* param(std::string_view name) const {
    for (const auto& p : query) {
      if (p.name == name) return &p.value;
    }
    return nullptr;
  }
  [[nodiscard]] bool has_param(std::string_view name) const { return param(name) != nullptr; }
  // "/bucket/key" for error bodies.
  [[nodiscard]] std::string resource() const;
};

// Fills r's raw and decoded path and query, bucket and key. Errors: InvalidURI (malformed
// percent-encoding, a target that is not a path), InvalidArgument (a query parameter, or a header
// S3 reads as one value, given twice: a signature covers all of them, an operation would read the
// first).
std::optional<Error> locate(Request& r, const config::S3Config& config);

}  // namespace hots3::s3
