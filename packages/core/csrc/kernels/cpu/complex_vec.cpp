// The complex row kernels of complex_vec.h: complex_vec_kernels.inc compiled for the baseline
// ISA, for AVX2 and for AVX-512, one picked per call by cpu_isa(). Contraction into FMA is off
// for this file, so that every copy rounds each product on its own: the results are the same
// bits on every CPU and match the scalar formulas of kernels/complex_math.h, also where a
// fused multiply-add would turn inf - inf into an infinity.
#include "kernels/cpu/complex_vec.h"

#include <cmath>

#include "kernels/cpu/cpu_features.h"

// Re-stated after each target pragma (cpu_features.h).
EMBER_NO_FP_CONTRACT

#define EMBER_CV_INLINE inline __attribute__((always_inline))

namespace ember {
namespace cpu {
namespace cvec {

namespace base {
#include "kernels/cpu/complex_vec_kernels.inc"
#include "kernels/cpu/complex_vec_products.inc"
}  // namespace base

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define EMBER_CVEC_X86 1
EMBER_TARGET_BEGIN("avx2,fma")
EMBER_NO_FP_CONTRACT
namespace avx2 {
#include "kernels/cpu/complex_vec_kernels.inc"
}  // namespace avx2
EMBER_TARGET_END()
EMBER_TARGET_BEGIN("avx512f,avx2,fma")
EMBER_NO_FP_CONTRACT
namespace avx512 {
#include "kernels/cpu/complex_vec_kernels.inc"
}  // namespace avx512
EMBER_TARGET_END()
// The products (complex_vec_products.inc) for AVX2 without FMA.
EMBER_TARGET_BEGIN("avx2")
EMBER_NO_FP_CONTRACT
namespace avx2_nofma {
#include "kernels/cpu/complex_vec_products.inc"
}  // namespace avx2_nofma
EMBER_TARGET_END()
#endif

#ifdef EMBER_CVEC_X86
#define EMBER_CVEC_CALL(fn, ...)      \
  switch (cpu_isa()) {                \
    case Isa::Avx512:                 \
      return avx512::fn(__VA_ARGS__); \
    case Isa::Avx2:                   \
      return avx2::fn(__VA_ARGS__);   \
    default:                          \
      return base::fn(__VA_ARGS__);   \
  }
#define EMBER_CVEC_CALL_NOFMA(fn, ...)                            \
  if (cpu_isa() >= Isa::Avx2) return avx2_nofma::fn(__VA_ARGS__); \
  return base::fn(__VA_ARGS__);
#else
#define EMBER_CVEC_CALL(fn, ...) return base::fn(__VA_ARGS__);
#define EMBER_CVEC_CALL_NOFMA(fn, ...) return base::fn(__VA_ARGS__);
#endif

#define EMBER_CVEC_ENTRIES(T)                                                                  \
  void mul(const T* x, const T* y, T* o, int64_t n) { EMBER_CVEC_CALL_NOFMA(mul, x, y, o, n) } \
  void div(const T* x, const T* y, T* o, int64_t n) { EMBER_CVEC_CALL(div, x, y, o, n) }       \
  void reciprocal(const T* x, T* o, int64_t n) { EMBER_CVEC_CALL(reciprocal, x, o, n) }        \
  void square(const T* x, T* o, int64_t n) { EMBER_CVEC_CALL_NOFMA(square, x, o, n) }          \
  void abs(const T* x, T* r, int64_t n) { EMBER_CVEC_CALL(abs, x, r, n) }                      \
  void sgn(const T* x, T* o, int64_t n) { EMBER_CVEC_CALL(sgn, x, o, n) }                      \
  void conj(const T* x, T* o, int64_t n) { EMBER_CVEC_CALL(conj, x, o, n) }                    \
  void angle(const T* x, T* r, int64_t n) { EMBER_CVEC_CALL(angle, x, r, n) }                  \
  void sigmoid_finish(const T* w, T* o, int64_t n) { EMBER_CVEC_CALL(sigmoid_finish, w, o, n) }
#define EMBER_CVEC_ADD(T)                                              \
  void add_scaled(const T* x, const T* y, T p, T q, T* o, int64_t n) { \
    EMBER_CVEC_CALL_NOFMA(add_scaled, x, y, p, q, o, n)                \
  }
EMBER_CVEC_ADD(float)
EMBER_CVEC_ADD(double)
#undef EMBER_CVEC_ADD
EMBER_CVEC_ENTRIES(float)
EMBER_CVEC_ENTRIES(double)
#undef EMBER_CVEC_ENTRIES
#undef EMBER_CVEC_CALL
#undef EMBER_CVEC_CALL_NOFMA

}  // namespace cvec
}  // namespace cpu
}  // namespace ember
