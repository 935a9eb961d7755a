// Tiled transposes of dense batches of matrices, shared by the channels-last conversions of the
// nn kernels and the contiguous copy of a transposed tensor (copy_into).
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/tensor.h"
#include "kernels/parallel.h"

namespace ember {
namespace cpu {

// dst (N, B, A) = src (N, A, B) transposed per sample, for items of type U: 32 x 32 tiles
// moved as 8 x 8 blocks, so both sides touch few cache lines at a time whatever the plane's
// power-of-two strides (several times faster than the strided copy kernel).
template <class U>
void transpose_planes(const U* src, U* dst, int64_t N, int64_t A, int64_t B) {
  constexpr int64_t kTile = 32, kBlock = 8;
  const int64_t at = (A + kTile - 1) / kTile, bt = (B + kTile - 1) / kTile;
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / (kTile * kTile));
  parallel_for(0, N * at * bt, grain, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      const int64_t n = i / (at * bt), a0 = (i / bt) % at * kTile, b0 = i % bt * kTile;
      const int64_t a1 = std::min(A, a0 + kTile), b1 = std::min(B, b0 + kTile);
      const U* s = src + n * A * B;
      U* d = dst + n * A * B;
      for (int64_t bb = b0; bb < b1; bb += kBlock)
        for (int64_t aa = a0; aa < a1; aa += kBlock) {
          const int64_t be = std::min(b1, bb + kBlock), ae = std::min(a1, aa + kBlock);
          for (int64_t b = bb; b < be; ++b)
            for (int64_t a = aa; a < ae; ++a) d[b * A + a] = s[a * B + b];
        }
    }
  });
}

// dst (N, B, A) = src (N, A, B) per sample for any item size (false: not one of 1/2/4/8).
inline bool transpose_items(const Tensor& src, const Tensor& dst, int64_t N, int64_t A, int64_t B) {
  switch (src->itemsize()) {
    case 1:
      transpose_planes(src->data_as<uint8_t>(), dst->data_as<uint8_t>(), N, A, B);
      return true;
    case 2:
      transpose_planes(src->data_as<uint16_t>(), dst->data_as<uint16_t>(), N, A, B);
      return true;
    case 4:
      transpose_planes(src->data_as<uint32_t>(), dst->data_as<uint32_t>(), N, A, B);
      return true;
    case 8:
      transpose_planes(src->data_as<uint64_t>(), dst->data_as<uint64_t>(), N, A, B);
      return true;
    default:
      return false;
  }
}

}  // namespace cpu
}  // namespace ember
