// CUDA kernels of the binary pointwise ops of ops/pointwise.yaml (arithmetic, comparisons,
// logic, bitwise, isclose / allclose / equal), beside pointwise_ops.cu: the CPU kernels'
// plans and arithmetic (kernels/cpu/pointwise_ops.cpp) on the elementwise engine.
//
// One difference is forced by the device: an integer division or modulo by zero cannot raise
// from inside a kernel. A zero divisor given as a number raises the CPU's error before the
// launch; a zero inside a divisor tensor gives 0 (PyTorch's CUDA kernels give an unspecified
// value there too).
#include "cuda/cuda_registry.h"
#include "cuda/pointwise_functors.cuh"
#include "cuda/sync_debug.h"
#include "kernels/pointwise_rules.h"

namespace ember {
namespace cuda {
namespace pointwise {

// ---- binary arithmetic ------------------------------------------------------------------------

Tensor add(const Tensor& self, const TensorOrScalar& other, const Scalar& alpha,
           const Tensor& out) {
  ElementwiseIterator it("add");
  binary_iter(it, self, other, out).build();
  check_alpha(alpha, it.common_dtype(), "add");
  run<Types::All, void, 2>(it, "add", [&](auto tag) {
    using A = decltype(tag);
    return fn::add<A>{alpha.to<A>()};
  });
  return it.output();
}

Tensor sub(const Tensor& self, const TensorOrScalar& other, const Scalar& alpha,
           const Tensor& out) {
  check_sub_operands(self, other, "sub");
  ElementwiseIterator it("sub");
  binary_iter(it, self, other, out).build();
  check_alpha(alpha, it.common_dtype(), "sub");
  run<Types::Numeric, void, 2>(it, "sub", [&](auto tag) {
    using A = decltype(tag);
    return fn::sub<A>{alpha.to<A>()};
  });
  return it.output();
}

Tensor rsub(const Tensor& self, const TensorOrScalar& other, const Scalar& alpha) {
  check_sub_operands(self, other, "rsub");
  ElementwiseIterator it("rsub");
  binary_iter(it, self, other, Tensor()).build();
  check_alpha(alpha, it.common_dtype(), "rsub");
  run<Types::Numeric, void, 2>(it, "rsub", [&](auto tag) {
    using A = decltype(tag);
    return fn::rsub<A>{alpha.to<A>()};
  });
  return it.output();
}

Tensor mul(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  ElementwiseIterator it("mul");
  binary_iter(it, self, other, out).build();
  run<Types::AllUInt, void, 2>(it, "mul", stateless(fn::mul{}));
  return it.output();
}

// An integer divisor given as a number (or a 0-d CPU tensor) is known here: dividing by zero
// raises as on the CPU. (A zero inside a divisor tensor cannot raise from the device.)
void check_host_divisor(const TensorIterator& it, const char* msg) {
  if (!is_integral(it.common_dtype(), true) || !it.is_scalar(2)) return;
  if (load_scalar(it.data(2), it.dtype(2)).to_int() == 0) EMBER_FAIL(Runtime, msg);
}

// div and its aliases true_divide / floor_divide (name: the op errors name).
Tensor div_named(const char* name, const Tensor& self, const TensorOrScalar& other,
                 const std::optional<std::string>& mode, const Tensor& out) {
  ElementwiseIterator it(name);
  binary_iter(it, self, other, out);
  if (!mode) {
    it.promote_int_to_float(true).build();
    run<Types::Float, void, 2>(it, name, stateless(fn::true_div{}));
    return it.output();
  }
  check_div_mode(*mode);
  it.build();
  const std::string zero = std::string(name) + ": ZeroDivisionError (integer division by zero)";
  check_host_divisor(it, zero.c_str());
  if (*mode == "floor") {
    run<Types::Numeric, void, 2>(it, name, stateless(fn::floor_div{}));
  } else {
    run<Types::Numeric, void, 2>(it, name, stateless(fn::trunc_div{}));
  }
  return it.output();
}

Tensor div(const Tensor& self, const TensorOrScalar& other, const std::optional<std::string>& mode,
           const Tensor& out) {
  return div_named("div", self, other, mode, out);
}
Tensor true_divide(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  return div_named("true_divide", self, other, std::nullopt, out);
}
Tensor floor_divide(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  return div_named("floor_divide", self, other, std::string("floor"), out);
}

Tensor remainder(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  ElementwiseIterator it("remainder");
  binary_iter(it, self, other, out).build();
  check_host_divisor(it, "remainder: ZeroDivisionError (integer modulo by zero)");
  run<Types::Numeric, void, 2>(it, "remainder", stateless(fn::remainder{}));
  return it.output();
}

Tensor fmod(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  ElementwiseIterator it("fmod");
  binary_iter(it, self, other, out).build();
  check_host_divisor(it, "fmod: ZeroDivisionError (integer modulo by zero)");
  run<Types::Numeric, void, 2>(it, "fmod", stateless(fn::fmod{}));
  return it.output();
}

Tensor pow(const Tensor& self, const TensorOrScalar& exponent, const Tensor& out) {
  check_pow_exponent(self, exponent);
  ElementwiseIterator it("pow");
  binary_iter(it, self, exponent, out).build();
  if (!exponent.is_tensor()) {
    check_scalar_fits(exponent.scalar, it.common_dtype(), "pow");
    run<Types::Numeric, void, 2>(it, "pow", stateless(fn::pow_op<true>{}));
  } else {
    run<Types::Numeric, void, 2>(it, "pow", stateless(fn::pow_op<false>{}));
  }
  return it.output();
}

Tensor rpow(const Tensor& self, const Scalar& base) {
  ElementwiseIterator it("pow");
  it.add_output(Tensor()).add_input(base).add_input(self).build();
  run<Types::Numeric, void, 2>(it, "pow", stateless(fn::rpow{}));
  return it.output();
}

Tensor atan2(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  ElementwiseIterator it("atan2");
  binary_iter(it, self, other, out).promote_int_to_float(true).build();
  run<Types::Float, void, 2>(it, "atan2", stateless(fn::atan2{}));
  return it.output();
}

// torch.special's polynomials (x, n): as on the CPU.
#define EMBER_CU_SPECIAL_POLY(NAME)                                                            \
  Tensor special_##NAME(const TensorOrScalar& x, const TensorOrScalar& n, const Tensor& out) { \
    check_special_poly_args(x, n, "special_" #NAME);                                           \
    ElementwiseIterator it("special_" #NAME);                                                  \
    it.add_output(out).add_input(x).add_input(n).promote_int_to_float(true).build();           \
    run<Types::Float, void, 2>(it, "special_" #NAME, stateless(fn::special_##NAME{}));         \
    return it.output();                                                                        \
  }
EMBER_CU_SPECIAL_POLY(chebyshev_polynomial_t)
EMBER_CU_SPECIAL_POLY(chebyshev_polynomial_u)
EMBER_CU_SPECIAL_POLY(chebyshev_polynomial_v)
EMBER_CU_SPECIAL_POLY(chebyshev_polynomial_w)
EMBER_CU_SPECIAL_POLY(shifted_chebyshev_polynomial_t)
EMBER_CU_SPECIAL_POLY(shifted_chebyshev_polynomial_u)
EMBER_CU_SPECIAL_POLY(shifted_chebyshev_polynomial_v)
EMBER_CU_SPECIAL_POLY(shifted_chebyshev_polynomial_w)
EMBER_CU_SPECIAL_POLY(hermite_polynomial_h)
EMBER_CU_SPECIAL_POLY(hermite_polynomial_he)
EMBER_CU_SPECIAL_POLY(laguerre_polynomial_l)
EMBER_CU_SPECIAL_POLY(legendre_polynomial_p)
#undef EMBER_CU_SPECIAL_POLY

Tensor minimum(const Tensor& self, const Tensor& other, const Tensor& out) {
  ElementwiseIterator it("minimum");
  it.add_output(out).add_input(self).add_input(other).build();
  run<Types::All, void, 2>(it, "minimum", stateless(fn::minimum{}));
  return it.output();
}

Tensor maximum(const Tensor& self, const Tensor& other, const Tensor& out) {
  ElementwiseIterator it("maximum");
  it.add_output(out).add_input(self).add_input(other).build();
  run<Types::All, void, 2>(it, "maximum", stateless(fn::maximum{}));
  return it.output();
}

// ---- comparisons and logic -> bool ------------------------------------------------------------

#define EMBER_CU_COMPARE(NAME)                                                      \
  Tensor NAME(const Tensor& self, const TensorOrScalar& other, const Tensor& out) { \
    ElementwiseIterator it(#NAME);                                                  \
    binary_iter(it, self, other, out).output_dtype(ScalarType::Bool).build();       \
    run<Types::All, bool, 2>(it, #NAME, stateless(fn::NAME{}));                     \
    return it.output();                                                             \
  }
EMBER_CU_COMPARE(eq)
EMBER_CU_COMPARE(ne)
EMBER_CU_COMPARE(lt)
EMBER_CU_COMPARE(le)
EMBER_CU_COMPARE(gt)
EMBER_CU_COMPARE(ge)
#undef EMBER_CU_COMPARE

#define EMBER_CU_LOGICAL(NAME)                                                                  \
  Tensor NAME(const Tensor& self, const Tensor& other, const Tensor& out) {                     \
    ElementwiseIterator it(#NAME);                                                              \
    it.add_output(out).add_input(self).add_input(other).output_dtype(ScalarType::Bool).build(); \
    run<Types::All, bool, 2>(it, #NAME, stateless(fn::NAME{}));                                 \
    return it.output();                                                                         \
  }
EMBER_CU_LOGICAL(logical_and)
EMBER_CU_LOGICAL(logical_or)
EMBER_CU_LOGICAL(logical_xor)
#undef EMBER_CU_LOGICAL

// The shifts take no unsigned storage type (as PyTorch), and/or/xor do.
#define EMBER_CU_BITWISE(NAME, SHIFT)                                               \
  Tensor NAME(const Tensor& self, const TensorOrScalar& other, const Tensor& out) { \
    ElementwiseIterator it(#NAME);                                                  \
    binary_iter(it, self, other, out).build();                                      \
    if (SHIFT) check_shift_dtype(it.common_dtype(), #NAME);                         \
    constexpr Types types = SHIFT ? Types::Integral : Types::IntegralUInt;          \
    run<types, void, 2>(it, #NAME, stateless(fn::NAME{}));                          \
    return it.output();                                                             \
  }
EMBER_CU_BITWISE(bitwise_and, false)
EMBER_CU_BITWISE(bitwise_or, false)
EMBER_CU_BITWISE(bitwise_xor, false)
EMBER_CU_BITWISE(bitwise_left_shift, true)
EMBER_CU_BITWISE(bitwise_right_shift, true)
#undef EMBER_CU_BITWISE

// ---- closeness -------------------------------------------------------------------------------

Tensor isclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equal_nan) {
  check_isclose_args(self, other, rtol, atol);
  ElementwiseIterator it("isclose");
  it.add_output(Tensor()).add_input(self).add_input(other).output_dtype(ScalarType::Bool).build();
  const bool in_double = default_dtype() == ScalarType::Float64;
  run<Types::AllUInt, bool, 2>(it, "isclose",
                               [=](auto) { return fn::isclose{rtol, atol, equal_nan, in_double}; });
  return it.output();
}
// ---- ops returning a bool: computed on the device, one flag read back (a sync point) ----------

__global__ void any_zero_kernel(const uint8_t* p, int64_t n, int32_t* found) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    if (p[i] == 0) *found = 1;
}

// Whether every element of b (a bool tensor an op has just made: dense, its numel() bytes from
// data()) is true.
bool all_true(const Tensor& b, const char* op) {
  const int64_t n = b->numel();
  if (n == 0) return true;
  DeviceGuard guard(b->device().index);
  cudaStream_t stream = current_stream();
  Tensor flag = ember::empty(DimVector{1}, ScalarType::Int32, b->device());
  EMBER_CUDA_CHECK(cudaMemsetAsync(flag->data(), 0, sizeof(int32_t), stream));
  const unsigned blocks = std::min(blocks_for(n), 1024u);
  any_zero_kernel<<<blocks, kBlockSize, 0, stream>>>(b->data_as<uint8_t>(), n,
                                                     flag->data_as<int32_t>());
  check_launch(op);
  int32_t found = 0;
  sync_debug_check(op);  // ember.cuda.set_sync_debug_mode
  EMBER_CUDA_CHECK(
      cudaMemcpyAsync(&found, flag->data(), sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
  EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
  return found == 0;
}

bool allclose(const Tensor& self, const Tensor& other, double rtol, double atol, bool equal_nan) {
  return all_true(isclose(self, other, rtol, atol, equal_nan), "allclose");
}

bool equal(const Tensor& self, const Tensor& other) {
  if (self->sizes() != other->sizes()) return false;
  return all_true(eq(self, TensorOrScalar(other), Tensor()), "equal");
}
// ---- registration -----------------------------------------------------------------------------

void register_pointwise_binary() {
#define REG(NAME) register_kernel(#NAME, DeviceType::CUDA, &NAME)
  REG(add);
  REG(sub);
  REG(rsub);
  REG(mul);
  REG(div);
  REG(true_divide);
  REG(floor_divide);
  REG(remainder);
  REG(fmod);
  REG(pow);
  REG(rpow);
  REG(atan2);
  REG(special_chebyshev_polynomial_t);
  REG(special_chebyshev_polynomial_u);
  REG(special_chebyshev_polynomial_v);
  REG(special_chebyshev_polynomial_w);
  REG(special_shifted_chebyshev_polynomial_t);
  REG(special_shifted_chebyshev_polynomial_u);
  REG(special_shifted_chebyshev_polynomial_v);
  REG(special_shifted_chebyshev_polynomial_w);
  REG(special_hermite_polynomial_h);
  REG(special_hermite_polynomial_he);
  REG(special_laguerre_polynomial_l);
  REG(special_legendre_polynomial_p);
  REG(minimum);
  REG(maximum);
  REG(eq);
  REG(ne);
  REG(lt);
  REG(le);
  REG(gt);
  REG(ge);
  REG(logical_and);
  REG(logical_or);
  REG(logical_xor);
  REG(bitwise_and);
  REG(bitwise_or);
  REG(bitwise_xor);
  REG(bitwise_left_shift);
  REG(bitwise_right_shift);
  REG(isclose);
  REG(allclose);
  REG(equal);
#undef REG
}

}  // namespace pointwise
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::pointwise::register_pointwise_binary)
