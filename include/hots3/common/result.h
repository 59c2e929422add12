#pragma once

// Result<T>: a value or an error_code (Boost.System's result, which matches Asio's
// (error_code, T) completions). Operating errors travel as values; exceptions are used only at
// start-up and for bad_alloc.

#include "hots3/common/errc.h"

#include <boost/system/result.hpp>

namespace hots3 {

template <class T>
using Result = boost::system::result<T>;

using boost::system::error_code;

// An error on its way out, convertible to any Result: `return Failure{ec};`. Needed where an
// error_code does not convert by itself (Result<bool>: error_code and bool compete).
struct Failure {
  error_code error;
  template <class T>
  operator Result<T>() const {  // NOLINT(google-explicit-constructor): the point of this type
    return Result<T>(boost::system::in_place_error, error);
  }
};

}  // namespace hots3

// H3_TRY(expr): evaluate a Result; on error return the error from the enclosing function.
// H3_TRY(decl, expr): the same, and bind the value: H3_TRY(auto size, device.size());
// H3_CO_TRY is the same for coroutines (co_return).
#define H3_TRY(...) H3_TRY_SELECT_(__VA_ARGS__, H3_TRY_BIND_, H3_TRY_CHECK_)(return, __VA_ARGS__)
#define H3_CO_TRY(...) \
  H3_TRY_SELECT_(__VA_ARGS__, H3_TRY_BIND_, H3_TRY_CHECK_)(co_return, __VA_ARGS__)

#define H3_TRY_SELECT_(a, b, macro, ...) macro
#define H3_TRY_CAT2_(a, b) a##b
#define H3_TRY_CAT_(a, b) H3_TRY_CAT2_(a, b)
#define H3_TRY_VAR_ H3_TRY_CAT_(h3_try_result_, __LINE__)
#define H3_TRY_CHECK_(ret, expr)                               \
  if (auto&& H3_TRY_VAR_ = (expr); !H3_TRY_VAR_.has_value()) { \
    ret ::hots3::Failure{H3_TRY_VAR_.error()};                 \
  }                                                            \
  static_assert(true)
#define H3_TRY_BIND_(ret, decl, expr)          \
  auto&& H3_TRY_VAR_ = (expr);                 \
  if (!H3_TRY_VAR_.has_value()) {              \
    ret ::hots3::Failure{H3_TRY_VAR_.error()}; \
  }                                            \
  decl = std::move(*H3_TRY_VAR_) /* NOLINT(bugprone-macro-parentheses): a declaration */
