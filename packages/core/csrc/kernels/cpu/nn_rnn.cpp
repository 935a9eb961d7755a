// CPU kernels of the fused LSTM layer (_lstm_layer and its backward): the whole recurrence of
// one layer and direction in one op, instead of ~10 pointwise ops and their autograd nodes per
// step. The input projection of all steps is one product done before (by addmm); what is left
// per step is h_prev @ w_hh^T and the gate math.
//
// Each step is one parallel region over blocks of hidden units: a thread computes the four gate
// columns of its units (four narrow products) and then their pointwise math, so the gates of a
// unit never leave the thread that made them. Backward walks the steps in reverse the same way
// and sums grad_w_hh over all steps in one product at the end.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/cpu/nn_vec.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

// Workspace row of one (step, sample): activated gates i, f, g, o, then c and tanh(c), H each.
constexpr int64_t kWsParts = 6;
constexpr int64_t kUnitBlock = 16;              // hidden units per scheduling block
constexpr int64_t kParallelStepWork = 1 << 17;  // B * 4H * H below which a step runs inline

void sigmoid_run(const float* x, float* y, int64_t n) { nn::vec::sigmoid(x, y, n); }
void tanh_run(const float* x, float* y, int64_t n) { nn::vec::tanh(x, y, n); }
void sigmoid_run(const double* x, double* y, int64_t n) {
  for (int64_t k = 0; k < n; ++k) y[k] = 1.0 / (1.0 + std::exp(-x[k]));
}
void tanh_run(const double* x, double* y, int64_t n) {
  for (int64_t k = 0; k < n; ++k) y[k] = std::tanh(x[k]);
}

struct Dims {
  int64_t T, B, H;
};

Dims check_inputs(const char* op, const std::vector<Tensor>& inputs) {
  EMBER_CHECK(inputs.size() == 4, op, ": expected inputs [gates_x, h0, c0, w_hh], got ",
              inputs.size(), " tensors");
  for (const Tensor& t : inputs) EMBER_CHECK(t, op, ": an input is None");
  const Tensor &gx = inputs[0], &h0 = inputs[1], &c0 = inputs[2], &w = inputs[3];
  const ScalarType dt = gx->dtype();
  EMBER_CHECK_KIND(dt == ScalarType::Float32 || dt == ScalarType::Float64, Type, op,
                   ": expected float32 or float64 tensors, got ", dtype_name(dt));
  for (const Tensor& t : inputs)
    EMBER_CHECK_KIND(t->dtype() == dt, Type, op, ": all inputs must have dtype ", dtype_name(dt),
                     ", got ", dtype_name(t->dtype()));
  EMBER_CHECK(gx->dim() == 3 && gx->size(2) % 4 == 0, op, ": gates_x must be (T, B, 4H), got ",
              shape_str(gx->sizes()));
  const int64_t T = gx->size(0), B = gx->size(1), H = gx->size(2) / 4;
  const DimVector state{B, H}, weight{4 * H, H};
  EMBER_CHECK(h0->sizes() == state && c0->sizes() == state, op, ": h0 and c0 must be ",
              shape_str(state), " for gates_x of shape ", shape_str(gx->sizes()), ", got ",
              shape_str(h0->sizes()), " and ", shape_str(c0->sizes()));
  EMBER_CHECK(w->sizes() == weight, op, ": w_hh must be ", shape_str(weight), ", got ",
              shape_str(w->sizes()));
  return {T, B, H};
}

// Runs f(j0, j1) over blocks of hidden units [0, H), in parallel when a step is big enough.
template <class F>
void for_unit_blocks(int64_t B, int64_t H, const F& f) {
  const int64_t nblk = (H + kUnitBlock - 1) / kUnitBlock;
  const bool par = get_num_threads() > 1 && B * 4 * H * H >= kParallelStepWork;
  parallel_for(0, nblk, par ? 1 : nblk,
               [&](int64_t b0, int64_t b1) { f(b0 * kUnitBlock, std::min(H, b1 * kUnitBlock)); });
}

template <class T>
void forward_steps(const T* gx, const T* h0, const T* c0, const T* w, T* out, T* ws, Dims d,
                   bool reverse) {
  const int64_t B = d.B, H = d.H, G = 4 * H, W = kWsParts * H;
  for (int64_t s = 0; s < d.T; ++s) {
    const int64_t t = reverse ? d.T - 1 - s : s;
    const int64_t tp = reverse ? t + 1 : t - 1;  // the step before, in processing order
    const T* hp = s == 0 ? h0 : out + tp * B * H;
    T* wst = ws + t * B * W;
    for_unit_blocks(B, H, [&](int64_t j0, int64_t j1) {
      const int64_t n = j1 - j0;
      for (int64_t q = 0; q < 4; ++q)  // gate q of units [j0, j1): h_prev @ w_q^T
        gemm_rowmajor_tiled<T>(false, true, B, n, H, T(1), hp, H, w + (q * H + j0) * H, H, T(0),
                               wst + q * H + j0, W);
      for (int64_t b = 0; b < B; ++b) {
        T* row = wst + b * W;
        const T* x = gx + (t * B + b) * G;
        for (int64_t q = 0; q < 4; ++q)
          for (int64_t k = j0; k < j1; ++k) row[q * H + k] += x[q * H + k];
        T *i = row + j0, *f = row + H + j0, *g = row + 2 * H + j0, *o = row + 3 * H + j0;
        sigmoid_run(i, i, n);
        sigmoid_run(f, f, n);
        tanh_run(g, g, n);
        sigmoid_run(o, o, n);
        const T* cp = (s == 0 ? c0 + b * H : ws + tp * B * W + b * W + 4 * H) + j0;
        T *c = row + 4 * H + j0, *tc = row + 5 * H + j0;
        for (int64_t k = 0; k < n; ++k) c[k] = f[k] * cp[k] + i[k] * g[k];
        tanh_run(c, tc, n);
        T* h = out + (t * B + b) * H + j0;
        for (int64_t k = 0; k < n; ++k) h[k] = o[k] * tc[k];
      }
    });
  }
}

// dh[:, j0:j1] = ga @ w[:, j0:j1] for gate gradients ga (B, 4H): one product per gate block
// (K = H each) so that every call stays within OpenBLAS's unpacked small-matrix kernels.
template <class T>
void hidden_grad(const T* ga, const T* w, T* dh, int64_t B, int64_t H, int64_t j0, int64_t j1) {
  for (int64_t q = 0; q < 4; ++q)
    gemm_rowmajor_tiled<T>(false, false, B, j1 - j0, H, T(1), ga + q * H, 4 * H, w + q * H * H + j0,
                           H, q == 0 ? T(0) : T(1), dh + j0, H);
}

template <class T>
void backward_steps(const T* gout, const T* ghn, const T* gcn, const T* c0, const T* w, const T* ws,
                    T* gg, T* dh, T* dc, Dims d, bool reverse) {
  const int64_t B = d.B, H = d.H, G = 4 * H, W = kWsParts * H;
  std::memcpy(dc, gcn, sizeof(T) * B * H);  // dc carries dL/dc from step to step
  for (int64_t s = 0; s < d.T; ++s) {
    const int64_t t = reverse ? s : d.T - 1 - s;  // forward order, backwards
    const int64_t tn = reverse ? t - 1 : t + 1;   // the step after t in forward order
    const int64_t tp = reverse ? t + 1 : t - 1;   // the step before t in forward order
    const bool first_fwd = reverse ? t == d.T - 1 : t == 0;
    for_unit_blocks(B, H, [&](int64_t j0, int64_t j1) {
      const int64_t n = j1 - j0;
      // dL/dh_t of units [j0, j1): from the output, plus through the next step's gates.
      if (s == 0) {
        for (int64_t b = 0; b < B; ++b)
          std::memcpy(dh + b * H + j0, ghn + b * H + j0, sizeof(T) * n);
      } else {
        hidden_grad(gg + tn * B * G, w, dh, B, H, j0, j1);
      }
      for (int64_t b = 0; b < B; ++b) {
        const T* row = ws + (t * B + b) * W;
        const T *i = row + j0, *f = row + H + j0, *g = row + 2 * H + j0, *o = row + 3 * H + j0;
        const T* tc = row + 5 * H + j0;
        const T* cp = (first_fwd ? c0 + b * H : ws + (tp * B + b) * W + 4 * H) + j0;
        const T* go = gout + (t * B + b) * H + j0;
        T* dhr = dh + b * H + j0;
        T* dcr = dc + b * H + j0;
        T* gr = gg + (t * B + b) * G;
        T *di = gr + j0, *df = gr + H + j0, *dg = gr + 2 * H + j0, *dout = gr + 3 * H + j0;
        for (int64_t k = 0; k < n; ++k) {
          const T h_grad = dhr[k] + go[k];
          const T c_grad = dcr[k] + h_grad * o[k] * (T(1) - tc[k] * tc[k]);
          di[k] = c_grad * g[k] * i[k] * (T(1) - i[k]);
          df[k] = c_grad * cp[k] * f[k] * (T(1) - f[k]);
          dg[k] = c_grad * i[k] * (T(1) - g[k] * g[k]);
          dout[k] = h_grad * tc[k] * o[k] * (T(1) - o[k]);
          dcr[k] = c_grad * f[k];
        }
      }
    });
  }
  // dL/dh0 through the first step's gates.
  const int64_t tf = reverse ? d.T - 1 : 0;
  if (d.T == 0) {
    std::memcpy(dh, ghn, sizeof(T) * B * H);
    return;
  }
  for_unit_blocks(
      B, H, [&](int64_t j0, int64_t j1) { hidden_grad(gg + tf * B * G, w, dh, B, H, j0, j1); });
}

template <class T>
T* data(const Tensor& t) {
  return t->data_as<T>();
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor, Tensor> _lstm_layer(const std::vector<Tensor>& inputs,
                                                       bool reverse) {
  const char* op = "_lstm_layer";
  const Dims d = check_inputs(op, inputs);
  Tensor gx = nn::contig(inputs[0]), h0 = nn::contig(inputs[1]), c0 = nn::contig(inputs[2]);
  Tensor w = nn::contig(inputs[3]);
  const ScalarType dt = gx->dtype();
  const Device dev = gx->device();
  Tensor out = ember::empty({d.T, d.B, d.H}, dt, dev);
  Tensor ws = ember::empty({d.T, d.B, kWsParts * d.H}, dt, dev);
  SerialBlasScope serial;  // each thread's narrow products run on that thread
  EMBER_DISPATCH_BLAS(dt, op, [&] {
    using T = scalar_t;
    forward_steps<T>(data<T>(gx), data<T>(h0), data<T>(c0), data<T>(w), data<T>(out), data<T>(ws),
                     d, reverse);
  });
  if (d.T == 0) return {out, ops::clone(h0), ops::clone(c0), ws};
  const int64_t last = reverse ? 0 : d.T - 1;
  Tensor hn = ops::clone(ops::select(out, 0, last));
  Tensor cn = ops::clone(ops::narrow(ops::select(ws, 0, last), 1, 4 * d.H, d.H));
  return {out, hn, cn, ws};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> _lstm_layer_backward(
    const Tensor& grad_output, const Tensor& grad_hn, const Tensor& grad_cn, const Tensor& h0,
    const Tensor& c0, const Tensor& w_hh, const Tensor& output, const Tensor& workspace,
    bool reverse) {
  const char* op = "_lstm_layer_backward";
  EMBER_CHECK(output && workspace && output->dim() == 3, op,
              ": expected the (T, B, H) output and the workspace of _lstm_layer");
  const int64_t T = output->size(0), B = output->size(1), H = output->size(2);
  const Dims d{T, B, H};
  check_inputs(op, {ember::empty({T, B, 4 * H}, output->dtype(), output->device()), h0, c0, w_hh});
  const DimVector out_shape{T, B, H}, state{B, H}, ws_shape{T, B, kWsParts * H};
  EMBER_CHECK(
      grad_output && grad_output->sizes() == out_shape && grad_hn && grad_hn->sizes() == state &&
          grad_cn && grad_cn->sizes() == state && workspace->sizes() == ws_shape,
      op, ": gradient or workspace shapes don't match an output of shape ", shape_str(out_shape));
  const ScalarType dt = output->dtype();
  const Device dev = output->device();
  Tensor go = nn::contig(grad_output, dt), ghn = nn::contig(grad_hn, dt);
  Tensor gcn = nn::contig(grad_cn, dt), c0c = nn::contig(c0), w = nn::contig(w_hh);
  Tensor ws = nn::contig(workspace), out = nn::contig(output);
  Tensor gg = ember::empty({T, B, 4 * H}, dt, dev);
  Tensor gh0 = ember::empty({B, H}, dt, dev), gc0 = ember::empty({B, H}, dt, dev);
  {
    SerialBlasScope serial;
    EMBER_DISPATCH_BLAS(dt, op, [&] {
      using T_ = scalar_t;
      backward_steps<T_>(data<T_>(go), data<T_>(ghn), data<T_>(gcn), data<T_>(c0c), data<T_>(w),
                         data<T_>(ws), data<T_>(gg), data<T_>(gh0), data<T_>(gc0), d, reverse);
    });
  }
  // grad_w_hh = sum over steps of gates_grad_t^T @ h_prev_t: the steps whose h_prev is an
  // output form one contiguous block (shifted by a step), the first step's h_prev is h0.
  if (T == 0) return {gg, gh0, gc0, ops::zeros_like(w, std::nullopt, std::nullopt)};
  const int64_t tf = reverse ? T - 1 : 0;
  Tensor gw = ops::mm(ops::t(ops::select(gg, 0, tf)), nn::contig(h0));
  if (T > 1) {
    Tensor g_rest = ops::reshape(ops::narrow(gg, 0, reverse ? 0 : 1, T - 1), {(T - 1) * B, 4 * H});
    Tensor h_rest = ops::reshape(ops::narrow(out, 0, reverse ? 1 : 0, T - 1), {(T - 1) * B, H});
    gw = ops::addmm(gw, ops::t(g_rest), h_rest, Scalar(1), Scalar(1));
  }
  return {gg, gh0, gc0, gw};
}

}  // namespace cpu
}  // namespace ember
