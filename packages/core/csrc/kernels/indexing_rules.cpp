#include "kernels/indexing_rules.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/dispatch.h"
#include "core/error.h"
#include "kernels/iterator.h"
#include "ops.h"

namespace ember {

Tensor as_1d(const Tensor& t) {
  if (t->dim() > 0) return t;
  return make_view(t, DimVector{1}, DimVector{1}, t->storage_offset());
}

Tensor expand_view(const Tensor& t, const DimVector& sizes) {
  const int64_t n = sizes.size(), off = n - t->dim();
  DimVector strides(n, 0);
  for (int64_t d = 0; d < t->dim(); ++d)
    strides[off + d] = (t->size(d) == 1 && sizes[off + d] != 1) ? 0 : t->stride(d);
  return make_view(t, sizes, std::move(strides), t->storage_offset());
}

Tensor with_shape(const Tensor& contiguous, const DimVector& sizes) {
  return make_view(contiguous, sizes, contiguous_strides(sizes), contiguous->storage_offset());
}

Tensor unsqueeze_view(const Tensor& t, int64_t d) {
  DimVector sizes = t->sizes(), strides = t->strides();
  int64_t st = d < t->dim() ? t->stride(d) * t->size(d) : 1;
  sizes.insert(d, 1);
  strides.insert(d, st);
  return make_view(t, std::move(sizes), std::move(strides), t->storage_offset());
}

void check_index_dtype(const Tensor& index, const char* op, bool allow_int32, ErrorKind kind) {
  EMBER_CHECK_KIND(index != nullptr, Type, op, ": expected an index tensor, got None");
  ScalarType t = index->dtype();
  if (t == ScalarType::Int64 || (allow_int32 && t == ScalarType::Int32)) return;
  detail::fail(kind, op, ": expected an index tensor of dtype ",
               allow_int32 ? "int64 or int32" : "int64", ", but got ", dtype_name(t));
}

bool check_index_range(const int64_t* p, int64_t n, int64_t size, int64_t dim, bool allow_negative,
                       const char* op, ErrorKind kind) {
  const int64_t lo = allow_negative ? -size : 0;
  bool negative = false;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = p[i];
    if (v < lo || v >= size)
      detail::fail(kind, op, op[0] ? ": " : "", "index ", v, " is out of bounds for dimension ",
                   dim, " with size ", size);
    negative |= v < 0;
  }
  return negative;
}

void check_out_dtype(const Tensor& out, ScalarType dtype, const char* op) {
  EMBER_CHECK(out->dtype() == dtype, op, ": expected the out= tensor to have dtype ",
              dtype_name(dtype), ", but got ", dtype_name(out->dtype()));
}

void check_inplace_out(const Tensor& self, const Tensor& out, std::initializer_list<Tensor> inputs,
                       const char* op) {
  // Resizing / overwriting out= would change an input the kernel reads afterwards (with sizes it
  // was validated against before): reject it, as PyTorch does.
  for (const Tensor& in : inputs)
    EMBER_CHECK(!in || in->storage() != out->storage(), op,
                ": unsupported operation: some elements of the input tensor and the written-to "
                "tensor refer to a single memory location. Please clone() the tensor before "
                "performing the operation.");
  check_out_dtype(out, self->dtype(), op);
}

void check_fill_value(const TensorOrScalar& value, ScalarType dtype, const char* op) {
  if (value.is_tensor()) {
    EMBER_CHECK(value.tensor->dim() == 0, op,
                ": only supports a 0-dimensional value tensor, but got tensor with ",
                value.tensor->dim(), " dimension(s)");
  } else {
    check_scalar_fits(value.scalar, dtype, op);  // 300 must not wrap silently into an int8 tensor
  }
}

void check_gather_scatter_index(const Tensor& index, const char* op) {
  EMBER_CHECK_KIND(index != nullptr, Type, op, ": expected an index tensor, got None");
  // An empty index selects nothing: PyTorch takes it whatever its dtype and rank.
  if (index->numel() > 0) check_index_dtype(index, op, true);
}

void check_gather_shapes(const Tensor& self, int64_t dim, const Tensor& index, const char* op) {
  if (index->numel() == 0) return;  // any rank (the result has index's shape)
  Tensor s1 = as_1d(self), i1 = as_1d(index);
  EMBER_CHECK(i1->dim() == s1->dim(), op,
              ": index tensor must have the same number of dimensions as input tensor (",
              index->dim(), " vs ", self->dim(), ")");
  for (int64_t d = 0; d < s1->dim(); ++d)
    EMBER_CHECK(d == dim || i1->size(d) <= s1->size(d), op, ": size does not match at dimension ",
                d, ": expected index ", shape_str(index->sizes()), " to be no larger than self ",
                shape_str(self->sizes()), " apart from dimension ", dim);
}

void check_scatter_src_dtype(const Tensor& self, const Tensor& src, const char* op) {
  EMBER_CHECK(src->dtype() == self->dtype(), op,
              ": expected self.dtype to be equal to src.dtype (got ", dtype_name(self->dtype()),
              " and ", dtype_name(src->dtype()), ")");
}

void check_scatter_shapes(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                          const char* op) {
  if (index->numel() == 0) return;  // nothing is written: any rank, any src shape (PyTorch)
  Tensor s1 = as_1d(self), i1 = as_1d(index);
  Tensor src1 = src ? as_1d(src) : Tensor();
  EMBER_CHECK(i1->dim() == s1->dim() && (!src1 || src1->dim() == s1->dim()), op,
              ": index tensor must have the same number of dimensions as self",
              src ? " and src" : "", " (got index ", shape_str(index->sizes()), ", self ",
              shape_str(self->sizes()), src ? ", src " + shape_str(src->sizes()) : std::string(),
              ")");
  for (int64_t d = 0; d < s1->dim(); ++d) {
    EMBER_CHECK(d == dim || i1->size(d) <= s1->size(d), op, ": expected index ",
                shape_str(index->sizes()), " to be no larger than self ", shape_str(self->sizes()),
                " apart from dimension ", dim);
    EMBER_CHECK(!src1 || i1->size(d) <= src1->size(d), op, ": expected index ",
                shape_str(index->sizes()), " to be no larger than src ", shape_str(src->sizes()));
  }
}

IndexReduce parse_index_reduce(const std::string& r, bool scatter_reduce, const char* op) {
  if (scatter_reduce) {
    if (r == "sum") return IndexReduce::Add;
    if (r == "prod") return IndexReduce::Mul;
    if (r == "mean") return IndexReduce::Mean;
    // torch also takes "max" / "min" (undocumented) as amax / amin
    if (r == "amax" || r == "max") return IndexReduce::Max;
    if (r == "amin" || r == "min") return IndexReduce::Min;
    EMBER_FAIL(Runtime, op, ": reduce argument must be either sum, prod, mean, amax or amin, got ",
               r);
  }
  if (r == "add") return IndexReduce::Add;
  if (r == "multiply") return IndexReduce::Mul;
  EMBER_FAIL(Runtime, op, ": reduce argument must be either add or multiply, got ", r);
}

Tensor reduce_identity(IndexReduce red, ScalarType dtype) {
  Tensor v = empty(DimVector{}, dtype, cpu_device());
  EMBER_DISPATCH_ALL(dtype, "scatter_reduce()", [&] {
    using T = scalar_t;
    T x{};
    if (red == IndexReduce::Mul) {
      x = static_cast<T>(1);
    } else if (red == IndexReduce::Max || red == IndexReduce::Min) {
      const bool mx = red == IndexReduce::Max;
      if constexpr (std::is_integral_v<T>) {
        x = mx ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
      } else {
        x = static_cast<T>(mx ? -std::numeric_limits<float>::infinity()
                              : std::numeric_limits<float>::infinity());
      }
    } else {
      x = static_cast<T>(0);
    }
    *v->data_as<T>() = x;
  });
  return v;
}

void check_index_source_dtype(const Tensor& self, const Tensor& index, const Tensor& source,
                              const char* op) {
  EMBER_CHECK_KIND(index->dim() <= 1, Index, op, ": index is supposed to be a vector, got shape ",
                   shape_str(index->sizes()));
  EMBER_CHECK(source->dtype() == self->dtype(), op, ": self (", dtype_name(self->dtype()),
              ") and source (", dtype_name(source->dtype()), ") must have the same dtype");
}

void check_index_source_shape(const Tensor& self, int64_t dim, const Tensor& index,
                              const Tensor& source, const char* op) {
  Tensor s1 = as_1d(self), src1 = as_1d(source);
  EMBER_CHECK(s1->dim() == src1->dim(), op, ": source ", shape_str(source->sizes()),
              " must have the same number of dimensions as self ", shape_str(self->sizes()));
  // PyTorch: RuntimeError for index_add, IndexError for index_copy / index_reduce
  if (index->numel() != src1->size(dim))
    detail::fail(std::strcmp(op, "index_add()") == 0 ? ErrorKind::Runtime : ErrorKind::Index, op,
                 ": number of indices (", index->numel(), ") should be equal to source.size(dim) (",
                 src1->size(dim), ")");
  for (int64_t d = 0; d < s1->dim(); ++d)
    EMBER_CHECK(d == dim || s1->size(d) == src1->size(d), op, ": source ",
                shape_str(source->sizes()), " must match self ", shape_str(self->sizes()),
                " in every dimension but ", dim);
}

void check_mask_dtype(const Tensor& mask, const char* op) {
  EMBER_CHECK(mask->dtype() == ScalarType::Bool, op,
              ": only supports boolean masks, but got mask with dtype ", dtype_name(mask->dtype()));
}

void check_not_storage_dtype(const Tensor& self, const char* op, bool uint_only) {
  const ScalarType t = self->dtype();
  if (!is_storage_type(t) || (uint_only && is_float8(t))) return;
  detail::fail(ErrorKind::DtypeNotImplemented, op, ": not implemented for dtype ", dtype_name(t),
               " (supported: every dtype but ",
               uint_only ? "uint16, uint32 and uint64" : EMBER_STORAGE_DTYPES, ")");
}

void check_mask_broadcasts(const Tensor& self, const Tensor& mask, const char* op) {
  EMBER_CHECK(broadcast_shapes(self->sizes(), mask->sizes(), op) == self->sizes(), op,
              ": mask of shape ", shape_str(mask->sizes()), " can't be broadcast to self's shape ",
              shape_str(self->sizes()));
}

bool searchsorted_upper(bool right, const std::optional<std::string>& side, const char* op) {
  if (side) {
    EMBER_CHECK_KIND(*side == "left" || *side == "right", Runtime, op,
                     ": side can only be 'left' or 'right' but got ", *side);
    EMBER_CHECK_KIND(
        !(right && *side == "left"), Runtime, op,
        ": side and right can't be set to opposites, got side of left while right was True");
  }
  return right || (side && *side == "right");
}

void check_searchsorted_shapes(const Tensor& seq, const Tensor& vals, ScalarType common,
                               const char* op) {
  EMBER_CHECK(seq->dim() >= 1, op,
              ": boundaries tensor should have positive dimension, but got 0 dimension");
  if (seq->dim() > 1) {
    bool ok = vals->dim() == seq->dim();
    for (int64_t d = 0; ok && d + 1 < seq->dim(); ++d) ok = vals->size(d) == seq->size(d);
    EMBER_CHECK(ok, op,
                ": boundaries tensor should be 1 dimension or the first N-1 dimensions of "
                "boundaries tensor "
                "and input value tensor must match, but we got boundaries tensor ",
                shape_str(seq->sizes()), " and input value tensor ", shape_str(vals->sizes()));
  }
  EMBER_CHECK_KIND(common != ScalarType::Bool, DtypeNotImplemented, op,
                   ": not implemented for dtype bool");
}

void check_searchsorted_sorter(const Tensor& sorter, const Tensor& seq, const char* op) {
  EMBER_CHECK_KIND(sorter->dtype() == ScalarType::Int64, Runtime, op,  // as torch
                   ": sorter must be a tensor of dtype int64, but got ",
                   dtype_name(sorter->dtype()));
  EMBER_CHECK(sorter->sizes() == seq->sizes(), op,
              ": boundary and sorter must have the same size, but got boundary ",
              shape_str(seq->sizes()), " and sorter ", shape_str(sorter->sizes()));
}

void check_sorter_values(const int64_t* p, int64_t n, int64_t inner, const char* op) {
  for (int64_t i = 0; i < n; ++i)
    EMBER_CHECK_KIND(p[i] >= 0 && p[i] < inner, Runtime, op, ": sorter index ", p[i],
                     " is out of bounds for the innermost dimension of size ", inner);
}

void check_bincount_args(const Tensor& self, const Tensor& weights, int64_t minlength,
                         const char* op) {
  // PyTorch's NotImplementedError (no kernel for the dtype); still a TypeError as before
  EMBER_CHECK_KIND(is_integral(self->dtype(), false), DtypeNotImplemented, op,
                   ": expected an integer tensor, but got ", dtype_name(self->dtype()));
  if (is_storage_type(self->dtype()))  // uint16/32/64: PyTorch has no kernel for them
    detail::fail(ErrorKind::DtypeNotImplemented, op, ": not implemented for dtype ",
                 dtype_name(self->dtype()), " (supported: uint8, int8, int16, int32 and int64)");
  EMBER_CHECK(self->dim() == 1, op, ": only supports 1-d non-negative integral inputs (got shape ",
              shape_str(self->sizes()), ")");
  EMBER_CHECK(minlength >= 0, op, ": minlength should be >= 0, but got ", minlength);
  if (weights)
    EMBER_CHECK(weights->dim() == 1 && weights->numel() == self->numel(), op,
                ": weights should be 1-d and have the same length as input (got weights ",
                shape_str(weights->sizes()), " and input ", shape_str(self->sizes()), ")");
}

int64_t bincount_bins(const int64_t* p, int64_t n, int64_t minlength, const char* op) {
  int64_t mx = -1;
  for (int64_t i = 0; i < n; ++i) {
    EMBER_CHECK(p[i] >= 0, op, ": only supports 1-d non-negative integral inputs (got value ", p[i],
                ")");
    mx = std::max(mx, p[i]);
  }
  return std::max(mx + 1, minlength);
}

ScalarType bincount_dtype(const Tensor& weights) {
  if (!weights) return ScalarType::Int64;
  return weights->dtype() == ScalarType::Float32 ? ScalarType::Float32 : ScalarType::Float64;
}

void check_histc_range(double lo, double hi, const char* op) {
  EMBER_CHECK(std::isfinite(lo) && std::isfinite(hi), op, ": range of [", lo, ", ", hi,
              "] is not finite");
  EMBER_CHECK(lo < hi, op, ": max must be larger than min");
}

Tensor take_along_dim_via(GatherFn gather, Tensor (*contiguous)(const Tensor&), const Tensor& self,
                          const Tensor& indices, std::optional<int64_t> dim, const Tensor& out) {
  const char* op = "take_along_dim()";
  // As torch: int32 indices only for the flattened form (which is a plain gather).
  check_index_dtype(indices, op, !dim);
  if (!dim) {
    // The flattened form is a plain gather, so, as in torch, negative indices are out of range.
    Tensor flat = contiguous(self);
    Tensor iflat = contiguous(indices);
    return gather(with_shape(flat, DimVector{flat->numel()}), 0,
                  with_shape(iflat, DimVector{iflat->numel()}), out, false, op);
  }
  int64_t d = wrap_dim(*dim, self->dim(), op);
  EMBER_CHECK(self->dim() == indices->dim(), op,
              ": input and indices should have the same number of dimensions, but got ",
              self->dim(), " dimensions for input, and ", indices->dim(),
              " dimensions for indices");
  if (self->dim() == 0) return gather(self, 0, indices, out, true, op);
  DimVector isz = self->sizes();
  isz[d] = indices->size(d);
  DimVector bshape = broadcast_shapes(isz, indices->sizes(), op);
  DimVector ssz = bshape;
  ssz[d] = self->size(d);
  EMBER_CHECK(broadcast_shapes(self->sizes(), ssz, op) == ssz, op, ": input ",
              shape_str(self->sizes()), " cannot be broadcast to ", shape_str(ssz));
  return gather(expand_view(self, ssz), d, expand_view(indices, bshape), out, true, op);
}

namespace {

// The broadcast shape of the index tensors of the indexed dims `dims`.
DimVector broadcast_index_shape(const std::vector<Tensor>& per_dim, const DimVector& dims) {
  DimVector bshape;
  for (int64_t d : dims) {
    const DimVector& s = per_dim[d]->sizes();
    const int64_t n = std::max<int64_t>(bshape.size(), s.size());
    DimVector b(n, 1);
    for (int64_t i = 0; i < n; ++i) {
      int64_t x = i < static_cast<int64_t>(bshape.size()) ? bshape[bshape.size() - 1 - i] : 1;
      int64_t y = i < static_cast<int64_t>(s.size()) ? s[s.size() - 1 - i] : 1;
      if (x != y && x != 1 && y != 1) {
        std::string shapes;
        for (int64_t k : dims)
          shapes += (shapes.empty() ? "" : ", ") + shape_str(per_dim[k]->sizes());
        EMBER_FAIL(Index,
                   "shape mismatch: indexing tensors could not be broadcast together with shapes ",
                   shapes);
      }
      b[n - 1 - i] = x == 1 ? y : x;
    }
    bshape = b;
  }
  return bshape;
}

// offsets[...] += (ix[...] wrapped) * stride, ix (int64 or int32, on the CPU) broadcast.
void add_offsets(const Tensor& offsets, const Tensor& ix, int64_t d, int64_t size, int64_t stride) {
  TensorIterator it("index");
  it.add_output(offsets);
  it.add_input(ix);
  it.resize_outputs(false).no_casting().build();
  auto loop = [&](auto tag) {
    using I = decltype(tag);
    it.for_each([=](char** p, const int64_t* s, int64_t n) {
      for (int64_t k = 0; k < n; ++k) {
        int64_t v = static_cast<int64_t>(*reinterpret_cast<const I*>(p[1] + k * s[1]));
        if (v < -size || v >= size)
          EMBER_FAIL(Index, "index ", v, " is out of bounds for dimension ", d, " with size ",
                     size);
        *reinterpret_cast<int64_t*>(p[0] + k * s[0]) += (v < 0 ? v + size : v) * stride;
      }
    });
  };
  if (ix->dtype() == ScalarType::Int64) {
    loop(int64_t{});
  } else {
    loop(int32_t{});
  }
}

}  // namespace

Tensor index_put_values(const Tensor& values, const DimVector& result_shape, const char* op) {
  Tensor vals = values;
  while (vals->dim() > static_cast<int64_t>(result_shape.size()) && vals->size(0) == 1)
    vals = make_view(vals, DimVector(vals->sizes().begin() + 1, vals->sizes().end()),
                     DimVector(vals->strides().begin() + 1, vals->strides().end()),
                     vals->storage_offset());
  bool ok = vals->dim() <= static_cast<int64_t>(result_shape.size());
  for (int64_t i = 0; ok && i < vals->dim(); ++i) {
    int64_t vs = vals->size(vals->dim() - 1 - i), rs = result_shape[result_shape.size() - 1 - i];
    ok = vs == rs || vs == 1;
  }
  EMBER_CHECK(ok, op, ": shape mismatch: value tensor of shape ", shape_str(values->sizes()),
              " cannot be broadcast to indexing result of shape ", shape_str(result_shape));
  return vals;
}

AdvancedIndex make_advanced_index(const Tensor& self, const std::vector<Tensor>& indices,
                                  Tensor (*on_cpu)(const Tensor&),
                                  void (*check_base)(const Tensor&)) {
  // Expand bool masks into one index tensor per masked dim (nonzero's columns).
  Tensor base = self;
  std::vector<Tensor> per_dim;  // CPU tensors
  for (const Tensor& t : indices) {
    if (!t) {
      per_dim.push_back(nullptr);
      continue;
    }
    ScalarType dt = t->dtype();
    if (dt == ScalarType::Bool || dt == ScalarType::UInt8) {
      const int64_t d = per_dim.size();
      if (t->dim() == 0) {  // a scalar mask adds a dim of size 1 (True) or 0 (False)
        base = unsqueeze_view(base, d);
        bool v = load_scalar(on_cpu(t)->data(), dt).to_bool();
        Tensor ix = empty(DimVector{v ? 1 : 0}, ScalarType::Int64, cpu_device());
        if (v) *ix->data_as<int64_t>() = 0;
        per_dim.push_back(ix);
        continue;
      }
      EMBER_CHECK_KIND(d + t->dim() <= base->dim(), Index,
                       "too many indices for tensor of dimension ", base->dim(), " (got ",
                       d + t->dim(), ")");
      for (int64_t j = 0; j < t->dim(); ++j)
        if (t->size(j) != base->size(d + j))
          EMBER_FAIL(Index, "The shape of the mask ", shape_str(t->sizes()), " at index ", j,
                     " does not match the shape of the indexed tensor ", shape_str(base->sizes()),
                     " at index ", d + j);
      Tensor mask = on_cpu(t);
      if (dt != ScalarType::Bool) {
        Tensor c = empty(mask->sizes(), ScalarType::Bool, cpu_device());
        copy_into(c, mask);
        mask = c;
      }
      Tensor nz = dispatch::nonzero(mask, Tensor());
      for (int64_t j = 0; j < t->dim(); ++j)
        per_dim.push_back(make_view(nz, DimVector{nz->size(0)}, DimVector{nz->stride(0)},
                                    nz->storage_offset() + j));
      continue;
    }
    if (dt != ScalarType::Int64 && dt != ScalarType::Int32)
      EMBER_FAIL(Index, "tensors used as indices must be long, int, byte or bool tensors (got ",
                 dtype_name(dt), ")");
    per_dim.push_back(on_cpu(t));
  }
  EMBER_CHECK_KIND(static_cast<int64_t>(per_dim.size()) <= base->dim(), Index,
                   "too many indices for tensor of dimension ", base->dim(), " (got ",
                   per_dim.size(), ")");
  if (check_base) check_base(base);

  AdvancedIndex r;
  DimVector dims;  // the indexed dims of base
  for (size_t d = 0; d < per_dim.size(); ++d)
    if (per_dim[d]) dims.push_back(d);
  r.bshape = broadcast_index_shape(per_dim, dims);
  bool adjacent = dims.empty() || dims.back() - dims[0] + 1 == static_cast<int64_t>(dims.size());
  r.pos = (adjacent && !dims.empty()) ? dims[0] : 0;

  // Element offsets into base of every position of bshape, bounds-checked.
  r.offsets = empty(r.bshape, ScalarType::Int64, cpu_device());
  std::memset(r.offsets->data(), 0, r.offsets->numel() * 8);
  // Nothing is read when another dim is empty; PyTorch checks no index values then either.
  bool rest_empty = false;
  for (int64_t d = 0; d < base->dim(); ++d)
    rest_empty |= base->size(d) == 0 && (d >= static_cast<int64_t>(per_dim.size()) || !per_dim[d]);
  for (int64_t d : dims) {
    if (r.offsets->numel() == 0 || rest_empty) break;
    add_offsets(r.offsets, per_dim[d], d, base->size(d), base->stride(d));
  }

  // base without the indexed dims, a size-1 dim at pos in their place.
  DimVector sizes, strides;
  for (int64_t d = 0; d < base->dim(); ++d) {
    if (d < static_cast<int64_t>(per_dim.size()) && per_dim[d]) continue;
    sizes.push_back(base->size(d));
    strides.push_back(base->stride(d));
  }
  r.result_shape = sizes;
  for (int64_t i = r.bshape.size() - 1; i >= 0; --i) r.result_shape.insert(r.pos, r.bshape[i]);
  sizes.insert(r.pos, 1);
  strides.insert(r.pos, 0);
  r.src = make_view(base, std::move(sizes), std::move(strides), base->storage_offset());
  return r;
}

IndexPutSource index_put_source(const AdvancedIndex& ai, const Tensor& vals) {
  Tensor vexp = expand_view(vals, ai.result_shape);
  const int64_t nb = ai.bshape.size();
  Tensor src_off = empty(DimVector{ai.count()}, ScalarType::Int64, cpu_device());
  {
    int64_t* w = src_off->data_as<int64_t>();
    DimVector ctr(nb, 0);
    int64_t cur = 0;
    for (int64_t j = 0; j < ai.count(); ++j) {
      w[j] = cur;
      for (int64_t d = nb - 1; d >= 0; --d) {
        const int64_t st = vexp->stride(ai.pos + d);
        if (++ctr[d] < ai.bshape[d]) {
          cur += st;
          break;
        }
        cur -= st * (ctr[d] - 1);
        ctr[d] = 0;
      }
    }
  }
  DimVector vs = ai.src->sizes(), vst;
  for (int64_t d = 0; d < vexp->dim(); ++d)
    if (d < ai.pos || d >= ai.pos + nb) vst.push_back(vexp->stride(d));
  vst.insert(ai.pos, 0);
  Tensor vrest = make_view(vexp, vs, vst, vexp->storage_offset());
  return {vrest, src_off};
}

}  // namespace ember
