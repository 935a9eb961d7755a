// Tiled transposes of dense batches of matrices, shared by the channels-last conversions of the
// nn kernels and the contiguous copy of a transposed tensor (copy_into).
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/tensor.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/parallel.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define EMBER_TRANSPOSE_AVX2 1
#else
#define EMBER_TRANSPOSE_AVX2 0
#endif

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

#if EMBER_TRANSPOSE_AVX2
// d (8 x 8, rows ld apart) = s (8 x 8, rows ls apart) transposed, for 4-byte items: 8 row loads,
// 24 in-register shuffles and 8 row stores instead of 64 scalar moves.
__attribute__((target("avx2"), always_inline)) inline void transpose8x8_avx2(const uint32_t* s,
                                                                             int64_t ls,
                                                                             uint32_t* d,
                                                                             int64_t ld) {
  const float* sf = reinterpret_cast<const float*>(s);
  float* df = reinterpret_cast<float*>(d);
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(sf + i * ls);
  for (int i = 0; i < 8; i += 2) {  // pairs of rows interleaved
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {  // then quads: each 128-bit lane holds a 4 x 4 transpose
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {  // the lanes of rows 0-3 and 4-7 joined
    _mm256_storeu_ps(df + i * ld, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
    _mm256_storeu_ps(df + (i + 4) * ld, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
  }
}

// transpose_planes' tiles [first, last) for 4-byte items on AVX2, kTile4 x kTile4 tiles of 8 x 8
// register transposes (the partial blocks at the edges scalar).
constexpr int64_t kTile4 = 64;
__attribute__((target("avx2"))) inline void transpose_tiles_4_avx2(const uint32_t* src,
                                                                   uint32_t* dst, int64_t A,
                                                                   int64_t B, int64_t first,
                                                                   int64_t last) {
  constexpr int64_t kBlock = 8;
  const int64_t at = (A + kTile4 - 1) / kTile4, bt = (B + kTile4 - 1) / kTile4;
  for (int64_t i = first; i < last; ++i) {
    const int64_t n = i / (at * bt), a0 = (i / bt) % at * kTile4, b0 = i % bt * kTile4;
    const int64_t a1 = std::min(A, a0 + kTile4), b1 = std::min(B, b0 + kTile4);
    const uint32_t* s = src + n * A * B;
    uint32_t* d = dst + n * A * B;
    for (int64_t bb = b0; bb < b1; bb += kBlock)
      for (int64_t aa = a0; aa < a1; aa += kBlock) {
        if (bb + kBlock <= b1 && aa + kBlock <= a1) {
          transpose8x8_avx2(s + aa * B + bb, B, d + bb * A + aa, A);
          continue;
        }
        const int64_t be = std::min(b1, bb + kBlock), ae = std::min(a1, aa + kBlock);
        for (int64_t b = bb; b < be; ++b)
          for (int64_t a = aa; a < ae; ++a) d[b * A + a] = s[a * B + b];
      }
  }
}

// transpose_planes for 4-byte items on AVX2: about 2x the scalar tiles' speed on a 2048^2 float.
inline void transpose_planes_4_avx2(const uint32_t* src, uint32_t* dst, int64_t N, int64_t A,
                                    int64_t B) {
  const int64_t at = (A + kTile4 - 1) / kTile4, bt = (B + kTile4 - 1) / kTile4;
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / (kTile4 * kTile4));
  parallel_for(0, N * at * bt, grain, [&](int64_t first, int64_t last) {
    transpose_tiles_4_avx2(src, dst, A, B, first, last);
  });
}
#endif

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
#if EMBER_TRANSPOSE_AVX2
      if (cpu_isa() >= Isa::Avx2 && A >= 8 && B >= 8) {
        transpose_planes_4_avx2(src->data_as<uint32_t>(), dst->data_as<uint32_t>(), N, A, B);
        return true;
      }
#endif
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
