#include "kernels/conv_rules.h"

namespace ember {
namespace nn {

WindowGeom make_window_geom(const char* op, const DimVector& in, const DimVector& kernel_size,
                            const DimVector& dilation, const DimVector& padding,
                            const DimVector& stride) {
  const int64_t k = kernel_size.size();
  EMBER_CHECK_KIND(k >= 1 && k <= 3, Value, op, ": expected 1 to 3 spatial dims (kernel_size ",
                   shape_str(kernel_size), ")");
  DimVector dl = expand_param(dilation, k, "dilation", op);
  DimVector pd = expand_param(padding, k, "padding", op);
  DimVector st = expand_param(stride, k, "stride", op);
  WindowGeom g;
  g.k = k;
  for (int64_t d = 0; d < k; ++d) {
    const int64_t j = 3 - k + d;
    EMBER_CHECK_KIND(kernel_size[d] > 0 && dl[d] > 0 && st[d] > 0 && pd[d] >= 0, Runtime, op,
                     ": kernel_size, dilation and stride must be positive and padding "
                     "non-negative, got kernel_size=",
                     shape_str(kernel_size), " dilation=", shape_str(dl), " stride=", shape_str(st),
                     " padding=", shape_str(pd));
    g.in[j] = in[d];
    g.ks[j] = kernel_size[d];
    g.st[j] = st[d];
    g.pd[j] = pd[d];
    g.dl[j] = dl[d];
    // User-given sizes: every product is checked before anything is planned from it.
    int64_t span = 0, padded = 0;
    if (__builtin_mul_overflow(dl[d], kernel_size[d] - 1, &span) ||
        __builtin_add_overflow(span, 1, &span) || __builtin_mul_overflow(pd[d], 2, &padded) ||
        __builtin_add_overflow(padded, in[d], &padded))
      EMBER_FAIL(Runtime, op, ": kernel_size ", shape_str(kernel_size), ", dilation ",
                 shape_str(dl), " and padding ", shape_str(pd),
                 " overflow int64 along spatial dim ", d);
    EMBER_CHECK(padded >= span, op, ": the kernel ", shape_str(kernel_size), " with dilation ",
                shape_str(dl), " spans ", span, " elements along spatial dim ", d,
                ", more than the padded input (", in[d], " + 2 * ", pd[d], " = ", padded, ")");
    g.out[j] = (padded - span) / st[d] + 1;
  }
  checked_numel(DimVector{g.out[0], g.out[1], g.out[2]}, op);  // the block count fits int64
  return g;
}

bool check_im2col_input(const Tensor& self, int64_t k) {
  EMBER_CHECK_KIND(is_floating(self->dtype()), DtypeNotImplemented,
                   "im2col: expected a floating-point input, got ", dtype_name(self->dtype()));
  EMBER_CHECK(self->dim() == k + 2 || self->dim() == k + 1, "im2col: expected a ", k + 1, "-D (",
              "unbatched) or ", k + 2, "-D (batched) input for a ", k,
              "-D kernel_size, but got input of shape ", shape_str(self->sizes()));
  return self->dim() == k + 2;
}

DimVector check_col2im_input(const Tensor& self, const DimVector& output_size, int64_t k) {
  EMBER_CHECK_KIND(is_floating(self->dtype()), DtypeNotImplemented,
                   "col2im: expected a floating-point input, got ", dtype_name(self->dtype()));
  DimVector os = expand_param(output_size, k, "output_size", "col2im");
  checked_numel(os, "col2im");  // before anything is computed from it
  EMBER_CHECK(self->dim() == 3 || self->dim() == 2,
              "col2im: expected a 2-D (unbatched) or 3-D (batched) input (N, C * prod(kernel_size),"
              " L), got ",
              shape_str(self->sizes()));
  return os;
}

DimVector col2im_out_shape(const Tensor& self, const Tensor& cols, bool batched,
                           const WindowGeom& g, const DimVector& kernel_size, const DimVector& os) {
  const int64_t K = g.kernel_numel();
  EMBER_CHECK(cols->size(1) % K == 0, "col2im: expected size(", batched ? 1 : 0,
              ") of the input to be divisible by the product of kernel_size (", K, "), got ",
              shape_str(self->sizes()));
  EMBER_CHECK(cols->size(2) == g.out_numel(), "col2im: expected ", g.out_numel(),
              " blocks (the sliding positions of kernel_size ", shape_str(kernel_size),
              " over output_size ", shape_str(os), "), but the input has ", cols->size(2),
              " (shape ", shape_str(self->sizes()), ")");
  DimVector out_shape{cols->size(0), cols->size(1) / K};
  for (int64_t v : os) out_shape.push_back(v);
  return out_shape;
}

ConvArgs check_conv(const char* op, const Tensor& input, const Tensor& weight, const Tensor& bias,
                    const DimVector& stride, const DimVector& padding, const DimVector& dilation,
                    bool transposed, const DimVector& output_padding, int64_t groups,
                    DeviceCheck device_check) {
  ConvArgs a;
  a.k = weight->dim() - 2;
  const int64_t k = a.k;
  EMBER_CHECK(k >= 1 && k <= 3, op, ": expected a 3-D, 4-D or 5-D weight, got shape ",
              shape_str(weight->sizes()));
  EMBER_CHECK(input->dim() == k + 2, op, ": expected a ", k + 2, "-D (batched) input for the ",
              k + 2, "-D weight of shape ", shape_str(weight->sizes()), ", but got input of shape ",
              shape_str(input->sizes()));
  EMBER_CHECK_KIND(is_floating(input->dtype()), DtypeNotImplemented, op,
                   ": expected a floating-point input, got ", dtype_name(input->dtype()));
  EMBER_CHECK(input->dtype() == weight->dtype(), op, ": input type (", dtype_name(input->dtype()),
              ") and weight type (", dtype_name(weight->dtype()), ") should be the same");
  check_device(device_check, input, weight, op, "weight");
  EMBER_CHECK_KIND(groups > 0, Runtime, op, ": groups must be positive, got ", groups);
  // As torch: at least one filter per group, and a transposed conv with no output channel is
  // refused too (an empty result would hide the wrong weight). No input channel stays the bias
  // alone for both kinds (round 16), where torch refuses the transposed one.
  EMBER_CHECK(transposed || weight->size(0) >= groups, op, ": expected weight to be at least ",
              groups, " at dimension 0 (groups=", groups, "), but got weight of shape ",
              shape_str(weight->sizes()));
  EMBER_CHECK(!transposed || weight->size(1) > 0, op,
              ": expected a weight with at least one output channel, got shape ",
              shape_str(weight->sizes()));
  a.G = groups;
  a.N = input->size(0);
  a.C = input->size(1);
  a.Co = transposed ? weight->size(1) * groups : weight->size(0);
  const int64_t w_in = transposed ? weight->size(0) : weight->size(1) * groups;
  EMBER_CHECK(a.C == w_in, op, ": expected input of shape ", shape_str(input->sizes()), " to have ",
              w_in, " channels (weight of shape ", shape_str(weight->sizes()), ", groups=", groups,
              "), but it has ", a.C);
  EMBER_CHECK(weight->size(0) % groups == 0, op, ": weight of shape ", shape_str(weight->sizes()),
              ": size(0) must be divisible by groups=", groups);
  if (bias) {
    EMBER_CHECK(bias->dim() == 1 && bias->size(0) == a.Co, op, ": expected bias of shape (", a.Co,
                ",), got ", shape_str(bias->sizes()));
    EMBER_CHECK(bias->dtype() == input->dtype(), op, ": bias type (", dtype_name(bias->dtype()),
                ") and input type (", dtype_name(input->dtype()), ") should be the same");
    check_device(device_check, input, bias, op, "bias");
  }
  a.ks = trailing(weight, k);
  a.st = expand_param(stride, k, "stride", op);
  a.pd = expand_param(padding, k, "padding", op);
  a.dl = expand_param(dilation, k, "dilation", op);
  a.opd = transposed ? expand_param(output_padding, k, "output_padding", op) : DimVector(k, 0);
  // A plain convolution ignores output_padding, but torch refuses a negative one all the same.
  for (int64_t v : output_padding)
    EMBER_CHECK(v >= 0, op, ": negative output_padding is not supported, got output_padding=",
                shape_str(output_padding));
  return a;
}

DimVector conv_transposed_sizes(const char* op, const Tensor& x, const ConvArgs& a) {
  DimVector out_sp;
  for (int64_t d = 0; d < a.k; ++d) {
    EMBER_CHECK_KIND(a.st[d] > 0 && a.dl[d] > 0 && a.pd[d] >= 0, Runtime, op,
                     ": stride and dilation must be positive and padding non-negative");
    EMBER_CHECK_KIND(a.opd[d] >= 0 && (a.opd[d] < a.st[d] || a.opd[d] < a.dl[d]), Runtime, op,
                     ": output_padding must be smaller than either stride or dilation, got "
                     "output_padding=",
                     shape_str(a.opd), " stride=", shape_str(a.st), " dilation=", shape_str(a.dl));
    const int64_t o =
        (x->size(d + 2) - 1) * a.st[d] - 2 * a.pd[d] + a.dl[d] * (a.ks[d] - 1) + a.opd[d] + 1;
    EMBER_CHECK(o > 0, op, ": the output size along spatial dim ", d, " would be ", o,
                " for input of shape ", shape_str(x->sizes()));
    out_sp.push_back(o);
  }
  return out_sp;
}

WindowGeom transposed_window_geom(const char* op, const DimVector& out_sp, const Tensor& x,
                                  const ConvArgs& a) {
  WindowGeom g = make_window_geom(op, out_sp, a.ks, a.dl, a.pd, a.st);
  for (int64_t d = 0; d < a.k; ++d) {
    const int64_t j = 3 - a.k + d;
    // out_sp = (in - 1) * stride - 2 * padding + span + output_padding, so the kernel fits at
    // least in positions of it; more exactly when output_padding >= stride.
    EMBER_CHECK(g.out[j] >= x->size(d + 2), op, ": internal error: ", g.out[j],
                " window positions along spatial dim ", d, " of the output ", shape_str(out_sp),
                " for input of shape ", shape_str(x->sizes()));
    g.out[j] = x->size(d + 2);
  }
  return g;
}

void check_conv_grad_output(const char* op, const Tensor& grad_output, const Tensor& input,
                            const Tensor& weight, const ConvArgs& a, bool transposed,
                            DeviceCheck device_check) {
  const int64_t k = a.k;
  DimVector expect{a.N, a.Co};
  if (!transposed) {
    WindowGeom g = make_window_geom(op, trailing(input, k), a.ks, a.dl, a.pd, a.st);
    for (int64_t d = 0; d < k; ++d) expect.push_back(g.out[3 - k + d]);
  } else {
    for (int64_t v : conv_transposed_sizes(op, input, a)) expect.push_back(v);
  }
  EMBER_CHECK(grad_output->sizes() == expect, op, ": expected grad_output of shape ",
              shape_str(expect), " (the convolution's output for input ", shape_str(input->sizes()),
              " and weight ", shape_str(weight->sizes()), "), got ",
              shape_str(grad_output->sizes()));
  EMBER_CHECK(grad_output->dtype() == input->dtype(), op, ": grad_output type (",
              dtype_name(grad_output->dtype()), ") and input type (", dtype_name(input->dtype()),
              ") should be the same");
  check_device(device_check, input, grad_output, op, "grad_output");
}

}  // namespace nn
}  // namespace ember
