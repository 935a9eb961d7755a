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
