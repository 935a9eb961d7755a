// Device-neutral rules of im2col / col2im and convolution (ops/nn.yaml), shared by the CPU
// kernels (kernels/cpu/nn_conv.cpp) and the CUDA ones (cuda/nn_conv.cu): argument checks, output
// sizes and the sliding-window geometry both devices' kernels walk.
#pragma once
#include "core/tensor.h"
#include "kernels/nn_rules.h"

namespace ember {
namespace nn {

// Sizes of a k-d sliding window op, padded to 3 spatial dims (missing leading dims are 1): `in`
// is the image, `out` the window positions (the columns). constexpr so that device code may call
// the sizes too.
struct WindowGeom {
  int64_t k = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, ks[3] = {1, 1, 1};
  int64_t st[3] = {1, 1, 1}, pd[3] = {0, 0, 0}, dl[3] = {1, 1, 1};
  constexpr int64_t kernel_numel() const { return ks[0] * ks[1] * ks[2]; }
  constexpr int64_t in_numel() const { return in[0] * in[1] * in[2]; }
  constexpr int64_t out_numel() const { return out[0] * out[1] * out[2]; }
};

// in: the spatial image sizes. Checks the parameters and computes the window positions.
WindowGeom make_window_geom(const char* op, const DimVector& in, const DimVector& kernel_size,
                            const DimVector& dilation, const DimVector& padding,
                            const DimVector& stride);

// im2col: checks self (k + 1 or k + 2 dims, floating); true when it is batched.
bool check_im2col_input(const Tensor& self, int64_t k);

// col2im: checks self and output_size (expanded to k values, which it returns).
DimVector check_col2im_input(const Tensor& self, const DimVector& output_size, int64_t k);

// col2im: checks the batched columns cols (N, C * K, L) of self against the geometry g over
// output size os; returns the batched output shape (N, C, *os).
DimVector col2im_out_shape(const Tensor& self, const Tensor& cols, bool batched,
                           const WindowGeom& g, const DimVector& kernel_size, const DimVector& os);

struct ConvArgs {
  int64_t k = 0, N = 0, C = 0, Co = 0, G = 1;
  DimVector ks, st, pd, dl, opd;
};

// Checks a convolution's operands; k spatial dims, parameters expanded to k values.
ConvArgs check_conv(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                    const DimVector& stride, const DimVector& padding, const DimVector& dilation,
                    bool transposed, const DimVector& output_padding, int64_t groups,
                    DeviceCheck device_check = nullptr);

// Spatial output sizes of a transposed convolution of input x.
DimVector conv_transposed_sizes(const char* op, const Tensor& x, const ConvArgs& a);

// The window geometry of a transposed convolution of input x over its output sizes out_sp (the
// image): the window positions g.out are x's spatial sizes. Sliding the kernel over out_sp alone
// would count more positions when output_padding >= stride (legal while it is below the
// dilation): the trailing output_padding elements then hold whole extra windows, which no input
// element feeds. Forward, input and weight gradients all walk this geometry.
WindowGeom transposed_window_geom(const char* op, const DimVector& out_sp, const Tensor& x,
                                  const ConvArgs& a);

// convolution_backward: grad_output must have the forward's output shape and input's dtype.
void check_conv_grad_output(const char* op, const Tensor& grad_output, const Tensor& input,
                            const Tensor& weight, const ConvArgs& a, bool transposed,
                            DeviceCheck device_check = nullptr);

}  // namespace nn
}  // namespace ember
