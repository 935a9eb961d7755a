// CUDA kernels of the fused scaled dot product attention (_scaled_dot_product_fused_attention and
// its backward; semantics: kernels/cpu/nn_attention.cpp), flash-attention style: the (L, S)
// scores are never stored. float32 / float64 compute in their own type, float16 / bfloat16 in
// float (the log-sum-exp output is then float32). Head dims E and Ev up to 256.
//
// Forward: a block owns kRows query rows of one (batch..., head) slice (kWarps warps, kRowsPerWarp
// rows each) and walks the keys in tiles of 32 held in shared memory: lane j scores key j of the
// tile against the warp's rows, a running max and sum per row (online softmax) rescale the
// output accumulators, each lane holding the output columns lane, lane + 32, ... Causal tiles
// past a block's last row are never loaded. Rows whose every key is masked give 0 and
// logsumexp -inf, as the CPU kernel.
// Backward: D = rowsum(dO * O) first; then dK and dV by a block per tile of kRows keys walking the
// query tiles (lane j: query j of the tile), and dQ by a block per tile of kRows queries walking
// the key tiles, each recomputing P = exp(scale q k^T + mask - lse) and dS = P (dO v^T - D). No
// atomics: every gradient element is written once, by one thread (deterministic).
// Argument checks: kernels/attention_rules.h (the CPU kernel's). q, k, v and the mask are read
// through their strides (the batch dims coalesced, up to kMaxBatchDims of them), so transposed
// views and broadcast masks are never copied.
// float16 / bfloat16 calls without a mask and with E == Ev in {32, 64, 96, 128} on sm_80+ take
// the tensor-core kernels of nn_attention_tc.cu instead (same outputs; the switch
// ember._C_cuda._set_sdpa_tensor_cores(False) keeps them here): the mma.sync kernels of
// nn_attention_mma.cu, or with ember._C_cuda._set_sdpa_mma(False) the WMMA ones.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "cuda/cuda_registry.h"
#include "cuda/nn_attention_mma.h"
#include "cuda/nn_attention_tc.h"
#include "cuda/nn_common.cuh"
#include "kernels/attention_rules.h"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {
namespace {

constexpr int kWarps = 4;                     // warps per block
constexpr int kRowsPerWarp = 4;               // rows each warp owns
constexpr int kRows = kWarps * kRowsPerWarp;  // a block's rows (queries, or keys for dK/dV)
constexpr int kThreads = kWarps * 32;         // threads per block
constexpr int kCols = 32;                     // the lanes' tile (keys, or queries for dK/dV)
constexpr int64_t kMaxHead = 256;             // E and Ev
constexpr int kMaxBatchDims = 8;              // coalesced batch dims read through strides
constexpr unsigned kFull = 0xffffffffu;

// ---- operands ----------------------------------------------------------------------------------

// Element offset of each flat batch index: coalesced batch dims (outermost first).
struct BatchMap {
  int nd = 0;
  int64_t size[kMaxBatchDims] = {};
  int64_t stride[kMaxBatchDims] = {};
};

__device__ __forceinline__ int64_t batch_offset(const BatchMap& m, int64_t b) {
  int64_t o = 0;
  for (int d = m.nd - 1; d >= 0; --d) {
    o += (b % m.size[d]) * m.stride[d];
    b /= m.size[d];
  }
  return o;
}

// A (batch..., rows, cols) operand read through its strides (elements).
struct View {
  const void* p = nullptr;
  BatchMap batch;
  int64_t row = 0, col = 0;
};

// The batch dims of t (all but the last two) with size-1 dims dropped and neighbours merged
// where their strides allow; false when more than kMaxBatchDims remain.
bool coalesce_batch(const Tensor& t, BatchMap& m) {
  const int64_t nb = t->dim() - 2;
  int64_t sz[64], st[64];
  int n = 0;
  for (int64_t d = 0; d < nb; ++d) {
    if (t->size(d) == 1) continue;
    if (n > 0 && st[n - 1] == t->stride(d) * t->size(d)) {
      sz[n - 1] *= t->size(d);
      st[n - 1] = t->stride(d);
    } else {
      if (n == 64) return false;
      sz[n] = t->size(d);
      st[n] = t->stride(d);
      ++n;
    }
  }
  if (n > kMaxBatchDims) return false;
  m.nd = n;
  for (int d = 0; d < n; ++d) {
    m.size[d] = sz[d];
    m.stride[d] = st[d];
  }
  return true;
}

// A View of t; t is replaced by a contiguous copy when its batch dims do not coalesce to
// kMaxBatchDims (the copy is kept alive by the caller's Tensor).
View make_view(Tensor& t, const char* op) {
  View v;
  if (!coalesce_batch(t, v.batch)) {
    t = nnk::contig(t, op);
    const bool ok = coalesce_batch(t, v.batch);
    EMBER_CHECK(ok, op, ": internal error: a contiguous tensor's batch dims did not coalesce");
  }
  v.p = t->data();
  v.row = t->stride(t->dim() - 2);
  v.col = t->stride(t->dim() - 1);
  return v;
}

template <class T>
__device__ __forceinline__ dev_opmath_t<T> elem(const View& v, int64_t base, int64_t r, int64_t c) {
  return to_op<T>(static_cast<const T*>(v.p)[base + r * v.row + c * v.col]);
}

enum MaskKind : int { kNoMask = 0, kBoolMask = 1, kAddMask = 2 };

// One attention problem: B slices of L queries and S keys (E wide), values Ev wide.
struct Problem {
  int64_t B = 0, L = 0, S = 0;
  int E = 0, Ev = 0;
  bool causal = false;
  double scale = 1.0;
  View q, k, v, mask;
  int mask_kind = kNoMask;
};

// The score of query i and key j (both in range) from their dot product: scaled, then the
// causal or bool mask (-inf) or the additive mask, as the CPU kernel's block_scores.
template <class T, class A>
__device__ __forceinline__ A masked_score(const Problem& p, int64_t moff, int64_t i, int64_t j,
                                          A dot) {
  A s = dot * static_cast<A>(p.scale);
  if (p.causal) {
    if (j > i) s = -std::numeric_limits<A>::infinity();
  } else if (p.mask_kind == kBoolMask) {
    const uint8_t m = static_cast<const uint8_t*>(p.mask.p)[moff + i * p.mask.row + j * p.mask.col];
    if (!m) s = -std::numeric_limits<A>::infinity();
  } else if (p.mask_kind == kAddMask) {
    s += elem<T>(p.mask, moff, i, j);
  }
  return s;
}

template <class A>
__device__ __forceinline__ A warp_sum(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// NaN-ignoring max (fmax), so every lane gets the same result even with NaN scores (which then
// reach the output through exp).
template <class A>
__device__ __forceinline__ A warp_max(A v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = ::fmax(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

// The leading dimension of a shared tile read down its rows by the 32 lanes (lane j reads row
// j): odd, so the lanes hit different banks.
__host__ __device__ __forceinline__ int odd_ld(int n) { return n | 1; }

template <class A>
__device__ __forceinline__ A* smem_base() {
  extern __shared__ __align__(16) unsigned char sdpa_smem[];
  return reinterpret_cast<A*>(sdpa_smem);
}

// Loads rows [r0, r0 + nrows) x cols [0, ncols) of slice `base` of v into dst (leading dim ld),
// zeros past `limit` rows; the whole block takes part.
template <class T, class A>
__device__ __forceinline__ void load_tile(A* dst, int ld, const View& v, int64_t base, int64_t r0,
                                          int nrows, int ncols, int64_t limit) {
  const int n = nrows * ncols;
  for (int idx = threadIdx.x; idx < n; idx += blockDim.x) {
    const int r = idx / ncols, c = idx - r * ncols;
    dst[r * ld + c] = r0 + r < limit ? elem<T>(v, base, r0 + r, c) : A(0);
  }
}

// ---- forward -----------------------------------------------------------------------------------

// acc[r][t] += sum over the tile's first jn rows jj of coef[r] of lane jj (a warp-wide
// broadcast) times tile[jj * ld + lane + 32 t] (0 past `width`): the product of a warp's rows of
// P or dS with a shared-memory tile of V or K.
template <int NH, class A>
__device__ __forceinline__ void accumulate_tile(A (&acc)[kRowsPerWarp][NH],
                                                const A (&coef)[kRowsPerWarp], const A* tile,
                                                int ld, int width, int jn, int lane) {
  for (int jj = 0; jj < jn; ++jj) {
    A cj[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) cj[r] = __shfl_sync(kFull, coef[r], jj);
#pragma unroll
    for (int t = 0; t < NH; ++t) {
      const int e = lane + 32 * t;
      const A x = e < width ? tile[jj * ld + e] : A(0);
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) acc[r][t] += cj[r] * x;
    }
  }
}

// NH: output columns per lane (Ev <= 32 * NH).
template <class T, int NH>
__global__ void __launch_bounds__(kThreads)
    sdpa_forward_kernel(const Problem p, T* __restrict__ out, dev_opmath_t<T>* __restrict__ lse) {
  using A = dev_opmath_t<T>;
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t ntiles = (p.L + kRows - 1) / kRows;
  const int64_t b = blockIdx.x / ntiles;
  const int64_t i0 = (blockIdx.x - b * ntiles) * kRows;
  const int64_t i1 = i0 + kRows < p.L ? i0 + kRows : p.L;
  const int E = p.E, Ev = p.Ev, ldk = odd_ld(E);
  A* qs = smem_base<A>();    // kRows x E
  A* ks = qs + kRows * E;    // kCols x ldk
  A* vs = ks + kCols * ldk;  // kCols x Ev
  const int64_t qoff = batch_offset(p.q.batch, b), koff = batch_offset(p.k.batch, b);
  const int64_t voff = batch_offset(p.v.batch, b);
  const int64_t moff = p.mask_kind == kNoMask ? 0 : batch_offset(p.mask.batch, b);
  load_tile<T>(qs, E, p.q, qoff, i0, kRows, E, p.L);

  A acc[kRowsPerWarp][NH];
  A m[kRowsPerWarp], l[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = kNegInf;
    l[r] = A(0);
#pragma unroll
    for (int t = 0; t < NH; ++t) acc[r][t] = A(0);
  }
  // Keys any row of the block may see (causal: up to the last row's position).
  const int64_t nkeys = p.causal ? (p.S < i1 ? p.S : i1) : p.S;
  for (int64_t k0 = 0; k0 < nkeys; k0 += kCols) {
    __syncthreads();  // the previous tile is consumed (and, first, nothing is pending)
    load_tile<T>(ks, ldk, p.k, koff, k0, kCols, E, nkeys);
    load_tile<T>(vs, Ev, p.v, voff, k0, kCols, Ev, nkeys);
    __syncthreads();
    const int64_t j = k0 + lane;
    A s[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) s[r] = A(0);
    const A* kr = ks + lane * ldk;
    for (int c = 0; c < E; ++c) {
      const A kv = kr[c];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) s[r] += qs[(warp * kRowsPerWarp + r) * E + c] * kv;
    }
    A pr[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t i = i0 + warp * kRowsPerWarp + r;
      const A x = (i < p.L && j < nkeys) ? masked_score<T, A>(p, moff, i, j, s[r]) : kNegInf;
      const A mnew = ::fmax(m[r], warp_max(x));
      // Nothing visible yet: shift by 0 (every exp below is then exp(-inf) = 0).
      const A shift = mnew == kNegInf ? A(0) : mnew;
      const A alpha = dm::exp(m[r] - shift);
      pr[r] = dm::exp(x - shift);
      l[r] = l[r] * alpha + warp_sum(pr[r]);
      m[r] = mnew;
#pragma unroll
      for (int t = 0; t < NH; ++t) acc[r][t] *= alpha;
    }
    const int64_t left = nkeys - k0;
    accumulate_tile<NH>(acc, pr, vs, Ev, Ev, left < kCols ? static_cast<int>(left) : kCols, lane);
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = i0 + warp * kRowsPerWarp + r;
    if (i >= p.L) continue;
    const int64_t row = b * p.L + i;
    // l == 0: every key masked (output 0, logsumexp -inf); l NaN: NaN everywhere.
    const bool none = l[r] == A(0);
    const A inv = none ? A(0) : A(1) / l[r];
#pragma unroll
    for (int t = 0; t < NH; ++t) {
      const int e = lane + 32 * t;
      if (e < Ev) out[row * Ev + e] = from_op<T>(none ? A(0) : acc[r][t] * inv);
    }
    if (lane == 0) lse[row] = none ? kNegInf : m[r] + dm::log(l[r]);
  }
}

// ---- backward ----------------------------------------------------------------------------------

// D[row] = sum_e dO[row, e] * O[row, e] (contiguous rows of Ev), a warp per row.
template <class T>
__global__ void sdpa_rowdot_kernel(const T* __restrict__ go, const T* __restrict__ o,
                                   dev_opmath_t<T>* __restrict__ d, int64_t rows, int Ev) {
  using A = dev_opmath_t<T>;
  const int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;  // whole warps leave together (blockDim is a multiple of 32)
  A s = A(0);
  for (int e = lane; e < Ev; e += 32) s += to_op<T>(go[row * Ev + e]) * to_op<T>(o[row * Ev + e]);
  s = warp_sum(s);
  if (lane == 0) d[row] = s;
}

// The saved statistics of the backward kernels: dO and O contiguous (B, L, Ev), lse and D (B, L)
// in the compute type.
template <class T>
struct Saved {
  const T* go;
  const dev_opmath_t<T>* lse;
  const dev_opmath_t<T>* d;
};

// P of a score from the row's log-sum-exp (a row with every key masked has lse -inf: P = 0).
template <class A>
__device__ __forceinline__ A prob(A s, A lse) {
  return lse == -std::numeric_limits<A>::infinity() ? A(0) : dm::exp(s - lse);
}

// dQ: a block per kRows queries; lane j takes key j of each tile of 32.
// dQ[i] = scale * sum_j dS[i, j] K[j], dS = P (dP - D), dP[i, j] = dO[i] . V[j].
template <class T, int NH>
__global__ void __launch_bounds__(kThreads)
    sdpa_grad_q_kernel(const Problem p, const Saved<T> sv, T* __restrict__ gq) {
  using A = dev_opmath_t<T>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t ntiles = (p.L + kRows - 1) / kRows;
  const int64_t b = blockIdx.x / ntiles;
  const int64_t i0 = (blockIdx.x - b * ntiles) * kRows;
  const int64_t i1 = i0 + kRows < p.L ? i0 + kRows : p.L;
  const int E = p.E, Ev = p.Ev, ldk = odd_ld(E), ldv = odd_ld(Ev);
  A* qs = smem_base<A>();    // kRows x E
  A* dos = qs + kRows * E;   // kRows x Ev
  A* ks = dos + kRows * Ev;  // kCols x ldk
  A* vs = ks + kCols * ldk;  // kCols x ldv
  const int64_t qoff = batch_offset(p.q.batch, b), koff = batch_offset(p.k.batch, b);
  const int64_t voff = batch_offset(p.v.batch, b);
  const int64_t moff = p.mask_kind == kNoMask ? 0 : batch_offset(p.mask.batch, b);
  load_tile<T>(qs, E, p.q, qoff, i0, kRows, E, p.L);
  {
    const T* gob = sv.go + b * p.L * Ev;
    for (int idx = threadIdx.x; idx < kRows * Ev; idx += blockDim.x) {
      const int r = idx / Ev, c = idx - r * Ev;
      dos[idx] = i0 + r < p.L ? to_op<T>(gob[(i0 + r) * Ev + c]) : A(0);
    }
  }
  A lse_r[kRowsPerWarp], d_r[kRowsPerWarp], acc[kRowsPerWarp][NH];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = i0 + warp * kRowsPerWarp + r;
    lse_r[r] = i < p.L ? sv.lse[b * p.L + i] : A(0);
    d_r[r] = i < p.L ? sv.d[b * p.L + i] : A(0);
#pragma unroll
    for (int t = 0; t < NH; ++t) acc[r][t] = A(0);
  }
  const int64_t nkeys = p.causal ? (p.S < i1 ? p.S : i1) : p.S;
  for (int64_t k0 = 0; k0 < nkeys; k0 += kCols) {
    __syncthreads();
    load_tile<T>(ks, ldk, p.k, koff, k0, kCols, E, nkeys);
    load_tile<T>(vs, ldv, p.v, voff, k0, kCols, Ev, nkeys);
    __syncthreads();
    const int64_t j = k0 + lane;
    A s[kRowsPerWarp], dp[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) s[r] = dp[r] = A(0);
    const A* kr = ks + lane * ldk;
    for (int c = 0; c < E; ++c) {
      const A kv = kr[c];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) s[r] += qs[(warp * kRowsPerWarp + r) * E + c] * kv;
    }
    const A* vr = vs + lane * ldv;
    for (int c = 0; c < Ev; ++c) {
      const A vv = vr[c];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) dp[r] += dos[(warp * kRowsPerWarp + r) * Ev + c] * vv;
    }
    A ds[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t i = i0 + warp * kRowsPerWarp + r;
      if (i < p.L && j < nkeys) {
        const A pij = prob(masked_score<T, A>(p, moff, i, j, s[r]), lse_r[r]);
        ds[r] = pij * (dp[r] - d_r[r]) * static_cast<A>(p.scale);
      } else {
        ds[r] = A(0);
      }
    }
    const int64_t left = nkeys - k0;
    accumulate_tile<NH>(acc, ds, ks, ldk, E, left < kCols ? static_cast<int>(left) : kCols, lane);
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = i0 + warp * kRowsPerWarp + r;
    if (i >= p.L) continue;
#pragma unroll
    for (int t = 0; t < NH; ++t) {
      const int e = lane + 32 * t;
      if (e < E) gq[(b * p.L + i) * E + e] = from_op<T>(acc[r][t]);
    }
  }
}

// dK and dV: a block per kRows keys; lane i takes query i of each tile of 32 queries.
// dV[j] = sum_i P[i, j] dO[i], dK[j] = scale * sum_i dS[i, j] Q[i].
template <class T, int NH>
__global__ void __launch_bounds__(kThreads)
    sdpa_grad_kv_kernel(const Problem p, const Saved<T> sv, T* __restrict__ gk,
                        T* __restrict__ gv) {
  using A = dev_opmath_t<T>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t ntiles = (p.S + kRows - 1) / kRows;
  const int64_t b = blockIdx.x / ntiles;
  const int64_t j0 = (blockIdx.x - b * ntiles) * kRows;
  const int E = p.E, Ev = p.Ev, ldq = odd_ld(E), ldo = odd_ld(Ev);
  A* ks = smem_base<A>();     // kRows x E
  A* vs = ks + kRows * E;     // kRows x Ev
  A* qs = vs + kRows * Ev;    // kCols x ldq
  A* dos = qs + kCols * ldq;  // kCols x ldo
  A* ls = dos + kCols * ldo;  // kCols: lse of the tile's queries
  A* dsum = ls + kCols;       // kCols: D of the tile's queries
  const int64_t qoff = batch_offset(p.q.batch, b), koff = batch_offset(p.k.batch, b);
  const int64_t voff = batch_offset(p.v.batch, b);
  const int64_t moff = p.mask_kind == kNoMask ? 0 : batch_offset(p.mask.batch, b);
  load_tile<T>(ks, E, p.k, koff, j0, kRows, E, p.S);
  load_tile<T>(vs, Ev, p.v, voff, j0, kRows, Ev, p.S);
  A gk_acc[kRowsPerWarp][NH], gv_acc[kRowsPerWarp][NH];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
    for (int t = 0; t < NH; ++t) gk_acc[r][t] = gv_acc[r][t] = A(0);
  const T* gob = sv.go + b * p.L * Ev;
  // Causal: query i sees key j only when j <= i, so the queries before j0 see none of these.
  const int64_t qstart = p.causal ? j0 : 0;
  for (int64_t q0 = qstart; q0 < p.L; q0 += kCols) {
    __syncthreads();
    load_tile<T>(qs, ldq, p.q, qoff, q0, kCols, E, p.L);
    for (int idx = threadIdx.x; idx < kCols * Ev; idx += blockDim.x) {
      const int r = idx / Ev, c = idx - r * Ev;
      dos[r * ldo + c] = q0 + r < p.L ? to_op<T>(gob[(q0 + r) * Ev + c]) : A(0);
    }
    if (threadIdx.x < kCols) {
      const int64_t i = q0 + threadIdx.x;
      ls[threadIdx.x] = i < p.L ? sv.lse[b * p.L + i] : A(0);
      dsum[threadIdx.x] = i < p.L ? sv.d[b * p.L + i] : A(0);
    }
    __syncthreads();
    const int64_t i = q0 + lane;
    A s[kRowsPerWarp], dp[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) s[r] = dp[r] = A(0);
    const A* qr = qs + lane * ldq;
    for (int c = 0; c < E; ++c) {
      const A qv = qr[c];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) s[r] += ks[(warp * kRowsPerWarp + r) * E + c] * qv;
    }
    const A* dr = dos + lane * ldo;
    for (int c = 0; c < Ev; ++c) {
      const A dv = dr[c];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) dp[r] += vs[(warp * kRowsPerWarp + r) * Ev + c] * dv;
    }
    A pij[kRowsPerWarp], ds[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t j = j0 + warp * kRowsPerWarp + r;
      if (i < p.L && j < p.S) {
        pij[r] = prob(masked_score<T, A>(p, moff, i, j, s[r]), ls[lane]);
        ds[r] = pij[r] * (dp[r] - dsum[lane]) * static_cast<A>(p.scale);
      } else {
        pij[r] = ds[r] = A(0);
      }
    }
    const int64_t left = p.L - q0;
    const int in = left < kCols ? static_cast<int>(left) : kCols;
    for (int ii = 0; ii < in; ++ii) {
      A pi[kRowsPerWarp], di[kRowsPerWarp];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        pi[r] = __shfl_sync(kFull, pij[r], ii);
        di[r] = __shfl_sync(kFull, ds[r], ii);
      }
#pragma unroll
      for (int t = 0; t < NH; ++t) {
        const int e = lane + 32 * t;
        const A qv = e < E ? qs[ii * ldq + e] : A(0);
        const A ov = e < Ev ? dos[ii * ldo + e] : A(0);
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
          gk_acc[r][t] += di[r] * qv;
          gv_acc[r][t] += pi[r] * ov;
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t j = j0 + warp * kRowsPerWarp + r;
    if (j >= p.S) continue;
#pragma unroll
    for (int t = 0; t < NH; ++t) {
      const int e = lane + 32 * t;
      if (e < E) gk[(b * p.S + j) * E + e] = from_op<T>(gk_acc[r][t]);
      if (e < Ev) gv[(b * p.S + j) * Ev + e] = from_op<T>(gv_acc[r][t]);
    }
  }
}

// ---- host --------------------------------------------------------------------------------------

// Runs f(std::integral_constant<int, NH>) with 32 * NH >= the widest head dim.
template <class F>
void with_head_bucket(int64_t h, const F& f) {
  if (h <= 32) return f(std::integral_constant<int, 1>());
  if (h <= 64) return f(std::integral_constant<int, 2>());
  if (h <= 128) return f(std::integral_constant<int, 4>());
  return f(std::integral_constant<int, 8>());
}

ScalarType acc_dtype(ScalarType dt) {
  return dt == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
}

// Lets `kernel` use `bytes` of dynamic shared memory (raising when the device has less).
template <class K>
void allow_smem(K* kernel, size_t bytes, const Problem& p, const Tensor& q, const char* op) {
  int optin = 0;
  EMBER_CUDA_CHECK(
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ix::device_index(q)));
  EMBER_CHECK(bytes <= static_cast<size_t>(optin), op, ": head dims E=", p.E, " and Ev=", p.Ev,
              " in ", dtype_name(q->dtype()), " need ", bytes,
              " bytes of shared memory per block, this device allows ", optin);
  if (bytes > 48 * 1024)
    EMBER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
}

unsigned grid_for(int64_t B, int64_t n, const char* op) {
  const int64_t blocks = B * ((n + kRows - 1) / kRows);
  EMBER_CHECK(blocks <= int64_t(0x7fffffff), op, ": too many rows for one launch (", B,
              " slices of ", n, ")");
  return static_cast<unsigned>(blocks);
}

// Validates the arguments (attention_rules.h, then what the CUDA kernels take: the floating
// dtypes, head dims up to kMaxHead) and lays out the problem; mask becomes its expansion to
// (..., L, S).
Problem plan(const char* op, Tensor& q, Tensor& k, Tensor& v, Tensor& mask, bool is_causal,
             double scale) {
  ix::check_cuda(q, op, "query");
  nnk::check_device(q, k, op, "key");
  nnk::check_device(q, v, op, "value");
  nnk::check_device(q, mask, op, "attn_mask");
  const nn::AttentionDims a = nn::check_attention(op, q, k, v, mask, is_causal);
  const ScalarType dt = q->dtype();
  EMBER_CHECK_KIND(dt == ScalarType::Float32 || dt == ScalarType::Float64 ||
                       dt == ScalarType::Float16 || dt == ScalarType::BFloat16,
                   Type, op,
                   ": expected float16, bfloat16, float32 or float64 query, key and value on "
                   "CUDA, got ",
                   dtype_name(dt));
  EMBER_CHECK(a.E <= kMaxHead && a.Ev <= kMaxHead, op, ": the CUDA kernels take head dims up to ",
              kMaxHead, ", got E=", a.E, " and Ev=", a.Ev);
  Problem p;
  p.B = a.B;
  p.L = a.L;
  p.S = a.S;
  p.E = static_cast<int>(a.E);
  p.Ev = static_cast<int>(a.Ev);
  p.causal = is_causal;
  // Without E the CPU kernel's scores are 0 (+ mask), unscaled (so a scale of inf gives no NaN).
  p.scale = a.E == 0 ? 1.0 : scale;
  if (mask) p.mask_kind = mask->dtype() == ScalarType::Bool ? kBoolMask : kAddMask;
  return p;
}

// The views of q, k, v and mask (after plan; the tensors stay alive in the caller).
void make_views(Problem& p, Tensor& q, Tensor& k, Tensor& v, Tensor& mask, const char* op) {
  p.q = make_view(q, op);
  p.k = make_view(k, op);
  p.v = make_view(v, op);
  if (mask) p.mask = make_view(mask, op);
}

size_t forward_smem(const Problem& p, size_t a) {
  return a * (size_t(kRows) * p.E + size_t(kCols) * odd_ld(p.E) + size_t(kCols) * p.Ev);
}
size_t grad_q_smem(const Problem& p, size_t a) {
  return a * (size_t(kRows) * (p.E + p.Ev) + size_t(kCols) * (odd_ld(p.E) + odd_ld(p.Ev)));
}
size_t grad_kv_smem(const Problem& p, size_t a) {
  return a * (size_t(kRows) * (p.E + p.Ev) + size_t(kCols) * (odd_ld(p.E) + odd_ld(p.Ev)) +
              2 * size_t(kCols));
}

}  // namespace

std::tuple<Tensor, Tensor> _scaled_dot_product_fused_attention(const std::vector<Tensor>& qkv,
                                                               const Tensor& attn_mask,
                                                               bool is_causal, double scale) {
  const char* op = "_scaled_dot_product_fused_attention";
  EMBER_CHECK(qkv.size() == 3, op, ": expected [query, key, value], got ", qkv.size(), " tensors");
  Tensor q = qkv[0], k = qkv[1], v = qkv[2], mask = attn_mask;
  Problem p = plan(op, q, k, v, mask, is_causal, scale);
  DeviceGuard guard(ix::device_index(q));
  const nn::AttentionDims dims{p.B, p.L, p.S, p.E, p.Ev};
  const ScalarType dt = q->dtype();
  Tensor out = empty(nn::attention_out_shape(q, dims), dt, q->device());
  Tensor lse = empty(nn::attention_lse_shape(q), acc_dtype(dt), q->device());
  if (out->numel() == 0) return {out, lse};
  EMBER_CHECK(p.S > 0, op, ": expected at least one key");
  const cudaStream_t st = ix::stream_of(q);
  if (sdpa_tc_eligible(q, mask, p.E, p.Ev)) {  // float16 / bfloat16, no mask: tensor cores
    if (sdpa_mma())  // the mma.sync kernels (nn_attention_mma.cu) unless switched off
      sdpa_mma_forward(q, k, v, p.causal, p.scale, p.B, p.L, p.S, out, lse, st);
    else
      sdpa_tc_forward(q, k, v, p.causal, p.scale, p.B, p.L, p.S, out, lse, st);
    return {out, lse};
  }
  make_views(p, q, k, v, mask, op);
  nnk::dispatch_floating(dt, op, "query", [&](auto tag) {
    using T = decltype(tag);
    using A = dev_opmath_t<T>;
    with_head_bucket(p.Ev, [&](auto nh) {
      constexpr int NH = decltype(nh)::value;
      const size_t bytes = forward_smem(p, sizeof(A));
      allow_smem(&sdpa_forward_kernel<T, NH>, bytes, p, q, op);
      sdpa_forward_kernel<T, NH><<<grid_for(p.B, p.L, op), kThreads, bytes, st>>>(
          p, out->data_as<T>(), lse->data_as<A>());
      check_launch(op);
    });
  });
  return {out, lse};
}

std::tuple<Tensor, Tensor, Tensor> _scaled_dot_product_fused_attention_backward(
    const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value,
    const Tensor& attn_mask, const Tensor& out, const Tensor& logsumexp, bool is_causal,
    double scale) {
  const char* op = "_scaled_dot_product_fused_attention_backward";
  Tensor q = query, k = key, v = value, mask = attn_mask;
  Problem p = plan(op, q, k, v, mask, is_causal, scale);
  nnk::check_device(q, grad_out, op, "grad_out");
  nnk::check_device(q, out, op, "out");
  nnk::check_device(q, logsumexp, op, "logsumexp");
  nn::check_attention_saved(op, q, {p.B, p.L, p.S, p.E, p.Ev}, grad_out, out, logsumexp);
  EMBER_CHECK_KIND(is_floating(grad_out->dtype()) && is_floating(out->dtype()) &&
                       is_floating(logsumexp->dtype()),
                   Type, op, ": expected floating-point grad_out, out and logsumexp, got ",
                   dtype_name(grad_out->dtype()), ", ", dtype_name(out->dtype()), " and ",
                   dtype_name(logsumexp->dtype()));
  DeviceGuard guard(ix::device_index(q));
  const ScalarType dt = q->dtype(), at = acc_dtype(dt);
  Tensor gq = empty(q->sizes(), dt, q->device());
  Tensor gk = empty(k->sizes(), dt, k->device());
  Tensor gv = empty(v->sizes(), dt, v->device());
  // E == 0 still has a dV (the scores are 0 + mask, P is not zero): only Ev == 0 has no gradient.
  if (p.B == 0 || p.S == 0 || p.L == 0 || p.Ev == 0) {
    ix::zero(gq);
    ix::zero(gk);
    ix::zero(gv);
    return {gq, gk, gv};
  }
  Tensor go = nnk::contig(grad_out, dt, op), o = nnk::contig(out, dt, op);
  Tensor l = nnk::contig(logsumexp, at, op);
  Tensor dsum = empty(nn::attention_lse_shape(q), at, q->device());
  const bool tc = sdpa_tc_eligible(q, mask, p.E, p.Ev);  // float16 / bfloat16: tensor cores
  if (!tc) make_views(p, q, k, v, mask, op);
  const cudaStream_t st = ix::stream_of(q);
  nnk::dispatch_floating(dt, op, "query", [&](auto tag) {
    using T = decltype(tag);
    using A = dev_opmath_t<T>;
    const int64_t rows = p.B * p.L;
    sdpa_rowdot_kernel<T><<<blocks_for(rows * 32), kBlockSize, 0, st>>>(
        go->data_as<T>(), o->data_as<T>(), dsum->data_as<A>(), rows, p.Ev);
    check_launch(op);
    if (tc) {
      if (sdpa_mma())
        sdpa_mma_backward(q, k, v, go, l, dsum, p.causal, p.scale, p.B, p.L, p.S, gq, gk, gv, st);
      else
        sdpa_tc_backward(q, k, v, go, l, dsum, p.causal, p.scale, p.B, p.L, p.S, gq, gk, gv, st);
      return;
    }
    const Saved<T> sv{go->data_as<T>(), l->data_as<A>(), dsum->data_as<A>()};
    with_head_bucket(std::max(p.E, p.Ev), [&](auto nh) {
      constexpr int NH = decltype(nh)::value;
      const size_t qbytes = grad_q_smem(p, sizeof(A));
      allow_smem(&sdpa_grad_q_kernel<T, NH>, qbytes, p, q, op);
      sdpa_grad_q_kernel<T, NH>
          <<<grid_for(p.B, p.L, op), kThreads, qbytes, st>>>(p, sv, gq->data_as<T>());
      check_launch(op);
      const size_t kvbytes = grad_kv_smem(p, sizeof(A));
      allow_smem(&sdpa_grad_kv_kernel<T, NH>, kvbytes, p, q, op);
      sdpa_grad_kv_kernel<T, NH><<<grid_for(p.B, p.S, op), kThreads, kvbytes, st>>>(
          p, sv, gk->data_as<T>(), gv->data_as<T>());
      check_launch(op);
    });
  });
  return {gq, gk, gv};
}

namespace {
void register_attention() {
  register_kernel("_scaled_dot_product_fused_attention", DeviceType::CUDA,
                  &_scaled_dot_product_fused_attention);
  register_kernel("_scaled_dot_product_fused_attention_backward", DeviceType::CUDA,
                  &_scaled_dot_product_fused_attention_backward);
}
}  // namespace

}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::register_attention)
