// CPU kernels of the pointwise ops declared in ops/pointwise.yaml. Each builds a TensorIterator
// (broadcasting, promotion, out=) and runs one of the loops of kernels/loops.h with a functor.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>

#include "core/dispatch.h"
#include "kernels/complex_math.h"
#include "kernels/cpu/complex_vec.h"
#include "kernels/cpu/gamma_values.h"
#include "kernels/cpu/nn_vec.h"
#include "kernels/cpu/pointwise_vec.h"
#include "kernels/cpu/vec_loop.h"
#include "kernels/gamma_math.h"
#include "kernels/iterator.h"
#include "kernels/loops.h"
#include "kernels/pointwise_rules.h"
#include "kernels/special_math.h"
#include "kernels/special_math_f32.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

// Which dtypes an op takes; the *Complex sets add complex64 and complex128, *UInt adds uint16/32/64
// (the ops PyTorch computes on them: mul, bitwise and/or/xor, isnan, isclose), Every adds all the
// storage dtypes (uint16/32/64, float8: eq and ne, as PyTorch takes them).
enum class Types {
  All,
  Numeric,
  Float,
  Integral,
  IntegralUInt,
  AllComplex,
  AllComplexUInt,
  NumericComplex,
  FloatComplex,
  Every
};

// Runs `make(A{})` (a functor over the op-math type A) through the loop for `nin` inputs.
template <Types types, class R_override, int nin, class Make>
void run(TensorIterator& it, const char* name, const Make& make) {
  auto body = [&](auto tag) {
    using T = decltype(tag);
    using R = std::conditional_t<std::is_void_v<R_override>, T, R_override>;
    auto f = make(opmath_t<T>{});
    it.for_each([&](char** d, const int64_t* s, int64_t n) {
      if constexpr (nin == 1) unary_loop<T, R>(d, s, n, f);
      if constexpr (nin == 2) binary_loop<T, R>(d, s, n, f);
      if constexpr (nin == 3) ternary_loop<T, R>(d, s, n, f);
    });
  };
  ScalarType dt = it.dtype(1);
  if constexpr (types == Types::All) {
    EMBER_DISPATCH_ALL(dt, name, [&] { body(scalar_t{}); });
  } else if constexpr (types == Types::Numeric) {
    EMBER_DISPATCH_NUMERIC(dt, name, [&] { body(scalar_t{}); });
  } else if constexpr (types == Types::Float) {
    EMBER_DISPATCH_FLOAT(dt, name, [&] { body(scalar_t{}); });
  } else if constexpr (types == Types::AllComplex) {
    EMBER_DISPATCH_ALL_AND_COMPLEX(dt, name, [&] { body(scalar_t{}); });
  } else if constexpr (types == Types::Every) {
    EMBER_DISPATCH_EVERY(dt, name, [&] { body(scalar_t{}); });
  } else if constexpr (types == Types::NumericComplex) {
    [&] {
      switch (dt) {
        EMBER_CASES_FLOAT([&] { body(scalar_t{}); })
        EMBER_CASES_INT([&] { body(scalar_t{}); })
        EMBER_CASES_COMPLEX([&] { body(scalar_t{}); })
        EMBER_DTYPE_ERROR(dt, name,
                          "integer, floating and complex dtypes but " EMBER_STORAGE_DTYPES)
      }
    }();
  } else if constexpr (types == Types::FloatComplex) {
    [&] {
      switch (dt) {
        EMBER_CASES_FLOAT([&] { body(scalar_t{}); })
        EMBER_CASES_COMPLEX([&] { body(scalar_t{}); })
        EMBER_DTYPE_ERROR(dt, name, "floating and complex dtypes")
      }
    }();
  } else if constexpr (types == Types::AllComplexUInt) {
    [&] {
      switch (dt) {
        EMBER_CASES_FLOAT([&] { body(scalar_t{}); })
        EMBER_CASES_INT([&] { body(scalar_t{}); })
        EMBER_DTYPE_CASE(Bool, bool, [&] { body(scalar_t{}); })
        EMBER_CASES_COMPLEX([&] { body(scalar_t{}); })
        EMBER_CASES_UINT([&] { body(scalar_t{}); })
        EMBER_DTYPE_ERROR(dt, name, "every dtype but the float8 types")
      }
    }();
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

template <class A>
constexpr bool is_int_v = std::is_integral_v<A> && !std::is_same_v<A, bool>;

// float32 and float64 (every operand of the one dtype) on the loops of pointwise_vec.h, the
// copy for this CPU's widest vectors; the strided inner loops on make's functor, the same
// formula. False (nothing done) for other dtypes. alpha: add's and sub's.
template <class Make>
bool run_real_binary(TensorIterator& it, pvec::Binary op, const Scalar& alpha, const Make& make) {
  return run_pvec_binary<float>(it, op, alpha.to<float>(), make(float{})) ||
         run_pvec_binary<double>(it, op, alpha.to<double>(), make(double{}));
}
template <class Make>
bool run_real_unary(TensorIterator& it, pvec::Unary op, const Make& make) {
  return run_pvec_unary<float>(it, op, make(float{})) ||
         run_pvec_unary<double>(it, op, make(double{}));
}

// Scalar erfc of the half types (their op math is float32; float32 and float64 tensors run the
// vector kernel): through erfcf while the result is a normal float (x < 9: erfc(9) = 4.1e-37),
// in double beyond, so the subnormal tail is correctly rounded (erfcf(10) is 2 subnormal units,
// erfc(10) = 2.09e-45 rounds to 1).
template <class A>
A erfc_impl(A x) {
  if constexpr (std::is_same_v<A, float>) {
    if (x < 9.0f) return std::erfc(x);
  }
  return static_cast<A>(std::erfc(static_cast<double>(x)));
}

double erfinv_impl(double y) {
  if (!(y > -1.0 && y < 1.0)) {
    if (y == 1.0) return std::numeric_limits<double>::infinity();
    if (y == -1.0) return -std::numeric_limits<double>::infinity();
    return std::numeric_limits<double>::quiet_NaN();
  }
  // A first guess good to ~1e-4: Giles' single-precision approximation in the center and, in
  // the tails (where its fit ends), Abramowitz & Stegun 26.2.23 for the normal quantile of
  // (1 - |y|) / 2. Then Halley steps (erf'' / erf' = -2x) to full precision.
  const double w = -std::log((1.0 - y) * (1.0 + y));
  double x;
  if (w < 5.0) {
    const double v = w - 2.5;
    x = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                     -0.00417768164, 0.246640727, 1.50140941})
      x = c + x * v;
    x *= y;
  } else {
    const double t = std::sqrt(-2.0 * std::log(0.5 * (y > 0 ? 1.0 - y : 1.0 + y)));
    const double z = t - (2.515517 + t * (0.802853 + t * 0.010328)) /
                             (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308)));
    x = std::copysign(z * 0.7071067811865476, y);
  }
  // The residual erf(x) - y cancels near |y| = 1 (erf(x) rounds to within an ulp of 1): in the
  // tails it is taken from erfc instead, with 1 - |y| exact there (Sterbenz).
  for (int i = 0; i < 2; ++i) {
    const double r = y > 0.5    ? (1.0 - y) - std::erfc(x)
                     : y < -0.5 ? std::erfc(-x) - (1.0 + y)
                                : std::erf(x) - y;
    const double u = r / (1.1283791670955126 * std::exp(-x * x));
    x -= u / (1.0 + x * u);
  }
  return x;
}

}  // namespace

#define EMBER_UNARY_FLOAT_T(NAME, TYPES, EXPR)                             \
  Tensor NAME(const Tensor& self, const Tensor& out) {                     \
    ElementwiseIterator it(#NAME);                                         \
    it.add_output(out).add_input(self).promote_int_to_float(true).build(); \
    run<Types::TYPES, void, 1>(it, #NAME, [](auto tag) {                   \
      using A = decltype(tag);                                             \
      return [](A x) -> A { return EXPR; };                                \
    });                                                                    \
    return it.output();                                                    \
  }
#define EMBER_UNARY_FLOAT(NAME, EXPR) EMBER_UNARY_FLOAT_T(NAME, Float, EXPR)
// The same with float32 on the vectorized kernel nn::vec::NAME (float64 and the half types stay
// on EXPR).
#define EMBER_UNARY_FLOAT_VEC_T(NAME, TYPES, EXPR)                                                \
  Tensor NAME(const Tensor& self, const Tensor& out) {                                            \
    ElementwiseIterator it(#NAME);                                                                \
    it.add_output(out).add_input(self).promote_int_to_float(true).build();                        \
    if (run_vec_float32(it, [](const float* x, float* y, int64_t n) { nn::vec::NAME(x, y, n); })) \
      return it.output();                                                                         \
    run<Types::TYPES, void, 1>(it, #NAME, [](auto tag) {                                          \
      using A = decltype(tag);                                                                    \
      return [](A x) -> A { return EXPR; };                                                       \
    });                                                                                           \
    return it.output();                                                                           \
  }

#define EMBER_UNARY_FLOAT_VEC(NAME, EXPR) EMBER_UNARY_FLOAT_VEC_T(NAME, Float, EXPR)
// Real and complex dtypes: EXPR for the real ones, CEXPR (over the same x) for complex64 and
// complex128 (kernels/complex_math.h).
#define EMBER_REAL_OR_COMPLEX(EXPR, CEXPR) \
  [&] {                                    \
    if constexpr (is_complex_v<A>) {       \
      return A(CEXPR);                     \
    } else {                               \
      return A(EXPR);                      \
    }                                      \
  }()
#define EMBER_UNARY_FLOAT_C(NAME, EXPR, CEXPR) \
  EMBER_UNARY_FLOAT_T(NAME, FloatComplex, EMBER_REAL_OR_COMPLEX(EXPR, CEXPR))
#define EMBER_UNARY_FLOAT_VEC_C(NAME, EXPR, CEXPR) \
  EMBER_UNARY_FLOAT_VEC_T(NAME, FloatComplex, EMBER_REAL_OR_COMPLEX(EXPR, CEXPR))

EMBER_UNARY_FLOAT_VEC_T(exp, FloatComplex, std::exp(x))
EMBER_UNARY_FLOAT_C(exp2, std::exp2(x), complex_math::exp2(x))
EMBER_UNARY_FLOAT_VEC_C(expm1, std::expm1(x), complex_math::expm1(x))
EMBER_UNARY_FLOAT_VEC_T(log, FloatComplex, std::log(x))
EMBER_UNARY_FLOAT_C(log2, std::log2(x), complex_math::log2(x))
EMBER_UNARY_FLOAT_C(log10, std::log10(x), complex_math::log10(x))
EMBER_UNARY_FLOAT_VEC_C(log1p, std::log1p(x), complex_math::log1p(x))
// sqrt: float32 and float64 on the loops of pointwise_vec.h.
Tensor sqrt(const Tensor& self, const Tensor& out) {
  ElementwiseIterator it("sqrt");
  it.add_output(out).add_input(self).promote_int_to_float(true).build();
  auto make = [](auto tag) {
    using A = decltype(tag);
    return [](A x) -> A { return std::sqrt(x); };
  };
  if (run_real_unary(it, pvec::Unary::Sqrt, make)) return it.output();
  run<Types::FloatComplex, void, 1>(it, "sqrt", make);
  return it.output();
}
EMBER_UNARY_FLOAT_C(rsqrt, A(1) / std::sqrt(x), complex_math::rsqrt(x))
EMBER_UNARY_FLOAT_T(sin, FloatComplex, std::sin(x))
EMBER_UNARY_FLOAT_T(cos, FloatComplex, std::cos(x))
EMBER_UNARY_FLOAT_T(tan, FloatComplex, std::tan(x))
EMBER_UNARY_FLOAT_T(asin, FloatComplex, std::asin(x))
EMBER_UNARY_FLOAT_T(acos, FloatComplex, std::acos(x))
EMBER_UNARY_FLOAT_T(atan, FloatComplex, std::atan(x))
EMBER_UNARY_FLOAT_T(asinh, FloatComplex, std::asinh(x))
EMBER_UNARY_FLOAT_T(acosh, FloatComplex, std::acosh(x))
EMBER_UNARY_FLOAT_T(atanh, FloatComplex, std::atanh(x))
EMBER_UNARY_FLOAT_T(sinh, FloatComplex, std::sinh(x))
EMBER_UNARY_FLOAT_T(cosh, FloatComplex, std::cosh(x))
EMBER_UNARY_FLOAT_VEC_T(tanh, FloatComplex, std::tanh(x))
// sigmoid: float32 on the vectorized kernel; complex64 and complex128 as exp(-z) by the C library
// and then 1 / (1 + w) on the vectorized kernel (complex_vec.h), complex_math::sigmoid's steps.
namespace {
template <class T>
void complex_sigmoid_row(const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const std::complex<T> w = std::exp(std::complex<T>(-x[2 * i], -x[2 * i + 1]));
    y[2 * i] = w.real();
    y[2 * i + 1] = w.imag();
  }
  cvec::sigmoid_finish(y, y, n);
}
}  // namespace
Tensor sigmoid(const Tensor& self, const Tensor& out) {
  ElementwiseIterator it("sigmoid");
  it.add_output(out).add_input(self).promote_int_to_float(true).build();
  if (run_vec_float32(it, [](const float* x, float* y, int64_t n) { nn::vec::sigmoid(x, y, n); }))
    return it.output();
  if (run_cvec_unary<float, std::complex<float>>(it, complex_sigmoid_row<float>) ||
      run_cvec_unary<double, std::complex<double>>(it, complex_sigmoid_row<double>))
    return it.output();
  run<Types::FloatComplex, void, 1>(it, "sigmoid", [](auto tag) {
    using A = decltype(tag);
    return [](A x) -> A {
      return EMBER_REAL_OR_COMPLEX(A(1) / (A(1) + std::exp(-x)), complex_math::sigmoid(x));
    };
  });
  return it.output();
}
EMBER_UNARY_FLOAT_VEC(erf, std::erf(x))
// erfc: float32 and float64 on the vectorized kernels (nn_vec_erfc.inc), the half types by
// erfc_impl.
Tensor erfc(const Tensor& self, const Tensor& out) {
  ElementwiseIterator it("erfc");
  it.add_output(out).add_input(self).promote_int_to_float(true).build();
  if (run_vec<float>(it, [](const float* x, float* y, int64_t n) { nn::vec::erfc(x, y, n); }) ||
      run_vec<double>(it,
                      [](const double* x, double* y, int64_t n) { nn::vec::erfc_f64(x, y, n); }))
    return it.output();
  run<Types::Float, void, 1>(it, "erfc", [](auto tag) {
    using A = decltype(tag);
    return [](A x) -> A { return erfc_impl(x); };
  });
  return it.output();
}
EMBER_UNARY_FLOAT(erfinv, static_cast<A>(erfinv_impl(static_cast<double>(x))))
// lgamma / digamma / trigamma (order -1 / 0 / 1) for ember.special's autograd Functions
// (kernels/gamma_math.h): float64 in float64, the other floating dtypes in float32, as torch.
Tensor gamma_values(const Tensor& self, int64_t order) {
  EMBER_CHECK(order >= -1 && order <= 1, "_gamma_values: order must be -1 (lgamma), 0 (digamma) ",
              "or 1 (trigamma), got ", order);
  ElementwiseIterator it("_gamma_values");
  it.add_output(Tensor()).add_input(self).promote_int_to_float(true).build();
  const int k = static_cast<int>(order);
  run<Types::Float, void, 1>(it, "_gamma_values", [k](auto tag) {
    using A = decltype(tag);
    using M = std::conditional_t<std::is_same_v<A, double>, double, float>;
    return [k](A x) -> A { return static_cast<A>(gamma_math::of_order(static_cast<M>(x), k)); };
  });
  return it.output();
}
// reciprocal: complex64 and complex128 on the vectorized kernels (complex_vec.h).
Tensor reciprocal(const Tensor& self, const Tensor& out) {
  ElementwiseIterator it("reciprocal");
  it.add_output(out).add_input(self).promote_int_to_float(true).build();
  if (EMBER_RUN_CVEC_SAME(it, reciprocal)) return it.output();
  run<Types::FloatComplex, void, 1>(it, "reciprocal", [](auto tag) {
    using A = decltype(tag);
    return [](A x) -> A { return EMBER_REAL_OR_COMPLEX(A(1) / x, complex_math::reciprocal(x)); };
  });
  return it.output();
}
// torch.special's Bessel and Airy functions, in double (kernels/special_math.h); the Bessel
// functions of float32 and the 16-bit types (op math float) take the float path of
// kernels/special_math_f32.h.
#define EMBER_UNARY_SPECIAL(NAME, EXPR) \
  EMBER_UNARY_FLOAT(special_##NAME, static_cast<A>(special_math::EXPR(static_cast<double>(x))))
#define EMBER_UNARY_SPECIAL_F32(NAME, EXPR)                                                      \
  EMBER_UNARY_FLOAT(                                                                             \
      special_##NAME,                                                                            \
      (std::is_same_v<A, float> ? static_cast<A>(special_math::f32::EXPR(static_cast<float>(x))) \
                                : static_cast<A>(special_math::EXPR(static_cast<double>(x)))))
EMBER_UNARY_SPECIAL_F32(bessel_j0, bessel_j0)
EMBER_UNARY_SPECIAL_F32(bessel_j1, bessel_j1)
EMBER_UNARY_SPECIAL_F32(bessel_y0, bessel_y0)
EMBER_UNARY_SPECIAL_F32(bessel_y1, bessel_y1)
EMBER_UNARY_SPECIAL_F32(modified_bessel_i0, bessel_i0)
EMBER_UNARY_SPECIAL_F32(modified_bessel_i1, bessel_i1)
EMBER_UNARY_SPECIAL_F32(modified_bessel_k0, bessel_k0)
EMBER_UNARY_SPECIAL_F32(modified_bessel_k1, bessel_k1)
EMBER_UNARY_SPECIAL_F32(scaled_modified_bessel_k0, bessel_k0e)
EMBER_UNARY_SPECIAL_F32(scaled_modified_bessel_k1, bessel_k1e)
EMBER_UNARY_SPECIAL(airy_ai, airy_ai)
EMBER_UNARY_SPECIAL(spherical_bessel_j0, spherical_j0)
#undef EMBER_UNARY_SPECIAL
#undef EMBER_UNARY_SPECIAL_F32
#undef EMBER_UNARY_FLOAT
#undef EMBER_UNARY_FLOAT_T
#undef EMBER_UNARY_FLOAT_VEC
#undef EMBER_UNARY_FLOAT_VEC_T
#undef EMBER_UNARY_FLOAT_C
#undef EMBER_UNARY_FLOAT_VEC_C

namespace {
template <class A>
A bit_not(A x) {
  if constexpr (std::is_same_v<A, bool>) {
    return !x;
  } else {
    return static_cast<A>(~x);
  }
}
// Shifts by a negative amount or past the width give 0 (or -1 for negative x shifted right).
template <class A>
A shift_left(A x, A y) {
  if constexpr (std::is_same_v<A, bool>) {
    return y ? false : x;
  } else {
    return (y < 0 || y >= A(sizeof(A) * 8)) ? A(0) : A(x << y);
  }
}
template <class A>
A shift_right(A x, A y) {
  if constexpr (std::is_same_v<A, bool>) {
    return y ? false : x;
  } else {
    return (y < 0 || y >= A(sizeof(A) * 8)) ? A(x < 0 ? -1 : 0) : A(x >> y);
  }
}
}  // namespace

// Ops that keep the input dtype. TYPES: which dtypes are accepted.
#define EMBER_UNARY_SAME(NAME, TYPES, EXPR)                          \
  Tensor NAME(const Tensor& self, const Tensor& out) {               \
    ElementwiseIterator it(#NAME);                                   \
    it.add_output(out).add_input(self).exact_output_dtype().build(); \
    run<Types::TYPES, void, 1>(it, #NAME, [](auto tag) {             \
      using A = decltype(tag);                                       \
      return [](A x) -> A { return EXPR; };                          \
    });                                                              \
    return it.output();                                              \
  }

// neg: float32 and float64 on the loops of pointwise_vec.h.
Tensor neg(const Tensor& self, const Tensor& out) {
  ElementwiseIterator it("neg");
  it.add_output(out).add_input(self).exact_output_dtype().build();
  auto make = [](auto tag) {
    using A = decltype(tag);
    return [](A x) -> A { return -x; };
  };
  if (run_real_unary(it, pvec::Unary::Neg, make)) return it.output();
  run<Types::NumericComplex, void, 1>(it, "neg", make);
  return it.output();
}

namespace {
// abs: 0 - x, not -x, so that abs(-0.0) is +0.0 as in PyTorch.
Tensor abs_real(const Tensor& self, const Tensor& out) {
  ElementwiseIterator it("abs");
  it.add_output(out).add_input(self).exact_output_dtype().build();
  auto make = [](auto tag) {
    using A = decltype(tag);
    return [](A x) -> A { return x <= A(0) ? A(A(0) - x) : x; };
  };
  // float32 and float64 on the loops of pointwise_vec.h
  if (run_real_unary(it, pvec::Unary::Abs, make)) return it.output();
  run<Types::Numeric, void, 1>(it, "abs", make);
  return it.output();
}
}  // namespace

// abs of a complex tensor is real (complex64 -> float32), computed without overflow (hypot).
Tensor abs(const Tensor& self, const Tensor& out) {
  if (!is_complex(self->dtype())) return abs_real(self, out);
  EMBER_CHECK(!(out && out == self), "abs_: in-place abs is not supported for complex tensors");
  ElementwiseIterator it("abs");
  it.add_output(out)
      .add_input(self)
      .output_dtype(to_real(self->dtype()))
      .exact_output_dtype()
      .build();
  if (EMBER_RUN_CVEC_UNARY(it, float, double, abs, false)) return it.output();
  EMBER_DISPATCH_COMPLEX(it.dtype(1), "abs", [&] {
    using R = typename scalar_t::value_type;
    it.for_each([](char** d, const int64_t* s, int64_t n) {
      unary_loop<scalar_t, R>(d, s, n, [](scalar_t x) { return std::hypot(x.real(), x.imag()); });
    });
  });
  it.finish();
  return it.output();
}
namespace {
// The sign of a real tensor, for sign and sgn (name: the op errors name).
Tensor real_sign(const char* name, const Tensor& self, const Tensor& out) {
  ElementwiseIterator it(name);
  it.add_output(out).add_input(self).exact_output_dtype().build();
  run<Types::All, void, 1>(it, name, [](auto tag) {
    using A = decltype(tag);
    return [](A x) -> A { return A((A(0) < x) - (x < A(0))); };
  });
  return it.output();
}
}  // namespace
Tensor sign(const Tensor& self, const Tensor& out) {
  EMBER_CHECK_KIND(!is_complex(self->dtype()), NotImplemented,
                   "Unlike NumPy, torch.sign is not intended to support complex numbers. Please "
                   "use torch.sgn instead.");
  return real_sign("sign", self, out);
}
// sgn: z / |z| for complex z, sign(x) for real x.
Tensor sgn(const Tensor& self, const Tensor& out) {
  if (!is_complex(self->dtype())) return real_sign("sgn", self, out);
  ElementwiseIterator it("sgn");
  it.add_output(out).add_input(self).exact_output_dtype().build();
  if (EMBER_RUN_CVEC_SAME(it, sgn)) return it.output();
  run<Types::FloatComplex, void, 1>(it, "sgn", [](auto tag) {
    using A = decltype(tag);
    return [](A x) -> A {
      if constexpr (is_complex_v<A>) {
        return complex_math::sgn(x);
      } else {
        return x;  // not reached: real dtypes take sign
      }
    };
  });
  return it.output();
}
// square: complex64 and complex128 on the vectorized kernels (complex_vec.h).
Tensor square(const Tensor& self, const Tensor& out) {
  // torch squares a bool tensor as pow(x, 2): an int64 result
  if (self->dtype() == ScalarType::Bool) return pow(self, Scalar(int64_t(2)), out);
  ElementwiseIterator it("square");
  it.add_output(out).add_input(self).build();
  if (EMBER_RUN_CVEC_SAME(it, square)) return it.output();
  run<Types::NumericComplex, void, 1>(it, "square", [](auto tag) {
    using A = decltype(tag);
    return [](A x) -> A { return EMBER_REAL_OR_COMPLEX(x * x, complex_math::square(x)); };
  });
  return it.output();
}
// relu: float32 on the vectorized kernel (the widest vectors this CPU has), float64 on the
// loops of pointwise_vec.h, the rest as above.
Tensor relu(const Tensor& self, const Tensor& out) {
  ElementwiseIterator it("relu");
  it.add_output(out).add_input(self).build();
  if (run_vec_float32(it, [](const float* x, float* y, int64_t n) { nn::vec::relu(x, y, n); }))
    return it.output();
  auto make = [](auto tag) {
    using A = decltype(tag);
    return [](A x) -> A { return (x != x) ? x : (x > A(0) ? x : A(0)); };
  };
  if (run_pvec_unary<double>(it, pvec::Unary::Relu, make(double{}))) return it.output();
  run<Types::Numeric, void, 1>(it, "relu", make);
  return it.output();
}
EMBER_UNARY_SAME(floor, Numeric, std::is_integral_v<A> ? x : A(std::floor(x)))
EMBER_UNARY_SAME(ceil, Numeric, std::is_integral_v<A> ? x : A(std::ceil(x)))
EMBER_UNARY_SAME(trunc, Numeric, std::is_integral_v<A> ? x : A(std::trunc(x)))
EMBER_UNARY_SAME(frac, Float, x - std::trunc(x))
EMBER_UNARY_SAME(bitwise_not, Integral, bit_not(x))
#undef EMBER_UNARY_SAME
#undef EMBER_REAL_OR_COMPLEX

Tensor round(const Tensor& self, int64_t decimals, const Tensor& out) {
  ElementwiseIterator it("round");
  it.add_output(out).add_input(self).exact_output_dtype().build();
  check_round_decimals(it.common_dtype(), self, decimals);
  // PyTorch's rounding: in the op's math type (float for float, half and bfloat16, double for
  // double), x * 10^d (or x / 10^-d for negative d) to the nearest even integer, scaled back.
  double scale = std::pow(10.0, static_cast<double>(decimals < 0 ? -decimals : decimals));
  run<Types::Numeric, void, 1>(it, "round", [scale, decimals](auto tag) {
    using A = decltype(tag);
    return [scale, decimals](A x) -> A {
      if constexpr (std::is_integral_v<A>) {
        return x;
      } else {
        if (decimals == 0) return std::nearbyint(x);
        using M = std::conditional_t<std::is_same_v<A, double>, double, float>;
        const M m = static_cast<M>(x);
        const M ten = static_cast<M>(scale);
        if (decimals > 0) return static_cast<A>(std::nearbyint(m * ten) / ten);
        return static_cast<A>(std::nearbyint(m / ten) * ten);
      }
    };
  });
  return it.output();
}

namespace {
// x != 0: a complex number is true unless both parts are zero.
template <class A>
bool truthy(A x) {
  if constexpr (is_complex_v<A>) {
    return x != A(0);
  } else {
    return static_cast<bool>(x);
  }
}
}  // namespace

#define EMBER_PREDICATE(NAME, EXPR)                                            \
  Tensor NAME(const Tensor& self, const Tensor& out) {                         \
    ElementwiseIterator it(#NAME);                                             \
    it.add_output(out).add_input(self).output_dtype(ScalarType::Bool).build(); \
    run<Types::AllComplex, bool, 1>(it, #NAME, [](auto tag) {                  \
      using A = decltype(tag);                                                 \
      return [](A x) -> bool { return EXPR; };                                 \
    });                                                                        \
    return it.output();                                                        \
  }
EMBER_PREDICATE(logical_not, !truthy(x))
#undef EMBER_PREDICATE

namespace {
template <class A>
bool is_inf_value(A x) {
  if constexpr (std::is_integral_v<A>) {
    return false;
  } else {
    return x == std::numeric_limits<A>::infinity() || x == -std::numeric_limits<A>::infinity();
  }
}
}  // namespace

// isnan / isinf / isfinite: a complex number is NaN (inf) when either part is, finite when both
// parts are.
#define EMBER_PREDICATE_C(NAME, EXPR, CEXPR)                                   \
  Tensor NAME(const Tensor& self, const Tensor& out) {                         \
    ElementwiseIterator it(#NAME);                                             \
    it.add_output(out).add_input(self).output_dtype(ScalarType::Bool).build(); \
    run<Types::AllComplexUInt, bool, 1>(it, #NAME, [](auto tag) {              \
      using A = decltype(tag);                                                 \
      return [](A x) -> bool {                                                 \
        if constexpr (is_complex_v<A>) {                                       \
          const auto re = x.real(), im = x.imag();                             \
          return CEXPR;                                                        \
        } else {                                                               \
          return EXPR;                                                         \
        }                                                                      \
      };                                                                       \
    });                                                                        \
    return it.output();                                                        \
  }
EMBER_PREDICATE_C(isnan, x != x, re != re || im != im)
EMBER_PREDICATE_C(isinf, is_inf_value(x), is_inf_value(re) || is_inf_value(im))
EMBER_PREDICATE_C(isfinite, x == x && !is_inf_value(x),
                  re == re && im == im && !is_inf_value(re) && !is_inf_value(im))
#undef EMBER_PREDICATE_C

Tensor nan_to_num(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf, const Tensor& out) {
  ElementwiseIterator it("nan_to_num");
  it.add_output(out).add_input(self).exact_output_dtype().build();
  // The largest finite value of the result's (real) dtype replaces inf by default.
  const ScalarType st = to_real(it.dtype(0));
  const double big = st == ScalarType::Float16    ? 65504.0
                     : st == ScalarType::BFloat16 ? 3.3895313892515355e38
                     : st == ScalarType::Float32  ? double(std::numeric_limits<float>::max())
                                                  : std::numeric_limits<double>::max();
  run<Types::AllComplexUInt, void, 1>(it, "nan_to_num", [&](auto tag) {
    using A = decltype(tag);
    auto fix = [&](auto v) -> decltype(v) {
      using V = decltype(v);
      if (v != v) return V(nan.value_or(0.0));
      if (v == std::numeric_limits<V>::infinity()) return V(posinf.value_or(big));
      if (v == -std::numeric_limits<V>::infinity()) return V(neginf.value_or(-big));
      return v;
    };
    return [fix](A x) -> A {
      if constexpr (std::is_integral_v<A>) {
        return x;
      } else if constexpr (is_complex_v<A>) {
        return A(fix(x.real()), fix(x.imag()));  // each part on its own, as torch
      } else {
        return fix(x);
      }
    };
  });
  return it.output();
}

// ---- binary arithmetic ----------------------------------------------------------------------

namespace {
// Complex x + alpha y (sub: alpha negated, as torch) on the vectorized kernel (complex_vec.h):
// false (nothing done) unless every operand is of the one complex dtype.
bool run_complex_add(TensorIterator& it, std::complex<double> alpha) {
  if (!is_complex(it.common_dtype())) return false;
  const std::complex<float> a32(alpha);
  return run_cvec_binary<float>(it,
                                [a32](const float* x, const float* y, float* o, int64_t n) {
                                  cvec::add_scaled(x, y, a32.real(), a32.imag(), o, n);
                                }) ||
         run_cvec_binary<double>(it,
                                 [alpha](const double* x, const double* y, double* o, int64_t n) {
                                   cvec::add_scaled(x, y, alpha.real(), alpha.imag(), o, n);
                                 });
}
}  // namespace

Tensor add(const Tensor& self, const TensorOrScalar& other, const Scalar& alpha,
           const Tensor& out) {
  ElementwiseIterator it("add");
  binary_iter(it, self, other, out).build();
  check_alpha(alpha, it.common_dtype(), "add");
  if (run_complex_add(it, alpha.to<std::complex<double>>())) return it.output();
  auto make = [&](auto tag) {
    using A = decltype(tag);
    A al = alpha.to<A>();
    if constexpr (std::is_same_v<A, bool>) {
      return [al](A x, A y) -> A { return x || (al && y); };
    } else if constexpr (is_complex_v<A>) {
      return [al](A x, A y) -> A { return x + complex_math::multiply(al, y); };
    } else {
      return [al](A x, A y) -> A { return x + al * y; };
    }
  };
  if (run_real_binary(it, pvec::Binary::Add, alpha, make)) return it.output();
  run<Types::AllComplex, void, 2>(it, "add", make);
  return it.output();
}

Tensor sub(const Tensor& self, const TensorOrScalar& other, const Scalar& alpha,
           const Tensor& out) {
  check_sub_operands(self, other, "sub");
  ElementwiseIterator it("sub");
  binary_iter(it, self, other, out).build();
  check_alpha(alpha, it.common_dtype(), "sub");
  // x + (-alpha) y, alpha negated as a number first (torch): -1 is -1 + 0i, not -1 - 0i
  const std::complex<double> al64 = alpha.to<std::complex<double>>();
  const std::complex<double> neg(-al64.real(), al64.imag() == 0.0 ? 0.0 : -al64.imag());
  if (run_complex_add(it, neg)) return it.output();
  auto make = [&](auto tag) {
    using A = decltype(tag);
    if constexpr (is_complex_v<A>) {
      const A nal(neg);
      return [nal](A x, A y) -> A { return x + complex_math::multiply(nal, y); };
    } else {
      A al = alpha.to<A>();
      return [al](A x, A y) -> A { return x - al * y; };
    }
  };
  if (run_real_binary(it, pvec::Binary::Sub, alpha, make)) return it.output();
  run<Types::NumericComplex, void, 2>(it, "sub", make);
  return it.output();
}

Tensor rsub(const Tensor& self, const TensorOrScalar& other, const Scalar& alpha) {
  check_sub_operands(self, other, "rsub");
  ElementwiseIterator it("rsub");
  binary_iter(it, self, other, Tensor()).build();
  check_alpha(alpha, it.common_dtype(), "rsub");
  run<Types::NumericComplex, void, 2>(it, "rsub", [&](auto tag) {
    using A = decltype(tag);
    A al = alpha.to<A>();
    return [al](A x, A y) -> A { return y - al * x; };
  });
  return it.output();
}

Tensor mul(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  ElementwiseIterator it("mul");
  binary_iter(it, self, other, out).build();
  if (EMBER_RUN_CVEC_BINARY(it, mul)) return it.output();  // complex (complex_vec.h)
  auto make = [](auto tag) {
    using A = decltype(tag);
    if constexpr (std::is_same_v<A, bool>) {
      return [](A x, A y) -> A { return x && y; };
    } else if constexpr (is_complex_v<A>) {
      return [](A x, A y) -> A { return complex_math::multiply(x, y); };
    } else if constexpr (std::is_unsigned_v<A> && sizeof(A) < sizeof(unsigned)) {
      // uint8 and uint16 would promote to (signed) int, where 65535 * 65535 overflows: multiply
      // as unsigned, which wraps like PyTorch's result
      return [](A x, A y) -> A { return static_cast<A>(unsigned{x} * y); };
    } else {
      return [](A x, A y) -> A { return x * y; };
    }
  };
  if (run_real_binary(it, pvec::Binary::Mul, Scalar(1.0), make)) return it.output();
  run<Types::AllComplexUInt, void, 2>(it, "mul", make);
  return it.output();
}

namespace {
// x / -1 and x % -1 are computed without dividing: INT_MIN / -1 overflows and traps (SIGFPE) on
// x86. The quotient wraps to INT_MIN and the remainder is 0, as in PyTorch.
template <class A>
bool is_minus_one(A y) {
  if constexpr (std::is_signed_v<A>) return y == A(-1);
  return false;
}
template <class A>
A wrapping_neg(A x) {
  return static_cast<A>(A(0) - static_cast<std::make_unsigned_t<A>>(x));
}

template <class A>
A floor_div(A x, A y) {
  if constexpr (std::is_integral_v<A>) {
    if (y == 0) EMBER_FAIL(Runtime, "div: ZeroDivisionError (integer division by zero)");
    if (is_minus_one(y)) return wrapping_neg(x);
    A q = x / y;
    if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
    return q;
  } else {
    // PyTorch's (and Python's) algorithm: floor(x / y) alone is wrong when x / y rounds or
    // underflows (-1 // inf must be -1, not -0).
    if (y == A(0)) return x / y;
    A mod = std::fmod(x, y);
    A div = (x - mod) / y;
    if (mod != A(0) && (y < A(0)) != (mod < A(0))) div -= A(1);
    if (div == A(0)) return std::copysign(A(0), x / y);
    A q = std::floor(div);
    if (div - q > A(0.5)) q += A(1);
    return q;
  }
}
}  // namespace

namespace {
// div and its aliases true_divide / floor_divide (name: the op errors name).
Tensor div_named(const char* name, const Tensor& self, const TensorOrScalar& other,
                 const std::optional<std::string>& mode, const Tensor& out) {
  ElementwiseIterator it(name);
  binary_iter(it, self, other, out);
  if (!mode) {
    it.promote_int_to_float(true).build();
    if (EMBER_RUN_CVEC_BINARY(it, div)) return it.output();  // complex (complex_vec.h)
    auto make = [](auto tag) {
      using A = decltype(tag);
      if constexpr (is_complex_v<A>) {
        return [](A x, A y) -> A { return complex_math::divide(x, y); };
      } else {
        return [](A x, A y) -> A { return x / y; };
      }
    };
    if (run_real_binary(it, pvec::Binary::Div, Scalar(1.0), make)) return it.output();
    run<Types::FloatComplex, void, 2>(it, name, make);
    return it.output();
  }
  check_div_mode(*mode);
  it.build();
  bool floor_mode = *mode == "floor";
  run<Types::Numeric, void, 2>(it, name, [floor_mode, name](auto tag) {
    using A = decltype(tag);
    return [floor_mode, name](A x, A y) -> A {
      if constexpr (std::is_integral_v<A>) {
        if (y == 0) EMBER_FAIL(Runtime, name, ": ZeroDivisionError (integer division by zero)");
      }
      if (floor_mode) return floor_div(x, y);
      if constexpr (std::is_integral_v<A>) {
        if (is_minus_one(y)) return wrapping_neg(x);
        return x / y;
      } else {
        return std::trunc(x / y);
      }
    };
  });
  return it.output();
}

}  // namespace
Tensor div(const Tensor& self, const TensorOrScalar& other, const std::optional<std::string>& mode,
           const Tensor& out) {
  return div_named("div", self, other, mode, out);
}
Tensor true_divide(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  return div_named("true_divide", self, other, std::nullopt, out);
}
Tensor floor_divide(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  return div_named("floor_divide", self, other, std::string("floor"), out);
}

Tensor remainder(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  ElementwiseIterator it("remainder");
  binary_iter(it, self, other, out).build();
  run<Types::Numeric, void, 2>(it, "remainder", [](auto tag) {
    using A = decltype(tag);
    return [](A x, A y) -> A {
      if constexpr (std::is_integral_v<A>) {
        if (y == 0) EMBER_FAIL(Runtime, "remainder: ZeroDivisionError (integer modulo by zero)");
        if (is_minus_one(y)) return A(0);
        A r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return r;
      } else {
        A r = std::fmod(x, y);
        if (r != A(0) && ((r < A(0)) != (y < A(0)))) r += y;
        return r;
      }
    };
  });
  return it.output();
}

Tensor fmod(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  ElementwiseIterator it("fmod");
  binary_iter(it, self, other, out).build();
  run<Types::Numeric, void, 2>(it, "fmod", [](auto tag) {
    using A = decltype(tag);
    return [](A x, A y) -> A {
      if constexpr (std::is_integral_v<A>) {
        if (y == 0) EMBER_FAIL(Runtime, "fmod: ZeroDivisionError (integer modulo by zero)");
        if (is_minus_one(y)) return A(0);
        return x % y;
      } else {
        return std::fmod(x, y);
      }
    };
  });
  return it.output();
}

namespace {
template <class A>
A int_pow(A base, A exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp % 2 == 0) ? 1 : -1;
    return 0;
  }
  A result = 1;
  while (exp) {
    if (exp & 1) result = static_cast<A>(result * base);
    exp = static_cast<A>(exp >> 1);
    base = static_cast<A>(base * base);
  }
  return result;
}
}  // namespace

Tensor pow(const Tensor& self, const TensorOrScalar& exponent, const Tensor& out) {
  check_pow_exponent(self, exponent);
  ElementwiseIterator it("pow");
  binary_iter(it, self, exponent, out).build();
  // A float32 tensor to a real scalar power that float32 cannot hold (1e-300 rounds to 0, 1e300
  // overflows): the power in double, as torch (x ** 1e-300 is 0 at 0, not 1).
  if (!exponent.is_tensor() && !exponent.scalar.is_complex() &&
      it.common_dtype() == ScalarType::Float32 && it.dtype(0) == ScalarType::Float32 &&
      it.dtype(1) == ScalarType::Float32) {
    const double e = exponent.scalar.to_double();
    const double ae = std::fabs(e);
    if (e != 0.0 && std::isfinite(e) &&
        (ae < std::numeric_limits<float>::min() || ae > std::numeric_limits<float>::max())) {
      it.for_each([e](char** d, const int64_t* s, int64_t n) {
        unary_loop<float, float>(d, s, n, [e](float x) {
          return static_cast<float>(std::pow(static_cast<double>(x), e));
        });
      });
      it.finish();
      return it.output();
    }
  }
  // int32.pow(2**32 + 2) must not wrap to pow(2).
  if (!exponent.is_tensor()) check_scalar_fits(exponent.scalar, it.common_dtype(), "pow");
  // A complex tensor to the scalar power 2 or 0.5: its square (complex_vec.h) or its square
  // root, as torch (which also takes sqrt for 0.5).
  if (!exponent.is_tensor() && is_complex(it.common_dtype()) && it.dtype(0) == it.dtype(1)) {
    const auto e = exponent.scalar.to<std::complex<double>>();
    if (e == std::complex<double>(2.0) &&
        EMBER_RUN_CVEC_UNARY(it, std::complex<float>, std::complex<double>, square, true))
      return it.output();
    if (e == std::complex<double>(0.5)) {
      EMBER_DISPATCH_COMPLEX(it.dtype(1), "pow", [&] {
        it.for_each([](char** d, const int64_t* s, int64_t n) {
          unary_loop<scalar_t, scalar_t>(d, s, n, [](scalar_t x) { return std::sqrt(x); });
        });
      });
      it.finish();
      return it.output();
    }
  }
  // Only a scalar exponent of +-0.5 goes through sqrt (torch's pow(Tensor, Scalar)); a tensor
  // of exponents is std::pow's everywhere (pow(-inf, 0.5) = inf, pow(-0, 0.5) = +0).
  const bool scalar_exp = !exponent.is_tensor();
  run<Types::NumericComplex, void, 2>(it, "pow", [scalar_exp](auto tag) {
    using A = decltype(tag);
    return [scalar_exp](A x, A y) -> A {
      if constexpr (std::is_integral_v<A>) {
        return int_pow(x, y);
      } else if constexpr (is_complex_v<A>) {
        if (y == A(2)) return complex_math::square(x);
        return std::pow(x, y);
      } else {
        if (y == A(2)) return x * x;
        // +-0.5 as torch, through sqrt: NaN at -inf (pow gives inf / 0), -0 / -inf at -0
        if (scalar_exp && y == A(0.5)) return std::sqrt(x);
        if (scalar_exp && y == A(-0.5)) return A(1) / std::sqrt(x);
        return std::pow(x, y);
      }
    };
  });
  return it.output();
}

Tensor rpow(const Tensor& self, const Scalar& base) {
  ElementwiseIterator it("pow");
  it.add_output(Tensor()).add_input(base).add_input(self).build();
  run<Types::NumericComplex, void, 2>(it, "pow", [](auto tag) {
    using A = decltype(tag);
    return [](A x, A y) -> A {
      if constexpr (std::is_integral_v<A>) {
        return int_pow(x, y);
      } else {
        return std::pow(x, y);
      }
    };
  });
  return it.output();
}

Tensor atan2(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  ElementwiseIterator it("atan2");
  binary_iter(it, self, other, out).promote_int_to_float(true).build();
  run<Types::Float, void, 2>(it, "atan2", [](auto tag) {
    using A = decltype(tag);
    return [](A x, A y) -> A { return std::atan2(x, y); };
  });
  return it.output();
}

// torch.special's polynomials p_n(x): x and n broadcast and promote together (integers to the
// default float dtype); the order is taken from n in that dtype, the value computed in
// poly_math_t (MATH: A itself for the Hermite ones) (kernels/special_math.h).
#define EMBER_SPECIAL_POLY_IN(NAME, FN, MATH)                                                  \
  Tensor special_##NAME(const TensorOrScalar& x, const TensorOrScalar& n, const Tensor& out) { \
    check_special_poly_args(x, n, "special_" #NAME);                                           \
    ElementwiseIterator it("special_" #NAME);                                                  \
    it.add_output(out).add_input(x).add_input(n).promote_int_to_float(true).build();           \
    run<Types::Float, void, 2>(it, "special_" #NAME, [](auto tag) {                            \
      using A = decltype(tag);                                                                 \
      using W = MATH;                                                                          \
      return [](A v, A order) -> A { return A(special_math::FN<W>(W(v), W(order))); };         \
    });                                                                                        \
    return it.output();                                                                        \
  }
#define EMBER_SPECIAL_POLY(NAME, FN) EMBER_SPECIAL_POLY_IN(NAME, FN, special_math::poly_math_t<A>)
EMBER_SPECIAL_POLY(chebyshev_polynomial_t, chebyshev_t)
EMBER_SPECIAL_POLY(chebyshev_polynomial_u, chebyshev_u)
EMBER_SPECIAL_POLY(chebyshev_polynomial_v, chebyshev_v)
EMBER_SPECIAL_POLY(chebyshev_polynomial_w, chebyshev_w)
EMBER_SPECIAL_POLY(shifted_chebyshev_polynomial_t, shifted_chebyshev_t)
EMBER_SPECIAL_POLY(shifted_chebyshev_polynomial_u, shifted_chebyshev_u)
EMBER_SPECIAL_POLY(shifted_chebyshev_polynomial_v, shifted_chebyshev_v)
EMBER_SPECIAL_POLY(shifted_chebyshev_polynomial_w, shifted_chebyshev_w)
EMBER_SPECIAL_POLY_IN(hermite_polynomial_h, hermite_h, A)
EMBER_SPECIAL_POLY_IN(hermite_polynomial_he, hermite_he, A)
EMBER_SPECIAL_POLY(laguerre_polynomial_l, laguerre_l)
EMBER_SPECIAL_POLY(legendre_polynomial_p, legendre_p)
#undef EMBER_SPECIAL_POLY
#undef EMBER_SPECIAL_POLY_IN

Tensor minimum(const Tensor& self, const Tensor& other, const Tensor& out) {
  ElementwiseIterator it("minimum");
  it.add_output(out).add_input(self).add_input(other).build();
  run<Types::All, void, 2>(it, "minimum", [](auto tag) {
    using A = decltype(tag);
    return [](A x, A y) -> A { return (x != x) ? x : ((y != y) ? y : (y < x ? y : x)); };
  });
  return it.output();
}

Tensor maximum(const Tensor& self, const Tensor& other, const Tensor& out) {
  ElementwiseIterator it("maximum");
  it.add_output(out).add_input(self).add_input(other).build();
  run<Types::All, void, 2>(it, "maximum", [](auto tag) {
    using A = decltype(tag);
    return [](A x, A y) -> A { return (x != x) ? x : ((y != y) ? y : (y > x ? y : x)); };
  });
  return it.output();
}

// ---- comparisons and logic -> bool ----------------------------------------------------------

#define EMBER_COMPARE(NAME, TYPES, OP)                                              \
  Tensor NAME(const Tensor& self, const TensorOrScalar& other, const Tensor& out) { \
    ElementwiseIterator it(#NAME);                                                  \
    binary_iter(it, self, other, out).output_dtype(ScalarType::Bool).build();       \
    run<Types::TYPES, bool, 2>(it, #NAME, [](auto tag) {                            \
      using A = decltype(tag);                                                      \
      return [](A x, A y) -> bool { return x OP y; };                               \
    });                                                                             \
    return it.output();                                                             \
  }
EMBER_COMPARE(eq, Every, ==)
EMBER_COMPARE(ne, Every, !=)
EMBER_COMPARE(lt, All, <)
EMBER_COMPARE(le, All, <=)
EMBER_COMPARE(gt, All, >)
EMBER_COMPARE(ge, All, >=)
#undef EMBER_COMPARE

#define EMBER_LOGICAL(NAME, EXPR)                                                               \
  Tensor NAME(const Tensor& self, const Tensor& other, const Tensor& out) {                     \
    ElementwiseIterator it(#NAME);                                                              \
    it.add_output(out).add_input(self).add_input(other).output_dtype(ScalarType::Bool).build(); \
    run<Types::AllComplex, bool, 2>(it, #NAME, [](auto tag) {                                   \
      using A = decltype(tag);                                                                  \
      return [](A x, A y) -> bool {                                                             \
        bool a = truthy(x), b = truthy(y);                                                      \
        return EXPR;                                                                            \
      };                                                                                        \
    });                                                                                         \
    return it.output();                                                                         \
  }
EMBER_LOGICAL(logical_and, a&& b)
EMBER_LOGICAL(logical_or, a || b)
EMBER_LOGICAL(logical_xor, a != b)
#undef EMBER_LOGICAL

// The shifts take no unsigned storage type (as PyTorch), and/or/xor do.
#define EMBER_BITWISE(NAME, EXPR, SHIFT)                                            \
  Tensor NAME(const Tensor& self, const TensorOrScalar& other, const Tensor& out) { \
    ElementwiseIterator it(#NAME);                                                  \
    binary_iter(it, self, other, out).build();                                      \
    if (SHIFT) check_shift_dtype(it.common_dtype(), #NAME);                         \
    constexpr Types types = SHIFT ? Types::Integral : Types::IntegralUInt;          \
    run<types, void, 2>(it, #NAME, [](auto tag) {                                   \
      using A = decltype(tag);                                                      \
      return [](A x, A y) -> A { return static_cast<A>(EXPR); };                    \
    });                                                                             \
    return it.output();                                                             \
  }
EMBER_BITWISE(bitwise_and, x& y, false)
EMBER_BITWISE(bitwise_or, x | y, false)
EMBER_BITWISE(bitwise_xor, x ^ y, false)
EMBER_BITWISE(bitwise_left_shift, shift_left(x, y), true)
EMBER_BITWISE(bitwise_right_shift, shift_right(x, y), true)
#undef EMBER_BITWISE

// ---- ternary --------------------------------------------------------------------------------

// clamp over contiguous x into y with non-NaN scalar bounds: branch-free selects the compiler
// vectorizes (a NaN x stays NaN through both). X is `T*` for the in-place call (x == y), so the
// loop reads and writes through one pointer and needs no overlap check.
template <class X, class T>
void clamp_contiguous(X* x, T* y, int64_t n, bool has_min, bool has_max, T lo, T hi) {
  if (has_min && has_max) {
    for (int64_t i = 0; i < n; ++i) {
      const T r = x[i] < lo ? lo : x[i];
      y[i] = r > hi ? hi : r;
    }
  } else if (has_min) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] < lo ? lo : x[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > hi ? hi : x[i];
  }
}

Tensor clamp(const Tensor& self, const TensorOrScalar& min, const TensorOrScalar& max,
             const Tensor& out) {
  const bool complex_bound = (min.is_tensor() && is_complex(min.tensor->dtype())) ||
                             (max.is_tensor() && is_complex(max.tensor->dtype()));
  EMBER_CHECK_KIND(!is_complex(self->dtype()) && !complex_bound, NotImplemented,
                   "clamp is not supported for complex types");
  check_clamp_bounds(min, max);
  ElementwiseIterator it("clamp");
  it.add_output(out).add_input(self);
  if (!min.is_none()) it.add_input(min);
  if (!max.is_none()) it.add_input(max);
  it.build();
  if (check_clamp_bool(it.common_dtype(), min, max))
    return min.is_none() ? minimum(self, max.tensor, out) : maximum(self, min.tensor, out);
  check_clamp_fits(min, max, it.common_dtype());
  const bool has_min = !min.is_none(), has_max = !max.is_none();
  EMBER_DISPATCH_NUMERIC(it.dtype(1), "clamp", [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    // The rule: NaN in x, then in min, then in max gives NaN (as PyTorch).
    auto both = [](A x, A lo, A hi) -> A {
      if (x != x) return x;
      if (lo != lo) return lo;
      if (hi != hi) return hi;
      A r = x < lo ? lo : x;
      return r > hi ? hi : r;
    };
    auto one = [has_min](A x, A b) -> A {
      if (x != x || b != b) return x != x ? x : b;
      return has_min ? (x < b ? b : x) : (x > b ? b : x);
    };
    const int nb = (has_min ? 1 : 0) + (has_max ? 1 : 0);
    it.for_each([&](char** d, const int64_t* s, int64_t n) {
      // Contiguous x and out with scalar bounds (the usual clamp(x, lo, hi)): the bounds read
      // once and a branch-free loop the compiler vectorizes; a NaN x stays NaN through both
      // selects, and NaN bounds take the general loop.
      bool flat = s[0] == sizeof(T) && s[1] == sizeof(T);
      for (int k = 2; k < 2 + nb; ++k) flat = flat && s[k] == 0;
      if constexpr (std::is_floating_point_v<T> || is_int_v<T>) {
        if (flat) {
          const T lo = has_min ? load<T>(d[2]) : T(0);
          const T hi = has_max ? load<T>(d[has_min ? 3 : 2]) : T(0);
          if (lo == lo && hi == hi) {
            T* y = reinterpret_cast<T*>(d[0]);
            if (d[1] == d[0]) {
              clamp_contiguous(y, y, n, has_min, has_max, lo, hi);
            } else {
              clamp_contiguous(reinterpret_cast<const T*>(d[1]), y, n, has_min, has_max, lo, hi);
            }
            return;
          }
        }
      }
      if (nb == 2) {
        ternary_loop<T, T>(d, s, n, both);
      } else {
        binary_loop<T, T>(d, s, n, one);
      }
    });
  });
  it.finish();
  return it.output();
}

Tensor where(const Tensor& condition, const TensorOrScalar& self, const TensorOrScalar& other,
             const Tensor& out) {
  check_where_condition(condition);
  ElementwiseIterator it("where");
  it.add_output(out).add_input(self).add_input(other).add_input_raw(condition).build();
  ScalarType ct = condition->dtype();
  EMBER_DISPATCH_EVERY(it.dtype(1), "where", [&] {
    using T = scalar_t;
    it.for_each([ct](char** d, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        bool c = ct == ScalarType::Bool ? load<bool>(d[3] + i * s[3])
                                        : load<uint8_t>(d[3] + i * s[3]) != 0;
        *reinterpret_cast<T*>(d[0] + i * s[0]) =
            c ? load<T>(d[1] + i * s[1]) : load<T>(d[2] + i * s[2]);
      }
    });
  });
  it.finish();
  return it.output();
}

namespace {
// lerp's value in the compute type A: from a when the weight is nearer the start, else back
// from b (|w| for complex).
template <class A>
A lerp_value(A a, A b, A w) {
  bool small;
  if constexpr (is_complex_v<A>) {
    small = std::abs(w) < typename A::value_type(0.5);
  } else {
    small = w < A(0.5) && w > A(-0.5);  // |w| < 0.5, as torch: lerp(0, inf, -2) is NaN
  }
  return small ? a + w * (b - a) : b - (b - a) * (A(1) - w);
}
}  // namespace

Tensor lerp(const Tensor& self, const Tensor& end, const TensorOrScalar& weight,
            const Tensor& out) {
  check_lerp_dtypes(self, end);
  const ScalarType dt = self->dtype();
  const bool real_scalar_weight = !weight.is_tensor() && !weight.scalar.is_complex();
  // A scalar weight in float32 arithmetic (float16 / bfloat16 compute in it too) must fit it,
  // as torch: lerp(x, y, 1e308) is an error there, not -inf.
  if (real_scalar_weight && is_floating(dt) && dt != ScalarType::Float64)
    check_scalar_fits(weight.scalar, ScalarType::Float32, "lerp");
  if (real_scalar_weight && (dt == ScalarType::Float16 || dt == ScalarType::BFloat16)) {
    // ... and stays in float32, as torch's: rounded to half first, 7e4 would be inf (and
    // lerp(2, 2, 7e4) NaN).
    ElementwiseIterator it("lerp");
    it.add_output(out).add_input(self).add_input(end).build();
    const float wf = static_cast<float>(weight.scalar.to_double());
    run<Types::Float, void, 2>(it, "lerp", [wf](auto tag) {
      using A = decltype(tag);
      return [w = A(wf)](A a, A b) -> A { return lerp_value(a, b, w); };
    });
    return it.output();
  }
  ElementwiseIterator it("lerp");
  it.add_output(out).add_input(self).add_input(end).add_input(weight).build();
  run<Types::FloatComplex, void, 3>(it, "lerp", [](auto tag) {
    using A = decltype(tag);
    return [](A a, A b, A w) -> A { return lerp_value(a, b, w); };
  });
  return it.output();
}

Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value,
               const Tensor& out) {
  ElementwiseIterator it("addcmul");
  addc_iter(it, self, t1, t2, value, out, "addcmul");
  run<Types::NumericComplex, void, 3>(it, "addcmul", [&](auto tag) {
    using A = decltype(tag);
    A v = value.to<A>();
    return [v](A a, A b, A c) -> A { return a + v * b * c; };
  });
  return it.output();
}

Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value,
               const Tensor& out) {
  check_addcdiv_dtypes(t1, t2);
  ElementwiseIterator it("addcdiv");
  addc_iter(it, self, t1, t2, value, out, "addcdiv");
  run<Types::FloatComplex, void, 3>(it, "addcdiv", [&](auto tag) {
    using A = decltype(tag);
    A v = value.to<A>();
    return [v](A a, A b, A c) -> A {
      if constexpr (is_complex_v<A>) {
        return a + complex_math::divide(v * b, c);
      } else {
        return a + v * b / c;
      }
    };
  });
  return it.output();
}

Tensor isclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equal_nan) {
  check_isclose_args(self, other, rtol, atol);
  ElementwiseIterator it("isclose");
  it.add_output(Tensor()).add_input(self).add_input(other).output_dtype(ScalarType::Bool).build();
  const bool in_double = default_dtype() == ScalarType::Float64;
  run<Types::AllComplexUInt, bool, 2>(it, "isclose", [=](auto tag) {
    using A = decltype(tag);
    return [=](A x, A y) -> bool {
      if (x == y) return true;
      if constexpr (is_complex_v<A>) {  // distances are moduli; NaN if either part is
        const bool nx = x != x, ny = y != y;
        if (nx || ny) return equal_nan && nx && ny;
        const double diff = std::abs(std::complex<double>(x) - std::complex<double>(y));
        if (!std::isfinite(diff)) return false;
        return diff <= atol + rtol * std::abs(std::complex<double>(y));
      } else if constexpr (std::is_integral_v<A>) {
        // as PyTorch: both converted to the default float dtype, the tolerance in it too (so
        // 2**28 + 1 and 2**28 are close in float32); zero tolerances compare exactly
        if (rtol == 0 && atol == 0) return false;
        if (in_double) {
          const double dx = static_cast<double>(x), dy = static_cast<double>(y);
          return std::abs(dx - dy) <= atol + rtol * std::abs(dy);
        }
        const float fx = static_cast<float>(x), fy = static_cast<float>(y);
        const float tol = static_cast<float>(atol) + static_cast<float>(rtol) * std::abs(fy);
        return std::abs(fx - fy) <= tol;
      } else {
        if (x != x || y != y) return equal_nan && (x != x) && (y != y);
        double dx = x, dy = y;
        if (std::isinf(dx) || std::isinf(dy)) return false;
        return std::abs(dx - dy) <= atol + rtol * std::abs(dy);
      }
    };
  });
  return it.output();
}

// ---- frexp ----------------------------------------------------------------------------------

namespace {

// The bit layout of float and double: mantissa bits, exponent-field mask, and the field of
// [0.5, 1) (bias - 1).
template <class F>
struct FloatBits;
template <>
struct FloatBits<float> {
  using U = uint32_t;
  static constexpr int kMant = 23;
  static constexpr U kMask = 0xff, kHalf = 126;
  static constexpr float kScale = 16777216.0f;  // 2^(kMant + 1): subnormals to normals, exactly
};
template <>
struct FloatBits<double> {
  using U = uint64_t;
  static constexpr int kMant = 52;
  static constexpr U kMask = 0x7ff, kHalf = 1022;
  static constexpr double kScale = 9007199254740992.0;  // 2^53
};

// x = m * 2^e with 0.5 <= |m| < 1, from the bits (branch-free, so the loop vectorizes);
// 0, inf and NaN give themselves and e = 0.
template <class F>
inline F frexp_bits(F x, int32_t& e) {
  using B = FloatBits<F>;
  using U = typename B::U;
  constexpr U sign = U(1) << (sizeof(U) * 8 - 1);
  U b;
  std::memcpy(&b, &x, sizeof b);
  const U mag = b & ~sign;
  const U field = mag >> B::kMant;
  const bool special = mag == 0 || field == B::kMask;
  const bool sub = field == 0 && mag != 0;
  const F xs = sub ? x * B::kScale : x;
  U bs;
  std::memcpy(&bs, &xs, sizeof bs);
  const int32_t fs = static_cast<int32_t>((bs >> B::kMant) & B::kMask);
  e = special ? 0 : fs - static_cast<int32_t>(B::kHalf) - (sub ? B::kMant + 1 : 0);
  const U mb = (bs & ~(B::kMask << B::kMant)) | (B::kHalf << B::kMant);
  F m;
  std::memcpy(&m, &mb, sizeof m);
  return special ? x : m;
}

// Element type T (float, double, Half, BFloat16: the 16-bit types go through float, where they
// are normal numbers and their mantissas exact).
template <class T>
inline T frexp_one(T x, int32_t& e) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return frexp_bits(x, e);
  } else {
    return static_cast<T>(frexp_bits(static_cast<float>(x), e));
  }
}

}  // namespace

std::tuple<Tensor, Tensor> frexp(const Tensor& self) {
  const char* op = "frexp()";
  EMBER_CHECK(is_floating(self->dtype()), op, ": only supports floating-point dtypes, but got ",
              dtype_name(self->dtype()));
  Tensor mantissa = empty(self->sizes(), self->dtype(), self->device());
  Tensor exponent = empty(self->sizes(), ScalarType::Int32, self->device());
  TensorIterator it(op);
  it.add_output(mantissa).add_output(exponent).add_input(self).no_casting().build();
  EMBER_DISPATCH_FLOAT(self->dtype(), op, [&] {
    using T = scalar_t;
    it.for_each([](char** d, const int64_t* s, int64_t n) {
      if (s[0] == sizeof(T) && s[1] == sizeof(int32_t) && s[2] == sizeof(T)) {
        T* m = reinterpret_cast<T*>(d[0]);
        int32_t* e = reinterpret_cast<int32_t*>(d[1]);
        const T* x = reinterpret_cast<const T*>(d[2]);
        for (int64_t i = 0; i < n; ++i) m[i] = frexp_one(x[i], e[i]);
        return;
      }
      for (int64_t i = 0; i < n; ++i) {
        int32_t e;
        *reinterpret_cast<T*>(d[0] + i * s[0]) =
            frexp_one(*reinterpret_cast<const T*>(d[2] + i * s[2]), e);
        *reinterpret_cast<int32_t*>(d[1] + i * s[1]) = e;
      }
    });
  });
  it.finish();
  return {it.output(0), it.output(1)};
}

namespace {
bool all_true(const Tensor& b) {
  // b is a freshly computed contiguous bool tensor.
  const bool* p = b->data_as<bool>();
  for (int64_t i = 0; i < b->numel(); ++i)
    if (!p[i]) return false;
  return true;
}
}  // namespace

bool allclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equal_nan) {
  return all_true(isclose(self, other, rtol, atol, equal_nan));
}

bool equal(const Tensor& self, const Tensor& other) {
  if (self->sizes() != other->sizes()) return false;
  return all_true(eq(self, TensorOrScalar(other), Tensor()));
}

}  // namespace cpu
}  // namespace ember
