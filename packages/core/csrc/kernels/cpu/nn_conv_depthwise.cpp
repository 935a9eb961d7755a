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
//
// The planes of one channel from several samples follow each other in the buffers (a block of
// about 64 KiB), so that each pass of the inner loops covers all of them: MobileNet's late layers
// have planes of 2x2 or 4x4. The channel loops (nn_conv_depthwise_kernels.inc) are compiled for
// AVX-512, AVX2 and the baseline ISA, and the thread pool shares out the channels.
#include "kernels/cpu/nn_conv_depthwise.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/parallel.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define EMBER_DW_X86 1
#include <immintrin.h>
#endif

namespace ember {
namespace cpu {

namespace dwk {

using Geom = nn::WindowGeom;

// The inner loops run over whole multiples of 16 elements.
constexpr int64_t kSlack = 16;
inline int64_t round_up(int64_t v) { return (v + kSlack - 1) / kSlack * kSlack; }

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
};

// One convolution's operands (gradients: null unless asked for).
template <class T>
struct Operands {
  const T *x = nullptr, *w = nullptr, *b = nullptr, *go = nullptr;
  T *out = nullptr, *gi = nullptr, *gw = nullptr;
  int64_t N = 0, C = 0, Co = 0;
};

// Per-thread scratch of the channel loops (zeroed once: the padding in them stays zero).
template <class T>
struct Scratch {
  std::vector<T> xbuf, grid, gobuf, gbuf, wph, acc;
};

namespace base {
#define EMBER_DW_BYTES 16
#include "kernels/cpu/nn_conv_depthwise_kernels.inc"
#undef EMBER_DW_BYTES
}  // namespace base

#ifdef EMBER_DW_X86
EMBER_TARGET_BEGIN("avx2,fma")
namespace avx2 {
#define EMBER_DW_BYTES 32
#include "kernels/cpu/nn_conv_depthwise_kernels.inc"
#undef EMBER_DW_BYTES
}  // namespace avx2
EMBER_TARGET_END()
EMBER_TARGET_BEGIN("avx512f,avx2,fma")
namespace avx512 {
#define EMBER_DW_BYTES 64
#include "kernels/cpu/nn_conv_depthwise_kernels.inc"
#undef EMBER_DW_BYTES
}  // namespace avx512
EMBER_TARGET_END()
#endif
}  // namespace dwk

namespace {

using dwk::Geom;
using dwk::Operands;
using dwk::Plan;
using dwk::Scratch;

// The channel loops compiled for the best instruction set of this CPU (EMBER_CPU_ISA caps it).
template <class T>
struct Kernels {
  void (*forward)(const Plan&, const Operands<T>&, Scratch<T>&, int64_t, int64_t);
  void (*backward)(const Plan&, const Operands<T>&, Scratch<T>&, int64_t, int64_t);
};

template <class T>
Kernels<T> kernels() {
#ifdef EMBER_DW_X86
  if (cpu_isa() >= Isa::Avx512)
    return {&dwk::avx512::forward_channels<T>, &dwk::avx512::backward_channels<T>};
  if (cpu_isa() >= Isa::Avx2)
    return {&dwk::avx2::forward_channels<T>, &dwk::avx2::backward_channels<T>};
#endif
  return {&dwk::base::forward_channels<T>, &dwk::base::backward_channels<T>};
}

Geom depthwise_geom(const char* op, const Tensor& x, const nn::ConvArgs& a) {
  return nn::make_window_geom(op, nn::trailing(x, a.k), a.ks, a.dl, a.pd, a.st);
}

// Channels split over the thread pool, each chunk with its own scratch; work is the rough
// number of multiply-adds per channel.
template <class F>
void over_channels(int64_t C, int64_t work, const F& f) {
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(work, 1));
  parallel_for(0, C, grain, f);
}

template <class T>
void forward_kernel(const Operands<T>& o, const Plan& pl) {
  const Kernels<T> kern = kernels<T>();
  over_channels(o.C, o.N * (o.Co / o.C) * pl.vol * pl.taps, [&](int64_t c0, int64_t c1) {
    Scratch<T> s;
    s.xbuf.assign(pl.nph * pl.PS, T(0));
    s.grid.assign(pl.out_span(pl.B), T(0));
    kern.forward(pl, o, s, c0, c1);
  });
}

template <class T>
void backward_kernel(const Operands<T>& o, const Plan& pl) {
  const Kernels<T> kern = kernels<T>();
  const int64_t mult = o.Co / o.C, K = pl.taps;
  const int64_t work = o.N * mult * K * pl.vol * ((o.gi ? pl.nph : 0) + (o.gw ? 1 : 0));
  over_channels(o.C, work, [&](int64_t c0, int64_t c1) {
    Scratch<T> s;
    if (o.gw) s.xbuf.assign(pl.nph * pl.PS, T(0));
    s.gobuf.assign(mult * pl.GS, T(0));
    if (o.gi) s.gbuf.assign(pl.nph * pl.PS, T(0));
    s.wph.assign(mult * K, T(0));
    if (o.gw) s.acc.assign(mult * K * 16, T(0));
    kern.backward(pl, o, s, c0, c1);
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
    Operands<T> o;
    o.x = x->data_as<T>();
    o.w = w->data_as<T>();
    o.b = b ? b->data_as<T>() : nullptr;
    o.out = out->data_as<T>();
    o.N = a.N, o.C = a.C, o.Co = a.Co;
    forward_kernel<T>(o, pl);
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
    if (!pgi && !pgw) return;
    Operands<T> o;
    o.x = x->data_as<T>();
    o.w = w->data_as<T>();
    o.go = go->data_as<T>();
    o.gi = pgi;
    o.gw = pgw;
    o.N = a.N, o.C = a.C, o.Co = a.Co;
    backward_kernel<T>(o, pl);
  });
  return {gi, gw};
}

}  // namespace cpu
}  // namespace ember
