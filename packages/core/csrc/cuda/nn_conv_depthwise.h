// Native CUDA kernels of depthwise convolution (nn_conv_depthwise.cu), which the convolution
// kernels (nn_conv.cu) use instead of cuDNN and their GEMM path for the problems `use_native`
// accepts, as PyTorch does with its own depthwise kernels: cuDNN's grouped kernels are slow when
// every group has one input channel, its filter gradient most of all.
//
// A depthwise convolution has groups == C (the input channels) and Co = M * C output channels
// (depth multiplier M >= 1): output channel co reads input channel co / M through its own
// kernel w[co, 0] (KH x KW). 1-d convolutions are the 2-d ones with H = 1.
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "kernels/conv_rules.h"

namespace ember {
namespace cuda {
namespace depthwise {

// The private A/B switch ember._C_cuda._set_depthwise_native (default on): off, every
// convolution goes to cuDNN / the GEMM kernels as before.
bool native_enabled();
void set_native_enabled(bool on);
// Native passes run so far (forward, input and weight gradients each count one): for tests.
int64_t native_passes();

// Whether the native kernels take this (non-transposed) convolution: the switch is on; 1 or 2
// spatial dims; groups == C > 1 (PyTorch's depthwise: a single group is an ordinary
// convolution); no empty operand; dtype float32, float64, float16 or bfloat16; and the operands
// are not channels-last while cuDNN is usable for the dtype (a channels-last input or weight goes
// to cuDNN, which keeps that layout, as in PyTorch). Unlike PyTorch, float16 does not consult
// cuDNN's per-shape depthwise heuristics: every contiguous (NCHW) depthwise problem of the four
// dtypes is native. Channels-last operands with cuDNN off or not loaded run natively too (on
// contiguous copies; the result is contiguous), as PyTorch's native kernels do.
bool use_native(const nn::ConvArgs& a, const Tensor& input, const Tensor& weight, bool transposed);

// The sizes of one depthwise problem: x (N, C, H, W), w (C * M, 1, KH, KW), y (N, C * M, Ho, Wo).
struct Params {
  int64_t N = 0, C = 0, M = 1, H = 1, W = 1, Ho = 1, Wo = 1, KH = 1, KW = 1;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
};
// From the convolution's geometry (1 or 2 spatial dims: the last two of g's three).
Params make_params(int64_t N, int64_t C, int64_t Co, const nn::WindowGeom& g);

// The passes, on the current device and stream; every tensor contiguous, one dtype.
// out = conv(x, w) + bias (bias may be null; added before the final rounding).
void forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out,
             const Params& p, const char* op);
// gi = d loss / d x from go = d loss / d y.
void backward_input(const Tensor& go, const Tensor& w, const Tensor& gi, const Params& p,
                    const char* op);
// gw = d loss / d w: for each weight element a sum over N * Ho * Wo terms, in slices summed
// by a fixed plan (no atomics: the same sizes give the same bits every time).
void backward_weight(const Tensor& go, const Tensor& x, const Tensor& gw, const Params& p,
                     const char* op);

}  // namespace depthwise
}  // namespace cuda
}  // namespace ember
