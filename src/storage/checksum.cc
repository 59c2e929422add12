#include "storage/checksum.h"

#include "storage/device/format.h"

#include <xxhash.h>

#include <atomic>

namespace hots3::storage {

namespace {
std::atomic<std::uint64_t> g_checksum_failures{0};
}  // namespace

void count_checksum_failure() noexcept {
  g_checksum_failures.fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t checksum_failures() noexcept {
  return g_checksum_failures.load(std::memory_order_relaxed);
}

std::uint32_t block_checksum(std::span<const std::byte> data) noexcept {
  return static_cast<std::uint32_t>(XXH3_64bits(data.data(), data.size()));
}

void append_block_checksums(std::span<const std::byte> data, std::vector<std::uint32_t>& out) {
  for (std::size_t at = 0; at < data.size(); at += kChecksumBlockBytes) {
    out.push_back(block_checksum(
        data.subspan(at, std::min<std::size_t>(kChecksumBlockBytes, data.size() - at))));
  }
}

std::string encode_checksums(std::span<const std::uint32_t> sums) {
  std::string blob(sums.size() * 4, '\0');
  for (std::size_t i = 0; i < sums.size(); ++i) {
    for (std::size_t b = 0; b < 4; ++b)
      blob[i * 4 + b] = static_cast<char>((sums[i] >> (8 * b)) & 0xff);
  }
  return blob;
}

std::vector<std::uint32_t> decode_checksums(std::span<const std::byte> blob) {
  std::vector<std::uint32_t> sums(blob.size() / 4);
  for (std::size_t i = 0; i < sums.size(); ++i) {
    std::uint32_t v = 0;
    for (std::size_t b = 4; b-- > 0;)
      v = (v << 8) | std::to_integer<std::uint32_t>(blob[i * 4 + b]);
    sums[i] = v;
  }
  return sums;
}

}  // namespace hots3::storage
