// The tensor-core kernels of the fused attention (nn_attention_tc.h says which calls take them;
// nn_attention.cu has the CUDA-core kernels for every other call and the op's contract), in
// the style of FlashAttention-2, with WMMA (nvcuda::wmma: 16x16x16 tiles of float16 / bfloat16
// inputs, float accumulators).
//
// Geometry: a block is 4 warps; it owns 64 rows (queries for the forward and dQ, keys for
// dK / dV), each warp 16 of them, and walks the other side in tiles of 64 held in shared memory
// (16-byte loads, rows padded to D + 8 elements). Scores go from the WMMA accumulators to a
// per-warp float scratch (16 x 68); the per-row work there is done by lane pairs (lanes 2r and
// 2r + 1 own row r, lane 2r + h the columns c = 2t + h), which stage P or dS in a per-warp
// 16-bit tile (16 x 72) for the next product.
//
// Forward: S = Q K^T; the online softmax in base 2 (scores times scale * log2(e); running max m
// and sum l per row); O, a per-warp float tile in shared memory (16 x D + 4), is rescaled there by
// the lane pairs, then O += P V by WMMA (loaded from and stored back to that tile); at the end O /
// l and logsumexp = (m + log2 l) ln 2. Causal (top-left aligned: query i sees the keys j <= i, as
// the CPU kernel) key tiles past the block's last row are never loaded; inside a tile the masked
// scores are -inf.
// Backward (after D = rowsum(dO * O), nn_attention.cu's kernel): dQ by a block per 64 queries
// walking the key tiles (dQ += dS K, accumulators in WMMA fragments), dK and dV by a block per 64
// keys walking the query tiles (dV += P^T dO, dK += dS^T Q), each recomputing
// P = exp(scale q.k - lse) and dS = P (dO.v - D). No atomics: every gradient element is written
// once (deterministic). The emulation of these kernels, tile op by tile op on the same shared
// memory addresses: tools/cuda_emulation/nn_attention_tc.py.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cuda/cuda_context.h"
#include "cuda/nn_attention_tc.h"
#include "cuda/nn_common.cuh"

namespace ember {
namespace cuda {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kTcWarps = 4;
constexpr int kTcThreads = kTcWarps * 32;
constexpr int kTcRows = 64;            // a block's rows; also the tile walked
constexpr int kTcWarpRows = 16;        // a warp's rows
constexpr int kScoreLd = kTcRows + 4;  // float scores / dP scratch: 16 x kScoreLd per warp
constexpr int kProbLd = kTcRows + 8;   // 16-bit P / dS: 16 x kProbLd per warp
constexpr unsigned kFull = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

std::atomic<bool> g_tensor_cores{true};

// ---- element types ------------------------------------------------------------------------------

// The WMMA element type of a storage type, and float -> it (round to nearest even).
template <class T>
struct Wmma;
template <>
struct Wmma<Half> {
  using type = __half;
  static __device__ __forceinline__ type from(float x) { return __float2half_rn(x); }
  static __device__ __forceinline__ float to(type x) { return __half2float(x); }
};
template <>
struct Wmma<BFloat16> {
  using type = __nv_bfloat16;
  static __device__ __forceinline__ type from(float x) { return __float2bfloat16_rn(x); }
  static __device__ __forceinline__ float to(type x) { return __bfloat162float(x); }
};

// ---- operands (TcOperand, TcProblem: nn_attention_tc.h) ------------------------------------

__device__ __forceinline__ int64_t tc_batch_offset(const TcOperand& v, int64_t b) {
  int64_t o = 0;
  for (int d = v.nd - 1; d >= 0; --d) {
    o += (b % v.size[d]) * v.stride[d];
    b /= v.size[d];
  }
  return o;
}

// The shared-memory layout (byte offsets; every tile pointer and row of 16 elements is a multiple
// of 32 bytes, as WMMA requires). Four 16-bit 64-row tiles a0..a3 (ld D + 8), two float
// per-warp scratches sf, df (64 x kScoreLd), two 16-bit per-warp tiles ph, dh (64 x kProbLd),
// and 2 x 64 floats of per-column statistics.
//   forward: a0 Q, a1 K, a2 V, sf S, ph P, then the float O (64 x D + 4) at `o`.
//   dQ:      a0 Q, a1 dO, a2 K, a3 V, sf S, df dP, dh dS.
//   dK, dV:  a0 K, a1 V, a2 Q, a3 dO, sf S^T, df dP^T, ph P^T, dh dS^T, stats lse and D.
template <int D>
struct TcLayout {
  static constexpr int ldh = D + 8;
  static constexpr int ldo = D + 4;
  static constexpr size_t tile16 = size_t(kTcRows) * ldh * 2;
  static constexpr size_t a0 = 0;
  static constexpr size_t a1 = a0 + tile16;
  static constexpr size_t a2 = a1 + tile16;
  static constexpr size_t a3 = a2 + tile16;
  // forward
  static constexpr size_t fwd_s = a3;
  static constexpr size_t fwd_p = fwd_s + size_t(kTcRows) * kScoreLd * 4;
  static constexpr size_t fwd_o = fwd_p + size_t(kTcRows) * kProbLd * 2;
  static constexpr size_t fwd_bytes = fwd_o + size_t(kTcRows) * ldo * 4;
  // backward
  static constexpr size_t sf = a3 + tile16;
  static constexpr size_t df = sf + size_t(kTcRows) * kScoreLd * 4;
  static constexpr size_t dh = df + size_t(kTcRows) * kScoreLd * 4;
  static constexpr size_t ph = dh + size_t(kTcRows) * kProbLd * 2;
  static constexpr size_t stats = ph + size_t(kTcRows) * kProbLd * 2;
  static constexpr size_t dq_bytes = ph;
  static constexpr size_t dkv_bytes = stats + 2 * size_t(kTcRows) * 4;
  static_assert(ldh % 8 == 0 && ldo % 4 == 0 && kScoreLd % 4 == 0 && kProbLd % 8 == 0,
                "WMMA leading dims");
  static_assert(tile16 % 32 == 0 && fwd_p % 32 == 0 && fwd_o % 32 == 0 && df % 32 == 0 &&
                    dh % 32 == 0 && ph % 32 == 0 && stats % 32 == 0,
                "WMMA tile pointers are 32-byte aligned");
};

__device__ __forceinline__ unsigned char* tc_smem() {
  extern __shared__ __align__(128) unsigned char sdpa_tc_smem[];
  return sdpa_tc_smem;
}

// Rows [r0, r0 + 64) of operand v's slice at `base` (elements) into the 16-bit tile dst (ld
// D + 8), zeros from row `limit` on; the whole block takes part, 16 bytes per thread and step.
template <class W, int D>
__device__ __forceinline__ void tc_load_rows(W* dst, const TcOperand& v, int64_t base, int64_t r0,
                                             int64_t limit) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  constexpr int ldh = D + 8;
  const W* src = static_cast<const W*>(v.p) + base;
  for (int idx = threadIdx.x; idx < kTcRows * kChunks; idx += kTcThreads) {
    const int r = idx / kChunks, c = (idx - r * kChunks) * 8;
    uint4 val = make_uint4(0u, 0u, 0u, 0u);
    if (r0 + r < limit) val = *reinterpret_cast<const uint4*>(src + (r0 + r) * v.row + c);
    *reinterpret_cast<uint4*>(dst + r * ldh + c) = val;
  }
}

// 8 floats -> 8 16-bit values in one 16-byte store.
template <class T>
__device__ __forceinline__ void tc_store8(T* dst, const float (&x)[8]) {
  using M = Wmma<T>;
  using W = typename M::type;
  union {
    uint4 u;
    W w[8];
  } pack;
#pragma unroll
  for (int e = 0; e < 8; ++e) pack.w[e] = M::from(x[e]);
  *reinterpret_cast<uint4*>(dst) = pack.u;
}

template <class W>
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, W, wmma::row_major>;
template <class W>
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, W, wmma::row_major>;
template <class W>
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, W, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// out (16 x 64, ld kScoreLd, float) = the warp's rows A (16 x D at a, ld D + 8) times the
// transpose of the tile B (64 x D at bt, ld D + 8): a scores block.
template <class W, int D>
__device__ __forceinline__ void tc_scores(float* out, const W* a, const W* bt) {
  constexpr int ldh = D + 8;
#pragma unroll
  for (int n = 0; n < kTcRows / 16; ++n) {
    FragC acc;
    wmma::fill_fragment(acc, 0.f);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      FragA<W> fa;
      FragBCol<W> fb;
      wmma::load_matrix_sync(fa, a + kk * 16, ldh);
      wmma::load_matrix_sync(fb, bt + n * 16 * ldh + kk * 16, ldh);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out + n * 16, acc, kScoreLd, wmma::mem_row_major);
  }
}

// ---- forward ------------------------------------------------------------------------------------

template <class T, int D>
__global__ void __launch_bounds__(kTcThreads)
    sdpa_tc_forward_kernel(const TcProblem p, T* __restrict__ out, float* __restrict__ lse) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // the host routes here only on sm_80+
#else
  using M = Wmma<T>;
  using W = typename M::type;
  using Lay = TcLayout<D>;
  constexpr int ldh = Lay::ldh, ldo = Lay::ldo;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  unsigned char* sm = tc_smem();
  W* qs = reinterpret_cast<W*>(sm + Lay::a0);
  W* ks = reinterpret_cast<W*>(sm + Lay::a1);
  W* vs = reinterpret_cast<W*>(sm + Lay::a2);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* sw = reinterpret_cast<float*>(sm + Lay::fwd_s) + warp * kTcWarpRows * kScoreLd;
  W* pw = reinterpret_cast<W*>(sm + Lay::fwd_p) + warp * kTcWarpRows * kProbLd;
  float* ow = reinterpret_cast<float*>(sm + Lay::fwd_o) + warp * kTcWarpRows * ldo;

  const int64_t ntiles = (p.L + kTcRows - 1) / kTcRows;
  const int64_t b = blockIdx.x / ntiles;
  int64_t t = blockIdx.x - b * ntiles;
  if (p.causal) t = ntiles - 1 - t;  // the longest rows start first
  const int64_t i0 = t * kTcRows;
  const int64_t i1 = i0 + kTcRows < p.L ? i0 + kTcRows : p.L;
  const int64_t nkeys = p.causal ? (p.S < i1 ? p.S : i1) : p.S;
  const int64_t koff = tc_batch_offset(p.k, b), voff = tc_batch_offset(p.v, b);

  tc_load_rows<W, D>(qs, p.q, tc_batch_offset(p.q, b), i0, p.L);
  for (int idx = lane; idx < kTcWarpRows * D; idx += 32) ow[(idx / D) * ldo + idx % D] = 0.f;
  const int r = lane >> 1, h = lane & 1;  // this lane's row of the warp, and column parity
  const int64_t i = i0 + warp * kTcWarpRows + r;
  float m = kNegInf, l = 0.f;  // running max (base 2) and sum of the row

  for (int64_t k0 = 0; k0 < nkeys; k0 += kTcRows) {
    __syncthreads();  // the previous tiles are consumed (first: Q and O are written)
    tc_load_rows<W, D>(ks, p.k, koff, k0, nkeys);
    tc_load_rows<W, D>(vs, p.v, voff, k0, nkeys);
    __syncthreads();
    tc_scores<W, D>(sw, qs + warp * kTcWarpRows * ldh, ks);
    __syncwarp();
    // Online softmax of row r over this tile's columns 2t + h.
    float x[kTcRows / 2];
    float mx = kNegInf;
#pragma unroll
    for (int tt = 0; tt < kTcRows / 2; ++tt) {
      const int c = 2 * tt + h;
      const int64_t j = k0 + c;
      const bool seen = j < nkeys && (!p.causal || j <= i);
      x[tt] = seen ? sw[r * kScoreLd + c] * p.scale_log2 : kNegInf;
      mx = fmaxf(mx, x[tt]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 1));
    const float mnew = fmaxf(m, mx);
    const float shift = mnew == kNegInf ? 0.f : mnew;  // nothing seen yet: every exp is 0
    const float alpha = exp2f(m - shift);
    float sum = 0.f;
#pragma unroll
    for (int tt = 0; tt < kTcRows / 2; ++tt) {
      const float e = exp2f(x[tt] - shift);
      sum += e;
      pw[r * kProbLd + 2 * tt + h] = M::from(e);
    }
    sum += __shfl_xor_sync(kFull, sum, 1);
    l = l * alpha + sum;
    m = mnew;
    for (int c = h; c < D; c += 2) ow[r * ldo + c] *= alpha;
    __syncwarp();
    // O += P V
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {
      FragC acc;
      wmma::load_matrix_sync(acc, ow + n * 16, ldo, wmma::mem_row_major);
#pragma unroll
      for (int kk = 0; kk < kTcRows / 16; ++kk) {
        FragA<W> fa;
        FragBRow<W> fb;
        wmma::load_matrix_sync(fa, pw + kk * 16, kProbLd);
        wmma::load_matrix_sync(fb, vs + kk * 16 * ldh + n * 16, ldh);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(ow + n * 16, acc, ldo, wmma::mem_row_major);
    }
  }
  __syncwarp();  // O's last store is visible to every lane of the warp
  // l == 0: every key masked (output 0, logsumexp -inf); l NaN: NaN everywhere.
  const bool none = l == 0.f;
  const float inv = none ? 0.f : 1.f / l;
  constexpr int kChunks = D / 8;
  for (int idx = lane; idx < kTcWarpRows * kChunks; idx += 32) {  // a multiple of 32 steps
    const int rr = idx / kChunks, c0 = (idx - rr * kChunks) * 8;
    const float inv_r = __shfl_sync(kFull, inv, 2 * rr);
    const int64_t row = i0 + warp * kTcWarpRows + rr;
    if (row >= p.L) continue;
    float x8[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) x8[e] = ow[rr * ldo + c0 + e] * inv_r;
    tc_store8(out + (b * p.L + row) * D + c0, x8);
  }
  if (h == 0 && i < p.L) lse[b * p.L + i] = none ? kNegInf : (m + log2f(l)) * kLn2;
#endif
}

// ---- backward -----------------------------------------------------------------------------------

// The epilogue of the backward kernels: the warp's 16 rows of an accumulator set (D / 16
// fragments), times `mul`, to dst (16-bit, ld D per row) rows row0 + rr while < nrows, in passes
// of 64 columns through the float scratch sw (16 x kScoreLd).
template <class T, int D>
__device__ __forceinline__ void tc_write_rows(T* dst, FragC (&acc)[D / 16], float* sw, float mul,
                                              int64_t row0, int64_t nrows, int lane) {
#pragma unroll
  for (int g = 0; g < D / 16; g += 4) {
    __syncwarp();  // the previous pass' (or the main loop's) reads of sw are done
#pragma unroll
    for (int n = g; n < (g + 4 < D / 16 ? g + 4 : D / 16); ++n)
      wmma::store_matrix_sync(sw + (n - g) * 16, acc[n], kScoreLd, wmma::mem_row_major);
    __syncwarp();
    const int width = (g + 4 < D / 16 ? 64 : (D / 16 - g) * 16);  // columns of this pass
    const int chunks = width / 8;
    for (int idx = lane; idx < kTcWarpRows * chunks; idx += 32) {
      const int rr = idx / chunks, c0 = (idx - rr * chunks) * 8;
      const int64_t row = row0 + rr;
      if (row >= nrows) continue;
      float x8[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) x8[e] = sw[rr * kScoreLd + c0 + e] * mul;
      tc_store8(dst + row * D + g * 16 + c0, x8);
    }
  }
}

// The saved tensors of the backward: dO (contiguous (B, L, D), as a TcOperand), the float32
// logsumexp and D = rowsum(dO * O), both contiguous (B, L).
struct TcSaved {
  TcOperand go;
  const float* lse = nullptr;
  const float* dsum = nullptr;
};

// dQ: a block per 64 queries (warp w: 16 of them) walking the key tiles.
// dQ[i] = scale * sum_j dS[i, j] K[j], dS = P (dP - D), dP[i, j] = dO[i] . V[j].
template <class T, int D>
__global__ void __launch_bounds__(kTcThreads)
    sdpa_tc_grad_q_kernel(const TcProblem p, const TcSaved sv, T* __restrict__ gq) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  using M = Wmma<T>;
  using W = typename M::type;
  using Lay = TcLayout<D>;
  constexpr int ldh = Lay::ldh;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  unsigned char* sm = tc_smem();
  W* qs = reinterpret_cast<W*>(sm + Lay::a0);
  W* dos = reinterpret_cast<W*>(sm + Lay::a1);
  W* ks = reinterpret_cast<W*>(sm + Lay::a2);
  W* vs = reinterpret_cast<W*>(sm + Lay::a3);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* sw = reinterpret_cast<float*>(sm + Lay::sf) + warp * kTcWarpRows * kScoreLd;
  float* dw = reinterpret_cast<float*>(sm + Lay::df) + warp * kTcWarpRows * kScoreLd;
  W* dsw = reinterpret_cast<W*>(sm + Lay::dh) + warp * kTcWarpRows * kProbLd;

  const int64_t ntiles = (p.L + kTcRows - 1) / kTcRows;
  const int64_t b = blockIdx.x / ntiles;
  int64_t t = blockIdx.x - b * ntiles;
  if (p.causal) t = ntiles - 1 - t;
  const int64_t i0 = t * kTcRows;
  const int64_t i1 = i0 + kTcRows < p.L ? i0 + kTcRows : p.L;
  const int64_t nkeys = p.causal ? (p.S < i1 ? p.S : i1) : p.S;
  const int64_t koff = tc_batch_offset(p.k, b), voff = tc_batch_offset(p.v, b);

  tc_load_rows<W, D>(qs, p.q, tc_batch_offset(p.q, b), i0, p.L);
  tc_load_rows<W, D>(dos, sv.go, tc_batch_offset(sv.go, b), i0, p.L);
  const int r = lane >> 1, h = lane & 1;
  const int64_t i = i0 + warp * kTcWarpRows + r;
  const float lse_i = i < p.L ? sv.lse[b * p.L + i] * kLog2e : 0.f;  // base 2
  const float d_i = i < p.L ? sv.dsum[b * p.L + i] : 0.f;
  FragC acc[D / 16];
#pragma unroll
  for (int n = 0; n < D / 16; ++n) wmma::fill_fragment(acc[n], 0.f);

  for (int64_t k0 = 0; k0 < nkeys; k0 += kTcRows) {
    __syncthreads();  // the previous tiles are consumed (first: Q and dO are written)
    tc_load_rows<W, D>(ks, p.k, koff, k0, nkeys);
    tc_load_rows<W, D>(vs, p.v, voff, k0, nkeys);
    __syncthreads();
    tc_scores<W, D>(sw, qs + warp * kTcWarpRows * ldh, ks);
    tc_scores<W, D>(dw, dos + warp * kTcWarpRows * ldh, vs);
    __syncwarp();
#pragma unroll
    for (int tt = 0; tt < kTcRows / 2; ++tt) {
      const int c = 2 * tt + h;
      const int64_t j = k0 + c;
      const bool seen = i < p.L && j < nkeys && (!p.causal || j <= i) && lse_i != kNegInf;
      const float pij = seen ? exp2f(sw[r * kScoreLd + c] * p.scale_log2 - lse_i) : 0.f;
      dsw[r * kProbLd + c] = M::from(pij * (dw[r * kScoreLd + c] - d_i));
    }
    __syncwarp();
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {
#pragma unroll
      for (int kk = 0; kk < kTcRows / 16; ++kk) {
        FragA<W> fa;
        FragBRow<W> fb;
        wmma::load_matrix_sync(fa, dsw + kk * 16, kProbLd);
        wmma::load_matrix_sync(fb, ks + kk * 16 * ldh + n * 16, ldh);
        wmma::mma_sync(acc[n], fa, fb, acc[n]);
      }
    }
  }
  tc_write_rows<T, D>(gq + b * p.L * D, acc, sw, p.scale, i0 + warp * kTcWarpRows, p.L, lane);
#endif
}

// dK and dV: a block per 64 keys (warp w: 16 of them) walking the query tiles.
// dV[j] = sum_i P[i, j] dO[i], dK[j] = scale * sum_i dS[i, j] Q[i]: from P^T and dS^T (key rows).
template <class T, int D>
__global__ void __launch_bounds__(kTcThreads)
    sdpa_tc_grad_kv_kernel(const TcProblem p, const TcSaved sv, T* __restrict__ gk,
                           T* __restrict__ gv) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  using M = Wmma<T>;
  using W = typename M::type;
  using Lay = TcLayout<D>;
  constexpr int ldh = Lay::ldh;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  unsigned char* sm = tc_smem();
  W* ks = reinterpret_cast<W*>(sm + Lay::a0);
  W* vs = reinterpret_cast<W*>(sm + Lay::a1);
  W* qs = reinterpret_cast<W*>(sm + Lay::a2);
  W* dos = reinterpret_cast<W*>(sm + Lay::a3);
  float* lse_s = reinterpret_cast<float*>(sm + Lay::stats);  // the tile's lse (base 2)
  float* d_s = lse_s + kTcRows;                              // and D
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* sw = reinterpret_cast<float*>(sm + Lay::sf) + warp * kTcWarpRows * kScoreLd;
  float* dw = reinterpret_cast<float*>(sm + Lay::df) + warp * kTcWarpRows * kScoreLd;
  W* pw = reinterpret_cast<W*>(sm + Lay::ph) + warp * kTcWarpRows * kProbLd;
  W* dsw = reinterpret_cast<W*>(sm + Lay::dh) + warp * kTcWarpRows * kProbLd;

  const int64_t ntiles = (p.S + kTcRows - 1) / kTcRows;
  const int64_t b = blockIdx.x / ntiles;
  const int64_t j0 = (blockIdx.x - b * ntiles) * kTcRows;
  const int64_t qoff = tc_batch_offset(p.q, b), gooff = tc_batch_offset(sv.go, b);

  tc_load_rows<W, D>(ks, p.k, tc_batch_offset(p.k, b), j0, p.S);
  tc_load_rows<W, D>(vs, p.v, tc_batch_offset(p.v, b), j0, p.S);
  const int r = lane >> 1, h = lane & 1;
  const int64_t j = j0 + warp * kTcWarpRows + r;
  FragC dk[D / 16], dv[D / 16];
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
    wmma::fill_fragment(dk[n], 0.f);
    wmma::fill_fragment(dv[n], 0.f);
  }
  // Causal: query i sees key j only when j <= i, so the queries before j0 see none of these.
  const int64_t qstart = p.causal ? j0 : 0;
  for (int64_t q0 = qstart; q0 < p.L; q0 += kTcRows) {
    __syncthreads();  // the previous tiles are consumed (first: K and V are written)
    tc_load_rows<W, D>(qs, p.q, qoff, q0, p.L);
    tc_load_rows<W, D>(dos, sv.go, gooff, q0, p.L);
    if (threadIdx.x < kTcRows) {
      const int64_t ii = q0 + threadIdx.x;
      lse_s[threadIdx.x] = ii < p.L ? sv.lse[b * p.L + ii] * kLog2e : 0.f;
      d_s[threadIdx.x] = ii < p.L ? sv.dsum[b * p.L + ii] : 0.f;
    }
    __syncthreads();
    tc_scores<W, D>(sw, ks + warp * kTcWarpRows * ldh, qs);   // S^T: the warp's keys x queries
    tc_scores<W, D>(dw, vs + warp * kTcWarpRows * ldh, dos);  // dP^T
    __syncwarp();
#pragma unroll
    for (int tt = 0; tt < kTcRows / 2; ++tt) {
      const int c = 2 * tt + h;
      const int64_t ii = q0 + c;
      const float lse_c = lse_s[c];
      const bool seen = ii < p.L && j < p.S && (!p.causal || j <= ii) && lse_c != kNegInf;
      const float pij = seen ? exp2f(sw[r * kScoreLd + c] * p.scale_log2 - lse_c) : 0.f;
      pw[r * kProbLd + c] = M::from(pij);
      dsw[r * kProbLd + c] = M::from(pij * (dw[r * kScoreLd + c] - d_s[c]));
    }
    __syncwarp();
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {
#pragma unroll
      for (int kk = 0; kk < kTcRows / 16; ++kk) {
        FragA<W> fa;
        FragBRow<W> fb;
        wmma::load_matrix_sync(fa, pw + kk * 16, kProbLd);
        wmma::load_matrix_sync(fb, dos + kk * 16 * ldh + n * 16, ldh);
        wmma::mma_sync(dv[n], fa, fb, dv[n]);
        wmma::load_matrix_sync(fa, dsw + kk * 16, kProbLd);
        wmma::load_matrix_sync(fb, qs + kk * 16 * ldh + n * 16, ldh);
        wmma::mma_sync(dk[n], fa, fb, dk[n]);
      }
    }
  }
  const int64_t row0 = j0 + warp * kTcWarpRows;
  tc_write_rows<T, D>(gv + b * p.S * D, dv, sw, 1.f, row0, p.S, lane);
  tc_write_rows<T, D>(gk + b * p.S * D, dk, sw, p.scale, row0, p.S, lane);
#endif
}

// ---- host ---------------------------------------------------------------------------------------

int device_major(int device) {
  static std::atomic<int> cache[64];  // 0: not asked yet
  if (device < 0 || device >= 64) return 0;
  int v = cache[device].load(std::memory_order_relaxed);
  if (v == 0) {
    EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrComputeCapabilityMajor, device));
    cache[device].store(v, std::memory_order_relaxed);
  }
  return v;
}

unsigned tc_grid(int64_t B, int64_t n, const char* op) {
  const int64_t blocks = B * ((n + kTcRows - 1) / kTcRows);
  EMBER_CHECK(blocks >= 1 && blocks <= int64_t(0x7fffffff), op, ": too many rows for one launch (",
              B, " slices of ", n, ")");
  return static_cast<unsigned>(blocks);
}

template <class K>
void tc_allow_smem(K* kernel, size_t bytes, int device, const char* op) {
  int optin = 0;
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  EMBER_CHECK(bytes <= static_cast<size_t>(optin), op, ": the tensor-core kernel needs ", bytes,
              " bytes of shared memory per block, this device allows ", optin);
  if (bytes > 48 * 1024)
    EMBER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
}

// Runs f(T{}, std::integral_constant<int, D>{}) for q's dtype and head dim.
template <class F>
void tc_dispatch(ScalarType dt, int64_t E, const F& f) {
  auto with_dim = [&](auto tag) {
    switch (E) {
      case 32:
        return f(tag, std::integral_constant<int, 32>());
      case 64:
        return f(tag, std::integral_constant<int, 64>());
      case 96:
        return f(tag, std::integral_constant<int, 96>());
      case 128:
        return f(tag, std::integral_constant<int, 128>());
      default:
        EMBER_CHECK(false, "sdpa (tensor cores): internal error: head dim ", E);
    }
  };
  if (dt == ScalarType::Float16) return with_dim(Half{});
  EMBER_CHECK(dt == ScalarType::BFloat16, "sdpa (tensor cores): internal error: dtype ",
              dtype_name(dt));
  return with_dim(BFloat16{});
}

// Whether t's layout is one TcOperand reads: last dim contiguous, every other stride a multiple
// of 8 elements, the data 16-byte aligned, the batch dims coalescing to kTcMaxBatchDims.
bool tc_operand(const Tensor& t, TcOperand& v) {
  const int64_t d = t->dim();
  if (t->stride(d - 1) != 1 || t->stride(d - 2) % 8 != 0) return false;
  if (reinterpret_cast<uintptr_t>(t->data()) % 16 != 0) return false;
  int64_t sz[kTcMaxBatchDims], st[kTcMaxBatchDims];
  int n = 0;
  for (int64_t i = 0; i < d - 2; ++i) {
    if (t->size(i) == 1) continue;
    if (t->stride(i) % 8 != 0) return false;
    if (n > 0 && st[n - 1] == t->stride(i) * t->size(i)) {
      sz[n - 1] *= t->size(i);
      st[n - 1] = t->stride(i);
    } else {
      if (n == kTcMaxBatchDims) return false;
      sz[n] = t->size(i);
      st[n] = t->stride(i);
      ++n;
    }
  }
  v.p = t->data();
  v.nd = n;
  for (int i = 0; i < n; ++i) {
    v.size[i] = sz[i];
    v.stride[i] = st[i];
  }
  v.row = t->stride(d - 2);
  return true;
}

}  // namespace

// The TcOperand of t, replacing t by a fresh contiguous copy when its layout is not one.
TcOperand tc_view(Tensor& t, const char* op) {
  TcOperand v;
  if (tc_operand(t, v)) return v;
  Tensor c = empty(t->sizes(), t->dtype(), t->device());
  red::write_permuted(c, nnk::contig(t, op), DimVector{}, op);
  t = c;
  const bool ok = tc_operand(t, v);
  EMBER_CHECK(ok, op, ": internal error: a fresh contiguous tensor is not a tensor-core operand");
  return v;
}

TcProblem tc_problem(int64_t B, int64_t L, int64_t S, bool causal, double scale) {
  TcProblem p;
  p.B = B;
  p.L = L;
  p.S = S;
  p.causal = causal;
  p.scale = static_cast<float>(scale);
  p.scale_log2 = static_cast<float>(scale * 1.4426950408889634);
  return p;
}

bool sdpa_tensor_cores() { return g_tensor_cores.load(std::memory_order_relaxed); }
void set_sdpa_tensor_cores(bool on) { g_tensor_cores.store(on, std::memory_order_relaxed); }

bool sdpa_tc_eligible(const Tensor& q, const Tensor& mask, int64_t E, int64_t Ev) {
  if (!sdpa_tensor_cores() || mask) return false;
  const ScalarType dt = q->dtype();
  if (dt != ScalarType::Float16 && dt != ScalarType::BFloat16) return false;
  if (E != Ev || (E != 32 && E != 64 && E != 96 && E != 128)) return false;
  return device_major(ix::device_index(q)) >= 8;
}

void sdpa_tc_forward(const Tensor& query, const Tensor& key, const Tensor& value, bool causal,
                     double scale, int64_t B, int64_t L, int64_t S, Tensor& out, Tensor& lse,
                     cudaStream_t stream) {
  const char* op = "_scaled_dot_product_fused_attention";
  Tensor q = query, k = key, v = value;
  TcProblem p = tc_problem(B, L, S, causal, scale);
  p.q = tc_view(q, op);
  p.k = tc_view(k, op);
  p.v = tc_view(v, op);
  const int device = ix::device_index(q);
  tc_dispatch(q->dtype(), q->size(q->dim() - 1), [&](auto tag, auto dim) {
    using T = decltype(tag);
    constexpr int D = decltype(dim)::value;
    const size_t bytes = TcLayout<D>::fwd_bytes;
    tc_allow_smem(&sdpa_tc_forward_kernel<T, D>, bytes, device, op);
    sdpa_tc_forward_kernel<T, D><<<tc_grid(B, L, op), kTcThreads, bytes, stream>>>(
        p, out->data_as<T>(), lse->data_as<float>());
    check_launch(op);
  });
}

void sdpa_tc_backward(const Tensor& query, const Tensor& key, const Tensor& value,
                      const Tensor& grad_out, const Tensor& lse, const Tensor& dsum, bool causal,
                      double scale, int64_t B, int64_t L, int64_t S, Tensor& gq, Tensor& gk,
                      Tensor& gv, cudaStream_t stream) {
  const char* op = "_scaled_dot_product_fused_attention_backward";
  Tensor q = query, k = key, v = value, go = grad_out;
  TcProblem p = tc_problem(B, L, S, causal, scale);
  p.q = tc_view(q, op);
  p.k = tc_view(k, op);
  p.v = tc_view(v, op);
  TcSaved sv;
  sv.go = tc_view(go, op);
  sv.lse = lse->data_as<float>();
  sv.dsum = dsum->data_as<float>();
  const int device = ix::device_index(q);
  tc_dispatch(q->dtype(), q->size(q->dim() - 1), [&](auto tag, auto dim) {
    using T = decltype(tag);
    constexpr int D = decltype(dim)::value;
    const size_t qbytes = TcLayout<D>::dq_bytes;
    tc_allow_smem(&sdpa_tc_grad_q_kernel<T, D>, qbytes, device, op);
    sdpa_tc_grad_q_kernel<T, D>
        <<<tc_grid(B, L, op), kTcThreads, qbytes, stream>>>(p, sv, gq->data_as<T>());
    check_launch(op);
    const size_t kvbytes = TcLayout<D>::dkv_bytes;
    tc_allow_smem(&sdpa_tc_grad_kv_kernel<T, D>, kvbytes, device, op);
    sdpa_tc_grad_kv_kernel<T, D><<<tc_grid(B, S, op), kTcThreads, kvbytes, stream>>>(
        p, sv, gk->data_as<T>(), gv->data_as<T>());
    check_launch(op);
  });
}

}  // namespace cuda
}  // namespace ember
