// CPU kernels of the indexing ops (ops/indexing.yaml); the composites built on them are in
// ops/indexing_ops.cpp.
//
// Every "index along a dim" op has one shape: TensorIterator walks the positions of all the other
// dims (the indexed dim is squashed to one element, stride 0, in every operand) and a plain inner
// loop runs along the indexed dim, following the index values. Threads split the outer positions,
// so two threads never write one element even when indices repeat. Index values are checked (and
// negative ones wrapped where PyTorch allows them) in one pass before a kernel runs, so kernels
// never see an out-of-range index. Pure data movement dispatches on the element size (4
// instantiations); arithmetic (add, reductions) dispatches on the dtype once.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "core/out_tensor.h"
#include "kernels/cpu/bool_bytes.h"
#include "kernels/indexing_rules.h"
#include "kernels/iterator.h"
#include "kernels/loops.h"
#include "kernels/parallel.h"
#include "kernels/reduce_rules.h"
#include "ops.h"

namespace ember {
namespace {

// ---- metadata-only views --------------------------------------------------------------------

Tensor contiguous_as(const Tensor& t, ScalarType dtype) {
  if (t->is_contiguous() && t->dtype() == dtype) return t;
  Tensor c = empty(t->sizes(), dtype, t->device());
  copy_into(c, t);
  return c;
}

// t with sizes `shape` except `dim`, which is squashed to one element (stride 0): the operand
// TensorIterator walks while a kernel loops over `dim` itself. t is at least `shape` elsewhere.
Tensor squash(const Tensor& t, int64_t dim, const DimVector& shape) {
  DimVector sizes = shape, strides = t->strides();
  sizes[dim] = 1;
  strides[dim] = 0;
  return make_view(t, std::move(sizes), std::move(strides), t->storage_offset());
}

// The iterator over the outer positions: all operands have the same (squashed) shape and keep
// their dtypes; operand 0 is written.
TensorIterator outer_iter(const char* op, const Tensor& out, std::initializer_list<Tensor> inputs) {
  TensorIterator it(op);
  it.add_output(out);
  for (const Tensor& t : inputs) it.add_input(t);
  it.resize_outputs(false).no_casting().build();
  return it;
}

// Runs make_loop(jb, je) -- an iterator loop that walks positions [jb, je) of the indexed dim
// (length L) at each outer position -- over every outer position. Threads split the outer
// positions, or the indexed dim when `split_dim` (a read-only walk of the source) and the outer
// positions are fewer than L.
template <class MakeLoop>
void run_along_dim(const TensorIterator& it, int64_t L, bool split_dim, const MakeLoop& make_loop) {
  const int64_t outer = it.numel();
  if (outer == 0 || L == 0) return;
  if (outer * L < 2 * kPointwiseGrain || get_num_threads() == 1) {
    it.serial_for_each(make_loop(0, L), 0, outer);
  } else if (split_dim && outer < L) {
    parallel_for(0, L, std::max<int64_t>(1, kPointwiseGrain / outer),
                 [&](int64_t b, int64_t e) { it.serial_for_each(make_loop(b, e), 0, outer); });
  } else {
    it.for_each(make_loop(0, L), std::max<int64_t>(1, kPointwiseGrain / L));
  }
}

template <class T>
inline T& at(char* p) {
  return *reinterpret_cast<T*>(p);
}
template <class T>
inline T at(const char* p) {
  return *reinterpret_cast<const T*>(p);
}

// ---- arguments ------------------------------------------------------------------------------

// The index values as a contiguous int64 tensor of index's shape, each checked to lie in
// [0, size) -- or [-size, size), negatives wrapped, when allow_negative.
Tensor checked_index(const Tensor& index, int64_t size, int64_t dim, bool allow_negative,
                     const char* op, ErrorKind kind = ErrorKind::Index) {
  Tensor idx = contiguous_as(index, ScalarType::Int64);
  const int64_t n = idx->numel();
  if (!check_index_range(idx->data_as<int64_t>(), n, size, dim, allow_negative, op, kind))
    return idx;
  if (idx == index) idx = dispatch::clone(index);
  int64_t* w = idx->data_as<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    if (w[i] < 0) w[i] += size;
  return idx;
}

// An input an in-place op reads while it writes target: a copy when it shares target's memory,
// so that the writes do not feed later reads (x.index_copy_(0, i, x[:2]) and x.scatter_(0, i,
// x[:2]) read back rows they had just written: a silent wrong result; PyTorch refuses them).
Tensor unaliased(const Tensor& in, const Tensor& target) {
  return in && in->numel() > 0 && in->storage() == target->storage() ? dispatch::clone(in) : in;
}

// Where an op with out= writes: a new contiguous tensor, or out= itself (resized to `sizes` when
// they differ; its dtype must be `dtype`). A non-contiguous out= gets the result copied in.
struct OutArg {
  Tensor result, user;
  const char* op;
  Tensor done() const {
    if (!user) return result;
    if (user != result) {
      resize_out(user, result->sizes(), op);  // deferred when out= shares memory with an input
      copy_into(user, result);
    } else {
      user->bump_version();
    }
    return user;
  }
};

OutArg make_out(const Tensor& out, const DimVector& sizes, ScalarType dtype, const char* op,
                std::initializer_list<Tensor> inputs) {
  if (!out) return {empty(sizes, dtype), nullptr, op};
  check_out(out, dtype, inputs.size() ? (*inputs.begin())->device() : out->device(), op,
            OutDtype::Exact);
  check_no_internal_overlap(out, op);  // an expanded out= would get one of several values
  // out= sharing memory with an input (x.take(i, out=x)) is neither resized nor written until
  // the op has read its inputs: resizing first would swap the input's storage under the kernel.
  for (const Tensor& in : inputs)
    if (in && in->storage() == out->storage()) return {empty(sizes, dtype), out, op};
  resize_out(out, sizes, op);
  if (out->is_contiguous()) return {out, out, op};
  return {empty(sizes, dtype), out, op};
}

// The tensor an op with an in-place form writes: self (in place), out= (a copy of self), or a
// fresh copy of self.
Tensor inplace_target(const Tensor& self, const Tensor& out, const char* op,
                      std::initializer_list<Tensor> inputs) {
  if (!out) return dispatch::clone(self);
  // Writing through an expanded (stride 0) view would scatter into one element several times.
  check_no_internal_overlap(out, op);
  if (out.get() == self.get()) return self;
  check_inplace_out(self, out, inputs, op);
  resize_out(out, self->sizes(), op);
  copy_into(out, self);
  return out;
}

// A 0-d tensor of `dtype` holding a number or a 0-d tensor's value.
Tensor value_tensor(const TensorOrScalar& value, ScalarType dtype, const char* op) {
  check_fill_value(value, dtype, op);
  Scalar s =
      value.is_tensor() ? load_scalar(value.tensor->data(), value.tensor->dtype()) : value.scalar;
  Tensor v = empty(DimVector{}, dtype);
  store_scalar(s, dtype, v->data());
  return v;
}

// ---- kernels --------------------------------------------------------------------------------

// The inner loop of the row kernels: f(dst element, src element) at every position k < n of an
// iterator row and every j in [jb, je), the two operands offset by dst_at(j) / src_at(j) bytes.
// Rows contiguous in both operands go j-major (whole rows at a time); strided ones k-major, so the
// walk does not sweep memory once per j.
struct Assign {
  template <class T>
  void operator()(T& x, T y) const {
    x = y;
  }
};

template <class T, class DstAt, class SrcAt, class F>
inline void rows_loop(char** d, const int64_t* s, int64_t n, int64_t jb, int64_t je,
                      const DstAt& dst_at, const SrcAt& src_at, const F& f) {
  if (n > 1 && s[0] == sizeof(T) && s[1] == sizeof(T)) {
    for (int64_t j = jb; j < je; ++j) {
      T* o = reinterpret_cast<T*>(d[0] + dst_at(j));
      const T* p = reinterpret_cast<const T*>(d[1] + src_at(j));
      if constexpr (std::is_same_v<F, Assign>) {
        std::memcpy(o, p, n * sizeof(T));
      } else {
        for (int64_t k = 0; k < n; ++k) f(o[k], p[k]);
      }
    }
    return;
  }
  for (int64_t k = 0; k < n; ++k) {
    char* o = d[0] + k * s[0];
    const char* p = d[1] + k * s[1];
    for (int64_t j = jb; j < je; ++j) f(at<T>(o + dst_at(j)), at<T>(p + src_at(j)));
  }
}

// out[.., j, ..] = src[.., off[j], ..] along `dim` (j < L), where src steps src_step bytes per unit
// of off[j]; out and src agree on every other dim.
void gather_rows(const Tensor& out, const Tensor& src, int64_t dim, const int64_t* off, int64_t L,
                 int64_t src_step, const char* op) {
  const DimVector& shape = out->sizes();
  TensorIterator it = outer_iter(op, squash(out, dim, shape), {squash(src, dim, shape)});
  const int64_t out_step = out->stride(dim) * out->itemsize();
  auto dst_at = [out_step](int64_t j) { return j * out_step; };
  auto src_at = [off, src_step](int64_t j) { return off[j] * src_step; };
  dispatch_itemsize(out->itemsize(), [&](auto tag) {
    using T = decltype(tag);
    run_along_dim(it, L, true, [&](int64_t jb, int64_t je) {
      return [=](char** d, const int64_t* s, int64_t n) {
        rows_loop<T>(d, s, n, jb, je, dst_at, src_at, Assign{});
      };
    });
  });
}

// Writes (or adds alpha *) src[.., j, ..] into dst[.., off[j], ..] along `dim`: dst steps dst_step
// bytes per unit of off[j]; src steps src_step bytes per j, or per unit of src_off[j] when given.
void put_rows(const Tensor& dst, const Tensor& src, int64_t dim, const int64_t* off,
              int64_t dst_step, const int64_t* src_off, int64_t src_step, int64_t L,
              bool accumulate, const Scalar& alpha, const char* op) {
  const DimVector shape = dst->sizes();
  TensorIterator it = outer_iter(op, squash(dst, dim, shape), {squash(src, dim, shape)});
  auto dst_at = [off, dst_step](int64_t j) { return off[j] * dst_step; };
  auto src_at = [src_off, src_step](int64_t j) { return (src_off ? src_off[j] : j) * src_step; };
  if (!accumulate) {
    dispatch_itemsize(dst->itemsize(), [&](auto tag) {
      using T = decltype(tag);
      run_along_dim(it, L, false, [&](int64_t jb, int64_t je) {
        return [=](char** d, const int64_t* s, int64_t n) {
          rows_loop<T>(d, s, n, jb, je, dst_at, src_at, Assign{});
        };
      });
    });
    return;
  }
  EMBER_DISPATCH_ALL_AND_COMPLEX(dst->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const A a = alpha.to<A>();
    run_along_dim(it, L, false, [&](int64_t jb, int64_t je) {
      return [=](char** d, const int64_t* s, int64_t n) {
        // generic, so the bool branch is discarded for the other types
        rows_loop<T>(d, s, n, jb, je, dst_at, src_at, [a](auto& x, auto y) {
          using U = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<U, bool>) {
            x = x || (a && y);
          } else {
            x = static_cast<U>(static_cast<A>(x) + a * static_cast<A>(y));
          }
        });
      };
    });
  });
}

using Reduce = IndexReduce;

// self[.., index[.., j, ..], ..] (op)= src[.., j, ..] along dim, walking index's shape.
void scatter_kernel(const Tensor& self, int64_t dim, const Tensor& idx, const Tensor& src,
                    Reduce red, const char* op) {
  const DimVector& shape = idx->sizes();
  TensorIterator it =
      outer_iter(op, squash(self, dim, shape), {squash(idx, dim, shape), squash(src, dim, shape)});
  const int64_t L = shape[dim];
  const int64_t self_step = self->stride(dim) * self->itemsize(), idx_step = idx->stride(dim) * 8,
                src_step = src->stride(dim) * src->itemsize();
  auto run = [&](auto tag, auto f) {
    using T = decltype(tag);
    run_along_dim(it, L, false, [&](int64_t jb, int64_t je) {
      return [=](char** d, const int64_t* s, int64_t n) {
        for (int64_t k = 0; k < n; ++k) {
          char* o = d[0] + k * s[0];
          const char* ix = d[1] + k * s[1];
          const char* sp = d[2] + k * s[2];
          for (int64_t j = jb; j < je; ++j) {
            T& x = at<T>(o + at<int64_t>(ix + j * idx_step) * self_step);
            x = f(x, at<T>(sp + j * src_step));
          }
        }
      };
    });
  };
  if (red == Reduce::Assign) {
    dispatch_itemsize(self->itemsize(), [&](auto tag) {
      using T = decltype(tag);
      run(tag, [](T, T b) { return b; });
    });
    return;
  }
  if (red == Reduce::Add && is_complex(self->dtype())) {  // complex: sums only (scatter_add)
    EMBER_DISPATCH_COMPLEX(self->dtype(), op, [&] {
      using T = scalar_t;
      run(T{}, [](T a, T b) { return a + b; });
    });
    return;
  }
  EMBER_DISPATCH_ALL(self->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    switch (red) {
      case Reduce::Add:
      case Reduce::Mean:
        return run(T{},
                   [](T a, T b) { return static_cast<T>(static_cast<A>(a) + static_cast<A>(b)); });
      case Reduce::Mul:
        return run(T{}, [](auto a, auto b) {  // generic, so the bool branch is discarded for others
          using U = decltype(a);
          if constexpr (std::is_same_v<U, bool>) {
            return static_cast<U>(a && b);
          } else {
            return static_cast<U>(static_cast<opmath_t<U>>(a) * static_cast<opmath_t<U>>(b));
          }
        });
      case Reduce::Max:
        return run(T{}, [](T a, T b) {
          A x = static_cast<A>(a), y = static_cast<A>(b);
          return (y != y || y > x) ? b : a;  // NaN propagates, as in PyTorch
        });
      case Reduce::Min:
        return run(T{}, [](T a, T b) {
          A x = static_cast<A>(a), y = static_cast<A>(b);
          return (y != y || y < x) ? b : a;
        });
      default:
        return;
    }
  });
}

// ---- advanced indexing ----------------------------------------------------------------------

// Index tensors are CPU tensors already.
Tensor on_cpu(const Tensor& t) { return t; }

// The rows of (int64, contiguous) `offsets` shaped like the src view of `ai`, with the
// broadcast dims flattened into one: the layout the row kernels want.
DimVector flat_shape(const AdvancedIndex& ai) {
  DimVector s = ai.src->sizes();
  s[ai.pos] = ai.count();
  return s;
}

// ---- histc / searchsorted helpers ------------------------------------------------------------

template <class T>
int64_t lower_bound_idx(const T* bd, const int64_t* sorter, int64_t n, opmath_t<T> v) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + ((hi - lo) >> 1);
    opmath_t<T> m = static_cast<opmath_t<T>>(bd[sorter ? sorter[mid] : mid]);
    if (!(m >= v)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

template <class T>
int64_t upper_bound_idx(const T* bd, const int64_t* sorter, int64_t n, opmath_t<T> v) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + ((hi - lo) >> 1);
    opmath_t<T> m = static_cast<opmath_t<T>>(bd[sorter ? sorter[mid] : mid]);
    if (!(m > v)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

Tensor gather_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& out,
                   bool allow_negative, const char* op) {
  check_not_storage_dtype(self, op);
  check_gather_scatter_index(index, op);
  dim = wrap_dim(dim, self->dim(), op);
  check_gather_shapes(self, dim, index, op);
  Tensor s1 = as_1d(self);
  OutArg o = make_out(out, index->sizes(), self->dtype(), op, {self, index});
  if (index->numel() == 0) return o.done();
  Tensor idx =
      as_1d(checked_index(index, s1->size(dim), dim, allow_negative, op, ErrorKind::Runtime));
  Tensor res = as_1d(o.result);
  const DimVector& shape = idx->sizes();
  TensorIterator it =
      outer_iter(op, squash(res, dim, shape), {squash(s1, dim, shape), squash(idx, dim, shape)});
  const int64_t out_step = res->stride(dim) * res->itemsize(),
                src_step = s1->stride(dim) * s1->itemsize(), idx_step = idx->stride(dim) * 8;
  dispatch_itemsize(self->itemsize(), [&](auto tag) {
    using T = decltype(tag);
    run_along_dim(it, shape[dim], true, [&](int64_t jb, int64_t je) {
      return [=](char** d, const int64_t* s, int64_t n) {
        for (int64_t k = 0; k < n; ++k) {
          char* o = d[0] + k * s[0];
          const char* p = d[1] + k * s[1];
          const char* ix = d[2] + k * s[2];
          for (int64_t j = jb; j < je; ++j)
            at<T>(o + j * out_step) = at<T>(p + at<int64_t>(ix + j * idx_step) * src_step);
        }
      };
    });
  });
  return o.done();
}

// x /= count where count > 0 (floor division for integers, as PyTorch's scatter_reduce 'mean').
template <class T>
void divide_by_counts(const TensorIterator& it, T) {
  using A = opmath_t<T>;
  it.for_each([](char** d, const int64_t* s, int64_t n) {
    for (int64_t k = 0; k < n; ++k) {
      const int64_t c = at<int64_t>(d[1] + k * s[1]);
      if (c == 0) continue;
      T& x = at<T>(d[0] + k * s[0]);
      if constexpr (std::is_integral_v<T>) {
        int64_t v = x, q = v / c;
        x = static_cast<T>((v % c != 0 && v < 0) ? q - 1 : q);  // c > 0: floor
      } else {
        x = static_cast<T>(static_cast<A>(x) / static_cast<A>(c));
      }
    }
  });
}

// Shared body of scatter / scatter_add / scatter_reduce. src is a tensor of self's dtype, or null
// with `value` written instead.
Tensor scatter_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                    const Scalar& value, Reduce red, bool include_self, const Tensor& out,
                    const char* op) {
  check_not_storage_dtype(self, op);
  check_gather_scatter_index(index, op);
  dim = wrap_dim(dim, self->dim(), op);
  if (src) check_scatter_src_dtype(self, src, op);
  if (red == Reduce::Mean && self->dtype() == ScalarType::Bool)
    EMBER_FAIL(DtypeNotImplemented, op, ": reduce='mean' is not implemented for dtype bool");
  check_scatter_shapes(self, dim, index, src, op);
  Tensor target = inplace_target(self, out, op, {self, index, src});
  if (index->numel() == 0) return target;
  Tensor src1 = src ? as_1d(unaliased(src, target)) : Tensor();
  Tensor t1 = as_1d(target);
  Tensor idx = as_1d(
      checked_index(unaliased(index, target), t1->size(dim), dim, false, op, ErrorKind::Runtime));
  Tensor srcv = src1 ? src1 : expand_view(value_tensor(value, self->dtype(), op), idx->sizes());
  if (!include_self && red != Reduce::Assign)
    scatter_kernel(t1, dim, idx, expand_view(reduce_identity(red, self->dtype()), idx->sizes()),
                   Reduce::Assign, op);
  if (red != Reduce::Mean) {
    scatter_kernel(t1, dim, idx, srcv, red, op);
    return target;
  }
  // mean: sum, then divide by how many values landed on each position (plus self's own).
  scatter_kernel(t1, dim, idx, srcv, Reduce::Add, op);
  Tensor counts = empty(t1->sizes(), ScalarType::Int64);
  std::fill_n(counts->data_as<int64_t>(), counts->numel(), include_self ? 1 : 0);
  Tensor one = empty(DimVector{}, ScalarType::Int64);
  *one->data_as<int64_t>() = 1;
  scatter_kernel(counts, dim, idx, expand_view(one, idx->sizes()), Reduce::Add, op);
  TensorIterator it = outer_iter(op, t1, {counts});
  EMBER_DISPATCH_NUMERIC(self->dtype(), op, [&] { divide_by_counts(it, scalar_t{}); });
  return target;
}

// Checks shared by index_add / index_copy: a vector index, matching source.
void check_index_source(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                        const char* op) {
  check_index_source_dtype(self, index, source, op);
  check_index_source_shape(self, dim, index, source, op);
}

// target[.., index[j], ..] = (or += alpha *) source[.., j, ..] along dim.
void index_put_along_dim(const Tensor& target, int64_t dim, const Tensor& idx, const Tensor& source,
                         bool accumulate, const Scalar& alpha, const char* op) {
  Tensor t1 = as_1d(target), src1 = as_1d(source);
  put_rows(t1, src1, dim, idx->data_as<int64_t>(), t1->stride(dim) * t1->itemsize(), nullptr,
           src1->stride(dim) * src1->itemsize(), idx->numel(), accumulate, alpha, op);
}

}  // namespace

// ---- ops ------------------------------------------------------------------------------------

namespace cpu {

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& out) {
  const char* op = "index_select()";
  check_index_dtype(index, op, true);
  EMBER_CHECK_KIND(index->dim() <= 1, Index, op, ": index is supposed to be a vector, got shape ",
                   shape_str(index->sizes()));
  dim = wrap_dim(dim, self->dim(), op);
  EMBER_CHECK_KIND(self->dim() > 0 || index->numel() == 1, Runtime, op,
                   ": Index to scalar can have only 1 value, got ", index->numel(), " value(s)");
  Tensor s1 = as_1d(self);
  // out of range: IndexError, as torch's index_select (its gather / scatter raise RuntimeError)
  Tensor idx = checked_index(index, s1->size(dim), dim, false, op);
  DimVector shape = s1->sizes();
  shape[dim] = idx->numel();
  // A 0-d self gives a 0-d result (as torch), whatever the index's dim.
  OutArg o =
      make_out(out, self->dim() == 0 ? DimVector{} : shape, self->dtype(), op, {self, index});
  gather_rows(with_shape(o.result, shape), s1, dim, idx->data_as<int64_t>(), idx->numel(),
              s1->stride(dim) * s1->itemsize(), op);
  return o.done();
}

Tensor gather(const Tensor& self, int64_t dim, const Tensor& index, bool sparse_grad,
              const Tensor& out) {
  (void)sparse_grad;  // dense gradients only
  return gather_impl(self, dim, index, out, false, "gather()");
}

Tensor take_along_dim(const Tensor& self, const Tensor& indices, std::optional<int64_t> dim,
                      const Tensor& out) {
  return take_along_dim_via(
      &gather_impl, [](const Tensor& t) { return contiguous_as(t, t->dtype()); }, self, indices,
      dim, out);
}

Tensor scatter_src(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                   const std::optional<std::string>& reduce, const Tensor& out) {
  Reduce red = reduce ? parse_index_reduce(*reduce, false, "scatter()") : Reduce::Assign;
  return scatter_impl(self, dim, index, src, Scalar(), red, true, out, "scatter()");
}

Tensor scatter_value(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value,
                     const std::optional<std::string>& reduce, const Tensor& out) {
  Reduce red = reduce ? parse_index_reduce(*reduce, false, "scatter()") : Reduce::Assign;
  return scatter_impl(self, dim, index, nullptr, value, red, true, out, "scatter()");
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                   const Tensor& out) {
  return scatter_impl(self, dim, index, src, Scalar(), Reduce::Add, true, out, "scatter_add()");
}

Tensor scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self, const Tensor& out) {
  Reduce red = parse_index_reduce(reduce, true, "scatter_reduce()");
  return scatter_impl(self, dim, index, src, Scalar(), red, include_self, out, "scatter_reduce()");
}

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha, const Tensor& out) {
  const char* op = "index_add()";
  check_index_dtype(index, op, true);
  dim = wrap_dim(dim, self->dim(), op);
  check_index_source(self, dim, index, source, op);
  Tensor target = inplace_target(self, out, op, {self, index, source});
  // PyTorch: IndexError for a 0-d / 1-d self, RuntimeError for more dims
  Tensor idx = checked_index(unaliased(index, target), as_1d(target)->size(dim), dim, false, op,
                             self->dim() <= 1 ? ErrorKind::Index : ErrorKind::Runtime);
  index_put_along_dim(target, dim, idx, unaliased(source, target), true, alpha, op);
  return target;
}

Tensor index_copy(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                  const Tensor& out) {
  const char* op = "index_copy()";
  check_index_dtype(index, op, false);
  dim = wrap_dim(dim, self->dim(), op);
  check_index_source(self, dim, index, source, op);
  Tensor target = inplace_target(self, out, op, {self, index, source});
  Tensor idx = checked_index(unaliased(index, target), as_1d(target)->size(dim), dim, false, op);
  index_put_along_dim(target, dim, idx, unaliased(source, target), false, Scalar(), op);
  return target;
}

Tensor index_fill_(const Tensor& self, int64_t dim, const Tensor& index,
                   const TensorOrScalar& value) {
  const char* op = "index_fill_()";
  check_index_dtype(index, op, false, ErrorKind::Index);
  EMBER_CHECK_KIND(index->dim() <= 1, Runtime, op, ": index is supposed to be a vector, got shape ",
                   shape_str(index->sizes()));
  dim = wrap_dim(dim, self->dim(), op);
  Tensor v = value_tensor(value, self->dtype(), op);
  Tensor s1 = as_1d(self);
  Tensor idx = checked_index(index, s1->size(dim), dim, true, op);
  DimVector vshape = s1->sizes();
  vshape[dim] = idx->numel();
  put_rows(s1, expand_view(v, vshape), dim, idx->data_as<int64_t>(),
           s1->stride(dim) * s1->itemsize(), nullptr, 0, idx->numel(), false, Scalar(), op);
  return self;
}

namespace {
Tensor select_masked(const Tensor& self, const Tensor& mask, const Tensor& out);
}  // namespace

Tensor index(const Tensor& self, const std::vector<Tensor>& indices) {
  // One bool mask over every dim: masked_select, without materializing coordinates.
  if (indices.size() == 1 && indices[0] && indices[0]->dtype() == ScalarType::Bool &&
      indices[0]->dim() > 0 && indices[0]->sizes() == self->sizes())
    return select_masked(self, indices[0], Tensor());
  AdvancedIndex ai = make_advanced_index(self, indices, &on_cpu);
  Tensor out = empty(ai.result_shape, self->dtype());
  gather_rows(with_shape(out, flat_shape(ai)), ai.src, ai.pos, ai.offsets->data_as<int64_t>(),
              ai.count(), self->itemsize(), "index");
  return out;
}

Tensor index_put_(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values,
                  bool accumulate) {
  const char* op = "index_put_()";
  EMBER_CHECK(values->dtype() == self->dtype(), op,
              ": index put requires the source and destination dtypes match, got ",
              dtype_name(self->dtype()), " for the destination and ", dtype_name(values->dtype()),
              " for the source");
  AdvancedIndex ai = make_advanced_index(self, indices, &on_cpu);
  Tensor vals = index_put_values(values, ai.result_shape, op);
  if (ai.count() == 0) return self;
  if (vals->storage() == self->storage())
    vals = dispatch::clone(vals);  // the writes must not feed the reads
  IndexPutSource vsrc = index_put_source(ai, vals);
  const Tensor &vrest = vsrc.vrest, &src_off = vsrc.src_off;
  put_rows(ai.src, vrest, ai.pos, ai.offsets->data_as<int64_t>(), self->itemsize(),
           src_off->data_as<int64_t>(), self->itemsize(), ai.count(), accumulate,
           Scalar(int64_t(1)), op);
  return self;
}

Tensor masked_fill_(const Tensor& self, const Tensor& mask, const TensorOrScalar& value) {
  const char* op = "masked_fill_()";
  check_mask_dtype(mask, op);
  Tensor v = value_tensor(value, self->dtype(), op);
  TensorIterator it = outer_iter(op, self, {mask});
  dispatch_itemsize(self->itemsize(), [&](auto tag) {
    using T = decltype(tag);
    const T x = *v->data_as<T>();
    it.for_each([x](char** d, const int64_t* s, int64_t n) {
      if (s[0] == sizeof(T) && s[1] == 1) {  // branch-free, so random masks don't stall it
        T* o = reinterpret_cast<T*>(d[0]);
        const uint8_t* m = reinterpret_cast<const uint8_t*>(d[1]);  // any nonzero byte: true
        for (int64_t k = 0; k < n; ++k) o[k] = m[k] != 0 ? x : o[k];
        return;
      }
      for (int64_t k = 0; k < n; ++k)
        if (load<bool>(d[1] + k * s[1])) at<T>(d[0] + k * s[0]) = x;
    });
  });
  return self;
}

Tensor masked_scatter_(const Tensor& self, const Tensor& mask, const Tensor& source) {
  const char* op = "masked_scatter_()";
  check_mask_dtype(mask, op);
  EMBER_CHECK(source->dtype() == self->dtype(), op,
              ": expected self and source to have the same dtype, but got ",
              dtype_name(self->dtype()), " and ", dtype_name(source->dtype()));
  TensorIterator it = outer_iter(op, self, {unaliased(mask, self)});
  int64_t count = 0;
  it.serial_for_each(
      [&count](char** d, const int64_t* s, int64_t n) {
        for (int64_t k = 0; k < n; ++k) count += load<bool>(d[1] + k * s[1]);
      },
      0, it.numel());
  EMBER_CHECK(source->numel() >= count, op, ": number of elements of source (", source->numel(),
              ") is smaller than the number of True values in mask (", count, ")");
  Tensor src = contiguous_as(unaliased(source, self), source->dtype());
  dispatch_itemsize(self->itemsize(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = src->data_as<T>();
    it.serial_for_each(
        [&p](char** d, const int64_t* s, int64_t n) {
          for (int64_t k = 0; k < n; ++k)
            if (load<bool>(d[1] + k * s[1])) at<T>(d[0] + k * s[0]) = *p++;
        },
        0, it.numel());
  });
  return self;
}

namespace {
// masked_select's body, also self[mask] (which takes every dtype).
Tensor select_masked(const Tensor& self, const Tensor& mask, const Tensor& out) {
  const char* op = "masked_select()";
  check_mask_dtype(mask, op);
  DimVector shape = broadcast_shapes(self->sizes(), mask->sizes(), op);
  TensorIterator it(op);
  // (the mask takes no part in promotion: uint16/32/64 have none with bool)
  it.add_input(expand_view(self, shape)).add_input_raw(expand_view(mask, shape)).no_casting();
  it.build();
  int64_t count = 0;
  it.serial_for_each(
      [&count](char** d, const int64_t* s, int64_t n) {
        for (int64_t k = 0; k < n; ++k) count += load<bool>(d[1] + k * s[1]);
      },
      0, it.numel());
  OutArg o = make_out(out, DimVector{count}, self->dtype(), op, {self, mask});
  dispatch_itemsize(self->itemsize(), [&](auto tag) {
    using T = decltype(tag);
    T* w = o.result->data_as<T>();
    it.serial_for_each(
        [&w](char** d, const int64_t* s, int64_t n) {
          for (int64_t k = 0; k < n; ++k)
            if (load<bool>(d[1] + k * s[1])) *w++ = at<T>(d[0] + k * s[0]);
        },
        0, it.numel());
  });
  return o.done();
}
}  // namespace

Tensor masked_select(const Tensor& self, const Tensor& mask, const Tensor& out) {
  check_not_storage_dtype(self, "masked_select()", true);
  return select_masked(self, mask, out);
}

Tensor nonzero(const Tensor& self, const Tensor& out) {
  if (is_complex(self->dtype())) return nonzero(reduce::complex_nonzero_mask(self), out);
  const char* op = "nonzero()";
  Tensor c = contiguous_as(bool_01(self), self->dtype());
  const int64_t n = c->numel(), nd = c->dim();
  int64_t count = 0;
  EMBER_DISPATCH_ALL(c->dtype(), op, [&] {
    const scalar_t* p = c->data_as<scalar_t>();
    for (int64_t i = 0; i < n; ++i)
      count += static_cast<opmath_t<scalar_t>>(p[i]) != opmath_t<scalar_t>(0);
  });
  OutArg o = make_out(out, DimVector{count, nd}, ScalarType::Int64, op, {self});
  int64_t* w = o.result->data_as<int64_t>();
  EMBER_DISPATCH_ALL(c->dtype(), op, [&] {
    const scalar_t* p = c->data_as<scalar_t>();
    DimVector ctr(nd, 0);
    for (int64_t i = 0; i < n; ++i) {
      if (static_cast<opmath_t<scalar_t>>(p[i]) != opmath_t<scalar_t>(0)) {
        for (int64_t d = 0; d < nd; ++d) *w++ = ctr[d];
      }
      for (int64_t d = nd - 1; d >= 0; --d) {
        if (++ctr[d] < c->size(d)) break;
        ctr[d] = 0;
      }
    }
  });
  return o.done();
}

Tensor take(const Tensor& self, const Tensor& index, const Tensor& out) {
  const char* op = "take()";
  check_index_dtype(index, op, false);
  Tensor src = contiguous_as(self, self->dtype());
  Tensor idx = checked_index(index, src->numel(), 0, true, op);
  OutArg o = make_out(out, index->sizes(), self->dtype(), op, {self, index});
  const int64_t* ix = idx->data_as<int64_t>();
  dispatch_itemsize(self->itemsize(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = src->data_as<T>();
    T* w = o.result->data_as<T>();
    auto body = [=](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) w[i] = p[ix[i]];
    };
    if (idx->numel() < 2 * kPointwiseGrain) {
      body(0, idx->numel());
    } else {
      parallel_for(0, idx->numel(), kPointwiseGrain, body);
    }
  });
  return o.done();
}

Tensor searchsorted(const Tensor& sorted_sequence, const TensorOrScalar& self, bool out_int32,
                    bool right, const std::optional<std::string>& side, const Tensor& sorter,
                    const Tensor& out) {
  const char* op = "searchsorted()";
  const Tensor& seq = sorted_sequence;
  const bool upper = searchsorted_upper(right, side, op);
  Tensor vals;
  ScalarType common;
  if (self.is_tensor()) {
    vals = self.tensor;
    common = promote_types(seq->dtype(), vals->dtype());
  } else {
    vals = empty(DimVector{}, self.scalar.dtype());
    store_scalar(self.scalar, vals->dtype(), vals->data());
    common = result_type(seq, self.scalar);
  }
  check_searchsorted_shapes(seq, vals, common, op);
  Tensor srt;
  const int64_t inner = seq->size(seq->dim() - 1);
  if (sorter) {
    check_searchsorted_sorter(sorter, seq, op);
    srt = contiguous_as(sorter, ScalarType::Int64);
    check_sorter_values(srt->data_as<int64_t>(), srt->numel(), inner, op);
  }
  Tensor bd = contiguous_as(seq, common), vc = contiguous_as(vals, common);
  OutArg o = make_out(out, vals->sizes(), out_int32 ? ScalarType::Int32 : ScalarType::Int64, op,
                      {seq, vals, sorter});
  const int64_t nv = vc->numel();
  const int64_t per_row = seq->dim() == 1 ? std::max<int64_t>(nv, 1)
                                          : std::max<int64_t>(vals->size(vals->dim() - 1), 1);
  const int64_t* sorter_p = srt ? srt->data_as<int64_t>() : nullptr;
  EMBER_DISPATCH_NUMERIC(common, op, [&] {
    using T = scalar_t;
    const T* b = bd->data_as<T>();
    const T* v = vc->data_as<T>();
    char* w = o.result->data();
    auto body = [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t row = seq->dim() == 1 ? 0 : i / per_row;
        const T* brow = b + row * inner;
        const int64_t* srow = sorter_p ? sorter_p + row * inner : nullptr;
        opmath_t<T> x = static_cast<opmath_t<T>>(v[i]);
        int64_t r =
            upper ? upper_bound_idx(brow, srow, inner, x) : lower_bound_idx(brow, srow, inner, x);
        if (out_int32) {
          reinterpret_cast<int32_t*>(w)[i] = static_cast<int32_t>(r);
        } else {
          reinterpret_cast<int64_t*>(w)[i] = r;
        }
      }
    };
    if (nv < 4096) {
      body(0, nv);
    } else {
      parallel_for(0, nv, 2048, body);
    }
  });
  return o.done();
}

Tensor bincount(const Tensor& self, const Tensor& weights, int64_t minlength) {
  const char* op = "bincount()";
  check_bincount_args(self, weights, minlength, op);
  Tensor x = contiguous_as(self, ScalarType::Int64);
  const int64_t* p = x->data_as<int64_t>();
  const int64_t n = x->numel();
  const int64_t nbins = bincount_bins(p, n, minlength, op);
  // Empty input: int64 zeros whatever the weights (PyTorch's result there).
  ScalarType rdt = n == 0 ? ScalarType::Int64 : bincount_dtype(weights);
  Tensor out = empty(DimVector{nbins}, rdt);
  std::memset(out->data(), 0, nbins * out->itemsize());
  if (!weights || n == 0) {
    int64_t* w = out->data_as<int64_t>();
    for (int64_t i = 0; i < n; ++i) w[p[i]]++;
  } else if (rdt == ScalarType::Float32) {
    Tensor wt = contiguous_as(weights, rdt);
    const float* q = wt->data_as<float>();
    float* w = out->data_as<float>();
    for (int64_t i = 0; i < n; ++i) w[p[i]] += q[i];
  } else {
    Tensor wt = contiguous_as(weights, rdt);
    const double* q = wt->data_as<double>();
    double* w = out->data_as<double>();
    for (int64_t i = 0; i < n; ++i) w[p[i]] += q[i];
  }
  return out;
}

Tensor histc(const Tensor& self, int64_t bins, const Scalar& min, const Scalar& max,
             const Tensor& out) {
  const char* op = "histc()";
  EMBER_CHECK(bins > 0, op, ": bins must be > 0, but got ", bins);
  Tensor c = contiguous_as(self, self->dtype());
  const int64_t n = c->numel();
  OutArg o;
  EMBER_DISPATCH_FLOAT(self->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* p = c->data_as<T>();
    double lo, hi;
    histc_range<T>(min, max, n, [p] { return p; }, lo, hi, op);
    o = make_out(out, DimVector{bins}, self->dtype(), op, {self});
    T* h = o.result->data_as<T>();
    std::fill_n(h, bins, static_cast<T>(0));
    // The same arithmetic as PyTorch (rounded to T after every step) so edge values land alike.
    auto r = [](A v) { return static_cast<A>(static_cast<T>(v)); };
    const A left = r(static_cast<A>(lo)), right = r(static_cast<A>(hi));
    const A width = r(right - left), nb = r(static_cast<A>(bins));
    for (int64_t i = 0; i < n; ++i) {
      A e = static_cast<A>(p[i]);
      if (!(e >= left && e <= right)) continue;
      const A q = r(r(r(e - left) * nb) / width);
      // q can overflow to inf (or NaN when width does) for huge ranges; casting that to int64 is
      // undefined, so clamp into [0, bins) first.
      const int64_t pos = q >= nb ? bins - 1 : (q > A(0) ? static_cast<int64_t>(q) : 0);
      h[pos] = static_cast<T>(static_cast<A>(h[pos]) + A(1));
    }
  });
  return o.done();
}

// ---- histogramdd ----------------------------------------------------------------------------

namespace {

std::string fmt_g(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The bin of x among the n + 1 non-decreasing edges e (lo = e[0] <= x <= e[n] = hi): the last i
// with e[i] <= x, at most n - 1 (the last edge belongs to the last bin). `guess` comes from the
// bins' arithmetic when they are equal (a step or two from the answer); custom edges count the
// edges <= x (up to 32 bins) or search.
template <class A, class T>
inline int64_t bin_of(A x, const T* e, int64_t n, int64_t guess) {
  int64_t pos;
  if (guess >= 0) {
    pos = guess < n ? guess : n - 1;
    while (pos > 0 && x < static_cast<A>(e[pos])) --pos;
    while (pos < n - 1 && x >= static_cast<A>(e[pos + 1])) ++pos;
  } else if (n <= 32) {
    // few edges: count those <= x without branches (x >= e[0], so the count is at least 1)
    int64_t count = 0;
    for (int64_t k = 1; k <= n; ++k) count += static_cast<A>(e[k]) <= x;
    pos = count < n ? count : n - 1;
  } else {
    int64_t lo = 0, hi = n + 1;  // upper bound: the first edge > x
    while (lo < hi) {
      const int64_t mid = lo + ((hi - lo) >> 1);
      if (static_cast<A>(e[mid]) > x) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    pos = lo - 1 < n - 1 ? lo - 1 : n - 1;
  }
  return pos;
}

}  // namespace

std::vector<Tensor> _histogramdd(const Tensor& self, const DimVector& bins,
                                 const std::vector<Tensor>& bin_edges, const Tensor& bin_range,
                                 const Tensor& weight, bool density) {
  const char* op = "torch.histogramdd";
  EMBER_CHECK(self->dim() >= 2, op, ": input tensor should have at least 2 dimensions, but got ",
              self->dim());
  const ScalarType dt = self->dtype();
  EMBER_CHECK_KIND(is_floating(dt), DtypeNotImplemented, op,
                   ": expected a floating-point input, got ", dtype_name(dt));
  const int64_t D = self->sizes().back();
  const int64_t npts = D > 0 ? self->numel() / D : 0;
  const bool custom = !bin_edges.empty();
  EMBER_CHECK(custom != !bins.empty(), op, ": expected bin counts or bin edges (one of them), got ",
              bins.size(), " counts and ", bin_edges.size(), " edge tensors");
  const int64_t given = custom ? static_cast<int64_t>(bin_edges.size()) : bins.size();
  EMBER_CHECK(given == D,
              "histogramdd: The size of bins must be equal to the innermost dimension "
              "of the input.");
  if (weight) {
    DimVector want(self->sizes().begin(), self->sizes().end() - 1);
    EMBER_CHECK(weight->sizes() == want, op,
                ": if weight tensor is provided it should have the "
                "same shape as the input tensor excluding its innermost dimension, but got input "
                "with shape ",
                shape_str(self->sizes()), " and weight with shape ", shape_str(weight->sizes()));
    EMBER_CHECK(weight->dtype() == dt, op,
                ": if weight tensor is provided, input tensor and "
                "weight tensor should have the same dtype, but got input(",
                dtype_name(dt), "), and weight(", dtype_name(weight->dtype()), ")");
  }
  Tensor rng;
  if (bin_range) {
    EMBER_CHECK(!custom, op, ": range is only taken with bin counts");
    rng = contiguous_as(bin_range, ScalarType::Float64);
    EMBER_CHECK(rng->dim() == 1 && rng->numel() == 2 * D, op, ": for a ", D,
                "-dimensional histogram range should have ", 2 * D, " elements, but got ",
                rng->numel());
  }
  Tensor pts = contiguous_as(self, dt);
  Tensor w = weight ? contiguous_as(weight, dt) : Tensor();
  std::vector<Tensor> edges(D);
  DimVector counts(D);
  std::vector<Tensor> out;
  EMBER_DISPATCH_FLOAT(dt, op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* p = pts->data_as<T>();
    // The edges: given, or equal bins over the range (given, or the data's extent).
    std::vector<double> lo(D, 0.0), hi(D, 1.0);
    if (!custom && rng) {
      const double* r = rng->data_as<double>();
      for (int64_t d = 0; d < D; ++d) {
        lo[d] = r[2 * d];
        hi[d] = r[2 * d + 1];
      }
    } else if (!custom && npts > 0) {
      std::vector<A> mn(D), mx(D);
      for (int64_t d = 0; d < D; ++d) mn[d] = mx[d] = static_cast<A>(p[d]);
      for (int64_t i = 1; i < npts; ++i) {
        const T* q = p + i * D;
        for (int64_t d = 0; d < D; ++d) {
          const A v = static_cast<A>(q[d]);
          // NaN sticks (as a NaN-propagating min / max)
          if (v < mn[d] || v != v) mn[d] = mn[d] != mn[d] ? mn[d] : v;
          if (v > mx[d] || v != v) mx[d] = mx[d] != mx[d] ? mx[d] : v;
        }
      }
      for (int64_t d = 0; d < D; ++d) {
        lo[d] = static_cast<double>(mn[d]);
        hi[d] = static_cast<double>(mx[d]);
      }
    }
    for (int64_t d = 0; d < D; ++d) {
      if (custom) {
        const Tensor& e = bin_edges[d];
        EMBER_CHECK(e && e->dtype() == dt, op,
                    ": input tensor and bins tensors should have the "
                    "same dtype, but got input with dtype ",
                    dtype_name(dt),
                    " and bins for "
                    "dimension ",
                    d, " with dtype ", e ? dtype_name(e->dtype()) : "None");
        EMBER_CHECK(e->dim() == 1 && e->numel() >= 1, op, ": bins tensor for dimension ", d,
                    " should be 1-D and non-empty, got shape ", shape_str(e->sizes()));
        EMBER_CHECK(e->device() == self->device(), op, ": bins for dimension ", d, " are on ",
                    e->device().str(), ", the input on ", self->device().str());
        edges[d] = contiguous_as(e, dt);
        const T* q = edges[d]->data_as<T>();
        for (int64_t i = 1; i < edges[d]->numel(); ++i)
          EMBER_CHECK(!(static_cast<A>(q[i]) < static_cast<A>(q[i - 1])), op,
                      ": bin edges for dimension ", d, " must be non-decreasing");
        counts[d] = edges[d]->numel() - 1;
        continue;
      }
      EMBER_CHECK(bins[d] > 0, "torch.histogram(): bins must be > 0, but got ", bins[d],
                  " for dimension ", d);
      EMBER_CHECK(!(lo[d] > hi[d]), op, ": min should not exceed max, but got min ", fmt_g(lo[d]),
                  " max ", fmt_g(hi[d]), " for dimension ", d);
      EMBER_CHECK(std::isfinite(lo[d]) && std::isfinite(hi[d]), op, ": dimension ", d, "'s range [",
                  fmt_g(lo[d]), ", ", fmt_g(hi[d]), "] is not finite");
      if (lo[d] == hi[d]) {
        lo[d] -= 0.5;
        hi[d] += 0.5;
      }
      edges[d] = dispatch::linspace(Scalar(lo[d]), Scalar(hi[d]), bins[d] + 1, dt, self->device());
      counts[d] = bins[d];
    }
    int64_t total = 1;
    for (int64_t c : counts) total *= c;
    Tensor hist = empty(counts, dt, self->device());
    std::vector<A> acc(static_cast<size_t>(total), A(0));
    // Row-major strides of the histogram, each dim's edges, bounds and equal-bin scale.
    std::vector<int64_t> stride(D);
    std::vector<const T*> e(D);
    std::vector<A> left(D), right(D), scale(D);
    for (int64_t d = D - 1, s = 1; d >= 0; --d) {
      stride[d] = s;
      s *= counts[d];
      e[d] = edges[d]->data_as<T>();
      left[d] = static_cast<A>(e[d][0]);
      right[d] = static_cast<A>(e[d][counts[d]]);
      scale[d] = custom || !(right[d] > left[d]) ? A(0) : A(counts[d]) / (right[d] - left[d]);
    }
    const T* wp = w ? w->data_as<T>() : nullptr;
    if (total > 0) {
      for (int64_t i = 0; i < npts; ++i) {
        const T* q = p + i * D;
        int64_t flat = 0;
        bool inside = true;
        for (int64_t d = 0; d < D; ++d) {
          const A x = static_cast<A>(q[d]);
          if (!(x >= left[d] && x <= right[d])) {
            inside = false;
            break;
          }
          // x - left >= 0 and scale finite: the guess is in [0, inf) before the clamp
          const A g = custom ? A(-1) : (x - left[d]) * scale[d];
          const int64_t guess =
              custom ? -1 : (g < A(counts[d]) ? static_cast<int64_t>(g) : counts[d] - 1);
          flat += bin_of<A>(x, e[d], counts[d], guess) * stride[d];
        }
        if (inside) acc[flat] += wp ? static_cast<A>(wp[i]) : A(1);
      }
    }
    if (density && total > 0) {
      A sum = 0;
      for (A v : acc) sum += v;
      for (int64_t k = 0; k < total; ++k) acc[k] /= sum;
      for (int64_t d = 0; d < D; ++d) {
        const int64_t n = counts[d], inner = stride[d];
        for (int64_t k = 0; k < total; ++k) {
          const int64_t b = (k / inner) % n;
          acc[k] /= static_cast<A>(e[d][b + 1]) - static_cast<A>(e[d][b]);
        }
      }
    }
    T* h = hist->data_as<T>();
    for (int64_t k = 0; k < total; ++k) h[k] = static_cast<T>(acc[k]);
    out.reserve(D + 1);
    out.push_back(hist);
    for (auto& t : edges) out.push_back(t);
  });
  return out;
}

}  // namespace cpu
}  // namespace ember
