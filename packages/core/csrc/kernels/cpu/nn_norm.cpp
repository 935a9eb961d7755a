// CPU kernels of layer norm, RMS norm, group norm and batch norm, forward (statistics saved)
// and backward. Layer, RMS and group norm normalize contiguous "rows" (the trailing dims, or a
// sample's group of channels); batch norm normalizes each channel over the batch and the
// spatial dims. Statistics accumulate in double.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/cpu/nn_vec.h"
#include "kernels/norm_rules.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

// Sums over rows of per-row column contributions, split over threads: f(row, acc) adds row's
// terms into acc (cols doubles); returns the total.
template <class F>
std::vector<double> column_sums(int64_t rows, int64_t cols, const F& f) {
  const int nt = std::max(1, std::min<int>(get_num_threads(), static_cast<int>(rows)));
  std::vector<std::vector<double>> parts(nt, std::vector<double>(cols, 0.0));
  const int64_t per = (rows + nt - 1) / nt;
  parallel_for(0, nt, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      for (int64_t r = t * per; r < std::min(rows, (t + 1) * per); ++r) f(r, parts[t].data());
  });
  for (int t = 1; t < nt; ++t)
    for (int64_t j = 0; j < cols; ++j) parts[0][j] += parts[t][j];
  return parts[0];
}

// T* as float* in `if constexpr (T is float)` branches of non-template dispatch lambdas (which
// must compile for every T).
template <class T>
const float* F(const T* p) {
  return reinterpret_cast<const float*>(p);
}
template <class T>
float* F(T* p) {
  return reinterpret_cast<float*>(p);
}

template <class T>
Tensor from_doubles(const std::vector<double>& v, const DimVector& shape, ScalarType dt) {
  Tensor t = ember::empty(shape, dt, cpu_device());
  T* p = t->data_as<T>();
  for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(v[i]);
  return t;
}

// Row-wise normalization shared by layer norm (center=true) and RMS norm (center=false).
std::tuple<Tensor, Tensor, Tensor> row_norm_forward(const char* op, const Tensor& input,
                                                    const DimVector& normalized_shape,
                                                    const Tensor& weight, const Tensor& bias,
                                                    double eps, bool center) {
  auto [R, M] = nn::row_norm_shape(op, input, normalized_shape, weight, bias);
  // (RMS norm, like torch's composite one, takes a weight of another dtype)
  if (center) nn::check_norm_param_dtypes(op, input, {{&weight, "weight"}, {&bias, "bias"}});
  Tensor x = nn::contig(input);
  // The affine parameters are applied in the compute type: a float32 weight of a bfloat16 /
  // float16 input (mixed precision, autocast) is not rounded first, and the output is rounded
  // once, as torch's mixed-type kernel does. (Exact for parameters of the input's dtype.)
  Tensor w = weight ? nn::contig(weight, nn::norm_acc_dtype(x)) : Tensor();
  Tensor b = bias ? nn::contig(bias, nn::norm_acc_dtype(x)) : Tensor();
  Tensor out = ember::empty(x->sizes(), x->dtype(), x->device());
  DimVector ss = nn::row_stat_shape(x, normalized_shape.size());
  // Statistics are computed in the compute type and saved in torch's dtype (norm_stat_dtype).
  const ScalarType stat_dt = nn::norm_stat_dtype(input, {&weight, &bias}, !center);
  Tensor mean = ember::empty(ss, nn::norm_acc_dtype(x), x->device());
  Tensor rstd = ember::empty(ss, nn::norm_acc_dtype(x), x->device());
  if (M == 0) {  // rows of no elements: torch's statistics, mean 0 and rstd NaN (variance 0/0)
    dispatch::fill_(mean, Scalar(0.0));
    dispatch::fill_(rstd, Scalar(std::nan("")));
    return {out, nn::cast(mean, stat_dt), nn::cast(rstd, stat_dt)};
  }
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* px = x->data_as<T>();
    const A* pw = w ? w->data_as<A>() : nullptr;
    const A* pb = b ? b->data_as<A>() : nullptr;
    T* po = out->data_as<T>();
    A* pm = mean->data_as<A>();
    A* pr = rstd->data_as<A>();
    if constexpr (std::is_same_v<T, float>) {  // vectorized rows (nn_vec.h)
      parallel_for(0, R, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(M, 1)),
                   [&](int64_t rb, int64_t re) {
                     nn::vec::norm_rows(F(px), F(pw), F(pb), F(po), F(pm), F(pr), rb, re, M,
                                        static_cast<float>(eps), center);
                   });
      return;
    }
    parallel_for(0, R, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(M, 1)),
                 [&](int64_t rb, int64_t re) {
                   for (int64_t r = rb; r < re; ++r) {
                     const T* xr = px + r * M;
                     double mu = 0;
                     if (center) {
                       for (int64_t j = 0; j < M; ++j) mu += static_cast<double>(xr[j]);
                       mu /= static_cast<double>(M);
                     }
                     double var = 0;
                     for (int64_t j = 0; j < M; ++j) {
                       double dv = static_cast<double>(xr[j]) - mu;
                       var += dv * dv;
                     }
                     var /= static_cast<double>(M);
                     const double rs = 1.0 / std::sqrt(var + eps);
                     pm[r] = static_cast<A>(mu);
                     pr[r] = static_cast<A>(rs);
                     const A a = static_cast<A>(rs), c = static_cast<A>(-mu * rs);
                     T* orow = po + r * M;
                     for (int64_t j = 0; j < M; ++j) {
                       A v = static_cast<A>(xr[j]) * a + c;
                       if (pw) v *= pw[j];
                       if (pb) v += pb[j];
                       orow[j] = static_cast<T>(v);
                     }
                   }
                 });
  });
  return {out, nn::cast(mean, stat_dt), nn::cast(rstd, stat_dt)};
}

// Gradients of row_norm_forward (mean is null for RMS norm).
std::tuple<Tensor, Tensor, Tensor> row_norm_backward(const char* op, const Tensor& grad,
                                                     const Tensor& input,
                                                     const DimVector& normalized_shape,
                                                     const Tensor& mean, const Tensor& rstd,
                                                     const Tensor& weight, bool input_grad,
                                                     bool weight_grad, bool bias_grad) {
  auto [R, M] = nn::row_norm_shape(op, input, normalized_shape, weight, Tensor());
  nn::check_row_norm_backward(op, grad, input, mean, rstd, R);
  Tensor x = nn::contig(input);
  Tensor g = nn::contig(grad, x->dtype());
  // The statistics are read in the compute type (whatever dtype they were saved in).
  Tensor m = mean ? nn::contig(mean, nn::norm_acc_dtype(x)) : Tensor();
  Tensor rs = nn::contig(rstd, nn::norm_acc_dtype(x));
  // The weight in the compute type (see row_norm_forward); the parameter gradients in the
  // weight's dtype, rounded once from their double sums (float32 ones for a mixed-precision
  // weight, as torch returns them).
  Tensor w = weight ? nn::contig(weight, nn::norm_acc_dtype(x)) : Tensor();
  const ScalarType param_dt = weight ? weight->dtype() : x->dtype();
  Tensor gi, gw, gb;
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* px = x->data_as<T>();
    const T* pg = g->data_as<T>();
    const A* pm = m ? m->data_as<A>() : nullptr;
    const A* pr = rs->data_as<A>();
    const A* pw = w ? w->data_as<A>() : nullptr;
    if constexpr (std::is_same_v<T, float>) {  // vectorized rows (nn_vec.h)
      const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(M, 1));
      if (input_grad) {
        gi = ember::empty(x->sizes(), x->dtype(), x->device());
        float* po = gi->data_as<float>();
        parallel_for(0, R, grain, [&](int64_t rb, int64_t re) {
          nn::vec::norm_backward_rows(F(pg), F(px), F(pm), F(pr), F(pw), po, rb, re, M);
        });
      }
      if (weight_grad || bias_grad) {
        // Per-thread float column sums over a share of the rows, then added up.
        const int nt = std::max(1, std::min<int>(get_num_threads(), static_cast<int>(R)));
        std::vector<float> parts(static_cast<size_t>(nt) * 2 * M, 0.f);
        const int64_t per = (R + nt - 1) / nt;
        parallel_for(0, nt, 1, [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
            float* acc = parts.data() + t * 2 * M;
            nn::vec::norm_param_grad_rows(F(pg), F(px), F(pm), F(pr), weight_grad ? acc : nullptr,
                                          bias_grad ? acc + M : nullptr, t * per,
                                          std::min(R, (t + 1) * per), M);
          }
        });
        for (int t = 1; t < nt; ++t)
          for (int64_t j = 0; j < 2 * M; ++j) parts[j] += parts[t * 2 * M + j];
        auto make = [&](int64_t off) {
          Tensor r = ember::empty(normalized_shape, x->dtype(), x->device());
          std::copy(parts.begin() + off, parts.begin() + off + M, r->data_as<float>());
          return r;
        };
        if (weight_grad) gw = make(0);
        if (bias_grad) gb = make(M);
      }
      return;
    }
    if (input_grad) {
      gi = ember::empty(x->sizes(), x->dtype(), x->device());
      T* po = gi->data_as<T>();
      parallel_for(
          0, R, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(M, 1)),
          [&](int64_t rb, int64_t re) {
            for (int64_t r = rb; r < re; ++r) {
              const T* xr = px + r * M;
              const T* gr = pg + r * M;
              const double mu = pm ? static_cast<double>(pm[r]) : 0.0;
              const double s = static_cast<double>(pr[r]);
              double sg = 0, sgx = 0;  // sums of g' and g' * xhat
              for (int64_t j = 0; j < M; ++j) {
                double gv = static_cast<double>(gr[j]) * (pw ? static_cast<double>(pw[j]) : 1.0);
                sg += gv;
                sgx += gv * (static_cast<double>(xr[j]) - mu) * s;
              }
              const double a = pm ? sg / M : 0.0, c = sgx / M;
              T* orow = po + r * M;
              for (int64_t j = 0; j < M; ++j) {
                double gv = static_cast<double>(gr[j]) * (pw ? static_cast<double>(pw[j]) : 1.0);
                double xh = (static_cast<double>(xr[j]) - mu) * s;
                orow[j] = static_cast<T>(s * (gv - a - xh * c));
              }
            }
          });
    }
    if (weight_grad) {
      std::vector<double> sums = column_sums(R, M, [&](int64_t r, double* acc) {
        const double mu = pm ? static_cast<double>(pm[r]) : 0.0, s = static_cast<double>(pr[r]);
        for (int64_t j = 0; j < M; ++j)
          acc[j] +=
              static_cast<double>(pg[r * M + j]) * (static_cast<double>(px[r * M + j]) - mu) * s;
      });
      gw = nn::cast(from_doubles<double>(sums, normalized_shape, ScalarType::Float64), param_dt);
    }
    if (bias_grad) {
      std::vector<double> sums = column_sums(R, M, [&](int64_t r, double* acc) {
        for (int64_t j = 0; j < M; ++j) acc[j] += static_cast<double>(pg[r * M + j]);
      });
      gb = nn::cast(from_doubles<double>(sums, normalized_shape, ScalarType::Float64), param_dt);
    }
  });
  return {gi, gw, gb};
}

}  // namespace

using RowNorms = nn::RowNormOps<&row_norm_forward, &row_norm_backward>;

std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& input,
                                                     const DimVector& normalized_shape,
                                                     const Tensor& weight, const Tensor& bias,
                                                     double eps) {
  return RowNorms::layer_norm(input, normalized_shape, weight, bias, eps);
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(
    const Tensor& grad_out, const Tensor& input, const DimVector& normalized_shape,
    const Tensor& mean, const Tensor& rstd, const Tensor& weight, bool input_grad, bool weight_grad,
    bool bias_grad) {
  return RowNorms::layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight,
                                       input_grad, weight_grad, bias_grad);
}

std::tuple<Tensor, Tensor> _fused_rms_norm(const Tensor& input, const DimVector& normalized_shape,
                                           const Tensor& weight, double eps) {
  return RowNorms::rms_norm(input, normalized_shape, weight, eps);
}

std::tuple<Tensor, Tensor> _fused_rms_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                    const DimVector& normalized_shape,
                                                    const Tensor& rstd, const Tensor& weight,
                                                    bool input_grad, bool weight_grad) {
  return RowNorms::rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, input_grad,
                                     weight_grad);
}

// ---- group norm -----------------------------------------------------------------------------

#if defined(__GNUC__) && defined(__x86_64__)
#define EMBER_GN_AVX2 1  // the row loops get an AVX2 copy (no FMA), used when the CPU has it
#define EMBER_GN_INLINE inline __attribute__((always_inline))
#else
#define EMBER_GN_AVX2 0
#define EMBER_GN_INLINE inline
#endif

#if EMBER_GN_AVX2
#include <immintrin.h>
#endif

namespace {
#if EMBER_GN_AVX2
// The 16-lane sums of group_moments (l1 += x - K, l2 += (x - K)^2) and of plane_grad_sums
// (l1 += g, l2 += g * (x - K)) over [0, n), n a multiple of 16, in AVX2 registers: each lane
// gets the same additions in the same order as the portable lane loop (no FMA), so the bits
// match; GCC compiled that loop into shuffles and scalar adds.
__attribute__((target("avx2"))) void lanes_moments_avx2(const float* x, int64_t n, float K,
                                                        float* l1, float* l2) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
  const __m256 k = _mm256_set1_ps(K);
  for (int64_t j = 0; j < n; j += 16) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + j), k);
    const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + j + 8), k);
    a0 = _mm256_add_ps(a0, d0), a1 = _mm256_add_ps(a1, d1);
    b0 = _mm256_add_ps(b0, _mm256_mul_ps(d0, d0)), b1 = _mm256_add_ps(b1, _mm256_mul_ps(d1, d1));
  }
  _mm256_storeu_ps(l1, a0), _mm256_storeu_ps(l1 + 8, a1);
  _mm256_storeu_ps(l2, b0), _mm256_storeu_ps(l2 + 8, b1);
}
__attribute__((target("avx2"))) void lanes_moments_avx2(const double* x, int64_t n, double K,
                                                        double* l1, double* l2) {
  __m256d a[4], b[4];
  for (int i = 0; i < 4; ++i) a[i] = b[i] = _mm256_setzero_pd();
  const __m256d k = _mm256_set1_pd(K);
  for (int64_t j = 0; j < n; j += 16)
    for (int i = 0; i < 4; ++i) {
      const __m256d d = _mm256_sub_pd(_mm256_loadu_pd(x + j + 4 * i), k);
      a[i] = _mm256_add_pd(a[i], d);
      b[i] = _mm256_add_pd(b[i], _mm256_mul_pd(d, d));
    }
  for (int i = 0; i < 4; ++i)
    _mm256_storeu_pd(l1 + 4 * i, a[i]), _mm256_storeu_pd(l2 + 4 * i, b[i]);
}
__attribute__((target("avx2"))) void lanes_grad_avx2(const float* g, const float* x, int64_t n,
                                                     float K, float* l1, float* l2) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
  const __m256 k = _mm256_set1_ps(K);
  for (int64_t j = 0; j < n; j += 16) {
    const __m256 g0 = _mm256_loadu_ps(g + j), g1 = _mm256_loadu_ps(g + j + 8);
    a0 = _mm256_add_ps(a0, g0), a1 = _mm256_add_ps(a1, g1);
    b0 = _mm256_add_ps(b0, _mm256_mul_ps(g0, _mm256_sub_ps(_mm256_loadu_ps(x + j), k)));
    b1 = _mm256_add_ps(b1, _mm256_mul_ps(g1, _mm256_sub_ps(_mm256_loadu_ps(x + j + 8), k)));
  }
  _mm256_storeu_ps(l1, a0), _mm256_storeu_ps(l1 + 8, a1);
  _mm256_storeu_ps(l2, b0), _mm256_storeu_ps(l2 + 8, b1);
}
__attribute__((target("avx2"))) void lanes_grad_avx2(const double* g, const double* x, int64_t n,
                                                     double K, double* l1, double* l2) {
  __m256d a[4], b[4];
  for (int i = 0; i < 4; ++i) a[i] = b[i] = _mm256_setzero_pd();
  const __m256d k = _mm256_set1_pd(K);
  for (int64_t j = 0; j < n; j += 16)
    for (int i = 0; i < 4; ++i) {
      const __m256d gv = _mm256_loadu_pd(g + j + 4 * i);
      a[i] = _mm256_add_pd(a[i], gv);
      b[i] =
          _mm256_add_pd(b[i], _mm256_mul_pd(gv, _mm256_sub_pd(_mm256_loadu_pd(x + j + 4 * i), k)));
    }
  for (int i = 0; i < 4; ++i)
    _mm256_storeu_pd(l1 + 4 * i, a[i]), _mm256_storeu_pd(l2 + 4 * i, b[i]);
}
#endif
}  // namespace

namespace {
// The mean of x[0, M) into *mean and the sum of squared deviations from it into *ssd, in one
// pass: the sums of x - K and of (x - K)^2 for K = x[0] (a value of the data, so the shifted
// sums do not cancel), over chunks of 4096 elements in 16 independent lanes of A (vectorized;
// one serial chain of double additions was the kernel's whole cost), chunks added in double.
template <class A, bool kAvx2 = false, class T>
EMBER_GN_INLINE void group_moments(const T* x, int64_t M, double* mean, double* ssd) {
  constexpr int64_t kChunk = 4096;
  constexpr int kL = 16;
  A K = M > 0 ? static_cast<A>(x[0]) : A(0);
  if (!std::isfinite(static_cast<double>(K))) K = 0;  // inf / NaN data: sums as unshifted
  double s1 = 0, s2 = 0;
  for (int64_t c0 = 0; c0 < M; c0 += kChunk) {
    const int64_t c1 = std::min(M, c0 + kChunk);
    A l1[kL] = {}, l2[kL] = {};
    int64_t j = c0;
#if EMBER_GN_AVX2
    if constexpr (kAvx2 && std::is_same_v<T, A>) {
      const int64_t body = (c1 - c0) / kL * kL;
      lanes_moments_avx2(x + c0, body, K, l1, l2);
      j += body;
    }
#endif
    for (; j + kL <= c1; j += kL)
      for (int l = 0; l < kL; ++l) {
        const A d = static_cast<A>(x[j + l]) - K;
        l1[l] += d;
        l2[l] += d * d;
      }
    A t1 = 0, t2 = 0;
    for (; j < c1; ++j) {
      const A d = static_cast<A>(x[j]) - K;
      t1 += d;
      t2 += d * d;
    }
    for (int l = 0; l < kL; ++l) {
      t1 += l1[l];
      t2 += l2[l];
    }
    s1 += static_cast<double>(t1);
    s2 += static_cast<double>(t2);
  }
  const double m = static_cast<double>(std::max<int64_t>(M, 1));
  *mean = static_cast<double>(K) + s1 / m;
  // sum (x - mean)^2 = sum (x - K)^2 - (sum (x - K))^2 / M; a rounding negative is 0 (NaN
  // stays NaN).
  const double r = s2 - s1 * s1 / m;
  *ssd = r < 0.0 ? 0.0 : r;
}

// One group norm forward: the arguments of group_norm_rows.
template <class T>
struct GroupNormFwd {
  const T* px;
  const T* pw;
  const T* pb;
  T* po;
  T* pm;  // statistics in T, or (pm null) in float through pmf / prf
  T* pr;
  float* pmf;
  float* prf;
  int64_t M, hw, g, cg;
  double eps;
};

// Rows (sample, group) [rb, re) of a group norm forward: moments, then x * a + shift per
// channel. Inlined into a baseline and an AVX2 copy; neither contracts into FMA, so both give the
// same bits (the AVX2 one is about twice as fast: float32 rows in 8-lane registers).
template <class T, bool kAvx2>
EMBER_GN_INLINE void group_norm_rows(const GroupNormFwd<T>& k, int64_t rb, int64_t re) {
  using A = opmath_t<T>;
  for (int64_t r = rb; r < re; ++r) {
    const T* xr = k.px + r * k.M;
    double mu = 0, var = 0;
    group_moments<A, kAvx2>(xr, k.M, &mu, &var);
    var /= static_cast<double>(k.M);  // 0/0 = NaN for empty groups, as torch
    const double rs = 1.0 / std::sqrt(var + k.eps);
    if (!k.pm) {
      k.pmf[r] = static_cast<float>(mu);
      k.prf[r] = static_cast<float>(rs);
    } else {
      k.pm[r] = static_cast<T>(mu);
      k.pr[r] = static_cast<T>(rs);
    }
    const int64_t c0 = (r % k.g) * k.cg;
    for (int64_t ci = 0; ci < k.cg; ++ci) {
      const int64_t c = c0 + ci;
      A a = static_cast<A>(rs), sh = static_cast<A>(-mu * rs);
      if (k.pw) {
        a *= static_cast<A>(k.pw[c]);
        sh *= static_cast<A>(k.pw[c]);
      }
      if (k.pb) sh += static_cast<A>(k.pb[c]);
      const T* xc = xr + ci * k.hw;
      T* oc = k.po + r * k.M + ci * k.hw;
      for (int64_t j = 0; j < k.hw; ++j) oc[j] = static_cast<T>(static_cast<A>(xc[j]) * a + sh);
    }
  }
}

template <class T>
void group_norm_rows_base(const GroupNormFwd<T>& k, int64_t rb, int64_t re) {
  group_norm_rows<T, false>(k, rb, re);
}
#if EMBER_GN_AVX2
template <class T>
__attribute__((target("avx2"))) void group_norm_rows_avx2(const GroupNormFwd<T>& k, int64_t rb,
                                                          int64_t re) {
  group_norm_rows<T, true>(k, rb, re);
}
#endif

// One group norm backward: the arguments of group_norm_bwd_rows.
template <class T>
struct GroupNormBwd {
  const T* px;
  const T* pg;
  const T* pm;
  const T* pr;
  const T* pw;  // null: no weight
  T* po;        // null: no input gradient
  double* db;   // (N, C): sum of g per plane
  double* ds;   // (N, C): sum of g * (x - mean) per plane
  int64_t M, hw, g, cg;
};

// The sums of g and g * (x - K) over n elements, in lanes of A, chunks added in double.
template <class A, bool kAvx2, class T>
EMBER_GN_INLINE void plane_grad_sums(const T* g, const T* x, int64_t n, A K, double* sg,
                                     double* sgx) {
  constexpr int64_t kChunk = 4096;
  constexpr int kL = 16;
  double s1 = 0, s2 = 0;
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t c1 = std::min(n, c0 + kChunk);
    A l1[kL] = {}, l2[kL] = {};
    int64_t j = c0;
#if EMBER_GN_AVX2
    if constexpr (kAvx2 && std::is_same_v<T, A>) {  // as in group_moments
      const int64_t body = (c1 - c0) / kL * kL;
      lanes_grad_avx2(g + c0, x + c0, body, K, l1, l2);
      j += body;
    }
#endif
    for (; j + kL <= c1; j += kL)
      for (int l = 0; l < kL; ++l) {
        const A gv = static_cast<A>(g[j + l]);
        l1[l] += gv;
        l2[l] += gv * (static_cast<A>(x[j + l]) - K);
      }
    A t1 = 0, t2 = 0;
    for (; j < c1; ++j) {
      const A gv = static_cast<A>(g[j]);
      t1 += gv;
      t2 += gv * (static_cast<A>(x[j]) - K);
    }
    for (int l = 0; l < kL; ++l) t1 += l1[l], t2 += l2[l];
    s1 += static_cast<double>(t1);
    s2 += static_cast<double>(t2);
  }
  *sg = s1;
  *sgx = s2;
}

// Rows (sample, group) [rb, re) of a group norm backward: per plane the sums of g and of
// g * (x - mean) (which also give the weight and bias gradients), then, with those, the input
// gradient rstd * (g * w - mean(g * w) - xhat * mean(g * w * xhat)) as g * a1 + x * a2 + a3 per
// plane. Both passes vectorize; baseline and AVX2 copies as group_norm_rows (same bits).
template <class T, bool kAvx2>
EMBER_GN_INLINE void group_norm_bwd_rows(const GroupNormBwd<T>& k, int64_t rb, int64_t re) {
  using A = opmath_t<T>;
  for (int64_t r = rb; r < re; ++r) {
    const double mu = static_cast<double>(k.pm[r]), sd = static_cast<double>(k.pr[r]);
    const int64_t n = r / k.g, c0 = (r % k.g) * k.cg, C = k.g * k.cg;
    double sg = 0, sgx = 0;
    for (int64_t ci = 0; ci < k.cg; ++ci) {
      const int64_t off = r * k.M + ci * k.hw, c = c0 + ci;
      double pb, ps;
      plane_grad_sums<A, kAvx2>(k.pg + off, k.px + off, k.hw, static_cast<A>(mu), &pb, &ps);
      k.db[n * C + c] = pb;
      k.ds[n * C + c] = ps;
      const double wc = k.pw ? static_cast<double>(k.pw[c]) : 1.0;
      sg += wc * pb;
      sgx += wc * ps;
    }
    if (!k.po) continue;
    const double m = static_cast<double>(k.M);
    sg /= m;
    sgx = sgx * sd / m;  // mean of g * w * xhat
    for (int64_t ci = 0; ci < k.cg; ++ci) {
      const int64_t off = r * k.M + ci * k.hw, c = c0 + ci;
      const double wc = k.pw ? static_cast<double>(k.pw[c]) : 1.0;
      const A a1 = static_cast<A>(sd * wc), a2 = static_cast<A>(-sd * sd * sgx);
      const A a3 = static_cast<A>(sd * (mu * sd * sgx - sg));
      const T* gp = k.pg + off;
      const T* xp = k.px + off;
      T* op = k.po + off;
      for (int64_t j = 0; j < k.hw; ++j)
        op[j] = static_cast<T>(static_cast<A>(gp[j]) * a1 + static_cast<A>(xp[j]) * a2 + a3);
    }
  }
}

template <class T>
void group_norm_bwd_rows_base(const GroupNormBwd<T>& k, int64_t rb, int64_t re) {
  group_norm_bwd_rows<T, false>(k, rb, re);
}
#if EMBER_GN_AVX2
template <class T>
__attribute__((target("avx2"))) void group_norm_bwd_rows_avx2(const GroupNormBwd<T>& k, int64_t rb,
                                                              int64_t re) {
  group_norm_bwd_rows<T, true>(k, rb, re);
}
#endif
}  // namespace

std::tuple<Tensor, Tensor, Tensor> native_group_norm(const Tensor& input, int64_t num_groups,
                                                     const Tensor& weight, const Tensor& bias,
                                                     double eps) {
  const char* op = "group_norm";
  nn::GroupShape s = nn::group_norm_shape(op, input, num_groups, weight, bias);
  Tensor x = nn::contig(input);
  Tensor w = weight ? nn::contig(weight, x->dtype()) : Tensor();
  Tensor b = bias ? nn::contig(bias, x->dtype()) : Tensor();
  Tensor out = ember::empty(x->sizes(), x->dtype(), x->device());
  // float32 statistics for a float16 / bfloat16 input with a float32 parameter, as PyTorch
  const ScalarType stat_dt = nn::norm_stat_dtype(input, {&weight, &bias});
  Tensor mean = ember::empty({s.n, s.g}, stat_dt, x->device());
  Tensor rstd = ember::empty({s.n, s.g}, stat_dt, x->device());
  const int64_t cg = s.c / s.g, M = cg * s.hw;
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    const T* px = x->data_as<T>();
    const T* pw = w ? w->data_as<T>() : nullptr;
    const T* pb = b ? b->data_as<T>() : nullptr;
    T* po = out->data_as<T>();
    const bool stat_float = stat_dt != x->dtype();
    T* pm = stat_float ? nullptr : mean->data_as<T>();
    T* pr = stat_float ? nullptr : rstd->data_as<T>();
    float* pmf = stat_float ? mean->data_as<float>() : nullptr;
    float* prf = stat_float ? rstd->data_as<float>() : nullptr;
    const GroupNormFwd<T> k{px, pw, pb, po, pm, pr, pmf, prf, M, s.hw, s.g, cg, eps};
    parallel_for(0, s.n * s.g, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(M, 1)),
                 [&](int64_t rb, int64_t re) {
#if EMBER_GN_AVX2
                   if (cpu_isa() >= Isa::Avx2) return group_norm_rows_avx2<T>(k, rb, re);
#endif
                   group_norm_rows_base<T>(k, rb, re);
                 });
  });
  return {nn::in_layout_of(out, input), mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> native_group_norm_backward(
    const Tensor& grad_out, const Tensor& input, int64_t num_groups, const Tensor& mean,
    const Tensor& rstd, const Tensor& weight, bool input_grad, bool weight_grad, bool bias_grad) {
  const char* op = "group_norm_backward";
  nn::GroupShape s = nn::group_norm_shape(op, input, num_groups, weight, Tensor());
  nn::check_group_norm_backward(op, grad_out, input, s, mean, rstd);
  Tensor x = nn::contig(input);
  Tensor g = nn::contig(grad_out, x->dtype());
  Tensor m = nn::contig(mean, x->dtype()), rs = nn::contig(rstd, x->dtype());
  Tensor w = weight ? nn::contig(weight, x->dtype()) : Tensor();
  const int64_t cg = s.c / s.g, M = cg * s.hw;
  Tensor gi, gw, gb;
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    if (input_grad) gi = ember::empty(x->sizes(), x->dtype(), x->device());
    if (!input_grad && !weight_grad && !bias_grad) return;
    // Per (sample, channel) plane: the sums of g and of g * (x - mean), in double.
    std::vector<double> db(s.n * s.c), ds(s.n * s.c);
    const GroupNormBwd<T> k{x->data_as<T>(),
                            g->data_as<T>(),
                            m->data_as<T>(),
                            rs->data_as<T>(),
                            w ? w->data_as<T>() : nullptr,
                            input_grad ? gi->data_as<T>() : nullptr,
                            db.data(),
                            ds.data(),
                            M,
                            s.hw,
                            s.g,
                            cg};
    parallel_for(0, s.n * s.g, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(M, 1)),
                 [&](int64_t rb, int64_t re) {
#if EMBER_GN_AVX2
                   if (cpu_isa() >= Isa::Avx2) return group_norm_bwd_rows_avx2<T>(k, rb, re);
#endif
                   group_norm_bwd_rows_base<T>(k, rb, re);
                 });
    if (weight_grad || bias_grad) {
      std::vector<double> sw(s.c, 0.0), sb(s.c, 0.0);
      const T* pr = rs->data_as<T>();
      for (int64_t n = 0; n < s.n; ++n)
        for (int64_t c = 0; c < s.c; ++c) {
          sw[c] += ds[n * s.c + c] * static_cast<double>(pr[n * s.g + c / cg]);
          sb[c] += db[n * s.c + c];
        }
      if (weight_grad) gw = from_doubles<T>(sw, {s.c}, x->dtype());
      if (bias_grad) gb = from_doubles<T>(sb, {s.c}, x->dtype());
    }
  });
  return {nn::in_layout_of(gi, input), gw, gb};
}

// ---- batch norm -----------------------------------------------------------------------------
// Training works channel by channel (one thread per channel): the N planes of a channel are
// summed, then their squared deviations, then normalized, while they are still in the cache.
// Each plane sums in 16 independent lanes of the compute type (vectorized), planes add up in
// double.

namespace {
// The per-channel vectors (weight, bias, statistics): contiguous float32 / float64 ones are read
// and written directly; a TensorIterator copy costs more than these few elements.
std::vector<double> read_doubles(const Tensor& t) {
  if (t->is_contiguous() && t->dtype() == ScalarType::Float32) {
    const float* p = t->data_as<float>();
    return std::vector<double>(p, p + t->numel());
  }
  Tensor c = nn::contig(t, ScalarType::Float64);
  const double* p = c->data_as<double>();
  return std::vector<double>(p, p + c->numel());
}
void write_doubles(const Tensor& t, const std::vector<double>& v) {
  t->bump_version();  // first: it refuses read-only memory
  if (t->is_contiguous() && t->dtype() == ScalarType::Float32) {
    float* p = t->data_as<float>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
  } else if (t->is_contiguous() && t->dtype() == ScalarType::Float64) {
    std::copy(v.begin(), v.end(), t->data_as<double>());
  } else {
    Tensor src = ember::empty(t->sizes(), ScalarType::Float64, t->device());
    std::copy(v.begin(), v.end(), src->data_as<double>());
    copy_into(t, src);
  }
}

constexpr int kLanes = 16;

// sum of f(i) over [0, n) in kLanes lanes of type A.
template <class A, class F>
A lane_sum(int64_t n, const F& f) {
  A lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += f(i + l);
  A s = 0;
  for (; i < n; ++i) s += f(i);
  for (int l = 0; l < kLanes; ++l) s += lane[l];
  return s;
}

// Grain (channels per task) so that a task covers at least a pointwise grain of elements.
int64_t channel_grain(int64_t per_channel) {
  return std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(per_channel, 1));
}
}  // namespace

namespace {
// Batch norm of a dense channels-last input, x as R = N * spatial rows of C adjacent channels:
// per-channel statistics (training) summed across each row's channels at once (vectorized over
// C), and the output written in the same layout. Rows go in fixed blocks of kRowBlock, each
// block summed in A and the blocks added in double in order, so the result does not depend on
// the thread count. Transposing to planes and back would cost more than the normalization.
constexpr int64_t kRowBlock = 64;

// Per-channel sums over the rows of f(x, c) (a value of type A) into out (C doubles).
template <class T, class A, class F>
void column_block_sums(const T* x, int64_t R, int64_t C, const F& f, std::vector<double>& out) {
  const int64_t blocks = (R + kRowBlock - 1) / kRowBlock;
  std::vector<double> part(static_cast<size_t>(blocks * C));
  parallel_for(0, blocks,
               std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(kRowBlock * C, 1)),
               [&](int64_t b0, int64_t b1) {
                 std::vector<A> acc(static_cast<size_t>(C));
                 for (int64_t b = b0; b < b1; ++b) {
                   std::fill(acc.begin(), acc.end(), A(0));
                   const int64_t r1 = std::min(R, (b + 1) * kRowBlock);
                   for (int64_t r = b * kRowBlock; r < r1; ++r) {
                     const T* xr = x + r * C;
                     for (int64_t c = 0; c < C; ++c) acc[c] += f(static_cast<A>(xr[c]), c);
                   }
                   for (int64_t c = 0; c < C; ++c) part[b * C + c] = static_cast<double>(acc[c]);
                 }
               });
  out.assign(static_cast<size_t>(C), 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t c = 0; c < C; ++c) out[c] += part[b * C + c];
}

// Fills mean / var / invstd (training: from the batch) and writes out = x * scale + shift.
template <class T>
void batch_norm_channels_last(const T* x, T* out, int64_t R, int64_t C, int64_t count,
                              bool training, double eps, std::vector<double>& mean,
                              std::vector<double>& var, std::vector<double>& invstd,
                              const std::vector<double>& w, const std::vector<double>& b) {
  using A = opmath_t<T>;
  if (training) {
    std::vector<double> s;
    column_block_sums<T, A>(x, R, C, [](A v, int64_t) { return v; }, s);
    std::vector<A> mu_a(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) {
      mean[c] = s[c] / static_cast<double>(count);
      mu_a[c] = static_cast<A>(mean[c]);
    }
    std::vector<double> v, d;  // d: deviations from the rounded mean (corrects it), as planes do
    column_block_sums<T, A>(
        x, R, C,
        [&](A xv, int64_t c) {
          const A dv = xv - mu_a[c];
          return dv * dv;
        },
        v);
    column_block_sums<T, A>(x, R, C, [&](A xv, int64_t c) { return xv - mu_a[c]; }, d);
    for (int64_t c = 0; c < C; ++c) {
      const double vc =
          (v[c] - d[c] * d[c] / static_cast<double>(count)) / static_cast<double>(count);
      var[c] = vc < 0.0 ? 0.0 : vc;
      invstd[c] = 1.0 / std::sqrt(var[c] + eps);
    }
  }
  std::vector<A> a(static_cast<size_t>(C)), sh(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    a[c] = static_cast<A>(invstd[c] * w[c]);
    sh[c] = static_cast<A>(b[c] - mean[c] * invstd[c] * w[c]);
  }
  parallel_for(0, R, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(C, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const T* xr = x + r * C;
                   T* yr = out + r * C;
                   for (int64_t c = 0; c < C; ++c)
                     yr[c] = static_cast<T>(static_cast<A>(xr[c]) * a[c] + sh[c]);
                 }
               });
}
}  // namespace

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input, const Tensor& weight,
                                                     const Tensor& bias, const Tensor& running_mean,
                                                     const Tensor& running_var, bool training,
                                                     double momentum, double eps) {
  const char* op = "batch_norm";
  const nn::BatchShape bs =
      nn::batch_norm_shape(op, input, weight, bias, running_mean, running_var, training);
  const int64_t N = bs.N, C = bs.C, HW = bs.HW, count = bs.count;
  const bool cl_native =
      (input->dim() == 4 || input->dim() == 5) && !input->is_contiguous() &&
      input->device().is_cpu() && input->numel() > 0 &&
      input->strides() == channels_last_strides(input->sizes()) &&
      (input->dtype() == ScalarType::Float32 || input->dtype() == ScalarType::Float64);
  Tensor x = cl_native ? input : nn::contig(input);
  std::vector<double> mean(C), invstd(C), var(C);
  std::vector<double> w = weight ? read_doubles(weight) : std::vector<double>(C, 1.0);
  std::vector<double> b = bias ? read_doubles(bias) : std::vector<double>(C, 0.0);
  if (!training) {
    mean = read_doubles(running_mean);
    std::vector<double> rv = read_doubles(running_var);
    for (int64_t c = 0; c < C; ++c) invstd[c] = 1.0 / std::sqrt(rv[c] + eps);
  }
  Tensor save_mean, save_invstd;
  const ScalarType stat_dt =
      nn::norm_stat_dtype(input, {&weight, &bias, &running_mean, &running_var});
  // A dense channels-last input is normalized in its layout (batch_norm_channels_last).
  Tensor out = cl_native ? ember::empty_strided(x->sizes(), x->strides(), x->dtype(), x->device())
                         : ember::empty(x->sizes(), x->dtype(), x->device());
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* px = x->data_as<T>();
    T* po = out->data_as<T>();
    if (cl_native)
      batch_norm_channels_last(px, po, N * HW, C, count, training, eps, mean, var, invstd, w, b);
    // y = x * scale + shift over the planes of channel c of samples [n0, n1).
    auto normalize = [&](int64_t c, int64_t n0, int64_t n1) {
      const A a = static_cast<A>(invstd[c] * w[c]);
      const A sh = static_cast<A>(b[c] - mean[c] * invstd[c] * w[c]);
      for (int64_t n = n0; n < n1; ++n) {
        const T* xp = px + (n * C + c) * HW;
        T* yp = po + (n * C + c) * HW;
        for (int64_t j = 0; j < HW; ++j) yp[j] = static_cast<T>(static_cast<A>(xp[j]) * a + sh);
      }
    };
    if (cl_native) {
      // (done above)
    } else if (training) {
      parallel_for(0, C, channel_grain(count), [&](int64_t cb, int64_t ce) {
        for (int64_t c = cb; c < ce; ++c) {
          double s = 0;
          for (int64_t n = 0; n < N; ++n) {
            const T* p = px + (n * C + c) * HW;
            s += static_cast<double>(
                lane_sum<A>(HW, [&](int64_t j) { return static_cast<A>(p[j]); }));
          }
          const double mu = s / count;
          const A mu_a = static_cast<A>(mu);
          double v = 0, d = 0;  // d: sum of deviations from the rounded mean (corrects it)
          for (int64_t n = 0; n < N; ++n) {
            const T* p = px + (n * C + c) * HW;
            A lv[kLanes] = {}, ld[kLanes] = {};
            int64_t j = 0;
            for (; j + kLanes <= HW; j += kLanes)
              for (int l = 0; l < kLanes; ++l) {
                const A dv = static_cast<A>(p[j + l]) - mu_a;
                lv[l] += dv * dv;
                ld[l] += dv;
              }
            A sv = 0, sd = 0;
            for (; j < HW; ++j) {
              const A dv = static_cast<A>(p[j]) - mu_a;
              sv += dv * dv;
              sd += dv;
            }
            for (int l = 0; l < kLanes; ++l) {
              sv += lv[l];
              sd += ld[l];
            }
            v += static_cast<double>(sv);
            d += static_cast<double>(sd);
          }
          mean[c] = mu;
          // sum (x - m)^2 = sum (x - mu_a)^2 - (sum (x - mu_a))^2 / count for the exact mean m.
          // Rounding can leave a tiny negative; NaN (from NaN/inf inputs) must stay NaN, not
          // become 0 (std::max(0.0, NaN) is 0) and silently feed running_var.
          const double vc = (v - d * d / count) / count;
          var[c] = vc < 0.0 ? 0.0 : vc;
          invstd[c] = 1.0 / std::sqrt(var[c] + eps);
          normalize(c, 0, N);
        }
      });
    } else {
      parallel_for(0, N * C, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(HW, 1)),
                   [&](int64_t pb, int64_t pe) {
                     for (int64_t p = pb; p < pe; ++p) normalize(p % C, p / C, p / C + 1);
                   });
    }
    if (stat_dt == x->dtype()) {
      save_mean = from_doubles<T>(mean, {C}, stat_dt);
      save_invstd = from_doubles<T>(invstd, {C}, stat_dt);
    } else {  // float32 statistics of a float16 / bfloat16 input
      save_mean = from_doubles<float>(mean, {C}, stat_dt);
      save_invstd = from_doubles<float>(invstd, {C}, stat_dt);
    }
  });
  if (training) {
    if (running_mean) {
      std::vector<double> rm = read_doubles(running_mean);
      for (int64_t c = 0; c < C; ++c) rm[c] = (1 - momentum) * rm[c] + momentum * mean[c];
      write_doubles(running_mean, rm);
    }
    if (running_var) {
      std::vector<double> rv = read_doubles(running_var);
      const double unbias = static_cast<double>(count) / static_cast<double>(count - 1);
      for (int64_t c = 0; c < C; ++c) rv[c] = (1 - momentum) * rv[c] + momentum * var[c] * unbias;
      write_doubles(running_var, rv);
    }
  }
  return {nn::in_layout_of(out, input), save_mean, save_invstd};
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(
    const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& save_mean,
    const Tensor& save_invstd, bool train, bool input_grad, bool weight_grad, bool bias_grad) {
  const char* op = "batch_norm_backward";
  nn::check_batch_norm_backward(op, grad_out, input, weight, save_mean, save_invstd);
  const int64_t N = input->size(0), C = input->size(1);
  int64_t HW = 1;
  for (int64_t d = 2; d < input->dim(); ++d) HW *= input->size(d);
  const int64_t count = N * HW;
  Tensor x = nn::contig(input);
  Tensor g = nn::contig(grad_out, x->dtype());
  std::vector<double> mean = read_doubles(save_mean), invstd = read_doubles(save_invstd);
  std::vector<double> w = weight ? read_doubles(weight) : std::vector<double>(C, 1.0);
  std::vector<double> sg(C, 0.0), sgx(C, 0.0);  // per channel: sum g, sum g * xhat
  // The input gradient in eval mode needs no sums; the bias gradient needs only sum g.
  const bool need_sg = bias_grad || (input_grad && train);
  const bool need_sgx = weight_grad || (input_grad && train);
  Tensor gi, gw, gb;
  if (input_grad) gi = ember::empty(x->sizes(), x->dtype(), x->device());
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* px = x->data_as<T>();
    const T* pg = g->data_as<T>();
    T* po = input_grad ? gi->data_as<T>() : nullptr;
    parallel_for(0, C, channel_grain(count), [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        const A m = static_cast<A>(mean[c]);
        double a = 0, bsum = 0;
        for (int64_t n = 0; (need_sg || need_sgx) && n < N; ++n) {
          const T* gp = pg + (n * C + c) * HW;
          const T* xp = px + (n * C + c) * HW;
          if (need_sg)
            a += static_cast<double>(
                lane_sum<A>(HW, [&](int64_t j) { return static_cast<A>(gp[j]); }));
          if (need_sgx)
            bsum += static_cast<double>(lane_sum<A>(HW, [&](int64_t j) {
              return static_cast<A>(gp[j]) * (static_cast<A>(xp[j]) - m);
            }));
        }
        sg[c] = a;
        sgx[c] = bsum * invstd[c];
        if (!input_grad) continue;
        // gi = k * (g - mean(g) - xhat * mean(g * xhat)) = g * k + (x - mean) * c1 + c0.
        const double k = w[c] * invstd[c];
        const double mg = train ? sg[c] / count : 0.0;
        const double mgx = train ? sgx[c] / count : 0.0;
        const A ka = static_cast<A>(k);
        const A c1 = static_cast<A>(-k * invstd[c] * mgx);
        const A c0 = static_cast<A>(-k * mg);
        for (int64_t n = 0; n < N; ++n) {
          const int64_t base = (n * C + c) * HW;
          const T* gp = pg + base;
          const T* xp = px + base;
          T* op_ = po + base;
          for (int64_t j = 0; j < HW; ++j)
            op_[j] =
                static_cast<T>(static_cast<A>(gp[j]) * ka + (static_cast<A>(xp[j]) - m) * c1 + c0);
        }
      }
    });
    if (weight_grad) gw = from_doubles<T>(sgx, {C}, x->dtype());
    if (bias_grad) gb = from_doubles<T>(sg, {C}, x->dtype());
  });
  return {nn::in_layout_of(gi, input), gw, gb};
}

}  // namespace cpu
}  // namespace ember
