// lgamma / digamma / trigamma of a CPU tensor (kernels/gamma_math.h), no autograd: the values
// under ember.special's differentiable lgamma, digamma and polygamma(1, x), bound as
// ember._C._gamma_values (python/gamma_py.cpp).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace ember {
namespace cpu {

// order -1: lgamma, 0: digamma, 1: trigamma. float64 is computed in float64, the other floating
// dtypes in float32 (integers are promoted to the default float dtype), as torch.
Tensor gamma_values(const Tensor& self, int64_t order);

}  // namespace cpu
}  // namespace ember
