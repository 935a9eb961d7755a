// CPU kernels of softmax / log_softmax (and their backward) and of the pointwise activations
// declared in ops/nn.yaml. Softmax reduces along one dim of a contiguous copy viewed as
// (outer, dim, inner); activations run through TensorIterator like every pointwise op.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/dispatch.h"
#include "kernels/activation_math.h"
#include "kernels/activation_rules.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/cpu/nn_vec.h"
#include "kernels/cpu/vec_loop.h"
#include "kernels/iterator.h"
#include "kernels/loops.h"
#include "kernels/parallel.h"
#include "kernels/pointwise_rules.h"
#include "kernels/softmax_rules.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

// ---- softmax --------------------------------------------------------------------------------

using nn::softmax_shape;  // shared with CUDA (kernels/softmax_rules.h)
using nn::SoftmaxShape;

// Calls f(o, c0, c1) for tiles of columns [c0, c1) of every outer block o of a softmax along a
// strided dim, tiles spread over the pool: 16 columns (a cache line of floats) per tile.
template <class F>
void for_col_tiles(const SoftmaxShape& s, const F& f) {
  constexpr int64_t kTile = 16;
  const int64_t tiles = (s.inner + kTile - 1) / kTile;
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(s.n * kTile, 1));
  parallel_for(0, s.outer * tiles, grain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / tiles, c0 = (t % tiles) * kTile;
      f(o, c0, std::min(s.inner, c0 + kTile));
    }
  });
}

// out = softmax (log=false) or log_softmax (log=true) of x along the middle dim of (outer, n,
// inner); T is the storage type, math runs in opmath (float for the 16-bit floats).
template <class T>
void softmax_kernel(const T* x, T* out, const SoftmaxShape& s, bool log) {
  using A = opmath_t<T>;
  const int64_t n = s.n, inner = s.inner;
  if (inner == 1) {
    const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(n, 1));
    if constexpr (std::is_same_v<T, float>) {  // vectorized rows (nn_vec.h)
      parallel_for(0, s.outer, grain,
                   [&](int64_t b, int64_t e) { nn::vec::softmax_rows(x, out, b, e, n, log); });
      return;
    }
    parallel_for(0, s.outer, grain, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* xr = x + r * n;
        T* orow = out + r * n;
        A mx = -std::numeric_limits<A>::infinity();
        for (int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<A>(xr[i]));
        if (std::isinf(mx) && mx < 0) mx = A(0);  // all -inf: exp gives 0s, sum 0
        A sum = 0;
        if (log) {
          for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<A>(xr[i]) - mx);
          // (x - max) - log(sum), not x - (max + log(sum)): a large max would absorb log(sum)
          const A lsum = std::log(sum);
          for (int64_t i = 0; i < n; ++i)
            orow[i] = static_cast<T>((static_cast<A>(xr[i]) - mx) - lsum);
        } else {
          for (int64_t i = 0; i < n; ++i) {
            A e = std::exp(static_cast<A>(xr[i]) - mx);
            orow[i] = static_cast<T>(e);
            sum += e;
          }
          const A inv = A(1) / sum;
          if constexpr (std::is_same_v<T, A>) {
            for (int64_t i = 0; i < n; ++i) orow[i] *= inv;
          } else {  // the exps were rounded to T: recompute them in opmath
            for (int64_t i = 0; i < n; ++i)
              orow[i] = static_cast<T>(std::exp(static_cast<A>(xr[i]) - mx) * inv);
          }
        }
        // NaN anywhere in the row: max ignored it, so make the whole row NaN as PyTorch does.
        for (int64_t i = 0; i < n; ++i)
          if (xr[i] != xr[i]) {
            for (int64_t j = 0; j < n; ++j) orow[j] = static_cast<T>(std::nan(""));
            break;
          }
      }
    });
    return;
  }
  // Reduction along a strided dim: vectors of `inner` contiguous elements at a time.
  const int64_t total = s.outer * inner;
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(n, 1));
  if constexpr (std::is_same_v<T, float>) {  // vectorized across columns (nn_vec.h)
    for_col_tiles(s, [&](int64_t o, int64_t c0, int64_t c1) {
      nn::vec::softmax_cols(x + o * n * inner, out + o * n * inner, n, inner, c0, c1, log);
    });
    return;
  }
  parallel_for(0, total, grain, [&](int64_t b, int64_t e) {
    std::vector<A> mx, sum;
    int64_t p = b;
    while (p < e) {
      const int64_t o = p / inner, i0 = p % inner;
      const int64_t cnt = std::min(inner - i0, e - p);
      const T* xb = x + o * n * inner + i0;
      T* ob = out + o * n * inner + i0;
      mx.assign(cnt, -std::numeric_limits<A>::infinity());
      sum.assign(cnt, A(0));
      bool has_nan = false;
      for (int64_t k = 0; k < n; ++k)
        for (int64_t j = 0; j < cnt; ++j) {
          A v = static_cast<A>(xb[k * inner + j]);
          has_nan |= v != v;
          mx[j] = std::max(mx[j], v);
        }
      for (int64_t j = 0; j < cnt; ++j)
        if (std::isinf(mx[j]) && mx[j] < 0) mx[j] = A(0);
      for (int64_t k = 0; k < n; ++k)
        for (int64_t j = 0; j < cnt; ++j)
          sum[j] += std::exp(static_cast<A>(xb[k * inner + j]) - mx[j]);
      for (int64_t k = 0; k < n; ++k)
        for (int64_t j = 0; j < cnt; ++j) {
          A v = static_cast<A>(xb[k * inner + j]) - mx[j];
          ob[k * inner + j] = static_cast<T>(log ? v - std::log(sum[j]) : std::exp(v) / sum[j]);
        }
      if (has_nan) {
        for (int64_t j = 0; j < cnt; ++j) {
          bool nan_col = false;
          for (int64_t k = 0; k < n; ++k) nan_col |= xb[k * inner + j] != xb[k * inner + j];
          if (nan_col)
            for (int64_t k = 0; k < n; ++k) ob[k * inner + j] = static_cast<T>(std::nan(""));
        }
      }
      p += cnt;
    }
  });
}

Tensor softmax_common(const char* op, const Tensor& self, int64_t dim,
                      std::optional<ScalarType> dtype, bool log) {
  const int64_t d = wrap_dim(dim, std::max<int64_t>(self->dim(), 1), op);
  Tensor x = nn::contig(self, nn::softmax_dtype(op, self, dtype));
  Tensor out = ember::empty(x->sizes(), x->dtype(), x->device());
  if (x->numel() == 0) return out;
  SoftmaxShape s = x->dim() == 0 ? SoftmaxShape{} : softmax_shape(x, d);
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    softmax_kernel<scalar_t>(x->data_as<scalar_t>(), out->data_as<scalar_t>(), s, log);
  });
  return out;
}

// grad_input of softmax (log=false: y * (g - sum(g * y))) or log_softmax (g - exp(y) * sum(g)).
template <class T>
void softmax_backward_kernel(const T* g, const T* y, T* gi, const SoftmaxShape& s, bool log) {
  using A = opmath_t<T>;
  const int64_t n = s.n, inner = s.inner, total = s.outer * inner;
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(n, 1));
  if (inner == 1) {
    if constexpr (std::is_same_v<T, float>) {  // vectorized rows (nn_vec.h)
      parallel_for(0, s.outer, grain, [&](int64_t b, int64_t e) {
        nn::vec::softmax_backward_rows(g, y, gi, b, e, n, log);
      });
      return;
    }
    parallel_for(0, s.outer, grain, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* gr = g + r * n;
        const T* yr = y + r * n;
        T* o = gi + r * n;
        A acc = 0;
        if (log) {
          for (int64_t i = 0; i < n; ++i) acc += static_cast<A>(gr[i]);
          for (int64_t i = 0; i < n; ++i)
            o[i] = static_cast<T>(static_cast<A>(gr[i]) - std::exp(static_cast<A>(yr[i])) * acc);
        } else {
          for (int64_t i = 0; i < n; ++i) acc += static_cast<A>(gr[i]) * static_cast<A>(yr[i]);
          for (int64_t i = 0; i < n; ++i)
            o[i] = static_cast<T>(static_cast<A>(yr[i]) * (static_cast<A>(gr[i]) - acc));
        }
      }
    });
    return;
  }
  if constexpr (std::is_same_v<T, float>) {  // vectorized across columns (nn_vec.h)
    for_col_tiles(s, [&](int64_t o, int64_t c0, int64_t c1) {
      const int64_t off = o * n * inner;
      nn::vec::softmax_backward_cols(g + off, y + off, gi + off, n, inner, c0, c1, log);
    });
    return;
  }
  parallel_for(0, total, grain, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const int64_t o = p / inner, j = p % inner;
      const int64_t base = o * n * inner + j;
      A acc = 0;
      for (int64_t k = 0; k < n; ++k) {
        A gv = static_cast<A>(g[base + k * inner]);
        acc += log ? gv : gv * static_cast<A>(y[base + k * inner]);
      }
      for (int64_t k = 0; k < n; ++k) {
        A gv = static_cast<A>(g[base + k * inner]), yv = static_cast<A>(y[base + k * inner]);
        gi[base + k * inner] = static_cast<T>(log ? gv - std::exp(yv) * acc : yv * (gv - acc));
      }
    }
  });
}

Tensor softmax_backward_common(const char* op, const Tensor& grad, const Tensor& output,
                               int64_t dim, bool log) {
  nn::check_softmax_grad(op, grad, output);
  const int64_t d = wrap_dim(dim, std::max<int64_t>(output->dim(), 1), op);
  Tensor y = nn::contig(output);
  Tensor g = nn::contig(nn::cast(grad, y->dtype()));
  Tensor out = ember::empty(y->sizes(), y->dtype(), y->device());
  if (y->numel() == 0) return out;
  SoftmaxShape s = y->dim() == 0 ? SoftmaxShape{} : softmax_shape(y, d);
  EMBER_DISPATCH_FLOAT(y->dtype(), op, [&] {
    softmax_backward_kernel<scalar_t>(g->data_as<scalar_t>(), y->data_as<scalar_t>(),
                                      out->data_as<scalar_t>(), s, log);
  });
  return out;
}

// ---- activations ----------------------------------------------------------------------------

// Runs f (over opmath values) on every element of a built unary iterator over a floating input
// (output 0, input 1: a new tensor, an out= tensor or the input itself for the in-place forms).
// float32 goes to vec(x, y, n) instead when one is given (a vectorized kernel of nn_vec.h).
template <class Make, class Vec = std::nullptr_t>
Tensor run_unary_float(TensorIterator& it, const char* op, const Make& make,
                       const Vec& vec = nullptr) {
  if constexpr (!std::is_same_v<Vec, std::nullptr_t>) {
    if (run_vec_float32(it, vec)) return it.output();
  }
  EMBER_DISPATCH_FLOAT(it.dtype(1), op, [&] {
    using T = scalar_t;
    auto f = make(opmath_t<T>{});
    it.for_each([&](char** d, const int64_t* s, int64_t n) { unary_loop<T, T>(d, s, n, f); });
  });
  it.finish();
  return it.output();
}

// The iterator of an activation: element-wise (a new result takes a dense input's layout), out=
// checked and resized by build() (out may be self: the in-place forms, one kernel, no copy).
void build_activation(ElementwiseIterator& it, const Tensor& self, const Tensor& out,
                      const char* op) {
  check_floating_input(self, op);
  it.add_output(out).add_input(self).build();
}

template <class Make, class Vec = std::nullptr_t>
Tensor unary_float(const char* op, const Tensor& self, const Tensor& out, const Make& make,
                   const Vec& vec = nullptr) {
  ElementwiseIterator it(op);
  build_activation(it, self, out, op);
  return run_unary_float(it, op, make, vec);
}

// A fused activation backward: grad_output * f'(x) in one pass, f' being
// act_math::act_derivative of kind K (parameters p0..p2). With kMask, 0 (not grad * 0) where
// f'(x) is 0, as PyTorch's hardtanh / hardsigmoid / hardswish backwards select. float32 runs
// the vectorized derivative (nn_vec.h, a chunk at a time) and one multiply; other dtypes the
// scalar formula in their op math.
template <Act K, bool kMask>
Tensor act_backward(const char* op, const Tensor& grad_output, const Tensor& x, double p0 = 0,
                    double p1 = 0, double p2 = 0) {
  check_activation_backward_dtypes(grad_output, x, op);
  ElementwiseIterator it(op);
  it.add_output(Tensor()).add_input(grad_output).add_input(x).build();
  const ScalarType dt = it.common_dtype();
  if (dt == ScalarType::Float32 && it.dtype(0) == dt) {
    const float f0 = static_cast<float>(p0), f1 = static_cast<float>(p1);
    const float f2 = static_cast<float>(p2);
    it.for_each([&](char** d, const int64_t* s, int64_t n) {
      if constexpr (K == Act::HardtanhResult) {  // a select: its own vector kernel
        if (s[0] == sizeof(float) && s[1] == sizeof(float) && s[2] == sizeof(float)) {
          nn::vec::hardtanh_backward(reinterpret_cast<const float*>(d[1]),
                                     reinterpret_cast<const float*>(d[2]),
                                     reinterpret_cast<float*>(d[0]), n, f0, f1);
          return;
        }
      }
      constexpr int64_t kChunk = 256;
      float xb[kChunk], db[kChunk];
      for (int64_t i = 0; i < n; i += kChunk) {
        const int64_t m = std::min(kChunk, n - i);
        const float* xp = reinterpret_cast<const float*>(d[2] + i * s[2]);
        if (s[2] != static_cast<int64_t>(sizeof(float))) {
          for (int64_t j = 0; j < m; ++j) xb[j] = load<float>(d[2] + (i + j) * s[2]);
          xp = xb;
        }
        nn::vec::act_derivative(K, false, xp, db, m, f0, f1, f2);
        const char* g = d[1] + i * s[1];
        char* o = d[0] + i * s[0];
        if (s[0] == static_cast<int64_t>(sizeof(float)) &&
            s[1] == static_cast<int64_t>(sizeof(float))) {
          const float* gp = reinterpret_cast<const float*>(g);
          float* out = reinterpret_cast<float*>(o);
          // Both operands are loaded whatever the mask says, so the select is a vector blend
          // (a load under the condition kept it a branch, mispredicted on random signs).
          for (int64_t j = 0; j < m; ++j) {
            const float prod = gp[j] * db[j];
            out[j] = (kMask && db[j] == 0.0f) ? 0.0f : prod;
          }
        } else {
          for (int64_t j = 0; j < m; ++j) {
            const float prod = load<float>(g + j * s[1]) * db[j];
            const float r = (kMask && db[j] == 0.0f) ? 0.0f : prod;
            std::memcpy(o + j * s[0], &r, sizeof r);
          }
        }
      }
    });
    it.finish();
    return it.output();
  }
  EMBER_DISPATCH_FLOAT(dt, op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const A a0 = A(p0), a1 = A(p1), a2 = A(p2);
    it.for_each([&](char** d, const int64_t* s, int64_t n) {
      binary_loop<T, T>(d, s, n, [=](A g, A v) -> A {
        const A dv = act_math::act_derivative<A>(K, false, v, a0, a1, a2);
        const A prod = g * dv;
        return (kMask && dv == A(0)) ? A(0) : prod;
      });
    });
  });
  it.finish();
  return it.output();
}

// Calls f(kind, second) with both as compile-time constants, so each (activation, order) gets
// its own loop with the switch folded away: a switch per element kept it scalar and branchy.
template <class F>
void with_act(Act act, bool second, const F& f) {
  auto order = [&](auto kind) {
    if (second)
      f(kind, std::true_type{});
    else
      f(kind, std::false_type{});
  };
  switch (act) {
#define EMBER_ACT_CASE(K) \
  case Act::K:            \
    return order(std::integral_constant<Act, Act::K>{});
    EMBER_ACT_CASE(Gelu)
    EMBER_ACT_CASE(GeluTanh)
    EMBER_ACT_CASE(Silu)
    EMBER_ACT_CASE(Elu)
    EMBER_ACT_CASE(EluResult)
    EMBER_ACT_CASE(LeakyRelu)
    EMBER_ACT_CASE(Softplus)
    EMBER_ACT_CASE(HardtanhResult)
    EMBER_ACT_CASE(Hardsigmoid)
    EMBER_ACT_CASE(HardsigmoidResult)
    EMBER_ACT_CASE(Hardswish)
    EMBER_ACT_CASE(Mish)
    EMBER_ACT_CASE(Softsign)
    EMBER_ACT_CASE(Logsigmoid)
#undef EMBER_ACT_CASE
  }
}

}  // namespace

using act_math::kGeluC;
using act_math::kSqrt1_2;
using act_math::kSqrt2OverPi;
using act_math::sigmoid;
using act_math::softplus1;

using Softmax = nn::SoftmaxOps<&softmax_common, &softmax_backward_common>;

Tensor softmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return Softmax::softmax(self, dim, dtype);
}
Tensor log_softmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
  return Softmax::log_softmax(self, dim, dtype);
}
Tensor _softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim) {
  return Softmax::softmax_backward(grad_output, output, dim);
}
Tensor _log_softmax_backward_data(const Tensor& grad_output, const Tensor& output, int64_t dim) {
  return Softmax::log_softmax_backward(grad_output, output, dim);
}

namespace {

// gelu of float16 / bfloat16 through the float32 row kernel (the scalar formula's opmath is
// float32 too, so the values agree within that kernel's accuracy, without a scalar erf per
// element): contiguous bfloat16 by nn::vec::gelu_bf16, everything else converted chunk by chunk.
// Returns false (nothing done) for other dtypes; on true the iterator is finished.
bool gelu_reduced(TensorIterator& it, bool tanh_form) {
  const ScalarType dt = it.dtype(0);
  if (dt != it.dtype(1) || (dt != ScalarType::BFloat16 && dt != ScalarType::Float16)) return false;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    it.for_each([&](char** d, const int64_t* s, int64_t n) {
      if (std::is_same<T, BFloat16>::value && s[0] == 2 && s[1] == 2) {
        nn::vec::gelu_bf16(reinterpret_cast<const uint16_t*>(d[1]),
                           reinterpret_cast<uint16_t*>(d[0]), n, tanh_form);
        return;
      }
      constexpr int64_t kChunk = 512;
      float buf[kChunk];
      for (int64_t i = 0; i < n; i += kChunk) {
        const int64_t m = std::min(kChunk, n - i);
        const char* src = d[1] + i * s[1];
        char* dst = d[0] + i * s[0];
        for (int64_t j = 0; j < m; ++j) buf[j] = static_cast<float>(load<T>(src + j * s[1]));
        nn::vec::gelu(buf, buf, m, tanh_form);
        for (int64_t j = 0; j < m; ++j) {
          const T v(buf[j]);
          std::memcpy(dst + j * s[0], &v, sizeof v);
        }
      }
    });
  };
  if (dt == ScalarType::BFloat16)
    run(BFloat16());
  else
    run(Half());
  it.finish();
  return true;
}

// Exact-form gelu of float64 through nn::vec::gelu_f64 (strided loops through a buffer).
void gelu_double(TensorIterator& it) {
  it.for_each([&](char** d, const int64_t* s, int64_t n) {
    if (s[0] == sizeof(double) && s[1] == sizeof(double)) {
      nn::vec::gelu_f64(reinterpret_cast<const double*>(d[1]), reinterpret_cast<double*>(d[0]), n);
      return;
    }
    constexpr int64_t kChunk = 256;
    double buf[kChunk];
    for (int64_t i = 0; i < n; i += kChunk) {
      const int64_t m = std::min(kChunk, n - i);
      for (int64_t j = 0; j < m; ++j) buf[j] = load<double>(d[1] + (i + j) * s[1]);
      nn::vec::gelu_f64(buf, buf, m);
      for (int64_t j = 0; j < m; ++j) std::memcpy(d[0] + (i + j) * s[0], &buf[j], sizeof(double));
    }
  });
  it.finish();
}

}  // namespace

Tensor gelu(const Tensor& self, const std::string& approximate, const Tensor& out) {
  const bool tanh_form = gelu_tanh_form(approximate);
  ElementwiseIterator it("gelu");
  build_activation(it, self, out, "gelu");
  if (gelu_reduced(it, tanh_form)) return it.output();
  if (!tanh_form && it.dtype(0) == ScalarType::Float64 && it.dtype(1) == ScalarType::Float64) {
    gelu_double(it);
    return it.output();
  }
  return run_unary_float(
      it, "gelu",
      [tanh_form](auto tag) {
        using A = decltype(tag);
        return [tanh_form](A x) -> A {
          if (tanh_form)
            return A(0.5) * x * (A(1) + std::tanh(A(kSqrt2OverPi) * (x + A(kGeluC) * x * x * x)));
          return A(0.5) * x * (A(1) + std::erf(x * A(kSqrt1_2)));
        };
      },
      [tanh_form](const float* x, float* y, int64_t n) { nn::vec::gelu(x, y, n, tanh_form); });
}

Tensor gelu_backward(const Tensor& grad_output, const Tensor& self,
                     const std::string& approximate) {
  if (gelu_tanh_form(approximate))
    return act_backward<Act::GeluTanh, false>("gelu_backward", grad_output, self);
  return act_backward<Act::Gelu, false>("gelu_backward", grad_output, self);
}

Tensor silu(const Tensor& self, const Tensor& out) {
  return unary_float(
      "silu", self, out,
      [](auto tag) {
        using A = decltype(tag);
        return [](A x) -> A { return x / (A(1) + std::exp(-x)); };
      },
      [](const float* x, float* y, int64_t n) { nn::vec::silu(x, y, n); });
}

Tensor silu_backward(const Tensor& grad_output, const Tensor& self) {
  return act_backward<Act::Silu, false>("silu_backward", grad_output, self);
}

Tensor elu(const Tensor& self, const Scalar& alpha, const Scalar& scale, const Scalar& input_scale,
           const Tensor& out) {
  const double a = alpha.to_double(), sc = scale.to_double(), is = input_scale.to_double();
  return unary_float(
      "elu", self, out,
      [=](auto tag) {
        using A = decltype(tag);
        const A scale_a = A(sc), neg_scale = A(sc * a), in_scale = A(is);
        return
            [=](A x) -> A { return x > A(0) ? scale_a * x : neg_scale * std::expm1(x * in_scale); };
      },
      [=](const float* x, float* y, int64_t n) {
        nn::vec::elu(x, y, n, static_cast<float>(a), static_cast<float>(sc),
                     static_cast<float>(is));
      });
}

Tensor elu_(const Tensor& self, const Scalar& alpha, const Scalar& scale,
            const Scalar& input_scale) {
  return elu(self, alpha, scale, input_scale, self);
}

Tensor elu_backward(const Tensor& grad_output, const Scalar& alpha, const Scalar& scale,
                    const Scalar& input_scale, bool is_result, const Tensor& self_or_result) {
  const char* op = "elu_backward";
  const double a = alpha.to_double(), sc = scale.to_double(), is = input_scale.to_double();
  if (is_result) {
    check_backward_from_result(op, "elu", a);
    return act_backward<Act::EluResult, false>(op, grad_output, self_or_result, a, sc, is);
  }
  return act_backward<Act::Elu, false>(op, grad_output, self_or_result, a, sc, is);
}

Tensor threshold(const Tensor& self, const Scalar& threshold, const Scalar& value,
                 const Tensor& out) {
  const char* op = "threshold";
  check_threshold_scalars(self, threshold, value);
  ElementwiseIterator it(op);
  it.add_output(out).add_input(self).build();
  EMBER_DISPATCH_NUMERIC(it.dtype(1), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const A t = threshold.to<A>(), v = value.to<A>();
    // x itself where x > threshold (a NaN x stays NaN), else value.
    it.for_each([&](char** d, const int64_t* s, int64_t n) {
      unary_loop<T, T>(d, s, n, [=](A x) -> A { return x <= t ? v : x; });
    });
  });
  it.finish();
  return it.output();
}

Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, const Scalar& threshold) {
  const char* op = "threshold_backward";
  check_threshold_backward_dtypes(grad_output, self);
  TensorIterator it(op);
  it.add_output(Tensor()).add_input(grad_output).add_input(self).build();
  EMBER_DISPATCH_FLOAT(it.common_dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const A t = static_cast<A>(threshold.to_double());
    // A zero, not grad * 0, where self <= threshold (a NaN or inf gradient there stays out);
    // a NaN self passes the gradient, as in torch. float32 runs contiguous inner loops on the
    // vectorized kernel.
    it.for_each([&](char** d, const int64_t* s, int64_t n) {
      if constexpr (std::is_same_v<T, float>) {
        if (s[0] == sizeof(float) && s[1] == sizeof(float) && s[2] == sizeof(float)) {
          nn::vec::threshold_backward(reinterpret_cast<const float*>(d[1]),
                                      reinterpret_cast<const float*>(d[2]),
                                      reinterpret_cast<float*>(d[0]), n, t);
          return;
        }
      }
      binary_loop<T, T>(d, s, n, [t](A g, A x) { return x <= t ? A(0) : g; });
    });
  });
  it.finish();
  return it.output();
}

namespace {
// out = f(grad_output, output) for sigmoid's and tanh's backward (float inputs, promoted).
template <class F>
Tensor output_backward(const char* op, const Tensor& grad_output, const Tensor& output, F f) {
  check_floating_input(grad_output, op);
  check_floating_input(output, op);
  TensorIterator it(op);
  it.add_output(Tensor()).add_input(grad_output).add_input(output).build();
  EMBER_DISPATCH_FLOAT(it.common_dtype(), op, [&] {
    using T = scalar_t;
    it.for_each([&](char** d, const int64_t* s, int64_t n) { binary_loop<T, T>(d, s, n, f); });
  });
  it.finish();
  return it.output();
}
}  // namespace

Tensor sigmoid_backward(const Tensor& grad_output, const Tensor& output) {
  return output_backward("sigmoid_backward", grad_output, output,
                         [](auto g, auto y) { return g * (decltype(y)(1) - y) * y; });
}

Tensor tanh_backward(const Tensor& grad_output, const Tensor& output) {
  return output_backward("tanh_backward", grad_output, output,
                         [](auto g, auto y) { return g * (decltype(y)(1) - y * y); });
}

Tensor leaky_relu(const Tensor& self, const Scalar& negative_slope, const Tensor& out) {
  const double s = negative_slope.to_double();
  return unary_float(
      "leaky_relu", self, out,
      [=](auto tag) {
        using A = decltype(tag);
        const A slope = A(s);
        return [=](A x) -> A { return x > A(0) ? x : x * slope; };
      },
      [s](const float* x, float* y, int64_t n) {
        nn::vec::leaky_relu(x, y, n, static_cast<float>(s));
      });
}

Tensor leaky_relu_(const Tensor& self, const Scalar& negative_slope) {
  return leaky_relu(self, negative_slope, self);
}

Tensor leaky_relu_backward(const Tensor& grad_output, const Tensor& self,
                           const Scalar& negative_slope, bool self_is_result) {
  const char* op = "leaky_relu_backward";
  const double s = negative_slope.to_double();
  if (self_is_result) check_backward_from_result(op, "leaky_relu", s);
  return act_backward<Act::LeakyRelu, false>(op, grad_output, self, s);
}

Tensor softplus(const Tensor& self, const Scalar& beta, const Scalar& threshold,
                const Tensor& out) {
  const double b = beta.to_double(), t = threshold.to_double();
  return unary_float(
      "softplus", self, out,
      [=](auto tag) {
        using A = decltype(tag);
        const A beta = A(b), thresh = A(t);
        return [=](A x) -> A {
          A z = x * beta;
          return z > thresh ? x : std::log1p(std::exp(z)) / beta;
        };
      },
      [=](const float* x, float* y, int64_t n) {
        nn::vec::softplus(x, y, n, static_cast<float>(b), static_cast<float>(t));
      });
}

Tensor softplus_backward(const Tensor& grad_output, const Tensor& self, const Scalar& beta,
                         const Scalar& threshold) {
  return act_backward<Act::Softplus, false>("softplus_backward", grad_output, self,
                                            beta.to_double(), threshold.to_double());
}

Tensor hardtanh(const Tensor& self, const Scalar& min_val, const Scalar& max_val,
                const Tensor& out) {
  const double lo = min_val.to_double(), hi = max_val.to_double();
  check_hardtanh_range(lo, hi);
  return unary_float(
      "hardtanh", self, out,
      [=](auto tag) {
        using A = decltype(tag);
        const A l = A(lo), h = A(hi);
        return [=](A x) -> A { return x < l ? l : (x > h ? h : x); };
      },
      [=](const float* x, float* y, int64_t n) {
        nn::vec::hardtanh(x, y, n, static_cast<float>(lo), static_cast<float>(hi));
      });
}

Tensor hardtanh_backward(const Tensor& grad_output, const Tensor& self, const Scalar& min_val,
                         const Scalar& max_val) {
  // grad_output where min_val < self < max_val, else 0: the same on the input and the result.
  return act_backward<Act::HardtanhResult, true>("hardtanh_backward", grad_output, self,
                                                 min_val.to_double(), max_val.to_double());
}

Tensor hardsigmoid(const Tensor& self, const Tensor& out) {
  return unary_float(
      "hardsigmoid", self, out,
      [](auto tag) {
        using A = decltype(tag);
        return [](A x) -> A { return x <= A(-3) ? A(0) : (x >= A(3) ? A(1) : x / A(6) + A(0.5)); };
      },
      [](const float* x, float* y, int64_t n) { nn::vec::hardsigmoid(x, y, n); });
}

Tensor hardsigmoid_backward(const Tensor& grad_output, const Tensor& self) {
  return act_backward<Act::Hardsigmoid, true>("hardsigmoid_backward", grad_output, self);
}

Tensor hardswish(const Tensor& self, const Tensor& out) {
  return unary_float(
      "hardswish", self, out,
      [](auto tag) {
        using A = decltype(tag);
        // x * 0 below -3: -0 as torch, and NaN for -inf (torch's x * clamp(x + 3, 0, 6) / 6)
        return [](A x) -> A {
          return x <= A(-3) ? x * A(0) : (x >= A(3) ? x : x * (x + A(3)) / A(6));
        };
      },
      [](const float* x, float* y, int64_t n) { nn::vec::hardswish(x, y, n); });
}

Tensor hardswish_backward(const Tensor& grad_output, const Tensor& self) {
  return act_backward<Act::Hardswish, true>("hardswish_backward", grad_output, self);
}

Tensor mish(const Tensor& self, const Tensor& out) {
  return unary_float(
      "mish", self, out,
      [](auto tag) {
        using A = decltype(tag);
        return [](A x) -> A { return x * std::tanh(softplus1(x)); };
      },
      [](const float* x, float* y, int64_t n) { nn::vec::mish(x, y, n); });
}

Tensor mish_backward(const Tensor& grad_output, const Tensor& self) {
  return act_backward<Act::Mish, false>("mish_backward", grad_output, self);
}

Tensor softsign(const Tensor& self) {
  return unary_float("softsign", self, Tensor(), [](auto tag) {
    using A = decltype(tag);
    return [](A x) -> A { return x / (A(1) + std::abs(x)); };
  });
}

Tensor logsigmoid(const Tensor& self) {
  return unary_float(
      "logsigmoid", self, Tensor(),
      [](auto tag) {
        using A = decltype(tag);
        return [](A x) -> A { return std::min(x, A(0)) - std::log1p(std::exp(-std::abs(x))); };
      },
      [](const float* x, float* y, int64_t n) { nn::vec::logsigmoid(x, y, n); });
}

Tensor _activation_derivative(const Tensor& self, const std::string& kind, int64_t order, double p0,
                              double p1, double p2) {
  Act act = parse_act(kind);
  check_act_order(kind, order);
  const bool second = order == 2;
  const float f0 = static_cast<float>(p0), f1 = static_cast<float>(p1);
  const float f2 = static_cast<float>(p2);
  auto vec = [=](const float* x, float* y, int64_t n) {
    nn::vec::act_derivative(act, second, x, y, n, f0, f1, f2);
  };
  Tensor out;
  with_act(act, second, [&](auto kind, auto second_c) {
    auto make = [=](auto tag) {
      using A = decltype(tag);
      const A a0 = A(p0), a1 = A(p1), a2 = A(p2);
      return [=](A x) -> A { return act_math::act_derivative<A>(kind, second_c, x, a0, a1, a2); };
    };
    out = unary_float("_activation_derivative", self, Tensor(), make, vec);
  });
  return out;
}

}  // namespace cpu
}  // namespace ember
