// Direct depthwise convolution on the CPU: groups == in_channels, each input channel convolved
// with its own out_channels / in_channels filters (1 for MobileNet's depthwise layers). The
// generic grouped path would run an im2col and a tiny matrix product per group and sample; this
// one slides each filter over its plane directly, vectorized over the plane's positions (the
// float32 3x3 forward on AVX-512 by its own kernels, NCHW and channels-last).
#pragma once
#include <utility>

#include "core/tensor.h"
#include "kernels/conv_rules.h"

namespace ember {
namespace cpu {

// True when convolution / convolution_backward with these (checked) arguments run here: a
// non-transposed convolution over 1 to 3 spatial dims with groups == in_channels > 1.
bool depthwise_conv_applies(const nn::ConvArgs& a, bool transposed);

// The forward of such a convolution: x (N, C, *in), w (Co, 1, *k), b (Co) or undefined, all
// contiguous float32 or float64 of one dtype. Returns (N, Co, *out) of that dtype.
Tensor depthwise_conv(const Tensor& x, const Tensor& w, const Tensor& b, const nn::ConvArgs& a);

// The forward for a float32 2-d 3x3 (dilation 1, strides 1 or 2, one filter per channel) input
// that is channels-last contiguous, on AVX-512 CPUs: computed in that layout, vectorized over
// the channels, into a channels-last output. Undefined (nothing done) when any of that fails.
Tensor depthwise_conv_channels_last(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                    const nn::ConvArgs& a);

// Its input and weight gradients from grad_output go (N, Co, *out), same dtype and contiguity
// rules; each is undefined unless asked for. (The sums also run over padding positions with a
// zero factor: an infinite input or weight can make a gradient NaN where PyTorch's is finite.)
std::pair<Tensor, Tensor> depthwise_conv_backward(const Tensor& go, const Tensor& x,
                                                  const Tensor& w, const nn::ConvArgs& a,
                                                  bool input_grad, bool weight_grad);

}  // namespace cpu
}  // namespace ember
