#pragma once

// Private to src/tier: which keys are commit markers ([tier.writeback] commit_markers, globs as
// hots3/common/glob.h reads them). A marker reaches the upstream only after everything
// acknowledged before it under its prefix, so that a reader of the upstream never sees a
// checkpoint's marker without its shards.

#include <string_view>

namespace hots3::tier {

// The prefix a marker commits: its key up to and including the last '/' ("" at the top).
std::string_view marker_prefix(std::string_view key);

}  // namespace hots3::tier
