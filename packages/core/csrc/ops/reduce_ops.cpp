// Composite reductions of ops/reduce.yaml (entries with `Composite` dispatch): overloads that
// forward to another reduction and logsumexp, written over other ops so they run on every
// device. The per-device reduction kernels are in kernels/cpu/reduce_ops.cpp.
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/cpu/reduce_utils.h"  // dim_mask / reduced_sizes: shape arithmetic only
#include "ops.h"
#include "ops/host_sync.h"

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

namespace {
// torch.norm(p='nuc') is linalg.matrix_norm(ord='nuc'): the sum of the singular values of the
// matrices spanned by the two dims (all dims when None, so the input must then be 2-D).
Tensor nuclear_norm(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim,
                    std::optional<ScalarType> dtype) {
  EMBER_CHECK(is_floating(self->dtype()) || is_complex(self->dtype()),
              "norm(): p='nuc' expects a floating point or complex tensor, got dtype ",
              dtype_name(self->dtype()));
  // a RuntimeError as PyTorch's matrix_norm (the SVD's NotImplementedError was reported)
  EMBER_CHECK(self->dtype() != ScalarType::Float16 && self->dtype() != ScalarType::BFloat16,
              "norm(): p='nuc' does not support low precision dtypes, got ",
              dtype_name(self->dtype()), " (the SVD runs in float32 or float64)");
  const int64_t nd = self->dim();
  DimVector d;
  if (dim) {
    d = *dim;
  } else {
    for (int64_t i = 0; i < nd; ++i) d.push_back(i);
  }
  EMBER_CHECK(d.size() == 2, "norm(): p='nuc' needs dim to be a pair of dims (the matrices), got ",
              d.size(), " dims for an input of shape ", self->sizes());
  int64_t lo = wrap_dim(d[0], nd, "norm");
  int64_t hi = wrap_dim(d[1], nd, "norm");
  EMBER_CHECK(lo != hi, "norm(): p='nuc' needs two different dims, got ", d[0], " and ", d[1]);
  if (lo > hi) std::swap(lo, hi);
  Tensor x = dtype ? ops::_to_dtype(self, *dtype, false) : self;
  Tensor m = ops::movedim(x, DimVector{lo, hi}, DimVector{-2, -1});
  // PyTorch's SVD refuses NaN (a LinAlgError) rather than answer NaN (an infinity gives NaN)
  Tensor has_nan = host_values(ops::any(ops::isnan(m, Tensor()), std::nullopt, false), "norm");
  // (ember.norm turns this message into ember.linalg.LinAlgError: see _compat_ops.py)
  EMBER_CHECK(has_nan->data()[0] == 0,  // one bool byte
              "linalg.svd: The algorithm failed to converge because the input matrix contained "
              "non-finite values.");
  // the singular vectors too: the derivative needs them
  Tensor s = std::get<1>(ops::_linalg_svd(m, false, true));
  Tensor r = ops::sum(s, DimVector{-1}, false, std::nullopt);
  return keepdim ? ops::unsqueeze(ops::unsqueeze(r, lo), hi) : r;
}
}  // namespace

Tensor norm(const Tensor& self, const std::string& p, const std::optional<DimVector>& dim,
            bool keepdim, std::optional<ScalarType> dtype) {
  if (p == "fro") {
    // a vector norm over one or two dims (or all, dim=None): more dims make PyTorch's matrix
    // norm refuse them, where the vector norm over all of them was returned
    EMBER_CHECK(!dim || dim->size() <= 2, "norm(): p='fro' takes at most two dims (a vector or a ",
                "matrix norm), got ", dim ? dim->size() : 0, " dims for an input of shape ",
                self->sizes());
    return ops::norm(self, std::optional<Scalar>(Scalar(2.0)), dim, keepdim, dtype);
  }
  if (p == "nuc") return nuclear_norm(self, dim, keepdim, dtype);
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
