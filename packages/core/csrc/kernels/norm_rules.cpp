#include "kernels/norm_rules.h"

namespace ember {
namespace nn {

std::pair<int64_t, int64_t> row_norm_shape(const char* op, const Tensor& input,
                                           const DimVector& normalized_shape, const Tensor& weight,
                                           const Tensor& bias, DeviceCheck device_check) {
  check_floating_input(op, input);
  const int64_t k = normalized_shape.size(), d = input->dim();
  bool ok = k >= 1 && k <= d;
  for (int64_t i = 0; ok && i < k; ++i) ok = input->size(d - k + i) == normalized_shape[i];
  EMBER_CHECK(ok, op, ": expected an input whose trailing dims are ", shape_str(normalized_shape),
              " (normalized_shape), got input of shape ", shape_str(input->sizes()));
  for (const Tensor* p : {&weight, &bias})
    if (*p) {
      EMBER_CHECK((*p)->sizes() == normalized_shape, op, ": expected ",
                  p == &weight ? "weight" : "bias", " of shape ", shape_str(normalized_shape),
                  ", got ", shape_str((*p)->sizes()));
      check_device(device_check, input, *p, op, p == &weight ? "weight" : "bias");
    }
  const int64_t cols = prod(normalized_shape);
  return {cols == 0 ? 0 : input->numel() / cols, cols};
}

void check_norm_param_dtypes(const char* op, const Tensor& input,
                             std::initializer_list<NormParam> params) {
  const ScalarType in = input->dtype();
  const bool reduced = in == ScalarType::Float16 || in == ScalarType::BFloat16;
  const NormParam* first = nullptr;
  for (const NormParam& p : params) {
    if (!*p.tensor) continue;
    const ScalarType dt = (*p.tensor)->dtype();
    if (!reduced) {
      EMBER_CHECK(dt == in, op, ": expected ", p.name, " to have the input's dtype ",
                  dtype_name(in), ", but got ", dtype_name(dt),
                  " (mixed dtypes: convert the parameters or the input first)");
      continue;
    }
    EMBER_CHECK(dt == in || dt == ScalarType::Float32, op, ": expected ", p.name,
                " to have dtype float32 or the input's ", dtype_name(in), ", but got ",
                dtype_name(dt));
    if (!first) {
      first = &p;
    } else {
      const ScalarType want = (*first->tensor)->dtype();
      EMBER_CHECK(dt == want, op, ": expected ", p.name, " to have the same dtype as ", first->name,
                  " (", dtype_name(want), "; a ", dtype_name(in),
                  " input takes parameters all float32 or all ", dtype_name(in), "), but got ",
                  dtype_name(dt));
    }
  }
}

DimVector row_stat_shape(const Tensor& input, int64_t k) {
  DimVector s;
  for (int64_t i = 0; i < input->dim(); ++i) s.push_back(i < input->dim() - k ? input->size(i) : 1);
  return s;
}

ScalarType norm_stat_dtype(const Tensor& input, std::initializer_list<const Tensor*> params,
                           bool always_float) {
  const ScalarType dt = input->dtype();
  if (dt != ScalarType::Float16 && dt != ScalarType::BFloat16) return dt;
  if (always_float) return ScalarType::Float32;
  for (const Tensor* p : params)
    if (*p && (*p)->dtype() == ScalarType::Float32) return ScalarType::Float32;
  return dt;
}

ScalarType norm_acc_dtype(const Tensor& input) {
  return input->dtype() == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
}

void check_norm_grad(const char* op, const Tensor& grad_out, const Tensor& input) {
  EMBER_CHECK(grad_out->sizes() == input->sizes(), op, ": grad_out of shape ",
              shape_str(grad_out->sizes()), " doesn't match input of shape ",
              shape_str(input->sizes()));
}

void check_row_norm_backward(const char* op, const Tensor& grad, const Tensor& input,
                             const Tensor& mean, const Tensor& rstd, int64_t R,
                             DeviceCheck device_check) {
  check_norm_grad(op, grad, input);
  EMBER_CHECK(rstd->numel() == R && (!mean || mean->numel() == R), op,
              ": expected mean and rstd with ", R, " elements, got ", shape_str(rstd->sizes()));
  check_device(device_check, input, grad, op, "grad_out");
  check_device(device_check, input, mean, op, "mean");
  check_device(device_check, input, rstd, op, "rstd");
}

GroupShape group_norm_shape(const char* op, const Tensor& input, int64_t num_groups,
                            const Tensor& weight, const Tensor& bias, DeviceCheck device_check) {
  check_floating_input(op, input);
  EMBER_CHECK(input->dim() >= 2, op, ": expected an input of shape (N, C, *), got ",
              shape_str(input->sizes()));
  check_norm_param_dtypes(op, input, {{&weight, "weight"}, {&bias, "bias"}});
  GroupShape s{input->size(0), input->size(1), num_groups, 1};
  for (int64_t d = 2; d < input->dim(); ++d) s.hw *= input->size(d);
  EMBER_CHECK_KIND(num_groups > 0 && s.c % num_groups == 0, Runtime, op,
                   ": expected the number of channels (", s.c, ") to be divisible by num_groups (",
                   num_groups, "), input shape ", shape_str(input->sizes()));
  for (const Tensor* p : {&weight, &bias})
    if (*p) {
      EMBER_CHECK((*p)->dim() == 1 && (*p)->size(0) == s.c, op, ": expected ",
                  p == &weight ? "weight" : "bias", " of shape (", s.c, ",), got ",
                  shape_str((*p)->sizes()));
      check_device(device_check, input, *p, op, p == &weight ? "weight" : "bias");
    }
  return s;
}

void check_group_norm_backward(const char* op, const Tensor& grad_out, const Tensor& input,
                               const GroupShape& s, const Tensor& mean, const Tensor& rstd) {
  check_norm_grad(op, grad_out, input);
  const int64_t rows = s.n * s.g;
  for (const Tensor* p : {&mean, &rstd})
    EMBER_CHECK(*p && (*p)->numel() == rows, op, ": expected ", p == &mean ? "mean" : "rstd",
                " with N * num_groups = ", rows, " elements (input of shape ",
                shape_str(input->sizes()), ", ", s.g, " groups), got ",
                *p ? shape_str((*p)->sizes()) : std::string("None"));
}

void check_batch_norm_backward(const char* op, const Tensor& grad_out, const Tensor& input,
                               const Tensor& weight, const Tensor& save_mean,
                               const Tensor& save_invstd) {
  check_floating_input(op, input);
  EMBER_CHECK(input->dim() >= 2, op, ": expected an input of shape (N, C, *), got ",
              shape_str(input->sizes()));
  check_norm_grad(op, grad_out, input);
  const int64_t C = input->size(1);
  for (const Tensor* p : {&weight, &save_mean, &save_invstd}) {
    if (p == &weight && !*p) continue;
    const char* what = p == &weight ? "weight" : p == &save_mean ? "save_mean" : "save_invstd";
    EMBER_CHECK(*p && (*p)->numel() == C, op, ": expected ", what, " with C = ", C,
                " elements (input of shape ", shape_str(input->sizes()), "), got ",
                *p ? shape_str((*p)->sizes()) : std::string("None"));
  }
}

BatchShape batch_norm_shape(const char* op, const Tensor& input, const Tensor& weight,
                            const Tensor& bias, const Tensor& running_mean,
                            const Tensor& running_var, bool training, DeviceCheck device_check) {
  check_floating_input(op, input);
  EMBER_CHECK(input->dim() >= 2, op, ": expected an input of shape (N, C, *), got ",
              shape_str(input->sizes()));
  check_norm_param_dtypes(op, input,
                          {{&weight, "weight"},
                           {&bias, "bias"},
                           {&running_mean, "running_mean"},
                           {&running_var, "running_var"}});
  BatchShape s{input->size(0), input->size(1), 1, 0};
  for (int64_t d = 2; d < input->dim(); ++d) s.HW *= input->size(d);
  for (const Tensor* p : {&weight, &bias, &running_mean, &running_var})
    if (*p) {
      const char* what = p == &weight         ? "weight"
                         : p == &bias         ? "bias"
                         : p == &running_mean ? "running_mean"
                                              : "running_var";
      EMBER_CHECK((*p)->numel() == s.C && (*p)->dim() == 1, op, ": expected ", what, " of shape (",
                  s.C, ",), got ", shape_str((*p)->sizes()));
      check_device(device_check, input, *p, op, what);
    }
  s.count = s.N * s.HW;
  if (training)
    EMBER_CHECK_KIND(s.count > 1, Value, op,
                     ": expected more than 1 value per channel when training, got input of shape ",
                     shape_str(input->sizes()));
  else
    EMBER_CHECK(running_mean && running_var, op,
                ": running_mean and running_var are required in eval mode (training=False)");
  return s;
}

}  // namespace nn
}  // namespace ember
