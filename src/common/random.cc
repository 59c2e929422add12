#include "hots3/common/random.h"

#include "hots3/common/assert.h"

#include <cerrno>
#include <cstdint>
#include <sys/random.h>

namespace hots3 {

void random_bytes(std::span<std::byte> out) {
  while (!out.empty()) {
    const ssize_t n = ::getrandom(out.data(), out.size(), 0);
    if (n < 0) {
      H3_ASSERT(errno == EINTR, "getrandom failed");
      continue;
    }
    out = out.subspan(static_cast<std::size_t>(n));
  }
}

std::uint64_t random_u64() {
  std::uint64_t value = 0;
  random_bytes(std::as_writable_bytes(std::span(&value, 1)));
  return value;
}

std::string random_string(std::size_t length, std::string_view alphabet) {
  H3_ASSERT(!alphabet.empty());
  // Rejection sampling keeps every character equally likely.
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % alphabet.size();
  std::string out;
  out.reserve(length);
  while (out.size() < length) {
    const std::uint64_t value = random_u64();
    if (value >= limit) continue;
    out += alphabet[value % alphabet.size()];
  }
  return out;
}

}  // namespace hots3
