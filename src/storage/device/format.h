#pragma once

// The on-disk formats of hots3, in one place, next to the code that reads and writes them.
//
// DEVICE (a block device or a regular file)
//
//   offset 0          superblock, one block (kSuperblockBytes), see Superblock below
//   kDataStartBytes   object data, in extents allocated by ExtentAllocator; everything from
//                     here to the end of the device belongs to the allocator
//
//   Object data is written once into freshly allocated extents and never modified in place:
//   an overwrite writes new extents and switches the catalog row in one transaction, so a
//   reader sees the old object or the new one, never a mix. Nothing on the device says which
//   extents are in use: the catalog is the only authority, and the free space is rebuilt from
//   it at start-up. A write that never reached a committed catalog transaction is therefore
//   free space after a crash, whatever its state on the device.
//
//   Integrity: every 4 KiB block of object data (kChecksumBlockBytes, counted from the start of
//   its extent) has a checksum (the low 32 bits of xxh3-64), kept in the catalog with the
//   extent. The last block of
//   an extent may be partial; its checksum covers only the bytes that belong to the object
//   (the zero padding that O_DIRECT writes need is not covered). Reads verify every block they
//   return; a mismatch is an error, never data.
//
// SUPERBLOCK (little-endian, at offset 0, padded with zeros to kSuperblockBytes)
//
//   0   u8[8]   magic "HOTS3DEV"
//   8   u32     format version (kFormatVersion)
//   12  u32     block size in bytes: the direct-I/O alignment the device was formatted with
//   16  u64     device size in bytes when formatted
//   24  u8[16]  device UUID (random, version 4); the catalog records it and refuses a device
//               whose UUID differs
//   40  u64     creation time, ms since the Unix epoch
//   48  u32     xxh3-32 (low 32 bits of xxh3-64) of bytes 0..47
//
// CATALOG (SQLite, <data_dir>/catalog.db, WAL mode): see src/storage/catalog/schema.h.

#include "hots3/common/result.h"
#include "hots3/common/units.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace hots3::storage {

inline constexpr std::uint32_t kFormatVersion = 1;
inline constexpr std::uint64_t kSuperblockBytes = 4096;
// Data starts at 1 MiB so that large extents are 1 MiB aligned from the start of the device.
inline constexpr std::uint64_t kDataStartBytes = kMiB;
inline constexpr std::uint64_t kChecksumBlockBytes = 4096;

using DeviceUuid = std::array<std::uint8_t, 16>;

struct Superblock {
  std::uint32_t format_version = kFormatVersion;
  std::uint32_t block_size_bytes = 4096;
  std::uint64_t size_bytes = 0;
  DeviceUuid uuid{};
  std::uint64_t created_ms = 0;
};

// Encodes into `out` (kSuperblockBytes, zero-padded).
void encode_superblock(const Superblock& superblock, std::span<std::byte> out);

// Decodes and checks magic, version and checksum. Errors: kCorrupt (bad magic or checksum:
// not a hots3 device, or damaged), kNotSupported (a format version this build cannot read).
Result<Superblock> decode_superblock(std::span<const std::byte> in);

// "8-4-4-4-12" lower-case hex.
std::string format_uuid(const DeviceUuid& uuid);

}  // namespace hots3::storage
