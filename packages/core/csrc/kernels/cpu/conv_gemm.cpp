#include "kernels/cpu/conv_gemm.h"

#include <algorithm>

#include "kernels/cpu/cpu_features.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define EMBER_CONV_GEMM_AVX512 1
#endif

namespace ember {
namespace cpu {

PackedA::PackedA(const float* a, int64_t rs, int64_t cs, int64_t M_, int64_t K_) : M(M_), K(K_) {
  const int64_t blocks = (M + 15) / 16;
  data.assign(blocks * 16 * K, 0.0f);
  for (int64_t bm = 0; bm < blocks; ++bm)
    for (int64_t r = 0; r < 16 && bm * 16 + r < M; ++r) {
      const float* row = a + (bm * 16 + r) * rs;
      float* dst = data.data() + bm * 16 * K + r;
      for (int64_t k = 0; k < K; ++k) dst[k * 16] = row[k * cs];
    }
}

#ifdef EMBER_CONV_GEMM_AVX512

bool conv_gemm_available() { return cpu_isa() >= Isa::Avx512; }

namespace {
// One 16 x 16 tile of C (rows valid: mr, columns: mask) = A @ B (+ C when accumulating): 16
// accumulators, each step one vector of B times 16 broadcast elements of A. row(k) is the
// address of B's row k (strided or gathered; see the two wrappers below).
template <class Row>
__attribute__((target("avx512f"), always_inline)) inline void tile16_rows(const float* ap,
                                                                          int64_t K, Row row,
                                                                          __mmask16 mask, float* c,
                                                                          int64_t ldc, int64_t mr,
                                                                          bool accumulate) {
  __m512 acc[16];
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r)
    acc[r] = accumulate && r < mr ? _mm512_maskz_loadu_ps(mask, c + r * ldc) : _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m512 bv = _mm512_maskz_loadu_ps(mask, row(k));
    const float* ak = ap + k * 16;
#pragma GCC unroll 16
    for (int r = 0; r < 16; ++r) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(ak[r]), bv, acc[r]);
  }
  // Unrolled with constant indices so that acc stays in registers during the loop above.
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r)
    if (r < mr) _mm512_mask_storeu_ps(c + r * ldc, mask, acc[r]);
}
// B's rows ldb apart.
__attribute__((target("avx512f"))) void tile16(const float* ap, int64_t K, const float* b,
                                               int64_t ldb, __mmask16 mask, float* c, int64_t ldc,
                                               int64_t mr, bool accumulate) {
  tile16_rows(ap, K, [b, ldb](int64_t k) { return b + k * ldb; }, mask, c, ldc, mr, accumulate);
}
// B's rows at b + off[k].
__attribute__((target("avx512f"))) void tile16_off(const float* ap, int64_t K, const float* b,
                                                   const int64_t* off, __mmask16 mask, float* c,
                                                   int64_t ldc, int64_t mr, bool accumulate) {
  tile16_rows(ap, K, [b, off](int64_t k) { return b + off[k]; }, mask, c, ldc, mr, accumulate);
}
}  // namespace

// 4 x 4 dot products per tile, each accumulated in one vector over all positions and summed
// across its lanes at the end. Rows and kernel taps past M or K repeat the last one (computed,
// not stored) so that the tile code has no branches.
__attribute__((target("avx512f"))) void conv_wgrad_offsets(const float* a, int64_t M, int64_t lda,
                                                           const float* b, const int64_t* lb,
                                                           int64_t nlines, int64_t OW,
                                                           const int64_t* off, int64_t K,
                                                           float* gw) {
  for (int64_t m0 = 0; m0 < M; m0 += 4)
    for (int64_t k0 = 0; k0 < K; k0 += 4) {
      const float* ar[4];
      int64_t ko[4];
      for (int i = 0; i < 4; ++i) {
        ar[i] = a + std::min<int64_t>(m0 + i, M - 1) * lda;
        ko[i] = off[std::min<int64_t>(k0 + i, K - 1)];
      }
      __m512 acc[4][4];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_setzero_ps();
      for (int64_t l = 0; l < nlines; ++l) {
        const float* bl = b + lb[l];
        const int64_t al = l * OW;
        for (int64_t w0 = 0; w0 < OW; w0 += 16) {
          const int64_t nr = std::min<int64_t>(16, OW - w0);
          const __mmask16 mask = static_cast<__mmask16>(nr == 16 ? 0xFFFFu : (1u << nr) - 1u);
          __m512 av[4], bv[4];
#pragma GCC unroll 4
          for (int i = 0; i < 4; ++i) av[i] = _mm512_maskz_loadu_ps(mask, ar[i] + al + w0);
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) bv[j] = _mm512_maskz_loadu_ps(mask, bl + ko[j] + w0);
#pragma GCC unroll 4
          for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) acc[i][j] = _mm512_fmadd_ps(av[i], bv[j], acc[i][j]);
        }
      }
      alignas(64) float lanes[4][4][16];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) _mm512_store_ps(lanes[i][j], acc[i][j]);
      for (int i = 0; i < 4 && m0 + i < M; ++i)
        for (int j = 0; j < 4 && k0 + j < K; ++j) {
          float sum = 0.0f;
          for (int t = 0; t < 16; ++t) sum += lanes[i][j][t];
          gw[(m0 + i) * K + k0 + j] += sum;
        }
    }
}

// The blocking both products share. Columns outer: a panel of B (16 columns of kKc rows,
// 16 KiB) stays in L1 for every row block; longer K is split and later parts add to C.
// tile(a_panel, kc, k0, n0, mask, c_tile, rows) multiplies one 16-row block of A by the panel.
template <class Tile>
void blocked_gemm(const PackedA& a, int64_t N, float* c, int64_t ldc, const Tile& tile) {
  const int64_t M = a.M, K = a.K;
  constexpr int64_t kKc = 256;
  for (int64_t k0 = 0; k0 < K; k0 += kKc) {
    const int64_t kc = std::min(kKc, K - k0);
    for (int64_t n0 = 0; n0 < N; n0 += 16) {
      const int64_t nr = std::min<int64_t>(16, N - n0);
      const __mmask16 mask = static_cast<__mmask16>(nr == 16 ? 0xFFFFu : (1u << nr) - 1u);
      for (int64_t m0 = 0; m0 < M; m0 += 16)
        tile(a.data.data() + (m0 / 16) * 16 * K + k0 * 16, kc, k0, n0, mask, c + m0 * ldc + n0,
             std::min<int64_t>(16, M - m0));
    }
  }
}

void conv_gemm_offsets(const PackedA& a, int64_t N, const float* b, const int64_t* off, float* c,
                       int64_t ldc) {
  blocked_gemm(
      a, N, c, ldc,
      [&](const float* ap, int64_t kc, int64_t k0, int64_t n0, __mmask16 mask, float* ct,
          int64_t rows) { tile16_off(ap, kc, b + n0, off + k0, mask, ct, ldc, rows, k0 > 0); });
}

void conv_gemm(const PackedA& a, int64_t N, const float* b, int64_t ldb, float* c, int64_t ldc) {
  blocked_gemm(
      a, N, c, ldc,
      [&](const float* ap, int64_t kc, int64_t k0, int64_t n0, __mmask16 mask, float* ct,
          int64_t rows) { tile16(ap, kc, b + k0 * ldb + n0, ldb, mask, ct, ldc, rows, k0 > 0); });
}

#else

bool conv_gemm_available() { return false; }
void conv_gemm(const PackedA&, int64_t, const float*, int64_t, float*, int64_t) {}
void conv_gemm_offsets(const PackedA&, int64_t, const float*, const int64_t*, float*, int64_t) {}
void conv_wgrad_offsets(const float*, int64_t, int64_t, const float*, const int64_t*, int64_t,
                        int64_t, const int64_t*, int64_t, float*) {}

#endif

}  // namespace cpu
}  // namespace ember
