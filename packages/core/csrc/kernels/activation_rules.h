// Device-neutral argument checks of the activation ops (ops/nn.yaml) and the activations that
// _activation_derivative knows, shared by the CPU and CUDA kernels.
#pragma once
#include <string>

#include "core/tensor.h"

namespace ember {

enum class Act {
  Gelu,
  GeluTanh,
  Silu,
  Elu,        // elu's derivative from its input (p0 alpha, p1 scale, p2 input_scale) ...
  EluResult,  // ... and from its result
  LeakyRelu,
  Softplus,
  HardtanhResult,
  Hardsigmoid,        // from the input ...
  HardsigmoidResult,  // ... and from the result
  Hardswish,
  Mish,
  Softsign,
  Logsigmoid
};

// _activation_derivative's kind (by name) ...
Act parse_act(const std::string& name);
// ... and its order (1 or 2).
void check_act_order(const std::string& kind, int64_t order);

void check_floating_input(const Tensor& self, const char* op);
// gelu: whether the tanh approximation is asked for.
bool gelu_tanh_form(const std::string& approximate);
void check_threshold_backward_dtypes(const Tensor& grad_output, const Tensor& self);
// threshold's numbers, checked as PyTorch's: value must fit the input's dtype and threshold the
// dtype it is compared in (float32 for 16-bit floats), so value = -2 into uint8 is refused rather
// than written as 254, and 1e6 into float16 rather than as inf.
void check_threshold_scalars(const Tensor& self, const Scalar& threshold, const Scalar& value);
void check_hardtanh_range(double lo, double hi);
// The fused backwards (gelu_backward, elu_backward, ...): floating grad_output and input.
void check_activation_backward_dtypes(const Tensor& grad_output, const Tensor& x, const char* op);
// elu_backward / leaky_relu_backward from the result (the in-place forms' backward): the input
// cannot be told from the result when the negative part's coefficient (alpha, negative_slope)
// is negative, so that is refused (RuntimeError, as PyTorch's) ...
void check_backward_from_result(const char* op, const char* what, double coefficient);

}  // namespace ember
