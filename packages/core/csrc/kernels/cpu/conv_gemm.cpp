#include "kernels/cpu/conv_gemm.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <vector>

#include "kernels/cpu/cpu_features.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define EMBER_CONV_GEMM_AVX512 1
#endif

namespace ember {
namespace cpu {

namespace {
// Per thread, up to kKeep released blocks of at most kKeepBytes each and kKeepTotal in all
// (the smallest block that fits is reused).
constexpr size_t kKeep = 6, kKeepBytes = size_t(16) << 20, kKeepTotal = size_t(48) << 20;
struct ScratchCache {
  std::vector<std::pair<size_t, void*>> blocks;
  size_t total = 0;
  ~ScratchCache() {
    for (auto& b : blocks) std::free(b.second);
  }
};
thread_local ScratchCache scratch_cache;
}  // namespace

void* scratch_acquire(size_t bytes, size_t* capacity) {
  auto& bl = scratch_cache.blocks;
  // The smallest block that fits.
  size_t best = bl.size();
  for (size_t i = 0; i < bl.size(); ++i)
    if (bl[i].first >= bytes && (best == bl.size() || bl[i].first < bl[best].first)) best = i;
  if (best < bl.size()) {
    void* p = bl[best].second;
    *capacity = bl[best].first;
    scratch_cache.total -= bl[best].first;
    bl.erase(bl.begin() + best);
    return p;
  }
  *capacity = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, *capacity);
  if (!p) throw std::bad_alloc();
  return p;
}

void scratch_release(void* p, size_t bytes) {  // bytes: the capacity
  auto& bl = scratch_cache.blocks;
  if (bytes > kKeepBytes) {
    std::free(p);
    return;
  }
  bl.emplace_back(bytes, p);
  scratch_cache.total += bytes;
  while (bl.size() > kKeep || scratch_cache.total > kKeepTotal) {  // drop the smallest
    size_t small = 0;
    for (size_t i = 1; i < bl.size(); ++i)
      if (bl[i].first < bl[small].first) small = i;
    scratch_cache.total -= bl[small].first;
    std::free(bl[small].second);
    bl.erase(bl.begin() + small);
  }
}

namespace {
// Zeroes the rows of the last 16-row block past M.
void zero_tail_rows(float* data, int64_t M, int64_t K) {
  const int64_t bm = M / 16, r0 = M % 16;
  if (r0 == 0) return;
  float* blk = data + bm * 16 * K;
  for (int64_t k = 0; k < K; ++k)
    for (int64_t r = r0; r < 16; ++r) blk[k * 16 + r] = 0.0f;
}
}  // namespace

namespace {
// Packs rows [0, M) of A, element (m, k) at row(m)[col(k)], in chunks of 32 steps: a chunk of a
// block (2 KiB) stays in L1 while its 16 rows are written into it.
template <class Col>
void pack_rows(float* data, const float* a, int64_t rs, int64_t M, int64_t K, const Col& col) {
  zero_tail_rows(data, M, K);
  constexpr int64_t kChunk = 32;
  for (int64_t bm = 0; bm * 16 < M; ++bm) {
    const int64_t mr = std::min<int64_t>(16, M - bm * 16);
    float* blk = data + bm * 16 * K;
    for (int64_t k0 = 0; k0 < K; k0 += kChunk) {
      const int64_t k1 = std::min(K, k0 + kChunk);
      for (int64_t r = 0; r < mr; ++r) {
        const float* row = a + (bm * 16 + r) * rs;
        for (int64_t k = k0; k < k1; ++k) blk[k * 16 + r] = row[col(k)];
      }
    }
  }
}

#ifdef EMBER_CONV_GEMM_AVX512
// dst (16 x 16, row k: the 16 rows' element k) = the transpose of the 16 x 16 block at src
// (rows rs apart; rows past mr read as zero), in registers.
__attribute__((target("avx512f"), always_inline)) inline void transpose16(const float* src,
                                                                          int64_t rs, int64_t mr,
                                                                          float* dst,
                                                                          int64_t ld = 16) {
  // (The zero-masked forms with a full mask: the plain ones start from an undefined vector
  // that GCC 12 warns about.)
  constexpr __mmask16 kAll = 0xFFFF;
  __m512 r[16], t[16], u[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = i < mr ? _mm512_loadu_ps(src + i * rs) : _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_maskz_unpacklo_ps(kAll, r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_maskz_unpackhi_ps(kAll, r[2 * i], r[2 * i + 1]);
  }
  // u[4q + j], lane L: rows 4q..4q+3 of column 4L + j.
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    u[4 * q + 0] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0x44);
    u[4 * q + 1] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0xEE);
    u[4 * q + 2] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0x44);
    u[4 * q + 3] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512 va = _mm512_maskz_shuffle_f32x4(kAll, u[j], u[4 + j], 0x88);
    const __m512 vb = _mm512_maskz_shuffle_f32x4(kAll, u[j], u[4 + j], 0xDD);
    const __m512 wa = _mm512_maskz_shuffle_f32x4(kAll, u[8 + j], u[12 + j], 0x88);
    const __m512 wb = _mm512_maskz_shuffle_f32x4(kAll, u[8 + j], u[12 + j], 0xDD);
    _mm512_storeu_ps(dst + j * ld, _mm512_maskz_shuffle_f32x4(kAll, va, wa, 0x88));
    _mm512_storeu_ps(dst + (8 + j) * ld, _mm512_maskz_shuffle_f32x4(kAll, va, wa, 0xDD));
    _mm512_storeu_ps(dst + (4 + j) * ld, _mm512_maskz_shuffle_f32x4(kAll, vb, wb, 0x88));
    _mm512_storeu_ps(dst + (12 + j) * ld, _mm512_maskz_shuffle_f32x4(kAll, vb, wb, 0xDD));
  }
}

// pack_rows for rows of contiguous segments (column k at row + (k / seg) * seg_stride + k % seg)
// with AVX-512: each step of a 16-row block is one gather of the 16 rows' elements.
__attribute__((target("avx512f"))) void pack_rows_gather(float* data, const float* a, int64_t rs,
                                                         int64_t M, int64_t K, int64_t seg,
                                                         int64_t seg_stride) {
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(static_cast<int>(rs)));
  for (int64_t bm = 0; bm * 16 < M; ++bm) {
    const int64_t mr = std::min<int64_t>(16, M - bm * 16);
    const __mmask16 rows = static_cast<__mmask16>(mr == 16 ? 0xFFFFu : (1u << mr) - 1u);
    float* blk = data + bm * 16 * K;
    const float* rowa = a + bm * 16 * rs;
    for (int64_t s0 = 0; s0 < K; s0 += seg) {
      const float* src = rowa + (s0 / seg) * seg_stride;
      const int64_t n = std::min(seg, K - s0);
      float* d = blk + s0 * 16;
      int64_t k = 0;
      for (; k + 16 <= n; k += 16) transpose16(src + k, rs, mr, d + k * 16);
      for (; k < n; ++k)
        _mm512_storeu_ps(d + k * 16,
                         _mm512_mask_i32gather_ps(_mm512_setzero_ps(), rows, idx, src + k, 4));
    }
  }
}

// Whether pack_rows_gather may run: AVX-512, and 16 rows' offsets fit its 32-bit indices.
bool gather_packing(int64_t rs) {
  return cpu_isa() >= Isa::Avx512 && rs >= 0 && rs * 16 < (int64_t(1) << 31);
}
#endif
}  // namespace

PackedA::PackedA(const float* a, int64_t rs, int64_t cs, int64_t M_, int64_t K_)
    : M(M_), K(K_), data((M_ + 15) / 16 * 16 * K_) {
#ifdef EMBER_CONV_GEMM_AVX512
  if (cs == 1 && gather_packing(rs)) {
    pack_rows_gather(data.data(), a, rs, M, K, std::max<int64_t>(K, 1), 0);
    return;
  }
#endif
  if (rs == 1) {  // each step's 16 rows are contiguous
    zero_tail_rows(data.data(), M, K);
    for (int64_t bm = 0; bm * 16 < M; ++bm) {
      const int64_t mr = std::min<int64_t>(16, M - bm * 16);
      float* blk = data.data() + bm * 16 * K;
      for (int64_t k = 0; k < K; ++k)
        std::copy(a + bm * 16 + k * cs, a + bm * 16 + k * cs + mr, blk + k * 16);
    }
  } else if (cs == 1)
    pack_rows(data.data(), a, rs, M, K, [](int64_t k) { return k; });
  else
    pack_rows(data.data(), a, rs, M, K, [cs](int64_t k) { return k * cs; });
}

PackedA::PackedA(const float* a, int64_t rs, int64_t M_, int64_t K_, int64_t seg,
                 int64_t seg_stride)
    : M(M_), K(K_), data((M_ + 15) / 16 * 16 * K_) {
#ifdef EMBER_CONV_GEMM_AVX512
  if (gather_packing(rs)) {
    pack_rows_gather(data.data(), a, rs, M, K, seg, seg_stride);
    return;
  }
#endif
  pack_rows(data.data(), a, rs, M, K,
            [seg, seg_stride](int64_t k) { return (k / seg) * seg_stride + k % seg; });
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

namespace {
// One 8 x 32 tile of C (rows valid: mr; columns: two 16-wide halves with their own masks, rows
// and destinations) = A @ B (+ C when accumulating): 16 accumulators, each step two vectors of
// B times 8 broadcast elements of A (ap: 8 rows of a 16-row packed block, 16 floats per step).
// Half the loads per multiply-add of tile16's one vector times 16 broadcasts.
template <class Row>
__attribute__((target("avx512f"), always_inline)) inline void tile8x32_rows(
    const float* ap, int64_t K, Row row, const float* b0, const float* b1, __mmask16 m0,
    __mmask16 m1, float* c0, float* c1, int64_t ldc, int64_t mr, bool accumulate) {
  __m512 acc0[8], acc1[8];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) {
    const bool ld = accumulate && r < mr;
    acc0[r] = ld ? _mm512_maskz_loadu_ps(m0, c0 + r * ldc) : _mm512_setzero_ps();
    acc1[r] = ld ? _mm512_maskz_loadu_ps(m1, c1 + r * ldc) : _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < K; ++k) {
    const int64_t o = row(k);
    const __m512 v0 = _mm512_maskz_loadu_ps(m0, b0 + o);
    const __m512 v1 = _mm512_maskz_loadu_ps(m1, b1 + o);
    const float* ak = ap + k * 16;
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      const __m512 av = _mm512_set1_ps(ak[r]);
      acc0[r] = _mm512_fmadd_ps(av, v0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(av, v1, acc1[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r)
    if (r < mr) {
      _mm512_mask_storeu_ps(c0 + r * ldc, m0, acc0[r]);
      _mm512_mask_storeu_ps(c1 + r * ldc, m1, acc1[r]);
    }
}

// B's row k at b + k * ldb (Strided) or b + off[k] (Offsets), as an element offset.
// advance(k0) makes row k0 the first.
struct Strided {
  int64_t ldb, k0 = 0;
  int64_t operator()(int64_t k) const { return (k0 + k) * ldb; }
  void advance(int64_t k) { k0 += k; }
};
struct Offsets {
  const int64_t* off;
  int64_t operator()(int64_t k) const { return off[k]; }
  void advance(int64_t k) { off += k; }
};

__attribute__((target("avx512f"))) void tile8x32_strided(const float* ap, int64_t K, Strided row,
                                                         const float* b0, const float* b1,
                                                         __mmask16 m0, __mmask16 m1, float* c0,
                                                         float* c1, int64_t ldc, int64_t mr,
                                                         bool accumulate) {
  tile8x32_rows(ap, K, row, b0, b1, m0, m1, c0, c1, ldc, mr, accumulate);
}
__attribute__((target("avx512f"))) void tile8x32_offsets(const float* ap, int64_t K, Offsets row,
                                                         const float* b0, const float* b1,
                                                         __mmask16 m0, __mmask16 m1, float* c0,
                                                         float* c1, int64_t ldc, int64_t mr,
                                                         bool accumulate) {
  tile8x32_rows(ap, K, row, b0, b1, m0, m1, c0, c1, ldc, mr, accumulate);
}
inline void tile8x32(const float* ap, int64_t K, Strided row, const float* b0, const float* b1,
                     __mmask16 m0, __mmask16 m1, float* c0, float* c1, int64_t ldc, int64_t mr,
                     bool accumulate) {
  tile8x32_strided(ap, K, row, b0, b1, m0, m1, c0, c1, ldc, mr, accumulate);
}
inline void tile8x32(const float* ap, int64_t K, Offsets row, const float* b0, const float* b1,
                     __mmask16 m0, __mmask16 m1, float* c0, float* c1, int64_t ldc, int64_t mr,
                     bool accumulate) {
  tile8x32_offsets(ap, K, row, b0, b1, m0, m1, c0, c1, ldc, mr, accumulate);
}
inline void tile16x16(const float* ap, int64_t K, Strided row, const float* b, __mmask16 m,
                      float* c, int64_t ldc, int64_t mr, bool accumulate) {
  tile16(ap, K, b + row(0), row.ldb, m, c, ldc, mr, accumulate);
}
inline void tile16x16(const float* ap, int64_t K, Offsets row, const float* b, __mmask16 m,
                      float* c, int64_t ldc, int64_t mr, bool accumulate) {
  tile16_off(ap, K, b, row.off, m, c, ldc, mr, accumulate);
}

inline __mmask16 lanes(int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
}

// The blocking all the products share: C's columns in panels of 16, panel p's column j of B
// row k at base(p) + row(k) + j, its first (valid: width(p)) columns at c + dst(p) + j. Panels
// in groups of kNp (C's block M x 128 stays in L2 over the whole reduction, A's block of kKc
// steps in L2 over the group); the reduction in blocks of kKc steps (later blocks add to C); per
// block, two panels at a time (32 columns of kKc rows, at most 24 KiB, stay in L1) against
// every 8-row half of A's 16-row blocks.
template <class Row, class Base, class Width, class Dst>
void blocked_gemm(const PackedA& a, int64_t npanels, const Base& base, const Width& width,
                  const Dst& dst, Row row, float* c, int64_t ldc, bool accumulate) {
  const int64_t M = a.M, K = a.K;
  // kKc: K split into equal blocks of at most kMaxKc steps (144 = one block, not 128 + 16).
  constexpr int64_t kMaxKc = 192, kNp = 8;
  const int64_t kblocks = std::max<int64_t>(1, (K + kMaxKc - 1) / kMaxKc);
  const int64_t kKc = (K + kblocks - 1) / kblocks;
  for (int64_t g0 = 0; g0 < npanels; g0 += kNp) {
    const int64_t g1 = std::min(npanels, g0 + kNp);
    for (int64_t k0 = 0; k0 < K; k0 += kKc) {
      const int64_t kc = std::min(kKc, K - k0);
      const bool acc = accumulate || k0 > 0;
      const float* ak = a.data.data() + k0 * 16;
      Row rk = row;
      rk.advance(k0);
      for (int64_t p = g0; p < g1; p += 2) {
        const float* b0 = base(p);
        const __mmask16 m0 = lanes(width(p));
        float* c0 = c + dst(p);
        if (p + 1 == g1) {  // a last single panel: 16 x 16 tiles
          for (int64_t m = 0; m < M; m += 16)
            tile16x16(ak + m * K, kc, rk, b0, m0, c0 + m * ldc, ldc, std::min<int64_t>(16, M - m),
                      acc);
          break;
        }
        const float* b1 = base(p + 1);
        const __mmask16 m1 = lanes(width(p + 1));
        float* c1 = c + dst(p + 1);
        for (int64_t m = 0; m < M; m += 8)
          tile8x32(ak + (m / 16) * 16 * K + m % 16, kc, rk, b0, b1, m0, m1, c0 + m * ldc,
                   c1 + m * ldc, ldc, std::min<int64_t>(8, M - m), acc);
      }
    }
  }
}
}  // namespace

void conv_gemm_lines(const PackedA& a, int64_t nlines, int64_t OW, const float* b,
                     const int64_t* lb, const int64_t* off, float* c, int64_t ldc) {
  const int64_t per = (OW + 15) / 16;  // panels per line
  blocked_gemm(
      a, nlines * per, [=](int64_t p) { return b + lb[p / per] + 16 * (p % per); },
      [=](int64_t p) { return OW - 16 * (p % per); },
      [=](int64_t p) { return (p / per) * OW + 16 * (p % per); }, Offsets{off}, c, ldc, false);
}

void conv_gemm(const PackedA& a, int64_t N, const float* b, int64_t ldb, float* c, int64_t ldc,
               bool accumulate) {
  blocked_gemm(
      a, (N + 15) / 16, [b](int64_t p) { return b + 16 * p; },
      [N](int64_t p) { return N - 16 * p; }, [](int64_t p) { return 16 * p; }, Strided{ldb}, c, ldc,
      accumulate);
}

void conv_gemm_gather(const PackedA& a, int64_t npanels, const int64_t* col_off, const float* b,
                      const int64_t* row_off, float* c, int64_t ldc, bool accumulate) {
  blocked_gemm(
      a, npanels, [b, col_off](int64_t p) { return b + col_off[p]; },
      [](int64_t) { return int64_t(16); }, [](int64_t p) { return 16 * p; }, Offsets{row_off}, c,
      ldc, accumulate);
}

namespace {
__attribute__((target("avx512f"))) void copy_runs_avx512(const float* src, const int64_t* off,
                                                         int64_t nruns, int64_t len, float* dst) {
  const __mmask16 m = lanes(len);
  for (int64_t i = 0; i < nruns; ++i)
    _mm512_mask_storeu_ps(dst + i * len, m, _mm512_maskz_loadu_ps(m, src + off[i * len]));
}
}  // namespace

namespace {
__attribute__((target("avx512f"))) void im2col_rows_avx512(const float* src, const int64_t* off,
                                                           int64_t rows, const int64_t* lb,
                                                           int64_t nlines, int64_t OW, int64_t sw,
                                                           float* cols, int64_t ld) {
  const __m512i idx =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(static_cast<int>(sw)));
  for (int64_t r = 0; r < rows; ++r) {
    const float* sr = src + off[r];
    float* dst = cols + r * ld;
    for (int64_t l = 0; l < nlines; ++l, dst += OW) {
      const float* sl = sr + lb[l];
      for (int64_t w0 = 0; w0 < OW; w0 += 16) {
        const __mmask16 m = lanes(OW - w0);
        const __m512 v =
            sw == 1 ? _mm512_maskz_loadu_ps(m, sl + w0)
                    : _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, sl + w0 * sw, 4);
        _mm512_mask_storeu_ps(dst + w0, m, v);
      }
    }
  }
}
}  // namespace

void im2col_rows(const float* src, const int64_t* off, int64_t rows, const int64_t* lb,
                 int64_t nlines, int64_t OW, int64_t sw, float* cols, int64_t ld) {
  if (conv_gemm_available() && sw * 16 < (int64_t(1) << 31) / 4) {
    im2col_rows_avx512(src, off, rows, lb, nlines, OW, sw, cols, ld);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = cols + r * ld;
    for (int64_t l = 0; l < nlines; ++l, dst += OW)
      for (int64_t w = 0; w < OW; ++w) dst[w] = src[off[r] + lb[l] + w * sw];
  }
}

namespace {
void to_channels_last_scalar(const float* src, int64_t c0, int64_t C, int64_t P, int64_t w0,
                             int64_t W, float* dst, int64_t ld) {
  for (int64_t c = c0; c < C; ++c)
    for (int64_t w = w0; w < W; ++w) dst[w * ld + c] = src[c * P + w];
}

// (16 x 16 blocks of 16 channels by 16 pixels: reading past the row is never needed, a block
// of fewer channels reads only those.)
__attribute__((target("avx512f"))) void to_channels_last_avx512(const float* src, int64_t C,
                                                                int64_t P, int64_t W, float* dst,
                                                                int64_t ld) {
  const int64_t W16 = W / 16 * 16;
  for (int64_t c0 = 0; c0 < C; c0 += 16) {
    const int64_t cr = std::min<int64_t>(16, C - c0);
    for (int64_t w0 = 0; w0 < W16; w0 += 16) {
      if (cr == 16) {
        transpose16(src + c0 * P + w0, P, 16, dst + w0 * ld + c0, ld);
      } else {
        alignas(64) float blk[16 * 16];
        transpose16(src + c0 * P + w0, P, cr, blk, 16);
        for (int64_t w = 0; w < 16; ++w)
          for (int64_t c = 0; c < cr; ++c) dst[(w0 + w) * ld + c0 + c] = blk[w * 16 + c];
      }
    }
  }
  if (W16 < W) to_channels_last_scalar(src, 0, C, P, W16, W, dst, ld);
}
}  // namespace

void to_channels_last(const float* src, int64_t C, int64_t P, int64_t W, float* dst, int64_t ld) {
  if (conv_gemm_available()) {
    to_channels_last_avx512(src, C, P, W, dst, ld);
    return;
  }
  to_channels_last_scalar(src, 0, C, P, 0, W, dst, ld);
}

void copy_runs(const float* src, const int64_t* off, int64_t nruns, int64_t len, float* dst) {
  if (len <= 16 && conv_gemm_available()) {
    copy_runs_avx512(src, off, nruns, len, dst);
    return;
  }
  for (int64_t i = 0; i < nruns; ++i) {
    const float* from = src + off[i * len];
    for (int64_t j = 0; j < len; ++j) dst[i * len + j] = from[j];
  }
}

#else

void to_channels_last(const float* src, int64_t C, int64_t P, int64_t W, float* dst, int64_t ld) {
  for (int64_t c = 0; c < C; ++c)
    for (int64_t w = 0; w < W; ++w) dst[w * ld + c] = src[c * P + w];
}

void im2col_rows(const float* src, const int64_t* off, int64_t rows, const int64_t* lb,
                 int64_t nlines, int64_t OW, int64_t sw, float* cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    float* dst = cols + r * ld;
    for (int64_t l = 0; l < nlines; ++l, dst += OW)
      for (int64_t w = 0; w < OW; ++w) dst[w] = src[off[r] + lb[l] + w * sw];
  }
}

void copy_runs(const float* src, const int64_t* off, int64_t nruns, int64_t len, float* dst) {
  for (int64_t i = 0; i < nruns; ++i) {
    const float* from = src + off[i * len];
    for (int64_t j = 0; j < len; ++j) dst[i * len + j] = from[j];
  }
}

bool conv_gemm_available() { return false; }
void conv_gemm_gather(const PackedA&, int64_t, const int64_t*, const float*, const int64_t*, float*,
                      int64_t, bool) {}
void conv_gemm(const PackedA&, int64_t, const float*, int64_t, float*, int64_t, bool) {}
void conv_gemm_lines(const PackedA&, int64_t, int64_t, const float*, const int64_t*, const int64_t*,
                     float*, int64_t) {}
void conv_wgrad_offsets(const float*, int64_t, int64_t, const float*, const int64_t*, int64_t,
                        int64_t, const int64_t*, int64_t, float*) {}

#endif

}  // namespace cpu
}  // namespace ember
