// The functors of the CUDA pointwise ops (pointwise_ops.cu, pointwise_binary_ops.cu) and the
// helper that dispatches a dtype and runs one through the elementwise engine. Split in two .cu
// files so the two halves compile in parallel.
#pragma once
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "core/dispatch.h"
#include "cuda/elementwise.cuh"
#include "cuda/pointwise_math.cuh"
#include "kernels/pointwise_rules.h"
#include "kernels/special_math.h"
#include "ops.h"

namespace ember {
namespace cuda {
namespace pointwise {

// ---- functors ---------------------------------------------------------------------------------

namespace fn {

#define EMBER_CU_UNARY(NAME, EXPR)                       \
  struct NAME {                                          \
    template <class A>                                   \
    __device__ __forceinline__ A operator()(A x) const { \
      return EXPR;                                       \
    }                                                    \
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
EMBER_CU_UNARY(asinh, dm::asinh(x))
EMBER_CU_UNARY(acosh, dm::acosh(x))
EMBER_CU_UNARY(atanh, dm::atanh(x))
EMBER_CU_UNARY(sigmoid, A(1) / (A(1) + dm::exp(-x)))
EMBER_CU_UNARY(erf, dm::erf(x))
EMBER_CU_UNARY(erfc, dm::erfc(x))
EMBER_CU_UNARY(erfinv, dm::erfinv(x))
EMBER_CU_UNARY(reciprocal, A(1) / x)
// torch.special's Bessel and Airy functions, in double (kernels/special_math.h)
#define EMBER_CU_SPECIAL(NAME, FN) \
  EMBER_CU_UNARY(special_##NAME, A(special_math::FN(static_cast<double>(x))))
EMBER_CU_SPECIAL(bessel_j0, bessel_j0)
EMBER_CU_SPECIAL(bessel_j1, bessel_j1)
EMBER_CU_SPECIAL(bessel_y0, bessel_y0)
EMBER_CU_SPECIAL(bessel_y1, bessel_y1)
EMBER_CU_SPECIAL(modified_bessel_i0, bessel_i0)
EMBER_CU_SPECIAL(modified_bessel_i1, bessel_i1)
EMBER_CU_SPECIAL(modified_bessel_k0, bessel_k0)
EMBER_CU_SPECIAL(modified_bessel_k1, bessel_k1)
EMBER_CU_SPECIAL(scaled_modified_bessel_k0, bessel_k0e)
EMBER_CU_SPECIAL(scaled_modified_bessel_k1, bessel_k1e)
EMBER_CU_SPECIAL(airy_ai, airy_ai)
EMBER_CU_SPECIAL(spherical_bessel_j0, spherical_j0)
#undef EMBER_CU_SPECIAL

EMBER_CU_UNARY(neg, A(-x))
EMBER_CU_UNARY(abs, (dm::is_neg(x) || x == A(0)) ? A(A(0) - x) : x)  // abs(-0.0) = +0.0
EMBER_CU_UNARY(sign, A((A(0) < x) - dm::is_neg(x)))
EMBER_CU_UNARY(sgn, A((A(0) < x) - dm::is_neg(x)))  // real dtypes only: sign's values
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
      // as on the CPU: in the math type, x * 10^d (x / 10^-d for negative d), scale holding
      // 10^|d|
      using M = std::conditional_t<std::is_same_v<A, double>, double, float>;
      const M m = static_cast<M>(x);
      const M ten = static_cast<M>(scale);
      if (decimals > 0) return static_cast<A>(dm::rint(m * ten) / ten);
      return static_cast<A>(dm::rint(m / ten) * ten);
    }
  }
};

#define EMBER_CU_PREDICATE(NAME, EXPR)                      \
  struct NAME {                                             \
    template <class A>                                      \
    __device__ __forceinline__ bool operator()(A x) const { \
      return EXPR;                                          \
    }                                                       \
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
    } else if constexpr (std::is_unsigned_v<A> && sizeof(A) < sizeof(unsigned)) {
      // uint8 and uint16 would promote to (signed) int, where 65535 * 65535 overflows: multiply
      // as unsigned, which wraps like PyTorch's result
      return static_cast<A>(unsigned{x} * y);
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
// x ** y; ScalarExp: y is one scalar for the whole tensor (torch's pow(Tensor, Scalar)), whose
// +-0.5 goes through sqrt. A tensor of exponents is pow's everywhere (pow(-inf, 0.5) = inf).
template <bool ScalarExp>
struct pow_op {
  template <class A>
  __device__ __forceinline__ A operator()(A x, A y) const {
    if constexpr (std::is_integral_v<A>) {
      return dm::int_pow(x, y);
    } else {
      if (y == A(2)) return x * x;
      // +-0.5 through sqrt, as the CPU kernel and torch: NaN at -inf, -0 / -inf at -0
      if constexpr (ScalarExp && std::is_floating_point_v<A>) {
        if (y == A(0.5)) return dm::sqrt(x);
        if (y == A(-0.5)) return A(1) / dm::sqrt(x);
      }
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

// torch.special's polynomials p_n(x), computed in poly_math_t (MATH: the op-math type itself
// for the Hermite ones) (kernels/special_math.h), as on the CPU
#define EMBER_CU_SPECIAL_POLY_IN(NAME, FN, MATH)              \
  struct special_##NAME {                                     \
    template <class A>                                        \
    __device__ __forceinline__ A operator()(A x, A n) const { \
      using W = MATH;                                         \
      return A(special_math::FN<W>(W(x), W(n)));              \
    }                                                         \
  };
#define EMBER_CU_SPECIAL_POLY(NAME, FN) \
  EMBER_CU_SPECIAL_POLY_IN(NAME, FN, special_math::poly_math_t<A>)
EMBER_CU_SPECIAL_POLY(chebyshev_polynomial_t, chebyshev_t)
EMBER_CU_SPECIAL_POLY(chebyshev_polynomial_u, chebyshev_u)
EMBER_CU_SPECIAL_POLY(chebyshev_polynomial_v, chebyshev_v)
EMBER_CU_SPECIAL_POLY(chebyshev_polynomial_w, chebyshev_w)
EMBER_CU_SPECIAL_POLY(shifted_chebyshev_polynomial_t, shifted_chebyshev_t)
EMBER_CU_SPECIAL_POLY(shifted_chebyshev_polynomial_u, shifted_chebyshev_u)
EMBER_CU_SPECIAL_POLY(shifted_chebyshev_polynomial_v, shifted_chebyshev_v)
EMBER_CU_SPECIAL_POLY(shifted_chebyshev_polynomial_w, shifted_chebyshev_w)
EMBER_CU_SPECIAL_POLY_IN(hermite_polynomial_h, hermite_h, A)
EMBER_CU_SPECIAL_POLY_IN(hermite_polynomial_he, hermite_he, A)
EMBER_CU_SPECIAL_POLY(laguerre_polynomial_l, laguerre_l)
EMBER_CU_SPECIAL_POLY(legendre_polynomial_p, legendre_p)
#undef EMBER_CU_SPECIAL_POLY
#undef EMBER_CU_SPECIAL_POLY_IN
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

#define EMBER_CU_BINARY_BOOL(NAME, EXPR)                         \
  struct NAME {                                                  \
    template <class A>                                           \
    __device__ __forceinline__ bool operator()(A x, A y) const { \
      return EXPR;                                               \
    }                                                            \
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

#define EMBER_CU_BITWISE(NAME, EXPR)                          \
  struct NAME {                                               \
    template <class A>                                        \
    __device__ __forceinline__ A operator()(A x, A y) const { \
      return static_cast<A>(EXPR);                            \
    }                                                         \
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
    // the form by |w| < 0.5, as the CPU kernel and torch (lerp(0, inf, -2) is NaN)
    return (w < A(0.5) && w > A(-0.5)) ? a + w * (b - a) : b - (b - a) * (A(1) - w);
  }
};
// lerp by a scalar weight held in the compute type A
template <class A>
struct lerp_by {
  A w;
  __device__ __forceinline__ A operator()(A a, A b) const { return lerp{}(a, b, w); }
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
  bool in_double;  // integers: the default float dtype is float64 (else float32)
  template <class A>
  __device__ __forceinline__ bool operator()(A x, A y) const {
    if (x == y) return true;
    if constexpr (std::is_integral_v<A>) {
      // as PyTorch: both converted to the default float dtype, the tolerance in it too; zero
      // tolerances compare exactly
      if (rtol == 0 && atol == 0) return false;
      if (in_double) {
        const double dy = static_cast<double>(y);
        return dm::fabs(static_cast<double>(x) - dy) <= atol + rtol * dm::fabs(dy);
      }
      const float fx = static_cast<float>(x), fy = static_cast<float>(y);
      const float tol =
          __fadd_rn(static_cast<float>(atol), __fmul_rn(static_cast<float>(rtol), fabsf(fy)));
      return fabsf(__fsub_rn(fx, fy)) <= tol;
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

// *UInt adds uint16/32/64: the ops PyTorch computes on them (mul, bitwise and/or/xor, isnan,
// isclose).
enum class Types { All, AllUInt, Numeric, Float, Integral, IntegralUInt };

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
  } else if constexpr (types == Types::AllUInt) {
    EMBER_DISPATCH_ALL_AND_UINT(dt, name, [&] { body(scalar_t{}); });
  } else if constexpr (types == Types::IntegralUInt) {
    [&] {
      switch (dt) {
        EMBER_CASES_INT([&] { body(scalar_t{}); })
        EMBER_DTYPE_CASE(Bool, bool, [&] { body(scalar_t{}); })
        EMBER_CASES_UINT([&] { body(scalar_t{}); })
        EMBER_DTYPE_ERROR(dt, name, "integer and bool dtypes")
      }
    }();
  } else {
    EMBER_DISPATCH_INTEGRAL(dt, name, [&] { body(scalar_t{}); });
  }
  it.finish();
}

template <class Fn>
auto stateless(Fn) {
  return [](auto) { return Fn{}; };
}

}  // namespace pointwise
}  // namespace cuda
}  // namespace ember
