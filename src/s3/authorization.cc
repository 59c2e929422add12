// Who may do what: admins everything; a bucket's owner everything in it; other users what their
// grants allow; creating a bucket takes a permission of its own.

#include "authorization.h"

#include <algorithm>

namespace hots3::s3 {

bool glob_match(std::string_view pattern, std::string_view text) {
  // '*' any run, '?' one character; iterative with backtracking to the last '*'.
  std::size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool allowed(const config::UserConfig& user, const storage::BucketRecord& bucket, Access access) {
  if (user.admin || bucket.owner == user.name) return true;
  if (access == Access::kOwner) return false;
  return std::any_of(user.grants.begin(), user.grants.end(), [&](const config::Grant& g) {
    return glob_match(g.bucket, bucket.name) && (g.owner.empty() || g.owner == bucket.owner) &&
           (access == Access::kRead ? g.read : g.write);
  });
}

bool may_create_bucket(const config::UserConfig& user, std::string_view name) {
  if (user.admin) return true;
  return std::any_of(user.create_buckets.begin(), user.create_buckets.end(),
                     [&](const std::string& pattern) { return glob_match(pattern, name); });
}

}  // namespace hots3::s3
