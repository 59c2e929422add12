#pragma once

// Incremental message digests shared by the store (MD5 for the ETag) and the S3 layer
// (Content-MD5, payload hashes). OpenSSL does the work (its assembly implementations) and
// stays out of this header.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace hots3 {

class Digest {
 public:
  enum class Algorithm : std::uint8_t { kMd5, kSha1, kSha256 };

  explicit Digest(Algorithm algorithm);
  ~Digest();
  Digest(Digest&&) noexcept;
  Digest& operator=(Digest&&) noexcept;
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;

  void update(std::span<const std::byte> data);
  void update(std::string_view data) { update(std::as_bytes(std::span(data.data(), data.size()))); }
  // The digest (16, 20 or 32 bytes); the object is reset for reuse.
  std::size_t finish(std::span<std::uint8_t, 32> out);

  [[nodiscard]] std::size_t size() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::array<std::uint8_t, 16> md5(std::span<const std::byte> data);
std::array<std::uint8_t, 32> sha256(std::span<const std::byte> data);
std::array<std::uint8_t, 32> hmac_sha256(std::span<const std::uint8_t> key, std::string_view data);
std::array<std::uint8_t, 20> hmac_sha1(std::span<const std::uint8_t> key, std::string_view data);

}  // namespace hots3
