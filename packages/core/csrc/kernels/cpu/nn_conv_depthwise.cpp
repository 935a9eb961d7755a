// Direct depthwise convolution (see nn_conv_depthwise.h).
//
// One channel plane at a time, over a flattened layout: the plane is copied, zero padded, into a
// buffer whose rows are P[2] = out[2] + m[2] wide (m: the kernel's reach beyond one output, in
// input steps), so that output (o0, o1, o2) reads tap t at flat index (o0 * P[1] + o1) * P[2] + o2
// + off[t]. Every output of the plane is then one sum over taps of a shifted copy of the buffer,
// vectorized along the flat index whatever the plane's width (positions past out[1] or out[2] in
// that index are computed and dropped). A stride s along a dim first splits the padded input into
// its s phases (the elements at positions r mod s, for r < s): tap t then reads one phase at a
// shift, exactly as with stride 1.
//
// The input gradient runs the same sum the other way round: grad_output laid out on the output
// grid (zeros at the dropped positions) and read at minus each tap's shift gives every phase
// buffer position its gradient. The weight gradient of tap t is the dot product of that
// grad_output layout with the input buffer shifted by off[t].
#include "kernels/cpu/nn_conv_depthwise.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/parallel.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define EMBER_DW_X86 1
#endif

namespace ember {
namespace cpu {

namespace dwk {
namespace base {
#define EMBER_DW_BYTES 16
#include "kernels/cpu/nn_conv_depthwise_kernels.inc"
#undef EMBER_DW_BYTES
}  // namespace base

#ifdef EMBER_DW_X86
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
namespace avx2 {
#define EMBER_DW_BYTES 32
#include "kernels/cpu/nn_conv_depthwise_kernels.inc"
#undef EMBER_DW_BYTES
}  // namespace avx2
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#endif
namespace avx512 {
#define EMBER_DW_BYTES 64
#include "kernels/cpu/nn_conv_depthwise_kernels.inc"
#undef EMBER_DW_BYTES
}  // namespace avx512
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif
}  // namespace dwk

namespace {

using Geom = nn::WindowGeom;

// The best compiled variant of the two inner loops for this CPU (EMBER_CPU_ISA caps it).
template <class T>
struct Kernels {
  void (*gather)(T*, int64_t, const T*, const int64_t*, const T*, int64_t, bool);
  void (*dots)(T*, const T*, int64_t, const T*, const int64_t*, int64_t);
};

template <class T>
Kernels<T> kernels() {
#ifdef EMBER_DW_X86
  if (cpu_isa() >= Isa::Avx512) return {&dwk::avx512::gather<T>, &dwk::avx512::dots<T>};
  if (cpu_isa() >= Isa::Avx2) return {&dwk::avx2::gather<T>, &dwk::avx2::dots<T>};
#endif
  return {&dwk::base::gather<T>, &dwk::base::dots<T>};
}

// The inner loops run over whole multiples of 16 elements.
constexpr int64_t kSlack = 16;
int64_t round_up(int64_t v) { return (v + kSlack - 1) / kSlack * kSlack; }

// The buffer layout of a block of up to B planes of one channel (see the top of the file): the
// planes follow each other in every phase, vol = P[0] * P[1] * P[2] elements apart.
struct Plan {
  Geom g;
  int64_t P[3] = {1, 1, 1};
  int64_t nph = 1;                // phases: st[0] * st[1] * st[2]
  int64_t vol = 0;                // one plane's phase grid
  int64_t B = 1;                  // planes (samples) per block
  int64_t PS = 0;                 // elements per phase in the input (and input-gradient) buffer
  int64_t L1 = 0;                 // flat index one past a plane's last output
  int64_t M = 0;                  // the largest within-phase tap shift
  int64_t GS = 0;                 // elements per grad_output buffer: M zeros, then the output grids
  int64_t taps = 0;               // kernel elements
  std::vector<int64_t> off;       // tap -> its phase's start + its shift
  std::vector<int64_t> tab[3];    // input index along a dim -> its contribution to the offset
  int64_t valid[3] = {0, 0, 0};   // inputs [0, valid[d]) along dim d have a place in the buffer
  std::vector<int64_t> ph_start;  // phase -> first of its taps in ph_tap / ph_off (nph + 1)
  std::vector<int64_t> ph_tap;    // the taps of each phase
  std::vector<int64_t> ph_off;    // M - the tap's shift: where it reads the grad_output buffer
  // Along the last dim, phase r holds n inputs first, first + st[2], ... at coordinates lo, ....
  struct Run {
    int64_t lo = 0, n = 0, first = 0;
  };
  std::vector<Run> runs;

  Plan(const Geom& geom, int64_t N) : g(geom) {
    int64_t m[3];
    for (int d = 0; d < 3; ++d) {
      m[d] = (g.ks[d] - 1) * g.dl[d] / g.st[d];
      P[d] = g.out[d] + m[d];
      nph *= g.st[d];
    }
    vol = P[0] * P[1] * P[2];
    // Blocks of about 64 KiB of float32 (a single plane when larger): they stay in L2.
    B = std::max<int64_t>(1, std::min<int64_t>(N, 16384 / std::max<int64_t>(nph * vol, 1)));
    PS = round_up(B * vol + kSlack);
    M = (m[0] * P[1] + m[1]) * P[2] + m[2];
    GS = round_up(M + B * vol + kSlack);
    L1 = ((g.out[0] - 1) * P[1] + g.out[1] - 1) * P[2] + g.out[2];
    taps = g.kernel_numel();
    // Each tap: its phase and its shift within the phase.
    std::vector<int64_t> phase(taps), shift(taps);
    for (int64_t k0 = 0; k0 < g.ks[0]; ++k0)
      for (int64_t k1 = 0; k1 < g.ks[1]; ++k1)
        for (int64_t k2 = 0; k2 < g.ks[2]; ++k2) {
          const int64_t t = (k0 * g.ks[1] + k1) * g.ks[2] + k2;
          const int64_t u[3] = {k0 * g.dl[0], k1 * g.dl[1], k2 * g.dl[2]};
          phase[t] = ((u[0] % g.st[0]) * g.st[1] + u[1] % g.st[1]) * g.st[2] + u[2] % g.st[2];
          shift[t] = ((u[0] / g.st[0]) * P[1] + u[1] / g.st[1]) * P[2] + u[2] / g.st[2];
          off.push_back(phase[t] * PS + shift[t]);
        }
    ph_start.assign(nph + 1, 0);
    for (int64_t p = 0; p < nph; ++p) {
      ph_start[p] = static_cast<int64_t>(ph_tap.size());
      for (int64_t t = 0; t < taps; ++t)
        if (phase[t] == p) {
          ph_tap.push_back(t);
          ph_off.push_back(M - shift[t]);
        }
    }
    ph_start[nph] = taps;
    // Padded input position u = v + pd lies in phase u % st at coordinate u / st.
    const int64_t phase_stride[3] = {g.st[1] * g.st[2] * PS, g.st[2] * PS, PS};
    const int64_t coord_stride[3] = {P[1] * P[2], P[2], 1};
    for (int d = 0; d < 3; ++d) {
      for (int64_t v = 0; v < g.in[d]; ++v) {
        const int64_t u = v + g.pd[d], c = u / g.st[d];
        if (c >= P[d]) break;  // no window reaches this far
        tab[d].push_back((u % g.st[d]) * phase_stride[d] + c * coord_stride[d]);
      }
      valid[d] = static_cast<int64_t>(tab[d].size());
    }
    for (int64_t r = 0; r < g.st[2]; ++r) {
      // Coordinate c holds input v = c * st + r - pd; the v in [0, valid[2]) are a run.
      const int64_t shift = r - g.pd[2], last = valid[2] - 1 - shift;
      Run q;
      q.lo = shift >= 0 ? 0 : (-shift + g.st[2] - 1) / g.st[2];
      q.n = last < 0 ? 0 : std::max<int64_t>(0, last / g.st[2] + 1 - q.lo);
      q.first = q.lo * g.st[2] + shift;
      runs.push_back(q);
    }
  }

  // Flat indices covering the outputs of b planes, and all phase positions of b planes.
  int64_t out_span(int64_t b) const { return round_up((b - 1) * vol + L1); }
  int64_t grid_span(int64_t b) const { return round_up(b * vol); }

  // Plane i of the block in buf (a zeroed phase buffer) <- plane x; the padding stays zero.
  template <class T>
  void pack(const T* x, T* buf, int64_t i) const {
    buf += i * vol;
    for (int64_t v0 = 0; v0 < valid[0]; ++v0)
      for (int64_t v1 = 0; v1 < valid[1]; ++v1) {
        const T* xr = x + (v0 * g.in[1] + v1) * g.in[2];
        T* dst = buf + tab[0][v0] + tab[1][v1];
        if (g.st[2] == 1) {
          dst += valid[2] > 0 ? tab[2][0] : 0;
          for (int64_t v2 = 0; v2 < valid[2]; ++v2) dst[v2] = xr[v2];
        } else {
          for (int64_t r = 0; r < g.st[2]; ++r) {
            const Run& q = runs[r];
            T* d = dst + r * PS + q.lo;
            const T* xs = xr + q.first;
            if (g.st[2] == 2)  // (a constant stride lets the compiler vectorize the copy)
              for (int64_t c = 0; c < q.n; ++c) d[c] = xs[2 * c];
            else
              for (int64_t c = 0; c < q.n; ++c) d[c] = xs[c * g.st[2]];
          }
        }
      }
  }

  // Plane gi <- the input positions' values in plane i of buf (zero where no window reaches).
  template <class T>
  void unpack(const T* buf, int64_t i, T* gi) const {
    buf += i * vol;
    const int64_t row = g.in[2], slab = g.in[1] * g.in[2];
    for (int64_t v0 = 0; v0 < g.in[0]; ++v0) {
      T* g0 = gi + v0 * slab;
      if (v0 >= valid[0]) {
        std::fill(g0, g0 + slab, T(0));
        continue;
      }
      for (int64_t v1 = 0; v1 < g.in[1]; ++v1) {
        T* gr = g0 + v1 * row;
        if (v1 >= valid[1]) {
          std::fill(gr, gr + row, T(0));
          continue;
        }
        const T* src = buf + tab[0][v0] + tab[1][v1];
        if (g.st[2] == 1) {
          src += valid[2] > 0 ? tab[2][0] : 0;
          for (int64_t v2 = 0; v2 < valid[2]; ++v2) gr[v2] = src[v2];
        } else {
          for (int64_t r = 0; r < g.st[2]; ++r) {
            const Run& q = runs[r];
            const T* sr = src + r * PS + q.lo;
            T* gs = gr + q.first;
            if (g.st[2] == 2)
              for (int64_t c = 0; c < q.n; ++c) gs[2 * c] = sr[c];
            else
              for (int64_t c = 0; c < q.n; ++c) gs[c * g.st[2]] = sr[c];
          }
        }
        for (int64_t v2 = valid[2]; v2 < row; ++v2) gr[v2] = T(0);
      }
    }
  }

  // Plane i of the output grids (flat index (o0 * P[1] + o1) * P[2] + o2) <-> a dense plane.
  template <class T>
  void to_plane(const T* grid, int64_t i, T* out, T bias) const {
    grid += i * vol;
    for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
      for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
        const T* src = grid + (o0 * P[1] + o1) * P[2];
        T* dst = out + (o0 * g.out[1] + o1) * g.out[2];
        for (int64_t o2 = 0; o2 < g.out[2]; ++o2) dst[o2] = src[o2] + bias;
      }
  }
  template <class T>
  void to_grid(const T* plane, T* grid, int64_t i) const {
    grid += i * vol;
    for (int64_t o0 = 0; o0 < g.out[0]; ++o0)
      for (int64_t o1 = 0; o1 < g.out[1]; ++o1) {
        const T* src = plane + (o0 * g.out[1] + o1) * g.out[2];
        T* dst = grid + (o0 * P[1] + o1) * P[2];
        for (int64_t o2 = 0; o2 < g.out[2]; ++o2) dst[o2] = src[o2];
      }
  }

  // After a block of b < B planes: zeroes what follows plane b - 1 in every phase of a phase
  // buffer (stale planes of the previous channel must not reach the rounded-up spans).
  template <class T>
  void clear_tail(T* buf, int64_t b) const {
    for (int64_t p = 0; p < nph; ++p) std::fill(buf + p * PS + b * vol, buf + (p + 1) * PS, T(0));
  }
};

Geom depthwise_geom(const char* op, const Tensor& x, const nn::ConvArgs& a) {
  return nn::make_window_geom(op, nn::trailing(x, a.k), a.ks, a.dl, a.pd, a.st);
}

// Channels split over the thread pool, each chunk with its own buffers; work is the rough
// number of multiply-adds per channel.
template <class F>
void over_channels(int64_t C, int64_t work, const F& f) {
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(work, 1));
  parallel_for(0, C, grain, f);
}

template <class T>
void forward_kernel(const T* x, const T* w, const T* b, T* out, int64_t N, int64_t C, int64_t Co,
                    const Plan& pl) {
  const Kernels<T> kern = kernels<T>();
  const int64_t mult = Co / C, Pin = pl.g.in_numel(), Pout = pl.g.out_numel(), K = pl.taps;
  over_channels(C, N * mult * pl.vol * K, [&](int64_t c0, int64_t c1) {
    std::vector<T> buf(pl.nph * pl.PS, T(0)), grid(pl.out_span(pl.B));
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t n0 = 0; n0 < N; n0 += pl.B) {
        const int64_t nb = std::min(pl.B, N - n0);
        if (nb < pl.B) pl.clear_tail(buf.data(), nb);
        for (int64_t i = 0; i < nb; ++i) pl.pack(x + ((n0 + i) * C + c) * Pin, buf.data(), i);
        for (int64_t j = 0; j < mult; ++j) {
          const int64_t o = c * mult + j;
          kern.gather(grid.data(), pl.out_span(nb), buf.data(), pl.off.data(), w + o * K, K, false);
          for (int64_t i = 0; i < nb; ++i)
            pl.to_plane(grid.data(), i, out + ((n0 + i) * Co + o) * Pout, b ? b[o] : T(0));
        }
      }
  });
}

template <class T>
void backward_kernel(const T* go, const T* x, const T* w, T* gi, T* gw, int64_t N, int64_t C,
                     int64_t Co, const Plan& pl) {
  const Kernels<T> kern = kernels<T>();
  const int64_t mult = Co / C, Pin = pl.g.in_numel(), Pout = pl.g.out_numel(), K = pl.taps;
  const int64_t work = N * mult * K * pl.vol * ((gi ? pl.nph : 0) + (gw ? 1 : 0));
  over_channels(C, work, [&](int64_t c0, int64_t c1) {
    // gobuf: per output channel of the group, M zeros then the output grids (zero between
    // outputs, where the input gradient's sums read).
    std::vector<T> xbuf(gw ? pl.nph * pl.PS : 0, T(0)), gobuf(mult * pl.GS, T(0));
    std::vector<T> gbuf(gi ? pl.nph * pl.PS : 0), wph(mult * K);
    std::vector<T> acc(gw ? mult * K * 16 : 0);  // 16 lanes per weight
    for (int64_t c = c0; c < c1; ++c) {
      std::fill(acc.begin(), acc.end(), T(0));
      // This channel's weights in phase order (the order of ph_tap).
      for (int64_t j = 0; j < mult; ++j)
        for (int64_t t = 0; t < K; ++t) wph[j * K + t] = w[(c * mult + j) * K + pl.ph_tap[t]];
      for (int64_t n0 = 0; n0 < N; n0 += pl.B) {
        const int64_t nb = std::min(pl.B, N - n0);
        if (nb < pl.B) {
          if (gw) pl.clear_tail(xbuf.data(), nb);
          for (int64_t j = 0; j < mult; ++j)
            std::fill(gobuf.begin() + j * pl.GS + pl.M + nb * pl.vol,
                      gobuf.begin() + (j + 1) * pl.GS, T(0));
        }
        if (gw)
          for (int64_t i = 0; i < nb; ++i) pl.pack(x + ((n0 + i) * C + c) * Pin, xbuf.data(), i);
        for (int64_t j = 0; j < mult; ++j) {
          T* gj = gobuf.data() + j * pl.GS + pl.M;
          for (int64_t i = 0; i < nb; ++i)
            pl.to_grid(go + ((n0 + i) * Co + c * mult + j) * Pout, gj, i);
          if (gw)
            kern.dots(acc.data() + j * K * 16, gj, pl.out_span(nb), xbuf.data(), pl.off.data(), K);
        }
        if (!gi) continue;
        const int64_t span = pl.grid_span(nb);
        for (int64_t p = 0; p < pl.nph; ++p) {
          T* dst = gbuf.data() + p * pl.PS;
          const int64_t t0 = pl.ph_start[p], nt = pl.ph_start[p + 1] - t0;
          if (nt == 0) {
            std::fill(dst, dst + span, T(0));
            continue;
          }
          for (int64_t j = 0; j < mult; ++j)
            kern.gather(dst, span, gobuf.data() + j * pl.GS, pl.ph_off.data() + t0,
                        wph.data() + j * K + t0, nt, j > 0);
        }
        for (int64_t i = 0; i < nb; ++i) pl.unpack(gbuf.data(), i, gi + ((n0 + i) * C + c) * Pin);
      }
      if (gw)
        for (int64_t t = 0; t < mult * K; ++t) {
          double sum = 0;
          for (int64_t l = 0; l < 16; ++l) sum += static_cast<double>(acc[t * 16 + l]);
          gw[c * mult * K + t] = static_cast<T>(sum);
        }
    }
  });
}

template <class F>
void dispatch(ScalarType dt, const char* op, const F& f) {
  if (dt == ScalarType::Float32)
    f(float());
  else if (dt == ScalarType::Float64)
    f(double());
  else
    EMBER_FAIL(Type, op, ": internal error: depthwise kernel got dtype ", dtype_name(dt));
}

}  // namespace

bool depthwise_conv_applies(const nn::ConvArgs& a, bool transposed) {
  return !transposed && a.k >= 1 && a.k <= 3 && a.G > 1 && a.G == a.C && a.Co % a.C == 0;
}

Tensor depthwise_conv(const Tensor& x, const Tensor& w, const Tensor& b, const nn::ConvArgs& a) {
  const char* op = "convolution";
  const Plan pl(depthwise_geom(op, x, a), a.N);
  DimVector shape{a.N, a.Co};
  for (int64_t d = 0; d < a.k; ++d) shape.push_back(pl.g.out[3 - a.k + d]);
  Tensor out = ember::empty(shape, x->dtype(), x->device());
  if (out->numel() == 0) return out;
  dispatch(x->dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    forward_kernel<T>(x->data_as<T>(), w->data_as<T>(), b ? b->data_as<T>() : nullptr,
                      out->data_as<T>(), a.N, a.C, a.Co, pl);
  });
  return out;
}

std::pair<Tensor, Tensor> depthwise_conv_backward(const Tensor& go, const Tensor& x,
                                                  const Tensor& w, const nn::ConvArgs& a,
                                                  bool input_grad, bool weight_grad) {
  const char* op = "convolution_backward";
  const Plan pl(depthwise_geom(op, x, a), a.N);
  Tensor gi = input_grad ? ember::empty(x->sizes(), x->dtype(), x->device()) : Tensor();
  Tensor gw = weight_grad ? ember::empty(w->sizes(), x->dtype(), x->device()) : Tensor();
  dispatch(x->dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    T* pgi = gi && gi->numel() > 0 ? gi->data_as<T>() : nullptr;
    T* pgw = gw && gw->numel() > 0 ? gw->data_as<T>() : nullptr;
    if (pgw && (a.N == 0 || pl.g.out_numel() == 0)) {
      std::fill(pgw, pgw + gw->numel(), T(0));
      pgw = nullptr;
    }
    if (pgi && pl.g.out_numel() == 0) {
      std::fill(pgi, pgi + gi->numel(), T(0));
      pgi = nullptr;
    }
    if (pgi || pgw)
      backward_kernel<T>(go->data_as<T>(), x->data_as<T>(), w->data_as<T>(), pgi, pgw, a.N, a.C,
                         a.Co, pl);
  });
  return {gi, gw};
}

}  // namespace cpu
}  // namespace ember
