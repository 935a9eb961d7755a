// CUDA kernels of layer norm, RMS norm, group norm and batch norm, forward and backward
// (semantics, shapes and saved statistics: kernels/cpu/nn_norm.cpp).
//   - Layer, RMS and group norm normalize contiguous rows (the trailing dims; a sample's group of
//     channels), each row owned by a team (nn_common.cuh: a warp up to 1024 elements, a block
//     above): mean, then the variance around it (two passes over the row, the second from cache),
//     in float (double for float64).
//   - Per-parameter sums of the backward: over the rows of a layer norm, tiles of 32 columns x
//     row chunks whose partials a second kernel adds in order (deterministic); over the (sample,
//     spatial) planes of a channel (group and batch norm), one block per channel, in double.
//   - Batch norm statistics: one block per channel, sums of x - x0 and (x - x0)^2 in double
//     (x0 the channel's first element: a shift that keeps the variance exact to rounding); the
//     per-channel scale/shift, save_* and running statistics are computed in double by a small
//     kernel, the running statistics written back in their own dtype and layout.
#include <cmath>

#include "core/dispatch.h"
#include "cuda/cuda_registry.h"
#include "cuda/elementwise.cuh"
#include "cuda/nn_common.cuh"
#include "kernels/norm_rules.h"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {
namespace {

using nnk::acc_t;

// ---- row kernels (layer / RMS / group norm) ---------------------------------------------------
// Row r holds M elements; the affine parameter of element j is j (layer/RMS norm) or, for group
// norm (G > 0 groups of cg channels of hw elements), channel (r % G) * cg + j / hw.

struct RowGeom {
  int64_t rows, M, hw, G, cg;
  __device__ __forceinline__ int64_t param(int64_t r, int64_t j) const {
    return G > 0 ? (r % G) * cg + j / hw : j;
  }
};

template <class T>
__global__ void row_norm_forward_kernel(const T* x, const T* w, const T* b, T* y, acc_t<T>* mean,
                                        acc_t<T>* rstd, RowGeom geo, double eps, bool center,
                                        int mode) {
  using A = acc_t<T>;
  const nnk::Team tm = nnk::make_team(mode);
  if (tm.id >= geo.rows) return;
  const int64_t r = tm.id, M = geo.M;
  const T* xr = x + r * M;
  A mu = 0;
  if (center) {
    for (int64_t j = tm.rank; j < M; j += tm.size) mu += to_op<T>(xr[j]);
    mu = nnk::team_sum(mu, mode) / static_cast<A>(M > 0 ? M : 1);
  }
  A var = 0;
  for (int64_t j = tm.rank; j < M; j += tm.size) {
    const A d = to_op<T>(xr[j]) - mu;
    var += d * d;
  }
  // An empty row (no columns, or group norm of zero spatial elements) has mean 0 and variance
  // 0/0 = NaN, so rstd NaN, as torch and the CPU kernel.
  var = nnk::team_sum(var, mode) / static_cast<A>(M);
  const A rs = A(1) / dm::sqrt(var + static_cast<A>(eps));
  if (tm.rank == 0) {
    if (mean) mean[r] = mu;
    rstd[r] = rs;
  }
  const A shift = -mu * rs;
  T* yr = y + r * M;
  for (int64_t j = tm.rank; j < M; j += tm.size) {
    A v = to_op<T>(xr[j]) * rs + shift;
    if (w || b) {
      const int64_t p = geo.param(r, j);
      if (w) v *= to_op<T>(w[p]);
      if (b) v += to_op<T>(b[p]);
    }
    yr[j] = from_op<T>(v);
  }
}

// gi = rstd * (g' - mean(g') - xhat * mean(g' * xhat)), g' = g * weight (mean(g') dropped for
// RMS norm, which has no mean).
template <class T>
__global__ void row_norm_backward_kernel(const T* g, const T* x, const acc_t<T>* mean,
                                         const acc_t<T>* rstd, const T* w, T* gi, RowGeom geo,
                                         int mode) {
  using A = acc_t<T>;
  const nnk::Team tm = nnk::make_team(mode);
  if (tm.id >= geo.rows) return;
  const int64_t r = tm.id, M = geo.M;
  const T* xr = x + r * M;
  const T* gr = g + r * M;
  const A mu = mean ? mean[r] : A(0), s = rstd[r];
  A sg = 0, sgx = 0;
  for (int64_t j = tm.rank; j < M; j += tm.size) {
    A gv = to_op<T>(gr[j]);
    if (w) gv *= to_op<T>(w[geo.param(r, j)]);
    sg += gv;
    sgx += gv * (to_op<T>(xr[j]) - mu) * s;
  }
  sg = nnk::team_sum(sg, mode);
  sgx = nnk::team_sum(sgx, mode);
  const A a = mean ? sg / static_cast<A>(M) : A(0), c = sgx / static_cast<A>(M);
  T* o = gi + r * M;
  for (int64_t j = tm.rank; j < M; j += tm.size) {
    A gv = to_op<T>(gr[j]);
    if (w) gv *= to_op<T>(w[geo.param(r, j)]);
    const A xh = (to_op<T>(xr[j]) - mu) * s;
    o[j] = from_op<T>(s * (gv - a - xh * c));
  }
}

// Layer norm parameter gradients, step 1: block (32, 8) sums columns [32 bx, 32 bx + 32) over
// rows [by * chunk, (by + 1) * chunk): pw[by * M + j] = sum g * xhat, pb[by * M + j] = sum g.
constexpr int kColTile = 32, kColRows = 8;
template <class T>
__global__ void col_param_partial_kernel(const T* g, const T* x, const acc_t<T>* mean,
                                         const acc_t<T>* rstd, acc_t<T>* pw, acc_t<T>* pb,
                                         int64_t R, int64_t M, int64_t chunk) {
  using A = acc_t<T>;
  __shared__ A sw[kColRows][kColTile + 1], sb[kColRows][kColTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t j = int64_t(blockIdx.x) * kColTile + tx;
  const int64_t r0 = int64_t(blockIdx.y) * chunk, r1 = r0 + chunk < R ? r0 + chunk : R;
  A aw = 0, ab = 0;
  if (j < M) {
    for (int64_t r = r0 + ty; r < r1; r += kColRows) {
      const A gv = to_op<T>(g[r * M + j]);
      const A mu = mean ? mean[r] : A(0);
      ab += gv;
      aw += gv * (to_op<T>(x[r * M + j]) - mu) * rstd[r];
    }
  }
  sw[ty][tx] = aw;
  sb[ty][tx] = ab;
  __syncthreads();
  if (ty == 0 && j < M) {
    for (int k = 1; k < kColRows; ++k) {
      aw += sw[k][tx];
      ab += sb[k][tx];
    }
    pw[int64_t(blockIdx.y) * M + j] = aw;
    pb[int64_t(blockIdx.y) * M + j] = ab;
  }
}

// Step 2: gw[j] / gb[j] = the sums of the chunks' partials (either output may be null).
template <class T>
__global__ void col_param_final_kernel(const acc_t<T>* pw, const acc_t<T>* pb, T* gw, T* gb,
                                       int64_t chunks, int64_t M) {
  using A = acc_t<T>;
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= M) return;
  A aw = 0, ab = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    aw += pw[c * M + j];
    ab += pb[c * M + j];
  }
  if (gw) gw[j] = from_op<T>(aw);
  if (gb) gb[j] = from_op<T>(ab);
}

// Index arithmetic of the (O, P, K) layouts: the element count of a channel and the channel
// of a flat index, with 32-bit multiply-shift division when every index fits (nearly always).
struct ChanGeom {
  int64_t O, P, K;
  bool fast;
  ew::IntDivider kdiv, pdiv;
  ChanGeom(int64_t o, int64_t p, int64_t k)
      : O(o), P(p), K(k), fast(o * p * k <= ew::kIndexLimit && p >= 1 && k >= 1) {
    if (fast) {
      kdiv = ew::IntDivider(static_cast<uint32_t>(k));
      pdiv = ew::IntDivider(static_cast<uint32_t>(p));
    }
  }
  // o of the idx-th element (idx < O * K) of a channel.
  __device__ __forceinline__ int64_t outer_of(int64_t idx) const {
    return fast ? int64_t(kdiv.div(static_cast<uint32_t>(idx))) : idx / K;
  }
  // The channel of flat element i of the whole tensor.
  __device__ __forceinline__ int64_t channel_of(int64_t i) const {
    if (fast) {
      const uint32_t q = kdiv.div(static_cast<uint32_t>(i));
      return int64_t(q - pdiv.div(q) * pdiv.divisor);
    }
    return (i / K) % P;
  }
};

// Channels are split over gridDim.y blocks of `per` elements each; block (p, y) writes the
// partial sums of its slice at [y * P + p], and a second kernel adds a channel's partials in
// order (deterministic).
struct Split {
  int64_t splits, per;
};
inline Split split_for(int64_t P, int64_t total) {
  // Enough blocks to fill the GPU (about 1024), no block under 4096 elements.
  int64_t splits = std::max<int64_t>(1, (1024 + P - 1) / std::max<int64_t>(P, 1));
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, (total + 4095) / 4096));
  const int64_t per = (total + splits - 1) / splits;
  return {(total + per - 1) / std::max<int64_t>(per, 1), per};
}

// Partial per-channel sums over a (O, P, K) tensor: sg = sum g and sgx = sum g * (x - mean[s]) *
// rstd[s], s = o * G + p / cg (group norm, G > 0) or p.
template <class T>
__global__ void channel_sums_kernel(const T* g, const T* x, const double* mean, const double* rstd,
                                    double* part_sg, double* part_sgx, ChanGeom geo, int64_t G,
                                    int64_t cg, int64_t per) {
  const int64_t p = blockIdx.x, y = blockIdx.y, total = geo.O * geo.K;
  const int64_t lo = y * per, hi = lo + per < total ? lo + per : total;
  double a = 0, bsum = 0;
  for (int64_t idx = lo + threadIdx.x; idx < hi; idx += blockDim.x) {
    const int64_t o = geo.outer_of(idx), k = idx - o * geo.K;
    const int64_t i = (o * geo.P + p) * geo.K + k;
    const int64_t st = G > 0 ? o * G + p / cg : p;
    const double gv = static_cast<double>(to_op<T>(g[i]));
    a += gv;
    bsum += gv * (static_cast<double>(to_op<T>(x[i])) - mean[st]) * rstd[st];
  }
  a = nnk::team_sum(a, nnk::kBlock);
  bsum = nnk::team_sum(bsum, nnk::kBlock);
  if (threadIdx.x == 0) {
    part_sg[y * geo.P + p] = a;
    part_sgx[y * geo.P + p] = bsum;
  }
}

// out_a[p] / out_b[p] = the sums of the `splits` partials of channel p, in order.
__global__ void sum_parts_kernel(const double* pa, const double* pb, double* out_a, double* out_b,
                                 int64_t P, int64_t splits) {
  const int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= P) return;
  double a = 0, b = 0;
  for (int64_t y = 0; y < splits; ++y) {
    a += pa[y * P + p];
    b += pb[y * P + p];
  }
  out_a[p] = a;
  out_b[p] = b;
}

// Shapes and checks: the CPU's (kernels/norm_rules.h), with the CUDA device checks.
constexpr nn::DeviceCheck kDevice = &nnk::check_device;

template <class T>
const T* ptr_or_null(const Tensor& t) {
  return t ? t->data_as<T>() : nullptr;
}
template <class T>
T* mut_or_null(const Tensor& t) {
  return t ? t->data_as<T>() : nullptr;
}

// Shared by layer / RMS / group norm: y, mean (null for RMS norm) and rstd of rows geo over the
// contiguous x; w, b: contiguous in x's dtype or null; mean / rstd in nn::norm_acc_dtype(x).
void launch_row_forward(const char* op, const Tensor& x, const Tensor& w, const Tensor& b,
                        const Tensor& y, const Tensor& mean, const Tensor& rstd, const RowGeom& geo,
                        double eps, bool center) {
  // Rows of no elements still get their statistics (an early return on M == 0 left mean / rstd
  // uninitialized).
  if (geo.rows == 0) return;
  const int mode = nnk::team_mode(geo.M, 1);
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    row_norm_forward_kernel<T>
        <<<nnk::team_blocks(mode, geo.rows), nnk::team_threads(mode), 0, ix::stream_of(x)>>>(
            x->data_as<T>(), ptr_or_null<T>(w), ptr_or_null<T>(b), y->data_as<T>(),
            mut_or_null<acc_t<T>>(mean), rstd->data_as<acc_t<T>>(), geo, eps, center, mode);
    check_launch(op);
  });
}

void launch_row_backward(const char* op, const Tensor& g, const Tensor& x, const Tensor& mean,
                         const Tensor& rstd, const Tensor& w, const Tensor& gi,
                         const RowGeom& geo) {
  if (geo.rows == 0 || geo.M == 0) return;
  const int mode = nnk::team_mode(geo.M, 1);
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    row_norm_backward_kernel<T>
        <<<nnk::team_blocks(mode, geo.rows), nnk::team_threads(mode), 0, ix::stream_of(x)>>>(
            g->data_as<T>(), x->data_as<T>(), ptr_or_null<acc_t<T>>(mean),
            rstd->data_as<acc_t<T>>(), ptr_or_null<T>(w), gi->data_as<T>(), geo, mode);
    check_launch(op);
  });
}

// sg / sgx (float64, P elements each) over the (O, P, K) layout; mean / rstd as float64.
std::pair<Tensor, Tensor> channel_sums(const char* op, const Tensor& g, const Tensor& x,
                                       const Tensor& mean, const Tensor& rstd, int64_t O, int64_t P,
                                       int64_t K, int64_t G, int64_t cg) {
  Tensor sg = empty(DimVector{P}, ScalarType::Float64, x->device());
  Tensor sgx = empty(DimVector{P}, ScalarType::Float64, x->device());
  if (P == 0) return {sg, sgx};
  if (O * K == 0) {
    ix::zero(sg);
    ix::zero(sgx);
    return {sg, sgx};
  }
  const Split sp = split_for(P, O * K);
  Tensor pa = empty(DimVector{sp.splits, P}, ScalarType::Float64, x->device());
  Tensor pb = empty(DimVector{sp.splits, P}, ScalarType::Float64, x->device());
  const ChanGeom geo(O, P, K);
  cudaStream_t st = ix::stream_of(x);
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    const dim3 grid(static_cast<unsigned>(P), static_cast<unsigned>(sp.splits));
    channel_sums_kernel<T><<<grid, nnk::kRowBlock, 0, st>>>(
        g->data_as<T>(), x->data_as<T>(), mean->data_as<double>(), rstd->data_as<double>(),
        pa->data_as<double>(), pb->data_as<double>(), geo, G, cg, sp.per);
    check_launch(op);
  });
  sum_parts_kernel<<<blocks_for(P), kBlockSize, 0, st>>>(
      pa->data_as<double>(), pb->data_as<double>(), sg->data_as<double>(), sgx->data_as<double>(),
      P, sp.splits);
  check_launch(op);
  return {sg, sgx};
}

std::tuple<Tensor, Tensor, Tensor> row_norm_forward(const char* op, const Tensor& input,
                                                    const DimVector& normalized_shape,
                                                    const Tensor& weight, const Tensor& bias,
                                                    double eps, bool center) {
  ix::check_cuda(input, op, "input");
  const std::pair<int64_t, int64_t> rm =
      nn::row_norm_shape(op, input, normalized_shape, weight, bias, kDevice);
  const int64_t R = rm.first, M = rm.second;
  DeviceGuard guard(ix::device_index(input));
  Tensor x = nnk::contig(input, op);
  Tensor w = weight ? nnk::contig(weight, x->dtype(), op) : Tensor();
  Tensor b = bias ? nnk::contig(bias, x->dtype(), op) : Tensor();
  Tensor out = empty(x->sizes(), x->dtype(), x->device());
  DimVector ss = nn::row_stat_shape(x, normalized_shape.size());
  // Computed in the compute type, saved in torch's dtype (nn::norm_stat_dtype).
  const ScalarType stat_dt = nn::norm_stat_dtype(input, {&weight, &bias}, !center);
  Tensor mean = empty(ss, nn::norm_acc_dtype(x), x->device());
  Tensor rstd = empty(ss, nn::norm_acc_dtype(x), x->device());
  // Without columns row_norm_shape counts no rows: the statistics' rows are run as empty rows.
  const RowGeom geo{M == 0 ? mean->numel() : R, M, 1, 0, 1};
  launch_row_forward(op, x, w, b, out, center ? mean : Tensor(), rstd, geo, eps, center);
  if (!center && geo.rows > 0) ix::zero(mean);
  return {out, nnk::contig(mean, stat_dt, op), nnk::contig(rstd, stat_dt, op)};
}

std::tuple<Tensor, Tensor, Tensor> row_norm_backward(const char* op, const Tensor& grad,
                                                     const Tensor& input,
                                                     const DimVector& normalized_shape,
                                                     const Tensor& mean, const Tensor& rstd,
                                                     const Tensor& weight, bool input_grad,
                                                     bool weight_grad, bool bias_grad) {
  ix::check_cuda(input, op, "input");
  const std::pair<int64_t, int64_t> rm =
      nn::row_norm_shape(op, input, normalized_shape, weight, Tensor(), kDevice);
  const int64_t R = rm.first, M = rm.second;
  nn::check_row_norm_backward(op, grad, input, mean, rstd, R, kDevice);
  DeviceGuard guard(ix::device_index(input));
  Tensor x = nnk::contig(input, op);
  Tensor g = nnk::contig(grad, x->dtype(), op);
  // The statistics are read in the compute type (whatever dtype they were saved in).
  Tensor m = mean ? nnk::contig(mean, nn::norm_acc_dtype(x), op) : Tensor();
  Tensor rs = nnk::contig(rstd, nn::norm_acc_dtype(x), op);
  Tensor w = weight ? nnk::contig(weight, x->dtype(), op) : Tensor();
  Tensor gi, gw, gb;
  const RowGeom geo{R, M, 1, 0, 1};
  if (input_grad) {
    gi = empty(x->sizes(), x->dtype(), x->device());
    launch_row_backward(op, g, x, m, rs, w, gi, geo);
  }
  if (weight_grad || bias_grad) {
    if (weight_grad) gw = empty(normalized_shape, x->dtype(), x->device());
    if (bias_grad) gb = empty(normalized_shape, x->dtype(), x->device());
    if (M > 0 && R == 0) {
      if (gw) ix::zero(gw);
      if (gb) ix::zero(gb);
    } else if (M > 0) {
      const int64_t chunk = std::max<int64_t>(64, (R + 511) / 512);
      const int64_t chunks = (R + chunk - 1) / chunk;
      const ScalarType at =
          x->dtype() == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
      Tensor pw = empty(DimVector{chunks, M}, at, x->device());
      Tensor pb = empty(DimVector{chunks, M}, at, x->device());
      EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
        using T = scalar_t;
        using A = acc_t<T>;
        const dim3 grid(static_cast<unsigned>((M + kColTile - 1) / kColTile),
                        static_cast<unsigned>(chunks));
        col_param_partial_kernel<T><<<grid, dim3(kColTile, kColRows), 0, ix::stream_of(x)>>>(
            g->data_as<T>(), x->data_as<T>(), ptr_or_null<A>(m), rs->data_as<A>(), pw->data_as<A>(),
            pb->data_as<A>(), R, M, chunk);
        check_launch(op);
        col_param_final_kernel<T><<<blocks_for(M), kBlockSize, 0, ix::stream_of(x)>>>(
            pw->data_as<A>(), pb->data_as<A>(), mut_or_null<T>(gw), mut_or_null<T>(gb), chunks, M);
        check_launch(op);
      });
    }
  }
  return {gi, gw, gb};
}

using RowNorms = nn::RowNormOps<&row_norm_forward, &row_norm_backward>;

// ---- group norm -------------------------------------------------------------------------------

nn::GroupShape group_shape(const char* op, const Tensor& input, int64_t num_groups,
                           const Tensor& weight, const Tensor& bias) {
  ix::check_cuda(input, op, "input");
  return nn::group_norm_shape(op, input, num_groups, weight, bias, kDevice);
}

std::tuple<Tensor, Tensor, Tensor> native_group_norm(const Tensor& input, int64_t num_groups,
                                                     const Tensor& weight, const Tensor& bias,
                                                     double eps) {
  const char* op = "group_norm";
  nn::GroupShape s = group_shape(op, input, num_groups, weight, bias);
  DeviceGuard guard(ix::device_index(input));
  Tensor x = nnk::contig(input, op);
  Tensor w = weight ? nnk::contig(weight, x->dtype(), op) : Tensor();
  Tensor b = bias ? nnk::contig(bias, x->dtype(), op) : Tensor();
  Tensor out = empty(x->sizes(), x->dtype(), x->device());
  Tensor mean = empty(DimVector{s.n, s.g}, nn::norm_acc_dtype(x), x->device());
  Tensor rstd = empty(DimVector{s.n, s.g}, nn::norm_acc_dtype(x), x->device());
  const int64_t cg = s.c / s.g;
  const RowGeom geo{s.n * s.g, cg * s.hw, std::max<int64_t>(s.hw, 1), s.g, cg};
  launch_row_forward(op, x, w, b, out, mean, rstd, geo, eps, true);
  // Group norm saves its statistics in the input's dtype (as torch does on CPU).
  return {out, nnk::contig(mean, x->dtype(), op), nnk::contig(rstd, x->dtype(), op)};
}

std::tuple<Tensor, Tensor, Tensor> native_group_norm_backward(
    const Tensor& grad_out, const Tensor& input, int64_t num_groups, const Tensor& mean,
    const Tensor& rstd, const Tensor& weight, bool input_grad, bool weight_grad, bool bias_grad) {
  const char* op = "group_norm_backward";
  nn::GroupShape s = group_shape(op, input, num_groups, weight, Tensor());
  nn::check_norm_grad(op, grad_out, input);
  EMBER_CHECK(mean->numel() == s.n * s.g && rstd->numel() == s.n * s.g, op,
              ": expected mean and rstd with ", s.n * s.g, " elements (N * num_groups), got ",
              shape_str(mean->sizes()), " and ", shape_str(rstd->sizes()));
  nnk::check_device(input, grad_out, op, "grad_out");
  nnk::check_device(input, mean, op, "mean");
  nnk::check_device(input, rstd, op, "rstd");
  DeviceGuard guard(ix::device_index(input));
  Tensor x = nnk::contig(input, op);
  Tensor g = nnk::contig(grad_out, x->dtype(), op);
  Tensor m = nnk::contig(mean, nn::norm_acc_dtype(x), op);
  Tensor rs = nnk::contig(rstd, nn::norm_acc_dtype(x), op);
  Tensor w = weight ? nnk::contig(weight, x->dtype(), op) : Tensor();
  const int64_t cg = s.c / s.g;
  Tensor gi, gw, gb;
  if (input_grad) {
    gi = empty(x->sizes(), x->dtype(), x->device());
    const RowGeom geo{s.n * s.g, cg * s.hw, std::max<int64_t>(s.hw, 1), s.g, cg};
    launch_row_backward(op, g, x, m, rs, w, gi, geo);
  }
  if (weight_grad || bias_grad) {
    // The statistics as float64 (the sums run in double).
    Tensor md = nnk::contig(m, ScalarType::Float64, op);
    Tensor rd = nnk::contig(rs, ScalarType::Float64, op);
    Tensor sg, sgx;
    std::tie(sg, sgx) = channel_sums(op, g, x, md, rd, s.n, s.c, s.hw, s.g, cg);
    if (weight_grad) gw = nnk::contig(sgx, x->dtype(), op);
    if (bias_grad) gb = nnk::contig(sg, x->dtype(), op);
  }
  return {gi, gw, gb};
}

// ---- batch norm -------------------------------------------------------------------------------

// Partial sums of d = x - x0 and d^2 over slices of channel c of the (N, C, HW) x, x0 the
// channel's first element (a shift that keeps the variance exact to rounding).
template <class T>
__global__ void bn_stats_kernel(const T* x, double* part_s, double* part_s2, ChanGeom geo,
                                int64_t per) {
  const int64_t c = blockIdx.x, y = blockIdx.y, total = geo.O * geo.K;
  const int64_t lo = y * per, hi = lo + per < total ? lo + per : total;
  const double x0 = static_cast<double>(to_op<T>(x[c * geo.K]));
  double s = 0, s2 = 0;
  for (int64_t idx = lo + threadIdx.x; idx < hi; idx += blockDim.x) {
    const int64_t n = geo.outer_of(idx), j = idx - n * geo.K;
    const double d = static_cast<double>(to_op<T>(x[(n * geo.P + c) * geo.K + j])) - x0;
    s += d;
    s2 += d * d;
  }
  s = nnk::team_sum(s, nnk::kBlock);
  s2 = nnk::team_sum(s2, nnk::kBlock);
  if (threadIdx.x == 0) {
    part_s[y * geo.P + c] = s;
    part_s2[y * geo.P + c] = s2;
  }
}

// mean[c] and the biased variance var[c] from the partials of bn_stats_kernel.
template <class T>
__global__ void bn_moments_kernel(const T* x, const double* part_s, const double* part_s2,
                                  double* mean, double* var, int64_t C, int64_t HW, int64_t splits,
                                  double count) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  double s = 0, s2 = 0;
  for (int64_t y = 0; y < splits; ++y) {
    s += part_s[y * C + c];
    s2 += part_s2[y * C + c];
  }
  const double dm_ = s / count;
  mean[c] = static_cast<double>(to_op<T>(x[c * HW])) + dm_;
  const double v = s2 / count - dm_ * dm_;
  var[c] = v > 0.0 ? v : 0.0;
}

// Per channel, in double: invstd, and y = x * scale + shift; with rm / rv (training with running
// statistics) their momentum update (unbiased variance).
__global__ void bn_finalize_kernel(const double* mean, const double* var, const double* w,
                                   const double* b, double* invstd, double* scale, double* shift,
                                   double* rm, double* rv, int64_t C, double eps, double momentum,
                                   double unbias) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const double is = 1.0 / sqrt(var[c] + eps);
  const double wc = w ? w[c] : 1.0, bc = b ? b[c] : 0.0;
  invstd[c] = is;
  scale[c] = is * wc;
  shift[c] = bc - mean[c] * is * wc;
  if (rm) rm[c] = (1 - momentum) * rm[c] + momentum * mean[c];
  if (rv) rv[c] = (1 - momentum) * rv[c] + momentum * var[c] * unbias;
}

template <class T>
__global__ void bn_normalize_kernel(const T* x, T* y, const double* scale, const double* shift,
                                    int64_t total, ChanGeom geo) {
  using A = acc_t<T>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = geo.channel_of(i);
    y[i] = from_op<T>(to_op<T>(x[i]) * static_cast<A>(scale[c]) + static_cast<A>(shift[c]));
  }
}

// gi = g * k + (x - mean) * c1 + c0 with k = w * invstd, c1 = -k * invstd * mean(g * xhat),
// c0 = -k * mean(g) (the means only in training; sg / sgx null otherwise).
template <class T>
__global__ void bn_backward_input_kernel(const T* g, const T* x, const double* mean,
                                         const double* invstd, const double* w, const double* sg,
                                         const double* sgx, T* gi, int64_t total, ChanGeom geo,
                                         double count) {
  using A = acc_t<T>;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = geo.channel_of(i);
    const double k = (w ? w[c] : 1.0) * invstd[c];
    const double mg = sg ? sg[c] / count : 0.0, mgx = sgx ? sgx[c] / count : 0.0;
    const A ka = static_cast<A>(k), c1 = static_cast<A>(-k * invstd[c] * mgx),
            c0 = static_cast<A>(-k * mg), m = static_cast<A>(mean[c]);
    gi[i] = from_op<T>(to_op<T>(g[i]) * ka + (to_op<T>(x[i]) - m) * c1 + c0);
  }
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input, const Tensor& weight,
                                                     const Tensor& bias, const Tensor& running_mean,
                                                     const Tensor& running_var, bool training,
                                                     double momentum, double eps) {
  const char* op = "batch_norm";
  ix::check_cuda(input, op, "input");
  const nn::BatchShape bs =
      nn::batch_norm_shape(op, input, weight, bias, running_mean, running_var, training, kDevice);
  const int64_t N = bs.N, C = bs.C, HW = bs.HW, count = bs.count;
  DeviceGuard guard(ix::device_index(input));
  const Device dev = input->device();
  Tensor x = nnk::contig(input, op);
  Tensor out = empty(x->sizes(), x->dtype(), dev);
  auto f64 = [&](const Tensor& t) {
    return t ? red::contiguous_as(t, ScalarType::Float64, DimVector{}, op) : Tensor();
  };
  auto dptr = [](const Tensor& t) { return t ? t->data_as<double>() : nullptr; };
  Tensor wd = f64(weight), bd = f64(bias);
  Tensor mean, var;
  Tensor rm, rv;  // float64 copies of the running statistics to update (training)
  if (training) {
    mean = empty(DimVector{C}, ScalarType::Float64, dev);
    var = empty(DimVector{C}, ScalarType::Float64, dev);
    if (C > 0) {
      const Split sp = split_for(C, count);
      Tensor ps = empty(DimVector{sp.splits, C}, ScalarType::Float64, dev);
      Tensor ps2 = empty(DimVector{sp.splits, C}, ScalarType::Float64, dev);
      const ChanGeom geo(N, C, HW);
      EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
        using T = scalar_t;
        const dim3 grid(static_cast<unsigned>(C), static_cast<unsigned>(sp.splits));
        bn_stats_kernel<T><<<grid, nnk::kRowBlock, 0, ix::stream_of(x)>>>(
            x->data_as<T>(), ps->data_as<double>(), ps2->data_as<double>(), geo, sp.per);
        check_launch(op);
        bn_moments_kernel<T><<<blocks_for(C), kBlockSize, 0, ix::stream_of(x)>>>(
            x->data_as<T>(), ps->data_as<double>(), ps2->data_as<double>(), mean->data_as<double>(),
            var->data_as<double>(), C, HW, sp.splits, static_cast<double>(count));
        check_launch(op);
      });
    }
    rm = f64(running_mean);
    rv = f64(running_var);
  } else {
    mean = f64(running_mean);
    var = f64(running_var);
  }
  Tensor invstd = empty(DimVector{C}, ScalarType::Float64, dev);
  Tensor scale = empty(DimVector{C}, ScalarType::Float64, dev);
  Tensor shift = empty(DimVector{C}, ScalarType::Float64, dev);
  if (C > 0) {
    const double unbias =
        count > 1 ? static_cast<double>(count) / static_cast<double>(count - 1) : 1.0;
    bn_finalize_kernel<<<blocks_for(C), kBlockSize, 0, ix::stream_of(x)>>>(
        dptr(mean), dptr(var), dptr(wd), dptr(bd), dptr(invstd), dptr(scale), dptr(shift), dptr(rm),
        dptr(rv), C, eps, momentum, unbias);
    check_launch(op);
  }
  const int64_t total = x->numel();
  if (total > 0) {
    EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
      using T = scalar_t;
      bn_normalize_kernel<T><<<blocks_for(total, 4), kBlockSize, 0, ix::stream_of(x)>>>(
          x->data_as<T>(), out->data_as<T>(), dptr(scale), dptr(shift), total, ChanGeom(N, C, HW));
      check_launch(op);
    });
  }
  if (training) {
    // Written back in the running tensors' own dtype and layout.
    if (running_mean && C > 0) {
      red::write_permuted(running_mean, rm, DimVector{}, op);
      running_mean->bump_version();
    }
    if (running_var && C > 0) {
      red::write_permuted(running_var, rv, DimVector{}, op);
      running_var->bump_version();
    }
  }
  const ScalarType stat_dt =
      nn::norm_stat_dtype(input, {&weight, &bias, &running_mean, &running_var});
  Tensor save_mean = nnk::contig(mean, stat_dt, op);
  Tensor save_invstd = nnk::contig(invstd, stat_dt, op);
  if (save_mean.get() == mean.get() && !training) save_mean = ix::clone(mean, op);
  return {out, save_mean, save_invstd};
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(
    const Tensor& grad_out, const Tensor& input, const Tensor& weight, const Tensor& save_mean,
    const Tensor& save_invstd, bool train, bool input_grad, bool weight_grad, bool bias_grad) {
  const char* op = "batch_norm_backward";
  ix::check_cuda(input, op, "input");
  nn::check_floating_input(op, input);
  nn::check_norm_grad(op, grad_out, input);
  EMBER_CHECK(input->dim() >= 2, op, ": expected an input of shape (N, C, *), got ",
              shape_str(input->sizes()));
  const int64_t N = input->size(0), C = input->size(1);
  int64_t HW = 1;
  for (int64_t d = 2; d < input->dim(); ++d) HW *= input->size(d);
  EMBER_CHECK(
      save_mean->numel() == C && save_invstd->numel() == C && (!weight || weight->numel() == C), op,
      ": expected save_mean, save_invstd (and weight) with ", C,
      " elements (one per channel), got ", shape_str(save_mean->sizes()), " and ",
      shape_str(save_invstd->sizes()));
  nnk::check_device(input, grad_out, op, "grad_out");
  nnk::check_device(input, weight, op, "weight");
  nnk::check_device(input, save_mean, op, "save_mean");
  nnk::check_device(input, save_invstd, op, "save_invstd");
  const int64_t count = N * HW;
  DeviceGuard guard(ix::device_index(input));
  Tensor x = nnk::contig(input, op);
  Tensor g = nnk::contig(grad_out, x->dtype(), op);
  auto f64 = [&](const Tensor& t) {
    return t ? red::contiguous_as(t, ScalarType::Float64, DimVector{}, op) : Tensor();
  };
  auto dptr = [](const Tensor& t) { return t ? t->data_as<double>() : nullptr; };
  Tensor md = f64(save_mean), id = f64(save_invstd), wd = f64(weight);
  const bool need_sums = bias_grad || weight_grad || (input_grad && train);
  Tensor sg, sgx;
  if (need_sums) std::tie(sg, sgx) = channel_sums(op, g, x, md, id, N, C, HW, 0, 1);
  Tensor gi, gw, gb;
  if (input_grad) {
    gi = empty(x->sizes(), x->dtype(), x->device());
    const int64_t total = x->numel();
    if (total > 0) {
      EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
        using T = scalar_t;
        bn_backward_input_kernel<T><<<blocks_for(total, 4), kBlockSize, 0, ix::stream_of(x)>>>(
            g->data_as<T>(), x->data_as<T>(), dptr(md), dptr(id), dptr(wd),
            train ? dptr(sg) : nullptr, train ? dptr(sgx) : nullptr, gi->data_as<T>(), total,
            ChanGeom(N, C, HW), static_cast<double>(count));
        check_launch(op);
      });
    }
  }
  if (weight_grad) gw = nnk::contig(sgx, x->dtype(), op);
  if (bias_grad) gb = nnk::contig(sg, x->dtype(), op);
  return {gi, gw, gb};
}

void register_norms() {
  register_kernel("native_layer_norm", DeviceType::CUDA, &RowNorms::layer_norm);
  register_kernel("native_layer_norm_backward", DeviceType::CUDA, &RowNorms::layer_norm_backward);
  register_kernel("_fused_rms_norm", DeviceType::CUDA, &RowNorms::rms_norm);
  register_kernel("_fused_rms_norm_backward", DeviceType::CUDA, &RowNorms::rms_norm_backward);
  register_kernel("native_group_norm", DeviceType::CUDA, &native_group_norm);
  register_kernel("native_group_norm_backward", DeviceType::CUDA, &native_group_norm_backward);
  register_kernel("native_batch_norm", DeviceType::CUDA, &native_batch_norm);
  register_kernel("native_batch_norm_backward", DeviceType::CUDA, &native_batch_norm_backward);
}

}  // namespace
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::register_norms)
