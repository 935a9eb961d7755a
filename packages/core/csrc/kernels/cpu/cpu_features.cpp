#include "kernels/cpu/cpu_features.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace ember {
namespace cpu {

namespace {

Isa supported() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma"))
    return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::Avx2;
#endif
  return Isa::Baseline;
}

Isa detect() {
  Isa isa = supported();
  const char* env = std::getenv("EMBER_CPU_ISA");
  if (!env || !*env) return isa;
  Isa cap;
  if (std::strcmp(env, "baseline") == 0)
    cap = Isa::Baseline;
  else if (std::strcmp(env, "avx2") == 0)
    cap = Isa::Avx2;
  else if (std::strcmp(env, "avx512") == 0)
    cap = Isa::Avx512;
  else
    EMBER_FAIL(Value, "EMBER_CPU_ISA must be 'baseline', 'avx2' or 'avx512', got '", env, "'");
  return static_cast<int>(cap) < static_cast<int>(isa) ? cap : isa;
}

}  // namespace

Isa cpu_isa() {
  static const Isa isa = detect();
  return isa;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512:
      return "avx512";
    case Isa::Avx2:
      return "avx2";
    default:
      return "baseline";
  }
}

}  // namespace cpu
}  // namespace ember
