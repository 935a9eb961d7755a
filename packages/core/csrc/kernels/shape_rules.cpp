#include "kernels/shape_rules.h"

#include "core/error.h"

namespace ember {

DimVector multinomial_shape(const Tensor& self, int64_t num_samples, bool replacement) {
  EMBER_CHECK(self->dim() == 1 || self->dim() == 2,
              "multinomial: prob_dist must be 1 or 2 dim, got ", self->dim(), "-D");
  EMBER_CHECK_KIND(is_floating(self->dtype()), DtypeNotImplemented,
                   "multinomial: only supports floating-point dtypes for input, got: ",
                   dtype_name(self->dtype()));
  EMBER_CHECK(num_samples > 0, "multinomial: cannot sample n_sample <= 0 samples (got ",
              num_samples, ")");
  const int64_t ncat = self->size(self->dim() - 1);
  EMBER_CHECK(replacement || num_samples <= ncat,
              "multinomial: cannot sample n_sample > prob_dist.size(-1) "
              "samples without replacement (",
              num_samples, " > ", ncat, ")");
  EMBER_CHECK(ncat <= (int64_t(1) << 24), "multinomial: number of categories cannot exceed 2^24");
  return self->dim() == 1 ? DimVector{num_samples} : DimVector{self->size(0), num_samples};
}

}  // namespace ember
