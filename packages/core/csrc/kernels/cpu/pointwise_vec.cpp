// The real pointwise loops of pointwise_vec.h: pointwise_vec_kernels.inc compiled for the
// baseline ISA, for AVX2 and for AVX-512, the copy for this CPU picked once (cpu_isa(), which
// EMBER_CPU_ISA caps) and kept as function pointers. Contraction into FMA is off in every copy
// (and the AVX2 / AVX-512 targets leave FMA out): x + alpha y rounds the product on its own,
// as the baseline build does, so all copies give the same bits.
#include "kernels/cpu/pointwise_vec.h"

#include <cmath>

#include "kernels/cpu/cpu_features.h"

EMBER_NO_FP_CONTRACT

#define EMBER_PV_INLINE inline __attribute__((always_inline))

namespace ember {
namespace cpu {
namespace pvec {

namespace base {
#include "kernels/cpu/pointwise_vec_kernels.inc"
}  // namespace base

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define EMBER_PVEC_X86 1
EMBER_TARGET_BEGIN("avx2")
EMBER_NO_FP_CONTRACT
namespace avx2 {
#include "kernels/cpu/pointwise_vec_kernels.inc"
}  // namespace avx2
EMBER_TARGET_END()
EMBER_TARGET_BEGIN("avx512f,avx2")
EMBER_NO_FP_CONTRACT
namespace avx512 {
#include "kernels/cpu/pointwise_vec_kernels.inc"
}  // namespace avx512
EMBER_TARGET_END()
#endif

namespace {

struct Kernels {
  bool (*binary_f32)(Binary, float, char**, const int64_t*, int64_t);
  bool (*binary_f64)(Binary, double, char**, const int64_t*, int64_t);
  void (*unary_f32)(Unary, const float*, float*, int64_t);
  void (*unary_f64)(Unary, const double*, double*, int64_t);
};

#define EMBER_PVEC_KERNELS(ns) \
  Kernels { &ns::binary_f32, &ns::binary_f64, &ns::unary_f32, &ns::unary_f64 }

Kernels pick() {
#ifdef EMBER_PVEC_X86
  switch (cpu_isa()) {
    case Isa::Avx512:
      return EMBER_PVEC_KERNELS(avx512);
    case Isa::Avx2:
      return EMBER_PVEC_KERNELS(avx2);
    default:
      break;
  }
#endif
  return EMBER_PVEC_KERNELS(base);
}
#undef EMBER_PVEC_KERNELS

const Kernels& kernels() {
  static const Kernels k = pick();
  return k;
}

}  // namespace

bool binary(Binary op, float alpha, char** d, const int64_t* s, int64_t n) {
  return kernels().binary_f32(op, alpha, d, s, n);
}
bool binary(Binary op, double alpha, char** d, const int64_t* s, int64_t n) {
  return kernels().binary_f64(op, alpha, d, s, n);
}
void unary(Unary op, const float* x, float* y, int64_t n) { kernels().unary_f32(op, x, y, n); }
void unary(Unary op, const double* x, double* y, int64_t n) { kernels().unary_f64(op, x, y, n); }

}  // namespace pvec
}  // namespace cpu
}  // namespace ember
