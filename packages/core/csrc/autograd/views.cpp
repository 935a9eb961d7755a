// View tracking and in-place writes into views (see views.h for the model).
#include "autograd/views.h"

#include <algorithm>
#include <mutex>
#include <numeric>
#include <utility>

#include "autograd/anomaly_stack_prefetch.h"
#include "autograd/untracked_views.h"
#include "kernels/iterator.h"
#include "ops.h"

namespace ember {
namespace autograd {

namespace {
// The dtypes that take part in autograd: floating and complex.
bool differentiable(ScalarType t) { return is_floating(t) || is_complex(t); }
}  // namespace

namespace {

int64_t numel_of(const DimVector& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

// One past the largest storage index (relative to the first element) a layout touches.
int64_t extent_of(const DimVector& sizes, const DimVector& strides) {
  int64_t ext = 1;
  for (int64_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return 0;
    ext += (sizes[d] - 1) * strides[d];
  }
  return ext;
}

// A layout whose elements fill their extent exactly (contiguous up to a permutation of dims).
bool is_dense(const DimVector& sizes, const DimVector& strides) {
  int64_t n = numel_of(sizes);
  return n == 0 || (!maybe_overlapping(sizes, strides) && extent_of(sizes, strides) == n);
}

std::mutex g_refresh_mutex;  // guards rebuilding a view's grad_fn from two threads

// Gradient of a view w.r.t. the tensor it was taken from (possibly the root base).
class AsStridedViewBackward final : public Node {
 public:
  std::string name() const override { return name_; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> out(1);
    if (!grads[0] || !should_compute(0)) return out;
    out[0] = strided_view_backward(grads[0], src, view, dtype);
    return out;
  }
  Geometry src, view;
  ScalarType dtype = ScalarType::Float32;
  // PyTorch's name for the view: x[1] is SelectBackward0, x[1:3] SliceBackward0 (see
  // record_strided_view); as_strided and rebuilt views are AsStridedBackward0.
  const char* name_ = "AsStridedBackward0";
};

// grad_fn of a base whose view was written in place: the view's region of the gradient goes
// through the in-place op's node `fn`, the rest to the base's previous history (edge 0). Edges
// 1.. are fn's other inputs.
class CopySlices final : public Node {
 public:
  std::string name() const override { return "CopySlices"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> out(next_edges.size());
    const Tensor& grad = grads[0];
    if (!grad) return out;
    // The gradient laid out like the base, so the view's strides and offset address its region.
    Tensor result = ops::empty_strided(base.sizes, base.strides, grad->dtype(), grad->device());
    ops::copy_(result, grad, false);
    Tensor region = ops::as_strided(result, view.sizes, view.strides, view.offset - base.offset);
    std::vector<Tensor> res = fn->apply({ops::clone(region)});
    if (should_compute(0)) {
      if (!res.empty() && res[0]) {
        ops::copy_(region, res[0], false);
      } else {
        ops::zero_(region);
      }
      out[0] = result;
    }
    for (size_t i = 1; i < out.size() && i < res.size(); ++i)
      if (should_compute(i)) out[i] = res[i];
    return out;
  }
  void release_variables() override { fn->release_variables(); }
  Geometry base, view;
  std::shared_ptr<Node> fn;
};

// Rebuilds t's grad_fn as a strided view of its base's current history; returns the old one, for
// the caller to drop outside its lock (its hooks may hold Python objects).
std::shared_ptr<Node> regenerate(const Tensor& t, AutogradMeta* m) {
  const Tensor& base = t->base();
  auto node = std::make_shared<AsStridedViewBackward>();
  node->src = Geometry(base);
  node->view = Geometry(t);
  node->dtype = base->dtype();
  node->next_edges = {gradient_edge(base)};
  if (!m) m = &materialize_meta(t);
  std::shared_ptr<Node> old = std::exchange(m->grad_fn, std::move(node));
  m->output_nr = 0;
  m->requires_grad = true;
  m->is_view = true;
  m->view_version = t->version();
  return old;
}

void mark_one(const Tensor& view, const Tensor& src, bool no_grad) {
  if (!view || !view->base() || view->storage() != src->storage()) return;  // a copy
  if (!differentiable(view->dtype())) return;
  AutogradMeta& m = materialize_meta(view);
  m.is_view = true;
  m.view_no_grad = no_grad;
  m.view_version = view->version();
  // A view of an output of a multi-output view op inherits its restriction (as PyTorch).
  if (!no_grad) {
    const AutogradMeta* sm = src->autograd_meta();
    m.multi_output_view = sm && sm->multi_output_view;
  }
  // As in PyTorch, a view made in no_grad mode of a tensor that requires grad reports
  // requires_grad (as a leaf without history): gradients do not flow back to the base.
  if (no_grad) m.requires_grad = true;
}

}  // namespace

bool maybe_overlapping(const DimVector& sizes, const DimVector& strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims with size > 1
  for (int64_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return false;  // no elements at all
    if (sizes[d] > 1) dims.push_back({strides[d], sizes[d]});
  }
  std::sort(dims.begin(), dims.end());
  int64_t span = 0;  // the dims so far reach offsets [0, span]
  for (auto [stride, size] : dims) {
    if (stride <= span) return true;
    span += (size - 1) * stride;
  }
  return false;
}

bool is_tracked_view(const Tensor& t) {
  if (!t->base()) return false;
  AutogradMeta* m = t->autograd_meta();
  if (!m || m->is_view) return true;
  return !m->grad_fn && !m->requires_grad;
}

void refresh_view(const Tensor& t) {
  AutogradMeta* m = t->autograd_meta();
  if (m) {
    if (m->is_view) {
      if (m->view_version == t->version()) return;  // history is current
    } else if (m->grad_fn || m->requires_grad) {
      return;  // a leaf, or a non-view op's result with its own history
    }
  }
  if (!differentiable(t->dtype())) return;
  const Tensor& base = t->base();
  AutogradMeta* bm = base->autograd_meta();
  if (!bm || !bm->requires_grad || base->dtype() != t->dtype()) {
    if (m && m->is_view) m->view_version = t->version();
    return;
  }
  // The regenerated nodes' anomaly-mode stack is captured before the lock (see
  // AnomalyStackPrefetch): capturing under it can deadlock with a thread holding the GIL.
  AnomalyStackPrefetch stack;
  std::shared_ptr<Node> old;  // released after the lock
  std::lock_guard<std::mutex> lock(g_refresh_mutex);
  m = t->autograd_meta();
  if (m && m->is_view && m->view_version == t->version()) return;  // another thread did it
  old = regenerate(t, m);
}

void check_inplace_view(const Tensor& self, const char* op) {
  if (!is_tracked_view(self) || !differentiable(self->dtype())) return;
  const Tensor& base = self->base();
  AutogradMeta* bm = base->autograd_meta();
  AutogradMeta* m0 = self->autograd_meta();
  bool no_grad_view = m0 && m0->view_no_grad && !m0->grad_fn;
  // PyTorch's wording, without the op's name in front (as its messages).
  if (m0 && m0->multi_output_view && grad_enabled()) {
    static const char* const kMultiOutput =
        " This view is the output of a function that returns multiple views. Such functions do "
        "not allow the output views to be modified inplace. You should replace the inplace "
        "operation by an out-of-place one.";
    if (!m0->grad_fn)  // made from a tensor requiring no grad (untracked_views.h)
      EMBER_FAIL(Runtime,
                 "A view was created in no_grad mode and is being modified inplace with grad "
                 "mode enabled.",
                 kMultiOutput);
    // PyTorch names the node without its "Backward<n>" suffix: "Output 0 of Split ...".
    std::string fn = m0->grad_fn->name();
    const size_t cut = fn.rfind("Backward");
    if (cut != std::string::npos && cut > 0) fn.resize(cut);
    EMBER_FAIL(Runtime, "Output ", m0->output_nr, " of ", fn,
               " is a view and is being modified inplace.", kMultiOutput);
  }
  // As torch: a view with history whose base is a leaf. The base need not require grad: the
  // view may hang from another view of it made a leaf by requires_grad_() (set_requires_grad).
  const bool base_is_leaf = !bm || !bm->grad_fn;
  const bool leaf_with_grad = bm && bm->requires_grad && !bm->grad_fn;
  if ((leaf_with_grad || (base_is_leaf && m0 && m0->grad_fn)) && !no_grad_view)
    EMBER_FAIL(Runtime,
               "a view of a leaf Variable that requires grad is being used in an in-place "
               "operation.");
  AutogradMeta* m = self->autograd_meta();
  if (m && m->view_no_grad && !m->grad_fn)
    EMBER_FAIL(Runtime,
               "A view was created in no_grad mode and is being modified inplace with grad mode "
               "enabled. Given that this use case is ambiguous and error-prone, it is forbidden. "
               "You can clarify your code by moving both the view and the inplace either both "
               "inside the no_grad block (if you don't want the inplace to be tracked) or both "
               "outside (if you want the inplace to be tracked).");
  if (bm && bm->requires_grad) {
    EMBER_CHECK_KIND(base->dtype() == self->dtype(), NotImplemented, op,
                     ": in-place write into a view of dtype ", dtype_name(self->dtype()),
                     " of a tensor of dtype ", dtype_name(base->dtype()),
                     " that requires grad is not differentiable");
  }
}

void mark_view(const Tensor& view, const Tensor& src) { mark_one(view, src, false); }
void mark_view(const std::vector<Tensor>& views, const Tensor& src) {
  for (const Tensor& v : views) {
    mark_one(v, src, false);
    // The ops PyTorch makes multi-output view nodes of (chunk records SplitBackward0); its
    // tensor_split/hsplit/vsplit are composites of single views, so their outputs stay writable.
    AutogradMeta* m = v ? v->autograd_meta() : nullptr;
    if (!m || !m->is_view || !m->grad_fn) continue;
    const std::string name = m->grad_fn->name();
    if (name == "SplitBackward0" || name == "SplitWithSizesBackward0" || name == "UnbindBackward0")
      m->multi_output_view = true;
  }
}
void mark_view(const std::vector<Tensor>& views, const std::vector<Tensor>& srcs) {
  for (size_t i = 0; i < views.size() && i < srcs.size(); ++i) mark_one(views[i], srcs[i], false);
}

Tensor no_grad_view(Tensor view, const Tensor& src) {
  if (requires_grad(src)) mark_one(view, src, true);
  return view;
}
std::vector<Tensor> no_grad_view(std::vector<Tensor> views, const Tensor& src) {
  if (requires_grad(src))
    for (const Tensor& v : views) mark_one(v, src, true);
  return views;
}
std::vector<Tensor> no_grad_view(std::vector<Tensor> views, const std::vector<Tensor>& srcs) {
  for (size_t i = 0; i < views.size() && i < srcs.size(); ++i)
    if (requires_grad(srcs[i])) mark_one(views[i], srcs[i], true);
  return views;
}

namespace {
// Flags one output of a multi-output view op (or a view of one) made without history.
void flag_multi_output(const Tensor& view, const Tensor& src) {
  if (!view || !view->base() || view->storage() != src->storage()) return;  // a copy
  if (!differentiable(view->dtype())) return;
  AutogradMeta& m = materialize_meta(view);
  if (m.grad_fn || m.requires_grad) return;  // not a plain untracked view
  m.is_view = true;
  m.view_version = view->version();
  m.multi_output_view = true;
}

bool flags_views(const Tensor& src, bool multi_output) {
  if (multi_output) return true;
  const AutogradMeta* m = src ? src->autograd_meta() : nullptr;
  return m && m->multi_output_view;
}
}  // namespace

Tensor untracked_view(Tensor view, const Tensor& src, bool multi_output) {
  if (flags_views(src, multi_output)) flag_multi_output(view, src);
  return view;
}
std::vector<Tensor> untracked_view(std::vector<Tensor> views, const Tensor& src,
                                   bool multi_output) {
  if (flags_views(src, multi_output))
    for (const Tensor& v : views) flag_multi_output(v, src);
  return views;
}
std::vector<Tensor> untracked_view(std::vector<Tensor> views, const std::vector<Tensor>& srcs,
                                   bool multi_output) {
  for (size_t i = 0; i < views.size() && i < srcs.size(); ++i)
    if (flags_views(srcs[i], multi_output)) flag_multi_output(views[i], srcs[i]);
  return views;
}

void rebase_view_history(const Tensor& self, const std::shared_ptr<Node>& fn) {
  if (!differentiable(self->dtype())) return;
  const Tensor& base = self->base();
  if (base->dtype() != self->dtype()) {
    // Only reachable when nothing about the base requires grad (check_inplace_view refuses the
    // rest): the view keeps fn as its own history.
    return;
  }
  EMBER_CHECK_KIND(
      !maybe_overlapping(base->sizes(), base->strides()), NotImplemented,
      "in-place write into a view of a tensor whose elements overlap in memory (shape ",
      shape_str(base->sizes()), ", strides ", shape_str(base->strides()),
      ") is not differentiable; clone() it first");
  auto cs = std::make_shared<CopySlices>();
  cs->base = Geometry(base);
  cs->view = Geometry(self);
  cs->fn = fn;
  cs->next_edges.reserve(fn->next_edges.size());
  cs->next_edges.push_back(gradient_edge(base));
  for (size_t i = 1; i < fn->next_edges.size(); ++i) cs->next_edges.push_back(fn->next_edges[i]);
  set_history(base, cs);
  regenerate(self, self->autograd_meta());
}

void mark_inplace_view(const Tensor& self) {
  AutogradMeta* m = self->autograd_meta();
  if (!m) return;
  m->is_view = true;
  m->view_version = self->version();
}

void record_strided_view(const Tensor& src_in, const Tensor& view, const char* name) {
  if (!differentiable(view->dtype()) || !requires_grad(src_in)) return;
  if (!grad_enabled()) {
    mark_one(view, src_in, true);
    return;
  }
  // A src whose elements overlap (expanded) cannot hold one gradient per memory location: take
  // the view from the base instead, whose history covers that memory.
  Tensor src = src_in;
  const Tensor& base = src->base();
  if (base && maybe_overlapping(src->sizes(), src->strides()) && is_tracked_view(src) &&
      requires_grad(base) && base->dtype() == src->dtype())
    src = base;
  EMBER_CHECK_KIND(!maybe_overlapping(src->sizes(), src->strides()), NotImplemented,
                   "a strided view of a tensor whose elements overlap in memory (shape ",
                   shape_str(src->sizes()), ", strides ", shape_str(src->strides()),
                   ") is not differentiable; call contiguous() on it first");
  auto node = std::make_shared<AsStridedViewBackward>();
  node->src = Geometry(src);
  node->view = Geometry(view);
  node->dtype = src->dtype();
  node->name_ = name;
  node->next_edges = {gradient_edge(src)};
  set_history(view, node);
  mark_one(view, src, false);
}

void record_inplace_strided(const Tensor& self, const Geometry& before, const Edge& old_edge) {
  auto node = std::make_shared<AsStridedViewBackward>();
  node->src = before;
  node->view = Geometry(self);
  node->dtype = self->dtype();
  node->next_edges = {old_edge};
  set_history(self, node);
}

void mark_nondifferentiable_view(const Tensor& view) {
  if (!view->base() || !differentiable(view->dtype()) || view->autograd_meta()) return;
  AutogradMeta& m = materialize_meta(view);
  m.is_view = true;
  m.view_version = view->version();
}

void check_detach_inplace(const Tensor& t) {
  if (is_tracked_view(t) && requires_grad(t))
    EMBER_FAIL(Runtime,
               "Can't detach views in-place. Use detach() instead. If you are using "
               "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set "
               "as True, gradients are views of DDP buckets, and hence detach_() cannot be "
               "called on these gradients. To fix this error, please refer to the "
               "Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution.");
}

void record_view(const Tensor& self, const Tensor& view) { record_strided_view(self, view); }

Tensor strided_view_backward(const Tensor& grad, const Geometry& src, const Geometry& view,
                             ScalarType dtype) {
  // Work in a flat buffer spanning the memory of both src and the view (as_strided may reach
  // outside src; those elements are not src's and get no gradient, as in PyTorch).
  Device device = grad->device();
  int64_t ext = extent_of(src.sizes, src.strides);
  int64_t rel = view.offset - src.offset;
  int64_t vn = numel_of(view.sizes);
  int64_t lo = 0, hi = ext;
  if (vn > 0) {
    lo = std::min<int64_t>(lo, rel);
    hi = std::max<int64_t>(hi, rel + extent_of(view.sizes, view.strides));
  }
  int64_t span = hi - lo;
  bool differentiable = grad_enabled() && requires_grad(grad);
  Tensor flat;
  if (vn == 0 || ext == 0) {
    flat = ops::zeros(DimVector{span}, dtype, device);
  } else if (!differentiable && !maybe_overlapping(view.sizes, view.strides)) {
    flat = ops::zeros(DimVector{span}, dtype, device);
    dispatch::_copy_from(grad, make_view(flat, view.sizes, view.strides, rel - lo), false);
  } else {
    // Storage positions of the view's elements, then a summing scatter (overlapping views).
    Tensor pos = ops::arange(Scalar(span), ScalarType::Int64, device);
    Tensor idx =
        ops::reshape(ops::as_strided(pos, view.sizes, view.strides, rel - lo), DimVector{-1});
    Tensor g = grad->dtype() == dtype ? grad : ops::_to_dtype(grad, dtype, false);
    flat = ops::index_add(ops::zeros(DimVector{span}, dtype, device), 0, idx,
                          ops::reshape(g, DimVector{-1}), Scalar(int64_t(1)), Tensor());
  }
  Tensor r = ops::as_strided(flat, src.sizes, src.strides, -lo);
  // A layout with holes (a strided leaf) or a larger buffer gets a compact gradient.
  if (!is_dense(src.sizes, src.strides) || span != ext) r = ops::contiguous(r);
  return r;
}

Tensor as_strided_autograd(const Tensor& self, const DimVector& size, const DimVector& stride,
                           std::optional<int64_t> storage_offset) {
  Tensor r = dispatch::as_strided(self, size, stride, storage_offset);
  record_strided_view(self, r);
  return r;
}

Tensor as_strided__autograd(const Tensor& self, const DimVector& size, const DimVector& stride,
                            std::optional<int64_t> storage_offset) {
  if (!grad_enabled() || !requires_grad(self))
    return dispatch::as_strided_(self, size, stride, storage_offset);
  check_inplace(self, "as_strided_");
  const Geometry before(self);
  const Edge old_edge = gradient_edge(self);
  const bool was_view = is_tracked_view(self);
  dispatch::as_strided_(self, size, stride, storage_offset);
  record_inplace_strided(self, before, old_edge);
  if (was_view) mark_inplace_view(self);
  return self;
}

Tensor view_dtype_autograd(const Tensor& self, ScalarType dtype) {
  Tensor r = dispatch::view(self, dtype);
  if (dtype == self->dtype() && requires_grad(self)) mark_nondifferentiable_view(r);
  return r;
}

}  // namespace autograd
}  // namespace ember
