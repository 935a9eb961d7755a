// CPU kernels of the reductions and scans declared in ops/reduce.yaml. Every reduction is a small
// Reducer struct run by the engine in reduce_utils.h; the hot contiguous loops (block()) keep
// several independent accumulators so the compiler vectorizes them without -ffast-math.
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/dispatch.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/reduce_utils.h"
#include "kernels/cpu/row_sums.h"
#include "kernels/iterator.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

using reduce::dim_mask;
using reduce::is_nan;
using reduce::NormKind;
using reduce::reduced_numel;
using reduce::reduced_sizes;
using reduce::ReducerBase;
using reduce::run_reduction;

#if defined(__GNUC__) && defined(__x86_64__)
// Hot loops get a second copy compiled for AVX2, used when the CPU has it (the library itself is
// built for baseline x86-64).
#define EMBER_REDUCE_AVX2 1
#define EMBER_REDUCE_INLINE inline __attribute__((always_inline))
bool has_avx2() { return cpu_isa() >= Isa::Avx2; }
#else
#define EMBER_REDUCE_AVX2 0
#define EMBER_REDUCE_INLINE inline
#endif

template <class T>
constexpr bool is_float_v = std::is_floating_point_v<opmath_t<T>>;

// Sums of floating types carry their total in double (blocks are summed in op-math lanes first,
// see sum_lanes), integer and bool sums in int64 like PyTorch; uint16/32/64 in uint64, which wraps
// (well defined) to the same bits as PyTorch's int64 result.
template <class T>
constexpr bool is_wide_uint_v =
    std::is_same_v<T, uint16_t> || std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>;
template <class T>
using sum_acc_t = std::conditional_t<is_float_v<T>, double,
                                     std::conditional_t<is_wide_uint_v<T>, uint64_t, int64_t>>;

Tensor cast_to(const Tensor& t, ScalarType dt) {
  if (t->dtype() == dt) return t;
  Tensor o = ember::empty(t->sizes(), dt, t->device());
  copy_into(o, t);
  return o;
}

// Sum of f(x) over a contiguous floating run: L lanes of V (op-math type by default, so float
// for float32: no per-element conversion) over blocks of D * L elements (the lane loop
// vectorizes into L / vector-width independent accumulators), each block's total added in double.
// Every lane sums D elements and the lanes combine pairwise, so a block's rounding error stays
// around that of a D + log2(L) deep sum, and the double total adds next to nothing to it.
template <int L, int D, class T, class V, class F>
EMBER_REDUCE_INLINE double sum_lanes(const T* p, int64_t n, const F& f) {
  double total = 0;
  int64_t i = 0;
  while (n - i >= L) {
    const int64_t end = i + std::min<int64_t>(n - i, D * L) / L * L;
    V acc[L] = {};
    for (; i < end; i += L)
      for (int j = 0; j < L; ++j) acc[j] += f(static_cast<V>(p[i + j]));
    // (GCC keeps the accumulators in registers with this loop; an unrolled fold was slower.)
    for (int w = L / 2; w > 0; w /= 2)
      for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
    total += acc[0];
  }
  // Short runs (a row of 49 in mean over 7x7 planes) would otherwise be all scalar tail.
  if constexpr (L > 8) {
    if (n - i >= 8) return total + sum_lanes<8, 8, T, V>(p + i, n - i, f);
  }
  for (; i < n; ++i) total += f(static_cast<V>(p[i]));
  return total;
}

#if EMBER_REDUCE_AVX2
// The same loop compiled for AVX2 (8 accumulators of 256 bits), chosen at run time.
template <class T, class V, class F>
__attribute__((target("avx2"))) double sum_lanes_avx2(const T* p, int64_t n, const F& f) {
  return sum_lanes<256 / sizeof(V), 64, T, V>(p, n, f);
}
#endif

template <class T, class V = opmath_t<T>, class F>
double sum_contig(const T* p, int64_t n, const F& f) {
#if EMBER_REDUCE_AVX2
  if (has_avx2()) return sum_lanes_avx2<T, V>(p, n, f);
#endif
  // 8 SSE accumulators, each lane half as deep: as accurate as the AVX2 loop's longer blocks.
  return sum_lanes<128 / sizeof(V), 32, T, V>(p, n, f);
}

struct Identity {
  template <class V>
  V operator()(V v) const {
    return v;
  }
};
struct NanToZero {
  template <class V>
  V operator()(V v) const {
    return v != v ? V(0) : v;
  }
};
struct Square {
  template <class V>
  V operator()(V v) const {
    return v * v;
  }
};
struct Abs {
  template <class V>
  V operator()(V v) const {
    return std::abs(v);
  }
};

template <class T, bool NanZero>
double sum_run(const T* p, int64_t n) {
  if constexpr (NanZero) {
    return sum_contig<T>(p, n, NanToZero{});
  } else {
    return sum_contig<T>(p, n, Identity{});
  }
}

// acc[k] += row[k] for the column-wise sums (sum(dim=0) of a matrix), vectorized.
template <class T, bool NanZero>
EMBER_REDUCE_INLINE void add_row_impl(double* acc, const T* row, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    double v = static_cast<double>(static_cast<opmath_t<T>>(row[k]));
    if constexpr (NanZero) v = v != v ? 0.0 : v;
    acc[k] += v;
  }
}

#if EMBER_REDUCE_AVX2
template <class T, bool NanZero>
__attribute__((target("avx2"))) void add_row_avx2(double* acc, const T* row, int64_t n) {
  add_row_impl<T, NanZero>(acc, row, n);
}
#endif

template <class T, bool NanZero>
void add_row(double* acc, const T* row, int64_t n) {
#if EMBER_REDUCE_AVX2
  if (has_avx2()) return add_row_avx2<T, NanZero>(acc, row, n);
#endif
  add_row_impl<T, NanZero>(acc, row, n);
}

// Sum (and mean: the total divided by `div`). Floating inputs write their own type, integer and
// bool inputs write int64.
template <class T, bool NanZero>
struct SumReducer : ReducerBase<SumReducer<T, NanZero>, T, sum_acc_t<T>> {
  using Acc = sum_acc_t<T>;
  using Out = std::conditional_t<is_float_v<T>, T, int64_t>;
  Out* out = nullptr;
  double div = 1.0;

  static Acc value(T x) {
    Acc v = static_cast<Acc>(static_cast<opmath_t<T>>(x));
    if constexpr (NanZero && is_float_v<T>) v = (v != v) ? Acc(0) : v;
    return v;
  }
  Acc identity() const { return 0; }
  void step(Acc& a, T x, int64_t) const { a += value(x); }
  Acc combine(Acc a, Acc b) const { return a + b; }
  Acc block(const T* p, int64_t n, int64_t) const {
    if constexpr (is_float_v<T>) {
      return sum_run<T, NanZero>(p, n);
    } else {
      Acc s = 0;
      for (int64_t i = 0; i < n; ++i) s += static_cast<Acc>(p[i]);
      return s;
    }
  }
  void rows(Acc* acc, const T* row, int64_t n, int64_t) const {
    if constexpr (is_float_v<T>) {
      add_row<T, NanZero>(acc, row, n);
    } else {
      for (int64_t k = 0; k < n; ++k) acc[k] += value(row[k]);
    }
  }
  // Outputs [o0, o1) from rows of n contiguous elements `step` apart from p: short rows (up to
  // one lane block of sum_lanes, so no double-precision block totals are lost) are summed 8 at a
  // time (row_sums); false leaves the rows to block().
  bool short_rows(const T* p, int64_t n, int64_t step, int64_t o0, int64_t o1) const {
    if constexpr (is_float_v<T> && !NanZero) {
      if (n > 256 || o1 - o0 < 8) return false;
      using A = opmath_t<T>;
      constexpr int64_t kBlock = 256;
      A sums[kBlock];
      for (int64_t c = o0; c < o1; c += kBlock) {
        const int64_t m = std::min(kBlock, o1 - c);
        row_sums<T, A>(p + (c - o0) * step, n, step, m, sums);
        for (int64_t i = 0; i < m; ++i) write(c + i, static_cast<Acc>(sums[i]));
      }
      return true;
    } else {
      return false;
    }
  }
  void write(int64_t o, Acc a) const {
    if constexpr (is_float_v<T>) {
      out[o] = static_cast<Out>(static_cast<opmath_t<T>>(a / div));
    } else {
      out[o] = static_cast<Out>(a);
    }
  }
};

template <class T>
struct ProdReducer : ReducerBase<ProdReducer<T>, T, sum_acc_t<T>> {
  using Acc = sum_acc_t<T>;
  using Out = std::conditional_t<is_float_v<T>, T, int64_t>;
  Out* out = nullptr;
  Acc identity() const { return 1; }
  void step(Acc& a, T x, int64_t) const { a *= static_cast<Acc>(static_cast<opmath_t<T>>(x)); }
  Acc combine(Acc a, Acc b) const { return a * b; }
  void write(int64_t o, Acc a) const {
    if constexpr (is_float_v<T>) {
      out[o] = static_cast<Out>(static_cast<opmath_t<T>>(a));
    } else {
      out[o] = static_cast<Out>(a);
    }
  }
};

// The larger (IsMax) or smaller of a and x; NaN wins, so it propagates like in PyTorch.
template <bool IsMax, class V>
inline V pick(V a, V x) {
  bool better = IsMax ? (x > a) : (x < a);
  if constexpr (std::is_floating_point_v<V>) better = better || (x != x);
  return better ? x : a;
}

template <class V, bool IsMax>
constexpr V extremum_identity() {
  if constexpr (std::is_floating_point_v<V>) {
    return IsMax ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::infinity();
  } else {
    return IsMax ? std::numeric_limits<V>::lowest() : std::numeric_limits<V>::max();
  }
}

#if defined(__SSE2__)
// max/min of float32/float64 runs with SSE2: 4 vector accumulators plus a sticky "saw a NaN" mask
// (compilers won't vectorize a NaN-propagating max without -ffast-math).
template <bool IsMax>
float extremum_simd(const float* p, int64_t n, int64_t& done) {
  const __m128 id = _mm_set1_ps(extremum_identity<float, IsMax>());
  __m128 a0 = id, a1 = id, a2 = id, a3 = id, bad = _mm_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m128 v0 = _mm_loadu_ps(p + i), v1 = _mm_loadu_ps(p + i + 4);
    __m128 v2 = _mm_loadu_ps(p + i + 8), v3 = _mm_loadu_ps(p + i + 12);
    bad = _mm_or_ps(bad, _mm_or_ps(_mm_cmpunord_ps(v0, v1), _mm_cmpunord_ps(v2, v3)));
    if constexpr (IsMax) {
      a0 = _mm_max_ps(a0, v0), a1 = _mm_max_ps(a1, v1), a2 = _mm_max_ps(a2, v2),
      a3 = _mm_max_ps(a3, v3);
    } else {
      a0 = _mm_min_ps(a0, v0), a1 = _mm_min_ps(a1, v1), a2 = _mm_min_ps(a2, v2),
      a3 = _mm_min_ps(a3, v3);
    }
  }
  for (; i + 4 <= n; i += 4) {  // short runs
    __m128 v = _mm_loadu_ps(p + i);
    bad = _mm_or_ps(bad, _mm_cmpunord_ps(v, v));
    a0 = IsMax ? _mm_max_ps(a0, v) : _mm_min_ps(a0, v);
  }
  done = i;
  if (_mm_movemask_ps(bad)) return std::numeric_limits<float>::quiet_NaN();
  // No NaN: the accumulators fold with plain vector max/min before the last few lanes.
  a0 = IsMax ? _mm_max_ps(_mm_max_ps(a0, a1), _mm_max_ps(a2, a3))
             : _mm_min_ps(_mm_min_ps(a0, a1), _mm_min_ps(a2, a3));
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, a0);
  float r = lanes[0];
  for (int j = 1; j < 4; ++j) r = pick<IsMax>(r, lanes[j]);
  return r;
}

template <bool IsMax>
double extremum_simd(const double* p, int64_t n, int64_t& done) {
  const __m128d id = _mm_set1_pd(extremum_identity<double, IsMax>());
  __m128d a0 = id, a1 = id, a2 = id, a3 = id, bad = _mm_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128d v0 = _mm_loadu_pd(p + i), v1 = _mm_loadu_pd(p + i + 2);
    __m128d v2 = _mm_loadu_pd(p + i + 4), v3 = _mm_loadu_pd(p + i + 6);
    bad = _mm_or_pd(bad, _mm_or_pd(_mm_cmpunord_pd(v0, v1), _mm_cmpunord_pd(v2, v3)));
    if constexpr (IsMax) {
      a0 = _mm_max_pd(a0, v0), a1 = _mm_max_pd(a1, v1), a2 = _mm_max_pd(a2, v2),
      a3 = _mm_max_pd(a3, v3);
    } else {
      a0 = _mm_min_pd(a0, v0), a1 = _mm_min_pd(a1, v1), a2 = _mm_min_pd(a2, v2),
      a3 = _mm_min_pd(a3, v3);
    }
  }
  for (; i + 2 <= n; i += 2) {  // short runs
    __m128d v = _mm_loadu_pd(p + i);
    bad = _mm_or_pd(bad, _mm_cmpunord_pd(v, v));
    a0 = IsMax ? _mm_max_pd(a0, v) : _mm_min_pd(a0, v);
  }
  done = i;
  if (_mm_movemask_pd(bad)) return std::numeric_limits<double>::quiet_NaN();
  a0 = IsMax ? _mm_max_pd(_mm_max_pd(a0, a1), _mm_max_pd(a2, a3))
             : _mm_min_pd(_mm_min_pd(a0, a1), _mm_min_pd(a2, a3));
  alignas(16) double lanes[2];
  _mm_store_pd(lanes, a0);
  double r = pick<IsMax>(lanes[0], lanes[1]);
  return r;
}
#endif

#if EMBER_REDUCE_AVX2
template <bool IsMax>
__attribute__((target("avx2"))) float extremum_avx2(const float* p, int64_t n, int64_t& done) {
  const __m256 id = _mm256_set1_ps(extremum_identity<float, IsMax>());
  __m256 a0 = id, a1 = id, a2 = id, a3 = id, bad = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 v0 = _mm256_loadu_ps(p + i), v1 = _mm256_loadu_ps(p + i + 8);
    __m256 v2 = _mm256_loadu_ps(p + i + 16), v3 = _mm256_loadu_ps(p + i + 24);
    bad = _mm256_or_ps(bad, _mm256_or_ps(_mm256_cmp_ps(v0, v1, _CMP_UNORD_Q),
                                         _mm256_cmp_ps(v2, v3, _CMP_UNORD_Q)));
    if constexpr (IsMax) {
      a0 = _mm256_max_ps(a0, v0), a1 = _mm256_max_ps(a1, v1), a2 = _mm256_max_ps(a2, v2),
      a3 = _mm256_max_ps(a3, v3);
    } else {
      a0 = _mm256_min_ps(a0, v0), a1 = _mm256_min_ps(a1, v1), a2 = _mm256_min_ps(a2, v2),
      a3 = _mm256_min_ps(a3, v3);
    }
  }
  for (; i + 8 <= n; i += 8) {  // short runs
    __m256 v = _mm256_loadu_ps(p + i);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    a0 = IsMax ? _mm256_max_ps(a0, v) : _mm256_min_ps(a0, v);
  }
  done = i;
  if (_mm256_movemask_ps(bad)) return std::numeric_limits<float>::quiet_NaN();
  a0 = IsMax ? _mm256_max_ps(_mm256_max_ps(a0, a1), _mm256_max_ps(a2, a3))
             : _mm256_min_ps(_mm256_min_ps(a0, a1), _mm256_min_ps(a2, a3));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, a0);
  float r = lanes[0];
  for (int j = 1; j < 8; ++j) r = pick<IsMax>(r, lanes[j]);
  return r;
}

template <bool IsMax>
__attribute__((target("avx2"))) double extremum_avx2(const double* p, int64_t n, int64_t& done) {
  const __m256d id = _mm256_set1_pd(extremum_identity<double, IsMax>());
  __m256d a0 = id, a1 = id, a2 = id, a3 = id, bad = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256d v0 = _mm256_loadu_pd(p + i), v1 = _mm256_loadu_pd(p + i + 4);
    __m256d v2 = _mm256_loadu_pd(p + i + 8), v3 = _mm256_loadu_pd(p + i + 12);
    bad = _mm256_or_pd(bad, _mm256_or_pd(_mm256_cmp_pd(v0, v1, _CMP_UNORD_Q),
                                         _mm256_cmp_pd(v2, v3, _CMP_UNORD_Q)));
    if constexpr (IsMax) {
      a0 = _mm256_max_pd(a0, v0), a1 = _mm256_max_pd(a1, v1), a2 = _mm256_max_pd(a2, v2),
      a3 = _mm256_max_pd(a3, v3);
    } else {
      a0 = _mm256_min_pd(a0, v0), a1 = _mm256_min_pd(a1, v1), a2 = _mm256_min_pd(a2, v2),
      a3 = _mm256_min_pd(a3, v3);
    }
  }
  for (; i + 4 <= n; i += 4) {  // short runs
    __m256d v = _mm256_loadu_pd(p + i);
    bad = _mm256_or_pd(bad, _mm256_cmp_pd(v, v, _CMP_UNORD_Q));
    a0 = IsMax ? _mm256_max_pd(a0, v) : _mm256_min_pd(a0, v);
  }
  done = i;
  if (_mm256_movemask_pd(bad)) return std::numeric_limits<double>::quiet_NaN();
  a0 = IsMax ? _mm256_max_pd(_mm256_max_pd(a0, a1), _mm256_max_pd(a2, a3))
             : _mm256_min_pd(_mm256_min_pd(a0, a1), _mm256_min_pd(a2, a3));
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, a0);
  double r = lanes[0];
  for (int j = 1; j < 4; ++j) r = pick<IsMax>(r, lanes[j]);
  return r;
}
#endif

// max/min of a contiguous run; NaN if it holds one.
template <class T, bool IsMax>
opmath_t<T> extremum(const T* p, int64_t n) {
  using V = opmath_t<T>;
  V r = extremum_identity<V, IsMax>();
  int64_t i = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
#if EMBER_REDUCE_AVX2
    r = has_avx2() ? extremum_avx2<IsMax>(p, n, i) : extremum_simd<IsMax>(p, n, i);
#else
    r = extremum_simd<IsMax>(p, n, i);
#endif
    if (r != r) return r;
  }
#endif
  if constexpr (std::is_floating_point_v<V>) {
    for (; i < n; ++i) r = pick<IsMax>(r, static_cast<V>(p[i]));
  } else {
    for (; i < n; ++i)
      r = IsMax ? std::max(r, static_cast<V>(p[i])) : std::min(r, static_cast<V>(p[i]));
  }
  return r;
}

template <class T, bool IsMax>
struct MinMaxReducer : ReducerBase<MinMaxReducer<T, IsMax>, T, opmath_t<T>> {
  using V = opmath_t<T>;
  T* out = nullptr;
  V identity() const { return extremum_identity<V, IsMax>(); }
  void step(V& a, T x, int64_t) const { a = pick<IsMax>(a, static_cast<V>(x)); }
  V combine(V a, V b) const { return pick<IsMax>(a, b); }
  V block(const T* p, int64_t n, int64_t) const { return extremum<T, IsMax>(p, n); }
  void rows(V* acc, const T* row, int64_t n, int64_t) const {
    for (int64_t k = 0; k < n; ++k) acc[k] = pick<IsMax>(acc[k], static_cast<V>(row[k]));
  }
  void write(int64_t o, V a) const { out[o] = static_cast<T>(a); }
};

// Index of the first of p[0, n) equal to m (which must be there): groups of 64 are tested with a
// vectorized "any equal" before the one that has it is scanned.
template <class T, class V>
int64_t find_first_equal(const T* p, int64_t n, V m) {
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) {
    int hit = 0;
    for (int k = 0; k < 64; ++k) hit |= static_cast<V>(p[j + k]) == m ? 1 : 0;
    if (hit) break;
  }
  while (static_cast<V>(p[j]) != m) ++j;
  return j;
}

template <class V>
struct ValIdx {
  V v{};
  int64_t i = -1;  // -1: nothing seen yet
};

// argmax/argmin (and max/min along a dim): the first extremum, or the first NaN.
template <class T, bool IsMax>
struct ArgReducer : ReducerBase<ArgReducer<T, IsMax>, T, ValIdx<opmath_t<T>>> {
  using V = opmath_t<T>;
  using Acc = ValIdx<V>;
  int64_t* idx_out = nullptr;
  T* val_out = nullptr;  // optional

  static bool better(V x, V cur) {
    if constexpr (std::is_floating_point_v<V>) {
      if (cur != cur) return false;
      if (x != x) return true;
    }
    return IsMax ? x > cur : x < cur;
  }
  Acc identity() const { return Acc{}; }
  void step(Acc& a, T x, int64_t i) const {
    V v = static_cast<V>(x);
    if (a.i < 0 || better(v, a.v)) a = Acc{v, i};
  }
  Acc combine(const Acc& a, const Acc& b) const {
    if (a.i < 0) return b;
    if (b.i < 0) return a;
    return better(b.v, a.v) ? b : a;
  }
  // Vectorized extremum per 2048-element block; only the first block that holds the overall
  // extremum is rescanned (from cache) for the index.
  Acc block(const T* p, int64_t n, int64_t base) const {
    V best = static_cast<V>(p[0]);
    if (is_nan(best)) return Acc{best, base};
    constexpr int64_t B = 2048;
    int64_t at = -1;  // start of the block holding `best`; -1: p[0] itself
    for (int64_t i = 0; i < n; i += B) {
      const int64_t len = std::min(B, n - i);
      V m = extremum<T, IsMax>(p + i, len);
      if (!better(m, best)) continue;
      if (is_nan(m)) {
        int64_t j = 0;
        while (!is_nan(static_cast<V>(p[i + j]))) ++j;
        return Acc{m, base + i + j};
      }
      best = m;
      at = i;
    }
    if (at < 0) return Acc{best, base};
    const int64_t j = at + find_first_equal(p + at, std::min(B, n - at), best);
    return Acc{static_cast<V>(p[j]), base + j};  // p[j], not `best`: the sign of a zero
  }
  void write(int64_t o, const Acc& a) const {
    idx_out[o] = a.i;
    if (val_out) val_out[o] = static_cast<T>(a.v);
  }
};

struct VarAcc {
  double n = 0, mean = 0, m2 = 0;
};

// Variance by blocks: each contiguous block is done in two passes (mean, then squared deviations:
// accurate and vectorized); blocks and strided elements merge with Chan's / Welford's updates.
template <class T>
struct VarReducer : ReducerBase<VarReducer<T>, T, VarAcc> {
  T* out = nullptr;
  T* mean_out = nullptr;  // var_mean / std_mean
  double correction = 1;
  bool take_sqrt = false;

  VarAcc identity() const { return VarAcc{}; }
  void step(VarAcc& a, T x, int64_t) const {
    double v = static_cast<double>(static_cast<opmath_t<T>>(x));
    a.n += 1;
    double d = v - a.mean;
    a.mean += d / a.n;
    a.m2 += d * (v - a.mean);
  }
  VarAcc combine(const VarAcc& a, const VarAcc& b) const {
    if (a.n == 0) return b;
    if (b.n == 0) return a;
    VarAcc r;
    r.n = a.n + b.n;
    double d = b.mean - a.mean;
    r.mean = a.mean + d * (b.n / r.n);
    r.m2 = a.m2 + b.m2 + d * d * (a.n * b.n / r.n);
    return r;
  }
  VarAcc block(const T* p, int64_t n, int64_t) const {
    VarAcc acc;
    constexpr int64_t B = 4096;
    constexpr int L = 8;
    for (int64_t i0 = 0; i0 < n; i0 += B) {
      const int64_t len = std::min(B, n - i0);
      const T* q = p + i0;
      // Double lanes: the deviations below need the mean to full precision.
      double mean = sum_contig<T, double>(q, len, Identity{}) / static_cast<double>(len);
      double lanes[L] = {};
      int64_t i = 0;
      for (; i + L <= len; i += L)
        for (int j = 0; j < L; ++j) {
          double d = static_cast<double>(static_cast<opmath_t<T>>(q[i + j])) - mean;
          lanes[j] += d * d;
        }
      double m2 = 0;
      for (int j = 0; j < L; ++j) m2 += lanes[j];
      for (; i < len; ++i) {
        double d = static_cast<double>(static_cast<opmath_t<T>>(q[i])) - mean;
        m2 += d * d;
      }
      acc = combine(acc, VarAcc{static_cast<double>(len), mean, m2});
    }
    return acc;
  }
  void write(int64_t o, const VarAcc& a) const {
    double var = a.m2 / std::max(0.0, a.n - correction);
    out[o] = static_cast<T>(static_cast<opmath_t<T>>(take_sqrt ? std::sqrt(var) : var));
    if (mean_out)
      mean_out[o] = static_cast<T>(
          static_cast<opmath_t<T>>(a.n == 0 ? std::numeric_limits<double>::quiet_NaN() : a.mean));
  }
};

template <class T, NormKind K>
struct NormReducer : ReducerBase<NormReducer<T, K>, T, double> {
  T* out = nullptr;
  double p = 2;
  double identity() const {
    return K == NormKind::NegInf ? std::numeric_limits<double>::infinity() : 0.0;
  }
  static double absval(T x) { return std::abs(static_cast<double>(static_cast<opmath_t<T>>(x))); }
  void step(double& a, T x, int64_t) const {
    double v = absval(x);
    if constexpr (K == NormKind::Two) a += v * v;
    if constexpr (K == NormKind::One) a += v;
    if constexpr (K == NormKind::Inf) a = pick<true>(a, v);
    if constexpr (K == NormKind::NegInf) a = pick<false>(a, v);
    if constexpr (K == NormKind::Zero) a += (v != 0) ? 1.0 : 0.0;
    if constexpr (K == NormKind::P) a += std::pow(v, p);
  }
  double combine(double a, double b) const {
    if constexpr (K == NormKind::Inf) return pick<true>(a, b);
    if constexpr (K == NormKind::NegInf) return pick<false>(a, b);
    return a + b;
  }
  double block(const T* q, int64_t n, int64_t base) const {
    if constexpr (K == NormKind::Two) {
      return sum_contig<T>(q, n, Square{});
    } else if constexpr (K == NormKind::One) {
      return sum_contig<T>(q, n, Abs{});
    } else {
      return ReducerBase<NormReducer<T, K>, T, double>::block(q, n, base);
    }
  }
  void write(int64_t o, double a) const {
    if constexpr (K == NormKind::Two) a = std::sqrt(a);
    if constexpr (K == NormKind::P) a = std::pow(a, 1.0 / p);
    out[o] = static_cast<T>(static_cast<opmath_t<T>>(a));
  }
};

// all / any / count_nonzero: reductions of x != 0.
template <class T>
inline bool nonzero(T x) {
  return static_cast<opmath_t<T>>(x) != opmath_t<T>(0);
}

template <class T, bool IsAll>
struct AllAnyReducer : ReducerBase<AllAnyReducer<T, IsAll>, T, uint8_t> {
  uint8_t* out = nullptr;
  uint8_t identity() const { return IsAll; }
  void step(uint8_t& a, T x, int64_t) const { a = IsAll ? (a && nonzero(x)) : (a || nonzero(x)); }
  uint8_t combine(uint8_t a, uint8_t b) const { return IsAll ? (a && b) : (a || b); }
  // Counts per 1024-element chunk (vectorizes) and stops at the first decisive chunk.
  uint8_t block(const T* p, int64_t n, int64_t) const {
    for (int64_t i0 = 0; i0 < n; i0 += 1024) {
      const int64_t len = std::min<int64_t>(1024, n - i0);
      int64_t cnt = 0;
      for (int64_t i = 0; i < len; ++i) cnt += nonzero(p[i0 + i]) ? 1 : 0;
      if (IsAll && cnt != len) return false;
      if (!IsAll && cnt != 0) return true;
    }
    return IsAll;
  }
  void rows(uint8_t* acc, const T* row, int64_t n, int64_t) const {
    for (int64_t k = 0; k < n; ++k) step(acc[k], row[k], 0);
  }
  void write(int64_t o, uint8_t a) const { out[o] = a ? 1 : 0; }
};

template <class T>
struct CountNonzeroReducer : ReducerBase<CountNonzeroReducer<T>, T, int64_t> {
  int64_t* out = nullptr;
  int64_t identity() const { return 0; }
  void step(int64_t& a, T x, int64_t) const { a += nonzero(x) ? 1 : 0; }
  int64_t combine(int64_t a, int64_t b) const { return a + b; }
  void write(int64_t o, int64_t a) const { out[o] = a; }
};

// ---- shared op bodies --------------------------------------------------------------------------

// A complex tensor's elements as pairs of reals (a trailing dim of 2), and back.
Tensor real_pairs(const Tensor& x) {
  DimVector sizes = x->sizes(), strides = x->strides();
  for (int64_t& s : strides) s *= 2;
  sizes.push_back(2);
  strides.push_back(1);
  return make_view(x, std::move(sizes), std::move(strides), x->storage_offset() * 2,
                   to_real(x->dtype()));
}
// A new complex tensor holding the contiguous pairs (its own tensor, not a view of them).
Tensor from_real_pairs(const Tensor& pairs, ScalarType complex_dtype) {
  DimVector sizes(pairs->sizes().begin(), pairs->sizes().end() - 1);
  Tensor out = ember::empty(sizes, complex_dtype, pairs->device());
  std::memcpy(out->data(), pairs->data(), out->numel() * out->itemsize());
  return out;
}

template <bool NanZero>
Tensor sum_impl(const Tensor& x, const std::vector<bool>& mask, bool keepdim, double div,
                const char* op) {
  const ScalarType st = x->dtype();
  if (is_complex(st)) {
    // Sums of the real parts and of the imaginary parts: the real kernels over a pairs view.
    std::vector<bool> pair_mask = mask;
    pair_mask.push_back(false);
    Tensor pairs = sum_impl<NanZero>(real_pairs(x), pair_mask, keepdim, div, op);
    return from_real_pairs(pairs, st);
  }
  Tensor out =
      ember::empty(reduced_sizes(x->sizes(), mask, keepdim), reduce::sum_dtype(st), x->device());
  EMBER_DISPATCH_ALL_AND_UINT(st, op, [&] {
    SumReducer<scalar_t, NanZero && is_float_v<scalar_t>> r;
    r.out = out->data_as<typename decltype(r)::Out>();
    r.div = div;
    run_reduction(x, mask, r, false);
  });
  return out;
}

template <bool IsMax>
Tensor amax_impl(const Tensor& self, const std::vector<bool>& mask, bool keepdim, const char* op) {
  reduce::check_no_empty_reduced_dim(self, mask, op);
  Tensor out =
      ember::empty(reduced_sizes(self->sizes(), mask, keepdim), self->dtype(), self->device());
  EMBER_DISPATCH_ALL(self->dtype(), op, [&] {
    MinMaxReducer<scalar_t, IsMax> r;
    r.out = out->data_as<scalar_t>();
    run_reduction(self, mask, r, false);
  });
  return out;
}

// values (optional) and first indices of the extremum over the dims in mask.
template <bool IsMax>
std::tuple<Tensor, Tensor> arg_impl(const Tensor& self, const std::vector<bool>& mask, bool keepdim,
                                    bool want_values, const char* op) {
  DimVector shape = reduced_sizes(self->sizes(), mask, keepdim);
  Tensor idx = ember::empty(shape, ScalarType::Int64, self->device());
  Tensor val = want_values ? ember::empty(shape, self->dtype(), self->device()) : Tensor();
  EMBER_DISPATCH_ALL(self->dtype(), op, [&] {
    ArgReducer<scalar_t, IsMax> r;
    r.idx_out = idx->data_as<int64_t>();
    r.val_out = want_values ? val->data_as<scalar_t>() : nullptr;
    run_reduction(self, mask, r, true);
  });
  return {val, idx};
}

// The Welford reduction of var / std into the outputs of `plan` (reduce::VarOps).
struct CpuVar {
  static void var_into(const Tensor& self, const reduce::VarPlan& plan, const char* op) {
    EMBER_DISPATCH_FLOAT(self->dtype(), op, [&] {
      VarReducer<scalar_t> r;
      r.out = plan.out->data_as<scalar_t>();
      r.mean_out = plan.mean ? plan.mean->data_as<scalar_t>() : nullptr;
      r.correction = plan.correction;
      r.take_sqrt = plan.take_sqrt;
      run_reduction(self, plan.mask, r, false);
    });
  }
};
using VarOps = reduce::VarOps<CpuVar>;

template <bool IsAll>
Tensor all_any_impl(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim,
                    const char* op) {
  if (is_complex(self->dtype()))
    return all_any_impl<IsAll>(reduce::complex_nonzero_mask(self), dim, keepdim, op);
  std::vector<bool> mask = reduce::all_any_mask(self, dim, op);
  ScalarType ot = reduce::all_any_dtype(self->dtype());
  Tensor out = ember::empty(reduced_sizes(self->sizes(), mask, keepdim), ot, self->device());
  EMBER_DISPATCH_ALL_AND_UINT(self->dtype(), op, [&] {
    AllAnyReducer<scalar_t, IsAll> r;
    r.out = reinterpret_cast<uint8_t*>(out->data());
    run_reduction(self, mask, r, false);
  });
  return out;
}

}  // namespace

// ---- sums and products -------------------------------------------------------------------------

namespace {
// prod of a complex tensor: a contiguous copy with the reduced dims innermost, multiplied out
// row by row (in double precision for complex64).
Tensor complex_prod(const Tensor& x, const std::vector<bool>& mask, bool keepdim) {
  DimVector sizes, strides;
  int64_t outer = 1, inner = 1;
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t d = 0; d < x->dim(); ++d)
      if (static_cast<bool>(mask[d]) == (pass == 1)) {
        sizes.push_back(x->size(d));
        strides.push_back(x->stride(d));
        (pass == 1 ? inner : outer) *= x->size(d);
      }
  Tensor c = ember::empty(sizes, x->dtype(), x->device());
  copy_into(c, make_view(x, sizes, strides, x->storage_offset()));
  Tensor out = ember::empty(reduced_sizes(x->sizes(), mask, keepdim), x->dtype(), x->device());
  EMBER_DISPATCH_COMPLEX(x->dtype(), "prod", [&] {
    const scalar_t* p = c->data_as<scalar_t>();
    scalar_t* o = out->data_as<scalar_t>();
    for (int64_t i = 0; i < outer; ++i) {
      std::complex<double> acc(1.0, 0.0);
      for (int64_t j = 0; j < inner; ++j) acc *= std::complex<double>(p[i * inner + j]);
      o[i] = scalar_t(acc);
    }
  });
  return out;
}
}  // namespace

Tensor sum(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim,
           std::optional<ScalarType> dtype) {
  reduce::check_sum_dtype_arg(dtype, "sum");
  auto mask = dim_mask(dim, self->dim(), "sum");
  Tensor x = dtype ? cast_to(self, *dtype) : self;
  Tensor out = sum_impl<false>(x, mask, keepdim, 1.0, "sum");
  return dtype ? cast_to(out, *dtype) : out;
}

Tensor nansum(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim,
              std::optional<ScalarType> dtype) {
  reduce::check_sum_dtype_arg(dtype, "nansum");
  auto mask = dim_mask(dim, self->dim(), "nansum");
  Tensor x = self;
  // A NaN counts as 0 before a cast to an integer or bool dtype, as in PyTorch (cast, it was
  // true or an arbitrary integer)
  if (dtype && is_floating(self->dtype()) && !is_floating(*dtype) && !is_complex(*dtype))
    x = dispatch::where(dispatch::isnan(self, Tensor()), Scalar(0.0), self, Tensor());
  x = dtype ? cast_to(x, *dtype) : x;
  Tensor out = sum_impl<true>(x, mask, keepdim, 1.0, "nansum");
  return dtype ? cast_to(out, *dtype) : out;
}

Tensor mean(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim,
            std::optional<ScalarType> dtype) {
  reduce::check_mean_dtype(self, dtype);
  auto mask = dim_mask(dim, self->dim(), "mean");
  Tensor x = dtype ? cast_to(self, *dtype) : self;
  return sum_impl<false>(x, mask, keepdim, static_cast<double>(reduced_numel(x->sizes(), mask)),
                         "mean");
}

Tensor nanmean(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim,
               std::optional<ScalarType> dtype) {
  reduce::check_nanmean_dtype(self, dtype);
  Tensor x = dtype ? cast_to(self, *dtype) : self;
  auto mask = dim_mask(dim, x->dim(), "nanmean");
  Tensor total = sum_impl<true>(x, mask, keepdim, 1.0, "nanmean");
  Tensor valid = dispatch::logical_not(dispatch::isnan(x, Tensor()), Tensor());
  Tensor count = sum_impl<false>(valid, mask, keepdim, 1.0, "nanmean");
  if (x->dtype() == ScalarType::Float16 || x->dtype() == ScalarType::BFloat16) {
    // The count divides in float (as torch's op math): cast to half first, 70000 would be inf.
    Tensor q = dispatch::div(cast_to(total, ScalarType::Float32),
                             cast_to(count, ScalarType::Float32), std::nullopt, Tensor());
    return cast_to(q, x->dtype());
  }
  return dispatch::div(total, count, std::nullopt, Tensor());
}

Tensor prod(const Tensor& self, std::optional<int64_t> dim, bool keepdim,
            std::optional<ScalarType> dtype) {
  reduce::check_sum_dtype_arg(dtype, "prod");
  auto mask = dim_mask(dim, self->dim(), "prod");
  Tensor x = dtype ? cast_to(self, *dtype) : self;
  if (is_complex(x->dtype())) {
    Tensor out = complex_prod(x, mask, keepdim);
    return dtype ? cast_to(out, *dtype) : out;
  }
  Tensor out = ember::empty(reduced_sizes(x->sizes(), mask, keepdim), reduce::sum_dtype(x->dtype()),
                            x->device());
  EMBER_DISPATCH_ALL_AND_UINT(x->dtype(), "prod", [&] {
    ProdReducer<scalar_t> r;
    r.out = out->data_as<typename ProdReducer<scalar_t>::Out>();
    run_reduction(x, mask, r, false);
  });
  return dtype ? cast_to(out, *dtype) : out;
}

// ---- max / min / argmax / amax -----------------------------------------------------------------

Tensor max(const Tensor& self) {
  auto mask = std::vector<bool>(self->dim(), true);
  reduce::check_nonempty(self, mask, false, "max", ErrorKind::Runtime);
  return amax_impl<true>(self, mask, false, "max");
}

Tensor min(const Tensor& self) {
  auto mask = std::vector<bool>(self->dim(), true);
  reduce::check_nonempty(self, mask, false, "min", ErrorKind::Runtime);
  return amax_impl<false>(self, mask, false, "min");
}

std::tuple<Tensor, Tensor> max(const Tensor& self, int64_t dim, bool keepdim) {
  auto mask = dim_mask(std::optional<int64_t>(dim), self->dim(), "max");
  reduce::check_nonempty(self, mask, true, "max");
  return arg_impl<true>(self, mask, keepdim, true, "max");
}

std::tuple<Tensor, Tensor> min(const Tensor& self, int64_t dim, bool keepdim) {
  auto mask = dim_mask(std::optional<int64_t>(dim), self->dim(), "min");
  reduce::check_nonempty(self, mask, true, "min");
  return arg_impl<false>(self, mask, keepdim, true, "min");
}

Tensor argmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  reduce::check_arg_reduction_dtype(self, "argmax");
  auto mask = dim_mask(dim, self->dim(), "argmax");
  reduce::check_nonempty(self, mask, dim.has_value(), "argmax");
  return std::get<1>(arg_impl<true>(self, mask, keepdim, false, "argmax"));
}

Tensor argmin(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  reduce::check_arg_reduction_dtype(self, "argmin");
  auto mask = dim_mask(dim, self->dim(), "argmin");
  reduce::check_nonempty(self, mask, dim.has_value(), "argmin");
  return std::get<1>(arg_impl<false>(self, mask, keepdim, false, "argmin"));
}

Tensor amax(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim) {
  reduce::check_amax_dims(self, dim, "amax");
  return amax_impl<true>(self, dim_mask(dim, self->dim(), "amax"), keepdim, "amax");
}

Tensor amin(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim) {
  reduce::check_amax_dims(self, dim, "amin");
  return amax_impl<false>(self, dim_mask(dim, self->dim(), "amin"), keepdim, "amin");
}

std::tuple<Tensor, Tensor> aminmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  auto mask = reduce::aminmax_mask(self, dim);
  return {amax_impl<false>(self, mask, keepdim, "aminmax"),
          amax_impl<true>(self, mask, keepdim, "aminmax")};
}

// ---- var / std / norm --------------------------------------------------------------------------

namespace {
// The (real) variance of a complex tensor: mean |x - mean(x)|^2 with the correction, the sum of
// the variances of its real and imaginary parts.
Tensor complex_var(const Tensor& self, const std::optional<DimVector>& dim,
                   std::optional<bool> unbiased, bool keepdim,
                   const std::optional<Scalar>& correction) {
  return dispatch::add(VarOps::var(dispatch::real(self), dim, unbiased, keepdim, correction),
                       VarOps::var(dispatch::imag(self), dim, unbiased, keepdim, correction),
                       Scalar(int64_t(1)), Tensor());
}
std::optional<DimVector> mean_dims(const std::optional<DimVector>& dim) {
  return dim && !dim->empty() ? dim : std::nullopt;
}
}  // namespace

Tensor var(const Tensor& self, const std::optional<DimVector>& dim, std::optional<bool> unbiased,
           bool keepdim, const std::optional<Scalar>& correction) {
  if (is_complex(self->dtype())) return complex_var(self, dim, unbiased, keepdim, correction);
  return VarOps::var(self, dim, unbiased, keepdim, correction);
}

Tensor std(const Tensor& self, const std::optional<DimVector>& dim, std::optional<bool> unbiased,
           bool keepdim, const std::optional<Scalar>& correction) {
  if (is_complex(self->dtype()))
    return dispatch::sqrt(complex_var(self, dim, unbiased, keepdim, correction), Tensor());
  return VarOps::std(self, dim, unbiased, keepdim, correction);
}

std::tuple<Tensor, Tensor> var_mean(const Tensor& self, const std::optional<DimVector>& dim,
                                    std::optional<bool> unbiased, bool keepdim,
                                    const std::optional<Scalar>& correction) {
  if (is_complex(self->dtype()))
    return {complex_var(self, dim, unbiased, keepdim, correction),
            dispatch::mean(self, mean_dims(dim), keepdim, std::nullopt)};
  return VarOps::var_mean(self, dim, unbiased, keepdim, correction);
}

std::tuple<Tensor, Tensor> std_mean(const Tensor& self, const std::optional<DimVector>& dim,
                                    std::optional<bool> unbiased, bool keepdim,
                                    const std::optional<Scalar>& correction) {
  if (is_complex(self->dtype()))
    return {dispatch::sqrt(complex_var(self, dim, unbiased, keepdim, correction), Tensor()),
            dispatch::mean(self, mean_dims(dim), keepdim, std::nullopt)};
  return VarOps::std_mean(self, dim, unbiased, keepdim, correction);
}

namespace {
Tensor norm_raw(const Tensor& x, const std::vector<bool>& mask, double pv, NormKind kind,
                bool keepdim) {
  Tensor out = ember::empty(reduced_sizes(x->sizes(), mask, keepdim), x->dtype(), x->device());
  EMBER_DISPATCH_FLOAT(x->dtype(), "norm", [&] {
    auto go = [&](auto r) {
      r.out = out->data_as<scalar_t>();
      r.p = pv;
      run_reduction(x, mask, r, false);
    };
    switch (kind) {
      case NormKind::Two:
        go(NormReducer<scalar_t, NormKind::Two>{});
        break;
      case NormKind::One:
        go(NormReducer<scalar_t, NormKind::One>{});
        break;
      case NormKind::Inf:
        go(NormReducer<scalar_t, NormKind::Inf>{});
        break;
      case NormKind::NegInf:
        go(NormReducer<scalar_t, NormKind::NegInf>{});
        break;
      case NormKind::Zero:
        go(NormReducer<scalar_t, NormKind::Zero>{});
        break;
      case NormKind::P:
        go(NormReducer<scalar_t, NormKind::P>{});
        break;
    }
  });
  return out;
}

// Below this a p-norm may have lost its value to an underflowing sum of |x|^p: the squares of
// float32 / half inputs add in float (|x| < ~1e-19), of float64 ones in double (< ~1e-154).
double norm_underflow_bound(ScalarType dt, NormKind kind, double p) {
  if (kind == NormKind::Two) return dt == ScalarType::Float64 ? 1e-145 : 1e-17;
  return std::pow(1e-290, 1.0 / p);
}

// sum |x|^p overflows (or underflows) for large (tiny) x although the norm itself is
// representable: outputs that came out inf or below the underflow bound are recomputed from
// x / amax|x| and scaled back (the others are kept bit for bit). Costs nothing unless one does.
Tensor rescale_norm(const Tensor& x, const std::vector<bool>& mask, double pv, NormKind kind,
                    bool keepdim, const Tensor& out) {
  if ((kind != NormKind::Two && kind != NormKind::P) || !(pv > 0) || out->numel() == 0 ||
      reduced_numel(x->sizes(), mask) == 0 || !out->device().is_cpu())
    return out;
  const double bound = norm_underflow_bound(x->dtype(), kind, pv);
  bool suspect = false;
  EMBER_DISPATCH_FLOAT(out->dtype(), "norm", [&] {
    const scalar_t* q = out->data_as<scalar_t>();  // fresh, contiguous
    for (int64_t i = 0; i < out->numel() && !suspect; ++i) {
      const double v = static_cast<double>(static_cast<opmath_t<scalar_t>>(q[i]));
      suspect = std::isinf(v) || v < bound;
    }
  });
  if (!suspect) return out;
  DimVector dims;
  for (int64_t d = 0; d < x->dim(); ++d)
    if (mask[d]) dims.push_back(d);
  Tensor m = dispatch::amax(dispatch::abs(x, Tensor()), dims, true);
  Tensor usable = dispatch::logical_and(dispatch::gt(m, Scalar(0.0), Tensor()),
                                        dispatch::isfinite(m, Tensor()), Tensor());
  Tensor scale = dispatch::where(usable, m, Scalar(1.0), Tensor());
  Tensor y = norm_raw(dispatch::div(x, scale, std::nullopt, Tensor()), mask, pv, kind, true);
  y = dispatch::mul(y, scale, Tensor());
  if (!keepdim) y = dispatch::reshape(y, out->sizes());
  Tensor bad = dispatch::logical_or(dispatch::isinf(out, Tensor()),
                                    dispatch::lt(out, Scalar(bound), Tensor()), Tensor());
  return dispatch::where(bad, y, out, Tensor());
}
}  // namespace

Tensor norm(const Tensor& self, const std::optional<Scalar>& p, const std::optional<DimVector>& dim,
            bool keepdim, std::optional<ScalarType> dtype) {
  reduce::check_norm_dtype(self, dtype);
  if (is_complex(self->dtype()))  // the norm of the absolute values (a real result)
    return norm(dispatch::abs(dtype ? cast_to(self, *dtype) : self, Tensor()), p, dim, keepdim,
                std::nullopt);
  Tensor x = dtype ? cast_to(self, *dtype) : self;
  auto mask = dim_mask(dim, x->dim(), "norm");
  const double pv = p ? p->to_double() : 2.0;
  const NormKind kind = reduce::norm_kind(x, mask, pv);
  Tensor out = norm_raw(x, mask, pv, kind, keepdim);
  return rescale_norm(x, mask, pv, kind, keepdim, out);
}

// ---- all / any / count_nonzero -----------------------------------------------------------------

Tensor all(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim) {
  return all_any_impl<true>(self, dim, keepdim, "all");
}

Tensor any(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim) {
  return all_any_impl<false>(self, dim, keepdim, "any");
}

Tensor count_nonzero(const Tensor& self, const std::optional<DimVector>& dim) {
  if (is_complex(self->dtype())) return count_nonzero(reduce::complex_nonzero_mask(self), dim);
  auto mask = dim_mask(dim, self->dim(), "count_nonzero");
  Tensor out =
      ember::empty(reduced_sizes(self->sizes(), mask, false), ScalarType::Int64, self->device());
  auto body = [&](auto tag) {
    CountNonzeroReducer<decltype(tag)> r;
    r.out = out->data_as<int64_t>();
    run_reduction(self, mask, r, false);
  };
  // PyTorch counts uint16/32/64 over given dims ((self != 0).sum(dim)), not over all of them
  if (dim && !dim->empty()) {
    EMBER_DISPATCH_ALL_AND_UINT(self->dtype(), "count_nonzero", [&] { body(scalar_t{}); });
  } else {
    EMBER_DISPATCH_ALL(self->dtype(), "count_nonzero", [&] { body(scalar_t{}); });
  }
  return out;
}

// ---- scans -------------------------------------------------------------------------------------

namespace {

// Runs f(src_row, dst_row, stride, n) ... over the rows of a (outer, n, inner) layout, with the
// inner dim vectorized: columns of a tile advance together one step of the scan at a time.
template <class T, class Acc, class Init, class Step>
void scan_rows(const reduce::DimRows& d, const T* src, T* dst, const Init& init,
               const Step& stepf) {
  const int64_t n = d.n, inner = d.inner;
  const int64_t tile = std::min<int64_t>(inner, 512);
  const int64_t ntiles = (inner + tile - 1) / tile, items = d.outer * ntiles;
  parallel_for(0, items,
               std::max<int64_t>(1, reduce::kReduceGrain / std::max<int64_t>(1, n * tile)),
               [&](int64_t b, int64_t e) {
                 std::vector<Acc> acc(tile);
                 for (int64_t item = b; item < e; ++item) {
                   const int64_t o = item / ntiles, c0 = (item % ntiles) * tile;
                   const int64_t len = std::min(tile, inner - c0);
                   const T* s = src + o * n * inner + c0;
                   T* t = dst + o * n * inner + c0;
                   for (int64_t k = 0; k < len; ++k) acc[k] = init();
                   for (int64_t i = 0; i < n; ++i)
                     for (int64_t k = 0; k < len; ++k)
                       t[i * inner + k] = static_cast<T>(stepf(acc[k], s[i * inner + k]));
                 }
               });
}

template <bool IsProd>
Tensor cum_impl(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype, const char* op) {
  int64_t d = wrap_dim(dim, self->dim(), op);
  ScalarType ot = dtype ? *dtype : reduce::sum_dtype(self->dtype());
  reduce::check_cum_dtype(ot, op);
  Tensor x = cast_to(self, ot);
  auto rows = reduce::dim_rows(x, d);
  Tensor out = ember::empty(x->sizes(), ot, x->device());
  if (x->numel() == 0) return out;
  EMBER_DISPATCH_ALL_AND_COMPLEX(ot, op, [&] {
    // complex scans accumulate in complex<double>
    using Acc =
        std::conditional_t<is_complex_v<scalar_t>, std::complex<double>, sum_acc_t<scalar_t>>;
    scan_rows<scalar_t, Acc>(
        rows, rows.t->data_as<scalar_t>(), out->data_as<scalar_t>(),
        [] { return Acc(IsProd ? 1 : 0); },
        [](Acc& a, scalar_t v) {
          Acc x = static_cast<Acc>(static_cast<opmath_t<scalar_t>>(v));
          if constexpr (IsProd) {
            a *= x;
          } else {
            a += x;
          }
          return static_cast<opmath_t<scalar_t>>(a);
        });
  });
  return out;
}

template <bool IsMax>
std::tuple<Tensor, Tensor> cumext_impl(const Tensor& self, int64_t dim, const char* op) {
  int64_t d = wrap_dim(dim, self->dim(), op);
  auto rows = reduce::dim_rows(self, d);
  Tensor values = ember::empty(self->sizes(), self->dtype(), self->device());
  Tensor indices = ember::empty(self->sizes(), ScalarType::Int64, self->device());
  if (self->numel() == 0) return {values, indices};
  EMBER_DISPATCH_ALL(self->dtype(), op, [&] {
    using V = opmath_t<scalar_t>;
    const scalar_t* src = rows.t->data_as<scalar_t>();
    scalar_t* vo = values->data_as<scalar_t>();
    int64_t* io = indices->data_as<int64_t>();
    reduce::for_rows(rows, 1, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t off = rows.offset(r), s = rows.inner;
        V best = static_cast<V>(src[off]);
        int64_t bi = 0;
        for (int64_t i = 0; i < rows.n; ++i) {
          V x = static_cast<V>(src[off + i * s]);
          // PyTorch's rule: ties move the index forward, a NaN always takes over and then stays.
          if (is_nan(x) || (!is_nan(best) && (IsMax ? x >= best : x <= best))) {
            best = x;
            bi = i;
          }
          vo[off + i * s] = static_cast<scalar_t>(best);
          io[off + i * s] = bi;
        }
      }
    });
  });
  return {values, indices};
}

// log(exp(a) + exp(b)) for complex a (the running value) and b (the next element), PyTorch's
// way: max is the one of larger real part (b on a tie), and the result max + log1p(exp(min -
// max)), whose imaginary part is max's plus an angle in [-pi/2, pi/2] (not wrapped).
std::complex<double> log_add_exp(std::complex<double> a, std::complex<double> b) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (std::isnan(a.real()) || std::isnan(a.imag()) || std::isnan(b.real()) || std::isnan(b.imag()))
    return {nan, nan};
  const std::complex<double> hi = a.real() > b.real() ? a : b, lo = a.real() > b.real() ? b : a;
  if (!std::isfinite(lo.real()) && lo.real() == hi.real())
    return lo.real() < 0 ? lo : std::log(std::exp(lo) + std::exp(hi));  // both -inf / +inf
  const std::complex<double> z = std::exp(lo - hi);                     // |z| <= 1
  // log1p(z), accurate for small |z|: log|1 + z| = log1p(2 Re z + |z|^2) / 2.
  const double re = 0.5 * std::log1p(2 * z.real() + std::norm(z));
  return hi + std::complex<double>(re, std::atan2(z.imag(), 1 + z.real()));
}

}  // namespace

Tensor _logcumsumexp(const Tensor& self, int64_t dim) {
  EMBER_CHECK_KIND(is_complex(self->dtype()), DtypeNotImplemented,
                   "_logcumsumexp: expected a complex input, got ", dtype_name(self->dtype()));
  int64_t d = wrap_dim(dim, self->dim(), "logcumsumexp");
  Tensor out = ember::empty(self->sizes(), self->dtype(), self->device());
  if (self->numel() == 0) return out;
  auto rows = reduce::dim_rows(self, d);
  EMBER_DISPATCH_COMPLEX(self->dtype(), "logcumsumexp", [&] {
    using C = std::complex<double>;
    // (whether the column has started, the running value)
    scan_rows<scalar_t, std::pair<bool, C>>(
        rows, rows.t->data_as<scalar_t>(), out->data_as<scalar_t>(),
        [] { return std::pair<bool, C>(false, C()); },
        [](std::pair<bool, C>& a, scalar_t v) {
          const C x(static_cast<double>(v.real()), static_cast<double>(v.imag()));
          a.second = a.first ? log_add_exp(a.second, x) : x;
          a.first = true;
          return scalar_t(a.second);
        });
  });
  return out;
}

Tensor cumsum(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return cum_impl<false>(self, dim, dtype, "cumsum");
}

Tensor cumprod(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return cum_impl<true>(self, dim, dtype, "cumprod");
}

std::tuple<Tensor, Tensor> cummax(const Tensor& self, int64_t dim) {
  return cumext_impl<true>(self, dim, "cummax");
}

std::tuple<Tensor, Tensor> cummin(const Tensor& self, int64_t dim) {
  return cumext_impl<false>(self, dim, "cummin");
}

}  // namespace cpu
}  // namespace ember
