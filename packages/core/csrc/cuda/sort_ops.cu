// CUDA kernels of ops/sort.yaml (semantics: kernels/cpu/sort_ops.cpp). Everything is built on
// one stable sort of rows: the input is copied into contiguous rows along the dim, each element
// becomes an unsigned radix key that orders as the CPU comparator does (NaN largest and all NaNs
// equal, -0 equal to +0; descending flips the key bits, so ties keep their index order), and CUB
// radix-sorts (key, index) pairs per row. sort / argsort / topk write the sorted rows back into
// the output's layout; kthvalue / median / nanmedian / mode pick one position per sorted row;
// unique groups equal keys of the flattened, sorted input.
#include <cmath>
#include <cstring>
#include <cub/cub.cuh>
#include <limits>

#include "core/dispatch.h"
#include "cuda/cuda_context.h"
#include "cuda/cuda_registry.h"
#include "cuda/device_types.cuh"
#include "cuda/reduce_utils.cuh"
#include "cuda/sync_debug.h"
#include "kernels/sort_rules.h"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {
namespace {

using red::ld;

template <class T>
using key_t_of = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;

// Unsigned key whose ascending order is the CPU's NaN-last order of the values.
template <class T>
__device__ __forceinline__ key_t_of<T> radix_key(const T* p) {
  using K = key_t_of<T>;
  if constexpr (std::is_same_v<T, double>) {
    double v = *p;
    if (v != v) return ~K(0);
    if (v == 0) v = 0.0;  // -0 sorts with +0
    const K b = static_cast<K>(__double_as_longlong(v));
    return (b >> 63) ? ~b : (b | (K(1) << 63));
  } else if constexpr (std::is_floating_point_v<dev_opmath_t<T>>) {
    float v = ld(p);  // float32 or a 16-bit float widened exactly
    if (v != v) return ~K(0);
    if (v == 0) v = 0.0f;
    const K b = __float_as_uint(v);
    return (b >> 31) ? ~b : (b | (K(1) << 31));
  } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, uint8_t>) {
    return static_cast<K>(ld(p));
  } else if constexpr (std::is_unsigned_v<T>) {  // uint16/32/64 order as their own bits
    return static_cast<K>(*p);
  } else if constexpr (sizeof(T) == 8) {
    return static_cast<K>(*p) ^ (K(1) << 63);
  } else {
    return static_cast<K>(static_cast<int32_t>(*p)) ^ (K(1) << 31);
  }
}

template <class T>
__global__ void make_keys_kernel(const T* src, key_t_of<T>* keys, int64_t* idx, int64_t n,
                                 int64_t total, bool descending) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const key_t_of<T> k = radix_key(src + i);
    keys[i] = descending ? ~k : k;
    idx[i] = i % n;
  }
}

__global__ void row_offsets_kernel(int* offs, int64_t rows, int64_t n) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r <= rows;
       r += int64_t(gridDim.x) * blockDim.x)
    offs[r] = static_cast<int>(r * n);
}

// dst[r, j] = src[r, idx[r, j]] for rows of n (in) and m (out) elements: values gathered by bits.
template <class U>
__global__ void gather_rows_kernel(const U* src, const int64_t* idx, U* dst, int64_t n, int64_t m,
                                   int64_t total_out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total_out;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / m, j = i % m;
    dst[i] = src[r * n + idx[r * n + j]];
  }
}

// The rows of `self` along dim d, sorted: keys and indices, each [rows, n] contiguous.
struct SortedRows {
  Tensor src;   // self's rows, contiguous (self's dtype; bool bytes as 0/1)
  Tensor keys;  // radix keys (Int32 / Int64 storage), sorted
  Tensor idx;   // Int64 indices within the row, in sorted order
  DimVector perm;
  int64_t rows = 1, n = 1;
};

template <class T>
void sort_keys(SortedRows& s, bool descending, Device dev, const char* op) {
  using K = key_t_of<T>;
  const ScalarType kt = sizeof(K) == 8 ? ScalarType::Int64 : ScalarType::Int32;
  const int64_t total = s.rows * s.n;
  cudaStream_t stream = current_stream();
  Tensor keys_in = ember::empty(DimVector{total}, kt, dev);
  Tensor idx_in = ember::empty(DimVector{total}, ScalarType::Int64, dev);
  s.keys = ember::empty(DimVector{total}, kt, dev);
  s.idx = ember::empty(DimVector{total}, ScalarType::Int64, dev);
  make_keys_kernel<T><<<blocks_for(total), kBlockSize, 0, stream>>>(
      s.src->data_as<T>(), keys_in->data_as<K>(), idx_in->data_as<int64_t>(), s.n, total,
      descending);
  check_launch(op);
  const K* kin = keys_in->data_as<K>();
  K* kout = s.keys->data_as<K>();
  const int64_t* vin = idx_in->data_as<int64_t>();
  int64_t* vout = s.idx->data_as<int64_t>();
  size_t bytes = 0;
  if (s.rows == 1) {
    EMBER_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, kin, kout, vin, vout, total, 0,
                                                     int(sizeof(K) * 8), stream));
    Tensor tmp = red::scratch(static_cast<int64_t>(bytes), dev);
    EMBER_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp->data(), bytes, kin, kout, vin, vout,
                                                     total, 0, int(sizeof(K) * 8), stream));
    return;
  }
  EMBER_CHECK(total < std::numeric_limits<int>::max(), op,
              ": the CUDA kernel sorts at most 2^31 - 1 elements in rows (got ", total, ")");
  Tensor offs = ember::empty(DimVector{s.rows + 1}, ScalarType::Int32, dev);
  row_offsets_kernel<<<blocks_for(s.rows + 1), kBlockSize, 0, stream>>>(offs->data_as<int>(),
                                                                        s.rows, s.n);
  check_launch(op);
  const int* o = offs->data_as<int>();
  EMBER_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
      nullptr, bytes, kin, kout, vin, vout, static_cast<int>(total), static_cast<int>(s.rows), o,
      o + 1, 0, int(sizeof(K) * 8), stream));
  Tensor tmp = red::scratch(static_cast<int64_t>(bytes), dev);
  EMBER_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
      tmp->data(), bytes, kin, kout, vin, vout, static_cast<int>(total), static_cast<int>(s.rows),
      o, o + 1, 0, int(sizeof(K) * 8), stream));
}

// Sorts the rows of self along d (self must be non-empty). with_uint: uint16/32/64 are taken
// (sort and unique, as in PyTorch; topk, kthvalue, median and mode refuse them).
SortedRows sorted_rows(const Tensor& self, int64_t d, bool descending, const char* op,
                       bool with_uint = false) {
  SortedRows s;
  for (int64_t i = 0; i < self->dim(); ++i)
    if (i != d) s.perm.push_back(i);
  if (self->dim() > 0) s.perm.push_back(d);
  s.n = self->dim() == 0 ? 1 : self->size(d);
  s.rows = s.n == 0 ? 0 : self->numel() / s.n;
  s.src = red::contiguous_as(self, self->dtype(), s.perm, op);
  // (contiguous_as never returns a bool tensor unchanged: its bytes come out as 0/1)
  auto body = [&](auto tag) { sort_keys<decltype(tag)>(s, descending, self->device(), op); };
  if (with_uint) {
    EMBER_DISPATCH_ALL_AND_UINT(self->dtype(), op, [&] { body(scalar_t{}); });
  } else {
    EMBER_DISPATCH_ALL(self->dtype(), op, [&] { body(scalar_t{}); });
  }
  return s;
}

// [rows, m] values: src[r, idx[r, j]] for the first m sorted positions of each row.
Tensor gather_values(const SortedRows& s, int64_t m, Device dev, const char* op) {
  const ScalarType dt = s.src->dtype();
  Tensor out = ember::empty(DimVector{s.rows, m}, dt, dev);
  const int64_t total = s.rows * m;
  if (total == 0) return out;
  cudaStream_t stream = current_stream();
  auto go = [&](auto tag) {
    using U = decltype(tag);
    gather_rows_kernel<U><<<blocks_for(total), kBlockSize, 0, stream>>>(
        s.src->data_as<U>(), s.idx->data_as<int64_t>(), out->data_as<U>(), s.n, m, total);
    check_launch(op);
  };
  red::dispatch_by_size(itemsize(dt), go);
  return out;
}

// First m sorted indices of each row, [rows, m].
Tensor first_indices(const SortedRows& s, int64_t m, Device dev, const char* op) {
  if (m == s.n) return s.idx;
  Tensor out = ember::empty(DimVector{s.rows, m}, ScalarType::Int64, dev);
  red::strided_copy(out->data(), ScalarType::Int64, DimVector{m, 1}, s.idx->data(),
                    ScalarType::Int64, DimVector{s.n, 1}, DimVector{s.rows, m}, op);
  return out;
}

// The sorted rows' first m positions written into outputs shaped like self with dim d of size m.
std::tuple<Tensor, Tensor> write_sorted(const Tensor& self, int64_t d, const SortedRows& s,
                                        int64_t m, bool want_values, const char* op) {
  DimVector shape = sizes_with_dim(self, d, m);
  Tensor values = want_values ? ember::empty(shape, self->dtype(), self->device()) : Tensor();
  Tensor indices = ember::empty(shape, ScalarType::Int64, self->device());
  if (indices->numel() == 0) return {values, indices};
  Tensor idx = first_indices(s, m, self->device(), op);
  red::write_permuted(indices, idx, s.perm, op);
  if (want_values) red::write_permuted(values, gather_values(s, m, self->device(), op), s.perm, op);
  return {values, indices};
}

std::tuple<Tensor, Tensor> sort_impl(const Tensor& self, int64_t dim, bool descending,
                                     bool want_values, const char* op) {
  const int64_t d = wrap_dim(dim, self->dim(), op);
  DeviceGuard guard(self->device().index);
  if (self->numel() == 0)
    return {want_values ? ember::empty(self->sizes(), self->dtype(), self->device()) : Tensor(),
            ember::empty(self->sizes(), ScalarType::Int64, self->device())};
  SortedRows s = sorted_rows(self, d, descending, op, true);
  return write_sorted(self, d, s, s.n, want_values, op);
}

std::tuple<Tensor, Tensor> sort(const Tensor& self, int64_t dim, bool descending, bool stable) {
  (void)stable;  // always stable, as the CPU kernel
  return sort_impl(self, dim, descending, true, "sort");
}

Tensor argsort(const Tensor& self, int64_t dim, bool descending, bool stable) {
  (void)stable;
  return std::get<1>(sort_impl(self, dim, descending, false, "argsort"));
}

std::tuple<Tensor, Tensor> topk(const Tensor& self, int64_t k, int64_t dim, bool largest,
                                bool sorted) {
  (void)sorted;  // results always come sorted, which PyTorch allows for sorted=False
  const int64_t d = topk_dim(self, k, dim);
  DeviceGuard guard(self->device().index);
  DimVector shape = sizes_with_dim(self, d, k);
  int64_t out_numel = 1;
  for (int64_t v : shape) out_numel *= v;
  if (out_numel == 0)
    return {ember::empty(shape, self->dtype(), self->device()),
            ember::empty(shape, ScalarType::Int64, self->device())};
  SortedRows s = sorted_rows(self, d, largest, "topk");
  // A 0-d self has one position whatever k is (0 or 1), and its 1-element outputs take the value
  // and index 0, as in PyTorch; writing k = 0 positions would fill them from an empty index
  // buffer (an out-of-bounds device read).
  return write_sorted(self, d, s, self->dim() == 0 ? 1 : k, true, "topk");
}

// ---- one position per sorted row ---------------------------------------------------------------

enum class Pick { Kth, Median, NanMedian, Mode };

// Position in sorted row r of the chosen element. NaN keys (ascending sort) are all-ones and last.
template <class K>
__global__ void pick_kernel(const K* keys, const int64_t* idx, int64_t* pos_idx, int64_t rows,
                            int64_t n, Pick pick, int64_t k, bool has_nan) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += int64_t(gridDim.x) * blockDim.x) {
    const K* kr = keys + r * n;
    int64_t p = 0;
    if (pick == Pick::Kth) {
      p = k;
    } else if (pick == Pick::Mode) {
      // The longest run of equal keys (the first, i.e. smallest value, on ties); its last entry.
      int64_t best_count = 0, i = 0;
      while (i < n) {
        int64_t j = i;
        while (j + 1 < n && kr[j + 1] == kr[i]) ++j;
        if (j - i + 1 > best_count) {
          best_count = j - i + 1;
          p = j;
        }
        i = j + 1;
      }
    } else {
      // m = the number of non-NaN entries (the first all-ones key, found by bisection).
      int64_t m = n;
      if (has_nan) {
        int64_t lo = 0, hi = n;
        while (lo < hi) {
          const int64_t mid = (lo + hi) / 2;
          if (kr[mid] == ~K(0)) {
            hi = mid;
          } else {
            lo = mid + 1;
          }
        }
        m = lo;
      }
      if (pick == Pick::Median) {
        p = m < n ? m : (n - 1) / 2;  // the first NaN (by index: the sort is stable), else median
      } else {
        p = m == 0 ? 0 : (m - 1) / 2;
      }
    }
    pos_idx[r] = idx[r * n + p];
  }
}

template <class U>
__global__ void gather_one_kernel(const U* src, const int64_t* pos_idx, U* dst, int64_t rows,
                                  int64_t n) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += int64_t(gridDim.x) * blockDim.x)
    dst[r] = src[r * n + pos_idx[r]];
}

std::tuple<Tensor, Tensor> select_rows(const Tensor& self, int64_t d, bool keepdim, Pick pick,
                                       int64_t k, const char* op) {
  DimVector shape = selection_shape(self, d, keepdim);
  DeviceGuard guard(self->device().index);
  Tensor values = ember::empty(shape, self->dtype(), self->device());
  Tensor indices = ember::empty(shape, ScalarType::Int64, self->device());
  if (values->numel() == 0) return {values, indices};
  SortedRows s = sorted_rows(self, d, false, op);
  cudaStream_t stream = current_stream();
  const bool has_nan = is_floating(self->dtype());
  if (s.keys->dtype() == ScalarType::Int64) {
    pick_kernel<uint64_t><<<blocks_for(s.rows), kBlockSize, 0, stream>>>(
        s.keys->data_as<uint64_t>(), s.idx->data_as<int64_t>(), indices->data_as<int64_t>(), s.rows,
        s.n, pick, k, has_nan);
  } else {
    pick_kernel<uint32_t><<<blocks_for(s.rows), kBlockSize, 0, stream>>>(
        s.keys->data_as<uint32_t>(), s.idx->data_as<int64_t>(), indices->data_as<int64_t>(), s.rows,
        s.n, pick, k, has_nan);
  }
  check_launch(op);
  auto go = [&](auto tag) {
    using U = decltype(tag);
    gather_one_kernel<U><<<blocks_for(s.rows), kBlockSize, 0, stream>>>(
        s.src->data_as<U>(), indices->data_as<int64_t>(), values->data_as<U>(), s.rows, s.n);
    check_launch(op);
  };
  red::dispatch_by_size(itemsize(self->dtype()), go);
  return {values, indices};
}

std::tuple<Tensor, Tensor> kthvalue(const Tensor& self, int64_t k, int64_t dim, bool keepdim) {
  const int64_t d = kthvalue_dim(self, k, dim);
  return select_rows(self, d, keepdim, Pick::Kth, k - 1, "kthvalue");
}

Tensor median_all(const Tensor& self, bool ignore_nan, const char* op) {
  DeviceGuard guard(self->device().index);
  if (self->numel() == 0) {
    // Filled on the host (as the CPU kernel fills it), then copied over.
    Tensor host =
        dispatch::full(DimVector{}, empty_median_value(self->dtype()), self->dtype(), cpu_device());
    return red::to_device(host, self->device());
  }
  check_selection_dtype(self, op);
  Tensor flat = red::contiguous_as(self, self->dtype(), DimVector{}, op);
  flat = make_view(flat, DimVector{flat->numel()}, DimVector{1}, flat->storage_offset());
  return std::get<0>(
      select_rows(flat, 0, false, ignore_nan ? Pick::NanMedian : Pick::Median, 0, op));
}

std::tuple<Tensor, Tensor> median_dim(const Tensor& self, int64_t dim, bool keepdim,
                                      bool ignore_nan, const char* op) {
  const int64_t d = selection_dim(self, dim, op);
  check_selection_dtype(self, op);
  return select_rows(self, d, keepdim, ignore_nan ? Pick::NanMedian : Pick::Median, 0, op);
}

Tensor median(const Tensor& self) { return median_all(self, false, "median"); }

std::tuple<Tensor, Tensor> median_d(const Tensor& self, int64_t dim, bool keepdim) {
  return median_dim(self, dim, keepdim, false, "median");
}

Tensor nanmedian(const Tensor& self) { return median_all(self, true, "nanmedian"); }

std::tuple<Tensor, Tensor> nanmedian_d(const Tensor& self, int64_t dim, bool keepdim) {
  return median_dim(self, dim, keepdim, true, "nanmedian");
}

std::tuple<Tensor, Tensor> mode(const Tensor& self, int64_t dim, bool keepdim) {
  const int64_t d = selection_dim(self, dim, "mode");
  return select_rows(self, d, keepdim, Pick::Mode, 0, "mode");
}

// ---- unique ------------------------------------------------------------------------------------

// flags[i] = 1 where sorted position i starts a group (NaNs never equal: each is its own).
template <class K>
__global__ void group_start_kernel(const K* keys, int64_t* flags, int64_t n, bool has_nan) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    flags[i] = (i == 0 || keys[i] != keys[i - 1] || (has_nan && keys[i] == ~K(0))) ? 1 : 0;
}

// gid: inclusive sum of the flags (group number + 1).
template <class U>
__global__ void unique_scatter_kernel(const U* src, const int64_t* idx, const int64_t* flags,
                                      const int64_t* gid, U* values, int64_t* starts,
                                      int64_t* inverse, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t g = gid[i] - 1;
    if (flags[i]) {
      values[g] = src[idx[i]];  // the group's first element (smallest index: the sort is stable)
      starts[g] = i;
    }
    if (inverse) inverse[idx[i]] = g;
  }
}

__global__ void unique_counts_kernel(const int64_t* starts, int64_t* counts, int64_t m, int64_t n) {
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < m;
       g += int64_t(gridDim.x) * blockDim.x)
    counts[g] = (g + 1 < m ? starts[g + 1] : n) - starts[g];
}

std::tuple<Tensor, Tensor, Tensor> unique_flat(const Tensor& self, bool return_inverse,
                                               bool return_counts) {
  const char* op = "unique";
  const Device dev = self->device();
  DeviceGuard guard(dev.index);
  const int64_t n = self->numel();
  Tensor inverse =
      ember::empty(return_inverse ? self->sizes() : DimVector{0}, ScalarType::Int64, dev);
  if (n == 0)
    return {ember::empty(DimVector{0}, self->dtype(), dev), inverse,
            ember::empty(DimVector{0}, ScalarType::Int64, dev)};
  Tensor flat = red::contiguous_as(self, self->dtype(), DimVector{}, op);
  flat = make_view(flat, DimVector{n}, DimVector{1}, flat->storage_offset());
  SortedRows s = sorted_rows(flat, 0, false, op, true);
  cudaStream_t stream = current_stream();
  const bool has_nan = is_floating(self->dtype());
  Tensor flags = ember::empty(DimVector{n}, ScalarType::Int64, dev);
  Tensor gid = ember::empty(DimVector{n}, ScalarType::Int64, dev);
  if (s.keys->dtype() == ScalarType::Int64) {
    group_start_kernel<uint64_t><<<blocks_for(n), kBlockSize, 0, stream>>>(
        s.keys->data_as<uint64_t>(), flags->data_as<int64_t>(), n, has_nan);
  } else {
    group_start_kernel<uint32_t><<<blocks_for(n), kBlockSize, 0, stream>>>(
        s.keys->data_as<uint32_t>(), flags->data_as<int64_t>(), n, has_nan);
  }
  check_launch(op);
  size_t bytes = 0;
  const int64_t* fin = flags->data_as<int64_t>();
  int64_t* gout = gid->data_as<int64_t>();
  EMBER_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, bytes, fin, gout, n, stream));
  Tensor tmp = red::scratch(static_cast<int64_t>(bytes), dev);
  EMBER_CUDA_CHECK(cub::DeviceScan::InclusiveSum(tmp->data(), bytes, fin, gout, n, stream));
  int64_t m = 0;
  sync_debug_check(op);  // ember.cuda.set_sync_debug_mode
  EMBER_CUDA_CHECK(
      cudaMemcpyAsync(&m, gout + (n - 1), sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
  Tensor values = ember::empty(DimVector{m}, self->dtype(), dev);
  Tensor starts = ember::empty(DimVector{m}, ScalarType::Int64, dev);
  auto go = [&](auto tag) {
    using U = decltype(tag);
    unique_scatter_kernel<U><<<blocks_for(n), kBlockSize, 0, stream>>>(
        s.src->data_as<U>(), s.idx->data_as<int64_t>(), fin, gout, values->data_as<U>(),
        starts->data_as<int64_t>(), return_inverse ? inverse->data_as<int64_t>() : nullptr, n);
    check_launch(op);
  };
  red::dispatch_by_size(itemsize(self->dtype()), go);
  Tensor counts = ember::empty(DimVector{return_counts ? m : 0}, ScalarType::Int64, dev);
  if (return_counts) {
    unique_counts_kernel<<<blocks_for(m), kBlockSize, 0, stream>>>(
        starts->data_as<int64_t>(), counts->data_as<int64_t>(), m, n);
    check_launch(op);
  }
  return {values, inverse, counts};
}

std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& self, bool sorted, bool return_inverse,
                                          bool return_counts, std::optional<int64_t> dim) {
  if (!dim) return unique_flat(self, return_inverse, return_counts);
  // unique along a dim (whole slices compared lexicographically) runs the CPU kernel on a host
  // copy: correct, not fast.
  Tensor host = red::to_host(self);
  auto [v, inv, cnt] = cpu::unique(host, sorted, return_inverse, return_counts, dim);
  return {red::to_device(v, self->device()), red::to_device(inv, self->device()),
          red::to_device(cnt, self->device())};
}

void register_sort() {
  register_kernel("sort", DeviceType::CUDA, &sort);
  register_kernel("argsort", DeviceType::CUDA, &argsort);
  register_kernel("topk", DeviceType::CUDA, &topk);
  register_kernel("kthvalue", DeviceType::CUDA, &kthvalue);
  register_kernel("median", DeviceType::CUDA, &median);
  register_kernel("median", DeviceType::CUDA, &median_d);
  register_kernel("nanmedian", DeviceType::CUDA, &nanmedian);
  register_kernel("nanmedian", DeviceType::CUDA, &nanmedian_d);
  register_kernel("mode", DeviceType::CUDA, &mode);
  register_kernel("_unique", DeviceType::CUDA, &unique);
}

}  // namespace
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::register_sort)
