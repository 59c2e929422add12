#include "hots3/common/assert.h"

#include <cstdio>
#include <cstdlib>

namespace hots3::detail {

void assert_fail(const char* expression, const char* file, int line, const char* message) noexcept {
  // Plain stdio, not the logger: the logger may be what is broken, and this must not allocate.
  std::fprintf(stderr, "hots3: assertion failed: %s at %s:%d%s%s\n", expression, file, line,
               message[0] != '\0' ? ": " : "", message);
  std::fflush(stderr);
  std::abort();
}

}  // namespace hots3::detail
