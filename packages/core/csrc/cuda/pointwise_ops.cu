// CUDA kernels of the pointwise ops declared in ops/pointwise.yaml: the same TensorIterator
// plans and the same arithmetic as the CPU kernels (kernels/cpu/pointwise_ops.cpp), run by the
// elementwise engine (elementwise.cuh) with a functor per op.
//
// One difference is forced by the device: an integer division or modulo by zero cannot raise
// from inside a kernel. A zero divisor given as a number raises the CPU's error before the
// launch; a zero inside a divisor tensor gives 0 (PyTorch's CUDA kernels give an unspecified
// value there too).
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "core/dispatch.h"
#include "cuda/cuda_registry.h"
#include "cuda/elementwise.cuh"
#include "cuda/pointwise_math.cuh"
#include "ops.h"

namespace ember {
namespace cuda {
namespace pointwise {

// ---- functors ---------------------------------------------------------------------------------

namespace fn {

#define EMBER_CU_UNARY(NAME, EXPR)                              \
  struct NAME {                                                 \
    template <class A>                                          \
    __device__ __forceinline__ A operator()(A x) const {        \
      return EXPR;                                              \
    }                                                           \
  };

EMBER_CU_UNARY(exp, dm::exp(x))
EMBER_CU_UNARY(exp2, dm::exp2(x))
EMBER_CU_UNARY(expm1, dm::expm1(x))
EMBER_CU_UNARY(log, dm::log(x))
EMBER_CU_UNARY(log2, dm::log2(x))
EMBER_CU_UNARY(log10, dm::log10(x))
EMBER_CU_UNARY(log1p, dm::log1p(x))
EMBER_CU_UNARY(sqrt, dm::sqrt(x))
EMBER_CU_UNARY(rsqrt, A(1) / dm::sqrt(x))
EMBER_CU_UNARY(sin, dm::sin(x))
EMBER_CU_UNARY(cos, dm::cos(x))
EMBER_CU_UNARY(tan, dm::tan(x))
EMBER_CU_UNARY(asin, dm::asin(x))
EMBER_CU_UNARY(acos, dm::acos(x))
EMBER_CU_UNARY(atan, dm::atan(x))
EMBER_CU_UNARY(sinh, dm::sinh(x))
EMBER_CU_UNARY(cosh, dm::cosh(x))
EMBER_CU_UNARY(tanh, dm::tanh(x))
EMBER_CU_UNARY(sigmoid, A(1) / (A(1) + dm::exp(-x)))
EMBER_CU_UNARY(erf, dm::erf(x))
EMBER_CU_UNARY(erfinv, dm::erfinv(x))
EMBER_CU_UNARY(reciprocal, A(1) / x)

EMBER_CU_UNARY(neg, A(-x))
EMBER_CU_UNARY(abs, dm::is_neg(x) ? A(-x) : x)
EMBER_CU_UNARY(sign, A((A(0) < x) - dm::is_neg(x)))
EMBER_CU_UNARY(square, A(x* x))
EMBER_CU_UNARY(relu, (x != x) ? x : (x > A(0) ? x : A(0)))
EMBER_CU_UNARY(floor, dm::floor(x))
EMBER_CU_UNARY(ceil, dm::ceil(x))
EMBER_CU_UNARY(trunc, dm::trunc(x))
EMBER_CU_UNARY(frac, x - dm::trunc(x))
EMBER_CU_UNARY(bitwise_not, dm::bit_not(x))
#undef EMBER_CU_UNARY

struct round {
  double scale;
  int64_t decimals;
  template <class A>
  __device__ __forceinline__ A operator()(A x) const {
    if constexpr (std::is_integral_v<A>) {
      return x;
    } else {
      if (decimals == 0) return dm::rint(x);
      return static_cast<A>(dm::rint(static_cast<double>(x) * scale) / scale);
    }
  }
};

#define EMBER_CU_PREDICATE(NAME, EXPR)                           \
  struct NAME {                                                  \
    template <class A>                                           \
    __device__ __forceinline__ bool operator()(A x) const {      \
      return EXPR;                                               \
    }                                                            \
  };
EMBER_CU_PREDICATE(isnan, dm::is_nan(x))
EMBER_CU_PREDICATE(isinf, dm::is_inf(x))
EMBER_CU_PREDICATE(isfinite, !dm::is_nan(x) && !dm::is_inf(x))
EMBER_CU_PREDICATE(logical_not, !static_cast<bool>(x))
#undef EMBER_CU_PREDICATE

template <class A>
struct nan_to_num {
  A nan, posinf, neginf;
  __device__ __forceinline__ A operator()(A x) const {
    if constexpr (std::is_integral_v<A>) {
      return x;
    } else {
      if (x != x) return nan;
      if (x == dm::inf<A>()) return posinf;
      if (x == -dm::inf<A>()) return neginf;
      return x;
    }
  }
};

template <class A>
struct add {
  A alpha;
  __device__ __forceinline__ A operator()(A x, A y) const {
    if constexpr (std::is_same_v<A, bool>) {
      return x || (alpha && y);
    } else {
      return x + alpha * y;
    }
  }
};
template <class A>
struct sub {
  A alpha;
  __device__ __forceinline__ A operator()(A x, A y) const { return x - alpha * y; }
};
template <class A>
struct rsub {
  A alpha;
  __device__ __forceinline__ A operator()(A x, A y) const { return y - alpha * x; }
};
struct mul {
  template <class A>
  __device__ __forceinline__ A operator()(A x, A y) const {
    if constexpr (std::is_same_v<A, bool>) {
      return x && y;
    } else {
      return x * y;
    }
  }
};
struct true_div {
  template <class A>
  __device__ __forceinline__ A operator()(A x, A y) const {
    return x / y;
  }
};
struct floor_div {
  template <class A>
  __device__ __forceinline__ A operator()(A x, A y) const {
    return dm::floor_div(x, y);
  }
};
struct trunc_div {
  template <class A>
  __device__ __forceinline__ A operator()(A x, A y) const {
    if constexpr (std::is_integral_v<A>) {
      if (y == A(0)) return A(0);
      if (dm::is_minus_one(y)) return dm::wrapping_neg(x);
      return A(x / y);
    } else {
      return dm::trunc(x / y);
    }
  }
};
struct remainder {
  template <class A>
  __device__ __forceinline__ A operator()(A x, A y) const {
    if constexpr (std::is_integral_v<A>) {
      if (y == A(0) || dm::is_minus_one(y)) return A(0);
      A r = A(x % y);
      if (r != 0 && (dm::is_neg(r) != dm::is_neg(y))) r = A(r + y);
      return r;
    } else {
      A r = dm::fmod(x, y);
      if (r != A(0) && ((r < A(0)) != (y < A(0)))) r += y;
      return r;
    }
  }
};
struct fmod {
  template <class A>
  __device__ __forceinline__ A operator()(A x, A y) const {
    if constexpr (std::is_integral_v<A>) {
      if (y == A(0) || dm::is_minus_one(y)) return A(0);
      return A(x % y);
    } else {
      return dm::fmod(x, y);
    }
  }
};
struct pow {
  template <class A>
  __device__ __forceinline__ A operator()(A x, A y) const {
    if constexpr (std::is_integral_v<A>) {
      return dm::int_pow(x, y);
    } else {
      if (y == A(2)) return x * x;
      return dm::pow(x, y);
    }
  }
};
struct rpow {  // base ** self, base the first input
  template <class A>
  __device__ __forceinline__ A operator()(A x, A y) const {
    if constexpr (std::is_integral_v<A>) {
      return dm::int_pow(x, y);
    } else {
      return dm::pow(x, y);
    }
  }
};
struct atan2 {
  template <class A>
  __device__ __forceinline__ A operator()(A x, A y) const {
    return dm::atan2(x, y);
  }
};
struct minimum {
  template <class A>
  __device__ __forceinline__ A operator()(A x, A y) const {
    return (x != x) ? x : ((y != y) ? y : (y < x ? y : x));
  }
};
struct maximum {
  template <class A>
  __device__ __forceinline__ A operator()(A x, A y) const {
    return (x != x) ? x : ((y != y) ? y : (y > x ? y : x));
  }
};

#define EMBER_CU_BINARY_BOOL(NAME, EXPR)                           \
  struct NAME {                                                    \
    template <class A>                                             \
    __device__ __forceinline__ bool operator()(A x, A y) const {   \
      return EXPR;                                                 \
    }                                                              \
  };
EMBER_CU_BINARY_BOOL(eq, x == y)
EMBER_CU_BINARY_BOOL(ne, x != y)
EMBER_CU_BINARY_BOOL(lt, x < y)
EMBER_CU_BINARY_BOOL(le, x <= y)
EMBER_CU_BINARY_BOOL(gt, x > y)
EMBER_CU_BINARY_BOOL(ge, x >= y)
EMBER_CU_BINARY_BOOL(logical_and, static_cast<bool>(x) && static_cast<bool>(y))
EMBER_CU_BINARY_BOOL(logical_or, static_cast<bool>(x) || static_cast<bool>(y))
EMBER_CU_BINARY_BOOL(logical_xor, static_cast<bool>(x) != static_cast<bool>(y))
#undef EMBER_CU_BINARY_BOOL

#define EMBER_CU_BITWISE(NAME, EXPR)                            \
  struct NAME {                                                 \
    template <class A>                                          \
    __device__ __forceinline__ A operator()(A x, A y) const {   \
      return static_cast<A>(EXPR);                              \
    }                                                           \
  };
EMBER_CU_BITWISE(bitwise_and, x& y)
EMBER_CU_BITWISE(bitwise_or, x | y)
EMBER_CU_BITWISE(bitwise_xor, x ^ y)
EMBER_CU_BITWISE(bitwise_left_shift, dm::shift_left(x, y))
EMBER_CU_BITWISE(bitwise_right_shift, dm::shift_right(x, y))
#undef EMBER_CU_BITWISE

struct clamp_both {
  template <class A>
  __device__ __forceinline__ A operator()(A x, A lo, A hi) const {
    if (x != x) return x;
    A r = x < lo ? lo : x;
    return r > hi ? hi : r;
  }
};
struct clamp_one {
  bool has_min;
  template <class A>
  __device__ __forceinline__ A operator()(A x, A b) const {
    if (x != x || b != b) return x != x ? x : b;
    return has_min ? (x < b ? b : x) : (x > b ? b : x);
  }
};
struct where {
  template <class A, class C>
  __device__ __forceinline__ A operator()(A x, A y, C c) const {
    return c ? x : y;
  }
};
struct lerp {
  template <class A>
  __device__ __forceinline__ A operator()(A a, A b, A w) const {
    return (w < A(0.5)) ? a + w * (b - a) : b - (b - a) * (A(1) - w);
  }
};
template <class A>
struct addcmul {
  A value;
  __device__ __forceinline__ A operator()(A a, A b, A c) const { return a + value * b * c; }
};
template <class A>
struct addcdiv {
  A value;
  __device__ __forceinline__ A operator()(A a, A b, A c) const { return a + value * b / c; }
};
struct isclose {
  double rtol, atol;
  bool equal_nan;
  template <class A>
  __device__ __forceinline__ bool operator()(A x, A y) const {
    if (x == y) return true;
    if constexpr (std::is_integral_v<A>) {
      const double diff = dm::fabs(static_cast<double>(x) - static_cast<double>(y));
      return diff <= atol + rtol * dm::fabs(static_cast<double>(y));
    } else {
      if (x != x || y != y) return equal_nan && (x != x) && (y != y);
      const double dx = x, dy = y;
      if (dm::is_inf(dx) || dm::is_inf(dy)) return false;
      return dm::fabs(dx - dy) <= atol + rtol * dm::fabs(dy);
    }
  }
};

}  // namespace fn

// ---- running them -----------------------------------------------------------------------------

enum class Types { All, Numeric, Float, Integral };

// The iterator of every op here: element-wise, so it may keep its inputs' memory layout.
struct ElementwiseIterator : TensorIterator {
  explicit ElementwiseIterator(const char* op) : TensorIterator(op) { keep_layout(); }
};

// Runs make(A{}) (a functor over the compute type A of the inputs' dtype T) with `nin` inputs
// of dtype T; the output is R (T when R is void). Then it.finish().
template <Types types, class R, int nin, class Make>
void run(TensorIterator& it, const char* name, const Make& make) {
  auto body = [&](auto tag) {
    using T = decltype(tag);
    using Out = std::conditional_t<std::is_void_v<R>, T, R>;
    const auto f = make(op_t<T>{});
    if constexpr (nin == 1) {
      launch_elementwise<Out, T>(it, name, f);
    } else if constexpr (nin == 2) {
      launch_elementwise<Out, T, T>(it, name, f);
    } else {
      launch_elementwise<Out, T, T, T>(it, name, f);
    }
  };
  const ScalarType dt = it.dtype(1);
  if constexpr (types == Types::All) {
    EMBER_DISPATCH_ALL(dt, name, [&] { body(scalar_t{}); });
  } else if constexpr (types == Types::Numeric) {
    EMBER_DISPATCH_NUMERIC(dt, name, [&] { body(scalar_t{}); });
  } else if constexpr (types == Types::Float) {
    EMBER_DISPATCH_FLOAT(dt, name, [&] { body(scalar_t{}); });
  } else {
    EMBER_DISPATCH_INTEGRAL(dt, name, [&] { body(scalar_t{}); });
  }
  it.finish();
}

template <class Fn>
auto stateless(Fn) {
  return [](auto) { return Fn{}; };
}

// ---- unary ------------------------------------------------------------------------------------

#define EMBER_CU_UNARY_FLOAT(NAME)                                         \
  Tensor NAME(const Tensor& self, const Tensor& out) {                     \
    ElementwiseIterator it(#NAME);                                         \
    it.add_output(out).add_input(self).promote_int_to_float(true).build(); \
    run<Types::Float, void, 1>(it, #NAME, stateless(fn::NAME{}));          \
    return it.output();                                                    \
  }
EMBER_CU_UNARY_FLOAT(exp)
EMBER_CU_UNARY_FLOAT(exp2)
EMBER_CU_UNARY_FLOAT(expm1)
EMBER_CU_UNARY_FLOAT(log)
EMBER_CU_UNARY_FLOAT(log2)
EMBER_CU_UNARY_FLOAT(log10)
EMBER_CU_UNARY_FLOAT(log1p)
EMBER_CU_UNARY_FLOAT(sqrt)
EMBER_CU_UNARY_FLOAT(rsqrt)
EMBER_CU_UNARY_FLOAT(sin)
EMBER_CU_UNARY_FLOAT(cos)
EMBER_CU_UNARY_FLOAT(tan)
EMBER_CU_UNARY_FLOAT(asin)
EMBER_CU_UNARY_FLOAT(acos)
EMBER_CU_UNARY_FLOAT(atan)
EMBER_CU_UNARY_FLOAT(sinh)
EMBER_CU_UNARY_FLOAT(cosh)
EMBER_CU_UNARY_FLOAT(tanh)
EMBER_CU_UNARY_FLOAT(sigmoid)
EMBER_CU_UNARY_FLOAT(erf)
EMBER_CU_UNARY_FLOAT(erfinv)
EMBER_CU_UNARY_FLOAT(reciprocal)
#undef EMBER_CU_UNARY_FLOAT

// Ops that keep the input dtype. TYPES: which dtypes are accepted.
#define EMBER_CU_UNARY_SAME(NAME, TYPES)                          \
  Tensor NAME(const Tensor& self, const Tensor& out) {            \
    ElementwiseIterator it(#NAME);                                \
    it.add_output(out).add_input(self).build();                   \
    run<Types::TYPES, void, 1>(it, #NAME, stateless(fn::NAME{})); \
    return it.output();                                           \
  }
EMBER_CU_UNARY_SAME(neg, Numeric)
EMBER_CU_UNARY_SAME(abs, Numeric)
EMBER_CU_UNARY_SAME(sign, All)
EMBER_CU_UNARY_SAME(square, Numeric)
EMBER_CU_UNARY_SAME(relu, Numeric)
EMBER_CU_UNARY_SAME(floor, Numeric)
EMBER_CU_UNARY_SAME(ceil, Numeric)
EMBER_CU_UNARY_SAME(trunc, Numeric)
EMBER_CU_UNARY_SAME(frac, Float)
EMBER_CU_UNARY_SAME(bitwise_not, Integral)
#undef EMBER_CU_UNARY_SAME

Tensor round(const Tensor& self, int64_t decimals, const Tensor& out) {
  ElementwiseIterator it("round");
  it.add_output(out).add_input(self).build();
  if (!is_floating(it.common_dtype())) {
    EMBER_CHECK(decimals == 0, "round: decimals is not supported for integer tensors (dtype ",
                dtype_name(self->dtype()), ")");
  }
  const double scale = std::pow(10.0, static_cast<double>(decimals));
  run<Types::Numeric, void, 1>(it, "round",
                               [&](auto) { return fn::round{scale, decimals}; });
  return it.output();
}

#define EMBER_CU_PREDICATE(NAME)                                               \
  Tensor NAME(const Tensor& self, const Tensor& out) {                         \
    ElementwiseIterator it(#NAME);                                             \
    it.add_output(out).add_input(self).output_dtype(ScalarType::Bool).build(); \
    run<Types::All, bool, 1>(it, #NAME, stateless(fn::NAME{}));                \
    return it.output();                                                        \
  }
EMBER_CU_PREDICATE(isnan)
EMBER_CU_PREDICATE(isinf)
EMBER_CU_PREDICATE(isfinite)
EMBER_CU_PREDICATE(logical_not)
#undef EMBER_CU_PREDICATE

Tensor nan_to_num(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf, const Tensor& out) {
  ElementwiseIterator it("nan_to_num");
  it.add_output(out).add_input(self).build();
  const ScalarType st = it.dtype(0);
  const double big = st == ScalarType::Float16    ? 65504.0
                     : st == ScalarType::BFloat16 ? 3.3895313892515355e38
                     : st == ScalarType::Float32  ? double(std::numeric_limits<float>::max())
                                                  : std::numeric_limits<double>::max();
  run<Types::All, void, 1>(it, "nan_to_num", [&](auto tag) {
    using A = decltype(tag);
    if constexpr (std::is_integral_v<A>) {
      return fn::nan_to_num<A>{A(0), A(0), A(0)};
    } else {
      return fn::nan_to_num<A>{A(nan.value_or(0.0)), A(posinf.value_or(big)),
                               A(neginf.value_or(-big))};
    }
  });
  return it.output();
}

// ---- binary arithmetic ------------------------------------------------------------------------

TensorIterator& binary_iter(TensorIterator& it, const Tensor& self, const TensorOrScalar& other,
                            const Tensor& out) {
  EMBER_CHECK_KIND(other.present, Type, "expected a tensor or a number, got None");
  return it.add_output(out).add_input(self).add_input(other);
}

Tensor add(const Tensor& self, const TensorOrScalar& other, const Scalar& alpha,
           const Tensor& out) {
  ElementwiseIterator it("add");
  binary_iter(it, self, other, out).build();
  EMBER_CHECK(
      !(is_integral(it.common_dtype(), true) && alpha.is_floating()),
      "add: for integral input tensors, argument alpha must not be a floating point number");
  check_scalar_fits(alpha, it.common_dtype(), "add");
  run<Types::All, void, 2>(it, "add", [&](auto tag) {
    using A = decltype(tag);
    return fn::add<A>{alpha.to<A>()};
  });
  return it.output();
}

Tensor sub(const Tensor& self, const TensorOrScalar& other, const Scalar& alpha,
           const Tensor& out) {
  EMBER_CHECK(self->dtype() != ScalarType::Bool &&
                  !(other.is_tensor() && other.tensor->dtype() == ScalarType::Bool),
              "sub: subtraction, the `-` operator, with a bool tensor is not supported; use "
              "logical_xor or bitwise_not instead");
  ElementwiseIterator it("sub");
  binary_iter(it, self, other, out).build();
  EMBER_CHECK(
      !(is_integral(it.common_dtype(), true) && alpha.is_floating()),
      "sub: for integral input tensors, argument alpha must not be a floating point number");
  check_scalar_fits(alpha, it.common_dtype(), "sub");
  run<Types::Numeric, void, 2>(it, "sub", [&](auto tag) {
    using A = decltype(tag);
    return fn::sub<A>{alpha.to<A>()};
  });
  return it.output();
}

Tensor rsub(const Tensor& self, const TensorOrScalar& other, const Scalar& alpha) {
  EMBER_CHECK(self->dtype() != ScalarType::Bool &&
                  !(other.is_tensor() && other.tensor->dtype() == ScalarType::Bool),
              "rsub: subtraction, the `-` operator, with a bool tensor is not supported; use "
              "logical_xor or bitwise_not instead");
  ElementwiseIterator it("rsub");
  binary_iter(it, self, other, Tensor()).build();
  EMBER_CHECK(
      !(is_integral(it.common_dtype(), true) && alpha.is_floating()),
      "rsub: for integral input tensors, argument alpha must not be a floating point number");
  check_scalar_fits(alpha, it.common_dtype(), "rsub");
  run<Types::Numeric, void, 2>(it, "rsub", [&](auto tag) {
    using A = decltype(tag);
    return fn::rsub<A>{alpha.to<A>()};
  });
  return it.output();
}

Tensor mul(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  ElementwiseIterator it("mul");
  binary_iter(it, self, other, out).build();
  run<Types::All, void, 2>(it, "mul", stateless(fn::mul{}));
  return it.output();
}

// An integer divisor given as a number (or a 0-d CPU tensor) is known here: dividing by zero
// raises as on the CPU. (A zero inside a divisor tensor cannot raise from the device.)
void check_host_divisor(const TensorIterator& it, const char* msg) {
  if (!is_integral(it.common_dtype(), true) || !it.is_scalar(2)) return;
  if (load_scalar(it.data(2), it.dtype(2)).to_int() == 0) EMBER_FAIL(Runtime, msg);
}

Tensor div(const Tensor& self, const TensorOrScalar& other, const std::optional<std::string>& mode,
           const Tensor& out) {
  ElementwiseIterator it("div");
  binary_iter(it, self, other, out);
  if (!mode) {
    it.promote_int_to_float(true).build();
    run<Types::Float, void, 2>(it, "div", stateless(fn::true_div{}));
    return it.output();
  }
  EMBER_CHECK_KIND(*mode == "trunc" || *mode == "floor", Value,
                   "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
                   *mode, "'");
  it.build();
  check_host_divisor(it, "div: ZeroDivisionError (integer division by zero)");
  if (*mode == "floor") {
    run<Types::Numeric, void, 2>(it, "div", stateless(fn::floor_div{}));
  } else {
    run<Types::Numeric, void, 2>(it, "div", stateless(fn::trunc_div{}));
  }
  return it.output();
}

Tensor true_divide(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  return div(self, other, std::nullopt, out);
}
Tensor floor_divide(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  return div(self, other, std::string("floor"), out);
}

Tensor remainder(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  ElementwiseIterator it("remainder");
  binary_iter(it, self, other, out).build();
  check_host_divisor(it, "remainder: ZeroDivisionError (integer modulo by zero)");
  run<Types::Numeric, void, 2>(it, "remainder", stateless(fn::remainder{}));
  return it.output();
}

Tensor fmod(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  ElementwiseIterator it("fmod");
  binary_iter(it, self, other, out).build();
  check_host_divisor(it, "fmod: ZeroDivisionError (integer modulo by zero)");
  run<Types::Numeric, void, 2>(it, "fmod", stateless(fn::fmod{}));
  return it.output();
}

Tensor pow(const Tensor& self, const TensorOrScalar& exponent, const Tensor& out) {
  if (!exponent.is_tensor() && is_integral(self->dtype(), true) && exponent.scalar.is_integral())
    EMBER_CHECK(exponent.scalar.to_int() >= 0,
                "pow: integers to negative integer powers are not allowed (base dtype ",
                dtype_name(self->dtype()), ", exponent ", exponent.scalar.to_int(), ")");
  ElementwiseIterator it("pow");
  binary_iter(it, self, exponent, out).build();
  if (!exponent.is_tensor()) check_scalar_fits(exponent.scalar, it.common_dtype(), "pow");
  run<Types::Numeric, void, 2>(it, "pow", stateless(fn::pow{}));
  return it.output();
}

Tensor rpow(const Tensor& self, const Scalar& base) {
  ElementwiseIterator it("pow");
  it.add_output(Tensor()).add_input(base).add_input(self).build();
  run<Types::Numeric, void, 2>(it, "pow", stateless(fn::rpow{}));
  return it.output();
}

Tensor atan2(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  ElementwiseIterator it("atan2");
  binary_iter(it, self, other, out).promote_int_to_float(true).build();
  run<Types::Float, void, 2>(it, "atan2", stateless(fn::atan2{}));
  return it.output();
}

Tensor minimum(const Tensor& self, const Tensor& other, const Tensor& out) {
  ElementwiseIterator it("minimum");
  it.add_output(out).add_input(self).add_input(other).build();
  run<Types::All, void, 2>(it, "minimum", stateless(fn::minimum{}));
  return it.output();
}

Tensor maximum(const Tensor& self, const Tensor& other, const Tensor& out) {
  ElementwiseIterator it("maximum");
  it.add_output(out).add_input(self).add_input(other).build();
  run<Types::All, void, 2>(it, "maximum", stateless(fn::maximum{}));
  return it.output();
}

// ---- comparisons and logic -> bool ------------------------------------------------------------

#define EMBER_CU_COMPARE(NAME)                                                      \
  Tensor NAME(const Tensor& self, const TensorOrScalar& other, const Tensor& out) { \
    ElementwiseIterator it(#NAME);                                                  \
    binary_iter(it, self, other, out).output_dtype(ScalarType::Bool).build();       \
    run<Types::All, bool, 2>(it, #NAME, stateless(fn::NAME{}));                     \
    return it.output();                                                             \
  }
EMBER_CU_COMPARE(eq)
EMBER_CU_COMPARE(ne)
EMBER_CU_COMPARE(lt)
EMBER_CU_COMPARE(le)
EMBER_CU_COMPARE(gt)
EMBER_CU_COMPARE(ge)
#undef EMBER_CU_COMPARE

#define EMBER_CU_LOGICAL(NAME)                                                                  \
  Tensor NAME(const Tensor& self, const Tensor& other, const Tensor& out) {                     \
    ElementwiseIterator it(#NAME);                                                              \
    it.add_output(out).add_input(self).add_input(other).output_dtype(ScalarType::Bool).build(); \
    run<Types::All, bool, 2>(it, #NAME, stateless(fn::NAME{}));                                 \
    return it.output();                                                                         \
  }
EMBER_CU_LOGICAL(logical_and)
EMBER_CU_LOGICAL(logical_or)
EMBER_CU_LOGICAL(logical_xor)
#undef EMBER_CU_LOGICAL

#define EMBER_CU_BITWISE(NAME)                                                      \
  Tensor NAME(const Tensor& self, const TensorOrScalar& other, const Tensor& out) { \
    ElementwiseIterator it(#NAME);                                                  \
    binary_iter(it, self, other, out).build();                                      \
    run<Types::Integral, void, 2>(it, #NAME, stateless(fn::NAME{}));                \
    return it.output();                                                             \
  }
EMBER_CU_BITWISE(bitwise_and)
EMBER_CU_BITWISE(bitwise_or)
EMBER_CU_BITWISE(bitwise_xor)
EMBER_CU_BITWISE(bitwise_left_shift)
EMBER_CU_BITWISE(bitwise_right_shift)
#undef EMBER_CU_BITWISE

// ---- ternary ----------------------------------------------------------------------------------

Tensor clamp(const Tensor& self, const TensorOrScalar& min, const TensorOrScalar& max,
             const Tensor& out) {
  EMBER_CHECK(!min.is_none() || !max.is_none(),
              "clamp: at least one of 'min' or 'max' must not be None");
  ElementwiseIterator it("clamp");
  it.add_output(out).add_input(self);
  if (!min.is_none()) it.add_input(min);
  if (!max.is_none()) it.add_input(max);
  it.build();
  for (const TensorOrScalar* b : {&min, &max})
    if (!b->is_none() && !b->is_tensor()) check_scalar_fits(b->scalar, it.common_dtype(), "clamp");
  const bool has_min = !min.is_none(), has_max = !max.is_none();
  if (has_min && has_max) {
    run<Types::Numeric, void, 3>(it, "clamp", stateless(fn::clamp_both{}));
  } else {
    run<Types::Numeric, void, 2>(it, "clamp", [has_min](auto) { return fn::clamp_one{has_min}; });
  }
  return it.output();
}

Tensor where(const Tensor& condition, const TensorOrScalar& self, const TensorOrScalar& other,
             const Tensor& out) {
  EMBER_CHECK_KIND(
      condition->dtype() == ScalarType::Bool || condition->dtype() == ScalarType::UInt8, Type,
      "where: expected condition to be a bool tensor, got ", dtype_name(condition->dtype()));
  ElementwiseIterator it("where");
  it.add_output(out).add_input(self).add_input(other).add_input_raw(condition).build();
  EMBER_DISPATCH_ALL(it.dtype(1), "where", [&] {
    using T = scalar_t;
    if (it.dtype(3) == ScalarType::Bool) {
      launch_elementwise<T, T, T, bool>(it, "where", fn::where{});
    } else {
      launch_elementwise<T, T, T, uint8_t>(it, "where", fn::where{});
    }
  });
  it.finish();
  return it.output();
}

Tensor lerp(const Tensor& self, const Tensor& end, const TensorOrScalar& weight,
            const Tensor& out) {
  EMBER_CHECK_KIND(is_floating(self->dtype()) && self->dtype() == end->dtype(), Type,
                   "lerp: expected self and end to have the same floating dtype, got ",
                   dtype_name(self->dtype()), " and ", dtype_name(end->dtype()));
  ElementwiseIterator it("lerp");
  it.add_output(out).add_input(self).add_input(end).add_input(weight).build();
  run<Types::Float, void, 3>(it, "lerp", stateless(fn::lerp{}));
  return it.output();
}

Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value,
               const Tensor& out) {
  ElementwiseIterator it("addcmul");
  it.add_output(out).add_input(self).add_input(t1).add_input(t2).build();
  check_scalar_fits(value, it.common_dtype(), "addcmul");
  run<Types::Numeric, void, 3>(it, "addcmul", [&](auto tag) {
    using A = decltype(tag);
    return fn::addcmul<A>{value.to<A>()};
  });
  return it.output();
}

Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value,
               const Tensor& out) {
  EMBER_CHECK(is_floating(t1->dtype()) || is_floating(t2->dtype()),
              "addcdiv: integer division is not supported (tensor1 ", dtype_name(t1->dtype()),
              ", tensor2 ", dtype_name(t2->dtype()), "); use a floating dtype");
  ElementwiseIterator it("addcdiv");
  it.add_output(out).add_input(self).add_input(t1).add_input(t2).build();
  check_scalar_fits(value, it.common_dtype(), "addcdiv");
  run<Types::Float, void, 3>(it, "addcdiv", [&](auto tag) {
    using A = decltype(tag);
    return fn::addcdiv<A>{value.to<A>()};
  });
  return it.output();
}

Tensor isclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equal_nan) {
  EMBER_CHECK_KIND(self->dtype() == other->dtype(), Type, "isclose: self (",
                   dtype_name(self->dtype()), ") and other (", dtype_name(other->dtype()),
                   ") must have the same dtype");
  EMBER_CHECK_KIND(rtol >= 0 && atol >= 0, Value,
                   "isclose: rtol and atol must be non-negative, got rtol=", rtol, " atol=", atol);
  ElementwiseIterator it("isclose");
  it.add_output(Tensor()).add_input(self).add_input(other).output_dtype(ScalarType::Bool).build();
  run<Types::All, bool, 2>(it, "isclose",
                           [=](auto) { return fn::isclose{rtol, atol, equal_nan}; });
  return it.output();
}

// ---- ops returning a bool: computed on the device, one flag read back (a sync point) ----------

__global__ void any_zero_kernel(const uint8_t* p, int64_t n, int32_t* found) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    if (p[i] == 0) *found = 1;
}

// Whether every element of b (a bool tensor an op has just made: dense, its numel() bytes from
// data()) is true.
bool all_true(const Tensor& b, const char* op) {
  const int64_t n = b->numel();
  if (n == 0) return true;
  DeviceGuard guard(b->device().index);
  cudaStream_t stream = current_stream();
  Tensor flag = ember::empty(DimVector{1}, ScalarType::Int32, b->device());
  EMBER_CUDA_CHECK(cudaMemsetAsync(flag->data(), 0, sizeof(int32_t), stream));
  const unsigned blocks = std::min(blocks_for(n), 1024u);
  any_zero_kernel<<<blocks, kBlockSize, 0, stream>>>(b->data_as<uint8_t>(), n,
                                                     flag->data_as<int32_t>());
  check_launch(op);
  int32_t found = 0;
  EMBER_CUDA_CHECK(
      cudaMemcpyAsync(&found, flag->data(), sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
  return found == 0;
}

bool allclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equal_nan) {
  return all_true(isclose(self, other, rtol, atol, equal_nan), "allclose");
}

bool equal(const Tensor& self, const Tensor& other) {
  if (self->sizes() != other->sizes()) return false;
  return all_true(eq(self, TensorOrScalar(other), Tensor()), "equal");
}

// ---- registration -----------------------------------------------------------------------------

void register_pointwise() {
#define REG(NAME) register_kernel(#NAME, DeviceType::CUDA, &NAME);
  REG(exp) REG(exp2) REG(expm1) REG(log) REG(log2) REG(log10) REG(log1p) REG(sqrt) REG(rsqrt)
  REG(sin) REG(cos) REG(tan) REG(asin) REG(acos) REG(atan) REG(sinh) REG(cosh) REG(tanh)
  REG(sigmoid) REG(erf) REG(erfinv) REG(reciprocal)
  REG(neg) REG(abs) REG(sign) REG(square) REG(relu) REG(floor) REG(ceil) REG(trunc) REG(frac)
  REG(round) REG(isnan) REG(isinf) REG(isfinite) REG(logical_not) REG(bitwise_not)
  REG(nan_to_num)
  REG(add) REG(sub) REG(rsub) REG(mul) REG(div) REG(true_divide) REG(floor_divide)
  REG(remainder) REG(fmod) REG(pow) REG(rpow) REG(atan2) REG(minimum) REG(maximum)
  REG(eq) REG(ne) REG(lt) REG(le) REG(gt) REG(ge)
  REG(logical_and) REG(logical_or) REG(logical_xor)
  REG(bitwise_and) REG(bitwise_or) REG(bitwise_xor) REG(bitwise_left_shift)
  REG(bitwise_right_shift)
  REG(clamp) REG(where) REG(lerp) REG(addcmul) REG(addcdiv) REG(isclose) REG(allclose)
  REG(equal)
#undef REG
  register_kernel("clip", DeviceType::CUDA, &clamp);
}

}  // namespace pointwise
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::pointwise::register_pointwise)
