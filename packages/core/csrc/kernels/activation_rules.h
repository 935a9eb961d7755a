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
  EluResult,
  LeakyRelu,
  Softplus,
  HardtanhResult,
  HardsigmoidResult,
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
void check_hardtanh_range(double lo, double hi);

}  // namespace ember
