// Sums of many short rows at once (global average pooling's planes, sum / mean over a short last
// dim): rows interleaved 8 at a time so their running sums are independent vector chains, and the
// 8 rows' lanes folded together by one transposing horizontal-add tree.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/half.h"
#include "kernels/cpu/cpu_features.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ember {
namespace cpu {
namespace row_sums_detail {

#if defined(__GNUC__) && defined(__x86_64__)
#define EMBER_ROWSUM_AVX2 1
#define EMBER_ROWSUM_INLINE inline __attribute__((always_inline))
#else
#define EMBER_ROWSUM_AVX2 0
#define EMBER_ROWSUM_INLINE inline
#endif

// sums[k] = the sum of row k (n contiguous elements at x + k * step), k < rows. Rows go 8 at a
// time, each with L lanes (one vector register), so the 8 running sums are independent chains
// and a short row (49 elements of a 7x7 map) costs a few vector adds instead of a serial fold.
template <int L, class T, class A>
EMBER_ROWSUM_INLINE void row_sums_impl(const T* x, int64_t n, int64_t step, int64_t rows, A* sums) {
  constexpr int G = 8;
  const int64_t body = n / L * L;
  int64_t k = 0;
  for (; k + G <= rows; k += G) {
    const T* b = x + k * step;
    A acc[G][L] = {};
    for (int g = 0; g < G; ++g)  // row by row: one stream at a time (see row_sums_avx2_f32)
      for (int64_t l = 0; l < body; l += L)
        for (int u = 0; u < L; ++u) acc[g][u] += static_cast<A>(b[g * step + l + u]);
    for (int g = 0; g < G; ++g) {
      for (int w = L / 2; w > 0; w /= 2)
        for (int u = 0; u < w; ++u) acc[g][u] += acc[g][u + w];
      A s = acc[g][0];
      for (int64_t l = body; l < n; ++l) s += static_cast<A>(b[g * step + l]);
      sums[k + g] = s;
    }
  }
  for (; k < rows; ++k) {
    const T* b = x + k * step;
    A acc[L] = {};
    for (int64_t l = 0; l < body; l += L)
      for (int u = 0; u < L; ++u) acc[u] += static_cast<A>(b[l + u]);
    for (int w = L / 2; w > 0; w /= 2)
      for (int u = 0; u < w; ++u) acc[u] += acc[u + w];
    A s = acc[0];
    for (int64_t l = body; l < n; ++l) s += static_cast<A>(b[l]);
    sums[k] = s;
  }
}

#if EMBER_ROWSUM_AVX2
template <class T, class A>
__attribute__((target("avx2"))) void row_sums_avx2(const T* x, int64_t n, int64_t step,
                                                   int64_t rows, A* sums) {
  row_sums_impl<32 / sizeof(A), T, A>(x, n, step, rows, sums);
}

// 8 elements from p as floats (float16 through F16C, bfloat16 by a shift: both exact).
template <class T>
__attribute__((target("avx2,f16c"), always_inline)) inline __m256 load8_float(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return _mm256_loadu_ps(p);
  } else {
    static_assert(sizeof(T) == 2, "load8_float: float, float16 or bfloat16");
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (std::is_same_v<T, Half>)
      return _mm256_cvtph_ps(h);
    else
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// float32 (and float16 / bfloat16, widened to float): the 8 rows' lane sums fold into one
// vector of 8 plane sums through a transposing horizontal-add tree (9 shuffling ops per 8 rows
// instead of 6 per row).
template <class T>
__attribute__((target("avx2,f16c"))) void row_sums_avx2_f32(const T* x, int64_t n, int64_t step,
                                                            int64_t rows, float* sums) {
  const int64_t body = n / 8 * 8;
  int64_t k = 0;
  for (; k + 8 <= rows; k += 8) {
    const T* b = x + k * step;
    __m256 a[8];
    for (int g = 0; g < 8; ++g) a[g] = _mm256_setzero_ps();
    // Row by row, not the 8 rows side by side: reading 8 streams at once stalls on memory (about
    // 2x slower for 16k rows of 196 floats); the rows' chains still overlap out of order.
    for (int g = 0; g < 8; ++g)
      for (int64_t l = 0; l < body; l += 8)
        a[g] = _mm256_add_ps(a[g], load8_float(b + g * step + l));
    const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
    const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
    __m256 r =
        _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
    if (body < n) {
      alignas(32) float tail[8];
      for (int g = 0; g < 8; ++g) {
        float t = 0;
        for (int64_t l = body; l < n; ++l) t += static_cast<float>(b[g * step + l]);
        tail[g] = t;
      }
      r = _mm256_add_ps(r, _mm256_load_ps(tail));
    }
    _mm256_storeu_ps(sums + k, r);
  }
  if (k < rows) row_sums_impl<8, T, float>(x + k * step, n, step, rows - k, sums + k);
}

// Whether the CPU converts float16 in hardware (every AVX2 CPU so far does; checked anyway).
inline bool has_f16c() {
  static const bool f16c = __builtin_cpu_supports("f16c");
  return f16c;
}

// float64: the same with 4 lanes, 4 rows folded per horizontal-add tree.
inline __attribute__((target("avx2"))) void row_sums_avx2_f64(const double* x, int64_t n,
                                                              int64_t step, int64_t rows,
                                                              double* sums) {
  const int64_t body = n / 4 * 4;
  int64_t k = 0;
  for (; k + 8 <= rows; k += 8) {
    const double* b = x + k * step;
    __m256d a[8];
    for (int g = 0; g < 8; ++g) a[g] = _mm256_setzero_pd();
    for (int g = 0; g < 8; ++g)  // row by row (see row_sums_avx2_f32)
      for (int64_t l = 0; l < body; l += 4)
        a[g] = _mm256_add_pd(a[g], _mm256_loadu_pd(b + g * step + l));
    for (int h = 0; h < 8; h += 4) {
      const __m256d t0 = _mm256_hadd_pd(a[h], a[h + 1]), t1 = _mm256_hadd_pd(a[h + 2], a[h + 3]);
      __m256d r =
          _mm256_add_pd(_mm256_permute2f128_pd(t0, t1, 0x20), _mm256_permute2f128_pd(t0, t1, 0x31));
      if (body < n) {
        alignas(32) double tail[4];
        for (int g = 0; g < 4; ++g) {
          double t = 0;
          for (int64_t l = body; l < n; ++l) t += b[(h + g) * step + l];
          tail[g] = t;
        }
        r = _mm256_add_pd(r, _mm256_load_pd(tail));
      }
      _mm256_storeu_pd(sums + k + h, r);
    }
  }
  if (k < rows) row_sums_impl<4, double, double>(x + k * step, n, step, rows - k, sums + k);
}
#endif

}  // namespace row_sums_detail

// sums[k] = the sum of the n elements at x + k * step (k < rows) in op-math type A, rows summed 8
// at a time in vector lanes (AVX2 copies picked at run time). For short rows: each row is one
// chain of lane sums, without the double-precision block totals of the long-reduction loops.
template <class T, class A>
void row_sums(const T* x, int64_t n, int64_t step, int64_t rows, A* sums) {
#if EMBER_ROWSUM_AVX2
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16>) {
    if (cpu_isa() >= Isa::Avx2) return row_sums_detail::row_sums_avx2_f32(x, n, step, rows, sums);
  }
  if constexpr (std::is_same_v<T, Half>) {
    if (cpu_isa() >= Isa::Avx2 && row_sums_detail::has_f16c())
      return row_sums_detail::row_sums_avx2_f32(x, n, step, rows, sums);
  }
  if constexpr (std::is_same_v<T, double>) {
    if (cpu_isa() >= Isa::Avx2) return row_sums_detail::row_sums_avx2_f64(x, n, step, rows, sums);
  }
  if (cpu_isa() >= Isa::Avx2) return row_sums_detail::row_sums_avx2<T, A>(x, n, step, rows, sums);
#endif
  row_sums_detail::row_sums_impl<16 / sizeof(A), T, A>(x, n, step, rows, sums);
}

}  // namespace cpu
}  // namespace ember
