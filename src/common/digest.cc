// SHA-256's own functions (SHA256_Init and the like) are deprecated in favour of EVP, which
// reaches the same code through a provider: each call looks up the provider's functions, and
// an HMAC copies its keyed state into a context it allocates, twice per message. A SigV4
// request hashes its canonical request and signs with one key (a user's, for the day): with the
// keyed states kept and copied as plain structures, the digest and the HMAC cost a small
// request 0.4 us less. Everything else goes through EVP.
#define OPENSSL_SUPPRESS_DEPRECATED  // NOLINT(cppcoreguidelines-macro-usage)

#include "hots3/common/digest.h"

#include "hots3/common/assert.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
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

// An HMAC context and the key it was last keyed with: keying costs two compressions and more,
// and a SigV4 server signs with the same key (a user's, for the day) request after request.
struct HmacContext {
  EVP_MAC_CTX* ctx = nullptr;
  std::array<std::uint8_t, 64> key{};
  std::size_t key_size = 0;  // 0: not keyed (a key longer than `key` is never kept)
};

// HMAC-SHA256 (RFC 2104) with the states after the padded key's block kept: a message then
// costs its own blocks and one more.
struct Sha256Hmac {
  SHA256_CTX inner{};  // after (key ^ ipad)
  SHA256_CTX outer{};  // after (key ^ opad)
  std::array<std::uint8_t, 64> key{};
  std::size_t key_size = 0;  // 0: not keyed (a key longer than `key` is never kept)

  void set_key(std::span<const std::uint8_t> k) {
    std::array<std::uint8_t, SHA256_CBLOCK> block{};
    if (k.size() > block.size()) {
      SHA256(k.data(), k.size(), block.data());
    } else {
      std::copy(k.begin(), k.end(), block.begin());
    }
    std::array<std::uint8_t, SHA256_CBLOCK> pad{};
    for (std::size_t i = 0; i < block.size(); ++i) pad[i] = block[i] ^ 0x36;
    SHA256_Init(&inner);
    SHA256_Update(&inner, pad.data(), pad.size());
    for (std::size_t i = 0; i < block.size(); ++i) pad[i] = block[i] ^ 0x5c;
    SHA256_Init(&outer);
    SHA256_Update(&outer, pad.data(), pad.size());
    OPENSSL_cleanse(block.data(), block.size());
    OPENSSL_cleanse(pad.data(), pad.size());
    key_size = 0;
    if (!k.empty() && k.size() <= key.size()) {
      std::copy(k.begin(), k.end(), key.begin());
      key_size = k.size();
    }
  }

  std::array<std::uint8_t, 32> sign(std::span<const std::uint8_t> k, std::string_view data) {
    const bool same_key =
        key_size != 0 && key_size == k.size() && CRYPTO_memcmp(key.data(), k.data(), k.size()) == 0;
    if (!same_key) set_key(k);
    std::array<std::uint8_t, 32> digest{};
    SHA256_CTX c = inner;
    SHA256_Update(&c, data.data(), data.size());
    SHA256_Final(digest.data(), &c);
    c = outer;
    SHA256_Update(&c, digest.data(), digest.size());
    SHA256_Final(digest.data(), &c);
    OPENSSL_cleanse(&c, sizeof c);
    return digest;
  }

  ~Sha256Hmac() {
    OPENSSL_cleanse(&inner, sizeof inner);
    OPENSSL_cleanse(&outer, sizeof outer);
    OPENSSL_cleanse(key.data(), key.size());
  }
  Sha256Hmac() = default;
  Sha256Hmac(const Sha256Hmac&) = delete;
  Sha256Hmac& operator=(const Sha256Hmac&) = delete;
  Sha256Hmac(Sha256Hmac&&) = delete;
  Sha256Hmac& operator=(Sha256Hmac&&) = delete;
};

// A context per thread for one-shot digests and HMACs: made once, not per call.
struct ThreadContexts {
  EVP_MD_CTX* digest = EVP_MD_CTX_new();
  Sha256Hmac hmac_sha256;
  HmacContext hmac_sha1;
  ThreadContexts() { H3_ASSERT(digest != nullptr); }
  ~ThreadContexts() {
    EVP_MD_CTX_free(digest);
    EVP_MAC_CTX_free(hmac_sha1.ctx);
    OPENSSL_cleanse(hmac_sha1.key.data(), hmac_sha1.key.size());
  }
  ThreadContexts(const ThreadContexts&) = delete;
  ThreadContexts& operator=(const ThreadContexts&) = delete;
  ThreadContexts(ThreadContexts&&) = delete;
  ThreadContexts& operator=(ThreadContexts&&) = delete;
};
ThreadContexts& thread_contexts() {
  thread_local ThreadContexts contexts;
  return contexts;
}

// The HMAC of `data` under `key` with the context `h` of `digest_name`: made on first use, keyed
// again only when the key is not the one it holds (EVP_MAC_init without a key starts over with
// the key it has).
template <std::size_t N>
std::array<std::uint8_t, N> hmac(HmacContext& h, const char* digest_name,
                                 std::span<const std::uint8_t> key, std::string_view data) {
  if (h.ctx == nullptr) {
    static EVP_MAC* const hmac_impl = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    H3_ASSERT(hmac_impl != nullptr, "OpenSSL has no HMAC");
    h.ctx = EVP_MAC_CTX_new(hmac_impl);
    H3_ASSERT(h.ctx != nullptr);
    std::array<OSSL_PARAM, 2> params = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, const_cast<char*>(digest_name), 0),
        OSSL_PARAM_construct_end()};
    H3_ASSERT(EVP_MAC_CTX_set_params(h.ctx, params.data()) == 1);
  }
  EVP_MAC_CTX* ctx = h.ctx;
  const bool same_key = h.key_size != 0 && h.key_size == key.size() &&
                        CRYPTO_memcmp(h.key.data(), key.data(), key.size()) == 0;
  std::array<std::uint8_t, N> out{};
  std::size_t length = 0;
  if (same_key) {
    H3_ASSERT(EVP_MAC_init(ctx, nullptr, 0, nullptr) == 1);
  } else {
    h.key_size = 0;
    // (Never a null key: that would mean "the key it has".)
    static constexpr std::uint8_t kNoKey = 0;
    H3_ASSERT(EVP_MAC_init(ctx, key.empty() ? &kNoKey : key.data(), key.size(), nullptr) == 1);
    if (!key.empty() && key.size() <= h.key.size()) {
      std::copy(key.begin(), key.end(), h.key.begin());
      h.key_size = key.size();
    }
  }
  H3_ASSERT(EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(data.data()), data.size()) ==
            1);
  H3_ASSERT(EVP_MAC_final(ctx, out.data(), &length, out.size()) == 1 && length == N);
  return out;
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
  return hmac<20>(thread_contexts().hmac_sha1, "SHA1", key, data);
}

}  // namespace hots3
