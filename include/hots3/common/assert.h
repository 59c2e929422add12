#pragma once

// Assertions are for programmer errors; operating errors are values (docs/STYLE.md, "Errors").
// H3_ASSERT is always on, in every build. H3_DASSERT is for checks too expensive for release
// builds and is on in Debug and sanitizer builds (H3_ENABLE_DASSERT).

namespace hots3::detail {

[[noreturn]] void assert_fail(const char* expression, const char* file, int line,
                              const char* message) noexcept;

}  // namespace hots3::detail

#define H3_ASSERT(cond, ...)     \
  ((cond) ? static_cast<void>(0) \
          : ::hots3::detail::assert_fail(#cond, __FILE__, __LINE__, "" __VA_ARGS__))

#if defined(H3_ENABLE_DASSERT)
#define H3_DASSERT(cond, ...) H3_ASSERT(cond, __VA_ARGS__)
#else
#define H3_DASSERT(cond, ...) static_cast<void>(sizeof(!(cond)))
#endif

#define H3_UNREACHABLE(msg) ::hots3::detail::assert_fail("unreachable", __FILE__, __LINE__, msg)
