#include "client_tokens.h"

#include "hots3/common/digest.h"

#include <cstring>
#include <span>
#include <string>

namespace hots3::s3 {
namespace {

// SHA-256 of the parts, each preceded by its length, so that no two lists of parts share a
// digest by moving a boundary.
template <class... Parts>
std::array<std::uint8_t, 32> digest(Parts... parts) {
  Digest d(Digest::Algorithm::kSha256);
  for (std::string_view part : {std::string_view(parts)...}) {
    const std::uint64_t length = part.size();
    std::array<std::byte, sizeof length> prefix{};
    std::memcpy(prefix.data(), &length, sizeof length);
    d.update(std::span<const std::byte>(prefix));
    d.update(part);
  }
  std::array<std::uint8_t, 32> out{};
  d.finish(out);
  return out;
}

}  // namespace

std::size_t ClientTokens::HashOfHash::operator()(const Hash& h) const noexcept {
  std::size_t value = 0;
  std::memcpy(&value, h.data(), sizeof value);  // already uniformly distributed
  return value;
}

ClientTokens::Seen ClientTokens::find(std::string_view scope, std::string_view token,
                                      std::string_view parameters) {
  const Hash key = digest(scope, token);
  const Hash wanted = digest(parameters);
  std::lock_guard lock(mutex_);
  auto it = index_.find(key);
  if (it == index_.end()) return Seen::kNew;
  return it->second->parameters == wanted ? Seen::kSame : Seen::kDifferent;
}

void ClientTokens::remember(std::string_view scope, std::string_view token,
                            std::string_view parameters) {
  const Entry entry{digest(scope, token), digest(parameters)};
  std::lock_guard lock(mutex_);
  if (auto it = index_.find(entry.token); it != index_.end()) {
    order_.erase(it->second);
    index_.erase(it);
  }
  order_.push_front(entry);
  index_.emplace(entry.token, order_.begin());
  if (order_.size() > tokens_max_) {
    index_.erase(order_.back().token);
    order_.pop_back();
  }
}

std::size_t ClientTokens::size() const {
  std::lock_guard lock(mutex_);
  return order_.size();
}

}  // namespace hots3::s3
