// Autograd for views and for in-place writes into them.
//
// A view shares its base's storage and version counter (core/tensor.h keeps `base()`, always the
// root tensor). Autograd tracks it like PyTorch does:
//  - outputs of view ops are marked (`mark_view`) and keep the view op's node as grad_fn;
//  - an in-place op on a view rewrites the BASE's history with a CopySlices node: the base's old
//    history receives the gradient outside the view's region, the in-place op's node the region;
//  - once the shared version counter moved on (an in-place write into the base or any of its
//    views), a view's grad_fn is rebuilt on first use as an AsStridedBackward over the base's
//    current grad_fn (`refresh_view`, called from autograd::meta()).
// A tensor with a base but without autograd state (made while nothing required grad, or by
// internal code) counts as a view; one that has its own history without being marked (the result
// of a non-view op that happens to be an internal view) or that is a leaf does not.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "autograd/autograd.h"

namespace ember {
namespace autograd {

// Sizes, strides and storage offset of a tensor.
struct Geometry {
  DimVector sizes, strides;
  int64_t offset = 0;
  Geometry() = default;
  explicit Geometry(const Tensor& t)
      : sizes(t->sizes()), strides(t->strides()), offset(t->storage_offset()) {}
};

// True when some elements of a tensor of this layout may share memory (stride 0, or strides too
// small for the sizes). Conservative: false means certainly no overlap.
bool maybe_overlapping(const DimVector& sizes, const DimVector& strides);

// Whether in-place writes into t must rewrite t->base()'s history.
bool is_tracked_view(const Tensor& t);

// Generated wrappers of view ops (ops tagged `view` in ops/*.yaml): mark their outputs as views
// (grad path), or remember views of tensors requiring grad made in no_grad mode (no-grad path).
void mark_view(const Tensor& view, const Tensor& src);
void mark_view(const std::vector<Tensor>& views, const Tensor& src);
void mark_view(const std::vector<Tensor>& views, const std::vector<Tensor>& srcs);
Tensor no_grad_view(Tensor view, const Tensor& src);
std::vector<Tensor> no_grad_view(std::vector<Tensor> views, const Tensor& src);
std::vector<Tensor> no_grad_view(std::vector<Tensor> views, const std::vector<Tensor>& srcs);

// Generated wrappers of in-place ops, after set_history(self, fn): when self is a tracked view,
// moves fn under a CopySlices node that becomes the base's grad_fn, and rebuilds self's grad_fn.
void rebase_view_history(const Tensor& self, const std::shared_ptr<Node>& fn);
// In-place view ops (t_, transpose_, squeeze_, ...) on a view: self stays a view of its base.
void mark_inplace_view(const Tensor& self);

// A view computed from sizes/strides (basic indexing, as_strided): records a grad_fn that puts
// its gradient back into src's layout (grad mode), or marks a no-grad view of src. `name` is
// the grad_fn's name (a string literal: PyTorch's for the indexing that made the view).
void record_strided_view(const Tensor& src, const Tensor& view,
                         const char* name = "AsStridedBackward0");
// as_strided_ on a tensor that requires grad: the new layout's history from the old one.
void record_inplace_strided(const Tensor& self, const Geometry& before, const Edge& old_edge);

// A view without history (view(dtype) is not differentiable, as in PyTorch): it gets one only
// if its base is later written in place.
void mark_nondifferentiable_view(const Tensor& view);

// The `autograd: manual` view ops of ops/views.yaml: ops::<op> calls these, which run the
// composite (ops/view_ops.cpp) through dispatch:: and record its history here, so the composite
// knows nothing of autograd.
// as_strided: an AsStridedViewBackward node (grad mode), or a no-grad view of self.
Tensor as_strided_autograd(const Tensor& self, const DimVector& size, const DimVector& stride,
                           std::optional<int64_t> storage_offset);
// as_strided_ on a tensor that requires grad: the new layout's history reads the old one.
Tensor as_strided__autograd(const Tensor& self, const DimVector& size, const DimVector& stride,
                            std::optional<int64_t> storage_offset);
// view(dtype) to self's own dtype: a view without history (mark_nondifferentiable_view).
Tensor view_dtype_autograd(const Tensor& self, ScalarType dtype);

// Tensor.detach_() is refused on views (as in PyTorch).
void check_detach_inplace(const Tensor& t);

// The gradient w.r.t. a tensor of geometry `src` of its view of geometry `view` (both in the
// same storage): grad scattered (summed where the view overlaps itself) into src's layout.
// Differentiable (uses ops::) when grad mode is on.
Tensor strided_view_backward(const Tensor& grad, const Geometry& src, const Geometry& view,
                             ScalarType dtype);

}  // namespace autograd
}  // namespace ember
