// Device-neutral checks of the fused recurrent layers (_lstm_layer, _gru_layer, their backwards
// and _rnn_input_backward in ops/nn.yaml), shared by the CPU kernels (kernels/cpu/nn_rnn.cpp) and
// the CUDA ones (cuda/nn_rnn.cu): inputs present, one float dtype, shapes, and the (T, B, H) of
// the run. A CUDA kernel passes its device check as `device_check`; it runs right after the dtype
// checks, before any shape check.
#pragma once
#include <vector>

#include "core/tensor.h"

namespace ember {
namespace nn {

// Steps, batch and hidden size of one layer run.
struct RnnDims {
  int64_t T, B, H;
};

// Checks that all of an op's inputs share one device (the first input's); called with the inputs
// once they are known to be present.
using RnnDeviceCheck = void (*)(const char* op, const std::vector<Tensor>& inputs);

// No input is None, all share one float dtype (that of inputs[0]), then device_check if given.
void check_rnn_dtypes(const char* op, const std::vector<Tensor>& inputs,
                      RnnDeviceCheck device_check = nullptr);

// _lstm_layer: inputs = [gates_x (T, B, 4H), h0, c0, w_hh], or [x (T, B, I), h0, c0, w_hh,
// w_ih (4H, I)] with optionally the summed biases (4H) last (the op then makes
// gates_x = x @ w_ih^T + bias itself).
RnnDims check_lstm_inputs(const char* op, const std::vector<Tensor>& inputs,
                          RnnDeviceCheck device_check = nullptr);

// _gru_layer: inputs = [gates_x (T, B, 3H), h0, w_hh] or [gates_x, h0, w_hh, b_hh].
RnnDims check_gru_inputs(const char* op, const std::vector<Tensor>& inputs,
                         RnnDeviceCheck device_check = nullptr);

// _lstm_layer_backward / _gru_layer_backward: `output` (T, B, H) and `workspace` (T, B,
// ws_parts * H) of the forward op `forward`, its states ([h0, c0] or [h0]) and w_hh
// (gates * H, H), and the gradients of the output and of the last states ([grad_hn, grad_cn] or
// [grad_hn]). The states and w_hh get the checks of the forward on a gates_x of shape
// (T, B, gates * H).
RnnDims check_rnn_backward(const char* op, const char* forward, const Tensor& output,
                           const Tensor& workspace, const std::vector<Tensor>& states,
                           const Tensor& w_hh, const Tensor& grad_output,
                           const std::vector<Tensor>& grad_states, int64_t gates, int64_t ws_parts,
                           RnnDeviceCheck device_check = nullptr);

// _rnn_input_backward: grad (N, G), input (N, I) and weight (G, I) of one float dtype.
void check_rnn_input_backward(const char* op, const Tensor& grad, const Tensor& input,
                              const Tensor& weight, RnnDeviceCheck device_check = nullptr);

}  // namespace nn
}  // namespace ember
