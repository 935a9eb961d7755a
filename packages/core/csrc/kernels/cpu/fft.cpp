// CPU kernels of the FFT primitives (ops/complex.yaml: _fft_c2c, _fft_r2c, _fft_c2r).
//
// One length-n transform is an iterative Stockham FFT (fft_kernels.inc): log_R(n) passes of
// radix 8, 4, 2, 5 and 3 (written out; the other primes up to kMaxRadix through a generic
// O(p^2) butterfly) ping-pong between two buffers, each reading its precomputed twiddles in
// order; the result comes out in natural order, with no recursion and no bit reversal. A length
// with a prime factor above kMaxRadix goes through Bluestein's algorithm: the DFT becomes a
// circular convolution with a chirp, done with power-of-two FFTs (the chirp and the FFT of its
// conjugate are part of the plan). Plans (radices, twiddles, chirps) are built once per length
// and dtype and cached.
//
// The data are split into real and imaginary arrays, and transforms of the same length run in
// lanes: L lines of a batch interleaved element by element, so every butterfly covers L lines
// with vector arithmetic whatever the pass. Contiguous lines of a length n = n1 n2 with n1, n2
// multiples of the vector width (up to kFourStepMax) run one at a time as a four-step FFT whose
// two halves run in lanes (the columns of the line read as an n1 x n2 matrix, then, after the
// twiddles and a register transpose, the rows), its first and last passes (de)interleaving the
// complex numbers in registers: a line's buffers stay in L1/L2, where lanes of whole lines
// would stream through L2 once per pass; Bluestein lengths whose convolution length has such a
// plan go the same way, line by line. A long transform (or a lone line) otherwise runs alone
// (L = 1) and its passes vectorize over the butterflies, split over the thread pool when the
// batch cannot be. Inverse transforms are conj(FFT(conj(x))), folded into the loads and stores,
// as is the normalization. A real signal of even length n is one complex FFT of length n / 2
// and a post-twiddle pass (rfft), and the inverse the other way round (irfft).
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/dispatch.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/iterator.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

constexpr int64_t kMaxRadix = 61;        // larger prime factors use Bluestein's algorithm
constexpr int64_t kFourStepMax = 16384;  // longest line with a four-step plan
constexpr int64_t kPad = 48;             // scalars between a four-step line's work buffers
constexpr double kPi = 3.14159265358979323846;

namespace fft_base {
#define EMBER_FFT_VEC_BYTES 16
#include "kernels/cpu/fft_kernels.inc"
}  // namespace fft_base

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define EMBER_FFT_AVX 1
EMBER_TARGET_BEGIN("avx2,fma")
namespace fft_avx2 {
#define EMBER_FFT_VEC_BYTES 32
#include "kernels/cpu/fft_kernels.inc"
}  // namespace fft_avx2
EMBER_TARGET_END()
EMBER_TARGET_BEGIN("avx512f,avx2,fma")
namespace fft_avx512 {
#define EMBER_FFT_VEC_BYTES 64
#include "kernels/cpu/fft_kernels.inc"
}  // namespace fft_avx512
EMBER_TARGET_END()
#endif

template <class T>
struct Kernels {
  void (*pass)(const T*, const T*, T*, T*, int64_t, int64_t, int64_t, int64_t, const T*, const T*,
               const T*, const T*, int64_t, int64_t);
  void (*real_post)(const T*, const T*, T*, T*, int64_t, int64_t, const T*, const T*, T, bool);
  int64_t (*rows_to_lanes)(const T*, int64_t, int64_t, int64_t, T, T*, T*);
  int64_t (*lanes_to_rows)(const T*, const T*, int64_t, int64_t, T, T, T*, int64_t);
  int64_t (*width)();  // scalars per vector
  void (*deinterleave)(const T*, int64_t, T, T*, T*);
  void (*interleave)(const T*, const T*, int64_t, T, T, T*);
  void (*twiddle_transpose)(const T*, const T*, const T*, const T*, int64_t, int64_t, T*, T*);
  void (*real_post_row)(const T*, const T*, T*, int64_t, const T*, const T*, T);
  void (*cmul)(const T*, const T*, const T*, const T*, T*, T*, int64_t, T, T);
  void (*cmul_from_il)(const T*, T, const T*, const T*, T*, T*, int64_t);
  void (*cmul_to_il)(const T*, const T*, T, const T*, const T*, T, T, T*, int64_t);
  bool (*out_tw)(const T*, const T*, T*, T*, int64_t, int64_t, int64_t, int64_t, const T*, const T*,
                 const T*, const T*, T);
  void (*transpose_blocks)(const T*, const T*, int64_t, int64_t, T*, T*);
  bool (*first_il)(const T*, T, T*, T*, int64_t, int64_t, int64_t);
  bool (*last_il)(const T*, const T*, T*, int64_t, int64_t, int64_t, int64_t, const T*, const T*, T,
                  T);
};

#define EMBER_FFT_PICK(space, sfx)                               \
  {&space::pass_##sfx,          &space::real_post_##sfx,         \
   &space::rows_to_lanes_##sfx, &space::lanes_to_rows_##sfx,     \
   &space::width_##sfx,         &space::deinterleave_##sfx,      \
   &space::interleave_##sfx,    &space::twiddle_transpose_##sfx, \
   &space::real_post_row_##sfx, &space::cmul_##sfx,              \
   &space::cmul_from_il_##sfx,  &space::cmul_to_il_##sfx,        \
   &space::out_tw_##sfx,        &space::transpose_blocks_##sfx,  \
   &space::first_il_##sfx,      &space::last_il_##sfx}

// The kernels for this CPU (EMBER_CPU_ISA caps the choice).
template <class T>
Kernels<T> kernels();
template <>
Kernels<float> kernels<float>() {
#ifdef EMBER_FFT_AVX
  if (cpu_isa() == Isa::Avx512) return EMBER_FFT_PICK(fft_avx512, f32);
  if (cpu_isa() == Isa::Avx2) return EMBER_FFT_PICK(fft_avx2, f32);
#endif
  return EMBER_FFT_PICK(fft_base, f32);
}
template <>
Kernels<double> kernels<double>() {
#ifdef EMBER_FFT_AVX
  if (cpu_isa() == Isa::Avx512) return EMBER_FFT_PICK(fft_avx512, f64);
  if (cpu_isa() == Isa::Avx2) return EMBER_FFT_PICK(fft_avx2, f64);
#endif
  return EMBER_FFT_PICK(fft_base, f64);
}
#undef EMBER_FFT_PICK

// exp(-2 pi i k / n) in double precision. The angle is folded into [0, pi/4] by the circle's
// symmetries first, so the roots at multiples of pi/2 are exact (1, -i, -1, i: a real signal's
// Nyquist bin comes out with an imaginary part of exactly 0) and the others are as accurate as
// cos and sin near 0.
std::complex<double> unit_root(int64_t k, int64_t n) {
  int64_t u = 4 * (k % n);  // the angle is pi * u / (2n), u in [0, 4n)
  double c_sign = 1, s_sign = 1;
  bool swap = false;
  if (u > 2 * n) u = 4 * n - u, s_sign = -1;  // 2 pi - a
  if (u > n) u = 2 * n - u, c_sign = -1;      // pi - a
  if (2 * u > n) u = n - u, swap = true;      // pi / 2 - a
  const double a = kPi * static_cast<double>(u) / (2.0 * static_cast<double>(n));
  double c = std::cos(a), s = std::sin(a);
  if (swap) std::swap(c, s);
  return {c_sign * c, -s_sign * s};
}

// The radices of n, in pass order (empty when n has a prime factor above kMaxRadix): as many 8s
// as the power of two allows (a 4 or two for the rest), then 5s, 3s and the other primes.
std::vector<int64_t> factorize(int64_t n) {
  std::vector<int64_t> f;
  int e = 0;
  while (n % 2 == 0) n /= 2, ++e;
  int eights = e / 3, fours = 0, twos = 0;
  if (e % 3 == 2) {
    fours = 1;
  } else if (e % 3 == 1) {
    if (eights > 0)
      --eights, fours = 2;
    else
      twos = 1;
  }
  f.insert(f.end(), eights, 8);
  f.insert(f.end(), fours, 4);
  f.insert(f.end(), twos, 2);
  for (int64_t p : {5, 3})
    while (n % p == 0) f.push_back(p), n /= p;
  for (int64_t p = 7; p * p <= n; p += 2)
    while (n % p == 0) f.push_back(p), n /= p;
  if (n > 1) f.push_back(n);
  for (int64_t p : f)
    if (p > kMaxRadix) return {};
  return f;
}

template <class T>
struct Plan {
  int64_t n = 1;
  Kernels<T> kern;
  struct Pass {
    int64_t radix, ns;        // radix and the sub-transform length before the pass
    std::vector<T> twr, twi;  // w^(r k) at [(r - 1) * ns + k], w = exp(-2 pi i / (ns R))
    std::vector<T> gr, gi;    // the radix-th unit roots (generic radices only)
  };
  std::vector<Pass> passes;
  // Bluestein: the convolution length m (a power of two >= 2n - 1) and its plan, the chirp
  // exp(-pi i j^2 / n), j < n, and the FFT of the conjugate chirp over m (scaled by 1 / m).
  bool bluestein = false;
  int64_t m = 0;
  std::unique_ptr<Plan> sub;
  std::vector<T> chr, chi, cfr, cfi;
  // Four-step form of a lone line (L = 1) of length n = n1 n2, n1 and n2 multiples of the vector
  // width W (W^2 <= n <= kFourStepMax): the line read as n1 rows of n2 gets the length-n1 FFTs
  // of its n2 columns side by side in lanes (L = n2), the twiddles w_n^(k1 j2) with a transpose,
  // then the length-n2 FFTs of the n1 columns of that (L = n1), which leave X[k1 + n1 k2] at
  // k2 n1 + k1: natural order. A line's buffers stay in L1/L2 and no pass runs on scalars.
  int64_t n1 = 0, n2 = 0;
  std::unique_ptr<Plan> p1, p2;
  std::vector<T> t4r, t4i;  // w_n^(k1 j2) at [k1 * n2 + j2]

  explicit Plan(int64_t len, bool four_step = true) : n(len), kern(kernels<T>()) {
    std::vector<int64_t> radices = factorize(n);
    if (radices.empty() && n > 1) {
      init_bluestein();
      return;
    }
    int64_t ns = 1;
    for (int64_t p : radices) {
      Pass ps;
      ps.radix = p, ps.ns = ns;
      if (ns > 1) {
        ps.twr.resize((p - 1) * ns), ps.twi.resize((p - 1) * ns);
        for (int64_t r = 1; r < p; ++r)
          for (int64_t k = 0; k < ns; ++k) {
            const std::complex<double> w = unit_root(r * k, ns * p);
            ps.twr[(r - 1) * ns + k] = static_cast<T>(w.real());
            ps.twi[(r - 1) * ns + k] = static_cast<T>(w.imag());
          }
      }
      if (p != 2 && p != 3 && p != 4 && p != 5 && p != 8) {
        ps.gr.resize(p), ps.gi.resize(p);
        for (int64_t t = 0; t < p; ++t) {
          const std::complex<double> g = unit_root(t, p);
          ps.gr[t] = static_cast<T>(g.real()), ps.gi[t] = static_cast<T>(g.imag());
        }
      }
      passes.push_back(std::move(ps));
      ns *= p;
    }
    if (four_step) init_four_step();
  }

  void init_four_step() {
    const int64_t w = kern.width();
    if (n > kFourStepMax || n < w * w) return;
    for (int64_t a = static_cast<int64_t>(std::sqrt(static_cast<double>(n))); a >= w; --a)
      if (n % a == 0 && a % w == 0 && (n / a) % w == 0) {
        n1 = a;
        break;
      }
    if (n1 == 0) return;
    n2 = n / n1;
    p1 = std::make_unique<Plan>(n1, false);
    p2 = std::make_unique<Plan>(n2, false);
    t4r.resize(n), t4i.resize(n);
    for (int64_t k1 = 0; k1 < n1; ++k1)
      for (int64_t j2 = 0; j2 < n2; ++j2) {
        const std::complex<double> c = unit_root(k1 * j2, n);
        t4r[k1 * n2 + j2] = static_cast<T>(c.real()), t4i[k1 * n2 + j2] = static_cast<T>(c.imag());
      }
  }

  // Whether lone lines (L = 1) are the fast way through this plan: four-step, directly or as
  // Bluestein's convolution.
  bool lines_alone() const { return bluestein ? sub->n1 > 0 : n1 > 0; }

  void init_bluestein() {
    bluestein = true;
    m = 1;
    while (m < 2 * n - 1) m *= 2;
    sub = std::make_unique<Plan>(m);
    chr.resize(n), chi.resize(n);
    for (int64_t j = 0; j < n; ++j) {
      // j^2 mod 2n keeps the angle small, so the chirp stays accurate for large j.
      const uint64_t uj = static_cast<uint64_t>(j);
      const int64_t j2 = static_cast<int64_t>((uj * uj) % static_cast<uint64_t>(2 * n));
      const std::complex<double> c = unit_root(j2, 2 * n);
      chr[j] = static_cast<T>(c.real()), chi[j] = static_cast<T>(c.imag());
    }
    std::vector<T> br(m, T(0)), bi(m, T(0));
    for (int64_t j = 0; j < n; ++j) {
      br[j] = chr[j], bi[j] = -chi[j];
      if (j > 0) br[m - j] = chr[j], bi[m - j] = -chi[j];
    }
    cfr.resize(m), cfi.resize(m);
    std::vector<T> work(scratch_size(1));
    sub->execute(br.data(), bi.data(), cfr.data(), cfi.data(), work.data(), 1, false);
    const T inv_m = T(1) / static_cast<T>(m);
    for (int64_t k = 0; k < m; ++k) cfr[k] *= inv_m, cfi[k] *= inv_m;
  }

  // Scalars of scratch execute() needs for L lanes.
  int64_t scratch_size(int64_t L) const {
    if (bluestein) return 4 * m * L + sub->scratch_size(L);
    return L == 1 && n1 > 0 ? 6 * (n + kPad) : 2 * n * L;
  }

  // y = DFT(x) for L lanes of split complex data (x is clobbered); `parallel` splits the passes
  // over the thread pool.
  void execute(T* xr, T* xi, T* yr, T* yi, T* work, int64_t L, bool parallel) const {
    if (bluestein) return execute_bluestein(xr, xi, yr, yi, work, L, parallel);
    if (L == 1 && n1 > 0) {
      T *br = work, *bi = work + n, *sw = work + 2 * n;
      // x is free once the first pass has read it: the transpose goes there
      p1->execute_twiddled(xr, xi, br, bi, sw, sw + n, t4r.data(), t4i.data(), n2, parallel, xr,
                           xi);
      p2->execute(xr, xi, yr, yi, sw, n1, parallel);
      return;
    }
    const int64_t S = static_cast<int64_t>(passes.size()), nl = n * L;
    if (S == 0) {
      std::memcpy(yr, xr, sizeof(T) * nl);
      std::memcpy(yi, xi, sizeof(T) * nl);
      return;
    }
    run_passes(0, S, xr, xi, yr, yi, work, work + nl, L, parallel);
  }

  // The four-step's first half: passes [s0, S) from (ar, ai) in L lanes (s0 < S), the outputs of
  // the last one times the factors f (per element, at the outputs' indices) and transposed into
  // (cr, ci) (L rows of n); b and t are scratch, a may be c. The last pass applies the factors
  // while its outputs are in registers when its radix allows, else the transpose does.
  void execute_twiddled(const T* ar, const T* ai, T* br, T* bi, T* tr, T* ti, const T* fr,
                        const T* fi, int64_t L, bool parallel, T* cr, T* ci, int64_t s0 = 0) const {
    const int64_t S = static_cast<int64_t>(passes.size());
    const Pass& last = passes[S - 1];
    const T* lr = ar;  // passes [s0, S - 1) land in t, the last goes from there into b
    const T* li = ai;
    if (S - 1 > s0) run_passes(s0, S - 1, ar, ai, tr, ti, br, bi, L, parallel), lr = tr, li = ti;
    if (kern.out_tw(lr, li, br, bi, n, last.ns, L, last.radix, last.twr.data(), last.twi.data(), fr,
                    fi, T(1))) {
      kern.transpose_blocks(br, bi, n, L, cr, ci);
      return;
    }
    run_pass(S - 1, lr, li, br, bi, L, parallel);
    kern.twiddle_transpose(br, bi, fr, fi, n, L, cr, ci);
  }

  // y = DFT(x) times the factors f elementwise, the imaginary parts then times so, for one line
  // (L = 1) of a four-step plan (x is clobbered; work: scratch_size(1) scalars): the factors go
  // with the last pass when its radix allows.
  void execute_factors(T* xr, T* xi, T* yr, T* yi, T* work, const T* fr, const T* fi, T so) const {
    T *br = work, *bi = work + n, *sw = work + 2 * n;
    p1->execute_twiddled(xr, xi, br, bi, sw, sw + n, t4r.data(), t4i.data(), n2, false, xr, xi);
    const Plan& b = *p2;
    const int64_t S2 = static_cast<int64_t>(b.passes.size());
    const T* lr = xr;
    const T* li = xi;
    if (S2 > 1) b.run_passes(0, S2 - 1, xr, xi, br, bi, sw, sw + n, n1, false), lr = br, li = bi;
    const Pass& last = b.passes[S2 - 1];
    if (kern.out_tw(lr, li, yr, yi, n2, last.ns, n1, last.radix, last.twr.data(), last.twi.data(),
                    fr, fi, so))
      return;
    b.run_pass(S2 - 1, lr, li, yr, yi, n1, false);
    kern.cmul(yr, yi, fr, fi, yr, yi, n, T(1), so);
  }

  // Pass s from (sr, si) into (dr, di), its blocks split over the thread pool when `parallel`.
  void run_pass(int64_t s, const T* sr, const T* si, T* dr, T* di, int64_t L, bool parallel) const {
    const Pass& ps = passes[s];
    const int64_t blocks = n / (ps.radix * ps.ns);
    auto run = [&](int64_t b0, int64_t b1) {
      kern.pass(sr, si, dr, di, n, ps.ns, L, ps.radix, ps.twr.data(), ps.twi.data(), ps.gr.data(),
                ps.gi.data(), b0, b1);
    };
    if (parallel && blocks > 1)
      parallel_for(0, blocks, std::max<int64_t>(1, 32768 / (ps.radix * ps.ns * L)), run);
    else
      run(0, blocks);
  }

  // Passes [s0, s1) from (ar, ai), the last landing in (yr, yi), the ones before alternating
  // with (tr, ti).
  void run_passes(int64_t s0, int64_t s1, const T* ar, const T* ai, T* yr, T* yi, T* tr, T* ti,
                  int64_t L, bool parallel) const {
    for (int64_t s = s0; s < s1; ++s) {
      const bool to_y = (s1 - 1 - s) % 2 == 0;
      T* dr = to_y ? yr : tr;
      T* di = to_y ? yi : ti;
      run_pass(s, ar, ai, dr, di, L, parallel);
      ar = dr, ai = di;
    }
  }

  // One line of n interleaved complex numbers at src (imaginary parts times sign) through the
  // four-step plan, the first pass reading and the last pass writing interleaved numbers
  // (in registers): into dst (times sr and si) or, when dst is null, into (yr, yi) unscaled.
  // work: 6n scalars. dst may be src.
  void execute_line(const T* src, T sign, T* yr, T* yi, T* dst, T sr, T si, T* work) const {
    // buffers kPad scalars apart beyond n, so that they do not sit at the same offsets mod 4 KiB
    const int64_t st = n + kPad;
    T *br = work, *bi = work + st, *tr = work + 2 * st, *ti = work + 3 * st;
    T *cr = work + 4 * st, *ci = work + 5 * st;
    const Plan &a = *p1, &b = *p2;
    const int64_t S1 = static_cast<int64_t>(a.passes.size()),
                  S2 = static_cast<int64_t>(b.passes.size());
    // the first pass (or the deinterleaved line) into c, which the transpose fills at the end
    if (S1 > 1 && kern.first_il(src, sign, cr, ci, n1, n2, a.passes[0].radix)) {
      a.execute_twiddled(cr, ci, br, bi, tr, ti, t4r.data(), t4i.data(), n2, false, cr, ci, 1);
    } else {
      kern.deinterleave(src, n, sign, cr, ci);
      a.execute_twiddled(cr, ci, br, bi, tr, ti, t4r.data(), t4i.data(), n2, false, cr, ci);
    }
    if (dst == nullptr) return b.run_passes(0, S2, cr, ci, yr, yi, tr, ti, n1, false);
    const T* lr = cr;
    const T* li = ci;
    if (S2 > 1) b.run_passes(0, S2 - 1, cr, ci, tr, ti, br, bi, n1, false), lr = tr, li = ti;
    const Pass& last = b.passes[S2 - 1];
    if (kern.last_il(lr, li, dst, n2, last.ns, n1, last.radix, last.twr.data(), last.twi.data(), sr,
                     si))
      return;
    b.run_pass(S2 - 1, lr, li, yr, yi, n1, false);
    kern.interleave(yr, yi, n, sr, si, dst);
  }

  // Bluestein's algorithm for one line of interleaved complex numbers, src to dst as in
  // execute_line (dst may be src), the chirp products fused with the (de)interleaving. work:
  // scratch_size(1) scalars.
  void execute_bluestein_line(const T* src, T sign, T* dst, T sr, T si, T* work) const {
    T *ar = work, *ai = work + m, *br = work + 2 * m, *bi = work + 3 * m, *sw = work + 4 * m;
    kern.cmul_from_il(src, sign, chr.data(), chi.data(), ar, ai, n);
    std::fill(ar + n, ar + m, T(0));
    std::fill(ai + n, ai + m, T(0));
    sub->execute_factors(ar, ai, br, bi, sw, cfr.data(), cfi.data(), T(-1));  // conj(A F)
    sub->execute(br, bi, ar, ai, sw, 1, false);
    kern.cmul_to_il(ar, ai, T(-1), chr.data(), chi.data(), sr, si, dst, n);
  }

 private:
  void execute_bluestein(T* xr, T* xi, T* yr, T* yi, T* work, int64_t L, bool parallel) const {
    const int64_t ml = m * L;
    T *ar = work, *ai = work + ml, *br = work + 2 * ml, *bi = work + 3 * ml;
    T* sw = work + 4 * ml;
    if (L == 1) {  // the same on vectors along the line
      kern.cmul(xr, xi, chr.data(), chi.data(), ar, ai, n, T(1), T(1));
      std::fill(ar + n, ar + m, T(0));
      std::fill(ai + n, ai + m, T(0));
      sub->execute(ar, ai, br, bi, sw, 1, parallel);
      kern.cmul(br, bi, cfr.data(), cfi.data(), ar, ai, m, T(1), T(-1));
      sub->execute(ar, ai, br, bi, sw, 1, parallel);
      kern.cmul(br, bi, chr.data(), chi.data(), yr, yi, n, T(-1), T(1));
      return;
    }
    for (int64_t j = 0; j < n; ++j) {
      const T cr = chr[j], ci = chi[j];
      for (int64_t v = 0; v < L; ++v) {
        const T a = xr[j * L + v], b = xi[j * L + v];
        ar[j * L + v] = a * cr - b * ci, ai[j * L + v] = a * ci + b * cr;
      }
    }
    std::fill(ar + n * L, ar + ml, T(0));
    std::fill(ai + n * L, ai + ml, T(0));
    sub->execute(ar, ai, br, bi, sw, L, parallel);
    // conj(A * B) / m, whose FFT is m times the conjugate of the inverse FFT of A * B
    for (int64_t k = 0; k < m; ++k) {
      const T cr = cfr[k], ci = cfi[k];
      for (int64_t v = 0; v < L; ++v) {
        const T a = br[k * L + v], b = bi[k * L + v];
        ar[k * L + v] = a * cr - b * ci, ai[k * L + v] = -(a * ci + b * cr);
      }
    }
    sub->execute(ar, ai, br, bi, sw, L, parallel);
    for (int64_t k = 0; k < n; ++k) {
      const T cr = chr[k], ci = chi[k];
      for (int64_t v = 0; v < L; ++v) {
        const T a = br[k * L + v], b = -bi[k * L + v];
        yr[k * L + v] = a * cr - b * ci, yi[k * L + v] = a * ci + b * cr;
      }
    }
  }
};

// The plan of a length, built once (its twiddles cost about as much as a transform) and kept
// for the next call; the cache holds 64 lengths per dtype and starts over when full (a plan in
// use lives on through its shared_ptr).
template <class T>
std::shared_ptr<const Plan<T>> plan_for(int64_t len) {
  static std::mutex mu;
  static std::map<int64_t, std::shared_ptr<const Plan<T>>> cache;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(len);
    if (it != cache.end()) return it->second;
  }
  auto plan = std::make_shared<const Plan<T>>(len);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(len);  // another thread may have built it meanwhile
  if (it != cache.end()) return it->second;
  if (cache.size() >= 64) cache.clear();
  cache.emplace(len, plan);
  return plan;
}

// The post-twiddles exp(-2 pi i k / n), k <= n / 2, of a real transform of even length n (real
// parts, then imaginary parts).
template <class T>
std::shared_ptr<const std::vector<T>> real_twiddles(int64_t n) {
  static std::mutex mu;
  static std::map<int64_t, std::shared_ptr<const std::vector<T>>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  const int64_t h = n / 2;
  auto w = std::make_shared<std::vector<T>>(2 * (h + 1));
  for (int64_t k = 0; k <= h; ++k) {
    const std::complex<double> c = unit_root(k, n);
    (*w)[k] = static_cast<T>(c.real()), (*w)[h + 1 + k] = static_cast<T>(c.imag());
  }
  if (cache.size() >= 64) cache.clear();
  cache.emplace(n, w);
  return w;
}

// Per-thread scratch of at least `count` scalars, kept for the next call (up to 8M scalars;
// larger requests get a buffer of their own, freed by the caller's holder).
template <class T>
T* scratch(int64_t count, std::vector<T>& own) {
  constexpr int64_t kKeep = int64_t(1) << 23;
  if (count > kKeep) {
    own.resize(count);
    return own.data();
  }
  static thread_local std::vector<T> kept;
  if (static_cast<int64_t>(kept.size()) < count) kept.resize(count);
  return kept.data();
}

// The lane buffers are filled and drained kBlock elements at a time (all lanes), so the lines
// of the block stay in L1 while the lanes are gathered from or scattered to them.
constexpr int64_t kBlock = 64;

// How lines of one dim are cut into work units: groups of L lines in lanes while the group's
// buffers stay cache-sized, single lines otherwise (and for the batch's remainder).
struct Lanes {
  int64_t L = 1, groups = 0, units = 0;
  Lanes(int64_t lines, int64_t len, size_t scalar_size, bool alone) {
    const int64_t want = scalar_size == 4 ? 16 : 8;
    if (!alone && lines >= want && len * want <= 65536) L = want;
    groups = lines / L;
    units = groups + (L > 1 ? lines % L : 0);
  }
  // Lines [first, first + count) of unit u.
  void unit(int64_t u, int64_t* first, int64_t* count) const {
    if (u < groups) {
      *first = u * L, *count = L;
    } else {
      *first = groups * L + (u - groups), *count = 1;
    }
  }
};

// Runs f(first_line, line_count, lanes, parallel_passes) over the units of `lines` lines of
// length len (one line each when `alone`): the units split over the thread pool, or one at a
// time with their passes split when there are too few units to go round.
template <class F>
void for_units(int64_t lines, int64_t len, size_t scalar_size, bool alone, const F& f) {
  const Lanes lanes(lines, len, scalar_size, alone);
  const int64_t threads = in_parallel_region() ? 1 : get_num_threads();
  if (lanes.units < threads && len * lanes.L >= 32768) {
    for (int64_t u = 0; u < lanes.units; ++u) {
      int64_t first, count;
      lanes.unit(u, &first, &count);
      f(first, count, count, true);
    }
    return;
  }
  const int64_t grain = std::max<int64_t>(1, 32768 / (len * lanes.L));
  parallel_for(0, lanes.units, grain, [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      int64_t first, count;
      lanes.unit(u, &first, &count);
      f(first, count, count, false);
    }
  });
}

// Line geometry of dim d of a contiguous tensor: line l starts at offset(l), stride `inner`.
struct Lines {
  int64_t len, inner, count;
  Lines(const DimVector& sizes, int64_t d) : len(sizes[d]), inner(1), count(1) {
    for (int64_t i = 0; i < static_cast<int64_t>(sizes.size()); ++i)
      if (i > d)
        inner *= sizes[i];
      else if (i < d)
        count *= sizes[i];
    count *= inner;
  }
  int64_t offset(int64_t l, int64_t line_len) const {
    return (l / inner) * line_len * inner + l % inner;
  }
};

// Points 0..len-1 of lanes 0..count-1 of (yr, yi) (point j of lane v at j * L + v), the real
// parts times sr and the imaginary ones times si, into lines first.. of dst (`len` points each):
// by the kernel's register transposes when `rows` (contiguous lines filling every lane), then
// the rest in cache blocks.
template <class T>
void lanes_to_lines(const Plan<T>& plan, const T* yr, const T* yi, int64_t len, int64_t L, T sr,
                    T si, std::complex<T>* dst, const Lines& ln, int64_t first, int64_t count,
                    bool rows) {
  const int64_t done = rows ? plan.kern.lanes_to_rows(yr, yi, len, L, sr, si,
                                                      reinterpret_cast<T*>(dst + first * len), len)
                            : 0;
  for (int64_t j0 = done; j0 < len; j0 += kBlock)
    for (int64_t v = 0; v < count; ++v) {
      std::complex<T>* o = dst + ln.offset(first + v, len);
      for (int64_t j = j0, je = std::min(len, j0 + kBlock); j < je; ++j)
        o[j * ln.inner] = {yr[j * L + v] * sr, yi[j * L + v] * si};
    }
}

// dst = (inverse) DFT of src along dim d of contiguous buffers of shape `sizes` (dst may be
// src), times scale.
template <class T>
void c2c_dim(const std::complex<T>* src, std::complex<T>* dst, const DimVector& sizes, int64_t d,
             bool forward, T scale) {
  const Lines ln(sizes, d);
  const int64_t len = ln.len;
  if (ln.count == 0) return;
  const std::shared_ptr<const Plan<T>> shared = plan_for<T>(len);
  const Plan<T>& plan = *shared;
  const T sign = forward ? T(1) : T(-1);
  const bool alone = ln.inner == 1 && plan.lines_alone();
  for_units(
      ln.count, len, sizeof(T), alone, [&](int64_t first, int64_t count, int64_t L, bool par) {
        std::vector<T> own;
        T* buf = scratch<T>(4 * len * L + plan.scratch_size(L), own);
        T *xr = buf, *xi = buf + len * L, *yr = buf + 2 * len * L, *yi = buf + 3 * len * L;
        if (L == 1 && ln.inner == 1) {  // one contiguous line
          const T* s = reinterpret_cast<const T*>(src + ln.offset(first, len));
          T* d = reinterpret_cast<T*>(dst + ln.offset(first, len));
          if (plan.n1 > 0)
            return plan.execute_line(s, sign, yr, yi, d, scale, sign * scale, buf + 4 * len);
          if (plan.bluestein)
            return plan.execute_bluestein_line(s, sign, d, scale, sign * scale, buf + 4 * len);
          plan.kern.deinterleave(s, len, sign, xr, xi);
          plan.execute(xr, xi, yr, yi, buf + 4 * len, 1, par);
          plan.kern.interleave(yr, yi, len, scale, sign * scale, d);
          return;
        }
        // whole rows in full lanes: register transposes for the most, scalar loops for the
        // rest
        const bool rows = ln.inner == 1 && count == L && L > 1;
        const int64_t in_done =
            rows ? plan.kern.rows_to_lanes(reinterpret_cast<const T*>(src + first * len), len, len,
                                           L, sign, xr, xi)
                 : 0;
        for (int64_t j0 = in_done; j0 < len; j0 += kBlock)
          for (int64_t v = 0; v < count; ++v) {
            const std::complex<T>* s = src + ln.offset(first + v, len);
            for (int64_t j = j0, je = std::min(len, j0 + kBlock); j < je; ++j) {
              const std::complex<T> a = s[j * ln.inner];
              xr[j * L + v] = a.real(), xi[j * L + v] = sign * a.imag();
            }
          }
        plan.execute(xr, xi, yr, yi, buf + 4 * len * L, L, par);
        const T si = sign * scale;
        lanes_to_lines(plan, yr, yi, len, L, scale, si, dst, ln, first, count, rows);
      });
}

// The one-sided DFT of the real lines of src (shape `sizes`, dim d of length n) into dst (the
// same shape with n / 2 + 1 along d), times scale. Even n: the n / 2 complex numbers
// z[j] = x[2j] + i x[2j + 1] go through one complex FFT of half the length, and
// X[k] = E[k] + exp(-2 pi i k / n) O[k] for the spectra E, O of the even and odd samples,
// E[k] = (Z[k] + conj(Z[n/2 - k])) / 2, O[k] = (Z[k] - conj(Z[n/2 - k])) / 2i. Odd n: one
// complex FFT of length n with zero imaginary parts, of which the first half is kept.
template <class T>
void r2c_dim(const T* src, std::complex<T>* dst, const DimVector& sizes, int64_t d, T scale) {
  const Lines ln(sizes, d);
  const int64_t n = ln.len, nout = n / 2 + 1;
  if (ln.count == 0) return;
  const bool even = n % 2 == 0;
  const int64_t len = even ? n / 2 : n;
  const std::shared_ptr<const Plan<T>> shared = plan_for<T>(len);
  const Plan<T>& plan = *shared;
  std::shared_ptr<const std::vector<T>> wsh;
  if (even) wsh = real_twiddles<T>(n);
  const bool alone = even && ln.inner == 1 && plan.lines_alone();
  for_units(
      ln.count, len, sizeof(T), alone, [&](int64_t first, int64_t count, int64_t L, bool par) {
        std::vector<T> own;
        const int64_t part = (len + 1) * L;
        T* buf = scratch<T>(4 * part + plan.scratch_size(L), own);
        T *xr = buf, *xi = buf + part, *yr = buf + 2 * part, *yi = buf + 3 * part;
        if (L == 1 && even && ln.inner == 1) {  // one contiguous line, as len complex numbers
          if (plan.n1 > 0) {
            plan.execute_line(src + ln.offset(first, n), T(1), yr, yi, nullptr, T(1), T(1),
                              buf + 4 * part);
          } else {
            plan.kern.deinterleave(src + ln.offset(first, n), len, T(1), xr, xi);
            plan.execute(xr, xi, yr, yi, buf + 4 * part, 1, par);
          }
          yr[len] = yr[0], yi[len] = yi[0];  // real_post_row's Z[h] = Z[0]
          plan.kern.real_post_row(yr, yi, reinterpret_cast<T*>(dst + ln.offset(first, nout)), len,
                                  wsh->data(), wsh->data() + len + 1, scale);
          return;
        }
        const bool rows = ln.inner == 1 && count == L && L > 1;
        const int64_t in_done =
            rows && even ? plan.kern.rows_to_lanes(src + first * n, len, len, L, T(1), xr, xi) : 0;
        for (int64_t j0 = in_done; j0 < len; j0 += kBlock)
          for (int64_t v = 0; v < count; ++v) {
            const T* s = src + ln.offset(first + v, n);
            const int64_t je = std::min(len, j0 + kBlock);
            if (even) {
              for (int64_t j = j0; j < je; ++j)
                xr[j * L + v] = s[2 * j * ln.inner], xi[j * L + v] = s[(2 * j + 1) * ln.inner];
            } else {
              for (int64_t j = j0; j < je; ++j)
                xr[j * L + v] = s[j * ln.inner], xi[j * L + v] = T(0);
            }
          }
        plan.execute(xr, xi, yr, yi, buf + 4 * part, L, par);
        const T* outr = yr;
        const T* outi = yi;
        T s = scale;
        if (even) {  // the post-twiddle pass, in lanes, into x
          plan.kern.real_post(yr, yi, xr, xi, len, L, wsh->data(), wsh->data() + len + 1, scale,
                              false);
          outr = xr, outi = xi, s = T(1);
        }
        lanes_to_lines(plan, outr, outi, nout, L, s, s, dst, ln, first, count, rows);
      });
}

// The real inverse DFT, times scale, of the one-sided spectra along dim d of src (m points per
// line: the first n / 2 + 1 are used, missing ones are zeros; the imaginary parts of bins 0 and
// n / 2 are ignored) into dst, whose lines have n points (`sizes` is dst's shape). Even n: with
// Z[k] = X[k] + conj(X[n/2 - k]) + i (X[k] - conj(X[n/2 - k])) exp(2 pi i k / n), k < n / 2,
// the inverse FFT of Z (half length) is x[2j] + i x[2j + 1]. Odd n: the full Hermitian line
// through a complex inverse FFT of length n.
template <class T>
void c2r_dim(const std::complex<T>* src, int64_t m, T* dst, const DimVector& sizes, int64_t d,
             T scale) {
  const Lines ln(sizes, d);
  const int64_t n = ln.len;
  if (ln.count == 0) return;
  const bool even = n % 2 == 0;
  const int64_t len = even ? n / 2 : n, half = n / 2;
  const std::shared_ptr<const Plan<T>> shared = plan_for<T>(len);
  const Plan<T>& plan = *shared;
  std::shared_ptr<const std::vector<T>> wsh;
  if (even) wsh = real_twiddles<T>(n);
  for_units(ln.count, len, sizeof(T), false,
            [&](int64_t first, int64_t count, int64_t L, bool par) {
              std::vector<T> own;
              const int64_t part = (len + 1) * L;
              T* buf = scratch<T>(4 * part + plan.scratch_size(L), own);
              T *xr = buf, *xi = buf + part, *yr = buf + 2 * part, *yi = buf + 3 * part;
              for (int64_t v = 0; v < count; ++v) {
                const std::complex<T>* s = src + ln.offset(first + v, m);
                // bins 0 .. n / 2 (0 past the input's end; bins 0 and n / 2 real); even n: into y
                // for the pre-twiddle pass, odd n: the conjugated Hermitian line straight into x
                T* br = even ? yr : xr;
                T* bi = even ? yi : xi;
                const T sign = even ? T(1) : T(-1);
                const int64_t have = std::min(m, half + 1);
                for (int64_t k = 0; k < have; ++k) {
                  const std::complex<T> a = s[k * ln.inner];
                  br[k * L + v] = a.real(), bi[k * L + v] = sign * a.imag();
                }
                for (int64_t k = have; k <= half; ++k) br[k * L + v] = T(0), bi[k * L + v] = T(0);
                bi[v] = T(0);
                if (even) {
                  yi[half * L + v] = T(0);
                } else {
                  for (int64_t k = half + 1; k < n; ++k)
                    xr[k * L + v] = xr[(n - k) * L + v], xi[k * L + v] = -xi[(n - k) * L + v];
                }
              }
              if (even)
                plan.kern.real_post(yr, yi, xr, xi, len, L, wsh->data(), wsh->data() + len + 1,
                                    T(1), true);
              plan.execute(xr, xi, yr, yi, buf + 4 * part, L, par);
              for (int64_t j0 = 0; j0 < len; j0 += kBlock)
                for (int64_t v = 0; v < count; ++v) {
                  T* o = dst + ln.offset(first + v, n);
                  const int64_t je = std::min(len, j0 + kBlock);
                  if (even) {
                    for (int64_t j = j0; j < je; ++j) {
                      o[2 * j * ln.inner] = yr[j * L + v] * scale;
                      o[(2 * j + 1) * ln.inner] = -yi[j * L + v] * scale;
                    }
                  } else {
                    for (int64_t j = j0; j < je; ++j) o[j * ln.inner] = yr[j * L + v] * scale;
                  }
                }
            });
}

// The dims, wrapped and checked: distinct, each of size >= 1.
DimVector fft_dims(const Tensor& self, const DimVector& dim, const char* op) {
  EMBER_CHECK(!dim.empty(), op, ": expected at least one dim to transform");
  DimVector out;
  for (int64_t d : dim) {
    const int64_t w = wrap_dim(d, self->dim(), op);
    EMBER_CHECK(std::find(out.begin(), out.end(), w) == out.end(), op, ": dim ", d,
                " appears more than once");
    out.push_back(w);
  }
  return out;
}

// 1 / sqrt(n) (normalization 1) or 1 / n (normalization 2) for signals of n points.
double norm_scale(int64_t normalization, int64_t n) {
  EMBER_CHECK_KIND(normalization >= 0 && normalization <= 2, Value,
                   "fft: normalization must be 0 (none), 1 (by 1/sqrt(n)) or 2 (by 1/n), got ",
                   normalization);
  if (normalization == 0 || n == 0) return 1.0;
  return normalization == 1 ? 1.0 / std::sqrt(static_cast<double>(n)) : 1.0 / n;
}

void check_points(const Tensor& t, const DimVector& dims, const char* op) {
  for (int64_t d : dims)
    EMBER_CHECK(t->size(d) >= 1, op, ": Invalid number of data points (", t->size(d),
                ") specified");
}

// A contiguous copy of self with dtype dt (real inputs to complex get zero imaginary parts).
Tensor copy_as(const Tensor& self, ScalarType dt) {
  Tensor out = empty(self->sizes(), dt);
  copy_into(out, self);
  return out;
}

// self itself when it is contiguous already, else a contiguous copy.
Tensor contiguous_input(const Tensor& self) {
  return self->is_contiguous() ? self : copy_as(self, self->dtype());
}

}  // namespace

Tensor fft_c2c(const Tensor& self, const DimVector& dim, int64_t normalization, bool forward) {
  EMBER_CHECK_KIND(is_complex(self->dtype()), Type,
                   "_fft_c2c: expects a complex input tensor, but got ", dtype_name(self->dtype()));
  const DimVector dims = fft_dims(self, dim, "_fft_c2c");
  check_points(self, dims, "_fft_c2c");
  int64_t points = 1;
  for (int64_t d : dims) points *= self->size(d);
  const double scale = norm_scale(normalization, points);
  const Tensor x = contiguous_input(self);
  Tensor out = empty(self->sizes(), self->dtype());
  EMBER_DISPATCH_COMPLEX(out->dtype(), "_fft_c2c", [&] {
    using R = typename scalar_t::value_type;
    const scalar_t* src = x->data_as<scalar_t>();
    scalar_t* data = out->data_as<scalar_t>();
    for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i)
      c2c_dim<R>(i == 0 ? src : data, data, out->sizes(), dims[i], forward,
                 static_cast<R>(i + 1 == static_cast<int64_t>(dims.size()) ? scale : 1.0));
  });
  return fresh(out);
}

Tensor fft_r2c(const Tensor& self, const DimVector& dim, int64_t normalization, bool onesided) {
  const ScalarType dt = self->dtype();
  EMBER_CHECK_KIND(dt == ScalarType::Float32 || dt == ScalarType::Float64, Type,
                   "_fft_r2c: expects a float32 or float64 input tensor, but got ", dtype_name(dt));
  const DimVector dims = fft_dims(self, dim, "_fft_r2c");
  check_points(self, dims, "_fft_r2c");
  if (!onesided) return fft_c2c(copy_as(self, to_complex(dt)), dims, normalization, true);
  int64_t points = 1;
  for (int64_t d : dims) points *= self->size(d);
  const double scale = norm_scale(normalization, points);
  const int64_t last = dims.back();
  const Tensor x = contiguous_input(self);
  DimVector sizes = self->sizes();
  sizes[last] = sizes[last] / 2 + 1;
  Tensor out = empty(sizes, to_complex(dt));
  EMBER_DISPATCH_COMPLEX(out->dtype(), "_fft_r2c", [&] {
    using R = typename scalar_t::value_type;
    scalar_t* od = out->data_as<scalar_t>();
    const bool alone = dims.size() == 1;
    r2c_dim<R>(x->data_as<R>(), od, self->sizes(), last, static_cast<R>(alone ? scale : 1.0));
    // then the other dims, in order, on the half-size result
    int64_t done = 1;
    for (int64_t d : dims) {
      if (d == last) continue;
      ++done;
      c2c_dim<R>(od, od, sizes, d, true,
                 static_cast<R>(done == static_cast<int64_t>(dims.size()) ? scale : 1.0));
    }
  });
  return fresh(out);
}

Tensor fft_c2r(const Tensor& self, const DimVector& dim, int64_t normalization,
               int64_t last_dim_size) {
  EMBER_CHECK_KIND(is_complex(self->dtype()), Type,
                   "_fft_c2r: expects a complex input tensor, but got ", dtype_name(self->dtype()));
  const DimVector dims = fft_dims(self, dim, "_fft_c2r");
  EMBER_CHECK(last_dim_size >= 1, "_fft_c2r: Invalid number of data points (", last_dim_size,
              ") specified");
  check_points(self, dims, "_fft_c2r");
  const int64_t last = dims.back();
  DimVector sizes = self->sizes();
  const int64_t m = sizes[last], n = last_dim_size;
  sizes[last] = n;
  int64_t points = 1;
  for (int64_t d : dims) points *= sizes[d];
  const double scale = norm_scale(normalization, points);
  // The other dims first (on a copy): each line along `last` then is the one-sided spectrum of
  // a real signal.
  const Tensor x = dims.size() > 1 ? copy_as(self, self->dtype()) : contiguous_input(self);
  Tensor out = empty(sizes, to_real(self->dtype()));
  EMBER_DISPATCH_COMPLEX(x->dtype(), "_fft_c2r", [&] {
    using R = typename scalar_t::value_type;
    scalar_t* xd = x->data_as<scalar_t>();
    for (int64_t d : dims)
      if (d != last) c2c_dim<R>(xd, xd, x->sizes(), d, false, R(1));
    c2r_dim<R>(xd, m, out->data_as<R>(), sizes, last, static_cast<R>(scale));
  });
  return fresh(out);
}

}  // namespace cpu
}  // namespace ember
