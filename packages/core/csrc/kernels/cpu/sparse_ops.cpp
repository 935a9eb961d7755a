// CPU kernels of the sparse matrix products (ops/sparse.yaml). A sparse matrix reaches them as
// its CSR arrays: crow_indices (M + 1), col_indices (nnz) and values (nnz); the COO and CSR
// tensors of ember.sparse (src/ember/sparse.py) convert to these arrays in Python. Three kernels
// close under differentiation: S @ D (_sparse_csr_mm), S^T @ D (_sparse_csr_mm_t) and the
// sampled products dot(L[row], R[col]) at the nonzeros (_sparse_csr_sddmm).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace cpu {

namespace {

// Inlined into each instruction-set copy below, so each compiles the loops for its target.
#define EMBER_SPARSE_INLINE inline __attribute__((always_inline))

struct Csr {
  Tensor crow, col;  // contiguous int64
  int64_t rows = 0, nnz = 0;
};

// The CSR arrays as contiguous int64, checked against each other and against num_cols columns.
Csr check_csr(const char* op, const Tensor& crow, const Tensor& col, int64_t num_cols) {
  EMBER_CHECK(crow->dim() == 1 && crow->numel() >= 1, op,
              ": crow_indices must be a 1-D tensor of at least one element, got shape ",
              shape_str(crow->sizes()));
  EMBER_CHECK(col->dim() == 1, op, ": col_indices must be 1-D, got shape ",
              shape_str(col->sizes()));
  EMBER_CHECK_KIND(!is_floating(crow->dtype()) && !is_floating(col->dtype()), Type, op,
                   ": crow_indices and col_indices must be integer tensors");
  Csr c;
  c.crow = nn::contig(crow, ScalarType::Int64);
  c.col = nn::contig(col, ScalarType::Int64);
  c.rows = crow->numel() - 1;
  c.nnz = col->numel();
  const int64_t* pr = c.crow->data_as<int64_t>();
  const int64_t* pc = c.col->data_as<int64_t>();
  EMBER_CHECK(pr[0] == 0 && pr[c.rows] <= c.nnz, op, ": crow_indices must start at 0 and end at ",
              "most at nnz = ", c.nnz, ", got ", pr[0], " and ", pr[c.rows]);
  // Branch-free scans that vectorize (a check per entry cost as much as a small product); the
  // failing entry is looked for only once one is known to exist.
  bool decreasing = false, outside = false;
  for (int64_t r = 0; r < c.rows; ++r) decreasing |= pr[r] > pr[r + 1];
  for (int64_t k = 0; k < c.nnz; ++k) outside |= (pc[k] < 0) | (pc[k] >= num_cols);
  for (int64_t r = 0; decreasing && r < c.rows; ++r)
    EMBER_CHECK(pr[r] <= pr[r + 1], op, ": crow_indices must be non-decreasing (row ", r, ")");
  for (int64_t k = 0; outside && k < c.nnz; ++k)
    EMBER_CHECK_KIND(pc[k] >= 0 && pc[k] < num_cols, Index, op, ": column index ", pc[k],
                     " is out of range for ", num_cols, " columns");
  return c;
}

void check_matrix(const char* op, const char* name, const Tensor& t) {
  EMBER_CHECK(t->dim() == 2, op, ": ", name, " must be a 2-D tensor, got shape ",
              shape_str(t->sizes()));
}

void check_values(const char* op, const Tensor& values, const Tensor& dense, int64_t nnz) {
  EMBER_CHECK(values->dim() == 1 && values->numel() == nnz, op,
              ": values must be 1-D with one value per column index (", nnz, "), got shape ",
              shape_str(values->sizes()));
  EMBER_CHECK_KIND(values->dtype() == dense->dtype(), Type, op,
                   ": values and the dense matrix must have the same dtype, got ",
                   dtype_name(values->dtype()), " and ", dtype_name(dense->dtype()));
}

// Rows per chunk so a chunk holds about kPointwiseGrain multiply-adds.
int64_t row_grain(int64_t rows, int64_t nnz, int64_t width) {
  const int64_t per_row = std::max<int64_t>(1, (nnz / std::max<int64_t>(rows, 1) + 1) * width);
  return std::max<int64_t>(1, kPointwiseGrain / per_row);
}

// out[r] = sum over k in row r of v[perm[k]] * d[idx[k]] for rows r in [r0, r1); perm may be
// null. acc is __restrict so the compiler keeps it apart from d and vectorizes the row update.
// FW > 0: the row width is that constant (the loops over a row unroll into whole vectors);
// FW == 0: F at run time.
template <typename T, int FW>
EMBER_SPARSE_INLINE void csr_rows_width(const int64_t* ptr, const int64_t* idx, const int64_t* perm,
                                        const T* v, const T* d, T* out, int64_t r0, int64_t r1,
                                        int64_t F_) {
  using A = opmath_t<T>;
  const int64_t F = FW > 0 ? FW : F_;
  std::vector<A> buf(F);
  A* __restrict acc = buf.data();
  for (int64_t r = r0; r < r1; ++r) {
    std::fill(acc, acc + F, A(0));
    for (int64_t k = ptr[r]; k < ptr[r + 1]; ++k) {
      const A s = static_cast<A>(v[perm ? perm[k] : k]);
      const T* drow = d + idx[k] * F;
      for (int64_t f = 0; f < F; ++f) acc[f] += s * static_cast<A>(drow[f]);
    }
    T* orow = out + r * F;
    for (int64_t f = 0; f < F; ++f) orow[f] = static_cast<T>(acc[f]);
  }
}

template <typename T>
EMBER_SPARSE_INLINE void csr_rows_impl(const int64_t* ptr, const int64_t* idx, const int64_t* perm,
                                       const T* v, const T* d, T* out, int64_t r0, int64_t r1,
                                       int64_t F) {
  // A width of 16 as a constant is 1.9x faster (one whole vector per entry); 64 as a constant
  // measured 2x slower than the run-time loop, so only 16 is special-cased.
  if (F == 16) return csr_rows_width<T, 16>(ptr, idx, perm, v, d, out, r0, r1, F);
  csr_rows_width<T, 0>(ptr, idx, perm, v, d, out, r0, r1, F);
}

// The same loops compiled for AVX2 and AVX-512 (picked by cpu_isa()): the library's baseline is
// SSE2 (about 1.3x slower on a 64-wide float row).
EMBER_TARGET_BEGIN("avx2,fma")
template <typename T>
void csr_rows_avx2(const int64_t* ptr, const int64_t* idx, const int64_t* perm, const T* v,
                   const T* d, T* out, int64_t r0, int64_t r1, int64_t F) {
  csr_rows_impl<T>(ptr, idx, perm, v, d, out, r0, r1, F);
}
EMBER_TARGET_END()
EMBER_TARGET_BEGIN("avx512f,avx2,fma")
template <typename T>
void csr_rows_avx512(const int64_t* ptr, const int64_t* idx, const int64_t* perm, const T* v,
                     const T* d, T* out, int64_t r0, int64_t r1, int64_t F) {
  csr_rows_impl<T>(ptr, idx, perm, v, d, out, r0, r1, F);
}
EMBER_TARGET_END()

template <typename T>
void csr_rows_times(const int64_t* ptr, const int64_t* idx, const int64_t* perm, const T* v,
                    const T* d, T* out, int64_t rows, int64_t nnz, int64_t F) {
  const Isa isa = cpu_isa();
  parallel_for(0, rows, row_grain(rows, nnz, F), [&](int64_t r0, int64_t r1) {
    if (isa == Isa::Avx512) return csr_rows_avx512<T>(ptr, idx, perm, v, d, out, r0, r1, F);
    if (isa == Isa::Avx2) return csr_rows_avx2<T>(ptr, idx, perm, v, d, out, r0, r1, F);
    csr_rows_impl<T>(ptr, idx, perm, v, d, out, r0, r1, F);
  });
}

}  // namespace

Tensor _sparse_csr_mm(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                      const Tensor& dense) {
  const char* op = "_sparse_csr_mm";
  check_matrix(op, "dense", dense);
  Csr c = check_csr(op, crow_indices, col_indices, dense->size(0));
  check_values(op, values, dense, c.nnz);
  const int64_t F = dense->size(1);
  Tensor v = nn::contig(values), d = nn::contig(dense);
  Tensor out = ember::empty({c.rows, F}, d->dtype(), d->device());
  EMBER_DISPATCH_FLOAT(d->dtype(), op, [&] {
    csr_rows_times<scalar_t>(c.crow->data_as<int64_t>(), c.col->data_as<int64_t>(), nullptr,
                             v->data_as<scalar_t>(), d->data_as<scalar_t>(),
                             out->data_as<scalar_t>(), c.rows, c.nnz, F);
  });
  return out;
}

Tensor _sparse_csr_mm_t(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                        const Tensor& dense, int64_t num_cols) {
  const char* op = "_sparse_csr_mm_t";
  check_matrix(op, "dense", dense);
  EMBER_CHECK(num_cols >= 0, op, ": num_cols must be non-negative, got ", num_cols);
  Csr c = check_csr(op, crow_indices, col_indices, num_cols);
  EMBER_CHECK(dense->size(0) == c.rows, op, ": the dense matrix must have one row per sparse row (",
              c.rows, "), got shape ", shape_str(dense->sizes()));
  check_values(op, values, dense, c.nnz);
  const int64_t F = dense->size(1);
  // The transpose's CSR by a counting sort of the column indices: ptr over columns, the row of
  // each entry and its position in values.
  const int64_t* pr = c.crow->data_as<int64_t>();
  const int64_t* pc = c.col->data_as<int64_t>();
  const int64_t used = pr[c.rows];
  EMBER_CHECK(num_cols < std::numeric_limits<int64_t>::max(), op, ": num_cols is too large, got ",
              num_cols);
  // The per-column arrays come from ember's allocator: a huge num_cols is an OutOfMemoryError.
  Tensor ptr_t = ember::empty({num_cols + 1}, ScalarType::Int64, cpu_device());
  Tensor next_t = ember::empty({num_cols}, ScalarType::Int64, cpu_device());
  int64_t *ptr = ptr_t->data_as<int64_t>(), *next = next_t->data_as<int64_t>();
  std::fill(ptr, ptr + num_cols + 1, 0);
  std::vector<int64_t> rows(used), perm(used);
  for (int64_t k = 0; k < used; ++k) ++ptr[pc[k] + 1];
  for (int64_t j = 0; j < num_cols; ++j) ptr[j + 1] += ptr[j];
  std::copy(ptr, ptr + num_cols, next);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t k = pr[r]; k < pr[r + 1]; ++k) {
      const int64_t at = next[pc[k]]++;
      rows[at] = r;
      perm[at] = k;
    }
  Tensor v = nn::contig(values), d = nn::contig(dense);
  Tensor out = ember::empty({num_cols, F}, d->dtype(), d->device());
  EMBER_DISPATCH_FLOAT(d->dtype(), op, [&] {
    csr_rows_times<scalar_t>(ptr, rows.data(), perm.data(), v->data_as<scalar_t>(),
                             d->data_as<scalar_t>(), out->data_as<scalar_t>(), num_cols, used, F);
  });
  return out;
}

Tensor _sparse_csr_sddmm(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& left,
                         const Tensor& right) {
  const char* op = "_sparse_csr_sddmm";
  check_matrix(op, "left", left);
  check_matrix(op, "right", right);
  Csr c = check_csr(op, crow_indices, col_indices, right->size(0));
  EMBER_CHECK(left->size(0) == c.rows && left->size(1) == right->size(1), op, ": left must be (",
              c.rows, ", ", right->size(1), ") to match the sparse rows and ",
              "right's columns, got shape ", shape_str(left->sizes()));
  EMBER_CHECK_KIND(left->dtype() == right->dtype(), Type, op,
                   ": left and right must have the same dtype, got ", dtype_name(left->dtype()),
                   " and ", dtype_name(right->dtype()));
  const int64_t F = left->size(1);
  Tensor l = nn::contig(left), rt = nn::contig(right);
  Tensor out = ember::empty({c.nnz}, l->dtype(), l->device());
  const int64_t* pr = c.crow->data_as<int64_t>();
  const int64_t* pc = c.col->data_as<int64_t>();
  EMBER_DISPATCH_FLOAT(l->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* pl = l->data_as<T>();
    const T* pR = rt->data_as<T>();
    T* po = out->data_as<T>();
    // Entries past crow[rows] belong to no row: their gradient is zero.
    for (int64_t k = pr[c.rows]; k < c.nnz; ++k) po[k] = T(0);
    parallel_for(0, c.rows, row_grain(c.rows, c.nnz, F), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* lrow = pl + r * F;
        for (int64_t k = pr[r]; k < pr[r + 1]; ++k) {
          const T* rrow = pR + pc[k] * F;
          A s = A(0);
          for (int64_t f = 0; f < F; ++f) s += static_cast<A>(lrow[f]) * static_cast<A>(rrow[f]);
          po[k] = static_cast<T>(s);
        }
      }
    });
  });
  return out;
}

}  // namespace cpu
}  // namespace ember
