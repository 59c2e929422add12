#pragma once

// Unpredictable values (the kernel's getrandom(2)) for what a client must not guess: keys,
// upload ids, request id seeds.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace hots3 {

void random_bytes(std::span<std::byte> out);
std::uint64_t random_u64();
// `length` characters drawn uniformly from `alphabet`. REQUIRES: !alphabet.empty().
std::string random_string(std::size_t length, std::string_view alphabet);

}  // namespace hots3
