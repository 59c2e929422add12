#pragma once

// Private to src/s3: request authentication (SigV4 header and presigned, SigV2 presigned) against
// the configured users. Thread-safety: every method may be called from any worker.

#include "errors.h"
#include "request.h"
#include "sessions.h"

#include "hots3/aws/sigv4.h"
#include "hots3/common/text.h"
#include "hots3/config/config.h"

#include <atomic>
#include <functional>
#include <memory>
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

  // Replaces the users (a configuration reload): requests authenticated from here on see the
  // new ones; a user gone or given another secret loses its cached signing keys and sessions.
  // The users a request in flight was authenticated as stay valid until the Authenticator is
  // destroyed: each set of users is kept, which costs a set per change, not per reload.
  // False when `users` are the ones in use (nothing changes).
  bool set_users(std::vector<config::UserConfig> users);
  // The users in use.
  [[nodiscard]] const std::vector<config::UserConfig>& users() const { return table().users; }

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

  // One set of users and their indexes; never changed once published.
  struct UserTable {
    explicit UserTable(std::vector<config::UserConfig> all);
    std::vector<config::UserConfig> users;
    using Index =
        std::unordered_map<std::string, const config::UserConfig*, StringHash, std::equal_to<>>;
    Index by_access_key;
    Index by_name;
  };
  [[nodiscard]] const UserTable& table() const { return *table_.load(std::memory_order_acquire); }

  const config::S3Config& config_;
  std::mutex tables_mutex_;                               // set_users
  std::vector<std::unique_ptr<const UserTable>> tables_;  // every set used, the last in use
  std::atomic<const UserTable*> table_;
  Sessions sessions_;
  // Signing keys that verified a signature, by "access/date/region/service", with the user
  // (of the table then in use) they are of: a key of a user since replaced is not used.
  struct CachedKey {
    const config::UserConfig* user = nullptr;
    aws::SigningKey key{};
  };
  std::mutex keys_mutex_;
  std::unordered_map<std::string, CachedKey, StringHash, std::equal_to<>> signing_keys_;
};

}  // namespace hots3::s3
