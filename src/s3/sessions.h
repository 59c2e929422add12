#pragma once

// Private to src/s3: S3 Express One Zone sessions. CreateSession hands out credentials for one
// bucket, in one mode, for five minutes; the requests signed with them carry the session token
// (x-amz-s3session-token). Nothing is stored: the token says whose session it is, for which
// bucket, in which mode and until when, under a tag of the server's key and the user's secret,
// and the session's access key and secret are derived from that tag. The first request of a
// session costs a few HMACs more than a user's; the others find its signing key in a table, as a
// user's requests do. Thread-safety: every method may be called from any worker.

#include "errors.h"
#include "request.h"

#include "hots3/aws/sigv4.h"
#include "hots3/config/config.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>

namespace hots3::s3 {

struct SessionCredentials {
  std::string access_key;
  std::string secret_key;
  std::string token;
  std::int64_t expires_ms = 0;
};

class Sessions {
 public:
  static constexpr std::int64_t kLifetimeMs =
      std::int64_t{5} * 60 * 1000;  // S3 Express's, not extensible
  using FindUser = std::function<const config::UserConfig*(std::string_view name)>;

  // `key`: the server's (config::session_key), "" for a random one. `find_user` finds a user by
  // name, the same for the life of the object.
  Sessions(std::string_view key, FindUser find_user);

  SessionCredentials create(const config::UserConfig& user, std::string_view bucket,
                            SessionMode mode);

  struct Verified {
    const config::UserConfig* user = nullptr;
    SessionMode mode = SessionMode::kNone;
    aws::SigningKey signing_key{};
  };
  // The session of `token`, if `access_key` is its access key, it is for `bucket`, it has not
  // expired and `signature` is the signature of `string_to_sign` under its key for `scope`.
  // Errors: InvalidToken (not a token of this server, another session's access key, its user
  // gone or with another secret), ExpiredToken, AccessDenied (another bucket's session),
  // SignatureDoesNotMatch (without details: the caller has them).
  std::variant<Verified, Error> verify(std::string_view access_key, std::string_view token,
                                       std::string_view bucket, const aws::SigningScope& scope,
                                       std::string_view string_to_sign, std::string_view signature);

  // The clock sessions are made and expire by: the system's, plus what advance() added.
  [[nodiscard]] std::int64_t now_ms() const noexcept;
  void advance(std::chrono::milliseconds by) noexcept;

 private:
  struct Opened {
    const config::UserConfig* user = nullptr;
    std::string bucket;
    SessionMode mode = SessionMode::kNone;
    std::int64_t expires_ms = 0;
    std::string secret_key;
  };
  std::variant<Opened, Error> open(std::string_view access_key, std::string_view token) const;
  [[nodiscard]] std::array<std::uint8_t, 32> mac(std::string_view what,
                                                 std::string_view data) const;
  [[nodiscard]] std::string access_key_of(std::string_view tag) const;
  [[nodiscard]] std::string secret_key_of(std::string_view tag) const;

  std::string key_;
  FindUser find_user_;
  std::atomic<std::int64_t> offset_ms_{0};

  // Sessions that verified a signature, by "access key/date/region/service": a signing key per
  // scope, as the users' table keeps them. At most kCachedMax; the expired go first when it is
  // full.
  struct Cached {
    std::string token;
    std::string bucket;
    const config::UserConfig* user = nullptr;
    SessionMode mode = SessionMode::kNone;
    std::int64_t expires_ms = 0;
    aws::SigningKey signing_key{};
  };
  static constexpr std::size_t kCachedMax = 1 << 16;
  std::mutex mutex_;
  std::unordered_map<std::string, Cached> cached_;
};

}  // namespace hots3::s3
