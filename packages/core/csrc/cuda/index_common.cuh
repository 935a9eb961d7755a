// Helpers shared by the CUDA kernel files of the indexing, shape and random ops: an n-d walk over
// strided operands, device-side strided copies (so these ops need no other CUDA kernel), and the
// host <-> device transfers of the sync points (index checks, data-dependent sizes).
#pragma once
#include <cstdint>
#include <cstring>

#include "core/out_tensor.h"
#include "core/tensor.h"
#include "cuda/cuda_context.h"
#include "cuda/device_checks.h"
#include "cuda/device_types.cuh"
#include "kernels/indexing_rules.h"
#include "kernels/iterator.h"

namespace ember {
namespace cuda {
namespace ix {

constexpr int kMaxDims = 16;

// Sizes and byte strides of up to 4 operands over one shape, passed by value to kernels.
struct Walk {
  int nd = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t st[4][kMaxDims] = {};
};

inline void check_dims(int64_t nd, const char* op) {
  EMBER_CHECK(nd <= kMaxDims, op, ": CUDA kernels support at most ", kMaxDims, " dimensions, got ",
              nd);
}

// A Walk over `sizes`; operand k uses strides (in elements) of tensors[k] times its itemsize.
inline Walk make_walk(const DimVector& sizes, std::initializer_list<Tensor> ops, const char* op) {
  check_dims(sizes.size(), op);
  Walk w;
  w.nd = static_cast<int>(sizes.size());
  for (int d = 0; d < w.nd; ++d) w.sizes[d] = sizes[d];
  int k = 0;
  for (const Tensor& t : ops) {
    if (t) {
      const int off = w.nd - static_cast<int>(t->dim());  // right-aligned (broadcast dims: 0)
      for (int d = 0; d < t->dim(); ++d)
        w.st[k][off + d] =
            (t->size(d) == 1 && sizes[off + d] != 1) ? 0 : t->stride(d) * t->itemsize();
    }
    ++k;
  }
  return w;
}

inline int device_index(const Tensor& t) { return resolve_device(t->device().index); }
inline cudaStream_t stream_of(const Tensor& t) { return current_stream(device_index(t)); }

// The byte offsets in operands 0 and 1 of element e (row-major over w's shape).
__device__ __forceinline__ void walk_offsets(const Walk& w, int64_t e, int64_t& o0, int64_t& o1) {
  int64_t rem = e;
  o0 = o1 = 0;
  for (int d = w.nd - 1; d >= 0; --d) {
    const int64_t c = rem % w.sizes[d];
    rem /= w.sizes[d];
    o0 += c * w.st[0][d];
    o1 += c * w.st[1][d];
  }
}

// The byte offset in operand 0 only.
__device__ __forceinline__ int64_t walk_offset(const Walk& w, int64_t e) {
  int64_t rem = e, o = 0;
  for (int d = w.nd - 1; d >= 0; --d) {
    const int64_t c = rem % w.sizes[d];
    rem /= w.sizes[d];
    o += c * w.st[0][d];
  }
  return o;
}

template <class T>
__global__ void strided_copy_kernel(int64_t n, Walk w, char* dst, const char* src) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t od, os;
    walk_offsets(w, e, od, os);
    *reinterpret_cast<T*>(dst + od) = *reinterpret_cast<const T*>(src + os);
  }
}

// Calls f(tag) with an unsigned type of the element size (pure data movement).
template <class F>
void by_itemsize(int64_t size, const F& f) {
  dispatch_itemsize(size, f);
}

// dst = src (same dtype, src broadcast to dst's shape), both on the same CUDA device.
inline void copy(const Tensor& dst, const Tensor& src, const char* op) {
  EMBER_CHECK(dst->dtype() == src->dtype(), op, ": internal copy between different dtypes");
  const int64_t n = dst->numel();
  if (n == 0) return;
  DeviceGuard g(device_index(dst));
  Walk w = make_walk(dst->sizes(), {dst, src}, op);
  by_itemsize(dst->itemsize(), [&](auto tag) {
    using T = decltype(tag);
    strided_copy_kernel<T>
        <<<blocks_for(n), kBlockSize, 0, stream_of(dst)>>>(n, w, dst->data(), src->data());
    check_launch(op);
  });
  dst->bump_version();
}

// t itself when contiguous, else a contiguous device copy.
inline Tensor contiguous(const Tensor& t, const char* op) {
  if (t->is_contiguous()) return t;
  Tensor c = empty(t->sizes(), t->dtype(), t->device());
  copy(c, t, op);
  return c;
}

inline Tensor clone(const Tensor& t, const char* op) {
  Tensor c = empty(t->sizes(), t->dtype(), t->device());
  copy(c, t, op);
  return c;
}

// A contiguous CPU copy of a CUDA tensor (a sync point).
inline Tensor to_host(const Tensor& t, const char* op) {
  Tensor c = contiguous(t, op);
  Tensor h = empty(t->sizes(), t->dtype(), cpu_device());
  if (t->numel() == 0) return h;
  DeviceGuard g(device_index(t));
  cudaStream_t s = stream_of(t);
  EMBER_CUDA_CHECK(
      cudaMemcpyAsync(h->data(), c->data(), t->numel() * t->itemsize(), cudaMemcpyDeviceToHost, s));
  EMBER_CUDA_CHECK(cudaStreamSynchronize(s));
  checks::after_wait(current_device(), checks::Wait::Stream, s);
  return h;
}

// A contiguous CPU tensor copied into a new tensor on `device` (waits for the copy, so the host
// buffer may be freed right after).
inline Tensor to_device(const Tensor& host, Device device) {
  Tensor h = host;
  if (!h->is_contiguous()) {
    h = empty(host->sizes(), host->dtype(), cpu_device());
    copy_into(h, host);
  }
  Tensor d = empty(h->sizes(), h->dtype(), device);
  if (h->numel() == 0) return d;
  DeviceGuard g(device_index(d));
  cudaStream_t s = stream_of(d);
  EMBER_CUDA_CHECK(
      cudaMemcpyAsync(d->data(), h->data(), h->numel() * h->itemsize(), cudaMemcpyHostToDevice, s));
  EMBER_CUDA_CHECK(cudaStreamSynchronize(s));
  checks::after_wait(current_device(), checks::Wait::Stream, s);
  return d;
}

// A CPU copy of t converted to `dtype`, contiguous.
inline Tensor host_as(const Tensor& t, ScalarType dtype, const char* op) {
  Tensor h = t->device().is_cpu() ? t : to_host(t, op);
  if (h->dtype() == dtype && h->is_contiguous()) return h;
  Tensor c = empty(h->sizes(), dtype, cpu_device());
  copy_into(c, h);
  return c;
}

// Zero bytes over a contiguous device tensor (0 in every ember dtype).
inline void zero(const Tensor& t) {
  if (t->numel() == 0) return;
  DeviceGuard g(device_index(t));
  EMBER_CUDA_CHECK(cudaMemsetAsync(t->data(), 0, t->numel() * t->itemsize(), stream_of(t)));
}

// A 1-element device tensor of `dtype` holding s.
inline Tensor scalar_on(const Scalar& s, ScalarType dtype, Device device) {
  Tensor h = empty(DimVector{}, dtype, cpu_device());
  store_scalar(s, dtype, h->data());
  return to_device(h, device);
}

// Makes `out` (an out= tensor) hold `sizes`: the engine's shared resize (fresh storage when they
// differ, a UserWarning when out= had elements).
inline void resize_out(const Tensor& out, const DimVector& sizes, const char* op) {
  ember::resize_out(out, sizes, op);
}

inline void check_cuda(const Tensor& t, const char* op, const char* what) {
  EMBER_CHECK(t->device().type == DeviceType::CUDA, op, ": expected ", what,
              " on a CUDA device, but got a tensor on ", device_type_name(t->device().type));
}

// Same device as `ref` (cuda tensors of one op must share a device). `ref` itself must have been
// checked to be a CUDA tensor (check_cuda): a 0-d CPU tensor passes the dispatcher's device
// check, and a kernel given its host pointer would read or, for a written self, write host
// memory (silently, on a system with HMM).
inline void check_same_device(const Tensor& ref, const Tensor& t, const char* op,
                              const char* what) {
  if (!t) return;
  EMBER_CHECK(t->device().type == DeviceType::CUDA &&
                  resolve_device(t->device().index) == resolve_device(ref->device().index),
              op, ": expected ", what,
              " to be on the same CUDA device as self, but got a tensor "
              "on ",
              device_type_name(t->device().type),
              t->device().type == DeviceType::CUDA ? ":" + std::to_string(t->device().index) : "");
}

}  // namespace ix
}  // namespace cuda
}  // namespace ember
