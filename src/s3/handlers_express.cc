// What S3 Express One Zone offers beyond the S3 standard, for the checkpoint path: RenameObject
// (an atomic rename in one metadata transaction, instead of copy + delete).

#include <list>
#include <mutex>
#include <unordered_map>

#include "service.h"
#include "shared.h"
#include "time_format.h"

namespace hots3::s3 {
namespace {

// ---- preconditions of a rename ------------------------------------------------------------
//
// Both sides in RFC 9110's order (If-Match before If-Unmodified-Since, If-None-Match before
// If-Modified-Since); a rename is a write, so every failed condition is 412, never 304.

struct Conditions {
  std::optional<std::string> if_match;
  std::optional<std::string> if_none_match;
  std::optional<std::int64_t> if_modified_since_ms;
  std::optional<std::int64_t> if_unmodified_since_ms;
  // The header names, for the error's Condition element.
  std::string prefix;
};

Conditions conditions_of(const Request& r, std::string prefix) {
  Conditions c;
  auto text = [&](const char* name) -> std::optional<std::string> {
    if (auto v = r.header(prefix + name)) return std::string(*v);
    return std::nullopt;
  };
  auto date = [&](const char* name) -> std::optional<std::int64_t> {
    // An unparsable date is ignored, as RFC 9110 (and S3, for GET) has it.
    if (auto v = r.header(prefix + name)) return parse_http_date(*v);
    return std::nullopt;
  };
  c.if_match = text("if-match");
  c.if_none_match = text("if-none-match");
  c.if_modified_since_ms = date("if-modified-since");
  c.if_unmodified_since_ms = date("if-unmodified-since");
  c.prefix = std::move(prefix);
  return c;
}

// nullopt when `object` (nullopt: there is none) satisfies the conditions. If-Match and
// If-Modified-Since need an object ("renames the object if the destination exists and ..."),
// If-Unmodified-Since and If-None-Match hold without one.
std::optional<Error> check(const Conditions& c, const std::optional<storage::ObjectRecord>& object) {
  auto failed = [&](const char* name) { return Error(Code::kPreconditionFailed).with("Condition", c.prefix + name); };
  const std::optional<std::int64_t> modified_s =
      object ? std::optional<std::int64_t>(object->created_ms / 1000) : std::nullopt;
  if (c.if_match) {
    if (!object || !etag_matches(*c.if_match, object->etag)) return failed("If-Match");
  } else if (c.if_unmodified_since_ms && modified_s && *modified_s > *c.if_unmodified_since_ms / 1000) {
    return failed("If-Unmodified-Since");
  }
  if (c.if_none_match) {
    if (object && etag_matches(*c.if_none_match, object->etag)) return failed("If-None-Match");
  } else if (c.if_modified_since_ms && (!modified_s || *modified_s <= *c.if_modified_since_ms / 1000)) {
    return failed("If-Modified-Since");
  }
  return std::nullopt;
}

// ---- x-amz-client-token -------------------------------------------------------------------
//
// A rename retried with the same token and the same parameters succeeds without doing anything
// again (its source is gone by then); with other parameters it fails. Tokens of successful
// renames are remembered in memory, a bounded number of them (a restart forgets them: a retry
// after a restart fails with NoSuchKey, as a rename without a token does).

class ClientTokens {
 public:
  enum class Seen : std::uint8_t { kNew, kSame, kDifferent };

  Seen find(const std::string& token, const std::string& parameters) {
    std::lock_guard lock(mutex_);
    auto it = index_.find(token);
    if (it == index_.end()) return Seen::kNew;
    return it->second->second == parameters ? Seen::kSame : Seen::kDifferent;
  }

  void remember(std::string token, std::string parameters) {
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(token); it != index_.end()) {
      order_.erase(it->second);
      index_.erase(it);
    }
    order_.emplace_front(token, std::move(parameters));
    index_.emplace(std::move(token), order_.begin());
    if (order_.size() > kTokensMax) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }

 private:
  static constexpr std::size_t kTokensMax = 100'000;
  std::mutex mutex_;
  std::list<std::pair<std::string, std::string>> order_;  // newest first
  std::unordered_map<std::string, std::list<std::pair<std::string, std::string>>::iterator> index_;
};

ClientTokens& client_tokens() {
  static ClientTokens tokens;
  return tokens;
}

bool valid_client_token(std::string_view token) {
  return !token.empty() && token.size() <= 64 &&
         std::all_of(token.begin(), token.end(), [](char c) { return c >= 33 && c <= 126; });
}

}  // namespace

// ---- RenameObject ---------------------------------------------------------------------------

asio::awaitable<void> rename_object(Service& s, Request& r) {
  if (auto e = validate_key(r.key)) co_return co_await s.send_error(r, std::move(*e));
  auto header = r.header("x-amz-rename-source");
  if (!header || header->empty()) {
    co_return co_await s.send_error(r, Error(Code::kInvalidRequest, "Missing required header for this request: x-amz-rename-source"));
  }
  auto source = parse_copy_source(*header);
  if (auto* e = std::get_if<Error>(&source)) {
    Error error = std::move(*e);
    for (auto& [name, value] : error.details) {
      if (name == "ArgumentName") value = "x-amz-rename-source";
    }
    if (error.code == Code::kInvalidArgument) error.message = "Rename Source must mention the bucket and the key: /bucket/key";
    co_return co_await s.send_error(r, std::move(error));
  }
  const auto [source_bucket, source_key] = std::get<std::pair<std::string, std::string>>(std::move(source));
  if (auto e = validate_key(source_key)) co_return co_await s.send_error(r, std::move(*e));
  auto bucket = co_await s.bucket_for(r, Access::kWrite);
  if (!bucket) co_return;
  if (source_bucket != bucket->name) {
    co_return co_await s.send_error(r, Error(Code::kInvalidRequest, "The source and the destination of a rename must be in the same bucket."));
  }
  std::optional<std::string> token;
  if (auto t = r.header("x-amz-client-token")) {
    if (!valid_client_token(*t)) {
      co_return co_await s.send_error(r, Error(Code::kInvalidArgument, "x-amz-client-token must be 1 to 64 ASCII characters from 33 to 126.")
                                             .with("ArgumentName", "x-amz-client-token"));
    }
    token = std::string(*t);
  }
  const Conditions on_source = conditions_of(r, "x-amz-rename-source-");
  const Conditions on_target = conditions_of(r, "");

  // What a retry with the same token must repeat exactly: the object names and every condition.
  std::string parameters;
  std::string token_key;
  if (token) {
    token_key = std::to_string(reinterpret_cast<std::uintptr_t>(&s.store())) + '/' + std::to_string(bucket->id) + '/' + *token;
    parameters = source_key + '\0' + r.key;
    for (std::string_view h : {"if-match", "if-none-match", "if-modified-since", "if-unmodified-since",
                               "x-amz-rename-source-if-match", "x-amz-rename-source-if-none-match",
                               "x-amz-rename-source-if-modified-since", "x-amz-rename-source-if-unmodified-since"}) {
      parameters += '\0';
      parameters += r.header(h).value_or("-");
    }
    switch (client_tokens().find(token_key, parameters)) {
      case ClientTokens::Seen::kSame: co_return co_await s.send_empty(r, 200, s.response(r, 200));
      case ClientTokens::Seen::kDifferent: co_return co_await s.send_error(r, Code::kIdempotencyParameterMismatch);
      case ClientTokens::Seen::kNew: break;
    }
  }

  // Decided in the rename's transaction: neither object can change between check and rename.
  std::optional<Error> refused;
  auto decide = [&](const storage::ObjectRecord& from, const std::optional<storage::ObjectRecord>& target) -> Result<void> {
    refused = check(on_source, from);
    if (!refused) refused = check(on_target, target);
    if (refused) return errc::kPreconditionFailed;
    return {};
  };
  auto renamed = co_await s.store().rename_object(bucket->id, source_key, r.key, decide);
  if (!renamed) {
    if (refused) co_return co_await s.send_error(r, std::move(*refused));
    if (renamed.error() == errc::kNotFound) co_return co_await s.send_error(r, Error(Code::kNoSuchKey).with("Key", source_key));
    co_return co_await s.send_error(r, from_errc(renamed.error()));
  }
  if (token) client_tokens().remember(std::move(token_key), std::move(parameters));
  co_await s.send_empty(r, 200, s.response(r, 200));
}

}  // namespace hots3::s3
