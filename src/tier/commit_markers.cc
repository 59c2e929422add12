#include "tier/commit_markers.h"

namespace hots3::tier {

std::string_view marker_prefix(std::string_view key) {
  const auto slash = key.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : key.substr(0, slash + 1);
}

}  // namespace hots3::tier
