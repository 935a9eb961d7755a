// Factories of ops/creation.yaml. The range fills (arange, linspace, logspace, eye) write CPU
// memory directly and refuse other devices; rand/randn/randint/normal allocate and call the
// in-place random kernels (kernels/cpu/creation_ops.cpp), so they follow the device they fill;
// randperm shuffles on the host and moves the result to its device (ops/host_sync.h).
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <type_traits>
#include <utility>

#include "core/dispatch.h"
#include "core/generator.h"
#include "kernels/int_bounds.h"
#include "kernels/iterator.h"
#include "kernels/parallel.h"
#include "ops.h"
#include "ops/host_sync.h"

namespace ember {
namespace {

template <class T>
T cast_to(double v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// out[i] = f(i) for a new 1-D tensor, in parallel.
template <class T, class F>
void fill_index(const Tensor& out, const F& f) {
  T* p = out->data_as<T>();
  parallel_for(0, out->numel(), kPointwiseGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = f(i);
  });
}

// randperm's MT19937 stream is a pure function of the generator's Philox (seed, offset), so the
// counter stays the whole generator state (get_state / set_state reproduce a permutation): the
// engine seeded with the seed (as torch seeds its CPU generator) and advanced by `offset` draws,
// randperm reserving one offset per draw. A fresh generator, and consecutive randperms on one,
// thus give torch's permutations. Past kMtDiscardLimit draws (other random ops also move the
// offset) the engine is seeded from (seed, offset) instead: still deterministic, bounded cost.
// The limit is small because a cache miss replays the draws: `randperm(n)[:b]` in a training
// loop whose dropout moves the offset paid 5 ms a call with a limit of 2^22.
constexpr int64_t kMtRandpermLimit = std::numeric_limits<uint32_t>::max() / 20;  // torch's
constexpr uint64_t kMtDiscardLimit = uint64_t(1) << 14;

struct MtCache {
  uint64_t seed = 0;
  uint64_t offset = ~uint64_t(0);  // no stream yet
  std::mt19937 engine;
};

MtCache& mt_cache() {
  thread_local MtCache cache;
  return cache;
}

// The engine for (seed, offset); consecutive randperms on this thread reuse the cached one.
std::mt19937& mt_stream(uint64_t seed, uint64_t offset) {
  MtCache& c = mt_cache();
  if (offset <= kMtDiscardLimit) {
    // the cached engine ended there: it is mt(seed) advanced by `offset` draws too
    if (c.seed == seed && c.offset == offset) return c.engine;
    c.engine.seed(static_cast<uint32_t>(seed));
    c.engine.discard(offset);
  } else {
    // one 32-bit seed mixed from both (splitmix64): seeding stays cheap (a seed_seq cost 10 us)
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (offset + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    c.engine.seed(static_cast<uint32_t>(z ^ (z >> 31)));
  }
  c.seed = seed;
  c.offset = offset;
  return c.engine;
}

}  // namespace

namespace composite {

Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step,
              std::optional<ScalarType> dtype, std::optional<Device> device) {
  const bool any_float = start.is_floating() || end.is_floating() || step.is_floating();
  const ScalarType dt = dtype.value_or(any_float ? default_dtype() : ScalarType::Int64);
  EMBER_CHECK_KIND(dt != ScalarType::Bool, DtypeNotImplemented,
                   "arange: not implemented for dtype bool");
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  EMBER_CHECK(std::isfinite(s) && std::isfinite(e), "arange: unsupported range: ", s, " -> ", e);
  // int64 results are computed on the truncated integer arguments, as PyTorch does.
  const bool int64 = dt == ScalarType::Int64;
  // Integer results use the truncated arguments: they must fit int64 (the cast is UB otherwise).
  if (!is_floating(dt))
    for (const Scalar* v : {&start, &end, &step})
      EMBER_CHECK(!v->is_floating() || (v->to_double() >= -9223372036854775808.0 &&
                                        v->to_double() < 9223372036854775808.0),
                  "arange: value ", v->to_double(),
                  " is out of range for an integer result of dtype ", dtype_name(dt));
  const int64_t is = start.to_int(), ist = step.to_int();
  double size_d;
  if (int64) {
    const int64_t ie = end.to_int();
    EMBER_CHECK(ist != 0, "arange: step must be nonzero");
    EMBER_CHECK((ist > 0 && ie >= is) || (ist < 0 && ie <= is),
                "arange: upper bound and lower bound inconsistent with step sign");
    const int64_t sgn = ist > 0 ? 1 : -1;
    // In 128 bits: end - start overflows int64 for ranges like [-2**63, 2**63 - 1).
    size_d = static_cast<double>((static_cast<__int128>(ie) - is + ist - sgn) / ist);
  } else {
    EMBER_CHECK(st != 0.0, "arange: step must be nonzero");
    EMBER_CHECK((st > 0 && e >= s) || (st < 0 && e <= s),
                "arange: upper bound and lower bound inconsistent with step sign");
    size_d = std::ceil((e - s) / st);
  }
  EMBER_CHECK(
      size_d >= 0 && size_d <= static_cast<double>(std::numeric_limits<int64_t>::max() / 16),
      "arange: invalid size ", size_d, ", possible overflow?");
  Tensor out = ember::empty({static_cast<int64_t>(size_d)}, dt);
  EMBER_DISPATCH_NUMERIC(dt, "arange", [&] {
    using T = scalar_t;
    if constexpr (std::is_integral_v<T>) {
      // Integer results step by the truncated integer step (wrapping like PyTorch).
      fill_index<T>(out, [&](int64_t i) {
        return static_cast<T>(static_cast<uint64_t>(is) +
                              static_cast<uint64_t>(i) * static_cast<uint64_t>(ist));
      });
    } else {
      fill_index<T>(out, [&](int64_t i) { return cast_to<T>(s + st * static_cast<double>(i)); });
    }
  });
  return to_factory_device(out, device);
}

namespace {
// Evenly spaced values, filled from both ends so the last one is exactly `end`. f maps each
// value to the stored one. As PyTorch's CPU kernel computes them: float32 in float32, float64
// and the integer types in double (their ends truncated to the type first), each value one
// fused multiply-add (start + step * i, or end - step * (steps - 1 - i) in the second half:
// PyTorch's linspace kernel is compiled with FMA contraction), and half/bfloat16 in their own
// type, every operand converted to it (the indices too) and every operation's result rounded to
// it. (logspace computes its exponents otherwise: see there.)
template <class T, class F>
void fill_linear(const Tensor& out, double start, double end, int64_t steps, const F& f) {
  if (steps == 1) {
    out->data_as<T>()[0] = f(start);
    return;
  }
  const int64_t half = steps / 2;
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    auto as_f = [](T v) { return static_cast<float>(v); };
    const T s = cast_to<T>(start), e = cast_to<T>(end);
    const T step = T(as_f(T(as_f(e) - as_f(s))) / as_f(T(static_cast<float>(steps - 1))));
    fill_index<T>(out, [&](int64_t i) {
      const T k = T(as_f(step) * as_f(T(static_cast<float>(i < half ? i : steps - i - 1))));
      const T v = T(i < half ? as_f(s) + as_f(k) : as_f(e) - as_f(k));
      return f(static_cast<double>(as_f(v)));
    });
  } else if constexpr (std::is_same_v<T, float>) {
    const float s = static_cast<float>(start), e = static_cast<float>(end);
    const float step = (e - s) / static_cast<float>(steps - 1);
    fill_index<T>(out, [&](int64_t i) {
      const float k = static_cast<float>(i < half ? i : steps - i - 1);
      return f(i < half ? std::fma(step, k, s) : std::fma(-step, k, e));
    });
  } else {
    if constexpr (std::is_integral_v<T>) {  // the ends are truncated, and wrapped into T
      start = std::trunc(start);
      end = std::trunc(end);
      if constexpr (std::is_unsigned_v<T>) {  // (a negative int end: -5 is 251 in uint8)
        if (start < 0) start = static_cast<double>(static_cast<T>(static_cast<int64_t>(start)));
        if (end < 0) end = static_cast<double>(static_cast<T>(static_cast<int64_t>(end)));
      }
    }
    const double step = (end - start) / static_cast<double>(steps - 1);
    fill_index<T>(out, [&](int64_t i) {
      const double k = static_cast<double>(i < half ? i : steps - i - 1);
      return f(i < half ? std::fma(step, k, start) : std::fma(-step, k, end));
    });
  }
}
}  // namespace

Tensor linspace(const Scalar& start, const Scalar& end, int64_t steps,
                std::optional<ScalarType> dtype, std::optional<Device> device) {
  EMBER_CHECK(steps >= 0, "linspace: number of steps must be non-negative (got ", steps, ")");
  const bool complex_ends = start.is_complex() || end.is_complex();
  const ScalarType dt =
      dtype.value_or(complex_ends ? to_complex(default_dtype()) : default_dtype());
  EMBER_CHECK_KIND(dt != ScalarType::Bool, DtypeNotImplemented,
                   "linspace: not implemented for dtype bool");
  if (is_complex(dt)) {
    // The real and imaginary parts are each a real linspace of the component type.
    const std::complex<double> s = start.to_complex(), e = end.to_complex();
    const ScalarType part = to_real(dt);
    return ops::complex(linspace(Scalar(s.real()), Scalar(e.real()), steps, part, device),
                        linspace(Scalar(s.imag()), Scalar(e.imag()), steps, part, device),
                        Tensor());
  }
  // The ends must fit the dtype, as PyTorch checks them: 1e6 into float16 gave NaNs, 300 into
  // uint8 wrapped to 44.
  check_scalar_fits(start, dt, "linspace");
  check_scalar_fits(end, dt, "linspace");
  Tensor out = ember::empty({steps}, dt);
  if (steps == 0) return to_factory_device(out, device);
  EMBER_DISPATCH_NUMERIC(dt, "linspace", [&] {
    using T = scalar_t;
    fill_linear<T>(out, start.to_double(), end.to_double(), steps,
                   [](double v) { return cast_to<T>(v); });
  });
  return to_factory_device(out, device);
}

Tensor logspace(const Scalar& start, const Scalar& end, int64_t steps, double base,
                std::optional<ScalarType> dtype, std::optional<Device> device) {
  EMBER_CHECK(steps >= 0, "logspace: number of steps must be non-negative (got ", steps, ")");
  const ScalarType dt = dtype.value_or(default_dtype());
  EMBER_CHECK_KIND(dt != ScalarType::Bool, DtypeNotImplemented,
                   "logspace: not implemented for dtype bool");
  check_scalar_fits(start, dt, "logspace");  // (the ends, as linspace's)
  check_scalar_fits(end, dt, "logspace");
  Tensor out = ember::empty({steps}, dt);
  if (steps == 0) return to_factory_device(out, device);
  EMBER_DISPATCH_NUMERIC(dt, "logspace", [&] {
    using T = scalar_t;
    if (steps == 1) {
      out->data_as<T>()[0] = cast_to<T>(std::pow(base, start.to_double()));
      return;
    }
    // As PyTorch's CPU kernel: the ends rounded (integers: truncated) to T and their
    // difference taken in T; the step, each exponent (an unfused product and sum, from both
    // ends) and the power in double, rounded to T once at the end.
    const T s = cast_to<T>(start.to_double()), e = cast_to<T>(end.to_double());
    const double s_d = static_cast<double>(s), e_d = static_cast<double>(e);
    // (integers: the difference is taken after promotion to int, not wrapped back to T, so a
    // uint8 logspace(3, 0) steps down by -0.75 rather than up by 253 / 4)
    const double diff =
        std::is_integral_v<T> ? e_d - s_d : static_cast<double>(static_cast<T>(e - s));
    const double step = diff / static_cast<double>(steps - 1);
    const int64_t half = steps / 2;
    fill_index<T>(out, [&](int64_t i) {
      const double k = static_cast<double>(i < half ? i : steps - i - 1);
      const double prod = step * k;  // rounded on its own: no fused multiply-add
      return cast_to<T>(std::pow(base, i < half ? s_d + prod : e_d - prod));
    });
  });
  return to_factory_device(out, device);
}

Tensor eye(int64_t n, std::optional<int64_t> m, std::optional<ScalarType> dtype,
           std::optional<Device> device) {
  const int64_t cols = m.value_or(n);
  EMBER_CHECK(n >= 0, "eye: n must be greater or equal to 0, got ", n);
  EMBER_CHECK(cols >= 0, "eye: m must be greater or equal to 0, got ", cols);
  const ScalarType dt = dtype.value_or(default_dtype());
  Tensor out = ember::empty({n, cols}, dt);
  EMBER_DISPATCH_ALL_AND_COMPLEX(dt, "eye", [&] {  // complex: 1 + 0i on the diagonal
    using T = scalar_t;
    T* p = out->data_as<T>();
    std::fill(p, p + out->numel(), cast_to<T>(0.0));
    for (int64_t i = 0; i < std::min(n, cols); ++i) p[i * cols + i] = cast_to<T>(1.0);
  });
  return to_factory_device(out, device);
}

Tensor arange(const Scalar& end, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return ops::arange(Scalar(int64_t(0)), end, Scalar(int64_t(1)), dtype, device);
}

namespace {
Tensor new_floating(const char* op, const DimVector& size, std::optional<ScalarType> dtype,
                    std::optional<Device> device) {
  const ScalarType dt = dtype.value_or(default_dtype());
  EMBER_CHECK_KIND(is_floating(dt), DtypeNotImplemented, op,
                   ": expected a floating-point dtype, but got ", dtype_name(dt));
  return ops::empty(size, dt, device);
}
}  // namespace

Tensor rand(const DimVector& size, Generator* generator, std::optional<ScalarType> dtype,
            std::optional<Device> device) {
  if (dtype && is_complex(*dtype)) {
    // As torch: real and imaginary parts each uniform on [0, 1).
    Tensor out = ops::empty(size, *dtype, device);
    ops::uniform_(ops::view_as_real(out), 0.0, 1.0, generator);
    return fresh(out);
  }
  return fresh(ops::uniform_(new_floating("rand", size, dtype, device), 0.0, 1.0, generator));
}

Tensor randn(const DimVector& size, Generator* generator, std::optional<ScalarType> dtype,
             std::optional<Device> device) {
  if (dtype && is_complex(*dtype)) {
    // Complex normal with unit variance: real and imaginary parts each N(0, 1/2), as in PyTorch.
    Tensor out = ops::empty(size, *dtype, device);
    ops::normal_(ops::view_as_real(out), 0.0, std::sqrt(0.5), generator);
    return fresh(out);
  }
  return fresh(ops::normal_(new_floating("randn", size, dtype, device), 0.0, 1.0, generator));
}

Tensor randint(int64_t low, int64_t high, const DimVector& size, Generator* generator,
               std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor out = ops::empty(size, dtype.value_or(ScalarType::Int64), device);
  return fresh(ops::random_(out, low, std::optional<int64_t>(high), generator));
}

Tensor randint(int64_t high, const DimVector& size, Generator* generator,
               std::optional<ScalarType> dtype, std::optional<Device> device) {
  return randint(0, high, size, generator, dtype, device);
}

Tensor rand_like(const Tensor& self, Generator* generator, std::optional<ScalarType> dtype,
                 std::optional<Device> device) {
  return rand(self->sizes(), generator, dtype.value_or(self->dtype()),
              device.value_or(self->device()));
}

Tensor randn_like(const Tensor& self, Generator* generator, std::optional<ScalarType> dtype,
                  std::optional<Device> device) {
  return randn(self->sizes(), generator, dtype.value_or(self->dtype()),
               device.value_or(self->device()));
}

Tensor randint_like(const Tensor& self, int64_t low, int64_t high, Generator* generator,
                    std::optional<ScalarType> dtype, std::optional<Device> device) {
  return randint(low, high, self->sizes(), generator, dtype.value_or(self->dtype()),
                 device.value_or(self->device()));
}

Tensor randint_like(const Tensor& self, int64_t high, Generator* generator,
                    std::optional<ScalarType> dtype, std::optional<Device> device) {
  return randint_like(self, 0, high, generator, dtype, device);
}

namespace {
void check_std(const Tensor& std) {
  if (std->device().is_meta()) return;  // no values to check
  Tensor s = ember::empty(std->sizes(), ScalarType::Float64, std->device());
  dispatch::_copy_from(std, s, false);
  s = host_values(s, "normal");
  const double* p = s->data_as<double>();
  for (int64_t i = 0; i < s->numel(); ++i)
    EMBER_CHECK(p[i] >= 0.0, "normal: expects all elements of std >= 0.0, but found ", p[i]);
}
ScalarType normal_dtype(ScalarType t) {
  EMBER_CHECK_KIND(is_floating(t), DtypeNotImplemented,
                   "normal: expected a floating-point mean and std, but got ", dtype_name(t));
  return t;
}
}  // namespace

Tensor normal(const Tensor& mean, const Tensor& std, Generator* generator) {
  // As torch, the draws have mean's dtype (a float32 std does not promote float16 means).
  const ScalarType dt = normal_dtype(mean->dtype());
  check_std(std);
  DimVector shape = broadcast_shapes(mean->sizes(), std->sizes(), "normal");
  Tensor z = randn(shape, generator, dt, mean->device());
  Tensor r = ops::add(ops::mul(z, std, Tensor()), mean, 1, Tensor());
  return r->dtype() == dt ? r : ops::_to_dtype(r, dt, false);
}

Tensor normal(const Tensor& mean, double std, Generator* generator) {
  EMBER_CHECK(std >= 0.0, "normal: expects std >= 0.0, but found std ", std);
  Tensor z = randn(mean->sizes(), generator, normal_dtype(mean->dtype()), mean->device());
  return ops::add(ops::mul(z, Scalar(std), Tensor()), mean, 1, Tensor());
}

Tensor normal(double mean, const Tensor& std, Generator* generator) {
  check_std(std);
  Tensor z = randn(std->sizes(), generator, normal_dtype(std->dtype()), std->device());
  return ops::add(ops::mul(z, std, Tensor()), Scalar(mean), 1, Tensor());
}

Tensor normal(double mean, double std, const DimVector& size, Generator* generator,
              std::optional<ScalarType> dtype, std::optional<Device> device) {
  EMBER_CHECK(std >= 0.0, "normal: expects std >= 0.0, but found std ", std);
  return fresh(ops::normal_(new_floating("normal", size, dtype, device), mean, std, generator));
}

// A permutation of 0..n-1 shuffled on the host (Fisher-Yates over the Philox stream, so the
// result depends only on the seed), then moved to the device asked for.
Tensor randperm(int64_t n, Generator* generator, std::optional<ScalarType> dtype,
                std::optional<Device> device) {
  EMBER_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  const ScalarType dt = dtype.value_or(ScalarType::Int64);
  EMBER_CHECK_KIND(dt != ScalarType::Bool, DtypeNotImplemented,
                   "randperm: not implemented for dtype bool");
  EMBER_DISPATCH_NUMERIC(dt, "randperm", [&] {
    EMBER_CHECK(n == 0 || static_cast<uint64_t>(n - 1) <= int_bounds<scalar_t>().second,
                "randperm: n is too large for result tensor type: ", dtype_name(dt));
  });
  Tensor perm = ember::empty({n}, ScalarType::Int64, cpu_device());
  int64_t* p = perm->data_as<int64_t>();
  std::iota(p, p + n, int64_t(0));
  if (n > 1 && n < kMtRandpermLimit) {
    // torch's CPU permutation (so a sampler or split seeded as in a torch script yields the same
    // order): a forward Fisher-Yates over 32-bit MT19937 draws.
    Generator& gen = gen_or_default(generator);
    const uint64_t draws = static_cast<uint64_t>(n - 1);
    const uint64_t base = gen.reserve(draws);
    std::mt19937& mt = mt_stream(gen.seed(), base);
    for (int64_t i = 0; i < n - 1; ++i) {
      const int64_t z =
          static_cast<int64_t>(static_cast<uint64_t>(mt()) % static_cast<uint64_t>(n - i));
      std::swap(p[i], p[i + z]);
    }
    mt_cache().offset = base + draws;
  } else if (n > 1) {
    // Fisher-Yates, step k (i = n-1-k) drawing 64 bits from counter base + k/2.
    Generator& gen = gen_or_default(generator);
    const uint64_t base = gen.reserve(static_cast<uint64_t>(n / 2));
    const uint64_t seed = gen.seed();
    uint32_t w[4];
    for (int64_t k = 0; k < n - 1; ++k) {
      if (k % 2 == 0) Philox::generate(seed, base + static_cast<uint64_t>(k / 2), w);
      const int64_t i = n - 1 - k;
      const int off = static_cast<int>(k % 2) * 2;
      const uint64_t bits = (static_cast<uint64_t>(w[off]) << 32) | w[off + 1];
      const int64_t j = static_cast<int64_t>(bits % static_cast<uint64_t>(i + 1));
      std::swap(p[i], p[j]);
    }
  }
  if (dt != ScalarType::Int64) {
    Tensor out = ember::empty({n}, dt, cpu_device());
    copy_into(out, perm);
    perm = out;
  }
  return to_factory_device(perm, device);
}

}  // namespace composite
}  // namespace ember
