#pragma once

// Block checksums of stored data (format.h, "Integrity"): the low 32 bits of xxh3-64 per
// 4 KiB block. 4 bytes per 4 KiB keeps the catalog at about 0.1% of the data
// while still catching bit rot, torn and misdirected writes.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hots3::storage {

std::uint32_t block_checksum(std::span<const std::byte> data) noexcept;

// Stored blocks found damaged by a read since the process started (StoreStats reports them).
void count_checksum_failure() noexcept;
[[nodiscard]] std::uint64_t checksum_failures() noexcept;

// Appends the checksum of every kChecksumBlockBytes block of `data` to `out`; the last block
// may be shorter.
void append_block_checksums(std::span<const std::byte> data, std::vector<std::uint32_t>& out);

// Encoding of a checksum list in the catalog: 4 bytes each, little-endian.
std::string encode_checksums(std::span<const std::uint32_t> sums);
std::vector<std::uint32_t> decode_checksums(std::span<const std::byte> blob);

}  // namespace hots3::storage
