#include "storage/device/format.h"

#include "hots3/common/assert.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <cstring>

namespace hots3::storage {
namespace {

constexpr char kMagic[8] = {'H', 'O', 'T', 'S', '3', 'D', 'E', 'V'};
constexpr std::size_t kCheckedBytes = 48;

template <class T>
void put(std::span<std::byte> out, std::size_t at, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out[at + i] = static_cast<std::byte>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xff);
  }
}

template <class T>
T get(std::span<const std::byte> in, std::size_t at) {
  std::uint64_t v = 0;
  for (std::size_t i = sizeof(T); i-- > 0;)
    v = (v << 8) | std::to_integer<std::uint64_t>(in[at + i]);
  return static_cast<T>(v);
}

std::uint32_t header_checksum(std::span<const std::byte> bytes) {
  return static_cast<std::uint32_t>(XXH3_64bits(bytes.data(), kCheckedBytes));
}

}  // namespace

void encode_superblock(const Superblock& sb, std::span<std::byte> out) {
  H3_ASSERT(out.size() >= kSuperblockBytes);
  std::memset(out.data(), 0, kSuperblockBytes);
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  put<std::uint32_t>(out, 8, sb.format_version);
  put<std::uint32_t>(out, 12, sb.block_size_bytes);
  put<std::uint64_t>(out, 16, sb.size_bytes);
  std::memcpy(out.data() + 24, sb.uuid.data(), sb.uuid.size());
  put<std::uint64_t>(out, 40, sb.created_ms);
  put<std::uint32_t>(out, 48, header_checksum(out));
}

Result<Superblock> decode_superblock(std::span<const std::byte> in) {
  H3_ASSERT(in.size() >= kSuperblockBytes);
  if (std::memcmp(in.data(), kMagic, sizeof kMagic) != 0) return errc::kCorrupt;
  if (get<std::uint32_t>(in, 48) != header_checksum(in)) return errc::kCorrupt;
  Superblock sb;
  sb.format_version = get<std::uint32_t>(in, 8);
  if (sb.format_version != kFormatVersion) return errc::kNotSupported;
  sb.block_size_bytes = get<std::uint32_t>(in, 12);
  sb.size_bytes = get<std::uint64_t>(in, 16);
  std::memcpy(sb.uuid.data(), in.data() + 24, sb.uuid.size());
  sb.created_ms = get<std::uint64_t>(in, 40);
  return sb;
}

std::string format_uuid(const DeviceUuid& u) {
  return fmt::format(
      "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:"
      "02x}{:02x}",
      u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
      u[15]);
}

}  // namespace hots3::storage
