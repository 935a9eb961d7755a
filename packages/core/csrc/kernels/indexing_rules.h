// Device-neutral pieces of the indexing ops (ops/indexing.yaml) shared by the CPU and CUDA
// kernels: metadata views, argument checks with their messages, and the host-side decomposition
// of advanced indexing, so each rule lives once.
#pragma once
#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace ember {

// ---- metadata-only views ----

// PyTorch's index ops treat a 0-d tensor as a 1-element vector.
Tensor as_1d(const Tensor& t);
// t broadcast (right-aligned, stride 0) to `sizes`; the caller checked that it broadcasts.
Tensor expand_view(const Tensor& t, const DimVector& sizes);
Tensor with_shape(const Tensor& contiguous, const DimVector& sizes);
Tensor unsqueeze_view(const Tensor& t, int64_t d);

// A 16-byte element (complex128) as plain bits, for kernels that only move values. Aligned to
// 8 like complex128 itself: storage (a 0-d tensor, a NumPy buffer) need not be 16-aligned.
struct Bytes16 {
  uint64_t lo, hi;
  Bytes16() = default;
  // T(0) in kernels that write zeros (tril, embedding's bad rows): all bits zero, 0 + 0i.
  explicit constexpr Bytes16(int) : lo(0), hi(0) {}
};

// Calls f(tag) with an unsigned type of the element size: pure data movement needs only that
// (5 instantiations instead of one per dtype).
template <class F>
void dispatch_itemsize(int64_t size, const F& f) {
  switch (size) {
    case 1:
      f(uint8_t{});
      return;
    case 2:
      f(uint16_t{});
      return;
    case 4:
      f(uint32_t{});
      return;
    case 8:
      f(uint64_t{});
      return;
    default:
      f(Bytes16{});  // complex128
      return;
  }
}

// ---- argument checks ----

// A RuntimeError by default (an IndexError for index_fill_), as PyTorch.
void check_index_dtype(const Tensor& index, const char* op, bool allow_int32,
                       ErrorKind kind = ErrorKind::Runtime);
// Checks that the n index values lie in [0, size) -- or [-size, size) when allow_negative;
// returns whether any is negative (to be wrapped by the caller). kind: the error's class (torch
// raises IndexError for take / index_select / index_copy / index_fill, RuntimeError for gather /
// scatter / index_add).
bool check_index_range(const int64_t* p, int64_t n, int64_t size, int64_t dim, bool allow_negative,
                       const char* op, ErrorKind kind = ErrorKind::Index);
void check_out_dtype(const Tensor& out, ScalarType dtype, const char* op);
// out= of an op with an in-place form: no input may share its memory, and it has self's dtype.
void check_inplace_out(const Tensor& self, const Tensor& out, std::initializer_list<Tensor> inputs,
                       const char* op);
// A fill value: a 0-d tensor, or a number that fits `dtype`.
void check_fill_value(const TensorOrScalar& value, ScalarType dtype, const char* op);

// gather / scatter: index is int64 or int32 -- unless it is empty (any dtype, as PyTorch).
void check_gather_scatter_index(const Tensor& index, const char* op);
// gather: an empty index, or one of self's rank no larger than self apart from (wrapped) dim.
void check_gather_shapes(const Tensor& self, int64_t dim, const Tensor& index, const char* op);
void check_scatter_src_dtype(const Tensor& self, const Tensor& src, const char* op);
// scatter: an empty index, or index (and src) of self's rank with index no larger than self / src.
void check_scatter_shapes(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                          const char* op);

enum class IndexReduce { Assign, Add, Mul, Max, Min, Mean };
// scatter's reduce= ("add", "multiply") or scatter_reduce's ("sum", "prod", "mean", ...).
IndexReduce parse_index_reduce(const std::string& r, bool scatter_reduce, const char* op);

// The identity of a reduction in dtype, as a 0-d CPU tensor (scatter_reduce with
// include_self=False starts every scattered position from it).
Tensor reduce_identity(IndexReduce red, ScalarType dtype);

// index_add / index_copy: a vector index and a source of self's dtype ...
void check_index_source_dtype(const Tensor& self, const Tensor& index, const Tensor& source,
                              const char* op);
// ... and of self's shape but along dim, where it has one slice per index.
void check_index_source_shape(const Tensor& self, int64_t dim, const Tensor& index,
                              const Tensor& source, const char* op);

void check_mask_dtype(const Tensor& mask, const char* op);
// Ops PyTorch has no kernel of for the storage dtypes (gather, scatter), or for uint16/32/64
// only (uint_only: masked_select, while indexing with a bool mask takes them).
void check_not_storage_dtype(const Tensor& self, const char* op, bool uint_only = false);
void check_mask_broadcasts(const Tensor& self, const Tensor& mask, const char* op);

// searchsorted: returns whether the upper bound is searched (right / side="right").
bool searchsorted_upper(bool right, const std::optional<std::string>& side, const char* op);
void check_searchsorted_shapes(const Tensor& seq, const Tensor& vals, ScalarType common,
                               const char* op);
void check_searchsorted_sorter(const Tensor& sorter, const Tensor& seq, const char* op);
void check_sorter_values(const int64_t* p, int64_t n, int64_t inner, const char* op);

void check_bincount_args(const Tensor& self, const Tensor& weights, int64_t minlength,
                         const char* op);
// The number of bins for the n (int64) values, each checked to be non-negative.
int64_t bincount_bins(const int64_t* p, int64_t n, int64_t minlength, const char* op);
ScalarType bincount_dtype(const Tensor& weights);

void check_histc_range(double lo, double hi, const char* op);

// histc: the [lo, hi] range (min == max: the data's range, widened when it is one value).
// data() gives the n values on the host (called only when they are needed).
template <class T, class Data>
void histc_range(const Scalar& min, const Scalar& max, int64_t n, const Data& data, double& lo,
                 double& hi, const char* op) {
  using A = opmath_t<T>;
  lo = min.to_double();
  hi = max.to_double();
  if (lo == hi && n > 0) {
    const T* p = data();
    A mn = static_cast<A>(p[0]), mxv = static_cast<A>(p[0]);
    for (int64_t i = 0; i < n; ++i) {
      A v = static_cast<A>(p[i]);
      if (v != v) {
        mn = mxv = v;
        break;
      }
      mn = std::min(mn, v);
      mxv = std::max(mxv, v);
    }
    lo = mn;
    hi = mxv;
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  check_histc_range(lo, hi, op);
}

// take_along_dim on a device's gather and contiguous copy (negative indices wrap only when a
// dim is given, as in torch).
using GatherFn = Tensor (*)(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& out,
                            bool allow_negative, const char* op);
Tensor take_along_dim_via(GatherFn gather, Tensor (*contiguous)(const Tensor&), const Tensor& self,
                          const Tensor& indices, std::optional<int64_t> dim, const Tensor& out);

// ---- advanced indexing ----

// index_put_'s values as a view that broadcasts to the indexing result (leading size-1 dims
// beyond the result's rank dropped, as in copy_); raises if they do not.
Tensor index_put_values(const Tensor& values, const DimVector& result_shape, const char* op);

// self[indices] decomposed into: `src`, a view of self whose indexed dims are replaced by one
// size-1 dim at `pos`; `offsets`, the element offset (into self) of every position of the
// broadcast index shape (a CPU int64 tensor of shape bshape); and the result shape
// rest[:pos] + bshape + rest[pos:].
struct AdvancedIndex {
  Tensor src;
  Tensor offsets;
  DimVector bshape;
  DimVector result_shape;
  int64_t pos = 0;
  int64_t count() const { return offsets->numel(); }
};

// index_put_'s reads of its values (broadcast to the result shape): `vrest`, a view of them
// shaped like ai.src (the broadcast dims collapsed into one size-1 dim at pos), and `src_off`,
// the element offset into them (a CPU int64 vector) of each indexed position in turn.
struct IndexPutSource {
  Tensor vrest;
  Tensor src_off;
};
IndexPutSource index_put_source(const AdvancedIndex& ai, const Tensor& vals);

// on_cpu(t): t's values in a CPU tensor (t itself on the CPU). check_base, when given, sees the
// tensor indexed (self with a dim added per 0-d mask) before any index is read.
AdvancedIndex make_advanced_index(const Tensor& self, const std::vector<Tensor>& indices,
                                  Tensor (*on_cpu)(const Tensor&),
                                  void (*check_base)(const Tensor&) = nullptr);

}  // namespace ember
