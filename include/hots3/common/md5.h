#pragma once

// MD5 for ETags, with a multi-buffer form. One MD5 stream is a chain of dependent 32-bit
// operations (about 750 MB/s per core here, whatever the implementation), and S3 wants it over
// every byte written. But a server writes many streams at once: hashing up to eight of them
// together, one per 32-bit lane of a vector register, costs about what one costs alone. The
// single-stream form is for one message; update_many() is for several (OpenSSL has no
// multi-buffer MD5, and isa-l's crypto library is not packaged in Debian).

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace hots3 {

class Md5 {
 public:
  Md5() { reset(); }

  void update(std::span<const std::byte> data);
  // The digest; the object is reset for reuse.
  std::array<std::uint8_t, 16> finish();
  void reset();

  // update(data[i]) on *streams[i] for every i, several streams per instruction where the CPU
  // has the vectors (AVX2, AVX-512VL). REQUIRES: no stream appears twice.
  static void update_many(std::span<Md5* const> streams,
                          std::span<const std::span<const std::byte>> data);

  [[nodiscard]] std::uint64_t length() const noexcept { return length_; }

 private:
  // Hashes the pending partial block's completion from `data` and keeps the tail of `data` as
  // the next partial block; returns the whole blocks in between.
  std::span<const std::byte> take_blocks(std::span<const std::byte> data);

  std::array<std::uint32_t, 4> state_{};
  std::uint64_t length_ = 0;
  std::array<std::byte, 64> pending_{};
  std::size_t pending_bytes_ = 0;
};

}  // namespace hots3
