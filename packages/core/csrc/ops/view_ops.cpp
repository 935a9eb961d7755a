// View ops (ops/views.yaml): each computes new sizes/strides/offset over self's storage and
// returns make_view(), so the result shares storage, version counter and base with self.
// Only reshape/flatten (when the strides do not allow a view) copy.
#include <algorithm>
#include <sstream>

#include "kernels/iterator.h"
#include "ops.h"
#include "ops/list_str.h"

namespace ember {
namespace {

// Resolves one -1 in `shape` so that it holds `numel` elements.
DimVector infer_size(const DimVector& shape, int64_t numel) {
  DimVector out = shape;
  int64_t infer = -1, known = 1;
  for (int64_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      EMBER_CHECK(infer < 0, "only one dimension can be inferred");
      infer = i;
    } else if (shape[i] < 0) {
      EMBER_FAIL(Runtime, "invalid shape dimension ", shape[i], " at index ", i, " of shape ",
                 list_str(shape));
    } else {
      // Saturate instead of overflowing: a huge product just fails the size check below.
      known = (shape[i] != 0 && known > (int64_t(1) << 62) / shape[i]) ? (int64_t(1) << 62)
                                                                       : known * shape[i];
    }
  }
  if (infer >= 0) {
    EMBER_CHECK(known != 0, "cannot reshape tensor of 0 elements into shape ", list_str(shape),
                " because the unspecified dimension size -1 can be any value and is ambiguous");
    EMBER_CHECK(numel % known == 0, "shape '", list_str(shape), "' is invalid for input of size ",
                numel);
    out[infer] = numel / known;
  } else {
    EMBER_CHECK(known == numel, "shape '", list_str(shape), "' is invalid for input of size ",
                numel);
  }
  return out;
}

// Strides that let a tensor of (oldshape, oldstride) be viewed as newshape without copying,
// or false (PyTorch's computeStride): each run of dims that is contiguous in memory may be
// regrouped freely, but no new dim may span two runs.
bool compute_view_strides(const DimVector& oldshape, const DimVector& oldstride,
                          const DimVector& newshape, DimVector* newstride) {
  newstride->assign(newshape.size(), 0);
  if (oldshape.empty()) {
    newstride->assign(newshape.size(), 1);
    return true;
  }
  int64_t numel = 1;
  for (int64_t s : oldshape) numel *= s;
  if (numel == 0) {
    if (oldshape == newshape) {
      *newstride = oldstride;
    } else {
      *newstride = contiguous_strides(newshape);
    }
    return true;
  }
  int64_t view_d = newshape.size() - 1;
  int64_t chunk_base_stride = oldstride.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = oldshape.size() - 1; tensor_d >= 0; --tensor_d) {
    tensor_numel *= oldshape[tensor_d];
    if (tensor_d == 0 || (oldshape[tensor_d - 1] != 1 &&
                          oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || newshape[view_d] == 1)) {
        (*newstride)[view_d] = view_numel * chunk_base_stride;
        view_numel *= newshape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return false;
      if (tensor_d > 0) {
        chunk_base_stride = oldstride[tensor_d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

// Throws for repeated entries of already wrapped dims.
void check_unique_dims(const DimVector& dims, int64_t ndim) {
  std::vector<bool> seen(std::max<int64_t>(ndim, 1), false);
  for (int64_t d : dims) {
    EMBER_CHECK(!seen[d], "dim ", d, " appears multiple times in the list of dims");
    seen[d] = true;
  }
}

DimVector transposed_sizes(const DimVector& v, int64_t a, int64_t b) {
  DimVector out = v;
  std::swap(out[a], out[b]);
  return out;
}

// Sizes/strides of self with the given dims (sorted, unique) of size 1 removed.
void squeezed(const Tensor& self, const std::vector<bool>& drop, DimVector* sizes,
              DimVector* strides) {
  for (int64_t d = 0; d < self->dim(); ++d) {
    if (drop[d] && self->size(d) == 1) continue;
    sizes->push_back(self->size(d));
    strides->push_back(self->stride(d));
  }
}

std::vector<bool> squeeze_mask(const Tensor& self, const std::optional<DimVector>& dim,
                               const char* op) {
  std::vector<bool> drop(self->dim(), !dim.has_value());
  if (dim) {
    DimVector wrapped;
    for (int64_t d : *dim) wrapped.push_back(wrap_dim(d, self->dim(), op));
    check_unique_dims(wrapped, self->dim());
    for (int64_t d : wrapped)
      if (self->dim() > 0) drop[d] = true;  // a 0-d tensor accepts dim 0/-1 and stays 0-d
  }
  return drop;
}

// Sizes/strides for unsqueeze at an already wrapped dim.
void unsqueezed(const Tensor& self, int64_t d, DimVector* sizes, DimVector* strides) {
  *sizes = self->sizes();
  *strides = self->strides();
  int64_t st = d >= self->dim() ? 1 : self->stride(d) * self->size(d);
  sizes->insert(d, 1);
  strides->insert(d, st);
}

// Checks that a view (sizes, strides, offset) stays inside self's storage.
void check_in_storage(const Tensor& self, const DimVector& size, const DimVector& stride,
                      int64_t offset, const char* op) {
  EMBER_CHECK(offset >= 0, op, ": Tensor: invalid storage offset ", offset);
  int64_t extent = 0;  // elements needed past offset
  bool empty = false;
  for (int64_t d = 0; d < size.size(); ++d) {
    EMBER_CHECK(size[d] >= 0, op, ": Trying to create tensor with negative dimension ", size[d],
                ": ", list_str(size));
    if (size[d] == 0) empty = true;
  }
  if (empty) return;
  // Overflow-checked: huge sizes/strides must not wrap around into a "fitting" size.
  int64_t need = 0;
  bool overflow = false;
  for (int64_t d = 0; d < size.size(); ++d) {
    int64_t span = 0;
    overflow |= __builtin_mul_overflow(size[d] - 1, stride[d], &span);
    overflow |= __builtin_add_overflow(extent, span, &extent);
  }
  overflow |= __builtin_add_overflow(offset, extent, &need);
  overflow |= __builtin_add_overflow(need, int64_t(1), &need);
  overflow |= __builtin_mul_overflow(need, self->itemsize(), &need);
  EMBER_CHECK(!overflow, op, ": sizes ", list_str(size), ", strides ", list_str(stride),
              ", storage offset ", offset, " and itemsize ", self->itemsize(),
              " need a storage larger than int64 can count");
  EMBER_CHECK(static_cast<size_t>(need) <= self->storage()->nbytes, op, ": sizes ", list_str(size),
              ", strides ", list_str(stride), ", storage offset ", offset, ", and itemsize ",
              self->itemsize(), " requiring a storage size of ", need,
              " are out of bounds for storage of size ", self->storage()->nbytes);
}

}  // namespace

namespace composite {

// ---- reshaping ------------------------------------------------------------------------------

Tensor view(const Tensor& self, const DimVector& size) {
  DimVector shape = infer_size(size, self->numel());
  DimVector strides;
  EMBER_CHECK(compute_view_strides(self->sizes(), self->strides(), shape, &strides),
              "view size is not compatible with input tensor's size and stride (at least one "
              "dimension spans across two contiguous subspaces). Use .reshape(...) instead.");
  return make_view(self, std::move(shape), std::move(strides), self->storage_offset());
}

Tensor view_as(const Tensor& self, const Tensor& other) { return view(self, other->sizes()); }

Tensor view_dtype(const Tensor& self, ScalarType dtype) {
  int64_t from = self->itemsize(), to = itemsize(dtype);
  if (from == to) {
    // Same item size: a view (autograd::view_dtype_autograd marks it non-differentiable).
    return make_view(self, self->sizes(), self->strides(), self->storage_offset(), dtype);
  }
  const char* a = dtype_name(self->dtype());
  const char* b = dtype_name(dtype);
  EMBER_CHECK(self->dim() > 0, "self.dim() cannot be 0 to view ", a, " as ", b,
              " (different element sizes)");
  int64_t last = self->dim() - 1;
  EMBER_CHECK(self->stride(last) == 1, "self.stride(-1) must be 1 to view ", a, " as ", b,
              " (different element sizes), but got ", self->stride(last));
  DimVector sizes = self->sizes(), strides = self->strides();
  int64_t offset = self->storage_offset();
  if (from > to) {  // each element becomes `ratio` smaller ones
    int64_t ratio = from / to;
    for (int64_t d = 0; d < last; ++d) strides[d] *= ratio;
    sizes[last] *= ratio;
    offset *= ratio;
  } else {
    int64_t ratio = to / from;
    EMBER_CHECK(sizes[last] % ratio == 0, "self.size(-1) must be divisible by ", ratio, " to view ",
                a, " as ", b, " (different element sizes), but got ", sizes[last]);
    EMBER_CHECK(offset % ratio == 0, "self.storage_offset() must be divisible by ", ratio,
                " to view ", a, " as ", b, " (different element sizes), but got ", offset);
    for (int64_t d = 0; d < last; ++d)
      EMBER_CHECK(strides[d] % ratio == 0, "self.stride(", d, ") must be divisible by ", ratio,
                  " to view ", a, " as ", b, " (different element sizes), but got ", strides[d]);
    for (int64_t d = 0; d < last; ++d) strides[d] /= ratio;
    sizes[last] /= ratio;
    offset /= ratio;
  }
  return make_view(self, std::move(sizes), std::move(strides), offset, dtype);
}

Tensor reshape(const Tensor& self, const DimVector& shape_in) {
  DimVector shape = infer_size(shape_in, self->numel());
  DimVector strides;
  if (compute_view_strides(self->sizes(), self->strides(), shape, &strides))
    return make_view(self, std::move(shape), std::move(strides), self->storage_offset());
  // A fresh tensor (not a view): copy self into it through a temporary view of self's shape.
  Tensor out = ember::empty(shape, self->dtype(), self->device());
  dispatch::_copy_from(self, make_view(out, self->sizes(), contiguous_strides(self->sizes()), 0),
                       false);
  return out;
}

Tensor reshape_as(const Tensor& self, const Tensor& other) { return reshape(self, other->sizes()); }

Tensor flatten(const Tensor& self, int64_t start_dim, int64_t end_dim) {
  int64_t s = wrap_dim(start_dim, self->dim(), "flatten");
  int64_t e = wrap_dim(end_dim, self->dim(), "flatten");
  EMBER_CHECK(s <= e, "flatten() has invalid args: start_dim cannot come after end_dim");
  if (self->dim() == 0) return reshape(self, DimVector{1});
  if (s == e) return self;
  DimVector shape;
  for (int64_t d = 0; d < s; ++d) shape.push_back(self->size(d));
  int64_t n = 1;
  for (int64_t d = s; d <= e; ++d) n *= self->size(d);
  shape.push_back(n);
  for (int64_t d = e + 1; d < self->dim(); ++d) shape.push_back(self->size(d));
  return reshape(self, shape);
}

Tensor ravel(const Tensor& self) { return reshape(self, DimVector{-1}); }

Tensor unflatten(const Tensor& self, int64_t dim, const DimVector& sizes) {
  int64_t d = wrap_dim(dim, self->dim(), "unflatten");
  EMBER_CHECK(!sizes.empty(), "unflatten: sizes must be non-empty");
  int64_t have = self->dim() ? self->size(d) : 1;
  int64_t known = 1, infer = -1;
  for (int64_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      EMBER_CHECK(infer < 0, "unflatten: only one dimension can be inferred (got sizes ",
                  list_str(sizes), ")");
      infer = i;
      continue;
    }
    EMBER_CHECK(sizes[i] >= 0, "unflatten: invalid size ", sizes[i], " in sizes ", list_str(sizes));
    known *= sizes[i];
  }
  bool ok = infer >= 0 ? (known != 0 && have % known == 0) : known == have;
  EMBER_CHECK(ok, "unflatten: Provided sizes ", list_str(sizes),
              " don't multiply up to the size of dim ", dim, " (", have, ") in the input tensor");
  DimVector shape;
  for (int64_t i = 0; i < d; ++i) shape.push_back(self->size(i));
  for (int64_t i = 0; i < sizes.size(); ++i) shape.push_back(i == infer ? have / known : sizes[i]);
  for (int64_t i = d + 1; i < self->dim(); ++i) shape.push_back(self->size(i));
  return view(self, shape);
}

// ---- reordering dims ------------------------------------------------------------------------

Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1) {
  int64_t a = wrap_dim(dim0, self->dim(), "transpose");
  int64_t b = wrap_dim(dim1, self->dim(), "transpose");
  if (self->dim() == 0)
    return make_view(self, self->sizes(), self->strides(), self->storage_offset());
  return make_view(self, transposed_sizes(self->sizes(), a, b),
                   transposed_sizes(self->strides(), a, b), self->storage_offset());
}

Tensor transpose_(const Tensor& self, int64_t dim0, int64_t dim1) {
  int64_t a = wrap_dim(dim0, self->dim(), "transpose_");
  int64_t b = wrap_dim(dim1, self->dim(), "transpose_");
  self->bump_metadata_version();  // saved tensors see the metadata change, as in PyTorch
  if (self->dim() == 0 || a == b) return self;
  self->set_sizes_strides(transposed_sizes(self->sizes(), a, b),
                          transposed_sizes(self->strides(), a, b), self->storage_offset());
  return self;
}

Tensor swapaxes(const Tensor& self, int64_t dim0, int64_t dim1) {
  return ops::transpose(self, dim0, dim1);
}
Tensor swapaxes_(const Tensor& self, int64_t dim0, int64_t dim1) {
  return transpose_(self, dim0, dim1);
}

Tensor t(const Tensor& self) {
  EMBER_CHECK(self->dim() <= 2, "t() expects a tensor with <= 2 dimensions, but self is ",
              self->dim(), "D");
  if (self->dim() < 2)
    return make_view(self, self->sizes(), self->strides(), self->storage_offset());
  return transpose(self, 0, 1);
}

Tensor t_(const Tensor& self) {
  EMBER_CHECK(self->dim() <= 2, "t_() expects a tensor with <= 2 dimensions, but self is ",
              self->dim(), "D");
  if (self->dim() < 2) {
    self->bump_metadata_version();
    return self;
  }
  return transpose_(self, 0, 1);
}

Tensor adjoint(const Tensor& self) {
  EMBER_CHECK(self->dim() >= 2,
              "tensor.adjoint() is only supported on matrices or batches of "
              "matrices. Got ",
              self->dim(), "-D tensor.");
  return transpose(self, -2, -1);
}

Tensor permute(const Tensor& self, const DimVector& dims) {
  EMBER_CHECK(dims.size() == self->dim(),
              "permute(): number of dims don't match in permute: the "
              "tensor has ",
              self->dim(), " dims but ", dims.size(), " were given (", list_str(dims), ")");
  DimVector sizes, strides;
  std::vector<bool> seen(self->dim(), false);
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, self->dim(), "permute");
    EMBER_CHECK(!seen[w], "permute(): duplicate dims are not allowed (got ", list_str(dims), ")");
    seen[w] = true;
    sizes.push_back(self->size(w));
    strides.push_back(self->stride(w));
  }
  return make_view(self, std::move(sizes), std::move(strides), self->storage_offset());
}

Tensor movedim(const Tensor& self, const DimVector& source, const DimVector& destination) {
  EMBER_CHECK(source.size() == destination.size(),
              "movedim: Invalid source or destination dims: "
              "source (",
              list_str(source),
              " dims) should contain the same number of dims as "
              "destination (",
              list_str(destination), " dims)");
  int64_t n = self->dim();
  DimVector src, dst;
  for (int64_t d : source) src.push_back(wrap_dim(d, n, "movedim"));
  for (int64_t d : destination) dst.push_back(wrap_dim(d, n, "movedim"));
  std::vector<bool> s_seen(std::max<int64_t>(n, 1)), d_seen(std::max<int64_t>(n, 1));
  for (int64_t d : src) {
    EMBER_CHECK(!s_seen[d], "movedim: repeated dim in `source` (", list_str(source), ")");
    s_seen[d] = true;
  }
  for (int64_t d : dst) {
    EMBER_CHECK(!d_seen[d], "movedim: repeated dim in `destination` (", list_str(destination), ")");
    d_seen[d] = true;
  }
  if (n == 0) return make_view(self, self->sizes(), self->strides(), self->storage_offset());
  // order[dst[i]] = src[i]; remaining dims fill the free slots in their original order.
  DimVector order(n, -1);
  for (int64_t i = 0; i < src.size(); ++i) order[dst[i]] = src[i];
  int64_t next = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (order[i] != -1) continue;
    while (s_seen[next]) ++next;
    order[i] = next++;
  }
  return permute(self, order);
}

// ---- adding and removing size-1 dims ----------------------------------------------------------

Tensor squeeze(const Tensor& self, const std::optional<DimVector>& dim) {
  DimVector sizes, strides;
  squeezed(self, squeeze_mask(self, dim, "squeeze"), &sizes, &strides);
  return make_view(self, std::move(sizes), std::move(strides), self->storage_offset());
}

Tensor squeeze_(const Tensor& self, const std::optional<DimVector>& dim) {
  DimVector sizes, strides;
  squeezed(self, squeeze_mask(self, dim, "squeeze_"), &sizes, &strides);
  self->set_sizes_strides(std::move(sizes), std::move(strides), self->storage_offset());
  self->bump_metadata_version();
  return self;
}

Tensor unsqueeze(const Tensor& self, int64_t dim) {
  DimVector sizes, strides;
  unsqueezed(self, wrap_dim(dim, self->dim() + 1, "unsqueeze"), &sizes, &strides);
  return make_view(self, std::move(sizes), std::move(strides), self->storage_offset());
}

Tensor unsqueeze_(const Tensor& self, int64_t dim) {
  DimVector sizes, strides;
  unsqueezed(self, wrap_dim(dim, self->dim() + 1, "unsqueeze_"), &sizes, &strides);
  self->set_sizes_strides(std::move(sizes), std::move(strides), self->storage_offset());
  self->bump_metadata_version();
  return self;
}

// ---- broadcasting ---------------------------------------------------------------------------

Tensor expand(const Tensor& self, const DimVector& size) {
  EMBER_CHECK(size.size() >= self->dim(), "expand: the number of sizes provided (", size.size(),
              ") must be greater or equal to the number of dimensions in the tensor (", self->dim(),
              ")");
  int64_t nd = size.size(), lead = nd - self->dim();
  DimVector sizes(nd), strides(nd);
  for (int64_t i = nd - 1; i >= 0; --i) {
    int64_t target = size[i];
    if (i < lead) {
      EMBER_CHECK(target >= 0, "expand: the expanded size of the tensor (", target,
                  ") isn't allowed in a leading, non-existing dimension ", i);
      sizes[i] = target;
      strides[i] = 0;
      continue;
    }
    int64_t d = i - lead, have = self->size(d);
    if (target == -1) target = have;
    EMBER_CHECK(target >= 0, "expand: the expanded size of the tensor (", target,
                ") must be non-negative (target sizes: ", list_str(size), ")");
    if (have == target) {
      sizes[i] = have;
      strides[i] = self->stride(d);
    } else {
      EMBER_CHECK(have == 1, "The expanded size of the tensor (", target,
                  ") must match the existing size (", have, ") at non-singleton dimension ", i,
                  ".  Target sizes: ", list_str(size),
                  ".  Tensor sizes: ", list_str(self->sizes()));
      sizes[i] = target;
      strides[i] = 0;
    }
  }
  return make_view(self, std::move(sizes), std::move(strides), self->storage_offset());
}

Tensor expand_as(const Tensor& self, const Tensor& other) { return expand(self, other->sizes()); }
Tensor broadcast_to(const Tensor& self, const DimVector& size) { return expand(self, size); }

std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& tensors) {
  DimVector shape;
  for (const Tensor& t : tensors) shape = broadcast_shapes(shape, t->sizes(), "broadcast_tensors");
  std::vector<Tensor> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back(expand(t, shape));
  return out;
}

// ---- slicing --------------------------------------------------------------------------------

Tensor narrow(const Tensor& self, int64_t dim, int64_t start, int64_t length) {
  EMBER_CHECK(self->dim() > 0, "narrow() cannot be applied to a 0-dim tensor.");
  EMBER_CHECK(length >= 0, "narrow(): length must be non-negative.");
  int64_t d = wrap_dim(dim, self->dim(), "narrow");
  int64_t size = self->size(d);
  EMBER_CHECK_KIND(start >= -size && start <= size, Index,
                   "narrow(): start out of range (expected to be in range of [", -size, ", ", size,
                   "], but got ", start, ")");
  if (start < 0) start += size;
  EMBER_CHECK(start <= size - length, "start (", start, ") + length (", length,
              ") exceeds dimension size (", size, ").");
  DimVector sizes = self->sizes();
  sizes[d] = length;
  return make_view(self, std::move(sizes), self->strides(),
                   self->storage_offset() + start * self->stride(d));
}

Tensor select(const Tensor& self, int64_t dim, int64_t index) {
  EMBER_CHECK_KIND(self->dim() > 0, Index, "select() cannot be applied to a 0-dim tensor.");
  int64_t d = wrap_dim(dim, self->dim(), "select");
  int64_t size = self->size(d);
  EMBER_CHECK_KIND(index >= -size && index < size, Index, "select(): index ", index,
                   " out of range for tensor of size ", list_str(self->sizes()), " at dimension ",
                   d);
  if (index < 0) index += size;
  DimVector sizes = self->sizes(), strides = self->strides();
  int64_t offset = self->storage_offset() + index * strides[d];
  sizes.erase(d);
  strides.erase(d);
  return make_view(self, std::move(sizes), std::move(strides), offset);
}

Tensor unfold(const Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  int64_t d = wrap_dim(dimension, self->dim(), "unfold");
  int64_t have = self->dim() ? self->size(d) : 1;
  EMBER_CHECK(size >= 0, "unfold: size is ", size, " but must be >= 0");
  EMBER_CHECK(size <= have, "maximum size for tensor at dimension ", d, " is ", have,
              " but size is ", size);
  EMBER_CHECK(step > 0, "step is ", step, " but must be > 0");
  DimVector sizes = self->sizes(), strides = self->strides();
  if (self->dim() == 0) {
    return make_view(self, DimVector{size}, DimVector{1}, self->storage_offset());
  }
  int64_t st = strides[d];
  sizes[d] = (have - size) / step + 1;
  strides[d] = st * step;
  sizes.push_back(size);
  strides.push_back(st);
  return make_view(self, std::move(sizes), std::move(strides), self->storage_offset());
}

Tensor as_strided(const Tensor& self, const DimVector& size, const DimVector& stride,
                  std::optional<int64_t> storage_offset) {
  EMBER_CHECK(size.size() == stride.size(), "as_strided: mismatch in length of strides and shape (",
              list_str(size), " and ", list_str(stride), ")");
  for (int64_t s : stride)
    EMBER_CHECK(s >= 0,
                "as_strided: Negative strides are not supported at the moment, got strides: ",
                list_str(stride));
  int64_t offset = storage_offset.value_or(self->storage_offset());
  check_in_storage(self, size, stride, offset, "as_strided");
  // Its history is recorded by autograd::as_strided_autograd (`autograd: manual`).
  return make_view(self, size, stride, offset);
}

Tensor as_strided_(const Tensor& self, const DimVector& size, const DimVector& stride,
                   std::optional<int64_t> storage_offset) {
  EMBER_CHECK(size.size() == stride.size(),
              "as_strided_: mismatch in length of strides and shape (", list_str(size), " and ",
              list_str(stride), ")");
  for (int64_t s : stride)
    EMBER_CHECK(s >= 0,
                "as_strided_: Negative strides are not supported at the moment, got strides: ",
                list_str(stride));
  int64_t offset = storage_offset.value_or(self->storage_offset());
  check_in_storage(self, size, stride, offset, "as_strided_");
  // The history of a self that requires grad: autograd::as_strided__autograd (`autograd: manual`).
  self->set_sizes_strides(size, stride, offset);
  self->bump_metadata_version();
  return self;
}

Tensor diagonal(const Tensor& self, int64_t offset, int64_t dim1, int64_t dim2) {
  int64_t a = wrap_dim(dim1, self->dim(), "diagonal");
  int64_t b = wrap_dim(dim2, self->dim(), "diagonal");
  EMBER_CHECK(self->dim() >= 2, "diagonal: expected a tensor with at least 2 dimensions, got ",
              self->dim());
  EMBER_CHECK(a != b, "diagonal dimensions cannot be identical ", dim1, ", ", dim2);
  int64_t len, start = self->storage_offset();
  if (offset >= 0) {
    len = std::max<int64_t>(std::min(self->size(a), self->size(b) - offset), 0);
  } else {
    len = std::max<int64_t>(std::min(self->size(a) + offset, self->size(b)), 0);
  }
  if (len > 0) start += offset >= 0 ? offset * self->stride(b) : -offset * self->stride(a);
  DimVector sizes, strides;
  for (int64_t d = 0; d < self->dim(); ++d) {
    if (d == a || d == b) continue;
    sizes.push_back(self->size(d));
    strides.push_back(self->stride(d));
  }
  sizes.push_back(len);
  strides.push_back(self->stride(a) + self->stride(b));
  return make_view(self, std::move(sizes), std::move(strides), start);
}

// ---- splitting ------------------------------------------------------------------------------

namespace {
// Room for n pieces. Millions of (empty) views are legal, but a count no memory can hold
// (tensor_split(x, 2**62)) must fail naming the op, not as a bare std::bad_alloc.
void reserve_pieces(std::vector<Tensor>& out, int64_t n, const char* op) {
  try {
    out.reserve(static_cast<size_t>(n));
  } catch (const std::exception&) {  // std::bad_alloc or std::length_error
    EMBER_FAIL(OutOfMemory, op, ": cannot create ", n, " pieces (out of memory)");
  }
}

// ceil(a / b) for a >= 0, b > 0 without the overflow of (a + b - 1) / b.
int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }
}  // namespace

std::vector<Tensor> split(const Tensor& self, int64_t split_size, int64_t dim) {
  EMBER_CHECK(self->dim() > 0, "split expects at least a 1-dimensional tensor");
  EMBER_CHECK(split_size >= 0,
              "split expects split_size be non-negative, but got split_size=", split_size);
  int64_t d = wrap_dim(dim, self->dim(), "split");
  int64_t size = self->size(d);
  EMBER_CHECK(split_size > 0 || size == 0,
              "split_size can only be 0 if dimension size is 0, but "
              "got dimension size of ",
              size);
  int64_t n = split_size == 0 ? 1 : std::max<int64_t>(ceil_div(size, split_size), 1);
  std::vector<Tensor> out;
  reserve_pieces(out, n, "split");
  for (int64_t i = 0; i < n; ++i) {
    int64_t start = i * split_size;
    out.push_back(narrow(self, d, start, std::min(split_size, size - start)));
  }
  return out;
}

std::vector<Tensor> split_with_sizes(const Tensor& self, const DimVector& split_sizes,
                                     int64_t dim) {
  EMBER_CHECK(self->dim() > 0, "split_with_sizes expects at least a 1-dimensional tensor");
  int64_t d = wrap_dim(dim, self->dim(), "split_with_sizes");
  int64_t size = self->size(d), total = 0;
  for (int64_t s : split_sizes) {
    EMBER_CHECK(s >= 0,
                "split_with_sizes expects split_sizes have only non-negative entries, but "
                "got split_sizes=",
                list_str(split_sizes));
    // A wrapped sum could pass the check below with absurd sizes.
    EMBER_CHECK(!__builtin_add_overflow(total, s, &total), "split_with_sizes: split_sizes ",
                list_str(split_sizes), " sum to more than int64 can hold");
  }
  EMBER_CHECK(total == size, "split_with_sizes expects split_sizes to sum exactly to ", size,
              " (input tensor's size at dimension ", d,
              "), but got split_sizes=", list_str(split_sizes));
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : split_sizes) {
    out.push_back(narrow(self, d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> tensor_split(const Tensor& self, int64_t sections, int64_t dim) {
  EMBER_CHECK(self->dim() > 0,
              "tensor_split expected at least a 1-dimensional tensor, but got a "
              "tensor with 0 dims");
  EMBER_CHECK(sections > 0, "number of sections must be larger than 0, got ", sections);
  int64_t d = wrap_dim(dim, self->dim(), "tensor_split");
  int64_t size = self->size(d);
  int64_t base = size / sections, extra = size % sections;
  std::vector<Tensor> out;
  reserve_pieces(out, sections, "tensor_split");
  int64_t start = 0;
  for (int64_t i = 0; i < sections; ++i) {
    int64_t len = base + (i < extra ? 1 : 0);
    out.push_back(narrow(self, d, start, len));
    start += len;
  }
  return out;
}

std::vector<Tensor> tensor_split_indices(const Tensor& self, const DimVector& indices,
                                         int64_t dim) {
  EMBER_CHECK(self->dim() > 0,
              "tensor_split expected at least a 1-dimensional tensor, but got a "
              "tensor with 0 dims");
  int64_t d = wrap_dim(dim, self->dim(), "tensor_split");
  int64_t size = self->size(d);
  // Indices are clamped into [0, size] (negative ones count from the end), like slicing.
  auto clamp = [&](int64_t i) {
    if (i < 0) i += size;
    return std::min(std::max<int64_t>(i, 0), size);
  };
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t idx : indices) {
    int64_t stop = clamp(idx);
    out.push_back(narrow(self, d, start, std::max<int64_t>(stop - start, 0)));
    start = stop;  // each piece starts at the previous index, even past a smaller next one
  }
  out.push_back(narrow(self, d, start, size - start));
  return out;
}

std::vector<Tensor> hsplit(const Tensor& self, int64_t sections) {
  EMBER_CHECK(self->dim() >= 1,
              "torch.hsplit requires a tensor with at least 1 dimension, but got "
              "a tensor with ",
              self->dim(), " dimensions!");
  int64_t d = self->dim() == 1 ? 0 : 1;
  EMBER_CHECK(sections != 0 && self->size(d) % sections == 0,
              "torch.hsplit attempted to split along dimension ", d,
              ", but the size of the dimension ", self->size(d),
              " is not divisible by the split_size ", sections, "!");
  return tensor_split(self, sections, d);
}

std::vector<Tensor> hsplit_indices(const Tensor& self, const DimVector& indices) {
  EMBER_CHECK(self->dim() >= 1,
              "torch.hsplit requires a tensor with at least 1 dimension, but got "
              "a tensor with ",
              self->dim(), " dimensions!");
  return tensor_split_indices(self, indices, self->dim() == 1 ? 0 : 1);
}

std::vector<Tensor> vsplit(const Tensor& self, int64_t sections) {
  EMBER_CHECK(self->dim() >= 2,
              "torch.vsplit requires a tensor with at least 2 dimension, but got "
              "a tensor with ",
              self->dim(), " dimensions!");
  EMBER_CHECK(sections != 0 && self->size(0) % sections == 0,
              "torch.vsplit attempted to split along dimension 0, but the size of the dimension ",
              self->size(0), " is not divisible by the split_size ", sections, "!");
  return tensor_split(self, sections, 0);
}

std::vector<Tensor> vsplit_indices(const Tensor& self, const DimVector& indices) {
  EMBER_CHECK(self->dim() >= 2,
              "torch.vsplit requires a tensor with at least 2 dimension, but got "
              "a tensor with ",
              self->dim(), " dimensions!");
  return tensor_split_indices(self, indices, 0);
}

std::vector<Tensor> chunk(const Tensor& self, int64_t chunks, int64_t dim) {
  EMBER_CHECK(self->dim() > 0, "chunk expects at least a 1-dimensional tensor");
  EMBER_CHECK(chunks > 0, "chunk expects `chunks` to be greater than 0, got: ", chunks);
  int64_t d = wrap_dim(dim, self->dim(), "chunk");
  int64_t size = self->size(d);
  int64_t split_size = ceil_div(size, chunks);
  if (split_size == 0 && size == 0) {  // `chunks` empty pieces, as PyTorch
    std::vector<Tensor> out;
    reserve_pieces(out, chunks, "chunk");
    for (int64_t i = 0; i < chunks; ++i) out.push_back(narrow(self, d, 0, 0));
    return out;
  }
  return split(self, split_size, d);
}

std::vector<Tensor> unbind(const Tensor& self, int64_t dim) {
  EMBER_CHECK_KIND(self->dim() > 0, Index, "Dimension specified as ", dim,
                   " but tensor has no dimensions");
  int64_t d = wrap_dim(dim, self->dim(), "unbind");
  std::vector<Tensor> out;
  out.reserve(self->size(d));
  for (int64_t i = 0; i < self->size(d); ++i) out.push_back(select(self, d, i));
  return out;
}

}  // namespace composite
}  // namespace ember
