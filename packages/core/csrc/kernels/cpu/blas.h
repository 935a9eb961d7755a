// Raw row-major BLAS products for kernels that schedule their own parallelism (convolution):
// each thread of ember's pool runs whole products on its own share of the work.
#pragma once
#include <cstdint>

namespace ember {
namespace cpu {

// C (m x n, leading dimension ldc) = alpha * op(A) @ op(B) + beta * C, all row-major; op(X) is
// X^T when the matching trans flag is set (lda/ldb are the leading dimensions of A/B as stored).
// beta == 0 never reads C. Defined for float and double.
template <class T>
void gemm_rowmajor(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                   int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

// gemm_rowmajor cut into tiles small enough for OpenBLAS's small-matrix kernels, which skip
// packing the operands: for a thread's share of a product that recurs every step (the LSTM's
// h @ w_hh^T), where packing w_hh again on every call would cost a third of the time.
template <class T>
void gemm_rowmajor_tiled(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha,
                         const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c,
                         int64_t ldc);

// While one is alive, OpenBLAS runs every product on its calling thread. Used around a
// parallel_for whose chunks each call gemm_rowmajor: OpenBLAS's own workers would otherwise be
// asked for by both threads at once and wait for each other (see kSerialGemm in linalg_ops.cpp).
// Nests and may be used from several threads; the last one to leave restores the count.
class SerialBlasScope {
 public:
  SerialBlasScope();
  ~SerialBlasScope();
  SerialBlasScope(const SerialBlasScope&) = delete;
  SerialBlasScope& operator=(const SerialBlasScope&) = delete;
};

}  // namespace cpu
}  // namespace ember
