// CUDA kernels of the indexing ops (ops/indexing.yaml), mirroring kernels/cpu/indexing_ops.cpp.
//
// Every "index along a dim" op is one kernel: a walk over a shape in which dst and src each step
// along `dim` either by their stride or by an index value (read from an int64 operand walked with
// its own strides). Index values are checked (and negatives wrapped) on the host before launch:
// one copy of the index to the host, a sync point, so a bad index raises the CPU's IndexError and
// never touches memory. Reductions into duplicate positions use atomics (a CAS loop for the
// dtypes and reductions the hardware has no atomic for). Ops whose output size depends on the
// data (nonzero, masked_select, boolean indexing) scan a flag array with CUB on the device and
// copy the count to the host.
#include <cmath>
#include <cub/device/device_scan.cuh>
#include <limits>
#include <string>
#include <unordered_set>
#include <vector>

#include "cuda/cuda_registry.h"
#include "cuda/index_common.cuh"
#include "cuda/sync_debug.h"
#include "kernels/indexing_rules.h"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {
namespace {

using ix::Walk;

// ---- device helpers ---------------------------------------------------------------------------

// Accumulation type: bool stays bool, integers wrap in int64, floats compute in opmath.
template <class T>
struct AccT {
  using type =
      std::conditional_t<std::is_same_v<T, bool>, bool,
                         std::conditional_t<std::is_integral_v<T>, int64_t, dev_opmath_t<T>>>;
};
template <class T>
using acc_t = typename AccT<T>::type;

template <class T>
__device__ __forceinline__ acc_t<T> ld(const T& v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return to_op<T>(v);
  } else {
    return static_cast<acc_t<T>>(v);
  }
}

template <class U, class T>
__device__ __forceinline__ U bits_as(T v) {
  static_assert(sizeof(U) == sizeof(T));
  U u;
  memcpy(&u, &v, sizeof(T));
  return u;
}

// *addr = f(*addr) atomically, for any element size (1 and 2 bytes through the aligned word).
template <class T, class F>
__device__ void atomic_update(T* addr, const F& f) {
  if constexpr (sizeof(T) == 8) {
    auto* a = reinterpret_cast<unsigned long long*>(addr);
    unsigned long long old = *a, assumed;
    do {
      assumed = old;
      old = atomicCAS(a, assumed, bits_as<unsigned long long>(f(bits_as<T>(assumed))));
    } while (assumed != old);
  } else if constexpr (sizeof(T) == 4) {
    auto* a = reinterpret_cast<unsigned int*>(addr);
    unsigned int old = *a, assumed;
    do {
      assumed = old;
      old = atomicCAS(a, assumed, bits_as<unsigned int>(f(bits_as<T>(assumed))));
    } while (assumed != old);
  } else {
    using Bits = std::conditional_t<sizeof(T) == 2, unsigned short, unsigned char>;
    const uintptr_t p = reinterpret_cast<uintptr_t>(addr);
    auto* word = reinterpret_cast<unsigned int*>(p & ~uintptr_t(3));
    const unsigned shift = static_cast<unsigned>(p & 3) * 8;
    const unsigned mask = (sizeof(T) == 2 ? 0xffffu : 0xffu) << shift;
    unsigned int old = *word, assumed;
    do {
      assumed = old;
      const Bits cur = static_cast<Bits>((assumed & mask) >> shift);
      const Bits nv = bits_as<Bits>(f(bits_as<T>(cur)));
      old = atomicCAS(word, assumed, (assumed & ~mask) | (static_cast<unsigned>(nv) << shift));
    } while (assumed != old);
  }
}

enum class Red { Assign, Add, Mul, Max, Min };

template <class T, Red R>
struct ReduceOp {
  double alpha_f = 1.0;
  int64_t alpha_i = 1;
  __device__ __forceinline__ T combine(T xs, T ys) const {
    using A = acc_t<T>;
    const A x = ld(xs), y = ld(ys);
    A r;
    if constexpr (R == Red::Add) {
      if constexpr (std::is_same_v<T, bool>) {
        r = x || (alpha_i != 0 && y);
      } else if constexpr (std::is_integral_v<T>) {
        r = x + static_cast<A>(alpha_i) * y;
      } else {
        r = x + static_cast<A>(alpha_f) * y;
      }
    } else if constexpr (R == Red::Mul) {
      if constexpr (std::is_same_v<T, bool>) {
        r = x && y;
      } else {
        r = x * y;
      }
    } else if constexpr (R == Red::Max) {
      r = (y != y || y > x) ? y : x;  // NaN propagates
    } else {
      r = (y != y || y < x) ? y : x;
    }
    return from_op<T>(r);
  }
  __device__ __forceinline__ void operator()(char* d, const char* s) const {
    T* dst = reinterpret_cast<T*>(d);
    const T ys = *reinterpret_cast<const T*>(s);
    if constexpr (R == Red::Add && (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
      atomicAdd(dst, static_cast<T>(alpha_f) * ys);
    } else if constexpr (R == Red::Add && std::is_same_v<T, int64_t>) {
      atomicAdd(reinterpret_cast<unsigned long long*>(dst),
                static_cast<unsigned long long>(alpha_i * ys));
    } else if constexpr (R == Red::Add && std::is_same_v<T, int32_t>) {
      atomicAdd(dst, static_cast<int32_t>(alpha_i * ys));
    } else {
      atomic_update(dst, [&](T x) { return combine(x, ys); });
    }
  }
};

template <class T>
struct AssignOp {
  __device__ __forceinline__ void operator()(char* d, const char* s) const {
    *reinterpret_cast<T*>(d) = *reinterpret_cast<const T*>(s);
  }
};

// Operands: 0 dst, 1 src, 2 dst index, 3 src index (strides in bytes over w's shape). An indexed
// operand additionally moves index * step bytes (its own stride at the indexed dim is 0).
struct IndexGeo {
  Walk w;
  int64_t dst_step = 0, src_step = 0;
};

template <class Op>
__global__ void index_kernel(int64_t n, IndexGeo g, char* dst, const char* src, const int64_t* didx,
                             const int64_t* sidx, Op op) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = e, od = 0, os = 0, oi = 0, oj = 0;
    for (int d = g.w.nd - 1; d >= 0; --d) {
      const int64_t c = rem % g.w.sizes[d];
      rem /= g.w.sizes[d];
      od += c * g.w.st[0][d];
      os += c * g.w.st[1][d];
      oi += c * g.w.st[2][d];
      oj += c * g.w.st[3][d];
    }
    if (didx)
      od +=
          *reinterpret_cast<const int64_t*>(reinterpret_cast<const char*>(didx) + oi) * g.dst_step;
    if (sidx)
      os +=
          *reinterpret_cast<const int64_t*>(reinterpret_cast<const char*>(sidx) + oj) * g.src_step;
    op(dst + od, src + os);
  }
}

// ---- host helpers -----------------------------------------------------------------------------

// A host int64 copy of `index` that may be written (never the caller's own tensor).
Tensor host_index(const Tensor& index, const char* op) {
  Tensor h = ix::host_as(index, ScalarType::Int64, op);
  if (h.get() == index.get() || h->storage() == index->storage()) {
    Tensor c = empty(h->sizes(), ScalarType::Int64, cpu_device());
    if (h->numel()) std::memcpy(c->data(), h->data(), h->numel() * 8);
    h = c;
  }
  return h;
}

// The index values as a contiguous int64 device tensor of index's shape, checked to lie in
// [0, size) -- or [-size, size), negatives wrapped, when allow_negative. A sync point.
Tensor checked_index(const Tensor& index, int64_t size, int64_t dim, bool allow_negative,
                     const char* op, Device device, ErrorKind kind = ErrorKind::Index) {
  Tensor h = host_index(index, op);
  int64_t* p = h->data_as<int64_t>();
  const int64_t n = h->numel();
  if (check_index_range(p, n, size, dim, allow_negative, op, kind))
    for (int64_t i = 0; i < n; ++i)
      if (p[i] < 0) p[i] += size;
  return ix::to_device(h, device);
}

// An input an in-place op reads while it writes target: a copy when it shares target's memory
// (as the CPU's unaliased: the kernel's writes would race with its reads of the same rows).
Tensor unaliased(const Tensor& in, const Tensor& target, const char* op) {
  return in && in->numel() > 0 && in->storage() == target->storage() ? ix::clone(in, op) : in;
}

// Where an op with out= writes (as the CPU's make_out).
struct OutArg {
  Tensor result, user;
  Tensor done(const char* op) const {
    if (!user) return result;
    if (user != result) {
      ix::resize_out(user, result->sizes(), op);
      ix::copy(user, result, op);
    } else {
      user->bump_version();
    }
    return user;
  }
};

OutArg make_out(const Tensor& out, const DimVector& sizes, ScalarType dtype, Device device,
                const char* op, std::initializer_list<Tensor> inputs) {
  if (!out) return {empty(sizes, dtype, device), nullptr};
  check_out_dtype(out, dtype, op);
  ix::check_cuda(out, op, "the out= tensor");
  check_no_internal_overlap(out, op);  // an expanded out= would get one of several values
  for (const Tensor& in : inputs)
    if (in && in->storage() == out->storage()) return {empty(sizes, dtype, device), out};
  ix::resize_out(out, sizes, op);
  if (out->is_contiguous()) return {out, out};
  return {empty(sizes, dtype, device), out};
}

Tensor inplace_target(const Tensor& self, const Tensor& out, const char* op,
                      std::initializer_list<Tensor> inputs) {
  if (!out) return ix::clone(self, op);
  // Writing through an expanded (stride 0) view would scatter into one element several times.
  check_no_internal_overlap(out, op);
  if (out.get() == self.get()) return self;
  check_inplace_out(self, out, inputs, op);
  ix::check_cuda(out, op, "the out= tensor");
  ix::resize_out(out, self->sizes(), op);
  ix::copy(out, self, op);
  return out;
}

// A 1-element device tensor of `dtype` holding a number or a 0-d tensor's value.
Tensor value_tensor(const TensorOrScalar& value, ScalarType dtype, Device device, const char* op) {
  check_fill_value(value, dtype, op);
  Scalar s = value.scalar;
  if (value.is_tensor()) {
    Tensor h = ix::host_as(value.tensor, value.tensor->dtype(), op);
    s = load_scalar(h->data(), h->dtype());
  }
  return ix::scalar_on(s, dtype, device);
}

// Launches op over `shape` for dst/src (with their element strides in `g` already set).
template <class Op>
void launch_index(const char* name, const Tensor& ref, int64_t n, const IndexGeo& g, char* dst,
                  const char* src, const Tensor& didx, const Tensor& sidx, const Op& op) {
  if (n == 0) return;
  DeviceGuard guard(ix::device_index(ref));
  index_kernel<<<blocks_for(n), kBlockSize, 0, ix::stream_of(ref)>>>(
      n, g, dst, src, didx ? didx->data_as<int64_t>() : nullptr,
      sidx ? sidx->data_as<int64_t>() : nullptr, op);
  check_launch(name);
}

// Runs reduction `red` (or assignment) over the geometry, dispatching on dst's dtype.
void run_index(const char* name, const Tensor& dst, const Tensor& src, const IndexGeo& g,
               const Tensor& didx, const Tensor& sidx, Red red, double alpha_f = 1.0,
               int64_t alpha_i = 1) {
  int64_t n = 1;
  for (int d = 0; d < g.w.nd; ++d) n *= g.w.sizes[d];
  if (n == 0) return;
  if (red == Red::Assign) {
    ix::by_itemsize(dst->itemsize(), [&](auto tag) {
      using T = decltype(tag);
      launch_index(name, dst, n, g, dst->data(), src->data(), didx, sidx, AssignOp<T>{});
    });
    dst->bump_version();
    return;
  }
  EMBER_DISPATCH_ALL(dst->dtype(), name, [&] {
    using T = scalar_t;
    auto go = [&](auto op) {
      op.alpha_f = alpha_f;
      op.alpha_i = alpha_i;
      launch_index(name, dst, n, g, dst->data(), src->data(), didx, sidx, op);
    };
    switch (red) {
      case Red::Add:
        go(ReduceOp<T, Red::Add>{});
        break;
      case Red::Mul:
        go(ReduceOp<T, Red::Mul>{});
        break;
      case Red::Max:
        go(ReduceOp<T, Red::Max>{});
        break;
      case Red::Min:
        go(ReduceOp<T, Red::Min>{});
        break;
      default:
        break;
    }
  });
  dst->bump_version();
}

// Geometry over `shape`: dst and src walk their strides; an operand indexed at `dim` has its dim
// stride replaced by index * step. didx_nd / sidx_nd: the index walks the whole shape
// (contiguous, index's shape) instead of being a 1-d vector along dim.
IndexGeo make_geo(const DimVector& shape, int64_t dim, const Tensor& dst, bool dst_indexed,
                  int64_t dst_step, const Tensor& src, bool src_indexed, int64_t src_step,
                  const Tensor& didx, bool didx_nd, const Tensor& sidx, bool sidx_nd,
                  const char* op) {
  IndexGeo g;
  g.w = ix::make_walk(shape, {dst, src}, op);
  // dst / src agree with the walk's shape except at dim, where they may be larger (indexed).
  for (int k = 0; k < 2; ++k) {
    const Tensor& t = k == 0 ? dst : src;
    if (t->dim() != static_cast<int64_t>(shape.size())) continue;  // broadcast value
    for (int64_t d = 0; d < t->dim(); ++d)
      g.w.st[k][d] = (t->size(d) == 1 && shape[d] != 1) ? 0 : t->stride(d) * t->itemsize();
  }
  if (dst_indexed) g.w.st[0][dim] = 0;
  if (src_indexed) g.w.st[1][dim] = 0;
  for (int k = 2; k < 4; ++k) {
    const Tensor& t = k == 2 ? didx : sidx;
    const bool nd = k == 2 ? didx_nd : sidx_nd;
    for (int d = 0; d < g.w.nd; ++d) g.w.st[k][d] = 0;
    if (!t) continue;
    if (nd) {
      const DimVector cs = contiguous_strides(t->sizes());
      for (int64_t d = 0; d < t->dim(); ++d) g.w.st[k][d] = t->size(d) == 1 ? 0 : cs[d] * 8;
    } else {
      g.w.st[k][dim] = 8;
    }
  }
  g.dst_step = dst_step;
  g.src_step = src_step;
  return g;
}

// ---- gather / scatter -------------------------------------------------------------------------

Tensor gather_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& out,
                   bool allow_negative, const char* op) {
  ix::check_cuda(self, op, "self");
  check_not_storage_dtype(self, op);
  check_gather_scatter_index(index, op);
  dim = wrap_dim(dim, self->dim(), op);
  check_gather_shapes(self, dim, index, op);
  Tensor s1 = as_1d(self);
  OutArg o = make_out(out, index->sizes(), self->dtype(), self->device(), op, {self, index});
  if (index->numel() == 0) return o.done(op);
  Tensor idx = as_1d(checked_index(index, s1->size(dim), dim, allow_negative, op, self->device(),
                                   ErrorKind::Runtime));
  Tensor res = as_1d(o.result);
  const DimVector& shape = idx->sizes();
  IndexGeo g = make_geo(shape, dim, res, false, 0, s1, true, s1->stride(dim) * s1->itemsize(),
                        nullptr, false, idx, true, op);
  run_index(op, res, s1, g, nullptr, idx, Red::Assign);
  return o.done(op);
}

// self[.., index[.., j, ..], ..] (red)= src[.., j, ..], walking idx's shape.
void scatter_kernel(const Tensor& self, int64_t dim, const Tensor& idx, const Tensor& src, Red red,
                    const char* op) {
  const DimVector& shape = idx->sizes();
  IndexGeo g = make_geo(shape, dim, self, true, self->stride(dim) * self->itemsize(), src, false, 0,
                        idx, true, nullptr, false, op);
  run_index(op, self, src, g, idx, nullptr, red);
}

// The shared parser's reduction as a kernel one: mean is a sum, divided afterwards.
Red parse_reduce(const std::string& r, bool scatter_reduce, bool* mean, const char* op) {
  const IndexReduce red = parse_index_reduce(r, scatter_reduce, op);
  *mean = red == IndexReduce::Mean;
  switch (red) {
    case IndexReduce::Mul:
      return Red::Mul;
    case IndexReduce::Max:
      return Red::Max;
    case IndexReduce::Min:
      return Red::Min;
    default:
      return Red::Add;
  }
}

Tensor reduce_identity(Red red, ScalarType dtype, Device device) {
  const IndexReduce r = red == Red::Mul   ? IndexReduce::Mul
                        : red == Red::Max ? IndexReduce::Max
                        : red == Red::Min ? IndexReduce::Min
                                          : IndexReduce::Add;
  return ix::to_device(ember::reduce_identity(r, dtype), device);
}

__global__ void fill_i64_kernel(int64_t n, int64_t* p, int64_t v) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x)
    p[e] = v;
}

// x /= count where count > 0 (floor division for integers), x and counts contiguous-walked.
template <class T>
__global__ void divide_counts_kernel(int64_t n, Walk w, char* x, const int64_t* counts) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ox = ix::walk_offset(w, e);
    const int64_t c = counts[e];
    if (c == 0) continue;
    T* p = reinterpret_cast<T*>(x + ox);
    if constexpr (std::is_integral_v<T>) {
      const int64_t v = static_cast<int64_t>(*p), q = v / c;
      *p = static_cast<T>((v % c != 0 && v < 0) ? q - 1 : q);
    } else {
      *p = from_op<T>(to_op<T>(*p) / static_cast<dev_opmath_t<T>>(c));
    }
  }
}

Tensor scatter_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                    const Scalar& value, Red red, bool mean, bool include_self, const Tensor& out,
                    const char* op) {
  ix::check_cuda(self, op, "self");
  check_not_storage_dtype(self, op);
  check_gather_scatter_index(index, op);
  dim = wrap_dim(dim, self->dim(), op);
  if (src) {
    check_scatter_src_dtype(self, src, op);
    ix::check_same_device(self, src, op, "src");
  }
  if (mean && self->dtype() == ScalarType::Bool)
    EMBER_FAIL(DtypeNotImplemented, op, ": reduce='mean' is not implemented for dtype bool");
  check_scatter_shapes(self, dim, index, src, op);
  Tensor s1 = as_1d(self);
  // Checked before anything is written, so a bad index leaves self untouched.
  Tensor idx;
  if (index->numel() > 0)
    idx = as_1d(
        checked_index(index, s1->size(dim), dim, false, op, self->device(), ErrorKind::Runtime));
  Tensor target = inplace_target(self, out, op, {self, index, src});
  if (index->numel() == 0) return target;
  Tensor src1 = src ? as_1d(unaliased(src, target, op)) : Tensor();
  Tensor t1 = as_1d(target);
  Tensor srcv =
      src1 ? src1
           : expand_view(value_tensor(TensorOrScalar(value), self->dtype(), self->device(), op),
                         idx->sizes());
  if (!include_self && red != Red::Assign)
    scatter_kernel(
        t1, dim, idx,
        expand_view(reduce_identity(mean ? Red::Add : red, self->dtype(), self->device()),
                    idx->sizes()),
        Red::Assign, op);
  scatter_kernel(t1, dim, idx, srcv, red, op);
  if (!mean) return target;
  // mean: divide the sums by how many values landed on each position (plus self's own).
  Tensor counts = empty(t1->sizes(), ScalarType::Int64, self->device());
  {
    DeviceGuard guard(ix::device_index(counts));
    fill_i64_kernel<<<blocks_for(counts->numel()), kBlockSize, 0, ix::stream_of(counts)>>>(
        counts->numel(), counts->data_as<int64_t>(), include_self ? 1 : 0);
    check_launch(op);
  }
  Tensor one = ix::scalar_on(Scalar(int64_t(1)), ScalarType::Int64, self->device());
  scatter_kernel(counts, dim, idx, expand_view(one, idx->sizes()), Red::Add, op);
  Walk w = ix::make_walk(t1->sizes(), {t1}, op);
  const int64_t n = t1->numel();
  EMBER_DISPATCH_NUMERIC(self->dtype(), op, [&] {
    DeviceGuard guard(ix::device_index(t1));
    divide_counts_kernel<scalar_t><<<blocks_for(n), kBlockSize, 0, ix::stream_of(t1)>>>(
        n, w, t1->data(), counts->data_as<int64_t>());
    check_launch(op);
  });
  return target;
}

// ---- index_add / index_copy / index_fill ------------------------------------------------------

void check_index_source(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                        const char* op) {
  ix::check_cuda(self, op, "self");
  check_index_source_dtype(self, index, source, op);
  ix::check_same_device(self, source, op, "source");
  check_index_source_shape(self, dim, index, source, op);
}

// target[.., idx[j], ..] (=|+= alpha *) source[.., j, ..] along dim; idx is a device vector.
void put_along_dim(const Tensor& target, int64_t dim, const Tensor& idx, const Tensor& source,
                   Red red, const Scalar& alpha, const char* op) {
  Tensor t1 = as_1d(target), src1 = as_1d(source);
  DimVector shape = src1->sizes();
  IndexGeo g = make_geo(shape, dim, t1, true, t1->stride(dim) * t1->itemsize(), src1, false, 0, idx,
                        false, nullptr, false, op);
  run_index(op, t1, src1, g, idx, nullptr, red, alpha.to_double(),
            alpha.is_floating()
                ? static_cast<int64_t>(alpha.to_double())
                : (alpha.is_bool() ? int64_t(alpha.to_bool()) : alpha.to<int64_t>()));
}

// ---- advanced indexing ------------------------------------------------------------------------

// The shared decomposition, its offsets also on the device (flat). Index tensors are read on the
// host (boolean indexing is a sync point anyway).
struct CudaAdvancedIndex : AdvancedIndex {
  Tensor host_offsets;  // flat, on the host
};

Tensor index_on_host(const Tensor& t) { return ix::host_as(t, t->dtype(), "index"); }
void check_index_base(const Tensor& base) { ix::check_dims(base->dim() + 1, "index"); }

CudaAdvancedIndex make_advanced_index(const Tensor& self, const std::vector<Tensor>& indices) {
  CudaAdvancedIndex r;
  static_cast<AdvancedIndex&>(r) =
      ember::make_advanced_index(self, indices, &index_on_host, &check_index_base);
  r.host_offsets = with_shape(r.offsets, DimVector{r.count()});
  r.offsets = ix::to_device(r.host_offsets, self->device());
  return r;
}

DimVector flat_shape(const AdvancedIndex& ai) {
  DimVector s = ai.src->sizes();
  s[ai.pos] = ai.count();
  return s;
}

// ---- flag + scan: the data-dependent sizes ----------------------------------------------------

// flags[e] = 1 where the element e (row-major over w's shape) of operand 0 is nonzero.
template <class T>
__global__ void flags_kernel(int64_t n, Walk w, const char* p, int64_t* flags) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = ix::walk_offset(w, e);
    if constexpr (std::is_same_v<T, bool>) {
      flags[e] = *reinterpret_cast<const uint8_t*>(p + o) != 0;
    } else {
      flags[e] = to_op<T>(*reinterpret_cast<const T*>(p + o)) != dev_opmath_t<T>(0);
    }
  }
}

struct Scan {
  Tensor flags, pos;  // device int64 over the walk's elements
  int64_t count = 0;
};

// Flags of t (broadcast to `shape`) and their exclusive prefix sums; the count comes to the host.
Scan scan_nonzero(const Tensor& t, const DimVector& shape, const char* op) {
  Scan s;
  const int64_t n = checked_numel(shape, op);
  s.flags = empty(DimVector{n}, ScalarType::Int64, t->device());
  s.pos = empty(DimVector{n}, ScalarType::Int64, t->device());
  if (n == 0) return s;
  DeviceGuard guard(ix::device_index(t));
  cudaStream_t stream = ix::stream_of(t);
  Walk w = ix::make_walk(shape, {t}, op);
  EMBER_DISPATCH_ALL(t->dtype(), op, [&] {
    flags_kernel<scalar_t>
        <<<blocks_for(n), kBlockSize, 0, stream>>>(n, w, t->data(), s.flags->data_as<int64_t>());
    check_launch(op);
  });
  size_t temp_bytes = 0;
  EMBER_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, s.flags->data_as<int64_t>(),
                                                 s.pos->data_as<int64_t>(), n, stream));
  Tensor temp =
      empty(DimVector{static_cast<int64_t>(temp_bytes) + 1}, ScalarType::UInt8, t->device());
  EMBER_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(
      temp->data(), temp_bytes, s.flags->data_as<int64_t>(), s.pos->data_as<int64_t>(), n, stream));
  int64_t last[2] = {0, 0};
  sync_debug_check(op);  // ember.cuda.set_sync_debug_mode
  EMBER_CUDA_CHECK(cudaMemcpyAsync(&last[0], s.pos->data_as<int64_t>() + (n - 1), 8,
                                   cudaMemcpyDeviceToHost, stream));
  EMBER_CUDA_CHECK(cudaMemcpyAsync(&last[1], s.flags->data_as<int64_t>() + (n - 1), 8,
                                   cudaMemcpyDeviceToHost, stream));
  EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
  s.count = last[0] + last[1];
  return s;
}

// out[pos[e]] = src[e] where flags[e] (src walked over w's shape, out contiguous).
template <class T>
__global__ void compact_kernel(int64_t n, Walk w, const char* src, const int64_t* flags,
                               const int64_t* pos, T* out) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    if (!flags[e]) continue;
    const int64_t o = ix::walk_offset(w, e);
    out[pos[e]] = *reinterpret_cast<const T*>(src + o);
  }
}

// dst[e] = src[pos[e]] where flags[e] (dst walked over w's shape, src contiguous).
template <class T>
__global__ void expand_kernel(int64_t n, Walk w, char* dst, const int64_t* flags,
                              const int64_t* pos, const T* src) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    if (!flags[e]) continue;
    const int64_t o = ix::walk_offset(w, e);
    *reinterpret_cast<T*>(dst + o) = src[pos[e]];
  }
}

// out[pos[e]][d] = the coordinates of e where flags[e].
__global__ void coords_kernel(int64_t n, Walk w, const int64_t* flags, const int64_t* pos,
                              int64_t* out) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    if (!flags[e]) continue;
    int64_t rem = e;
    int64_t* row = out + pos[e] * w.nd;
    for (int d = w.nd - 1; d >= 0; --d) {
      row[d] = rem % w.sizes[d];
      rem /= w.sizes[d];
    }
  }
}

// masked_fill: where mask (operand 1), write the value bits.
template <class T>
__global__ void masked_fill_kernel(int64_t n, Walk w, char* self, const char* mask, T value) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t o, m;
    ix::walk_offsets(w, e, o, m);
    if (*reinterpret_cast<const uint8_t*>(mask + m) != 0) *reinterpret_cast<T*>(self + o) = value;
  }
}

// ---- searchsorted / bincount / histc ----------------------------------------------------------

template <class T>
__global__ void searchsorted_kernel(int64_t nv, const T* bd, const T* vals, const int64_t* sorter,
                                    int64_t inner, int64_t per_row, bool one_row, bool upper,
                                    bool out_int32, char* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nv;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = one_row ? 0 : i / per_row;
    const T* brow = bd + row * inner;
    const int64_t* srow = sorter ? sorter + row * inner : nullptr;
    const auto x = to_op<T>(vals[i]);
    int64_t lo = 0, hi = inner;
    while (lo < hi) {
      const int64_t mid = lo + ((hi - lo) >> 1);
      const auto m = to_op<T>(brow[srow ? srow[mid] : mid]);
      const bool go_right = upper ? !(m > x) : !(m >= x);
      if (go_right) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    if (out_int32) {
      reinterpret_cast<int32_t*>(out)[i] = static_cast<int32_t>(lo);
    } else {
      reinterpret_cast<int64_t*>(out)[i] = lo;
    }
  }
}

template <class W>
__global__ void bincount_kernel(int64_t n, const int64_t* x, const W* weights, W* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (std::is_same_v<W, int64_t>) {
      atomicAdd(reinterpret_cast<unsigned long long*>(out + x[i]), 1ull);
    } else {
      atomicAdd(out + x[i], weights[i]);
    }
  }
}

template <class T>
__global__ void histc_kernel(int64_t n, const T* p, T* h, int64_t bins, dev_opmath_t<T> left,
                             dev_opmath_t<T> right) {
  using A = dev_opmath_t<T>;
  auto r = [](A v) { return to_op<T>(from_op<T>(v)); };
  const A width = r(right - left), nb = r(static_cast<A>(bins));
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const A e = to_op<T>(p[i]);
    if (!(e >= left && e <= right)) continue;
    const A q = r(r(r(e - left) * nb) / width);
    const int64_t pos = q >= nb ? bins - 1 : (q > A(0) ? static_cast<int64_t>(q) : 0);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      atomicAdd(h + pos, T(1));
    } else {
      atomic_update(h + pos, [](T x) { return from_op<T>(to_op<T>(x) + 1.0f); });
    }
  }
}

// ---- ops --------------------------------------------------------------------------------------

Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& out) {
  const char* op = "index_select()";
  ix::check_cuda(self, op, "self");
  check_index_dtype(index, op, true);
  EMBER_CHECK_KIND(index->dim() <= 1, Index, op, ": index is supposed to be a vector, got shape ",
                   shape_str(index->sizes()));
  dim = wrap_dim(dim, self->dim(), op);
  EMBER_CHECK_KIND(self->dim() > 0 || index->numel() == 1, Runtime, op,
                   ": Index to scalar can have only 1 value, got ", index->numel(), " value(s)");
  Tensor s1 = as_1d(self);
  Tensor idx = checked_index(index, s1->size(dim), dim, false, op, self->device());
  idx = with_shape(idx, DimVector{idx->numel()});
  DimVector shape = s1->sizes();
  shape[dim] = idx->numel();
  OutArg o = make_out(out, self->dim() == 0 ? DimVector{} : shape, self->dtype(), self->device(),
                      op, {self, index});
  Tensor res = with_shape(o.result, shape);
  IndexGeo g = make_geo(shape, dim, res, false, 0, s1, true, s1->stride(dim) * s1->itemsize(),
                        nullptr, false, idx, false, op);
  run_index(op, res, s1, g, nullptr, idx, Red::Assign);
  return o.done(op);
}

Tensor gather(const Tensor& self, int64_t dim, const Tensor& index, bool sparse_grad,
              const Tensor& out) {
  (void)sparse_grad;
  return gather_impl(self, dim, index, out, false, "gather()");
}

Tensor take_along_dim(const Tensor& self, const Tensor& indices, std::optional<int64_t> dim,
                      const Tensor& out) {
  return take_along_dim_via(
      &gather_impl, [](const Tensor& t) { return ix::contiguous(t, "take_along_dim()"); }, self,
      indices, dim, out);
}

Tensor scatter_src(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                   const std::optional<std::string>& reduce, const Tensor& out) {
  bool mean = false;
  Red red = reduce ? parse_reduce(*reduce, false, &mean, "scatter()") : Red::Assign;
  return scatter_impl(self, dim, index, src, Scalar(), red, false, true, out, "scatter()");
}

Tensor scatter_value(const Tensor& self, int64_t dim, const Tensor& index, const Scalar& value,
                     const std::optional<std::string>& reduce, const Tensor& out) {
  bool mean = false;
  Red red = reduce ? parse_reduce(*reduce, false, &mean, "scatter()") : Red::Assign;
  return scatter_impl(self, dim, index, nullptr, value, red, false, true, out, "scatter()");
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                   const Tensor& out) {
  return scatter_impl(self, dim, index, src, Scalar(), Red::Add, false, true, out, "scatter_add()");
}

Tensor scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self, const Tensor& out) {
  bool mean = false;
  Red red = parse_reduce(reduce, true, &mean, "scatter_reduce()");
  return scatter_impl(self, dim, index, src, Scalar(), red, mean, include_self, out,
                      "scatter_reduce()");
}

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                 const Scalar& alpha, const Tensor& out) {
  const char* op = "index_add()";
  check_index_dtype(index, op, true);
  dim = wrap_dim(dim, self->dim(), op);
  check_index_source(self, dim, index, source, op);
  // PyTorch: IndexError for a 0-d / 1-d self, RuntimeError for more dims
  Tensor idx = checked_index(index, as_1d(self)->size(dim), dim, false, op, self->device(),
                             self->dim() <= 1 ? ErrorKind::Index : ErrorKind::Runtime);
  Tensor target = inplace_target(self, out, op, {self, index, source});
  put_along_dim(target, dim, with_shape(idx, DimVector{idx->numel()}),
                unaliased(source, target, op), Red::Add, alpha, op);
  return target;
}

Tensor index_copy(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                  const Tensor& out) {
  const char* op = "index_copy()";
  check_index_dtype(index, op, false);
  dim = wrap_dim(dim, self->dim(), op);
  check_index_source(self, dim, index, source, op);
  Tensor idx = checked_index(index, as_1d(self)->size(dim), dim, false, op, self->device());
  Tensor target = inplace_target(self, out, op, {self, index, source});
  put_along_dim(target, dim, with_shape(idx, DimVector{idx->numel()}),
                unaliased(source, target, op), Red::Assign, Scalar(int64_t(1)), op);
  return target;
}

Tensor index_fill_(const Tensor& self, int64_t dim, const Tensor& index,
                   const TensorOrScalar& value) {
  const char* op = "index_fill_()";
  ix::check_cuda(self, op, "self");
  check_index_dtype(index, op, false, ErrorKind::Index);
  EMBER_CHECK_KIND(index->dim() <= 1, Runtime, op, ": index is supposed to be a vector, got shape ",
                   shape_str(index->sizes()));
  dim = wrap_dim(dim, self->dim(), op);
  Tensor v = value_tensor(value, self->dtype(), self->device(), op);
  Tensor s1 = as_1d(self);
  Tensor idx = checked_index(index, s1->size(dim), dim, true, op, self->device());
  idx = with_shape(idx, DimVector{idx->numel()});
  DimVector vshape = s1->sizes();
  vshape[dim] = idx->numel();
  put_along_dim(s1, dim, idx, expand_view(v, vshape), Red::Assign, Scalar(int64_t(1)), op);
  self->bump_version();
  return self;
}

// masked_select's body, also self[mask] (which takes every dtype).
Tensor select_masked(const Tensor& self, const Tensor& mask, const Tensor& out) {
  const char* op = "masked_select()";
  ix::check_cuda(self, op, "self");
  check_mask_dtype(mask, op);
  ix::check_same_device(self, mask, op, "mask");
  DimVector shape = broadcast_shapes(self->sizes(), mask->sizes(), op);
  Scan s = scan_nonzero(mask, shape, op);
  OutArg o = make_out(out, DimVector{s.count}, self->dtype(), self->device(), op, {self, mask});
  const int64_t n = s.flags->numel();
  if (s.count > 0) {
    Walk w = ix::make_walk(shape, {self}, op);
    DeviceGuard guard(ix::device_index(self));
    ix::by_itemsize(self->itemsize(), [&](auto tag) {
      using T = decltype(tag);
      compact_kernel<T><<<blocks_for(n), kBlockSize, 0, ix::stream_of(self)>>>(
          n, w, self->data(), s.flags->data_as<int64_t>(), s.pos->data_as<int64_t>(),
          o.result->data_as<T>());
      check_launch(op);
    });
  }
  return o.done(op);
}

Tensor masked_select(const Tensor& self, const Tensor& mask, const Tensor& out) {
  check_not_storage_dtype(self, "masked_select()", true);
  return select_masked(self, mask, out);
}

Tensor index_op(const Tensor& self, const std::vector<Tensor>& indices) {
  ix::check_cuda(self, "index", "self");
  if (indices.size() == 1 && indices[0] && indices[0]->dtype() == ScalarType::Bool &&
      indices[0]->dim() > 0 && indices[0]->sizes() == self->sizes() &&
      indices[0]->device().type == DeviceType::CUDA)
    return select_masked(self, indices[0], Tensor());
  CudaAdvancedIndex ai = make_advanced_index(self, indices);
  Tensor out = empty(ai.result_shape, self->dtype(), self->device());
  if (ai.count() == 0 || out->numel() == 0) return out;
  DimVector fs = flat_shape(ai);
  Tensor res = with_shape(out, fs);
  IndexGeo g = make_geo(fs, ai.pos, res, false, 0, ai.src, true, self->itemsize(), nullptr, false,
                        ai.offsets, false, "index");
  run_index("index", res, ai.src, g, nullptr, ai.offsets, Red::Assign);
  return out;
}

Tensor index_put_(const Tensor& self, const std::vector<Tensor>& indices, const Tensor& values,
                  bool accumulate) {
  const char* op = "index_put_()";
  ix::check_cuda(self, op, "self");
  EMBER_CHECK(values->dtype() == self->dtype(), op,
              ": index put requires the source and destination dtypes match, got ",
              dtype_name(self->dtype()), " for the destination and ", dtype_name(values->dtype()),
              " for the source");
  Tensor vals = values;
  if (values->device().type != DeviceType::CUDA) {
    EMBER_CHECK(values->dim() == 0, op,
                ": expected values on the same CUDA device as self, but "
                "got a tensor on ",
                device_type_name(values->device().type));
    vals = ix::to_device(values, self->device());  // a 0-d CPU value, as PyTorch accepts
  }
  CudaAdvancedIndex ai = make_advanced_index(self, indices);
  vals = index_put_values(vals, ai.result_shape, op);
  if (ai.count() == 0) return self;
  if (vals->storage() == self->storage()) vals = ix::clone(vals, op);
  IndexPutSource vsrc = index_put_source(ai, vals);
  Tensor src_off = vsrc.src_off;
  Tensor offsets = ai.offsets;
  if (!accumulate) {
    // Repeated positions: the last value written wins, as on the CPU (which writes in order),
    // so only the last occurrence of each offset is launched.
    const int64_t* off = ai.host_offsets->data_as<int64_t>();
    const int64_t* so = src_off->data_as<int64_t>();
    std::unordered_set<int64_t> seen;
    std::vector<int64_t> keep;
    for (int64_t j = ai.count() - 1; j >= 0; --j)
      if (seen.insert(off[j]).second) keep.push_back(j);
    if (static_cast<int64_t>(keep.size()) < ai.count()) {
      const int64_t m = keep.size();
      Tensor o2 = empty(DimVector{m}, ScalarType::Int64, cpu_device());
      Tensor s2 = empty(DimVector{m}, ScalarType::Int64, cpu_device());
      for (int64_t k = 0; k < m; ++k) {
        o2->data_as<int64_t>()[k] = off[keep[m - 1 - k]];
        s2->data_as<int64_t>()[k] = so[keep[m - 1 - k]];
      }
      offsets = ix::to_device(o2, self->device());
      src_off = s2;
    }
  }
  Tensor src_off_d = ix::to_device(src_off, self->device());
  const Tensor& vrest = vsrc.vrest;
  DimVector fs = ai.src->sizes();
  fs[ai.pos] = offsets->numel();
  IndexGeo g = make_geo(fs, ai.pos, ai.src, true, self->itemsize(), vrest, true, self->itemsize(),
                        offsets, false, src_off_d, false, op);
  run_index(op, self, vrest, g, offsets, src_off_d, accumulate ? Red::Add : Red::Assign);
  self->bump_version();
  return self;
}

Tensor masked_fill_(const Tensor& self, const Tensor& mask, const TensorOrScalar& value) {
  const char* op = "masked_fill_()";
  ix::check_cuda(self, op, "self");
  check_mask_dtype(mask, op);
  ix::check_same_device(self, mask, op, "mask");
  check_mask_broadcasts(self, mask, op);
  Tensor v = ix::to_host(value_tensor(value, self->dtype(), self->device(), op), op);
  const int64_t n = self->numel();
  if (n == 0) return self;
  Walk w = ix::make_walk(self->sizes(), {self, mask}, op);
  DeviceGuard guard(ix::device_index(self));
  ix::by_itemsize(self->itemsize(), [&](auto tag) {
    using T = decltype(tag);
    const T x = *reinterpret_cast<const T*>(v->data());
    masked_fill_kernel<T><<<blocks_for(n), kBlockSize, 0, ix::stream_of(self)>>>(n, w, self->data(),
                                                                                 mask->data(), x);
    check_launch(op);
  });
  self->bump_version();
  return self;
}

Tensor masked_scatter_(const Tensor& self, const Tensor& mask, const Tensor& source) {
  const char* op = "masked_scatter_()";
  ix::check_cuda(self, op, "self");
  check_mask_dtype(mask, op);
  EMBER_CHECK(source->dtype() == self->dtype(), op,
              ": expected self and source to have the same dtype, but got ",
              dtype_name(self->dtype()), " and ", dtype_name(source->dtype()));
  ix::check_same_device(self, mask, op, "mask");
  ix::check_same_device(self, source, op, "source");
  check_mask_broadcasts(self, mask, op);
  Scan s = scan_nonzero(mask, self->sizes(), op);
  EMBER_CHECK(source->numel() >= s.count, op, ": number of elements of source (", source->numel(),
              ") is smaller than the number of True values in mask (", s.count, ")");
  if (s.count == 0) return self;
  Tensor src = ix::contiguous(unaliased(source, self, op), op);
  const int64_t n = self->numel();
  Walk w = ix::make_walk(self->sizes(), {self}, op);
  DeviceGuard guard(ix::device_index(self));
  ix::by_itemsize(self->itemsize(), [&](auto tag) {
    using T = decltype(tag);
    expand_kernel<T><<<blocks_for(n), kBlockSize, 0, ix::stream_of(self)>>>(
        n, w, self->data(), s.flags->data_as<int64_t>(), s.pos->data_as<int64_t>(),
        src->data_as<T>());
    check_launch(op);
  });
  self->bump_version();
  return self;
}

Tensor nonzero(const Tensor& self, const Tensor& out) {
  const char* op = "nonzero()";
  ix::check_dims(self->dim(), op);
  Scan s = scan_nonzero(self, self->sizes(), op);
  const int64_t nd = self->dim();
  OutArg o = make_out(out, DimVector{s.count, nd}, ScalarType::Int64, self->device(), op, {self});
  const int64_t n = s.flags->numel();
  if (s.count > 0 && nd > 0) {
    Walk w = ix::make_walk(self->sizes(), {}, op);
    DeviceGuard guard(ix::device_index(self));
    coords_kernel<<<blocks_for(n), kBlockSize, 0, ix::stream_of(self)>>>(
        n, w, s.flags->data_as<int64_t>(), s.pos->data_as<int64_t>(), o.result->data_as<int64_t>());
    check_launch(op);
  }
  return o.done(op);
}

Tensor take(const Tensor& self, const Tensor& index, const Tensor& out) {
  const char* op = "take()";
  ix::check_cuda(self, op, "self");
  check_index_dtype(index, op, false);
  Tensor src = ix::contiguous(self, op);
  Tensor idx = checked_index(index, src->numel(), 0, true, op, self->device());
  OutArg o = make_out(out, index->sizes(), self->dtype(), self->device(), op, {self, index});
  const int64_t n = idx->numel();
  if (n == 0) return o.done(op);
  Tensor flat = with_shape(o.result, DimVector{n});
  Tensor sflat = make_view(src, DimVector{1}, DimVector{0}, src->storage_offset());
  IndexGeo g = make_geo(DimVector{n}, 0, flat, false, 0, sflat, true, self->itemsize(), nullptr,
                        false, with_shape(idx, DimVector{n}), false, op);
  run_index(op, flat, sflat, g, nullptr, idx, Red::Assign);
  return o.done(op);
}

Tensor searchsorted(const Tensor& sorted_sequence, const TensorOrScalar& self, bool out_int32,
                    bool right, const std::optional<std::string>& side, const Tensor& sorter,
                    const Tensor& out) {
  const char* op = "searchsorted()";
  const Tensor& seq = sorted_sequence;
  ix::check_cuda(seq, op, "sorted_sequence");
  const bool upper = searchsorted_upper(right, side, op);
  Tensor vals;
  ScalarType common;
  if (self.is_tensor()) {
    vals = self.tensor;
    ix::check_same_device(seq, vals, op, "the values");
    common = promote_types(seq->dtype(), vals->dtype());
  } else {
    vals = ix::scalar_on(self.scalar, self.scalar.dtype(), seq->device());
    common = result_type(seq, self.scalar);
  }
  check_searchsorted_shapes(seq, vals, common, op);
  const int64_t inner = seq->size(seq->dim() - 1);
  Tensor srt;
  if (sorter) {
    check_searchsorted_sorter(sorter, seq, op);
    Tensor h = ix::host_as(sorter, ScalarType::Int64, op);
    check_sorter_values(h->data_as<int64_t>(), h->numel(), inner, op);
    srt = ix::to_device(h, seq->device());
  }
  // Operands in the common dtype (converted on the host when they differ: a rare case).
  auto as_common = [&](const Tensor& t) {
    if (t->dtype() == common) return ix::contiguous(t, op);
    return ix::to_device(ix::host_as(t, common, op), seq->device());
  };
  Tensor bd = as_common(seq), vc = as_common(vals);
  OutArg o = make_out(out, vals->sizes(), out_int32 ? ScalarType::Int32 : ScalarType::Int64,
                      seq->device(), op, {seq, vals, sorter});
  const int64_t nv = vc->numel();
  if (nv == 0) return o.done(op);
  const int64_t per_row = seq->dim() == 1 ? std::max<int64_t>(nv, 1)
                                          : std::max<int64_t>(vals->size(vals->dim() - 1), 1);
  DeviceGuard guard(ix::device_index(bd));
  EMBER_DISPATCH_NUMERIC(common, op, [&] {
    using T = scalar_t;
    searchsorted_kernel<T><<<blocks_for(nv), kBlockSize, 0, ix::stream_of(bd)>>>(
        nv, bd->data_as<T>(), vc->data_as<T>(), srt ? srt->data_as<int64_t>() : nullptr, inner,
        per_row, seq->dim() == 1, upper, out_int32, o.result->data());
    check_launch(op);
  });
  return o.done(op);
}

Tensor bincount(const Tensor& self, const Tensor& weights, int64_t minlength) {
  const char* op = "bincount()";
  check_bincount_args(self, weights, minlength, op);
  ix::check_same_device(self, weights, op, "weights");
  Tensor h = ix::host_as(self, ScalarType::Int64, op);
  const int64_t n = h->numel();
  const int64_t nbins = bincount_bins(h->data_as<int64_t>(), n, minlength, op);
  // Empty input: int64 zeros whatever the weights (PyTorch's result there).
  ScalarType rdt = n == 0 ? ScalarType::Int64 : bincount_dtype(weights);
  Tensor out = empty(DimVector{nbins}, rdt, self->device());
  ix::zero(out);
  if (n == 0) return out;
  Tensor x = ix::to_device(h, self->device());
  DeviceGuard guard(ix::device_index(out));
  cudaStream_t s = ix::stream_of(out);
  if (!weights) {
    bincount_kernel<int64_t><<<blocks_for(n), kBlockSize, 0, s>>>(n, x->data_as<int64_t>(), nullptr,
                                                                  out->data_as<int64_t>());
  } else {
    Tensor wt = weights->dtype() == rdt
                    ? ix::contiguous(weights, op)
                    : ix::to_device(ix::host_as(weights, rdt, op), self->device());
    if (rdt == ScalarType::Float32) {
      bincount_kernel<float><<<blocks_for(n), kBlockSize, 0, s>>>(
          n, x->data_as<int64_t>(), wt->data_as<float>(), out->data_as<float>());
    } else {
      bincount_kernel<double><<<blocks_for(n), kBlockSize, 0, s>>>(
          n, x->data_as<int64_t>(), wt->data_as<double>(), out->data_as<double>());
    }
  }
  check_launch(op);
  return out;
}

Tensor histc(const Tensor& self, int64_t bins, const Scalar& min, const Scalar& max,
             const Tensor& out) {
  const char* op = "histc()";
  EMBER_CHECK(bins > 0, op, ": bins must be > 0, but got ", bins);
  Tensor c = ix::contiguous(self, op);
  const int64_t n = c->numel();
  OutArg o;
  EMBER_DISPATCH_FLOAT(self->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    double lo, hi;
    Tensor h;  // the data's range when min == max: a sync point, as in PyTorch
    histc_range<T>(
        min, max, n,
        [&] {
          h = ix::to_host(c, op);
          return h->data_as<T>();
        },
        lo, hi, op);
    o = make_out(out, DimVector{bins}, self->dtype(), self->device(), op, {self});
    ix::zero(o.result);
    auto r = [](A v) { return static_cast<A>(static_cast<T>(v)); };
    const A left = r(static_cast<A>(lo)), right = r(static_cast<A>(hi));
    if (n > 0) {
      DeviceGuard guard(ix::device_index(c));
      histc_kernel<T><<<blocks_for(n), kBlockSize, 0, ix::stream_of(c)>>>(
          n, c->data_as<T>(), o.result->data_as<T>(), bins, static_cast<dev_opmath_t<T>>(left),
          static_cast<dev_opmath_t<T>>(right));
      check_launch(op);
    }
  });
  return o.done(op);
}

void register_indexing() {
  register_kernel("index_select", DeviceType::CUDA, &index_select);
  register_kernel("gather", DeviceType::CUDA, &gather);
  register_kernel("take_along_dim", DeviceType::CUDA, &take_along_dim);
  register_kernel("scatter", DeviceType::CUDA, &scatter_src);
  register_kernel("scatter", DeviceType::CUDA, &scatter_value);
  register_kernel("scatter_add", DeviceType::CUDA, &scatter_add);
  register_kernel("scatter_reduce", DeviceType::CUDA, &scatter_reduce);
  register_kernel("index_add", DeviceType::CUDA, &index_add);
  register_kernel("index_copy", DeviceType::CUDA, &index_copy);
  register_kernel("index_fill_", DeviceType::CUDA, &index_fill_);
  register_kernel("index_put_", DeviceType::CUDA, &index_put_);
  register_kernel("_index", DeviceType::CUDA, &index_op);
  register_kernel("masked_fill_", DeviceType::CUDA, &masked_fill_);
  register_kernel("masked_scatter_", DeviceType::CUDA, &masked_scatter_);
  register_kernel("masked_select", DeviceType::CUDA, &masked_select);
  register_kernel("nonzero", DeviceType::CUDA, &nonzero);
  register_kernel("take", DeviceType::CUDA, &take);
  register_kernel("searchsorted", DeviceType::CUDA, &searchsorted);
  register_kernel("bincount", DeviceType::CUDA, &bincount);
  register_kernel("histc", DeviceType::CUDA, &histc);
}

}  // namespace
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::register_indexing)
