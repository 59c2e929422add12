#pragma once

// The checksums S3 clients send and S3 keeps: CRC32 (IEEE), CRC32C (Castagnoli), CRC64NVME,
// SHA1 and SHA256, computed incrementally over a stream. Values travel base64-encoded (of the
// big-endian integer for the CRCs, of the digest for the SHAs), as in x-amz-checksum-* headers.
// CRC32 and CRC32C come from isa-l (vectorised); CRC64NVME is ours (isa-l 2.30 predates it).

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace hots3::aws {

enum class ChecksumAlgorithm : std::uint8_t { kCrc32, kCrc32c, kCrc64Nvme, kSha1, kSha256 };

// "CRC32" ↔ kCrc32, ... (case-insensitive parse); nullopt for anything else.
std::optional<ChecksumAlgorithm> parse_checksum_algorithm(std::string_view name);
std::string_view checksum_name(
    ChecksumAlgorithm algorithm);  // "CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"
std::string_view checksum_header(ChecksumAlgorithm algorithm);  // "x-amz-checksum-crc32", ...

class Checksummer {
 public:
  explicit Checksummer(ChecksumAlgorithm algorithm);
  ~Checksummer();
  Checksummer(Checksummer&&) noexcept;
  Checksummer& operator=(Checksummer&&) noexcept;
  Checksummer(const Checksummer&) = delete;
  Checksummer& operator=(const Checksummer&) = delete;

  void update(std::span<const std::byte> data);
  // The base64 value of everything so far (does not reset).
  [[nodiscard]] std::string base64() const;
  // The raw big-endian bytes (4, 8, 20 or 32).
  [[nodiscard]] std::string raw() const;
  [[nodiscard]] ChecksumAlgorithm algorithm() const noexcept { return algorithm_; }

 private:
  struct Impl;
  ChecksumAlgorithm algorithm_;
  std::uint64_t crc_ = 0;
  std::unique_ptr<Impl> digest_;  // SHA1/SHA256 only
};

// One-shot helpers. Each takes and returns the finished CRC (as zlib's crc32 does): pass the
// result for the bytes so far as `previous` to continue a stream; 0 starts one.
std::uint32_t crc32(std::span<const std::byte> data, std::uint32_t previous = 0);
std::uint32_t crc32c(std::span<const std::byte> data, std::uint32_t previous = 0);
std::uint64_t crc64nvme(std::span<const std::byte> data, std::uint64_t previous = 0);
// The same for any CRC algorithm. REQUIRES: kCrc32, kCrc32c or kCrc64Nvme.
std::uint64_t crc_update(ChecksumAlgorithm algorithm, std::uint64_t previous,
                         std::span<const std::byte> data);

// The CRC of A‖B from crc(A), crc(B) and the length of B, as zlib's crc32_combine: crc(A) is
// multiplied by x^(8·length_b) modulo the polynomial (GF(2), by squaring) and added to crc(B).
// This is how the checksum of a multipart object made of parts is found without reading them
// (S3's FULL_OBJECT checksums). Takes and returns finished values, as the one-shot helpers.
// REQUIRES: `algorithm` is kCrc32, kCrc32c or kCrc64Nvme.
std::uint64_t crc_combine(ChecksumAlgorithm algorithm, std::uint64_t crc_a, std::uint64_t crc_b,
                          std::uint64_t length_b);
// A CRC as x-amz-checksum-* carries it (base64 of the big-endian value) and back. Errors:
// nullopt when `text` is not base64 of exactly 4 (CRC32, CRC32C) or 8 (CRC64NVME) bytes.
// REQUIRES: a CRC algorithm.
std::string crc_to_base64(ChecksumAlgorithm algorithm, std::uint64_t crc);
std::optional<std::uint64_t> crc_from_base64(ChecksumAlgorithm algorithm, std::string_view text);

std::string base64_encode(std::span<const std::byte> data);
std::string base64_encode(std::string_view data);
// Errors: nullopt when `text` is not valid padded base64 of the standard alphabet (no
// whitespace, '=' only at the end, unused bits zero: one text per value).
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace hots3::aws
