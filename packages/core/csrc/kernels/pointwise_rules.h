// Device-neutral pieces of the pointwise ops (ops/pointwise.yaml) shared by the CPU and CUDA
// kernels: operand setup and argument checks with their messages, so each rule lives once.
#pragma once
#include <optional>
#include <string>

#include "core/tensor.h"
#include "kernels/iterator.h"

namespace ember {

// The iterator of every pointwise op: element-wise, so it may keep its inputs' memory layout.
struct ElementwiseIterator : TensorIterator {
  explicit ElementwiseIterator(const char* op) : TensorIterator(op) {
    keep_layout();
    check_partial_overlap();
  }
};

// out = f(self, other): the iterator's operands (other must be given).
TensorIterator& binary_iter(TensorIterator& it, const Tensor& self, const TensorOrScalar& other,
                            const Tensor& out);
// out = f(self, t1, t2) (addcmul, addcdiv), built; the number `value` must fit the compute dtype.
TensorIterator& addc_iter(TensorIterator& it, const Tensor& self, const Tensor& t1,
                          const Tensor& t2, const Scalar& value, const Tensor& out, const char* op);
// add / sub / rsub: a bool operand cannot be subtracted ...
void check_sub_operands(const Tensor& self, const TensorOrScalar& other, const char* op);
// ... and alpha must suit (and fit) the compute dtype.
void check_alpha(const Scalar& alpha, ScalarType common, const char* op);
void check_div_mode(const std::string& mode);
// The shifts have no bool kernel (bool << bool, as in PyTorch); a bool operand still promotes
// with an integer one.
void check_shift_dtype(ScalarType common, const char* op);
void check_pow_exponent(const Tensor& self, const TensorOrScalar& exponent);
void check_round_decimals(ScalarType common, const Tensor& self, int64_t decimals);
void check_clamp_bounds(const TensorOrScalar& min, const TensorOrScalar& max);
// A number bound that does not fit the compute dtype would wrap (int8 clamp(0, 1000)).
void check_clamp_fits(const TensorOrScalar& min, const TensorOrScalar& max, ScalarType common);
// A bool clamp is defined only with a single tensor bound (maximum / minimum, as PyTorch); raises
// NotImplementedError for number bounds or both bounds. True when the clamp is a bool one.
bool check_clamp_bool(ScalarType common, const TensorOrScalar& min, const TensorOrScalar& max);
void check_where_condition(const Tensor& condition);
void check_lerp_dtypes(const Tensor& self, const Tensor& end);
void check_addcdiv_dtypes(const Tensor& t1, const Tensor& t2);
// torch.special's polynomials take (x, n) with at least one tensor.
void check_special_poly_args(const TensorOrScalar& x, const TensorOrScalar& n, const char* op);
void check_isclose_args(const Tensor& self, const Tensor& other, double rtol, double atol);

}  // namespace ember
