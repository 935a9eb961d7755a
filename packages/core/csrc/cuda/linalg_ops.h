// The matrix products of the CUDA backend (linalg_ops.cpp: cuBLAS; linalg_ops.cu: the helper
// kernels) and their Python-visible switch: TF32 for float32 products, off by default as in
// PyTorch >= 1.12 (ember.backends.cuda.matmul.allow_tf32 / set_float32_matmul_precision).
#pragma once
#include <pybind11/pybind11.h>

namespace ember {
namespace cuda {

// Whether float32 GEMMs may use TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32).
bool allow_tf32();
void set_allow_tf32(bool on);

// Adds _get_allow_tf32 / _set_allow_tf32 to ember._C_cuda (called from its PYBIND11_MODULE).
void bind_linalg(pybind11::module_& m);

}  // namespace cuda
}  // namespace ember
