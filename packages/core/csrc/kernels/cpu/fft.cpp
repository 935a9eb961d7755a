// CPU kernels of the FFT primitives (ops/complex.yaml: _fft_c2c, _fft_r2c, _fft_c2r).
//
// One length-n transform is a recursive mixed-radix Cooley-Tukey FFT (decimation in time):
// n = p * m splits into p sub-transforms of length m over every p-th input, combined by
// length-p butterflies (radix 4, 2, 3 and 5 written out, the other small primes through the
// generic O(p^2) butterfly). Twiddles exp(-2 pi i j / n) are computed once per plan in
// double precision. A length with a prime factor above kMaxRadix goes through Bluestein's
// algorithm: the DFT becomes a convolution with a chirp, done with power-of-two FFTs.
// Transforms run one dim at a time over a contiguous complex copy, the lines of a dim split
// over the thread pool. Inverse transforms are conj(FFT(conj(x))); normalization is one scale
// at the end.
#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "kernels/iterator.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

constexpr int64_t kMaxRadix = 61;  // larger prime factors use Bluestein's algorithm
constexpr double kPi = 3.14159265358979323846;

// a * b without the NaN/inf recovery path of std::complex's operator* (-fcx-limited-range):
// the transform's values are finite or their result is NaN either way.
template <class T>
inline std::complex<T> cmul(std::complex<T> a, std::complex<T> b) {
  return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
}

// exp(-2 pi i k / n) in double precision, cast to T. The angle is folded into [0, pi/4] by the
// circle's symmetries first, so the roots at multiples of pi/2 are exact (1, -i, -1, i: a real
// signal's Nyquist bin comes out with an imaginary part of exactly 0) and the others are as
// accurate as cos and sin near 0.
template <class T>
std::complex<T> unit_root(int64_t k, int64_t n) {
  int64_t u = 4 * (k % n);  // the angle is pi * u / (2n), u in [0, 4n)
  double c_sign = 1, s_sign = 1;
  bool swap = false;
  if (u > 2 * n) u = 4 * n - u, s_sign = -1;  // 2 pi - a
  if (u > n) u = 2 * n - u, c_sign = -1;      // pi - a
  if (2 * u > n) u = n - u, swap = true;      // pi / 2 - a
  const double a = kPi * static_cast<double>(u) / (2.0 * static_cast<double>(n));
  double c = std::cos(a), s = std::sin(a);
  if (swap) std::swap(c, s);
  return {static_cast<T>(c_sign * c), static_cast<T>(-s_sign * s)};
}

template <class T>
struct Plan {
  using C = std::complex<T>;
  int64_t n = 1;
  std::vector<int64_t> factors;  // radices, outermost first (their product is n)
  std::vector<C> twiddle;        // exp(-2 pi i j / n), j < n
  // Per level (radix p over a sub-transform of length len = p * m): w_len^(q k) for k < m and
  // 1 <= q < p at [k * (p - 1) + q - 1], read in order by the butterflies of that level.
  std::vector<std::vector<C>> stage_twiddle;
  // Bluestein: the convolution length m (a power of two >= 2n - 1), the chirp
  // exp(-pi i j^2 / n) and the FFT of the conjugate chirp laid out for a circular convolution.
  bool bluestein = false;
  std::vector<C> chirp, chirp_fft;
  std::unique_ptr<Plan> sub;

  explicit Plan(int64_t len) : n(len) {
    int64_t rest = n;
    while (rest % 4 == 0) factors.push_back(4), rest /= 4;
    for (int64_t p = 2; p * p <= rest; ++p)
      while (rest % p == 0) factors.push_back(p), rest /= p;
    if (rest > 1) factors.push_back(rest);
    for (int64_t p : factors) bluestein = bluestein || p > kMaxRadix;
    if (bluestein) {
      factors.clear();
      int64_t m = 1;
      while (m < 2 * n - 1) m *= 2;
      sub = std::make_unique<Plan>(m);
      chirp.resize(n);
      for (int64_t j = 0; j < n; ++j) {
        // j^2 mod 2n keeps the angle small, so the chirp stays accurate for large j.
        const uint64_t uj = static_cast<uint64_t>(j);
        const int64_t j2 = static_cast<int64_t>((uj * uj) % static_cast<uint64_t>(2 * n));
        chirp[j] = unit_root<T>(j2, 2 * n);
      }
      std::vector<C> b(m, C(0));
      for (int64_t j = 0; j < n; ++j) {
        b[j] = std::conj(chirp[j]);
        if (j > 0) b[m - j] = std::conj(chirp[j]);
      }
      chirp_fft.resize(m);
      sub->forward(b.data(), chirp_fft.data());
      return;
    }
    twiddle.resize(n);
    for (int64_t j = 0; j < n; ++j) twiddle[j] = unit_root<T>(j, n);
    int64_t cur = n;  // the sub-transform length at each level
    for (int64_t p : factors) {
      const int64_t m = cur / p, step = n / cur;
      std::vector<C> tw(static_cast<size_t>(m * (p - 1)));
      for (int64_t k = 0; k < m; ++k)
        for (int64_t q = 1; q < p; ++q) tw[k * (p - 1) + q - 1] = twiddle[q * k * step];
      stage_twiddle.push_back(std::move(tw));
      cur = m;
    }
  }

  // out = DFT(in), both contiguous of length n (distinct buffers).
  void forward(const C* in, C* out) const {
    if (!bluestein) {
      // One butterfly's inputs, shared by all levels (a std::array in rec would zero-fill its
      // kMaxRadix complex numbers on every call).
      C t[kMaxRadix];
      return rec(in, 1, out, n, 0, t);
    }
    const int64_t m = sub->n;
    std::vector<C> a(m, C(0)), fa(m);
    for (int64_t j = 0; j < n; ++j) a[j] = cmul(in[j], chirp[j]);
    sub->forward(a.data(), fa.data());
    // Inverse FFT of fa * chirp_fft as conj(FFT(conj(.))) / m.
    for (int64_t k = 0; k < m; ++k) fa[k] = std::conj(cmul(fa[k], chirp_fft[k]));
    sub->forward(fa.data(), a.data());
    const T inv_m = T(1) / static_cast<T>(m);
    for (int64_t k = 0; k < n; ++k) out[k] = cmul(std::conj(a[k]) * inv_m, chirp[k]);
  }

 private:
  // The length-len DFT of in[0], in[stride], ... into out[0 .. len), from factor `level` on.
  void rec(const C* in, int64_t stride, C* out, int64_t len, size_t level, C* t) const {
    if (len == 1) {
      out[0] = in[0];
      return;
    }
    const int64_t p = factors[level], m = len / p;
    if (m > 1)
      for (int64_t q = 0; q < p; ++q)
        rec(in + q * stride, stride * p, out + q * m, m, level + 1, t);
    const C* tw = stage_twiddle[level].data();
    for (int64_t k = 0; k < m; ++k) {
      if (m == 1) {
        for (int64_t q = 0; q < p; ++q) t[q] = in[q * stride];
      } else {
        t[0] = out[k];
        const C* w = tw + k * (p - 1);
        for (int64_t q = 1; q < p; ++q) t[q] = cmul(out[q * m + k], w[q - 1]);
      }
      butterfly(t, p, out + k, m);
    }
  }

  // out[r * step] = sum_q t[q] * exp(-2 pi i q r / p), r < p.
  void butterfly(const C* t, int64_t p, C* out, int64_t step) const {
    if (p == 2) {
      out[0] = t[0] + t[1];
      out[step] = t[0] - t[1];
    } else if (p == 4) {
      const C a = t[0] + t[2], b = t[0] - t[2], c = t[1] + t[3], d = t[1] - t[3];
      const C mid(d.imag(), -d.real());  // -i * d
      out[0] = a + c;
      out[step] = b + mid;
      out[2 * step] = a - c;
      out[3 * step] = b - mid;
    } else if (p == 3) {
      const T h = static_cast<T>(0.86602540378443864676);  // sqrt(3) / 2
      const C s = t[1] + t[2], d = t[1] - t[2];
      const C base = t[0] - s * T(0.5), rot(h * d.imag(), -h * d.real());  // -i h d
      out[0] = t[0] + s;
      out[step] = base + rot;
      out[2 * step] = base - rot;
    } else if (p == 5) {
      const T c1 = static_cast<T>(0.30901699437494742410),
              c2 = static_cast<T>(-0.80901699437494742410);
      const T s1 = static_cast<T>(0.95105651629515357212),
              s2 = static_cast<T>(0.58778525229247312917);
      const C a1 = t[1] + t[4], b1 = t[1] - t[4], a2 = t[2] + t[3], b2 = t[2] - t[3];
      const C r1 = t[0] + a1 * c1 + a2 * c2, r2 = t[0] + a1 * c2 + a2 * c1;
      const C v1 = b1 * s1 + b2 * s2, v2 = b1 * s2 - b2 * s1;
      const C m1(v1.imag(), -v1.real()), m2(v2.imag(), -v2.real());  // -i v
      out[0] = t[0] + a1 + a2;
      out[step] = r1 + m1;
      out[4 * step] = r1 - m1;
      out[2 * step] = r2 + m2;
      out[3 * step] = r2 - m2;
    } else {
      const int64_t tw_step = n / p;
      for (int64_t r = 0; r < p; ++r) {
        C acc = t[0];
        for (int64_t q = 1; q < p; ++q) acc += cmul(t[q], twiddle[((q * r) % p) * tw_step]);
        out[r * step] = acc;
      }
    }
  }
};

// The plan of a length, built once (its twiddles cost about as much as a transform) and kept
// for the next call; the cache holds a few dozen lengths and starts over when full.
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
  if (cache.size() >= 32) cache.clear();
  cache.emplace(len, plan);
  return plan;
}

// Transforms every line of the contiguous buffer `data` (shape `sizes`) along dim d, in place.
template <class T>
void transform_dim(std::complex<T>* data, const DimVector& sizes, int64_t d, bool forward) {
  using C = std::complex<T>;
  const int64_t len = sizes[d];
  if (len <= 1) return;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < d; ++i) outer *= sizes[i];
  for (int64_t i = d + 1; i < static_cast<int64_t>(sizes.size()); ++i) inner *= sizes[i];
  const int64_t lines = outer * inner;
  if (lines == 0) return;
  const std::shared_ptr<const Plan<T>> shared = plan_for<T>(len);
  const Plan<T>& plan = *shared;
  // About 64k elements of work per chunk (n log n counted as n).
  const int64_t grain = std::max<int64_t>(1, 65536 / len);
  parallel_for(0, lines, grain, [&](int64_t b, int64_t e) {
    std::vector<C> line(len), res(len);
    for (int64_t l = b; l < e; ++l) {
      C* base = data + (l / inner) * len * inner + (l % inner);
      for (int64_t j = 0; j < len; ++j)
        line[j] = forward ? base[j * inner] : std::conj(base[j * inner]);
      plan.forward(line.data(), res.data());
      for (int64_t j = 0; j < len; ++j) base[j * inner] = forward ? res[j] : std::conj(res[j]);
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

template <class T>
void scale_buffer(std::complex<T>* data, int64_t count, double scale) {
  if (scale == 1.0) return;
  const T s = static_cast<T>(scale);
  for (int64_t i = 0; i < count; ++i) data[i] *= s;
}

void check_points(const Tensor& t, const DimVector& dims, const char* op) {
  for (int64_t d : dims)
    EMBER_CHECK(t->size(d) >= 1, op, ": Invalid number of data points (", t->size(d),
                ") specified");
}

// A contiguous complex copy of self (real inputs get zero imaginary parts).
Tensor complex_copy(const Tensor& self) {
  Tensor out = empty(self->sizes(), to_complex(self->dtype()));
  copy_into(out, self);
  return out;
}

// The one-sided forward transform of real x along dims, the last of even length n: the n / 2
// complex numbers z[j] = x[2j] + i x[2j + 1] go through one complex FFT of half the length,
// and X[k] = E[k] + exp(-2 pi i k / n) O[k] for the spectra E, O of the even and odd samples,
// E[k] = (Z[k] + conj(Z[n/2 - k])) / 2, O[k] = (Z[k] - conj(Z[n/2 - k])) / 2i. The other dims
// are then transformed on the half-size result.
Tensor r2c_even(const Tensor& self, const DimVector& dims, int64_t normalization) {
  const int64_t last = dims.back();
  Tensor x = empty(self->sizes(), self->dtype());
  copy_into(x, self);
  DimVector sizes = self->sizes();
  const int64_t n = sizes[last], half = n / 2;
  int64_t points = 1;
  for (int64_t d : dims) points *= sizes[d];
  sizes[last] = half + 1;
  Tensor out = empty(sizes, to_complex(self->dtype()));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < last; ++i) outer *= sizes[i];
  for (int64_t i = last + 1; i < static_cast<int64_t>(sizes.size()); ++i) inner *= sizes[i];
  EMBER_DISPATCH_COMPLEX(out->dtype(), "_fft_r2c", [&] {
    using C = scalar_t;
    using R = typename C::value_type;
    const R* xd = x->data_as<R>();
    C* od = out->data_as<C>();
    const std::shared_ptr<const Plan<R>> shared = plan_for<R>(half);
    const Plan<R>& plan = *shared;
    std::vector<C> w(half + 1);
    for (int64_t k = 0; k <= half; ++k) w[k] = unit_root<R>(k, n);
    const int64_t lines = outer * inner;
    parallel_for(0, lines, std::max<int64_t>(1, 65536 / n), [&](int64_t b, int64_t e) {
      std::vector<C> z(half), zf(half);
      for (int64_t l = b; l < e; ++l) {
        const R* src = xd + (l / inner) * n * inner + (l % inner);
        C* dst = od + (l / inner) * (half + 1) * inner + (l % inner);
        for (int64_t j = 0; j < half; ++j) z[j] = C(src[2 * j * inner], src[(2 * j + 1) * inner]);
        plan.forward(z.data(), zf.data());
        for (int64_t k = 0; k <= half; ++k) {
          const C zk = zf[k % half], zc = std::conj(zf[(half - k) % half]);
          const C even = (zk + zc) * R(0.5), diff = (zk - zc) * R(0.5);
          const C odd(diff.imag(), -diff.real());  // diff / i
          dst[k * inner] = even + cmul(w[k], odd);
        }
      }
    });
    for (int64_t d : dims)
      if (d != last) transform_dim(od, sizes, d, true);
    scale_buffer(od, out->numel(), norm_scale(normalization, points));
  });
  return fresh(out);
}

}  // namespace

Tensor fft_c2c(const Tensor& self, const DimVector& dim, int64_t normalization, bool forward) {
  EMBER_CHECK_KIND(is_complex(self->dtype()), Type,
                   "_fft_c2c: expects a complex input tensor, but got ", dtype_name(self->dtype()));
  const DimVector dims = fft_dims(self, dim, "_fft_c2c");
  check_points(self, dims, "_fft_c2c");
  Tensor out = complex_copy(self);
  int64_t points = 1;
  for (int64_t d : dims) points *= self->size(d);
  EMBER_DISPATCH_COMPLEX(out->dtype(), "_fft_c2c", [&] {
    auto* data = reinterpret_cast<scalar_t*>(out->data());
    for (int64_t d : dims) transform_dim(data, out->sizes(), d, forward);
    scale_buffer(data, out->numel(), norm_scale(normalization, points));
  });
  return fresh(out);
}

Tensor fft_r2c(const Tensor& self, const DimVector& dim, int64_t normalization, bool onesided) {
  const ScalarType dt = self->dtype();
  EMBER_CHECK_KIND(dt == ScalarType::Float32 || dt == ScalarType::Float64, Type,
                   "_fft_r2c: expects a float32 or float64 input tensor, but got ", dtype_name(dt));
  const DimVector dims = fft_dims(self, dim, "_fft_r2c");
  check_points(self, dims, "_fft_r2c");
  if (onesided && self->size(dims.back()) % 2 == 0) return r2c_even(self, dims, normalization);
  Tensor full = fft_c2c(complex_copy(self), dims, normalization, true);
  if (!onesided) return full;
  const int64_t last = dims.back();
  DimVector sizes = full->sizes();
  sizes[last] = sizes[last] / 2 + 1;
  Tensor out = empty(sizes, full->dtype());
  // The first n // 2 + 1 bins of the last dim, through a strided view of full.
  copy_into(out, make_view(full, sizes, full->strides(), 0));
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
  Tensor x = complex_copy(self);
  DimVector sizes = x->sizes();
  const int64_t m = sizes[last], n = last_dim_size, half = n / 2 + 1;
  sizes[last] = n;
  int64_t points = 1;
  for (int64_t d : dims) points *= sizes[d];
  Tensor full = empty(sizes, x->dtype());
  Tensor out = empty(sizes, to_real(x->dtype()));
  EMBER_DISPATCH_COMPLEX(x->dtype(), "_fft_c2r", [&] {
    using C = scalar_t;
    using R = typename C::value_type;
    C* xd = reinterpret_cast<C*>(x->data());
    // The other dims first: each line along `last` then is the one-sided spectrum of a real
    // signal, which extends to the full Hermitian line X[n - k] = conj(X[k]).
    for (int64_t d : dims)
      if (d != last) transform_dim(xd, x->sizes(), d, false);
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < last; ++i) outer *= sizes[i];
    for (int64_t i = last + 1; i < static_cast<int64_t>(sizes.size()); ++i) inner *= sizes[i];
    C* fd = reinterpret_cast<C*>(full->data());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const C* src = xd + o * m * inner + i;
        C* dst = fd + o * n * inner + i;
        for (int64_t k = 0; k < n; ++k) {
          C v(0);
          if (k < half) {
            if (k < m) v = src[k * inner];
          } else if (n - k < m) {
            v = std::conj(src[(n - k) * inner]);
          }
          dst[k * inner] = v;
        }
      }
    transform_dim(fd, sizes, last, false);
    R* od = reinterpret_cast<R*>(out->data());
    const R s = static_cast<R>(norm_scale(normalization, points));
    for (int64_t i = 0; i < out->numel(); ++i) od[i] = fd[i].real() * s;
  });
  return fresh(out);
}

}  // namespace cpu
}  // namespace ember
