// CUDA kernels of the fused recurrent layers (_lstm_layer, _gru_layer, their backwards and
// _rnn_input_backward), with the inputs, checks, outputs and workspace layout of the CPU kernels
// (kernels/cpu/nn_rnn.cpp), float32 and float64.
//   - forward, per step: one cuBLAS product h_prev @ w_hh^T (gemm.h, the current stream) written
//     straight into the step's workspace rows, then one pointwise kernel (a thread per (sample,
//     unit)) that adds the input part of the gates, activates them and writes the workspace, h
//     (and, on the last step, hn / cn);
//   - backward, per step in reverse: one product for dL/dh_t through the next step's gates, then
//     one pointwise kernel for the step's gate gradients; dL/dw_hh at the end as the products of
//     all steps' gate gradients with their h_prev (the first step's h_prev is h0: two products
//     accumulated into one result);
//   - _rnn_input_backward: one product each for the input and weight gradients and a column sum
//     (a block per 32 columns, fixed order: deterministic) for the bias.
// The workspace rows are the CPU's: LSTM (T, B, 6H) = activated i, f, g, o, then c and tanh(c);
// GRU (T, B, 4H) = activated r, z, n, then h_prev @ w_hn^T + b_hn.
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "cuda/cuda_registry.h"
#include "cuda/gemm.h"
#include "cuda/index_common.cuh"
#include "cuda/nn_common.cuh"
#include "cuda/pointwise_math.cuh"
#include "kernels/rnn_rules.h"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {
namespace rnn {
namespace {

using nnk::acc_t;

constexpr int64_t kLstmWs = 6;  // LSTM workspace row: i, f, g, o, c, tanh(c), H each
constexpr int64_t kGruWs = 4;   // GRU workspace row: r, z, n, h_prev @ w_hn^T + b_hn, H each

using Dims = nn::RnnDims;

// Time indices of a layer run over T steps, from T - 1 down to 0 when reverse.
struct Order {
  int64_t T;
  bool reverse;
  int64_t time(int64_t s) const { return reverse ? T - 1 - s : s; }  // of the s-th step run
  int64_t prev(int64_t t) const { return reverse ? t + 1 : t - 1; }  // the step run before t
  int64_t next(int64_t t) const { return reverse ? t - 1 : t + 1; }  // the step run after t
};

// ---- checks (kernels/rnn_rules.h, plus one CUDA device for every tensor) ------------------------

// All inputs on one CUDA device (that of inputs[0]): the device check the shared checks of
// kernels/rnn_rules.h run after their dtype checks.
void check_devices(const char* op, const std::vector<Tensor>& inputs) {
  ix::check_cuda(inputs[0], op, "the inputs");
  for (const Tensor& t : inputs) ix::check_same_device(inputs[0], t, op, "every input");
}

// A gradient (or saved tensor) of the backward: on the output's device, contiguous, in dtype dt.
Tensor prepared(const char* op, const Tensor& ref, const Tensor& t, ScalarType dt,
                const char* what) {
  ix::check_same_device(ref, t, op, what);
  return nnk::contig(t, dt, op);
}

// ---- device math ------------------------------------------------------------------------------

template <class T>
__device__ __forceinline__ T sigm(T x) {
  return T(1) / (T(1) + dm::exp(-x));
}

// o (N, G) = the bias (G) in every row, or zeros without one: the start of an input projection.
template <class T>
__global__ void bias_rows_kernel(T* o, const T* bias, int64_t total, int64_t G) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x)
    o[e] = bias ? bias[e % G] : T(0);
}

// One LSTM step of n = B * H (sample, unit) pairs. ws (B, 6H) holds h_prev @ w_hh^T in its first
// 4H columns; gx (B, 4H) the input part of the gates; cp the previous c (row stride cp_ld).
template <class T>
__global__ void lstm_step_kernel(int64_t n, int64_t H, const T* gx, const T* cp, int64_t cp_ld,
                                 T* ws, T* h, T* hn, T* cn) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = e / H, k = e - b * H;
    T* row = ws + b * kLstmWs * H;
    const T* x = gx + b * 4 * H;
    const T i = sigm(row[k] + x[k]);
    const T f = sigm(row[H + k] + x[H + k]);
    const T g = dm::tanh(row[2 * H + k] + x[2 * H + k]);
    const T o = sigm(row[3 * H + k] + x[3 * H + k]);
    const T c = f * cp[b * cp_ld + k] + i * g;
    const T tc = dm::tanh(c);
    const T hv = o * tc;
    row[k] = i;
    row[H + k] = f;
    row[2 * H + k] = g;
    row[3 * H + k] = o;
    row[4 * H + k] = c;
    row[5 * H + k] = tc;
    h[e] = hv;
    if (hn) {
      hn[e] = hv;
      cn[e] = c;
    }
  }
}

// The gate gradients of one LSTM step: dh (B, H) is dL/dh_t from the later steps (or grad_hn),
// go the output's gradient at t, dc (B, H) carries dL/dc from step to step (in and out); ws the
// step's workspace rows, cp the previous c (row stride cp_ld); gg (B, 4H) receives dL/dgates.
template <class T>
__global__ void lstm_back_step_kernel(int64_t n, int64_t H, const T* dh, const T* go, const T* ws,
                                      const T* cp, int64_t cp_ld, T* dc, T* gg) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = e / H, k = e - b * H;
    const T* row = ws + b * kLstmWs * H;
    const T i = row[k], f = row[H + k], g = row[2 * H + k], o = row[3 * H + k];
    const T tc = row[5 * H + k];
    const T h_grad = dh[e] + go[e];
    const T c_grad = dc[e] + h_grad * o * (T(1) - tc * tc);
    T* gr = gg + b * 4 * H;
    gr[k] = c_grad * g * i * (T(1) - i);
    gr[H + k] = c_grad * cp[b * cp_ld + k] * f * (T(1) - f);
    gr[2 * H + k] = c_grad * i * (T(1) - g * g);
    gr[3 * H + k] = h_grad * tc * o * (T(1) - o);
    dc[e] = c_grad * f;
  }
}

// One GRU step: ws (B, 4H) holds h_prev @ w_hh^T in its first 3H columns (r, z, n parts); gx
// (B, 3H) the input part of the gates (with b_ih); bias b_hh (3H) or null.
template <class T>
__global__ void gru_step_kernel(int64_t n, int64_t H, const T* gx, const T* bias, const T* hp,
                                T* ws, T* h, T* hn) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = e / H, k = e - b * H;
    T* row = ws + b * kGruWs * H;
    const T* x = gx + b * 3 * H;
    const T br = bias ? bias[k] : T(0), bz = bias ? bias[H + k] : T(0);
    const T bn = bias ? bias[2 * H + k] : T(0);
    const T r = sigm(row[k] + x[k] + br);
    const T z = sigm(row[H + k] + x[H + k] + bz);
    const T a = row[2 * H + k] + bn;
    const T c = dm::tanh(x[2 * H + k] + r * a);
    const T hv = c + z * (hp[e] - c);
    row[k] = r;
    row[H + k] = z;
    row[2 * H + k] = c;
    row[3 * H + k] = a;
    h[e] = hv;
    if (hn) hn[e] = hv;
  }
}

// The gate gradients of one GRU step. hg (B, H) holds the full dL/dh of the step run after this
// one (in) and this step's (out); dhm (B, H) = that step's hidden-side gate gradients @ w_hh and
// z_next its z (row stride 4H), both null on the first step backward runs (the last forward step),
// whose dL/dh is grad_hn. gx / gh (B, 3H) receive dL/dgates_x and dL/d(h_prev @ w_hh^T + b_hh).
template <class T>
__global__ void gru_back_step_kernel(int64_t n, int64_t H, const T* dhm, const T* z_next,
                                     const T* ghn, const T* go, const T* ws, const T* hp, T* hg,
                                     T* gx, T* gh) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = e / H, k = e - b * H;
    const T dh = dhm ? hg[e] * z_next[b * kGruWs * H + k] + dhm[e] : ghn[e];
    const T h_grad = dh + go[e];
    const T* row = ws + b * kGruWs * H;
    const T r = row[k], z = row[H + k], c = row[2 * H + k], a = row[3 * H + k];
    const T dn = h_grad * (T(1) - z) * (T(1) - c * c);
    const T dr = dn * a * r * (T(1) - r);
    const T dz = h_grad * (hp[e] - c) * z * (T(1) - z);
    T* gxr = gx + b * 3 * H;
    T* ghr = gh + b * 3 * H;
    gxr[k] = ghr[k] = dr;
    gxr[H + k] = ghr[H + k] = dz;
    gxr[2 * H + k] = dn;
    ghr[2 * H + k] = dn * r;
    hg[e] = h_grad;
  }
}

// out (B, H) = hg * z (z with row stride 4H): the direct path of dL/dh0 through h = n + z (h0 - n).
template <class T>
__global__ void gru_h0_direct_kernel(int64_t n, int64_t H, const T* hg, const T* z, T* out) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = e / H, k = e - b * H;
    out[e] = hg[e] * z[b * kGruWs * H + k];
  }
}

// out (G) = the column sums of g (N, G): a block of 32 x 8 threads per 32 columns, each thread
// summing every 8th row of its column, then the 8 partial sums in a fixed order.
constexpr int kSumCols = 32, kSumRows = 8;
template <class T>
__global__ void col_sum_kernel(const T* g, T* out, int64_t N, int64_t G) {
  using A = acc_t<T>;
  __shared__ A part[kSumRows][kSumCols + 1];
  const int64_t j = int64_t(blockIdx.x) * kSumCols + threadIdx.x;
  A s = A(0);
  if (j < G)
    for (int64_t r = threadIdx.y; r < N; r += kSumRows) s += static_cast<A>(g[r * G + j]);
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && j < G) {
    A t = A(0);
    for (int y = 0; y < kSumRows; ++y) t += part[y][threadIdx.x];
    out[j] = static_cast<T>(t);
  }
}

// ---- host helpers -----------------------------------------------------------------------------

template <class T>
T* ptr(const Tensor& t) {
  return t->data_as<T>();
}

template <class T>
constexpr ScalarType dtype_of() {
  return std::is_same_v<T, float> ? ScalarType::Float32 : ScalarType::Float64;
}

// c (m x n, ldc) = a (m x k, lda; transposed storage with ta) @ b (k x n, ldb; tb) + beta * c.
template <class T>
void gemm(const char* op, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, bool ta,
          const T* b, int64_t ldb, bool tb, double beta, T* c, int64_t ldc) {
  gemm_rowmajor(op, dtype_of<T>(), dtype_of<T>(), m, n, k, 1.0, GemmOperand{a, lda, 0, ta},
                GemmOperand{b, ldb, 0, tb}, beta, c, ldc, 0, 1);
}

void copy_bytes(void* dst, const void* src, int64_t bytes, cudaStream_t st) {
  if (bytes > 0) EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st));
}

template <class T>
void col_sum(const char* op, const T* g, T* out, int64_t N, int64_t G, cudaStream_t st) {
  if (G == 0) return;
  const dim3 block(kSumCols, kSumRows);
  col_sum_kernel<T>
      <<<static_cast<unsigned>((G + kSumCols - 1) / kSumCols), block, 0, st>>>(g, out, N, G);
  check_launch(op);
}

// gw (G, H) = sum over steps t of gg_t^T @ h_prev_t for gate gradients gg (T, B, G): the first
// step's h_prev is h0, the others' are the outputs of the steps run before them (one contiguous
// block of out, shifted by a step).
template <class T>
void weight_grad(const char* op, const T* gg, const T* h0, const T* out, T* gw, Dims d, int64_t G,
                 bool reverse, cudaStream_t st) {
  const int64_t T_ = d.T, B = d.B, H = d.H;
  if (G * H == 0) return;
  if (T_ == 0 || B == 0) {
    EMBER_CUDA_CHECK(cudaMemsetAsync(gw, 0, sizeof(T) * G * H, st));
    return;
  }
  const int64_t first = reverse ? T_ - 1 : 0;
  gemm<T>(op, G, H, B, gg + first * B * G, G, true, h0, H, false, 0.0, gw, H);
  if (T_ > 1)
    gemm<T>(op, G, H, (T_ - 1) * B, gg + (reverse ? 0 : 1) * B * G, G, true,
            out + (reverse ? 1 : 0) * B * H, H, false, 1.0, gw, H);
}

// ---- the ops ----------------------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor, Tensor> lstm_layer(const std::vector<Tensor>& inputs,
                                                      bool reverse) {
  const char* op = "_lstm_layer";
  const Dims d = nn::check_lstm_inputs(op, inputs, check_devices);
  const int64_t T_ = d.T, B = d.B, H = d.H, G = 4 * H, W = kLstmWs * H;
  DeviceGuard guard(ix::device_index(inputs[0]));
  cudaStream_t st = current_stream();
  const ScalarType dt = inputs[0]->dtype();
  const Device dev = inputs[0]->device();
  Tensor h0 = nnk::contig(inputs[1], op), c0 = nnk::contig(inputs[2], op);
  Tensor w = nnk::contig(inputs[3], op);
  Tensor out = empty({T_, B, H}, dt, dev), ws = empty({T_, B, W}, dt, dev);
  Tensor hn = empty({B, H}, dt, dev), cn = empty({B, H}, dt, dev);
  EMBER_DISPATCH_BLAS(dt, op, [&] {
    using S = scalar_t;
    if (T_ == 0 || B * H == 0) {  // nothing to run: the states pass through
      copy_bytes(ptr<S>(hn), ptr<S>(h0), sizeof(S) * B * H, st);
      copy_bytes(ptr<S>(cn), ptr<S>(c0), sizeof(S) * B * H, st);
      return;
    }
    Tensor gx;
    if (inputs.size() == 4) {
      gx = nnk::contig(inputs[0], op);
    } else {  // the input projection of every step: bias rows, then += x @ w_ih^T
      Tensor x = nnk::contig(inputs[0], op), w_ih = nnk::contig(inputs[4], op);
      Tensor bias = inputs.size() == 6 ? nnk::contig(inputs[5], op) : Tensor();
      const int64_t N = T_ * B, I = x->size(2);
      gx = empty({T_, B, G}, dt, dev);
      bias_rows_kernel<S><<<blocks_for(N * G), kBlockSize, 0, st>>>(
          ptr<S>(gx), bias ? ptr<S>(bias) : nullptr, N * G, G);
      check_launch(op);
      if (I > 0)
        gemm<S>(op, N, G, I, ptr<S>(x), I, false, ptr<S>(w_ih), I, true, 1.0, ptr<S>(gx), G);
    }
    const Order ord{T_, reverse};
    const int64_t n = B * H;
    for (int64_t s = 0; s < T_; ++s) {
      const int64_t t = ord.time(s), tp = ord.prev(t);
      const S* hp = s == 0 ? ptr<S>(h0) : ptr<S>(out) + tp * B * H;
      const S* cp = s == 0 ? ptr<S>(c0) : ptr<S>(ws) + tp * B * W + 4 * H;
      S* wst = ptr<S>(ws) + t * B * W;
      gemm<S>(op, B, G, H, hp, H, false, ptr<S>(w), H, true, 0.0, wst, W);  // h_prev @ w_hh^T
      const bool last = s == T_ - 1;
      lstm_step_kernel<S><<<blocks_for(n), kBlockSize, 0, st>>>(
          n, H, ptr<S>(gx) + t * B * G, cp, s == 0 ? H : W, wst, ptr<S>(out) + t * B * H,
          last ? ptr<S>(hn) : nullptr, last ? ptr<S>(cn) : nullptr);
      check_launch(op);
    }
  });
  return {out, hn, cn, ws};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> lstm_layer_backward(
    const Tensor& grad_output, const Tensor& grad_hn, const Tensor& grad_cn, const Tensor& h0,
    const Tensor& c0, const Tensor& w_hh, const Tensor& output, const Tensor& workspace,
    bool reverse) {
  const char* op = "_lstm_layer_backward";
  const Dims d = nn::check_rnn_backward(op, "_lstm_layer", output, workspace, {h0, c0}, w_hh,
                                        grad_output, {grad_hn, grad_cn}, 4, kLstmWs, check_devices);
  const int64_t T_ = d.T, B = d.B, H = d.H, G = 4 * H, W = kLstmWs * H;
  DeviceGuard guard(ix::device_index(output));
  cudaStream_t st = current_stream();
  const ScalarType dt = output->dtype();
  const Device dev = output->device();
  Tensor go = prepared(op, output, grad_output, dt, "grad_output");
  Tensor ghn = prepared(op, output, grad_hn, dt, "grad_hn");
  Tensor gcn = prepared(op, output, grad_cn, dt, "grad_cn");
  Tensor ws = prepared(op, output, workspace, dt, "workspace");
  Tensor h0c = nnk::contig(h0, op), c0c = nnk::contig(c0, op), w = nnk::contig(w_hh, op);
  Tensor out = nnk::contig(output, op);
  Tensor gg = empty({T_, B, G}, dt, dev), gh0 = empty({B, H}, dt, dev);
  Tensor gc0 = empty({B, H}, dt, dev), gw = empty({G, H}, dt, dev);
  EMBER_DISPATCH_BLAS(dt, op, [&] {
    using S = scalar_t;
    copy_bytes(ptr<S>(gc0), ptr<S>(gcn), sizeof(S) * B * H, st);  // dL/dc, step to step
    if (T_ == 0 || B * H == 0) {
      copy_bytes(ptr<S>(gh0), ptr<S>(ghn), sizeof(S) * B * H, st);
      weight_grad<S>(op, ptr<S>(gg), ptr<S>(h0c), ptr<S>(out), ptr<S>(gw), d, G, reverse, st);
      return;
    }
    const Order ord{T_, reverse};
    const int64_t n = B * H;
    Tensor dh = empty({B, H}, dt, dev);
    for (int64_t s = 0; s < T_; ++s) {
      const int64_t t = ord.time(T_ - 1 - s);  // the forward's steps, last first
      const int64_t tn = ord.next(t), tp = ord.prev(t);
      const bool first_fwd = s == T_ - 1;
      const S* dh_in = ptr<S>(ghn);
      if (s > 0) {  // dL/dh_t through the next step's gates: gg_{t+1} @ w_hh
        gemm<S>(op, B, H, G, ptr<S>(gg) + tn * B * G, G, false, ptr<S>(w), H, false, 0.0,
                ptr<S>(dh), H);
        dh_in = ptr<S>(dh);
      }
      const S* cp = first_fwd ? ptr<S>(c0c) : ptr<S>(ws) + tp * B * W + 4 * H;
      lstm_back_step_kernel<S><<<blocks_for(n), kBlockSize, 0, st>>>(
          n, H, dh_in, ptr<S>(go) + t * B * H, ptr<S>(ws) + t * B * W, cp, first_fwd ? H : W,
          ptr<S>(gc0), ptr<S>(gg) + t * B * G);
      check_launch(op);
    }
    // dL/dh0 through the first step's gates
    gemm<S>(op, B, H, G, ptr<S>(gg) + ord.time(0) * B * G, G, false, ptr<S>(w), H, false, 0.0,
            ptr<S>(gh0), H);
    weight_grad<S>(op, ptr<S>(gg), ptr<S>(h0c), ptr<S>(out), ptr<S>(gw), d, G, reverse, st);
  });
  return {gg, gh0, gc0, gw};
}

std::tuple<Tensor, Tensor, Tensor> rnn_input_backward(const Tensor& grad, const Tensor& input,
                                                      const Tensor& weight) {
  const char* op = "_rnn_input_backward";
  nn::check_rnn_input_backward(op, grad, input, weight, check_devices);
  const int64_t N = input->size(0), I = input->size(1), G = weight->size(0);
  DeviceGuard guard(ix::device_index(grad));
  cudaStream_t st = current_stream();
  const ScalarType dt = grad->dtype();
  const Device dev = grad->device();
  Tensor g = nnk::contig(grad, op), x = nnk::contig(input, op), w = nnk::contig(weight, op);
  Tensor gi = empty({N, I}, dt, dev), gw = empty({G, I}, dt, dev), gb = empty({G}, dt, dev);
  EMBER_DISPATCH_BLAS(dt, op, [&] {
    using S = scalar_t;
    if (N * I > 0) {  // grad @ weight
      if (G > 0)
        gemm<S>(op, N, I, G, ptr<S>(g), G, false, ptr<S>(w), I, false, 0.0, ptr<S>(gi), I);
      else
        ix::zero(gi);
    }
    if (G * I > 0) {  // grad^T @ input
      if (N > 0)
        gemm<S>(op, G, I, N, ptr<S>(g), G, true, ptr<S>(x), I, false, 0.0, ptr<S>(gw), I);
      else
        ix::zero(gw);
    }
    col_sum<S>(op, ptr<S>(g), ptr<S>(gb), N, G, st);
  });
  return {gi, gw, gb};
}

std::tuple<Tensor, Tensor, Tensor> gru_layer(const std::vector<Tensor>& inputs, bool reverse) {
  const char* op = "_gru_layer";
  const Dims d = nn::check_gru_inputs(op, inputs, check_devices);
  const int64_t T_ = d.T, B = d.B, H = d.H, G = 3 * H, W = kGruWs * H;
  DeviceGuard guard(ix::device_index(inputs[0]));
  cudaStream_t st = current_stream();
  const ScalarType dt = inputs[0]->dtype();
  const Device dev = inputs[0]->device();
  Tensor gx = nnk::contig(inputs[0], op), h0 = nnk::contig(inputs[1], op);
  Tensor w = nnk::contig(inputs[2], op);
  Tensor bias = inputs.size() == 4 ? nnk::contig(inputs[3], op) : Tensor();
  Tensor out = empty({T_, B, H}, dt, dev), ws = empty({T_, B, W}, dt, dev);
  Tensor hn = empty({B, H}, dt, dev);
  EMBER_DISPATCH_BLAS(dt, op, [&] {
    using S = scalar_t;
    if (T_ == 0 || B * H == 0) {
      copy_bytes(ptr<S>(hn), ptr<S>(h0), sizeof(S) * B * H, st);
      return;
    }
    const Order ord{T_, reverse};
    const int64_t n = B * H;
    for (int64_t s = 0; s < T_; ++s) {
      const int64_t t = ord.time(s);
      const S* hp = s == 0 ? ptr<S>(h0) : ptr<S>(out) + ord.prev(t) * B * H;
      S* wst = ptr<S>(ws) + t * B * W;
      gemm<S>(op, B, G, H, hp, H, false, ptr<S>(w), H, true, 0.0, wst, W);  // h_prev @ w_hh^T
      gru_step_kernel<S><<<blocks_for(n), kBlockSize, 0, st>>>(
          n, H, ptr<S>(gx) + t * B * G, bias ? ptr<S>(bias) : nullptr, hp, wst,
          ptr<S>(out) + t * B * H, s == T_ - 1 ? ptr<S>(hn) : nullptr);
      check_launch(op);
    }
  });
  return {out, hn, ws};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> gru_layer_backward(
    const Tensor& grad_output, const Tensor& grad_hn, const Tensor& h0, const Tensor& w_hh,
    const Tensor& output, const Tensor& workspace, bool reverse) {
  const char* op = "_gru_layer_backward";
  const Dims d = nn::check_rnn_backward(op, "_gru_layer", output, workspace, {h0}, w_hh,
                                        grad_output, {grad_hn}, 3, kGruWs, check_devices);
  const int64_t T_ = d.T, B = d.B, H = d.H, G = 3 * H, W = kGruWs * H;
  DeviceGuard guard(ix::device_index(output));
  cudaStream_t st = current_stream();
  const ScalarType dt = output->dtype();
  const Device dev = output->device();
  Tensor go = prepared(op, output, grad_output, dt, "grad_output");
  Tensor ghn = prepared(op, output, grad_hn, dt, "grad_hn");
  Tensor ws = prepared(op, output, workspace, dt, "workspace");
  Tensor h0c = nnk::contig(h0, op), w = nnk::contig(w_hh, op), out = nnk::contig(output, op);
  Tensor gx = empty({T_, B, G}, dt, dev), gh = empty({T_, B, G}, dt, dev);
  Tensor gh0 = empty({B, H}, dt, dev), gw = empty({G, H}, dt, dev), gb = empty({G}, dt, dev);
  EMBER_DISPATCH_BLAS(dt, op, [&] {
    using S = scalar_t;
    if (T_ == 0 || B * H == 0) {
      copy_bytes(ptr<S>(gh0), ptr<S>(ghn), sizeof(S) * B * H, st);
      weight_grad<S>(op, ptr<S>(gh), ptr<S>(h0c), ptr<S>(out), ptr<S>(gw), d, G, reverse, st);
      if (G > 0) EMBER_CUDA_CHECK(cudaMemsetAsync(ptr<S>(gb), 0, sizeof(S) * G, st));
      return;
    }
    const Order ord{T_, reverse};
    const int64_t n = B * H;
    Tensor hg = empty({B, H}, dt, dev), dhm = empty({B, H}, dt, dev);
    for (int64_t s = 0; s < T_; ++s) {
      const int64_t t = ord.time(T_ - 1 - s);  // the forward's steps, last first
      const int64_t tn = ord.next(t);
      const S* hp = s == T_ - 1 ? ptr<S>(h0c) : ptr<S>(out) + ord.prev(t) * B * H;
      const S* z_next = nullptr;
      if (s > 0) {  // the next step's hidden-side gate gradients @ w_hh
        gemm<S>(op, B, H, G, ptr<S>(gh) + tn * B * G, G, false, ptr<S>(w), H, false, 0.0,
                ptr<S>(dhm), H);
        z_next = ptr<S>(ws) + tn * B * W + H;
      }
      gru_back_step_kernel<S><<<blocks_for(n), kBlockSize, 0, st>>>(
          n, H, s > 0 ? ptr<S>(dhm) : nullptr, z_next, ptr<S>(ghn), ptr<S>(go) + t * B * H,
          ptr<S>(ws) + t * B * W, hp, ptr<S>(hg), ptr<S>(gx) + t * B * G, ptr<S>(gh) + t * B * G);
      check_launch(op);
    }
    // dL/dh0 = dL/dh_first * z_first + gh_first @ w_hh
    const int64_t tf = ord.time(0);
    gru_h0_direct_kernel<S><<<blocks_for(n), kBlockSize, 0, st>>>(
        n, H, ptr<S>(hg), ptr<S>(ws) + tf * B * W + H, ptr<S>(gh0));
    check_launch(op);
    gemm<S>(op, B, H, G, ptr<S>(gh) + tf * B * G, G, false, ptr<S>(w), H, false, 1.0, ptr<S>(gh0),
            H);
    weight_grad<S>(op, ptr<S>(gh), ptr<S>(h0c), ptr<S>(out), ptr<S>(gw), d, G, reverse, st);
    col_sum<S>(op, ptr<S>(gh), ptr<S>(gb), T_ * B, G, st);
  });
  return {gx, gh0, gw, gb};
}

void register_rnn() {
  register_kernel("_lstm_layer", DeviceType::CUDA, &lstm_layer);
  register_kernel("_lstm_layer_backward", DeviceType::CUDA, &lstm_layer_backward);
  register_kernel("_rnn_input_backward", DeviceType::CUDA, &rnn_input_backward);
  register_kernel("_gru_layer", DeviceType::CUDA, &gru_layer);
  register_kernel("_gru_layer_backward", DeviceType::CUDA, &gru_layer_backward);
}

}  // namespace
}  // namespace rnn
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::rnn::register_rnn)
