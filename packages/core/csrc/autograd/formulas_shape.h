// Derivative helpers of shape, view, indexing and list ops (cat, split, ...). Included by
// formulas.h; every helper calls ops:: so backward passes are themselves differentiable.
#pragma once
#include <optional>
#include <string>

#include "autograd/autograd.h"
#include "kernels/iterator.h"
#include "kernels/pad.h"
#include "ops.h"

namespace ember {
namespace autograd {
namespace formulas {

// cat: each input receives its slice of grad along dim (1-D empty inputs, which cat skips,
// receive zeros).
inline std::vector<Tensor> cat_backward(const Tensor& grad, const std::vector<InputMeta>& inputs,
                                        int64_t dim) {
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  int64_t d = wrap_dim(dim, grad->dim(), "cat_backward");
  int64_t start = 0;
  for (const InputMeta& m : inputs) {
    if (m.sizes.size() == 1 && m.sizes[0] == 0) {
      out.push_back(zeros_like_meta(m));
      continue;
    }
    int64_t len = m.sizes[d];
    out.push_back(ops::narrow(grad, d, start, len));
    start += len;
  }
  return out;
}

// stack: each input receives its slice of grad at its index along the new dim.
inline std::vector<Tensor> stack_backward(const Tensor& grad, int64_t dim) {
  return ops::unbind(grad, wrap_dim(dim, grad->dim(), "stack_backward"));
}

// split and friends: the pieces' gradients (zeros where a piece got none) joined along dim.
inline Tensor split_backward(const std::vector<Tensor>& grads, const InputMeta& self, int64_t dim) {
  if (grads.empty()) return zeros_like_meta(self);
  int64_t d = wrap_dim(dim, self.sizes.size(), "split_backward");
  return ops::cat(grads, d, Tensor());
}

// unbind: the slices' gradients stacked along dim.
inline Tensor unbind_backward(const std::vector<Tensor>& grads, const InputMeta& self,
                              int64_t dim) {
  if (grads.empty()) return zeros_like_meta(self);
  int64_t d = wrap_dim(dim, self.sizes.size(), "unbind_backward");
  return ops::stack(grads, d, Tensor());
}

// grad written into zeros of self's shape through the view `view_of(zeros)`. The write is an
// in-place copy into a view, so with create_graph the result's history (CopySlices) is
// differentiable in grad.
template <class ViewOf>
inline Tensor into_zeros(const Tensor& grad, const InputMeta& self, const ViewOf& view_of) {
  // new_zeros (not zeros): made from grad, so a __torch_dispatch__ subclass makes it
  Tensor z = ops::new_zeros(grad, self.sizes, std::nullopt, std::nullopt);
  ops::copy_(view_of(z), grad, false);
  return z;
}

inline Tensor narrow_backward(const Tensor& grad, const InputMeta& self, int64_t dim,
                              int64_t start) {
  int64_t d = wrap_dim(dim, grad->dim(), "narrow_backward");
  return into_zeros(grad, self,
                    [&](const Tensor& z) { return ops::narrow(z, d, start, grad->size(d)); });
}
inline Tensor select_backward(const Tensor& grad, const InputMeta& self, int64_t dim,
                              int64_t index) {
  return into_zeros(grad, self, [&](const Tensor& z) { return ops::select(z, dim, index); });
}
inline Tensor diagonal_backward(const Tensor& grad, const InputMeta& self, int64_t offset,
                                int64_t dim1, int64_t dim2) {
  return into_zeros(grad, self,
                    [&](const Tensor& z) { return ops::diagonal(z, offset, dim1, dim2); });
}

// Positions i * step + j of the elements of windows i, j, as a flat int64 index.
inline Tensor window_index(int64_t n, int64_t size, int64_t step, Device device) {
  Tensor starts = ops::mul(ops::arange(Scalar(n), ScalarType::Int64, device),
                           TensorOrScalar(Scalar(step)), Tensor());
  Tensor offs = ops::arange(Scalar(size), ScalarType::Int64, device);
  Tensor idx =
      ops::add(ops::unsqueeze(starts, 1), TensorOrScalar(offs), Scalar(int64_t(1)), Tensor());
  return ops::reshape(idx, DimVector{-1});
}

// unfold: windows may overlap, so their gradients are summed back with index_add.
inline Tensor unfold_backward(const Tensor& grad, const InputMeta& self, int64_t dimension,
                              int64_t size, int64_t step) {
  int64_t nd = self.sizes.size();
  if (nd == 0) return ops::reshape(ops::sum(grad, std::nullopt, false, std::nullopt), DimVector{});
  int64_t d = wrap_dim(dimension, nd, "unfold_backward");
  int64_t n = grad->size(d);
  Tensor g = ops::movedim(grad, DimVector{-1}, DimVector{d + 1});
  DimVector merged = self.sizes;
  merged[d] = n * size;
  g = ops::reshape(g, merged);
  Tensor z = ops::zeros(self.sizes, grad->dtype(), grad->device());
  return ops::index_add(z, d, window_index(n, size, step, grad->device()), g, Scalar(int64_t(1)),
                        Tensor());
}

// tensor_split at indices: pieces may overlap or repeat when the indices are not increasing, so
// in that case each piece's gradient is added at its place.
inline Tensor tensor_split_indices_backward(const std::vector<Tensor>& grads, const InputMeta& self,
                                            const DimVector& indices, int64_t dim) {
  int64_t d = wrap_dim(dim, self.sizes.size(), "tensor_split_backward");
  int64_t size = self.sizes[d];
  std::vector<int64_t> starts;
  int64_t start = 0;
  bool monotonic = true;
  for (int64_t idx : indices) {
    int64_t stop = idx < 0 ? idx + size : idx;
    stop = std::min(std::max<int64_t>(stop, 0), size);
    monotonic = monotonic && stop >= start;
    starts.push_back(start);
    start = stop;
  }
  starts.push_back(start);
  if (monotonic) return split_backward(grads, self, d);
  Tensor total = zeros_like_meta(self);
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i]->size(d) == 0) continue;
    total = ops::add(total, narrow_backward(grads[i], self, d, starts[i]), Scalar(int64_t(1)),
                     Tensor());
  }
  return total;
}

// roll: roll back.
inline Tensor roll_backward(const Tensor& grad, const DimVector& shifts, const DimVector& dims) {
  DimVector back;
  for (int64_t s : shifts) back.push_back(-s);
  return ops::roll(grad, back, dims);
}

// repeat: grad viewed as (r0, s0, r1, s1, ...) summed over the repeat dims.
inline Tensor repeat_backward(const Tensor& grad, const InputMeta& self, const DimVector& repeats) {
  int64_t n = repeats.size(), lead = n - self.sizes.size();
  DimVector split, sum_dims;
  for (int64_t i = 0; i < n; ++i) {
    int64_t s = i < lead ? 1 : self.sizes[i - lead];
    sum_dims.push_back(split.size());
    split.push_back(repeats[i]);
    split.push_back(s);
  }
  Tensor g = ops::reshape(grad, split);
  g = ops::sum(g, sum_dims, false, std::nullopt);
  return ops::reshape(g, self.sizes);
}
inline DimVector tile_repeats(const DimVector& dims, int64_t ndim) {
  DimVector reps = dims;
  while (static_cast<int64_t>(reps.size()) < ndim) reps.insert(0, 1);
  return reps;
}

// repeat_interleave: each output slice adds into the input slice it copies (index_add).
inline Tensor repeat_interleave_backward(const Tensor& grad, const InputMeta& self,
                                         const TensorOrScalar& repeats,
                                         std::optional<int64_t> dim) {
  bool flat = !dim || self.sizes.empty();
  int64_t d = flat ? 0 : wrap_dim(*dim, self.sizes.size(), "repeat_interleave_backward");
  int64_t n = flat ? 1 : self.sizes[d];
  if (flat)
    for (int64_t s : self.sizes) n *= s;
  Tensor src = ops::arange(Scalar(n), ScalarType::Int64, grad->device());
  Tensor idx = ops::repeat_interleave(src, repeats, 0, std::nullopt);
  DimVector zsizes = flat ? DimVector{n} : self.sizes;
  Tensor z = ops::zeros(zsizes, grad->dtype(), grad->device());
  Tensor r = ops::index_add(z, d, idx, grad, Scalar(int64_t(1)), Tensor());
  return flat ? ops::reshape(r, self.sizes) : r;
}

// meshgrid: output i is input i expanded; sum it over every other dim.
inline std::vector<Tensor> meshgrid_backward(const std::vector<Tensor>& grads,
                                             const std::vector<InputMeta>& inputs,
                                             const std::optional<std::string>& indexing) {
  int64_t n = inputs.size();
  bool swap = indexing.value_or("ij") == "xy" && n >= 2;
  std::vector<Tensor> out;
  for (int64_t i = 0; i < n; ++i) {
    int64_t pos = swap && i < 2 ? 1 - i : i;  // the grid dim input i runs along
    DimVector others;
    for (int64_t k = 0; k < n; ++k)
      if (k != pos) others.push_back(k);
    Tensor g = others.empty() ? grads[i] : ops::sum(grads[i], others, false, std::nullopt);
    out.push_back(ops::reshape(g, inputs[i].sizes));
  }
  return out;
}

// ---- indexing ----------------------------------------------------------------------------------

inline Tensor zeros_for(const Tensor& grad, const DimVector& sizes) {
  return ops::new_zeros(grad, sizes, std::nullopt, std::nullopt);
}

inline Tensor index_select_backward(const Tensor& grad, const InputMeta& self, int64_t dim,
                                    const Tensor& index) {
  if (self.sizes.empty())
    return ops::reshape(ops::sum(grad, std::nullopt, false, std::nullopt), DimVector{});
  return ops::index_add(zeros_for(grad, self.sizes), dim, ops::reshape(index, DimVector{-1}), grad,
                        Scalar(int64_t(1)), Tensor());
}

inline Tensor gather_backward(const Tensor& grad, const InputMeta& self, int64_t dim,
                              const Tensor& index) {
  return ops::scatter_add(zeros_for(grad, self.sizes), dim, index, grad, Tensor());
}

// scatter's `reduce` ('add' sums like scatter_add; 'multiply' is not differentiable here).
inline void check_scatter_reduce_arg(const std::optional<std::string>& reduce) {
  EMBER_CHECK_KIND(!reduce || *reduce == "add", NotImplemented,
                   "scatter(): the derivative with reduce='", reduce.value_or(""),
                   "' is not implemented; use scatter_reduce(..., reduce='prod') instead");
}
inline Tensor scatter_backward_self(const Tensor& grad, int64_t dim, const Tensor& index,
                                    const std::optional<std::string>& reduce) {
  check_scatter_reduce_arg(reduce);
  if (reduce) return grad;
  return ops::scatter(grad, dim, index, Scalar(0.0), std::nullopt, Tensor());
}
inline Tensor scatter_backward_src(const Tensor& grad, int64_t dim, const Tensor& index,
                                   const std::optional<std::string>& reduce) {
  check_scatter_reduce_arg(reduce);
  return ops::gather(grad, dim, index, false, Tensor());
}

// 1.0 where cond holds, else 0.0, in grad's dtype.
inline Tensor as_float(const Tensor& cond, const Tensor& like) {
  return ops::_to_dtype(cond, like->dtype(), false);
}

// scatter_reduce: `which` 0 = d/dself, 1 = d/dsrc.
inline Tensor scatter_reduce_backward(int which, const Tensor& grad, const Tensor& self,
                                      int64_t dim, const Tensor& index, const Tensor& src,
                                      const std::string& reduce, bool include_self,
                                      const Tensor& result) {
  const Scalar one(int64_t(1));
  Tensor g_self, g_src;
  if (reduce == "sum") {
    g_self = grad;
    g_src = ops::gather(grad, dim, index, false, Tensor());
  } else if (reduce == "mean") {
    // Each output element is the mean of n contributions (itself counted when include_self).
    Tensor n = include_self ? ops::ones_like(grad, std::nullopt, std::nullopt)
                            : ops::zeros_like(grad, std::nullopt, std::nullopt);
    n = ops::scatter_add(n, dim, index, ops::ones_like(src, grad->dtype(), std::nullopt), Tensor());
    n = ops::masked_fill(n, ops::eq(n, TensorOrScalar(Scalar(int64_t(0))), Tensor()),
                         TensorOrScalar(Scalar(int64_t(1))));
    g_self = ops::div(grad, TensorOrScalar(n), std::nullopt, Tensor());
    g_src = ops::gather(g_self, dim, index, false, Tensor());
  } else if (reduce == "amax" || reduce == "amin") {
    // The gradient is shared evenly among the elements equal to the result.
    Tensor picked = ops::gather(result, dim, index, false, Tensor());
    Tensor self_hit = as_float(ops::eq(self, TensorOrScalar(result), Tensor()), grad);
    if (!include_self)
      self_hit = ops::scatter(self_hit, dim, index, Scalar(0.0), std::nullopt, Tensor());
    Tensor src_hit = as_float(ops::eq(src, TensorOrScalar(picked), Tensor()), grad);
    Tensor count = ops::scatter_add(self_hit, dim, index, src_hit, Tensor());
    count = ops::masked_fill(count, ops::eq(count, TensorOrScalar(Scalar(int64_t(0))), Tensor()),
                             TensorOrScalar(Scalar(int64_t(1))));
    Tensor share = ops::div(grad, TensorOrScalar(count), std::nullopt, Tensor());
    g_self = ops::mul(self_hit, TensorOrScalar(share), Tensor());
    g_src = ops::mul(src_hit, TensorOrScalar(ops::gather(share, dim, index, false, Tensor())),
                     Tensor());
  } else if (reduce == "prod") {
    // d/dx of a product is the product of the other factors. Dividing the result by x fails
    // where x is 0, so those are recomputed with x replaced by 1 (exact when x is the only zero
    // among its factors; with two zeros the product of the others is 0 anyway).
    Tensor self_zero = ops::eq(self, TensorOrScalar(Scalar(int64_t(0))), Tensor());
    Tensor self1 = ops::masked_fill(self, self_zero, TensorOrScalar(Scalar(int64_t(1))));
    if (which == 0) {
      // The product of the other factors: the reduction over (self with zeros replaced by 1),
      // divided by that 1 or by self. Untouched elements come out as self / self = 1.
      // Without include_self, scattered-into elements are replaced; the others pass through.
      if (!include_self) return ops::scatter(grad, dim, index, Scalar(0.0), std::nullopt, Tensor());
      Tensor others = ops::div(ops::scatter_reduce(self1, dim, index, src, reduce, true, Tensor()),
                               TensorOrScalar(self1), std::nullopt, Tensor());
      return ops::mul(grad, TensorOrScalar(others), Tensor());
    }
    Tensor src_zero = ops::eq(src, TensorOrScalar(Scalar(int64_t(0))), Tensor());
    Tensor src1 = ops::masked_fill(src, src_zero, TensorOrScalar(Scalar(int64_t(1))));
    // Product of every factor of the target except this src element: the reduction over
    // (src with this element's zero replaced by 1), divided by the element (1 for zeros).
    Tensor with1 = ops::scatter_reduce(self, dim, index, src1, reduce, include_self, Tensor());
    Tensor nz = ops::scatter_add(ops::zeros_like(grad, std::nullopt, std::nullopt), dim, index,
                                 as_float(src_zero, grad), Tensor());
    // For a nonzero element: result / src. For a zero element: product of the rest, which is
    // with1 / 1 if it is the only zero among src's factors for that target, else 0.
    Tensor picked_full = ops::gather(result, dim, index, false, Tensor());
    Tensor picked_with1 = ops::gather(with1, dim, index, false, Tensor());
    Tensor zeros_at = ops::gather(nz, dim, index, false, Tensor());
    Tensor only_zero = ops::logical_and(
        src_zero, ops::eq(zeros_at, TensorOrScalar(Scalar(int64_t(1))), Tensor()), Tensor());
    Tensor others = ops::where(
        src_zero,
        TensorOrScalar(ops::where(only_zero, TensorOrScalar(picked_with1),
                                  TensorOrScalar(Scalar(0.0)), Tensor())),
        TensorOrScalar(ops::div(picked_full, TensorOrScalar(src1), std::nullopt, Tensor())),
        Tensor());
    return ops::mul(ops::gather(grad, dim, index, false, Tensor()), TensorOrScalar(others),
                    Tensor());
  } else {
    EMBER_FAIL(Value, "scatter_reduce backward: unknown reduce '", reduce, "'");
  }
  if (which == 0) {
    // Without include_self, self's value at scattered positions is replaced: no gradient there.
    if (!include_self)
      g_self = ops::scatter(g_self, dim, index, Scalar(0.0), std::nullopt, Tensor());
    return g_self;
  }
  return g_src;
}

inline Tensor index_add_backward_source(const Tensor& grad, int64_t dim, const Tensor& index,
                                        const InputMeta& source, const Scalar& alpha) {
  Tensor g = grad->dim() == 0 ? ops::reshape(grad, DimVector{1}) : grad;
  Tensor r = ops::index_select(g, grad->dim() == 0 ? 0 : dim, ops::reshape(index, DimVector{-1}),
                               Tensor());
  if (!(alpha.is_integral() && alpha.to_int() == 1))
    r = ops::mul(r, TensorOrScalar(alpha), Tensor());
  return ops::reshape(r, source.sizes);
}
inline Tensor index_fill_grad(const Tensor& grad, int64_t dim, const Tensor& index) {
  return ops::index_fill(grad, dim, index, TensorOrScalar(Scalar(0.0)));
}
inline Tensor index_fill_backward_value(const Tensor& grad, int64_t dim, const Tensor& index) {
  Tensor g = grad->dim() == 0 ? ops::reshape(grad, DimVector{1}) : grad;
  Tensor picked = ops::index_select(g, grad->dim() == 0 ? 0 : dim,
                                    ops::reshape(index, DimVector{-1}), Tensor());
  return ops::sum(picked, std::nullopt, false, std::nullopt);
}

inline Tensor index_put_backward_self(const Tensor& grad, const std::vector<Tensor>& indices,
                                      bool accumulate) {
  if (accumulate) return grad;
  return ops::index_put(grad, indices, ops::zeros(DimVector{}, grad->dtype(), grad->device()),
                        false);
}
inline Tensor index_backward(const Tensor& grad, const InputMeta& self,
                             const std::vector<Tensor>& indices) {
  return ops::index_put(zeros_for(grad, self.sizes), indices, grad, true);
}

inline Tensor masked_fill_backward_value(const Tensor& grad, const Tensor& mask) {
  Tensor picked = ops::where(mask, TensorOrScalar(grad), TensorOrScalar(Scalar(0.0)), Tensor());
  return ops::sum(picked, std::nullopt, false, std::nullopt);
}
inline Tensor masked_scatter_backward_source(const Tensor& grad, const Tensor& mask,
                                             const InputMeta& source) {
  int64_t n = 1;
  for (int64_t s : source.sizes) n *= s;
  Tensor picked = ops::masked_select(grad, mask, Tensor());
  int64_t k = picked->numel();
  // The first k source elements were used; the rest get zeros.
  if (k < n) picked = ops::cat({picked, zeros_for(grad, DimVector{n - k})}, 0, Tensor());
  return ops::reshape(picked, source.sizes);
}
inline Tensor masked_select_backward(const Tensor& grad, const InputMeta& self,
                                     const Tensor& mask) {
  DimVector shape = broadcast_shapes(self.sizes, mask->sizes(), "masked_select_backward");
  Tensor m = ops::expand(mask, shape);
  return ops::masked_scatter(zeros_for(grad, shape), m, grad);
}

inline Tensor take_backward(const Tensor& grad, const InputMeta& self, const Tensor& index) {
  int64_t n = 1;
  for (int64_t s : self.sizes) n *= s;
  Tensor idx = ops::reshape(index, DimVector{-1});
  // Negative indices count from the end.
  Tensor neg = ops::lt(idx, TensorOrScalar(Scalar(int64_t(0))), Tensor());
  idx = ops::where(
      neg, TensorOrScalar(ops::add(idx, TensorOrScalar(Scalar(n)), Scalar(int64_t(1)), Tensor())),
      TensorOrScalar(idx), Tensor());
  Tensor flat = ops::index_add(zeros_for(grad, DimVector{n}), 0, idx,
                               ops::reshape(grad, DimVector{-1}), Scalar(int64_t(1)), Tensor());
  return ops::reshape(flat, self.sizes);
}
inline Tensor take_along_dim_backward(const Tensor& grad, const InputMeta& self,
                                      const Tensor& indices, std::optional<int64_t> dim) {
  if (!dim) return take_backward(grad, self, indices);
  int64_t nd = self.sizes.size();
  int64_t d = wrap_dim(*dim, nd, "take_along_dim_backward");
  // self broadcast against indices everywhere but along dim, as the forward did.
  DimVector shape = grad->sizes();
  shape[d] = self.sizes[d];
  Tensor idx = ops::expand(indices, grad->sizes());
  return ops::scatter_add(zeros_for(grad, shape), d, idx, grad, Tensor());
}

// ---- padding ----------------------------------------------------------------------------------

// constant padding: crop what was added (negative pads of the forward add zeros back).
inline Tensor constant_pad_nd_backward(const Tensor& grad, const DimVector& pad) {
  DimVector back;
  for (int64_t p : pad) back.push_back(-p);
  return ops::constant_pad_nd(grad, back, Scalar(int64_t(0)));
}
// reflect/replicate/circular: every output position adds into the input position it read
// (the _pad_backward kernel; its own derivative is pad again, so it is differentiable twice).
inline Tensor pad_backward(const Tensor& grad, const InputMeta& self, const DimVector& pad,
                           const std::string& mode) {
  pad_detail::PadMode m = pad_detail::parse_pad_mode(mode);
  if (m == pad_detail::PadMode::Constant) return constant_pad_nd_backward(grad, pad);
  return ops::_pad_backward(grad, self.sizes, pad, mode);
}

}  // namespace formulas
}  // namespace autograd
}  // namespace ember
