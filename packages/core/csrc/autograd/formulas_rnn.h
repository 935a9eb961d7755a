// Derivatives of the fused recurrent layers (_lstm_layer, _gru_layer). Included by formulas.h.
//
// A plain backward runs the fused kernel (_lstm_layer_backward, _gru_layer_backward, and
// _rnn_input_backward for an LSTM layer that made its own input projection). When the
// backward itself must be differentiable (create_graph, or forward-over-reverse), the gradients
// are instead written with ops:: over activations recomputed from the inputs, so every order of
// derivative follows from those ops' own formulas.
//
// LSTM, with gates a = gates_x_t + h_{t-1} w^T, i, f, o = sigmoid and g = tanh of its four
// blocks, c_t = f c_{t-1} + i g and h_t = o tanh(c_t):
//   dc_t = dc_{t+1} f_{t+1} + dh_t o (1 - tanh(c_t)^2),   dh_t = dout_t + da_{t+1} w
//   da = [dc g i (1 - i), dc c_{t-1} f (1 - f), dc i (1 - g^2), dh tanh(c) o (1 - o)]
//   dw = sum_t da_t^T h_{t-1},   dgates_x_t = da_t.
//
// GRU, with x = gates_x_t and a = h_{t-1} w^T + b in blocks r, z, n: r = sigmoid(x_r + a_r),
// z = sigmoid(x_z + a_z), n = tanh(x_n + r a_n), h_t = n + z (h_{t-1} - n):
//   dn = dh (1 - z) (1 - n^2),  dr = dn a_n r (1 - r),  dz = dh (h_{t-1} - n) z (1 - z)
//   dgates_x_t = [dr, dz, dn],  da_t = [dr, dz, dn r],  dh_{t-1} = dh z + da_t w + dout_{t-1}
//   dw = sum_t da_t^T h_{t-1},  db = sum_t (da_t summed over the batch).
#pragma once
#include <vector>

#include "autograd/autograd.h"
#include "autograd/forward_ad.h"
#include "ops.h"

namespace ember {
namespace autograd {
namespace formulas {

namespace rnn_detail {

inline Tensor sigmoid(const Tensor& a) { return ops::sigmoid(a, Tensor()); }
inline Tensor tanh(const Tensor& a) { return ops::tanh(a, Tensor()); }
inline Tensor plus(const Tensor& a, const Tensor& b) {
  return ops::add(a, TensorOrScalar(b), Scalar(int64_t(1)), Tensor());
}
inline Tensor minus(const Tensor& a, const Tensor& b) {
  return ops::sub(a, TensorOrScalar(b), Scalar(int64_t(1)), Tensor());
}
inline Tensor times(const Tensor& a, const Tensor& b) {
  return ops::mul(a, TensorOrScalar(b), Tensor());
}
inline Tensor one_minus_t(const Tensor& a) {
  return ops::rsub(a, TensorOrScalar(Scalar(int64_t(1))), Scalar(int64_t(1)));
}

// The LSTM layer's gradients written with differentiable ops (see the top of this file).
inline std::vector<Tensor> lstm_composite_grads(const std::vector<Tensor>& grads,
                                                const std::vector<Tensor>& inputs, bool reverse) {
  const Tensor &gx = inputs[0], &h0 = inputs[1], &c0 = inputs[2], &w = inputs[3];
  const int64_t T = gx->size(0);
  struct Step {
    Tensor i, f, g, o, c_prev, tc, h_prev;
  };
  std::vector<Step> steps(T);
  Tensor h = h0, c = c0;
  const Tensor wt = ops::t(w);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    std::vector<Tensor> a = ops::chunk(plus(ops::select(gx, 0, t), ops::mm(h, wt)), 4, 1);
    Step& st = steps[t];
    st.i = sigmoid(a[0]);
    st.f = sigmoid(a[1]);
    st.g = tanh(a[2]);
    st.o = sigmoid(a[3]);
    st.c_prev = c;
    st.h_prev = h;
    c = plus(times(st.f, c), times(st.i, st.g));
    st.tc = tanh(c);
    h = times(st.o, st.tc);
  }
  Tensor dh = grads[1], dc = grads[2], dw;
  std::vector<Tensor> dgx(T);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? s : T - 1 - s;
    const Step& st = steps[t];
    Tensor h_grad = plus(dh, ops::select(grads[0], 0, t));
    Tensor c_grad = plus(dc, times(times(h_grad, st.o), one_minus_t(times(st.tc, st.tc))));
    Tensor da = ops::cat({times(times(c_grad, st.g), times(st.i, one_minus_t(st.i))),
                          times(times(c_grad, st.c_prev), times(st.f, one_minus_t(st.f))),
                          times(times(c_grad, st.i), one_minus_t(times(st.g, st.g))),
                          times(times(h_grad, st.tc), times(st.o, one_minus_t(st.o)))},
                         1, Tensor());
    dgx[t] = da;
    Tensor dw_t = ops::mm(ops::t(da), st.h_prev);
    dw = dw ? plus(dw, dw_t) : dw_t;
    dh = ops::mm(da, w);
    dc = times(c_grad, st.f);
  }
  if (T == 0) dw = ops::zeros_like(w, std::nullopt, std::nullopt);
  Tensor dgates =
      T ? ops::stack(dgx, 0, Tensor()) : ops::zeros_like(gx, std::nullopt, std::nullopt);
  return {dgates, dh, dc, dw};
}

// The GRU layer's gradients written with differentiable ops (see the top of this file);
// inputs = [gates_x, h0, w_hh] or [gates_x, h0, w_hh, b_hh], one gradient for each.
inline std::vector<Tensor> gru_composite_grads(const std::vector<Tensor>& grads,
                                               const std::vector<Tensor>& inputs, bool reverse) {
  const Tensor &gx = inputs[0], &h0 = inputs[1], &w = inputs[2];
  const bool has_bias = inputs.size() == 4;
  const int64_t T = gx->size(0);
  struct Step {
    Tensor r, z, n, a_n, h_prev;
  };
  std::vector<Step> steps(T);
  Tensor h = h0;
  const Tensor wt = ops::t(w);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    Tensor a = has_bias ? ops::addmm(inputs[3], h, wt, Scalar(int64_t(1)), Scalar(int64_t(1)))
                        : ops::mm(h, wt);
    std::vector<Tensor> ah = ops::chunk(a, 3, 1), ax = ops::chunk(ops::select(gx, 0, t), 3, 1);
    Step& st = steps[t];
    st.r = sigmoid(plus(ax[0], ah[0]));
    st.z = sigmoid(plus(ax[1], ah[1]));
    st.a_n = ah[2];
    st.n = tanh(plus(ax[2], times(st.r, ah[2])));
    st.h_prev = h;
    h = plus(st.n, times(st.z, minus(h, st.n)));
  }
  Tensor dh = grads[1], dw, db;
  std::vector<Tensor> dgx(T);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? s : T - 1 - s;
    const Step& st = steps[t];
    Tensor h_grad = plus(dh, ops::select(grads[0], 0, t));
    Tensor dn = times(times(h_grad, one_minus_t(st.z)), one_minus_t(times(st.n, st.n)));
    Tensor dr = times(times(dn, st.a_n), times(st.r, one_minus_t(st.r)));
    Tensor dz = times(times(h_grad, minus(st.h_prev, st.n)), times(st.z, one_minus_t(st.z)));
    dgx[t] = ops::cat({dr, dz, dn}, 1, Tensor());
    Tensor da = ops::cat({dr, dz, times(dn, st.r)}, 1, Tensor());
    Tensor dw_t = ops::mm(ops::t(da), st.h_prev);
    dw = dw ? plus(dw, dw_t) : dw_t;
    if (has_bias) {
      Tensor db_t = ops::sum(da, DimVector{0}, false, std::nullopt);
      db = db ? plus(db, db_t) : db_t;
    }
    dh = plus(times(h_grad, st.z), ops::mm(da, w));
  }
  if (T == 0) {
    dw = ops::zeros_like(w, std::nullopt, std::nullopt);
    if (has_bias) db = ops::zeros_like(inputs[3], std::nullopt, std::nullopt);
  }
  Tensor dgates =
      T ? ops::stack(dgx, 0, Tensor()) : ops::zeros_like(gx, std::nullopt, std::nullopt);
  if (has_bias) return {dgates, dh, dw, db};
  return {dgates, dh, dw};
}

// Whether the gradients must come from the composite: some gradient or input requires grad
// with grad mode on, or carries a tangent (forward-over-reverse).
inline bool backward_differentiable(const std::vector<Tensor>& grads,
                                    const std::vector<Tensor>& inputs) {
  if (grad_enabled()) {
    for (const Tensor& t : grads)
      if (requires_grad(t)) return true;
    for (const Tensor& t : inputs)
      if (requires_grad(t)) return true;
  }
  return forward_ad::maybe_active() && forward_ad::wants({}, {&grads, &inputs});
}

}  // namespace rnn_detail

// Gradients of _lstm_layer for inputs [gates_x, h0, c0, w_hh] or [x, h0, c0, w_hh, w_ih(, bias)],
// from the gradients of (output, hn, cn); `output` and `workspace` are the saved forward results.
inline std::vector<Tensor> lstm_layer_grads(const std::vector<Tensor>& grads,
                                            const std::vector<Tensor>& inputs, const Tensor& output,
                                            const Tensor& workspace, bool reverse) {
  const bool projects = inputs.size() > 4;  // the op made gates_x = x @ w_ih^T + bias
  if (rnn_detail::backward_differentiable(grads, inputs)) {
    if (!projects) return rnn_detail::lstm_composite_grads(grads, inputs, reverse);
    const Tensor &x = inputs[0], &w_ih = inputs[4];
    const int64_t T = x->size(0), B = x->size(1), I = x->size(2), G = w_ih->size(0);
    const Tensor x2 = ops::reshape(x, {T * B, I});
    Tensor gates = ops::mm(x2, ops::t(w_ih));
    if (inputs.size() == 6) gates = rnn_detail::plus(gates, inputs[5]);
    std::vector<Tensor> g = rnn_detail::lstm_composite_grads(
        grads, {ops::reshape(gates, {T, B, G}), inputs[1], inputs[2], inputs[3]}, reverse);
    const Tensor dg = ops::reshape(g[0], {T * B, G});
    g[0] = ops::reshape(ops::mm(dg, w_ih), {T, B, I});
    g.push_back(ops::mm(ops::t(dg), x2));
    if (inputs.size() == 6) g.push_back(ops::sum(dg, DimVector{0}, false, std::nullopt));
    return g;
  }
  auto r = ops::_lstm_layer_backward(grads[0], grads[1], grads[2], inputs[1], inputs[2], inputs[3],
                                     output, workspace, reverse);
  std::vector<Tensor> g{std::get<0>(r), std::get<1>(r), std::get<2>(r), std::get<3>(r)};
  if (!projects) return g;
  const Tensor &x = inputs[0], &w_ih = inputs[4];
  const int64_t T = x->size(0), B = x->size(1), I = x->size(2), G = w_ih->size(0);
  auto p =
      ops::_rnn_input_backward(ops::reshape(g[0], {T * B, G}), ops::reshape(x, {T * B, I}), w_ih);
  g[0] = ops::reshape(std::get<0>(p), {T, B, I});
  g.push_back(std::get<1>(p));
  if (inputs.size() == 6) g.push_back(std::get<2>(p));
  return g;
}

// Gradients of _gru_layer for inputs [gates_x, h0, w_hh(, b_hh)], from the gradients of
// (output, hn); `output` and `workspace` are the saved forward results.
inline std::vector<Tensor> gru_layer_grads(const std::vector<Tensor>& grads,
                                           const std::vector<Tensor>& inputs, const Tensor& output,
                                           const Tensor& workspace, bool reverse) {
  if (rnn_detail::backward_differentiable(grads, inputs))
    return rnn_detail::gru_composite_grads(grads, inputs, reverse);
  auto r = ops::_gru_layer_backward(grads[0], grads[1], inputs[1], inputs[2], output, workspace,
                                    reverse);
  std::vector<Tensor> g{std::get<0>(r), std::get<1>(r), std::get<2>(r)};
  if (inputs.size() == 4) g.push_back(std::get<3>(r));
  return g;
}

}  // namespace formulas
}  // namespace autograd
}  // namespace ember
