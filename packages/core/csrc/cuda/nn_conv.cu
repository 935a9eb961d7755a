// CUDA kernels of im2col / col2im (F.unfold / F.fold) and of convolution and its backward
// (ops/nn.yaml), with the checks, shapes and semantics of the CPU kernels
// (kernels/cpu/nn_conv.cpp). GEMM-based: a chunk of the batch is unfolded into columns
// (im2col, one thread per column element) and multiplied by the weight with strided-batched
// cuBLAS products (gemm.h: the linalg handle, TF32 only when allowed); transposed convolution
// (and the input gradient) multiplies first and folds the columns back (col2im, a gather: one
// thread per image element sums the column entries that land on it, so no atomics and a
// deterministic order). float16/bfloat16 products accumulate in float32; the columns a
// transposed product writes and the weight gradient stay in float32 until the final rounding.
//
// When cuDNN is loaded and enabled (ember.backends.cudnn), convolution and its backward run each
// pass through cuDNN first (cudnn_conv.h), on contiguous or channels-last operands (the layout of
// the input or weight when either is channels-last; the results then are channels-last too); a
// pass cuDNN declines runs on the GEMM-based kernels here, on contiguous copies.
//
// Depthwise convolutions (groups == in_channels > 1, 1 or 2 spatial dims) run on the native
// kernels of nn_conv_depthwise.h instead, in all three passes, unless their operands are
// channels-last and cuDNN can take them (depthwise::use_native has the rule).
#include <algorithm>
#include <cstdint>
#include <tuple>

#include "core/dispatch.h"
#include "cuda/cuda_registry.h"
#include "cuda/cudnn_conv.h"
#include "cuda/device_types.cuh"
#include "cuda/gemm.h"
#include "cuda/index_common.cuh"
#include "cuda/nn_common.cuh"
#include "cuda/nn_conv_depthwise.h"
#include "kernels/conv_rules.h"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {
namespace conv {

// The sliding-window geometry, checks and output sizes are the CPU's (kernels/conv_rules.h).
using Geom = nn::WindowGeom;
using nn::trailing;
using nn::view_as_shape;

inline char* at(void* p, int64_t elems, int64_t itemsize) {
  return static_cast<char*>(p) + elems * itemsize;
}
inline const char* at(const void* p, int64_t elems, int64_t itemsize) {
  return static_cast<const char*>(p) + elems * itemsize;
}

// ---- kernels ----------------------------------------------------------------------------------

// cols (ns, C * K, L) from images x (ns, C, *in): element ((s * C + c) * K + kk) * L + l.
template <class T>
__global__ void im2col_kernel(int64_t total, const T* __restrict__ x, T* __restrict__ cols,
                              int64_t C, Geom g) {
  const int64_t K = g.kernel_numel(), L = g.out_numel(), P = g.in_numel();
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t l = e % L;
    const int64_t r = e / L;
    const int64_t kk = r % K;
    const int64_t sc = r / K;  // s * C + c
    const int64_t ow = l % g.out[2], oh = (l / g.out[2]) % g.out[1], od = l / (g.out[2] * g.out[1]);
    const int64_t kw = kk % g.ks[2], kh = (kk / g.ks[2]) % g.ks[1], kd = kk / (g.ks[2] * g.ks[1]);
    const int64_t id = od * g.st[0] - g.pd[0] + kd * g.dl[0];
    const int64_t ih = oh * g.st[1] - g.pd[1] + kh * g.dl[1];
    const int64_t iw = ow * g.st[2] - g.pd[2] + kw * g.dl[2];
    T v{};
    if (id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1] && iw >= 0 && iw < g.in[2])
      v = x[sc * P + (id * g.in[1] + ih) * g.in[2] + iw];
    cols[e] = v;
  }
}

// Images out (ns, C, *in) = fold of cols (ns, C * K, L): each image element sums the column
// entries whose window tap lands on it, in tap order, in the compute type of TC.
template <class TC, class TO>
__global__ void col2im_kernel(int64_t total, const TC* __restrict__ cols, TO* __restrict__ out,
                              Geom g) {
  using A = dev_opmath_t<TC>;
  const int64_t K = g.kernel_numel(), L = g.out_numel(), P = g.in_numel();
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t p = e % P;
    const int64_t sc = e / P;  // s * C + c
    const int64_t iw = p % g.in[2], ih = (p / g.in[2]) % g.in[1], id = p / (g.in[2] * g.in[1]);
    const TC* base = cols + sc * K * L;
    A acc = A(0);
    for (int64_t kd = 0; kd < g.ks[0]; ++kd) {
      const int64_t td = id + g.pd[0] - kd * g.dl[0];
      if (td < 0 || td % g.st[0] != 0) continue;
      const int64_t od = td / g.st[0];
      if (od >= g.out[0]) continue;
      for (int64_t kh = 0; kh < g.ks[1]; ++kh) {
        const int64_t th = ih + g.pd[1] - kh * g.dl[1];
        if (th < 0 || th % g.st[1] != 0) continue;
        const int64_t oh = th / g.st[1];
        if (oh >= g.out[1]) continue;
        for (int64_t kw = 0; kw < g.ks[2]; ++kw) {
          const int64_t tw = iw + g.pd[2] - kw * g.dl[2];
          if (tw < 0 || tw % g.st[2] != 0) continue;
          const int64_t ow = tw / g.st[2];
          if (ow >= g.out[2]) continue;
          const int64_t kk = (kd * g.ks[1] + kh) * g.ks[2] + kw;
          acc += to_op<TC>(base[kk * L + (od * g.out[1] + oh) * g.out[2] + ow]);
        }
      }
    }
    out[e] = from_op<TO>(acc);
  }
}

// out (ns, C, P) += bias[c].
template <class T>
__global__ void add_bias_kernel(int64_t total, T* __restrict__ out, const T* __restrict__ bias,
                                int64_t C, int64_t P) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (e / P) % C;
    out[e] = from_op<T>(to_op<T>(out[e]) + to_op<T>(bias[c]));
  }
}

// out (N, *spatial, C) += bias[c]: a channels-last output.
template <class T>
__global__ void add_bias_cl_kernel(int64_t total, T* __restrict__ out, const T* __restrict__ bias,
                                   int64_t C) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x)
    out[e] = from_op<T>(to_op<T>(out[e]) + to_op<T>(bias[e % C]));
}

// dst[i] = src[i] converted (float32 accumulators -> a 16-bit dtype).
template <class TD, class TS>
__global__ void convert_kernel(int64_t n, const TS* __restrict__ src, TD* __restrict__ dst) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x)
    dst[e] = from_op<TD>(to_op<TS>(src[e]));
}

// out[c] = sum over n < N and p < P of x[n * sn + p * sp + c * sc] (contiguous: sn = C * P,
// sp = 1, sc = P; channels-last: sn = P * C, sp = C, sc = 1): one block per channel, summed in
// double (as the CPU's per-channel total).
template <class T>
__global__ void channel_sum_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t N,
                                   int64_t P, int64_t sn, int64_t sp, int64_t sc) {
  __shared__ double part[kBlockSize];
  const int64_t c = blockIdx.x;
  double s = 0.0;
  const int64_t total = N * P;
  for (int64_t i = threadIdx.x; i < total; i += blockDim.x) {
    const int64_t n = i / P, p = i % P;
    s += static_cast<double>(to_op<T>(x[n * sn + p * sp + c * sc]));
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[c] = from_op<T>(part[0]);
}

// ---- launchers (every one on the current stream of the current device) -----------------------

template <class F>
void dispatch_conv_dtype(ScalarType dt, const char* op, const F& f) {
  nnk::dispatch_floating(dt, op, "dtype", f);
}

bool is_reduced(ScalarType dt) { return dt == ScalarType::Float16 || dt == ScalarType::BFloat16; }
// The dtype products accumulate into when the result is folded or summed afterwards.
ScalarType acc_dtype(ScalarType dt) { return is_reduced(dt) ? ScalarType::Float32 : dt; }

void im2col_launch(ScalarType dt, const void* x, void* cols, int64_t ns, int64_t C, const Geom& g,
                   const char* op) {
  const int64_t total = ns * C * g.kernel_numel() * g.out_numel();
  if (total == 0) return;
  dispatch_conv_dtype(dt, op, [&](auto tag) {
    using T = decltype(tag);
    im2col_kernel<T><<<blocks_for(total), kBlockSize, 0, current_stream()>>>(
        total, static_cast<const T*>(x), static_cast<T*>(cols), C, g);
    check_launch(op);
  });
}

// cols of dtype cdt (dt itself, or float32 for a 16-bit dt) folded into images of dtype dt.
void col2im_launch(ScalarType cdt, ScalarType dt, const void* cols, void* out, int64_t ns,
                   int64_t C, const Geom& g, const char* op) {
  const int64_t total = ns * C * g.in_numel();
  if (total == 0) return;
  dispatch_conv_dtype(dt, op, [&](auto tag) {
    using TO = decltype(tag);
    auto run = [&](auto ctag) {
      using TC = decltype(ctag);
      col2im_kernel<TC, TO><<<blocks_for(total), kBlockSize, 0, current_stream()>>>(
          total, static_cast<const TC*>(cols), static_cast<TO*>(out), g);
      check_launch(op);
    };
    if constexpr (std::is_same_v<TO, Half> || std::is_same_v<TO, BFloat16>) {
      if (cdt == ScalarType::Float32)
        run(float());
      else
        run(TO());
    } else {
      run(TO());
    }
  });
}

void add_bias(const Tensor& out, const Tensor& bias, int64_t C, int64_t P, const char* op,
              bool channels_last = false) {
  if (!bias || out->numel() == 0) return;
  const int64_t total = out->numel();
  dispatch_conv_dtype(out->dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    if (channels_last)
      add_bias_cl_kernel<T><<<blocks_for(total), kBlockSize, 0, current_stream()>>>(
          total, out->data_as<T>(), bias->data_as<T>(), C);
    else
      add_bias_kernel<T><<<blocks_for(total), kBlockSize, 0, current_stream()>>>(
          total, out->data_as<T>(), bias->data_as<T>(), C, P);
    check_launch(op);
  });
}

// dst (dtype dt, contiguous) = src (float32, same numel).
void convert_from_float(const Tensor& src, const Tensor& dst, const char* op) {
  const int64_t n = dst->numel();
  if (n == 0) return;
  dispatch_conv_dtype(dst->dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    convert_kernel<T, float><<<blocks_for(n), kBlockSize, 0, current_stream()>>>(
        n, src->data_as<float>(), dst->data_as<T>());
    check_launch(op);
  });
}

void zero_fill(const Tensor& t) {
  if (t->numel() == 0) return;
  EMBER_CUDA_CHECK(cudaMemsetAsync(t->data(), 0, t->numel() * t->itemsize(), current_stream()));
}

// Element budget of a chunk's column buffer: samples are unfolded this many elements at a time
// (at least one sample per chunk).
constexpr int64_t kColsBudget = int64_t(1) << 26;

int64_t chunk_of(int64_t N, int64_t per_sample) {
  return std::max<int64_t>(1, std::min<int64_t>(N, kColsBudget / std::max<int64_t>(per_sample, 1)));
}

// For s < ns and grp < G: C[s, grp] = op(A[s, grp]) @ op(B[s, grp]) (+ beta C), operand (s, grp)
// at data + s * s_stride + grp * g_stride elements. One strided-batched call per group (batched
// over the samples) or per sample (batched over the groups), whichever makes fewer calls.
struct Operand {
  const void* data;
  int64_t ld, s_stride, g_stride;
  bool trans;
  int64_t itemsize;
};
void grouped_gemm(const char* op, ScalarType ab, ScalarType cdt, int64_t m, int64_t n, int64_t k,
                  const Operand& a, const Operand& b, void* c, int64_t ldc, int64_t c_s_stride,
                  int64_t c_g_stride, int64_t ns, int64_t G, double beta) {
  const int64_t ci = itemsize(cdt);
  if (G <= ns) {
    for (int64_t grp = 0; grp < G; ++grp)
      gemm_rowmajor(
          op, ab, cdt, m, n, k, 1.0,
          GemmOperand{at(a.data, grp * a.g_stride, a.itemsize), a.ld, a.s_stride, a.trans},
          GemmOperand{at(b.data, grp * b.g_stride, b.itemsize), b.ld, b.s_stride, b.trans}, beta,
          at(c, grp * c_g_stride, ci), ldc, c_s_stride, ns);
  } else {
    for (int64_t s = 0; s < ns; ++s)
      gemm_rowmajor(op, ab, cdt, m, n, k, 1.0,
                    GemmOperand{at(a.data, s * a.s_stride, a.itemsize), a.ld, a.g_stride, a.trans},
                    GemmOperand{at(b.data, s * b.s_stride, b.itemsize), b.ld, b.g_stride, b.trans},
                    beta, at(c, s * c_s_stride, ci), ldc, c_g_stride, G);
  }
}

// out (N, Co, *g.out) = conv(x (N, C, *g.in), w (Co, C / G, *ks)) + bias; all contiguous, dtype dt.
void conv_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
                  int64_t N, int64_t C, int64_t Co, int64_t G, const Geom& g, const char* op) {
  const ScalarType dt = x->dtype();
  const int64_t is = itemsize(dt);
  const int64_t K = g.kernel_numel(), L = g.out_numel(), P = g.in_numel();
  const int64_t Cg = C / G, Cog = Co / G, CgK = Cg * K;
  if (out->numel() == 0) return;
  if (CgK == 0) {  // no input channels: the bias alone
    zero_fill(out);
    add_bias(out, bias, Co, L, op);
    return;
  }
  bool pointwise = true;
  for (int d = 0; d < 3; ++d)
    pointwise &= g.ks[d] == 1 && g.st[d] == 1 && g.pd[d] == 0 && g.in[d] == g.out[d];
  const int64_t per_sample = C * K * L;
  const int64_t nb = pointwise ? N : chunk_of(N, per_sample);
  Tensor cols;
  if (!pointwise) cols = empty(DimVector{nb * per_sample}, dt, x->device());
  for (int64_t n0 = 0; n0 < N; n0 += nb) {
    const int64_t ns = std::min(nb, N - n0);
    const void* src = at(x->data(), n0 * C * P, is);
    if (!pointwise) {
      im2col_launch(dt, src, cols->data(), ns, C, g, op);
      src = cols->data();
    }
    // out[s, grp] (Cog x L) = w[grp] (Cog x CgK) @ cols[s, grp] (CgK x L)
    grouped_gemm(op, dt, dt, Cog, L, CgK, Operand{w->data(), CgK, 0, Cog * CgK, false, is},
                 Operand{src, L, C * K * L, CgK * L, false, is}, at(out->data(), n0 * Co * L, is),
                 L, Co * L, Cog * L, ns, G, 0.0);
  }
  add_bias(out, bias, Co, L, op);
}

// out (N, Co, *g.in) = conv_transpose(x (N, Ci, *g.out), w (Ci, Co / G, *ks)) + bias: the
// product w^T @ x into columns (float32 for a 16-bit dt), folded by col2im.
void conv_transposed(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
                     int64_t N, int64_t Ci, int64_t Co, int64_t G, const Geom& g, const char* op) {
  const ScalarType dt = x->dtype(), ct = acc_dtype(dt);
  const int64_t is = itemsize(dt);
  const int64_t K = g.kernel_numel(), Lin = g.out_numel(), Pout = g.in_numel();
  const int64_t Cig = Ci / G, Cog = Co / G, CogK = Cog * K;
  if (out->numel() == 0) return;
  if (Cig == 0 || Lin == 0) {
    zero_fill(out);
    add_bias(out, bias, Co, Pout, op);
    return;
  }
  const int64_t per_sample = Co * K * Lin;
  const int64_t nb = chunk_of(N, per_sample);
  Tensor cols = empty(DimVector{nb * per_sample}, ct, x->device());
  for (int64_t n0 = 0; n0 < N; n0 += nb) {
    const int64_t ns = std::min(nb, N - n0);
    // cols[s, grp] (CogK x Lin) = w[grp]^T (CogK x Cig) @ x[s, grp] (Cig x Lin)
    grouped_gemm(op, dt, ct, CogK, Lin, Cig, Operand{w->data(), CogK, 0, Cig * CogK, true, is},
                 Operand{at(x->data(), n0 * Ci * Lin, is), Lin, Ci * Lin, Cig * Lin, false, is},
                 cols->data(), Lin, Co * K * Lin, CogK * Lin, ns, G, 0.0);
    col2im_launch(ct, dt, cols->data(), at(out->data(), n0 * Co * Pout, is), ns, Co, g, op);
  }
  add_bias(out, bias, Co, Pout, op);
}

// gw (A, B / G, *ks) = sum over samples of a[n] (A, La) against the columns of src[n]
// (B, *g.in), per group: gw[grp] (Ag x BgK) = sum_n a[n, grp] @ cols[n, grp]^T. Accumulated
// across samples in float32 for a 16-bit dtype.
void conv_weight(const Tensor& a, const Tensor& src, const Tensor& gw, int64_t N, int64_t A,
                 int64_t B, int64_t G, const Geom& g, const char* op) {
  const ScalarType dt = src->dtype(), ct = acc_dtype(dt);
  const int64_t is = itemsize(dt);
  const int64_t K = g.kernel_numel(), La = g.out_numel(), P = g.in_numel();
  const int64_t Ag = A / G, BgK = (B / G) * K;
  if (gw->numel() == 0) return;
  Tensor acc = ct == dt ? gw : empty(gw->sizes(), ct, gw->device());
  if (N == 0 || La == 0) {
    zero_fill(gw);
    return;
  }
  bool pointwise = true;
  for (int d = 0; d < 3; ++d)
    pointwise &= g.ks[d] == 1 && g.st[d] == 1 && g.pd[d] == 0 && g.in[d] == g.out[d];
  const int64_t per_sample = B * K * La;
  const int64_t nb = pointwise ? N : chunk_of(N, per_sample);
  Tensor cols;
  if (!pointwise) cols = empty(DimVector{nb * per_sample}, dt, src->device());
  for (int64_t n0 = 0; n0 < N; n0 += nb) {
    const int64_t ns = std::min(nb, N - n0);
    const void* cb = at(src->data(), n0 * B * P, is);
    if (!pointwise) {
      im2col_launch(dt, cb, cols->data(), ns, B, g, op);
      cb = cols->data();
    }
    for (int64_t s = 0; s < ns; ++s) {
      // gw[grp] (Ag x BgK) (+)= a[n, grp] (Ag x La) @ (cols[s, grp] (BgK x La))^T, batched over
      // the groups.
      const double beta = n0 + s == 0 ? 0.0 : 1.0;
      gemm_rowmajor(op, dt, ct, Ag, BgK, La, 1.0,
                    GemmOperand{at(a->data(), (n0 + s) * A * La, is), La, Ag * La, false},
                    GemmOperand{at(cb, s * B * K * La, is), La, BgK * La, true}, beta, acc->data(),
                    BgK, Ag * BgK, G);
    }
  }
  if (acc != gw) convert_from_float(acc, gw, op);
}

// ---- the ops ----------------------------------------------------------------------------------

Tensor im2col(const Tensor& self, const DimVector& kernel_size, const DimVector& dilation,
              const DimVector& padding, const DimVector& stride) {
  const int64_t k = kernel_size.size();
  const bool batched = nn::check_im2col_input(self, k);
  DeviceGuard guard(ix::device_index(self));
  Tensor x = ix::contiguous(self, "im2col");
  if (!batched) {
    DimVector s{1};
    for (int64_t v : self->sizes()) s.push_back(v);
    x = view_as_shape(x, s);
  }
  Geom g = nn::make_window_geom("im2col", trailing(x, k), kernel_size, dilation, padding, stride);
  const int64_t N = x->size(0), C = x->size(1);
  Tensor cols = empty({N, C * g.kernel_numel(), g.out_numel()}, x->dtype(), x->device());
  if (cols->numel() > 0) im2col_launch(x->dtype(), x->data(), cols->data(), N, C, g, "im2col");
  return batched ? cols : view_as_shape(cols, {C * g.kernel_numel(), g.out_numel()});
}

Tensor col2im(const Tensor& self, const DimVector& output_size, const DimVector& kernel_size,
              const DimVector& dilation, const DimVector& padding, const DimVector& stride) {
  DimVector os = nn::check_col2im_input(self, output_size, kernel_size.size());
  DeviceGuard guard(ix::device_index(self));
  const bool batched = self->dim() == 3;
  Tensor cols = ix::contiguous(self, "col2im");
  if (!batched) cols = view_as_shape(cols, {1, self->size(0), self->size(1)});
  Geom g = nn::make_window_geom("col2im", os, kernel_size, dilation, padding, stride);
  DimVector out_shape = nn::col2im_out_shape(self, cols, batched, g, kernel_size, os);
  Tensor out = empty(out_shape, cols->dtype(), cols->device());
  if (out->numel() > 0)
    col2im_launch(cols->dtype(), cols->dtype(), cols->data(), out->data(), out_shape[0],
                  out_shape[1], g, "col2im");
  if (batched) return out;
  DimVector unb(out_shape.begin() + 1, out_shape.end());
  return view_as_shape(out, unb);
}

// ---- the cuDNN path ---------------------------------------------------------------------------

// Whether to try cuDNN for a convolution of these operands: cuDNN usable for the dtype and no
// empty operand (the GEMM kernels handle those), and, for a transposed convolution, every
// output_padding below its stride (cuDNN's sizes cannot express a larger one).
bool cudnn_candidate(const nn::ConvArgs& a, const Tensor& input, const Tensor& weight,
                     bool transposed) {
  if (input->numel() == 0 || weight->numel() == 0 || a.N == 0 || a.C == 0 || a.Co == 0)
    return false;
  if (transposed)
    for (int64_t d = 0; d < a.k; ++d)
      if (a.opd[d] >= a.st[d]) return false;
  return cudnn::usable(input->dtype());
}

// The layout of the cuDNN passes: channels-last when the input or the weight is (4 or 5 dims).
bool cudnn_channels_last(const nn::ConvArgs& a, const Tensor& input, const Tensor& weight) {
  return a.k >= 2 && (cudnn::is_channels_last(input) || cudnn::is_channels_last(weight));
}

// A new tensor of the given sizes in the layout.
Tensor new_in_layout(const DimVector& sizes, const Tensor& like, bool channels_last) {
  if (channels_last)
    return empty_strided(sizes, cudnn::channels_last_strides(sizes), like->dtype(), like->device());
  return empty(sizes, like->dtype(), like->device());
}

// t itself when dense in the layout and 16-byte aligned (as cuDNN's kernels read), else a copy.
Tensor in_layout(const Tensor& t, bool channels_last, const char* op) {
  const bool dense = channels_last ? cudnn::channels_last_dense(t) : t->is_contiguous();
  const bool aligned = reinterpret_cast<uintptr_t>(t->data()) % 16 == 0;
  if (dense && aligned) return t;
  Tensor c = new_in_layout(t->sizes(), t, channels_last);
  ix::copy(c, t, op);
  return c;
}

// ---- the ops ----------------------------------------------------------------------------------

Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const DimVector& stride, const DimVector& padding, const DimVector& dilation,
                   bool transposed, const DimVector& output_padding, int64_t groups) {
  const char* op = transposed ? "conv_transpose" : "convolution";
  nn::ConvArgs a = nn::check_conv(op, input, weight, bias, stride, padding, dilation, transposed,
                                  output_padding, groups, &ix::check_same_device);
  const int64_t k = a.k;
  DeviceGuard guard(ix::device_index(input));
  Tensor b = bias ? ix::contiguous(bias, op) : Tensor();
  DimVector out_shape{a.N, a.Co};
  Geom g;
  if (!transposed) {
    g = nn::make_window_geom(op, trailing(input, k), a.ks, a.dl, a.pd, a.st);
    for (int64_t d = 0; d < k; ++d) out_shape.push_back(g.out[3 - k + d]);
  } else {
    DimVector out_sp = nn::conv_transposed_sizes(op, input, a);
    g = nn::transposed_window_geom(op, out_sp, input, a);
    for (int64_t v : out_sp) out_shape.push_back(v);
  }
  if (depthwise::use_native(a, input, weight, transposed)) {
    Tensor x = ix::contiguous(input, op), w = ix::contiguous(weight, op);
    Tensor out = empty(out_shape, x->dtype(), x->device());
    depthwise::forward(x, w, b, out, depthwise::make_params(a.N, a.C, a.Co, g), op);
    return out;
  }
  if (cudnn_candidate(a, input, weight, transposed)) {
    const bool cl = cudnn_channels_last(a, input, weight);
    Tensor xl = in_layout(input, cl, op), wl = in_layout(weight, cl, op);
    Tensor out = new_in_layout(out_shape, input, cl);
    const cudnn::ConvParams cp{a.pd, a.st, a.dl, a.G};
    // A transposed convolution is the data gradient of the convolution whose output it reads.
    const bool done = transposed ? cudnn::run(cudnn::Pass::BackwardData, op, out, wl, xl, cp, cl)
                                 : cudnn::run(cudnn::Pass::Forward, op, xl, wl, out, cp, cl);
    if (done) {
      int64_t P = 1;
      for (int64_t d = 2; d < out->dim(); ++d) P *= out->size(d);
      add_bias(out, b, a.Co, P, op, cl);
      return out;
    }
  }
  Tensor x = ix::contiguous(input, op), w = ix::contiguous(weight, op);
  Tensor out = empty(out_shape, x->dtype(), x->device());
  if (!transposed)
    conv_forward(x, w, b, out, a.N, a.C, a.Co, a.G, g, op);
  else
    conv_transposed(x, w, b, out, a.N, a.C, a.Co, a.G, g, op);
  return out;
}

std::tuple<Tensor, Tensor, Tensor> convolution_backward(
    const Tensor& grad_output, const Tensor& input, const Tensor& weight, const DimVector& stride,
    const DimVector& padding, const DimVector& dilation, bool transposed,
    const DimVector& output_padding, int64_t groups, bool input_grad, bool weight_grad,
    bool bias_grad) {
  const char* op = "convolution_backward";
  nn::ConvArgs a = nn::check_conv(op, input, weight, Tensor(), stride, padding, dilation,
                                  transposed, output_padding, groups, &ix::check_same_device);
  const int64_t k = a.k;
  nn::check_conv_grad_output(op, grad_output, input, weight, a, transposed, &ix::check_same_device);
  DeviceGuard guard(ix::device_index(input));
  Tensor gi, gw, gb;
  const bool native_dw = depthwise::use_native(a, input, weight, transposed);
  if (native_dw && (input_grad || weight_grad)) {
    const Geom g = nn::make_window_geom(op, trailing(input, k), a.ks, a.dl, a.pd, a.st);
    const depthwise::Params p = depthwise::make_params(a.N, a.C, a.Co, g);
    Tensor go = ix::contiguous(grad_output, op);
    if (input_grad) {
      gi = empty(input->sizes(), input->dtype(), input->device());
      depthwise::backward_input(go, ix::contiguous(weight, op), gi, p, op);
    }
    if (weight_grad) {
      gw = empty(weight->sizes(), weight->dtype(), weight->device());
      depthwise::backward_weight(go, ix::contiguous(input, op), gw, p, op);
    }
  }
  // The cuDNN passes; any it declines runs on the GEMM kernels below.
  if (!native_dw && (input_grad || weight_grad) && grad_output->numel() > 0 &&
      cudnn_candidate(a, input, weight, transposed)) {
    const bool cl = cudnn_channels_last(a, input, weight);
    const cudnn::ConvParams cp{a.pd, a.st, a.dl, a.G};
    Tensor gol = in_layout(grad_output, cl, op);
    if (input_grad) {
      Tensor wl = in_layout(weight, cl, op);
      Tensor t = new_in_layout(input->sizes(), input, cl);
      // Convolution: the data gradient; transposed: the convolution of grad_output.
      const bool done = transposed ? cudnn::run(cudnn::Pass::Forward, op, gol, wl, t, cp, cl)
                                   : cudnn::run(cudnn::Pass::BackwardData, op, t, wl, gol, cp, cl);
      if (done) gi = t;
    }
    if (weight_grad) {
      Tensor xl = in_layout(input, cl, op);
      Tensor t = new_in_layout(weight->sizes(), weight, cl);
      // The filter gradient of the convolution x -> y: (input -> grad_output), or for the
      // transposed one (grad_output -> input).
      const bool done = transposed
                            ? cudnn::run(cudnn::Pass::BackwardFilter, op, gol, t, xl, cp, cl)
                            : cudnn::run(cudnn::Pass::BackwardFilter, op, xl, t, gol, cp, cl);
      if (done) gw = t;
    }
  }
  Tensor go, x, w;  // contiguous operands of the GEMM kernels, made when needed
  auto gemm_operands = [&] {
    if (go) return;
    go = ix::contiguous(grad_output, op);
    x = ix::contiguous(input, op);
    w = ix::contiguous(weight, op);
  };
  if (input_grad && !gi) {
    gemm_operands();
    gi = empty(input->sizes(), input->dtype(), input->device());
    if (!transposed) {
      // d input = conv_transpose(grad_output) folded over the input's own sizes.
      Geom g = nn::make_window_geom(op, trailing(x, k), a.ks, a.dl, a.pd, a.st);
      conv_transposed(go, w, Tensor(), gi, a.N, a.Co, a.C, a.G, g, op);
    } else {
      // d input = conv(grad_output): the transposed conv's input positions are its windows.
      Geom g = nn::transposed_window_geom(op, trailing(go, k), x, a);
      conv_forward(go, w, Tensor(), gi, a.N, a.Co, a.C, a.G, g, op);
    }
  }
  if (weight_grad && !gw) {
    gemm_operands();
    gw = empty(weight->sizes(), weight->dtype(), weight->device());
    // Convolution: grad_output (N, Co, L) against the input's columns; transposed: the input
    // (N, Ci, Lin) against grad_output's columns.
    const Tensor& lhs = transposed ? x : go;
    const Tensor& src = transposed ? go : x;
    Geom g = transposed ? nn::transposed_window_geom(op, trailing(src, k), x, a)
                        : nn::make_window_geom(op, trailing(src, k), a.ks, a.dl, a.pd, a.st);
    conv_weight(lhs, src, gw, a.N, lhs->size(1), src->size(1), a.G, g, op);
  }
  if (bias_grad) {
    gb = empty({a.Co}, input->dtype(), input->device());
    int64_t P = 1;
    for (int64_t d = 2; d < grad_output->dim(); ++d) P *= grad_output->size(d);
    if (a.Co > 0) {
      // Summed in grad_output's own layout when contiguous or channels-last, else a copy's.
      const bool cl = !grad_output->is_contiguous() && cudnn::channels_last_dense(grad_output);
      Tensor gsum = cl ? grad_output : ix::contiguous(grad_output, op);
      const int64_t sn = a.Co * P, sp = cl ? a.Co : 1, sc = cl ? 1 : P;
      dispatch_conv_dtype(gsum->dtype(), op, [&](auto tag) {
        using T = decltype(tag);
        channel_sum_kernel<T><<<static_cast<unsigned>(a.Co), kBlockSize, 0, current_stream()>>>(
            gsum->data_as<T>(), gb->data_as<T>(), a.N, P, sn, sp, sc);
        check_launch(op);
      });
    }
  }
  return {gi, gw, gb};
}

void register_conv() {
  register_kernel("im2col", DeviceType::CUDA, &im2col);
  register_kernel("col2im", DeviceType::CUDA, &col2im);
  register_kernel("convolution", DeviceType::CUDA, &convolution);
  register_kernel("convolution_backward", DeviceType::CUDA, &convolution_backward);
}

}  // namespace conv
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::conv::register_conv)
