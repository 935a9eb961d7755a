#include "kernels/pointwise_rules.h"

#include "core/error.h"

namespace ember {

TensorIterator& binary_iter(TensorIterator& it, const Tensor& self, const TensorOrScalar& other,
                            const Tensor& out) {
  EMBER_CHECK_KIND(other.present, Type, "expected a tensor or a number, got None");
  return it.add_output(out).add_input(self).add_input(other);
}

namespace {
// The dtype whose range a real addcmul / addcdiv value must fit: float32 for float16 / bfloat16
// (PyTorch computes them in float: a value of 1e10 gives inf, only one past float32's range is
// refused), else the common dtype itself.
ScalarType addc_value_dtype(const Scalar& value, ScalarType common) {
  const bool low = common == ScalarType::Float16 || common == ScalarType::BFloat16;
  return low && !value.is_complex() ? ScalarType::Float32 : common;
}
}  // namespace

TensorIterator& addc_iter(TensorIterator& it, const Tensor& self, const Tensor& t1,
                          const Tensor& t2, const Scalar& value, const Tensor& out,
                          const char* op) {
  it.add_output(out).add_input(self).add_input(t1).add_input(t2).build();
  check_scalar_fits(value, addc_value_dtype(value, it.common_dtype()), op);
  return it;
}

void check_sub_operands(const Tensor& self, const TensorOrScalar& other, const char* op) {
  EMBER_CHECK(
      self->dtype() != ScalarType::Bool &&
          !(other.is_tensor() ? other.tensor->dtype() == ScalarType::Bool : other.scalar.is_bool()),
      op,
      ": subtraction, the `-` operator, with a bool tensor is not supported; use "
      "logical_xor or bitwise_not instead");
}

void check_alpha(const Scalar& alpha, ScalarType common, const char* op) {
  EMBER_CHECK(!alpha.is_bool() || common == ScalarType::Bool, op,
              ": a boolean alpha is only supported for boolean results (got ", dtype_name(common),
              ")");
  EMBER_CHECK(!(is_integral(common, true) && alpha.is_floating()), op,
              ": for integral input tensors, argument alpha must not be a floating point number");
  check_scalar_fits(alpha, common, op);  // alpha must not wrap (int8, 300)
}

void check_shift_dtype(ScalarType common, const char* op) {
  EMBER_CHECK_KIND(common != ScalarType::Bool, DtypeNotImplemented, op,
                   ": not implemented for dtype bool (supported: the integer dtypes)");
}

void check_div_mode(const std::string& mode) {
  EMBER_CHECK_KIND(mode == "trunc" || mode == "floor", Runtime,
                   "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
                   mode, "'");
}

void check_pow_exponent(const Tensor& self, const TensorOrScalar& exponent) {
  if (!exponent.is_tensor() && is_integral(self->dtype(), true) && exponent.scalar.is_integral())
    EMBER_CHECK(exponent.scalar.to_int() >= 0,
                "pow: integers to negative integer powers are not allowed (base dtype ",
                dtype_name(self->dtype()), ", exponent ", exponent.scalar.to_int(), ")");
}

void check_round_decimals(ScalarType common, const Tensor& self, int64_t decimals) {
  // (complex is left to the kernel's dtype refusal, which names it; it was called an integer)
  if (!is_floating(common) && !is_complex(common)) {
    // NotImplementedError (and still a RuntimeError), as PyTorch's missing integer kernel
    EMBER_CHECK_KIND(decimals == 0, DtypeNotImplemented,
                     "round: decimals is not supported for integer tensors (dtype ",
                     dtype_name(self->dtype()), ")");
  }
}

void check_clamp_bounds(const TensorOrScalar& min, const TensorOrScalar& max) {
  EMBER_CHECK(!min.is_none() || !max.is_none(),
              "clamp: at least one of 'min' or 'max' must not be None");
}

void check_clamp_fits(const TensorOrScalar& min, const TensorOrScalar& max, ScalarType common) {
  for (const TensorOrScalar* b : {&min, &max})
    if (!b->is_none() && !b->is_tensor()) check_scalar_fits(b->scalar, common, "clamp");
}

bool check_clamp_bool(ScalarType common, const TensorOrScalar& min, const TensorOrScalar& max) {
  if (common != ScalarType::Bool) return false;
  const bool one_tensor = min.is_none() ? max.is_tensor() : (min.is_tensor() && max.is_none());
  EMBER_CHECK_KIND(one_tensor, NotImplemented, "clamp: not implemented for dtype bool with ",
                   !min.is_none() && !max.is_none() ? "both min and max" : "a number bound",
                   " (a bool tensor clamps only by one bool tensor bound, min or max)");
  return true;
}

void check_where_condition(const Tensor& condition) {
  EMBER_CHECK(condition->dtype() == ScalarType::Bool || condition->dtype() == ScalarType::UInt8,
              "where: expected condition to be a bool tensor, got ",
              dtype_name(condition->dtype()));
}

void check_lerp_dtypes(const Tensor& self, const Tensor& end) {
  const ScalarType dt = self->dtype();
  // NotImplementedError (and still a TypeError): PyTorch raises a RuntimeError kind here
  EMBER_CHECK_KIND((is_floating(dt) || is_complex(dt)) && dt == end->dtype(), DtypeNotImplemented,
                   "lerp: expected self and end to have the same floating or complex dtype, got ",
                   dtype_name(self->dtype()), " and ", dtype_name(end->dtype()));
}

void check_addcdiv_dtypes(const Tensor& t1, const Tensor& t2) {
  EMBER_CHECK(is_floating(t1->dtype()) || is_floating(t2->dtype()) || is_complex(t1->dtype()) ||
                  is_complex(t2->dtype()),
              "addcdiv: integer division is not supported (tensor1 ", dtype_name(t1->dtype()),
              ", tensor2 ", dtype_name(t2->dtype()), "); use a floating dtype");
}

void check_isclose_args(const Tensor& self, const Tensor& other, double rtol, double atol) {
  // RuntimeError, as PyTorch's "Float did not match Long"
  EMBER_CHECK_KIND(self->dtype() == other->dtype(), Runtime, "isclose: self (",
                   dtype_name(self->dtype()), ") and other (", dtype_name(other->dtype()),
                   ") must have the same dtype");
  EMBER_CHECK_KIND(rtol >= 0 && atol >= 0, Runtime,
                   "isclose: rtol and atol must be non-negative, got rtol=", rtol, " atol=", atol);
}

void check_special_poly_args(const TensorOrScalar& x, const TensorOrScalar& n, const char* op) {
  EMBER_CHECK_KIND(x.is_tensor() || n.is_tensor(), Type, op,
                   ": expected x or n to be a Tensor, got two numbers");
  for (const TensorOrScalar* v : {&x, &n}) {
    if (v->is_tensor()) {
      const ScalarType dt = v->tensor->dtype();
      EMBER_CHECK_KIND(!is_complex(dt), NotImplemented, op, ": not implemented for dtype ",
                       dtype_name(dt), " (supported: real dtypes)");
    } else {
      EMBER_CHECK_KIND(!v->scalar.is_complex(), NotImplemented, op,
                       ": not implemented for complex numbers");
    }
  }
}

}  // namespace ember
