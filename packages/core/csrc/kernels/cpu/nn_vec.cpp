// Run-time ISA selection for the float32 nn row kernels (nn_vec.h): the kernel bodies
// (nn_vec_kernels.inc, nn_vec_adam.inc, nn_vec_sgd.inc) are compiled once for the baseline ISA,
// once for AVX2 (+FMA for all but Adam and SGD, whose rounding must match the unfused tensor ops)
// and, but for Adam and SGD, once for AVX-512; each entry point calls the best variant this CPU
// supports (EMBER_CPU_ISA caps it, for tests).
#include "kernels/cpu/nn_vec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/generator.h"
#include "kernels/activation_math.h"
#include "kernels/cpu/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ember {
namespace cpu {
namespace nn {
namespace vec {

namespace base {
#define EMBER_VEC_BYTES 16
#include "kernels/cpu/nn_vec_adam.inc"
#include "kernels/cpu/nn_vec_erfc.inc"
#include "kernels/cpu/nn_vec_kernels.inc"
#include "kernels/cpu/nn_vec_sgd.inc"
#undef EMBER_VEC_BYTES
}  // namespace base

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define EMBER_NN_VEC_AVX2 1
EMBER_TARGET_BEGIN("avx2,fma")
namespace avx2 {
#define EMBER_VEC_BYTES 32
#include "kernels/cpu/nn_vec_erfc.inc"
#include "kernels/cpu/nn_vec_kernels.inc"
#undef EMBER_VEC_BYTES
}  // namespace avx2
EMBER_TARGET_END()
EMBER_TARGET_BEGIN("avx2")
namespace avx2 {
#include "kernels/cpu/nn_vec_adam.inc"
#include "kernels/cpu/nn_vec_sgd.inc"
}  // namespace avx2
EMBER_TARGET_END()
EMBER_TARGET_BEGIN("avx512f,avx2,fma")
namespace avx512 {  // 16 lanes; Adam and SGD stay on AVX2 (their loops are memory-bound)
#define EMBER_VEC_BYTES 64
#include "kernels/cpu/nn_vec_erfc.inc"
#include "kernels/cpu/nn_vec_kernels.inc"
#undef EMBER_VEC_BYTES
}  // namespace avx512
EMBER_TARGET_END()
#endif

namespace {
Isa isa() {
#ifdef EMBER_NN_VEC_AVX2
  return cpu_isa();
#else
  return Isa::Baseline;
#endif
}
}  // namespace

#ifdef EMBER_NN_VEC_AVX2
#define EMBER_NN_VEC_CALL(fn, ...)                \
  (isa() == Isa::Avx512 ? avx512::fn(__VA_ARGS__) \
   : isa() == Isa::Avx2 ? avx2::fn(__VA_ARGS__)   \
                        : base::fn(__VA_ARGS__))
#define EMBER_NN_VEC_CALL_AVX2(fn, ...) \
  (isa() >= Isa::Avx2 ? avx2::fn(__VA_ARGS__) : base::fn(__VA_ARGS__))
#else
#define EMBER_NN_VEC_CALL(fn, ...) base::fn(__VA_ARGS__)
#define EMBER_NN_VEC_CALL_AVX2(fn, ...) base::fn(__VA_ARGS__)
#endif

void exp(const float* x, float* y, int64_t n) { EMBER_NN_VEC_CALL(exp, x, y, n); }
void sigmoid(const float* x, float* y, int64_t n) { EMBER_NN_VEC_CALL(sigmoid, x, y, n); }
void tanh(const float* x, float* y, int64_t n) { EMBER_NN_VEC_CALL(tanh, x, y, n); }
void log(const float* x, float* y, int64_t n) { EMBER_NN_VEC_CALL(log, x, y, n); }
void expm1(const float* x, float* y, int64_t n) { EMBER_NN_VEC_CALL(expm1, x, y, n); }
void log1p(const float* x, float* y, int64_t n) { EMBER_NN_VEC_CALL(log1p, x, y, n); }
void erf(const float* x, float* y, int64_t n) { EMBER_NN_VEC_CALL(erf, x, y, n); }
void erfc(const float* x, float* y, int64_t n) { EMBER_NN_VEC_CALL(erfc, x, y, n); }
void erfc_f64(const double* x, double* y, int64_t n) { EMBER_NN_VEC_CALL(erfc_f64, x, y, n); }

void gelu(const float* x, float* y, int64_t n, bool tanh_form) {
  EMBER_NN_VEC_CALL(gelu, x, y, n, tanh_form);
}
void gelu_f64(const double* x, double* y, int64_t n) { EMBER_NN_VEC_CALL(gelu_f64, x, y, n); }
void gelu_bf16(const uint16_t* x, uint16_t* y, int64_t n, bool tanh_form) {
  EMBER_NN_VEC_CALL(gelu_bf16, x, y, n, tanh_form);
}
void silu(const float* x, float* y, int64_t n) { EMBER_NN_VEC_CALL(silu, x, y, n); }
void elu(const float* x, float* y, int64_t n, float alpha, float scale, float input_scale) {
  EMBER_NN_VEC_CALL(elu, x, y, n, alpha, scale, input_scale);
}
void softplus(const float* x, float* y, int64_t n, float beta, float threshold) {
  EMBER_NN_VEC_CALL(softplus, x, y, n, beta, threshold);
}
void mish(const float* x, float* y, int64_t n) { EMBER_NN_VEC_CALL(mish, x, y, n); }
void logsigmoid(const float* x, float* y, int64_t n) { EMBER_NN_VEC_CALL(logsigmoid, x, y, n); }
void relu(const float* x, float* y, int64_t n) { EMBER_NN_VEC_CALL(relu, x, y, n); }
void threshold_backward(const float* g, const float* x, float* out, int64_t n, float threshold) {
  EMBER_NN_VEC_CALL(threshold_backward, g, x, out, n, threshold);
}
void hardtanh_backward(const float* g, const float* x, float* out, int64_t n, float lo, float hi) {
  EMBER_NN_VEC_CALL(hardtanh_backward, g, x, out, n, lo, hi);
}
void hardtanh(const float* x, float* y, int64_t n, float lo, float hi) {
  EMBER_NN_VEC_CALL(hardtanh, x, y, n, lo, hi);
}
void leaky_relu(const float* x, float* y, int64_t n, float slope) {
  EMBER_NN_VEC_CALL(leaky_relu, x, y, n, slope);
}
void hardsigmoid(const float* x, float* y, int64_t n) { EMBER_NN_VEC_CALL(hardsigmoid, x, y, n); }
void hardswish(const float* x, float* y, int64_t n) { EMBER_NN_VEC_CALL(hardswish, x, y, n); }
void act_derivative(Act act, bool second, const float* x, float* y, int64_t n, float p0, float p1,
                    float p2) {
  EMBER_NN_VEC_CALL(act_derivative, act, second, x, y, n, p0, p1, p2);
}

void philox_blocks(uint64_t seed, uint64_t counter, int64_t nblocks, uint32_t* out) {
  EMBER_NN_VEC_CALL(philox_blocks, seed, counter, nblocks, out);
}

void softmax_rows(const float* x, float* y, int64_t r0, int64_t r1, int64_t n, bool log) {
  EMBER_NN_VEC_CALL(softmax_rows, x, y, r0, r1, n, log);
}

void softmax_backward_rows(const float* g, const float* y, float* gi, int64_t r0, int64_t r1,
                           int64_t n, bool log) {
  EMBER_NN_VEC_CALL(softmax_backward_rows, g, y, gi, r0, r1, n, log);
}

void softmax_cols(const float* x, float* y, int64_t n, int64_t inner, int64_t c0, int64_t c1,
                  bool log) {
  EMBER_NN_VEC_CALL(softmax_cols, x, y, n, inner, c0, c1, log);
}

void softmax_backward_cols(const float* g, const float* y, float* gi, int64_t n, int64_t inner,
                           int64_t c0, int64_t c1, bool log) {
  EMBER_NN_VEC_CALL(softmax_backward_cols, g, y, gi, n, inner, c0, c1, log);
}

double logsumexp(const float* x, int64_t n) { return EMBER_NN_VEC_CALL(logsumexp, x, n); }
double sum(const float* x, int64_t n) { return EMBER_NN_VEC_CALL(sum, x, n); }
double dot(const float* x, const float* w, int64_t n) { return EMBER_NN_VEC_CALL(dot, x, w, n); }

void ce_grad_row(const float* x, float lse, float a, const float* w, float b, float* gi,
                 int64_t n) {
  EMBER_NN_VEC_CALL(ce_grad_row, x, lse, a, w, b, gi, n);
}

void norm_rows(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
               int64_t r0, int64_t r1, int64_t n, float eps, bool center) {
  EMBER_NN_VEC_CALL(norm_rows, x, w, b, y, mean, rstd, r0, r1, n, eps, center);
}

void norm_backward_rows(const float* g, const float* x, const float* mean, const float* rstd,
                        const float* w, float* gi, int64_t r0, int64_t r1, int64_t n) {
  EMBER_NN_VEC_CALL(norm_backward_rows, g, x, mean, rstd, w, gi, r0, r1, n);
}

void norm_param_grad_rows(const float* g, const float* x, const float* mean, const float* rstd,
                          float* gw, float* gb, int64_t r0, int64_t r1, int64_t n) {
  EMBER_NN_VEC_CALL(norm_param_grad_rows, g, x, mean, rstd, gw, gb, r0, r1, n);
}

void adam(float* p, const float* g, float* ea, float* es, float* em, int64_t n,
          const AdamScalars& s) {
  EMBER_NN_VEC_CALL_AVX2(adam, p, g, ea, es, em, n, s);
}

void sgd(float* p, const float* g, float* buf, int64_t n, const SgdScalars& s) {
  EMBER_NN_VEC_CALL_AVX2(sgd, p, g, buf, n, s);
}

}  // namespace vec
}  // namespace nn
}  // namespace cpu
}  // namespace ember
