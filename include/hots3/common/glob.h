#pragma once

// Key globs of the configuration (commit markers, pins): '**' any run of characters ("**/" also
// none, so "**/.metadata" matches a key at the top too), '*' any run without '/', '?' one
// character (byte); anything else itself.

#include <string>
#include <string_view>
#include <vector>

namespace hots3 {

bool glob_match(std::string_view pattern, std::string_view key);

// Whether `key` matches one of `patterns`.
bool glob_any(const std::vector<std::string>& patterns, std::string_view key);

}  // namespace hots3
