// Vectorized row kernels of the complex pointwise ops (complex_vec.cpp), and the runners that
// apply them over a built TensorIterator. Arrays hold n complex numbers as interleaved
// (re, im) pairs of float (complex64) or double (complex128). Each kernel is compiled for the
// baseline ISA, AVX2 and AVX-512 (the memory-bound products add_scaled, mul and square for the
// baseline and AVX2 without FMA) and picks the best this CPU has (cpu_isa()); all copies give
// the same bits (no contraction into FMA), which are those of kernels/complex_math.h.
#pragma once
#include <algorithm>
#include <complex>
#include <cstdint>
#include <type_traits>

#include "kernels/iterator.h"
#include "kernels/loops.h"

namespace ember {
namespace cpu {
namespace cvec {

// o = x * y: the plain product (ac - bd) + (ad + bc) i, no C99 inf recovery (as torch).
void mul(const float* x, const float* y, float* o, int64_t n);
void mul(const double* x, const double* y, double* o, int64_t n);
// o = x + alpha y for alpha = p + q i, the product plain (add; sub with -alpha).
void add_scaled(const float* x, const float* y, float p, float q, float* o, int64_t n);
void add_scaled(const double* x, const double* y, double p, double q, double* o, int64_t n);
// o = x / y by Smith's scaled division (complex_math::divide); x / 0 is (a / 0, b / 0).
void div(const float* x, const float* y, float* o, int64_t n);
void div(const double* x, const double* y, double* o, int64_t n);
// o = 1 / x (complex_math::reciprocal).
void reciprocal(const float* x, float* o, int64_t n);
void reciprocal(const double* x, double* o, int64_t n);
// o = x * x as complex_math::square.
void square(const float* x, float* o, int64_t n);
void square(const double* x, double* o, int64_t n);
// r[i] = |x[i]| (real r of n elements) without overflow or underflow; an infinite part gives inf.
void abs(const float* x, float* r, int64_t n);
void abs(const double* x, double* r, int64_t n);
// o = x / |x|, 0 at 0.
void sgn(const float* x, float* o, int64_t n);
void sgn(const double* x, double* o, int64_t n);
// o = conj(x).
void conj(const float* x, float* o, int64_t n);
void conj(const double* x, double* o, int64_t n);

// r[i] = arg(x[i]) = atan2(im, re), C's special values (real r of n elements).
void angle(const float* x, float* r, int64_t n);
void angle(const double* x, double* r, int64_t n);
// o = 1 / (1 + w): sigmoid's last step, after w = exp(-z) (complex_math::sigmoid).
void sigmoid_finish(const float* w, float* o, int64_t n);
void sigmoid_finish(const double* w, double* o, int64_t n);

}  // namespace cvec

// Runs a complex unary row kernel vf(const T* x, O* y, int64_t n) over a built iterator whose
// input is std::complex<T> and whose output is of type Out (std::complex<T>, or T for abs):
// contiguous inner loops directly, strided ones through small buffers, so every layout gets the
// same bits. Returns false (nothing done) when the operands' dtypes are not those; on true the
// iterator is finished. With `extra`, operands past the first input (pow's scalar exponent,
// already looked at by the caller) may exist and are ignored.
template <class T, class Out, class VecFn>
bool run_cvec_unary(TensorIterator& it, const VecFn& vf, bool extra = false) {
  using C = std::complex<T>;
  constexpr ScalarType cdt =
      std::is_same_v<T, float> ? ScalarType::Complex64 : ScalarType::Complex128;
  constexpr ScalarType odt = std::is_same_v<Out, C>     ? cdt
                             : std::is_same_v<T, float> ? ScalarType::Float32
                                                        : ScalarType::Float64;
  if ((extra ? it.ntensors() < 2 : it.ntensors() != 2) || it.dtype(1) != cdt || it.dtype(0) != odt)
    return false;
  it.for_each([&](char** d, const int64_t* s, int64_t n) {
    if (s[0] == sizeof(Out) && s[1] == sizeof(C)) {
      vf(reinterpret_cast<const T*>(d[1]), reinterpret_cast<T*>(d[0]), n);
      return;
    }
    constexpr int64_t kChunk = 256;
    C xb[kChunk];
    Out ob[kChunk];
    for (int64_t i = 0; i < n; i += kChunk) {
      const int64_t m = std::min(kChunk, n - i);
      for (int64_t j = 0; j < m; ++j) xb[j] = load<C>(d[1] + (i + j) * s[1]);
      vf(reinterpret_cast<const T*>(xb), reinterpret_cast<T*>(ob), m);
      for (int64_t j = 0; j < m; ++j) *reinterpret_cast<Out*>(d[0] + (i + j) * s[0]) = ob[j];
    }
  });
  it.finish();
  return true;
}

// The same for a binary kernel vf(const T* x, const T* y, T* o, int64_t n) over complex<T>
// operands (a broadcast or strided input goes through a buffer).
template <class T, class VecFn>
bool run_cvec_binary(TensorIterator& it, const VecFn& vf) {
  using C = std::complex<T>;
  constexpr ScalarType cdt =
      std::is_same_v<T, float> ? ScalarType::Complex64 : ScalarType::Complex128;
  if (it.ntensors() != 3 || it.dtype(0) != cdt || it.dtype(1) != cdt || it.dtype(2) != cdt)
    return false;
  it.for_each([&](char** d, const int64_t* s, int64_t n) {
    constexpr int64_t c = sizeof(C);
    if (s[0] == c && s[1] == c && s[2] == c) {
      vf(reinterpret_cast<const T*>(d[1]), reinterpret_cast<const T*>(d[2]),
         reinterpret_cast<T*>(d[0]), n);
      return;
    }
    constexpr int64_t kChunk = 256;
    C xb[kChunk], yb[kChunk], ob[kChunk];
    for (int64_t i = 0; i < n; i += kChunk) {
      const int64_t m = std::min(kChunk, n - i);
      for (int64_t j = 0; j < m; ++j) xb[j] = load<C>(d[1] + (i + j) * s[1]);
      for (int64_t j = 0; j < m; ++j) yb[j] = load<C>(d[2] + (i + j) * s[2]);
      vf(reinterpret_cast<const T*>(xb), reinterpret_cast<const T*>(yb), reinterpret_cast<T*>(ob),
         m);
      for (int64_t j = 0; j < m; ++j) *reinterpret_cast<C*>(d[0] + (i + j) * s[0]) = ob[j];
    }
  });
  it.finish();
  return true;
}

// Both complex dtypes through one overloaded kernel name cvec::FN: true when one of them ran.
// OUT64 / OUT128: the output element types (the complex type itself, or its real part's).
#define EMBER_RUN_CVEC_UNARY(it, OUT64, OUT128, FN, EXTRA)                                         \
  (::ember::cpu::run_cvec_unary<float, OUT64>(                                                     \
       it, [](const float* x, float* y, int64_t n) { ::ember::cpu::cvec::FN(x, y, n); }, EXTRA) || \
   ::ember::cpu::run_cvec_unary<double, OUT128>(                                                   \
       it, [](const double* x, double* y, int64_t n) { ::ember::cpu::cvec::FN(x, y, n); }, EXTRA))
#define EMBER_RUN_CVEC_SAME(it, FN) \
  EMBER_RUN_CVEC_UNARY(it, std::complex<float>, std::complex<double>, FN, false)
#define EMBER_RUN_CVEC_BINARY(it, FN)                                                             \
  (::ember::cpu::run_cvec_binary<float>(it,                                                       \
                                        [](const float* x, const float* y, float* o, int64_t n) { \
                                          ::ember::cpu::cvec::FN(x, y, o, n);                     \
                                        }) ||                                                     \
   ::ember::cpu::run_cvec_binary<double>(                                                         \
       it, [](const double* x, const double* y, double* o, int64_t n) {                           \
         ::ember::cpu::cvec::FN(x, y, o, n);                                                      \
       }))

}  // namespace cpu
}  // namespace ember
