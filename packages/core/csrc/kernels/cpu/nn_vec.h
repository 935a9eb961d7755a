// Vectorized float32 row kernels of the nn ops (softmax, log_softmax, layer/RMS norm, Adam).
// nn_vec.cpp compiles each twice, for the baseline ISA and for AVX2+FMA, and picks one at run
// time, so portable builds still get 8-wide code on machines that have it. All pointers are to
// contiguous rows; every function handles rows [r0, r1) of length n, for use inside parallel_for.
#pragma once
#include <cstdint>

#include "kernels/activation_rules.h"

namespace ember {
namespace cpu {
namespace nn {
namespace vec {

// y[i] = exp(x[i]) with a Cephes-style polynomial (within 2 ulp of std::exp over the whole
// float range, denormal results included).
void exp(const float* x, float* y, int64_t n);
// y[i] = 1 / (1 + exp(-x[i])) with that exp.
void sigmoid(const float* x, float* y, int64_t n);
// y[i] = tanh(x[i]): a polynomial near 0, 1 - 2 / (exp(2|x|) + 1) beyond, +-1 once saturated.
void tanh(const float* x, float* y, int64_t n);
// y[i] = log(x[i]) (denormals, 0, negatives, inf and NaN as std::log).
void log(const float* x, float* y, int64_t n);
// y[i] = expm1(x[i]) and log1p(x[i]), accurate for small |x| as std:: (special values as well).
void expm1(const float* x, float* y, int64_t n);
void log1p(const float* x, float* y, int64_t n);
// y[i] = erf(x[i]) with GELU's polynomial (within 3 ulp; signed zeros, +-inf and NaN as std::erf).
void erf(const float* x, float* y, int64_t n);
// y[i] = erfc(x[i]) computed in float64 (nn_vec_erfc.inc): float32 within 1 ulp, the subnormal
// tail included; erfc_f64 within a few ulp of libm's erfc from -inf to the underflow past 27.2.
void erfc(const float* x, float* y, int64_t n);
void erfc_f64(const double* x, double* y, int64_t n);

// Activations, y[i] = f(x[i]), by the formulas of kernels/activation_math.h (parameters as the ops
// take them). Exact GELU: on AVX-512 x * Phi(x) with Phi a piecewise polynomial (within 2 ulp of
// gelu from x = -1 up, within 2e-7 |x| absolutely below), elsewhere erf's polynomial (3 ulp).
void gelu(const float* x, float* y, int64_t n, bool tanh_form);
// Exact-form gelu of float64 values (AVX-512: a piecewise polynomial of Phi within 1e-16; else
// the scalar formula).
void gelu_f64(const double* x, double* y, int64_t n);
// gelu on bfloat16 values given as their bits: computed in float32 by gelu, rounded to nearest.
void gelu_bf16(const uint16_t* x, uint16_t* y, int64_t n, bool tanh_form);
void silu(const float* x, float* y, int64_t n);
void elu(const float* x, float* y, int64_t n, float alpha, float scale, float input_scale);
void softplus(const float* x, float* y, int64_t n, float beta, float threshold);
void mish(const float* x, float* y, int64_t n);
void logsigmoid(const float* x, float* y, int64_t n);
void relu(const float* x, float* y, int64_t n);
// out[i] = x[i] <= threshold ? 0 : g[i] (relu's backward; a NaN x passes g[i]).
void threshold_backward(const float* g, const float* x, float* out, int64_t n, float threshold);
// out[i] = (x[i] <= lo || x[i] >= hi) ? 0 : g[i] (hardtanh's backward; a NaN x passes g[i]).
void hardtanh_backward(const float* g, const float* x, float* out, int64_t n, float lo, float hi);
void hardtanh(const float* x, float* y, int64_t n, float lo, float hi);
void leaky_relu(const float* x, float* y, int64_t n, float slope);
void hardsigmoid(const float* x, float* y, int64_t n);
void hardswish(const float* x, float* y, int64_t n);
// y[i] = f'(x[i]) (second: f'') as act_math::act_derivative, parameters p0..p2 as there.
void act_derivative(Act act, bool second, const float* x, float* y, int64_t n, float p0, float p1,
                    float p2);

// out[4 b + j] = word j of Philox::generate(seed, counter + b) (core/generator.h) for b in
// [0, nblocks): the same bits, several counters per vector.
void philox_blocks(uint64_t seed, uint64_t counter, int64_t nblocks, uint32_t* out);

// softmax (log=false) or log_softmax (log=true) of each row; a row holding a NaN becomes NaN.
void softmax_rows(const float* x, float* y, int64_t r0, int64_t r1, int64_t n, bool log);

// grad_input of softmax (y * (g - sum(g * y))) or log_softmax (g - exp(y) * sum(g)) per row.
void softmax_backward_rows(const float* g, const float* y, float* gi, int64_t r0, int64_t r1,
                           int64_t n, bool log);

// softmax / log_softmax along the rows of one contiguous (n, inner) block (the middle dim of
// (outer, n, inner)), for columns [c0, c1): vectorized across columns.
void softmax_cols(const float* x, float* y, int64_t n, int64_t inner, int64_t c0, int64_t c1,
                  bool log);
// softmax_backward_rows for such a block, columns [c0, c1).
void softmax_backward_cols(const float* g, const float* y, float* gi, int64_t n, int64_t inner,
                           int64_t c0, int64_t c1, bool log);

// log(sum(exp(x))) of one row, computed stably; NaN when the row holds a NaN, -inf when all -inf.
double logsumexp(const float* x, int64_t n);
// sum(x) and sum(x * w) of one row, accumulated as vsum does (blocks added in double).
double sum(const float* x, int64_t n);
double dot(const float* x, const float* w, int64_t n);
// Cross-entropy gradient of one row before its target term: gi[j] = a * exp(x[j] - lse) -
// b * w[j] (b alone when w is null).
void ce_grad_row(const float* x, float lse, float a, const float* w, float b, float* gi, int64_t n);

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

// One SGD update of elements [0, n) (see _fused_sgd_); buf is null without momentum. Rounds
// exactly as the per-parameter tensor-op path does.
struct SgdScalars {
  float wd, momentum, one_minus_dampening, neg_lr;
  bool weight_decay, nesterov, maximize, first_step;
};
void sgd(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s);

}  // namespace vec
}  // namespace nn
}  // namespace cpu
}  // namespace ember
