// Shape ops that build new tensors (ops/shape.yaml). Each allocates its result and fills it with
// copy_into() between strided views (internal views here may even have negative strides), so
// there are no per-dtype loops: copy_into is parallel, converts dtypes and runs on any device.
#include <algorithm>
#include <cstring>
#include <sstream>
#include <utility>

#include "core/out_tensor.h"
#include "kernels/iterator.h"
#include "kernels/memory_format.h"
#include "ops.h"
#include "ops/host_sync.h"
#include "ops/list_str.h"

namespace ember {
namespace {

// A slice [start, start + length) of t along d, as a temporary internal view.
Tensor slice(const Tensor& t, int64_t d, int64_t start, int64_t length) {
  DimVector sizes = t->sizes();
  sizes[d] = length;
  return make_view(t, std::move(sizes), t->strides(), t->storage_offset() + start * t->stride(d));
}

bool same_memory(const Tensor& a, const Tensor& b) {
  return a->storage() == b->storage() && a->numel() > 0 && b->numel() > 0;
}

// Whether a's and b's elements may share bytes: the spans [first, last] they cover in one
// storage meet (strides are non-negative). cat(x[:2], out=x[2:4]) shares a storage, not bytes.
bool spans_meet(const Tensor& a, const Tensor& b) {
  if (!same_memory(a, b)) return false;
  auto span = [](const Tensor& t) {
    int64_t last = 0;
    for (int64_t d = 0; d < t->dim(); ++d) last += (t->size(d) - 1) * t->stride(d);
    const int64_t first = t->storage_offset() * t->itemsize();
    return std::make_pair(first, first + (last + 1) * t->itemsize());
  };
  auto [a0, a1] = span(a);
  auto [b0, b1] = span(b);
  return a0 < b1 && b0 < a1;
}

// The out= tensor of a shape op: checked for dtype and aliasing, resized (new storage) when its
// shape differs, like write_out() of the generated bindings.
void prepare_out(const Tensor& out, const DimVector& shape, ScalarType dtype,
                 const std::vector<Tensor>& inputs, const char* op) {
  EMBER_CHECK_KIND(can_cast(dtype, out->dtype()), Type, op,
                   "(): input types can't be cast to the "
                   "desired output type ",
                   dtype_name(out->dtype()));
  // (out= of another shape is resized first, which may move the storage the inputs read)
  for (const Tensor& t : inputs)
    EMBER_CHECK(out->sizes() == shape ? !spans_meet(out, t) : !same_memory(out, t), op,
                "(): unsupported operation: some elements of the input "
                "tensor and the written-to tensor refer to a single memory location. Please "
                "clone() the tensor before performing the operation.");
  Device device = inputs.empty() ? out->device() : inputs[0]->device();
  ember::prepare_out(out, shape, dtype, device, op, OutDtype::Any);
}

std::vector<Tensor> map(const std::vector<Tensor>& ts, Tensor (*f)(const Tensor&)) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(f(t));
  return out;
}

// Writes src rolled by `shift` along d into dst (same shape, distinct memory).
void roll_into(const Tensor& dst, const Tensor& src, int64_t d, int64_t shift) {
  int64_t n = src->size(d);
  int64_t s = n == 0 ? 0 : ((shift % n) + n) % n;
  if (s == 0) {
    dispatch::_copy_from(src, dst, false);
    return;
  }
  dispatch::_copy_from(slice(src, d, 0, n - s), slice(dst, d, s, n - s), false);
  dispatch::_copy_from(slice(src, d, n - s, s), slice(dst, d, 0, s), false);
}

// Reads a repeats tensor (int32/int64, on the CPU) as int64 values.
std::vector<int64_t> read_repeats(const Tensor& repeats) {
  EMBER_CHECK_KIND(repeats->dtype() == ScalarType::Int64 || repeats->dtype() == ScalarType::Int32,
                   NotImplemented,
                   "repeat_interleave: repeats must be an int32 or int64 tensor, got ",
                   dtype_name(repeats->dtype()));
  Tensor r = ember::empty(repeats->sizes(), ScalarType::Int64, repeats->device());
  dispatch::_copy_from(repeats, r, false);
  r = host_values(r, "repeat_interleave");
  const int64_t* p = r->data_as<int64_t>();
  return std::vector<int64_t>(p, p + r->numel());
}

}  // namespace

namespace composite {

// ---- joining --------------------------------------------------------------------------------

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim, const Tensor& out) {
  EMBER_CHECK_KIND(!tensors.empty(), Value, "cat(): expected a non-empty list of Tensors");
  ScalarType dtype = tensors[0]->dtype();
  const Tensor* ref = nullptr;  // first tensor that takes part (1-D empty ones are skipped)
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    EMBER_CHECK(t->dim() > 0, "cat(): zero-dimensional tensor (at position ", i,
                ") cannot be concatenated");
    EMBER_CHECK(t->device() == tensors[0]->device(),
                "cat(): expected all tensors to be on the same "
                "device, but found ",
                tensors[0]->device().str(), " and ", t->device().str(), " (tensor number ", i, ")");
    dtype = promote_types(dtype, t->dtype());
    if (!ref && !(t->dim() == 1 && t->size(0) == 0)) ref = &t;
  }
  DimVector shape{0};
  int64_t d = 0;
  if (ref) {
    d = wrap_dim(dim, (*ref)->dim(), "cat");
    shape = (*ref)->sizes();
    shape[d] = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i];
      if (t->dim() == 1 && t->size(0) == 0) continue;
      EMBER_CHECK(t->dim() == (*ref)->dim(),
                  "cat(): Tensors must have same number of dimensions: "
                  "got ",
                  (*ref)->dim(), " and ", t->dim(), " (tensor number ", i, ")");
      for (int64_t k = 0; k < t->dim(); ++k)
        EMBER_CHECK(k == d || t->size(k) == (*ref)->size(k),
                    "cat(): Sizes of tensors must match "
                    "except in dimension ",
                    d, ". Expected size ", (*ref)->size(k), " but got size ", t->size(k),
                    " for tensor number ", i, " in the list (shapes ", shape_str((*ref)->sizes()),
                    " and ", shape_str(t->sizes()), ").");
      // A wrapped total would allocate a too-small result and copy past its end.
      EMBER_CHECK(!__builtin_add_overflow(shape[d], t->size(d), &shape[d]),
                  "cat(): the total size along dimension ", d, " overflows int64");
    }
  }  // else: only legacy empty tensors; PyTorch ignores dim then
  // PyTorch's layout: channels-last when every input is (a legacy empty one is not), else
  // contiguous. Written in place through strided copies, so it costs nothing extra.
  bool cl = ref != nullptr;
  for (const Tensor& t : tensors) cl = cl && suggests_channels_last(t);
  Tensor result = out;
  if (out) {
    const bool resized = out->sizes() != shape;
    prepare_out(out, shape, dtype, tensors, "cat");
    if (resized && cl) out->set_sizes_strides(shape, channels_last_strides(shape), 0);
  } else if (cl) {
    result = ember::empty_strided(shape, channels_last_strides(shape), dtype, tensors[0]->device());
  } else {
    result = ember::empty(shape, dtype, tensors[0]->device());
  }
  if (!ref || result->numel() == 0) return result;
  // Channels-last parts are copied through views of their memory order (N, *, C), which the
  // copy kernel walks with C innermost (many times faster than in the logical order).
  const bool by_memory = cl && suggests_channels_last(result);
  auto in_memory_order = [&](const Tensor& t) {
    if (!by_memory) return t;
    DimVector sizes{t->size(0)}, strides{t->stride(0)};
    for (int64_t k = 2; k < t->dim(); ++k) {
      sizes.push_back(t->size(k));
      strides.push_back(t->stride(k));
    }
    sizes.push_back(t->size(1));
    strides.push_back(t->stride(1));
    return make_view(t, sizes, strides, t->storage_offset());
  };
  int64_t pos = 0;
  for (const Tensor& t : tensors) {
    if (t->dim() == 1 && t->size(0) == 0) continue;
    Tensor dst = slice(result, d, pos, t->size(d));
    pos += t->size(d);
    // A contiguous part into a contiguous slice of a fresh CPU result (cat along dim 0, or
    // stack's): one memcpy instead of a copy kernel's setup, most of a small part's cost.
    if (!out && t->dtype() == dtype && dtype != ScalarType::Bool && t->device().is_cpu() &&
        result->device().is_cpu() && t->numel() > 0 && t->is_contiguous() && dst->is_contiguous()) {
      std::memcpy(dst->data(), t->data(), static_cast<size_t>(t->numel()) * t->itemsize());
      continue;
    }
    dispatch::_copy_from(in_memory_order(t), in_memory_order(dst), false);
  }
  return out ? result : fresh(result);
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim, const Tensor& out) {
  EMBER_CHECK(!tensors.empty(), "stack expects a non-empty TensorList");
  for (size_t i = 1; i < tensors.size(); ++i)
    EMBER_CHECK(tensors[i]->sizes() == tensors[0]->sizes(),
                "stack expects each tensor to be equal "
                "size, but got ",
                list_str(tensors[0]->sizes()), " at entry 0 and ", list_str(tensors[i]->sizes()),
                " at entry ", i);
  int64_t d = wrap_dim(dim, tensors[0]->dim() + 1, "stack");
  // Channels-last inputs stacked along one of their dims: PyTorch's layout is that of their
  // concatenation along that dim (channels-last, as cat gives it) with the dim split in two.
  bool cl = !out && d < tensors[0]->dim();
  for (const Tensor& t : tensors) cl = cl && suggests_channels_last(t);
  if (cl) {
    DimVector shape = tensors[0]->sizes();
    shape.insert(d, static_cast<int64_t>(tensors.size()));
    return ops::view(ops::cat(tensors, d, Tensor()), shape);
  }
  // Contiguous tensors stacked along one of their dims are their concatenation along it too:
  // one cat instead of an unsqueeze each (an op call apiece, most of a small stack's time).
  bool by_cat = !out && d < tensors[0]->dim() && tensors[0]->numel() > 0;
  for (const Tensor& t : tensors) by_cat = by_cat && t->is_contiguous();
  if (by_cat) {
    // The fresh (contiguous) concatenation with dim d split in two in place, so the result is
    // no view (autograd is recorded around this composite, as one StackBackward node).
    Tensor r = ops::cat(tensors, d, Tensor());
    const auto n = static_cast<int64_t>(tensors.size());
    DimVector sizes = r->sizes(), strides = r->strides();
    sizes[d] = tensors[0]->size(d);
    sizes.insert(d, n);
    strides.insert(d, strides[d] * sizes[d + 1]);
    r->set_sizes_strides(std::move(sizes), std::move(strides), r->storage_offset());
    return r;
  }
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(ops::unsqueeze(t, d));
  if (out) {  // resized (and warned about) under stack's name, not cat's
    DimVector shape = tensors[0]->sizes();
    shape.insert(d, static_cast<int64_t>(tensors.size()));
    resize_out(out, shape, "stack");
  }
  return ops::cat(parts, d, out);  // ops:: calls record autograd (stack is `composite`)
}

Tensor atleast_1d(const Tensor& self) {
  return self->dim() == 0 ? ops::reshape(self, DimVector{1}) : self;
}

Tensor atleast_2d(const Tensor& self) {
  if (self->dim() == 0) return ops::reshape(self, DimVector{1, 1});
  if (self->dim() == 1) return ops::unsqueeze(self, 0);
  return self;
}

Tensor atleast_3d(const Tensor& self) {
  if (self->dim() == 0) return ops::reshape(self, DimVector{1, 1, 1});
  if (self->dim() == 1) return ops::unsqueeze(ops::unsqueeze(self, 0), -1);
  if (self->dim() == 2) return ops::unsqueeze(self, -1);
  return self;
}

std::vector<Tensor> atleast_1d_list(const std::vector<Tensor>& ts) { return map(ts, atleast_1d); }
std::vector<Tensor> atleast_2d_list(const std::vector<Tensor>& ts) { return map(ts, atleast_2d); }
std::vector<Tensor> atleast_3d_list(const std::vector<Tensor>& ts) { return map(ts, atleast_3d); }

namespace {
// cat(parts, d, out) for a stacking op: an out= of another shape is resized (and warned about)
// under the op's name, not cat's. Parts that cat rejects are left for it to report.
Tensor cat_as(const std::vector<Tensor>& parts, int64_t d, const Tensor& out, const char* op) {
  auto legacy_empty = [](const Tensor& t) { return t->dim() == 1 && t->size(0) == 0; };
  auto ref = std::find_if_not(parts.begin(), parts.end(), legacy_empty);
  bool ok = out && ref != parts.end() && d < (*ref)->dim();
  DimVector shape;
  if (ok) {
    shape = (*ref)->sizes();
    shape[d] = 0;
  }
  for (auto it = parts.begin(); ok && it != parts.end(); ++it) {
    const Tensor& t = *it;
    if (legacy_empty(t)) continue;
    ok = t->dim() == (*ref)->dim() && !__builtin_add_overflow(shape[d], t->size(d), &shape[d]);
    for (int64_t k = 0; ok && k < t->dim(); ++k) ok = k == d || t->size(k) == (*ref)->size(k);
  }
  if (ok) resize_out(out, shape, op);
  return ops::cat(parts, d, out);
}
}  // namespace

Tensor hstack(const std::vector<Tensor>& tensors, const Tensor& out) {
  EMBER_CHECK(!tensors.empty(), "hstack expects a non-empty TensorList");
  std::vector<Tensor> ts = atleast_1d_list(tensors);
  return cat_as(ts, ts[0]->dim() == 1 ? 0 : 1, out, "hstack");
}

Tensor vstack(const std::vector<Tensor>& tensors, const Tensor& out) {
  EMBER_CHECK(!tensors.empty(), "vstack expects a non-empty TensorList");
  return cat_as(atleast_2d_list(tensors), 0, out, "vstack");
}

Tensor dstack(const std::vector<Tensor>& tensors, const Tensor& out) {
  EMBER_CHECK(!tensors.empty(), "dstack expects a non-empty TensorList");
  return cat_as(atleast_3d_list(tensors), 2, out, "dstack");
}

Tensor column_stack(const std::vector<Tensor>& tensors, const Tensor& out) {
  EMBER_CHECK(!tensors.empty(), "column_stack expects a non-empty TensorList");
  std::vector<Tensor> ts;
  for (const Tensor& t : tensors)
    ts.push_back(t->dim() <= 1 ? ops::reshape(t, DimVector{t->numel(), 1}) : t);
  return cat_as(ts, 1, out, "column_stack");
}

// ---- flipping and rolling -------------------------------------------------------------------

Tensor flip(const Tensor& self, const DimVector& dims) {
  std::vector<bool> flipped(std::max<int64_t>(self->dim(), 1), false);
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, self->dim(), "flip");
    EMBER_CHECK(!flipped[w], "flip: dim ", w, " appears multiple times in the list of dims");
    flipped[w] = true;
  }
  Tensor out = ember::empty(self->sizes(), self->dtype(), self->device());
  if (self->numel() == 0) return out;
  // Read self backwards along the flipped dims: start at their last element, negate strides.
  DimVector strides = self->strides();
  int64_t offset = self->storage_offset();
  for (int64_t d = 0; d < self->dim(); ++d) {
    if (!flipped[d]) continue;
    offset += (self->size(d) - 1) * strides[d];
    strides[d] = -strides[d];
  }
  dispatch::_copy_from(make_view(self, self->sizes(), std::move(strides), offset), out, false);
  return out;
}

Tensor fliplr(const Tensor& self) {
  EMBER_CHECK(self->dim() >= 2, "fliplr: Input must be >= 2-d (got shape ",
              shape_str(self->sizes()), ").");
  return flip(self, DimVector{1});
}

Tensor flipud(const Tensor& self) {
  EMBER_CHECK(self->dim() >= 1, "flipud: Input must be >= 1-d (got shape ",
              shape_str(self->sizes()), ").");
  return flip(self, DimVector{0});
}

Tensor roll(const Tensor& self, const DimVector& shifts, const DimVector& dims) {
  EMBER_CHECK(!shifts.empty(), "roll: `shifts` required");
  if (dims.empty()) {
    EMBER_CHECK(shifts.size() == 1,
                "roll: shifts and dimensions must align. shifts: ", shifts.size(),
                ", dims:", dims.size());
    Tensor out = ember::empty(self->sizes(), self->dtype(), self->device());
    if (self->numel() == 0) return out;
    Tensor flat_out = make_view(out, DimVector{out->numel()}, DimVector{1}, 0);
    roll_into(flat_out, ops::reshape(self, DimVector{-1}), 0, shifts[0]);
    return out;
  }
  EMBER_CHECK(shifts.size() == dims.size(),
              "roll: shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dims.size());
  // A 0-dim tensor has no dim to roll along (PyTorch refuses it too; without dims it rolls)
  EMBER_CHECK_KIND(self->dim() > 0, Index, "roll: dimension specified as ", dims[0],
                   " but tensor has no dimensions");
  DimVector wrapped;
  for (int64_t d : dims) wrapped.push_back(wrap_dim(d, self->dim(), "roll"));
  Tensor cur = self;
  for (int64_t i = 0; i < wrapped.size(); ++i) {
    Tensor next = ember::empty(self->sizes(), self->dtype(), self->device());
    if (self->numel() > 0) roll_into(next, cur, wrapped[i], shifts[i]);
    cur = next;
  }
  return cur;
}

Tensor rot90(const Tensor& self, int64_t k, const DimVector& dims) {
  EMBER_CHECK(dims.size() == 2,
              "rot90: expected total rotation dims == 2, but got dims = ", dims.size());
  EMBER_CHECK(self->dim() >= 2,
              "rot90: expected total dims >= 2, but got total dims = ", self->dim());
  int64_t a = wrap_dim(dims[0], self->dim(), "rot90");
  int64_t b = wrap_dim(dims[1], self->dim(), "rot90");
  EMBER_CHECK(a != b, "rot90: expected rotation dims to be different, but got dim0 = ", dims[0],
              " and dim1 = ", dims[1]);
  k = ((k % 4) + 4) % 4;
  if (k == 0) return ops::clone(self);
  if (k == 2) return flip(self, DimVector{a, b});
  Tensor r = flip(self, DimVector{k == 1 ? b : a});
  // r is fresh: swap its dims in place so the result is no view (like PyTorch's transpose_).
  DimVector sizes = r->sizes(), strides = r->strides();
  std::swap(sizes[a], sizes[b]);
  std::swap(strides[a], strides[b]);
  r->set_sizes_strides(std::move(sizes), std::move(strides), 0);
  return r;
}

// ---- repeating ------------------------------------------------------------------------------

Tensor repeat(const Tensor& self, const DimVector& repeats) {
  EMBER_CHECK(repeats.size() >= self->dim(), "repeat: Number of dimensions of repeat dims (",
              repeats.size(), ") can not be smaller than number of dimensions of tensor (",
              self->dim(), ")");
  int64_t n = repeats.size(), lead = n - self->dim();
  DimVector shape(n);
  bool overflow = false;  // a wrapped size would be a silently wrong shape (size 0 for 2**62)
  for (int64_t i = 0; i < n; ++i)
    overflow |= __builtin_mul_overflow(repeats[i], i < lead ? 1 : self->size(i - lead), &shape[i]);
  for (int64_t i = 0; i < n; ++i)
    EMBER_CHECK(repeats[i] >= 0, "repeat: Trying to create tensor with negative dimension ",
                shape[i], ": ", list_str(shape));
  EMBER_CHECK(!overflow, "repeat: repeats ", list_str(repeats), " of a tensor of size ",
              shape_str(self->sizes()), " give a size that overflows int64");
  Tensor out = ember::empty(shape, self->dtype(), self->device());
  if (out->numel() == 0) return out;
  // out viewed as (r0, s0, r1, s1, ...); self as (1, s0, 1, s1, ...) broadcasts into it.
  DimVector dsizes, dstrides, ssizes, sstrides;
  const DimVector& ost = out->strides();
  for (int64_t i = 0; i < n; ++i) {
    int64_t s = i < lead ? 1 : self->size(i - lead);
    dsizes.push_back(repeats[i]);
    dstrides.push_back(s * ost[i]);
    dsizes.push_back(s);
    dstrides.push_back(ost[i]);
    ssizes.push_back(1);
    sstrides.push_back(0);
    ssizes.push_back(s);
    sstrides.push_back(i < lead ? 0 : self->stride(i - lead));
  }
  dispatch::_copy_from(make_view(self, ssizes, sstrides, self->storage_offset()),
                       make_view(out, dsizes, dstrides, 0), false);
  return out;
}

Tensor tile(const Tensor& self, const DimVector& dims) {
  DimVector reps = dims;
  while (reps.size() < self->dim()) reps.insert(0, 1);
  return repeat(self, reps);
}

Tensor repeat_interleave(const Tensor& self, const TensorOrScalar& repeats,
                         std::optional<int64_t> dim, std::optional<int64_t> output_size) {
  Tensor input = (dim && self->dim() > 0) ? self : ops::reshape(self, DimVector{-1});
  int64_t d = dim ? wrap_dim(*dim, self->dim(), "repeat_interleave") : 0;
  if (self->dim() == 0) d = 0;
  int64_t size = input->size(d);
  // A single repeat count (a number, or a tensor with one element) applies to every slice.
  std::optional<int64_t> single;
  std::vector<int64_t> counts;
  if (repeats.is_tensor()) {
    const Tensor& r = repeats.tensor;
    EMBER_CHECK(r->dim() <= 1,
                "repeat_interleave: repeats must be 0-dim or 1-dim tensor (got shape ",
                shape_str(r->sizes()), ")");
    counts = read_repeats(r);
    if (counts.size() == 1) {
      single = counts[0];
    } else {
      EMBER_CHECK(static_cast<int64_t>(counts.size()) == size,
                  "repeat_interleave: repeats must "
                  "have the same size as input along dim, but got repeats.size(0) = ",
                  counts.size(), " and input.size(", d, ") = ", size);
    }
  } else {
    EMBER_CHECK_KIND(repeats.scalar.is_integral() && !repeats.scalar.is_bool(), Type,
                     "repeat_interleave: repeats must be an int or an integer tensor");
    single = repeats.scalar.to_int();
  }
  if (single) {
    EMBER_CHECK(*single >= 0, "repeat_interleave: Repeats must be non-negative (got ", *single,
                ")");
  } else {
    for (int64_t c : counts) EMBER_CHECK(c >= 0, "repeat_interleave: repeats can not be negative");
  }
  int64_t total = 0;
  bool overflow = false;  // a wrapped total would size the output too small for the copies
  if (single) {
    overflow = __builtin_mul_overflow(*single, size, &total);
  } else {
    for (int64_t c : counts) overflow |= __builtin_add_overflow(total, c, &total);
  }
  EMBER_CHECK(!overflow, "repeat_interleave: the total number of repeats overflows int64");
  if (output_size)
    EMBER_CHECK(*output_size == total,
                "repeat_interleave: allocated size does not match required "
                "size (output_size=",
                *output_size, ", required ", total, ")");
  DimVector shape = input->sizes();
  shape[d] = total;
  Tensor out = ember::empty(shape, self->dtype(), self->device());
  if (out->numel() == 0) return out;
  if (single) {
    // out viewed with a repeat dim of r: copy j of the input lands at offset j along d, every
    // r-th slice. A few repeats go outermost so inner loops stay long; many go right after d,
    // so that out is written in its own order (outermost, a 1-D input repeated 2**20 times
    // wrote every element a page apart).
    int64_t r = *single;
    DimVector dsz = input->sizes(), dst = out->strides(), ssz = input->sizes(),
              sst = input->strides();
    dst[d] = out->stride(d) * r;
    int64_t at = r >= 16 ? d + 1 : 0;
    dsz.insert(at, r);
    dst.insert(at, out->stride(d));
    ssz.insert(at, 1);
    sst.insert(at, 0);
    dispatch::_copy_from(make_view(input, ssz, sst, input->storage_offset()),
                         make_view(out, dsz, dst, 0), false);
    return out;
  }
  int64_t pos = 0;
  for (int64_t i = 0; i < size; ++i) {
    if (counts[i] == 0) continue;
    dispatch::_copy_from(slice(input, d, i, 1), slice(out, d, pos, counts[i]), false);
    pos += counts[i];
  }
  return out;
}

Tensor repeat_interleave_index(const Tensor& repeats, std::optional<int64_t> output_size) {
  EMBER_CHECK(repeats->dim() == 1, "repeat_interleave only accept 1D vector as repeat (got shape ",
              shape_str(repeats->sizes()), ")");
  std::vector<int64_t> counts = read_repeats(repeats);
  int64_t total = 0;
  for (int64_t c : counts) {
    EMBER_CHECK(c >= 0, "repeat_interleave: repeats can not be negative");
    EMBER_CHECK(!__builtin_add_overflow(total, c, &total),
                "repeat_interleave: the total number of repeats overflows int64");
  }
  if (output_size)
    EMBER_CHECK(*output_size == total,
                "repeat_interleave: allocated size does not match required "
                "size (output_size=",
                *output_size, ", required ", total, ")");
  // The result has the repeats' dtype (int32 or int64), as in PyTorch.
  Tensor out = ember::empty(DimVector{total}, ScalarType::Int64, cpu_device());
  int64_t* p = out->data_as<int64_t>();
  for (size_t i = 0; i < counts.size(); ++i)
    for (int64_t j = 0; j < counts[i]; ++j) *p++ = static_cast<int64_t>(i);
  out = repeats->dtype() == ScalarType::Int64 ? out : ops::_to_dtype(out, repeats->dtype(), false);
  return repeats->device().is_cpu() ? out
                                    : ops::_to_copy(out, std::nullopt, repeats->device(), false);
}

// ---- grids ----------------------------------------------------------------------------------

std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors,
                             const std::optional<std::string>& indexing) {
  EMBER_CHECK(!tensors.empty(), "meshgrid expects a non-empty TensorList");
  std::string mode = indexing.value_or("ij");
  EMBER_CHECK(mode == "ij" || mode == "xy",
              "torch.meshgrid: indexing must be one of \"xy\" or "
              "\"ij\", but received: ",
              mode);
  for (size_t i = 0; i < tensors.size(); ++i) {
    EMBER_CHECK(tensors[i]->dim() <= 1,
                "meshgrid: Expected 0D or 1D tensor in the tensor list but "
                "got a tensor of shape ",
                shape_str(tensors[i]->sizes()), " at position ", i);
    EMBER_CHECK(tensors[i]->dtype() == tensors[0]->dtype(),
                "meshgrid expects all tensors to have the "
                "same dtype (got ",
                dtype_name(tensors[0]->dtype()), " and ", dtype_name(tensors[i]->dtype()), ")");
    EMBER_CHECK(tensors[i]->device() == tensors[0]->device(),
                "meshgrid expects all tensors to have "
                "the same device");
  }
  std::vector<Tensor> ts = tensors;
  bool swap = mode == "xy" && ts.size() >= 2;
  if (swap) std::swap(ts[0], ts[1]);
  int64_t n = ts.size();
  DimVector shape;
  for (const Tensor& t : ts) shape.push_back(t->numel());
  std::vector<Tensor> grids;
  for (int64_t i = 0; i < n; ++i) {
    DimVector vs(n, 1);
    vs[i] = -1;
    grids.push_back(ops::expand(ops::view(ts[i], vs), shape));
  }
  // 'xy' is 'ij' over (y, x, ...): the first two grids come back in the caller's order.
  if (swap) std::swap(grids[0], grids[1]);
  return grids;
}

}  // namespace composite
}  // namespace ember
