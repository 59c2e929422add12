#pragma once

// The classes of traffic to an upstream, in the order its link serves them when it is capped
// (an upstream's bytes_per_s): what a client waits for first, then what no client waits for,
// then write-back (but for its guaranteed share), then revalidation, whose answers are small:
// counted, never held back.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hots3::tier {

enum class Traffic : std::uint8_t {
  kForeground,    // a client waits: a GET's miss, a write-through PUT's body
  kPrefetch,      // no client waits: read-ahead, restores, pinned versions fetched back
  kWriteback,     // uploads of acknowledged changes
  kRevalidation,  // whether the upstream still holds what is kept here
};
inline constexpr std::size_t kTrafficClasses = 4;

constexpr std::string_view traffic_name(Traffic t) {
  switch (t) {
    case Traffic::kForeground:
      return "foreground";
    case Traffic::kPrefetch:
      return "prefetch";
    case Traffic::kWriteback:
      return "writeback";
    case Traffic::kRevalidation:
      return "revalidation";
  }
  return "?";
}

}  // namespace hots3::tier
