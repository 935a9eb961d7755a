// A row-major (strided-batched) cuBLAS product for the CUDA kernels that are built on GEMMs
// (convolution: nn_conv.cu), on the per-device cuBLAS handle of linalg_ops.cpp and the current
// stream. Internal to csrc/cuda/.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace ember {
namespace cuda {

// One row-major operand: element (i, j) of the op(X) the product reads is x[i * ld + j], or,
// with trans, x[j * ld + i] (X stored as its transpose). Batch b starts `stride` elements after
// batch b - 1 (0: shared by every batch).
struct GemmOperand {
  const void* data = nullptr;
  int64_t ld = 0;
  int64_t stride = 0;
  bool trans = false;
};

// For b < batch: C_b (m x n, row-major, leading dimension ldc, batch stride stride_c) =
// alpha * A_b (m x k) @ B_b (k x n) + beta * C_b (C not read when beta == 0). A and B have dtype
// ab (float32, float64, float16 or bfloat16); C has dtype c: ab itself, or float32 for the
// 16-bit ab (the products accumulate in float32 and are stored without rounding to 16 bits).
// float32 products use TF32 tensor cores only when allow_tf32(). Sizes must fit cuBLAS's int;
// k must be positive. Runs on the current device (the caller's DeviceGuard) and its stream.
void gemm_rowmajor(const char* op, ScalarType ab, ScalarType c, int64_t m, int64_t n, int64_t k,
                   double alpha, const GemmOperand& a, const GemmOperand& b, double beta,
                   void* c_data, int64_t ldc, int64_t stride_c, int64_t batch);

}  // namespace cuda
}  // namespace ember
