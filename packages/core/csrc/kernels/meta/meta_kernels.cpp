// Meta kernels of their own, for ops whose CPU kernel can't run on zero-filled stand-ins (see
// meta_fallback.h): they check the arguments and make the result from the shape rules the CPU
// kernel uses too (kernels/shape_rules.h). Named in the op's YAML entry as `meta: meta::<fn>`.
#include "kernels/shape_rules.h"
#include "ops.h"

namespace ember {
namespace meta {

Tensor multinomial(const Tensor& self, int64_t num_samples, bool replacement, Generator*) {
  return ember::empty(multinomial_shape(self, num_samples, replacement), ScalarType::Int64,
                      self->device());
}

}  // namespace meta
}  // namespace ember
