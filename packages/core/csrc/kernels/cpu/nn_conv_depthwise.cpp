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
#include <cstdint>
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

// ---- float32 3x3 forward on AVX-512 ----------------------------------------------------------
//
// The common MobileNet layer (3x3, dilation 1, stride 1 or 2 along each dim, any padding) goes
// straight from the NCHW planes to the output, without the buffers above: each output row is
// computed 16 columns at a time with the 9 weights held in registers. A tap row is a masked load
// (stride 1 along the row) or the even / odd lanes of two loads (stride 2), so the zero padding
// at the row's ends is the masks' off lanes and input rows above or below the image are skipped
// whole: no branch per element.
#ifdef EMBER_DW_X86
struct Dw3 {
  int64_t H = 0, W = 0, OH = 0, OW = 0, sh = 1, sw = 1, ph = 0, pw = 0;
  // Per block of 16 output columns: the lanes to store, and the lanes to load, 3 masks per
  // block with stride 1 (the loads at base + kw, kw < 3), 4 with stride 2 (the low and high
  // 16 lanes of the loads at base and at base + 2), base being the input column of lane 0.
  std::vector<uint32_t> store_mask, load_mask;
};

Dw3 dw3_plan(const Geom& g) {
  Dw3 d;
  d.H = g.in[1], d.W = g.in[2], d.OH = g.out[1], d.OW = g.out[2];
  d.sh = g.st[1], d.sw = g.st[2], d.ph = g.pd[1], d.pw = g.pd[2];
  auto mask = [&](int64_t first_col, int64_t lanes) {
    uint32_t m = 0;
    for (int64_t e = 0; e < 16; ++e)
      if (e < lanes && first_col + e >= 0 && first_col + e < d.W) m |= 1u << e;
    return m;
  };
  for (int64_t j0 = 0; j0 < d.OW; j0 += 16) {
    const int64_t L = std::min<int64_t>(16, d.OW - j0), base = j0 * d.sw - d.pw;
    d.store_mask.push_back((1u << L) - 1u);
    if (d.sw == 1) {
      for (int64_t kw = 0; kw < 3; ++kw) d.load_mask.push_back(mask(base + kw, L));
    } else {
      for (int64_t shift = 0; shift <= 2; shift += 2) {
        d.load_mask.push_back(mask(base + shift, 2 * L));
        d.load_mask.push_back(mask(base + shift + 16, 2 * L - 16));
      }
    }
  }
  return d;
}

// True when dw3 runs this forward: float32, 2-d, 3x3, dilation 1, strides 1 or 2, one filter
// per channel or several, on an AVX-512 CPU.
bool dw3_applies(const Geom& g, ScalarType dt) {
  return dt == ScalarType::Float32 && cpu_isa() >= Isa::Avx512 && g.in[0] == 1 && g.out[0] == 1 &&
         g.ks[0] == 1 && g.ks[1] == 3 && g.ks[2] == 3 && g.dl[1] == 1 && g.dl[2] == 1 &&
         g.st[1] <= 2 && g.st[2] <= 2;
}

EMBER_TARGET_BEGIN("avx512f,avx2,fma")
namespace avx512 {

// Input column c of a row at row + c: lane 0 of a tap may sit left of the row (masked off, never
// read), so the address is formed without pointer arithmetic outside the array.
inline const float* at(const float* row, int64_t c) {
  return reinterpret_cast<const float*>(reinterpret_cast<uintptr_t>(row) +
                                        static_cast<uintptr_t>(c * 4));
}

// The load masks of one column block (see Dw3), kept in registers across its rows.
struct Dw3Masks {
  __mmask16 m[4];
};

// The taps kw = 0, 1, 2 of output columns [16 b, 16 b + 16) in input row `row`: the columns
// base + SW j + kw for lanes j, zero where outside the row.
template <int SW>
inline void dw3_taps(const Dw3Masks& m, const float* row, int64_t base, __m512 t[3]) {
  if (SW == 1) {
    t[0] = _mm512_maskz_loadu_ps(m.m[0], at(row, base));
    t[1] = _mm512_maskz_loadu_ps(m.m[1], at(row, base + 1));
    t[2] = _mm512_maskz_loadu_ps(m.m[2], at(row, base + 2));
  } else {
    // kw 0 and 1: the even and odd lanes of the 32 columns from base; kw 2: the even lanes of
    // the 32 from base + 2.
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd =
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512 lo = _mm512_maskz_loadu_ps(m.m[0], at(row, base));
    const __m512 hi = _mm512_maskz_loadu_ps(m.m[1], at(row, base + 16));
    const __m512 lo2 = _mm512_maskz_loadu_ps(m.m[2], at(row, base + 2));
    const __m512 hi2 = _mm512_maskz_loadu_ps(m.m[3], at(row, base + 18));
    t[0] = _mm512_permutex2var_ps(lo, even, hi);
    t[1] = _mm512_permutex2var_ps(lo, odd, hi);
    t[2] = _mm512_permutex2var_ps(lo2, even, hi2);
  }
}

// One output plane: out = bias + the 3x3 window sums of plane x with weights w (row-major).
// Eight output rows at a time (eight independent sums per column block, each input row loaded
// once for all of them); rows past the plane's end are computed and dropped.
template <int SH, int SW>
void dw3_plane(const Dw3& d, const float* x, const float* w, float bias, float* out) {
  constexpr int R = 8, IR = (R - 1) * SH + 3;  // output rows per pass, input rows they read
  __m512 wv[9];
  for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[t]);
  const __m512 bv = _mm512_set1_ps(bias);
  const int64_t nblk = static_cast<int64_t>(d.store_mask.size());
  for (int64_t oh0 = 0; oh0 < d.OH; oh0 += R) {
    const int64_t ih0 = oh0 * SH - d.ph;
    for (int64_t b = 0; b < nblk; ++b) {
      const int64_t base = b * 16 * SW - d.pw;
      Dw3Masks m;
      const uint32_t* lm = d.load_mask.data() + b * (SW == 1 ? 3 : 4);
      for (int k = 0; k < (SW == 1 ? 3 : 4); ++k) m.m[k] = static_cast<__mmask16>(lm[k]);
      __m512 acc[R];
      for (int r = 0; r < R; ++r) acc[r] = bv;
#pragma GCC unroll 24
      for (int i = 0; i < IR; ++i) {
        const int64_t ih = ih0 + i;
        if (ih < 0 || ih >= d.H) continue;
        __m512 t[3];
        dw3_taps<SW>(m, x + ih * d.W, base, t);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const int kh = i - r * SH;
          if (kh < 0 || kh > 2) continue;  // resolved at compile time
          acc[r] = _mm512_fmadd_ps(wv[kh * 3], t[0], acc[r]);
          acc[r] = _mm512_fmadd_ps(wv[kh * 3 + 1], t[1], acc[r]);
          acc[r] = _mm512_fmadd_ps(wv[kh * 3 + 2], t[2], acc[r]);
        }
      }
      const __mmask16 sm = static_cast<__mmask16>(d.store_mask[b]);
      for (int r = 0; r < R && oh0 + r < d.OH; ++r)
        _mm512_mask_storeu_ps(out + (oh0 + r) * d.OW + b * 16, sm, acc[r]);
    }
  }
}

using Dw3Plane = void (*)(const Dw3&, const float*, const float*, float, float*);
inline Dw3Plane dw3_kernel(const Dw3& d) {
  if (d.sh == 1) return d.sw == 1 ? &dw3_plane<1, 1> : &dw3_plane<1, 2>;
  return d.sw == 1 ? &dw3_plane<2, 1> : &dw3_plane<2, 2>;
}

// Channels-last (NHWC) 3x3: out[n, oh, ow, c] = b[c] + sum over the taps inside the image of
// w[c, kh, kw] x[n, ih, iw, c], 16 channels per vector (the last block masked) and up to eight
// output columns at a time. wt: the weights tap-major (9 rows of C). Rows [oh0, oh1) of
// sample x.
void dw3_nhwc_rows(const Dw3& d, int64_t C, const float* x, const float* wt, const float* b,
                   float* out, int64_t oh0, int64_t oh1) {
  const int64_t nblk = (C + 15) / 16;
  for (int64_t oh = oh0; oh < oh1; ++oh) {
    const int64_t ih0 = oh * d.sh - d.ph;
    const int64_t kh0 = std::max<int64_t>(0, -ih0), kh1 = std::min<int64_t>(3, d.H - ih0);
    for (int64_t cb = 0; cb < nblk; ++cb) {
      const int64_t c0 = cb * 16;
      const __mmask16 m = static_cast<__mmask16>(C - c0 >= 16 ? 0xFFFFu : (1u << (C - c0)) - 1u);
      const __m512 bv = b ? _mm512_maskz_loadu_ps(m, b + c0) : _mm512_setzero_ps();
      __m512 wv[9];
      for (int t = 0; t < 9; ++t) wv[t] = _mm512_maskz_loadu_ps(m, wt + t * C + c0);
      int64_t ow = 0;
      // Four columns whose windows lie inside the row: no test per tap.
      const int64_t first_full = (d.pw + d.sw - 1) / d.sw;  // iw0 = ow * sw - pw >= 0
      const int64_t last_full = (d.W - 3 + d.pw) / d.sw;    // iw0 + 2 <= W - 1
      auto one = [&](int64_t o) {
        const int64_t iw0 = o * d.sw - d.pw;
        const int64_t kw0 = std::max<int64_t>(0, -iw0), kw1 = std::min<int64_t>(3, d.W - iw0);
        __m512 acc = bv;
        for (int64_t kh = kh0; kh < kh1; ++kh) {
          const float* row = x + ((ih0 + kh) * d.W) * C + c0;
          for (int64_t kw = kw0; kw < kw1; ++kw)
            acc = _mm512_fmadd_ps(wv[kh * 3 + kw], _mm512_maskz_loadu_ps(m, row + (iw0 + kw) * C),
                                  acc);
        }
        _mm512_mask_storeu_ps(out + (oh * d.OW + o) * C + c0, m, acc);
      };
      for (; ow < d.OW && ow < first_full; ++ow) one(ow);
      // K columns at a time (K independent sums), each input vector of a row loaded once for all
      // the taps that read it; unmasked moves for whole blocks of channels.
      auto block = [&](auto k_c, auto sw_c, auto full) {
        constexpr int K = decltype(k_c)::value, SW = decltype(sw_c)::value;
        constexpr int NI = (K - 1) * SW + 3;  // input columns the K windows span
        for (; ow + K <= d.OW && ow + K - 1 <= last_full; ow += K) {
          __m512 acc[K];
          for (int j = 0; j < K; ++j) acc[j] = bv;
#pragma GCC unroll 3
          for (int kh = 0; kh < 3; ++kh) {  // unrolled: the weights stay in registers
            if (kh < kh0 || kh >= kh1) continue;
            const float* row = x + ((ih0 + kh) * d.W + ow * SW - d.pw) * C + c0;
            __m512 in[NI];
#pragma GCC unroll 24
            for (int i = 0; i < NI; ++i)
              in[i] = full ? _mm512_loadu_ps(row + i * C) : _mm512_maskz_loadu_ps(m, row + i * C);
#pragma GCC unroll 3
            for (int kw = 0; kw < 3; ++kw)
#pragma GCC unroll 8
              for (int j = 0; j < K; ++j)
                acc[j] = _mm512_fmadd_ps(wv[kh * 3 + kw], in[j * SW + kw], acc[j]);
          }
          for (int j = 0; j < K; ++j) {
            float* dst = out + (oh * d.OW + ow + j) * C + c0;
            if (full)
              _mm512_storeu_ps(dst, acc[j]);
            else
              _mm512_mask_storeu_ps(dst, m, acc[j]);
          }
        }
      };
      auto blocks = [&](auto sw_c) {
        using I8 = std::integral_constant<int, 8>;
        using I4 = std::integral_constant<int, 4>;
        using I2 = std::integral_constant<int, 2>;
        using I1 = std::integral_constant<int, 1>;
        if (m == 0xFFFF) {
          block(I8{}, sw_c, std::true_type{});
          block(I4{}, sw_c, std::true_type{});
          block(I2{}, sw_c, std::true_type{});
          block(I1{}, sw_c, std::true_type{});
        } else {
          block(I8{}, sw_c, std::false_type{});
          block(I4{}, sw_c, std::false_type{});
          block(I2{}, sw_c, std::false_type{});
          block(I1{}, sw_c, std::false_type{});
        }
      };
      if (d.sw == 1)
        blocks(std::integral_constant<int, 1>{});
      else
        blocks(std::integral_constant<int, 2>{});
      for (; ow < d.OW; ++ow) one(ow);
    }
  }
}

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

#ifdef EMBER_DW_X86
// dwk::dw3_plane over every (sample, output channel) plane, shared out over the thread pool.
void dw3_forward(const Tensor& x, const Tensor& w, const Tensor& b, const nn::ConvArgs& a,
                 const dwk::Dw3& d, const Tensor& out) {
  const float* px = x->data_as<float>();
  const float* pw = w->data_as<float>();
  const float* pb = b ? b->data_as<float>() : nullptr;
  float* po = out->data_as<float>();
  const int64_t mult = a.Co / a.C, in_plane = d.H * d.W, out_plane = d.OH * d.OW;
  const int64_t grain =
      std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(out_plane * 9, 1));
  const dwk::avx512::Dw3Plane kern = dwk::avx512::dw3_kernel(d);
  parallel_for(0, a.N * a.Co, grain, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t n = p / a.Co, oc = p % a.Co, c = oc / mult;
      kern(d, px + (n * a.C + c) * in_plane, pw + oc * 9, pb ? pb[oc] : 0.0f, po + p * out_plane);
    }
  });
}
#endif

}  // namespace

bool depthwise_conv_applies(const nn::ConvArgs& a, bool transposed) {
  return !transposed && a.k >= 1 && a.k <= 3 && a.G > 1 && a.G == a.C && a.Co % a.C == 0;
}

Tensor depthwise_conv(const Tensor& x, const Tensor& w, const Tensor& b, const nn::ConvArgs& a) {
  const char* op = "convolution";
  const Geom geom = depthwise_geom(op, x, a);
  DimVector shape{a.N, a.Co};
  for (int64_t d = 0; d < a.k; ++d) shape.push_back(geom.out[3 - a.k + d]);
  Tensor out = ember::empty(shape, x->dtype(), x->device());
  if (out->numel() == 0) return out;
#ifdef EMBER_DW_X86
  if (dwk::dw3_applies(geom, x->dtype())) {
    dw3_forward(x, w, b, a, dwk::dw3_plan(geom), out);
    return out;
  }
#endif
  const Plan pl(geom, a.N);
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

Tensor depthwise_conv_channels_last(const Tensor& input, const Tensor& weight, const Tensor& bias,
                                    const nn::ConvArgs& a) {
#ifdef EMBER_DW_X86
  if (a.k != 2 || a.Co != a.C || input->dtype() != ScalarType::Float32 ||
      weight->dtype() != ScalarType::Float32 || (bias && bias->dtype() != ScalarType::Float32))
    return Tensor();
  const int64_t N = a.N, C = a.C, H = input->size(2), W = input->size(3);
  const DimVector& st = input->strides();
  if (C < 2 || H * W < 2 || st[1] != 1 || st[3] != C || st[2] != W * C ||
      (N > 1 && st[0] != H * W * C))
    return Tensor();
  const char* op = "convolution";
  const Geom geom = depthwise_geom(op, input, a);
  if (!dwk::dw3_applies(geom, ScalarType::Float32)) return Tensor();
  const dwk::Dw3 d = dwk::dw3_plan(geom);
  // The output channels-last too (as PyTorch's for such an input).
  Tensor out = empty_strided({N, C, d.OH, d.OW}, {d.OH * d.OW * C, 1, d.OW * C, C},
                             ScalarType::Float32, input->device());
  if (out->numel() == 0) return out;
  const Tensor w = nn::contig(weight), b = bias ? nn::contig(bias) : bias;
  std::vector<float> wt(9 * C);  // tap-major
  const float* pw = w->data_as<float>();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t t = 0; t < 9; ++t) wt[t * C + c] = pw[c * 9 + t];
  const float* px = input->data_as<float>();
  const float* pb = b ? b->data_as<float>() : nullptr;
  float* po = out->data_as<float>();
  const int64_t grain =
      std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(d.OW * C * 9, 1));
  parallel_for(0, N * d.OH, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1;) {
      const int64_t n = r / d.OH, oh0 = r % d.OH, oh1 = std::min(d.OH, oh0 + (r1 - r));
      dwk::avx512::dw3_nhwc_rows(d, C, px + n * H * W * C, wt.data(), pb, po + n * d.OH * d.OW * C,
                                 oh0, oh1);
      r += oh1 - oh0;
    }
  });
  return out;
#else
  (void)input, (void)weight, (void)bias, (void)a;
  return Tensor();
#endif
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
