// Running a float32 or float64 row kernel (nn_vec.h) over a built unary TensorIterator, shared by
// the pointwise ops and the activations.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/iterator.h"
#include "kernels/loops.h"

namespace ember {
namespace cpu {

// Runs a float32 (T = float) or float64 (T = double) unary op through its vectorized row kernel
// vf(x, y, n): contiguous inner loops directly, strided ones through a small buffer, so every
// layout of a tensor gets the same bits. Returns false (nothing done) for other dtypes; on true
// the iterator is finished.
template <class T, class VecFn>
bool run_vec(TensorIterator& it, const VecFn& vf) {
  constexpr ScalarType dt = std::is_same_v<T, float> ? ScalarType::Float32 : ScalarType::Float64;
  if (it.dtype(0) != dt || it.dtype(1) != dt) return false;
  it.for_each([&](char** d, const int64_t* s, int64_t n) {
    if (s[0] == sizeof(T) && s[1] == sizeof(T)) {
      vf(reinterpret_cast<const T*>(d[1]), reinterpret_cast<T*>(d[0]), n);
      return;
    }
    constexpr int64_t kChunk = 256;
    T buf[kChunk];
    for (int64_t i = 0; i < n; i += kChunk) {
      const int64_t m = std::min(kChunk, n - i);
      for (int64_t j = 0; j < m; ++j) buf[j] = load<T>(d[1] + (i + j) * s[1]);
      vf(buf, buf, m);
      for (int64_t j = 0; j < m; ++j) *reinterpret_cast<T*>(d[0] + (i + j) * s[0]) = buf[j];
    }
  });
  it.finish();
  return true;
}

template <class VecFn>
bool run_vec_float32(TensorIterator& it, const VecFn& vf) {
  return run_vec<float>(it, vf);
}

}  // namespace cpu
}  // namespace ember
