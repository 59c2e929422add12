// The deterministic payloads of the captured client traffic (tests/data/wire/README.md, section
// 5): the concatenation of sha256(seed + i as 8 big-endian bytes), i = 0, 1, 2, ... The captures
// keep only the start of a large body; the tests rebuild the rest from its seed.
#pragma once

#include "hots3/common/digest.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace hots3::test {

inline std::string generated_payload(std::string_view seed, std::size_t n) {
  std::string out;
  out.reserve(n + 32);
  for (std::uint64_t i = 0; out.size() < n; ++i) {
    std::string block(seed);
    for (int b = 7; b >= 0; --b) block.push_back(static_cast<char>((i >> (8 * b)) & 0xff));
    const auto h = hots3::sha256(std::as_bytes(std::span(block.data(), block.size())));
    out.append(reinterpret_cast<const char*>(h.data()), h.size());
  }
  out.resize(n);
  return out;
}

}  // namespace hots3::test
