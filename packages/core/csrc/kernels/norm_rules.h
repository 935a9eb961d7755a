// Device-neutral rules of the layer / RMS / group / batch norm kernels (ops/nn.yaml), shared by
// the CPU kernels (kernels/cpu/nn_norm.cpp) and the CUDA ones (cuda/nn_norm.cu): shape checks,
// statistics' shapes, and the layer / RMS norm ops over a device's row-norm core.
#pragma once
#include <initializer_list>
#include <tuple>
#include <utility>

#include "core/tensor.h"
#include "kernels/nn_rules.h"

namespace ember {
namespace nn {

// Rows x cols of a layer/RMS norm; checks the input's dtype and trailing dims and the affine
// parameters.
std::pair<int64_t, int64_t> row_norm_shape(const char* op, const Tensor& input,
                                           const DimVector& normalized_shape, const Tensor& weight,
                                           const Tensor& bias, DeviceCheck device_check = nullptr);

// torch's rule for a norm's parameters (weight, bias, running stats; null ones skipped): all of
// the input's dtype, or for a float16 / bfloat16 input all of one dtype, the input's or float32
// (the mixed case). Anything else is refused (torch: "mixed dtype"), not silently converted.
struct NormParam {
  const Tensor* tensor;
  const char* name;
};
void check_norm_param_dtypes(const char* op, const Tensor& input,
                             std::initializer_list<NormParam> params);

// The mean / rstd shape of a layer/RMS norm over the last k dims (those become 1).
DimVector row_stat_shape(const Tensor& input, int64_t k);

// The dtype of a norm's saved statistics (mean / rstd / invstd), torch's rule: float32 for a
// float16 / bfloat16 input when always_float (RMS norm) or when one of the given parameters
// (weight, bias, running statistics; null ones skipped) is float32 (mixed precision); otherwise
// the input's dtype.
ScalarType norm_stat_dtype(const Tensor& input, std::initializer_list<const Tensor*> params,
                           bool always_float = false);

// The dtype the kernels keep statistics in while they work: float64 for a float64 input, else
// float32 (float16 / bfloat16 statistics are rounded from it only when norm_stat_dtype says so).
ScalarType norm_acc_dtype(const Tensor& input);

// The backward's grad_out has the input's shape.
void check_norm_grad(const char* op, const Tensor& grad_out, const Tensor& input);

// row_norm_backward: grad_out and the saved statistics (R rows) fit the input.
void check_row_norm_backward(const char* op, const Tensor& grad, const Tensor& input,
                             const Tensor& mean, const Tensor& rstd, int64_t R,
                             DeviceCheck device_check = nullptr);

// Group norm's input (N, C, *) seen as n samples of c channels in g groups of hw elements each.
struct GroupShape {
  int64_t n, c, g, hw;
};
GroupShape group_norm_shape(const char* op, const Tensor& input, int64_t num_groups,
                            const Tensor& weight, const Tensor& bias,
                            DeviceCheck device_check = nullptr);

// Group norm backward: grad_out fits the input and the saved mean / rstd hold n * g values.
void check_group_norm_backward(const char* op, const Tensor& grad_out, const Tensor& input,
                               const GroupShape& s, const Tensor& mean, const Tensor& rstd);

// Batch norm backward: the input is (N, C, *), grad_out fits it, and weight (when given),
// save_mean and save_invstd hold C values each.
void check_batch_norm_backward(const char* op, const Tensor& grad_out, const Tensor& input,
                               const Tensor& weight, const Tensor& save_mean,
                               const Tensor& save_invstd);

// Batch norm's input (N, C, *): C channels of count = N * HW values.
struct BatchShape {
  int64_t N, C, HW, count;
};
BatchShape batch_norm_shape(const char* op, const Tensor& input, const Tensor& weight,
                            const Tensor& bias, const Tensor& running_mean,
                            const Tensor& running_var, bool training,
                            DeviceCheck device_check = nullptr);

// The layer / RMS norm ops, the same on every device around its row norm core.
using RowNormForward = std::tuple<Tensor, Tensor, Tensor> (*)(const char* op, const Tensor& input,
                                                              const DimVector& normalized_shape,
                                                              const Tensor& weight,
                                                              const Tensor& bias, double eps,
                                                              bool center);
using RowNormBackward = std::tuple<Tensor, Tensor, Tensor> (*)(
    const char* op, const Tensor& grad, const Tensor& input, const DimVector& normalized_shape,
    const Tensor& mean, const Tensor& rstd, const Tensor& weight, bool input_grad, bool weight_grad,
    bool bias_grad);

template <RowNormForward Forward, RowNormBackward Backward>
struct RowNormOps {
  static std::tuple<Tensor, Tensor, Tensor> layer_norm(const Tensor& input,
                                                       const DimVector& normalized_shape,
                                                       const Tensor& weight, const Tensor& bias,
                                                       double eps) {
    return Forward("layer_norm", input, normalized_shape, weight, bias, eps, true);
  }
  static std::tuple<Tensor, Tensor, Tensor> layer_norm_backward(
      const Tensor& grad_out, const Tensor& input, const DimVector& normalized_shape,
      const Tensor& mean, const Tensor& rstd, const Tensor& weight, bool input_grad,
      bool weight_grad, bool bias_grad) {
    return Backward("layer_norm_backward", grad_out, input, normalized_shape, mean, rstd, weight,
                    input_grad, weight_grad, bias_grad);
  }
  static std::tuple<Tensor, Tensor> rms_norm(const Tensor& input, const DimVector& normalized_shape,
                                             const Tensor& weight, double eps) {
    auto r = Forward("rms_norm", input, normalized_shape, weight, Tensor(), eps, false);
    return {std::get<0>(r), std::get<2>(r)};
  }
  static std::tuple<Tensor, Tensor> rms_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                      const DimVector& normalized_shape,
                                                      const Tensor& rstd, const Tensor& weight,
                                                      bool input_grad, bool weight_grad) {
    auto r = Backward("rms_norm_backward", grad_out, input, normalized_shape, Tensor(), rstd,
                      weight, input_grad, weight_grad, false);
    return {std::get<0>(r), std::get<1>(r)};
  }
};

}  // namespace nn
}  // namespace ember
