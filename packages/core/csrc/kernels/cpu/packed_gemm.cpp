#include "kernels/cpu/packed_gemm.h"

#include <algorithm>
#include <cctype>
#include <string>

extern "C" char* scipy_openblas_get_corename(void);

namespace ember {
namespace cpu {

bool blas_runs_avx512() {
  static const bool yes = [] {
    const char* core = scipy_openblas_get_corename();
    std::string name = core ? core : "";
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    for (const char* avx512 : {"skylakex", "cooperlake", "sapphirerapids"})
      if (name.find(avx512) != std::string::npos) return true;
    return false;
  }();
  return yes;
}

}  // namespace cpu
}  // namespace ember
