// Device-neutral checks and sizes of the upsampling kernels (ops/nn.yaml), shared by the CPU
// kernels (kernels/cpu/nn_upsample.cpp) and the CUDA ones (cuda/nn_upsample.cu).
#pragma once
#include "core/tensor.h"

namespace ember {
namespace nn {

// A k-d upsampling of input (N, C, *in) to (N, C, *out): spatial sizes padded to 3 dims at the
// front (missing dims 1); out_shape is (N, C, *output_size).
struct UpsampleDims {
  int64_t planes = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  DimVector out_shape;
};

inline UpsampleDims upsample_dims(const char* op, int64_t k, const DimVector& input_size,
                                  const DimVector& output_size) {
  EMBER_CHECK_KIND(static_cast<int64_t>(output_size.size()) == k, Value, op,
                   ": output_size must have ", k, " elements, got ", shape_str(output_size));
  EMBER_CHECK(static_cast<int64_t>(input_size.size()) == k + 2, op, ": expected a ", k + 2,
              "-D input (N, C, ", k == 1 ? "W" : (k == 2 ? "H, W" : "D, H, W"), "), got shape ",
              shape_str(input_size));
  UpsampleDims u;
  u.planes = input_size[0] * input_size[1];
  u.out_shape = DimVector{input_size[0], input_size[1]};
  for (int64_t d = 0; d < k; ++d) {
    EMBER_CHECK(input_size[2 + d] > 0 && output_size[d] > 0, op,
                ": input and output sizes should be greater than 0, got input of shape ",
                shape_str(input_size), " and output_size ", shape_str(output_size));
    u.in[3 - k + d] = input_size[2 + d];
    u.out[3 - k + d] = output_size[d];
    u.out_shape.push_back(output_size[d]);
  }
  return u;
}

}  // namespace nn
}  // namespace ember
