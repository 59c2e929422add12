#include "hots3/common/glob.h"

#include <algorithm>
#include <vector>

namespace hots3 {

bool glob_match(std::string_view pattern, std::string_view key) {
  // The text before the first wildcard decides most keys at once (every GET of a bound bucket
  // asks its pin globs).
  const std::size_t literal = std::min(pattern.find_first_of("*?"), pattern.size());
  if (!key.starts_with(pattern.substr(0, literal))) return false;
  pattern.remove_prefix(literal);
  key.remove_prefix(literal);
  // matches[i * (n + 1) + j]: whether pattern[i..] matches key[j..]; filled from the ends, so
  // a match costs (pattern + 1) × (key + 1) steps whatever the wildcards (a backtracking matcher
  // is exponential in them, and keys come from clients). The table is the thread's, reused.
  const std::size_t m = pattern.size();
  const std::size_t n = key.size();
  thread_local std::vector<char> matches;
  matches.assign((m + 1) * (n + 1), 0);
  const auto at = [n](std::size_t i, std::size_t j) { return i * (n + 1) + j; };
  matches[at(m, n)] = 1;
  for (std::size_t i = m; i-- > 0;) {
    const bool two_stars = pattern[i] == '*' && i + 1 < m && pattern[i + 1] == '*';
    bool rest_matches_later = false;  // "**": whether what follows it matches key[k..], k >= j
    for (std::size_t j = n + 1; j-- > 0;) {
      bool match = false;
      if (two_stars) {
        // Any run, then the rest; or, for "**/", nothing at all (the '/' too).
        rest_matches_later = rest_matches_later || matches[at(i + 2, j)] != 0;
        match = rest_matches_later ||
                (i + 2 < m && pattern[i + 2] == '/' && matches[at(i + 3, j)] != 0);
      } else if (pattern[i] == '*') {
        match =
            matches[at(i + 1, j)] != 0 || (j < n && key[j] != '/' && matches[at(i, j + 1)] != 0);
      } else {
        match =
            j < n && (pattern[i] == '?' || pattern[i] == key[j]) && matches[at(i + 1, j + 1)] != 0;
      }
      matches[at(i, j)] = match ? 1 : 0;
    }
  }
  return matches[at(0, 0)] != 0;
}

bool glob_any(const std::vector<std::string>& patterns, std::string_view key) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [key](const std::string& pattern) { return glob_match(pattern, key); });
}

}  // namespace hots3
