// CUDA kernels of the pointwise ops declared in ops/pointwise.yaml: the same TensorIterator
// plans and the same arithmetic as the CPU kernels (kernels/cpu/pointwise_ops.cpp), run by the
// elementwise engine (elementwise.cuh) with a functor per op (pointwise_functors.cuh). This file
// holds the unary and ternary ops; pointwise_binary_ops.cu the binary ones and comparisons.
#include "cuda/cuda_registry.h"
#include "cuda/index_common.cuh"
#include "cuda/pointwise_functors.cuh"
#include "kernels/pointwise_rules.h"
#include "ops.h"

namespace ember {
namespace cuda {
namespace pointwise {

// ---- unary ------------------------------------------------------------------------------------

#define EMBER_CU_UNARY_FLOAT(NAME)                                         \
  Tensor NAME(const Tensor& self, const Tensor& out) {                     \
    ElementwiseIterator it(#NAME);                                         \
    it.add_output(out).add_input(self).promote_int_to_float(true).build(); \
    run<Types::Float, void, 1>(it, #NAME, stateless(fn::NAME{}));          \
    return it.output();                                                    \
  }
EMBER_CU_UNARY_FLOAT(exp)
EMBER_CU_UNARY_FLOAT(exp2)
EMBER_CU_UNARY_FLOAT(expm1)
EMBER_CU_UNARY_FLOAT(log)
EMBER_CU_UNARY_FLOAT(log2)
EMBER_CU_UNARY_FLOAT(log10)
EMBER_CU_UNARY_FLOAT(log1p)
EMBER_CU_UNARY_FLOAT(sqrt)
EMBER_CU_UNARY_FLOAT(rsqrt)
EMBER_CU_UNARY_FLOAT(sin)
EMBER_CU_UNARY_FLOAT(cos)
EMBER_CU_UNARY_FLOAT(tan)
EMBER_CU_UNARY_FLOAT(asin)
EMBER_CU_UNARY_FLOAT(acos)
EMBER_CU_UNARY_FLOAT(atan)
EMBER_CU_UNARY_FLOAT(sinh)
EMBER_CU_UNARY_FLOAT(cosh)
EMBER_CU_UNARY_FLOAT(tanh)
EMBER_CU_UNARY_FLOAT(asinh)
EMBER_CU_UNARY_FLOAT(acosh)
EMBER_CU_UNARY_FLOAT(atanh)
EMBER_CU_UNARY_FLOAT(sigmoid)
EMBER_CU_UNARY_FLOAT(erf)
EMBER_CU_UNARY_FLOAT(erfc)
EMBER_CU_UNARY_FLOAT(erfinv)
EMBER_CU_UNARY_FLOAT(reciprocal)
EMBER_CU_UNARY_FLOAT(special_bessel_j0)
EMBER_CU_UNARY_FLOAT(special_bessel_j1)
EMBER_CU_UNARY_FLOAT(special_bessel_y0)
EMBER_CU_UNARY_FLOAT(special_bessel_y1)
EMBER_CU_UNARY_FLOAT(special_modified_bessel_i0)
EMBER_CU_UNARY_FLOAT(special_modified_bessel_i1)
EMBER_CU_UNARY_FLOAT(special_modified_bessel_k0)
EMBER_CU_UNARY_FLOAT(special_modified_bessel_k1)
EMBER_CU_UNARY_FLOAT(special_scaled_modified_bessel_k0)
EMBER_CU_UNARY_FLOAT(special_scaled_modified_bessel_k1)
EMBER_CU_UNARY_FLOAT(special_airy_ai)
EMBER_CU_UNARY_FLOAT(special_spherical_bessel_j0)
#undef EMBER_CU_UNARY_FLOAT

// Ops that keep the input dtype. TYPES: which dtypes are accepted. EXACT: whether an out= tensor
// must have the input's dtype (PyTorch's rule for all but square and relu).
#define EMBER_CU_UNARY_SAME(NAME, TYPES, EXACT)                   \
  Tensor NAME(const Tensor& self, const Tensor& out) {            \
    ElementwiseIterator it(#NAME);                                \
    it.add_output(out).add_input(self);                           \
    if (EXACT) it.exact_output_dtype();                           \
    it.build();                                                   \
    run<Types::TYPES, void, 1>(it, #NAME, stateless(fn::NAME{})); \
    return it.output();                                           \
  }
EMBER_CU_UNARY_SAME(neg, Numeric, true)
EMBER_CU_UNARY_SAME(abs, Numeric, true)
EMBER_CU_UNARY_SAME(sign, All, true)
EMBER_CU_UNARY_SAME(sgn, All, true)  // real dtypes (complex CUDA tensors raise the dtype error)
EMBER_CU_UNARY_SAME(square, Numeric, false)
// torch squares a bool tensor as pow(x, 2): an int64 result (as the CPU kernel)
Tensor square_any(const Tensor& self, const Tensor& out) {
  if (self->dtype() == ScalarType::Bool)
    return dispatch::pow(self, TensorOrScalar(Scalar(int64_t(2))), out);
  return square(self, out);
}
EMBER_CU_UNARY_SAME(relu, Numeric, false)
EMBER_CU_UNARY_SAME(floor, Numeric, true)
EMBER_CU_UNARY_SAME(ceil, Numeric, true)
EMBER_CU_UNARY_SAME(trunc, Numeric, true)
EMBER_CU_UNARY_SAME(frac, Float, true)
EMBER_CU_UNARY_SAME(bitwise_not, Integral, true)
#undef EMBER_CU_UNARY_SAME

Tensor round(const Tensor& self, int64_t decimals, const Tensor& out) {
  ElementwiseIterator it("round");
  it.add_output(out).add_input(self).exact_output_dtype().build();
  check_round_decimals(it.common_dtype(), self, decimals);
  const double scale = std::pow(10.0, static_cast<double>(decimals < 0 ? -decimals : decimals));
  run<Types::Numeric, void, 1>(it, "round", [&](auto) { return fn::round{scale, decimals}; });
  return it.output();
}

// isnan / isinf / isfinite take uint16/32/64 as in PyTorch, logical_not does not.
#define EMBER_CU_PREDICATE(NAME, TYPES)                                        \
  Tensor NAME(const Tensor& self, const Tensor& out) {                         \
    ElementwiseIterator it(#NAME);                                             \
    it.add_output(out).add_input(self).output_dtype(ScalarType::Bool).build(); \
    run<Types::TYPES, bool, 1>(it, #NAME, stateless(fn::NAME{}));              \
    return it.output();                                                        \
  }
EMBER_CU_PREDICATE(isnan, AllUInt)
EMBER_CU_PREDICATE(isinf, AllUInt)
EMBER_CU_PREDICATE(isfinite, AllUInt)
EMBER_CU_PREDICATE(logical_not, All)
#undef EMBER_CU_PREDICATE

Tensor nan_to_num(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                  std::optional<double> neginf, const Tensor& out) {
  ElementwiseIterator it("nan_to_num");
  it.add_output(out).add_input(self).exact_output_dtype().build();
  const ScalarType st = it.dtype(0);
  const double big = st == ScalarType::Float16    ? 65504.0
                     : st == ScalarType::BFloat16 ? 3.3895313892515355e38
                     : st == ScalarType::Float32  ? double(std::numeric_limits<float>::max())
                                                  : std::numeric_limits<double>::max();
  run<Types::AllUInt, void, 1>(it, "nan_to_num", [&](auto tag) {
    using A = decltype(tag);
    if constexpr (std::is_integral_v<A>) {
      return fn::nan_to_num<A>{A(0), A(0), A(0)};
    } else {
      return fn::nan_to_num<A>{A(nan.value_or(0.0)), A(posinf.value_or(big)),
                               A(neginf.value_or(-big))};
    }
  });
  return it.output();
}

// ---- ternary ----------------------------------------------------------------------------------

Tensor clamp(const Tensor& self, const TensorOrScalar& min, const TensorOrScalar& max,
             const Tensor& out) {
  check_clamp_bounds(min, max);
  ElementwiseIterator it("clamp");
  it.add_output(out).add_input(self);
  if (!min.is_none()) it.add_input(min);
  if (!max.is_none()) it.add_input(max);
  it.build();
  if (check_clamp_bool(it.common_dtype(), min, max))
    return min.is_none() ? dispatch::minimum(self, max.tensor, out)
                         : dispatch::maximum(self, min.tensor, out);
  check_clamp_fits(min, max, it.common_dtype());
  const bool has_min = !min.is_none(), has_max = !max.is_none();
  if (has_min && has_max) {
    run<Types::Numeric, void, 3>(it, "clamp", stateless(fn::clamp_both{}));
  } else {
    run<Types::Numeric, void, 2>(it, "clamp", [has_min](auto) { return fn::clamp_one{has_min}; });
  }
  return it.output();
}

Tensor where(const Tensor& condition, const TensorOrScalar& self, const TensorOrScalar& other,
             const Tensor& out) {
  check_where_condition(condition);
  ElementwiseIterator it("where");
  it.add_output(out).add_input(self).add_input(other).add_input_raw(condition).build();
  EMBER_DISPATCH_ALL(it.dtype(1), "where", [&] {
    using T = scalar_t;
    if (it.dtype(3) == ScalarType::Bool) {
      launch_elementwise<T, T, T, bool>(it, "where", fn::where{});
    } else {
      launch_elementwise<T, T, T, uint8_t>(it, "where", fn::where{});
    }
  });
  it.finish();
  return it.output();
}

Tensor lerp(const Tensor& self, const Tensor& end, const TensorOrScalar& weight,
            const Tensor& out) {
  check_lerp_dtypes(self, end);
  ElementwiseIterator it("lerp");
  if (!weight.is_tensor() && !weight.scalar.is_complex()) {
    // A scalar weight is held in the compute type (float for half inputs, as torch's): rounded
    // to half first, 7e4 would be inf. It must fit float32 arithmetic (as the CPU kernel).
    if (self->dtype() != ScalarType::Float64)
      check_scalar_fits(weight.scalar, ScalarType::Float32, "lerp");
    it.add_output(out).add_input(self).add_input(end).build();
    run<Types::Float, void, 2>(it, "lerp", [&](auto tag) {
      using A = decltype(tag);
      return fn::lerp_by<A>{weight.scalar.to<A>()};
    });
    return it.output();
  }
  it.add_output(out).add_input(self).add_input(end).add_input(weight).build();
  run<Types::Float, void, 3>(it, "lerp", stateless(fn::lerp{}));
  return it.output();
}

Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value,
               const Tensor& out) {
  ElementwiseIterator it("addcmul");
  addc_iter(it, self, t1, t2, value, out, "addcmul");
  run<Types::Numeric, void, 3>(it, "addcmul", [&](auto tag) {
    using A = decltype(tag);
    return fn::addcmul<A>{value.to<A>()};
  });
  return it.output();
}

Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value,
               const Tensor& out) {
  check_addcdiv_dtypes(t1, t2);
  ElementwiseIterator it("addcdiv");
  addc_iter(it, self, t1, t2, value, out, "addcdiv");
  run<Types::Float, void, 3>(it, "addcdiv", [&](auto tag) {
    using A = decltype(tag);
    return fn::addcdiv<A>{value.to<A>()};
  });
  return it.output();
}

// ---- frexp: two outputs of different dtypes, so a kernel of its own -----------------------------

__device__ __forceinline__ float dev_frexp(float v, int* e) { return frexpf(v, e); }
__device__ __forceinline__ double dev_frexp(double v, int* e) { return ::frexp(v, e); }

template <class T>
__global__ void frexp_kernel(const T* x, T* mantissa, int32_t* exponent, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  // The device frexp gives the CPU kernel's answers: subnormals exact, and 0, inf and NaN
  // themselves with exponent 0. Half and BFloat16 go through float, where they are normal.
  int e = 0;
  const auto m = dev_frexp(to_op<T>(x[i]), &e);
  mantissa[i] = from_op<T>(m);
  exponent[i] = e;
}

std::tuple<Tensor, Tensor> frexp(const Tensor& self) {
  const char* op = "frexp()";
  EMBER_CHECK(is_floating(self->dtype()), op, ": only supports floating-point dtypes, but got ",
              dtype_name(self->dtype()));
  DeviceGuard guard(self->device().index);
  const Tensor x = ix::contiguous(self, op);
  Tensor mantissa = empty(self->sizes(), self->dtype(), self->device());
  Tensor exponent = empty(self->sizes(), ScalarType::Int32, self->device());
  const int64_t n = self->numel();
  if (n == 0) return {mantissa, exponent};
  EMBER_DISPATCH_FLOAT(self->dtype(), op, [&] {
    using T = scalar_t;
    frexp_kernel<T><<<blocks_for(n), kBlockSize, 0, current_stream()>>>(
        x->data_as<T>(), mantissa->data_as<T>(), exponent->data_as<int32_t>(), n);
    check_launch(op);
  });
  return {mantissa, exponent};
}

// ---- registration -----------------------------------------------------------------------------

void register_pointwise_unary_ternary() {
#define REG(NAME) register_kernel(#NAME, DeviceType::CUDA, &NAME)
  REG(exp);
  REG(exp2);
  REG(expm1);
  REG(log);
  REG(log2);
  REG(log10);
  REG(log1p);
  REG(sqrt);
  REG(rsqrt);
  REG(sin);
  REG(cos);
  REG(tan);
  REG(asin);
  REG(acos);
  REG(atan);
  REG(sinh);
  REG(asinh);
  REG(acosh);
  REG(atanh);
  REG(cosh);
  REG(tanh);
  REG(sigmoid);
  REG(erf);
  REG(erfc);
  REG(erfinv);
  REG(reciprocal);
  REG(special_bessel_j0);
  REG(special_bessel_j1);
  REG(special_bessel_y0);
  REG(special_bessel_y1);
  REG(special_modified_bessel_i0);
  REG(special_modified_bessel_i1);
  REG(special_modified_bessel_k0);
  REG(special_modified_bessel_k1);
  REG(special_scaled_modified_bessel_k0);
  REG(special_scaled_modified_bessel_k1);
  REG(special_airy_ai);
  REG(special_spherical_bessel_j0);
  REG(neg);
  REG(abs);
  REG(sign);
  REG(sgn);
  register_kernel("square", DeviceType::CUDA, &square_any);
  REG(relu);
  REG(floor);
  REG(ceil);
  REG(trunc);
  REG(frac);
  REG(round);
  REG(isnan);
  REG(isinf);
  REG(isfinite);
  REG(logical_not);
  REG(bitwise_not);
  REG(nan_to_num);
  REG(clamp);
  REG(where);
  REG(lerp);
  REG(addcmul);
  REG(addcdiv);
  REG(frexp);
#undef REG
  register_kernel("clip", DeviceType::CUDA, &clamp);
}

}  // namespace pointwise
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::pointwise::register_pointwise_unary_ternary)
