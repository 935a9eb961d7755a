// CPU kernels of the fused recurrent layers (_lstm_layer, _gru_layer and their backwards): the
// whole recurrence of one layer and direction in one op, instead of ~10 pointwise ops and their
// autograd nodes per step. The input projection of all steps is one product done before (by
// addmm); what is left per step is h_prev @ w_hh^T and the gate math.
//
// Each step is one parallel region over blocks of hidden units: a thread computes the gate
// columns of its units (one narrow product per gate) and then their pointwise math, so the gates
// of a unit never leave the thread that made them. Backward walks the steps in reverse the same
// way and sums grad_w_hh over all steps in one product at the end.
//
// _lstm_layer may also take the layer input and w_ih (and the summed biases): it then makes the
// input projection itself, and _rnn_input_backward gives its gradients. Float32 products run on
// the AVX-512 kernel of conv_gemm.h where the CPU has it but OpenBLAS runs narrower kernels (see
// packs() in packed_gemm.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/conv_gemm.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/cpu/nn_vec.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/parallel.h"
#include "kernels/rnn_rules.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

// LSTM workspace row of one (step, sample): activated gates i, f, g, o, then c and tanh(c), H each.
constexpr int64_t kWsParts = 6;
// GRU workspace row: activated r, z, n, then h_prev @ w_hn^T + b_hn (what r multiplies), H each.
constexpr int64_t kGruWsParts = 4;
constexpr int64_t kUnitBlock = 16;              // hidden units per scheduling block
constexpr int64_t kParallelStepWork = 1 << 17;  // B * gates * H * H below which a step runs inline

void sigmoid_run(const float* x, float* y, int64_t n) { nn::vec::sigmoid(x, y, n); }
void tanh_run(const float* x, float* y, int64_t n) { nn::vec::tanh(x, y, n); }
void sigmoid_run(const double* x, double* y, int64_t n) {
  for (int64_t k = 0; k < n; ++k) y[k] = 1.0 / (1.0 + std::exp(-x[k]));
}
void tanh_run(const double* x, double* y, int64_t n) {
  for (int64_t k = 0; k < n; ++k) y[k] = std::tanh(x[k]);
}

using Dims = ember::nn::RnnDims;

// Time indices of a layer run over T steps, from T - 1 down to 0 when reverse.
struct Order {
  int64_t T;
  bool reverse;
  int64_t time(int64_t s) const { return reverse ? T - 1 - s : s; }  // of the s-th step run
  int64_t prev(int64_t t) const { return reverse ? t + 1 : t - 1; }  // the step run before t
  int64_t next(int64_t t) const { return reverse ? t - 1 : t + 1; }  // the step run after t
};

// Runs f(j0, j1) over blocks of hidden units [0, H), in parallel when a step of a layer with
// `gates` gate blocks is big enough.
template <class F>
void for_unit_blocks(int64_t gates, int64_t B, int64_t H, const F& f) {
  const int64_t nblk = (H + kUnitBlock - 1) / kUnitBlock;
  const bool par = get_num_threads() > 1 && B * gates * H * H >= kParallelStepWork;
  parallel_for(0, nblk, par ? 1 : nblk,
               [&](int64_t b0, int64_t b1) { f(b0 * kUnitBlock, std::min(H, b1 * kUnitBlock)); });
}

template <class T>
void forward_steps(const T* gx, const T* h0, const T* c0, const T* w, T* out, T* ws, Dims d,
                   bool reverse) {
  const int64_t B = d.B, H = d.H, G = 4 * H, W = kWsParts * H;
  const Order ord{d.T, reverse};
  // for the packed kernel, each gate's w_q^T as 16-column panels (see GemmLeft::mul_panels)
  std::vector<PackedA> wp;
  if (packs<T>() && d.T > 0 && B > 0 && H > 0)
    for (int64_t q = 0; q < 4; ++q)
      wp.emplace_back(reinterpret_cast<const float*>(w) + q * H * H, H, 1, H, H);
  for (int64_t s = 0; s < d.T; ++s) {
    const int64_t t = ord.time(s), tp = ord.prev(t);
    const T* hp = s == 0 ? h0 : out + tp * B * H;
    T* wst = ws + t * B * W;
    const GemmLeft<T> lh(hp, H, 1, B, H);
    for_unit_blocks(4, B, H, [&](int64_t j0, int64_t j1) {
      const int64_t n = j1 - j0;
      for (int64_t q = 0; q < 4; ++q) {  // gate q of units [j0, j1): h_prev @ w_q^T
        if constexpr (std::is_same_v<T, float>) {
          if (lh.packed()) {
            lh.mul_panels(wp[q], j0, j1, wst + q * H, W);
            continue;
          }
        }
        gemm_rowmajor_tiled<T>(false, true, B, n, H, T(1), hp, H, w + (q * H + j0) * H, H, T(0),
                               wst + q * H + j0, W);
      }
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

// dh[:, j0:j1] = beta * dh[:, j0:j1] + ga @ w[:, j0:j1] for gate gradients ga (B, gates * H):
// one product per gate block (K = H each) so that every call stays within OpenBLAS's unpacked
// small-matrix kernels.
template <class T>
void hidden_grad(const T* ga, const T* w, T* dh, int64_t gates, int64_t B, int64_t H, int64_t j0,
                 int64_t j1, T beta) {
  for (int64_t q = 0; q < gates; ++q)
    gemm_rowmajor_tiled<T>(false, false, B, j1 - j0, H, T(1), ga + q * H, gates * H,
                           w + q * H * H + j0, H, q == 0 ? beta : T(1), dh + j0, H);
}

template <class T>
void backward_steps(const T* gout, const T* ghn, const T* gcn, const T* c0, const T* w, const T* ws,
                    T* gg, T* dh, T* dc, Dims d, bool reverse) {
  const int64_t B = d.B, H = d.H, G = 4 * H, W = kWsParts * H;
  const Order ord{d.T, reverse};
  std::memcpy(dc, gcn, sizeof(T) * B * H);  // dc carries dL/dc from step to step
  for (int64_t s = 0; s < d.T; ++s) {
    const int64_t t = ord.time(d.T - 1 - s);  // the forward's steps, last first
    const int64_t tn = ord.next(t), tp = ord.prev(t);
    const bool first_fwd = s == d.T - 1;
    // the next step's gate gradients, the left operand of this step's dL/dh_t
    const GemmLeft<T> lg(s == 0 ? gg : gg + tn * B * G, G, 1, s == 0 ? 0 : B, G);
    for_unit_blocks(4, B, H, [&](int64_t j0, int64_t j1) {
      const int64_t n = j1 - j0;
      // dL/dh_t of units [j0, j1): from the output, plus through the next step's gates.
      if (s == 0) {
        for (int64_t b = 0; b < B; ++b)
          std::memcpy(dh + b * H + j0, ghn + b * H + j0, sizeof(T) * n);
      } else if (lg.packed()) {
        lg.mul(n, w + j0, H, dh + j0, H);
      } else {
        hidden_grad(gg + tn * B * G, w, dh, 4, B, H, j0, j1, T(0));
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
  if (d.T == 0) {
    std::memcpy(dh, ghn, sizeof(T) * B * H);
    return;
  }
  const int64_t tf = ord.time(0);
  const GemmLeft<T> lg(gg + tf * B * G, G, 1, B, G);
  for_unit_blocks(4, B, H, [&](int64_t j0, int64_t j1) {
    if (lg.packed())
      lg.mul(j1 - j0, w + j0, H, dh + j0, H);
    else
      hidden_grad(gg + tf * B * G, w, dh, 4, B, H, j0, j1, T(0));
  });
}

// GRU, with x = gates_x_t and a = h_prev @ w_hh^T + b_hh in blocks r, z, n:
//   r = sigmoid(x_r + a_r), z = sigmoid(x_z + a_z), n = tanh(x_n + r a_n), h = n + z (h_prev - n)
template <class T>
void gru_forward_steps(const T* gx, const T* h0, const T* w, const T* bias, T* out, T* ws, Dims d,
                       bool reverse) {
  const int64_t B = d.B, H = d.H, G = 3 * H, W = kGruWsParts * H;
  const Order ord{d.T, reverse};
  // for the packed kernel, each gate's w_q^T as 16-column panels (see GemmLeft::mul_panels)
  std::vector<PackedA> wp;
  if (packs<T>() && d.T > 0 && B > 0 && H > 0)
    for (int64_t q = 0; q < 3; ++q)
      wp.emplace_back(reinterpret_cast<const float*>(w) + q * H * H, H, 1, H, H);
  for (int64_t s = 0; s < d.T; ++s) {
    const int64_t t = ord.time(s);
    const T* hp = s == 0 ? h0 : out + ord.prev(t) * B * H;
    T* wst = ws + t * B * W;
    const GemmLeft<T> lh(hp, H, 1, B, H);
    for_unit_blocks(3, B, H, [&](int64_t j0, int64_t j1) {
      const int64_t n = j1 - j0;
      // h_prev @ w_q^T of units [j0, j1): r and z into their slots, n's part into the last slot
      // (the n slot receives the activated candidate)
      for (int64_t q = 0; q < 3; ++q) {
        if constexpr (std::is_same_v<T, float>) {
          if (lh.packed()) {
            lh.mul_panels(wp[q], j0, j1, wst + (q == 2 ? 3 : q) * H, W);
            continue;
          }
        }
        gemm_rowmajor_tiled<T>(false, true, B, n, H, T(1), hp, H, w + (q * H + j0) * H, H, T(0),
                               wst + (q == 2 ? 3 : q) * H + j0, W);
      }
      const T *br = bias + j0, *bz = bias + H + j0, *bn = bias + 2 * H + j0;
      for (int64_t b = 0; b < B; ++b) {
        T* row = wst + b * W;
        const T* x = gx + (t * B + b) * G + j0;
        T *r = row + j0, *z = row + H + j0, *c = row + 2 * H + j0, *a = row + 3 * H + j0;
        for (int64_t k = 0; k < n; ++k) {
          r[k] += x[k] + br[k];
          z[k] += x[H + k] + bz[k];
          a[k] += bn[k];
        }
        sigmoid_run(r, r, n);
        sigmoid_run(z, z, n);
        for (int64_t k = 0; k < n; ++k) c[k] = x[2 * H + k] + r[k] * a[k];
        tanh_run(c, c, n);
        const T* hpr = hp + b * H + j0;
        T* h = out + (t * B + b) * H + j0;
        for (int64_t k = 0; k < n; ++k) h[k] = c[k] + z[k] * (hpr[k] - c[k]);
      }
    });
  }
}

// dL/dh_prev of units [j0, j1) from dL/dh = dh (overwritten) of the step run after it: the direct
// path (h = n + z (h_prev - n)) plus the path through that step's hidden-side gate gradients gh.
template <class T>
void gru_hidden_grad(const T* gh, const T* ws_row0, const T* w, T* dh, int64_t B, int64_t H,
                     int64_t j0, int64_t j1) {
  for (int64_t b = 0; b < B; ++b) {
    const T* z = ws_row0 + b * kGruWsParts * H + H;
    for (int64_t k = j0; k < j1; ++k) dh[b * H + k] *= z[k];
  }
  hidden_grad(gh, w, dh, 3, B, H, j0, j1, T(1));
}

// gru_hidden_grad on the packed kernel: lg packs gh, wp is the packing of w_hh^T (w_hh's
// 16-column panels) and tmp a (B, H) buffer whose columns [j0, j1) this call may use.
inline void gru_hidden_grad_packed(const GemmLeft<float>& lg, const GemmLeft<float>& wp,
                                   const float* ws_row0, float* dh, float* tmp, int64_t B,
                                   int64_t H, int64_t j0, int64_t j1) {
  lg.mul_panels(wp.packing(), j0, j1, tmp, H);
  for (int64_t b = 0; b < B; ++b) {
    const float* z = ws_row0 + b * kGruWsParts * H + H;
    for (int64_t k = j0; k < j1; ++k) dh[b * H + k] = dh[b * H + k] * z[k] + tmp[b * H + k];
  }
}

// Fills gx (T, B, 3H) with dL/dgates_x and gh (T, B, 3H) with dL/d(h_prev @ w_hh^T + b_hh), and
// dh with dL/dh0. They differ in the n block only: gh_n = gx_n * r.
template <class T>
void gru_backward_steps(const T* gout, const T* ghn, const T* h0, const T* w, const T* out,
                        const T* ws, T* gx, T* gh, T* dh, Dims d, bool reverse) {
  const int64_t B = d.B, H = d.H, G = 3 * H, W = kGruWsParts * H;
  const Order ord{d.T, reverse};
  // for the packed kernel: w_hh (3H x H) as 16-column panels, and a buffer for its products
  const GemmLeft<T> wp(w, 1, H, d.T > 0 && B > 0 ? H : 0, G);
  std::vector<T> tmp(wp.packed() ? B * H : 0);
  for (int64_t s = 0; s < d.T; ++s) {
    const int64_t t = ord.time(d.T - 1 - s);  // the forward's steps, last first
    const int64_t tn = ord.next(t);
    const T* hp = s == d.T - 1 ? h0 : out + ord.prev(t) * B * H;
    // the next step's hidden-side gate gradients, the left operand of this step's dL/dh_t
    const GemmLeft<T> lg(s == 0 ? gh : gh + tn * B * G, G, 1, s == 0 ? 0 : B, G);
    for_unit_blocks(3, B, H, [&](int64_t j0, int64_t j1) {
      const int64_t n = j1 - j0;
      // dh carries dL/dh_t of units [j0, j1) without the output's own gradient
      if (s == 0) {
        for (int64_t b = 0; b < B; ++b)
          std::memcpy(dh + b * H + j0, ghn + b * H + j0, sizeof(T) * n);
      } else if constexpr (std::is_same_v<T, float>) {
        if (lg.packed())
          gru_hidden_grad_packed(lg, wp, ws + tn * B * W, dh, tmp.data(), B, H, j0, j1);
        else
          gru_hidden_grad(gh + tn * B * G, ws + tn * B * W, w, dh, B, H, j0, j1);
      } else {
        gru_hidden_grad(gh + tn * B * G, ws + tn * B * W, w, dh, B, H, j0, j1);
      }
      for (int64_t b = 0; b < B; ++b) {
        const T* row = ws + (t * B + b) * W;
        const T *r = row + j0, *z = row + H + j0, *c = row + 2 * H + j0, *a = row + 3 * H + j0;
        const T* go = gout + (t * B + b) * H + j0;
        const T* hpr = hp + b * H + j0;
        T* dhr = dh + b * H + j0;
        T* gxr = gx + (t * B + b) * G + j0;
        T* ghr = gh + (t * B + b) * G + j0;
        for (int64_t k = 0; k < n; ++k) {
          const T h_grad = dhr[k] + go[k];
          const T dn = h_grad * (T(1) - z[k]) * (T(1) - c[k] * c[k]);
          const T dr = dn * a[k] * r[k] * (T(1) - r[k]);
          const T dz = h_grad * (hpr[k] - c[k]) * z[k] * (T(1) - z[k]);
          gxr[k] = ghr[k] = dr;
          gxr[H + k] = ghr[H + k] = dz;
          gxr[2 * H + k] = dn;
          ghr[2 * H + k] = dn * r[k];
          dhr[k] = h_grad;  // the next region reads the full dL/dh_t
        }
      }
    });
  }
  if (d.T == 0) {
    std::memcpy(dh, ghn, sizeof(T) * B * H);
    return;
  }
  const int64_t tf = ord.time(0);
  const GemmLeft<T> lg(gh + tf * B * G, G, 1, B, G);
  for_unit_blocks(3, B, H, [&](int64_t j0, int64_t j1) {
    if constexpr (std::is_same_v<T, float>) {
      if (lg.packed()) {
        gru_hidden_grad_packed(lg, wp, ws + tf * B * W, dh, tmp.data(), B, H, j0, j1);
        return;
      }
    }
    gru_hidden_grad(gh + tf * B * G, ws + tf * B * W, w, dh, B, H, j0, j1);
  });
}

template <class T>
T* data(const Tensor& t) {
  return t->data_as<T>();
}

// o (N x G) = x (N x I) @ w^T (+ bias) for w (G, I), all contiguous.
template <class S>
void project(const S* x, const S* w, const S* bias, S* o, int64_t N, int64_t G, int64_t I) {
  const GemmLeft<S> lx(x, I, 1, N, I);
  if constexpr (std::is_same_v<S, float>) {
    if (lx.packed()) lx.mul_panels_all(PackedA(w, I, 1, G, I), o, G);
  }
  if (lx.packed()) {
  } else if (I == 0) {
    std::fill(o, o + N * G, S(0));
  } else if (N > 0 && G > 0) {
    blas_gemm_split<S>(false, true, N, G, I, x, I, w, I, o, G);
  }
  if (bias)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < G; ++j) o[n * G + j] += bias[j];
}

// x @ w^T (+ bias) for x (T, B, I) and w (G, I): the input projection of every step at once.
Tensor input_projection(const char* op, const Tensor& x_, const Tensor& w_, const Tensor* bias) {
  Tensor x = nn::contig(x_), w = nn::contig(w_);
  Tensor b = bias ? nn::contig(*bias) : Tensor();
  const int64_t G = w->size(0), I = w->size(1), N = x->size(0) * x->size(1);
  Tensor out = ember::empty({x->size(0), x->size(1), G}, x->dtype(), x->device());
  EMBER_DISPATCH_BLAS(x->dtype(), op, [&] {
    using S = scalar_t;
    project<S>(data<S>(x), data<S>(w), b ? data<S>(b) : nullptr, data<S>(out), N, G, I);
  });
  return out;
}

// grad_w_hh = sum over steps of gg_t^T @ h_prev_t for the hidden-side gate gradients gg (T, B, G):
// the steps whose h_prev is an output form one contiguous block (shifted by a step), the first
// step's h_prev is h0.
Tensor weight_grad(const Tensor& gg, const Tensor& h0, const Tensor& out, bool reverse) {
  const int64_t T = gg->size(0), B = gg->size(1), G = gg->size(2), H = out->size(2);
  Tensor h0c = nn::contig(h0);
  if (T == 0) return dispatch::zeros({G, H}, gg->dtype(), gg->device());
  if (gg->dtype() == ScalarType::Float32 && packs<float>() && B > 0 && H > 0) {
    // h_prev of every step in one (T * B, H) matrix, then one packed product
    std::vector<float> hp(T * B * H);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t src = reverse ? t + 1 : t - 1;  // the step whose output is t's h_prev
      const float* from = src < 0 || src >= T ? data<float>(h0c) : data<float>(out) + src * B * H;
      std::memcpy(hp.data() + t * B * H, from, sizeof(float) * B * H);
    }
    Tensor gw = ember::empty({G, H}, gg->dtype(), gg->device());
    GemmLeft<float>(data<float>(gg), 1, G, G, T * B).mul_all(H, hp.data(), H, data<float>(gw), H);
    return gw;
  }
  Tensor gw = dispatch::mm(dispatch::t(dispatch::select(gg, 0, reverse ? T - 1 : 0)), h0c);
  if (T > 1) {
    Tensor g_rest =
        dispatch::reshape(dispatch::narrow(gg, 0, reverse ? 0 : 1, T - 1), {(T - 1) * B, G});
    Tensor h_rest =
        dispatch::reshape(dispatch::narrow(out, 0, reverse ? 1 : 0, T - 1), {(T - 1) * B, H});
    gw = dispatch::addmm(gw, dispatch::t(g_rest), h_rest, Scalar(1), Scalar(1));
  }
  return gw;
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor, Tensor> _lstm_layer(const std::vector<Tensor>& inputs,
                                                       bool reverse) {
  const char* op = "_lstm_layer";
  const Dims d = ember::nn::check_lstm_inputs(op, inputs);
  Tensor gx = inputs.size() == 4 ? nn::contig(inputs[0])
                                 : input_projection(op, inputs[0], inputs[4],
                                                    inputs.size() == 6 ? &inputs[5] : nullptr);
  Tensor h0 = nn::contig(inputs[1]), c0 = nn::contig(inputs[2]);
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
  if (d.T == 0) return {out, dispatch::clone(h0), dispatch::clone(c0), ws};
  const int64_t last = reverse ? 0 : d.T - 1;
  Tensor hn = dispatch::clone(dispatch::select(out, 0, last));
  Tensor cn = dispatch::clone(dispatch::narrow(dispatch::select(ws, 0, last), 1, 4 * d.H, d.H));
  return {out, hn, cn, ws};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> _lstm_layer_backward(
    const Tensor& grad_output, const Tensor& grad_hn, const Tensor& grad_cn, const Tensor& h0,
    const Tensor& c0, const Tensor& w_hh, const Tensor& output, const Tensor& workspace,
    bool reverse) {
  const char* op = "_lstm_layer_backward";
  const Dims d = ember::nn::check_rnn_backward(op, "_lstm_layer", output, workspace, {h0, c0}, w_hh,
                                               grad_output, {grad_hn, grad_cn}, 4, kWsParts);
  const int64_t T = d.T, B = d.B, H = d.H;
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
  return {gg, gh0, gc0, weight_grad(gg, h0, out, reverse)};
}

std::tuple<Tensor, Tensor, Tensor> _rnn_input_backward(const Tensor& grad, const Tensor& input,
                                                       const Tensor& weight) {
  const char* op = "_rnn_input_backward";
  ember::nn::check_rnn_input_backward(op, grad, input, weight);
  const int64_t N = input->size(0), I = input->size(1), G = weight->size(0);
  const ScalarType dt = grad->dtype();
  const Device dev = grad->device();
  Tensor g = nn::contig(grad), x = nn::contig(input), w = nn::contig(weight);
  Tensor gi = ember::empty({N, I}, dt, dev), gw = ember::empty({G, I}, dt, dev);
  Tensor gb = ember::empty({G}, dt, dev);
  EMBER_DISPATCH_BLAS(dt, op, [&] {
    using S = scalar_t;
    const S* gp = data<S>(g);
    GemmLeft<S>(gp, G, 1, N, G).mul_all(I, data<S>(w), I, data<S>(gi), I);  // grad @ weight
    GemmLeft<S>(gp, 1, G, G, N).mul_all(I, data<S>(x), I, data<S>(gw), I);  // grad^T @ input
    S* bp = data<S>(gb);
    std::fill(bp, bp + G, S(0));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < G; ++j) bp[j] += gp[n * G + j];
  });
  return {gi, gw, gb};
}

std::tuple<Tensor, Tensor, Tensor> _gru_layer(const std::vector<Tensor>& inputs, bool reverse) {
  const char* op = "_gru_layer";
  const Dims d = ember::nn::check_gru_inputs(op, inputs);
  Tensor gx = nn::contig(inputs[0]), h0 = nn::contig(inputs[1]), w = nn::contig(inputs[2]);
  const ScalarType dt = gx->dtype();
  const Device dev = gx->device();
  // Without b_hh the kernel adds zeros: one code path, at the cost of 3H loads per row.
  Tensor bias = inputs.size() == 4 ? nn::contig(inputs[3]) : dispatch::zeros({3 * d.H}, dt, dev);
  Tensor out = ember::empty({d.T, d.B, d.H}, dt, dev);
  Tensor ws = ember::empty({d.T, d.B, kGruWsParts * d.H}, dt, dev);
  SerialBlasScope serial;  // each thread's narrow products run on that thread
  EMBER_DISPATCH_BLAS(dt, op, [&] {
    using T = scalar_t;
    gru_forward_steps<T>(data<T>(gx), data<T>(h0), data<T>(w), data<T>(bias), data<T>(out),
                         data<T>(ws), d, reverse);
  });
  if (d.T == 0) return {out, dispatch::clone(h0), ws};
  return {out, dispatch::clone(dispatch::select(out, 0, reverse ? 0 : d.T - 1)), ws};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> _gru_layer_backward(
    const Tensor& grad_output, const Tensor& grad_hn, const Tensor& h0, const Tensor& w_hh,
    const Tensor& output, const Tensor& workspace, bool reverse) {
  const char* op = "_gru_layer_backward";
  const Dims d = ember::nn::check_rnn_backward(op, "_gru_layer", output, workspace, {h0}, w_hh,
                                               grad_output, {grad_hn}, 3, kGruWsParts);
  const int64_t T = d.T, B = d.B, H = d.H;
  const ScalarType dt = output->dtype();
  const Device dev = output->device();
  Tensor go = nn::contig(grad_output, dt), ghn = nn::contig(grad_hn, dt);
  Tensor h0c = nn::contig(h0), w = nn::contig(w_hh);
  Tensor ws = nn::contig(workspace), out = nn::contig(output);
  Tensor gx = ember::empty({T, B, 3 * H}, dt, dev), gh = ember::empty({T, B, 3 * H}, dt, dev);
  Tensor gh0 = ember::empty({B, H}, dt, dev);
  {
    SerialBlasScope serial;
    EMBER_DISPATCH_BLAS(dt, op, [&] {
      using T_ = scalar_t;
      gru_backward_steps<T_>(data<T_>(go), data<T_>(ghn), data<T_>(h0c), data<T_>(w), data<T_>(out),
                             data<T_>(ws), data<T_>(gx), data<T_>(gh), data<T_>(gh0), d, reverse);
    });
  }
  Tensor gb =
      dispatch::sum(dispatch::reshape(gh, {T * B, 3 * H}), DimVector{0}, false, std::nullopt);
  return {gx, gh0, weight_grad(gh, h0c, out, reverse), gb};
}

}  // namespace cpu
}  // namespace ember
