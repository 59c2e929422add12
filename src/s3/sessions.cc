// S3 Express sessions: tokens that carry their own grant under the server's key.

#include "sessions.h"

#include "hots3/aws/checksum.h"
#include "hots3/common/clock.h"
#include "hots3/common/random.h"

#include <array>
#include <cstring>
#include <optional>
#include <span>

namespace hots3::s3 {
namespace {

// A token is base64 of: version, expiry (ms, big-endian), mode, 16 random bytes (no two sessions
// alike), the user's name and the bucket's (each after its length byte), then the tag.
constexpr std::uint8_t kVersion = 1;
constexpr std::size_t kNonceBytes = 16;
constexpr std::size_t kTagBytes = 32;
constexpr std::size_t kHeaderBytes = 1 + 8 + 1 + kNonceBytes;
// Session access keys look like users' (20 characters of A-Z 2-7) after a prefix of their own.
constexpr std::string_view kAccessKeyPrefix = "H3S";
constexpr std::string_view kBase32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

std::string_view as_text(std::span<const std::uint8_t> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

Error invalid_token() { return Error(Code::kInvalidToken); }

// Whether two tokens are equal, in a time that depends on their length only: eight bytes at a
// time (a token is some 150 bytes, compared on every request of its session).
bool same_token(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  std::uint64_t diff = 0;
  std::size_t i = 0;
  for (; i + 8 <= a.size(); i += 8) {
    std::uint64_t x = 0;
    std::uint64_t y = 0;
    std::memcpy(&x, a.data() + i, 8);
    std::memcpy(&y, b.data() + i, 8);
    diff |= x ^ y;
  }
  for (; i < a.size(); ++i) diff |= static_cast<std::uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

Sessions::Sessions(std::string_view key, FindUser find_user)
    : key_(key), find_user_(std::move(find_user)) {
  if (key_.empty()) {
    std::array<std::byte, 32> random{};
    random_bytes(random);
    key_.assign(reinterpret_cast<const char*>(random.data()), random.size());
  }
}

std::int64_t Sessions::now_ms() const noexcept {
  return hots3::now_ms() + offset_ms_.load(std::memory_order_relaxed);
}

void Sessions::advance(std::chrono::milliseconds by) noexcept {
  offset_ms_.fetch_add(by.count(), std::memory_order_relaxed);
}

std::array<std::uint8_t, 32> Sessions::mac(std::string_view what, std::string_view data) const {
  std::string text(what);
  text += '\n';
  text += data;
  return aws::hmac_sha256({reinterpret_cast<const std::uint8_t*>(key_.data()), key_.size()}, text);
}

std::string Sessions::access_key_of(std::string_view tag) const {
  const auto h = mac("access key", tag);
  std::string out(kAccessKeyPrefix);
  for (std::size_t i = out.size(); i < 20; ++i) out += kBase32[h[i] % kBase32.size()];
  return out;
}

std::string Sessions::secret_key_of(std::string_view tag) const {
  const auto h = mac("secret key", tag);
  return aws::base64_encode(std::as_bytes(std::span(h))).substr(0, 40);
}

SessionCredentials Sessions::create(const config::UserConfig& user, std::string_view bucket,
                                    SessionMode mode) {
  const std::int64_t expires_ms = now_ms() + kLifetimeMs;
  std::string payload;
  payload += static_cast<char>(kVersion);
  for (int shift = 56; shift >= 0; shift -= 8)
    payload += static_cast<char>((static_cast<std::uint64_t>(expires_ms) >> shift) & 0xff);
  payload += static_cast<char>(mode);
  std::array<std::byte, kNonceBytes> nonce{};
  random_bytes(nonce);
  payload.append(reinterpret_cast<const char*>(nonce.data()), nonce.size());
  // Names of users and buckets are short (a bucket's at most 63 bytes); longer would not fit
  // a length byte and is cut, which only makes the token fail to open.
  for (std::string_view name : {std::string_view(user.name), bucket}) {
    name = name.substr(0, 255);
    payload += static_cast<char>(name.size());
    payload += name;
  }
  const auto tag = mac("token", payload + '\n' + user.access_key + '\n' + user.secret_key);
  const std::string_view tag_text = as_text(tag);
  SessionCredentials c;
  c.access_key = access_key_of(tag_text);
  c.secret_key = secret_key_of(tag_text);
  c.token = aws::base64_encode(payload + std::string(tag_text));
  c.expires_ms = expires_ms;
  return c;
}

std::variant<Sessions::Opened, Error> Sessions::open(std::string_view access_key,
                                                     std::string_view token) const {
  if (token.size() > 1024) return invalid_token();
  auto bytes = aws::base64_decode(token);
  if (!bytes || bytes->size() < kHeaderBytes + 2 + kTagBytes ||
      static_cast<std::uint8_t>((*bytes)[0]) != kVersion)
    return invalid_token();
  const std::string_view all(*bytes);
  const std::string_view payload = all.substr(0, all.size() - kTagBytes);
  const std::string_view tag = all.substr(payload.size());
  Opened o;
  std::uint64_t expires = 0;
  for (std::size_t i = 1; i < 9; ++i) expires = (expires << 8) | static_cast<std::uint8_t>(all[i]);
  o.expires_ms = static_cast<std::int64_t>(expires);
  const auto mode = static_cast<std::uint8_t>(all[9]);
  if (mode != static_cast<std::uint8_t>(SessionMode::kReadWrite) &&
      mode != static_cast<std::uint8_t>(SessionMode::kReadOnly))
    return invalid_token();
  o.mode = static_cast<SessionMode>(mode);
  std::string_view rest = payload.substr(kHeaderBytes);
  std::array<std::string_view, 2> names;
  for (auto& name : names) {
    if (rest.empty()) return invalid_token();
    const std::size_t n = static_cast<std::uint8_t>(rest[0]);
    if (rest.size() < 1 + n) return invalid_token();
    name = rest.substr(1, n);
    rest.remove_prefix(1 + n);
  }
  if (!rest.empty()) return invalid_token();
  o.user = find_user_(names[0]);
  if (o.user == nullptr) return invalid_token();
  const auto expected =
      mac("token", std::string(payload) + '\n' + o.user->access_key + '\n' + o.user->secret_key);
  if (!aws::signatures_equal(as_text(expected), tag)) return invalid_token();
  if (access_key_of(tag) != access_key) return invalid_token();
  o.bucket = names[1];
  o.secret_key = secret_key_of(tag);
  return o;
}

std::variant<Sessions::Verified, Error> Sessions::verify(
    std::string_view access_key, std::string_view token, std::string_view bucket,
    const aws::SigningScope& scope, std::string_view string_to_sign, std::string_view signature) {
  std::string id;
  id.reserve(access_key.size() + scope.date.size() + scope.region.size() + scope.service.size() +
             4);
  id.append(access_key).append("/").append(scope.date).append("/").append(scope.region);
  id.append("/").append(scope.service);
  // A session seen before is compared and copied under the lock (no allocation); a new one is
  // opened outside it.
  Verified verified;
  std::int64_t expires_ms = 0;
  bool same_bucket = false;
  std::optional<Cached> opened_now;
  {
    const std::lock_guard lock(mutex_);
    if (auto it = cached_.find(id); it != cached_.end() && same_token(it->second.token, token)) {
      const Cached& c = it->second;
      verified = {.user = c.user, .mode = c.mode, .signing_key = c.signing_key};
      expires_ms = c.expires_ms;
      same_bucket = c.bucket == bucket;
    }
  }
  // A session of a user since replaced (a reload changed the users) is opened again: against
  // the users in use, whose secret the token's tag must still match.
  if (verified.user != nullptr && find_user_(verified.user->name) != verified.user) verified = {};
  if (verified.user == nullptr) {
    auto opened = open(access_key, token);
    if (auto* e = std::get_if<Error>(&opened)) return std::move(*e);
    auto& o = std::get<Opened>(opened);
    opened_now = Cached{.token = std::string(token),
                        .bucket = std::move(o.bucket),
                        .user = o.user,
                        .mode = o.mode,
                        .expires_ms = o.expires_ms,
                        .signing_key = aws::signing_key(o.secret_key, scope)};
    verified = {.user = o.user, .mode = o.mode, .signing_key = opened_now->signing_key};
    expires_ms = o.expires_ms;
    same_bucket = opened_now->bucket == bucket;
  }
  const std::int64_t now = now_ms();
  if (now >= expires_ms) return Error(Code::kExpiredToken);
  if (!same_bucket) {
    return Error(Code::kAccessDenied,
                 "The session's credentials are for another bucket; create a session for this "
                 "one.");
  }
  if (!aws::signatures_equal(aws::sign(verified.signing_key, string_to_sign), signature))
    return Error(Code::kSignatureDoesNotMatch);
  // Only a session that verified a signature is kept: a token alone, which anyone may make up,
  // must not fill the table.
  if (opened_now) {
    const std::lock_guard lock(mutex_);
    if (cached_.size() >= kCachedMax) {
      std::erase_if(cached_, [now](const auto& entry) { return now >= entry.second.expires_ms; });
      if (cached_.size() >= kCachedMax) cached_.clear();
    }
    cached_.insert_or_assign(std::move(id), std::move(*opened_now));
  }
  return verified;
}

}  // namespace hots3::s3
