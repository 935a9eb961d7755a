// Real (float32 / float64) pointwise arithmetic on the widest vectors this CPU has: the inner
// loops of add / sub / mul / div (tensor or scalar operand, in place or not, alpha) and of neg /
// abs / sqrt / relu, compiled for the baseline ISA, for AVX2 and for AVX-512 (pointwise_vec.cpp),
// one copy picked once by cpu_isa() (EMBER_CPU_ISA caps it). No copy contracts a product and a
// sum into an FMA, so every copy gives the bits of the scalar formulas (those of loops.h's
// binary_loop / unary_loop with the same functor).
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/iterator.h"
#include "kernels/loops.h"

namespace ember {
namespace cpu {
namespace pvec {

// o = x + alpha y, x - alpha y, x * y, x / y.
enum class Binary { Add, Sub, Mul, Div };
// -x, |x| (0 - x for x <= 0: abs(-0.0) is +0.0), sqrt(x), relu (NaN kept).
enum class Unary { Neg, Abs, Sqrt, Relu };

// One inner loop of a binary op over operands of type T (output first, byte strides s): runs
// it and returns true for the contiguous layouts (x op y, x op scalar, scalar op y, in place
// x op= y or x op= scalar); false (nothing done) for a strided one. alpha: add's and sub's
// (ignored by mul and div).
bool binary(Binary op, float alpha, char** d, const int64_t* s, int64_t n);
bool binary(Binary op, double alpha, char** d, const int64_t* s, int64_t n);
// y = op(x) over n contiguous elements (y == x: in place).
void unary(Unary op, const float* x, float* y, int64_t n);
void unary(Unary op, const double* x, double* y, int64_t n);

}  // namespace pvec

// Runs a binary op over a built iterator whose three operands are all of type T (float or
// double): the contiguous inner loops on pvec::binary, the strided ones on binary_loop with
// `f` (the same formula, hence the same bits). Returns false (nothing done) for other dtypes;
// on true the iterator is finished.
template <class T, class F>
bool run_pvec_binary(TensorIterator& it, pvec::Binary op, T alpha, const F& f) {
  constexpr ScalarType dt = std::is_same_v<T, float> ? ScalarType::Float32 : ScalarType::Float64;
  if (it.ntensors() != 3 || it.dtype(0) != dt || it.dtype(1) != dt || it.dtype(2) != dt)
    return false;
  it.for_each([&](char** d, const int64_t* s, int64_t n) {
    if (!pvec::binary(op, alpha, d, s, n)) binary_loop<T, T>(d, s, n, f);
  });
  it.finish();
  return true;
}

// The same for a unary op over operands of type T: contiguous inner loops on pvec::unary,
// strided ones on unary_loop with `f`.
template <class T, class F>
bool run_pvec_unary(TensorIterator& it, pvec::Unary op, const F& f) {
  constexpr ScalarType dt = std::is_same_v<T, float> ? ScalarType::Float32 : ScalarType::Float64;
  if (it.ntensors() != 2 || it.dtype(0) != dt || it.dtype(1) != dt) return false;
  it.for_each([&](char** d, const int64_t* s, int64_t n) {
    if (s[0] == sizeof(T) && s[1] == sizeof(T))
      pvec::unary(op, reinterpret_cast<const T*>(d[1]), reinterpret_cast<T*>(d[0]), n);
    else
      unary_loop<T, T>(d, s, n, f);
  });
  it.finish();
  return true;
}

}  // namespace cpu
}  // namespace ember
