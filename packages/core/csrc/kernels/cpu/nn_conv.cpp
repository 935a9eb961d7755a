// CPU kernels of im2col / col2im (F.unfold / F.fold, for 1 to 3 spatial dims) and of
// convolution: the input's sliding windows are laid out as columns (im2col) and multiplied by
// the weight; transposed convolution multiplies first and folds (col2im). float64 (and float32
// without AVX-512) runs BLAS products sample by sample; float32 on AVX-512 runs the packed
// product of conv_gemm.h instead, with per-shape layouts (see the kernels below): windows read
// in place along output lines, columns from a zero-padded copy, several small samples in one
// product, and a channels-last copy for the weight gradient.
#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "kernels/conv_rules.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/conv_gemm.h"
#include "kernels/cpu/nn_conv_depthwise.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

// The sliding-window geometry and its checks are shared with CUDA (kernels/conv_rules.h).
using Geom = nn::WindowGeom;

// The output positions [lo, hi) of a row whose input index ow * st + off lies in [0, in).
inline void valid_span(int64_t out, int64_t in, int64_t st, int64_t off, int64_t* lo, int64_t* hi) {
  const int64_t first = off >= 0 ? 0 : (-off + st - 1) / st;
  const int64_t last = in - 1 - off;  // largest ow * st allowed
  *lo = std::min(first, out);
  *hi = last < 0 ? *lo : std::max(*lo, std::min(out, last / st + 1));
}

// cols (C * K, L) from one sample x (C, *in).
template <class T>
void im2col_sample(const T* x, T* cols, int64_t c0, int64_t c1, const Geom& g) {
  const int64_t K = g.kernel_numel(), L = g.out_numel(), P = g.in_numel();
  const int64_t OW = g.out[2], SW = g.st[2];
  for (int64_t c = c0; c < c1; ++c) {
    const T* xc = x + c * P;
    for (int64_t kd = 0; kd < g.ks[0]; ++kd)
      for (int64_t kh = 0; kh < g.ks[1]; ++kh)
        for (int64_t kw = 0; kw < g.ks[2]; ++kw) {
          T* row = cols + (c * K + (kd * g.ks[1] + kh) * g.ks[2] + kw) * L;
          const int64_t off = kw * g.dl[2] - g.pd[2];
          int64_t lo, hi;
          valid_span(OW, g.in[2], SW, off, &lo, &hi);
          for (int64_t od = 0; od < g.out[0]; ++od) {
            const int64_t id = od * g.st[0] - g.pd[0] + kd * g.dl[0];
            for (int64_t oh = 0; oh < g.out[1]; ++oh) {
              const int64_t ih = oh * g.st[1] - g.pd[1] + kh * g.dl[1];
              T* r = row + (od * g.out[1] + oh) * OW;
              if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
                for (int64_t ow = 0; ow < OW; ++ow) r[ow] = T(0);
                continue;
              }
              const T* xr = xc + (id * g.in[1] + ih) * g.in[2];
              for (int64_t ow = 0; ow < lo; ++ow) r[ow] = T(0);
              if (SW == 1)
                for (int64_t ow = lo; ow < hi; ++ow) r[ow] = xr[ow + off];
              else
                for (int64_t ow = lo; ow < hi; ++ow) r[ow] = xr[ow * SW + off];
              for (int64_t ow = hi; ow < OW; ++ow) r[ow] = T(0);
            }
          }
        }
  }
}

// x (C, *in) += fold(cols (C * K, L)) for channels [c0, c1); cols' rows ld apart (< 0: L).
template <class T>
void col2im_sample(const T* cols, T* x, int64_t c0, int64_t c1, const Geom& g, int64_t ld = -1) {
  using A = opmath_t<T>;
  const int64_t K = g.kernel_numel(), L = ld >= 0 ? ld : g.out_numel(), P = g.in_numel();
  const int64_t OW = g.out[2], SW = g.st[2];
  for (int64_t c = c0; c < c1; ++c) {
    T* xc = x + c * P;
    for (int64_t kd = 0; kd < g.ks[0]; ++kd)
      for (int64_t kh = 0; kh < g.ks[1]; ++kh)
        for (int64_t kw = 0; kw < g.ks[2]; ++kw) {
          const T* row = cols + (c * K + (kd * g.ks[1] + kh) * g.ks[2] + kw) * L;
          const int64_t off = kw * g.dl[2] - g.pd[2];
          int64_t lo, hi;
          valid_span(OW, g.in[2], SW, off, &lo, &hi);
          for (int64_t od = 0; od < g.out[0]; ++od) {
            const int64_t id = od * g.st[0] - g.pd[0] + kd * g.dl[0];
            if (id < 0 || id >= g.in[0]) continue;
            for (int64_t oh = 0; oh < g.out[1]; ++oh) {
              const int64_t ih = oh * g.st[1] - g.pd[1] + kh * g.dl[1];
              if (ih < 0 || ih >= g.in[1]) continue;
              const T* r = row + (od * g.out[1] + oh) * OW;
              T* xr = xc + (id * g.in[1] + ih) * g.in[2];
              if (SW == 1)
                for (int64_t ow = lo; ow < hi; ++ow)
                  xr[ow + off] =
                      static_cast<T>(static_cast<A>(xr[ow + off]) + static_cast<A>(r[ow]));
              else
                for (int64_t ow = lo; ow < hi; ++ow)
                  xr[ow * SW + off] =
                      static_cast<T>(static_cast<A>(xr[ow * SW + off]) + static_cast<A>(r[ow]));
            }
          }
        }
  }
}

// im2col of the output lines [r0, r1) of one sample (line r = od * out[1] + oh, out[2] positions
// each) into cols (C * K, (r1 - r0) * out[2]), whose rows are ld apart (ld < 0: packed).
template <class T>
void im2col_lines(const T* x, T* cols, int64_t C, const Geom& g, int64_t r0, int64_t r1,
                  int64_t ld = -1) {
  const int64_t K = g.kernel_numel(), P = g.in_numel(), OW = g.out[2], SW = g.st[2];
  const int64_t Lc = ld >= 0 ? ld : (r1 - r0) * OW;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t kd = 0; kd < g.ks[0]; ++kd)
      for (int64_t kh = 0; kh < g.ks[1]; ++kh)
        for (int64_t kw = 0; kw < g.ks[2]; ++kw) {
          T* row = cols + (c * K + (kd * g.ks[1] + kh) * g.ks[2] + kw) * Lc;
          const int64_t off = kw * g.dl[2] - g.pd[2];
          int64_t lo, hi;
          valid_span(OW, g.in[2], SW, off, &lo, &hi);
          for (int64_t r = r0; r < r1; ++r) {
            const int64_t od = r / g.out[1], oh = r % g.out[1];
            const int64_t id = od * g.st[0] - g.pd[0] + kd * g.dl[0];
            const int64_t ih = oh * g.st[1] - g.pd[1] + kh * g.dl[1];
            T* dst = row + (r - r0) * OW;
            if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
              std::fill(dst, dst + OW, T(0));
              continue;
            }
            const T* xr = x + c * P + (id * g.in[1] + ih) * g.in[2];
            for (int64_t ow = 0; ow < lo; ++ow) dst[ow] = T(0);
            if (SW == 1)
              std::copy(xr + lo + off, xr + hi + off, dst + lo);
            else
              for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = xr[ow * SW + off];
            for (int64_t ow = hi; ow < OW; ++ow) dst[ow] = T(0);
          }
        }
}

// Runs f(n, c0, c1) over samples x channel ranges, in parallel.
template <class F>
void for_planes(int64_t n, int64_t c, int64_t work_per_plane, const F& f) {
  const int64_t grain =
      std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(work_per_plane, 1));
  parallel_for(0, n * c, grain, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e;) {
      const int64_t s = p / c, c0 = p % c, c1 = std::min(c, c0 + (e - p));
      f(s, c0, c1);
      p += c1 - c0;
    }
  });
}

// im2col of a contiguous batch x (N, C, *in) into cols (N, C * K, L).
void im2col_into(const Tensor& x, const Tensor& cols, const Geom& g) {
  const int64_t N = x->size(0), C = x->size(1);
  const int64_t in_plane = g.in_numel(), col_plane = g.kernel_numel() * g.out_numel();
  EMBER_DISPATCH_FLOAT(x->dtype(), "im2col", [&] {
    using T = scalar_t;
    const T* px = x->data_as<T>();
    T* pc = cols->data_as<T>();
    for_planes(N, C, col_plane, [&](int64_t s, int64_t c0, int64_t c1) {
      im2col_sample<T>(px + s * C * in_plane, pc + s * C * col_plane, c0, c1, g);
    });
  });
}

// out (N, C, *in) = col2im of contiguous cols (N, C * K, L).
void col2im_into(const Tensor& cols, const Tensor& out, const Geom& g) {
  const int64_t N = out->size(0), C = out->size(1);
  const int64_t in_plane = g.in_numel(), col_plane = g.kernel_numel() * g.out_numel();
  EMBER_DISPATCH_FLOAT(out->dtype(), "col2im", [&] {
    using T = scalar_t;
    const T* pc = cols->data_as<T>();
    T* po = out->data_as<T>();
    std::fill(po, po + out->numel(), T(0));
    for_planes(N, C, col_plane, [&](int64_t s, int64_t c0, int64_t c1) {
      col2im_sample<T>(pc + s * C * col_plane, po + s * C * in_plane, c0, c1, g);
    });
  });
}

using nn::trailing;
using nn::view_as_shape;

}  // namespace

Tensor im2col(const Tensor& self, const DimVector& kernel_size, const DimVector& dilation,
              const DimVector& padding, const DimVector& stride) {
  const int64_t k = kernel_size.size();
  const bool batched = nn::check_im2col_input(self, k);
  Tensor x = nn::contig(batched ? self : view_as_shape(nn::contig(self), [&] {
    DimVector s{1};
    for (int64_t v : self->sizes()) s.push_back(v);
    return s;
  }()));
  Geom g = nn::make_window_geom("im2col", trailing(x, k), kernel_size, dilation, padding, stride);
  const int64_t N = x->size(0), C = x->size(1);
  Tensor cols = ember::empty({N, C * g.kernel_numel(), g.out_numel()}, x->dtype(), x->device());
  if (cols->numel() > 0) im2col_into(x, cols, g);
  return batched ? cols : view_as_shape(cols, {C * g.kernel_numel(), g.out_numel()});
}

Tensor col2im(const Tensor& self, const DimVector& output_size, const DimVector& kernel_size,
              const DimVector& dilation, const DimVector& padding, const DimVector& stride) {
  DimVector os = nn::check_col2im_input(self, output_size, kernel_size.size());
  const bool batched = self->dim() == 3;
  Tensor cols = nn::contig(self);
  if (!batched) cols = view_as_shape(cols, {1, self->size(0), self->size(1)});
  Geom g = nn::make_window_geom("col2im", os, kernel_size, dilation, padding, stride);
  DimVector out_shape = nn::col2im_out_shape(self, cols, batched, g, kernel_size, os);
  Tensor out = ember::empty(out_shape, cols->dtype(), cols->device());
  if (out->numel() > 0) col2im_into(cols, out, g);
  if (batched) return out;
  DimVector unb(out_shape.begin() + 1, out_shape.end());
  return view_as_shape(out, unb);
}

namespace {

// ---- convolution kernels ----------------------------------------------------------------------
// All three work sample by sample (or by chunks of samples with few positions each): a chunk's
// columns stay in a per-thread buffer, and each product is one whole gemm. With several chunks
// and threads the chunks are shared out dynamically (a late thread's share goes to the others)
// and OpenBLAS runs on the calling threads; a single sample instead lets OpenBLAS thread the
// product. float32 on AVX-512:
//   forward     stride 1 along the last dim with lines of 16+: windows read in place from the
//               (padded) sample, all lines in one product (conv_gemm_lines); outputs under
//               kSmallPositions: columns of several samples side by side; otherwise columns
//               from a padded copy in blocks of lines;
//   d input     a "same"-padded stride-1 convolution with no more output than input channels
//               (or in-place lines): the forward kernel with the weight flipped; otherwise the
//               transposed convolution (packed W^T, fold);
//   d weight    16+ channels per group: channels-last copy, no columns
//               (conv_weight_channels_last); fewer: per-position window rows
//               (conv_weight_window_rows) from kWindowRowsMin window elements, else BLAS or the
//               in-place dot products.

// True when the input is its own column matrix: a 1x1 kernel, stride 1, no padding, and as
// many window positions as image elements (a transposed convolution's output_padding adds
// trailing elements that no window covers).
bool is_pointwise(const Geom& g) {
  bool p = true;
  for (int64_t d = 0; d < 3; ++d)
    p &= g.ks[d] == 1 && g.st[d] == 1 && g.pd[d] == 0 && g.in[d] == g.out[d];
  return p;
}

// out (C, P) += bias broadcast along each channel's P positions (no-op without a bias).
template <class T>
void add_channel_bias(T* out, const T* bias, int64_t C, int64_t P) {
  if (!bias) return;
  for (int64_t c = 0; c < C; ++c) {
    T* p = out + c * P;
    const T bv = bias[c];
    for (int64_t i = 0; i < P; ++i) p[i] += bv;
  }
}

// Calls f(n, buf, slot) for every sample n in [0, N); buf holds buf_elems scratch elements of
// type T private to the calling worker, slot (< min(threads, N)) names that worker. Each slot
// takes a fixed run of samples, in order: weight gradients sum per-slot partials, so which
// samples a slot sums must not depend on timing (results reproducible run to run).
template <class T, class F>
void over_samples(int64_t N, int64_t buf_elems, const F& f) {
  const int64_t nt = std::min<int64_t>(get_num_threads(), N);
  if (nt <= 1 || in_parallel_region()) {
    Scratch<T> buf(buf_elems);
    for (int64_t n = 0; n < N; ++n) f(n, buf.data(), 0);
    return;
  }
  Scratch<T> scratch(nt * buf_elems);
  T* base = scratch.data();
  SerialBlasScope serial;
  parallel_for(0, nt, 1, [&](int64_t b, int64_t e) {
    for (int64_t slot = b; slot < e; ++slot)
      for (int64_t n = slot * N / nt, end = (slot + 1) * N / nt; n < end; ++n)
        f(n, base + slot * buf_elems, slot);
  });
}

// The column-free kernels work on 16 consecutive positions of an output line at a time: worth
// it when lines fill those vectors (a line of 24 would leave a quarter of the work masked off).
bool fills_vectors(int64_t OW) { return OW * 10 >= (OW + 15) / 16 * 16 * 9; }
bool lines_fill_vectors(const Geom& g) { return g.st[2] == 1 && fills_vectors(g.out[2]); }

// For the column-free float32 kernels: the zero-padded sizes of a sample, the element offset of
// every (channel of a group, kernel tap) window from an output line's start, and a copy of one
// sample with its padding.
struct PaddedGeom {
  // phases: with a stride s > 1 along the last dim, each padded row is stored as s phases (the
  // elements w with w % s == 0, then those with w % s == 1, ...; ceil(width / s) each), so that
  // a kernel tap's windows along an output line are contiguous: for the im2col copies.
  int64_t pin[3] = {1, 1, 1}, PP = 1;
  int64_t ph = 1, Q = 1, rw = 1;  // phases, elements per phase, stored row length (ph * Q)
  bool padded = false;
  std::vector<int64_t> off;  // (c, kd, kh, kw) -> offset
  std::vector<int64_t> lb;   // output line -> offset of its first window
  PaddedGeom(const Geom& g, int64_t Cg, bool phases = false) {
    for (int d = 0; d < 3; ++d) {
      pin[d] = g.in[d] + 2 * g.pd[d];
      padded |= g.pd[d] != 0;
    }
    ph = phases && g.ks[2] >= g.st[2] ? g.st[2] : 1;  // (else most of the copy goes unread)
    padded |= ph > 1;
    Q = (pin[2] + ph - 1) / ph;
    rw = ph * Q;
    PP = pin[0] * pin[1] * rw;
    const int64_t K = g.kernel_numel();
    off.resize(Cg * K);
    for (int64_t c = 0; c < Cg; ++c)
      for (int64_t kd = 0; kd < g.ks[0]; ++kd)
        for (int64_t kh = 0; kh < g.ks[1]; ++kh)
          for (int64_t kw = 0; kw < g.ks[2]; ++kw)
            off[((c * g.ks[0] + kd) * g.ks[1] + kh) * g.ks[2] + kw] =
                c * PP + (kd * g.dl[0] * pin[1] + kh * g.dl[1]) * rw + col(kw * g.dl[2]);
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh)
        lb.push_back((od * g.st[0] * pin[1] + oh * g.st[1]) * rw);
  }
  // Where element w of a padded row is stored.
  int64_t col(int64_t w) const { return (w % ph) * Q + w / ph; }
  // The step between an output line's consecutive windows.
  int64_t step(const Geom& g) const { return ph > 1 ? 1 : g.st[2]; }
  // x (C, *in) -> xp (C, *pin), zero border.
  void pad(const float* x, float* xp, int64_t C, const Geom& g) const {
    std::fill(xp, xp + C * PP, 0.0f);
    const int64_t P = g.in_numel();
    for (int64_t c = 0; c < C; ++c)
      for (int64_t d0 = 0; d0 < g.in[0]; ++d0)
        for (int64_t h = 0; h < g.in[1]; ++h) {
          const float* src = x + c * P + (d0 * g.in[1] + h) * g.in[2];
          float* dst = xp + c * PP + ((d0 + g.pd[0]) * pin[1] + h + g.pd[1]) * rw;
          if (ph == 1)
            std::copy(src, src + g.in[2], dst + g.pd[2]);
          else  // (q, i): the phase and index of padded element w + pd[2]
            for (int64_t w = 0, q = g.pd[2] % ph, i = g.pd[2] / ph; w < g.in[2]; ++w) {
              dst[q * Q + i] = src[w];
              if (++q == ph) q = 0, ++i;
            }
        }
  }
};

// Below this many output positions per sample the float32 AVX-512 kernels work on several
// samples at once, kBatchColumns positions or more in all.
constexpr int64_t kSmallPositions = 256;
constexpr int64_t kBatchColumns = 256;
// (The forward's products stream the whole weight per column block, best kept in L2 with its
// columns: fewer columns.)
constexpr int64_t kForwardColumns = 64;
// The forward's column blocks for larger outputs: at most this many bytes (at least one line).
constexpr int64_t kColumnBytes = 1 << 20;

// A row stride of at least n floats for a matrix whose 16-column panels the AVX-512 product
// reads row after row: a whole number of cache lines, and an odd one, so that the rows of a
// panel spread over all of L1's sets (a power-of-two stride would keep them in a few).
int64_t panel_stride(int64_t n) {
  const int64_t lines = (n + 15) / 16;
  return 16 * (lines | 1);
}

// im2col of one zero-padded sample xp (pg: its geometry, rows: channels * kernel taps) into
// cols (rows x L, row stride ld), only the output lines [l0, l1): no bounds to check.
void im2col_padded(const float* xp, const PaddedGeom& pg, const Geom& g, int64_t rows, float* cols,
                   int64_t ld, int64_t l0, int64_t l1) {
  im2col_rows(xp, pg.off.data(), rows, pg.lb.data() + l0, l1 - l0, g.out[2], pg.step(g), cols, ld);
}

// out (N, Co, L) = conv(x (N, C, *in), w (Co, C/G * K)) + bias, over geometry g (g.out: L).
// (prepacked: float32 on AVX-512, the weight already packed per group; w is then unused.)
template <class T>
void conv_forward_kernel(const T* x, const T* w, const T* bias, T* out, int64_t N, int64_t C,
                         int64_t Co, int64_t G, const Geom& g,
                         std::vector<PackedA>* prepacked = nullptr) {
  const int64_t K = g.kernel_numel(), L = g.out_numel(), P = g.in_numel();
  const int64_t CK = (C / G) * K, Cog = Co / G;
  const bool pw = is_pointwise(g);
  // float32 on AVX-512: the weight packed once, the columns read in place.
  std::vector<PackedA> packed;
  if (prepacked)
    packed = std::move(*prepacked);
  else if constexpr (std::is_same<T, float>::value)
    if (conv_gemm_available())
      for (int64_t gi = 0; gi < G; ++gi) packed.emplace_back(w + gi * Cog * CK, CK, 1, Cog, CK);
  // float32 on AVX-512 with stride 1 along the last dim (lines_fill_vectors): no columns at all.
  // Each output line reads its windows straight from the sample (copied with its zero padding when
  // padded).
  if constexpr (std::is_same<T, float>::value)
    if (!packed.empty() && lines_fill_vectors(g)) {
      const PaddedGeom pg(g, C / G);
      over_samples<float>(N, pg.padded ? C * pg.PP : 0, [&](int64_t n, float* xp, int64_t) {
        const float* xn = x + n * C * P;
        if (pg.padded) pg.pad(xn, xp, C, g);
        const float* base = pg.padded ? xp : xn;
        float* on = out + n * Co * L;
        for (int64_t gi = 0; gi < G; ++gi)
          conv_gemm_lines(packed[gi], static_cast<int64_t>(pg.lb.size()), g.out[2],
                          base + gi * (C / G) * pg.PP, pg.lb.data(), pg.off.data(),
                          on + gi * Cog * L, L);
        add_channel_bias(on, bias, Co, L);
      });
      return;
    }
  // Otherwise (float32 on AVX-512) a sample's columns, from its zero-padded copy (stored by
  // phases for a stride along the last dim), in blocks of output lines (of at most kColumnBytes).
  const int64_t lines = g.out[0] * g.out[1];
  if constexpr (std::is_same<T, float>::value)
    if (!packed.empty() && L >= kSmallPositions) {
      const PaddedGeom pg(g, C, true);
      const int64_t pbuf = pg.padded ? C * pg.PP : 0, OW = g.out[2];
      const int64_t chunk = std::max<int64_t>(1, std::min(lines, kColumnBytes / (C * K * OW * 4)));
      const int64_t W = panel_stride(chunk * OW);
      over_samples<float>(N, C * K * W + pbuf, [&](int64_t n, float* cols, int64_t) {
        const float* xs = x + n * C * P;
        float* xp = cols + C * K * W;
        if (pg.padded) pg.pad(xs, xp, C, g);
        float* on = out + n * Co * L;
        for (int64_t r0 = 0; r0 < lines; r0 += chunk) {
          const int64_t r1 = std::min(lines, r0 + chunk), Lc = (r1 - r0) * OW;
          const int64_t Wc = panel_stride(Lc);
          im2col_padded(pg.padded ? xp : xs, pg, g, C * K, cols, Wc, r0, r1);
          for (int64_t gi = 0; gi < G; ++gi)
            conv_gemm(packed[gi], Lc, cols + gi * CK * Wc, Wc, on + gi * Cog * L + r0 * OW, L);
        }
        add_channel_bias(on, bias, Co, L);
      });
      return;
    }
  // float32 on AVX-512 with small outputs (under kSmallPositions per sample): the columns of
  // several samples side by side in one product, which would otherwise be too narrow to reuse
  // the weight it streams through (and, per sample, mostly masked tiles).
  if constexpr (std::is_same<T, float>::value)
    if (!packed.empty()) {
      const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), N));
      const int64_t ns = std::min((N + nt - 1) / nt, (kForwardColumns + L - 1) / L);
      const int64_t chunks = (N + ns - 1) / ns;
      const int64_t W = panel_stride(ns * L);
      const PaddedGeom pg(g, C, true);
      const int64_t pbuf = pg.padded ? C * pg.PP : 0;
      over_samples<float>(chunks, (C * K + Co) * W + pbuf, [&](int64_t ch, float* cols, int64_t) {
        const int64_t n0 = ch * ns, cnt = std::min(ns, N - n0), Wc = panel_stride(cnt * L);
        float* prod = cols + C * K * W;
        float* xp = prod + Co * W;
        for (int64_t s = 0; s < cnt; ++s) {
          const float* xs = x + (n0 + s) * C * P;
          if (pg.padded) pg.pad(xs, xp, C, g);
          im2col_padded(pg.padded ? xp : xs, pg, g, C * K, cols + s * L, Wc, 0, lines);
        }
        for (int64_t gi = 0; gi < G; ++gi)
          conv_gemm(packed[gi], cnt * L, cols + gi * CK * Wc, Wc, prod + gi * Cog * Wc, Wc);
        for (int64_t s = 0; s < cnt; ++s) {
          float* on = out + (n0 + s) * Co * L;
          for (int64_t co = 0; co < Co; ++co) {
            const float* src = prod + co * Wc + s * L;
            const float bv = bias ? bias[co] : 0.0f;
            for (int64_t l = 0; l < L; ++l) on[co * L + l] = src[l] + bv;
          }
        }
      });
      return;
    }
  // Otherwise (BLAS, which packs whole samples): a sample's columns at once.
  over_samples<T>(N, pw ? 0 : C * K * L, [&](int64_t n, T* cols, int64_t) {
    const T* xn = x + n * C * P;
    T* on = out + n * Co * L;
    if (!pw) im2col_lines<T>(xn, cols, C, g, 0, lines);
    const T* src = pw ? xn : cols;
    for (int64_t gi = 0; gi < G; ++gi)
      gemm_rowmajor<T>(false, false, Cog, L, CK, T(1), w + gi * Cog * CK, CK, src + gi * CK * L, L,
                       T(0), on + gi * Cog * L, L);
    add_channel_bias(on, bias, Co, L);
  });
}

// out (N, Co, *out_sp) = transposed conv of x (N, Ci, Lin) with w (Ci, Co/G * K): per group the
// columns W^T @ x folded (col2im) over geometry g, whose sliding positions g.out are Lin. This is
// also the input gradient of a convolution (x = grad_output, w = its weight).
template <class T>
void conv_transposed_kernel(const T* x, const T* w, const T* bias, T* out, int64_t N, int64_t Ci,
                            int64_t Co, int64_t G, const Geom& g) {
  const int64_t K = g.kernel_numel(), Lin = g.out_numel(), P = g.in_numel();
  const int64_t Cig = Ci / G, CoK = (Co / G) * K;
  const bool pw = is_pointwise(g);
  // float32 on AVX-512: W^T packed once per group; the samples' inputs (several samples side by
  // side when they have few positions) copied into one matrix whose rows the product reads in
  // place, their columns then folded.
  if constexpr (std::is_same<T, float>::value)
    if (conv_gemm_available()) {
      std::vector<PackedA> packed;
      for (int64_t gi = 0; gi < G; ++gi) packed.emplace_back(w + gi * Cig * CoK, 1, CoK, CoK, Cig);
      const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), N));
      const int64_t ns = pw ? 1 : std::min((N + nt - 1) / nt, (kForwardColumns + Lin - 1) / Lin);
      const int64_t chunks = (N + ns - 1) / ns, W = panel_stride(ns * Lin);
      over_samples<float>(
          chunks, Ci * W + (pw ? 0 : Co * K * W), [&](int64_t ch, float* xb, int64_t) {
            const int64_t n0 = ch * ns, cnt = std::min(ns, N - n0), Wc = panel_stride(cnt * Lin);
            float* cols = xb + Ci * W;
            for (int64_t s = 0; s < cnt; ++s)
              for (int64_t c = 0; c < Ci; ++c)
                std::copy(x + ((n0 + s) * Ci + c) * Lin, x + ((n0 + s) * Ci + c + 1) * Lin,
                          xb + c * Wc + s * Lin);
            if (pw) {  // 1x1: the columns are the output itself
              float* on = out + n0 * Co * P;
              for (int64_t gi = 0; gi < G; ++gi)
                conv_gemm(packed[gi], Lin, xb + gi * Cig * Wc, Wc, on + gi * CoK * P, P);
              add_channel_bias(on, bias, Co, P);
              return;
            }
            for (int64_t gi = 0; gi < G; ++gi)
              conv_gemm(packed[gi], cnt * Lin, xb + gi * Cig * Wc, Wc, cols + gi * CoK * Wc, Wc);
            for (int64_t s = 0; s < cnt; ++s) {
              float* on = out + (n0 + s) * Co * P;
              std::fill(on, on + Co * P, 0.0f);
              col2im_sample<float>(cols + s * Lin, on, 0, Co, g, Wc);
              add_channel_bias(on, bias, Co, P);
            }
          });
      return;
    }
  over_samples<T>(N, pw ? 0 : Co * K * Lin, [&](int64_t n, T* cols, int64_t) {
    const T* xn = x + n * Ci * Lin;
    T* on = out + n * Co * P;
    T* dst = pw ? on : cols;  // 1x1: the columns are the output itself
    for (int64_t gi = 0; gi < G; ++gi)
      gemm_rowmajor<T>(true, false, CoK, Lin, Cig, T(1), w + gi * Cig * CoK, CoK,
                       xn + gi * Cig * Lin, Lin, T(0), dst + gi * CoK * Lin, Lin);
    if (!pw) {
      std::fill(on, on + Co * P, T(0));
      col2im_sample<T>(cols, on, 0, Co, g);
    }
    add_channel_bias(on, bias, Co, P);
  });
}

// The float32 AVX-512 weight gradient below: from this many channels per group up.
constexpr int64_t kChannelsLastMin = 16;
// With fewer channels, conv_weight_window_rows from this many window elements up (shorter rows
// leave the product too little work per copied element: BLAS then).
constexpr int64_t kWindowRowsMin = 64;

// gw (A, B/G * K) as in conv_weight_kernel (float32, AVX-512), without columns: the samples are
// copied channels-last with their zero padding (pixel by pixel, B channels each), so that for a
// window position and a kernel tap the channels are contiguous. The product then runs over
// positions: per group, a (Ag x positions, packed) @ B (positions x taps * channels), whose row
// for a position is gathered from the copy at the position's pixel, and whose 16-column panels
// are 16 channels of one tap (past the group's channels, a panel reads channels it then drops).
// Several samples with few positions each go into one product.
void conv_weight_channels_last(const float* a, const float* src, float* gw, int64_t N, int64_t A,
                               int64_t B, int64_t G, const Geom& g) {
  const int64_t K = g.kernel_numel(), La = g.out_numel(), P = g.in_numel();
  const int64_t Ag = A / G, Bg = B / G, CB = (Bg + 15) / 16, cols = K * CB * 16;
  int64_t pin[3];
  for (int d = 0; d < 3; ++d) pin[d] = g.in[d] + 2 * g.pd[d];
  // Pixels Bp >= B floats apart (see panel_stride: the product reads one pixel per row).
  const int64_t Bp = panel_stride(B), PPP = pin[0] * pin[1] * pin[2], sample = PPP * Bp;
  // The pixel of every window position's first tap, and each panel's offset from it.
  std::vector<int64_t> pos;
  pos.reserve(La);
  for (int64_t od = 0; od < g.out[0]; ++od)
    for (int64_t oh = 0; oh < g.out[1]; ++oh)
      for (int64_t ow = 0; ow < g.out[2]; ++ow)
        pos.push_back(((od * g.st[0] * pin[1] + oh * g.st[1]) * pin[2] + ow * g.st[2]) * Bp);
  std::vector<int64_t> panel(G * K * CB);
  for (int64_t gi = 0; gi < G; ++gi)
    for (int64_t kd = 0, t = 0; kd < g.ks[0]; ++kd)
      for (int64_t kh = 0; kh < g.ks[1]; ++kh)
        for (int64_t kw = 0; kw < g.ks[2]; ++kw, ++t)
          for (int64_t j = 0; j < CB; ++j)
            panel[(gi * K + t) * CB + j] =
                ((kd * g.dl[0] * pin[1] + kh * g.dl[1]) * pin[2] + kw * g.dl[2]) * Bp + gi * Bg +
                16 * j;
  const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), N));
  const int64_t ns = std::min((N + nt - 1) / nt, (kBatchColumns + La - 1) / La);
  const int64_t chunks = (N + ns - 1) / ns;
  const int64_t slots = std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), chunks));
  const int64_t psize = A * cols;  // per group (Ag, K * CB * 16)
  Scratch<float> parts(slots * psize);
  std::vector<char> started(slots, 0);
  // + 16: the last panel of the last pixel may read past the channels.
  over_samples<float>(chunks, ns * sample + 16, [&](int64_t ch, float* xt, int64_t slot) {
    const int64_t n0 = ch * ns, cnt = std::min(ns, N - n0);
    std::fill(xt, xt + cnt * sample + 16, 0.0f);
    for (int64_t s = 0; s < cnt; ++s) {
      const float* xs = src + (n0 + s) * B * P;
      float* dst = xt + s * sample;
      for (int64_t d0 = 0; d0 < g.in[0]; ++d0)
        for (int64_t h = 0; h < g.in[1]; ++h) {
          float* drow = dst + (((d0 + g.pd[0]) * pin[1] + h + g.pd[1]) * pin[2] + g.pd[2]) * Bp;
          const float* srow = xs + (d0 * g.in[1] + h) * g.in[2];
          to_channels_last(srow, B, P, g.in[2], drow, Bp);
        }
    }
    std::vector<int64_t> rows(cnt * La);
    for (int64_t s = 0; s < cnt; ++s)
      for (int64_t l = 0; l < La; ++l) rows[s * La + l] = s * sample + pos[l];
    float* part = parts.data() + slot * psize;
    for (int64_t gi = 0; gi < G; ++gi) {
      const PackedA pa(a + n0 * A * La + gi * Ag * La, La, Ag, cnt * La, La, A * La);
      conv_gemm_gather(pa, K * CB, panel.data() + gi * K * CB, xt, rows.data(),
                       part + gi * Ag * cols, cols, started[slot] != 0);
    }
    started[slot] = 1;
  });
  // gw[gi * Ag + m, c * K + t] = sum over workers of part[gi * Ag + m, t * CB * 16 + c].
  std::fill(gw, gw + A * Bg * K, 0.0f);
  for (int64_t t = 0; t < slots; ++t) {
    if (!started[t]) continue;
    const float* p = parts.data() + t * psize;
    for (int64_t m = 0; m < A; ++m)
      for (int64_t c = 0; c < Bg; ++c)
        for (int64_t k = 0; k < K; ++k) gw[(m * Bg + c) * K + k] += p[m * cols + k * CB * 16 + c];
  }
}

// gw as conv_weight_channels_last for few channels per group (a network's first layer): per
// window position, its B * K window elements copied into one row (the transposed columns), and
// per group a (Ag x positions, packed) @ those rows (positions x B/G * K) straight into gw.
void conv_weight_window_rows(const float* a, const float* src, float* gw, int64_t N, int64_t A,
                             int64_t B, int64_t G, const Geom& g) {
  const int64_t K = g.kernel_numel(), La = g.out_numel(), P = g.in_numel();
  const int64_t Ag = A / G, BK = (B / G) * K, ld = panel_stride(B * K), OW = g.out[2];
  const int64_t KW = g.ks[2];
  const PaddedGeom pg(g, B);
  const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), N));
  const int64_t ns = std::min((N + nt - 1) / nt, (kBatchColumns + La - 1) / La);
  const int64_t chunks = (N + ns - 1) / ns, wsize = A * BK;
  const int64_t slots = std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), chunks));
  Scratch<float> parts(slots * wsize);
  std::vector<char> started(slots, 0);
  const int64_t pbuf = pg.padded ? B * pg.PP : 0;
  over_samples<float>(chunks, ns * La * ld + pbuf, [&](int64_t ch, float* rows, int64_t slot) {
    const int64_t n0 = ch * ns, cnt = std::min(ns, N - n0);
    float* xp = rows + ns * La * ld;
    for (int64_t s = 0; s < cnt; ++s) {
      const float* xs = src + (n0 + s) * B * P;
      if (pg.padded) pg.pad(xs, xp, B, g);
      const float* base = pg.padded ? xp : xs;
      for (int64_t l = 0; l < La; ++l) {
        const float* w0 = base + pg.lb[l / OW] + (l % OW) * g.st[2];
        float* row = rows + (s * La + l) * ld;
        if (g.dl[2] == 1)  // runs of KW contiguous elements
          copy_runs(w0, pg.off.data(), B * K / KW, KW, row);
        else
          for (int64_t r = 0; r < B * K; ++r) row[r] = w0[pg.off[r]];
      }
    }
    float* part = parts.data() + slot * wsize;
    for (int64_t gi = 0; gi < G; ++gi) {
      const PackedA pa(a + n0 * A * La + gi * Ag * La, La, Ag, cnt * La, La, A * La);
      conv_gemm(pa, BK, rows + gi * BK, ld, part + gi * Ag * BK, BK, started[slot] != 0);
    }
    started[slot] = 1;
  });
  std::fill(gw, gw + wsize, 0.0f);
  for (int64_t t = 0; t < slots; ++t) {
    if (!started[t]) continue;
    const float* p = parts.data() + t * wsize;
    for (int64_t i = 0; i < wsize; ++i) gw[i] += p[i];
  }
}

// gw (A, B/G * K) = sum over samples of a_n (A, La) @ im2col(src_n (B, *sp))^T, per group; the
// geometry g is over src's spatial sizes and its sliding positions g.out are La. Convolution:
// a = grad_output, src = input; transposed convolution: a = input, src = grad_output.
template <class T>
void conv_weight_kernel(const T* a, const T* src, T* gw, int64_t N, int64_t A, int64_t B, int64_t G,
                        const Geom& g) {
  const int64_t K = g.kernel_numel(), La = g.out_numel(), P = g.in_numel();
  const int64_t Ag = A / G, BK = (B / G) * K, wsize = A * BK;
  const bool pw = is_pointwise(g);
  if constexpr (std::is_same<T, float>::value)
    if (conv_gemm_available() && (B / G >= kChannelsLastMin || BK >= kWindowRowsMin)) {
      if (B / G >= kChannelsLastMin)
        conv_weight_channels_last(a, src, gw, N, A, B, G, g);
      else
        conv_weight_window_rows(a, src, gw, N, A, B, G, g);
      return;
    }
  // float32 on AVX-512 with stride 1 along the last dim: dot products of grad_output's lines
  // with the windows read straight from the (padded) sample, no columns.
  if constexpr (std::is_same<T, float>::value)
    if (conv_gemm_available() && lines_fill_vectors(g)) {
      const PaddedGeom pg(g, B / G);
      const int64_t slots = std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), N));
      std::vector<float> parts(slots * wsize, 0.0f);
      over_samples<float>(N, pg.padded ? B * pg.PP : 0, [&](int64_t n, float* xp, int64_t slot) {
        const float* sn = src + n * B * P;
        if (pg.padded) pg.pad(sn, xp, B, g);
        const float* base = pg.padded ? xp : sn;
        for (int64_t gi = 0; gi < G; ++gi)
          conv_wgrad_offsets(a + n * A * La + gi * Ag * La, Ag, La, base + gi * (B / G) * pg.PP,
                             pg.lb.data(), static_cast<int64_t>(pg.lb.size()), g.out[2],
                             pg.off.data(), BK, parts.data() + slot * wsize + gi * Ag * BK);
      });
      std::fill(gw, gw + wsize, 0.0f);
      for (int64_t t = 0; t < slots; ++t)
        for (int64_t i = 0; i < wsize; ++i) gw[i] += parts[t * wsize + i];
      return;
    }
  // Per worker: its partial sum of gw, transposed per group (BK, Ag): BLAS computes
  // cols @ a^T markedly faster than a @ cols^T for a few dozen output channels.
  const int64_t slots = std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), N));
  std::unique_ptr<T[]> parts(new T[slots * wsize]);
  std::vector<char> started(slots, 0);
  // Columns in L2-sized chunks of output lines (see conv_forward_kernel).
  const int64_t lines = g.out[0] * g.out[1];
  const int64_t chunk = std::max<int64_t>(
      1, (256 << 10) / std::max<int64_t>(1, B * K * g.out[2] * int64_t(sizeof(T))));
  over_samples<T>(
      N, pw ? 0 : B * K * std::min(lines, chunk) * g.out[2], [&](int64_t n, T* cols, int64_t slot) {
        T* part = parts.get() + slot * wsize;
        const T* sn = src + n * B * P;
        const T* an = a + n * A * La;
        for (int64_t r0 = 0; r0 < lines; r0 += chunk) {
          const int64_t r1 = std::min(lines, r0 + chunk);
          const int64_t Lc = pw ? La : (r1 - r0) * g.out[2], c0 = pw ? 0 : r0 * g.out[2];
          if (!pw) im2col_lines<T>(sn, cols, B, g, r0, r1);
          const T* cn = pw ? sn : cols;
          const T beta = started[slot] ? T(1) : T(0);  // the first product overwrites the partial
          started[slot] = 1;
          for (int64_t gi = 0; gi < G; ++gi)
            gemm_rowmajor<T>(false, true, BK, Ag, Lc, T(1), cn + gi * BK * Lc, Lc,
                             an + gi * Ag * La + c0, La, beta, part + gi * BK * Ag, Ag);
          if (pw) break;
        }
      });
  // gw[gi, r, k] = sum over workers of part[gi, k, r].
  std::fill(gw, gw + wsize, T(0));
  for (int64_t t = 0; t < slots; ++t) {
    if (!started[t]) continue;
    const T* p = parts.get() + t * wsize;
    for (int64_t gi = 0; gi < G; ++gi)
      for (int64_t k = 0; k < BK; ++k)
        for (int64_t r = 0; r < Ag; ++r) gw[(gi * Ag + r) * BK + k] += p[(gi * BK + k) * Ag + r];
  }
}

// Sums of each channel of x (N, C, P) over samples and positions: the bias gradient.
template <class T>
void channel_sums(const T* x, T* out, int64_t N, int64_t C, int64_t P) {
  using Acc = opmath_t<T>;
  parallel_for(0, C, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(N * P, 1)),
               [&](int64_t c0, int64_t c1) {
                 for (int64_t c = c0; c < c1; ++c) {
                   double total = 0;
                   for (int64_t n = 0; n < N; ++n) {
                     const T* p = x + (n * C + c) * P;
                     Acc lane[16] = {};
                     int64_t i = 0;
                     for (; i + 16 <= P; i += 16)
                       for (int l = 0; l < 16; ++l) lane[l] += static_cast<Acc>(p[i + l]);
                     Acc s = 0;
                     for (; i < P; ++i) s += static_cast<Acc>(p[i]);
                     for (int l = 0; l < 16; ++l) s += lane[l];
                     total += static_cast<double>(s);
                   }
                   out[c] = static_cast<T>(total);
                 }
               });
}

// ---- channels-last convolution ----------------------------------------------------------------
// With the input in channels-last memory (N, *in, C), the im2col matrix of a block of output
// positions has one row per position (n, od, oh, ow) and columns (kd, kh, kw, c): each window
// tap is C / G contiguous channels of one pixel, so the matrix is a few memcpys per position,
// and the output (N, *out, Co) is that matrix times the weight reordered to (Co, kd, kh, kw, c),
// a plain BLAS product with no layout conversion. A 1x1 convolution with stride 1 and no
// padding needs no matrix at all: the input's pixels are its rows. The backward passes are the
// same products transposed: d columns = grad_output @ W (folded back onto the input pixels), and
// d W = grad_output^T @ columns summed over blocks.

// The channels-last geometry: per-sample sizes, channels per group, rows per column block.
struct ClGeom {
  Geom g;
  int64_t N = 0, C = 0, Co = 0, G = 1, Cg = 0, Cog = 0, K = 0, KC = 0, P = 0, L = 0;
  bool pw = false;    // 1x1, stride 1, no padding: the input is its own column matrix
  int64_t block = 0;  // output positions per column block (within one sample)
  ClGeom(const Geom& geom, int64_t n, int64_t c, int64_t co, int64_t groups, size_t item)
      : g(geom), N(n), C(c), Co(co), G(groups) {
    Cg = C / G, Cog = Co / G, K = g.kernel_numel(), KC = K * Cg;
    P = g.in_numel(), L = g.out_numel();
    pw = is_pointwise(g);
    // About 1 MiB of columns per block (an L2's worth), from 32 rows up.
    const int64_t rows = (int64_t{1} << 20) / std::max<int64_t>(1, KC * int64_t(item));
    block = std::max<int64_t>(1, std::min(L, std::max<int64_t>(32, rows)));
  }
};

// cols (R x KC, rows ld apart) = the windows of group gi at the output positions [l0, l0 + R) of
// sample x (P pixels of C channels): row r, column t * Cg + c holds the input at tap t of the
// window (zero where it falls in the padding).
template <class T>
void im2col_cl(const T* x, const ClGeom& q, int64_t gi, int64_t l0, int64_t R, T* cols,
               int64_t ld) {
  const Geom& g = q.g;
  const int64_t Cg = q.Cg;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t l = l0 + r, ow = l % g.out[2], oh = l / g.out[2] % g.out[1];
    const int64_t od = l / (g.out[2] * g.out[1]);
    T* row = cols + r * ld;
    for (int64_t kd = 0; kd < g.ks[0]; ++kd) {
      const int64_t id = od * g.st[0] - g.pd[0] + kd * g.dl[0];
      for (int64_t kh = 0; kh < g.ks[1]; ++kh) {
        const int64_t ih = oh * g.st[1] - g.pd[1] + kh * g.dl[1];
        const bool in_rows = id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1];
        const T* xr = x + (id * g.in[1] + ih) * g.in[2] * q.C + gi * Cg;
        // One group and no dilation along the row: a window row inside the image is one run of
        // KW pixels' channels (one copy instead of KW).
        const int64_t iw0 = ow * g.st[2] - g.pd[2];
        if (in_rows && Cg == q.C && g.dl[2] == 1 && iw0 >= 0 && iw0 + g.ks[2] <= g.in[2]) {
          std::memcpy(row, xr + iw0 * q.C, sizeof(T) * Cg * g.ks[2]);
          row += Cg * g.ks[2];
          continue;
        }
        for (int64_t kw = 0; kw < g.ks[2]; ++kw, row += Cg) {
          const int64_t iw = iw0 + kw * g.dl[2];
          if (in_rows && iw >= 0 && iw < g.in[2])
            std::memcpy(row, xr + iw * q.C, sizeof(T) * Cg);
          else
            std::fill(row, row + Cg, T(0));
        }
      }
    }
  }
}

// x (the sample's P pixels of C channels) += the fold of cols (as im2col_cl writes them).
template <class T>
void col2im_cl(const T* cols, int64_t ld, const ClGeom& q, int64_t gi, int64_t l0, int64_t R,
               T* x) {
  const Geom& g = q.g;
  const int64_t Cg = q.Cg;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t l = l0 + r, ow = l % g.out[2], oh = l / g.out[2] % g.out[1];
    const int64_t od = l / (g.out[2] * g.out[1]);
    const T* row = cols + r * ld;
    for (int64_t kd = 0; kd < g.ks[0]; ++kd) {
      const int64_t id = od * g.st[0] - g.pd[0] + kd * g.dl[0];
      for (int64_t kh = 0; kh < g.ks[1]; ++kh) {
        const int64_t ih = oh * g.st[1] - g.pd[1] + kh * g.dl[1];
        const bool in_rows = id >= 0 && id < g.in[0] && ih >= 0 && ih < g.in[1];
        T* xr = x + (id * g.in[1] + ih) * g.in[2] * q.C + gi * Cg;
        for (int64_t kw = 0; kw < g.ks[2]; ++kw, row += Cg) {
          const int64_t iw = ow * g.st[2] - g.pd[2] + kw * g.dl[2];
          if (!in_rows || iw < 0 || iw >= g.in[2]) continue;
          T* dst = xr + iw * q.C;
          for (int64_t c = 0; c < Cg; ++c) dst[c] += row[c];
        }
      }
    }
  }
}

// Runs f(n, l0, R, buf, slot) over every column block of every sample, buf_elems of scratch
// per worker. Samples are shared out whole (fixed runs per slot, as over_samples), so the blocks
// of one sample run in order on one thread (the input gradient folds blocks into overlapping
// pixels); a single sample lets BLAS thread its products instead.
template <class T, class F>
void over_cl_blocks(const ClGeom& q, int64_t buf_elems, const F& f) {
  over_samples<T>(q.N, buf_elems, [&](int64_t n, T* buf, int64_t slot) {
    for (int64_t l0 = 0; l0 < q.L; l0 += q.block) f(n, l0, std::min(q.block, q.L - l0), buf, slot);
  });
}

// w (Co, Cg, *ks) -> wr (Co, *ks, Cg): the weight in the channels-last columns' order.
template <class T>
void weight_to_cl(const T* w, T* wr, int64_t Co, int64_t Cg, int64_t K) {
  for (int64_t o = 0; o < Co; ++o)
    for (int64_t c = 0; c < Cg; ++c)
      for (int64_t t = 0; t < K; ++t) wr[(o * K + t) * Cg + c] = w[(o * Cg + c) * K + t];
}

// out (N, *out, Co) = conv(x (N, *in, C)) + bias, both channels-last.
template <class T>
void conv_forward_cl(const T* x, const T* w, const T* bias, T* out, const ClGeom& q) {
  std::vector<T> wr(q.Co * q.KC);
  weight_to_cl(w, wr.data(), q.Co, q.Cg, q.K);
  auto add_bias = [&](T* o, int64_t R) {
    if (!bias) return;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < q.Co; ++c) o[r * q.Co + c] += bias[c];
  };
  if (q.pw) {  // one product per group over all pixels (BLAS threads it)
    for (int64_t gi = 0; gi < q.G; ++gi)
      gemm_rowmajor<T>(false, true, q.N * q.L, q.Cog, q.Cg, T(1), x + gi * q.Cg, q.C,
                       wr.data() + gi * q.Cog * q.KC, q.KC, T(0), out + gi * q.Cog, q.Co);
    add_bias(out, q.N * q.L);
    return;
  }
  over_cl_blocks<T>(q, q.block * q.KC, [&](int64_t n, int64_t l0, int64_t R, T* cols, int64_t) {
    const T* xn = x + n * q.P * q.C;
    T* on = out + (n * q.L + l0) * q.Co;
    for (int64_t gi = 0; gi < q.G; ++gi) {
      im2col_cl<T>(xn, q, gi, l0, R, cols, q.KC);
      gemm_rowmajor<T>(false, true, R, q.Cog, q.KC, T(1), cols, q.KC, wr.data() + gi * q.Cog * q.KC,
                       q.KC, T(0), on + gi * q.Cog, q.Co);
    }
    add_bias(on, R);
  });
}

// gi (N, *in, C) = d input of conv_forward_cl for grad_output go (N, *out, Co).
template <class T>
void conv_input_grad_cl(const T* go, const T* w, T* gi_out, const ClGeom& q) {
  std::vector<T> wr(q.Co * q.KC);
  weight_to_cl(w, wr.data(), q.Co, q.Cg, q.K);
  if (q.pw) {
    for (int64_t gi = 0; gi < q.G; ++gi)
      gemm_rowmajor<T>(false, false, q.N * q.L, q.Cg, q.Cog, T(1), go + gi * q.Cog, q.Co,
                       wr.data() + gi * q.Cog * q.KC, q.KC, T(0), gi_out + gi * q.Cg, q.C);
    return;
  }
  std::fill(gi_out, gi_out + q.N * q.P * q.C, T(0));
  over_cl_blocks<T>(q, q.block * q.KC, [&](int64_t n, int64_t l0, int64_t R, T* cols, int64_t) {
    T* xn = gi_out + n * q.P * q.C;
    const T* gn = go + (n * q.L + l0) * q.Co;
    for (int64_t gi = 0; gi < q.G; ++gi) {
      gemm_rowmajor<T>(false, false, R, q.KC, q.Cog, T(1), gn + gi * q.Cog, q.Co,
                       wr.data() + gi * q.Cog * q.KC, q.KC, T(0), cols, q.KC);
      col2im_cl<T>(cols, q.KC, q, gi, l0, R, xn);
    }
  });
}

// gw (Co, Cg, *ks) = d weight of conv_forward_cl: per group the sum over blocks of
// grad_output^T @ columns, in per-worker partials (fixed samples per worker: reproducible).
template <class T>
void conv_weight_grad_cl(const T* go, const T* x, T* gw, const ClGeom& q) {
  const int64_t wsize = q.Co * q.KC;
  std::vector<T> acc(wsize, T(0));
  if (q.pw) {
    for (int64_t gi = 0; gi < q.G; ++gi)
      gemm_rowmajor<T>(true, false, q.Cog, q.Cg, q.N * q.L, T(1), go + gi * q.Cog, q.Co,
                       x + gi * q.Cg, q.C, T(0), acc.data() + gi * q.Cog * q.KC, q.KC);
  } else {
    const int64_t slots = std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), q.N));
    std::vector<T> parts(slots * wsize, T(0));
    over_cl_blocks<T>(q, q.block * q.KC,
                      [&](int64_t n, int64_t l0, int64_t R, T* cols, int64_t slot) {
                        const T* xn = x + n * q.P * q.C;
                        const T* gn = go + (n * q.L + l0) * q.Co;
                        T* part = parts.data() + slot * wsize;
                        for (int64_t gi = 0; gi < q.G; ++gi) {
                          im2col_cl<T>(xn, q, gi, l0, R, cols, q.KC);
                          gemm_rowmajor<T>(true, false, q.Cog, q.KC, R, T(1), gn + gi * q.Cog, q.Co,
                                           cols, q.KC, T(1), part + gi * q.Cog * q.KC, q.KC);
                        }
                      });
    for (int64_t t = 0; t < slots; ++t)
      for (int64_t i = 0; i < wsize; ++i) acc[i] += parts[t * wsize + i];
  }
  // (Co, *ks, Cg) -> (Co, Cg, *ks)
  for (int64_t o = 0; o < q.Co; ++o)
    for (int64_t c = 0; c < q.Cg; ++c)
      for (int64_t t = 0; t < q.K; ++t)
        gw[(o * q.Cg + c) * q.K + t] = acc[(o * q.K + t) * q.Cg + c];
}

// Sums of each channel of channels-last x (rows of C): the bias gradient.
template <class T>
void channel_sums_cl(const T* x, T* out, int64_t rows, int64_t C) {
  std::vector<double> acc(C, 0.0);
  std::vector<T> part(C);
  constexpr int64_t kRows = 256;  // rows summed in T, blocks of them in double
  for (int64_t r0 = 0; r0 < rows; r0 += kRows) {
    std::fill(part.begin(), part.end(), T(0));
    for (int64_t r = r0; r < std::min(rows, r0 + kRows); ++r)
      for (int64_t c = 0; c < C; ++c) part[c] += x[r * C + c];
    for (int64_t c = 0; c < C; ++c) acc[c] += static_cast<double>(part[c]);
  }
  for (int64_t c = 0; c < C; ++c) out[c] = static_cast<T>(acc[c]);
}

using nn::check_conv;
using nn::ConvArgs;

// float16 / bfloat16 run in float32 (as matmul does), rounded once at the end.
bool is_reduced(ScalarType dt) { return dt == ScalarType::Float16 || dt == ScalarType::BFloat16; }
Tensor as_compute(const Tensor& t) {
  if (!t) return t;
  return nn::contig(t, is_reduced(t->dtype()) ? ScalarType::Float32 : t->dtype());
}
Tensor to_dtype(const Tensor& t, ScalarType dt) { return t ? nn::cast(t, dt) : t; }

template <class F>
void dispatch_compute(ScalarType dt, const char* op, const F& f) {
  if (dt == ScalarType::Float64)
    f(double());
  else if (dt == ScalarType::Float32)
    f(float());
  else
    EMBER_FAIL(Type, op, ": internal error: unexpected compute dtype ", dtype_name(dt));
}

// PyTorch's layout for a convolution's result (and input gradient): channels-last when the
// input or the weight is, for 2-d convolutions and for 3-d ones where its mkldnn path runs
// (float32, bfloat16).
bool conv_channels_last(const Tensor& input, const Tensor& weight) {
  const int64_t nd = weight->dim();
  if (nd != 4 && nd != 5) return false;
  const ScalarType dt = input->dtype();
  if (nd == 5 && dt != ScalarType::Float32 && dt != ScalarType::BFloat16) return false;
  return suggests_channels_last(input) || suggests_channels_last(weight);
}

// out (computed contiguous) in the channels-last layout when `cl`; an unbatched result (one
// dim fewer than the weight) gets the layout of that sample in a channels-last batch.
Tensor conv_layout(const Tensor& out, const Tensor& weight, bool cl) {
  if (!cl || !out) return out;
  if (out->dim() == weight->dim()) return nn::as_channels_last(out, true);
  DimVector batched{1};
  for (int64_t v : out->sizes()) batched.push_back(v);
  DimVector strides = channels_last_strides(batched);
  strides.erase(0);
  if (out->strides() == strides) return out;
  Tensor y = ember::empty_strided(out->sizes(), strides, out->dtype(), out->device());
  copy_into(y, out);
  return y;
}

// Whether a convolution runs on the channels-last kernels above: a batched, non-transposed one
// whose result PyTorch lays out channels-last (conv_channels_last), float32 / float64, with
// input channels and output positions (the others take the general path's special cases).
// Grouped ones only with 32+ input and output channels per group: with fewer, the per-group
// products and per-tap copies are too small (at 16 per group 1.4x, at 4 3x slower than the
// planar kernels; at 32 even).
bool cl_conv_applies(const Tensor& input, const Tensor& weight, const ConvArgs& a, bool transposed,
                     bool cl) {
  const ScalarType dt = input->dtype();
  const bool wide_groups = a.G == 1 || (a.C / a.G >= 32 && a.Co / a.G >= 32);
  return cl && !transposed && input->dim() == weight->dim() && input->device().is_cpu() &&
         (dt == ScalarType::Float32 || dt == ScalarType::Float64) && weight->dtype() == dt &&
         a.C > 0 && a.N > 0 && wide_groups;
}
}  // namespace

Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const DimVector& stride, const DimVector& padding, const DimVector& dilation,
                   bool transposed, const DimVector& output_padding, int64_t groups) {
  const char* op = transposed ? "conv_transpose" : "convolution";
  ConvArgs a = check_conv(op, input, weight, bias, stride, padding, dilation, transposed,
                          output_padding, groups);
  const int64_t k = a.k;
  const bool cl = conv_channels_last(input, weight);
  if (depthwise_conv_applies(a, transposed))
    if (Tensor y = depthwise_conv_channels_last(input, weight, bias, a))
      return conv_layout(y, weight, cl);
  Tensor x = as_compute(input), w = as_compute(weight), b = as_compute(bias);
  if (depthwise_conv_applies(a, transposed))
    return conv_layout(to_dtype(depthwise_conv(x, w, b, a), input->dtype()), weight, cl);
  if (!depthwise_conv_applies(a, transposed) && cl_conv_applies(input, weight, a, transposed, cl)) {
    Tensor xc = nn::as_channels_last(input, true), wc = nn::contig(weight);
    Tensor bc = bias ? nn::contig(bias, input->dtype()) : Tensor();
    Geom g = nn::make_window_geom(op, trailing(xc, k), a.ks, a.dl, a.pd, a.st);
    DimVector shape{a.N, a.Co};
    for (int64_t d = 0; d < k; ++d) shape.push_back(g.out[3 - k + d]);
    Tensor y = ember::empty_strided(shape, channels_last_strides(shape), xc->dtype(), xc->device());
    if (y->numel() > 0)
      dispatch_compute(xc->dtype(), op, [&](auto tag) {
        using T = decltype(tag);
        const ClGeom q(g, a.N, a.C, a.Co, a.G, sizeof(T));
        conv_forward_cl<T>(xc->data_as<T>(), wc->data_as<T>(), bc ? bc->data_as<T>() : nullptr,
                           y->data_as<T>(), q);
      });
    return y;
  }
  DimVector out_shape{a.N, a.Co};
  Tensor out;
  // No input channels: every output is an empty sum, so the bias alone (the products below
  // would have nothing to reduce and leave the output unwritten). As the CUDA backend.
  auto bias_only = [&](int64_t positions) {
    dispatch_compute(x->dtype(), op, [&](auto tag) {
      using T = decltype(tag);
      T* o = out->data_as<T>();
      std::fill(o, o + out->numel(), T(0));
      for (int64_t n = 0; n < a.N; ++n)
        add_channel_bias(o + n * a.Co * positions, b ? b->data_as<T>() : nullptr, a.Co, positions);
    });
  };
  if (!transposed) {
    Geom g = nn::make_window_geom(op, trailing(x, k), a.ks, a.dl, a.pd, a.st);
    for (int64_t d = 0; d < k; ++d) out_shape.push_back(g.out[3 - k + d]);
    out = ember::empty(out_shape, x->dtype(), x->device());
    if (out->numel() > 0 && a.C == 0)
      bias_only(g.out_numel());
    else if (out->numel() > 0)
      dispatch_compute(x->dtype(), op, [&](auto tag) {
        using T = decltype(tag);
        conv_forward_kernel<T>(x->data_as<T>(), w->data_as<T>(), b ? b->data_as<T>() : nullptr,
                               out->data_as<T>(), a.N, a.C, a.Co, a.G, g);
      });
  } else {
    DimVector out_sp = nn::conv_transposed_sizes(op, x, a);
    Geom g = nn::transposed_window_geom(op, out_sp, x, a);
    for (int64_t v : out_sp) out_shape.push_back(v);
    out = ember::empty(out_shape, x->dtype(), x->device());
    if (out->numel() > 0 && a.C == 0)
      bias_only(g.in_numel());
    else if (out->numel() > 0)
      dispatch_compute(x->dtype(), op, [&](auto tag) {
        using T = decltype(tag);
        conv_transposed_kernel<T>(x->data_as<T>(), w->data_as<T>(), b ? b->data_as<T>() : nullptr,
                                  out->data_as<T>(), a.N, a.C, a.Co, a.G, g);
      });
  }
  return conv_layout(to_dtype(out, input->dtype()), weight, cl);
}

namespace {
// convolution_backward on the channels-last kernels (cl_conv_applies): grad_input channels-last.
std::tuple<Tensor, Tensor, Tensor> conv_backward_cl(const char* op, const Tensor& grad_output,
                                                    const Tensor& input, const Tensor& weight,
                                                    const ConvArgs& a, bool input_grad,
                                                    bool weight_grad, bool bias_grad) {
  const ScalarType dt = input->dtype();
  Tensor x = nn::as_channels_last(input, true), w = nn::contig(weight);
  Tensor go = nn::as_channels_last(nn::cast(grad_output, dt), true);
  Geom g = nn::make_window_geom(op, trailing(x, a.k), a.ks, a.dl, a.pd, a.st);
  Tensor gi, gw, gb;
  dispatch_compute(dt, op, [&](auto tag) {
    using T = decltype(tag);
    const ClGeom q(g, a.N, a.C, a.Co, a.G, sizeof(T));
    if (input_grad) {
      gi = ember::empty_strided(input->sizes(), channels_last_strides(input->sizes()), dt,
                                x->device());
      if (gi->numel() > 0) {
        if (q.L == 0)
          std::fill(gi->data_as<T>(), gi->data_as<T>() + gi->numel(), T(0));
        else
          conv_input_grad_cl<T>(go->data_as<T>(), w->data_as<T>(), gi->data_as<T>(), q);
      }
    }
    if (weight_grad) {
      gw = ember::empty(weight->sizes(), dt, x->device());
      if (gw->numel() > 0) {
        if (q.L == 0)
          std::fill(gw->data_as<T>(), gw->data_as<T>() + gw->numel(), T(0));
        else
          conv_weight_grad_cl<T>(go->data_as<T>(), x->data_as<T>(), gw->data_as<T>(), q);
      }
    }
    if (bias_grad) {
      gb = ember::empty({a.Co}, dt, x->device());
      channel_sums_cl<T>(go->data_as<T>(), gb->data_as<T>(), a.N * q.L, a.Co);
    }
  });
  return {gi, gw, gb};
}
}  // namespace

std::tuple<Tensor, Tensor, Tensor> convolution_backward(
    const Tensor& grad_output, const Tensor& input, const Tensor& weight, const DimVector& stride,
    const DimVector& padding, const DimVector& dilation, bool transposed,
    const DimVector& output_padding, int64_t groups, bool input_grad, bool weight_grad,
    bool bias_grad) {
  const char* op = "convolution_backward";
  ConvArgs a = check_conv(op, input, weight, Tensor(), stride, padding, dilation, transposed,
                          output_padding, groups);
  const int64_t k = a.k;
  nn::check_conv_grad_output(op, grad_output, input, weight, a, transposed);
  const ScalarType dt = input->dtype();
  const bool cl = conv_channels_last(input, weight);
  if (!depthwise_conv_applies(a, transposed) && cl_conv_applies(input, weight, a, transposed, cl))
    return conv_backward_cl(op, grad_output, input, weight, a, input_grad, weight_grad, bias_grad);
  Tensor go = as_compute(grad_output), x = as_compute(input), w = as_compute(weight);
  const ScalarType ct = x->dtype();
  Tensor gi, gw, gb;
  if (depthwise_conv_applies(a, transposed) && (input_grad || weight_grad)) {
    std::tie(gi, gw) = depthwise_conv_backward(go, x, w, a, input_grad, weight_grad);
    gi = to_dtype(gi, dt), gw = to_dtype(gw, dt);
    input_grad = weight_grad = false;  // done: only the bias gradient is left
  }
  if (input_grad) {
    gi = ember::empty(input->sizes(), ct, x->device());
    if (gi->numel() > 0) {
      // With stride 1 (and padding at most the kernel's span - 1), d input is a plain
      // convolution of grad_output with the weight flipped in space and its channel dims swapped,
      // padded by dilation * (k - 1) - padding: on AVX-512 the forward kernel runs that faster
      // than conv_transpose's BLAS product and fold.
      // (Only with 16 or more input channels: they are the flipped convolution's output rows,
      // which the kernel computes 16 at a time.)
      bool flip =
          !transposed && ct == ScalarType::Float32 && conv_gemm_available() && a.C / a.G >= 16;
      // ("same" padding only: otherwise the flipped convolution pads grad_output more and costs
      // more than it saves.)
      for (int64_t d = 0; d < k; ++d)
        flip &= a.st[d] == 1 && 2 * a.pd[d] == a.dl[d] * (a.ks[d] - 1);
      // (Unless it reads its windows in place, the flipped convolution copies Co / G * K
      // columns per position where conv_transpose folds C / G * K: with more output channels
      // than input channels, the latter.)
      flip &= a.Co <= a.C || fills_vectors(x->size(x->dim() - 1));
      if (flip) {
        DimVector fpd(k);
        for (int64_t d = 0; d < k; ++d) fpd[d] = a.dl[d] * (a.ks[d] - 1) - a.pd[d];
        Geom g = nn::make_window_geom(op, trailing(go, k), a.ks, a.dl, fpd, a.st);
        const int64_t Kn = g.kernel_numel(), Cg = a.C / a.G, Cog = a.Co / a.G;
        // Per group the weight (C / G, Co / G * K), spatially flipped (written row by row),
        // packed for the product.
        std::vector<PackedA> wf;
        const float* pw = w->data_as<float>();
        Scratch<float> flipped(Cg * Cog * Kn);
        for (int64_t grp = 0; grp < a.G; ++grp) {
          float* row = flipped.data();
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t o = 0; o < Cog; ++o, row += Kn) {
              const float* taps = pw + ((grp * Cog + o) * Cg + c) * Kn;
              for (int64_t j = 0; j < Kn; ++j) row[Kn - 1 - j] = taps[j];
            }
          wf.emplace_back(flipped.data(), Cog * Kn, 1, Cg, Cog * Kn);
        }
        conv_forward_kernel<float>(go->data_as<float>(), nullptr, nullptr, gi->data_as<float>(),
                                   a.N, a.Co, a.C, a.G, g, &wf);
      } else if (!transposed) {
        // d input = conv_transpose(grad_output) folded over the input's own sizes.
        Geom g = nn::make_window_geom(op, trailing(x, k), a.ks, a.dl, a.pd, a.st);
        dispatch_compute(ct, op, [&](auto tag) {
          using T = decltype(tag);
          conv_transposed_kernel<T>(go->data_as<T>(), w->data_as<T>(), nullptr, gi->data_as<T>(),
                                    a.N, a.Co, a.C, a.G, g);
        });
      } else {
        // d input = conv(grad_output): the transposed conv's input positions are its windows
        // (only those: grad_output may hold more when output_padding >= stride).
        Geom g = nn::transposed_window_geom(op, trailing(go, k), x, a);
        dispatch_compute(ct, op, [&](auto tag) {
          using T = decltype(tag);
          conv_forward_kernel<T>(go->data_as<T>(), w->data_as<T>(), nullptr, gi->data_as<T>(), a.N,
                                 a.Co, a.C, a.G, g);
        });
      }
    }
    gi = to_dtype(gi, dt);
  }
  if (weight_grad) {
    gw = ember::empty(weight->sizes(), ct, x->device());
    if (gw->numel() > 0) {
      // Convolution: grad_output (N, Co, L) against the input's columns; transposed: the input
      // (N, Ci, Lin) against grad_output's columns.
      const Tensor& lhs = transposed ? x : go;
      const Tensor& src = transposed ? go : x;
      // (Transposed: the windows over grad_output are the input's positions, see above.)
      Geom g = transposed ? nn::transposed_window_geom(op, trailing(src, k), x, a)
                          : nn::make_window_geom(op, trailing(src, k), a.ks, a.dl, a.pd, a.st);
      dispatch_compute(ct, op, [&](auto tag) {
        using T = decltype(tag);
        if (a.N == 0 || g.out_numel() == 0) {
          std::fill(gw->data_as<T>(), gw->data_as<T>() + gw->numel(), T(0));
          return;
        }
        conv_weight_kernel<T>(lhs->data_as<T>(), src->data_as<T>(), gw->data_as<T>(), a.N,
                              lhs->size(1), src->size(1), a.G, g);
      });
    }
    gw = to_dtype(gw, dt);
  }
  if (bias_grad) {
    gb = ember::empty({a.Co}, ct, x->device());
    int64_t P = 1;
    for (int64_t d = 2; d < go->dim(); ++d) P *= go->size(d);
    dispatch_compute(ct, op, [&](auto tag) {
      using T = decltype(tag);
      channel_sums<T>(go->data_as<T>(), gb->data_as<T>(), a.N, a.Co, P);
    });
    gb = to_dtype(gb, dt);
  }
  return {conv_layout(gi, weight, cl), gw, gb};
}

}  // namespace cpu
}  // namespace ember
