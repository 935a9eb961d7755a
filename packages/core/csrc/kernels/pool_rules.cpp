#include "kernels/pool_rules.h"

#include <string>

namespace ember {
namespace nn {
namespace {

// Leading dims -> planes and out_shape, spatial sizes into d.in.
PoolDims input_dims(const char* op, const DimVector& sizes, int64_t k) {
  EMBER_CHECK(static_cast<int64_t>(sizes.size()) >= k + 1, op, ": expected an input of at least ",
              k + 1, " dims ((C, *spatial) or (N, C, *spatial)) for ", k,
              " spatial dims, got shape ", shape_str(sizes));
  PoolDims p;
  p.k = k;
  const int64_t lead = sizes.size() - k;
  for (int64_t d = 0; d < lead; ++d) {
    p.planes *= sizes[d];
    p.out_shape.push_back(sizes[d]);
  }
  for (int64_t d = 0; d < k; ++d) {
    p.in[3 - k + d] = sizes[lead + d];
    EMBER_CHECK(sizes[lead + d] > 0, op, ": expected non-empty spatial dims, got input of shape ",
                shape_str(sizes));
  }
  return p;
}

}  // namespace

PoolDims fixed_pool_dims(const char* op, const DimVector& sizes, const DimVector& kernel_size,
                         const DimVector& stride, const DimVector& padding,
                         const DimVector& dilation, bool ceil_mode) {
  const int64_t k = kernel_size.size();
  EMBER_CHECK_KIND(k >= 1 && k <= 3, Value, op, ": kernel_size must have 1 to 3 elements, got ",
                   shape_str(kernel_size));
  PoolDims p = input_dims(op, sizes, k);
  DimVector st = stride.empty() ? kernel_size : expand_param(stride, k, "stride", op);
  DimVector pd = expand_param(padding, k, "padding", op);
  DimVector dl = expand_param(dilation, k, "dilation", op);
  for (int64_t d = 0; d < k; ++d) {
    const int64_t j = 3 - k + d, in = p.in[j], ks = kernel_size[d];
    EMBER_CHECK_KIND(ks > 0 && st[d] > 0 && dl[d] > 0, Runtime, op,
                     ": kernel_size, stride and dilation must be positive, got kernel_size=",
                     shape_str(kernel_size), " stride=", shape_str(st),
                     " dilation=", shape_str(dl));
    EMBER_CHECK_KIND(pd[d] >= 0 && pd[d] <= ks / 2, Runtime, op,
                     ": padding should be at most half of the kernel size, got padding=",
                     shape_str(pd), " and kernel_size=", shape_str(kernel_size));
    int64_t span = 0;  // user-given sizes: checked before anything is computed from them
    if (__builtin_mul_overflow(dl[d], ks - 1, &span) || __builtin_add_overflow(span, 1, &span))
      EMBER_FAIL(Runtime, op, ": kernel_size ", shape_str(kernel_size), " with dilation ",
                 shape_str(dl), " overflows int64");
    const int64_t avail = (in - span) + 2 * pd[d];  // no overflow: span >= 2 * pd[d]
    // PyTorch's size: floor((avail [+ stride - 1 with ceil_mode]) / stride) + 1. With ceil_mode
    // a window larger than the padded input still gives one output (it starts in the left
    // padding; the kernels clip it), so only a size below 1 is refused.
    int64_t o = 0;
    if (avail >= 0)
      o = avail / st[d] + (ceil_mode && avail % st[d] != 0 ? 1 : 0) + 1;
    else if (ceil_mode && avail + (st[d] - 1) >= 0)  // no overflow: avail < 0
      o = 1;
    // The last window must start inside the input or its left padding.
    if (ceil_mode && o > 0 && (o - 1) * st[d] >= in + pd[d]) --o;
    EMBER_CHECK(o >= 1, op, ": the window (kernel ", ks, ", dilation ", dl[d],
                ") is larger than the padded input along spatial dim ", d, " (input shape ",
                shape_str(sizes), ", padding ", pd[d], "): output size is too small");
    p.out[j] = o;
    p.ks[j] = ks;
    p.st[j] = st[d];
    p.pd[j] = pd[d];
    p.dl[j] = dl[d];
    p.out_shape.push_back(o);
  }
  return p;
}

PoolDims adaptive_pool_dims(const char* op, const DimVector& sizes, const DimVector& output_size) {
  const int64_t k = output_size.size();
  EMBER_CHECK_KIND(k >= 1 && k <= 3, Value, op, ": output_size must have 1 to 3 elements, got ",
                   shape_str(output_size));
  PoolDims p = input_dims(op, sizes, k);
  for (int64_t d = 0; d < k; ++d) {
    // (a 0 size is an empty output, as PyTorch's)
    EMBER_CHECK(output_size[d] >= 0, op, ": output_size must be non-negative, got ",
                shape_str(output_size));
    p.out[3 - k + d] = output_size[d];
    p.out_shape.push_back(output_size[d]);
  }
  return p;
}

PoolDims fractional_pool_dims(const char* op, const DimVector& sizes, const DimVector& kernel_size,
                              const DimVector& output_size, const DimVector& samples_size) {
  const int64_t k = kernel_size.size();
  EMBER_CHECK_KIND(k >= 2 && k <= 3 && static_cast<int64_t>(output_size.size()) == k, Value, op,
                   ": expected kernel_size and output_size of 2 or 3 elements each, got "
                   "kernel_size=",
                   shape_str(kernel_size), " output_size=", shape_str(output_size));
  const int64_t nd = static_cast<int64_t>(sizes.size());
  EMBER_CHECK(nd == k + 1 || nd == k + 2, op, ": expected a ", k + 1, "-d (C, *spatial) or ", k + 2,
              "-d (N, C, *spatial) input, got shape ", shape_str(sizes));
  for (int64_t d = 1; d < nd; ++d) {  // as PyTorch: an unbatched input may have 0 channels
    if (sizes[d] != 0) continue;
    std::string listed = "[";  // PyTorch's "[1, 0, 4, 4]"
    for (int64_t i = 0; i < nd; ++i) listed += (i ? ", " : "") + std::to_string(sizes[i]);
    EMBER_FAIL(Runtime, "fractional_max_pool", k,
               "d(): Expected input to have non-zero size for non-batch dimensions, but got",
               listed, "] with dimension ", d, " being empty.");
  }
  PoolDims p = input_dims(op, sizes, k);
  const int64_t batch = nd == k + 2 ? sizes[0] : 1;
  const int64_t channels = sizes[nd - k - 1];
  EMBER_CHECK(static_cast<int64_t>(samples_size.size()) == 3 && samples_size[0] == batch &&
                  samples_size[1] == channels && samples_size[2] == k,
              op, ": expected _random_samples of shape (", batch, ", ", channels, ", ", k,
              ") for an input of shape ", shape_str(sizes), ", got ", shape_str(samples_size));
  for (int64_t d = 0; d < k; ++d) {
    const int64_t j = 3 - k + d, in = p.in[j], ks = kernel_size[d], o = output_size[d];
    EMBER_CHECK_KIND(ks > 0 && o > 0, Runtime, op,
                     ": kernel_size and output_size must be positive, got kernel_size=",
                     shape_str(kernel_size), " output_size=", shape_str(output_size));
    EMBER_CHECK_KIND(ks <= in && o <= in - ks + 1, Runtime, op, ": output_size ", o,
                     " with kernel_size ", ks, " is too large for an input of size ", in,
                     " along spatial dim ", d, " (output_size + kernel_size - 1 must be <= ", in,
                     ")");
    p.out[j] = o;
    p.ks[j] = ks;
    p.out_shape.push_back(o);
  }
  return p;
}

}  // namespace nn
}  // namespace ember
