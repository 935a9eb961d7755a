// Device-neutral checks of the pooling kernels (ops/nn.yaml), shared by the CPU kernels
// (kernels/cpu/nn_pool.cpp) and the CUDA ones (cuda/nn_pool.cu).
#pragma once
#include "core/tensor.h"

namespace ember {
namespace nn {

// max_pool_backward: grad_output matches indices, and input_size has their dims with
// spatial_dims (>= 1) of them spatial.
inline void check_max_pool_backward(const char* op, const Tensor& grad_output,
                                    const Tensor& indices, const DimVector& input_size,
                                    int64_t spatial_dims) {
  EMBER_CHECK(grad_output->sizes() == indices->sizes(), op, ": grad_output of shape ",
              shape_str(grad_output->sizes()), " doesn't match indices of shape ",
              shape_str(indices->sizes()));
  EMBER_CHECK(static_cast<int64_t>(input_size.size()) == indices->dim() && spatial_dims >= 1 &&
                  spatial_dims < indices->dim(),
              op, ": input_size ", shape_str(input_size), " doesn't fit indices of shape ",
              shape_str(indices->sizes()), " with ", spatial_dims, " spatial dims");
}

}  // namespace nn
}  // namespace ember
