// Device-neutral checks of the pooling kernels (ops/nn.yaml), shared by the CPU kernels
// (kernels/cpu/nn_pool.cpp) and the CUDA ones (cuda/nn_pool.cu).
#pragma once
#include <optional>

#include "core/tensor.h"
#include "kernels/nn_rules.h"

namespace ember {
namespace nn {

// A pooling op's sizes, spatial dims padded to 3 at the front (missing dims: size 1, kernel 1,
// stride 1): the input's leading dims are `planes`; out_shape is those dims, then out.
struct PoolDims {
  int64_t k = 0, planes = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t ks[3] = {1, 1, 1}, st[3] = {1, 1, 1}, pd[3] = {0, 0, 0}, dl[3] = {1, 1, 1};
  DimVector out_shape;
};

// Fixed windows: kernel, stride (empty = kernel), padding, dilation, ceil_mode.
PoolDims fixed_pool_dims(const char* op, const DimVector& sizes, const DimVector& kernel_size,
                         const DimVector& stride, const DimVector& padding,
                         const DimVector& dilation, bool ceil_mode);

// Adaptive windows: output_size positive sizes (the caller checks the output fits a storage).
PoolDims adaptive_pool_dims(const char* op, const DimVector& sizes, const DimVector& output_size);

// Fractional max pooling: kernel_size and output_size of k = 2 or 3 elements, each window
// inside the input (output + kernel - 1 <= input), one sample in [0, 1) per (batch, channel,
// spatial dim): samples_size (N, C, k), N = 1 for unbatched input. ks holds the kernel.
PoolDims fractional_pool_dims(const char* op, const DimVector& sizes, const DimVector& kernel_size,
                              const DimVector& output_size, const DimVector& samples_size);

inline void check_divisor_override(std::optional<int64_t> divisor_override) {
  EMBER_CHECK_KIND(!divisor_override || *divisor_override != 0, Runtime,
                   "avg_pool: divisor_override must be non-zero");
}

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
