// Random numbers on the CUDA device (ops/creation.yaml's kernels with CPU dispatch): a
// counter-based Philox4x32-10, the same function as core/generator.h's host Philox, evaluated by
// each thread on its own counter. Thread i of a launch uses counter base + i, where base is
// reserved from the generator (one counter per 128 random bits), so successive calls draw fresh
// numbers and re-seeding replays them. Without a Generator argument, each device has its own
// default generator (seeded by ember.manual_seed / ember.cuda.manual_seed).
#include <pybind11/pybind11.h>

#include <cmath>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "cuda/cuda_registry.h"
#include "cuda/index_common.cuh"
#include "cuda/random_ops.h"
#include "kernels/int_bounds.h"
#include "kernels/random_rules.h"
#include "kernels/shape_rules.h"
#include "ops.h"
#include "ops/op_types.h"

namespace py = pybind11;

namespace ember {
namespace cuda {

Generator& default_cuda_generator(int index) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<Generator>>* gens =
      new std::vector<std::unique_ptr<Generator>>();
  const int d = resolve_device(index);
  std::lock_guard<std::mutex> g(mu);
  if (static_cast<int>(gens->size()) <= d) gens->resize(d + 1);
  if (!(*gens)[d]) (*gens)[d] = std::make_unique<Generator>();
  return *(*gens)[d];
}

namespace {

struct Draw {
  uint64_t seed, base;
};

// Reserves `counters` Philox counters from the generator of self's device (or `g`).
Draw reserve(const Tensor& self, Generator* g, uint64_t counters) {
  Generator& gen = g ? *g : default_cuda_generator(ix::device_index(self));
  const uint64_t base = gen.reserve(counters);
  return {gen.seed(), base};
}

__device__ __forceinline__ void philox(uint64_t seed, uint64_t counter, uint32_t out[4]) {
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0,
           c3 = 0;
#pragma unroll
  for (int i = 0; i < 10; ++i) {
    const uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

__device__ __forceinline__ double u53(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((static_cast<uint64_t>(hi) << 32) | lo) >> 11) *
         (1.0 / 9007199254740992.0);
}

// Mantissa bits a uniform in [0, 1) gets for T, so u < 1 still holds after rounding to T.
template <class T>
constexpr int uniform_digits() {
  return std::is_same_v<T, Half> ? 11 : std::is_same_v<T, BFloat16> ? 8 : 24;
}

// Values per Philox counter: 4 from 32-bit words, or 2 from 64-bit pairs.
template <class Fill>
__global__ void random_kernel(int64_t n, int per, Draw dr, Fill fill) {
  const int64_t counters = (n + per - 1) / per;
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < counters;
       c += int64_t(gridDim.x) * blockDim.x) {
    uint32_t w[4];
    philox(dr.seed, dr.base + static_cast<uint64_t>(c), w);
    const int64_t first = c * per;
    const int cnt = static_cast<int>(n - first < per ? n - first : per);
    fill(first, cnt, w);
  }
}

// Runs fill over self's elements in row-major order (through a contiguous temporary when self
// is strided), `per` values per counter.
template <class MakeFill>
void run_random(const Tensor& self, Generator* g, int per, const char* op, const MakeFill& make) {
  const int64_t n = self->numel();
  if (n == 0) return;
  Tensor dst = self->is_contiguous() ? self : empty(self->sizes(), self->dtype(), self->device());
  const int64_t counters = (n + per - 1) / per;
  Draw dr = reserve(self, g, static_cast<uint64_t>(counters));
  DeviceGuard guard(ix::device_index(self));
  random_kernel<<<blocks_for(counters), kBlockSize, 0, ix::stream_of(self)>>>(n, per, dr,
                                                                              make(dst->data()));
  check_launch(op);
  if (dst.get() != self.get()) ix::copy(self, dst, op);
  self->bump_version();
}

// o[j] = f(u) for cnt uniforms u in [0, 1): one 53-bit pair each for double, the top `digits`
// bits of one word otherwise.
template <class T, class F>
__device__ void fill_uniforms(T* o, int cnt, const uint32_t* w, const F& f) {
  if constexpr (std::is_same_v<T, double>) {
    for (int j = 0; j < cnt; ++j) o[j] = f(u53(w[2 * j], w[2 * j + 1]));
  } else {
    constexpr int digits = uniform_digits<T>();
    constexpr double scale = 1.0 / static_cast<double>(uint32_t(1) << digits);
    for (int j = 0; j < cnt; ++j)
      o[j] = from_op<T>(f(static_cast<double>(w[j] >> (32 - digits)) * scale));
  }
}

template <class T>
struct UniformFill {
  char* out;
  double from, range;
  __device__ void operator()(int64_t first, int cnt, const uint32_t* w) const {
    const double a = from, r = range;
    fill_uniforms(reinterpret_cast<T*>(out) + first, cnt, w,
                  // rounded twice as the CPU does: a fused multiply-add differs in the last bit
                  [a, r](double u) { return __dadd_rn(a, __dmul_rn(r, u)); });
  }
};

template <class T>
struct ExponentialFill {
  char* out;
  double lambd;
  __device__ void operator()(int64_t first, int cnt, const uint32_t* w) const {
    const double l = lambd;
    fill_uniforms(reinterpret_cast<T*>(out) + first, cnt, w,
                  [l](double u) { return -log1p(-u) / l; });
  }
};

// Box-Muller: each pair of uniforms gives two normals.
template <class T>
struct NormalFill {
  char* out;
  double mean, std;
  __device__ void operator()(int64_t first, int cnt, const uint32_t* w) const {
    T* o = reinterpret_cast<T*>(out) + first;
    if constexpr (std::is_same_v<T, double>) {
      const double u1 = 1.0 - u53(w[0], w[1]), u2 = u53(w[2], w[3]);
      const double r = sqrt(-2.0 * log(u1));
      double s, c;
      sincospi(2.0 * u2, &s, &c);
      o[0] = mean + std * r * c;
      if (cnt > 1) o[1] = mean + std * r * s;
    } else {
      const float m = static_cast<float>(mean), sd = static_cast<float>(std);
      for (int p = 0; p < 2; ++p) {
        if (2 * p >= cnt) break;
        // u1 = 1 - k / 2^24 in (0, 1], so the log is finite: the CPU kernel's u1
        // (normal_float_fill), so one Generator state gives the same normals on both devices
        // (it was (k + 1) / 2^24: the same distribution, another stream than the CPU's).
        const float u1 = 1.0f - static_cast<float>(w[2 * p] >> 8) * (1.0f / 16777216.0f);
        const float u2 = static_cast<float>(w[2 * p + 1] >> 8) * (1.0f / 16777216.0f);
        const float r = sqrtf(-2.0f * logf(u1));
        float s, c;
        sincospif(2.0f * u2, &s, &c);
        o[2 * p] = from_op<T>(m + sd * r * c);
        if (2 * p + 1 < cnt) o[2 * p + 1] = from_op<T>(m + sd * r * s);
      }
    }
  }
};

template <class T>
__device__ __forceinline__ T int_to(int64_t v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(v);
  } else {
    return from_op<T>(static_cast<double>(v));
  }
}

// from + (uniform integer in [0, range)); range 0 is the full 2^64. 32 bits per value when the
// range fits, 64 otherwise (per tells which).
template <class T>
struct RandomIntFill {
  char* out;
  int64_t from;
  uint64_t range;
  __device__ void operator()(int64_t first, int cnt, const uint32_t* w) const {
    T* o = reinterpret_cast<T*>(out) + first;
    const bool wide = range == 0 || range > (uint64_t(1) << 32);
    for (int j = 0; j < cnt; ++j) {
      uint64_t r;
      if (wide) {
        r = (static_cast<uint64_t>(w[2 * j]) << 32) | w[2 * j + 1];
        if (range != 0) r %= range;
      } else {
        r = w[j] % range;
      }
      o[j] = int_to<T>(static_cast<int64_t>(static_cast<uint64_t>(from) + r));
    }
  }
};

// self[i] = u < p[i] (p: contiguous float64 of self's shape) or u < pv (p null).
template <class T>
struct BernoulliFill {
  char* out;
  const double* p;
  double pv;
  __device__ void operator()(int64_t first, int cnt, const uint32_t* w) const {
    T* o = reinterpret_cast<T*>(out) + first;
    for (int j = 0; j < cnt; ++j) {
      const double prob = p ? p[first + j] : pv;
      o[j] = int_to<T>(u53(w[2 * j], w[2 * j + 1]) < prob ? 1 : 0);
    }
  }
};

void check_overlap(const Tensor& self, const char* op) {
  ix::check_cuda(self, op, "self");
  check_no_internal_overlap(self, op);
}

Tensor uniform_(const Tensor& self, double from_, double to, Generator* generator) {
  const char* op = "uniform_";
  check_overlap(self, op);
  check_uniform_range(from_, to);
  EMBER_DISPATCH_FLOAT(self->dtype(), op, [&] {
    using T = scalar_t;
    run_random(self, generator, std::is_same_v<T, double> ? 2 : 4, op,
               [&](char* p) { return UniformFill<T>{p, from_, to - from_}; });
  });
  return self;
}

Tensor exponential_(const Tensor& self, double lambd, Generator* generator) {
  const char* op = "exponential_";
  check_overlap(self, op);
  check_exponential_lambda(lambd);
  EMBER_DISPATCH_FLOAT(self->dtype(), op, [&] {
    using T = scalar_t;
    run_random(self, generator, std::is_same_v<T, double> ? 2 : 4, op,
               [&](char* p) { return ExponentialFill<T>{p, lambd}; });
  });
  return self;
}

Tensor normal_(const Tensor& self, double mean, double std, Generator* generator) {
  const char* op = "normal_";
  check_overlap(self, op);
  check_normal_std(std);
  EMBER_DISPATCH_FLOAT(self->dtype(), op, [&] {
    using T = scalar_t;
    run_random(self, generator, std::is_same_v<T, double> ? 2 : 4, op,
               [&](char* p) { return NormalFill<T>{p, mean, std}; });
  });
  return self;
}

Tensor random_impl(const Tensor& self, int64_t from, std::optional<int64_t> to, Generator* g) {
  const char* op = "random_";
  check_overlap(self, op);
  const uint64_t range = random_range(from, to, self->dtype());
  EMBER_DISPATCH_ALL(self->dtype(), op, [&] {
    const bool wide = range == 0 || range > (uint64_t(1) << 32);
    run_random(self, g, wide ? 2 : 4, op,
               [&](char* p) { return RandomIntFill<scalar_t>{p, from, range}; });
  });
  return self;
}

Tensor random_full(const Tensor& self, Generator* generator) {
  return random_impl(self, 0, std::nullopt, generator);
}
Tensor random_to(const Tensor& self, int64_t to, Generator* generator) {
  return random_impl(self, 0, to, generator);
}
Tensor random_from_to(const Tensor& self, int64_t from_, std::optional<int64_t> to,
                      Generator* generator) {
  return random_impl(self, from_, to, generator);
}

// p broadcast to `shape` as a contiguous float64 device tensor, every value checked in [0, 1]
// on the host (a sync point).
Tensor dense_probs(const Tensor& p, const DimVector& shape, Device device, const char* op) {
  Tensor src = p->sizes() == shape ? p : expand_view(p, shape);
  Tensor h = ix::host_as(src, ScalarType::Float64, op);
  const double* d = h->data_as<double>();
  check_probs(d, h->numel(), op);
  return ix::to_device(h, device);
}

void bernoulli_fill(const Tensor& self, const Tensor& p, double pv, Generator* g, const char* op) {
  EMBER_DISPATCH_ALL(self->dtype(), op, [&] {
    using T = scalar_t;
    run_random(self, g, 2, op, [&](char* out) {
      return BernoulliFill<T>{out, p ? p->data_as<double>() : nullptr, pv};
    });
  });
}

Tensor bernoulli_tensor(const Tensor& self, Generator* generator) {
  check_bernoulli_self(self);
  Tensor out = empty(self->sizes(), self->dtype(), self->device());
  bernoulli_fill(out, dense_probs(self, self->sizes(), self->device(), "bernoulli"), 0.0, generator,
                 "bernoulli");
  return fresh(out);
}

Tensor bernoulli_inplace(const Tensor& self, const TensorOrScalar& p, Generator* generator);

Tensor bernoulli_float(const Tensor& self, double p, Generator* generator) {
  Tensor out = empty(self->sizes(), self->dtype(), self->device());
  return fresh(bernoulli_inplace(out, TensorOrScalar(Scalar(p)), generator));
}

Tensor bernoulli_inplace(const Tensor& self, const TensorOrScalar& p, Generator* generator) {
  check_overlap(self, "bernoulli_");
  if (p.is_tensor()) {
    check_bernoulli_p_shape(self, p.tensor);
    Tensor probs = dense_probs(p.tensor, self->sizes(), self->device(), "bernoulli_");
    bernoulli_fill(self, probs, 0.0, generator, "bernoulli_");
    return self;
  }
  const double pv = p.scalar.to_double();
  check_bernoulli_p(pv);
  bernoulli_fill(self, nullptr, pv, generator, "bernoulli_");
  return self;
}

// One thread per row of the (rows, ncat) float64 probabilities. draw d of the op uses counter
// base + d / 2 (two 64-bit draws per counter). `scratch`: rows * ncat doubles.
__global__ void multinomial_kernel(int64_t rows, int64_t ncat, int64_t num_samples,
                                   bool replacement, Draw dr, const double* probs, double* scratch,
                                   int64_t* out) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += int64_t(gridDim.x) * blockDim.x) {
    const double* row = probs + r * ncat;
    double* acc = scratch + r * ncat;
    int64_t* orow = out + r * num_samples;
    const int64_t per_row = replacement ? num_samples : ncat;
    auto draw = [&](int64_t k) {
      const int64_t d = r * per_row + k;
      uint32_t w[4];
      philox(dr.seed, dr.base + static_cast<uint64_t>(d / 2), w);
      const int o = static_cast<int>(d % 2) * 2;
      return u53(w[o], w[o + 1]);
    };
    if (replacement) {
      double s = 0;
      for (int64_t c = 0; c < ncat; ++c) acc[c] = (s += row[c]);
      const double total = acc[ncat - 1];
      for (int64_t k = 0; k < num_samples; ++k) {
        const double u = draw(k) * total;
        int64_t lo = 0, hi = ncat;  // first c with acc[c] > u
        while (lo < hi) {
          const int64_t mid = lo + ((hi - lo) >> 1);
          if (acc[mid] > u) {
            hi = mid;
          } else {
            lo = mid + 1;
          }
        }
        int64_t c = lo;
        while (c > 0 && (c >= ncat || row[c] == 0.0)) --c;  // rounding at the top end
        orow[k] = c;
      }
    } else {
      // Exponential races: category c finishes at E_c / p_c; the first num_samples finishers
      // (ties by index, zero-probability categories last) are a draw without replacement.
      for (int64_t c = 0; c < ncat; ++c) {
        const double e = -log1p(-draw(c));
        acc[c] = row[c] > 0.0 ? e / row[c] : INFINITY;
      }
      for (int64_t k = 0; k < num_samples; ++k) {
        int64_t best = -1;
        for (int64_t c = 0; c < ncat; ++c) {
          if (acc[c] != acc[c]) continue;  // taken (NaN)
          if (best < 0 || acc[c] < acc[best]) best = c;
        }
        orow[k] = best;
        acc[best] = NAN;
      }
    }
  }
}

Tensor multinomial(const Tensor& self, int64_t num_samples, bool replacement,
                   Generator* generator) {
  const char* op = "multinomial";
  DimVector out_shape = multinomial_shape(self, num_samples, replacement);
  const int64_t ncat = self->size(self->dim() - 1);
  const int64_t rows = self->dim() == 1 ? 1 : self->size(0);
  Tensor out = empty(out_shape, ScalarType::Int64, self->device());
  if (rows == 0 || num_samples == 0) return out;
  Tensor pv = make_view(self, {rows, ncat},
                        {self->dim() == 1 ? 0 : self->stride(0), self->stride(self->dim() - 1)},
                        self->storage_offset());
  Tensor h = ix::host_as(pv, ScalarType::Float64, op);
  const double* pp = h->data_as<double>();
  check_multinomial_probs(pp, rows, ncat);
  Tensor probs = ix::to_device(h, self->device());
  Tensor scratch = empty(DimVector{rows, ncat}, ScalarType::Float64, self->device());
  const int64_t per_row = replacement ? num_samples : ncat;
  Draw dr = reserve(self, generator, static_cast<uint64_t>((rows * per_row + 1) / 2));
  DeviceGuard guard(ix::device_index(self));
  multinomial_kernel<<<blocks_for(rows, 1), 128, 0, ix::stream_of(self)>>>(
      rows, ncat, num_samples, replacement, dr, probs->data_as<double>(),
      scratch->data_as<double>(), out->data_as<int64_t>());
  check_launch(op);
  return out;
}

void register_random() {
  register_kernel("uniform_", DeviceType::CUDA, &uniform_);
  register_kernel("normal_", DeviceType::CUDA, &normal_);
  register_kernel("exponential_", DeviceType::CUDA, &exponential_);
  register_kernel("random_", DeviceType::CUDA, &random_full);
  register_kernel("random_", DeviceType::CUDA, &random_to);
  register_kernel("random_", DeviceType::CUDA, &random_from_to);
  register_kernel("bernoulli", DeviceType::CUDA, &bernoulli_tensor);
  register_kernel("bernoulli", DeviceType::CUDA, &bernoulli_float);
  register_kernel("bernoulli_", DeviceType::CUDA, &bernoulli_inplace);
  register_kernel("multinomial", DeviceType::CUDA, &multinomial);
}

uint64_t nondeterministic_seed() {
  std::random_device rd;
  return rd() | (static_cast<uint64_t>(rd()) << 32);
}

}  // namespace

void bernoulli_scalar_(const Tensor& self, double p, Generator* g) {
  check_bernoulli_p(p);
  bernoulli_fill(self, nullptr, p, g, "bernoulli_");
}

void bind_random(py::module_& m) {
  m.def(
      "manual_seed", [](uint64_t seed) { default_cuda_generator(-1).manual_seed(seed); },
      py::arg("seed"), "Seeds the current CUDA device's default generator.");
  m.def(
      "manual_seed_all",
      [](uint64_t seed) {
        for (int d = 0; d < device_count(); ++d) default_cuda_generator(d).manual_seed(seed);
      },
      py::arg("seed"), "Seeds every CUDA device's default generator.");
  m.def("seed", [] {
    const uint64_t s = nondeterministic_seed();
    default_cuda_generator(-1).manual_seed(s);
    return s;
  });
  m.def("seed_all", [] {
    const uint64_t s = nondeterministic_seed();
    for (int d = 0; d < device_count(); ++d) default_cuda_generator(d).manual_seed(s);
    return s;
  });
  m.def("initial_seed", [] { return default_cuda_generator(-1).initial_seed(); });
  m.def(
      "_get_rng_state",
      [](int device) {
        Generator& g = default_cuda_generator(device);
        return py::make_tuple(g.seed(), g.offset());
      },
      py::arg("device") = -1);
  m.def(
      "_set_rng_state",
      [](uint64_t seed, uint64_t offset, int device) {
        default_cuda_generator(device).set_state(seed, offset);
      },
      py::arg("seed"), py::arg("offset"), py::arg("device") = -1);
  // A seed given before this module loaded (ember.manual_seed / ember.cuda.manual_seed on a
  // process that had not touched CUDA yet) applies now.
  if (device_count() > 0) {
    py::dict modules = py::module_::import("sys").attr("modules");
    if (modules.contains("ember.cuda")) {
      py::object pending = py::getattr(modules["ember.cuda"], "_pending_seed", py::none());
      if (!pending.is_none()) {
        const uint64_t s = pending.cast<uint64_t>();
        for (int d = 0; d < device_count(); ++d) default_cuda_generator(d).manual_seed(s);
      }
    }
  }
}

}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::register_random)
