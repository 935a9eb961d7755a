#include "kernels/reduce_rules.h"

#include <limits>

#include "ops.h"

namespace ember {
namespace reduce {

void check_mean_dtype(const Tensor& self, std::optional<ScalarType> dtype) {
  if (dtype) {
    EMBER_CHECK(
        is_floating(*dtype) || is_complex(*dtype),
        "mean(): could not infer output dtype. Optional dtype must be either a floating point or "
        "complex dtype. Got: ",
        torch_type_name(*dtype));
  } else {
    EMBER_CHECK(
        is_floating(self->dtype()) || is_complex(self->dtype()),
        "mean(): could not infer output dtype. Input dtype must be either a floating point or "
        "complex dtype. Got: ",
        torch_type_name(self->dtype()));
  }
}

void check_nanmean_dtype(const Tensor& self, std::optional<ScalarType> dtype) {
  EMBER_CHECK(is_floating(self->dtype()),
              "nanmean(): expected input to have floating point or complex dtype but got ",
              torch_type_name(self->dtype()));
  if (!dtype) return;
  // An integral dtype would turn NaN into garbage before it is skipped (PyTorch refuses it).
  EMBER_CHECK(is_floating(*dtype) || is_complex(*dtype),
              "nanmean(): could not infer output dtype. Optional dtype must be either a floating "
              "point or complex dtype. Got: ",
              torch_type_name(*dtype));
  // nansum has no complex kernel (nor has PyTorch's), so neither has nanmean.
  EMBER_CHECK_KIND(!is_complex(*dtype), DtypeNotImplemented,
                   "nanmean(): not implemented for dtype ", dtype_name(*dtype),
                   " (nansum supports real floating dtypes only)");
}

void check_arg_reduction_dtype(const Tensor& self, const char* op) {
  EMBER_CHECK(self->dtype() != ScalarType::Bool, op, "(): does not support bool input");
  EMBER_CHECK(!is_complex(self->dtype()), op, "(): does not support complex input");
}

void check_no_empty_reduced_dim(const Tensor& self, const std::vector<bool>& mask, const char* op) {
  for (int64_t d = 0; d < self->dim(); ++d)
    EMBER_CHECK_KIND(!(mask[d] && self->size(d) == 0), Index, op, "(): Expected reduction dim ", d,
                     " to have non-zero size.");
}

void check_amax_dims(const Tensor& self, const std::optional<DimVector>& dim, const char* op) {
  EMBER_CHECK(self->numel() != 0 || (dim && !dim->empty()), op,
              "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
              "reduction dim with the 'dim' argument.");
}

std::vector<bool> aminmax_mask(const Tensor& self, std::optional<int64_t> dim) {
  auto mask = dim_mask(dim, self->dim(), "aminmax");
  EMBER_CHECK(reduced_numel(self->sizes(), mask) != 0,
              "aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
              "identity.");
  return mask;
}

std::vector<bool> all_any_mask(const Tensor& self, const std::optional<DimVector>& dim,
                               const char* op) {
  return (dim && dim->empty()) ? std::vector<bool>(self->dim(), false)
                               : dim_mask(dim, self->dim(), op);
}

Tensor complex_nonzero_mask(const Tensor& self) {
  return dispatch::ne(self, TensorOrScalar(Scalar(0.0)), Tensor());
}

void check_norm_dtype(const Tensor& self, std::optional<ScalarType> dtype) {
  // the input's dtype first: dtype= does not make an integer input acceptable (as PyTorch)
  EMBER_CHECK(is_floating(self->dtype()) || is_complex(self->dtype()),
              "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ",
              torch_type_name(self->dtype()));
  if (!dtype) return;
  EMBER_CHECK(is_floating(*dtype) || is_complex(*dtype),
              "linalg.vector_norm: dtype should be floating point or complex, but got ",
              torch_type_name(*dtype));
  EMBER_CHECK(!is_complex(self->dtype()) || is_complex(*dtype),
              "linalg.vector_norm: dtype should be complex for complex inputs, but got ",
              torch_type_name(*dtype));
  EMBER_CHECK(is_complex(self->dtype()) || !is_complex(*dtype),
              "linalg.vector_norm: dtype should be real for real inputs, but got ",
              torch_type_name(*dtype));
  // dtype= may widen, not narrow (float32 input rounded to float16 before the norm)
  EMBER_CHECK(promote_types(self->dtype(), *dtype) == *dtype,
              "linalg.vector_norm: the dtype of the input (", torch_type_name(self->dtype()),
              ") should be convertible without narrowing to the specified dtype (",
              torch_type_name(*dtype), ")");
}

NormKind norm_kind(const Tensor& x, const std::vector<bool>& mask, double p) {
  const double inf = std::numeric_limits<double>::infinity();
  if ((p < 0 || p == inf) && reduced_numel(x->sizes(), mask) == 0)
    EMBER_FAIL(Runtime, "linalg.vector_norm cannot compute the ", p,
               " norm on an empty tensor because the "
               "operation does not have an identity");
  if (p == 2) return NormKind::Two;
  if (p == 1) return NormKind::One;
  if (p == inf) return NormKind::Inf;
  if (p == -inf) return NormKind::NegInf;
  if (p == 0) return NormKind::Zero;
  return NormKind::P;
}

double var_correction(std::optional<bool> unbiased, const std::optional<Scalar>& correction,
                      const char* op) {
  EMBER_CHECK_KIND(!(unbiased && correction), Type, op,
                   "(): cannot specify both unbiased and correction (use correction=0 or 1)");
  if (correction) return correction->to_double();
  if (unbiased) return *unbiased ? 1.0 : 0.0;
  return 1.0;
}

VarPlan var_plan(const Tensor& self, const std::optional<DimVector>& dim,
                 std::optional<bool> unbiased, bool keepdim,
                 const std::optional<Scalar>& correction, bool take_sqrt, bool want_mean,
                 const char* op) {
  EMBER_CHECK(is_floating(self->dtype()), op,
              "(): std and var only support floating point and complex dtypes (got ",
              dtype_name(self->dtype()), ")");
  VarPlan plan;
  plan.mask = dim_mask(dim, self->dim(), op);
  plan.correction = var_correction(unbiased, correction, op);
  plan.take_sqrt = take_sqrt;
  DimVector shape = reduced_sizes(self->sizes(), plan.mask, keepdim);
  plan.out = ember::empty(shape, self->dtype(), self->device());
  if (want_mean) plan.mean = ember::empty(shape, self->dtype(), self->device());
  return plan;
}

}  // namespace reduce
}  // namespace ember
