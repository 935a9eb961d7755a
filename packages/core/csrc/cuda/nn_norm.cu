// CUDA kernels of layer norm, RMS norm, group norm and batch norm, forward and backward
// (semantics, shapes and saved statistics: kernels/cpu/nn_norm.cpp).
//   - Layer, RMS and group norm normalize contiguous rows (the trailing dims; a sample's group of
//     channels), each row owned by a team (nn_common.cuh: a warp up to 1024 elements, a block
//     above): mean, then the variance around it (two passes over the row, the second from cache),
//     in float (double for float64).
//   - Per-parameter sums of the backward: over the rows of a layer norm, tiles of 32 columns x
//     row chunks whose partials a second kernel adds in order (deterministic); over the (sample,
//     spatial) planes of a channel (group norm), one block per channel, in double.
//   - Batch norm (its own section below): contiguous NCHW planes or channels_last rows read in
//     place with 16-byte vectors, Welford statistics in float (double for float64) per
//     (channel, split) merged by Chan's formula, three launches per training forward / backward
//     and one per eval forward; parameters and running statistics read and written in place in
//     their own dtypes.
#include <cmath>
#include <initializer_list>
#include <vector>

#include "core/dispatch.h"
#include "cuda/cuda_registry.h"
#include "cuda/cudnn_conv.h"
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
__global__ void row_norm_forward_kernel(const T* x, const acc_t<T>* w, const acc_t<T>* b, T* y,
                                        acc_t<T>* mean, acc_t<T>* rstd, RowGeom geo, double eps,
                                        bool center, int mode) {
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
      if (w) v *= w[p];
      if (b) v += b[p];
    }
    yr[j] = from_op<T>(v);
  }
}

// gi = rstd * (g' - mean(g') - xhat * mean(g' * xhat)), g' = g * weight (mean(g') dropped for
// RMS norm, which has no mean).
template <class T>
__global__ void row_norm_backward_kernel(const T* g, const T* x, const acc_t<T>* mean,
                                         const acc_t<T>* rstd, const acc_t<T>* w, T* gi,
                                         RowGeom geo, int mode) {
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
    if (w) gv *= w[geo.param(r, j)];
    sg += gv;
    sgx += gv * (to_op<T>(xr[j]) - mu) * s;
  }
  sg = nnk::team_sum(sg, mode);
  sgx = nnk::team_sum(sgx, mode);
  const A a = mean ? sg / static_cast<A>(M) : A(0), c = sgx / static_cast<A>(M);
  T* o = gi + r * M;
  for (int64_t j = tm.rank; j < M; j += tm.size) {
    A gv = to_op<T>(gr[j]);
    if (w) gv *= w[geo.param(r, j)];
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

// Step 2: gw[j] / gb[j] = the sums of the chunks' partials (either output may be null), in the
// compute type (rounded to the parameter's dtype afterwards).
template <class T>
__global__ void col_param_final_kernel(const acc_t<T>* pw, const acc_t<T>* pb, acc_t<T>* gw,
                                       acc_t<T>* gb, int64_t chunks, int64_t M) {
  using A = acc_t<T>;
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= M) return;
  A aw = 0, ab = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    aw += pw[c * M + j];
    ab += pb[c * M + j];
  }
  if (gw) gw[j] = aw;
  if (gb) gb[j] = ab;
}

// Index arithmetic of the (O, P, K) layouts (group norm's parameter sums): the sample of the
// idx-th element of a channel, with 32-bit multiply-shift division when every index fits.
struct ChanGeom {
  int64_t O, P, K;
  bool fast;
  ew::IntDivider kdiv;
  ChanGeom(int64_t o, int64_t p, int64_t k)
      : O(o), P(p), K(k), fast(o * p * k <= ew::kIndexLimit && p >= 1 && k >= 1) {
    if (fast) kdiv = ew::IntDivider(static_cast<uint32_t>(k));
  }
  // o of the idx-th element (idx < O * K) of a channel.
  __device__ __forceinline__ int64_t outer_of(int64_t idx) const {
    return fast ? int64_t(kdiv.div(static_cast<uint32_t>(idx))) : idx / K;
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
// contiguous x; w, b: contiguous in the compute type nn::norm_acc_dtype(x) or null (a float32
// weight of a bfloat16 / float16 input is applied unrounded and the output rounded once, as
// torch's mixed-type kernels and the CPU's); mean / rstd in nn::norm_acc_dtype(x).
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
            x->data_as<T>(), ptr_or_null<acc_t<T>>(w), ptr_or_null<acc_t<T>>(b), y->data_as<T>(),
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
            rstd->data_as<acc_t<T>>(), ptr_or_null<acc_t<T>>(w), gi->data_as<T>(), geo, mode);
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
  // (RMS norm, like torch's composite one, takes a weight of another dtype)
  if (center) nn::check_norm_param_dtypes(op, input, {{&weight, "weight"}, {&bias, "bias"}});
  const int64_t R = rm.first, M = rm.second;
  DeviceGuard guard(ix::device_index(input));
  Tensor x = nnk::contig(input, op);
  Tensor w = weight ? nnk::contig(weight, nn::norm_acc_dtype(x), op) : Tensor();
  Tensor b = bias ? nnk::contig(bias, nn::norm_acc_dtype(x), op) : Tensor();
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
  Tensor w = weight ? nnk::contig(weight, nn::norm_acc_dtype(x), op) : Tensor();
  // Parameter gradients in the weight's dtype (float32 for a mixed-precision weight, as torch).
  const ScalarType param_dt = weight ? weight->dtype() : x->dtype();
  Tensor gi, gw, gb;
  const RowGeom geo{R, M, 1, 0, 1};
  if (input_grad) {
    gi = empty(x->sizes(), x->dtype(), x->device());
    launch_row_backward(op, g, x, m, rs, w, gi, geo);
  }
  if (weight_grad || bias_grad) {
    const ScalarType at = nn::norm_acc_dtype(x);
    if (weight_grad) gw = empty(normalized_shape, at, x->device());
    if (bias_grad) gb = empty(normalized_shape, at, x->device());
    if (M > 0 && R == 0) {
      if (gw) ix::zero(gw);
      if (gb) ix::zero(gb);
    } else if (M > 0) {
      const int64_t chunk = std::max<int64_t>(64, (R + 511) / 512);
      const int64_t chunks = (R + chunk - 1) / chunk;
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
            pw->data_as<A>(), pb->data_as<A>(), mut_or_null<A>(gw), mut_or_null<A>(gb), chunks, M);
        check_launch(op);
      });
    }
    if (gw) gw = nnk::contig(gw, param_dt, op);
    if (gb) gb = nnk::contig(gb, param_dt, op);
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
  Tensor w = weight ? nnk::contig(weight, nn::norm_acc_dtype(x), op) : Tensor();
  Tensor b = bias ? nnk::contig(bias, nn::norm_acc_dtype(x), op) : Tensor();
  Tensor out = empty(x->sizes(), x->dtype(), x->device());
  Tensor mean = empty(DimVector{s.n, s.g}, nn::norm_acc_dtype(x), x->device());
  Tensor rstd = empty(DimVector{s.n, s.g}, nn::norm_acc_dtype(x), x->device());
  const int64_t cg = s.c / s.g;
  const RowGeom geo{s.n * s.g, cg * s.hw, std::max<int64_t>(s.hw, 1), s.g, cg};
  launch_row_forward(op, x, w, b, out, mean, rstd, geo, eps, true);
  // Group norm saves its statistics in the input's dtype (as torch does on CPU), float32 for a
  // float16 / bfloat16 input with a float32 parameter.
  const ScalarType stat_dt = nn::norm_stat_dtype(input, {&weight, &bias});
  return {out, nnk::contig(mean, stat_dt, op), nnk::contig(rstd, stat_dt, op)};
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
  Tensor w = weight ? nnk::contig(weight, nn::norm_acc_dtype(x), op) : Tensor();
  // Parameter gradients in the weight's dtype (float32 for a mixed-precision weight, as torch).
  const ScalarType param_dt = weight ? weight->dtype() : x->dtype();
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
    if (weight_grad) gw = nnk::contig(sgx, param_dt, op);
    if (bias_grad) gb = nnk::contig(sg, param_dt, op);
  }
  return {gi, gw, gb};
}

// ---- batch norm -------------------------------------------------------------------------------
// The input is read in one of two layouts (bn_geom, on the host):
//   planes: contiguous (N, C, HW) with HW > 1: channel c of sample n is the plane of HW
//     elements at (n * C + c) * HW;
//   rows: R = N * HW rows of C channels, element (r, c) at r * C + c: a channels_last input
//     (NHWC / NDHWC dense, read in place; the results are channels_last too) or a contiguous one
//     with HW == 1.
// V elements are accessed at a time (one 16-byte vector of the same plane or row) when the inner
// extent (HW for planes, C for rows) is a multiple of V and every data pointer is 16-byte aligned;
// otherwise V = 1. Indices advance by counters, never by a per-element division.
// Training forward: (1) bn_reduce_*_kernel<BnStats>: per (split, channel) Welford partials (count,
// mean, M2) in the compute type A; (2) bn_forward_finalize_kernel: one warp per channel combines
// a channel's partials (Chan's formula), writes save_mean / save_invstd in their dtype, updates
// the running statistics in place in theirs and computes the channel's scale / shift (in double,
// once per channel); (3) bn_apply_*_kernel: y = x * scale + shift. Eval forward: bn_apply alone,
// each thread computing its channels' scale / shift from the running statistics, weight and bias
// (the threads of sample 0 / row 0 also write save_mean / save_invstd). Backward: the same three
// steps with BnSums (sum g and sum g * (x - mean)), bn_backward_finalize_kernel (grad_weight,
// grad_bias, the input gradient's coefficients) and the input gradient; eval backward without
// parameter gradients is the last step alone.

constexpr int kBnThreads = 256;      // threads of every batch norm block
constexpr int kBnMinPerThread = 16;  // elements per thread a reduction split gets at least
constexpr int kBnMaxBlocks = 1024;   // reduction blocks wanted over all channels

template <class T, int V>
struct alignas(sizeof(T) * V) BnPack {
  T v[V];
};

template <class T, int V>
__device__ __forceinline__ void bn_load(const T* p, acc_t<T> (&out)[V]) {
  const BnPack<T, V> pk = *reinterpret_cast<const BnPack<T, V>*>(p);
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = to_op<T>(pk.v[k]);
}

template <class T, int V>
__device__ __forceinline__ void bn_store(T* p, const acc_t<T> (&in)[V]) {
  BnPack<T, V> pk;
#pragma unroll
  for (int k = 0; k < V; ++k) pk.v[k] = from_op<T>(in[k]);
  *reinterpret_cast<BnPack<T, V>*>(p) = pk;
}

// A per-channel vector (weight, bias, running / saved statistics, parameter gradients) read and
// written in place in its own dtype (any real dtype) with its stride in bytes; dt < 0: absent.
struct ChanVec {
  char* p;
  int64_t stride;
  int dt;

  __device__ double get(int64_t c, double absent) const {
    if (dt < 0) return absent;
    const char* q = p + c * stride;
    switch (static_cast<ScalarType>(dt)) {
      case ScalarType::Float32:
        return *reinterpret_cast<const float*>(q);
      case ScalarType::Float64:
        return *reinterpret_cast<const double*>(q);
      case ScalarType::Float16:
        return to_op<Half>(*reinterpret_cast<const Half*>(q));
      case ScalarType::BFloat16:
        return to_op<BFloat16>(*reinterpret_cast<const BFloat16*>(q));
      case ScalarType::Bool:
        return *reinterpret_cast<const uint8_t*>(q) != 0 ? 1.0 : 0.0;
      case ScalarType::UInt8:
        return *reinterpret_cast<const uint8_t*>(q);
      case ScalarType::Int8:
        return *reinterpret_cast<const int8_t*>(q);
      case ScalarType::Int16:
        return *reinterpret_cast<const int16_t*>(q);
      case ScalarType::Int32:
        return *reinterpret_cast<const int32_t*>(q);
      case ScalarType::Int64:
        return static_cast<double>(*reinterpret_cast<const int64_t*>(q));
      default:
        return absent;  // not reached: the host converts other dtypes (bn_chan_vec)
    }
  }

  __device__ void set(int64_t c, double v) const {
    if (dt < 0) return;
    char* q = p + c * stride;
    switch (static_cast<ScalarType>(dt)) {
      case ScalarType::Float32:
        *reinterpret_cast<float*>(q) = static_cast<float>(v);
        break;
      case ScalarType::Float64:
        *reinterpret_cast<double*>(q) = v;
        break;
      case ScalarType::Float16:
        *reinterpret_cast<Half*>(q) = from_op<Half>(v);
        break;
      case ScalarType::BFloat16:
        *reinterpret_cast<BFloat16*>(q) = from_op<BFloat16>(v);
        break;
      case ScalarType::Bool:
        *reinterpret_cast<uint8_t*>(q) = v != 0.0 ? 1 : 0;
        break;
      case ScalarType::UInt8:
        *reinterpret_cast<uint8_t*>(q) = static_cast<uint8_t>(v);
        break;
      case ScalarType::Int8:
        *reinterpret_cast<int8_t*>(q) = static_cast<int8_t>(v);
        break;
      case ScalarType::Int16:
        *reinterpret_cast<int16_t*>(q) = static_cast<int16_t>(v);
        break;
      case ScalarType::Int32:
        *reinterpret_cast<int32_t*>(q) = static_cast<int32_t>(v);
        break;
      case ScalarType::Int64:
        *reinterpret_cast<int64_t*>(q) = static_cast<int64_t>(v);
        break;
      default:
        break;
    }
  }
};

// Welford state: n values, their mean and the sum of squared deviations from it.
template <class A>
struct Welford {
  A n, mean, m2;
};

template <class A>
__device__ __forceinline__ void welford_add(Welford<A>& s, A x) {
  s.n += A(1);
  const A d = x - s.mean;
  s.mean += d / s.n;
  s.m2 += d * (x - s.mean);
}

// Chan's combination of two states (either may be empty).
template <class A>
__device__ __forceinline__ Welford<A> welford_merge(const Welford<A>& a, const Welford<A>& b) {
  if (b.n == A(0)) return a;
  if (a.n == A(0)) return b;
  const A n = a.n + b.n, f = b.n / n, d = b.mean - a.mean;
  return {n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
}

// The two reductions the kernels run: a policy loads V elements at a flat offset, adds one
// element (with its channel's context) to a state, merges and shuffles states and stores a
// partial at slot i of K arrays of `slots` values.
template <class T>
struct BnStats {  // x's Welford statistics
  using A = acc_t<T>;
  using S = Welford<A>;
  static constexpr int K = 3;
  const T* x;
  template <int V>
  __device__ __forceinline__ void load(int64_t off, A (&xv)[V], A (&gv)[V]) const {
    bn_load<T, V>(x + off, xv);
#pragma unroll
    for (int k = 0; k < V; ++k) gv[k] = A(0);
  }
  __device__ __forceinline__ A context(int64_t) const { return A(0); }
  __device__ __forceinline__ static S empty() { return {A(0), A(0), A(0)}; }
  __device__ __forceinline__ static void add(S& s, A, A xv, A) { welford_add(s, xv); }
  __device__ __forceinline__ static S merge(const S& a, const S& b) { return welford_merge(a, b); }
  __device__ __forceinline__ static S shfl(const S& s, int o) {
    return {nnk::shfl_xor(s.n, o), nnk::shfl_xor(s.mean, o), nnk::shfl_xor(s.m2, o)};
  }
  __device__ __forceinline__ static void store(A* part, int64_t slots, int64_t i, const S& s) {
    part[i] = s.n;
    part[slots + i] = s.mean;
    part[2 * slots + i] = s.m2;
  }
};

template <class A>
struct SumPair {
  A sg, sgx;
};

template <class T>
struct BnSums {  // sum g and sum g * (x - mean[c])
  using A = acc_t<T>;
  using S = SumPair<A>;
  static constexpr int K = 2;
  const T* g;
  const T* x;
  ChanVec mean;
  template <int V>
  __device__ __forceinline__ void load(int64_t off, A (&xv)[V], A (&gv)[V]) const {
    bn_load<T, V>(x + off, xv);
    bn_load<T, V>(g + off, gv);
  }
  __device__ __forceinline__ A context(int64_t c) const { return static_cast<A>(mean.get(c, 0.0)); }
  __device__ __forceinline__ static S empty() { return {A(0), A(0)}; }
  __device__ __forceinline__ static void add(S& s, A m, A xv, A gv) {
    s.sg += gv;
    s.sgx += gv * (xv - m);
  }
  __device__ __forceinline__ static S merge(const S& a, const S& b) {
    return {a.sg + b.sg, a.sgx + b.sgx};
  }
  __device__ __forceinline__ static S shfl(const S& s, int o) {
    return {nnk::shfl_xor(s.sg, o), nnk::shfl_xor(s.sgx, o)};
  }
  __device__ __forceinline__ static void store(A* part, int64_t slots, int64_t i, const S& s) {
    part[i] = s.sg;
    part[slots + i] = s.sgx;
  }
};

// Planes: block (c, y) reduces vectors [y * per, min((y + 1) * per, N * HWv)) of channel c, the
// vector q being vector j = q % HWv of plane n = q / HWv; thread t takes q = lo + t, lo + t + 256,
// ... with (n, j) stepped by (256 / HWv, 256 % HWv) and a carry. The block's states merge by warp
// butterflies, then thread 0 merges the warps' in order and stores partial [y * C + c].
template <class P, int V>
__global__ void bn_reduce_planes_kernel(P pol, typename P::A* part, int64_t C, int64_t HW,
                                        int64_t HWv, int64_t total_v, int64_t per) {
  using A = typename P::A;
  using S = typename P::S;
  const int64_t c = blockIdx.x, y = blockIdx.y;
  const int64_t lo = y * per, hi = lo + per < total_v ? lo + per : total_v;
  const A ctx = pol.context(c);
  S s = P::empty();
  const int64_t step = blockDim.x;
  int64_t q = lo + threadIdx.x;
  if (q < hi) {
    int64_t n = q / HWv, j = q - n * HWv;
    const int64_t sn = step / HWv, sj = step - sn * HWv;
    for (; q < hi; q += step) {
      A xv[V], gv[V];
      pol.template load<V>((n * C + c) * HW + j * V, xv, gv);
#pragma unroll
      for (int k = 0; k < V; ++k) P::add(s, ctx, xv[k], gv[k]);
      n += sn;
      j += sj;
      if (j >= HWv) {
        j -= HWv;
        ++n;
      }
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s = P::merge(s, P::shfl(s, o));
  __shared__ S warp_states[kBnThreads / 32];
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
  if (lane == 0) warp_states[wid] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < nw; ++w) s = P::merge(s, warp_states[w]);
    P::store(part, int64_t(gridDim.y) * C, y * C + c, s);
  }
}

// Rows: block (bx, by) of bx * by = 256 threads (bx a power of two up to 32); thread (tx, ty)
// owns channel vector cv = blockIdx.x * bx + tx (channels cv * V .. cv * V + V - 1) and reduces
// rows lo + ty, lo + ty + by, ... < hi of split y = blockIdx.y; the by states of each channel
// then merge in a shared tree and row 0 of the block stores partial [y * C + channel].
template <class P, int V>
__global__ void bn_reduce_rows_kernel(P pol, typename P::A* part, int64_t C, int64_t Cv, int64_t R,
                                      int64_t per) {
  using A = typename P::A;
  using S = typename P::S;
  const int64_t cv = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool active = cv < Cv;
  const int64_t y = blockIdx.y, lo = y * per, hi = lo + per < R ? lo + per : R;
  S s[V];
  A ctx[V];
#pragma unroll
  for (int k = 0; k < V; ++k) {
    s[k] = P::empty();
    ctx[k] = active ? pol.context(cv * V + k) : A(0);
  }
  if (active) {
    for (int64_t r = lo + threadIdx.y; r < hi; r += blockDim.y) {
      A xv[V], gv[V];
      pol.template load<V>(r * C + cv * V, xv, gv);
#pragma unroll
      for (int k = 0; k < V; ++k) P::add(s[k], ctx[k], xv[k], gv[k]);
    }
  }
  __shared__ S sh[kBnThreads];
  const int t = threadIdx.y * blockDim.x + threadIdx.x;
  for (int k = 0; k < V; ++k) {
    sh[t] = s[k];
    __syncthreads();
    for (int h = blockDim.y / 2; h > 0; h >>= 1) {
      if (static_cast<int>(threadIdx.y) < h) sh[t] = P::merge(sh[t], sh[t + h * blockDim.x]);
      __syncthreads();
    }
    if (threadIdx.y == 0 && active)
      P::store(part, int64_t(gridDim.y) * C, y * C + cv * V + k, sh[threadIdx.x]);
    __syncthreads();  // sh is rewritten for the next k
  }
}

template <class A>
__device__ __forceinline__ Welford<A> bn_load_partial(const A* part, int64_t slots, int64_t i,
                                                      Welford<A>*) {
  return {part[i], part[slots + i], part[2 * slots + i]};
}
template <class A>
__device__ __forceinline__ SumPair<A> bn_load_partial(const A* part, int64_t slots, int64_t i,
                                                      SumPair<A>*) {
  return {part[i], part[slots + i]};
}

// One warp per channel c: lanes merge partials y = lane, lane + 32, ... of the `splits` ones,
// then the warp's states merge by butterflies; lane 0 has the channel's.
template <class P>
__device__ __forceinline__ typename P::S bn_merge_partials(const typename P::A* part,
                                                           int64_t splits, int64_t C, int64_t c,
                                                           int lane) {
  using S = typename P::S;
  const int64_t slots = splits * C;
  S s = P::empty();
  for (int64_t y = lane; y < splits; y += 32)
    s = P::merge(s, bn_load_partial(part, slots, y * C + c, static_cast<S*>(nullptr)));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s = P::merge(s, P::shfl(s, o));
  return s;
}

// Training (part set): the channel's mean and biased variance from its partials; save_mean /
// save_invstd, the running statistics' momentum update (unbiased variance), and coef[c] = scale,
// coef[C + c] = shift. Eval (part null, no input elements): save_mean = running_mean, save_invstd
// = 1 / sqrt(running_var + eps). One warp per channel (blockDim a multiple of 32).
template <class T>
__global__ void bn_forward_finalize_kernel(const acc_t<T>* part, int64_t splits, int64_t C,
                                           double count, double eps, double momentum, ChanVec w,
                                           ChanVec b, ChanVec rm, ChanVec rv, ChanVec save_mean,
                                           ChanVec save_invstd, acc_t<T>* coef) {
  using A = acc_t<T>;
  const int64_t c = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (c >= C) return;  // whole warps
  if (!part) {
    if (lane == 0) {
      save_mean.set(c, rm.get(c, 0.0));
      save_invstd.set(c, 1.0 / sqrt(rv.get(c, 0.0) + eps));
    }
    return;
  }
  const Welford<A> s = bn_merge_partials<BnStats<T>>(part, splits, C, c, lane);
  if (lane != 0) return;
  const double mean = static_cast<double>(s.mean);
  const double v = static_cast<double>(s.m2) / count;
  const double var = v < 0.0 ? 0.0 : v;  // NaN stays NaN
  const double invstd = 1.0 / sqrt(var + eps);
  const double scale = invstd * w.get(c, 1.0);
  coef[c] = static_cast<A>(scale);
  coef[C + c] = static_cast<A>(b.get(c, 0.0) - mean * scale);
  save_mean.set(c, mean);
  save_invstd.set(c, invstd);
  if (rm.dt >= 0) rm.set(c, (1 - momentum) * rm.get(c, 0.0) + momentum * mean);
  if (rv.dt >= 0) rv.set(c, (1 - momentum) * rv.get(c, 0.0) + momentum * var * count / (count - 1));
}

// Per channel from the partial sums: grad_weight = sum g * xhat, grad_bias = sum g (either
// absent), and with coef the input gradient's coefficients gi = g * k + (x - m) * c1 + c0:
// coef[c] = k = w * invstd, coef[C + c] = c1 = -k * invstd * mean(g * xhat), coef[2C + c] = c0 =
// -k * mean(g), coef[3C + c] = m = mean (the means only in training).
template <class T>
__global__ void bn_backward_finalize_kernel(const acc_t<T>* part, int64_t splits, int64_t C,
                                            double count, bool train, ChanVec w, ChanVec mean,
                                            ChanVec invstd, ChanVec gw, ChanVec gb,
                                            acc_t<T>* coef) {
  using A = acc_t<T>;
  const int64_t c = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (c >= C) return;  // whole warps
  const SumPair<A> s = bn_merge_partials<BnSums<T>>(part, splits, C, c, lane);
  if (lane != 0) return;
  const double is = invstd.get(c, 0.0);
  const double sg = static_cast<double>(s.sg), sgx = static_cast<double>(s.sgx) * is;
  gw.set(c, sgx);
  gb.set(c, sg);
  if (!coef) return;
  const double k = w.get(c, 1.0) * is;
  const double mg = train ? sg / count : 0.0, mgx = train ? sgx / count : 0.0;
  coef[c] = static_cast<A>(k);
  coef[C + c] = static_cast<A>(-k * is * mgx);
  coef[2 * C + c] = static_cast<A>(-k * mg);
  coef[3 * C + c] = static_cast<A>(mean.get(c, 0.0));
}

// A channel's coefficients of the elementwise step: forward y = x * k + c0, backward
// gi = g * k + (x - m) * c1 + c0.
template <class A>
struct BnChanCoef {
  A k, c1, c0, m;
};

// Where the coefficients come from: pre (the finalize kernels' coef arrays: forward k, c0;
// backward k, c1, c0, m, each C values) or, when pre is null, the parameters: forward eval from
// the running statistics (mean / var), weight and bias (and save_mean / save_invstd written from
// them when present), backward eval (no sums) k = weight * invstd (invstd in var).
template <class A>
struct BnCoef {
  const A* pre;
  int64_t C;
  ChanVec w, b, mean, var, save_mean, save_invstd;
  double eps;

  template <bool kBackward>
  __device__ __forceinline__ BnChanCoef<A> get(int64_t c) const {
    BnChanCoef<A> r{A(0), A(0), A(0), A(0)};
    if (kBackward) {
      if (pre) {
        r.k = pre[c];
        r.c1 = pre[C + c];
        r.c0 = pre[2 * C + c];
        r.m = pre[3 * C + c];
      } else {
        r.k = static_cast<A>(w.get(c, 1.0) * var.get(c, 0.0));
      }
    } else if (pre) {
      r.k = pre[c];
      r.c0 = pre[C + c];
    } else {
      const double scale = w.get(c, 1.0) / sqrt(var.get(c, 0.0) + eps);
      r.k = static_cast<A>(scale);
      r.c0 = static_cast<A>(b.get(c, 0.0) - mean.get(c, 0.0) * scale);
    }
    return r;
  }
  // Forward eval: the saved statistics of channel c (called once per channel).
  __device__ __forceinline__ void save(int64_t c) const {
    if (pre || save_mean.dt < 0) return;
    save_mean.set(c, mean.get(c, 0.0));
    save_invstd.set(c, 1.0 / sqrt(var.get(c, 0.0) + eps));
  }
};

template <class T, int V, bool kBackward>
__device__ __forceinline__ void bn_apply_vec(const T* x, const T* g, T* out, int64_t off,
                                             const BnChanCoef<acc_t<T>>* cc) {
  using A = acc_t<T>;
  A xv[V], o[V];
  bn_load<T, V>(x + off, xv);
  if constexpr (kBackward) {
    A gv[V];
    bn_load<T, V>(g + off, gv);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const BnChanCoef<A>& q = cc[e];
      o[e] = gv[e] * q.k + (xv[e] - q.m) * q.c1 + q.c0;
    }
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) o[e] = xv[e] * cc[e].k + cc[e].c0;
  }
  bn_store<T, V>(out + off, o);
}

// Planes: block (p, y) does vectors j = y * blockDim + t, + gridDim.y * blockDim, ... < HWv of
// plane p (and p + gridDim.x, ...), channel p % C; forward eval's saved statistics are written by
// thread 0 of the blocks y = 0 of the planes p < C (sample 0).
template <class T, int V, bool kBackward>
__global__ void bn_apply_planes_kernel(const T* x, const T* g, T* out, BnCoef<acc_t<T>> cf,
                                       int64_t NC, int64_t C, int64_t HW, int64_t HWv) {
  using A = acc_t<T>;
  for (int64_t p = blockIdx.x; p < NC; p += gridDim.x) {
    const int64_t c = p % C;
    BnChanCoef<A> cc[V];
    cc[0] = cf.template get<kBackward>(c);
#pragma unroll
    for (int e = 1; e < V; ++e) cc[e] = cc[0];
    if (!kBackward && p < C && blockIdx.y == 0 && threadIdx.x == 0) cf.save(c);
    const int64_t base = p * HW;
    for (int64_t j = int64_t(blockIdx.y) * blockDim.x + threadIdx.x; j < HWv;
         j += int64_t(gridDim.y) * blockDim.x)
      bn_apply_vec<T, V, kBackward>(x, g, out, base + j * V, cc);
  }
}

// Rows: thread (tx, ty) of block (bx, y) owns channel vector cv = bx * blockDim.x + tx and does
// rows y * blockDim.y + ty, + gridDim.y * blockDim.y, ... < R; forward eval's saved statistics
// are written by the threads ty = 0 of the blocks y = 0.
template <class T, int V, bool kBackward>
__global__ void bn_apply_rows_kernel(const T* x, const T* g, T* out, BnCoef<acc_t<T>> cf, int64_t C,
                                     int64_t Cv, int64_t R) {
  using A = acc_t<T>;
  const int64_t cv = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (cv >= Cv) return;
  BnChanCoef<A> cc[V];
#pragma unroll
  for (int e = 0; e < V; ++e) {
    cc[e] = cf.template get<kBackward>(cv * V + e);
    if (!kBackward && blockIdx.y == 0 && threadIdx.y == 0) cf.save(cv * V + e);
  }
  for (int64_t r = int64_t(blockIdx.y) * blockDim.y + threadIdx.y; r < R;
       r += int64_t(gridDim.y) * blockDim.y)
    bn_apply_vec<T, V, kBackward>(x, g, out, r * C + cv * V, cc);
}

// ---- batch norm: host side ----

// The layout and launch geometry of one batch norm input (see "batch norm" above).
struct BnGeom {
  bool rows;
  int64_t N, C, HW, R;  // R = N * HW
  int V;                // elements per access
  int bx, by;           // rows: block shape
  int64_t inner() const { return rows ? C : HW; }
  int64_t inner_v() const { return inner() / V; }
};

// vmax (16 bytes of elements) when the inner extent is a multiple of it and every pointer is
// 16-byte aligned, else 1.
inline int bn_vec(int vmax, int64_t inner, std::initializer_list<const void*> ptrs) {
  if (inner % vmax != 0) return 1;
  for (const void* p : ptrs)
    if (p && reinterpret_cast<uintptr_t>(p) % 16 != 0) return 1;
  return vmax;
}

inline BnGeom bn_geom(bool channels_last, int64_t N, int64_t C, int64_t HW, int64_t itemsize,
                      std::initializer_list<const void*> ptrs) {
  BnGeom g{channels_last || HW == 1, N, C, HW, N * HW, 1, 1, kBnThreads};
  g.V = bn_vec(static_cast<int>(16 / itemsize), g.inner(), ptrs);
  if (g.rows) {
    int bx = 1;
    while (bx < 32 && bx < g.inner_v()) bx *= 2;
    g.bx = bx;
    g.by = kBnThreads / bx;
  }
  return g;
}

// Splits of a reduction: blocks_x blocks side by side (channels or channel groups), each of
// `total` units (vectors or rows) cut into `splits` slices of `per` (no empty slice), about
// kBnMaxBlocks blocks in all and no slice under min_per units.
struct BnSplit {
  int64_t splits, per;
};
inline BnSplit bn_split(int64_t blocks_x, int64_t total, int64_t min_per) {
  const int64_t bx = std::max<int64_t>(blocks_x, 1);
  int64_t splits = std::max<int64_t>(1, (kBnMaxBlocks + bx - 1) / bx);
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, (total + min_per - 1) / min_per));
  const int64_t per = std::max<int64_t>(1, (total + splits - 1) / splits);
  return {std::max<int64_t>(1, (total + per - 1) / per), per};
}

// The reduction's plan for geometry g: grid and split.
inline std::pair<dim3, BnSplit> bn_reduce_plan(const BnGeom& g) {
  if (g.rows) {
    const int64_t gx = (g.inner_v() + g.bx - 1) / g.bx;
    const BnSplit sp = bn_split(gx, g.R, int64_t(kBnMinPerThread) * g.by);
    return {dim3(static_cast<unsigned>(gx), static_cast<unsigned>(sp.splits)), sp};
  }
  const BnSplit sp =
      bn_split(g.C, g.N * g.inner_v(), std::max<int64_t>(1, kBnMinPerThread * kBnThreads / g.V));
  return {dim3(static_cast<unsigned>(g.C), static_cast<unsigned>(sp.splits)), sp};
}

template <class P, int V>
void bn_launch_reduce(const BnGeom& g, const P& pol, typename P::A* part, const dim3& grid,
                      const BnSplit& sp, cudaStream_t st, const char* op) {
  if (g.rows) {
    bn_reduce_rows_kernel<P, V>
        <<<grid, dim3(g.bx, g.by), 0, st>>>(pol, part, g.C, g.inner_v(), g.R, sp.per);
  } else {
    bn_reduce_planes_kernel<P, V>
        <<<grid, kBnThreads, 0, st>>>(pol, part, g.C, g.HW, g.inner_v(), g.N * g.inner_v(), sp.per);
  }
  check_launch(op);
}

// Runs the reduction of policy P (partials: P::K arrays of splits * C values at part).
template <class T, class P>
void bn_reduce(const BnGeom& g, const P& pol, acc_t<T>* part, const dim3& grid, const BnSplit& sp,
               cudaStream_t st, const char* op) {
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
  if (g.V == kVec)
    bn_launch_reduce<P, kVec>(g, pol, part, grid, sp, st, op);
  else
    bn_launch_reduce<P, 1>(g, pol, part, grid, sp, st, op);
}

template <class T, int V, bool kBackward>
void bn_launch_apply(const BnGeom& g, const T* x, const T* gr, T* out, const BnCoef<acc_t<T>>& cf,
                     cudaStream_t st, const char* op) {
  if (g.rows) {
    const int64_t gx = (g.inner_v() + g.bx - 1) / g.bx;
    const int64_t gy = std::min<int64_t>((g.R + g.by - 1) / g.by, 65535);
    bn_apply_rows_kernel<T, V, kBackward>
        <<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), dim3(g.bx, g.by), 0, st>>>(
            x, gr, out, cf, g.C, g.inner_v(), g.R);
  } else {
    const int64_t hwv = g.inner_v(), nc = g.N * g.C;
    const int64_t threads =
        std::min<int64_t>(kBnThreads, std::max<int64_t>(32, (hwv + 31) / 32 * 32));
    const int64_t gx = std::min<int64_t>(nc, 0x7fffffff);
    const int64_t gy = std::min<int64_t>((hwv + threads - 1) / threads, 65535);
    bn_apply_planes_kernel<T, V, kBackward>
        <<<dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)),
           static_cast<unsigned>(threads), 0, st>>>(x, gr, out, cf, nc, g.C, g.HW, hwv);
  }
  check_launch(op);
}

// The elementwise step (forward: y from x; backward: gi from g and x).
template <class T, bool kBackward>
void bn_apply(const BnGeom& g, const T* x, const T* gr, T* out, const BnCoef<acc_t<T>>& cf,
              cudaStream_t st, const char* op) {
  constexpr int kVec = static_cast<int>(16 / sizeof(T));
  if (g.V == kVec)
    bn_launch_apply<T, kVec, kBackward>(g, x, gr, out, cf, st, op);
  else
    bn_launch_apply<T, 1, kBackward>(g, x, gr, out, cf, st, op);
}

// Warp-per-channel launches of the finalize kernels.
inline unsigned bn_warp_blocks(int64_t C) {
  return static_cast<unsigned>((C * 32 + kBnThreads - 1) / kBnThreads);
}

// Whether the kernels read / write dtype dt in place (every real dtype).
inline bool bn_direct_dtype(ScalarType dt) {
  return dt != ScalarType::Complex64 && dt != ScalarType::Complex128;
}

// t (C values) as a ChanVec: a 1-d tensor of a real dtype in place; anything else through a
// contiguous copy (float64 for other dtypes), kept alive in `keep`.
ChanVec bn_chan_vec(const Tensor& t, std::vector<Tensor>& keep, const char* op) {
  if (!t) return ChanVec{nullptr, 0, -1};
  Tensor u = t;
  if (!bn_direct_dtype(t->dtype()))
    u = nnk::contig(t, ScalarType::Float64, op);
  else if (t->dim() != 1)
    u = nnk::contig(t, op);
  keep.push_back(u);
  const int64_t stride = u->dim() == 1 ? u->stride(0) : 1;
  return ChanVec{u->data(), stride * u->itemsize(), static_cast<int>(u->dtype())};
}

// The permutation that makes a channels_last tensor's dims contiguous: (0, 2, ..., d - 1, 1).
DimVector bn_cl_perm(int64_t dim) {
  DimVector p{0};
  for (int64_t d = 2; d < dim; ++d) p.push_back(d);
  p.push_back(1);
  return p;
}

// t (x's sizes) with its data in the kernels' layout and dtype dt: channels_last or contiguous.
Tensor bn_in_layout(const Tensor& t, ScalarType dt, bool channels_last, const char* op) {
  if (!channels_last) return nnk::contig(t, dt, op);
  if (t->dtype() == dt && cudnn::channels_last_dense(t)) return t;
  // A contiguous (N, *, C) copy: the channels_last order of t's elements.
  return red::contiguous_as(t, dt, bn_cl_perm(t->dim()), op);
}

Tensor bn_empty_like(const Tensor& x, bool channels_last) {
  if (channels_last)
    return empty_strided(x->sizes(), cudnn::channels_last_strides(x->sizes()), x->dtype(),
                         x->device());
  return empty(x->sizes(), x->dtype(), x->device());
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
  // channels_last input is read in place and gives a channels_last output (as torch).
  const bool cl = cudnn::is_channels_last(input);
  Tensor x = cl ? input : nnk::contig(input, op);
  Tensor out = bn_empty_like(x, cl);
  const ScalarType stat_dt =
      nn::norm_stat_dtype(input, {&weight, &bias, &running_mean, &running_var});
  Tensor save_mean = empty(DimVector{C}, stat_dt, dev);
  Tensor save_invstd = empty(DimVector{C}, stat_dt, dev);
  std::vector<Tensor> keep;
  const ChanVec w = bn_chan_vec(weight, keep, op), b = bn_chan_vec(bias, keep, op);
  // The running statistics: updated in place in their dtype (a complex one through a float64
  // copy written back after).
  Tensor rm_tmp, rv_tmp;
  auto running = [&](const Tensor& t, Tensor& tmp) {
    if (t && !bn_direct_dtype(t->dtype())) {
      tmp = nnk::contig(t, ScalarType::Float64, op);  // a new tensor (another dtype)
      return bn_chan_vec(tmp, keep, op);
    }
    return bn_chan_vec(t, keep, op);
  };
  const ChanVec rm = running(running_mean, rm_tmp), rv = running(running_var, rv_tmp);
  const ChanVec sm = bn_chan_vec(save_mean, keep, op), si = bn_chan_vec(save_invstd, keep, op);
  const int64_t total = x->numel();
  cudaStream_t st = ix::stream_of(x);
  if (C > 0) {
    EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
      using T = scalar_t;
      using A = acc_t<T>;
      const BnGeom g = bn_geom(cl, N, C, HW, sizeof(T), {x->data(), out->data()});
      const T* px = x->data_as<T>();
      T* po = out->data_as<T>();
      if (training) {
        // count > 1 (batch_norm_shape): every channel has elements.
        const std::pair<dim3, BnSplit> plan = bn_reduce_plan(g);
        const int64_t splits = plan.second.splits;
        const int64_t nbytes = (BnStats<T>::K * splits * C + 2 * C) * int64_t(sizeof(A));
        Tensor scratch = red::scratch(nbytes, dev);
        A* part = reinterpret_cast<A*>(scratch->data());
        A* coef = part + BnStats<T>::K * splits * C;
        bn_reduce<T>(g, BnStats<T>{px}, part, plan.first, plan.second, st, op);
        bn_forward_finalize_kernel<T><<<bn_warp_blocks(C), kBnThreads, 0, st>>>(
            part, splits, C, static_cast<double>(count), eps, momentum, w, b, rm, rv, sm, si, coef);
        check_launch(op);
        const BnCoef<A> cf{coef, C, w, b, rm, rv, ChanVec{nullptr, 0, -1}, ChanVec{nullptr, 0, -1},
                           eps};
        bn_apply<T, false>(g, px, nullptr, po, cf, st, op);
      } else if (total > 0) {
        const BnCoef<A> cf{nullptr, C, w, b, rm, rv, sm, si, eps};
        bn_apply<T, false>(g, px, nullptr, po, cf, st, op);
      } else {
        bn_forward_finalize_kernel<T><<<bn_warp_blocks(C), kBnThreads, 0, st>>>(
            nullptr, 0, C, 0.0, eps, momentum, w, b, rm, rv, sm, si, nullptr);
        check_launch(op);
      }
    });
  }
  if (training) {
    // Written in place above (a complex one: back from its float64 copy now).
    if (running_mean) {
      if (rm_tmp && C > 0) red::write_permuted(running_mean, rm_tmp, DimVector{}, op);
      running_mean->bump_version();
    }
    if (running_var) {
      if (rv_tmp && C > 0) red::write_permuted(running_var, rv_tmp, DimVector{}, op);
      running_var->bump_version();
    }
  }
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
  const Device dev = input->device();
  // A channels_last input is read in place (grad_out brought to its layout) and gets a
  // channels_last input gradient.
  const bool cl = cudnn::is_channels_last(input);
  Tensor x = cl ? input : nnk::contig(input, op);
  Tensor g = bn_in_layout(grad_out, x->dtype(), cl, op);
  // Sums: the input gradient in eval mode needs none; the parameter gradients do.
  const bool need_sums = bias_grad || weight_grad || (input_grad && train);
  Tensor gi = input_grad ? bn_empty_like(x, cl) : Tensor();
  Tensor gw = weight_grad ? empty(DimVector{C}, x->dtype(), dev) : Tensor();
  Tensor gb = bias_grad ? empty(DimVector{C}, x->dtype(), dev) : Tensor();
  if (C == 0) return {gi, gw, gb};
  if (count == 0) {  // no elements: zero sums, an empty input gradient
    if (gw) ix::zero(gw);
    if (gb) ix::zero(gb);
    return {gi, gw, gb};
  }
  std::vector<Tensor> keep;
  const ChanVec w = bn_chan_vec(weight, keep, op);
  const ChanVec mean = bn_chan_vec(save_mean, keep, op);
  const ChanVec invstd = bn_chan_vec(save_invstd, keep, op);
  const ChanVec cgw = bn_chan_vec(gw, keep, op), cgb = bn_chan_vec(gb, keep, op);
  cudaStream_t st = ix::stream_of(x);
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    using A = acc_t<T>;
    const BnGeom geo =
        bn_geom(cl, N, C, HW, sizeof(T), {x->data(), g->data(), gi ? gi->data() : nullptr});
    const T* px = x->data_as<T>();
    const T* pg = g->data_as<T>();
    Tensor scratch;
    A* coef = nullptr;
    if (need_sums) {
      const std::pair<dim3, BnSplit> plan = bn_reduce_plan(geo);
      const int64_t splits = plan.second.splits;
      const int64_t nbytes =
          (BnSums<T>::K * splits * C + (input_grad ? 4 * C : 0)) * int64_t(sizeof(A));
      scratch = red::scratch(nbytes, dev);
      A* part = reinterpret_cast<A*>(scratch->data());
      if (input_grad) coef = part + BnSums<T>::K * splits * C;
      bn_reduce<T>(geo, BnSums<T>{pg, px, mean}, part, plan.first, plan.second, st, op);
      bn_backward_finalize_kernel<T><<<bn_warp_blocks(C), kBnThreads, 0, st>>>(
          part, splits, C, static_cast<double>(count), train, w, mean, invstd, cgw, cgb, coef);
      check_launch(op);
    }
    if (input_grad) {
      const ChanVec none{nullptr, 0, -1};
      const BnCoef<A> cf{coef, C, w, none, mean, invstd, none, none, 0.0};
      bn_apply<T, true>(geo, px, pg, gi->data_as<T>(), cf, st, op);
    }
  });
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
