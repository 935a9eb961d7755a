// Which vector instruction sets the CPU kernels may use. The library is built for baseline
// x86-64; hot loops carry extra AVX2 (and AVX-512) copies picked at run time. EMBER_CPU_ISA
// (baseline | avx2 | avx512, read once) caps the choice, so the portable kernels can be tested
// on machines that would never run them otherwise.
#pragma once

namespace ember {
namespace cpu {

enum class Isa { Baseline = 0, Avx2 = 1, Avx512 = 2 };

// The best level this CPU supports (AVX2 includes FMA), capped by EMBER_CPU_ISA.
Isa cpu_isa();
const char* isa_name(Isa isa);

}  // namespace cpu
}  // namespace ember

// EMBER_TARGET_BEGIN("avx2,fma") ... EMBER_TARGET_END(): every function defined in between is
// compiled for that instruction set (GCC or Clang), the copies a file picks from by cpu_isa().
#define EMBER_TARGET_STR(x) #x
#if defined(__clang__)
#define EMBER_TARGET_BEGIN(isa) \
  _Pragma(EMBER_TARGET_STR(clang attribute push(__attribute__((target(isa))), apply_to = function)))
#define EMBER_TARGET_END() _Pragma("clang attribute pop")
#else
#define EMBER_TARGET_BEGIN(isa) \
  _Pragma("GCC push_options") _Pragma(EMBER_TARGET_STR(GCC target(isa)))
#define EMBER_TARGET_END() _Pragma("GCC pop_options")
#endif

// EMBER_NO_FP_CONTRACT: no contraction of a product and a sum into an FMA in what follows, so
// that the ISA copies of a kernel round alike (the baseline build has no FMA to contract into).
// GCC's target pragma resets the optimization options: state it again after each
// EMBER_TARGET_BEGIN.
#if defined(__clang__)
#define EMBER_NO_FP_CONTRACT _Pragma("STDC FP_CONTRACT OFF")
#elif defined(__GNUC__)
#define EMBER_NO_FP_CONTRACT _Pragma("GCC optimize(\"fp-contract=off\")")
#else
#define EMBER_NO_FP_CONTRACT
#endif
