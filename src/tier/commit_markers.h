#pragma once

// Private to src/tier: which keys are commit markers ([tier.writeback] commit_markers). A marker
// reaches the upstream only after everything acknowledged before it under its prefix, so that a
// reader of the upstream never sees a checkpoint's marker without its shards.

#include <string>
#include <string_view>
#include <vector>

namespace hots3::tier {

// Glob match: '**' any run of characters ("**/" also none, so "**/.metadata" matches a marker at
// the top too), '*' any run without '/', '?' one character (byte); anything else itself.
bool marker_match(std::string_view pattern, std::string_view key);

// Whether `key` matches one of `patterns`.
bool is_commit_marker(const std::vector<std::string>& patterns, std::string_view key);

// The prefix a marker commits: its key up to and including the last '/' ("" at the top).
std::string_view marker_prefix(std::string_view key);

}  // namespace hots3::tier
