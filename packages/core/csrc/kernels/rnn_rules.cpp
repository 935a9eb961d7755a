#include "kernels/rnn_rules.h"

namespace ember {
namespace nn {

void check_rnn_dtypes(const char* op, const std::vector<Tensor>& inputs,
                      RnnDeviceCheck device_check) {
  for (const Tensor& t : inputs) EMBER_CHECK(t, op, ": an input is None");
  const ScalarType dt = inputs[0]->dtype();
  EMBER_CHECK_KIND(dt == ScalarType::Float32 || dt == ScalarType::Float64, Type, op,
                   ": expected float32 or float64 tensors, got ", dtype_name(dt));
  for (const Tensor& t : inputs)
    EMBER_CHECK_KIND(t->dtype() == dt, Type, op, ": all inputs must have dtype ", dtype_name(dt),
                     ", got ", dtype_name(t->dtype()));
  if (device_check) device_check(op, inputs);
}

RnnDims check_lstm_inputs(const char* op, const std::vector<Tensor>& inputs,
                          RnnDeviceCheck device_check) {
  EMBER_CHECK(inputs.size() >= 4 && inputs.size() <= 6, op,
              ": expected inputs [gates_x, h0, c0, w_hh] or [x, h0, c0, w_hh, w_ih(, bias)], got ",
              inputs.size(), " tensors");
  check_rnn_dtypes(op, inputs, device_check);
  const Tensor &gx = inputs[0], &h0 = inputs[1], &c0 = inputs[2], &w = inputs[3];
  int64_t T = 0, B = 0, H = 0;
  if (inputs.size() == 4) {
    EMBER_CHECK(gx->dim() == 3 && gx->size(2) % 4 == 0, op, ": gates_x must be (T, B, 4H), got ",
                shape_str(gx->sizes()));
    T = gx->size(0), B = gx->size(1), H = gx->size(2) / 4;
  } else {
    EMBER_CHECK(w->dim() == 2 && w->size(0) == 4 * w->size(1), op, ": w_hh must be (4H, H), got ",
                shape_str(w->sizes()));
    EMBER_CHECK(gx->dim() == 3, op, ": x must be (T, B, input_size), got ", shape_str(gx->sizes()));
    T = gx->size(0), B = gx->size(1), H = w->size(1);
    const DimVector w_ih{4 * H, gx->size(2)}, bias{4 * H};
    EMBER_CHECK(inputs[4]->sizes() == w_ih, op, ": w_ih must be ", shape_str(w_ih),
                " for x of shape ", shape_str(gx->sizes()), ", got ",
                shape_str(inputs[4]->sizes()));
    if (inputs.size() == 6)
      EMBER_CHECK(inputs[5]->sizes() == bias, op, ": bias must be ", shape_str(bias), ", got ",
                  shape_str(inputs[5]->sizes()));
  }
  const DimVector state{B, H}, weight{4 * H, H};
  EMBER_CHECK(h0->sizes() == state && c0->sizes() == state, op, ": h0 and c0 must be ",
              shape_str(state), " for an input of shape ", shape_str(gx->sizes()), ", got ",
              shape_str(h0->sizes()), " and ", shape_str(c0->sizes()));
  EMBER_CHECK(w->sizes() == weight, op, ": w_hh must be ", shape_str(weight), ", got ",
              shape_str(w->sizes()));
  return {T, B, H};
}

RnnDims check_gru_inputs(const char* op, const std::vector<Tensor>& inputs,
                         RnnDeviceCheck device_check) {
  EMBER_CHECK(inputs.size() == 3 || inputs.size() == 4, op,
              ": expected inputs [gates_x, h0, w_hh] or [gates_x, h0, w_hh, b_hh], got ",
              inputs.size(), " tensors");
  check_rnn_dtypes(op, inputs, device_check);
  const Tensor &gx = inputs[0], &h0 = inputs[1], &w = inputs[2];
  EMBER_CHECK(gx->dim() == 3 && gx->size(2) % 3 == 0, op, ": gates_x must be (T, B, 3H), got ",
              shape_str(gx->sizes()));
  const int64_t T = gx->size(0), B = gx->size(1), H = gx->size(2) / 3;
  const DimVector state{B, H}, weight{3 * H, H}, bias{3 * H};
  EMBER_CHECK(h0->sizes() == state, op, ": h0 must be ", shape_str(state), " for gates_x of shape ",
              shape_str(gx->sizes()), ", got ", shape_str(h0->sizes()));
  EMBER_CHECK(w->sizes() == weight, op, ": w_hh must be ", shape_str(weight), ", got ",
              shape_str(w->sizes()));
  if (inputs.size() == 4)
    EMBER_CHECK(inputs[3]->sizes() == bias, op, ": b_hh must be ", shape_str(bias), ", got ",
                shape_str(inputs[3]->sizes()));
  return {T, B, H};
}

RnnDims check_rnn_backward(const char* op, const char* forward, const Tensor& output,
                           const Tensor& workspace, const std::vector<Tensor>& states,
                           const Tensor& w_hh, const Tensor& grad_output,
                           const std::vector<Tensor>& grad_states, int64_t gates, int64_t ws_parts,
                           RnnDeviceCheck device_check) {
  EMBER_CHECK(output && workspace && output->dim() == 3, op,
              ": expected the (T, B, H) output and the workspace of ", forward);
  const int64_t T = output->size(0), B = output->size(1), H = output->size(2);
  std::vector<Tensor> all{output};
  all.insert(all.end(), states.begin(), states.end());
  all.push_back(w_hh);
  check_rnn_dtypes(op, all, device_check);
  const DimVector gx{T, B, gates * H}, state{B, H}, weight{gates * H, H};
  if (states.size() == 2) {
    EMBER_CHECK(states[0]->sizes() == state && states[1]->sizes() == state, op,
                ": h0 and c0 must be ", shape_str(state), " for an input of shape ", shape_str(gx),
                ", got ", shape_str(states[0]->sizes()), " and ", shape_str(states[1]->sizes()));
  } else {
    EMBER_CHECK(states[0]->sizes() == state, op, ": h0 must be ", shape_str(state),
                " for gates_x of shape ", shape_str(gx), ", got ", shape_str(states[0]->sizes()));
  }
  EMBER_CHECK(w_hh->sizes() == weight, op, ": w_hh must be ", shape_str(weight), ", got ",
              shape_str(w_hh->sizes()));
  const DimVector out_shape{T, B, H}, ws_shape{T, B, ws_parts * H};
  bool ok = grad_output && grad_output->sizes() == out_shape && workspace->sizes() == ws_shape;
  for (const Tensor& g : grad_states) ok = ok && g && g->sizes() == state;
  EMBER_CHECK(ok, op, ": gradient or workspace shapes don't match an output of shape ",
              shape_str(out_shape));
  return {T, B, H};
}

void check_rnn_input_backward(const char* op, const Tensor& grad, const Tensor& input,
                              const Tensor& weight, RnnDeviceCheck device_check) {
  check_rnn_dtypes(op, {grad, input, weight}, device_check);
  EMBER_CHECK(grad->dim() == 2 && input->dim() == 2 && weight->dim() == 2 &&
                  grad->size(0) == input->size(0) && grad->size(1) == weight->size(0) &&
                  input->size(1) == weight->size(1),
              op, ": expected grad (N, G), input (N, I) and weight (G, I), got ",
              shape_str(grad->sizes()), ", ", shape_str(input->sizes()), " and ",
              shape_str(weight->sizes()));
}

}  // namespace nn
}  // namespace ember
