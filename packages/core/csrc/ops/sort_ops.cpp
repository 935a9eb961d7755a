// Composite sorting ops of ops/sort.yaml (entries with `Composite` dispatch), written over other
// ops so they run on every device. The sorting kernels are in kernels/cpu/sort_ops.cpp.
#include <tuple>

#include "ops.h"

namespace ember {
namespace composite {

Tensor msort(const Tensor& self) { return std::get<0>(ops::sort(self, 0, false, false)); }

}  // namespace composite
}  // namespace ember
