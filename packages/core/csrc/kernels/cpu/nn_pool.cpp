// CPU kernels of max / average pooling (fixed windows and adaptive ones) over the last 1 to 3
// dims of the input, and their backward passes. Every leading dim is a "plane" pooled on its
// own; planes run in parallel. Each output position reads a window given per spatial dim as an
// arithmetic run of input positions (clipped to the input), so one loop serves every variant.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/cpu/row_sums.h"
#include "kernels/parallel.h"
#include "kernels/pool_rules.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

struct Window {
  int64_t first = 0, count = 0, step = 1;  // input positions first + i * step, i < count
  int64_t divisor = 1;                     // this dim's share of the averaging divisor
};

// Windows of every spatial dim (padded to 3 dims at the front) for every output index.
struct PoolPlan {
  int64_t k = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  std::vector<Window> win[3];
  int64_t planes = 1;
  DimVector out_shape;
  int64_t in_numel() const { return in[0] * in[1] * in[2]; }
  int64_t out_numel() const { return out[0] * out[1] * out[2]; }
};

// A plan over the shared sizes (kernels/pool_rules.h); windows are filled in by the caller.
PoolPlan make_plan(const nn::PoolDims& d) {
  PoolPlan p;
  p.k = d.k;
  p.planes = d.planes;
  p.out_shape = d.out_shape;
  for (int64_t j = 0; j < 3; ++j) {
    p.in[j] = d.in[j];
    p.out[j] = d.out[j];
  }
  for (int64_t j = 0; j < 3 - d.k; ++j) p.win[j].push_back(Window{0, 1, 1, 1});
  return p;
}

// Whether the pooled output has no elements (some dim of it is 0).
bool no_outputs(const nn::PoolDims& pd) {
  for (int64_t s : pd.out_shape)
    if (s == 0) return true;
  return false;
}

// Fixed windows: kernel, stride (empty = kernel), padding, dilation, ceil_mode.
PoolPlan fixed_plan(const char* op, const DimVector& sizes, const DimVector& kernel_size,
                    const DimVector& stride, const DimVector& padding, const DimVector& dilation,
                    bool ceil_mode, bool count_include_pad) {
  const nn::PoolDims pd =
      nn::fixed_pool_dims(op, sizes, kernel_size, stride, padding, dilation, ceil_mode);
  PoolPlan p = make_plan(pd);
  if (no_outputs(pd)) return p;  // no window is ever visited: none is planned
  for (int64_t j = 3 - pd.k; j < 3; ++j) {
    const int64_t in = pd.in[j], ks = pd.ks[j], st = pd.st[j], pad = pd.pd[j], dl = pd.dl[j];
    for (int64_t i = 0; i < pd.out[j]; ++i) {
      const int64_t start = i * st - pad;
      // Kernel taps [lo, hi) whose position start + tap * dilation lies in [0, in), computed
      // directly (a kernel of 2**62 taps must not be walked tap by tap). start > -ks and
      // start < in, so none of this overflows.
      const int64_t lo = start >= 0 ? 0 : std::min(ks, (-start + dl - 1) / dl);
      const int64_t hi = std::max(lo, std::min(ks, (in - 1 - start) / dl + 1));
      Window w{start + lo * dl, hi - lo, dl, hi - lo};
      if (count_include_pad)  // the window clipped to the padded input
        w.divisor = std::min(start + ks, in + pad) - start;
      p.win[j].push_back(w);
    }
  }
  return p;
}

PoolPlan adaptive_plan(const char* op, const DimVector& sizes, const DimVector& output_size,
                       ScalarType dtype) {
  const nn::PoolDims pd = nn::adaptive_pool_dims(op, sizes, output_size);
  // The whole output must fit a storage before a window is planned for each of its positions.
  nn::check_output_shape(pd.out_shape, dtype, op);
  PoolPlan p = make_plan(pd);
  // An empty output (a zero batch or channel dim) visits no window: planning 2**62 of them
  // would only fail (std::length_error) or waste memory.
  if (no_outputs(pd)) return p;
  for (int64_t j = 3 - pd.k; j < 3; ++j) {
    const int64_t in = pd.in[j], o = pd.out[j];
    try {
      p.win[j].reserve(o);
    } catch (const std::exception&) {  // bad_alloc, or length_error past the vector's max_size
      EMBER_FAIL(OutOfMemory, op, ": out of memory planning the windows of an output of size ",
                 shape_str(pd.out_shape));
    }
    for (int64_t i = 0; i < o; ++i) {
      const int64_t a = (i * in) / o, b = ((i + 1) * in + o - 1) / o;
      p.win[j].push_back(Window{a, b - a, 1, b - a});
    }
  }
  return p;
}

template <class F>
void for_each_plane(const PoolPlan& p, const F& f) {
  // Work per plane: its outputs, or its input when that is larger (global pooling reads a whole
  // plane for one output).
  const int64_t work = std::max<int64_t>(std::max(p.out_numel() * 4, p.in_numel()), 1);
  parallel_for(0, p.planes, std::max<int64_t>(1, kPointwiseGrain / work),
               [&](int64_t b, int64_t e) {
                 for (int64_t i = b; i < e; ++i) f(i);
               });
}

// Visits every input position (flat index in the plane) of output (od, oh, ow)'s window.
template <class F>
inline void visit_window(const PoolPlan& p, int64_t od, int64_t oh, int64_t ow, const F& f) {
  const Window &a = p.win[0][od], &b = p.win[1][oh], &c = p.win[2][ow];
  for (int64_t i = 0; i < a.count; ++i) {
    const int64_t id = a.first + i * a.step;
    for (int64_t j = 0; j < b.count; ++j) {
      const int64_t base = (id * p.in[1] + b.first + j * b.step) * p.in[2];
      for (int64_t l = 0; l < c.count; ++l) f(base + c.first + l * c.step);
    }
  }
}

// take ? a : b through bit masks. Which element of a window wins is data-dependent and
// unpredictable; as a branch (what compilers make of `?:` here) the mispredictions made max
// pooling 3x slower.
template <class V>
inline V select_bits(bool take, V a, V b) {
  using U = std::conditional_t<sizeof(V) == 8, uint64_t, uint32_t>;
  static_assert(sizeof(V) == sizeof(U), "select_bits: 4- or 8-byte values");
  U ua, ub;
  std::memcpy(&ua, &a, sizeof(V));
  std::memcpy(&ub, &b, sizeof(V));
  const U mask = U(0) - static_cast<U>(take);
  const U r = (ua & mask) | (ub & ~mask);
  V out;
  std::memcpy(&out, &r, sizeof(V));
  return out;
}

// Whether v is NaN (false for integers, without comparing an int with itself).
template <class A>
inline bool is_nan_value(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return v != v;
  } else {
    return false;
  }
}

// The max of output (od, oh, ow)'s window of plane xp and its flat index: elements in window
// order (the first maximum wins, and the last NaN, as torch).
template <class T>
inline void max_window(const PoolPlan& p, const T* xp, int64_t od, int64_t oh, int64_t ow, T* out,
                       int64_t* out_arg) {
  using A = opmath_t<T>;
  A best = -std::numeric_limits<A>::infinity();
  int64_t arg = -1;
  visit_window(p, od, oh, ow, [&](int64_t i) {
    const A v = static_cast<A>(xp[i]);
    const bool take = (arg < 0) | (v > best) | is_nan_value(v);
    if constexpr (sizeof(A) == 4 || sizeof(A) == 8) {
      best = select_bits(take, v, best);
    } else if (take) {  // int8 / int16 / uint8
      best = v;
    }
    arg = select_bits(take, i, arg);
  });
  *out = static_cast<T>(best);
  *out_arg = arg;
}

// The output columns [lo, hi) whose windows are whole (not clipped by padding) and start
// `stride` apart: all of them without padding, all but a few at the edges with it.
bool interior(const std::vector<Window>& w, int64_t& lo, int64_t& hi, int64_t& stride) {
  int64_t full = 0;
  for (const Window& x : w) full = std::max(full, x.count);
  const int64_t n = static_cast<int64_t>(w.size());
  lo = 0;
  while (lo < n && w[lo].count != full) ++lo;
  hi = lo + 1;
  while (hi < n && w[hi].count == full) ++hi;
  if (lo >= n || full == 0) return false;
  stride = hi - lo > 1 ? w[lo + 1].first - w[lo].first : 1;
  for (int64_t i = lo; i < hi; ++i)
    if (w[i].step != w[lo].step || w[i].first != w[lo].first + (i - lo) * stride) return false;
  return true;
}

// Max pooling of one plane: each output row's columns [lo, hi) (interior(), stride sw) are
// built from its window's input rows (every (depth, row) pair of a 3-d window), every element
// updating all of those outputs at once, so consecutive outputs are independent work instead of
// one dependent chain each; the columns outside (clipped windows at the edges) go window by
// window. Elements are visited in the same order as max_window (window depth, row, then
// column), so ties (the first maximum wins) and NaNs (the last one wins) resolve identically.
template <class T>
void max_pool_rows(const PoolPlan& p, const T* xp, T* po, int64_t* pi, int64_t lo, int64_t hi,
                   int64_t sw) {
  const int64_t H = p.in[1], W = p.in[2], OH = p.out[1], OW = p.out[2];
  const Window& c = p.win[2][lo];
  for (int64_t od = 0; od < p.out[0]; ++od) {
    const Window& z = p.win[0][od];
    for (int64_t oh = 0; oh < OH; ++oh) {
      T* best = po + (od * OH + oh) * OW;
      int64_t* arg = pi + (od * OH + oh) * OW;
      for (int64_t ow = 0; ow < lo; ++ow) max_window(p, xp, od, oh, ow, best + ow, arg + ow);
      for (int64_t ow = hi; ow < OW; ++ow) max_window(p, xp, od, oh, ow, best + ow, arg + ow);
      const Window& a = p.win[1][oh];
      bool first = true;
      for (int64_t t = 0; t < z.count; ++t) {
        const int64_t d = z.first + t * z.step;
        for (int64_t i = 0; i < a.count; ++i) {
          const int64_t h = a.first + i * a.step;
          for (int64_t j = 0; j < c.count; ++j) {
            const int64_t off = (d * H + h) * W + c.first + j * c.step;
            const T* x = xp + off;
            if (first) {
              first = false;
              for (int64_t ow = lo; ow < hi; ++ow) {
                best[ow] = x[(ow - lo) * sw];
                arg[ow] = off + (ow - lo) * sw;
              }
              continue;
            }
            for (int64_t ow = lo; ow < hi; ++ow) {
              const T v = x[(ow - lo) * sw], b = best[ow];
              const bool take = (v > b) | (v != v);  // a NaN wins (the last one, as torch)
              best[ow] = select_bits(take, v, b);
              arg[ow] = select_bits(take, off + (ow - lo) * sw, arg[ow]);
            }
          }
        }
      }
    }
  }
}

// max_pool_rows over every plane when it applies (float32/float64, whole windows in at least
// some columns).
template <class T>
bool max_pool_rows_fast(const PoolPlan& p, const T* px, T* po, int64_t* pi) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    int64_t lo = 0, hi = 0, sw = 0;
    if (!interior(p.win[2], lo, hi, sw)) return false;
    const int64_t P = p.in_numel(), Q = p.out_numel();
    for_each_plane(p, [&](int64_t pl) {
      max_pool_rows(p, px + pl * P, po + pl * Q, pi + pl * Q, lo, hi, sw);
    });
    return true;
  } else {
    return false;
  }
}

bool is_global(const PoolPlan& p);  // (below)

// ---- channels-last (N, *spatial, C) pooling ------------------------------------------------
// A channels-last input pooled in place of its layout: each output position's window is read
// as rows of C adjacent channels (vectorized across channels), and the result is written in
// the channels-last layout it is returned in. Transposing to planes and back would cost several
// times the pooling itself.

// The dense channels-last view of self when pooling it natively pays off: float32/float64,
// batched (N, C, *spatial) and not already contiguous; nullptr otherwise.
Tensor channels_last_input(const Tensor& self, const PoolPlan& p, bool cl_out) {
  if (!cl_out || self->dim() != p.k + 2 || self->is_contiguous() || !self->device().is_cpu() ||
      (self->dtype() != ScalarType::Float32 && self->dtype() != ScalarType::Float64))
    return Tensor();
  return nn::as_channels_last(self, true);  // dense channels-last (a copy only if it was not)
}

#if defined(__GNUC__) && defined(__x86_64__)
#define EMBER_POOL_AVX2 1  // the channel loops get an AVX2 copy, used when the CPU has it
#else
#define EMBER_POOL_AVX2 0
#endif

// best[c] = max(best[c], x[c]) (a NaN wins), tap[c] = t where x[c] was taken. The tap number
// has the width of T, so the select vectorizes (a float max with an int64 index did not).
#define EMBER_MAX_UPDATE_BODY             \
  for (int64_t c = 0; c < C; ++c) {       \
    const T v = x[c], b = best[c];        \
    const bool take = (v > b) | (v != v); \
    best[c] = take ? v : b;               \
    tap[c] = take ? t : tap[c];           \
  }
// acc[c] += x[c] (the same additions in every copy: the results are identical).
#define EMBER_ADD_ROW_BODY \
  for (int64_t c = 0; c < C; ++c) acc[c] += static_cast<A>(x[c]);

template <class T, class I>
void max_update_base(T* __restrict best, I* __restrict tap, const T* __restrict x, I t, int64_t C) {
  EMBER_MAX_UPDATE_BODY
}
template <class A, class T>
void add_row_base(A* __restrict acc, const T* __restrict x, int64_t C) {
  EMBER_ADD_ROW_BODY
}
#if EMBER_POOL_AVX2
template <class T, class I>
__attribute__((target("avx2"))) void max_update_avx2(T* __restrict best, I* __restrict tap,
                                                     const T* __restrict x, I t, int64_t C) {
  EMBER_MAX_UPDATE_BODY
}
template <class A, class T>
__attribute__((target("avx2"))) void add_row_avx2(A* __restrict acc, const T* __restrict x,
                                                  int64_t C) {
  EMBER_ADD_ROW_BODY
}
#endif
#undef EMBER_MAX_UPDATE_BODY
#undef EMBER_ADD_ROW_BODY

bool pool_avx2() {
#if EMBER_POOL_AVX2
  static const bool avx2 = cpu_isa() >= Isa::Avx2;
  return avx2;
#else
  return false;
#endif
}

template <class T, class I>
inline void max_update(bool avx2, T* best, I* tap, const T* x, I t, int64_t C) {
#if EMBER_POOL_AVX2
  if (avx2) return max_update_avx2(best, tap, x, t, C);
#endif
  (void)avx2;
  max_update_base(best, tap, x, t, C);
}

template <class A, class T>
inline void add_row(bool avx2, A* acc, const T* x, int64_t C) {
#if EMBER_POOL_AVX2
  if (avx2) return add_row_avx2(acc, x, C);
#endif
  (void)avx2;
  add_row_base(acc, x, C);
}

template <class T>
void max_pool_channels_last(const PoolPlan& p, int64_t N, int64_t C, const T* px, T* po,
                            int64_t* pi) {
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  const bool avx2 = pool_avx2();
  const int64_t P = p.in_numel();
  const int64_t Q = p.out_numel(), OHW = p.out[1] * p.out[2];
  int64_t taps = 1;
  for (int64_t j = 0; j < 3; ++j) taps *= std::max<int64_t>(p.win[j][0].count, 1);
  const int64_t work = std::max<int64_t>(1, C * std::max<int64_t>(taps, 4));
  parallel_for(0, N * Q, std::max<int64_t>(1, kPointwiseGrain / work), [&](int64_t b, int64_t e) {
    std::vector<I> tap(static_cast<size_t>(C));
    std::vector<int64_t> pos;  // the window's input positions, in window order
    for (int64_t r = b; r < e; ++r) {
      const int64_t n = r / Q, q = r % Q;
      const int64_t od = q / OHW, oh = (q / p.out[2]) % p.out[1], ow = q % p.out[2];
      pos.clear();
      visit_window(p, od, oh, ow, [&](int64_t i) { pos.push_back(i); });
      T* best = po + r * C;
      const T* xn = px + n * P * C;
      // Window order as max_window, so ties (the first maximum) and NaNs (the last) match it.
      std::copy(xn + pos[0] * C, xn + (pos[0] + 1) * C, best);
      std::fill(tap.begin(), tap.end(), I(0));
      for (size_t t = 1; t < pos.size(); ++t)
        max_update(avx2, best, tap.data(), xn + pos[t] * C, static_cast<I>(t), C);
      int64_t* arg = pi + r * C;
      for (int64_t c = 0; c < C; ++c) arg[c] = pos[static_cast<size_t>(tap[c])];
    }
  });
}

// The most input elements any output's window reads.
int64_t max_window_elems(const PoolPlan& p) {
  int64_t n = 1;
  for (int64_t j = 0; j < 3; ++j) {
    int64_t m = 0;
    for (const Window& w : p.win[j]) m = std::max(m, w.count);
    n *= m;
  }
  return n;
}

template <class T>
void avg_pool_channels_last(const PoolPlan& p, int64_t N, int64_t C, const T* px, T* po,
                            bool count_include_pad, std::optional<int64_t> divisor_override) {
  using A = opmath_t<T>;
  const bool avx2 = pool_avx2();
  const int64_t P = p.in_numel();
  if (is_global(p)) {
    // One output per (sample, channel): the P rows of a sample summed across channels, in
    // blocks of 64 rows of A added in double (so long planes keep their accuracy).
    const int64_t div = divisor_override ? *divisor_override
                        : count_include_pad
                            ? p.win[0][0].divisor * p.win[1][0].divisor * p.win[2][0].divisor
                            : P;
    parallel_for(0, N, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(P * C, 1)),
                 [&](int64_t b, int64_t e) {
                   std::vector<A> acc(static_cast<size_t>(C));
                   std::vector<double> total(static_cast<size_t>(C));
                   for (int64_t n = b; n < e; ++n) {
                     const T* xn = px + n * P * C;
                     std::fill(total.begin(), total.end(), 0.0);
                     for (int64_t r0 = 0; r0 < P; r0 += 64) {
                       std::fill(acc.begin(), acc.end(), A(0));
                       for (int64_t r = r0; r < std::min(P, r0 + 64); ++r)
                         add_row(avx2, acc.data(), xn + r * C, C);
                       for (int64_t c = 0; c < C; ++c) total[c] += static_cast<double>(acc[c]);
                     }
                     for (int64_t c = 0; c < C; ++c)
                       po[n * C + c] = static_cast<T>(total[c] / static_cast<double>(div));
                   }
                 });
    return;
  }
  const int64_t Q = p.out_numel(), OHW = p.out[1] * p.out[2];
  int64_t taps = 1;
  for (int64_t j = 0; j < 3; ++j) taps *= std::max<int64_t>(p.win[j][0].count, 1);
  const int64_t work = std::max<int64_t>(1, C * std::max<int64_t>(taps, 4));
  parallel_for(0, N * Q, std::max<int64_t>(1, kPointwiseGrain / work), [&](int64_t b, int64_t e) {
    std::vector<A> acc(static_cast<size_t>(C));
    for (int64_t r = b; r < e; ++r) {
      const int64_t n = r / Q, q = r % Q;
      const int64_t od = q / OHW, oh = (q / p.out[2]) % p.out[1], ow = q % p.out[2];
      const T* xn = px + n * P * C;
      std::fill(acc.begin(), acc.end(), A(0));
      visit_window(p, od, oh, ow, [&](int64_t i) { add_row(avx2, acc.data(), xn + i * C, C); });
      const int64_t div = divisor_override ? *divisor_override
                          : count_include_pad
                              ? p.win[0][od].divisor * p.win[1][oh].divisor * p.win[2][ow].divisor
                              : p.win[0][od].count * p.win[1][oh].count * p.win[2][ow].count;
      T* o = po + r * C;
      for (int64_t c = 0; c < C; ++c) o[c] = static_cast<T>(acc[c] / static_cast<A>(div));
    }
  });
}

// max pooling's input gradient in the channels-last layout: gi (N, P positions, C) gets each
// grad_output (N, Q, C) element added at its index's position. Samples run in parallel (two
// outputs of one sample may scatter into one input element).
template <class T>
void max_unpool_channels_last(const char* op, const T* pg, const int64_t* pi, T* po, int64_t N,
                              int64_t C, int64_t P, int64_t Q) {
  std::fill(po, po + N * P * C, T(0));
  parallel_for(0, N, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(Q * C, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t n = b; n < e; ++n) {
                   T* on = po + n * P * C;
                   for (int64_t q = n * Q; q < (n + 1) * Q; ++q) {
                     const int64_t* iq = pi + q * C;
                     const T* gq = pg + q * C;
                     for (int64_t c = 0; c < C; ++c) {
                       const int64_t i = iq[c];
                       EMBER_CHECK_KIND(i >= 0 && i < P, Index, op, ": index ", i,
                                        " is out of bounds for an input plane of ", P, " elements");
                       on[i * C + c] += gq[c];
                     }
                   }
                 }
               });
}

// integers: whether integer input is taken (fixed windows, as PyTorch's max_pool2d/3d; its
// adaptive max pooling is floating-only).
std::tuple<Tensor, Tensor> max_pool_run(const char* op, const Tensor& self, const PoolPlan& p,
                                        bool integers, bool cl_out) {
  EMBER_CHECK_KIND(is_floating(self->dtype()) || (integers && is_integral(self->dtype(), false)),
                   DtypeNotImplemented, op, ": expected a floating-point",
                   integers ? " or integer" : "", " input, got ", dtype_name(self->dtype()));
  // (float32 numbers a window's taps in int32: windows past that take the planar path)
  if (Tensor xc = max_window_elems(p) < (int64_t{1} << 31) ? channels_last_input(self, p, cl_out)
                                                           : Tensor()) {
    const DimVector st = channels_last_strides(p.out_shape);
    Tensor out = ember::empty_strided(p.out_shape, st, xc->dtype(), xc->device());
    Tensor idx = ember::empty_strided(p.out_shape, st, ScalarType::Int64, xc->device());
    if (out->numel() == 0) return {out, idx};
    const int64_t N = self->size(0), C = self->size(1);
    if (xc->dtype() == ScalarType::Float32)
      max_pool_channels_last(p, N, C, xc->data_as<float>(), out->data_as<float>(),
                             idx->data_as<int64_t>());
    else
      max_pool_channels_last(p, N, C, xc->data_as<double>(), out->data_as<double>(),
                             idx->data_as<int64_t>());
    return {out, idx};
  }
  Tensor x = nn::contig(self);
  Tensor out = ember::empty(p.out_shape, x->dtype(), x->device());
  Tensor idx = ember::empty(p.out_shape, ScalarType::Int64, x->device());
  if (out->numel() == 0) return {out, idx};
  EMBER_DISPATCH_NUMERIC(x->dtype(), op, [&] {
    using T = scalar_t;
    const T* px = x->data_as<T>();
    T* po = out->data_as<T>();
    int64_t* pi = idx->data_as<int64_t>();
    const int64_t P = p.in_numel(), Q = p.out_numel();
    if (max_pool_rows_fast(p, px, po, pi)) return;
    for_each_plane(p, [&](int64_t pl) {
      const T* xp = px + pl * P;
      int64_t q = pl * Q;
      for (int64_t od = 0; od < p.out[0]; ++od)
        for (int64_t oh = 0; oh < p.out[1]; ++oh)
          for (int64_t ow = 0; ow < p.out[2]; ++ow, ++q)
            max_window(p, xp, od, oh, ow, po + q, pi + q);
    });
  });
  return {out, idx};
}

// The sum of r[0 .. n): 8 independent partial sums (vectorized), not one serial chain.
template <class A, class T>
inline A sum_run(const T* r, int64_t n) {
  A lane[8] = {};
  int64_t l = 0;
  for (; l + 8 <= n; l += 8)
    for (int u = 0; u < 8; ++u) lane[u] += static_cast<A>(r[l + u]);
  A sum = 0;
  for (; l < n; ++l) sum += static_cast<A>(r[l]);
  for (int u = 0; u < 8; ++u) sum += lane[u];
  return sum;
}

// Whether every output window is its whole plane (global pooling: a single output per plane).
bool is_global(const PoolPlan& p) {
  for (int64_t j = 0; j < 3; ++j) {
    if (p.out[j] != 1 || p.win[j].size() != 1) return false;
    const Window& w = p.win[j][0];
    if (w.first != 0 || w.count != p.in[j] || (w.step != 1 && w.count > 1)) return false;
  }
  return true;
}

// Global average pooling: each plane's sum over div, planes summed in blocks (row_sums).
template <class T>
void global_avg_pool(const PoolPlan& p, const T* px, T* po, int64_t div) {
  using A = opmath_t<T>;
  const int64_t P = p.in_numel();
  const int64_t grain = std::max<int64_t>(8, kPointwiseGrain / std::max<int64_t>(P, 1));
  parallel_for(0, p.planes, grain, [&](int64_t b, int64_t e) {
    constexpr int64_t kBlock = 256;
    A sums[kBlock];
    for (int64_t c = b; c < e; c += kBlock) {
      const int64_t m = std::min(kBlock, e - c);
      row_sums<T, A>(px + c * P, P, P, m, sums);
      for (int64_t i = 0; i < m; ++i) po[c + i] = static_cast<T>(sums[i] / static_cast<A>(div));
    }
  });
}

// Average pooling of int64 input, as PyTorch's: the window's sum wraps around like int64
// arithmetic and is divided with truncation toward zero.
void avg_pool_int64(const PoolPlan& p, const int64_t* px, int64_t* po, bool count_include_pad,
                    std::optional<int64_t> divisor_override) {
  const int64_t P = p.in_numel(), Q = p.out_numel();
  for_each_plane(p, [&](int64_t pl) {
    const int64_t* xp = px + pl * P;
    int64_t q = pl * Q;
    for (int64_t od = 0; od < p.out[0]; ++od)
      for (int64_t oh = 0; oh < p.out[1]; ++oh)
        for (int64_t ow = 0; ow < p.out[2]; ++ow, ++q) {
          uint64_t sum = 0;  // unsigned: overflow wraps (defined), as int64 sums do in PyTorch
          visit_window(p, od, oh, ow, [&](int64_t i) { sum += static_cast<uint64_t>(xp[i]); });
          const int64_t div =
              divisor_override ? *divisor_override
              : count_include_pad
                  ? p.win[0][od].divisor * p.win[1][oh].divisor * p.win[2][ow].divisor
                  : p.win[0][od].count * p.win[1][oh].count * p.win[2][ow].count;
          const auto s = static_cast<int64_t>(sum);
          // INT64_MIN / -1 overflows: negate through unsigned arithmetic instead.
          po[q] = div == -1 ? static_cast<int64_t>(0 - sum) : s / div;
        }
  });
}

// int64_ok: fixed-window pooling takes int64 input (as PyTorch's); adaptive pooling does not.
Tensor avg_pool_run(const char* op, const Tensor& self, const PoolPlan& p, bool count_include_pad,
                    std::optional<int64_t> divisor_override, bool cl_out, bool int64_ok = false) {
  const bool int64 = int64_ok && self->dtype() == ScalarType::Int64;
  EMBER_CHECK_KIND(is_floating(self->dtype()) || int64, DtypeNotImplemented, op,
                   ": expected a floating-point", int64_ok ? " or int64" : "", " input, got ",
                   dtype_name(self->dtype()));
  // Windows of fewer than 16 elements: the planar loop below sums those one by one in window
  // order too, so both layouts give the same bits (larger windows it sums in lanes).
  if (Tensor xc = max_window_elems(p) < 16 || is_global(p) ? channels_last_input(self, p, cl_out)
                                                           : Tensor()) {
    Tensor out = ember::empty_strided(p.out_shape, channels_last_strides(p.out_shape), xc->dtype(),
                                      xc->device());
    if (out->numel() == 0) return out;
    const int64_t N = self->size(0), C = self->size(1);
    if (xc->dtype() == ScalarType::Float32)
      avg_pool_channels_last(p, N, C, xc->data_as<float>(), out->data_as<float>(),
                             count_include_pad, divisor_override);
    else
      avg_pool_channels_last(p, N, C, xc->data_as<double>(), out->data_as<double>(),
                             count_include_pad, divisor_override);
    return out;
  }
  Tensor x = nn::contig(self);
  Tensor out = ember::empty(p.out_shape, x->dtype(), x->device());
  if (out->numel() == 0) return out;
  if (int64) {
    avg_pool_int64(p, x->data_as<int64_t>(), out->data_as<int64_t>(), count_include_pad,
                   divisor_override);
    return out;
  }
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* px = x->data_as<T>();
    T* po = out->data_as<T>();
    const int64_t P = p.in_numel(), Q = p.out_numel();
    if (is_global(p)) {
      const int64_t div = divisor_override ? *divisor_override
                          : count_include_pad
                              ? p.win[0][0].divisor * p.win[1][0].divisor * p.win[2][0].divisor
                              : P;
      global_avg_pool(p, px, po, div);
      return;
    }
    for_each_plane(p, [&](int64_t pl) {
      const T* xp = px + pl * P;
      int64_t q = pl * Q;
      for (int64_t od = 0; od < p.out[0]; ++od)
        for (int64_t oh = 0; oh < p.out[1]; ++oh)
          for (int64_t ow = 0; ow < p.out[2]; ++ow, ++q) {
            A sum = 0;
            const Window &a = p.win[0][od], &b = p.win[1][oh], &c = p.win[2][ow];
            const int64_t H = p.in[1], W = p.in[2];
            // Window rows spanning the whole width are adjacent in memory, and so are whole
            // planes: such a window is summed as longer contiguous runs (global pooling: one).
            const bool full_rows = c.step == 1 && c.first == 0 && c.count == W && b.step == 1;
            const bool full_planes = full_rows && b.first == 0 && b.count == H && a.step == 1;
            if (full_planes && a.count * H * W >= 16) {
              sum = sum_run<A>(xp + a.first * H * W, a.count * H * W);
            } else if (full_rows && b.count * W >= 16) {
              for (int64_t i = 0; i < a.count; ++i)
                sum += sum_run<A>(xp + ((a.first + i * a.step) * H + b.first) * W, b.count * W);
            } else if (c.step == 1 && c.count >= 16) {
              for (int64_t i = 0; i < a.count; ++i)
                for (int64_t j = 0; j < b.count; ++j)
                  sum += sum_run<A>(
                      xp + ((a.first + i * a.step) * H + b.first + j * b.step) * W + c.first,
                      c.count);
            } else {
              visit_window(p, od, oh, ow, [&](int64_t i) { sum += static_cast<A>(xp[i]); });
            }
            int64_t div = divisor_override ? *divisor_override
                          : count_include_pad
                              ? p.win[0][od].divisor * p.win[1][oh].divisor * p.win[2][ow].divisor
                              : p.win[0][od].count * p.win[1][oh].count * p.win[2][ow].count;
            po[q] = static_cast<T>(sum / static_cast<A>(div));
          }
    });
  });
  return out;
}

Tensor avg_pool_backward_run(const char* op, const Tensor& grad, const DimVector& input_size,
                             const PoolPlan& p, bool count_include_pad,
                             std::optional<int64_t> divisor_override) {
  EMBER_CHECK(grad->sizes() == p.out_shape, op, ": expected grad_output of shape ",
              shape_str(p.out_shape), ", got ", shape_str(grad->sizes()));
  Tensor g = nn::contig(grad);
  Tensor gi = ember::empty(input_size, g->dtype(), g->device());
  EMBER_DISPATCH_FLOAT(g->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* pg = g->data_as<T>();
    T* po = gi->data_as<T>();
    const int64_t P = p.in_numel(), Q = p.out_numel();
    if (is_global(p)) {  // each plane's gradient, over the divisor, broadcast over the plane
      const int64_t div = divisor_override ? *divisor_override
                          : count_include_pad
                              ? p.win[0][0].divisor * p.win[1][0].divisor * p.win[2][0].divisor
                              : P;
      parallel_for(0, p.planes, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(P, 1)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t pl = b; pl < e; ++pl) {
                       // 0 + g / div, as the general loop's accumulation (-0 becomes +0).
                       const T v =
                           static_cast<T>(A(0) + static_cast<A>(pg[pl]) / static_cast<A>(div));
                       std::fill(po + pl * P, po + (pl + 1) * P, v);
                     }
                   });
      return;
    }
    std::fill(po, po + gi->numel(), T(0));
    for_each_plane(p, [&](int64_t pl) {
      T* op_ = po + pl * P;
      int64_t q = pl * Q;
      for (int64_t od = 0; od < p.out[0]; ++od)
        for (int64_t oh = 0; oh < p.out[1]; ++oh)
          for (int64_t ow = 0; ow < p.out[2]; ++ow, ++q) {
            int64_t div = divisor_override ? *divisor_override
                          : count_include_pad
                              ? p.win[0][od].divisor * p.win[1][oh].divisor * p.win[2][ow].divisor
                              : p.win[0][od].count * p.win[1][oh].count * p.win[2][ow].count;
            const A v = static_cast<A>(pg[q]) / static_cast<A>(div);
            visit_window(p, od, oh, ow,
                         [&](int64_t i) { op_[i] = static_cast<T>(static_cast<A>(op_[i]) + v); });
          }
    });
  });
  return gi;
}

// Fractional max pooling (Graham, 2014): along a spatial dim of input size `in`, kernel `ks`
// and output size `o`, window i starts at floor((i + u) * a) - floor(u * a) with
// a = (in - ks) / (o - 1) and u the plane's sample for that dim; the last window ends at the
// input's end. The arithmetic is done in the input's dtype, each step rounded to it, so that the
// same samples give the same windows as PyTorch in every dtype.
template <class T>
std::vector<int64_t> fractional_starts(const char* op, T u, int64_t in, int64_t ks, int64_t o) {
  using A = opmath_t<T>;
  // Checked first: a NaN or huge sample would make the integer conversions below undefined.
  const A ua = static_cast<A>(u);
  EMBER_CHECK_KIND(ua >= A(0) && ua <= A(1), Value, op,
                   ": _random_samples must lie in [0, 1], got ", static_cast<double>(ua));
  std::vector<int64_t> starts(o);
  const int64_t last = in - ks;
  if (o > 1) {
    const T alpha = static_cast<T>(static_cast<A>(static_cast<T>(last)) /
                                   static_cast<A>(static_cast<T>(o - 1)));
    const int64_t base = static_cast<int64_t>(static_cast<T>(static_cast<A>(u) * A(alpha)));
    for (int64_t i = 0; i + 1 < o; ++i) {
      const T t = static_cast<T>(static_cast<A>(static_cast<T>(i)) + static_cast<A>(u));
      starts[i] = static_cast<int64_t>(static_cast<T>(static_cast<A>(t) * A(alpha))) - base;
    }
  }
  starts[o - 1] = last;
  for (int64_t& s : starts) s = std::min(std::max<int64_t>(s, 0), last);  // rounding at u = 1
  return starts;
}

}  // namespace

std::tuple<Tensor, Tensor> _fractional_max_pool(const Tensor& self, const DimVector& kernel_size,
                                                const DimVector& output_size,
                                                const Tensor& random_samples) {
  const char* op = "fractional_max_pool";
  EMBER_CHECK_KIND(is_floating(self->dtype()), DtypeNotImplemented, op,
                   ": expected a floating-point input, got ", dtype_name(self->dtype()));
  EMBER_CHECK_KIND(random_samples->dtype() == self->dtype(), Type, op,
                   ": expected _random_samples of the input's dtype ", dtype_name(self->dtype()),
                   ", got ", dtype_name(random_samples->dtype()));
  EMBER_CHECK(random_samples->device() == self->device(), op,
              ": _random_samples must be on the input's device");
  const nn::PoolDims pd = nn::fractional_pool_dims(op, self->sizes(), kernel_size, output_size,
                                                   random_samples->sizes());
  const int64_t k = pd.k;
  Tensor x = nn::contig(self);
  Tensor u = nn::contig(random_samples);
  Tensor out = ember::empty(pd.out_shape, x->dtype(), x->device());
  Tensor idx = ember::empty(pd.out_shape, ScalarType::Int64, x->device());
  if (out->numel() == 0) return {out, idx};
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* px = x->data_as<T>();
    const T* pu = u->data_as<T>();
    T* po = out->data_as<T>();
    int64_t* pi = idx->data_as<int64_t>();
    const int64_t D = pd.in[0], H = pd.in[1], W = pd.in[2];
    const int64_t P = D * H * W, Q = pd.out[0] * pd.out[1] * pd.out[2];
    // The sample of spatial dim j (0: depth, 1: height, 2: width): PyTorch's order is (W, H) for
    // 2-d pooling and (D, H, W) for 3-d.
    auto sample_of = [k](int64_t j) { return k == 2 ? 2 - j : j; };
    // Window starts of every plane first (they may raise), then the planes in parallel.
    std::vector<std::vector<int64_t>> starts(pd.planes * 3);
    for (int64_t pl = 0; pl < pd.planes; ++pl)
      for (int64_t j = 0; j < 3; ++j)
        starts[pl * 3 + j] = j < 3 - k ? std::vector<int64_t>{0}
                                       : fractional_starts<T>(op, pu[pl * k + sample_of(j)],
                                                              pd.in[j], pd.ks[j], pd.out[j]);
    const int64_t kd = pd.ks[0], kh = pd.ks[1], kw = pd.ks[2];
    const int64_t work = std::max<int64_t>(Q * kd * kh * kw, 1);
    parallel_for(0, pd.planes, std::max<int64_t>(1, kPointwiseGrain / work),
                 [&](int64_t b, int64_t e) {
                   for (int64_t pl = b; pl < e; ++pl) {
                     const T* xp = px + pl * P;
                     const std::vector<int64_t>&sd = starts[pl * 3], &sh = starts[pl * 3 + 1],
                           &sw = starts[pl * 3 + 2];
                     int64_t q = pl * Q;
                     for (int64_t od = 0; od < pd.out[0]; ++od)
                       for (int64_t oh = 0; oh < pd.out[1]; ++oh)
                         for (int64_t ow = 0; ow < pd.out[2]; ++ow, ++q) {
                           // The first maximum in window order wins, and the last NaN;
                           // branch-free updates (select_bits), as in max_window.
                           const int64_t first = (sd[od] * H + sh[oh]) * W + sw[ow];
                           A best = static_cast<A>(xp[first]);
                           int64_t arg = first;
                           for (int64_t d = 0; d < kd; ++d)
                             for (int64_t h = 0; h < kh; ++h) {
                               const int64_t row = first + (d * H + h) * W;
                               for (int64_t w = (d == 0 && h == 0) ? 1 : 0; w < kw; ++w) {
                                 const A v = static_cast<A>(xp[row + w]);
                                 const bool take = (v > best) | (v != v);
                                 best = select_bits(take, v, best);
                                 arg = select_bits(take, row + w, arg);
                               }
                             }
                           po[q] = static_cast<T>(best);
                           pi[q] = arg;
                         }
                   }
                 });
  });
  return {out, idx};
}

// PyTorch's layout for a pooling result: channels-last for a batched channels-last input of
// the 2-d poolings, and of 3-d max pooling (its other 3-d poolings stay contiguous).
bool pool_channels_last(const Tensor& self, int64_t k, bool three_d) {
  return self->dim() == k + 2 && (k == 2 || (k == 3 && three_d)) && suggests_channels_last(self);
}

std::tuple<Tensor, Tensor> _max_pool(const Tensor& self, const DimVector& kernel_size,
                                     const DimVector& stride, const DimVector& padding,
                                     const DimVector& dilation, bool ceil_mode) {
  PoolPlan p = fixed_plan("max_pool", self->sizes(), kernel_size, stride, padding, dilation,
                          ceil_mode, false);
  const bool cl = pool_channels_last(self, static_cast<int64_t>(kernel_size.size()), true);
  auto [out, idx] = max_pool_run("max_pool", self, p, true, cl);
  return {nn::as_channels_last(out, cl), nn::as_channels_last(idx, cl)};
}

std::tuple<Tensor, Tensor> _adaptive_max_pool(const Tensor& self, const DimVector& output_size) {
  PoolPlan p = adaptive_plan("adaptive_max_pool", self->sizes(), output_size, self->dtype());
  const bool cl = pool_channels_last(self, static_cast<int64_t>(output_size.size()), false);
  auto [out, idx] = max_pool_run("adaptive_max_pool", self, p, false, cl);
  return {nn::as_channels_last(out, cl), nn::as_channels_last(idx, cl)};
}

Tensor _max_pool_backward(const Tensor& grad_output, const Tensor& indices,
                          const DimVector& input_size, int64_t spatial_dims) {
  const char* op = "max_pool_backward";
  nn::check_max_pool_backward(op, grad_output, indices, input_size, spatial_dims);
  const int64_t lead = indices->dim() - spatial_dims;
  int64_t planes = 1, P = 1, Q = 1;
  for (int64_t d = 0; d < indices->dim(); ++d) {
    if (d < lead) {
      EMBER_CHECK(input_size[d] == indices->size(d), op, ": input_size ", shape_str(input_size),
                  " doesn't fit indices of shape ", shape_str(indices->sizes()));
      planes *= input_size[d];
    } else {
      P *= input_size[d];
      Q *= indices->size(d);
    }
  }
  // Channels-last gradient and indices (a channels-last forward's): scattered per sample in
  // that layout, channels adjacent, instead of transposing both to planes and the result back.
  const bool cl = indices->dim() == spatial_dims + 2 && suggests_channels_last(indices);
  if (cl && !indices->is_contiguous() && indices->dtype() == ScalarType::Int64 &&
      grad_output->device().is_cpu() &&
      (grad_output->dtype() == ScalarType::Float32 ||
       grad_output->dtype() == ScalarType::Float64)) {
    const DimVector st = channels_last_strides(input_size);
    Tensor g = nn::as_channels_last(grad_output, true);
    Tensor ix = nn::as_channels_last(indices, true);
    Tensor gi = ember::empty_strided(input_size, st, g->dtype(), g->device());
    const int64_t C = indices->size(1), N = planes / std::max<int64_t>(C, 1);
    if (g->dtype() == ScalarType::Float32)
      max_unpool_channels_last(op, g->data_as<float>(), ix->data_as<int64_t>(),
                               gi->data_as<float>(), N, C, P, Q);
    else
      max_unpool_channels_last(op, g->data_as<double>(), ix->data_as<int64_t>(),
                               gi->data_as<double>(), N, C, P, Q);
    return gi;
  }
  Tensor g = nn::contig(grad_output);
  Tensor ix = nn::contig(indices, ScalarType::Int64);
  Tensor gi = ember::empty(input_size, g->dtype(), g->device());
  EMBER_DISPATCH_FLOAT(g->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* pg = g->data_as<T>();
    const int64_t* pi = ix->data_as<int64_t>();
    T* po = gi->data_as<T>();
    std::fill(po, po + gi->numel(), T(0));
    parallel_for(0, planes, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(Q, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t pl = b; pl < e; ++pl)
                     for (int64_t q = pl * Q; q < (pl + 1) * Q; ++q) {
                       const int64_t i = pi[q];
                       EMBER_CHECK_KIND(i >= 0 && i < P, Index, op, ": index ", i,
                                        " is out of bounds for an input plane of ", P, " elements");
                       T& dst = po[pl * P + i];
                       dst = static_cast<T>(static_cast<A>(dst) + static_cast<A>(pg[q]));
                     }
                 });
  });
  // Laid out as the forward's input (its indices are channels-last exactly when it was).
  return nn::as_channels_last(gi, cl);
}

Tensor _avg_pool(const Tensor& self, const DimVector& kernel_size, const DimVector& stride,
                 const DimVector& padding, bool ceil_mode, bool count_include_pad,
                 std::optional<int64_t> divisor_override) {
  nn::check_divisor_override(divisor_override);
  PoolPlan p = fixed_plan("avg_pool", self->sizes(), kernel_size, stride, padding, DimVector{1},
                          ceil_mode, count_include_pad);
  const bool cl = pool_channels_last(self, static_cast<int64_t>(kernel_size.size()), false);
  Tensor out = avg_pool_run("avg_pool", self, p, count_include_pad, divisor_override, cl,
                            /*int64_ok=*/true);
  return nn::as_channels_last(out, cl);
}

Tensor _avg_pool_backward(const Tensor& grad_output, const DimVector& input_size,
                          const DimVector& kernel_size, const DimVector& stride,
                          const DimVector& padding, bool ceil_mode, bool count_include_pad,
                          std::optional<int64_t> divisor_override) {
  PoolPlan p = fixed_plan("avg_pool_backward", input_size, kernel_size, stride, padding,
                          DimVector{1}, ceil_mode, count_include_pad);
  return avg_pool_backward_run("avg_pool_backward", grad_output, input_size, p, count_include_pad,
                               divisor_override);
}

Tensor _adaptive_avg_pool(const Tensor& self, const DimVector& output_size) {
  PoolPlan p = adaptive_plan("adaptive_avg_pool", self->sizes(), output_size, self->dtype());
  // (A global 3-d average is PyTorch's mean over the spatial dims, which keeps the layout.)
  const bool global =
      std::all_of(output_size.begin(), output_size.end(), [](int64_t v) { return v == 1; });
  const bool cl = pool_channels_last(self, static_cast<int64_t>(output_size.size()), global);
  Tensor out = avg_pool_run("adaptive_avg_pool", self, p, false, std::nullopt, cl);
  return nn::as_channels_last(out, cl);
}

Tensor _adaptive_avg_pool_backward(const Tensor& grad_output, const DimVector& input_size,
                                   const DimVector& output_size) {
  PoolPlan p =
      adaptive_plan("adaptive_avg_pool_backward", input_size, output_size, grad_output->dtype());
  return avg_pool_backward_run("adaptive_avg_pool_backward", grad_output, input_size, p, false,
                               std::nullopt);
}

}  // namespace cpu
}  // namespace ember
