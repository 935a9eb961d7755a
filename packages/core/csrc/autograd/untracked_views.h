// Views made in grad mode of tensors that require no grad (the generated wrappers' plain path).
// They get no history, but PyTorch still remembers that an output of a multi-output view op
// (split, split_with_sizes, chunk, unbind) -- or a view of one -- may not take a recorded
// in-place write later (`a, b = x.split(2); a.mul_(w)` with w requiring grad): such views are
// flagged here and autograd::check_inplace_view refuses the write.
//
// Declared apart from views.h so that only the generated files of view ops include it.
#pragma once
#include <vector>

#include "core/tensor.h"

namespace ember {
namespace autograd {

// `multi_output`: view is an output of a multi-output view op. Otherwise the flag passes from
// src to its views. Returns the view(s) unchanged.
Tensor untracked_view(Tensor view, const Tensor& src, bool multi_output = false);
std::vector<Tensor> untracked_view(std::vector<Tensor> views, const Tensor& src,
                                   bool multi_output = false);
std::vector<Tensor> untracked_view(std::vector<Tensor> views, const std::vector<Tensor>& srcs,
                                   bool multi_output = false);

}  // namespace autograd
}  // namespace ember
