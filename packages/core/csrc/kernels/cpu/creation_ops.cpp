// CPU random-number kernels (ops/creation.yaml) on the counter-based Philox generator.
//
// Each call reserves from the generator one 128-bit counter per block of `per` values it draws,
// and value i always takes its bits from counter (base + i / per). So the numbers depend only on
// the seed and on how many numbers earlier calls drew, never on the thread count or on how the
// work is chunked, and big tensors are filled in parallel by counter offsets.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "core/generator.h"
#include "kernels/cpu/nn_vec.h"
#include "kernels/int_bounds.h"
#include "kernels/iterator.h"
#include "kernels/parallel.h"
#include "kernels/random_rules.h"
#include "kernels/shape_rules.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

constexpr float kTwoPiF = 6.28318530717958647692f;
constexpr double kTwoPi = 6.28318530717958647692;

// Uniform in [0, 1) from 24 bits (float precision) or 53 bits (double precision).
inline float u24(uint32_t w) { return static_cast<float>(w >> 8) * (1.0f / 16777216.0f); }
inline double u53(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((static_cast<uint64_t>(hi) << 32) | lo) >> 11) *
         (1.0 / 9007199254740992.0);
}
inline uint64_t u64(uint32_t hi, uint32_t lo) { return (static_cast<uint64_t>(hi) << 32) | lo; }

template <class T>
T cast_to(double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Branch-free float log for x in (0, 1] (Cephes logf; max rel. error ~1e-7), written so that
// loops over it vectorize: normal_ spends its time here and in sincos.
inline float fast_logf(float x) {
  int32_t bits;
  std::memcpy(&bits, &x, 4);
  float e = static_cast<float>((bits >> 23) - 126);
  const int32_t mb = (bits & 0x007fffff) | 0x3f000000;  // mantissa scaled into [0.5, 1)
  float m;
  std::memcpy(&m, &mb, 4);
  // Below sqrt(1/2) use 2m - 1 and one less in the exponent (arithmetic selects vectorize).
  const float small = static_cast<float>(static_cast<uint32_t>(mb - 0x3f3504f3) >> 31);
  e -= small;
  m = m - 1.0f + small * m;
  const float z = m * m;
  float y = 7.0376836292E-2f;
  y = y * m - 1.1514610310E-1f;
  y = y * m + 1.1676998740E-1f;
  y = y * m - 1.2420140846E-1f;
  y = y * m + 1.4249322787E-1f;
  y = y * m - 1.6668057665E-1f;
  y = y * m + 2.0000714765E-1f;
  y = y * m - 2.4999993993E-1f;
  y = y * m + 3.3333331174E-1f;
  y = y * m * z;
  y += -2.12194440E-4f * e;
  y += -0.5f * z;
  return m + y + 0.693359375f * e;
}

// cos(2 pi u) and sin(2 pi u) for u in [0, 1): the nearest quarter turn, then Cephes
// polynomials on [-pi/4, pi/4] (abs. error ~1e-7).
inline void fast_sincos2pi(float u, float* c, float* s) {
  const int q = static_cast<int>(4.0f * u + 0.5f);  // u >= 0: truncation rounds
  const float a = (u - 0.25f * static_cast<float>(q)) * kTwoPiF;
  const float z = a * a;
  const float sp = a + a * z * (-1.6666654611E-1f + z * (8.3321608736E-3f + z * -1.9515295891E-4f));
  const float cp =
      1.0f - 0.5f * z +
      z * z * (4.166664568298827E-2f + z * (-1.388731625493765E-3f + z * 2.443315711809948E-5f));
  // Rotate by q quarter turns: odd q swaps cos and sin, the signs follow the quadrant.
  const float swap = static_cast<float>(q & 1);
  const float cneg = static_cast<float>(((q + 1) >> 1) & 1),
              sneg = static_cast<float>((q >> 1) & 1);
  *c = (1.0f - 2.0f * cneg) * (cp + swap * (sp - cp));
  *s = (1.0f - 2.0f * sneg) * (sp + swap * (cp - sp));
}

// normal_ for float types: value 4b + 2p (+1) is the Box-Muller pair p of counter base + b,
// as in philox_fill, but computed in tiles so the transcendental math vectorizes.
template <class T>
void normal_float_fill(Generator* g, T* dst, int64_t n, float mean, float std) {
  if (n == 0) return;
  Generator& gen = gen_or_default(g);
  const int64_t nblocks = (n + 3) / 4;
  const uint64_t base = gen.reserve(static_cast<uint64_t>(nblocks));
  const uint64_t seed = gen.seed();
  parallel_for(0, nblocks, 4096, [&](int64_t b0, int64_t b1) {
    constexpr int64_t kTile = 256;  // blocks per tile: 512 pairs
    float u1[2 * kTile], u2[2 * kTile], z0[2 * kTile], z1[2 * kTile];
    uint32_t words[4 * kTile];
    for (int64_t tb = b0; tb < b1; tb += kTile) {
      const int64_t nt = std::min(kTile, b1 - tb);
      nn::vec::philox_blocks(seed, base + static_cast<uint64_t>(tb), nt, words);
      for (int64_t b = 0; b < nt; ++b) {
        const uint32_t* w = words + 4 * b;
        u1[2 * b] = 1.0f - u24(w[0]);
        u2[2 * b] = u24(w[1]);
        u1[2 * b + 1] = 1.0f - u24(w[2]);
        u2[2 * b + 1] = u24(w[3]);
      }
      for (int64_t i = 0; i < 2 * nt; ++i) {
        const float r = std * std::sqrt(-2.0f * fast_logf(u1[i]));
        float c, s;
        fast_sincos2pi(u2[i], &c, &s);
        z0[i] = mean + r * c;
        z1[i] = mean + r * s;
      }
      const int64_t first = tb * 4, count = std::min(nt * 4, n - first);
      T* o = dst + first;
      for (int64_t j = 0; j < count; ++j) o[j] = T(j % 2 == 0 ? z0[j / 2] : z1[j / 2]);
    }
  });
}

// Fills dst[0, n): block b yields values [b * per, b * per + count) through
// fill(words, out, count) from the Philox output for counter base + b.
template <class T, class Fill>
void philox_fill(Generator* g, T* dst, int64_t n, int per, const Fill& fill) {
  if (n == 0) return;
  Generator& gen = gen_or_default(g);
  const int64_t nblocks = (n + per - 1) / per;
  const uint64_t base = gen.reserve(static_cast<uint64_t>(nblocks));
  const uint64_t seed = gen.seed();
  parallel_for(0, nblocks, 4096, [&](int64_t b0, int64_t b1) {
    constexpr int64_t kTile = 256;  // counters generated together (vectorized), then consumed
    uint32_t w[4 * kTile];
    for (int64_t tb = b0; tb < b1; tb += kTile) {
      const int64_t nt = std::min(kTile, b1 - tb);
      nn::vec::philox_blocks(seed, base + static_cast<uint64_t>(tb), nt, w);
      for (int64_t b = tb; b < tb + nt; ++b) {
        const int64_t i = b * per;
        fill(w + 4 * (b - tb), dst + i, static_cast<int>(std::min<int64_t>(per, n - i)));
      }
    }
  });
}

// Runs gen(dst, n) over dense memory for self's elements; self itself when it is contiguous.
template <class T, class Gen>
void fill_self(const Tensor& self, const Gen& gen) {
  if (self->is_contiguous()) {
    self->bump_version();  // first: it refuses read-only memory
    gen(self->data_as<T>(), self->numel());
    return;
  }
  Tensor tmp = ember::empty(self->sizes(), self->dtype(), self->device());
  gen(tmp->data_as<T>(), tmp->numel());
  copy_into(self, tmp);
}

// Uniform doubles u in [0, 1) mapped through f(u) into T, with the precision T needs.
template <class T, class F>
void fill_uniform(const Tensor& self, Generator* g, const F& f) {
  fill_self<T>(self, [&](T* dst, int64_t n) {
    if constexpr (std::is_same_v<T, double>) {
      philox_fill(g, dst, n, 2, [&](const uint32_t* w, T* o, int c) {
        for (int j = 0; j < c; ++j) o[j] = f(u53(w[2 * j], w[2 * j + 1]));
      });
    } else {
      philox_fill(g, dst, n, 4, [&](const uint32_t* w, T* o, int c) {
        // As many random bits as T's mantissa holds, so rand() < 1 holds after rounding to T.
        constexpr int digits = std::is_same_v<T, Half> ? 11 : std::is_same_v<T, BFloat16> ? 8 : 24;
        constexpr double scale = 1.0 / static_cast<double>(uint32_t(1) << digits);
        for (int j = 0; j < c; ++j)
          o[j] = cast_to<T>(f(static_cast<double>(w[j] >> (32 - digits)) * scale));
      });
    }
  });
}

// self = from + (uniform integer in [0, range)); range == 0 means the full 2^64.
template <class T>
void fill_random_int(const Tensor& self, int64_t from, uint64_t range, Generator* g) {
  fill_self<T>(self, [&](T* dst, int64_t n) {
    auto store = [&](uint64_t r) {
      const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(from) + r);
      if constexpr (std::is_same_v<T, bool>) {
        return v != 0;
      } else if constexpr (std::is_integral_v<T>) {
        return static_cast<T>(v);
      } else {
        return cast_to<T>(static_cast<double>(v));
      }
    };
    if (range != 0 && range <= (uint64_t(1) << 32)) {  // 32 bits per value suffice
      philox_fill(g, dst, n, 4, [&](const uint32_t* w, T* o, int c) {
        for (int j = 0; j < c; ++j) o[j] = store(w[j] % range);
      });
    } else {
      philox_fill(g, dst, n, 2, [&](const uint32_t* w, T* o, int c) {
        for (int j = 0; j < c; ++j) {
          uint64_t r = u64(w[2 * j], w[2 * j + 1]);
          o[j] = store(range == 0 ? r : r % range);
        }
      });
    }
  });
}

Tensor random_impl(const Tensor& self, int64_t from, std::optional<int64_t> to, Generator* g) {
  check_no_internal_overlap(self, "random_");
  const uint64_t range = random_range(from, to, self->dtype());
  EMBER_DISPATCH_ALL(self->dtype(), "random_",
                     [&] { fill_random_int<scalar_t>(self, from, range, g); });
  return self;
}

}  // namespace

Tensor uniform_(const Tensor& self, double from_, double to, Generator* generator) {
  check_no_internal_overlap(self, "uniform_");
  check_uniform_range(from_, to);
  EMBER_DISPATCH_FLOAT(self->dtype(), "uniform_", [&] {
    const double range = to - from_;
    fill_uniform<scalar_t>(self, generator, [&](double u) { return from_ + range * u; });
  });
  return self;
}

Tensor exponential_(const Tensor& self, double lambd, Generator* generator) {
  check_no_internal_overlap(self, "exponential_");
  check_exponential_lambda(lambd);
  EMBER_DISPATCH_FLOAT(self->dtype(), "exponential_", [&] {
    // 1 - u is in (0, 1], so the log is finite.
    fill_uniform<scalar_t>(self, generator, [&](double u) { return -std::log1p(-u) / lambd; });
  });
  return self;
}

Tensor normal_(const Tensor& self, double mean, double std, Generator* generator) {
  check_no_internal_overlap(self, "normal_");
  check_normal_std(std);
  EMBER_DISPATCH_FLOAT(self->dtype(), "normal_", [&] {
    using T = scalar_t;
    fill_self<T>(self, [&](T* dst, int64_t n) {
      // Box-Muller: each pair of uniforms gives two normals.
      if constexpr (std::is_same_v<T, double>) {
        philox_fill(generator, dst, n, 2, [&](const uint32_t* w, T* o, int c) {
          const double u1 = 1.0 - u53(w[0], w[1]), u2 = u53(w[2], w[3]);
          const double r = std::sqrt(-2.0 * std::log(u1));
          o[0] = mean + std * r * std::cos(kTwoPi * u2);
          if (c > 1) o[1] = mean + std * r * std::sin(kTwoPi * u2);
        });
      } else {
        normal_float_fill<T>(generator, dst, n, static_cast<float>(mean), static_cast<float>(std));
      }
    });
  });
  return self;
}

Tensor random_(const Tensor& self, Generator* generator) {
  return random_impl(self, 0, std::nullopt, generator);
}

Tensor random_(const Tensor& self, int64_t to, Generator* generator) {
  return random_impl(self, 0, to, generator);
}

Tensor random_(const Tensor& self, int64_t from_, std::optional<int64_t> to, Generator* generator) {
  return random_impl(self, from_, to, generator);
}

// ---- bernoulli --------------------------------------------------------------------------------

namespace {

// self[i] = (u < p[i]) with p a dense float64 tensor of self's shape.
void bernoulli_fill(const Tensor& self, const Tensor& p, Generator* g) {
  const double* pp = p->data_as<double>();
  EMBER_DISPATCH_ALL(self->dtype(), "bernoulli", [&] {
    using T = scalar_t;
    fill_self<T>(self, [&](T* dst, int64_t n) {
      philox_fill(g, dst, n, 2, [&](const uint32_t* w, T* o, int c) {
        const int64_t i = o - dst;
        for (int j = 0; j < c; ++j)
          o[j] = cast_to<T>(u53(w[2 * j], w[2 * j + 1]) < pp[i + j] ? 1.0 : 0.0);
      });
    });
  });
}

Tensor dense_probs(const Tensor& p, const DimVector& shape, const char* op) {
  Tensor pd = ember::empty(shape, ScalarType::Float64, p->device());
  copy_into(pd, p);
  const double* d = pd->data_as<double>();
  check_probs(d, pd->numel(), op);
  return pd;
}

}  // namespace

Tensor bernoulli(const Tensor& self, Generator* generator) {
  check_bernoulli_self(self);
  Tensor out = ember::empty(self->sizes(), self->dtype(), self->device());
  bernoulli_fill(out, dense_probs(self, self->sizes(), "bernoulli"), generator);
  return fresh(out);
}

Tensor bernoulli(const Tensor& self, double p, Generator* generator) {
  Tensor out = ember::empty(self->sizes(), self->dtype(), self->device());
  return fresh(bernoulli_(out, Scalar(p), generator));
}

Tensor bernoulli_(const Tensor& self, const TensorOrScalar& p, Generator* generator) {
  check_no_internal_overlap(self, "bernoulli_");
  if (p.is_tensor()) {
    check_bernoulli_p_shape(self, p.tensor);
    bernoulli_fill(self, dense_probs(p.tensor, self->sizes(), "bernoulli_"), generator);
    return self;
  }
  const double pv = p.scalar.to_double();
  check_bernoulli_p(pv);
  EMBER_DISPATCH_ALL(self->dtype(), "bernoulli_", [&] {
    using T = scalar_t;
    fill_self<T>(self, [&](T* dst, int64_t n) {
      philox_fill(generator, dst, n, 2, [&](const uint32_t* w, T* o, int c) {
        for (int j = 0; j < c; ++j) o[j] = cast_to<T>(u53(w[2 * j], w[2 * j + 1]) < pv ? 1.0 : 0.0);
      });
    });
  });
  return self;
}

// ---- multinomial ------------------------------------------------------------------------------

Tensor multinomial(const Tensor& self, int64_t num_samples, bool replacement,
                   Generator* generator) {
  DimVector out_shape = multinomial_shape(self, num_samples, replacement);
  const int64_t ncat = self->size(self->dim() - 1);
  const int64_t rows = self->dim() == 1 ? 1 : self->size(0);
  Tensor out = ember::empty(out_shape, ScalarType::Int64, self->device());
  if (rows == 0) return out;

  Tensor p = ember::empty({rows, ncat}, ScalarType::Float64, self->device());
  copy_into(p, make_view(self, {rows, ncat},
                         {self->dim() == 1 ? 0 : self->stride(0), self->stride(self->dim() - 1)},
                         self->storage_offset()));
  const double* pp = p->data_as<double>();
  check_multinomial_probs(pp, rows, ncat);

  // One 64-bit draw per sample (with replacement) or per category (without), two per counter.
  Generator& gen = gen_or_default(generator);
  const int64_t per_row = replacement ? num_samples : ncat;
  const uint64_t base = gen.reserve(static_cast<uint64_t>((rows * per_row + 1) / 2));
  const uint64_t seed = gen.seed();
  auto draw = [&](int64_t d) {
    uint32_t w[4];
    Philox::generate(seed, base + static_cast<uint64_t>(d / 2), w);
    const int k = static_cast<int>(d % 2) * 2;
    return u53(w[k], w[k + 1]);
  };
  int64_t* po = out->data_as<int64_t>();
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(per_row, 1));
  parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
    std::vector<double> acc(ncat);
    std::vector<int64_t> idx(ncat);
    for (int64_t r = r0; r < r1; ++r) {
      const double* row = pp + r * ncat;
      int64_t* orow = po + r * num_samples;
      if (replacement) {
        std::partial_sum(row, row + ncat, acc.begin());
        const double total = acc[ncat - 1];
        for (int64_t s = 0; s < num_samples; ++s) {
          const double u = draw(r * per_row + s) * total;
          int64_t c = std::upper_bound(acc.begin(), acc.end(), u) - acc.begin();
          while (c > 0 && (c >= ncat || row[c] == 0.0)) --c;  // rounding at the top end
          orow[s] = c;
        }
      } else {
        // Exponential races: category c wins at time E_c / p_c; the first num_samples finishers
        // are a draw without replacement (zero-probability categories come last).
        for (int64_t c = 0; c < ncat; ++c) {
          const double e = -std::log1p(-draw(r * per_row + c));
          acc[c] = row[c] > 0.0 ? e / row[c] : std::numeric_limits<double>::infinity();
        }
        std::iota(idx.begin(), idx.end(), 0);
        std::partial_sort(
            idx.begin(), idx.begin() + num_samples, idx.end(),
            [&](int64_t a, int64_t b) { return acc[a] < acc[b] || (acc[a] == acc[b] && a < b); });
        std::copy(idx.begin(), idx.begin() + num_samples, orow);
      }
    }
  });
  return out;
}

}  // namespace cpu
}  // namespace ember
