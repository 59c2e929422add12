#pragma once

#include <cstdint>
#include <vector>

namespace hots3::storage {

// A run of device bytes.
struct Extent {
  std::uint64_t offset_bytes = 0;
  std::uint64_t length_bytes = 0;

  [[nodiscard]] std::uint64_t end_bytes() const noexcept { return offset_bytes + length_bytes; }
  friend bool operator==(const Extent&, const Extent&) = default;
};

using ExtentList = std::vector<Extent>;

}  // namespace hots3::storage
