#pragma once

// Signing requests as a client does: SigV4 in the Authorization header, the signing key derived
// once a day. The load generator and the upstream client sign with it; the server verifies with
// the same primitives (sigv4.h), so one canonicalisation serves both sides.
//
// Thread-safety: a Signer caches its key; use one per thread (or guard it).

#include "hots3/aws/sigv4.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hots3::aws {

struct Credentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // "" = none (else sent as X-Amz-Security-Token)
  std::string region = "us-east-1";
  // S3 Express: requests are signed for the service s3express, and a session token is an S3
  // Express session's (CreateSession), sent as x-amz-s3session-token.
  bool s3express = false;
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;

class Signer {
 public:
  explicit Signer(Credentials credentials)
      : credentials_(std::move(credentials)),
        service_(credentials_.s3express ? "s3express" : "s3") {}

  // Adds x-amz-date, x-amz-content-sha256, the session token (X-Amz-Security-Token, or
  // x-amz-s3session-token for S3 Express) if there is one, and
  // Authorization to `headers`, which must already hold every other header the request sends,
  // Host among them; all of them are signed. `path` is decoded ("/bucket/odd key"): it is encoded
  // here as SigV4 encodes it, and must be sent so. `payload_hash`: the payload's hex SHA-256 or
  // UNSIGNED-PAYLOAD. `time_ms`: the signing time (milliseconds since the epoch).
  void sign(std::string_view method, std::string_view path,
            const std::vector<QueryParameter>& query, HeaderList& headers,
            std::string_view payload_hash, std::int64_t time_ms);

  // x-amz-date's form of a time: "20130524T000000Z".
  static std::string amz_date(std::int64_t time_ms);

  [[nodiscard]] const Credentials& credentials() const { return credentials_; }

 private:
  Credentials credentials_;
  std::string service_;
  std::string key_date_;  // the day the cached key is for
  SigningKey key_{};
};

// The request target as SigV4 signs it: the path encoded ('/' kept) and the query, each name and
// value encoded ('/' too), in the order given ("?uploads" for an empty value).
std::string request_target(std::string_view path, const std::vector<QueryParameter>& query);

}  // namespace hots3::aws
