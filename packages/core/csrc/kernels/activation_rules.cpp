#include "kernels/activation_rules.h"

#include <utility>

#include "core/error.h"
#include "kernels/iterator.h"

namespace ember {

Act parse_act(const std::string& name) {
  static const std::pair<const char*, Act> table[] = {
      {"gelu", Act::Gelu},
      {"gelu_tanh", Act::GeluTanh},
      {"silu", Act::Silu},
      {"elu", Act::Elu},
      {"elu_result", Act::EluResult},
      {"leaky_relu", Act::LeakyRelu},
      {"softplus", Act::Softplus},
      {"hardtanh_result", Act::HardtanhResult},
      {"hardsigmoid", Act::Hardsigmoid},
      {"hardsigmoid_result", Act::HardsigmoidResult},
      {"hardswish", Act::Hardswish},
      {"mish", Act::Mish},
      {"softsign", Act::Softsign},
      {"logsigmoid", Act::Logsigmoid}};
  for (const auto& [n, act] : table)
    if (name == n) return act;
  EMBER_FAIL(Value, "_activation_derivative: unknown activation '", name, "'");
}

void check_act_order(const std::string& kind, int64_t order) {
  EMBER_CHECK_KIND(order == 1 || order == 2, NotImplemented, "_activation_derivative: ", kind,
                   ": derivatives of order ", order,
                   " are not supported (first and second derivatives are)");
}

void check_floating_input(const Tensor& self, const char* op) {
  EMBER_CHECK_KIND(is_floating(self->dtype()), DtypeNotImplemented, op,
                   ": expected a floating-point input, got ", dtype_name(self->dtype()));
}

bool gelu_tanh_form(const std::string& approximate) {
  EMBER_CHECK_KIND(approximate == "none" || approximate == "tanh", Value,
                   "gelu: approximate must be 'none' or 'tanh', got '", approximate, "'");
  return approximate == "tanh";
}

void check_threshold_backward_dtypes(const Tensor& grad_output, const Tensor& self) {
  EMBER_CHECK_KIND(is_floating(grad_output->dtype()) && is_floating(self->dtype()), Type,
                   "threshold_backward", ": expected floating-point tensors, got ",
                   dtype_name(grad_output->dtype()), " and ", dtype_name(self->dtype()));
}

void check_threshold_scalars(const Tensor& self, const Scalar& threshold, const Scalar& value) {
  const ScalarType dt = self->dtype();
  const bool half = dt == ScalarType::Float16 || dt == ScalarType::BFloat16;
  check_scalar_fits(threshold, half ? ScalarType::Float32 : dt, "threshold");
  check_scalar_fits(value, dt, "threshold");
}

void check_hardtanh_range(double lo, double hi) {
  EMBER_CHECK_KIND(lo <= hi, Value, "hardtanh: min_val (", lo, ") must be <= max_val (", hi, ")");
}

void check_activation_backward_dtypes(const Tensor& grad_output, const Tensor& x, const char* op) {
  EMBER_CHECK_KIND(is_floating(grad_output->dtype()) && is_floating(x->dtype()), Type, op,
                   ": expected floating-point grad_output and input, got ",
                   dtype_name(grad_output->dtype()), " and ", dtype_name(x->dtype()));
}

void check_backward_from_result(const char* op, const char* what, double coefficient) {
  EMBER_CHECK(coefficient >= 0, op, ": the in-place ", what,
              "'s backward (computed from the result) with a negative slope (", coefficient,
              ") is not supported: the input cannot be recovered from the result there; call "
              "the out-of-place ",
              what, " instead");
}

}  // namespace ember
