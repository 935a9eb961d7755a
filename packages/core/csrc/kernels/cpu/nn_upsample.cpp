// CPU kernels of the upsample_* ops (ops/nn.yaml; F.interpolate's nearest, nearest-exact, linear,
// bilinear, trilinear and bicubic modes) and their backward passes.
//
// Every mode is separable: each spatial dim gets an `Axis`, built once per call, that lists for
// every output index the input indices it reads ("taps": 1 nearest, 2 linear, 4 cubic) and their
// weights, with PyTorch's index arithmetic. A contiguous (N, C, D, H, W) input (1-D/2-D inputs
// get unit D/H dims) is then resampled one output row (od, oh) at a time: the input rows that
// row reads (taps_d * taps_h of them) are blended into one row of width W (a contiguous,
// vectorisable loop), which the W axis then resamples. The backward pass runs the same maps in
// reverse, one plane (n, c) per task so the scatter-adds need no atomics.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/parallel.h"
#include "kernels/upsample_rules.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

enum class Interp { Nearest, NearestExact, Linear, Cubic };

using Scales = std::array<std::optional<double>, 3>;

// Source positions and weights of one spatial dim: output o reads idx[o * taps + k] with
// weight w[o * taps + k], k < taps.
template <class A>
struct Axis {
  int64_t taps = 1;
  std::vector<int64_t> idx;
  std::vector<A> w;
};

// 1 / scale when a positive scale was given, else in / out (PyTorch's compute_scales_value).
template <class A>
A step_of(std::optional<double> scale, int64_t in, int64_t out) {
  if (scale && *scale > 0) return static_cast<A>(1.0 / *scale);
  return static_cast<A>(in) / static_cast<A>(out);
}

// The Keys cubic convolution kernel (a = -0.75, as PyTorch) at distances t + 1, t, 1 - t, 2 - t.
template <class A>
void cubic_weights(A t, A* w) {
  const A a = static_cast<A>(-0.75);
  auto near = [&](A x) { return ((a + 2) * x - (a + 3)) * x * x + 1; };       // |x| <= 1
  auto far = [&](A x) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; };  // 1 < |x| < 2
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

// floor(src) clamped to at most in - 1; a source position at or past the end (also inf or NaN,
// from extreme scales) reads the last input. src >= -1 by construction otherwise.
template <class A>
int64_t floor_index(A src, int64_t in) {
  if (!(src < static_cast<A>(in - 1))) return in - 1;
  return static_cast<int64_t>(std::floor(src));
}

// Where PyTorch's kernels ignore the scale: `linear` (every linear mode) copies a dim whose
// size does not change; `nearest_shortcuts` (upsample_nearest2d, whose CPU kernel PyTorch
// indexes differently from the 1-D and 3-D ones) also maps out == 2 * in to o / 2.
template <class A>
Axis<A> make_axis(Interp mode, int64_t in, int64_t out, bool align_corners,
                  std::optional<double> scale, bool nearest_shortcuts) {
  Axis<A> ax;
  const bool same = in == out && (mode == Interp::Linear || nearest_shortcuts);
  const bool twice = out == 2 * in && nearest_shortcuts;
  if (same || twice) {
    ax.idx.resize(out);
    ax.w.assign(out, A(1));
    for (int64_t o = 0; o < out; ++o) ax.idx[o] = twice ? o / 2 : o;
    return ax;
  }
  ax.taps = mode == Interp::Cubic ? 4 : (mode == Interp::Linear ? 2 : 1);
  ax.idx.resize(out * ax.taps);
  ax.w.resize(out * ax.taps);
  if (mode == Interp::Nearest || mode == Interp::NearestExact) {
    const A s = step_of<A>(scale, in, out);
    for (int64_t o = 0; o < out; ++o) {
      // PyTorch floors in float (floorf) whatever the dtype; so do we, to pick the same pixels.
      float src = mode == Interp::Nearest
                      ? static_cast<float>(s * static_cast<A>(o))
                      : static_cast<float>(
                            std::max<A>(s * (static_cast<A>(o) + A(0.5)) - A(0.5), A(0)) + A(0.5));
      ax.idx[o] = floor_index(src, in);
      ax.w[o] = 1;
    }
    return ax;
  }
  A s;
  if (align_corners)
    s = out > 1 ? static_cast<A>(in - 1) / static_cast<A>(out - 1) : A(0);
  else
    s = step_of<A>(scale, in, out);
  for (int64_t o = 0; o < out; ++o) {
    A src = align_corners ? s * static_cast<A>(o) : s * (static_cast<A>(o) + A(0.5)) - A(0.5);
    if (mode == Interp::Linear && src < 0) src = 0;
    int64_t i0 = floor_index(src, in);
    A t = std::min<A>(std::max<A>(src - static_cast<A>(i0), A(0)), A(1));
    int64_t* ix = ax.idx.data() + o * ax.taps;
    A* w = ax.w.data() + o * ax.taps;
    if (mode == Interp::Linear) {
      ix[0] = i0;
      ix[1] = i0 < in - 1 ? i0 + 1 : i0;
      w[0] = 1 - t;
      w[1] = t;
    } else {  // cubic: four neighbours, clamped to the border
      cubic_weights(t, w);
      for (int64_t k = 0; k < 4; ++k)
        ix[k] = std::min<int64_t>(std::max<int64_t>(i0 - 1 + k, 0), in - 1);
    }
  }
  return ax;
}

// One call's geometry: sizes padded to 3 spatial dims at the front.
struct Geometry {
  int64_t k = 0;  // spatial dims of the op
  int64_t planes = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  DimVector in_shape, out_shape;
  int64_t in_numel() const { return in[0] * in[1] * in[2]; }
  int64_t out_numel() const { return out[0] * out[1] * out[2]; }
};

Geometry make_geometry(const char* op, int64_t k, const DimVector& input_size,
                       const DimVector& output_size) {
  const nn::UpsampleDims u = nn::upsample_dims(op, k, input_size, output_size);
  Geometry g;
  g.k = k;
  g.planes = u.planes;
  g.in_shape = input_size;
  g.out_shape = u.out_shape;
  for (int j = 0; j < 3; ++j) {
    g.in[j] = u.in[j];
    g.out[j] = u.out[j];
  }
  return g;
}

template <class A>
std::array<Axis<A>, 3> make_axes(const Geometry& g, Interp mode, bool align_corners,
                                 const Scales& scales) {
  const bool shortcuts = mode == Interp::Nearest && g.k == 2;
  std::array<Axis<A>, 3> ax;
  for (int64_t j = 0; j < 3; ++j) {
    if (j < 3 - g.k) {
      ax[j].idx = {0};
      ax[j].w = {A(1)};
    } else {
      ax[j] =
          make_axis<A>(mode, g.in[j], g.out[j], align_corners, scales[j - (3 - g.k)], shortcuts);
    }
  }
  return ax;
}

// The input rows (offsets in a plane) and weights that output row (od, oh) blends; returns
// their count. Zero weights are dropped (aligned positions read a single row).
template <class A>
int64_t rows_of(const Geometry& g, const std::array<Axis<A>, 3>& ax, int64_t od, int64_t oh,
                int64_t* off, A* wt) {
  int64_t n = 0;
  for (int64_t a = 0; a < ax[0].taps; ++a)
    for (int64_t b = 0; b < ax[1].taps; ++b) {
      A w = ax[0].w[od * ax[0].taps + a] * ax[1].w[oh * ax[1].taps + b];
      if (w == A(0)) continue;
      off[n] =
          (ax[0].idx[od * ax[0].taps + a] * g.in[1] + ax[1].idx[oh * ax[1].taps + b]) * g.in[2];
      wt[n++] = w;
    }
  return n;
}

constexpr int64_t kMaxRows = 16;  // taps_d * taps_h: at most 4 * 4 (bicubic)

// Nearest modes: pure gathers, any dtype. Output rows parallel; a row reading the same input
// row as the one before it (upsampling) is a copy of that output row.
template <class T>
void nearest_forward(const Geometry& g, const std::array<Axis<float>, 3>& ax, const T* x, T* y) {
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2], P = g.in_numel();
  const int64_t* iw = ax[2].idx.data();
  const bool identity_w = g.in[2] == OW && [&] {
    for (int64_t o = 0; o < OW; ++o)
      if (iw[o] != o) return false;
    return true;
  }();
  parallel_for(0, g.planes * OD * OH, std::max<int64_t>(1, kPointwiseGrain / OW),
               [&](int64_t b, int64_t e) {
                 int64_t prev_src = -1;
                 for (int64_t r = b; r < e; ++r) {
                   int64_t oh = r % OH, od = (r / OH) % OD, pl = r / (OH * OD);
                   int64_t src = pl * P + (ax[0].idx[od] * g.in[1] + ax[1].idx[oh]) * g.in[2];
                   T* out = y + r * OW;
                   if (src == prev_src) {
                     std::memcpy(out, out - OW, OW * sizeof(T));
                   } else if (identity_w) {
                     std::memcpy(out, x + src, OW * sizeof(T));
                   } else {
                     const T* row = x + src;
                     for (int64_t o = 0; o < OW; ++o) out[o] = row[iw[o]];
                   }
                   prev_src = src;
                 }
               });
}

// Linear and cubic modes: blend the input rows, then resample along W.
template <class T, class A>
void blend_forward(const Geometry& g, const std::array<Axis<A>, 3>& ax, const T* x, T* y) {
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2], W = g.in[2], P = g.in_numel();
  const int64_t tw = ax[2].taps;
  const int64_t* iw = ax[2].idx.data();
  const A* ww = ax[2].w.data();
  parallel_for(
      0, g.planes * OD * OH, std::max<int64_t>(1, kPointwiseGrain / OW), [&](int64_t b, int64_t e) {
        std::vector<A> comb(W);
        int64_t off[kMaxRows];
        A wt[kMaxRows];
        for (int64_t r = b; r < e; ++r) {
          int64_t oh = r % OH, od = (r / OH) % OD, pl = r / (OH * OD);
          int64_t n = rows_of(g, ax, od, oh, off, wt);
          const T* base = x + pl * P;
          T* out = y + r * OW;
          const A* src = nullptr;
          bool direct = false;
          if constexpr (std::is_same_v<T, A>) {
            direct = n == 1 && wt[0] == A(1);  // the row itself, no blend
            src = base + off[0];
          }
          if (!direct) {
            A* c = comb.data();
            const T* r0 = base + off[0];
            const A w0 = wt[0];
            for (int64_t i = 0; i < W; ++i) c[i] = w0 * static_cast<A>(r0[i]);
            for (int64_t j = 1; j < n; ++j) {
              const T* rj = base + off[j];
              const A wj = wt[j];
              for (int64_t i = 0; i < W; ++i) c[i] += wj * static_cast<A>(rj[i]);
            }
            src = c;
          }
          if (tw == 2) {
            for (int64_t o = 0; o < OW; ++o)
              out[o] =
                  static_cast<T>(ww[2 * o] * src[iw[2 * o]] + ww[2 * o + 1] * src[iw[2 * o + 1]]);
          } else {
            for (int64_t o = 0; o < OW; ++o) {
              A acc = 0;
              for (int64_t k = 0; k < tw; ++k) acc += ww[o * tw + k] * src[iw[o * tw + k]];
              out[o] = static_cast<T>(acc);
            }
          }
        }
      });
}

// blend_forward for a dense channels-last input (N, *spatial, C) into a channels-last output:
// per output position, the same products and sums per channel, in the same order, as the
// planar loop (so both layouts give the same bits), over rows of C adjacent channels
// (vectorized) instead of transposing the input to planes and the result back.
template <class T, class A>
void blend_forward_channels_last(const Geometry& g, const std::array<Axis<A>, 3>& ax, const T* x,
                                 T* y, int64_t N, int64_t C) {
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2], P = g.in_numel();
  const int64_t tw = ax[2].taps;
  const int64_t* iw = ax[2].idx.data();
  const A* ww = ax[2].w.data();
  parallel_for(0, N * OD * OH, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(OW * C, 1)),
               [&](int64_t b, int64_t e) {
                 std::vector<A> comb(static_cast<size_t>(tw * C));
                 int64_t off[kMaxRows];
                 A wt[kMaxRows];
                 for (int64_t r = b; r < e; ++r) {
                   const int64_t oh = r % OH, od = (r / OH) % OD, n = r / (OH * OD);
                   const int64_t rows = rows_of(g, ax, od, oh, off, wt);
                   const T* base = x + n * P * C;
                   T* out = y + r * OW * C;
                   for (int64_t o = 0; o < OW; ++o, out += C) {
                     for (int64_t k = 0; k < tw; ++k) {  // the blended row at tap k's column
                       A* cb = comb.data() + k * C;
                       const int64_t col = iw[o * tw + k];
                       const T* r0 = base + (off[0] + col) * C;
                       const A w0 = wt[0];
                       for (int64_t c = 0; c < C; ++c) cb[c] = w0 * static_cast<A>(r0[c]);
                       for (int64_t j = 1; j < rows; ++j) {
                         const T* rj = base + (off[j] + col) * C;
                         const A wj = wt[j];
                         for (int64_t c = 0; c < C; ++c) cb[c] += wj * static_cast<A>(rj[c]);
                       }
                     }
                     if (tw == 2) {
                       const A w0 = ww[2 * o], w1 = ww[2 * o + 1];
                       const A *c0 = comb.data(), *c1 = comb.data() + C;
                       for (int64_t c = 0; c < C; ++c)
                         out[c] = static_cast<T>(w0 * c0[c] + w1 * c1[c]);
                     } else {
                       for (int64_t c = 0; c < C; ++c) {
                         A acc = 0;
                         for (int64_t k = 0; k < tw; ++k) acc += ww[o * tw + k] * comb[k * C + c];
                         out[c] = static_cast<T>(acc);
                       }
                     }
                   }
                 }
               });
}

// The adjoint: planes in parallel. In a plane, each output row is resampled back along W by a
// gather (the W axis transposed: for every input column, the output columns that read it), then
// added (weighted) into the input rows it was blended from. A gather, unlike a scatter, has no
// chain of read-modify-writes to one address, so it pipelines.
template <class T, class A>
void blend_backward(const Geometry& g, const std::array<Axis<A>, 3>& ax, const T* gy, T* gx) {
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2], W = g.in[2];
  const int64_t P = g.in_numel(), Q = g.out_numel();
  const int64_t tw = ax[2].taps;
  // The transposed W axis, in CSR form; entries of a column keep increasing output order.
  std::vector<int64_t> first(W + 1, 0), src(OW * tw);
  std::vector<A> wsrc(OW * tw);
  for (int64_t e = 0; e < OW * tw; ++e) ++first[ax[2].idx[e] + 1];
  for (int64_t i = 0; i < W; ++i) first[i + 1] += first[i];
  {
    std::vector<int64_t> fill(first.begin(), first.end() - 1);
    for (int64_t e = 0; e < OW * tw; ++e) {
      int64_t at = fill[ax[2].idx[e]]++;
      src[at] = e / tw;
      wsrc[at] = ax[2].w[e];
    }
  }
  const bool unit = tw == 1 && std::all_of(wsrc.begin(), wsrc.end(), [](A w) { return w == A(1); });
  // Nearest upsampling by an integer factor c: column i collects outputs [i * c, (i + 1) * c).
  const int64_t c = OW % W == 0 ? OW / W : 0;
  bool blocks = unit && c > 0;
  for (int64_t i = 0; blocks && i <= W; ++i) blocks = first[i] == i * c;
  for (int64_t j = 0; blocks && j < OW; ++j) blocks = src[j] == j;
  parallel_for(0, g.planes, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(Q, 1)),
               [&](int64_t b, int64_t e) {
                 std::vector<A> acc(std::is_same_v<T, A> ? 0 : P);  // low-precision dtypes
                 std::vector<A> tmp(W);
                 int64_t off[kMaxRows];
                 A wt[kMaxRows];
                 for (int64_t pl = b; pl < e; ++pl) {
                   A* gi;
                   if constexpr (std::is_same_v<T, A>)
                     gi = gx + pl * P;
                   else
                     gi = acc.data();
                   std::fill(gi, gi + P, A(0));
                   const T* go = gy + pl * Q;
                   for (int64_t od = 0; od < OD; ++od)
                     for (int64_t oh = 0; oh < OH; ++oh, go += OW) {
                       int64_t n = rows_of(g, ax, od, oh, off, wt);
                       if (unit && n == 1 && wt[0] == A(1)) {  // nearest: straight into the row
                         A* row = gi + off[0];
                         if (blocks && c == 2) {
                           for (int64_t i = 0; i < W; ++i)
                             row[i] += static_cast<A>(go[2 * i]) + static_cast<A>(go[2 * i + 1]);
                           continue;
                         }
                         if (blocks) {
                           for (int64_t i = 0; i < W; ++i) {
                             A sum = 0;
                             for (int64_t k = 0; k < c; ++k) sum += static_cast<A>(go[i * c + k]);
                             row[i] += sum;
                           }
                           continue;
                         }
                         for (int64_t i = 0; i < W; ++i) {
                           A sum = 0;
                           for (int64_t j = first[i]; j < first[i + 1]; ++j)
                             sum += static_cast<A>(go[src[j]]);
                           row[i] += sum;
                         }
                         continue;
                       }
                       for (int64_t i = 0; i < W; ++i) {
                         A sum = 0;
                         for (int64_t j = first[i]; j < first[i + 1]; ++j)
                           sum += wsrc[j] * static_cast<A>(go[src[j]]);
                         tmp[i] = sum;
                       }
                       for (int64_t j = 0; j < n; ++j) {
                         A* row = gi + off[j];
                         const A wj = wt[j];
                         for (int64_t i = 0; i < W; ++i) row[i] += wj * tmp[i];
                       }
                     }
                   if constexpr (!std::is_same_v<T, A>) {
                     T* dst = gx + pl * P;
                     for (int64_t i = 0; i < P; ++i) dst[i] = static_cast<T>(gi[i]);
                   }
                 }
               });
}

Tensor upsample_fwd_channels_last(const Geometry& g, Interp mode, const Tensor& self,
                                  bool align_corners, const Scales& scales);

Tensor upsample_fwd(const char* op, int64_t k, Interp mode, const Tensor& self,
                    const DimVector& output_size, bool align_corners, const Scales& scales) {
  Geometry g = make_geometry(op, k, self->sizes(), output_size);
  Tensor out = ember::empty(g.out_shape, self->dtype(), self->device());
  if (out->numel() == 0) return out;
  // A channels-last input gives a channels-last result (as PyTorch's), computed contiguous
  // unless blended in its layout.
  const bool cl = suggests_channels_last(self);
  if (cl)
    if (Tensor y = upsample_fwd_channels_last(g, mode, self, align_corners, scales)) return y;
  Tensor x = nn::contig(self);
  if (mode == Interp::Nearest || mode == Interp::NearestExact) {
    auto ax = make_axes<float>(g, mode, false, scales);
    EMBER_DISPATCH_ALL(x->dtype(), op, [&] {
      nearest_forward<scalar_t>(g, ax, x->data_as<scalar_t>(), out->data_as<scalar_t>());
    });
    return nn::as_channels_last(out, cl);
  }
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using A = opmath_t<scalar_t>;
    auto ax = make_axes<A>(g, mode, align_corners, scales);
    blend_forward<scalar_t, A>(g, ax, x->data_as<scalar_t>(), out->data_as<scalar_t>());
  });
  return nn::as_channels_last(out, cl);
}

// upsample_fwd's linear and cubic modes for a dense channels-last float32 / float64 input
// (blend_forward_channels_last); an undefined tensor when that does not apply.
Tensor upsample_fwd_channels_last(const Geometry& g, Interp mode, const Tensor& self,
                                  bool align_corners, const Scales& scales) {
  if (mode == Interp::Nearest || mode == Interp::NearestExact || self->is_contiguous() ||
      (self->dim() != 4 && self->dim() != 5) || !self->device().is_cpu() ||
      (self->dtype() != ScalarType::Float32 && self->dtype() != ScalarType::Float64) ||
      self->strides() != channels_last_strides(self->sizes()))
    return Tensor();
  Tensor out = ember::empty_strided(g.out_shape, channels_last_strides(g.out_shape), self->dtype(),
                                    self->device());
  const int64_t N = self->size(0), C = self->size(1);
  if (self->dtype() == ScalarType::Float32) {
    auto ax = make_axes<float>(g, mode, align_corners, scales);
    blend_forward_channels_last<float, float>(g, ax, self->data_as<float>(), out->data_as<float>(),
                                              N, C);
  } else {
    auto ax = make_axes<double>(g, mode, align_corners, scales);
    blend_forward_channels_last<double, double>(g, ax, self->data_as<double>(),
                                                out->data_as<double>(), N, C);
  }
  return out;
}

Tensor upsample_bwd(const char* op, int64_t k, Interp mode, const Tensor& grad_output,
                    const DimVector& output_size, const DimVector& input_size, bool align_corners,
                    const Scales& scales) {
  Geometry g = make_geometry(op, k, input_size, output_size);
  EMBER_CHECK(grad_output->sizes() == g.out_shape, op, ": expected grad_output of shape ",
              shape_str(g.out_shape), " (input ", shape_str(input_size), ", output_size ",
              shape_str(output_size), "), got ", shape_str(grad_output->sizes()));
  EMBER_CHECK_KIND(is_floating(grad_output->dtype()), Type, op,
                   ": expected a floating-point grad_output, got ",
                   dtype_name(grad_output->dtype()));
  Tensor gi = ember::empty(input_size, grad_output->dtype(), grad_output->device());
  if (gi->numel() == 0) return gi;
  Tensor go = nn::contig(grad_output);
  EMBER_DISPATCH_FLOAT(go->dtype(), op, [&] {
    using A = opmath_t<scalar_t>;
    std::array<Axis<A>, 3> ax;
    if (mode == Interp::Nearest || mode == Interp::NearestExact) {
      // the forward's float index maps, with unit weights in A
      auto fx = make_axes<float>(g, mode, false, scales);
      for (int64_t j = 0; j < 3; ++j) {
        ax[j].taps = 1;
        ax[j].idx = fx[j].idx;
        ax[j].w.assign(fx[j].idx.size(), A(1));
      }
    } else {
      ax = make_axes<A>(g, mode, align_corners, scales);
    }
    blend_backward<scalar_t, A>(g, ax, go->data_as<scalar_t>(), gi->data_as<scalar_t>());
  });
  return gi;
}

}  // namespace

Tensor upsample_nearest1d(const Tensor& self, const DimVector& output_size,
                          std::optional<double> scales) {
  return upsample_fwd("upsample_nearest1d", 1, Interp::Nearest, self, output_size, false,
                      Scales{scales});
}
Tensor upsample_nearest1d_backward(const Tensor& grad_output, const DimVector& output_size,
                                   const DimVector& input_size, std::optional<double> scales) {
  return upsample_bwd("upsample_nearest1d_backward", 1, Interp::Nearest, grad_output, output_size,
                      input_size, false, Scales{scales});
}
Tensor upsample_nearest2d(const Tensor& self, const DimVector& output_size,
                          std::optional<double> scales_h, std::optional<double> scales_w) {
  return upsample_fwd("upsample_nearest2d", 2, Interp::Nearest, self, output_size, false,
                      Scales{scales_h, scales_w});
}
Tensor upsample_nearest2d_backward(const Tensor& grad_output, const DimVector& output_size,
                                   const DimVector& input_size, std::optional<double> scales_h,
                                   std::optional<double> scales_w) {
  return upsample_bwd("upsample_nearest2d_backward", 2, Interp::Nearest, grad_output, output_size,
                      input_size, false, Scales{scales_h, scales_w});
}
Tensor upsample_nearest3d(const Tensor& self, const DimVector& output_size,
                          std::optional<double> scales_d, std::optional<double> scales_h,
                          std::optional<double> scales_w) {
  return upsample_fwd("upsample_nearest3d", 3, Interp::Nearest, self, output_size, false,
                      Scales{scales_d, scales_h, scales_w});
}
Tensor upsample_nearest3d_backward(const Tensor& grad_output, const DimVector& output_size,
                                   const DimVector& input_size, std::optional<double> scales_d,
                                   std::optional<double> scales_h, std::optional<double> scales_w) {
  return upsample_bwd("upsample_nearest3d_backward", 3, Interp::Nearest, grad_output, output_size,
                      input_size, false, Scales{scales_d, scales_h, scales_w});
}
Tensor _upsample_nearest_exact1d(const Tensor& self, const DimVector& output_size,
                                 std::optional<double> scales) {
  return upsample_fwd("_upsample_nearest_exact1d", 1, Interp::NearestExact, self, output_size,
                      false, Scales{scales});
}
Tensor _upsample_nearest_exact1d_backward(const Tensor& grad_output, const DimVector& output_size,
                                          const DimVector& input_size,
                                          std::optional<double> scales) {
  return upsample_bwd("_upsample_nearest_exact1d_backward", 1, Interp::NearestExact, grad_output,
                      output_size, input_size, false, Scales{scales});
}
Tensor _upsample_nearest_exact2d(const Tensor& self, const DimVector& output_size,
                                 std::optional<double> scales_h, std::optional<double> scales_w) {
  return upsample_fwd("_upsample_nearest_exact2d", 2, Interp::NearestExact, self, output_size,
                      false, Scales{scales_h, scales_w});
}
Tensor _upsample_nearest_exact2d_backward(const Tensor& grad_output, const DimVector& output_size,
                                          const DimVector& input_size,
                                          std::optional<double> scales_h,
                                          std::optional<double> scales_w) {
  return upsample_bwd("_upsample_nearest_exact2d_backward", 2, Interp::NearestExact, grad_output,
                      output_size, input_size, false, Scales{scales_h, scales_w});
}
Tensor _upsample_nearest_exact3d(const Tensor& self, const DimVector& output_size,
                                 std::optional<double> scales_d, std::optional<double> scales_h,
                                 std::optional<double> scales_w) {
  return upsample_fwd("_upsample_nearest_exact3d", 3, Interp::NearestExact, self, output_size,
                      false, Scales{scales_d, scales_h, scales_w});
}
Tensor _upsample_nearest_exact3d_backward(const Tensor& grad_output, const DimVector& output_size,
                                          const DimVector& input_size,
                                          std::optional<double> scales_d,
                                          std::optional<double> scales_h,
                                          std::optional<double> scales_w) {
  return upsample_bwd("_upsample_nearest_exact3d_backward", 3, Interp::NearestExact, grad_output,
                      output_size, input_size, false, Scales{scales_d, scales_h, scales_w});
}
Tensor upsample_linear1d(const Tensor& self, const DimVector& output_size, bool align_corners,
                         std::optional<double> scales) {
  return upsample_fwd("upsample_linear1d", 1, Interp::Linear, self, output_size, align_corners,
                      Scales{scales});
}
Tensor upsample_linear1d_backward(const Tensor& grad_output, const DimVector& output_size,
                                  const DimVector& input_size, bool align_corners,
                                  std::optional<double> scales) {
  return upsample_bwd("upsample_linear1d_backward", 1, Interp::Linear, grad_output, output_size,
                      input_size, align_corners, Scales{scales});
}
Tensor upsample_bilinear2d(const Tensor& self, const DimVector& output_size, bool align_corners,
                           std::optional<double> scales_h, std::optional<double> scales_w) {
  return upsample_fwd("upsample_bilinear2d", 2, Interp::Linear, self, output_size, align_corners,
                      Scales{scales_h, scales_w});
}
Tensor upsample_bilinear2d_backward(const Tensor& grad_output, const DimVector& output_size,
                                    const DimVector& input_size, bool align_corners,
                                    std::optional<double> scales_h,
                                    std::optional<double> scales_w) {
  return upsample_bwd("upsample_bilinear2d_backward", 2, Interp::Linear, grad_output, output_size,
                      input_size, align_corners, Scales{scales_h, scales_w});
}
Tensor upsample_trilinear3d(const Tensor& self, const DimVector& output_size, bool align_corners,
                            std::optional<double> scales_d, std::optional<double> scales_h,
                            std::optional<double> scales_w) {
  return upsample_fwd("upsample_trilinear3d", 3, Interp::Linear, self, output_size, align_corners,
                      Scales{scales_d, scales_h, scales_w});
}
Tensor upsample_trilinear3d_backward(const Tensor& grad_output, const DimVector& output_size,
                                     const DimVector& input_size, bool align_corners,
                                     std::optional<double> scales_d, std::optional<double> scales_h,
                                     std::optional<double> scales_w) {
  return upsample_bwd("upsample_trilinear3d_backward", 3, Interp::Linear, grad_output, output_size,
                      input_size, align_corners, Scales{scales_d, scales_h, scales_w});
}
Tensor upsample_bicubic2d(const Tensor& self, const DimVector& output_size, bool align_corners,
                          std::optional<double> scales_h, std::optional<double> scales_w) {
  return upsample_fwd("upsample_bicubic2d", 2, Interp::Cubic, self, output_size, align_corners,
                      Scales{scales_h, scales_w});
}
Tensor upsample_bicubic2d_backward(const Tensor& grad_output, const DimVector& output_size,
                                   const DimVector& input_size, bool align_corners,
                                   std::optional<double> scales_h, std::optional<double> scales_w) {
  return upsample_bwd("upsample_bicubic2d_backward", 2, Interp::Cubic, grad_output, output_size,
                      input_size, align_corners, Scales{scales_h, scales_w});
}

}  // namespace cpu
}  // namespace ember
