// CUDA kernels of ops/shape.yaml's ops with a device kernel: tril/triu (kernels/cpu/shape_ops.cpp)
// and constant_pad_nd/pad (kernels/cpu/nn_pad.cpp). All move items by their size only, so one
// instance per item size serves every dtype.
#include <algorithm>
#include <vector>

#include "cuda/cuda_registry.h"
#include "cuda/index_common.cuh"
#include "kernels/pad.h"
#include "kernels/triangle_rules.h"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {
namespace {

using ix::Walk;

// dst[e] = src[e] where (row i, col j) of e's matrix is kept, else 0; dst and src walk their
// own strides over one shape (they may be the same memory: each element is read then written
// by one thread).
template <class T>
__global__ void triangle_kernel(int64_t n, Walk w, char* dst, const char* src, int64_t rows,
                                int64_t cols, bool lower, int64_t diagonal) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t od, os;
    ix::walk_offsets(w, e, od, os);
    const int64_t j = e % cols, i = (e / cols) % rows;
    const bool keep = lower ? j <= i + diagonal : j >= i + diagonal;
    *reinterpret_cast<T*>(dst + od) = keep ? *reinterpret_cast<const T*>(src + os) : T(0);
  }
}

void triangle_into(const Tensor& dst, const Tensor& src, bool lower, int64_t diagonal,
                   const char* op) {
  const int64_t n = dst->numel();
  const int64_t rows = dst->size(dst->dim() - 2), cols = dst->size(dst->dim() - 1);
  if (n == 0 || rows == 0 || cols == 0) return;
  Walk w = ix::make_walk(dst->sizes(), {dst, src}, op);
  DeviceGuard guard(ix::device_index(dst));
  ix::by_itemsize(dst->itemsize(), [&](auto tag) {
    using T = decltype(tag);
    triangle_kernel<T><<<blocks_for(n), kBlockSize, 0, ix::stream_of(dst)>>>(
        n, w, dst->data(), src->data(), rows, cols, lower, diagonal);
    check_launch(op);
  });
  dst->bump_version();
}

Tensor triangle(const Tensor& self, const Tensor& out, bool lower, int64_t diagonal,
                const char* op) {
  check_triangle_input(self, op);
  diagonal = clamp_diagonal(diagonal);
  if (out && out == self && self->is_contiguous()) {
    triangle_into(self, self, lower, diagonal, op);
    return self;
  }
  if (out) ix::check_cuda(out, op, "the out= tensor");
  bool direct = out && out->dtype() == self->dtype() && out->sizes() == self->sizes() &&
                out->is_contiguous() && out->storage() != self->storage();
  Tensor r = direct ? out : empty(self->sizes(), self->dtype(), self->device());
  triangle_into(r, self, lower, diagonal, op);
  if (!out || direct) return r;
  check_triangle_out(r, out, self, op);
  ix::resize_out(out, r->sizes(), op);
  if (out->dtype() != r->dtype())  // a cast on the way out: through the host (rare)
    r = ix::to_device(ix::host_as(r, out->dtype(), op), out->device());
  ix::copy(out, r, op);
  return out;
}

Tensor tril(const Tensor& self, int64_t diagonal, const Tensor& out) {
  return triangle(self, out, true, diagonal, "tril");
}

Tensor triu(const Tensor& self, int64_t diagonal, const Tensor& out) {
  return triangle(self, out, false, diagonal, "triu");
}

// ---- padding ----------------------------------------------------------------------------------

// out (contiguous, shape w.sizes) [i0, .., ik] = src[map_0[i0], .., map_k[ik]] (src strides in
// bytes in w.st[1]); a map entry -1 gives `fill`. maps: the dims' maps one after another, map d
// starting at map_off[d].
template <class T>
__global__ void pad_kernel(int64_t n, Walk w, T* out, const char* src, const int64_t* maps,
                           const int64_t* map_off, T fill) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = e, os = 0;
    bool pad = false;
    for (int d = w.nd - 1; d >= 0; --d) {
      const int64_t c = rem % w.sizes[d];
      rem /= w.sizes[d];
      const int64_t s = maps[map_off[d] + c];
      pad |= s < 0;
      os += s * w.st[1][d];
    }
    out[e] = pad ? fill : *reinterpret_cast<const T*>(src + os);
  }
}

void check_pad_list(const Tensor& self, const DimVector& pad, const char* op) {
  EMBER_CHECK(pad.size() % 2 == 0, op, ": padding length must be divisible by 2 (got ", pad.size(),
              ")");
  EMBER_CHECK(static_cast<int64_t>(pad.size()) / 2 <= self->dim(), op,
              ": padding length should be less than or equal to two times the input dimension "
              "but got padding length ",
              pad.size(), " and input of dimension ", self->dim());
}

// out = self gathered through maps (one per dim of self), -1 entries filled with fill_bits.
Tensor gather_padded(const Tensor& self, const std::vector<std::vector<int64_t>>& maps,
                     const char* fill_bits, const char* op) {
  const int64_t nd = self->dim();
  DimVector out_sizes(nd);
  for (int64_t d = 0; d < nd; ++d) out_sizes[d] = maps[d].size();
  Tensor out = empty(out_sizes, self->dtype(), self->device());
  const int64_t n = out->numel();
  if (n == 0) return out;
  ix::check_dims(nd, op);
  int64_t total = 0;
  for (const auto& m : maps) total += m.size();
  Tensor hmaps = empty(DimVector{total + nd}, ScalarType::Int64, cpu_device());
  int64_t* hp = hmaps->data_as<int64_t>();
  // hp = [map_off (nd entries) | the maps]; map_off counts from the first map, which the kernel
  // gets as its `maps` pointer.
  int64_t pos = 0;
  for (int64_t d = 0; d < nd; ++d) {
    hp[d] = pos;
    for (int64_t v : maps[d]) hp[nd + pos++] = v;
  }
  Tensor dmaps = ix::to_device(hmaps, self->device());
  Walk w = ix::make_walk(out_sizes, {out}, op);
  for (int64_t d = 0; d < nd; ++d) w.st[1][d] = self->stride(d) * self->itemsize();
  DeviceGuard guard(ix::device_index(self));
  ix::by_itemsize(self->itemsize(), [&](auto tag) {
    using T = decltype(tag);
    T fill{};
    if (fill_bits) std::memcpy(&fill, fill_bits, sizeof(T));
    pad_kernel<T><<<blocks_for(n), kBlockSize, 0, ix::stream_of(self)>>>(
        n, w, out->data_as<T>(), self->data(), dmaps->data_as<int64_t>() + nd,
        dmaps->data_as<int64_t>(), fill);
    check_launch(op);
  });
  return out;
}

Tensor constant_pad_nd(const Tensor& self, const DimVector& pad, const Scalar& value) {
  const char* op = "constant_pad_nd";
  check_pad_list(self, pad, op);
  pad_detail::check_pad_value(self, pad, value, op);
  const int64_t nd = self->dim(), np = pad.size() / 2;
  std::vector<std::vector<int64_t>> maps(nd);
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t i = nd - 1 - d, n = self->size(d);
    const int64_t l = i < np ? pad[2 * i] : 0, r = i < np ? pad[2 * i + 1] : 0;
    const int64_t out_size = pad_detail::padded_size(n, l, r, d, op);
    const int64_t len = n - std::max<int64_t>(-l, 0) - std::max<int64_t>(-r, 0);
    EMBER_CHECK(len >= 0 || out_size == 0, op, ": padding (", l, ", ", r, ") crops dimension ", d,
                " of size ", n, " to a negative size");
    const int64_t lo = std::max<int64_t>(-l, 0), pl = std::max<int64_t>(l, 0);
    maps[d].resize(out_size);
    for (int64_t j = 0; j < out_size; ++j)
      maps[d][j] = j - pl >= 0 && j - pl < len ? lo + j - pl : -1;
  }
  alignas(16) char bits[16] = {};  // room for any dtype's value (complex128)
  store_scalar(value, self->dtype(), bits);
  if (nd == 0) return ix::clone(self, op);
  return gather_padded(self, maps, bits, op);
}

Tensor pad(const Tensor& self, const DimVector& pad, const std::string& mode,
           std::optional<double> value) {
  using pad_detail::PadMode;
  PadMode m = pad_detail::parse_pad_mode(mode);
  if (m == PadMode::Constant) {
    Scalar v = value ? Scalar(*value) : Scalar(int64_t(0));
    return constant_pad_nd(self, pad, v);
  }
  EMBER_CHECK(!value, "pad: padding mode \"", mode, "\" doesn't take in value argument");
  check_pad_list(self, pad, "pad");
  const int64_t nd = self->dim(), np = pad.size() / 2;
  EMBER_CHECK_KIND(np >= 1 && np <= 3 && (nd == np + 1 || nd == np + 2), NotImplemented, "pad",
                   ": padding length ", pad.size(), " is not supported for a ", nd,
                   "D input with mode '", mode,
                   "'; non-constant padding pads the last 1, 2 or 3 dims of a 2D/3D, 3D/4D or "
                   "4D/5D input (padding length 2, 4 or 6)");
  std::vector<std::vector<int64_t>> maps(nd);
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t i = nd - 1 - d;
    if (i < np) {
      maps[d] =
          pad_detail::pad_source_index(self->size(d), pad[2 * i], pad[2 * i + 1], d, m, "pad");
    } else {
      maps[d].resize(self->size(d));
      for (int64_t k = 0; k < self->size(d); ++k) maps[d][k] = k;
    }
  }
  return gather_padded(self, maps, nullptr, "pad");
}

void register_shape() {
  register_kernel("tril", DeviceType::CUDA, &tril);
  register_kernel("triu", DeviceType::CUDA, &triu);
  register_kernel("constant_pad_nd", DeviceType::CUDA, &constant_pad_nd);
  register_kernel("pad", DeviceType::CUDA, &pad);
}

}  // namespace
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::register_shape)
