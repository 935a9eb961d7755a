#include "kernels/optim_rules.h"

namespace ember {
namespace nn {

void check_param_lists(const char* op, const std::vector<Tensor>& params, ParamLists lists,
                       DeviceCheck device_check) {
  for (const auto& [name, list] : lists) {
    EMBER_CHECK(list->size() == params.size(), op, ": expected ", params.size(), " ", name,
                " (one per param), got ", list->size());
    for (size_t i = 0; i < list->size(); ++i) {
      const Tensor& t = (*list)[i];
      EMBER_CHECK(t, op, ": ", name, "[", i, "] is None");
      EMBER_CHECK(t->sizes() == params[i]->sizes(), op, ": ", name, "[", i, "] has shape ",
                  shape_str(t->sizes()), " but params[", i, "] has shape ",
                  shape_str(params[i]->sizes()));
      EMBER_CHECK_KIND(t->dtype() == params[i]->dtype(), Type, op, ": ", name, "[", i,
                       "] has dtype ", dtype_name(t->dtype()), " but params[", i, "] has dtype ",
                       dtype_name(params[i]->dtype()));
      check_device(device_check, params[0], t, op, name);
    }
  }
  for (size_t i = 0; i < params.size(); ++i) {
    EMBER_CHECK_KIND(
        params[i]->dtype() == ScalarType::Float32 || params[i]->dtype() == ScalarType::Float64,
        Type, op, ": params[", i, "] has dtype ", dtype_name(params[i]->dtype()),
        " (supported: float32 and float64)");
    check_device(device_check, params[0], params[i], op, "every param");
  }
  // One kernel instantiation serves the whole list: mixed dtypes would be misread.
  for (size_t i = 1; i < params.size(); ++i)
    EMBER_CHECK_KIND(params[i]->dtype() == params[0]->dtype(), Type, op, ": params[", i,
                     "] has dtype ", dtype_name(params[i]->dtype()), " but params[0] has dtype ",
                     dtype_name(params[0]->dtype()), " (split a group's tensors by dtype)");
}

void check_fused_sgd(const char* op, const std::vector<Tensor>& params,
                     const std::vector<Tensor>& grads,
                     const std::vector<Tensor>& momentum_buffer_list, double momentum,
                     double dampening, bool nesterov, DeviceCheck device_check) {
  if (momentum != 0.0)
    check_param_lists(op, params,
                      {{"grads", &grads}, {"momentum_buffer_list", &momentum_buffer_list}},
                      device_check);
  else
    check_param_lists(op, params, {{"grads", &grads}}, device_check);
  EMBER_CHECK_KIND(!nesterov || (momentum > 0 && dampening == 0), Value, op,
                   ": nesterov momentum requires a momentum and zero dampening");
}

void check_fused_adam(const char* op, const std::vector<Tensor>& params,
                      const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
                      const std::vector<Tensor>& exp_avg_sqs,
                      const std::vector<Tensor>& max_exp_avg_sqs,
                      const std::vector<Tensor>& state_steps, bool amsgrad,
                      DeviceCheck device_check) {
  check_param_lists(op, params,
                    {{"grads", &grads}, {"exp_avgs", &exp_avgs}, {"exp_avg_sqs", &exp_avg_sqs}},
                    device_check);
  if (amsgrad) check_param_lists(op, params, {{"max_exp_avg_sqs", &max_exp_avg_sqs}}, device_check);
  EMBER_CHECK(state_steps.size() == params.size(), op, ": expected ", params.size(),
              " state_steps (one per param), got ", state_steps.size());
}

}  // namespace nn
}  // namespace ember
