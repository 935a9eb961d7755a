// CPU matrix factorizations on LAPACK (the scipy-openblas32 wheel's, symbols prefixed scipy_):
// LU (getrf, getrs), QR (geqrf, orgqr), SVD (gesdd), the symmetric eigensolver (syevd) and the
// least-squares drivers (gelsy, gelsd, gelss, gels) for float32 and float64; the general
// eigensolver (geev), the Householder ops (geqrf, orgqr, ormqr) and LDL^T (sytrf, sytrs; hetrf,
// hetrs) for complex64 and complex128 too; batched over the leading dims (ops/linalg.yaml, the
// "factorizations" section). Symmetric matrices up to 32 x 32 are decomposed by an own
// Householder + QL kernel instead of syevd (see small_tridiag).
//
// LAPACK works on column-major matrices. Every input is copied once into a buffer whose
// matrices are column-major (sizes (..., m, n), strides (..., m * n, 1, m): the transpose of a
// contiguous (..., n, m) tensor, which is how PyTorch lays out these results too); LAPACK then
// works in place on that copy, which becomes the op's output. The copies broadcast the batch
// dims of the operands of the two-operand ops (solve, lu_solve, lstsq). Failures that depend on
// the values (a singular matrix, no convergence) are reported through `info` outputs, which the
// Python wrappers (ember.linalg) turn into PyTorch's LinAlgError messages; argument errors are
// raised here. On the meta device each op returns its outputs after the checks.
#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cmath>
#include <complex>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/iterator.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

using lint = lapack_int;

// ---- LAPACK, by element type ------------------------------------------------------------------

// A leading dimension: LAPACK wants at least 1 even for empty matrices.
lint ld(int64_t rows) { return static_cast<lint>(std::max<int64_t>(1, rows)); }

template <class T>
struct Lapack;

#define EMBER_LAPACK_TYPE(T, p)                                                                    \
  template <>                                                                                      \
  struct Lapack<T> {                                                                               \
    static lint getrf(lint m, lint n, T* a, lint lda, lint* ipiv) {                                \
      return scipy_LAPACKE_##p##getrf_work(LAPACK_COL_MAJOR, m, n, a, lda, ipiv);                  \
    }                                                                                              \
    static lint getrs(char trans, lint n, lint nrhs, const T* a, lint lda, const lint* ipiv, T* b, \
                      lint ldb) {                                                                  \
      return scipy_LAPACKE_##p##getrs_work(LAPACK_COL_MAJOR, trans, n, nrhs, a, lda, ipiv, b,      \
                                           ldb);                                                   \
    }                                                                                              \
    static lint gesdd(char jobz, lint m, lint n, T* a, lint lda, T* s, T* u, lint ldu, T* vt,      \
                      lint ldvt, T* work, lint lwork, lint* iwork) {                               \
      return scipy_LAPACKE_##p##gesdd_work(LAPACK_COL_MAJOR, jobz, m, n, a, lda, s, u, ldu, vt,    \
                                           ldvt, work, lwork, iwork);                              \
    }                                                                                              \
    static lint syevd(char jobz, char uplo, lint n, T* a, lint lda, T* w, T* work, lint lwork,     \
                      lint* iwork, lint liwork) {                                                  \
      return scipy_LAPACKE_##p##syevd_work(LAPACK_COL_MAJOR, jobz, uplo, n, a, lda, w, work,       \
                                           lwork, iwork, liwork);                                  \
    }                                                                                              \
    static lint geqrf(lint m, lint n, T* a, lint lda, T* tau, T* work, lint lwork) {               \
      return scipy_LAPACKE_##p##geqrf_work(LAPACK_COL_MAJOR, m, n, a, lda, tau, work, lwork);      \
    }                                                                                              \
    static lint orgqr(lint m, lint n, lint k, T* a, lint lda, const T* tau, T* work, lint lwork) { \
      return scipy_LAPACKE_##p##orgqr_work(LAPACK_COL_MAJOR, m, n, k, a, lda, tau, work, lwork);   \
    }                                                                                              \
    static lint gelsy(lint m, lint n, lint nrhs, T* a, lint lda, T* b, lint ldb, lint* jpvt,       \
                      T rcond, lint* rank, T* work, lint lwork) {                                  \
      return scipy_LAPACKE_##p##gelsy_work(LAPACK_COL_MAJOR, m, n, nrhs, a, lda, b, ldb, jpvt,     \
                                           rcond, rank, work, lwork);                              \
    }                                                                                              \
    static lint gelsd(lint m, lint n, lint nrhs, T* a, lint lda, T* b, lint ldb, T* s, T rcond,    \
                      lint* rank, T* work, lint lwork, lint* iwork) {                              \
      return scipy_LAPACKE_##p##gelsd_work(LAPACK_COL_MAJOR, m, n, nrhs, a, lda, b, ldb, s, rcond, \
                                           rank, work, lwork, iwork);                              \
    }                                                                                              \
    static lint gelss(lint m, lint n, lint nrhs, T* a, lint lda, T* b, lint ldb, T* s, T rcond,    \
                      lint* rank, T* work, lint lwork) {                                           \
      return scipy_LAPACKE_##p##gelss_work(LAPACK_COL_MAJOR, m, n, nrhs, a, lda, b, ldb, s, rcond, \
                                           rank, work, lwork);                                     \
    }                                                                                              \
    static lint potrf(char uplo, lint n, T* a, lint lda) {                                         \
      return scipy_LAPACKE_##p##potrf_work(LAPACK_COL_MAJOR, uplo, n, a, lda);                     \
    }                                                                                              \
    static void trsm(bool upper, bool unit, lint m, lint n, const T* a, lint lda, T* b,            \
                     lint ldb) {                                                                   \
      scipy_cblas_##p##trsm(CblasColMajor, CblasLeft, upper ? CblasUpper : CblasLower,             \
                            CblasNoTrans, unit ? CblasUnit : CblasNonUnit, m, n, T(1), a, lda, b,  \
                            ldb);                                                                  \
    }                                                                                              \
    static lint gels(lint m, lint n, lint nrhs, T* a, lint lda, T* b, lint ldb, T* work,           \
                     lint lwork) {                                                                 \
      return scipy_LAPACKE_##p##gels_work(LAPACK_COL_MAJOR, 'N', m, n, nrhs, a, lda, b, ldb, work, \
                                          lwork);                                                  \
    }                                                                                              \
    static lint ormqr(char side, char trans, lint m, lint n, lint k, const T* a, lint lda,         \
                      const T* tau, T* c, lint ldc, T* work, lint lwork) {                         \
      return scipy_LAPACKE_##p##ormqr_work(LAPACK_COL_MAJOR, side, trans, m, n, k, a, lda, tau, c, \
                                           ldc, work, lwork);                                      \
    }                                                                                              \
    static lint sytrf(lint n, T* a, lint lda, lint* ipiv, T* work, lint lwork) {                   \
      return scipy_LAPACKE_##p##sytrf_work(LAPACK_COL_MAJOR, 'L', n, a, lda, ipiv, work, lwork);   \
    }                                                                                              \
    static lint sytrs(lint n, lint nrhs, const T* a, lint lda, const lint* ipiv, T* b, lint ldb) { \
      return scipy_LAPACKE_##p##sytrs_work(LAPACK_COL_MAJOR, 'L', n, nrhs, a, lda, ipiv, b, ldb);  \
    }                                                                                              \
    static lint geev(bool vecs, lint n, T* a, T* wr, T* wi, T* vr, T* work, lint lwork) {          \
      T vl = 0;                                                                                    \
      return scipy_LAPACKE_##p##geev_work(LAPACK_COL_MAJOR, 'N', vecs ? 'V' : 'N', n, a, ld(n),    \
                                          wr, wi, &vl, 1, vr, ld(n), work, lwork);                 \
    }                                                                                              \
  };
EMBER_LAPACK_TYPE(float, s)
EMBER_LAPACK_TYPE(double, d)
#undef EMBER_LAPACK_TYPE

// A LAPACK workspace size from a query's answer (returned as a floating value).
template <class T>
lint work_size(T query) {
  return std::max<lint>(1, static_cast<lint>(query));
}

// LAPACKE's complex element type for std::complex<R> (the same layout as ember's complex
// tensors, which std::complex pointers address).
template <class R>
using lapack_c =
    std::conditional_t<std::is_same_v<R, float>, lapack_complex_float, lapack_complex_double>;
template <class R>
lapack_c<R>* lc(std::complex<R>* p) {
  return reinterpret_cast<lapack_c<R>*>(p);
}
template <class R>
const lapack_c<R>* lc(const std::complex<R>* p) {
  return reinterpret_cast<const lapack_c<R>*>(p);
}

template <class R>
lint work_size(std::complex<R> query) {
  return work_size(query.real());
}

// The c / z routines behind the ops' complex64 / complex128 paths (LU, SVD, the Hermitian
// eigensolver, QR, Cholesky, triangular solves, least squares), for std::complex<R> matrices;
// singular values and eigenvalues are real (R), the real workspaces are `rwork`.
template <class R>
struct CLapack;

#define EMBER_CLAPACK_TYPE(R, p)                                                                   \
  template <>                                                                                      \
  struct CLapack<R> {                                                                              \
    using C = std::complex<R>;                                                                     \
    static lint getrf(lint m, lint n, C* a, lint lda, lint* ipiv) {                                \
      return scipy_LAPACKE_##p##getrf_work(LAPACK_COL_MAJOR, m, n, lc(a), lda, ipiv);              \
    }                                                                                              \
    static lint getrs(char trans, lint n, lint nrhs, const C* a, lint lda, const lint* ipiv, C* b, \
                      lint ldb) {                                                                  \
      return scipy_LAPACKE_##p##getrs_work(LAPACK_COL_MAJOR, trans, n, nrhs, lc(a), lda, ipiv,     \
                                           lc(b), ldb);                                            \
    }                                                                                              \
    static lint gesdd(char jobz, lint m, lint n, C* a, lint lda, R* s, C* u, lint ldu, C* vt,      \
                      lint ldvt, C* work, lint lwork, R* rwork, lint* iwork) {                     \
      return scipy_LAPACKE_##p##gesdd_work(LAPACK_COL_MAJOR, jobz, m, n, lc(a), lda, s, lc(u),     \
                                           ldu, lc(vt), ldvt, lc(work), lwork, rwork, iwork);      \
    }                                                                                              \
    static lint heevd(char jobz, char uplo, lint n, C* a, lint lda, R* w, C* work, lint lwork,     \
                      R* rwork, lint lrwork, lint* iwork, lint liwork) {                           \
      return scipy_LAPACKE_##p##heevd_work(LAPACK_COL_MAJOR, jobz, uplo, n, lc(a), lda, w,         \
                                           lc(work), lwork, rwork, lrwork, iwork, liwork);         \
    }                                                                                              \
    static lint geqrf(lint m, lint n, C* a, lint lda, C* tau, C* work, lint lwork) {               \
      return scipy_LAPACKE_##p##geqrf_work(LAPACK_COL_MAJOR, m, n, lc(a), lda, lc(tau), lc(work),  \
                                           lwork);                                                 \
    }                                                                                              \
    static lint ungqr(lint m, lint n, lint k, C* a, lint lda, const C* tau, C* work, lint lwork) { \
      return scipy_LAPACKE_##p##ungqr_work(LAPACK_COL_MAJOR, m, n, k, lc(a), lda, lc(tau),         \
                                           lc(work), lwork);                                       \
    }                                                                                              \
    static lint potrf(char uplo, lint n, C* a, lint lda) {                                         \
      return scipy_LAPACKE_##p##potrf_work(LAPACK_COL_MAJOR, uplo, n, lc(a), lda);                 \
    }                                                                                              \
    static void trsm(bool upper, bool unit, lint m, lint n, const C* a, lint lda, C* b,            \
                     lint ldb) {                                                                   \
      const C one = 1;                                                                             \
      scipy_cblas_##p##trsm(CblasColMajor, CblasLeft, upper ? CblasUpper : CblasLower,             \
                            CblasNoTrans, unit ? CblasUnit : CblasNonUnit, m, n, &one, a, lda, b,  \
                            ldb);                                                                  \
    }                                                                                              \
    static lint gelsy(lint m, lint n, lint nrhs, C* a, lint lda, C* b, lint ldb, lint* jpvt,       \
                      R rcond, lint* rank, C* work, lint lwork, R* rwork) {                        \
      return scipy_LAPACKE_##p##gelsy_work(LAPACK_COL_MAJOR, m, n, nrhs, lc(a), lda, lc(b), ldb,   \
                                           jpvt, rcond, rank, lc(work), lwork, rwork);             \
    }                                                                                              \
    static lint gelsd(lint m, lint n, lint nrhs, C* a, lint lda, C* b, lint ldb, R* s, R rcond,    \
                      lint* rank, C* work, lint lwork, R* rwork, lint* iwork) {                    \
      return scipy_LAPACKE_##p##gelsd_work(LAPACK_COL_MAJOR, m, n, nrhs, lc(a), lda, lc(b), ldb,   \
                                           s, rcond, rank, lc(work), lwork, rwork, iwork);         \
    }                                                                                              \
    static lint gelss(lint m, lint n, lint nrhs, C* a, lint lda, C* b, lint ldb, R* s, R rcond,    \
                      lint* rank, C* work, lint lwork, R* rwork) {                                 \
      return scipy_LAPACKE_##p##gelss_work(LAPACK_COL_MAJOR, m, n, nrhs, lc(a), lda, lc(b), ldb,   \
                                           s, rcond, rank, lc(work), lwork, rwork);                \
    }                                                                                              \
    static lint gels(lint m, lint n, lint nrhs, C* a, lint lda, C* b, lint ldb, C* work,           \
                     lint lwork) {                                                                 \
      return scipy_LAPACKE_##p##gels_work(LAPACK_COL_MAJOR, 'N', m, n, nrhs, lc(a), lda, lc(b),    \
                                          ldb, lc(work), lwork);                                   \
    }                                                                                              \
  };
EMBER_CLAPACK_TYPE(float, c)
EMBER_CLAPACK_TYPE(double, z)
#undef EMBER_CLAPACK_TYPE

// f(R{}) for the part type R of a complex64 / complex128 dtype.
template <class F>
void dispatch_complex(ScalarType dt, F f) {
  if (dt == ScalarType::Complex64)
    f(float{});
  else
    f(double{});
}

// ---- layouts and checks ----------------------------------------------------------------------

DimVector batch_of(const Tensor& t) { return DimVector(t->sizes().begin(), t->sizes().end() - 2); }

int64_t count_of(const DimVector& batch) {
  int64_t n = 1;
  for (int64_t s : batch) n *= s;
  return n;
}

DimVector with(DimVector batch, std::initializer_list<int64_t> tail) {
  for (int64_t s : tail) batch.push_back(s);
  return batch;
}

// A new tensor of sizes (batch..., r, c) whose matrices are column-major.
Tensor empty_col_major(const DimVector& batch, int64_t r, int64_t c, ScalarType dt, Device dev) {
  DimVector strides = contiguous_strides(with(batch, {c, r}));
  std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
  return empty_strided(with(batch, {r, c}), strides, dt, dev);
}

// dst (count column-major r x c matrices, one after another) = t broadcast to (batch..., r, c):
// a direct transposing loop per matrix (for many small matrices the generic strided copy cost
// as much as the factorization of one).
template <class T>
void col_major_fill(T* dst, const Tensor& t, const DimVector& batch) {
  const int64_t d = t->dim(), r = t->size(d - 2), c = t->size(d - 1);
  const int64_t sr = t->stride(d - 2), sc = t->stride(d - 1);
  const int64_t nb = static_cast<int64_t>(batch.size()), lead = nb - (d - 2);
  DimVector bstride(nb, 0);  // t's stride of each batch dim (0 where it broadcasts)
  for (int64_t i = 0; i < d - 2; ++i) bstride[lead + i] = t->size(i) == 1 ? 0 : t->stride(i);
  const T* src = t->data_as<T>();
  const int64_t count = count_of(batch);
  for (int64_t b = 0; b < count; ++b) {
    int64_t off = 0;
    for (int64_t i = nb - 1, rest = b; i >= 0; --i) {
      off += (rest % batch[i]) * bstride[i];
      rest /= batch[i];
    }
    const T* s = src + off;
    T* o = dst + b * r * c;
    for (int64_t j = 0; j < c; ++j)
      for (int64_t i = 0; i < r; ++i) o[j * r + i] = s[i * sr + j * sc];
  }
}

// A column-major copy of t broadcast to (batch..., rows of t, cols of t).
Tensor col_major_copy(const Tensor& t, const DimVector& batch) {
  const int64_t d = t->dim();
  Tensor out = empty_col_major(batch, t->size(d - 2), t->size(d - 1), t->dtype(), t->device());
  if (out->device().is_meta() || out->numel() == 0) return fresh(out);
  if (t->dtype() == ScalarType::Float64)
    col_major_fill(out->data_as<double>(), t, batch);
  else if (t->dtype() == ScalarType::Float32)
    col_major_fill(out->data_as<float>(), t, batch);
  else
    copy_into(out, t);
  return fresh(out);
}

// The checks every op here makes of a matrix operand (the Python wrappers make the same
// checks first, under the public op's name).
// complex_ok: complex64 / complex128 are accepted too.
void check_matrix(const char* op, const Tensor& t, const char* name, bool square,
                  bool complex_ok = false) {
  EMBER_CHECK(t->dim() >= 2, op, ": The input tensor ", name, " must have at least 2 dimensions.");
  const ScalarType dt = t->dtype();
  // float16 / bfloat16 have no LAPACK kernel: a NotImplementedError, as torch's
  if (!(dt == ScalarType::Float32 || dt == ScalarType::Float64 || (complex_ok && is_complex(dt))))
    detail::fail(is_floating(dt) ? ErrorKind::NotImplemented : ErrorKind::Runtime, op,
                 ": expected ", name, " of dtype float32 or float64",
                 complex_ok ? ", complex64 or complex128" : "", ", got ", dtype_name(dt));
  const int64_t m = t->size(t->dim() - 2), n = t->size(t->dim() - 1);
  EMBER_CHECK(!square || m == n, op, ": ", name,
              " must be batches of square matrices, but they are ", m, " by ", n, " matrices");
  EMBER_CHECK(m <= INT_MAX && n <= INT_MAX, op, ": ", name, " of size ", m, " x ", n,
              " is too large for LAPACK (32-bit sizes)");
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  EMBER_CHECK(a->dtype() == b->dtype(), op, ": Expected A and B to have the same dtype, but found",
              " A of type ", dtype_name(a->dtype()), " and B of type ", dtype_name(b->dtype()),
              " instead");
}

// The broadcast batch shape of two operands (their dims before the matrix dims).
DimVector batch_broadcast(const char* op, const Tensor& a, const Tensor& b) {
  return broadcast_shapes(batch_of(a), batch_of(b), op);
}

Tensor zeros_int(const DimVector& sizes, Device dev) {
  Tensor t = ember::empty(sizes, ScalarType::Int32, dev);
  if (!dev.is_meta()) std::fill_n(t->data_as<int32_t>(), t->numel(), 0);
  return t;
}

// Runs f(begin, end) over chunks of the batch elements [0, count): over ember's threads when
// there are many small matrices (OpenBLAS then stays on the calling thread), else as one chunk
// so that OpenBLAS may thread each factorization. A chunk queries LAPACK's workspace once for
// all its matrices (they share one size).
template <class F>
void for_each_chunk(int64_t count, int64_t n, F f) {
  if (count > 1 && n <= 128 && get_num_threads() > 1) {
    int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n * n));
    SerialBlasScope serial;
    parallel_for(0, count, grain, f);
    return;
  }
  sync_blas_threads();
  if (count > 0) f(0, count);
}

// f(b) for every batch element b, as for_each_chunk.
template <class F>
void for_each_matrix(int64_t count, int64_t n, F f) {
  for_each_chunk(count, n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) f(i);
  });
}

// ---- LU ----------------------------------------------------------------------------------------

// Square matrices up to this size are factored and solved by the loops below rather than
// LAPACK's getrf / getrs, whose per-call layers (workspace blocking, BLAS dispatch of every
// column's pivot search, swap, scaling and update) cost more than the arithmetic of a small
// matrix.
constexpr int64_t kSmallLu = 32;

#if defined(__GNUC__) && defined(__x86_64__)
#define EMBER_LU_AVX2 1
#define EMBER_LU_INLINE inline __attribute__((always_inline))
#else
#define EMBER_LU_AVX2 0
#define EMBER_LU_INLINE inline
#endif

// getrf's unblocked algorithm (dgetf2) on the column-major n x n matrix a: partial pivoting on
// the first entry of largest magnitude, the whole rows swapped, the column below the pivot
// scaled by its reciprocal (divided when that would overflow), then the rank-1 update of the
// trailing matrix. Returns LAPACK's info: 0, or j + 1 for the first zero pivot U[j, j].
template <class T>
EMBER_LU_INLINE int32_t small_getrf_impl(int64_t n, T* a, int32_t* ipiv) {
  int32_t info = 0;
  for (int64_t j = 0; j < n; ++j) {
    T* cj = a + j * n;
    int64_t p = j;
    T best = std::abs(cj[j]);
    for (int64_t i = j + 1; i < n; ++i) {
      const T v = std::abs(cj[i]);
      if (v > best) {
        best = v;
        p = i;
      }
    }
    ipiv[j] = static_cast<int32_t>(p + 1);
    if (cj[p] != T(0)) {
      if (p != j)
        for (int64_t c = 0; c < n; ++c) std::swap(a[c * n + j], a[c * n + p]);
      const T d = cj[j];
      if (std::abs(d) >= std::numeric_limits<T>::min()) {
        const T r = T(1) / d;
        for (int64_t i = j + 1; i < n; ++i) cj[i] *= r;
      } else {
        for (int64_t i = j + 1; i < n; ++i) cj[i] /= d;
      }
    } else if (info == 0) {
      info = static_cast<int32_t>(j + 1);
    }
    for (int64_t c = j + 1; c < n; ++c) {
      T* cc = a + c * n;
      const T f = cc[j];
      for (int64_t i = j + 1; i < n; ++i) cc[i] -= cj[i] * f;
    }
  }
  return info;
}

// getrs('N'): B (n x k, column-major) = A^-1 B from small_getrf's factors, up to 64 columns of
// B at a time: they are gathered into rows (in the pivots' row order), so the unit lower and the
// upper triangular solves update whole rows of right-hand sides with vector loops, then written
// back. Every element sees the same operations in the same order as a column-by-column solve.
template <class T>
EMBER_LU_INLINE void small_getrs_impl(int64_t n, int64_t k, const T* a, const int32_t* ipiv, T* b) {
  constexpr int64_t kCols = 64;
  int32_t perm[kSmallLu];
  for (int64_t i = 0; i < n; ++i) perm[i] = static_cast<int32_t>(i);
  for (int64_t j = 0; j < n; ++j) std::swap(perm[j], perm[ipiv[j] - 1]);
  T buf[kSmallLu * kCols];
  for (int64_t c0 = 0; c0 < k; c0 += kCols) {
    const int64_t kc = std::min(kCols, k - c0);
    for (int64_t c = 0; c < kc; ++c)
      for (int64_t i = 0; i < n; ++i) buf[i * kc + c] = b[(c0 + c) * n + perm[i]];
    for (int64_t j = 0; j < n; ++j) {
      const T* rj = buf + j * kc;
      for (int64_t i = j + 1; i < n; ++i) {
        const T l = a[j * n + i];
        T* ri = buf + i * kc;
        for (int64_t c = 0; c < kc; ++c) ri[c] -= l * rj[c];
      }
    }
    for (int64_t j = n - 1; j >= 0; --j) {
      T* rj = buf + j * kc;
      const T d = a[j * n + j];
      for (int64_t c = 0; c < kc; ++c) rj[c] /= d;
      for (int64_t i = 0; i < j; ++i) {
        const T u = a[j * n + i];
        T* ri = buf + i * kc;
        for (int64_t c = 0; c < kc; ++c) ri[c] -= u * rj[c];
      }
    }
    for (int64_t c = 0; c < kc; ++c)
      for (int64_t i = 0; i < n; ++i) b[(c0 + c) * n + i] = buf[i * kc + c];
  }
}

template <class T>
void small_getrf_all(int64_t n, T* a, int32_t* ipiv, int32_t* info, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) info[i] = small_getrf_impl(n, a + i * n * n, ipiv + i * n);
}
template <class T>
void small_getrs_all(int64_t n, int64_t k, const T* a, const int32_t* ipiv, T* x, int64_t b,
                     int64_t e) {
  for (int64_t i = b; i < e; ++i)
    small_getrs_impl(n, k, a + i * n * n, ipiv + i * n, x + i * n * k);
}

#if EMBER_LU_AVX2
template <class T>
__attribute__((target("avx2"))) void small_getrf_avx2(int64_t n, T* a, int32_t* ipiv, int32_t* info,
                                                      int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) info[i] = small_getrf_impl(n, a + i * n * n, ipiv + i * n);
}
template <class T>
__attribute__((target("avx2"))) void small_getrs_avx2(int64_t n, int64_t k, const T* a,
                                                      const int32_t* ipiv, T* x, int64_t b,
                                                      int64_t e) {
  for (int64_t i = b; i < e; ++i)
    small_getrs_impl(n, k, a + i * n * n, ipiv + i * n, x + i * n * k);
}
#endif

template <class T>
void lu_factor_batch(const Tensor& lu, const Tensor& piv, const Tensor& info, int64_t count,
                     int64_t m, int64_t n) {
  const int64_t k = std::min(m, n);
  T* a = lu->data_as<T>();
  int32_t* p = piv->data_as<int32_t>();
  int32_t* inf = info->data_as<int32_t>();
  if (m == n && n <= kSmallLu) {
    for_each_chunk(count, n, [&](int64_t b, int64_t e) {
#if EMBER_LU_AVX2
      if (cpu_isa() >= Isa::Avx2) return small_getrf_avx2(n, a, p, inf, b, e);
#endif
      small_getrf_all(n, a, p, inf, b, e);
    });
    return;
  }
  for_each_matrix(count, std::max(m, n), [&](int64_t b) {
    inf[b] = Lapack<T>::getrf(lint(m), lint(n), a + b * m * n, ld(m), p + b * k);
  });
}

// Complex LU: getrf for every size.
template <class R>
void lu_factor_batch_c(const Tensor& lu, const Tensor& piv, const Tensor& info, int64_t count,
                       int64_t m, int64_t n) {
  using C = std::complex<R>;
  const int64_t k = std::min(m, n);
  C* a = lu->data_as<C>();
  int32_t* p = piv->data_as<int32_t>();
  int32_t* inf = info->data_as<int32_t>();
  for_each_matrix(count, std::max(m, n), [&](int64_t b) {
    inf[b] = CLapack<R>::getrf(lint(m), lint(n), a + b * m * n, ld(m), p + b * k);
  });
}

// lu_factor_batch for any of the four dtypes.
void lu_factor_any(ScalarType dt, const char* op, const Tensor& lu, const Tensor& piv,
                   const Tensor& info, int64_t count, int64_t m, int64_t n) {
  if (is_complex(dt))
    return dispatch_complex(
        dt, [&](auto r) { lu_factor_batch_c<decltype(r)>(lu, piv, info, count, m, n); });
  EMBER_DISPATCH_BLAS(dt, op, [&] { lu_factor_batch<scalar_t>(lu, piv, info, count, m, n); });
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> _linalg_lu_factor_ex(const Tensor& A, bool pivot) {
  const char* op = "linalg.lu_factor";
  check_matrix(op, A, "A", false, true);
  EMBER_CHECK(pivot, op, ": LU without pivoting is not implemented on the CPU");
  const int64_t m = A->size(A->dim() - 2), n = A->size(A->dim() - 1);
  const DimVector batch = batch_of(A);
  Tensor lu = col_major_copy(A, batch);
  Tensor piv = zeros_int(with(batch, {std::min(m, n)}), A->device());
  Tensor info = zeros_int(batch, A->device());
  if (A->device().is_meta() || lu->numel() == 0) return {lu, piv, info};
  lu_factor_any(A->dtype(), op, lu, piv, info, count_of(batch), m, n);
  return {lu, piv, info};
}

namespace {

// X = op(A)^-1 B from A's LU factors (getrs); x holds B on entry. trans: solve A^T X = B.
template <class T>
void lu_solve_batch(const Tensor& lu, const Tensor& piv, const Tensor& x, int64_t count, int64_t n,
                    int64_t k, bool trans) {
  const T* a = lu->data_as<T>();
  const int32_t* p = piv->data_as<int32_t>();
  T* b = x->data_as<T>();
  if (!trans && n <= kSmallLu) {
    for_each_chunk(count, n, [&](int64_t s, int64_t e) {
#if EMBER_LU_AVX2
      if (cpu_isa() >= Isa::Avx2) return small_getrs_avx2(n, k, a, p, b, s, e);
#endif
      small_getrs_all(n, k, a, p, b, s, e);
    });
    return;
  }
  for_each_matrix(count, n, [&](int64_t i) {
    Lapack<T>::getrs(trans ? 'T' : 'N', lint(n), lint(k), a + i * n * n, ld(n), p + i * n,
                     b + i * n * k, ld(n));
  });
}

template <class R>
void lu_solve_batch_c(const Tensor& lu, const Tensor& piv, const Tensor& x, int64_t count,
                      int64_t n, int64_t k, bool trans) {
  using C = std::complex<R>;
  const C* a = lu->data_as<C>();
  const int32_t* p = piv->data_as<int32_t>();
  C* b = x->data_as<C>();
  for_each_matrix(count, n, [&](int64_t i) {
    CLapack<R>::getrs(trans ? 'T' : 'N', lint(n), lint(k), a + i * n * n, ld(n), p + i * n,
                      b + i * n * k, ld(n));
  });
}

void lu_solve_any(ScalarType dt, const char* op, const Tensor& lu, const Tensor& piv,
                  const Tensor& x, int64_t count, int64_t n, int64_t k, bool trans) {
  if (is_complex(dt))
    return dispatch_complex(
        dt, [&](auto r) { lu_solve_batch_c<decltype(r)>(lu, piv, x, count, n, k, trans); });
  EMBER_DISPATCH_BLAS(dt, op, [&] { lu_solve_batch<scalar_t>(lu, piv, x, count, n, k, trans); });
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor, Tensor> _linalg_solve_ex(const Tensor& A, const Tensor& B) {
  const char* op = "linalg.solve";
  check_matrix(op, A, "A", true, true);
  check_matrix(op, B, "B", false, true);
  check_same_dtype(op, A, B);
  const int64_t n = A->size(A->dim() - 1), k = B->size(B->dim() - 1);
  EMBER_CHECK(B->size(B->dim() - 2) == n, op,
              ": Incompatible shapes of A and B for the equation AX = B (", n, "x", n, " and ",
              B->size(B->dim() - 2), "x", k, ")");
  const DimVector batch = batch_broadcast(op, A, B);
  Tensor lu = col_major_copy(A, batch);
  Tensor x = col_major_copy(B, batch);
  Tensor piv = zeros_int(with(batch, {n}), A->device());
  Tensor info = zeros_int(batch, A->device());
  if (A->device().is_meta() || lu->numel() == 0) return {x, lu, piv, info};
  const int64_t count = count_of(batch);
  lu_factor_any(A->dtype(), op, lu, piv, info, count, n, n);
  if (k > 0) lu_solve_any(A->dtype(), op, lu, piv, x, count, n, k, false);
  return {x, lu, piv, info};
}

Tensor _lu_solve(const Tensor& LU, const Tensor& pivots, const Tensor& B, bool trans) {
  const char* op = "linalg.lu_solve";
  check_matrix(op, LU, "LU", true, true);
  check_matrix(op, B, "B", false, true);
  check_same_dtype(op, LU, B);
  const int64_t n = LU->size(LU->dim() - 1), k = B->size(B->dim() - 1);
  EMBER_CHECK(B->size(B->dim() - 2) == n, op, ": Incompatible shapes of LU and B (", n, "x", n,
              " and ", B->size(B->dim() - 2), "x", k, ")");
  EMBER_CHECK(pivots->dtype() == ScalarType::Int32 || pivots->dtype() == ScalarType::Int64, op,
              ": expected pivots of dtype int32, got ", dtype_name(pivots->dtype()));
  EMBER_CHECK(pivots->dim() == LU->dim() - 1 && pivots->size(pivots->dim() - 1) == n, op,
              ": pivots must have shape (*, ", n, ") matching LU, got ",
              shape_str(pivots->sizes()));
  DimVector batch = batch_broadcast(op, LU, B);
  DimVector pbatch(pivots->sizes().begin(), pivots->sizes().end() - 1);
  batch = broadcast_shapes(batch, pbatch, op);
  Tensor lu = col_major_copy(LU, batch);
  Tensor x = col_major_copy(B, batch);
  if (LU->device().is_meta() || x->numel() == 0) return x;
  Tensor piv = ember::empty(with(batch, {n}), ScalarType::Int32, LU->device());
  copy_into(piv, pivots);
  const int32_t* p = piv->data_as<int32_t>();
  for (int64_t i = 0; i < piv->numel(); ++i)
    EMBER_CHECK(p[i] >= 1 && p[i] <= n, op, ": pivots must be in [1, ", n, "], got ", p[i]);
  lu_solve_any(LU->dtype(), op, lu, piv, x, count_of(batch), n, k, trans);
  return fresh(x);
}

namespace {

// det / slogdet from LU factors: the product of U's diagonal, negated per row interchange.
template <class T>
void lu_det(const Tensor& lu, const Tensor& piv, int64_t count, int64_t n, T* det, T* logabs,
            T* sign) {
  const T* a = lu->data_as<T>();
  const int32_t* p = piv->data_as<int32_t>();
  for (int64_t b = 0; b < count; ++b) {
    const T* m = a + b * n * n;
    bool neg = false;
    T prod = 1, lsum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T d = m[i * n + i];
      if (p[b * n + i] != i + 1) neg = !neg;
      if (det) prod *= d;
      if (logabs) {
        if (d < 0) neg = !neg;
        lsum += std::log(std::abs(d));
        if (d == 0) sign[b] = 0;
      }
    }
    if (det) det[b] = neg ? -prod : prod;
    if (logabs) {
      logabs[b] = lsum;
      if (sign[b] != 0 || std::isnan(lsum)) sign[b] = std::isnan(lsum) ? lsum : (neg ? -1 : 1);
    }
  }
}

// Complex det / slogdet: det = (-1)^swaps prod d_i; log|det| = sum log|d_i| (real) with the
// sign (-1)^swaps prod d_i / |d_i| (complex, of absolute value 1; 0 for a singular matrix).
template <class R>
void lu_det_c(const Tensor& lu, const Tensor& piv, int64_t count, int64_t n, std::complex<R>* det,
              R* logabs, std::complex<R>* sign) {
  using C = std::complex<R>;
  const C* a = lu->data_as<C>();
  const int32_t* p = piv->data_as<int32_t>();
  for (int64_t b = 0; b < count; ++b) {
    const C* m = a + b * n * n;
    bool neg = false, zero = false;
    C prod = 1, phase = 1;
    R lsum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const C d = m[i * n + i];
      if (p[b * n + i] != i + 1) neg = !neg;
      prod *= d;
      const R ad = std::abs(d);
      lsum += std::log(ad);
      if (ad == 0)
        zero = true;
      else
        phase *= d / ad;
    }
    if (det) det[b] = neg ? -prod : prod;
    if (logabs) {
      logabs[b] = lsum;
      sign[b] = std::isnan(lsum) ? C(lsum, lsum) : (zero ? C(0) : (neg ? -phase : phase));
    }
  }
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> _linalg_det(const Tensor& A) {
  const char* op = "linalg.det";
  check_matrix(op, A, "A", true, true);
  const int64_t n = A->size(A->dim() - 1);
  const DimVector batch = batch_of(A);
  Tensor lu = col_major_copy(A, batch);
  Tensor piv = zeros_int(with(batch, {n}), A->device());
  Tensor det = ember::empty(batch, A->dtype(), A->device());
  if (A->device().is_meta()) return {det, lu, piv};
  const int64_t count = count_of(batch);
  Tensor info = zeros_int(batch, A->device());
  if (n > 0) lu_factor_any(A->dtype(), op, lu, piv, info, count, n, n);
  if (is_complex(A->dtype())) {
    dispatch_complex(A->dtype(), [&](auto r) {
      using R = decltype(r);
      lu_det_c<R>(lu, piv, count, n, det->data_as<std::complex<R>>(), nullptr, nullptr);
    });
    return {fresh(det), lu, piv};
  }
  EMBER_DISPATCH_BLAS(A->dtype(), op, [&] {
    lu_det<scalar_t>(lu, piv, count, n, det->data_as<scalar_t>(), nullptr, nullptr);
  });
  return {fresh(det), lu, piv};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> _linalg_slogdet(const Tensor& A) {
  const char* op = "linalg.slogdet";
  check_matrix(op, A, "A", true, true);
  const int64_t n = A->size(A->dim() - 1);
  const DimVector batch = batch_of(A);
  Tensor lu = col_major_copy(A, batch);
  Tensor piv = zeros_int(with(batch, {n}), A->device());
  Tensor logabs = ember::empty(batch, to_real(A->dtype()), A->device());
  Tensor sign = ember::empty(batch, A->dtype(), A->device());
  if (A->device().is_meta()) return {logabs, sign, lu, piv};
  const int64_t count = count_of(batch);
  if (is_complex(A->dtype())) {
    Tensor info = zeros_int(batch, A->device());
    if (n > 0) lu_factor_any(A->dtype(), op, lu, piv, info, count, n, n);
    dispatch_complex(A->dtype(), [&](auto r) {
      using R = decltype(r);
      lu_det_c<R>(lu, piv, count, n, nullptr, logabs->data_as<R>(),
                  sign->data_as<std::complex<R>>());
    });
    return {fresh(logabs), fresh(sign), lu, piv};
  }
  EMBER_DISPATCH_BLAS(A->dtype(), op, [&] {
    Tensor info = zeros_int(batch, A->device());
    if (n > 0) lu_factor_batch<scalar_t>(lu, piv, info, count, n, n);
    scalar_t* s = sign->data_as<scalar_t>();
    std::fill_n(s, count, scalar_t(1));
    lu_det<scalar_t>(lu, piv, count, n, nullptr, logabs->data_as<scalar_t>(), s);
  });
  return {fresh(logabs), fresh(sign), lu, piv};
}

// ---- SVD ---------------------------------------------------------------------------------------

namespace {

// What LAPACK cannot be given: 0 all finite, 1 an infinity (no NaN), 2 a NaN. PyTorch's gesdd
// reports a NaN as a failure to converge and answers NaN for an infinity.
template <class T>
int nonfinite_kind(const T* p, int64_t n) {
  int kind = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(std::real(p[i])) || std::isnan(std::imag(p[i]))) return 2;
    if (std::isinf(std::real(p[i])) || std::isinf(std::imag(p[i]))) kind = 1;
  }
  return kind;
}

// Sets a column-major (r x c) matrix to the first columns of the identity.
template <class T>
void set_eye(T* a, int64_t r, int64_t c) {
  std::fill_n(a, r * c, T(0));
  for (int64_t i = 0; i < std::min(r, c); ++i) a[i * r + i] = 1;
}

template <class T>
void svd_batch(const Tensor& a_t, const Tensor& s_t, const Tensor& u_t, const Tensor& vh_t,
               const Tensor& info_t, int64_t count, int64_t m, int64_t n, bool full, bool uv) {
  const int64_t k = std::min(m, n);
  const int64_t ucols = full ? m : k, vrows = full ? n : k;
  T* a = a_t->data_as<T>();
  T* s = s_t->data_as<T>();
  T* u = uv ? u_t->data_as<T>() : nullptr;
  T* vt = uv ? vh_t->data_as<T>() : nullptr;
  int32_t* info = info_t->data_as<int32_t>();
  const char jobz = !uv ? 'N' : (full ? 'A' : 'S');
  for_each_chunk(count, std::max(m, n), [&](int64_t begin, int64_t end) {
    std::vector<lint> iwork(std::max<int64_t>(1, 8 * k));
    std::vector<T> work;
    T dummy = 0;
    for (int64_t b = begin; b < end; ++b) {
      T* ab = a + b * m * n;
      T* ub = uv ? u + b * m * ucols : &dummy;
      T* vb = uv ? vt + b * vrows * n : &dummy;
      if (k == 0) {  // an empty matrix: no singular values, identity singular vectors
        if (uv) {
          set_eye(ub, m, ucols);
          set_eye(vb, vrows, n);
        }
        continue;
      }
      if (const int bad = nonfinite_kind(ab, m * n)) {  // LAPACK's result there is undefined
        info[b] = bad == 2 ? -1 : 0;
        std::fill_n(s + b * k, k, std::numeric_limits<T>::quiet_NaN());
        if (uv) {
          std::fill_n(ub, m * ucols, std::numeric_limits<T>::quiet_NaN());
          std::fill_n(vb, vrows * n, std::numeric_limits<T>::quiet_NaN());
        }
        continue;
      }
      if (work.empty()) {
        T query = 0;
        Lapack<T>::gesdd(jobz, lint(m), lint(n), ab, ld(m), s + b * k, ub, ld(m), vb, ld(vrows),
                         &query, -1, iwork.data());
        work.resize(work_size(query));
      }
      info[b] = Lapack<T>::gesdd(jobz, lint(m), lint(n), ab, ld(m), s + b * k, ub, ld(m), vb,
                                 ld(vrows), work.data(), lint(work.size()), iwork.data());
    }
  });
}

// svd_batch for complex matrices (gesdd's c / z forms): s real, u and vt complex.
template <class R>
void svd_batch_c(const Tensor& a_t, const Tensor& s_t, const Tensor& u_t, const Tensor& vh_t,
                 const Tensor& info_t, int64_t count, int64_t m, int64_t n, bool full, bool uv) {
  using C = std::complex<R>;
  const int64_t k = std::min(m, n), mx = std::max(m, n);
  const int64_t ucols = full ? m : k, vrows = full ? n : k;
  C* a = a_t->data_as<C>();
  R* s = s_t->data_as<R>();
  C* u = uv ? u_t->data_as<C>() : nullptr;
  C* vt = uv ? vh_t->data_as<C>() : nullptr;
  int32_t* info = info_t->data_as<int32_t>();
  const char jobz = !uv ? 'N' : (full ? 'A' : 'S');
  const R nan = std::numeric_limits<R>::quiet_NaN();
  for_each_chunk(count, mx, [&](int64_t begin, int64_t end) {
    std::vector<lint> iwork(std::max<int64_t>(1, 8 * k));
    // LAPACK's bound on rwork (for jobz 'N' 7 k, which older versions need)
    std::vector<R> rwork(
        std::max<int64_t>(1, uv ? k * std::max(5 * k + 7, 2 * mx + 2 * k + 1) : 7 * k));
    std::vector<C> work;
    C dummy = 0;
    for (int64_t b = begin; b < end; ++b) {
      C* ab = a + b * m * n;
      C* ub = uv ? u + b * m * ucols : &dummy;
      C* vb = uv ? vt + b * vrows * n : &dummy;
      if (k == 0) {
        if (uv) {
          set_eye(ub, m, ucols);
          set_eye(vb, vrows, n);
        }
        continue;
      }
      if (const int bad = nonfinite_kind(ab, m * n)) {
        info[b] = bad == 2 ? -1 : 0;
        std::fill_n(s + b * k, k, nan);
        if (uv) {
          std::fill_n(ub, m * ucols, C(nan, nan));
          std::fill_n(vb, vrows * n, C(nan, nan));
        }
        continue;
      }
      if (work.empty()) {
        C query = 0;
        CLapack<R>::gesdd(jobz, lint(m), lint(n), ab, ld(m), s + b * k, ub, ld(m), vb, ld(vrows),
                          &query, -1, rwork.data(), iwork.data());
        work.resize(work_size(query));
      }
      info[b] =
          CLapack<R>::gesdd(jobz, lint(m), lint(n), ab, ld(m), s + b * k, ub, ld(m), vb, ld(vrows),
                            work.data(), lint(work.size()), rwork.data(), iwork.data());
    }
  });
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor, Tensor> _linalg_svd(const Tensor& A, bool full_matrices,
                                                       bool compute_uv) {
  const char* op = "linalg.svd";
  check_matrix(op, A, "A", false, true);
  const int64_t m = A->size(A->dim() - 2), n = A->size(A->dim() - 1), k = std::min(m, n);
  const DimVector batch = batch_of(A);
  Tensor a = col_major_copy(A, batch);
  Tensor s = ember::empty(with(batch, {k}), to_real(A->dtype()), A->device());
  Tensor u, vh;
  if (compute_uv) {
    u = empty_col_major(batch, m, full_matrices ? m : k, A->dtype(), A->device());
    vh = empty_col_major(batch, full_matrices ? n : k, n, A->dtype(), A->device());
  } else {
    u = ember::empty({0}, A->dtype(), A->device());
    vh = ember::empty({0}, A->dtype(), A->device());
  }
  Tensor info = zeros_int(batch, A->device());
  if (A->device().is_meta()) return {u, s, vh, info};
  if (is_complex(A->dtype())) {
    dispatch_complex(A->dtype(), [&](auto r) {
      svd_batch_c<decltype(r)>(a, s, u, vh, info, count_of(batch), m, n, full_matrices, compute_uv);
    });
    return {fresh(u), fresh(s), fresh(vh), info};
  }
  EMBER_DISPATCH_BLAS(A->dtype(), op, [&] {
    svd_batch<scalar_t>(a, s, u, vh, info, count_of(batch), m, n, full_matrices, compute_uv);
  });
  return {fresh(u), fresh(s), fresh(vh), info};
}

// ---- symmetric eigendecomposition ----------------------------------------------------------

namespace {

// Matrices up to this size are decomposed here (in double whatever the dtype): for them syevd's
// setup and its calls per column cost more than the arithmetic.
constexpr int64_t kSmallEigh = 32;

// sqrt(x^2 + y^2) for the rescaled entries of small_tridiag's matrices (no overflow there).
inline double norm2(double x, double y) { return std::sqrt(x * x + y * y); }

// Householder reduction of one symmetric n x n matrix (n in [1, kSmallEigh]) to tridiagonal form
// (d, e), in double (the classic tred2 / tql2 pair is small_tridiag and small_ql). a: the
// column-major input, of which the uplo triangle is read. With vecs, z's row j is column j of
// the reduction's orthogonal factor. scale_exp: the power of 2 the eigenvalues are to be scaled
// by. False when the matrix holds a non-finite entry.
template <class T>
bool small_tridiag(const T* a, char uplo, int64_t n, bool vecs, double* d, double* e, double* z,
                   int* scale_exp) {
  constexpr int64_t N = kSmallEigh;
  double A[N * N];  // row-major, both triangles: the matrix, reduced in place
  double U[N * N];  // row i: the Householder vector of step i (entries 0 .. i-1)
  double H[N], p[N];
  double amax = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k <= i; ++k) {
      const double v = static_cast<double>(uplo == 'L' ? a[k * n + i] : a[i * n + k]);
      if (!std::isfinite(v)) return false;
      amax = std::max(amax, std::abs(v));
      A[i * n + k] = A[k * n + i] = v;
    }
  // A power of 2 brings the entries near 1 (exactly), so that the plain sqrt(x^2 + y^2) below
  // can neither overflow nor lose its result to underflow.
  int ex = 0;
  if (amax > 0) std::frexp(amax, &ex);
  const bool scaled = ex > 200 || ex < -200;
  if (scaled)
    for (int64_t i = 0; i < n * n; ++i) A[i] = std::ldexp(A[i], -ex);
  // Householder: for i = n-1 .. 1, a reflection P = 1 - u u' / h zeroes row i left of its
  // subdiagonal and is applied on both sides of the leading i x i block (A -= u q' + q u' with
  // p = A u / h, q = p - (u.p / 2h) u). e[i] gets the subdiagonal entry (i, i-1), H[i] h (0: no
  // reflection).
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t l = i - 1;
    double* ai = A + i * n;
    double* u = U + i * n;
    double scale = 0;
    for (int64_t k = 0; k <= l; ++k) scale += std::abs(ai[k]);
    H[i] = 0;
    if (l == 0 || scale == 0) {
      e[i] = ai[l];
      continue;
    }
    double h = 0;
    for (int64_t k = 0; k <= l; ++k) {
      u[k] = ai[k] / scale;
      h += u[k] * u[k];
    }
    const double f = u[l];
    const double g = f >= 0 ? -std::sqrt(h) : std::sqrt(h);
    e[i] = scale * g;
    h -= f * g;
    u[l] = f - g;
    H[i] = h;
    double up = 0;
    for (int64_t j = 0; j <= l; ++j) {
      const double* aj = A + j * n;
      double s = 0;
      for (int64_t k = 0; k <= l; ++k) s += aj[k] * u[k];
      p[j] = s / h;
      up += p[j] * u[j];
    }
    const double K = up / (h + h);
    for (int64_t j = 0; j <= l; ++j) p[j] -= K * u[j];
    for (int64_t j = 0; j <= l; ++j) {
      double* aj = A + j * n;
      const double uj = u[j], qj = p[j];
      for (int64_t k = 0; k <= l; ++k) aj[k] -= uj * p[k] + qj * u[k];
    }
  }
  e[0] = 0;
  for (int64_t i = 0; i < n; ++i) d[i] = A[i * n + i];
  if (vecs) {
    // Q = P_{n-1} ... P_1, built into A's storage (row-major) from the first reflection on:
    // step i applies P_i to the leading i x i block, whose later rows and columns are still
    // the identity's.
    double* Q = A;
    for (int64_t i = 0; i < n * n; ++i) Q[i] = 0;
    for (int64_t i = 0; i < n; ++i) Q[i * n + i] = 1;
    for (int64_t i = 1; i < n; ++i) {
      if (H[i] == 0) continue;
      const double* u = U + i * n;
      for (int64_t j = 0; j < i; ++j) p[j] = 0;
      for (int64_t k = 0; k < i; ++k) {
        const double* qk = Q + k * n;
        for (int64_t j = 0; j < i; ++j) p[j] += u[k] * qk[j];
      }
      for (int64_t k = 0; k < i; ++k) {
        double* qk = Q + k * n;
        const double c = u[k] / H[i];
        for (int64_t j = 0; j < i; ++j) qk[j] -= c * p[j];
      }
    }
    for (int64_t j = 0; j < n; ++j)
      for (int64_t k = 0; k < n; ++k) z[j * n + k] = Q[k * n + j];
  }
  *scale_exp = scaled ? ex : 0;
  // e[i] becomes the entry (i, i+1), as the QL iteration takes it.
  for (int64_t i = 1; i < n; ++i) e[i - 1] = e[i];
  e[n - 1] = 0;
  return true;
}

// w = the eigenvalues d in ascending order times 2^scale_exp, with z: vout's columns (column-major
// n x n) the matching rows of z.
template <class T>
void small_store(const double* d, const double* z, int64_t n, int scale_exp, T* w, T* vout) {
  int64_t order[kSmallEigh];
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order, order + n, [&](int64_t x, int64_t y) { return d[x] < d[y]; });
  for (int64_t i = 0; i < n; ++i) {
    w[i] = static_cast<T>(scale_exp != 0 ? std::ldexp(d[order[i]], scale_exp) : d[order[i]]);
    if (z)
      for (int64_t k = 0; k < n; ++k) vout[i * n + k] = static_cast<T>(z[order[i] * n + k]);
  }
}

// The implicit QL iteration with Wilkinson shifts on the tridiagonal (d, e), e[i] the entry
// (i, i+1), as a resumable state: d becomes the eigenvalues (unordered); with z (row j: vector j
// of the reduction's factor), the rotations go into z's rows too; `failed` when an eigenvalue
// takes over 60 sweeps. step() does one deflation search (and a sweep's setup) or one rotation,
// so that two matrices' iterations can be interleaved. Each rotation
// waits on the last one's square root and divisions; two independent chains keep the core busy.
struct QlValues {
  double *d = nullptr, *e = nullptr, *z = nullptr;  // z: as small_ql's (null: no vectors)
  int64_t n = 0, l = 0, m = 0, i = 0;
  int iter = 0;
  double g = 0, s = 0, c = 0, p = 0;
  bool sweep = false, done = false, failed = false;

  inline void step() {
    if (!sweep) {
      if (l >= n) {
        done = true;
        return;
      }
      const double eps = std::numeric_limits<double>::epsilon();
      m = l;
      for (; m < n - 1; ++m)
        if (std::abs(e[m]) <= eps * (std::abs(d[m]) + std::abs(d[m + 1]))) break;
      if (m == l) {
        ++l;
        iter = 0;
        return;
      }
      if (iter++ == 60) {
        failed = done = true;
        return;
      }
      g = (d[l + 1] - d[l]) / (2 * e[l]);
      const double r = norm2(g, 1.0);
      g = d[m] - d[l] + e[l] / (g + (g >= 0 ? r : -r));
      s = c = 1;
      p = 0;
      i = m - 1;
      sweep = true;
      return;
    }
    const double f = s * e[i], b = c * e[i];
    double r = norm2(f, g);
    e[i + 1] = r;
    if (r == 0) {  // underflow: split the matrix here and start over
      d[i + 1] -= p;
      e[m] = 0;
      sweep = false;
      return;
    }
    s = f / r;
    c = g / r;
    g = d[i + 1] - p;
    r = (d[i] - g) * s + 2 * c * b;
    p = s * r;
    d[i + 1] = g + p;
    g = c * r - b;
    if (z) {
      double* z0 = z + i * n;
      double* z1 = z + (i + 1) * n;
      for (int64_t k = 0; k < n; ++k) {
        const double t = z1[k];
        z1[k] = s * z0[k] + c * t;
        z0[k] = c * z0[k] - s * t;
      }
    }
    if (--i < l) {
      d[l] -= p;
      e[l] = g;
      e[m] = 0;
      sweep = false;
    }
  }
};

// QlValues run to the end for one matrix; false when it failed.
bool small_ql(double* d, double* e, int64_t n, double* z) {
  QlValues q;
  q.d = d;
  q.e = e;
  q.z = z;
  q.n = n;
  while (!q.done) q.step();
  return !q.failed;
}

// Eigenvalues (ascending, into w) and, with vecs, eigenvectors of one symmetric n x n matrix, n
// in [1, kSmallEigh]: small_tridiag, small_ql, small_store. a: the column-major input, of which
// the uplo triangle is read; with vecs, vout receives the eigenvectors as its columns
// (column-major, like syevd's). Returns false, writing nothing, when the matrix holds a
// non-finite entry or the iteration does not settle (the caller then runs syevd, which reports
// such matrices its own way).
template <class T>
bool small_eigh(const T* a, char uplo, int64_t n, bool vecs, T* w, T* vout) {
  double d[kSmallEigh], e[kSmallEigh], z[kSmallEigh * kSmallEigh];
  int ex = 0;
  if (!small_tridiag(a, uplo, n, vecs, d, e, z, &ex)) return false;
  if (!small_ql(d, e, n, vecs ? z : nullptr)) return false;
  small_store(d, vecs ? z : nullptr, n, ex, w, vout);
  return true;
}

// small_eigh of two matrices of the same size, their QL iterations interleaved. ok[k]: matrix k
// is done (else nothing was written for it).
template <class T>
void small_eigh_pair(const T* const a[2], char uplo, int64_t n, bool vecs, T* const w[2],
                     T* const v[2], bool ok[2]) {
  double d[2][kSmallEigh], e[2][kSmallEigh], z[2][kSmallEigh * kSmallEigh];
  int ex[2] = {0, 0};
  QlValues q[2];
  for (int k = 0; k < 2; ++k) {
    ok[k] = small_tridiag(a[k], uplo, n, vecs, d[k], e[k], z[k], &ex[k]);
    q[k].d = d[k];
    q[k].e = e[k];
    q[k].z = vecs ? z[k] : nullptr;
    q[k].n = n;
    q[k].done = !ok[k];
  }
  while (!q[0].done && !q[1].done) {
    q[0].step();
    q[1].step();
  }
  for (int k = 0; k < 2; ++k) {
    while (!q[k].done) q[k].step();
    ok[k] = ok[k] && !q[k].failed;
    if (ok[k]) small_store<T>(d[k], vecs ? z[k] : nullptr, n, ex[k], w[k], v[k]);
  }
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> _linalg_eigh(const Tensor& A, const std::string& UPLO,
                                                bool compute_v) {
  const char* op = "linalg.eigh";
  check_matrix(op, A, "A", true, true);
  EMBER_CHECK(UPLO == "L" || UPLO == "U" || UPLO == "l" || UPLO == "u", op,
              ": Expected UPLO argument to be 'L' or 'U', but got ", UPLO);
  const int64_t n = A->size(A->dim() - 1);
  const DimVector batch = batch_of(A);
  Tensor v = col_major_copy(A, batch);
  Tensor w = ember::empty(with(batch, {n}), to_real(A->dtype()), A->device());
  Tensor info = zeros_int(batch, A->device());
  Tensor vecs = compute_v ? v : ember::empty({0}, A->dtype(), A->device());
  if (A->device().is_meta() || v->numel() == 0) return {w, vecs, info};
  const char jobz = compute_v ? 'V' : 'N';
  const char uplo = (UPLO == "U" || UPLO == "u") ? 'U' : 'L';
  if (is_complex(A->dtype())) {  // heevd for every size
    dispatch_complex(A->dtype(), [&](auto r) {
      using R = decltype(r);
      using C = std::complex<R>;
      C* a = v->data_as<C>();
      R* wp = w->data_as<R>();
      int32_t* inf = info->data_as<int32_t>();
      for_each_chunk(count_of(batch), n, [&](int64_t begin, int64_t end) {
        C query = 0;
        R rquery = 0;
        lint iquery = 0;
        CLapack<R>::heevd(jobz, uplo, lint(n), a + begin * n * n, ld(n), wp + begin * n, &query, -1,
                          &rquery, -1, &iquery, -1);
        std::vector<C> work(work_size(query));
        std::vector<R> rwork(work_size(rquery));
        std::vector<lint> iwork(std::max<lint>(1, iquery));
        for (int64_t b = begin; b < end; ++b)
          inf[b] = CLapack<R>::heevd(jobz, uplo, lint(n), a + b * n * n, ld(n), wp + b * n,
                                     work.data(), lint(work.size()), rwork.data(),
                                     lint(rwork.size()), iwork.data(), lint(iwork.size()));
      });
    });
    return {fresh(w), compute_v ? fresh(v) : vecs, info};
  }
  EMBER_DISPATCH_BLAS(A->dtype(), op, [&] {
    using T = scalar_t;
    T* a = v->data_as<T>();
    T* wp = w->data_as<T>();
    int32_t* inf = info->data_as<int32_t>();
    for_each_chunk(count_of(batch), n, [&](int64_t begin, int64_t end) {
      std::vector<T> work, small;
      std::vector<lint> iwork;
      bool done[2] = {false, false};  // matrices b and b + 1 (b - begin even) in pairs
      if (compute_v) small.resize(2 * n * n);
      for (int64_t b = begin; b < end; ++b) {
        T* ab = a + b * n * n;
        const int64_t k = (b - begin) % 2;
        if (n <= kSmallEigh) {
          // The vectors go to a scratch matrix: the input is read until the end.
          if (k == 0 && b + 1 < end) {
            const T* const in[2] = {ab, ab + n * n};
            T* const wk[2] = {wp + b * n, wp + (b + 1) * n};
            T* const vk[2] = {compute_v ? small.data() : nullptr,
                              compute_v ? small.data() + n * n : nullptr};
            small_eigh_pair(in, uplo, n, compute_v, wk, vk, done);
          } else if (k == 0) {
            done[0] = small_eigh(ab, uplo, n, compute_v, wp + b * n, small.data());
          }
          if (done[k]) {
            if (compute_v)
              std::copy(small.begin() + k * n * n, small.begin() + (k + 1) * n * n, ab);
            continue;
          }
        }
        if (work.empty()) {
          T query = 0;
          lint iquery = 0;
          Lapack<T>::syevd(jobz, uplo, lint(n), ab, ld(n), wp + b * n, &query, -1, &iquery, -1);
          work.resize(work_size(query));
          iwork.resize(std::max<lint>(1, iquery));
        }
        inf[b] = Lapack<T>::syevd(jobz, uplo, lint(n), ab, ld(n), wp + b * n, work.data(),
                                  lint(work.size()), iwork.data(), lint(iwork.size()));
      }
    });
  });
  return {fresh(w), compute_v ? fresh(v) : vecs, info};
}

// ---- QR ----------------------------------------------------------------------------------------

namespace {

// Matrices with both sizes up to this are factored by the loops below: LAPACK's geqrf / orgqr
// use their unblocked forms (geqr2 / org2r) there anyway, one BLAS call per column and step.
constexpr int64_t kSmallQr = 32;

// LAPACK's dnrm2 of x[0 .. n): no overflow or underflow in the squares; NaN propagates and an
// infinite entry (without NaN) gives inf.
template <class T>
EMBER_LU_INLINE T safe_nrm2(const T* x, int64_t n) {
  T big = 0, s = 0;
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    const T v = std::abs(x[i]);
    nan |= v != v;
    big = std::max(big, v);
    s += v * v;
  }
  if (nan) return std::numeric_limits<T>::quiet_NaN();
  if (big == 0 || std::isinf(big)) return big;
  const T eps = std::numeric_limits<T>::epsilon();
  const T lo = std::sqrt(std::numeric_limits<T>::min()) / eps;
  const T hi = std::sqrt(std::numeric_limits<T>::max()) * eps;
  if (big > lo && big < hi) return std::sqrt(s);
  T t = 0;
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i] / big;
    t += v * v;
  }
  return big * std::sqrt(t);
}

// LAPACK's dlapy2: sqrt(x^2 + y^2) without overflow; NaN propagates.
template <class T>
EMBER_LU_INLINE T lapy2(T x, T y) {
  if (x != x) return x;
  if (y != y) return y;
  const T ax = std::abs(x), ay = std::abs(y);
  const T w = std::max(ax, ay), z = std::min(ax, ay);
  if (z == 0 || w > std::numeric_limits<T>::max()) return w;
  const T r = z / w;
  return w * std::sqrt(1 + r * r);
}

// LAPACK's dlarfg: the reflector H = I - tau [1; v] [1; v]^T with H [alpha; x] = [beta; 0] for
// the n - 1 elements of x (overwritten by v); alpha becomes beta. Returns tau.
template <class T>
EMBER_LU_INLINE T larfg(int64_t n, T& alpha, T* x) {
  if (n <= 1) return 0;
  T xnorm = safe_nrm2(x, n - 1);
  if (xnorm == 0) return 0;
  T beta = -std::copysign(lapy2(alpha, xnorm), alpha);
  const T safmin = std::numeric_limits<T>::min() / (std::numeric_limits<T>::epsilon() / 2);
  int knt = 0;
  if (std::abs(beta) < safmin) {  // beta may be inaccurate: rescale and recompute
    const T rsafmn = 1 / safmin;
    do {
      ++knt;
      for (int64_t i = 0; i < n - 1; ++i) x[i] *= rsafmn;
      beta *= rsafmn;
      alpha *= rsafmn;
    } while (std::abs(beta) < safmin && knt < 20);
    xnorm = safe_nrm2(x, n - 1);
    beta = -std::copysign(lapy2(alpha, xnorm), alpha);
  }
  const T tau = (beta - alpha) / beta;
  const T sc = 1 / (alpha - beta);
  for (int64_t i = 0; i < n - 1; ++i) x[i] *= sc;
  for (int j = 0; j < knt; ++j) beta *= safmin;
  alpha = beta;
  return tau;
}

// LAPACK's dlarf1f from the left: C (mv x nc, leading dim ldc) = H C for H = I - tau v v^T,
// v = [1; vv[0 .. mv - 1)], skipping v's trailing zeros and C's trailing zero columns as LAPACK.
template <class T>
EMBER_LU_INLINE void larf_left(int64_t mv, int64_t nc, const T* vv, T tau, T* c, int64_t ldc) {
  if (tau == 0) return;
  int64_t lastv = mv;
  while (lastv > 1 && vv[lastv - 2] == 0) --lastv;
  int64_t lastc = nc;
  for (; lastc > 0; --lastc) {
    const T* col = c + (lastc - 1) * ldc;
    bool nonzero = false;
    for (int64_t i = 0; i < lastv; ++i) nonzero |= col[i] != 0;
    if (nonzero) break;
  }
  for (int64_t j = 0; j < lastc; ++j) {
    T* col = c + j * ldc;
    T w = col[0];
    for (int64_t i = 1; i < lastv; ++i) w += vv[i - 1] * col[i];
    w *= tau;
    col[0] -= w;
    for (int64_t i = 1; i < lastv; ++i) col[i] -= vv[i - 1] * w;
  }
}

// LAPACK's dgeqr2 on the column-major m x n matrix a: R above the diagonal, the reflectors'
// vectors below it, their factors in tau[0 .. min(m, n)).
template <class T>
EMBER_LU_INLINE void small_geqr2(int64_t m, int64_t n, T* a, T* tau) {
  const int64_t k = std::min(m, n);
  for (int64_t i = 0; i < k; ++i) {
    T* d = a + i * m + i;
    tau[i] = larfg(m - i, *d, d + 1);
    if (i < n - 1) larf_left(m - i, n - i - 1, d + 1, tau[i], d + m, m);
  }
}

// LAPACK's dorg2r: q (m x qc, column-major, holding geqr2's reflectors in its first k columns)
// becomes the first qc columns of Q = H(0) ... H(k - 1).
template <class T>
EMBER_LU_INLINE void small_org2r(int64_t m, int64_t qc, int64_t k, T* q, const T* tau) {
  for (int64_t j = k; j < qc; ++j) {
    std::fill(q + j * m, q + (j + 1) * m, T(0));
    q[j * m + j] = 1;
  }
  for (int64_t i = k - 1; i >= 0; --i) {
    T* d = q + i * m + i;
    if (i < qc - 1) larf_left(m - i, qc - i - 1, d + 1, tau[i], d + m, m);
    for (int64_t l = 1; l < m - i; ++l) d[l] *= -tau[i];
    *d = 1 - tau[i];
    std::fill(q + i * m, d, T(0));
  }
}

// geqr2 of the count column-major m x n matrices [b, e) at a (tau: min(m, n) per matrix), as one
// loop per instruction set so that the inlined arithmetic is compiled for the CPU's widest one.
template <class T>
void small_geqr2_all(int64_t m, int64_t n, T* a, T* tau, int64_t b, int64_t e) {
  const int64_t k = std::min(m, n);
  for (int64_t i = b; i < e; ++i) small_geqr2(m, n, a + i * m * n, tau + i * k);
}
#if EMBER_LU_AVX2
template <class T>
__attribute__((target("avx2"))) void small_geqr2_avx2(int64_t m, int64_t n, T* a, T* tau, int64_t b,
                                                      int64_t e) {
  const int64_t k = std::min(m, n);
  for (int64_t i = b; i < e; ++i) small_geqr2(m, n, a + i * m * n, tau + i * k);
}
#endif
// torch.geqrf's cut between the loops above and LAPACK's geqrf, by measurement (float64, one
// thread, AVX2): the loops win for wide matrices and up to about 48 x 48, LAPACK's BLAS calls for
// tall ones (64 x 32, 128 x 16) whose columns are long.
inline bool small_geqrf(int64_t m, int64_t n) { return m <= 48 && m * n <= 48 * 48; }

template <class T>
void small_geqr2_batch(int64_t m, int64_t n, T* a, T* tau, int64_t b, int64_t e) {
#if EMBER_LU_AVX2
  if (cpu_isa() >= Isa::Avx2) return small_geqr2_avx2(m, n, a, tau, b, e);
#endif
  small_geqr2_all(m, n, a, tau, b, e);
}

}  // namespace

std::tuple<Tensor, Tensor> _linalg_qr(const Tensor& A, const std::string& mode) {
  const char* op = "linalg.qr";
  check_matrix(op, A, "A", false, true);
  EMBER_CHECK(mode == "reduced" || mode == "complete" || mode == "r", "qr received unrecognized ",
              "mode '", mode, "' but expected one of 'reduced' (default), 'r', or 'complete'");
  const int64_t m = A->size(A->dim() - 2), n = A->size(A->dim() - 1), k = std::min(m, n);
  const bool complete = mode == "complete", want_q = mode != "r";
  const int64_t rrows = complete ? m : k, qcols = complete ? m : k;
  const DimVector batch = batch_of(A);
  Tensor a = col_major_copy(A, batch);
  Tensor r = empty_col_major(batch, rrows, n, A->dtype(), A->device());
  Tensor q = want_q ? empty_col_major(batch, m, qcols, A->dtype(), A->device())
                    : ember::empty({0}, A->dtype(), A->device());
  if (A->device().is_meta()) return {q, r};
  if (is_complex(A->dtype())) {  // geqrf / ungqr for every size
    dispatch_complex(A->dtype(), [&](auto tag) {
      using R = decltype(tag);
      using C = std::complex<R>;
      C* ap = a->data_as<C>();
      C* rp = r->data_as<C>();
      C* qp = want_q ? q->data_as<C>() : nullptr;
      for_each_chunk(count_of(batch), std::max(m, n), [&](int64_t begin, int64_t end) {
        std::vector<C> tau(std::max<int64_t>(1, k));
        C q1 = 0, q2 = 0;
        if (k > 0) CLapack<R>::geqrf(lint(m), lint(n), ap, ld(m), tau.data(), &q1, -1);
        if (want_q && m > 0 && qcols > 0)
          CLapack<R>::ungqr(lint(m), lint(qcols), lint(k), qp, ld(m), tau.data(), &q2, -1);
        std::vector<C> work(std::max(work_size(q1), work_size(q2)));
        for (int64_t b = begin; b < end; ++b) {
          C* ab = ap + b * m * n;
          if (k > 0)
            CLapack<R>::geqrf(lint(m), lint(n), ab, ld(m), tau.data(), work.data(),
                              lint(work.size()));
          C* rb = rp + b * rrows * n;
          for (int64_t j = 0; j < n; ++j)
            for (int64_t i = 0; i < rrows; ++i) rb[j * rrows + i] = i <= j ? ab[j * m + i] : C(0);
          if (!want_q || m == 0) continue;
          C* qb = qp + b * m * qcols;
          for (int64_t j = 0; j < qcols; ++j)
            for (int64_t i = 0; i < m; ++i) qb[j * m + i] = j < n ? ab[j * m + i] : C(0);
          if (qcols > 0)
            CLapack<R>::ungqr(lint(m), lint(qcols), lint(k), qb, ld(m), tau.data(), work.data(),
                              lint(work.size()));
        }
      });
    });
    return {want_q ? fresh(q) : q, fresh(r)};
  }
  EMBER_DISPATCH_BLAS(A->dtype(), op, [&] {
    using T = scalar_t;
    T* ap = a->data_as<T>();
    T* rp = r->data_as<T>();
    T* qp = want_q ? q->data_as<T>() : nullptr;
    const bool small = m <= kSmallQr && n <= kSmallQr;
    for_each_chunk(count_of(batch), std::max(m, n), [&](int64_t begin, int64_t end) {
      std::vector<T> tau(std::max<int64_t>(1, k));
      // one workspace for both routines, sized by their queries
      T q1 = 0, q2 = 0;
      if (!small && k > 0) Lapack<T>::geqrf(lint(m), lint(n), ap, ld(m), tau.data(), &q1, -1);
      if (!small && want_q && m > 0 && qcols > 0)
        Lapack<T>::orgqr(lint(m), lint(qcols), lint(k), qp, ld(m), tau.data(), &q2, -1);
      std::vector<T> work(std::max(work_size(q1), work_size(q2)));
      for (int64_t b = begin; b < end; ++b) {
        T* ab = ap + b * m * n;
        if (k > 0 && small)
          small_geqr2(m, n, ab, tau.data());
        else if (k > 0)
          Lapack<T>::geqrf(lint(m), lint(n), ab, ld(m), tau.data(), work.data(), lint(work.size()));
        T* rb = rp + b * rrows * n;
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < rrows; ++i) rb[j * rrows + i] = i <= j ? ab[j * m + i] : T(0);
        if (!want_q || m == 0) continue;
        T* qb = qp + b * m * qcols;
        for (int64_t j = 0; j < qcols; ++j)
          for (int64_t i = 0; i < m; ++i) qb[j * m + i] = j < n ? ab[j * m + i] : T(0);
        if (qcols > 0 && small)
          small_org2r(m, qcols, k, qb, tau.data());
        else if (qcols > 0)
          Lapack<T>::orgqr(lint(m), lint(qcols), lint(k), qb, ld(m), tau.data(), work.data(),
                           lint(work.size()));
      }
    });
  });
  return {want_q ? fresh(q) : q, fresh(r)};
}

// ---- Cholesky and triangular solves -----------------------------------------------------------

namespace {

// LAPACK's potf2 ('L') on the column-major n x n matrix a, left-looking: column j of L is A's
// column j less the products with the columns before it (a column-oriented loop over the rows),
// its diagonal's square root, and the rest scaled by the reciprocal. On a diagonal that is not
// positive (or NaN) a[j, j] keeps it while the rest of column j and the later columns stay A's,
// as LAPACK; returns info. For 'U' the matrix is transposed in place around the same loop.
template <class T>
int32_t small_potf2(int64_t n, T* a, bool upper) {
  auto transpose = [&] {
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = j + 1; i < n; ++i) std::swap(a[j * n + i], a[i * n + j]);
  };
  if (upper) transpose();
  int32_t info = 0;
  for (int64_t j = 0; j < n; ++j) {
    T* cj = a + j * n;
    T d = cj[j];
    for (int64_t k = 0; k < j; ++k) d -= a[k * n + j] * a[k * n + j];
    cj[j] = d;
    if (!(d > 0)) {
      info = static_cast<int32_t>(j + 1);
      break;
    }
    for (int64_t k = 0; k < j; ++k) {
      const T f = a[k * n + j];
      const T* ck = a + k * n;
      for (int64_t i = j + 1; i < n; ++i) cj[i] -= ck[i] * f;
    }
    const T r = std::sqrt(d);
    cj[j] = r;
    const T inv = 1 / r;
    for (int64_t i = j + 1; i < n; ++i) cj[i] *= inv;
  }
  if (upper) transpose();
  return info;
}

// small_potf2 for a Hermitian matrix (A = L L^H; with upper, A = U^H U read from the upper
// triangle, through the conjugate transpose): the diagonal's imaginary parts are not read.
// Returns info (the first diagonal that is not positive, or NaN).
template <class R>
int32_t potf2_c(int64_t n, std::complex<R>* a, bool upper) {
  auto adjoint = [&] {
    for (int64_t j = 0; j < n; ++j) {
      a[j * n + j] = std::conj(a[j * n + j]);
      for (int64_t i = j + 1; i < n; ++i) {
        const std::complex<R> t = a[j * n + i];
        a[j * n + i] = std::conj(a[i * n + j]);
        a[i * n + j] = std::conj(t);
      }
    }
  };
  if (upper) adjoint();
  int32_t info = 0;
  for (int64_t j = 0; j < n; ++j) {
    std::complex<R>* cj = a + j * n;
    R d = cj[j].real();
    for (int64_t k = 0; k < j; ++k) d -= std::norm(a[k * n + j]);
    cj[j] = d;
    if (!(d > 0)) {
      info = static_cast<int32_t>(j + 1);
      break;
    }
    for (int64_t k = 0; k < j; ++k) {
      const std::complex<R> f = std::conj(a[k * n + j]);
      const std::complex<R>* ck = a + k * n;
      for (int64_t i = j + 1; i < n; ++i) cj[i] -= ck[i] * f;
    }
    const R rt = std::sqrt(d);
    cj[j] = rt;
    for (int64_t i = j + 1; i < n; ++i) cj[i] /= rt;
  }
  if (upper) adjoint();
  return info;
}

}  // namespace

std::tuple<Tensor, Tensor> _linalg_cholesky_ex(const Tensor& A, bool upper) {
  const char* op = "linalg.cholesky";
  check_matrix(op, A, "A", true, true);
  const int64_t n = A->size(A->dim() - 1);
  const DimVector batch = batch_of(A);
  Tensor l = col_major_copy(A, batch);
  Tensor info = zeros_int(batch, A->device());
  if (A->device().is_meta() || l->numel() == 0) return {l, info};
  if (is_complex(A->dtype())) {
    // potrf, and the unblocked loop (from A) for the failures and NaN, as for real matrices
    dispatch_complex(A->dtype(), [&](auto tag) {
      using R = decltype(tag);
      using C = std::complex<R>;
      C* a = l->data_as<C>();
      int32_t* inf = info->data_as<int32_t>();
      const int64_t count = count_of(batch);
      Tensor again;
      for_each_matrix(count, n, [&](int64_t b) {
        C* ab = a + b * n * n;
        inf[b] = CLapack<R>::potrf(upper ? 'U' : 'L', lint(n), ab, ld(n));
        for (int64_t j = 0; j < n && !inf[b]; ++j)
          if (!(ab[j * n + j].real() > 0)) inf[b] = -1;
      });
      for (int64_t b = 0; b < count; ++b) {
        C* ab = a + b * n * n;
        if (inf[b]) {
          if (!again) again = col_major_copy(A, batch);
          const C* src = again->data_as<C>() + b * n * n;
          std::copy(src, src + n * n, ab);
          inf[b] = potf2_c(n, ab, upper);
        }
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < n; ++i)
            if (upper ? i > j : i < j) ab[j * n + i] = 0;
      }
    });
    return {l, info};
  }
  EMBER_DISPATCH_BLAS(A->dtype(), op, [&] {
    using T = scalar_t;
    T* a = l->data_as<T>();
    int32_t* inf = info->data_as<int32_t>();
    const int64_t count = count_of(batch);
    // OpenBLAS's blocked potrf does not stop at a NaN on the diagonal as LAPACK's potf2 does: the
    // NaN spreads through the rest of the factor and info stays 0. Such matrices (and the other
    // failures, so that a failed factor looks the same for every n) are factored again from A by
    // the unblocked loop, which reports the first diagonal that is not positive.
    std::vector<char> redo(static_cast<size_t>(count), 0);
    auto zero_other_triangle = [&](T* ab) {  // potrf leaves it as it was; the factor has zeros
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < n; ++i)
          if (upper ? i > j : i < j) ab[j * n + i] = 0;
    };
    for_each_matrix(count, n, [&](int64_t b) {
      T* ab = a + b * n * n;
      if (n <= kSmallLu) {
        inf[b] = small_potf2(n, ab, upper);
      } else {
        inf[b] = Lapack<T>::potrf(upper ? 'U' : 'L', lint(n), ab, ld(n));
        for (int64_t j = 0; j < n && !inf[b]; ++j)
          if (!(ab[j * n + j] > 0)) inf[b] = -1;
        if (inf[b]) {
          redo[static_cast<size_t>(b)] = 1;
          return;
        }
      }
      zero_other_triangle(ab);
    });
    if (std::find(redo.begin(), redo.end(), 1) == redo.end()) return;
    Tensor again = col_major_copy(A, batch);
    const T* src = again->data_as<T>();
    for (int64_t b = 0; b < count; ++b) {
      if (!redo[static_cast<size_t>(b)]) continue;
      T* ab = a + b * n * n;
      std::copy(src + b * n * n, src + (b + 1) * n * n, ab);
      inf[b] = small_potf2(n, ab, upper);
      zero_other_triangle(ab);
    }
  });
  return {l, info};
}

Tensor _linalg_solve_triangular(const Tensor& A, const Tensor& B, bool upper, bool unitriangular) {
  const char* op = "linalg.solve_triangular";
  check_matrix(op, A, "A", true, true);
  check_matrix(op, B, "B", false, true);
  check_same_dtype(op, A, B);
  const int64_t n = A->size(A->dim() - 1), k = B->size(B->dim() - 1);
  EMBER_CHECK(B->size(B->dim() - 2) == n, op, ": Incompatible shapes of A and B for the equation ",
              "AX = B (", n, "x", n, " and ", B->size(B->dim() - 2), "x", k, ")");
  const DimVector batch = batch_broadcast(op, A, B);
  Tensor a = col_major_copy(A, batch);
  Tensor x = col_major_copy(B, batch);
  if (A->device().is_meta() || x->numel() == 0) return x;
  if (is_complex(A->dtype())) {
    dispatch_complex(A->dtype(), [&](auto tag) {
      using R = decltype(tag);
      using C = std::complex<R>;
      const C* ap = a->data_as<C>();
      C* xp = x->data_as<C>();
      for_each_matrix(count_of(batch), n, [&](int64_t b) {
        CLapack<R>::trsm(upper, unitriangular, lint(n), lint(k), ap + b * n * n, ld(n),
                         xp + b * n * k, ld(n));
      });
    });
    return x;
  }
  EMBER_DISPATCH_BLAS(A->dtype(), op, [&] {
    using T = scalar_t;
    const T* ap = a->data_as<T>();
    T* xp = x->data_as<T>();
    for_each_matrix(count_of(batch), n, [&](int64_t b) {
      Lapack<T>::trsm(upper, unitriangular, lint(n), lint(k), ap + b * n * n, ld(n), xp + b * n * k,
                      ld(n));
    });
  });
  return x;
}

// ---- least squares -----------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor, Tensor> _linalg_lstsq(const Tensor& A, const Tensor& B,
                                                         std::optional<double> rcond,
                                                         const std::optional<std::string>& driver) {
  const char* op = "linalg.lstsq";
  check_matrix(op, A, "A", false, true);
  check_matrix(op, B, "B", false, true);
  check_same_dtype(op, A, B);
  const std::string drv = driver ? *driver : "gelsy";
  EMBER_CHECK(drv == "gelsy" || drv == "gelsd" || drv == "gelss" || drv == "gels", op,
              ": parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  const int64_t m = A->size(A->dim() - 2), n = A->size(A->dim() - 1), k = B->size(B->dim() - 1);
  EMBER_CHECK(B->size(B->dim() - 2) == m, "torch.linalg.lstsq: input.size(-2) should match ",
              "other.size(-2)");
  const DimVector batch = batch_broadcast(op, A, B);
  const int64_t count = count_of(batch), mn = std::min(m, n), rows = std::max(m, n);
  Tensor a = col_major_copy(A, batch);
  // B's buffer has max(m, n) rows: the solution's n rows come back in its first rows.
  Tensor bbuf = empty_col_major(batch, rows, k, A->dtype(), A->device());
  const bool want_rank = drv != "gels", want_sv = drv == "gelsd" || drv == "gelss";
  Tensor rank = ember::empty(want_rank ? batch : DimVector{0}, ScalarType::Int64, A->device());
  const ScalarType rdt = to_real(A->dtype());
  Tensor sv = ember::empty(want_sv ? with(batch, {mn}) : DimVector{0}, rdt, A->device());
  const bool want_res = drv != "gelsy" && m > n;
  Tensor residuals = ember::empty(want_res ? with(batch, {k}) : DimVector{0}, rdt, A->device());
  // the solution is a tensor of its own (not a view of the buffer: outputs are no views)
  Tensor solution = empty_col_major(batch, n, k, A->dtype(), A->device());
  if (A->device().is_meta()) return {solution, residuals, rank, sv};
  if (bbuf->numel() > 0) {
    std::fill_n(static_cast<char*>(bbuf->data()), bbuf->numel() * bbuf->itemsize(), char(0));
    copy_into(make_view(bbuf, with(batch, {m, k}), bbuf->strides(), bbuf->storage_offset()), B);
  }
  std::atomic<bool> full_rank{true};  // written by the threads of for_each_matrix
  if (is_complex(A->dtype())) {
    dispatch_complex(A->dtype(), [&](auto tag) {
      using R = decltype(tag);
      using C = std::complex<R>;
      const R rc = rcond ? R(*rcond) : std::numeric_limits<R>::epsilon() * R(std::max(m, n));
      C* ap = a->data_as<C>();
      C* bp = bbuf->data_as<C>();
      R* svp = want_sv ? sv->data_as<R>() : nullptr;
      int64_t* rkp = want_rank ? rank->data_as<int64_t>() : nullptr;
      // many small problems run on ember's threads, one big one on OpenBLAS's
      for_each_matrix(count, std::max(m, n), [&](int64_t b) {
        C* ab = ap + b * m * n;
        C* bb = bp + b * rows * k;
        lint rk = lint(mn), info = 0;
        if (mn == 0 || k == 0) {
          if (rkp) rkp[b] = 0;
          if (mn == 0 || !want_sv) return;
        }
        C query = 0;
        if (drv == "gelsy") {
          std::vector<lint> jpvt(std::max<int64_t>(1, n), 0);
          std::vector<R> rwork(std::max<int64_t>(1, 2 * n));
          CLapack<R>::gelsy(lint(m), lint(n), lint(k), ab, ld(m), bb, ld(rows), jpvt.data(), rc,
                            &rk, &query, -1, rwork.data());
          std::vector<C> work(work_size(query));
          info = CLapack<R>::gelsy(lint(m), lint(n), lint(k), ab, ld(m), bb, ld(rows), jpvt.data(),
                                   rc, &rk, work.data(), lint(work.size()), rwork.data());
        } else if (drv == "gelsd") {
          lint iquery = 1;
          R rquery = 1;
          CLapack<R>::gelsd(lint(m), lint(n), lint(std::max<int64_t>(k, 1)), ab, ld(m), bb,
                            ld(rows), svp + b * mn, rc, &rk, &query, -1, &rquery, &iquery);
          std::vector<lint> iwork(std::max<lint>(1, iquery));
          std::vector<R> rwork(work_size(rquery));
          std::vector<C> work(work_size(query));
          info = CLapack<R>::gelsd(lint(m), lint(n), lint(k), ab, ld(m), bb, ld(rows), svp + b * mn,
                                   rc, &rk, work.data(), lint(work.size()), rwork.data(),
                                   iwork.data());
        } else if (drv == "gelss") {
          std::vector<R> rwork(std::max<int64_t>(1, 5 * mn));
          CLapack<R>::gelss(lint(m), lint(n), lint(std::max<int64_t>(k, 1)), ab, ld(m), bb,
                            ld(rows), svp + b * mn, rc, &rk, &query, -1, rwork.data());
          std::vector<C> work(work_size(query));
          info = CLapack<R>::gelss(lint(m), lint(n), lint(k), ab, ld(m), bb, ld(rows), svp + b * mn,
                                   rc, &rk, work.data(), lint(work.size()), rwork.data());
        } else {
          CLapack<R>::gels(lint(m), lint(n), lint(k), ab, ld(m), bb, ld(rows), &query, -1);
          std::vector<C> work(work_size(query));
          info = CLapack<R>::gels(lint(m), lint(n), lint(k), ab, ld(m), bb, ld(rows), work.data(),
                                  lint(work.size()));
          EMBER_CHECK(info <= 0, op, ": The least squares solution could not be computed ",
                      "because the input matrix does not have full rank (error code: ", info, ").");
        }
        EMBER_CHECK(info <= 0, op, ": The algorithm failed to converge (error code: ", info, ").");
        if (rkp) rkp[b] = rk;
        if (rk < n) full_rank = false;
      });
      if (want_res && full_rank) {
        R* rp = residuals->data_as<R>();
        for (int64_t b = 0; b < count; ++b)
          for (int64_t j = 0; j < k; ++j) {
            const C* col = bp + b * rows * k + j * rows;
            R acc = 0;
            for (int64_t i = n; i < m; ++i) acc += std::norm(col[i]);
            rp[b * k + j] = acc;
          }
      }
    });
  } else {
    EMBER_DISPATCH_BLAS(A->dtype(), op, [&] {
      using T = scalar_t;
      const T rc = rcond ? T(*rcond) : std::numeric_limits<T>::epsilon() * T(std::max(m, n));
      T* ap = a->data_as<T>();
      T* bp = bbuf->data_as<T>();
      T* svp = want_sv ? sv->data_as<T>() : nullptr;
      int64_t* rkp = want_rank ? rank->data_as<int64_t>() : nullptr;
      // many small problems run on ember's threads, one big one on OpenBLAS's
      for_each_matrix(count, std::max(m, n), [&](int64_t b) {
        T* ab = ap + b * m * n;
        T* bb = bp + b * rows * k;
        lint rk = lint(mn), info = 0;
        if (mn == 0 || k == 0) {
          if (rkp) rkp[b] = 0;
          if (mn == 0 || !want_sv) return;
        }
        T query = 0;
        if (drv == "gelsy") {
          std::vector<lint> jpvt(std::max<int64_t>(1, n), 0);
          Lapack<T>::gelsy(lint(m), lint(n), lint(k), ab, ld(m), bb, ld(rows), jpvt.data(), rc, &rk,
                           &query, -1);
          std::vector<T> work(work_size(query));
          info = Lapack<T>::gelsy(lint(m), lint(n), lint(k), ab, ld(m), bb, ld(rows), jpvt.data(),
                                  rc, &rk, work.data(), lint(work.size()));
        } else if (drv == "gelsd") {
          lint iquery = 1;
          Lapack<T>::gelsd(lint(m), lint(n), lint(std::max<int64_t>(k, 1)), ab, ld(m), bb, ld(rows),
                           svp + b * mn, rc, &rk, &query, -1, &iquery);
          std::vector<lint> iwork(std::max<lint>(1, iquery));
          std::vector<T> work(work_size(query));
          info = Lapack<T>::gelsd(lint(m), lint(n), lint(k), ab, ld(m), bb, ld(rows), svp + b * mn,
                                  rc, &rk, work.data(), lint(work.size()), iwork.data());
        } else if (drv == "gelss") {
          Lapack<T>::gelss(lint(m), lint(n), lint(std::max<int64_t>(k, 1)), ab, ld(m), bb, ld(rows),
                           svp + b * mn, rc, &rk, &query, -1);
          std::vector<T> work(work_size(query));
          info = Lapack<T>::gelss(lint(m), lint(n), lint(k), ab, ld(m), bb, ld(rows), svp + b * mn,
                                  rc, &rk, work.data(), lint(work.size()));
        } else {
          Lapack<T>::gels(lint(m), lint(n), lint(k), ab, ld(m), bb, ld(rows), &query, -1);
          std::vector<T> work(work_size(query));
          info = Lapack<T>::gels(lint(m), lint(n), lint(k), ab, ld(m), bb, ld(rows), work.data(),
                                 lint(work.size()));
          EMBER_CHECK(info <= 0, op, ": The least squares solution could not be computed because ",
                      "the input matrix does not have full rank (error code: ", info, ").");
        }
        EMBER_CHECK(info <= 0, op, ": The algorithm failed to converge (error code: ", info, ").");
        if (rkp) rkp[b] = rk;
        if (rk < n) full_rank = false;
      });
      if (want_res && full_rank) {
        T* rp = residuals->data_as<T>();
        for (int64_t b = 0; b < count; ++b)
          for (int64_t j = 0; j < k; ++j) {
            const T* col = bp + b * rows * k + j * rows;
            T acc = 0;
            for (int64_t i = n; i < m; ++i) acc += col[i] * col[i];
            rp[b * k + j] = acc;
          }
      }
    });
  }
  if (want_res && !full_rank) residuals = ember::empty({0}, rdt, A->device());
  if (solution->numel() > 0)
    copy_into(solution,
              make_view(bbuf, with(batch, {n, k}), bbuf->strides(), bbuf->storage_offset()));
  return {fresh(solution), fresh(residuals), fresh(rank), fresh(sv)};
}

// ---- Householder products: geqrf, orgqr, ormqr -----------------------------------------------

namespace {

// geqrf, orgqr, ormqr, sytrf and sytrs for real T (Lapack<T>) and for std::complex: LAPACK's
// c / z routines (ungqr and unmqr, whose transpose is the conjugate one, and hetrf / hetrs for
// Hermitian matrices). A real symmetric matrix is Hermitian: `herm` changes nothing there.
template <class T>
struct QrLdl {
  static lint geqrf(lint m, lint n, T* a, lint lda, T* tau, T* work, lint lwork) {
    return Lapack<T>::geqrf(m, n, a, lda, tau, work, lwork);
  }
  static lint orgqr(lint m, lint n, lint k, T* a, lint lda, const T* tau, T* work, lint lwork) {
    return Lapack<T>::orgqr(m, n, k, a, lda, tau, work, lwork);
  }
  static lint ormqr(char side, bool trans, lint m, lint n, lint k, const T* a, lint lda,
                    const T* tau, T* c, lint ldc, T* work, lint lwork) {
    return Lapack<T>::ormqr(side, trans ? 'T' : 'N', m, n, k, a, lda, tau, c, ldc, work, lwork);
  }
  static lint sytrf(bool, lint n, T* a, lint lda, lint* ipiv, T* work, lint lwork) {
    return Lapack<T>::sytrf(n, a, lda, ipiv, work, lwork);
  }
  static lint sytrs(bool, lint n, lint nrhs, const T* a, lint lda, const lint* ipiv, T* b,
                    lint ldb) {
    return Lapack<T>::sytrs(n, nrhs, a, lda, ipiv, b, ldb);
  }
};

#define EMBER_LAPACK_COMPLEX(R, p)                                                                 \
  template <>                                                                                      \
  struct QrLdl<std::complex<R>> {                                                                  \
    using C = std::complex<R>;                                                                     \
    static lint geqrf(lint m, lint n, C* a, lint lda, C* tau, C* work, lint lwork) {               \
      return scipy_LAPACKE_##p##geqrf_work(LAPACK_COL_MAJOR, m, n, lc(a), lda, lc(tau), lc(work),  \
                                           lwork);                                                 \
    }                                                                                              \
    static lint orgqr(lint m, lint n, lint k, C* a, lint lda, const C* tau, C* work, lint lwork) { \
      return scipy_LAPACKE_##p##ungqr_work(LAPACK_COL_MAJOR, m, n, k, lc(a), lda, lc(tau),         \
                                           lc(work), lwork);                                       \
    }                                                                                              \
    static lint ormqr(char side, bool trans, lint m, lint n, lint k, const C* a, lint lda,         \
                      const C* tau, C* c, lint ldc, C* work, lint lwork) {                         \
      return scipy_LAPACKE_##p##unmqr_work(LAPACK_COL_MAJOR, side, trans ? 'C' : 'N', m, n, k,     \
                                           lc(a), lda, lc(tau), lc(c), ldc, lc(work), lwork);      \
    }                                                                                              \
    static lint sytrf(bool herm, lint n, C* a, lint lda, lint* ipiv, C* work, lint lwork) {        \
      return herm ? scipy_LAPACKE_##p##hetrf_work(LAPACK_COL_MAJOR, 'L', n, lc(a), lda, ipiv,      \
                                                  lc(work), lwork)                                 \
                  : scipy_LAPACKE_##p##sytrf_work(LAPACK_COL_MAJOR, 'L', n, lc(a), lda, ipiv,      \
                                                  lc(work), lwork);                                \
    }                                                                                              \
    static lint sytrs(bool herm, lint n, lint nrhs, const C* a, lint lda, const lint* ipiv, C* b,  \
                      lint ldb) {                                                                  \
      return herm ? scipy_LAPACKE_##p##hetrs_work(LAPACK_COL_MAJOR, 'L', n, nrhs, lc(a), lda,      \
                                                  ipiv, lc(b), ldb)                                \
                  : scipy_LAPACKE_##p##sytrs_work(LAPACK_COL_MAJOR, 'L', n, nrhs, lc(a), lda,      \
                                                  ipiv, lc(b), ldb);                               \
    }                                                                                              \
  };
EMBER_LAPACK_COMPLEX(float, c)
EMBER_LAPACK_COMPLEX(double, z)
#undef EMBER_LAPACK_COMPLEX

// f(T{}) for the element type T of a float32, float64, complex64 or complex128 tensor.
template <class F>
void dispatch_real_complex(ScalarType dt, const char* op, F f) {
  switch (dt) {
    case ScalarType::Float32:
      return f(float{});
    case ScalarType::Float64:
      return f(double{});
    case ScalarType::Complex64:
      return f(std::complex<float>{});
    case ScalarType::Complex128:
      return f(std::complex<double>{});
    default:
      EMBER_CHECK(false, op, ": expected float32, float64, complex64 or complex128, got ",
                  dtype_name(dt));
  }
}

// t's batch dims must be `batch` exactly (tau and the reflectors do not broadcast).
void check_batch_equal(const char* op, const Tensor& t, int64_t keep, const DimVector& batch,
                       const char* what) {
  const bool same = t->dim() - keep == static_cast<int64_t>(batch.size()) &&
                    std::equal(batch.begin(), batch.end(), t->sizes().begin());
  EMBER_CHECK(same, op, ": Expected batch dimensions of ", what,
              " to be equal to input.shape[:-2], but got ", shape_str(t->sizes()));
}

// A contiguous copy of t's values (for vectors such as tau, read in batch order).
Tensor contiguous_copy(const Tensor& t) {
  Tensor out = ember::empty(t->sizes(), t->dtype(), t->device());
  if (!t->device().is_meta() && t->numel() > 0) copy_into(out, t);
  return out;
}

}  // namespace

std::tuple<Tensor, Tensor> geqrf(const Tensor& self) {
  const char* op = "torch.geqrf";
  EMBER_CHECK(self->dim() >= 2, op, ": input must have at least 2 dimensions.");
  check_matrix(op, self, "input", false, true);
  const int64_t m = self->size(self->dim() - 2), n = self->size(self->dim() - 1);
  const int64_t k = std::min(m, n);
  const DimVector batch = batch_of(self);
  Tensor a = col_major_copy(self, batch);
  Tensor tau = ember::empty(with(batch, {k}), self->dtype(), self->device());
  if (self->device().is_meta() || k == 0) return {a, fresh(tau)};
  dispatch_real_complex(self->dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    T* ap = a->data_as<T>();
    T* tp = tau->data_as<T>();
    if constexpr (std::is_floating_point_v<T>) {
      if (small_geqrf(m, n)) {  // geqr2's loops, no LAPACK call
        for_each_chunk(count_of(batch), std::max(m, n), [&](int64_t begin, int64_t end) {
          small_geqr2_batch(m, n, ap, tp, begin, end);
        });
        return;
      }
    }
    T query = 0;  // one workspace query for the whole batch
    QrLdl<T>::geqrf(lint(m), lint(n), ap, ld(m), tp, &query, -1);
    const lint lwork = work_size(query);
    for_each_chunk(count_of(batch), std::max(m, n), [&](int64_t begin, int64_t end) {
      std::vector<T> work(lwork);
      for (int64_t b = begin; b < end; ++b)
        QrLdl<T>::geqrf(lint(m), lint(n), ap + b * m * n, ld(m), tp + b * k, work.data(),
                        lint(work.size()));
    });
  });
  return {a, fresh(tau)};
}

Tensor linalg_householder_product(const Tensor& input, const Tensor& tau) {
  const char* op = "torch.linalg.householder_product";
  EMBER_CHECK(input->dim() >= 2, op, ": input must have at least 2 dimensions.");
  EMBER_CHECK(tau->dim() >= 1, op, ": tau must have at least 1 dimension.");
  const int64_t m = input->size(input->dim() - 2), n = input->size(input->dim() - 1);
  const int64_t k = tau->size(tau->dim() - 1);
  EMBER_CHECK(m >= n, op, ": input.shape[-2] must be greater than or equal to input.shape[-1]");
  EMBER_CHECK(n >= k, op, ": input.shape[-1] must be greater than or equal to tau.shape[-1]");
  EMBER_CHECK(input->dim() - tau->dim() == 1, op, ": Expected tau to have one dimension less ",
              "than input, but got tau.ndim equal to ", tau->dim(), " and input.ndim is equal to ",
              input->dim());
  check_matrix(op, input, "input", false, true);
  EMBER_CHECK(tau->dtype() == input->dtype(), op, ": tau dtype ", dtype_name(tau->dtype()),
              " does not match input dtype ", dtype_name(input->dtype()));
  const DimVector batch = batch_of(input);
  check_batch_equal(op, tau, 1, batch, "tau");
  Tensor q = col_major_copy(input, batch);
  if (input->device().is_meta() || q->numel() == 0) return q;
  Tensor t = contiguous_copy(tau);
  dispatch_real_complex(input->dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    T* qp = q->data_as<T>();
    const T* tp = t->data_as<T>();
    T query = 0;  // one workspace query for the whole batch
    QrLdl<T>::orgqr(lint(m), lint(n), lint(k), qp, ld(m), tp, &query, -1);
    const lint lwork = work_size(query);
    for_each_chunk(count_of(batch), m, [&](int64_t begin, int64_t end) {
      std::vector<T> work(lwork);
      for (int64_t b = begin; b < end; ++b)
        QrLdl<T>::orgqr(lint(m), lint(n), lint(k), qp + b * m * n, ld(m), tp + b * k, work.data(),
                        lint(work.size()));
    });
  });
  return q;
}

Tensor ormqr(const Tensor& self, const Tensor& input2, const Tensor& input3, bool left,
             bool transpose) {
  const char* op = "torch.ormqr";
  const Tensor &A = self, &tau = input2, &C = input3;
  EMBER_CHECK(A->dim() >= 2, op, ": input must have at least 2 dimensions.");
  EMBER_CHECK(C->dim() >= 2, op, ": other must have at least 2 dimensions.");
  const int64_t side = left ? -2 : -1;
  const int64_t k = tau->dim() > 0 ? tau->size(tau->dim() - 1) : 0;
  const int64_t cm = C->size(C->dim() - 2), cn = C->size(C->dim() - 1);
  const int64_t c_side = left ? cm : cn;
  EMBER_CHECK(c_side >= k, op, ": other.shape[", side,
              "] must be greater than or equal to tau.shape[-1]");
  EMBER_CHECK(c_side == A->size(A->dim() - 2), op, ": other.shape[", side,
              "] must be equal to input.shape[-2]");
  EMBER_CHECK(k <= A->size(A->dim() - 1), op,
              ": tau.shape[-1] must be less than or equal to input.shape[-1]");
  // As torch 2.13: a tau shorter than the reflectors the shapes imply is refused (it was read as
  // the first k of them, an empty tau as Q = I).
  const int64_t reflectors = std::min(c_side, A->size(A->dim() - 1));
  EMBER_CHECK(k == reflectors, op, ": tau.shape[-1] must be equal to min(other.shape[", side,
              "], input.shape[-1])");
  EMBER_CHECK(A->dim() - tau->dim() == 1, op, ": Expected tau to have one dimension less than ",
              "input, but got tau.ndim equal to ", tau->dim(), " and input.ndim is equal to ",
              A->dim());
  EMBER_CHECK(A->dim() == C->dim(), op, ": Expected other to have the same number of ",
              "dimensions as input, but got other.ndim equal to ", C->dim(),
              " and input.ndim is equal to ", A->dim());
  check_matrix(op, A, "input", false, true);
  EMBER_CHECK(tau->dtype() == A->dtype() && C->dtype() == A->dtype(), op,
              ": Expected input, tau and other to have the same dtype, but got ",
              dtype_name(A->dtype()), ", ", dtype_name(tau->dtype()), " and ",
              dtype_name(C->dtype()));
  const DimVector batch = batch_of(A);
  check_batch_equal(op, tau, 1, batch, "tau");
  check_batch_equal(op, C, 2, batch, "other");
  const int64_t am = A->size(A->dim() - 2), an = A->size(A->dim() - 1);
  Tensor c = col_major_copy(C, batch);
  if (A->device().is_meta() || c->numel() == 0 || k == 0) return c;
  Tensor a = col_major_copy(A, batch);
  Tensor t = contiguous_copy(tau);
  dispatch_real_complex(A->dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* ap = a->data_as<T>();
    const T* tp = t->data_as<T>();
    T* cp = c->data_as<T>();
    const char s = left ? 'L' : 'R';
    T query = 0;  // one workspace query for the whole batch
    QrLdl<T>::ormqr(s, transpose, lint(cm), lint(cn), lint(k), ap, ld(am), tp, cp, ld(cm), &query,
                    -1);
    const lint lwork = work_size(query);
    for_each_chunk(count_of(batch), std::max(cm, cn), [&](int64_t begin, int64_t end) {
      std::vector<T> work(lwork);
      for (int64_t b = begin; b < end; ++b)
        QrLdl<T>::ormqr(s, transpose, lint(cm), lint(cn), lint(k), ap + b * am * an, ld(am),
                        tp + b * k, cp + b * cm * cn, ld(cm), work.data(), lint(work.size()));
    });
  });
  return c;
}

// ---- LDL^T (Bunch-Kaufman) ---------------------------------------------------------------------

namespace {

// Real symmetric matrices up to this size are factored by small_sytf2 below rather than LAPACK's
// sytrf (its unblocked sytf2 with one BLAS call per column, or the blocked lasyf from n = 33 on
// with OpenBLAS): measured (float64, one thread, AVX2), the loops take 0.7x sytrf's time at
// n = 8 to 0.5x at n = 128.
constexpr int64_t kSmallLdl = 128;

// The first index of the largest |x[i * inc]|, i < n (BLAS's idamax, 0-based).
template <class T>
EMBER_LU_INLINE int64_t small_iamax(int64_t n, const T* x, int64_t inc) {
  int64_t p = 0;
  T best = std::abs(x[0]);
  for (int64_t i = 1; i < n; ++i) {
    const T v = std::abs(x[i * inc]);
    if (v > best) {
      best = v;
      p = i;
    }
  }
  return p;
}

// LAPACK's dsytf2 with uplo = 'L' on the column-major n x n matrix a (Bunch-Kaufman diagonal
// pivoting, 1 x 1 and 2 x 2 blocks): L and D in the lower triangle, LAPACK's 1-based pivots in
// ipiv (negative for a 2 x 2 block). Returns LAPACK's info: 0, or k + 1 for the first zero D(k).
template <class T>
EMBER_LU_INLINE int32_t small_sytf2_impl(int64_t n, T* a, int32_t* ipiv) {
  const T alpha = (1 + std::sqrt(T(17))) / 8;
  auto A = [&](int64_t i, int64_t j) -> T& { return a[i + j * n]; };
  int32_t info = 0;
  int64_t k = 0;
  while (k < n) {
    int64_t kstep = 1, kp = k;
    const T absakk = std::abs(A(k, k));
    int64_t imax = k;
    T colmax = 0;
    if (k < n - 1) {
      imax = k + 1 + small_iamax(n - k - 1, &A(k + 1, k), 1);
      colmax = std::abs(A(imax, k));
    }
    if (std::max(absakk, colmax) == 0 || absakk != absakk) {
      if (info == 0) info = static_cast<int32_t>(k + 1);
      kp = k;
    } else {
      if (absakk >= alpha * colmax) {
        kp = k;
      } else {
        // the largest off-diagonal element in row / column imax of the trailing matrix
        int64_t jmax = k + small_iamax(imax - k, &A(imax, k), n);
        T rowmax = std::abs(A(imax, jmax));
        if (imax < n - 1) {
          jmax = imax + 1 + small_iamax(n - imax - 1, &A(imax + 1, imax), 1);
          rowmax = std::max(rowmax, std::abs(A(jmax, imax)));
        }
        if (absakk >= alpha * colmax * (colmax / rowmax)) {
          kp = k;
        } else if (std::abs(A(imax, imax)) >= alpha * rowmax) {
          kp = imax;
        } else {
          kp = imax;
          kstep = 2;
        }
      }
      const int64_t kk = k + kstep - 1;
      if (kp != kk) {  // swap rows and columns kk and kp of the trailing matrix
        for (int64_t i = kp + 1; i < n; ++i) std::swap(A(i, kk), A(i, kp));
        for (int64_t j = kk + 1; j < kp; ++j) std::swap(A(j, kk), A(kp, j));
        std::swap(A(kk, kk), A(kp, kp));
        if (kstep == 2) std::swap(A(k + 1, k), A(kp, k));
      }
      if (kstep == 1) {
        if (k < n - 1) {  // A22 -= x x^T / d (lower part: syr), then L's column x / d
          const T d11 = 1 / A(k, k);
          for (int64_t j = k + 1; j < n; ++j) {
            const T xj = A(j, k);
            if (xj != 0) {
              const T t = -d11 * xj;
              for (int64_t i = j; i < n; ++i) A(i, j) += A(i, k) * t;
            }
          }
          for (int64_t i = k + 1; i < n; ++i) A(i, k) *= d11;
        }
      } else if (k < n - 2) {  // the 2 x 2 pivot's update
        T d21 = A(k + 1, k);
        const T d11 = A(k + 1, k + 1) / d21;
        const T d22 = A(k, k) / d21;
        const T t = 1 / (d11 * d22 - 1);
        d21 = t / d21;
        for (int64_t j = k + 2; j < n; ++j) {
          const T wk = d21 * (d11 * A(j, k) - A(j, k + 1));
          const T wkp1 = d21 * (d22 * A(j, k + 1) - A(j, k));
          for (int64_t i = j; i < n; ++i) A(i, j) = A(i, j) - A(i, k) * wk - A(i, k + 1) * wkp1;
          A(j, k) = wk;
          A(j, k + 1) = wkp1;
        }
      }
    }
    if (kstep == 1) {
      ipiv[k] = static_cast<int32_t>(kp + 1);
    } else {
      ipiv[k] = ipiv[k + 1] = static_cast<int32_t>(-(kp + 1));
    }
    k += kstep;
  }
  return info;
}

template <class T>
void small_sytf2_all(int64_t n, T* a, int32_t* ipiv, int32_t* info, int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) info[i] = small_sytf2_impl(n, a + i * n * n, ipiv + i * n);
}
#if EMBER_LU_AVX2
template <class T>
__attribute__((target("avx2"))) void small_sytf2_avx2(int64_t n, T* a, int32_t* ipiv, int32_t* info,
                                                      int64_t b, int64_t e) {
  for (int64_t i = b; i < e; ++i) info[i] = small_sytf2_impl(n, a + i * n * n, ipiv + i * n);
}
#endif

}  // namespace

std::tuple<Tensor, Tensor, Tensor> _linalg_ldl_factor_ex(const Tensor& A, bool hermitian) {
  const char* op = "torch.linalg.ldl_factor_ex";
  check_matrix(op, A, "A", true, true);
  const int64_t n = A->size(A->dim() - 1);
  const DimVector batch = batch_of(A);
  Tensor ld_t = col_major_copy(A, batch);
  Tensor piv = zeros_int(with(batch, {n}), A->device());
  Tensor info = zeros_int(batch, A->device());
  if (A->device().is_meta() || ld_t->numel() == 0) return {ld_t, piv, info};
  dispatch_real_complex(A->dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    T* ap = ld_t->data_as<T>();
    int32_t* pp = piv->data_as<int32_t>();
    int32_t* ip = info->data_as<int32_t>();
    if constexpr (std::is_floating_point_v<T> && std::is_same_v<lint, int32_t>) {
      if (n <= kSmallLdl) {  // sytf2's loops, no LAPACK call
        for_each_chunk(count_of(batch), n, [&](int64_t begin, int64_t end) {
#if EMBER_LU_AVX2
          if (cpu_isa() >= Isa::Avx2) return small_sytf2_avx2(n, ap, pp, ip, begin, end);
#endif
          small_sytf2_all(n, ap, pp, ip, begin, end);
        });
        for (int64_t b = 0; b < count_of(batch); ++b)  // the strict upper part
          for (int64_t j = 1; j < n; ++j) std::fill_n(ap + b * n * n + j * n, j, T(0));
        return;
      }
    }
    T query = 0;  // one workspace query for the whole batch
    lint dummy = 0;
    QrLdl<T>::sytrf(hermitian, lint(n), ap, ld(n), &dummy, &query, -1);
    const lint lwork = work_size(query);
    for_each_chunk(count_of(batch), n, [&](int64_t begin, int64_t end) {
      std::vector<T> work(lwork);
      for (int64_t b = begin; b < end; ++b) {
        T* a = ap + b * n * n;
        ip[b] = QrLdl<T>::sytrf(hermitian, lint(n), a, ld(n), pp + b * n, work.data(),
                                lint(work.size()));
        for (int64_t j = 1; j < n; ++j) std::fill_n(a + j * n, j, T(0));  // the strict upper part
      }
    });
  });
  return {ld_t, piv, info};
}

Tensor _linalg_ldl_solve(const Tensor& LD, const Tensor& pivots, const Tensor& B, bool hermitian) {
  const char* op = "torch.linalg.ldl_solve";
  check_matrix(op, LD, "LD", true, true);
  check_matrix(op, B, "B", false, true);
  EMBER_CHECK(LD->dtype() == B->dtype(), op, ": Expected LD and B to have the same dtype, but ",
              "found LD of type ", dtype_name(LD->dtype()), " and B of type ",
              dtype_name(B->dtype()), " instead");
  const int64_t n = LD->size(LD->dim() - 1), k = B->size(B->dim() - 1);
  EMBER_CHECK(B->size(B->dim() - 2) == n, "Incompatible matrix sizes for ", op,
              ": each A matrix is ", n, " by ", n, " but each b matrix is ", B->size(B->dim() - 2),
              " by ", k);
  EMBER_CHECK(pivots->dtype() == ScalarType::Int32 || pivots->dtype() == ScalarType::Int64, op,
              ": Expected pivots to be integers. Got ", dtype_name(pivots->dtype()));
  EMBER_CHECK(pivots->dim() == LD->dim() - 1 && pivots->size(pivots->dim() - 1) == n, op,
              ": Expected LD.shape[:-1] and pivots.shape to be the same, but got pivots with ",
              "shape ", shape_str(pivots->sizes()), " instead");
  DimVector batch = batch_broadcast(op, LD, B);
  batch =
      broadcast_shapes(batch, DimVector(pivots->sizes().begin(), pivots->sizes().end() - 1), op);
  Tensor a = col_major_copy(LD, batch);
  Tensor x = col_major_copy(B, batch);
  if (LD->device().is_meta() || x->numel() == 0) return x;
  Tensor piv = ember::empty(with(batch, {n}), ScalarType::Int32, LD->device());
  copy_into(piv, pivots);
  const int32_t* p = piv->data_as<int32_t>();
  // sytrs trusts its pivots: an entry out of range, or a 2 x 2 block (a negative pair) that
  // is not a pair, would index outside the matrix.
  for (int64_t i = 0; i < piv->numel(); ++i)
    EMBER_CHECK(p[i] != 0 && p[i] >= -n && p[i] <= n, op, ": pivots must be in [-", n,
                ", -1] or [1, ", n, "], got ", p[i]);
  for (int64_t b = 0; b < piv->numel() / std::max<int64_t>(1, n); ++b)
    for (int64_t k = 0; k < n; ++k) {
      const int32_t* q = p + b * n;
      if (q[k] > 0) continue;
      EMBER_CHECK(k + 1 < n && q[k + 1] == q[k], op, ": a negative pivot (a 2 x 2 block of D) ",
                  "must be followed by the same value, got pivots[", k, "] = ", q[k],
                  k + 1 < n ? " and the next one " : " as the last one",
                  k + 1 < n ? std::to_string(q[k + 1]) : std::string());
      ++k;
    }
  dispatch_real_complex(LD->dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* ap = a->data_as<T>();
    T* xp = x->data_as<T>();
    for_each_matrix(count_of(batch), n, [&](int64_t b) {
      QrLdl<T>::sytrs(hermitian, lint(n), lint(k), ap + b * n * n, ld(n), p + b * n, xp + b * n * k,
                      ld(n));
    });
  });
  return fresh(x);
}

// ---- general eigendecomposition (geev) ---------------------------------------------------------

namespace {

template <class R>
lint cgeev(bool vecs, lint n, std::complex<R>* a, std::complex<R>* w, std::complex<R>* vr,
           std::complex<R>* work, lint lwork, R* rwork) {
  std::complex<R> vl = 0;
  const char jv = vecs ? 'V' : 'N';
  if constexpr (std::is_same_v<R, float>)
    return scipy_LAPACKE_cgeev_work(LAPACK_COL_MAJOR, 'N', jv, n, lc(a), ld(n), lc(w), lc(&vl), 1,
                                    lc(vr), ld(n), lc(work), lwork, rwork);
  else
    return scipy_LAPACKE_zgeev_work(LAPACK_COL_MAJOR, 'N', jv, n, lc(a), ld(n), lc(w), lc(&vl), 1,
                                    lc(vr), ld(n), lc(work), lwork, rwork);
}

template <class T>
bool finite_all(const T* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(std::real(p[i])) || !std::isfinite(std::imag(p[i]))) return false;
  return true;
}

template <class R>
void fill_nan(std::complex<R>* p, int64_t n) {
  const R nan = std::numeric_limits<R>::quiet_NaN();
  std::fill_n(p, n, std::complex<R>(nan, nan));
}

// Real input: geev gives the eigenvalues as (wr, wi), a complex pair (wi[j] > 0, wi[j+1] < 0)
// with the eigenvectors vr[:, j] +- i vr[:, j+1]; they are unpacked into complex w and v.
template <class R>
void eig_real(R* a, std::complex<R>* w, std::complex<R>* v, int32_t* info, int64_t count, int64_t n,
              bool vecs) {
  for_each_chunk(count, n, [&](int64_t begin, int64_t end) {
    std::vector<R> wr(n), wi(n), vr(vecs ? n * n : 1);
    R query = 0;
    Lapack<R>::geev(vecs, lint(n), a, wr.data(), wi.data(), vr.data(), &query, -1);
    std::vector<R> work(work_size(query));
    for (int64_t b = begin; b < end; ++b) {
      R* ab = a + b * n * n;
      std::complex<R>* wb = w + b * n;
      std::complex<R>* vb = vecs ? v + b * n * n : nullptr;
      if (!finite_all(ab, n * n)) {  // geev's result is undefined there: reported as info -1
        info[b] = -1;
        fill_nan(wb, n);
        if (vecs) fill_nan(vb, n * n);
        continue;
      }
      info[b] = Lapack<R>::geev(vecs, lint(n), ab, wr.data(), wi.data(), vr.data(), work.data(),
                                lint(work.size()));
      for (int64_t j = 0; j < n; ++j) wb[j] = std::complex<R>(wr[j], wi[j]);
      if (!vecs) continue;
      for (int64_t j = 0; j < n; ++j) {
        const R* cj = vr.data() + j * n;
        std::complex<R>* oj = vb + j * n;
        if (wi[j] != 0 && j + 1 < n) {
          const R* cn = cj + n;
          std::complex<R>* on = oj + n;
          for (int64_t i = 0; i < n; ++i) {
            oj[i] = std::complex<R>(cj[i], cn[i]);
            on[i] = std::complex<R>(cj[i], -cn[i]);
          }
          ++j;
        } else {
          for (int64_t i = 0; i < n; ++i) oj[i] = cj[i];
        }
      }
    }
  });
}

template <class R>
void eig_complex(std::complex<R>* a, std::complex<R>* w, std::complex<R>* v, int32_t* info,
                 int64_t count, int64_t n, bool vecs) {
  using C = std::complex<R>;
  for_each_chunk(count, n, [&](int64_t begin, int64_t end) {
    std::vector<R> rwork(2 * n);
    C query = 0, dummy = 0;
    cgeev<R>(vecs, lint(n), a, w, vecs ? v : &dummy, &query, -1, rwork.data());
    std::vector<C> work(work_size(query.real()));
    for (int64_t b = begin; b < end; ++b) {
      C* ab = a + b * n * n;
      C* vb = vecs ? v + b * n * n : &dummy;
      if (!finite_all(ab, n * n)) {
        info[b] = -1;
        fill_nan(w + b * n, n);
        if (vecs) fill_nan(vb, n * n);
        continue;
      }
      info[b] =
          cgeev<R>(vecs, lint(n), ab, w + b * n, vb, work.data(), lint(work.size()), rwork.data());
    }
  });
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> _linalg_eig(const Tensor& A, bool compute_v) {
  const char* op = "linalg.eig";
  check_matrix(op, A, "A", true, true);
  const int64_t n = A->size(A->dim() - 1);
  const DimVector batch = batch_of(A);
  const ScalarType ct = to_complex(A->dtype());
  Tensor a = col_major_copy(A, batch);
  Tensor w = ember::empty(with(batch, {n}), ct, A->device());
  Tensor v = compute_v ? empty_col_major(batch, n, n, ct, A->device())
                       : ember::empty({0}, ct, A->device());
  Tensor info = zeros_int(batch, A->device());
  if (A->device().is_meta() || a->numel() == 0) return {fresh(w), fresh(v), info};
  const int64_t count = count_of(batch);
  using c64 = std::complex<float>;
  using c128 = std::complex<double>;
  int32_t* ip = info->data_as<int32_t>();
  c64* v64 = compute_v && ct == ScalarType::Complex64 ? v->data_as<c64>() : nullptr;
  c128* v128 = compute_v && ct == ScalarType::Complex128 ? v->data_as<c128>() : nullptr;
  switch (A->dtype()) {
    case ScalarType::Float32:
      eig_real<float>(a->data_as<float>(), w->data_as<c64>(), v64, ip, count, n, compute_v);
      break;
    case ScalarType::Float64:
      eig_real<double>(a->data_as<double>(), w->data_as<c128>(), v128, ip, count, n, compute_v);
      break;
    case ScalarType::Complex64:
      eig_complex<float>(a->data_as<c64>(), w->data_as<c64>(), v64, ip, count, n, compute_v);
      break;
    default:
      eig_complex<double>(a->data_as<c128>(), w->data_as<c128>(), v128, ip, count, n, compute_v);
      break;
  }
  return {fresh(w), fresh(v), info};
}

namespace {

template <class R>
void cgemm_cm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, lint n, const std::complex<R>* a,
              const std::complex<R>* b, std::complex<R>* c) {
  const std::complex<R> one = 1, zero = 0;
  if constexpr (std::is_same_v<R, float>)
    scipy_cblas_cgemm(CblasColMajor, ta, tb, n, n, n, &one, a, ld(n), b, ld(n), &zero, c, ld(n));
  else
    scipy_cblas_zgemm(CblasColMajor, ta, tb, n, n, n, &one, a, ld(n), b, ld(n), &zero, c, ld(n));
}

template <class R>
lint cgesv(lint n, std::complex<R>* a, lint* ipiv, std::complex<R>* b) {
  if constexpr (std::is_same_v<R, float>)
    return scipy_LAPACKE_cgesv_work(LAPACK_COL_MAJOR, n, n, lc(a), ld(n), ipiv, lc(b), ld(n));
  else
    return scipy_LAPACKE_zgesv_work(LAPACK_COL_MAJOR, n, n, lc(a), ld(n), ipiv, lc(b), ld(n));
}

// gA = V^-H (diag(gL) + off-diagonal of (G - V^H V diag(Re diag G)) / conj(L_j - L_i)) V^H
// with G = V^H gV, for eigenvectors of unit norm; out gets gA (its real part for real A).
template <class R>
void eig_backward_batch(const std::complex<R>* gl, const std::complex<R>* gv,
                        const std::complex<R>* l, const std::complex<R>* v, void* out,
                        bool real_out, int64_t count, int64_t n) {
  using C = std::complex<R>;
  const R tol = std::sqrt(std::numeric_limits<R>::epsilon());
  for_each_chunk(count, n, [&](int64_t begin, int64_t end) {
    std::vector<C> G(n * n), P(n * n), M(n * n), Vh(n * n);
    std::vector<lint> ipiv(n);
    for (int64_t b = begin; b < end; ++b) {
      const C* V = v + b * n * n;
      const C* L = l + b * n;
      const C* gL = gl + b * n;
      cgemm_cm<R>(CblasConjTrans, CblasNoTrans, lint(n), V, gv + b * n * n, G.data());
      R scale = 1;
      for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::abs(G[i * n + i]));
      for (int64_t i = 0; i < n; ++i)
        EMBER_CHECK(std::abs(G[i * n + i].imag()) <= tol * scale, "linalg_eig_backward: The ",
                    "eigenvectors in the complex case are specified up to multiplication by ",
                    "e^{i phi}. The specified loss function depends on this quantity, so it is ",
                    "ill-defined.");
      cgemm_cm<R>(CblasConjTrans, CblasNoTrans, lint(n), V, V, P.data());
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < n; ++i) {
          C m = G[j * n + i] - P[j * n + i] * G[j * n + j].real();
          M[j * n + i] = i == j ? gL[i] : m / std::conj(L[j] - L[i]);
        }
      // P = M V^H; then solve V^H X = P, X = gA
      cgemm_cm<R>(CblasNoTrans, CblasConjTrans, lint(n), M.data(), V, P.data());
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < n; ++i) Vh[j * n + i] = std::conj(V[i * n + j]);
      if (cgesv<R>(lint(n), Vh.data(), ipiv.data(), P.data()) != 0) fill_nan(P.data(), n * n);
      if (real_out) {
        R* o = static_cast<R*>(out) + b * n * n;
        for (int64_t i = 0; i < n * n; ++i) o[i] = P[i].real();
      } else {
        std::copy(P.begin(), P.end(), static_cast<C*>(out) + b * n * n);
      }
    }
  });
}

}  // namespace

Tensor _linalg_eig_backward(const Tensor& gL, const Tensor& gV, const Tensor& L, const Tensor& V,
                            bool real_input) {
  const char* op = "linalg_eig_backward";
  check_matrix(op, V, "eigenvectors", true, true);
  EMBER_CHECK(is_complex(V->dtype()) && L->dtype() == V->dtype() && gL->dtype() == V->dtype() &&
                  gV->dtype() == V->dtype(),
              op, ": expected complex eigenvalues, eigenvectors and their gradients of one dtype");
  const int64_t n = V->size(V->dim() - 1);
  const DimVector batch = batch_of(V);
  EMBER_CHECK(
      L->sizes() == with(batch, {n}) && gL->sizes() == L->sizes() && gV->sizes() == V->sizes(), op,
      ": the shapes of the eigenvalues, eigenvectors and their gradients disagree");
  const ScalarType out_dt = real_input ? to_real(V->dtype()) : V->dtype();
  Tensor out = empty_col_major(batch, n, n, out_dt, V->device());
  if (V->device().is_meta() || out->numel() == 0) return fresh(out);
  Tensor v = col_major_copy(V, batch), gv = col_major_copy(gV, batch);
  Tensor l = contiguous_copy(L), gl = contiguous_copy(gL);
  const int64_t count = count_of(batch);
  if (V->dtype() == ScalarType::Complex64) {
    using C = std::complex<float>;
    eig_backward_batch<float>(gl->data_as<C>(), gv->data_as<C>(), l->data_as<C>(), v->data_as<C>(),
                              out->data(), real_input, count, n);
  } else {
    using C = std::complex<double>;
    eig_backward_batch<double>(gl->data_as<C>(), gv->data_as<C>(), l->data_as<C>(), v->data_as<C>(),
                               out->data(), real_input, count, n);
  }
  return fresh(out);
}

}  // namespace cpu
}  // namespace ember
