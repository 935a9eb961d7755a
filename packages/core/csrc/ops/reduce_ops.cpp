// Composite reductions of ops/reduce.yaml (entries with `Composite` dispatch): overloads that
// forward to another reduction and logsumexp, written over other ops so they run on every
// device. The per-device reduction kernels are in kernels/cpu/reduce_ops.cpp.
#include <limits>
#include <optional>
#include <string>
#include <tuple>

#include "kernels/cpu/reduce_utils.h"  // dim_mask / reduced_sizes: shape arithmetic only
#include "ops.h"

namespace ember {
namespace composite {

Tensor max(const Tensor& self, const Tensor& other) { return ops::maximum(self, other, Tensor()); }
Tensor min(const Tensor& self, const Tensor& other) { return ops::minimum(self, other, Tensor()); }

Tensor var(const Tensor& self, bool unbiased) {
  return ops::var(self, std::nullopt, std::optional<bool>(unbiased), false, std::nullopt);
}
Tensor std(const Tensor& self, bool unbiased) {
  return ops::std(self, std::nullopt, std::optional<bool>(unbiased), false, std::nullopt);
}
std::tuple<Tensor, Tensor> var_mean(const Tensor& self, bool unbiased) {
  return ops::var_mean(self, std::nullopt, std::optional<bool>(unbiased), false, std::nullopt);
}
std::tuple<Tensor, Tensor> std_mean(const Tensor& self, bool unbiased) {
  return ops::std_mean(self, std::nullopt, std::optional<bool>(unbiased), false, std::nullopt);
}

Tensor norm(const Tensor& self, const std::string& p, const std::optional<DimVector>& dim,
            bool keepdim, std::optional<ScalarType> dtype) {
  if (p == "fro") return ops::norm(self, std::optional<Scalar>(Scalar(2.0)), dim, keepdim, dtype);
  if (p == "nuc")
    EMBER_FAIL(NotImplemented, "norm(): p='nuc' (the nuclear norm) is not supported by ember yet");
  EMBER_FAIL(Runtime, "norm(): Order ", p, " not supported (expected a number, 'fro' or 'nuc')");
}

Tensor logsumexp(const Tensor& self, const DimVector& dim, bool keepdim) {
  Tensor x = is_floating(self->dtype()) || is_complex(self->dtype())
                 ? self
                 : ops::_to_dtype(self, default_dtype(), false);
  auto mask = reduce::dim_mask(&dim, x->dim(), "logsumexp");
  DimVector final_shape = reduce::reduced_sizes(x->sizes(), mask, keepdim);
  if (reduce::reduced_numel(x->sizes(), mask) == 0)
    return ops::full(final_shape, Scalar(-std::numeric_limits<double>::infinity()), x->dtype(),
                     x->device());
  // Shift by the max (0 where it is infinite, so inf - inf never makes a NaN).
  // (by the max of the real parts for a complex x: |exp(x - m)| <= 1 all the same)
  Tensor m = ops::amax(is_complex(x->dtype()) ? ops::real(x) : x, dim, true);
  m = ops::where(ops::isinf(m, Tensor()), Scalar(0.0), m, Tensor());
  Tensor s = ops::sum(ops::exp(ops::sub(x, m, Scalar(int64_t(1)), Tensor()), Tensor()), dim, true,
                      std::nullopt);
  Tensor r = ops::add(ops::log(s, Tensor()), m, Scalar(int64_t(1)), Tensor());
  // r is a fresh contiguous tensor: dropping the size-1 reduced dims is a pure reshape.
  return make_view(r, final_shape, contiguous_strides(final_shape), r->storage_offset());
}

}  // namespace composite
}  // namespace ember
