// Device-neutral rules of nll_loss and the fused cross entropy (ops/nn.yaml), shared by the CPU
// kernels (kernels/cpu/nn_loss.cpp) and the CUDA ones (cuda/nn_loss.cu).
#pragma once
#include "core/tensor.h"
#include "kernels/nn_rules.h"

namespace ember {
namespace nn {

// self (C), (N, C) or (N, C, d1, ...) seen as (N, C, S); target (N, S) of class indices.
struct NllShape {
  int64_t n = 1, c = 1, s = 1;
};

// Checks the log-probabilities self, the class indices target and the class weights.
NllShape check_nll(const Tensor& self, const Tensor& target, const Tensor& weight,
                   const char* op = "nll_loss");

inline void check_label_smoothing(const char* op, double label_smoothing) {
  EMBER_CHECK_KIND(label_smoothing >= 0.0 && label_smoothing <= 1.0, Value, op,
                   ": label_smoothing must be between 0.0 and 1.0, got ", label_smoothing);
}

// A loss backward's grad_output g: the loss shape (target's) for 'none', else one element.
void check_loss_grad_output(const char* op, const Tensor& g, const Tensor& target, Reduction red);

// cross_entropy_backward's saved lse: one per sample.
inline void check_ce_lse(const char* op, const Tensor& lse, const Tensor& target) {
  EMBER_CHECK(lse->sizes() == target->sizes(), op, ": expected lse of the target's shape ",
              shape_str(target->sizes()), " (one per sample), got ", shape_str(lse->sizes()));
}

// The lse output holds opmath values: float32 for the 16-bit floats.
inline ScalarType ce_lse_dtype(ScalarType dt) {
  return dt == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
}

}  // namespace nn
}  // namespace ember
