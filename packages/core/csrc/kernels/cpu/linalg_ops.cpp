// CPU matrix products (ops/linalg.yaml). float32/float64 run on OpenBLAS, float16/bfloat16 are
// converted to float32 first, integer dtypes use an exact (wrapping) loop.
//
// Every op funnels into matmul_core(): operands [batch..., M, K] and [batch..., K, N] whose batch
// dims may be broadcast (stride 0). Row- and column-major matrices go to BLAS as they are (a
// transposed view costs no copy, only CblasTrans and its leading dimension); other layouts are
// copied. When the right operand is shared by every batch and the left one's batches stack into
// one row-major matrix, the batches become one big matrix. Products up to moderate sizes are cut
// into tiles that OpenBLAS computes on the calling thread, spread over ember's thread pool (see
// kSerialGemm); larger ones go to OpenBLAS one matrix at a time and it threads them itself.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <complex>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/iterator.h"
#include "kernels/linalg_rules.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

constexpr int64_t kBlasMax = linalg::kBlasIntMax;

using linalg::batch_strides;
using linalg::blas_layout;
using linalg::fold_rows;
using linalg::Mat;

// ---- BLAS -------------------------------------------------------------------------------------

template <class T>
struct Blas;
template <>
struct Blas<float> {
  static void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                   float beta, float* c, int64_t ldc) {
    sync_blas_threads();
    scipy_cblas_sgemm(CblasRowMajor, ta, tb, blasint(m), blasint(n), blasint(k), alpha, a,
                      blasint(lda), b, blasint(ldb), beta, c, blasint(ldc));
  }
  static void gemv(CBLAS_TRANSPOSE t, int64_t m, int64_t n, float alpha, const float* a,
                   int64_t lda, const float* x, int64_t incx, float beta, float* y, int64_t incy) {
    sync_blas_threads();
    scipy_cblas_sgemv(CblasRowMajor, t, blasint(m), blasint(n), alpha, a, blasint(lda), x,
                      blasint(incx), beta, y, blasint(incy));
  }
  static float dot(int64_t n, const float* x, int64_t incx, const float* y, int64_t incy) {
    sync_blas_threads();
    return scipy_cblas_sdot(blasint(n), x, blasint(incx), y, blasint(incy));
  }
};
template <>
struct Blas<double> {
  static void gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n, int64_t k,
                   double alpha, const double* a, int64_t lda, const double* b, int64_t ldb,
                   double beta, double* c, int64_t ldc) {
    sync_blas_threads();
    scipy_cblas_dgemm(CblasRowMajor, ta, tb, blasint(m), blasint(n), blasint(k), alpha, a,
                      blasint(lda), b, blasint(ldb), beta, c, blasint(ldc));
  }
  static void gemv(CBLAS_TRANSPOSE t, int64_t m, int64_t n, double alpha, const double* a,
                   int64_t lda, const double* x, int64_t incx, double beta, double* y,
                   int64_t incy) {
    sync_blas_threads();
    scipy_cblas_dgemv(CblasRowMajor, t, blasint(m), blasint(n), alpha, a, blasint(lda), x,
                      blasint(incx), beta, y, blasint(incy));
  }
  static double dot(int64_t n, const double* x, int64_t incx, const double* y, int64_t incy) {
    sync_blas_threads();
    return scipy_cblas_ddot(blasint(n), x, blasint(incx), y, blasint(incy));
  }
};

Mat layout_of(const Tensor& t) {
  Mat m;
  int64_t d = t->dim();
  bool ok = blas_layout(t->size(d - 2), t->size(d - 1), t->stride(d - 2), t->stride(d - 1), &m);
  EMBER_CHECK(ok, "matmul: internal error: operand not in a BLAS layout");
  return m;
}

void check_blas_sizes(const char* op, int64_t m, int64_t n, int64_t k) {
  EMBER_CHECK(m <= kBlasMax && n <= kBlasMax && k <= kBlasMax, op, ": matrix dimensions (", m, ", ",
              n, ", ", k, ") exceed the 32-bit sizes supported by BLAS (at most ", kBlasMax, ")");
}

// C (m x n, row-major, leading dimension ldc) = alpha * A @ B + beta * C. beta == 0 never reads C
// (C may hold garbage or NaN). Vector shapes go to gemv / dot, which are faster than gemm there.
template <class T>
void gemm(const Mat& A, const T* a, const Mat& B, const T* b, T* c, int64_t ldc, int64_t m,
          int64_t n, int64_t k, T alpha, T beta) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  const int64_t a_row_inc = A.trans ? A.ld : 1;  // step along a row of A
  const int64_t b_col_inc = B.trans ? 1 : B.ld;  // step down a column of B
  if (m == 1 && n == 1) {
    T d = Blas<T>::dot(k, a, a_row_inc, b, b_col_inc);
    c[0] = alpha * d + (beta == T(0) ? T(0) : beta * c[0]);
    return;
  }
  if (n == 1) {  // column of C = A @ (column of B)
    if (beta == T(0))
      for (int64_t i = 0; i < m; ++i) c[i * ldc] = T(0);
    Blas<T>::gemv(A.trans ? CblasTrans : CblasNoTrans, A.trans ? k : m, A.trans ? m : k, alpha, a,
                  A.ld, b, b_col_inc, beta, c, ldc);
    return;
  }
  if (m == 1) {  // row of C = (row of A) @ B, i.e. B^T @ row
    if (beta == T(0)) std::fill(c, c + n, T(0));
    Blas<T>::gemv(B.trans ? CblasNoTrans : CblasTrans, B.trans ? n : k, B.trans ? k : n, alpha, b,
                  B.ld, a, a_row_inc, beta, c, 1);
    return;
  }
  Blas<T>::gemm(A.trans ? CblasTrans : CblasNoTrans, B.trans ? CblasTrans : CblasNoTrans, m, n, k,
                alpha, a, A.ld, b, B.ld, beta, c, ldc);
}

// ---- batches ----------------------------------------------------------------------------------

// Element offsets of every batch (row-major order over `batch`) for two operands.
void batch_offsets(const DimVector& batch, const DimVector& sa, const DimVector& sb,
                   std::vector<int64_t>& oa, std::vector<int64_t>& ob) {
  int64_t n = 1;
  for (int64_t s : batch) n *= s;
  oa.resize(n);
  ob.resize(n);
  const int64_t nd = batch.size();
  DimVector idx(nd, 0);
  int64_t pa = 0, pb = 0;
  for (int64_t i = 0; i < n; ++i) {
    oa[i] = pa;
    ob[i] = pb;
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[d] < batch[d]) {
        pa += sa[d];
        pb += sb[d];
        break;
      }
      pa -= sa[d] * (batch[d] - 1);
      pb -= sb[d] * (batch[d] - 1);
      idx[d] = 0;
    }
  }
}

// OpenBLAS runs a call on the calling thread only below these sizes (interface/gemm.c: m*n*k <=
// 65536 * GEMM_MULTITHREAD_THRESHOLD (4); interface/gemv.c: m*n < 2304 * 4; dot: n <= 10000).
// Above them it hands parts to its own workers, which wait for each other spinning with
// sched_yield: when a core is busy (another process, or torch's OpenMP workers spinning in the
// same process) each hand-off can wait a scheduler time slice. OpenBLAS's batched gemm took
// 0.5-1 s instead of 0.5 ms for 128 products of 64x64 that way on 2 cores. So products up to
// moderate sizes are cut into tiles below these limits and spread over ember's pool, whose workers
// sleep on a condition variable and take tiles from a shared counter (a late worker's share goes
// to the others). Such tiles run as fast as one big call (OpenBLAS's small-matrix kernels) until
// K gets large; those products stay whole.
constexpr int64_t kSerialGemm = 65536 * 4;     // m * n * k
constexpr int64_t kSerialGemv = 2304 * 4 - 1;  // m * n of gemv; also n of dot
constexpr int64_t kTileMaxK = 512;             // 8 x 64 x 512 tiles: as fast as one call

// From this many multiply-adds in all, a product is worth waking the pool (~10 us of hand-off).
constexpr int64_t kParallelWork = 1 << 20;

// Largest tile (rows x cols of C) that keeps one (rows x K) @ (K x cols) call on the calling
// thread; {0, 0} when there is none worth using. gemm() sends a single row or column to gemv or
// dot, which have their own (smaller) limits.
struct Tile {
  int64_t rows = 0, cols = 0;
};
Tile serial_tile(int64_t M, int64_t N, int64_t K) {
  const int64_t k = std::max<int64_t>(K, 1);
  if (k > kSerialGemv && (M == 1 || N == 1)) return {};
  if (N == 1) return {std::min(M, kSerialGemv / k), 1};  // gemv over rows x K of A, or dot
  if (M == 1) return {1, std::min(N, kSerialGemv / k)};  // gemv over K x cols of B, or dot
  // Balanced blocks of at most r >= 3 rows (or columns) all have >= 2, so none falls to gemv.
  const int64_t r = kSerialGemm / (N * k);
  if (M <= r) return {M, N};
  if (r >= 3) return {r, N};
  if (K > kTileMaxK) return {};
  // Wide tiles of 8 rows: measured faster than square ones for K of 300-512 (OpenBLAS's kernels).
  const int64_t rows = std::min<int64_t>(M, 8);
  return {rows, std::min(N, kSerialGemm / k / rows)};
}

template <class T>
void batched_gemm(const char* op, const Tensor& a, const Tensor& b, const Tensor& c,
                  const DimVector& batch, int64_t M, int64_t N, int64_t K, T alpha, T beta) {
  Mat A = layout_of(a);
  const Mat B = layout_of(b);
  const T* pa = a->data_as<T>();
  const T* pb = b->data_as<T>();
  T* pc = c->data_as<T>();
  DimVector sa = batch_strides(a, batch), sb = batch_strides(b, batch);
  int64_t nb = 1;
  for (int64_t s : batch) nb *= s;
  check_blas_sizes(op, M, N, K);

  // B shared by every batch and A's batches stacked row-major: one (nb*M) x K matrix.
  std::vector<int64_t> oa{0}, ob{0};
  bool b_shared = std::all_of(sb.begin(), sb.end(), [](int64_t s) { return s == 0; });
  int64_t rs = 0;
  if (nb > 1 && b_shared && !A.trans && nb * M <= kBlasMax &&
      fold_rows(batch, sa, M, a->stride(a->dim() - 2), K, &rs)) {
    A = Mat{false, rs};
    M *= nb;
    nb = 1;
  } else {
    batch_offsets(batch, sa, sb, oa, ob);
  }
  const int64_t mc = M * N;  // elements of one batch of C

  // float32 on an AVX-512 CPU whose OpenBLAS runs narrower kernels: conv_gemm's packed kernel
  // (packed_gemm.h), 2-6x faster there; batches split over the threads, or one's columns. With
  // alpha != 1 or beta != 0 (addmm) the product goes through a buffer.
  if constexpr (std::is_same_v<T, float>) {
    if (packed_gemm_suits(M, N, K)) {
      const int64_t grain = std::max<int64_t>(1, kParallelWork / (M * N * K));
      const bool direct = alpha == 1.0f && beta == 0.0f;
      auto run = [&](int64_t i0, int64_t i1) {
        std::vector<float> buf(direct ? 0 : mc);
        for (int64_t i = i0; i < i1; ++i) {
          float* ci = pc + i * mc;
          packed_gemm(pa + oa[i], A.trans ? 1 : A.ld, A.trans ? A.ld : 1, pb + ob[i], B.trans, B.ld,
                      direct ? ci : buf.data(), N, M, N, K);
          if (direct) continue;
          if (beta == 0.0f)  // never reads C
            for (int64_t j = 0; j < mc; ++j) ci[j] = alpha * buf[j];
          else
            for (int64_t j = 0; j < mc; ++j) ci[j] = alpha * buf[j] + beta * ci[j];
        }
      };
      if (nb == 1)
        run(0, 1);
      else
        parallel_for(0, nb, grain, run);
      return;
    }
  }

  const Tile tile = serial_tile(M, N, K);
  if (tile.rows == 0) {
    // Large: each product is cut into one block of rows (or columns) per thread of ember's pool,
    // and OpenBLAS runs each block on its calling thread. OpenBLAS's own workers would spin for
    // a long while after every threaded call (tens of ms), taking the cores from the threads of
    // whatever ember runs next (convolution, pointwise ops).
    const int nthreads = get_num_threads();
    if (nthreads <= 1 || in_parallel_region() || M * N * K < kParallelWork) {
      for (int64_t i = 0; i < nb; ++i)
        gemm<T>(A, pa + oa[i], B, pb + ob[i], pc + i * mc, N, M, N, K, alpha, beta);
      return;
    }
    const bool by_rows = M >= N;
    const int64_t parts = std::min<int64_t>(nthreads, by_rows ? M : N), ntasks = nb * parts;
    SerialBlasScope serial;
    std::atomic<int64_t> next{0};
    parallel_for(0, std::min<int64_t>(nthreads, ntasks), 1, [&](int64_t, int64_t) {
      for (int64_t t; (t = next.fetch_add(1, std::memory_order_relaxed)) < ntasks;) {
        const int64_t i = t / parts, p = t % parts;
        if (by_rows) {
          const int64_t r0 = p * M / parts, r1 = (p + 1) * M / parts;
          gemm<T>(A, pa + oa[i] + r0 * (A.trans ? 1 : A.ld), B, pb + ob[i], pc + i * mc + r0 * N, N,
                  r1 - r0, N, K, alpha, beta);
        } else {
          const int64_t c0 = p * N / parts, c1 = (p + 1) * N / parts;
          gemm<T>(A, pa + oa[i], B, pb + ob[i] + c0 * (B.trans ? B.ld : 1), pc + i * mc + c0, N, M,
                  c1 - c0, K, alpha, beta);
        }
      }
    });
    return;
  }
  // Each product is cut into bm x bn tiles of nearly equal size.
  const int64_t bm = (M + tile.rows - 1) / tile.rows, bn = (N + tile.cols - 1) / tile.cols;
  const int64_t per = bm * bn, ntasks = nb * per;
  auto run_task = [&](int64_t t) {
    const int64_t i = t / per, p = t % per / bn, q = t % bn;
    const int64_t r0 = p * M / bm, r1 = (p + 1) * M / bm;
    const int64_t c0 = q * N / bn, c1 = (q + 1) * N / bn;
    const T* at = pa + oa[i] + r0 * (A.trans ? 1 : A.ld);
    const T* bt = pb + ob[i] + c0 * (B.trans ? B.ld : 1);
    gemm<T>(A, at, B, bt, pc + i * mc + r0 * N + c0, N, r1 - r0, c1 - c0, K, alpha, beta);
  };
  const int nthreads = get_num_threads();
  if (nthreads <= 1 || ntasks < 2 || nb * M * N * K < kParallelWork) {
    for (int64_t t = 0; t < ntasks; ++t) run_task(t);
    return;
  }
  std::atomic<int64_t> next{0};
  parallel_for(0, std::min<int64_t>(nthreads, ntasks), 1, [&](int64_t, int64_t) {
    for (int64_t t; (t = next.fetch_add(1, std::memory_order_relaxed)) < ntasks;) run_task(t);
  });
}

// Exact integer product, wrapping like PyTorch (arithmetic modulo 2^64, then truncated).
template <class T>
void int_matmul(const Tensor& a, const Tensor& b, const Tensor& c, const DimVector& batch,
                int64_t M, int64_t N, int64_t K, int64_t alpha, int64_t beta, bool use_c) {
  const T* pa = a->data_as<T>();
  const T* pb = b->data_as<T>();
  T* pc = c->data_as<T>();
  const int64_t ars = a->stride(a->dim() - 2), acs = a->stride(a->dim() - 1);
  const int64_t brs = b->stride(b->dim() - 2), bcs = b->stride(b->dim() - 1);
  std::vector<int64_t> oa, ob;
  batch_offsets(batch, batch_strides(a, batch), batch_strides(b, batch), oa, ob);
  const int64_t rows = static_cast<int64_t>(oa.size()) * M;
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(N * K, 1));
  auto u = [](auto v) { return static_cast<uint64_t>(static_cast<int64_t>(v)); };
  parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    std::vector<uint64_t> acc(N);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t bi = r / M, i = r % M;
      const T* arow = pa + oa[bi] + i * ars;
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t k = 0; k < K; ++k) {
        uint64_t av = u(arow[k * acs]);
        if (av == 0) continue;
        const T* brow = pb + ob[bi] + k * brs;
        for (int64_t j = 0; j < N; ++j) acc[j] += av * u(brow[j * bcs]);
      }
      T* crow = pc + r * N;
      for (int64_t j = 0; j < N; ++j) {
        uint64_t v = u(alpha) * acc[j] + (use_c ? u(beta) * u(crow[j]) : 0);
        crow[j] = static_cast<T>(static_cast<int64_t>(v));
      }
    }
  });
}

Tensor float_copy(const Tensor& t, ScalarType dt) {
  Tensor out = ember::empty(t->sizes(), dt, t->device());
  copy_into(out, t);
  return out;
}

// A copy (in dtype dt) unless t already has dtype dt and a BLAS layout.
Tensor blas_operand(const Tensor& t, ScalarType dt) {
  Mat m;
  int64_t d = t->dim();
  if (t->dtype() == dt &&
      blas_layout(t->size(d - 2), t->size(d - 1), t->stride(d - 2), t->stride(d - 1), &m))
    return t;
  return float_copy(t, dt);
}

// complex64 / complex128 products: OpenBLAS's cgemm / zgemm on each batch (a and b in BLAS
// layouts; op(X) is the plain transpose, never the conjugate).
template <class T>
void complex_gemm(const char* op, const Tensor& a, const Tensor& b, const Tensor& c,
                  const DimVector& batch, int64_t M, int64_t N, int64_t K, T alpha, T beta) {
  check_blas_sizes(op, M, N, K);
  const Mat A = layout_of(a), B = layout_of(b);
  std::vector<int64_t> oa, ob;
  batch_offsets(batch, batch_strides(a, batch), batch_strides(b, batch), oa, ob);
  const T* pa = a->data_as<T>();
  const T* pb = b->data_as<T>();
  T* pc = c->data_as<T>();
  const CBLAS_TRANSPOSE ta = A.trans ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = B.trans ? CblasTrans : CblasNoTrans;
  sync_blas_threads();
  for (size_t i = 0; i < oa.size(); ++i) {
    T* ci = pc + static_cast<int64_t>(i) * M * N;
    if (K == 0) {
      for (int64_t j = 0; j < M * N; ++j) ci[j] = beta == T(0) ? T(0) : beta * ci[j];
      continue;
    }
    if constexpr (std::is_same_v<T, std::complex<float>>) {
      scipy_cblas_cgemm(CblasRowMajor, ta, tb, blasint(M), blasint(N), blasint(K), &alpha,
                        pa + oa[i], blasint(A.ld), pb + ob[i], blasint(B.ld), &beta, ci,
                        blasint(N));
    } else {
      scipy_cblas_zgemm(CblasRowMajor, ta, tb, blasint(M), blasint(N), blasint(K), &alpha,
                        pa + oa[i], blasint(A.ld), pb + ob[i], blasint(B.ld), &beta, ci,
                        blasint(N));
    }
  }
}

// The product core of linalg::MatmulOps (contract in kernels/linalg_rules.h), on OpenBLAS.
Tensor matmul_core(const char* op, const Tensor& a, const Tensor& b, const DimVector& batch,
                   const Tensor& init, const Scalar& beta, const Scalar& alpha) {
  const ScalarType dt = a->dtype();
  const int64_t M = a->size(a->dim() - 2), K = a->size(a->dim() - 1), N = b->size(b->dim() - 1);
  const DimVector out_shape = linalg::product_shape(batch, M, N);
  Tensor out = ember::empty(out_shape, dt, a->device());
  if (out->numel() == 0) return out;
  const bool use_init = init && beta.to_complex() != std::complex<double>(0.0, 0.0);
  if (dt == ScalarType::Bool)
    EMBER_FAIL(DtypeNotImplemented, op,
               ": not implemented for dtype bool (supported: integer and floating dtypes)");
  // Meta tensors: the checks above and the output are the whole op (every product ends here,
  // so the linalg kernels run on meta as they are: `meta: cpu` in linalg.yaml).
  if (out->device().is_meta()) return out;
  if (is_complex(dt)) {
    Tensor ac = blas_operand(a, dt), bc = blas_operand(b, dt);
    if (use_init) copy_into(out, init);
    EMBER_DISPATCH_COMPLEX(dt, op, [&] {
      complex_gemm<scalar_t>(op, ac, bc, out, batch, M, N, K, alpha.to<scalar_t>(),
                             use_init ? beta.to<scalar_t>() : scalar_t(0));
    });
    return out;
  }
  if (!is_floating(dt)) {
    if (use_init) copy_into(out, init);
    EMBER_DISPATCH_INTEGRAL(dt, op, [&] {
      if constexpr (!std::is_same_v<scalar_t, bool>)
        int_matmul<scalar_t>(a, b, out, batch, M, N, K, alpha.to_int(), beta.to_int(), use_init);
    });
    return out;
  }
  const ScalarType ct = dt == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
  Tensor ac = blas_operand(a, ct), bc = blas_operand(b, ct);
  Tensor c = ct == dt ? out : ember::empty(out_shape, ct, a->device());
  if (use_init) copy_into(c, init);
  if (ct == ScalarType::Float64) {
    batched_gemm<double>(op, ac, bc, c, batch, M, N, K, alpha.to_double(),
                         use_init ? beta.to_double() : 0.0);
  } else {
    batched_gemm<float>(op, ac, bc, c, batch, M, N, K, static_cast<float>(alpha.to_double()),
                        use_init ? static_cast<float>(beta.to_double()) : 0.0f);
  }
  if (c != out) copy_into(out, c);
  return out;
}

// A contiguous copy of t's elements over `sizes`, read with `strides` from t's offset.
Tensor strided_copy(const char*, const Tensor& t, const DimVector& sizes,
                    const DimVector& strides) {
  Tensor out = ember::empty(sizes, t->dtype(), t->device());
  copy_into(out, make_view(t, sizes, strides, t->storage_offset()));
  return out;
}

// The ops' bodies (checks, shapes, views) are shared with CUDA; only the product is the CPU's.
struct CpuMatmul {
  static constexpr auto core = &matmul_core;
  static constexpr auto gather = &strided_copy;
};
using Ops = linalg::MatmulOps<CpuMatmul>;

}  // namespace

Tensor matmul(const Tensor& self, const Tensor& other) { return Ops::matmul(self, other); }
Tensor mm(const Tensor& self, const Tensor& mat2) { return Ops::mm(self, mat2); }
Tensor bmm(const Tensor& self, const Tensor& mat2) { return Ops::bmm(self, mat2); }
Tensor mv(const Tensor& self, const Tensor& vec) { return Ops::mv(self, vec); }
Tensor dot(const Tensor& self, const Tensor& tensor) { return Ops::dot(self, tensor); }
Tensor vdot(const Tensor& self, const Tensor& other) { return Ops::vdot(self, other); }
Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
             const Scalar& alpha) {
  return Ops::addmm(self, mat1, mat2, beta, alpha);
}
Tensor addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, const Scalar& beta,
             const Scalar& alpha) {
  return Ops::addmv(self, mat, vec, beta, alpha);
}
Tensor baddbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
               const Scalar& alpha) {
  return Ops::baddbmm(self, batch1, batch2, beta, alpha);
}
Tensor addbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
              const Scalar& alpha) {
  return Ops::addbmm(self, batch1, batch2, beta, alpha);
}

// ---- raw products for self-scheduling kernels (blas.h) ---------------------------------------

template <class T>
void gemm_rowmajor(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                   int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  check_blas_sizes("gemm", m, n, k);
  EMBER_CHECK(lda <= kBlasMax && ldb <= kBlasMax && ldc <= kBlasMax,
              "gemm: leading dimensions exceed the 32-bit sizes supported by BLAS");
  gemm<T>(Mat{trans_a, lda}, a, Mat{trans_b, ldb}, b, c, ldc, m, n, k, alpha, beta);
}
template void gemm_rowmajor<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*,
                                   int64_t, const float*, int64_t, float, float*, int64_t);
template void gemm_rowmajor<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*,
                                    int64_t, const double*, int64_t, double, double*, int64_t);

template <class T>
void gemm_rowmajor_tiled(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha,
                         const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c,
                         int64_t ldc) {
  const Tile tile = serial_tile(m, n, k);
  if (tile.rows == 0 || (tile.rows >= m && tile.cols >= n)) {
    gemm_rowmajor<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  for (int64_t r0 = 0; r0 < m; r0 += tile.rows)
    for (int64_t c0 = 0; c0 < n; c0 += tile.cols)
      gemm_rowmajor<T>(trans_a, trans_b, std::min(tile.rows, m - r0), std::min(tile.cols, n - c0),
                       k, alpha, a + r0 * (trans_a ? 1 : lda), lda, b + c0 * (trans_b ? ldb : 1),
                       ldb, beta, c + r0 * ldc + c0, ldc);
}
template void gemm_rowmajor_tiled<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*,
                                         int64_t, const float*, int64_t, float, float*, int64_t);
template void gemm_rowmajor_tiled<double>(bool, bool, int64_t, int64_t, int64_t, double,
                                          const double*, int64_t, const double*, int64_t, double,
                                          double*, int64_t);

namespace {
std::mutex g_serial_mutex;
int g_serial_depth = 0;  // live SerialBlasScopes
int g_serial_saved = 0;  // OpenBLAS's thread count when the first one started
}  // namespace

SerialBlasScope::SerialBlasScope() {
  std::lock_guard<std::mutex> lock(g_serial_mutex);
  if (g_serial_depth++ > 0) return;
  sync_blas_threads();
  g_serial_saved = scipy_openblas_get_num_threads();
  // Lowering the count only changes how many workers the next call uses (no thread restarts).
  if (g_serial_saved > 1) scipy_openblas_set_num_threads(1);
}

SerialBlasScope::~SerialBlasScope() {
  std::lock_guard<std::mutex> lock(g_serial_mutex);
  if (--g_serial_depth > 0) return;
  if (g_serial_saved > 1) scipy_openblas_set_num_threads(g_serial_saved);
}

}  // namespace cpu
}  // namespace ember
