// The mma.sync kernels of the fused attention (nn_attention_mma.h says which calls take them;
// nn_attention.cu has the op's contract), FlashAttention-2 style on raw PTX:
// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16} for every product, ldmatrix (.trans for the
// operands read across their rows) for the fragments, cp.async (16 bytes) for the tiles.
//
// Fragments (PTX ISA, m16n8k16, 16-bit inputs; g = lane / 4, t = lane % 4): A (16 x 16) is four
// b32 registers, {A[g][2t..2t+1], A[g+8][2t..], A[g][2t+8..], A[g+8][2t+8..]}; B (16 x 8) two,
// {B[2t..2t+1][g], B[2t+8..2t+9][g]}; C / D (16 x 8 floats) four, {C[g][2t], C[g][2t+1],
// C[g+8][2t], C[g+8][2t+1]}. So the accumulators of two adjacent n8 tiles of a score row block,
// rounded in pairs, are the A fragment of the next product (P V, P^T dO, dS K, dS^T Q) as they
// stand: the scores never leave registers. Rows of a quad (4 lanes) reduce with __shfl_xor 1, 2.
//
// Geometry: a block is 4 warps and owns 64 rows (queries for the forward and dQ, keys for dK /
// dV), warp w the rows 16 w .. 16 w + 15; it walks the other side in tiles (64 keys; 64 queries
// for dK / dV at D <= 64, 32 above, for registers) that cp.async brings into shared memory one
// tile ahead of the one in use (two buffers, one __syncthreads per tile). Rows are padded to
// D + 8 elements: the 8 rows of an ldmatrix matrix then start 16 bytes apart modulo 128, on
// distinct banks. The forward keeps Q's fragments in registers; the backward re-reads its A
// operands (Q, dO; K, V) from shared memory for registers.
//
// Forward: S = Q K^T times scale log2(e) (base 2), online softmax per row (running max m, the
// lane's partial sum l, reduced at the end), O = O alpha + P V; at the end O / l and logsumexp =
// (m + log2 l) ln 2. Causal (top-left: query i sees the keys j <= i) key tiles past a block's
// last row are never loaded, a warp skips the tiles past its own last row, and only tiles that
// cross a warp's diagonal (or the keys' end) are masked.
// Backward (option (a) of FlashAttention-2's two, as the WMMA path): dQ by a block per 64
// queries walking the key tiles, dK / dV by a block per 64 keys walking the query tiles, each
// recomputing P = exp2(S scale log2(e) - lse log2(e)) and dS = P (dP - D) with D = rowsum(dO O)
// from nn_attention.cu. That is 7 tile products per (query, key) tile instead of 5 with dQ by
// float atomics, but no float32 workspace to clear and convert, no atomic traffic, and the
// gradients are deterministic (every element written once, by one thread).
// The emulation of these kernels, lane by lane on the same shared-memory bytes:
// tools/cuda_emulation/nn_attention_mma.py.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "cuda/cuda_context.h"
#include "cuda/nn_attention_mma.h"
#include "cuda/nn_attention_tc.h"
#include "cuda/nn_common.cuh"

namespace ember {
namespace cuda {

namespace {

constexpr int kThreads = 128;  // 4 warps
constexpr int kRows = 64;      // a block's own rows; also the forward's and dQ's key tile
constexpr int kWarpRows = 16;  // a warp's rows
constexpr unsigned kFull = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

std::atomic<bool> g_mma{true};

// dK / dV's query tile: 64 rows at D <= 64; 32 above, where the dK and dV accumulators (D / 2
// floats each per lane) leave fewer registers for the scores.
template <int D>
constexpr int kv_tile() {
  return D <= 64 ? 64 : 32;
}

// The shared-memory layout (bytes). pitch: a row of D + 8 16-bit elements.
//   forward: Q, then K and V of buffer b at k(b), v(b).
//   dQ:      Q, dO, then K and V of buffer b.
//   dK, dV:  K, V, then Q and dO (QT rows) of buffer b, then per buffer QT floats of
//            logsumexp (base 2) and QT of D.
template <int D>
struct MmaLayout {
  static constexpr int pitch = (D + 8) * 2;
  static constexpr int tile = kRows * pitch;
  static constexpr int qt = kv_tile<D>();
  static constexpr int qtile = qt * pitch;
  static constexpr int fwd_k(int b) { return tile + b * 2 * tile; }
  static constexpr int fwd_v(int b) { return 2 * tile + b * 2 * tile; }
  static constexpr int fwd_bytes = 5 * tile;
  static constexpr int dq_do = tile;
  static constexpr int dq_k(int b) { return 2 * tile + b * 2 * tile; }
  static constexpr int dq_v(int b) { return 3 * tile + b * 2 * tile; }
  static constexpr int dq_bytes = 6 * tile;
  static constexpr int kv_v = tile;
  static constexpr int kv_q(int b) { return 2 * tile + b * 2 * qtile; }
  static constexpr int kv_do(int b) { return 2 * tile + qtile + b * 2 * qtile; }
  static constexpr int kv_stats = 2 * tile + 4 * qtile;
  static constexpr int kv_lse(int b) { return kv_stats + b * 2 * qt * 4; }
  static constexpr int kv_d(int b) { return kv_stats + b * 2 * qt * 4 + qt * 4; }
  static constexpr int kv_bytes = kv_stats + 4 * qt * 4;
  static_assert(pitch % 16 == 0 && (pitch / 16) % 2 == 1, "rows 16-byte aligned, odd chunks");
};

// ---- PTX ----------------------------------------------------------------------------------------

__device__ __forceinline__ unsigned char* smem_ptr() {
  extern __shared__ __align__(128) unsigned char sdpa_mma_smem[];
  return sdpa_mma_smem;
}

__device__ __forceinline__ uint32_t smem_addr() {
  return static_cast<uint32_t>(__cvta_generic_to_shared(smem_ptr()));
}

// 16 bytes from global src to shared dst; src_bytes 0 reads nothing and writes zeros.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
               "l"(__cvta_generic_to_global(src)), "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

__device__ __forceinline__ float ex2(float x) {  // 2^x (-inf -> 0), subnormal results flushed
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// The mma of a storage type, and two floats -> one b32 register of two 16-bit values (round to
// nearest even; lo in the low half, the lower column of a fragment pair).
template <class T>
struct Mma;
template <>
struct Mma<Half> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
  }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <>
struct Mma<BFloat16> {
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
  }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, "
        "%7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// ldmatrix row addresses (byte offsets in a tile of pitch P), lane l supplying row l % 8 of
// matrix l / 8:
//  a_lane: matrices (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15) -- an A
//          fragment of the 16 x 16 block; with .trans, the B fragments of two n8 tiles
//          (cols 0-7, 8-15) of a 16 (k) x 16 block stored k-major (V, dO, Q, K read across).
//  b_lane: matrices (rows 0-7, cols 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15) -- the B
//          fragments of two n8 tiles (rows 0-7, 8-15) of a block stored n-major (K^T, V^T, Q^T,
//          dO^T: the rows are the n side).
template <int P>
__device__ __forceinline__ uint32_t a_lane(int lane) {
  return (lane & 15) * P + (lane >> 4) * 16;
}
template <int P>
__device__ __forceinline__ uint32_t b_lane(int lane) {
  return ((lane & 7) + (lane >> 4) * 8) * P + ((lane >> 3) & 1) * 16;
}

// ---- operands -----------------------------------------------------------------------------------

__device__ __forceinline__ int64_t batch_offset(const TcOperand& v, int64_t b) {
  int64_t o = 0;
  for (int d = v.nd - 1; d >= 0; --d) {
    o += (b % v.size[d]) * v.stride[d];
    b /= v.size[d];
  }
  return o;
}

// Rows [r0, r0 + N) of operand v's slice at element `base` into the tile at shared byte dst
// (pitch (D + 8) * 2), rows from `limit` on zero-filled; 16 bytes per thread and step, issued
// by cp.async (the caller commits and waits).
template <int D, int N>
__device__ __forceinline__ void load_tile(uint32_t dst, const TcOperand& v, int64_t base,
                                          int64_t r0, int64_t limit) {
  constexpr int kChunks = D / 8;
  constexpr int kPitch = (D + 8) * 2;
  static_assert(N * kChunks % kThreads == 0, "whole steps");
  const unsigned char* src = static_cast<const unsigned char*>(v.p) + base * 2;
#pragma unroll
  for (int it = 0; it < N * kChunks / kThreads; ++it) {
    const int idx = it * kThreads + threadIdx.x;
    const int r = idx / kChunks, c = idx - r * kChunks;
    const bool ok = r0 + r < limit;
    const void* s = ok ? src + ((r0 + r) * v.row + c * 8) * 2 : src;
    cp_async16(dst + r * kPitch + c * 16, s, ok ? 16 : 0);
  }
}

// acc[n] (16 x 8 each, N / 8 tiles) = the warp's 16 rows of A (at shared byte a, pitch P) times
// the transpose of the N rows of B (at shared byte b): a block of scores.
template <class T, int D, int N>
__device__ __forceinline__ void scores(float (&acc)[N / 8][4], uint32_t a, uint32_t b, int lane) {
  constexpr int P = (D + 8) * 2;
#pragma unroll
  for (int n = 0; n < N / 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t fa[4];
    ldmatrix_x4(fa, a + a_lane<P>(lane) + kk * 32);
#pragma unroll
    for (int np = 0; np < N / 16; ++np) {
      uint32_t fb[4];
      ldmatrix_x4(fb, b + np * 16 * P + b_lane<P>(lane) + kk * 32);
      Mma<T>::mma(acc[2 * np], fa, fb[0], fb[1]);
      Mma<T>::mma(acc[2 * np + 1], fa, fb[2], fb[3]);
    }
  }
}

// acc (the warp's 16 rows x D) += X (16 x N, accumulator-layout floats, rounded here) times the
// N x D tile at shared byte b (rows the k side, read by ldmatrix .trans).
template <class T, int D, int N>
__device__ __forceinline__ void accumulate(float (&acc)[D / 8][4], const float (&x)[N / 8][4],
                                           uint32_t b, int lane) {
  constexpr int P = (D + 8) * 2;
#pragma unroll
  for (int kk = 0; kk < N / 16; ++kk) {
    const uint32_t fa[4] = {Mma<T>::pack(x[2 * kk][0], x[2 * kk][1]),
                            Mma<T>::pack(x[2 * kk][2], x[2 * kk][3]),
                            Mma<T>::pack(x[2 * kk + 1][0], x[2 * kk + 1][1]),
                            Mma<T>::pack(x[2 * kk + 1][2], x[2 * kk + 1][3])};
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t fb[4];
      ldmatrix_x4_trans(fb, b + kk * 16 * P + a_lane<P>(lane) + dp * 32);
      Mma<T>::mma(acc[2 * dp], fa, fb[0], fb[1]);
      Mma<T>::mma(acc[2 * dp + 1], fa, fb[2], fb[3]);
    }
  }
}

// The epilogue: the warp's 16 accumulator rows times `mul`, rounded, staged in the warp's own
// rows of a shared tile (at byte st; only this warp reads them), then rows row0 + rr < nrows
// to dst (contiguous rows of D) in 16-byte stores.
template <class T, int D>
__device__ __forceinline__ void write_rows(T* dst, const float (&acc)[D / 8][4], uint32_t st,
                                           float mul, int64_t row0, int64_t nrows, int lane) {
  constexpr int P = (D + 8) * 2;
  constexpr int kChunks = D / 8;
  unsigned char* sm = smem_ptr() + (st - smem_addr());
  const int g = lane >> 2, t = lane & 3;
  __syncwarp();  // the warp's last ldmatrix of these rows is done
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    const uint32_t lo = Mma<T>::pack(acc[n][0] * mul, acc[n][1] * mul);
    const uint32_t hi = Mma<T>::pack(acc[n][2] * mul, acc[n][3] * mul);
    *reinterpret_cast<uint32_t*>(sm + g * P + n * 16 + t * 4) = lo;
    *reinterpret_cast<uint32_t*>(sm + (g + 8) * P + n * 16 + t * 4) = hi;
  }
  __syncwarp();
#pragma unroll
  for (int it = 0; it < kWarpRows * kChunks / 32; ++it) {
    const int idx = it * 32 + lane;
    const int rr = idx / kChunks, c = idx - rr * kChunks;
    if (row0 + rr < nrows)
      *reinterpret_cast<uint4*>(dst + (row0 + rr) * D + c * 8) =
          *reinterpret_cast<const uint4*>(sm + rr * P + c * 16);
  }
}

// ---- forward ------------------------------------------------------------------------------------

template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    sdpa_mma_forward_kernel(const TcProblem p, T* __restrict__ out, float* __restrict__ lse) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // the host routes here only on sm_80+
#else
  using Lay = MmaLayout<D>;
  constexpr int P = Lay::pitch;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const uint32_t sm = smem_addr();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;

  const int64_t ntiles = (p.L + kRows - 1) / kRows;
  const int64_t b = blockIdx.x / ntiles;
  int64_t tile = blockIdx.x - b * ntiles;
  if (p.causal) tile = ntiles - 1 - tile;  // the longest rows start first
  const int64_t i0 = tile * kRows;
  const int64_t i1 = i0 + kRows < p.L ? i0 + kRows : p.L;
  const int64_t nkeys = p.causal ? (p.S < i1 ? p.S : i1) : p.S;
  const int nk = static_cast<int>((nkeys + kRows - 1) / kRows);
  const int64_t koff = batch_offset(p.k, b), voff = batch_offset(p.v, b);
  const int64_t w0 = i0 + warp * kWarpRows;  // the warp's first row; this lane's: w0 + g, + 8

  load_tile<D, kRows>(sm, p.q, batch_offset(p.q, b), i0, p.L);
  load_tile<D, kRows>(sm + Lay::fwd_k(0), p.k, koff, 0, nkeys);
  load_tile<D, kRows>(sm + Lay::fwd_v(0), p.v, voff, 0, nkeys);
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    ldmatrix_x4(qf[kk], sm + warp * kWarpRows * P + a_lane<P>(lane) + kk * 32);

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.f, 0.f};  // rows g, g + 8: max (base 2), sum

  for (int n = 0; n < nk; ++n) {
    const int buf = n & 1;
    if (n + 1 < nk) {  // the next tile, into the buffer the previous tile used
      load_tile<D, kRows>(sm + Lay::fwd_k(buf ^ 1), p.k, koff, (n + 1) * int64_t(kRows), nkeys);
      load_tile<D, kRows>(sm + Lay::fwd_v(buf ^ 1), p.v, voff, (n + 1) * int64_t(kRows), nkeys);
    }
    cp_async_commit();
    const int64_t k0 = n * int64_t(kRows);
    // Causal: a warp whose last row is before the tile sees none of it.
    if (!(p.causal && k0 > w0 + kWarpRows - 1)) {
      float s[kRows / 8][4];
      const uint32_t kb = sm + Lay::fwd_k(buf);
#pragma unroll
      for (int j = 0; j < kRows / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
        for (int np = 0; np < kRows / 16; ++np) {
          uint32_t fb[4];
          ldmatrix_x4(fb, kb + np * 16 * P + b_lane<P>(lane) + kk * 32);
          Mma<T>::mma(s[2 * np], qf[kk], fb[0], fb[1]);
          Mma<T>::mma(s[2 * np + 1], qf[kk], fb[2], fb[3]);
        }
      }
      const bool mask = k0 + kRows > nkeys || (p.causal && k0 + kRows - 1 > w0);
#pragma unroll
      for (int j = 0; j < kRows / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[j][e] *= p.scale_log2;
          if (mask) {
            const int64_t col = k0 + j * 8 + 2 * t + (e & 1), row = w0 + g + (e >> 1) * 8;
            if (col >= nkeys || (p.causal && col > row)) s[j][e] = kNegInf;
          }
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = m[r];
#pragma unroll
        for (int j = 0; j < kRows / 8; ++j) mx = fmaxf(mx, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, 2));
        const float shift = mx == kNegInf ? 0.f : mx;  // nothing seen yet: every exp is 0
        const float alpha = ex2(m[r] - shift);
        m[r] = mx;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < kRows / 8; ++j) {
          s[j][2 * r] = ex2(s[j][2 * r] - shift);
          s[j][2 * r + 1] = ex2(s[j][2 * r + 1] - shift);
          sum += s[j][2 * r] + s[j][2 * r + 1];
        }
        l[r] = l[r] * alpha + sum;
#pragma unroll
        for (int d = 0; d < D / 8; ++d) {
          o[d][2 * r] *= alpha;
          o[d][2 * r + 1] *= alpha;
        }
      }
      accumulate<T, D, kRows>(o, s, sm + Lay::fwd_v(buf), lane);
    }
    cp_async_wait_all();
    __syncthreads();  // the next tile landed; this one is consumed
  }
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(kFull, l[r], 1);
    l[r] += __shfl_xor_sync(kFull, l[r], 2);
    // l == 0: every key masked (output 0, logsumexp -inf); l NaN: NaN everywhere.
    inv[r] = l[r] == 0.f ? 0.f : 1.f / l[r];
  }
#pragma unroll
  for (int d = 0; d < D / 8; ++d) {
    o[d][0] *= inv[0];
    o[d][1] *= inv[0];
    o[d][2] *= inv[1];
    o[d][3] *= inv[1];
  }
  write_rows<T, D>(out + b * p.L * D, o, sm + warp * kWarpRows * P, 1.f, w0, p.L, lane);
  if (t == 0) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t row = w0 + g + r * 8;
      if (row < p.L) lse[b * p.L + row] = l[r] == 0.f ? kNegInf : (m[r] + log2f(l[r])) * kLn2;
    }
  }
#endif
}

// ---- backward -----------------------------------------------------------------------------------

// The saved tensors of the backward: dO (contiguous (B, L, D)), the float32 logsumexp and
// D = rowsum(dO * O), both contiguous (B, L).
struct MmaSaved {
  TcOperand go;
  const float* lse = nullptr;
  const float* dsum = nullptr;
};

// A row's logsumexp in base 2; +inf for rows past L or without any key (-inf), so P = 0.
__device__ __forceinline__ float lse2(const MmaSaved& sv, int64_t b, int64_t L, int64_t i) {
  if (i >= L) return std::numeric_limits<float>::infinity();
  const float x = sv.lse[b * L + i];
  return x == -std::numeric_limits<float>::infinity() ? std::numeric_limits<float>::infinity()
                                                      : x * kLog2e;
}

// dQ: a block per 64 queries (warp w: 16 of them) walking the key tiles.
// dQ[i] = scale sum_j dS[i, j] K[j], dS = P (dP - D), dP[i, j] = dO[i] . V[j].
template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    sdpa_mma_grad_q_kernel(const TcProblem p, const MmaSaved sv, T* __restrict__ gq) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  using Lay = MmaLayout<D>;
  constexpr int P = Lay::pitch;
  const uint32_t sm = smem_addr();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;

  const int64_t ntiles = (p.L + kRows - 1) / kRows;
  const int64_t b = blockIdx.x / ntiles;
  int64_t tile = blockIdx.x - b * ntiles;
  if (p.causal) tile = ntiles - 1 - tile;
  const int64_t i0 = tile * kRows;
  const int64_t i1 = i0 + kRows < p.L ? i0 + kRows : p.L;
  const int64_t nkeys = p.causal ? (p.S < i1 ? p.S : i1) : p.S;
  const int nk = static_cast<int>((nkeys + kRows - 1) / kRows);
  const int64_t koff = batch_offset(p.k, b), voff = batch_offset(p.v, b);
  const int64_t w0 = i0 + warp * kWarpRows;

  load_tile<D, kRows>(sm, p.q, batch_offset(p.q, b), i0, p.L);
  load_tile<D, kRows>(sm + Lay::dq_do, sv.go, batch_offset(sv.go, b), i0, p.L);
  load_tile<D, kRows>(sm + Lay::dq_k(0), p.k, koff, 0, nkeys);
  load_tile<D, kRows>(sm + Lay::dq_v(0), p.v, voff, 0, nkeys);
  cp_async_commit();
  float lse_r[2], d_r[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t i = w0 + g + r * 8;
    lse_r[r] = lse2(sv, b, p.L, i);
    d_r[r] = i < p.L ? sv.dsum[b * p.L + i] : 0.f;
  }
  float dq[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.f;
  cp_async_wait_all();
  __syncthreads();

  for (int n = 0; n < nk; ++n) {
    const int buf = n & 1;
    if (n + 1 < nk) {
      load_tile<D, kRows>(sm + Lay::dq_k(buf ^ 1), p.k, koff, (n + 1) * int64_t(kRows), nkeys);
      load_tile<D, kRows>(sm + Lay::dq_v(buf ^ 1), p.v, voff, (n + 1) * int64_t(kRows), nkeys);
    }
    cp_async_commit();
    const int64_t k0 = n * int64_t(kRows);
    if (!(p.causal && k0 > w0 + kWarpRows - 1)) {
      float s[kRows / 8][4], dp[kRows / 8][4];
      scores<T, D, kRows>(s, sm + warp * kWarpRows * P, sm + Lay::dq_k(buf), lane);
      scores<T, D, kRows>(dp, sm + Lay::dq_do + warp * kWarpRows * P, sm + Lay::dq_v(buf), lane);
      const bool mask = k0 + kRows > nkeys || (p.causal && k0 + kRows - 1 > w0);
#pragma unroll
      for (int j = 0; j < kRows / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1;
          float pij = ex2(s[j][e] * p.scale_log2 - lse_r[r]);
          if (mask) {
            const int64_t col = k0 + j * 8 + 2 * t + (e & 1), row = w0 + g + r * 8;
            if (col >= nkeys || (p.causal && col > row)) pij = 0.f;
          }
          s[j][e] = pij * (dp[j][e] - d_r[r]);  // dS
        }
      }
      accumulate<T, D, kRows>(dq, s, sm + Lay::dq_k(buf), lane);
    }
    cp_async_wait_all();
    __syncthreads();
  }
  write_rows<T, D>(gq + b * p.L * D, dq, sm + warp * kWarpRows * P, p.scale, w0, p.L, lane);
#endif
}

// dK and dV: a block per 64 keys (warp w: 16 of them) walking the query tiles (QT rows).
// dV[j] = sum_i P[i, j] dO[i], dK[j] = scale sum_i dS[i, j] Q[i]: from P^T and dS^T, whose
// rows (keys) are the warp's, so they are A fragments as computed.
template <class T, int D>
__global__ void __launch_bounds__(kThreads)
    sdpa_mma_grad_kv_kernel(const TcProblem p, const MmaSaved sv, T* __restrict__ gk,
                            T* __restrict__ gv) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  using Lay = MmaLayout<D>;
  constexpr int P = Lay::pitch;
  constexpr int QT = Lay::qt;
  const uint32_t sm = smem_addr();
  unsigned char* smp = smem_ptr();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;

  const int64_t ntiles = (p.S + kRows - 1) / kRows;
  const int64_t b = blockIdx.x / ntiles;
  const int64_t j0 = (blockIdx.x - b * ntiles) * kRows;
  const int64_t w0 = j0 + warp * kWarpRows;  // the warp's first key; this lane's: w0 + g, + 8
  const int64_t qoff = batch_offset(p.q, b), gooff = batch_offset(sv.go, b);
  // Causal: query i sees key j only when j <= i, so the queries before j0 see none of these.
  const int64_t qstart = p.causal ? j0 : 0;
  const int nq = qstart < p.L ? static_cast<int>((p.L - qstart + QT - 1) / QT) : 0;

  load_tile<D, kRows>(sm, p.k, batch_offset(p.k, b), j0, p.S);
  load_tile<D, kRows>(sm + Lay::kv_v, p.v, batch_offset(p.v, b), j0, p.S);
  if (nq > 0) {
    load_tile<D, QT>(sm + Lay::kv_q(0), p.q, qoff, qstart, p.L);
    load_tile<D, QT>(sm + Lay::kv_do(0), sv.go, gooff, qstart, p.L);
  }
  cp_async_commit();
  float pre_lse = 0.f, pre_d = 0.f;  // thread x < QT: query x of the next tile's statistics
  if (threadIdx.x < QT) {
    const int64_t i = qstart + threadIdx.x;
    reinterpret_cast<float*>(smp + Lay::kv_lse(0))[threadIdx.x] = lse2(sv, b, p.L, i);
    reinterpret_cast<float*>(smp + Lay::kv_d(0))[threadIdx.x] =
        i < p.L ? sv.dsum[b * p.L + i] : 0.f;
  }
  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    dk[n][0] = dk[n][1] = dk[n][2] = dk[n][3] = 0.f;
    dv[n][0] = dv[n][1] = dv[n][2] = dv[n][3] = 0.f;
  }
  cp_async_wait_all();
  __syncthreads();

  for (int n = 0; n < nq; ++n) {
    const int buf = n & 1;
    const int64_t q0 = qstart + n * int64_t(QT);
    if (n + 1 < nq) {
      load_tile<D, QT>(sm + Lay::kv_q(buf ^ 1), p.q, qoff, q0 + QT, p.L);
      load_tile<D, QT>(sm + Lay::kv_do(buf ^ 1), sv.go, gooff, q0 + QT, p.L);
      if (threadIdx.x < QT) {  // loaded now, stored after this tile's work
        const int64_t i = q0 + QT + threadIdx.x;
        pre_lse = lse2(sv, b, p.L, i);
        pre_d = i < p.L ? sv.dsum[b * p.L + i] : 0.f;
      }
    }
    cp_async_commit();
    // Causal: a warp whose last key is after every query of the tile gets nothing from it.
    if (!(p.causal && q0 + QT - 1 < w0)) {
      float s[QT / 8][4], dp[QT / 8][4];
      scores<T, D, QT>(s, sm + warp * kWarpRows * P, sm + Lay::kv_q(buf), lane);  // S^T
      scores<T, D, QT>(dp, sm + Lay::kv_v + warp * kWarpRows * P, sm + Lay::kv_do(buf),
                       lane);  // dP^T
      const float* lse_s = reinterpret_cast<const float*>(smp + Lay::kv_lse(buf));
      const float* d_s = reinterpret_cast<const float*>(smp + Lay::kv_d(buf));
      const bool mask = p.causal && q0 < w0 + kWarpRows - 1;
#pragma unroll
      for (int j = 0; j < QT / 8; ++j) {
        const float2 lc = *reinterpret_cast<const float2*>(lse_s + j * 8 + 2 * t);
        const float2 dc = *reinterpret_cast<const float2*>(d_s + j * 8 + 2 * t);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float lse_c = (e & 1) ? lc.y : lc.x, d_c = (e & 1) ? dc.y : dc.x;
          float pij = ex2(s[j][e] * p.scale_log2 - lse_c);
          if (mask) {
            const int64_t col = q0 + j * 8 + 2 * t + (e & 1), row = w0 + g + (e >> 1) * 8;
            if (row > col) pij = 0.f;
          }
          s[j][e] = pij;
          dp[j][e] = pij * (dp[j][e] - d_c);  // dS^T
        }
      }
      accumulate<T, D, QT>(dv, s, sm + Lay::kv_do(buf), lane);
      accumulate<T, D, QT>(dk, dp, sm + Lay::kv_q(buf), lane);
    }
    if (n + 1 < nq && threadIdx.x < QT) {
      reinterpret_cast<float*>(smp + Lay::kv_lse(buf ^ 1))[threadIdx.x] = pre_lse;
      reinterpret_cast<float*>(smp + Lay::kv_d(buf ^ 1))[threadIdx.x] = pre_d;
    }
    cp_async_wait_all();
    __syncthreads();
  }
  write_rows<T, D>(gv + b * p.S * D, dv, sm + Lay::kv_v + warp * kWarpRows * P, 1.f, w0, p.S, lane);
  write_rows<T, D>(gk + b * p.S * D, dk, sm + warp * kWarpRows * P, p.scale, w0, p.S, lane);
#endif
}

// ---- host ---------------------------------------------------------------------------------------

unsigned mma_grid(int64_t B, int64_t n, const char* op) {
  const int64_t blocks = B * ((n + kRows - 1) / kRows);
  EMBER_CHECK(blocks >= 1 && blocks <= int64_t(0x7fffffff), op, ": too many rows for one launch (",
              B, " slices of ", n, ")");
  return static_cast<unsigned>(blocks);
}

template <class K>
void mma_allow_smem(K* kernel, int bytes, int device, const char* op) {
  int optin = 0;
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  EMBER_CHECK(bytes <= optin, op, ": the mma attention kernel needs ", bytes,
              " bytes of shared memory per block, this device allows ", optin);
  if (bytes > 48 * 1024)
    EMBER_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

// Runs f(T{}, std::integral_constant<int, D>{}) for q's dtype and head dim.
template <class F>
void mma_dispatch(ScalarType dt, int64_t E, const F& f) {
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
        EMBER_CHECK(false, "sdpa (mma): internal error: head dim ", E);
    }
  };
  if (dt == ScalarType::Float16) return with_dim(Half{});
  EMBER_CHECK(dt == ScalarType::BFloat16, "sdpa (mma): internal error: dtype ", dtype_name(dt));
  return with_dim(BFloat16{});
}

}  // namespace

bool sdpa_mma() { return g_mma.load(std::memory_order_relaxed); }
void set_sdpa_mma(bool on) { g_mma.store(on, std::memory_order_relaxed); }

void sdpa_mma_forward(const Tensor& query, const Tensor& key, const Tensor& value, bool causal,
                      double scale, int64_t B, int64_t L, int64_t S, Tensor& out, Tensor& lse,
                      cudaStream_t stream) {
  const char* op = "_scaled_dot_product_fused_attention";
  Tensor q = query, k = key, v = value;
  TcProblem p = tc_problem(B, L, S, causal, scale);
  p.q = tc_view(q, op);
  p.k = tc_view(k, op);
  p.v = tc_view(v, op);
  const int device = ix::device_index(q);
  mma_dispatch(q->dtype(), q->size(q->dim() - 1), [&](auto tag, auto dim) {
    using T = decltype(tag);
    constexpr int D = decltype(dim)::value;
    constexpr int bytes = MmaLayout<D>::fwd_bytes;
    mma_allow_smem(&sdpa_mma_forward_kernel<T, D>, bytes, device, op);
    sdpa_mma_forward_kernel<T, D><<<mma_grid(B, L, op), kThreads, bytes, stream>>>(
        p, out->data_as<T>(), lse->data_as<float>());
    check_launch(op);
  });
}

void sdpa_mma_backward(const Tensor& query, const Tensor& key, const Tensor& value,
                       const Tensor& grad_out, const Tensor& lse, const Tensor& dsum, bool causal,
                       double scale, int64_t B, int64_t L, int64_t S, Tensor& gq, Tensor& gk,
                       Tensor& gv, cudaStream_t stream) {
  const char* op = "_scaled_dot_product_fused_attention_backward";
  Tensor q = query, k = key, v = value, go = grad_out;
  TcProblem p = tc_problem(B, L, S, causal, scale);
  p.q = tc_view(q, op);
  p.k = tc_view(k, op);
  p.v = tc_view(v, op);
  MmaSaved sv;
  sv.go = tc_view(go, op);
  sv.lse = lse->data_as<float>();
  sv.dsum = dsum->data_as<float>();
  const int device = ix::device_index(q);
  mma_dispatch(q->dtype(), q->size(q->dim() - 1), [&](auto tag, auto dim) {
    using T = decltype(tag);
    constexpr int D = decltype(dim)::value;
    constexpr int qbytes = MmaLayout<D>::dq_bytes;
    mma_allow_smem(&sdpa_mma_grad_q_kernel<T, D>, qbytes, device, op);
    sdpa_mma_grad_q_kernel<T, D>
        <<<mma_grid(B, L, op), kThreads, qbytes, stream>>>(p, sv, gq->data_as<T>());
    check_launch(op);
    constexpr int kvbytes = MmaLayout<D>::kv_bytes;
    mma_allow_smem(&sdpa_mma_grad_kv_kernel<T, D>, kvbytes, device, op);
    sdpa_mma_grad_kv_kernel<T, D><<<mma_grid(B, S, op), kThreads, kvbytes, stream>>>(
        p, sv, gk->data_as<T>(), gv->data_as<T>());
    check_launch(op);
  });
}

}  // namespace cuda
}  // namespace ember
