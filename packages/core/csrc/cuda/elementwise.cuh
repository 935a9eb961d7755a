// The CUDA backend's one elementwise engine: every pointwise op (and the copy kernel) builds a
// TensorIterator (kernels/iterator.h), which plans broadcasting, promotion, outputs and the
// coalesced dims, and then calls
//     launch_elementwise<OutT, InT...>(it, "op", f);
// with f a functor whose __device__ operator() takes the inputs in their compute type
// (dev_opmath_t: float for the 16-bit floats, bool for bool) and returns a value converted to
// OutT on store. Functors are namespace-scope structs (a kernel template cannot take a local type).
//
// How a plan runs:
//   - every operand is memory on the device, except inputs the iterator holds by value (Python
//     numbers, 0-d CPU tensors: it.is_scalar(k)); those are read here on the host and travel in
//     the kernel's arguments;
//   - one dim (or none) with unit element stride in every operand in memory: the contiguous
//     kernel, one aligned 16-byte vector per thread where every such pointer is aligned, element
//     by element otherwise and for the tail; a stride-0 input is read once per thread;
//   - anything else: the strided kernel, one element per thread, offsets from the linear index
//     through a divider per dim (up to kMaxDims dims);
//   - index math is 32-bit: a plan whose byte offsets (or element count) do not fit in int32,
//     or that has more than kMaxDims dims, is cut along its outermost dim into pieces that do,
//     each launched on its own (so tensors past 2 GiB work at full speed, just in a few launches).
// Launches go on the current stream of the operands' device and are checked (check_launch).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "core/dtype.h"
#include "core/error.h"
#include "cuda/cuda_context.h"
#include "cuda/device_types.cuh"
#include "kernels/iterator.h"

namespace ember {
namespace cuda {

// The type kernels compute in for storage type T.
template <class T>
using op_t = dev_opmath_t<T>;

// One element of storage type T at p, widened to op_t<T>; any nonzero byte of a bool is true
// (a uint8 buffer viewed as bool may hold 2), as on the CPU.
template <class T>
__device__ __forceinline__ op_t<T> read_elem(const char* p) {
  if constexpr (std::is_same_v<T, bool>) {
    return *reinterpret_cast<const uint8_t*>(p) != 0;
  } else {
    return to_op<T>(*reinterpret_cast<const T*>(p));
  }
}
template <class T, class V>
__device__ __forceinline__ void write_elem(char* p, V v) {
  *reinterpret_cast<T*>(p) = from_op<T>(v);
}

namespace ew {

constexpr int kMaxDims = 25;
constexpr int64_t kIndexLimit = std::numeric_limits<int32_t>::max();

// Input modes.
enum : uint8_t {
  kMemory = 0,      // device memory, read per element
  kHostScalar = 1,  // a value held by the iterator on the host, passed in EwArgs::value
  kBroadcast = 2,   // device memory with stride 0 (contiguous kernel only): read once
};

// Storage for raw elements in registers (bool as bytes: any nonzero byte is true).
template <class T>
using raw_t = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
template <class T>
__device__ __forceinline__ op_t<T> widen(raw_t<T> v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else {
    return to_op<T>(v);
  }
}

template <class T>
struct Tag {
  using type = T;
};
template <class T, int N>
struct alignas(sizeof(T) * N) Aligned {
  T v[N];
};
template <class T, int N>
struct Values {
  T v[N];
};

// A minimal tuple for one value per input (indexed by the input's position).
template <int I, class T>
struct Slot {
  T v;
};
template <class Seq, class... T>
struct SlotsImpl;
template <int... I, class... T>
struct SlotsImpl<std::integer_sequence<int, I...>, T...> : Slot<I, T>... {};
template <class... T>
using Slots = SlotsImpl<std::make_integer_sequence<int, sizeof...(T)>, T...>;
template <int I, class T>
__device__ __forceinline__ T& slot(Slot<I, T>& s) {
  return s.v;
}

// Kernel arguments shared by both kernels: the output, N inputs and their modes, and the
// values of host scalars (raw bits of the input's storage type).
template <int N>
struct EwArgs {
  char* out;
  const char* in[N];
  uint8_t mode[N];
  alignas(8) unsigned char value[N][8];
};

template <class T, int N>
__device__ __forceinline__ op_t<T> uniform_value(const EwArgs<N>& a, int k) {
  if (a.mode[k] == kHostScalar) return widen<T>(*reinterpret_cast<const raw_t<T>*>(a.value[k]));
  return read_elem<T>(a.in[k]);
}

// Division by a fixed divisor with a multiply and a shift (Granlund & Montgomery), exact for
// dividends below 2^31.
struct IntDivider {
  uint32_t divisor = 1, magic = 1, shift = 0;
  IntDivider() = default;
  explicit IntDivider(uint32_t d) : divisor(d) {
    while (shift < 32 && (uint64_t(1) << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t(1) << 32) * ((uint64_t(1) << shift) - d)) / d + 1);
  }
  __host__ __device__ __forceinline__ uint32_t div(uint32_t n) const {
#ifdef __CUDA_ARCH__
    const uint32_t t = __umulhi(n, magic);
#else
    const uint32_t t = static_cast<uint32_t>((uint64_t(n) * magic) >> 32);
#endif
    return (t + n) >> shift;
  }
};

// Byte offsets of every operand from a linear index (dims stored innermost first).
template <int NOPS>
struct OffsetCalc {
  int ndim;
  IntDivider size[kMaxDims];
  int32_t stride[kMaxDims][NOPS];
  __device__ __forceinline__ void get(uint32_t linear, int32_t (&off)[NOPS]) const {
#pragma unroll
    for (int k = 0; k < NOPS; ++k) off[k] = 0;
    for (int d = 0; d < ndim; ++d) {
      const uint32_t q = size[d].div(linear);
      const int32_t r = static_cast<int32_t>(linear - q * size[d].divisor);
#pragma unroll
      for (int k = 0; k < NOPS; ++k) off[k] += r * stride[d][k];
      linear = q;
    }
  }
};

// ---- kernels ----------------------------------------------------------------------------------

// Thread t computes vector t (VEC elements, aligned loads/stores) when t < nvec, and element
// nvec * VEC + t when that is below n (the tail; everything when nvec is 0).
template <int VEC, class OutT, class... InT, class F, int... I>
__device__ __forceinline__ void contig_body(const F& f, const EwArgs<sizeof...(InT)>& a,
                                            int32_t nvec, int32_t n,
                                            std::integer_sequence<int, I...>) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  Slots<op_t<InT>...> u{};
  ((a.mode[I] != kMemory ? void(slot<I>(u) = uniform_value<InT>(a, I)) : void()), ...);
  if (t < nvec) {
    Slots<Values<op_t<InT>, VEC>...> in;
    auto load = [&](auto& dst, auto tag, int k, const auto& uv) {
      using T = typename decltype(tag)::type;
      if (a.mode[k] == kMemory) {
        const Aligned<raw_t<T>, VEC> raw =
            reinterpret_cast<const Aligned<raw_t<T>, VEC>*>(a.in[k])[t];
#pragma unroll
        for (int j = 0; j < VEC; ++j) dst.v[j] = widen<T>(raw.v[j]);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) dst.v[j] = uv;
      }
    };
    (load(slot<I>(in), Tag<InT>{}, I, slot<I>(u)), ...);
    Aligned<OutT, VEC> out;
#pragma unroll
    for (int j = 0; j < VEC; ++j) out.v[j] = from_op<OutT>(f(slot<I>(in).v[j]...));
    reinterpret_cast<Aligned<OutT, VEC>*>(a.out)[t] = out;
  }
  const int64_t i = int64_t(nvec) * VEC + t;
  if (i < n) {
    const int32_t e = static_cast<int32_t>(i);
    write_elem<OutT>(a.out + e * int32_t(sizeof(OutT)),
                     f((a.mode[I] == kMemory ? read_elem<InT>(a.in[I] + e * int32_t(sizeof(InT)))
                                             : slot<I>(u))...));
  }
}

template <int VEC, class OutT, class F, class... InT>
__global__ void __launch_bounds__(kBlockSize)
    ew_contig_kernel(F f, EwArgs<sizeof...(InT)> a, int32_t nvec, int32_t n) {
  contig_body<VEC, OutT, InT...>(f, a, nvec, n, std::make_integer_sequence<int, sizeof...(InT)>{});
}

template <class OutT, class... InT, class F, int... I>
__device__ __forceinline__ void strided_body(const F& f, const EwArgs<sizeof...(InT)>& a,
                                             const OffsetCalc<sizeof...(InT) + 1>& oc, int32_t n,
                                             std::integer_sequence<int, I...>) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= n) return;
  Slots<op_t<InT>...> u{};
  ((a.mode[I] == kHostScalar ? void(slot<I>(u) = uniform_value<InT>(a, I)) : void()), ...);
  int32_t off[sizeof...(InT) + 1];
  oc.get(static_cast<uint32_t>(t), off);
  write_elem<OutT>(
      a.out + off[0],
      f((a.mode[I] == kHostScalar ? slot<I>(u) : read_elem<InT>(a.in[I] + off[I + 1]))...));
}

template <class OutT, class F, class... InT>
__global__ void __launch_bounds__(kBlockSize)
    ew_strided_kernel(F f, EwArgs<sizeof...(InT)> a, OffsetCalc<sizeof...(InT) + 1> oc, int32_t n) {
  strided_body<OutT, InT...>(f, a, oc, n, std::make_integer_sequence<int, sizeof...(InT)>{});
}

// ---- host side --------------------------------------------------------------------------------

// Elements per thread of the vectorized path: one 16-byte access for the widest operand, at most
// 8 (so a bool-only op does not unroll its functor 16 times).
template <class OutT, class... InT>
constexpr int vec_size() {
  size_t widest = sizeof(OutT);
  ((widest = sizeof(InT) > widest ? sizeof(InT) : widest), ...);
  const int v = static_cast<int>(16 / widest);
  return v > 8 ? 8 : v;
}

// A part of the plan: shape (outer -> inner) and each operand's base pointer and byte strides.
template <int NOPS>
struct Piece {
  DimVector shape;
  std::array<char*, NOPS> ptr;
  std::array<DimVector, NOPS> strides;
};

template <class OutT, class... InT, class F>
void launch_piece(const F& f, const char* op, cudaStream_t stream,
                  const EwArgs<sizeof...(InT)>& base, const Piece<sizeof...(InT) + 1>& p) {
  constexpr int N = sizeof...(InT);
  constexpr int NOPS = N + 1;
  constexpr size_t item[NOPS] = {sizeof(OutT), sizeof(InT)...};
  const int nd = static_cast<int>(p.shape.size());
  int64_t numel = 1;
  for (int64_t s : p.shape) numel *= s;
  if (numel == 0) return;
  // Does every offset fit in int32 (and the dims in OffsetCalc)?
  bool fits = numel <= kIndexLimit && nd <= kMaxDims;
  for (int k = 0; k < NOPS && fits; ++k) {
    if (k > 0 && base.mode[k - 1] == kHostScalar) continue;
    int64_t span = static_cast<int64_t>(item[k]);
    for (int d = 0; d < nd; ++d) span += (p.shape[d] - 1) * std::llabs(p.strides[k][d]);
    fits = span <= kIndexLimit;
  }
  if (!fits) {
    // Cut the outermost dim: each index on its own when there are too many dims, else in two
    // (at a multiple of 128 so contiguous pieces stay aligned).
    auto sub = [&](int64_t begin, int64_t len, bool drop) {
      Piece<NOPS> q;
      for (int k = 0; k < NOPS; ++k) {
        q.ptr[k] = p.ptr[k] + begin * p.strides[k][0];
        q.strides[k] = p.strides[k];
        if (drop) q.strides[k].erase(0);
      }
      q.shape = p.shape;
      if (drop) {
        q.shape.erase(0);
      } else {
        q.shape[0] = len;
      }
      launch_piece<OutT, InT...>(f, op, stream, base, q);
    };
    const int64_t outer = p.shape[0];
    if (nd > kMaxDims || outer == 1) {
      for (int64_t i = 0; i < outer; ++i) sub(i, 1, true);
    } else {
      int64_t mid = outer / 2;
      if (mid > 256) mid -= mid % 128;
      sub(0, mid, false);
      sub(mid, outer - mid, false);
    }
    return;
  }

  EwArgs<N> a = base;
  a.out = p.ptr[0];
  for (int k = 0; k < N; ++k) a.in[k] = p.ptr[k + 1];
  const int32_t n = static_cast<int32_t>(numel);

  // Contiguous: at most one dim, unit element stride in the output and in every input in
  // memory (stride 0: read once).
  bool contig = nd <= 1;
  if (contig && nd == 1) {
    contig = p.strides[0][0] == static_cast<int64_t>(item[0]);
    for (int k = 0; k < N && contig; ++k) {
      if (a.mode[k] == kHostScalar) continue;
      const int64_t s = p.strides[k + 1][0];
      if (s == 0) {
        a.mode[k] = kBroadcast;
      } else {
        contig = s == static_cast<int64_t>(item[k + 1]);
      }
    }
  }
  if (contig) {
    constexpr int VEC = vec_size<OutT, InT...>();
    bool aligned = reinterpret_cast<uintptr_t>(a.out) % (VEC * sizeof(OutT)) == 0;
    for (int k = 0; k < N; ++k)
      if (a.mode[k] == kMemory)
        aligned = aligned && reinterpret_cast<uintptr_t>(a.in[k]) % (VEC * item[k + 1]) == 0;
    const int32_t nvec = aligned ? n / VEC : 0;
    const int64_t threads = std::max<int64_t>(nvec, n - int64_t(nvec) * VEC);
    ew_contig_kernel<VEC, OutT, F, InT...>
        <<<blocks_for(threads), kBlockSize, 0, stream>>>(f, a, nvec, n);
    check_launch(op);
    return;
  }
  for (int k = 0; k < N; ++k)
    if (a.mode[k] == kBroadcast) a.mode[k] = kMemory;
  OffsetCalc<NOPS> oc{};
  oc.ndim = nd;
  for (int d = 0; d < nd; ++d) {
    const int src = nd - 1 - d;  // innermost first
    oc.size[d] = IntDivider(static_cast<uint32_t>(p.shape[src]));
    for (int k = 0; k < NOPS; ++k) oc.stride[d][k] = static_cast<int32_t>(p.strides[k][src]);
  }
  ew_strided_kernel<OutT, F, InT...><<<blocks_for(n), kBlockSize, 0, stream>>>(f, a, oc, n);
  check_launch(op);
}

}  // namespace ew

// Runs f over the iterator's plan: out = f(in_1, ..., in_N), inputs of storage types InT (the
// dtypes the iterator gives them: the compute dtype, or their own with no_casting() or
// add_input_raw), the result stored as OutT (converting). Does not call it.finish().
template <class OutT, class... InT, class F>
void launch_elementwise(TensorIterator& it, const char* op, const F& f) {
  constexpr int N = sizeof...(InT);
  static_assert(N >= 1 && N + 1 <= TensorIterator::kMaxOperands, "1 to 4 inputs");
  EMBER_CHECK(it.ntensors() == N + 1, op, ": internal error: the CUDA kernel takes ", N + 1,
              " operands, the iterator has ", it.ntensors());
  constexpr ScalarType types[N + 1] = {TypeToScalar<OutT>::value, TypeToScalar<InT>::value...};
  for (int k = 0; k <= N; ++k)
    EMBER_CHECK(it.dtype(k) == types[k], op, ": internal error: operand ", k, " is ",
                dtype_name(it.dtype(k)), ", the CUDA kernel was built for ", dtype_name(types[k]));
  EMBER_CHECK(!it.is_scalar(0), op, ": internal error: the output is a host scalar");
  if (it.numel() == 0) return;

  constexpr size_t in_size[N] = {sizeof(InT)...};
  ew::EwArgs<N> base{};
  ew::Piece<N + 1> piece;
  piece.shape = it.shape();
  for (int k = 0; k <= N; ++k) {
    piece.ptr[k] = it.data(k);
    piece.strides[k] = it.strides(k);
  }
  for (int k = 0; k < N; ++k) {
    if (it.is_scalar(k + 1)) {
      base.mode[k] = ew::kHostScalar;
      std::memcpy(base.value[k], it.data(k + 1), in_size[k]);
      piece.ptr[k + 1] = nullptr;  // never dereferenced on the device
      for (auto& s : piece.strides[k + 1]) s = 0;
    } else {
      base.mode[k] = ew::kMemory;
    }
  }
  DeviceGuard guard(it.output(0)->device().index);
  ew::launch_piece<OutT, InT...>(f, op, current_stream(), base, piece);
}

}  // namespace cuda
}  // namespace ember
