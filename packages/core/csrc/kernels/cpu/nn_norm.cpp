// CPU kernels of layer norm, RMS norm, group norm and batch norm, forward (statistics saved)
// and backward. Layer, RMS and group norm normalize contiguous "rows" (the trailing dims, or a
// sample's group of channels); batch norm normalizes each channel over the batch and the
// spatial dims. Statistics accumulate in double.
#include <cmath>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

void check_float(const char* op, const Tensor& t) {
  EMBER_CHECK_KIND(is_floating(t->dtype()), Type, op, ": expected a floating-point input, got ",
                   dtype_name(t->dtype()));
}

// Rows x cols of a layer/RMS norm; checks the trailing dims and the affine parameters.
std::pair<int64_t, int64_t> row_shape(const char* op, const Tensor& input,
                                      const DimVector& normalized_shape, const Tensor& weight,
                                      const Tensor& bias) {
  const int64_t k = normalized_shape.size(), d = input->dim();
  bool ok = k >= 1 && k <= d;
  for (int64_t i = 0; ok && i < k; ++i) ok = input->size(d - k + i) == normalized_shape[i];
  EMBER_CHECK(ok, op, ": expected an input whose trailing dims are ", shape_str(normalized_shape),
              " (normalized_shape), got input of shape ", shape_str(input->sizes()));
  for (const Tensor* p : {&weight, &bias})
    if (*p)
      EMBER_CHECK((*p)->sizes() == normalized_shape, op, ": expected ",
                  p == &weight ? "weight" : "bias", " of shape ", shape_str(normalized_shape),
                  ", got ", shape_str((*p)->sizes()));
  const int64_t cols = nn::prod(normalized_shape);
  return {cols == 0 ? 0 : input->numel() / cols, cols};
}

DimVector stat_shape(const Tensor& input, int64_t k) {
  DimVector s;
  for (int64_t i = 0; i < input->dim(); ++i) s.push_back(i < input->dim() - k ? input->size(i) : 1);
  return s;
}

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
  check_float(op, input);
  auto [R, M] = row_shape(op, input, normalized_shape, weight, bias);
  Tensor x = nn::contig(input);
  Tensor w = weight ? nn::contig(weight, x->dtype()) : Tensor();
  Tensor b = bias ? nn::contig(bias, x->dtype()) : Tensor();
  Tensor out = ember::empty(x->sizes(), x->dtype(), x->device());
  DimVector ss = stat_shape(x, normalized_shape.size());
  Tensor mean = ember::empty(ss, x->dtype(), x->device());
  Tensor rstd = ember::empty(ss, x->dtype(), x->device());
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* px = x->data_as<T>();
    const T* pw = w ? w->data_as<T>() : nullptr;
    const T* pb = b ? b->data_as<T>() : nullptr;
    T* po = out->data_as<T>();
    T* pm = mean->data_as<T>();
    T* pr = rstd->data_as<T>();
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
                     pm[r] = static_cast<T>(mu);
                     pr[r] = static_cast<T>(rs);
                     const A a = static_cast<A>(rs), c = static_cast<A>(-mu * rs);
                     T* orow = po + r * M;
                     for (int64_t j = 0; j < M; ++j) {
                       A v = static_cast<A>(xr[j]) * a + c;
                       if (pw) v *= static_cast<A>(pw[j]);
                       if (pb) v += static_cast<A>(pb[j]);
                       orow[j] = static_cast<T>(v);
                     }
                   }
                 });
  });
  return {out, mean, rstd};
}

// Gradients of row_norm_forward (mean is null for RMS norm).
std::tuple<Tensor, Tensor, Tensor> row_norm_backward(const char* op, const Tensor& grad,
                                                     const Tensor& input,
                                                     const DimVector& normalized_shape,
                                                     const Tensor& mean, const Tensor& rstd,
                                                     const Tensor& weight, bool input_grad,
                                                     bool weight_grad, bool bias_grad) {
  check_float(op, input);
  auto [R, M] = row_shape(op, input, normalized_shape, weight, Tensor());
  EMBER_CHECK(grad->sizes() == input->sizes(), op, ": grad_out of shape ", shape_str(grad->sizes()),
              " doesn't match input of shape ", shape_str(input->sizes()));
  EMBER_CHECK(rstd->numel() == R && (!mean || mean->numel() == R), op,
              ": expected mean and rstd with ", R, " elements, got ", shape_str(rstd->sizes()));
  Tensor x = nn::contig(input);
  Tensor g = nn::contig(grad, x->dtype());
  Tensor m = mean ? nn::contig(mean, x->dtype()) : Tensor();
  Tensor rs = nn::contig(rstd, x->dtype());
  Tensor w = weight ? nn::contig(weight, x->dtype()) : Tensor();
  Tensor gi, gw, gb;
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    const T* px = x->data_as<T>();
    const T* pg = g->data_as<T>();
    const T* pm = m ? m->data_as<T>() : nullptr;
    const T* pr = rs->data_as<T>();
    const T* pw = w ? w->data_as<T>() : nullptr;
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
      gw = from_doubles<T>(sums, normalized_shape, x->dtype());
    }
    if (bias_grad) {
      std::vector<double> sums = column_sums(R, M, [&](int64_t r, double* acc) {
        for (int64_t j = 0; j < M; ++j) acc[j] += static_cast<double>(pg[r * M + j]);
      });
      gb = from_doubles<T>(sums, normalized_shape, x->dtype());
    }
  });
  return {gi, gw, gb};
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& input,
                                                     const DimVector& normalized_shape,
                                                     const Tensor& weight, const Tensor& bias,
                                                     double eps) {
  return row_norm_forward("layer_norm", input, normalized_shape, weight, bias, eps, true);
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(
    const Tensor& grad_out, const Tensor& input, const DimVector& normalized_shape,
    const Tensor& mean, const Tensor& rstd, const Tensor& weight, bool input_grad, bool weight_grad,
    bool bias_grad) {
  return row_norm_backward("layer_norm_backward", grad_out, input, normalized_shape, mean, rstd,
                           weight, input_grad, weight_grad, bias_grad);
}

std::tuple<Tensor, Tensor> _fused_rms_norm(const Tensor& input, const DimVector& normalized_shape,
                                           const Tensor& weight, double eps) {
  auto r = row_norm_forward("rms_norm", input, normalized_shape, weight, Tensor(), eps, false);
  return {std::get<0>(r), std::get<2>(r)};
}

std::tuple<Tensor, Tensor> _fused_rms_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                    const DimVector& normalized_shape,
                                                    const Tensor& rstd, const Tensor& weight,
                                                    bool input_grad, bool weight_grad) {
  auto r = row_norm_backward("rms_norm_backward", grad_out, input, normalized_shape, Tensor(), rstd,
                             weight, input_grad, weight_grad, false);
  return {std::get<0>(r), std::get<1>(r)};
}

// ---- group norm -----------------------------------------------------------------------------

namespace {
struct GroupShape {
  int64_t n, c, g, hw;
};
GroupShape group_shape(const char* op, const Tensor& input, int64_t num_groups,
                       const Tensor& weight, const Tensor& bias) {
  check_float(op, input);
  EMBER_CHECK(input->dim() >= 2, op, ": expected an input of shape (N, C, *), got ",
              shape_str(input->sizes()));
  GroupShape s{input->size(0), input->size(1), num_groups, 1};
  for (int64_t d = 2; d < input->dim(); ++d) s.hw *= input->size(d);
  EMBER_CHECK_KIND(num_groups > 0 && s.c % num_groups == 0, Value, op,
                   ": expected the number of channels (", s.c, ") to be divisible by num_groups (",
                   num_groups, "), input shape ", shape_str(input->sizes()));
  for (const Tensor* p : {&weight, &bias})
    if (*p)
      EMBER_CHECK((*p)->dim() == 1 && (*p)->size(0) == s.c, op, ": expected ",
                  p == &weight ? "weight" : "bias", " of shape (", s.c, ",), got ",
                  shape_str((*p)->sizes()));
  return s;
}
}  // namespace

std::tuple<Tensor, Tensor, Tensor> native_group_norm(const Tensor& input, int64_t num_groups,
                                                     const Tensor& weight, const Tensor& bias,
                                                     double eps) {
  const char* op = "group_norm";
  GroupShape s = group_shape(op, input, num_groups, weight, bias);
  Tensor x = nn::contig(input);
  Tensor w = weight ? nn::contig(weight, x->dtype()) : Tensor();
  Tensor b = bias ? nn::contig(bias, x->dtype()) : Tensor();
  Tensor out = ember::empty(x->sizes(), x->dtype(), x->device());
  Tensor mean = ember::empty({s.n, s.g}, x->dtype(), x->device());
  Tensor rstd = ember::empty({s.n, s.g}, x->dtype(), x->device());
  const int64_t cg = s.c / s.g, M = cg * s.hw;
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* px = x->data_as<T>();
    const T* pw = w ? w->data_as<T>() : nullptr;
    const T* pb = b ? b->data_as<T>() : nullptr;
    T* po = out->data_as<T>();
    T* pm = mean->data_as<T>();
    T* pr = rstd->data_as<T>();
    parallel_for(0, s.n * s.g, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(M, 1)),
                 [&](int64_t rb, int64_t re) {
                   for (int64_t r = rb; r < re; ++r) {
                     const T* xr = px + r * M;
                     double mu = 0, var = 0;
                     for (int64_t j = 0; j < M; ++j) mu += static_cast<double>(xr[j]);
                     mu /= std::max<int64_t>(M, 1);
                     for (int64_t j = 0; j < M; ++j) {
                       double dv = static_cast<double>(xr[j]) - mu;
                       var += dv * dv;
                     }
                     var /= std::max<int64_t>(M, 1);
                     const double rs = 1.0 / std::sqrt(var + eps);
                     pm[r] = static_cast<T>(mu);
                     pr[r] = static_cast<T>(rs);
                     const int64_t c0 = (r % s.g) * cg;
                     for (int64_t ci = 0; ci < cg; ++ci) {
                       const int64_t c = c0 + ci;
                       A a = static_cast<A>(rs), sh = static_cast<A>(-mu * rs);
                       if (pw) {
                         a *= static_cast<A>(pw[c]);
                         sh *= static_cast<A>(pw[c]);
                       }
                       if (pb) sh += static_cast<A>(pb[c]);
                       const T* xc = xr + ci * s.hw;
                       T* oc = po + r * M + ci * s.hw;
                       for (int64_t j = 0; j < s.hw; ++j)
                         oc[j] = static_cast<T>(static_cast<A>(xc[j]) * a + sh);
                     }
                   }
                 });
  });
  return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> native_group_norm_backward(
    const Tensor& grad_out, const Tensor& input, int64_t num_groups, const Tensor& mean,
    const Tensor& rstd, const Tensor& weight, bool input_grad, bool weight_grad, bool bias_grad) {
  const char* op = "group_norm_backward";
  GroupShape s = group_shape(op, input, num_groups, weight, Tensor());
  EMBER_CHECK(grad_out->sizes() == input->sizes(), op, ": grad_out of shape ",
              shape_str(grad_out->sizes()), " doesn't match input of shape ",
              shape_str(input->sizes()));
  Tensor x = nn::contig(input);
  Tensor g = nn::contig(grad_out, x->dtype());
  Tensor m = nn::contig(mean, x->dtype()), rs = nn::contig(rstd, x->dtype());
  Tensor w = weight ? nn::contig(weight, x->dtype()) : Tensor();
  const int64_t cg = s.c / s.g, M = cg * s.hw;
  Tensor gi, gw, gb;
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    const T* px = x->data_as<T>();
    const T* pg = g->data_as<T>();
    const T* pm = m->data_as<T>();
    const T* pr = rs->data_as<T>();
    const T* pw = w ? w->data_as<T>() : nullptr;
    if (input_grad) {
      gi = ember::empty(x->sizes(), x->dtype(), x->device());
      T* po = gi->data_as<T>();
      parallel_for(
          0, s.n * s.g, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(M, 1)),
          [&](int64_t rb, int64_t re) {
            for (int64_t r = rb; r < re; ++r) {
              const double mu = static_cast<double>(pm[r]), sd = static_cast<double>(pr[r]);
              const int64_t c0 = (r % s.g) * cg;
              double sg = 0, sgx = 0;
              for (int64_t ci = 0; ci < cg; ++ci) {
                const double wc = pw ? static_cast<double>(pw[c0 + ci]) : 1.0;
                for (int64_t j = 0; j < s.hw; ++j) {
                  const int64_t i = r * M + ci * s.hw + j;
                  double gv = static_cast<double>(pg[i]) * wc;
                  sg += gv;
                  sgx += gv * (static_cast<double>(px[i]) - mu) * sd;
                }
              }
              sg /= M;
              sgx /= M;
              for (int64_t ci = 0; ci < cg; ++ci) {
                const double wc = pw ? static_cast<double>(pw[c0 + ci]) : 1.0;
                for (int64_t j = 0; j < s.hw; ++j) {
                  const int64_t i = r * M + ci * s.hw + j;
                  double xh = (static_cast<double>(px[i]) - mu) * sd;
                  po[i] = static_cast<T>(sd * (static_cast<double>(pg[i]) * wc - sg - xh * sgx));
                }
              }
            }
          });
    }
    if (weight_grad || bias_grad) {
      // Per (n, c) plane sums, then over n.
      std::vector<double> sw = column_sums(s.n, s.c, [&](int64_t n, double* acc) {
        for (int64_t c = 0; c < s.c; ++c) {
          const int64_t r = n * s.g + c / cg;
          const double mu = static_cast<double>(pm[r]), sd = static_cast<double>(pr[r]);
          const int64_t base = (n * s.c + c) * s.hw;
          double a = 0;
          for (int64_t j = 0; j < s.hw; ++j)
            a += static_cast<double>(pg[base + j]) * (static_cast<double>(px[base + j]) - mu) * sd;
          acc[c] += a;
        }
      });
      std::vector<double> sb = column_sums(s.n, s.c, [&](int64_t n, double* acc) {
        for (int64_t c = 0; c < s.c; ++c) {
          const int64_t base = (n * s.c + c) * s.hw;
          double a = 0;
          for (int64_t j = 0; j < s.hw; ++j) a += static_cast<double>(pg[base + j]);
          acc[c] += a;
        }
      });
      if (weight_grad) gw = from_doubles<T>(sw, {s.c}, x->dtype());
      if (bias_grad) gb = from_doubles<T>(sb, {s.c}, x->dtype());
    }
  });
  return {gi, gw, gb};
}

// ---- batch norm -----------------------------------------------------------------------------

namespace {
std::vector<double> read_doubles(const Tensor& t) {
  Tensor c = nn::contig(t, ScalarType::Float64);
  const double* p = c->data_as<double>();
  return std::vector<double>(p, p + c->numel());
}
void write_doubles(const Tensor& t, const std::vector<double>& v) {
  Tensor src = ember::empty(t->sizes(), ScalarType::Float64, t->device());
  std::copy(v.begin(), v.end(), src->data_as<double>());
  copy_into(t, src);
  t->bump_version();
}
}  // namespace

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input, const Tensor& weight,
                                                     const Tensor& bias, const Tensor& running_mean,
                                                     const Tensor& running_var, bool training,
                                                     double momentum, double eps) {
  const char* op = "batch_norm";
  check_float(op, input);
  EMBER_CHECK(input->dim() >= 2, op, ": expected an input of shape (N, C, *), got ",
              shape_str(input->sizes()));
  const int64_t N = input->size(0), C = input->size(1);
  int64_t HW = 1;
  for (int64_t d = 2; d < input->dim(); ++d) HW *= input->size(d);
  for (const Tensor* p : {&weight, &bias, &running_mean, &running_var})
    if (*p)
      EMBER_CHECK((*p)->numel() == C && (*p)->dim() == 1, op, ": expected ",
                  p == &weight         ? "weight"
                  : p == &bias         ? "bias"
                  : p == &running_mean ? "running_mean"
                                       : "running_var",
                  " of shape (", C, ",), got ", shape_str((*p)->sizes()));
  const int64_t count = N * HW;
  if (training)
    EMBER_CHECK_KIND(count > 1, Value, op,
                     ": expected more than 1 value per channel when training, got input of shape ",
                     shape_str(input->sizes()));
  else
    EMBER_CHECK(running_mean && running_var, op,
                ": running_mean and running_var are required in eval mode (training=False)");
  Tensor x = nn::contig(input);
  std::vector<double> mean(C), invstd(C);
  std::vector<double> var(C);
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    const T* px = x->data_as<T>();
    if (training) {
      parallel_for(0, C, 1, [&](int64_t cb, int64_t ce) {
        for (int64_t c = cb; c < ce; ++c) {
          double s = 0;
          for (int64_t n = 0; n < N; ++n) {
            const T* p = px + (n * C + c) * HW;
            for (int64_t j = 0; j < HW; ++j) s += static_cast<double>(p[j]);
          }
          const double mu = s / count;
          double v = 0;
          for (int64_t n = 0; n < N; ++n) {
            const T* p = px + (n * C + c) * HW;
            for (int64_t j = 0; j < HW; ++j) {
              double dv = static_cast<double>(p[j]) - mu;
              v += dv * dv;
            }
          }
          mean[c] = mu;
          var[c] = v / count;
          invstd[c] = 1.0 / std::sqrt(var[c] + eps);
        }
      });
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
  } else {
    mean = read_doubles(running_mean);
    std::vector<double> rv = read_doubles(running_var);
    for (int64_t c = 0; c < C; ++c) invstd[c] = 1.0 / std::sqrt(rv[c] + eps);
  }
  std::vector<double> w = weight ? read_doubles(weight) : std::vector<double>(C, 1.0);
  std::vector<double> b = bias ? read_doubles(bias) : std::vector<double>(C, 0.0);
  Tensor out = ember::empty(x->sizes(), x->dtype(), x->device());
  Tensor save_mean, save_invstd;
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* px = x->data_as<T>();
    T* po = out->data_as<T>();
    parallel_for(0, N * C, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(HW, 1)),
                 [&](int64_t pb, int64_t pe) {
                   for (int64_t p = pb; p < pe; ++p) {
                     const int64_t c = p % C;
                     const A a = static_cast<A>(invstd[c] * w[c]);
                     const A sh = static_cast<A>(b[c] - mean[c] * invstd[c] * w[c]);
                     const T* xp = px + p * HW;
                     T* op_ = po + p * HW;
                     for (int64_t j = 0; j < HW; ++j)
                       op_[j] = static_cast<T>(static_cast<A>(xp[j]) * a + sh);
                   }
                 });
    save_mean = from_doubles<T>(mean, {C}, x->dtype());
    save_invstd = from_doubles<T>(invstd, {C}, x->dtype());
  });
  return {out, save_mean, save_invstd};
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(
    const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& save_mean,
    const Tensor& save_invstd, bool train, bool input_grad, bool weight_grad, bool bias_grad) {
  const char* op = "batch_norm_backward";
  check_float(op, input);
  EMBER_CHECK(grad_out->sizes() == input->sizes(), op, ": grad_out of shape ",
              shape_str(grad_out->sizes()), " doesn't match input of shape ",
              shape_str(input->sizes()));
  const int64_t N = input->size(0), C = input->size(1);
  int64_t HW = 1;
  for (int64_t d = 2; d < input->dim(); ++d) HW *= input->size(d);
  const int64_t count = N * HW;
  Tensor x = nn::contig(input);
  Tensor g = nn::contig(grad_out, x->dtype());
  std::vector<double> mean = read_doubles(save_mean), invstd = read_doubles(save_invstd);
  std::vector<double> w = weight ? read_doubles(weight) : std::vector<double>(C, 1.0);
  std::vector<double> sg(C), sgx(C);  // per channel: sum g, sum g * xhat
  Tensor gi, gw, gb;
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    const T* px = x->data_as<T>();
    const T* pg = g->data_as<T>();
    parallel_for(0, C, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        double a = 0, bsum = 0;
        for (int64_t n = 0; n < N; ++n) {
          const int64_t base = (n * C + c) * HW;
          for (int64_t j = 0; j < HW; ++j) {
            double gv = static_cast<double>(pg[base + j]);
            a += gv;
            bsum += gv * (static_cast<double>(px[base + j]) - mean[c]) * invstd[c];
          }
        }
        sg[c] = a;
        sgx[c] = bsum;
      }
    });
    if (input_grad) {
      gi = ember::empty(x->sizes(), x->dtype(), x->device());
      T* po = gi->data_as<T>();
      parallel_for(0, N * C, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(HW, 1)),
                   [&](int64_t pb, int64_t pe) {
                     for (int64_t p = pb; p < pe; ++p) {
                       const int64_t c = p % C;
                       const double k = w[c] * invstd[c];
                       const double mg = train ? sg[c] / count : 0.0;
                       const double mgx = train ? sgx[c] / count : 0.0;
                       for (int64_t j = 0; j < HW; ++j) {
                         const int64_t i = p * HW + j;
                         double xh = (static_cast<double>(px[i]) - mean[c]) * invstd[c];
                         po[i] = static_cast<T>(k * (static_cast<double>(pg[i]) - mg - xh * mgx));
                       }
                     }
                   });
    }
    if (weight_grad) gw = from_doubles<T>(sgx, {C}, x->dtype());
    if (bias_grad) gb = from_doubles<T>(sg, {C}, x->dtype());
  });
  return {gi, gw, gb};
}

}  // namespace cpu
}  // namespace ember
