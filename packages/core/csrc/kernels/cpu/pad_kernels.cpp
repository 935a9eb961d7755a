// CPU kernels of pad / constant_pad_nd (ops/shape.yaml). Constant padding fills the result and
// copies the kept block of self into it with copy_into (parallel, any dtype). Reflect, replicate
// and circular padding gather: each output row reads self through one index map per dim
// (ops/pad.h, shared with the derivative), copying items by size, so one loop serves all dtypes.
#include <algorithm>
#include <cstring>

#include "core/dispatch.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/iterator.h"
#include "kernels/parallel.h"
#include "ops.h"
#include "ops/pad.h"

namespace ember {
namespace {

using pad_detail::PadMode;

void check_pad_list(const Tensor& self, const DimVector& pad, const char* op) {
  EMBER_CHECK(pad.size() % 2 == 0, op, ": padding length must be divisible by 2 (got ", pad.size(),
              ")");
  EMBER_CHECK(static_cast<int64_t>(pad.size()) / 2 <= self->dim(), op,
              ": padding length should be less than or equal to two times the input dimension "
              "but got padding length ",
              pad.size(), " and input of dimension ", self->dim());
}

template <int64_t N>
void copy_items(char* dst, const char* src, const int64_t* map, int64_t n, int64_t stride) {
  for (int64_t j = 0; j < n; ++j) std::memcpy(dst + j * N, src + map[j] * stride * N, N);
}

void copy_row(char* dst, const char* src, const int64_t* map, int64_t n, int64_t stride,
              int64_t isz) {
  switch (isz) {
    case 1:
      return copy_items<1>(dst, src, map, n, stride);
    case 2:
      return copy_items<2>(dst, src, map, n, stride);
    case 4:
      return copy_items<4>(dst, src, map, n, stride);
    default:
      return copy_items<8>(dst, src, map, n, stride);
  }
}

// The longest run [start, start + len) of `map` that reads consecutive inputs (the kept part
// of a padded dim): copied with one memcpy when the input's last dim is contiguous.
std::pair<int64_t, int64_t> longest_run(const std::vector<int64_t>& map) {
  int64_t best = 0, best_len = 0, start = 0;
  for (int64_t j = 1; j <= static_cast<int64_t>(map.size()); ++j) {
    if (j < static_cast<int64_t>(map.size()) && map[j] == map[j - 1] + 1) continue;
    if (j - start > best_len) {
      best = start;
      best_len = j - start;
    }
    start = j;
  }
  return {best, best_len};
}

// out[i0, ..., ik] = self[maps[0][i0], ..., maps[k][ik]] for a contiguous out.
void gather_padded(const Tensor& out, const Tensor& self,
                   const std::vector<std::vector<int64_t>>& maps) {
  int64_t nd = self->dim();
  int64_t isz = self->itemsize();
  int64_t cols = out->size(nd - 1);
  int64_t rows = out->numel() / cols;
  const char* src = self->data();
  char* dst = out->data();
  const std::vector<int64_t>& last = maps[nd - 1];
  int64_t last_stride = self->stride(nd - 1);
  auto [run, run_len] = longest_run(last);
  if (last_stride != 1) run_len = 0;
  parallel_for(0, rows, std::max<int64_t>(1, kPointwiseGrain / cols), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t rem = r, off = 0;
      for (int64_t d = nd - 2; d >= 0; --d) {
        int64_t i = rem % out->size(d);
        rem /= out->size(d);
        off += maps[d][i] * self->stride(d);
      }
      const char* s = src + off * isz;
      char* o = dst + r * cols * isz;
      if (run_len > 1) {
        copy_row(o, s, last.data(), run, last_stride, isz);
        std::memcpy(o + run * isz, s + last[run] * isz, run_len * isz);
        copy_row(o + (run + run_len) * isz, s, last.data() + run + run_len, cols - run - run_len,
                 last_stride, isz);
      } else {
        copy_row(o, s, last.data(), cols, last_stride, isz);
      }
    }
  });
}

// Index maps of pad's dims (identity for the dims it leaves alone); raises as pad does.
std::vector<std::vector<int64_t>> pad_maps(const DimVector& sizes, const DimVector& pad, PadMode m,
                                           const std::string& mode, const char* op) {
  int64_t nd = sizes.size(), np = pad.size() / 2;
  EMBER_CHECK_KIND(np >= 1 && np <= 3 && (nd == np + 1 || nd == np + 2), NotImplemented, op,
                   ": padding length ", pad.size(), " is not supported for a ", nd,
                   "D input with mode '", mode,
                   "'; non-constant padding pads the last 1, 2 or 3 dims of a 2D/3D, 3D/4D or "
                   "4D/5D input (padding length 2, 4 or 6)");
  std::vector<std::vector<int64_t>> maps(nd);
  for (int64_t d = 0; d < nd; ++d) {
    int64_t i = nd - 1 - d;  // pad pair of dim d, if any
    if (i < np) {
      maps[d] = pad_detail::pad_source_index(sizes[d], pad[2 * i], pad[2 * i + 1], d, m, op);
    } else {
      maps[d].resize(sizes[d]);
      for (int64_t k = 0; k < sizes[d]; ++k) maps[d][k] = k;
    }
  }
  return maps;
}

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
  Tensor out = ember::empty(out_sizes, self->dtype(), self->device());
  if (out->numel() == 0) return out;
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
  Tensor out = ember::empty(out_sizes, self->dtype(), self->device());
  if (out->numel() > 0) gather_padded(out, self, maps);
  return out;
}

Tensor _pad_backward(const Tensor& grad_output, const DimVector& input_size, const DimVector& pad,
                     const std::string& mode) {
  const char* op = "pad_backward";
  PadMode m = pad_detail::parse_pad_mode(mode);
  EMBER_CHECK(pad.size() % 2 == 0 && pad.size() / 2 <= input_size.size(), op,
              ": padding of length ", pad.size(), " does not fit an input of shape ",
              shape_str(input_size));
  DimVector out_sizes = input_size;
  std::vector<std::vector<int64_t>> maps;
  if (m == PadMode::Constant) {
    for (int64_t i = 0; i < static_cast<int64_t>(pad.size()) / 2; ++i) {
      int64_t d = input_size.size() - 1 - i;
      out_sizes[d] = pad_detail::padded_size(input_size[d], pad[2 * i], pad[2 * i + 1], d, op);
    }
  } else {
    maps = pad_maps(input_size, pad, m, mode, op);
    for (int64_t d = 0; d < static_cast<int64_t>(input_size.size()); ++d)
      out_sizes[d] = maps[d].size();
  }
  EMBER_CHECK(grad_output->sizes() == out_sizes, op, ": expected grad_output of shape ",
              shape_str(out_sizes), " (input ", shape_str(input_size), " padded by ",
              shape_str(pad), "), got ", shape_str(grad_output->sizes()));
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
