#pragma once

// Private to src/s3: request authentication (SigV4 header and presigned, SigV2 presigned) against
// the configured users. Thread-safety: every method may be called from any worker.

#include "errors.h"
#include "request.h"
#include "sessions.h"

#include "hots3/aws/sigv4.h"
#include "hots3/config/config.h"

#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hots3::s3 {

class Authenticator {
 public:
  Authenticator(const config::S3Config& config, std::vector<config::UserConfig> users);

  // Verifies r's signature and sets r.auth (user, payload mode, aws-chunked signing); the S3
  // error otherwise. Anonymous requests are refused. REQUIRES: locate(r) succeeded.
  std::optional<Error> authenticate(Request& r);

  // The S3 Express sessions whose credentials authenticate() accepts.
  Sessions& sessions() { return sessions_; }

 private:
  std::optional<Error> authenticate_v4_header(Request& r, std::string_view authorization);
  std::optional<Error> authenticate_v4_query(Request& r);
  std::optional<Error> authenticate_v2_query(Request& r);
  std::optional<Error> payload_mode(Request& r, std::string_view content_sha256);
  // A SigV4 signature made with session credentials (`token` their session token): sets
  // r.auth.user and r.auth.session and returns the signing key; the S3 error otherwise.
  std::variant<aws::SigningKey, Error> verify_session(Request& r, const aws::Authorization& a,
                                                      std::string_view token,
                                                      const std::string& string_to_sign,
                                                      const std::string& canonical_request);
  const config::UserConfig* user_for(std::string_view access_key) const;
  // The SigV4 signing key of a user for a scope, if `signature` is the signature of
  // `string_to_sign` under it; nullopt otherwise. Derived once per user, day and region (four
  // HMACs, several microseconds) and then cached: every request of the day reuses it.
  std::optional<aws::SigningKey> verified_signing_key(const config::UserConfig& user,
                                                      const aws::SigningScope& scope,
                                                      std::string_view string_to_sign,
                                                      std::string_view signature);

  const config::S3Config& config_;
  std::vector<config::UserConfig> users_;
  std::unordered_map<std::string, const config::UserConfig*> by_access_key_;
  std::unordered_map<std::string, const config::UserConfig*> by_name_;
  Sessions sessions_;
  std::mutex keys_mutex_;
  std::unordered_map<std::string, aws::SigningKey> signing_keys_;  // "access/date/region/service"
};

}  // namespace hots3::s3
