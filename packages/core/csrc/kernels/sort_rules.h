// Device-neutral argument checks and output shapes of the sorting ops (ops/sort.yaml), shared by
// the CPU kernels (kernels/cpu/sort_ops.cpp) and the CUDA ones (cuda/sort_ops.cu).
#pragma once
#include <cstdint>

#include "core/scalar.h"
#include "core/tensor.h"

namespace ember {

// self's sizes with dim d set to n (a 0-d tensor keeps its empty shape).
DimVector sizes_with_dim(const Tensor& self, int64_t d, int64_t n);

// topk: the wrapped dim, after checking that k fits in it.
int64_t topk_dim(const Tensor& self, int64_t k, int64_t dim);

// kthvalue / median / nanmedian / mode along `dim`: the wrapped dim, refusing an empty reduction.
int64_t selection_dim(const Tensor& self, int64_t dim, const char* op);
// median / nanmedian / kthvalue order real numbers: bool has no kernel (as in PyTorch).
void check_selection_dtype(const Tensor& self, const char* op);
// median / nanmedian of an empty tensor: NaN in self's dtype, converted as PyTorch's fill
// converts it on x86 (the lowest int32 / int64, 0 in narrower integers, True for bool).
Scalar empty_median_value(ScalarType dtype);
// kthvalue: selection_dim, after checking that k (1-based) fits in the dim.
int64_t kthvalue_dim(const Tensor& self, int64_t k, int64_t dim);
// The results' shape of a selection along d: the dim removed, or kept with size 1.
DimVector selection_shape(const Tensor& self, int64_t d, bool keepdim);

}  // namespace ember
