// Vectorized float32 row kernels of the nn ops (softmax, log_softmax, layer/RMS norm, Adam).
// nn_vec.cpp compiles each twice, for the baseline ISA and for AVX2+FMA, and picks one at run
// time, so portable builds still get 8-wide code on machines that have it. All pointers are to
// contiguous rows; every function handles rows [r0, r1) of length n, for use inside parallel_for.
#pragma once
#include <cstdint>

namespace ember {
namespace cpu {
namespace nn {
namespace vec {

// y[i] = exp(x[i]) with a Cephes-style polynomial (within 2 ulp of std::exp over the whole
// float range, denormal results included).
void exp(const float* x, float* y, int64_t n);

// softmax (log=false) or log_softmax (log=true) of each row; a row holding a NaN becomes NaN.
void softmax_rows(const float* x, float* y, int64_t r0, int64_t r1, int64_t n, bool log);

// grad_input of softmax (y * (g - sum(g * y))) or log_softmax (g - exp(y) * sum(g)) per row.
void softmax_backward_rows(const float* g, const float* y, float* gi, int64_t r0, int64_t r1,
                           int64_t n, bool log);

// Layer norm (center=true) or RMS norm (center=false) forward of rows: writes y, mean (when
// center) and rstd per row. w and b may be null.
void norm_rows(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
               int64_t r0, int64_t r1, int64_t n, float eps, bool center);

// grad_input of norm_rows (mean null for RMS norm, w may be null).
void norm_backward_rows(const float* g, const float* x, const float* mean, const float* rstd,
                        const float* w, float* gi, int64_t r0, int64_t r1, int64_t n);

// Adds each row's weight-grad terms g * xhat into gw and bias-grad terms g into gb (either may
// be null); mean null for RMS norm.
void norm_param_grad_rows(const float* g, const float* x, const float* mean, const float* rstd,
                          float* gw, float* gb, int64_t r0, int64_t r1, int64_t n);

// One Adam/AdamW update of elements [0, n) (see _fused_adam_ for the meaning of the scalars;
// em is null without amsgrad). Rounds exactly as the per-parameter tensor-op path does.
struct AdamScalars {
  float one_minus_b1, lerp_rest, b2, one_minus_b2, wd, decay, eps, neg_step_size, bc2_sqrt;
  bool lerp_low, maximize, weight_decay, decoupled;
};
void adam(float* p, const float* g, float* ea, float* es, float* em, int64_t n,
          const AdamScalars& s);

}  // namespace vec
}  // namespace nn
}  // namespace cpu
}  // namespace ember
