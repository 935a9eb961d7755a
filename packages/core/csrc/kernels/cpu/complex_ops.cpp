// CPU kernels of the complex pointwise ops (ops/complex.yaml): conj_physical, angle, complex,
// polar. Each runs through TensorIterator like the other pointwise ops.
#include <cmath>
#include <complex>

#include "core/dispatch.h"
#include "kernels/cpu/complex_vec.h"
#include "kernels/iterator.h"
#include "kernels/loops.h"
#include "kernels/pointwise_rules.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

// complex() and polar(): two real inputs of one floating dtype make a complex result.
void check_parts(const Tensor& a, const Tensor& b, const char* op, const char* na, const char* nb) {
  const ScalarType ta = a->dtype(), tb = b->dtype();
  // PyTorch raises RuntimeError kinds: NotImplementedError here (and still a TypeError)
  EMBER_CHECK_KIND(ta == ScalarType::Float32 || ta == ScalarType::Float64, DtypeNotImplemented, op,
                   ": expected ", na, " to be float32 or float64, but got ", dtype_name(ta));
  EMBER_CHECK_KIND(ta == tb, DtypeNotImplemented, op, ": expected ", na, " and ", nb,
                   " to have the same dtype, but got ", dtype_name(ta), " and ", dtype_name(tb));
}

template <class T>
T conj_value(T x) {
  if constexpr (is_complex_v<T>) {
    return std::conj(x);
  } else {
    return x;
  }
}

template <class F>
Tensor from_parts(const Tensor& a, const Tensor& b, const Tensor& out, const char* op,
                  const F& make) {
  ElementwiseIterator it(op);
  it.add_output(out).add_input(a).add_input(b).compute_dtype(a->dtype());
  it.output_dtype(to_complex(a->dtype())).build();
  EMBER_DISPATCH_COMPLEX(to_complex(a->dtype()), op, [&] {
    using R = typename scalar_t::value_type;
    it.for_each([&](char** d, const int64_t* s, int64_t n) {
      binary_loop<R, scalar_t>(d, s, n, [&](R x, R y) { return make(x, y); });
    });
  });
  it.finish();
  return it.output();
}

}  // namespace

Tensor conj_physical(const Tensor& self, const Tensor& out) {
  ElementwiseIterator it("conj_physical");
  it.add_output(out).add_input(self).exact_output_dtype().build();
  if (EMBER_RUN_CVEC_SAME(it, conj)) return it.output();  // complex (complex_vec.h)
  EMBER_DISPATCH_ALL_AND_COMPLEX(it.dtype(1), "conj_physical", [&] {
    it.for_each([](char** d, const int64_t* s, int64_t n) {
      unary_loop<scalar_t, scalar_t>(d, s, n, [](auto x) { return conj_value(x); });
    });
  });
  it.finish();
  return it.output();
}

// The argument in radians: atan2(imag, real) for complex; for real numbers 0 (x >= 0), pi
// (x < 0) or NaN, with integers promoted to the default float dtype.
Tensor angle(const Tensor& self, const Tensor& out) {
  ElementwiseIterator it("angle");
  it.add_output(out).add_input(self);
  if (is_complex(self->dtype())) {
    it.output_dtype(to_real(self->dtype())).build();
    if (EMBER_RUN_CVEC_UNARY(it, float, double, angle, false)) return it.output();
    EMBER_DISPATCH_COMPLEX(it.dtype(1), "angle", [&] {
      using R = typename scalar_t::value_type;
      it.for_each([](char** d, const int64_t* s, int64_t n) {
        unary_loop<scalar_t, R>(d, s, n, [](scalar_t x) { return std::atan2(x.imag(), x.real()); });
      });
    });
  } else {
    it.promote_int_to_float(true).build();
    EMBER_DISPATCH_FLOAT(it.dtype(1), "angle", [&] {
      using A = opmath_t<scalar_t>;
      it.for_each([](char** d, const int64_t* s, int64_t n) {
        unary_loop<scalar_t, scalar_t>(d, s, n, [](A x) -> A {
          if (std::isnan(x)) return x;
          return x < A(0) ? static_cast<A>(3.14159265358979323846) : A(0);
        });
      });
    });
  }
  it.finish();
  return it.output();
}

Tensor complex(const Tensor& real, const Tensor& imag, const Tensor& out) {
  check_parts(real, imag, "complex", "real", "imag");
  return from_parts(real, imag, out, "complex", [](auto x, auto y) {
    using R = decltype(x);
    return std::complex<R>(x, y);
  });
}

Tensor polar(const Tensor& abs, const Tensor& angle, const Tensor& out) {
  check_parts(abs, angle, "polar", "abs", "angle");
  return from_parts(abs, angle, out, "polar", [](auto r, auto t) {
    using R = decltype(r);
    return std::complex<R>(r * std::cos(t), r * std::sin(t));
  });
}

}  // namespace cpu
}  // namespace ember
