// Device-neutral checks of the fused optimizer updates (_fused_sgd_, _fused_adam(w)_), shared by
// the CPU kernels (kernels/cpu/nn_misc.cpp) and the CUDA ones (cuda/fused_optim.cu).
#pragma once
#include <initializer_list>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "kernels/nn_rules.h"

namespace ember {
namespace nn {

// Named tensor lists that go with params, one tensor per param.
using ParamLists = std::initializer_list<std::pair<const char*, const std::vector<Tensor>*>>;

// Every list has one tensor per param, of its shape and dtype (and device); params are float32
// or float64, all of one dtype (one kernel instantiation serves the whole list).
void check_param_lists(const char* op, const std::vector<Tensor>& params, ParamLists lists,
                       DeviceCheck device_check = nullptr);

// _fused_sgd_'s lists (momentum buffers only with a momentum) and nesterov's requirements.
void check_fused_sgd(const char* op, const std::vector<Tensor>& params,
                     const std::vector<Tensor>& grads,
                     const std::vector<Tensor>& momentum_buffer_list, double momentum,
                     double dampening, bool nesterov, DeviceCheck device_check = nullptr);

// _fused_adam(w)_'s lists (max_exp_avg_sqs only with amsgrad) and one state_step per param,
// each a one-element tensor (check_state_step checks one).
void check_fused_adam(const char* op, const std::vector<Tensor>& params,
                      const std::vector<Tensor>& grads, const std::vector<Tensor>& exp_avgs,
                      const std::vector<Tensor>& exp_avg_sqs,
                      const std::vector<Tensor>& max_exp_avg_sqs,
                      const std::vector<Tensor>& state_steps, bool amsgrad,
                      DeviceCheck device_check = nullptr);
inline void check_state_step(const char* op, const Tensor& s, size_t i) {
  EMBER_CHECK(s && s->numel() == 1, op, ": state_steps[", i, "] must be a one-element tensor, got ",
              s ? shape_str(s->sizes()) : "None");
}

}  // namespace nn
}  // namespace ember
