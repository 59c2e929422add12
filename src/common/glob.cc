#include "hots3/common/glob.h"

#include <algorithm>

namespace hots3 {

bool glob_match(std::string_view pattern, std::string_view key) {
  if (pattern.empty()) return key.empty();
  if (pattern.starts_with("**")) {
    const std::string_view rest = pattern.substr(2);
    if (rest.starts_with('/') && glob_match(rest.substr(1), key)) return true;
    for (std::size_t i = 0; i <= key.size(); ++i) {
      if (glob_match(rest, key.substr(i))) return true;
    }
    return false;
  }
  if (pattern.front() == '*') {
    for (std::size_t i = 0; i <= key.size(); ++i) {
      if (glob_match(pattern.substr(1), key.substr(i))) return true;
      if (i < key.size() && key[i] == '/') break;
    }
    return false;
  }
  if (key.empty() || (pattern.front() != '?' && pattern.front() != key.front())) return false;
  return glob_match(pattern.substr(1), key.substr(1));
}

bool glob_any(const std::vector<std::string>& patterns, std::string_view key) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [key](const std::string& pattern) { return glob_match(pattern, key); });
}

}  // namespace hots3
