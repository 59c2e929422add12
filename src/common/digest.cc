// SHA-256's and SHA-1's own functions (SHA256_Init and the like) are deprecated in favour of
// EVP, which reaches the same code through a provider: each call looks up the provider's
// functions, and an HMAC copies its keyed state into a context it allocates, twice per message.
// A SigV4 request hashes its canonical request and signs with one key (a user's, for the day):
// with the keyed states kept and copied as plain structures, the digest and the HMAC cost a
// small request 0.4 us less. The HMACs (SHA-256 for SigV4, SHA-1 for SigV2) and the one-shot
// SHA-256 use them; the other digests and the streaming Digest go through EVP.
#define OPENSSL_SUPPRESS_DEPRECATED  // NOLINT(cppcoreguidelines-macro-usage)

#include "hots3/common/digest.h"

#include "hots3/common/assert.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <algorithm>

namespace hots3 {
namespace {

// Each algorithm fetched from OpenSSL's provider once. A digest begun with EVP_md5() and the like
// looks its implementation up again on every init (a lock and a table look-up), which at one
// SigV4 request hash per request was a visible share of a small request's CPU.
const EVP_MD* fetched(Digest::Algorithm algorithm) {
  static const EVP_MD* const md5_impl = EVP_MD_fetch(nullptr, "MD5", nullptr);
  static const EVP_MD* const sha1_impl = EVP_MD_fetch(nullptr, "SHA1", nullptr);
  static const EVP_MD* const sha256_impl = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  const EVP_MD* md = nullptr;
  switch (algorithm) {
    case Digest::Algorithm::kMd5:
      md = md5_impl;
      break;
    case Digest::Algorithm::kSha1:
      md = sha1_impl;
      break;
    case Digest::Algorithm::kSha256:
      md = sha256_impl;
      break;
  }
  H3_ASSERT(md != nullptr, "OpenSSL has no such digest");
  return md;
}

// HMAC (RFC 2104) over a hash's own functions, with the states after the padded key's block
// kept: a message then costs its own blocks and one more, and a key is taken again only when it
// is not the one held.
template <class Ctx, int (*kInit)(Ctx*), int (*kUpdate)(Ctx*, const void*, std::size_t),
          int (*kFinal)(unsigned char*, Ctx*), std::size_t N>
struct Hmac {
  static constexpr std::size_t kBlock = 64;  // SHA-1's and SHA-256's
  Ctx inner{};                               // after (key ^ ipad)
  Ctx outer{};                               // after (key ^ opad)
  std::array<std::uint8_t, kBlock> key{};
  std::size_t key_size = 0;  // 0: not keyed (a key longer than `key` is never kept)

  void set_key(std::span<const std::uint8_t> k) {
    std::array<std::uint8_t, kBlock> block{};
    if (k.size() > block.size()) {
      Ctx c;
      kInit(&c);
      kUpdate(&c, k.data(), k.size());
      kFinal(block.data(), &c);
    } else {
      std::copy(k.begin(), k.end(), block.begin());
    }
    std::array<std::uint8_t, kBlock> pad{};
    for (std::size_t i = 0; i < block.size(); ++i) pad[i] = block[i] ^ 0x36;
    kInit(&inner);
    kUpdate(&inner, pad.data(), pad.size());
    for (std::size_t i = 0; i < block.size(); ++i) pad[i] = block[i] ^ 0x5c;
    kInit(&outer);
    kUpdate(&outer, pad.data(), pad.size());
    OPENSSL_cleanse(block.data(), block.size());
    OPENSSL_cleanse(pad.data(), pad.size());
    key_size = 0;
    if (!k.empty() && k.size() <= key.size()) {
      std::copy(k.begin(), k.end(), key.begin());
      key_size = k.size();
    }
  }

  std::array<std::uint8_t, N> sign(std::span<const std::uint8_t> k, std::string_view data) {
    const bool same_key =
        key_size != 0 && key_size == k.size() && CRYPTO_memcmp(key.data(), k.data(), k.size()) == 0;
    if (!same_key) set_key(k);
    std::array<std::uint8_t, N> digest{};
    Ctx c = inner;
    kUpdate(&c, data.data(), data.size());
    kFinal(digest.data(), &c);
    c = outer;
    kUpdate(&c, digest.data(), digest.size());
    kFinal(digest.data(), &c);
    OPENSSL_cleanse(&c, sizeof c);
    return digest;
  }

  ~Hmac() {
    OPENSSL_cleanse(&inner, sizeof inner);
    OPENSSL_cleanse(&outer, sizeof outer);
    OPENSSL_cleanse(key.data(), key.size());
  }
  Hmac() = default;
  Hmac(const Hmac&) = delete;
  Hmac& operator=(const Hmac&) = delete;
  Hmac(Hmac&&) = delete;
  Hmac& operator=(Hmac&&) = delete;
};
using Sha256Hmac = Hmac<SHA256_CTX, SHA256_Init, SHA256_Update, SHA256_Final, 32>;
using Sha1Hmac = Hmac<SHA_CTX, SHA1_Init, SHA1_Update, SHA1_Final, 20>;

// A context per thread for one-shot digests and HMACs: made once, not per call.
struct ThreadContexts {
  EVP_MD_CTX* digest = EVP_MD_CTX_new();
  Sha256Hmac hmac_sha256;
  Sha1Hmac hmac_sha1;
  ThreadContexts() { H3_ASSERT(digest != nullptr); }
  ~ThreadContexts() { EVP_MD_CTX_free(digest); }
  ThreadContexts(const ThreadContexts&) = delete;
  ThreadContexts& operator=(const ThreadContexts&) = delete;
  ThreadContexts(ThreadContexts&&) = delete;
  ThreadContexts& operator=(ThreadContexts&&) = delete;
};
ThreadContexts& thread_contexts() {
  thread_local ThreadContexts contexts;
  return contexts;
}

template <std::size_t N>
std::array<std::uint8_t, N> one_shot(Digest::Algorithm algorithm, std::span<const std::byte> data) {
  EVP_MD_CTX* ctx = thread_contexts().digest;
  std::array<std::uint8_t, EVP_MAX_MD_SIZE> full{};
  unsigned length = 0;
  H3_ASSERT(EVP_DigestInit_ex2(ctx, fetched(algorithm), nullptr) == 1);
  H3_ASSERT(EVP_DigestUpdate(ctx, data.data(), data.size()) == 1);
  H3_ASSERT(EVP_DigestFinal_ex(ctx, full.data(), &length) == 1 && length == N);
  std::array<std::uint8_t, N> out{};
  std::copy_n(full.begin(), N, out.begin());
  return out;
}

}  // namespace

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
  impl_->md = fetched(algorithm);
  impl_->ctx = EVP_MD_CTX_new();
  H3_ASSERT(impl_->ctx != nullptr && EVP_DigestInit_ex2(impl_->ctx, impl_->md, nullptr) == 1);
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
  H3_ASSERT(EVP_DigestInit_ex2(impl_->ctx, impl_->md, nullptr) == 1);
  return length;
}

std::size_t Digest::size() const noexcept {
  return static_cast<std::size_t>(EVP_MD_get_size(impl_->md));
}

std::array<std::uint8_t, 16> md5(std::span<const std::byte> data) {
  return one_shot<16>(Digest::Algorithm::kMd5, data);
}

std::array<std::uint8_t, 32> sha256(std::span<const std::byte> data) {
  std::array<std::uint8_t, 32> out{};
  SHA256_CTX c;
  SHA256_Init(&c);
  SHA256_Update(&c, data.data(), data.size());
  SHA256_Final(out.data(), &c);
  return out;
}

std::array<std::uint8_t, 32> hmac_sha256(std::span<const std::uint8_t> key, std::string_view data) {
  return thread_contexts().hmac_sha256.sign(key, data);
}

std::array<std::uint8_t, 20> hmac_sha1(std::span<const std::uint8_t> key, std::string_view data) {
  return thread_contexts().hmac_sha1.sign(key, data);
}

}  // namespace hots3
