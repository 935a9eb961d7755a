// <torch/types.h> for ember: the names of ATen's C++ API that a PyTorch extension uses
// (torch::Tensor, at::Tensor, torch::kFloat32, TORCH_CHECK, AT_DISPATCH_* ...) over ember's C++
// frontend (extension/tensor.h), without pybind11: what a .cu file of an extension includes.
// <torch/extension.h> adds the Python bindings. Not provided: torch::nn,
// torch::autograd::Function, TORCH_LIBRARY op registration, and names outside these headers.
#pragma once
#include <sstream>
#include <string>

#include "core/dispatch.h"
#include "extension/indexing.h"
#include "extension/tensor.h"

namespace torch {
using namespace ember::api;  // NOLINT: torch:: is the frontend's namespace
}  // namespace torch
namespace at {
using namespace ember::api;  // NOLINT
}  // namespace at
namespace c10 {
using ember::api::BFloat16;
using ember::api::Device;
using ember::api::DeviceType;
using ember::api::Half;
using ember::api::IntArrayRef;
using ember::api::OptionalIntArrayRef;
using ember::api::Scalar;
using ember::api::ScalarType;
using ember::api::toString;
template <class T>
using complex = std::complex<T>;
// Older extensions spell std::optional through c10.
template <class T>
using optional = std::optional<T>;
using std::make_optional;
using std::nullopt;
}  // namespace c10

namespace ember {
namespace api {
namespace detail {
// The message is the caller's parts, or for a bare check the condition, as ATen words it.
template <class... Args>
[[noreturn]] void torch_check_fail(ErrorKind kind, const char* cond, const Args&... args) {
  std::ostringstream os;
  if constexpr (sizeof...(Args) == 0) {
    os << "Expected " << cond << " to be true, but got false.";
  } else {
    ember::detail::append(os, args...);
  }
  throw ember::Error(kind, os.str());
}
}  // namespace detail
}  // namespace api
}  // namespace ember

// TORCH_CHECK(cond, "message parts", ...): RuntimeError with the message when cond is false;
// the _VALUE/_INDEX/_TYPE forms raise ValueError/IndexError/TypeError.
#define EMBER_TORCH_CHECK_KIND_(kind, cond, ...)                                              \
  do {                                                                                        \
    if (!(cond))                                                                              \
      ::ember::api::detail::torch_check_fail(::ember::ErrorKind::kind, #cond, ##__VA_ARGS__); \
  } while (0)
#define TORCH_CHECK(cond, ...) EMBER_TORCH_CHECK_KIND_(Runtime, cond, ##__VA_ARGS__)
#define TORCH_CHECK_VALUE(cond, ...) EMBER_TORCH_CHECK_KIND_(Value, cond, ##__VA_ARGS__)
#define TORCH_CHECK_INDEX(cond, ...) EMBER_TORCH_CHECK_KIND_(Index, cond, ##__VA_ARGS__)
#define TORCH_CHECK_TYPE(cond, ...) EMBER_TORCH_CHECK_KIND_(Type, cond, ##__VA_ARGS__)
#define TORCH_CHECK_NOT_IMPLEMENTED(cond, ...) \
  EMBER_TORCH_CHECK_KIND_(NotImplemented, cond, ##__VA_ARGS__)
#define TORCH_INTERNAL_ASSERT(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)
#define AT_ASSERT(cond, ...) TORCH_CHECK(cond, ##__VA_ARGS__)
#define TORCH_WARN(...)                                   \
  do {                                                    \
    std::ostringstream ember_warn_os_;                    \
    ::ember::detail::append(ember_warn_os_, __VA_ARGS__); \
    ::ember::warn(ember_warn_os_.str());                  \
  } while (0)
#define AT_ERROR(...) \
  ::ember::api::detail::torch_check_fail(::ember::ErrorKind::Runtime, "", __VA_ARGS__)

// AT_DISPATCH_*(dtype, "name", [&] { ... scalar_t ... }): ATen's dtype sets over ember's own
// dispatch cases (core/dispatch.h), which raise DtypeNotImplementedError naming the op and the
// dtype outside the set.
#define EMBER_AT_DISPATCH_(TYPE, NAME, WHAT, CASES, ...)               \
  [&] {                                                                \
    const ::ember::ScalarType ember_st_ = ::ember::api::to_core(TYPE); \
    switch (ember_st_) {                                               \
      CASES(__VA_ARGS__)                                               \
      EMBER_DTYPE_ERROR(ember_st_, NAME, WHAT)                         \
    }                                                                  \
  }()
#define EMBER_AT_FLOATING_(...)                 \
  EMBER_DTYPE_CASE(Float32, float, __VA_ARGS__) \
  EMBER_DTYPE_CASE(Float64, double, __VA_ARGS__)
#define EMBER_AT_FLOATING_HALF_(...) \
  EMBER_AT_FLOATING_(__VA_ARGS__)    \
  EMBER_DTYPE_CASE(Float16, ::ember::Half, __VA_ARGS__)
#define EMBER_AT_ALL_(...)        \
  EMBER_AT_FLOATING_(__VA_ARGS__) \
  EMBER_CASES_INT(__VA_ARGS__)
#define AT_DISPATCH_FLOATING_TYPES(TYPE, NAME, ...) \
  EMBER_AT_DISPATCH_(TYPE, NAME, "float32, float64", EMBER_AT_FLOATING_, __VA_ARGS__)
#define AT_DISPATCH_FLOATING_TYPES_AND_HALF(TYPE, NAME, ...) \
  EMBER_AT_DISPATCH_(TYPE, NAME, "float32, float64, float16", EMBER_AT_FLOATING_HALF_, __VA_ARGS__)
// The AND2 form takes the two extra types as ATen does; ember has Half and BFloat16 as the only
// other floating types, so those are the two it accepts.
#define AT_DISPATCH_FLOATING_TYPES_AND2(T1, T2, TYPE, NAME, ...)                              \
  [&] {                                                                                       \
    static_assert(((T1) == ::ember::api::kHalf && (T2) == ::ember::api::kBFloat16) ||         \
                      ((T1) == ::ember::api::kBFloat16 && (T2) == ::ember::api::kHalf),       \
                  "ember: AT_DISPATCH_FLOATING_TYPES_AND2 supports Half and BFloat16");       \
    return EMBER_AT_DISPATCH_(TYPE, NAME, "floating dtypes", EMBER_CASES_FLOAT, __VA_ARGS__); \
  }()
#define AT_DISPATCH_INTEGRAL_TYPES(TYPE, NAME, ...) \
  EMBER_AT_DISPATCH_(TYPE, NAME, "integer dtypes", EMBER_CASES_INT, __VA_ARGS__)
#define AT_DISPATCH_ALL_TYPES(TYPE, NAME, ...)                                       \
  EMBER_AT_DISPATCH_(TYPE, NAME, "integer and floating dtypes except 16-bit floats", \
                     EMBER_AT_ALL_, __VA_ARGS__)
