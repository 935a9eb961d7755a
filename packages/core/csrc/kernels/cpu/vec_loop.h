// Running a float32 row kernel (nn_vec.h) over a built unary TensorIterator, shared by the
// pointwise ops and the activations.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/iterator.h"
#include "kernels/loops.h"

namespace ember {
namespace cpu {

// Runs a float32 unary op through its vectorized row kernel vf(x, y, n): contiguous inner loops
// directly, strided ones through a small buffer, so every layout of a float32 tensor gets the
// same bits. Returns false (nothing done) for other dtypes; on true the iterator is finished.
template <class VecFn>
bool run_vec_float32(TensorIterator& it, const VecFn& vf) {
  if (it.dtype(0) != ScalarType::Float32 || it.dtype(1) != ScalarType::Float32) return false;
  it.for_each([&](char** d, const int64_t* s, int64_t n) {
    if (s[0] == sizeof(float) && s[1] == sizeof(float)) {
      vf(reinterpret_cast<const float*>(d[1]), reinterpret_cast<float*>(d[0]), n);
      return;
    }
    constexpr int64_t kChunk = 256;
    float buf[kChunk];
    for (int64_t i = 0; i < n; i += kChunk) {
      const int64_t m = std::min(kChunk, n - i);
      for (int64_t j = 0; j < m; ++j) buf[j] = load<float>(d[1] + (i + j) * s[1]);
      vf(buf, buf, m);
      for (int64_t j = 0; j < m; ++j) *reinterpret_cast<float*>(d[0] + (i + j) * s[0]) = buf[j];
    }
  });
  it.finish();
  return true;
}

}  // namespace cpu
}  // namespace ember
