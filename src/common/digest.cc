#include "hots3/common/digest.h"

#include "hots3/common/assert.h"

#include <openssl/evp.h>

#include <algorithm>

namespace hots3 {

struct Digest::Impl {
  EVP_MD_CTX* ctx = nullptr;
  const EVP_MD* md = nullptr;
  ~Impl() { EVP_MD_CTX_free(ctx); }
  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  Impl(Impl&&) = delete;
  Impl& operator=(Impl&&) = delete;
};

Digest::Digest(Algorithm algorithm) : impl_(std::make_unique<Impl>()) {
  switch (algorithm) {
    case Algorithm::kMd5:
      impl_->md = EVP_md5();
      break;
    case Algorithm::kSha1:
      impl_->md = EVP_sha1();
      break;
    case Algorithm::kSha256:
      impl_->md = EVP_sha256();
      break;
  }
  impl_->ctx = EVP_MD_CTX_new();
  H3_ASSERT(impl_->ctx != nullptr && EVP_DigestInit_ex(impl_->ctx, impl_->md, nullptr) == 1);
}

Digest::~Digest() = default;
Digest::Digest(Digest&&) noexcept = default;
Digest& Digest::operator=(Digest&&) noexcept = default;

void Digest::update(std::span<const std::byte> data) {
  H3_ASSERT(EVP_DigestUpdate(impl_->ctx, data.data(), data.size()) == 1);
}

std::size_t Digest::finish(std::span<std::uint8_t, 32> out) {
  unsigned length = 0;
  H3_ASSERT(EVP_DigestFinal_ex(impl_->ctx, out.data(), &length) == 1);
  H3_ASSERT(EVP_DigestInit_ex(impl_->ctx, impl_->md, nullptr) == 1);
  return length;
}

std::size_t Digest::size() const noexcept {
  return static_cast<std::size_t>(EVP_MD_get_size(impl_->md));
}

std::array<std::uint8_t, 16> md5(std::span<const std::byte> data) {
  Digest d(Digest::Algorithm::kMd5);
  d.update(data);
  std::array<std::uint8_t, 32> full{};
  d.finish(full);
  std::array<std::uint8_t, 16> out{};
  std::copy_n(full.begin(), 16, out.begin());
  return out;
}

std::array<std::uint8_t, 32> sha256(std::span<const std::byte> data) {
  Digest d(Digest::Algorithm::kSha256);
  d.update(data);
  std::array<std::uint8_t, 32> out{};
  d.finish(out);
  return out;
}

}  // namespace hots3
