// CPU kernels of pad / constant_pad_nd (ops/shape.yaml). Constant padding fills the result and
// copies the kept block of self into it with copy_into (parallel, any dtype). Reflect, replicate
// and circular padding gather: each output row reads self through one index map per dim
// (kernels/pad.h, shared with the derivative), copying items by size, so one loop serves all
// dtypes.
#include <algorithm>
#include <complex>
#include <cstring>

#include "core/dispatch.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/iterator.h"
#include "kernels/pad.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace {

using pad_detail::PadMode;

constexpr int64_t kMaxPadDims = 5;  // non-constant padding: at most 3 padded dims of a 5-D input

using pad_detail::check_pad_list;

// The longest run [start, start + len) of `map` that reads consecutive inputs (the kept part
// of a padded dim): copied with one memcpy when the input's last dim is contiguous.
std::pair<int64_t, int64_t> longest_run(const std::vector<int64_t>& map) {
  int64_t best = 0, best_len = 0, start = 0;
  const int64_t n = map.size();
  for (int64_t j = 1; j <= n; ++j) {
    if (j < n && map[j - 1] >= 0 && map[j] == map[j - 1] + 1) continue;
    if (map[start] >= 0 && j - start > best_len) {
      best = start;
      best_len = j - start;
    }
    start = j;
  }
  return {best, best_len};
}

// out[i0, ..., ik] = self[maps[0][i0], ..., maps[k][ik]] for a contiguous out, moving items
// as unsigned integers U of their size (so one instance serves every dtype of that size); a
// map entry -1 (constant padding) gives `fill` instead. Rows of the last dim run in parallel;
// the index of a row advances like an odometer.
template <class U, bool kFill>
void gather_rows(U* dst, const U* src, const std::vector<std::vector<int64_t>>& maps,
                 const DimVector& out_sizes, const DimVector& in_strides, U fill) {
  const int64_t nd = out_sizes.size();
  int64_t osz[kMaxPadDims] = {}, ist[kMaxPadDims] = {};
  const int64_t* mp[kMaxPadDims] = {};
  for (int64_t d = 0; d < nd; ++d) {
    osz[d] = out_sizes[d];
    ist[d] = in_strides[d];
    mp[d] = maps[d].data();
  }
  const int64_t cols = osz[nd - 1];
  int64_t rows = 1;
  for (int64_t d = 0; d < nd - 1; ++d) rows *= osz[d];
  const int64_t* last = mp[nd - 1];
  const int64_t ls = ist[nd - 1];
  auto [run, run_len] = longest_run(maps[nd - 1]);
  if (ls != 1) run_len = 0;
  const int64_t tail = run + run_len;
  parallel_for(0, rows, std::max<int64_t>(1, kPointwiseGrain / cols), [&](int64_t b, int64_t e) {
    int64_t idx[kMaxPadDims] = {};
    for (int64_t d = nd - 2, rem = b; d >= 0; --d) {
      idx[d] = rem % osz[d];
      rem /= osz[d];
    }
    U* o = dst + b * cols;
    for (int64_t r = b; r < e; ++r, o += cols) {
      int64_t off = 0;
      bool padded = false;
      for (int64_t d = 0; d < nd - 1; ++d) {
        padded = padded || mp[d][idx[d]] < 0;
        off += mp[d][idx[d]] * ist[d];
      }
      const U* s = src + off;
      auto item = [&](int64_t j) { return kFill && last[j] < 0 ? fill : s[last[j] * ls]; };
      if (kFill && padded) {
        std::fill(o, o + cols, fill);
      } else if (run_len > 0) {
        for (int64_t j = 0; j < run; ++j) o[j] = item(j);
        std::memcpy(o + run, s + last[run], run_len * sizeof(U));
        for (int64_t j = tail; j < cols; ++j) o[j] = item(j);
      } else {
        for (int64_t j = 0; j < cols; ++j) o[j] = item(j);
      }
      for (int64_t d = nd - 2; d >= 0; --d) {  // next row
        if (++idx[d] < osz[d]) break;
        idx[d] = 0;
      }
    }
  });
}

template <class U>
void gather_as(const Tensor& out, const Tensor& self, const std::vector<std::vector<int64_t>>& maps,
               const void* fill_bits) {
  U fill = 0;
  if (fill_bits) std::memcpy(&fill, fill_bits, sizeof(U));
  auto run = fill_bits ? gather_rows<U, true> : gather_rows<U, false>;
  if (!out->is_contiguous()) {
    // A channels-last out: the same gather over the dims in its memory order (N, *, C), which
    // out's memory holds contiguously.
    const int64_t nd = out->dim();
    DimVector order{0};
    for (int64_t d = 2; d < nd; ++d) order.push_back(d);
    order.push_back(1);
    DimVector sizes, strides;
    std::vector<std::vector<int64_t>> pmaps;
    for (int64_t d : order) {
      sizes.push_back(out->size(d));
      strides.push_back(self->stride(d));
      pmaps.push_back(maps[d]);
    }
    run(reinterpret_cast<U*>(out->data()), reinterpret_cast<const U*>(self->data()), pmaps, sizes,
        strides, fill);
    return;
  }
  run(reinterpret_cast<U*>(out->data()), reinterpret_cast<const U*>(self->data()), maps,
      out->sizes(), self->strides(), fill);
}

// The result of padding self: channels-last when self is (as PyTorch's, except for circular
// padding), else contiguous.
Tensor padded_result(const Tensor& self, const DimVector& out_sizes, bool layout_kept) {
  if (layout_kept && suggests_channels_last(self))
    return ember::empty_strided(out_sizes, channels_last_strides(out_sizes), self->dtype(),
                                self->device());
  return ember::empty(out_sizes, self->dtype(), self->device());
}

// fill_bits: the constant-padding value in self's dtype (nullptr for the other modes).
void gather_padded(const Tensor& out, const Tensor& self,
                   const std::vector<std::vector<int64_t>>& maps, const void* fill_bits) {
  switch (self->itemsize()) {
    case 1:
      return gather_as<uint8_t>(out, self, maps, fill_bits);
    case 2:
      return gather_as<uint16_t>(out, self, maps, fill_bits);
    case 4:
      return gather_as<uint32_t>(out, self, maps, fill_bits);
    case 8:
      return gather_as<uint64_t>(out, self, maps, fill_bits);
    default:  // 16 bytes (complex128), moved as one value
      return gather_as<std::complex<double>>(out, self, maps, fill_bits);
  }
}

using pad_detail::pad_maps;

// a += b, through float for the 16-bit float types (which have no arithmetic of their own).
template <class T>
inline void add_to(T& a, T b) {
  a = static_cast<T>(static_cast<opmath_t<T>>(a) + static_cast<opmath_t<T>>(b));
}

// gi[maps[0][i0], ..., maps[k][ik]] += g[i0, ..., ik] for contiguous g and gi (zeroed here).
// The dims pad leaves alone index independent planes, run in parallel; in a plane the rows are
// visited in order, so no two threads add into the same element.
template <class T>
void scatter_padded(T* gi, const T* g, const DimVector& in_sizes, const DimVector& out_sizes,
                    const std::vector<std::vector<int64_t>>& maps, int64_t np) {
  int64_t nd = in_sizes.size(), lead = nd - np;
  int64_t planes = 1;
  for (int64_t d = 0; d < lead; ++d) planes *= in_sizes[d];
  int64_t P = 1, Q = 1;
  for (int64_t d = lead; d < nd; ++d) {
    P *= in_sizes[d];
    Q *= out_sizes[d];
  }
  const int64_t cols = out_sizes[nd - 1], rows = Q / cols;
  const std::vector<int64_t>& last = maps[nd - 1];
  auto [run, run_len] = longest_run(last);
  parallel_for(0, planes, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(Q, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t pl = b; pl < e; ++pl) {
                   T* dst = gi + pl * P;
                   std::fill(dst, dst + P, T(0));
                   const T* src = g + pl * Q;
                   for (int64_t r = 0; r < rows; ++r, src += cols) {
                     int64_t rem = r, off = 0, stride = in_sizes[nd - 1];
                     for (int64_t d = nd - 2; d >= lead; --d) {
                       off += maps[d][rem % out_sizes[d]] * stride;
                       rem /= out_sizes[d];
                       stride *= in_sizes[d];
                     }
                     T* row = dst + off;
                     for (int64_t j = 0; j < run; ++j) add_to(row[last[j]], src[j]);
                     T* in_run = row + (run_len > 0 ? last[run] : 0);
                     const T* out_run = src + run;
                     for (int64_t j = 0; j < run_len; ++j) add_to(in_run[j], out_run[j]);
                     for (int64_t j = run + run_len; j < cols; ++j) add_to(row[last[j]], src[j]);
                   }
                 }
               });
}

}  // namespace

namespace cpu {

Tensor constant_pad_nd(const Tensor& self, const DimVector& pad, const Scalar& value) {
  const char* op = "constant_pad_nd";
  check_pad_list(self, pad, op);
  pad_detail::check_pad_value(self, pad, value, op);
  int64_t nd = self->dim(), np = pad.size() / 2;
  DimVector out_sizes = self->sizes(), kept = self->sizes();
  int64_t out_off = 0, in_off = self->storage_offset();
  bool grows = false;
  for (int64_t i = 0; i < np; ++i) {
    int64_t d = nd - 1 - i, l = pad[2 * i], r = pad[2 * i + 1];
    out_sizes[d] = pad_detail::padded_size(self->size(d), l, r, d, op);
    int64_t len = self->size(d) - std::max<int64_t>(-l, 0) - std::max<int64_t>(-r, 0);
    EMBER_CHECK(len >= 0 || out_sizes[d] == 0, op, ": padding (", l, ", ", r, ") crops dimension ",
                d, " of size ", self->size(d), " to a negative size");
    kept[d] = std::max<int64_t>(len, 0);
    grows = grows || l > 0 || r > 0;
  }
  Tensor out = padded_result(self, out_sizes, true);
  if (out->numel() == 0) return out;
  // The index maps hold 8 bytes per output index of each dim: more than the output itself for a
  // long padded row of small items (a byte row padded by 2**31), so those take fill + copy.
  int64_t map_items = 0;
  for (int64_t d = 0; d < nd; ++d) map_items += out_sizes[d];
  const bool small_maps = map_items <= out->numel() * self->itemsize() / 8;
  if (nd >= 1 && nd <= kMaxPadDims && self->itemsize() <= 8 && small_maps) {
    // one pass: each output item is a copy of its source or the value (map entry -1)
    std::vector<std::vector<int64_t>> maps(nd);
    for (int64_t d = 0; d < nd; ++d) {
      int64_t i = nd - 1 - d, n = self->size(d);
      int64_t l = i < np ? pad[2 * i] : 0, r = i < np ? pad[2 * i + 1] : 0;
      int64_t lo = std::max<int64_t>(-l, 0), pl = std::max<int64_t>(l, 0);
      int64_t m = n - lo - std::max<int64_t>(-r, 0);
      maps[d].resize(out_sizes[d]);
      for (int64_t j = 0; j < out_sizes[d]; ++j)
        maps[d][j] = j - pl >= 0 && j - pl < m ? lo + j - pl : -1;
    }
    alignas(8) char bits[8] = {};
    store_scalar(value, self->dtype(), bits);
    gather_padded(out, self, maps, bits);
    return out;
  }
  if (grows) {
    Tensor v = ember::empty(DimVector{}, self->dtype(), self->device());
    store_scalar(value, self->dtype(), v->data());
    copy_into(out, v);
  }
  for (int64_t i = 0; i < np; ++i) {
    int64_t d = nd - 1 - i, l = pad[2 * i];
    out_off += std::max<int64_t>(l, 0) * out->stride(d);
    in_off += std::max<int64_t>(-l, 0) * self->stride(d);
  }
  int64_t n = 1;
  for (int64_t s : kept) n *= s;
  if (n > 0)
    copy_into(make_view(out, kept, out->strides(), out_off),
              make_view(self, kept, self->strides(), in_off));
  return out;
}

Tensor pad(const Tensor& self, const DimVector& pad, const std::string& mode,
           std::optional<double> value) {
  PadMode m = pad_detail::parse_pad_mode(mode);
  if (m == PadMode::Constant) {
    Scalar v = value ? Scalar(*value) : Scalar(int64_t(0));
    return constant_pad_nd(self, pad, v);
  }
  EMBER_CHECK(!value, "pad: padding mode \"", mode, "\" doesn't take in value argument");
  check_pad_list(self, pad, "pad");
  std::vector<std::vector<int64_t>> maps = pad_maps(self->sizes(), pad, m, mode, "pad");
  DimVector out_sizes = self->sizes();
  for (int64_t d = 0; d < self->dim(); ++d) out_sizes[d] = maps[d].size();
  Tensor out = padded_result(self, out_sizes, m != PadMode::Circular);
  if (out->numel() > 0) gather_padded(out, self, maps, nullptr);
  return out;
}

Tensor _pad_backward(const Tensor& grad_output, const DimVector& input_size, const DimVector& pad,
                     const std::string& mode) {
  const char* op = "pad_backward";
  PadMode m = pad_detail::parse_pad_mode(mode);
  pad_detail::check_pad_backward(pad, input_size, op);
  DimVector out_sizes = input_size;
  for (int64_t i = 0; i < static_cast<int64_t>(pad.size()) / 2; ++i) {
    int64_t d = input_size.size() - 1 - i;
    out_sizes[d] = pad_detail::padded_size(input_size[d], pad[2 * i], pad[2 * i + 1], d, op);
  }
  // grad_output exists, so once it matches, the maps below are as large as it is (no more).
  pad_detail::check_pad_grad_output(grad_output, out_sizes, input_size, pad, op);
  std::vector<std::vector<int64_t>> maps;
  if (m != PadMode::Constant) maps = pad_maps(input_size, pad, m, mode, op);
  if (m == PadMode::Constant) {  // the adjoint of padding is cropping (and vice versa)
    DimVector back;
    for (int64_t p : pad) back.push_back(-p);
    return constant_pad_nd(grad_output, back, Scalar(int64_t(0)));
  }
  Tensor gi = ember::empty(input_size, grad_output->dtype(), grad_output->device());
  if (gi->numel() == 0) return gi;
  if (grad_output->numel() == 0) {  // everything was cropped away
    std::memset(gi->data(), 0, gi->numel() * gi->itemsize());
    return gi;
  }
  Tensor g = nn::contig(grad_output);
  EMBER_DISPATCH_NUMERIC(g->dtype(), op, [&] {
    scatter_padded<scalar_t>(gi->data_as<scalar_t>(), g->data_as<scalar_t>(), input_size, out_sizes,
                             maps, pad.size() / 2);
  });
  return gi;
}

}  // namespace cpu
}  // namespace ember
