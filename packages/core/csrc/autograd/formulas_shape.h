// Derivative helpers of shape, view, indexing and list ops (cat, split, ...). Included by
// formulas.h; every helper calls ops:: so backward passes are themselves differentiable.
#pragma once
#include "autograd/autograd.h"
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

}  // namespace formulas
}  // namespace autograd
}  // namespace ember
