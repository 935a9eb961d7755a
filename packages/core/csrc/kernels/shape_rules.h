// Device-neutral argument checks and output shapes of ops, shared by every device's kernels
// (the CPU kernel, the meta kernel, later CUDA's), so each rule and its error messages live once.
#pragma once
#include "core/tensor.h"

namespace ember {

// multinomial: checks self (1-D or 2-D floating probabilities) and the sample count; returns
// the int64 result's shape.
DimVector multinomial_shape(const Tensor& self, int64_t num_samples, bool replacement);

}  // namespace ember
