// Derivative helpers of pointwise math, reductions, sorting and linear algebra. Included by
// formulas.h; every helper calls ops:: so backward passes are themselves differentiable.
#pragma once
#include "autograd/autograd.h"
#include "ops.h"

namespace ember {
namespace autograd {
namespace formulas {}  // namespace formulas
}  // namespace autograd
}  // namespace ember
