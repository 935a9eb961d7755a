// Float32 matrix products on conv_gemm's AVX-512 kernel (conv_gemm.h) for the callers that
// choose it over OpenBLAS: the recurrent layers (nn_rnn.cpp) and matmul (linalg_ops.cpp), where
// OpenBLAS runs kernels narrower than the CPU's (see packs()). Both operands are packed per call:
// the left one by PackedA, a transposed right one as the packing of its transpose, whose 16-row
// blocks are its 16-column panels.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>

#include "kernels/cpu/blas.h"
#include "kernels/cpu/conv_gemm.h"
#include "kernels/parallel.h"

namespace ember {
namespace cpu {

// Whether OpenBLAS runs AVX-512 kernels: its core type (chosen for the CPU when it loads, or
// forced by OPENBLAS_CORETYPE) is one of its AVX-512 ones.
bool blas_runs_avx512();

// Whether GemmLeft<T> packs for conv_gemm: float32 on a CPU with its AVX-512 kernel while OpenBLAS
// runs narrower ones. There (OPENBLAS_CORETYPE=Haswell on an AVX-512 CPU, say) OpenBLAS reaches
// a sixth to a half of conv_gemm's speed on products with K = 256 or 16-32 rows; with its own
// AVX-512 kernels it is as fast or faster.
template <class T>
bool packs() {
  if constexpr (std::is_same_v<T, float>) return conv_gemm_available() && !blas_runs_avx512();
  return false;
}

// C (M x N, ldc) = op(A) @ op(B) on OpenBLAS (gemm_rowmajor's arguments, alpha 1, beta 0). Big
// products with several threads are split by columns over ember's pool, each part on its thread
// (as matmul does: OpenBLAS's own workers spin after each call, taking the cores from ember's).
template <class T>
void blas_gemm_split(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* a,
                     int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc) {
  const int nthreads = get_num_threads();
  if (nthreads <= 1 || in_parallel_region() || N < 32 || M * N * K < (int64_t(1) << 20)) {
    gemm_rowmajor<T>(trans_a, trans_b, M, N, K, T(1), a, lda, b, ldb, T(0), c, ldc);
    return;
  }
  SerialBlasScope serial;
  const int64_t parts = std::min<int64_t>(nthreads, N / 16);
  parallel_for(0, parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t n0 = p * N / parts / 16 * 16,
                    n1 = p + 1 == parts ? N : (p + 1) * N / parts / 16 * 16;
      gemm_rowmajor<T>(trans_a, trans_b, M, n1 - n0, K, T(1), a, lda, b + n0 * (trans_b ? ldb : 1),
                       ldb, T(0), c + n0, ldc);
    }
  });
}

// The left operand A (M x K) of a layer's products, element (m, k) at a[m * rs + k * cs] with rs
// or cs equal to 1. Float32 on an AVX-512 CPU packs it once for conv_gemm (then shared by every
// thread's columns); otherwise BLAS reads it in place.
template <class T>
class GemmLeft {
 public:
  GemmLeft(const T* a, int64_t rs, int64_t cs, int64_t M, int64_t K)
      : a_(a), rs_(rs), cs_(cs), M_(M), K_(K) {
    if constexpr (std::is_same_v<T, float>) {
      if (M > 0 && K > 0 && packs<T>()) {
        if (cs == 1 || rs != 1) {
          packed_.emplace(a, rs, cs, M, K);
        } else {
          // A^T stored row-major: its 16-row blocks are runs of 16 contiguous floats of each
          // stored row, copied whole (PackedA's element-wise gather would read a column at a time)
          packed_.emplace(a, 1, 1, 0, 0);
          PackedA& p = *packed_;
          p.M = M, p.K = K;
          const int64_t blocks = (M + 15) / 16;
          p.data = Scratch<float>(blocks * 16 * K);
          std::fill(p.data.data(), p.data.data() + blocks * 16 * K, 0.0f);
          for (int64_t k = 0; k < K; ++k)
            for (int64_t bm = 0; bm < blocks; ++bm) {
              const int64_t rows = std::min<int64_t>(16, M - bm * 16);
              std::memcpy(p.data.data() + bm * 16 * K + k * 16, a + k * cs + bm * 16,
                          sizeof(float) * rows);
            }
        }
      }
    }
  }
  bool packed() const { return packed_.has_value(); }
  const PackedA& packing() const { return *packed_; }

  // C[:, :n] (row-major, leading dimension ldc) = A @ B[:, :n], B row-major (K x n) with leading
  // dimension ldb; on the calling thread (BLAS tiled for its small-matrix kernels).
  void mul(int64_t n, const T* b, int64_t ldb, T* c, int64_t ldc) const {
    if (M_ == 0 || n <= 0) return;
    if (K_ == 0) {
      for (int64_t m = 0; m < M_; ++m) std::fill(c + m * ldc, c + m * ldc + n, T(0));
      return;
    }
    if constexpr (std::is_same_v<T, float>) {
      if (packed_) {
        conv_gemm(*packed_, n, b, ldb, c, ldc);
        return;
      }
    }
    const bool trans = cs_ != 1;
    gemm_rowmajor_tiled<T>(trans, false, M_, n, K_, T(1), a_, trans ? cs_ : rs_, b, ldb, T(0), c,
                           ldc);
  }

  // Packed only: C[:, n0:n1] = A @ W^T[:, n0:n1] for the right operand W^T given as the packing
  // of W (N x K): its 16-row blocks are W^T's 16-column panels, K x 16 contiguous; n0 % 16 == 0.
  void mul_panels(const PackedA& w, int64_t n0, int64_t n1, float* c, int64_t ldc) const {
    for (int64_t j = n0; j < n1; j += 16)
      conv_gemm(*packed_, std::min<int64_t>(16, n1 - j), w.data.data() + j * w.K, 16, c + j, ldc);
  }
  // mul_panels over all of W's rows, split over the threads.
  void mul_panels_all(const PackedA& w, float* c, int64_t ldc) const {
    const int64_t N = w.M, nblk = (N + 15) / 16;
    const bool par = get_num_threads() > 1 && !in_parallel_region();
    const int64_t grain = std::max<int64_t>(1, (1 << 20) / std::max<int64_t>(1, 16 * M_ * K_));
    parallel_for(0, nblk, par ? grain : nblk, [&](int64_t b0, int64_t b1) {
      mul_panels(w, b0 * 16, std::min(N, b1 * 16), c, ldc);
    });
  }

  // The same over all N columns of a big product: packed, blocks of 16 columns split over the
  // threads; otherwise one BLAS call (threaded by BLAS; not inside a SerialBlasScope).
  void mul_all(int64_t N, const T* b, int64_t ldb, T* c, int64_t ldc) const {
    if (!packed_ || K_ == 0 || get_num_threads() == 1 || in_parallel_region()) {
      if (packed_ || K_ == 0 || M_ == 0 || N == 0) {
        mul(N, b, ldb, c, ldc);
        return;
      }
      const bool trans = cs_ != 1;
      blas_gemm_split(trans, false, M_, N, K_, a_, trans ? cs_ : rs_, b, ldb, c, ldc);
      return;
    }
    const int64_t nblk = (N + 15) / 16;
    const int64_t grain = std::max<int64_t>(1, (1 << 20) / std::max<int64_t>(1, 16 * M_ * K_));
    parallel_for(0, nblk, grain, [&](int64_t b0, int64_t b1) {
      const int64_t n0 = b0 * 16, n1 = std::min(N, b1 * 16);
      mul(n1 - n0, b + n0, ldb, c + n0, ldc);
    });
  }

 private:
  const T* a_;
  int64_t rs_, cs_, M_, K_;
  std::optional<PackedA> packed_;
};

// Whether matmul runs a float32 product of these sizes on the packed kernel: packs<float>(), and
// big enough in every dimension that 16 x 16 tiles waste little and packing is a small part.
inline bool packed_gemm_suits(int64_t M, int64_t N, int64_t K) {
  return M >= 16 && N >= 16 && K >= 16 && M * N * K >= (int64_t(1) << 16) && packs<float>();
}

// C (M x N, leading dimension ldc) = A @ B on the packed kernel, for A's element (m, k) at
// a[m * a_rs + k * a_cs] (a_rs or a_cs 1), and B (K x N) row-major with leading dimension ldb,
// or with b_trans B^T (N x K) row-major. Only call when packs<float>() and M, N, K > 0; the
// columns are split over the threads (outside a parallel region).
inline void packed_gemm(const float* a, int64_t a_rs, int64_t a_cs, const float* b, bool b_trans,
                        int64_t ldb, float* c, int64_t ldc, int64_t M, int64_t N, int64_t K) {
  const GemmLeft<float> left(a, a_rs, a_cs, M, K);
  if (b_trans)
    left.mul_panels_all(PackedA(b, ldb, 1, N, K), c, ldc);
  else
    left.mul_all(N, b, ldb, c, ldc);
}

}  // namespace cpu
}  // namespace ember
