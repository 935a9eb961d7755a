// CUDA kernels of the pointwise activations of ops/nn.yaml (their out= / in-place forms, which
// write through the same iterator, and their fused backwards), with the arithmetic of the CPU
// kernels (kernels/cpu/nn_activation.cpp), run by the elementwise engine.
#include <string>

#include "core/dispatch.h"
#include "cuda/cuda_registry.h"
#include "cuda/elementwise.cuh"
#include "cuda/pointwise_math.cuh"
#include "kernels/activation_math.h"
#include "kernels/activation_rules.h"
#include "kernels/pointwise_rules.h"
#include "ops.h"

namespace ember {
namespace cuda {
namespace activation {

using act_math::kGeluC;
using act_math::kSqrt1_2;
using act_math::kSqrt2OverPi;
using act_math::sigmoid;
using act_math::softplus1;

namespace fn {

template <class A>
struct gelu {
  bool tanh_form;
  __device__ __forceinline__ A operator()(A x) const {
    if (tanh_form)
      return A(0.5) * x * (A(1) + dm::tanh(A(kSqrt2OverPi) * (x + A(kGeluC) * x * x * x)));
    return A(0.5) * x * (A(1) + dm::erf(x * A(kSqrt1_2)));
  }
};
struct silu {
  template <class A>
  __device__ __forceinline__ A operator()(A x) const {
    return x / (A(1) + dm::exp(-x));
  }
};
template <class A>
struct elu {
  A scale, scale_alpha, input_scale;
  __device__ __forceinline__ A operator()(A x) const {
    return x > A(0) ? scale * x : scale_alpha * dm::expm1(x * input_scale);
  }
};
template <class A>
struct threshold_backward {
  A threshold;
  // A zero, not grad * 0, where self <= threshold; a NaN self passes the gradient.
  __device__ __forceinline__ A operator()(A g, A x) const { return x <= threshold ? A(0) : g; }
};
template <class A>
struct sigmoid_backward {
  __device__ __forceinline__ A operator()(A g, A y) const { return g * (A(1) - y) * y; }
};
template <class A>
struct tanh_backward {
  __device__ __forceinline__ A operator()(A g, A y) const { return g * (A(1) - y * y); }
};
template <class A>
struct leaky_relu {
  A slope;
  __device__ __forceinline__ A operator()(A x) const { return x > A(0) ? x : x * slope; }
};
template <class A>
struct softplus {
  A beta, threshold;
  __device__ __forceinline__ A operator()(A x) const {
    const A z = x * beta;
    return z > threshold ? x : dm::log1p(dm::exp(z)) / beta;
  }
};
template <class A>
struct hardtanh {
  A lo, hi;
  __device__ __forceinline__ A operator()(A x) const { return x < lo ? lo : (x > hi ? hi : x); }
};
struct hardsigmoid {
  template <class A>
  __device__ __forceinline__ A operator()(A x) const {
    return x <= A(-3) ? A(0) : (x >= A(3) ? A(1) : x / A(6) + A(0.5));
  }
};
struct hardswish {
  template <class A>
  __device__ __forceinline__ A operator()(A x) const {
    return x <= A(-3) ? x * A(0) : (x >= A(3) ? x : x * (x + A(3)) / A(6));  // -0, and NaN at -inf
  }
};
struct mish {
  template <class A>
  __device__ __forceinline__ A operator()(A x) const {
    return x * dm::tanh(softplus1(x));
  }
};
struct softsign {
  template <class A>
  __device__ __forceinline__ A operator()(A x) const {
    return x / (A(1) + dm::fabs(x));
  }
};
struct logsigmoid {
  template <class A>
  __device__ __forceinline__ A operator()(A x) const {
    return ((A(0) < x) ? A(0) : x) - dm::log1p(dm::exp(-dm::fabs(x)));
  }
};

template <class A>
struct threshold {
  A limit, value;
  // x where x > limit (a NaN x stays NaN), else value.
  __device__ __forceinline__ A operator()(A x) const { return x <= limit ? value : x; }
};

using ember::Act;

// A fused activation backward: grad_output * f'(x) with f' of kind K; with kMask, 0 (not grad *
// 0) where f'(x) is 0 (hardtanh, hardsigmoid, hardswish), as the CPU kernel.
template <class A, Act K, bool kMask>
struct act_backward {
  A p0, p1, p2;
  __device__ A operator()(A g, A x) const {
    const A dv = act_math::act_derivative<A>(K, false, x, p0, p1, p2);
    return (kMask && dv == A(0)) ? A(0) : g * dv;
  }
};

// f'(x) (order 1) or f''(x) (order 2) of each activation (kernels/activation_math.h).
template <class A>
struct act_derivative {
  Act act;
  bool second;
  A p0, p1, p2;
  __device__ A operator()(A x) const {
    return act_math::act_derivative<A>(act, second, x, p0, p1, p2);
  }
};

}  // namespace fn

// make(A{}) (a functor over the compute type A) on every element of self, a floating tensor,
// written into a new tensor, into out= or into self itself (the in-place forms: one kernel).
template <class Make>
Tensor unary_float(const char* op, const Tensor& self, const Tensor& out, const Make& make) {
  check_floating_input(self, op);
  ElementwiseIterator it(op);
  it.add_output(out).add_input(self).build();
  EMBER_DISPATCH_FLOAT(it.dtype(1), op, [&] {
    using T = scalar_t;
    launch_elementwise<T, T>(it, op, make(op_t<T>{}));
  });
  it.finish();
  return it.output();
}

// grad_output * f'(x) in one kernel (the fused backwards; kernels/cpu/nn_activation.cpp).
template <Act K, bool kMask>
Tensor act_backward(const char* op, const Tensor& grad_output, const Tensor& x, double p0 = 0,
                    double p1 = 0, double p2 = 0) {
  check_activation_backward_dtypes(grad_output, x, op);
  ElementwiseIterator it(op);
  it.add_output(Tensor()).add_input(grad_output).add_input(x).build();
  EMBER_DISPATCH_FLOAT(it.common_dtype(), op, [&] {
    using T = scalar_t;
    using A = op_t<T>;
    launch_elementwise<T, T, T>(it, op, fn::act_backward<A, K, kMask>{A(p0), A(p1), A(p2)});
  });
  it.finish();
  return it.output();
}

template <class Fn>
auto stateless(Fn) {
  return [](auto) { return Fn{}; };
}

Tensor gelu(const Tensor& self, const std::string& approximate, const Tensor& out) {
  const bool tanh_form = gelu_tanh_form(approximate);
  return unary_float("gelu", self, out,
                     [tanh_form](auto tag) { return fn::gelu<decltype(tag)>{tanh_form}; });
}

Tensor gelu_backward(const Tensor& grad_output, const Tensor& self,
                     const std::string& approximate) {
  if (gelu_tanh_form(approximate))
    return act_backward<Act::GeluTanh, false>("gelu_backward", grad_output, self);
  return act_backward<Act::Gelu, false>("gelu_backward", grad_output, self);
}

Tensor silu(const Tensor& self, const Tensor& out) {
  return unary_float("silu", self, out, stateless(fn::silu{}));
}

Tensor silu_backward(const Tensor& grad_output, const Tensor& self) {
  return act_backward<Act::Silu, false>("silu_backward", grad_output, self);
}

Tensor elu(const Tensor& self, const Scalar& alpha, const Scalar& scale, const Scalar& input_scale,
           const Tensor& out) {
  const double a = alpha.to_double(), sc = scale.to_double(), is = input_scale.to_double();
  return unary_float("elu", self, out, [=](auto tag) {
    using A = decltype(tag);
    return fn::elu<A>{A(sc), A(sc * a), A(is)};
  });
}

Tensor elu_(const Tensor& self, const Scalar& alpha, const Scalar& scale,
            const Scalar& input_scale) {
  return elu(self, alpha, scale, input_scale, self);
}

Tensor elu_backward(const Tensor& grad_output, const Scalar& alpha, const Scalar& scale,
                    const Scalar& input_scale, bool is_result, const Tensor& self_or_result) {
  const char* op = "elu_backward";
  const double a = alpha.to_double(), sc = scale.to_double(), is = input_scale.to_double();
  if (is_result) {
    check_backward_from_result(op, "elu", a);
    return act_backward<Act::EluResult, false>(op, grad_output, self_or_result, a, sc, is);
  }
  return act_backward<Act::Elu, false>(op, grad_output, self_or_result, a, sc, is);
}

Tensor threshold(const Tensor& self, const Scalar& threshold, const Scalar& value,
                 const Tensor& out) {
  const char* op = "threshold";
  check_threshold_scalars(self, threshold, value);
  ElementwiseIterator it(op);
  it.add_output(out).add_input(self).build();
  EMBER_DISPATCH_NUMERIC(it.dtype(1), op, [&] {
    using T = scalar_t;
    using A = op_t<T>;
    launch_elementwise<T, T>(it, op, fn::threshold<A>{threshold.to<A>(), value.to<A>()});
  });
  it.finish();
  return it.output();
}

Tensor threshold_backward(const Tensor& grad_output, const Tensor& self, const Scalar& threshold) {
  const char* op = "threshold_backward";
  check_threshold_backward_dtypes(grad_output, self);
  TensorIterator it(op);
  it.add_output(Tensor()).add_input(grad_output).add_input(self).build();
  EMBER_DISPATCH_FLOAT(it.common_dtype(), op, [&] {
    using T = scalar_t;
    using A = op_t<T>;
    launch_elementwise<T, T, T>(it, op,
                                fn::threshold_backward<A>{static_cast<A>(threshold.to_double())});
  });
  it.finish();
  return it.output();
}

// out = f(grad_output, output): sigmoid's and tanh's backward.
template <template <class> class F>
Tensor output_backward(const char* op, const Tensor& grad_output, const Tensor& output) {
  check_floating_input(grad_output, op);
  check_floating_input(output, op);
  TensorIterator it(op);
  it.add_output(Tensor()).add_input(grad_output).add_input(output).build();
  EMBER_DISPATCH_FLOAT(it.common_dtype(), op, [&] {
    using T = scalar_t;
    launch_elementwise<T, T, T>(it, op, F<op_t<T>>{});
  });
  it.finish();
  return it.output();
}

Tensor sigmoid_backward(const Tensor& grad_output, const Tensor& output) {
  return output_backward<fn::sigmoid_backward>("sigmoid_backward", grad_output, output);
}

Tensor tanh_backward(const Tensor& grad_output, const Tensor& output) {
  return output_backward<fn::tanh_backward>("tanh_backward", grad_output, output);
}

Tensor leaky_relu(const Tensor& self, const Scalar& negative_slope, const Tensor& out) {
  const double s = negative_slope.to_double();
  return unary_float("leaky_relu", self, out, [=](auto tag) {
    using A = decltype(tag);
    return fn::leaky_relu<A>{A(s)};
  });
}

Tensor leaky_relu_(const Tensor& self, const Scalar& negative_slope) {
  return leaky_relu(self, negative_slope, self);
}

Tensor leaky_relu_backward(const Tensor& grad_output, const Tensor& self,
                           const Scalar& negative_slope, bool self_is_result) {
  const char* op = "leaky_relu_backward";
  const double s = negative_slope.to_double();
  if (self_is_result) check_backward_from_result(op, "leaky_relu", s);
  return act_backward<Act::LeakyRelu, false>(op, grad_output, self, s);
}

Tensor softplus(const Tensor& self, const Scalar& beta, const Scalar& threshold,
                const Tensor& out) {
  const double b = beta.to_double(), t = threshold.to_double();
  return unary_float("softplus", self, out, [=](auto tag) {
    using A = decltype(tag);
    return fn::softplus<A>{A(b), A(t)};
  });
}

Tensor softplus_backward(const Tensor& grad_output, const Tensor& self, const Scalar& beta,
                         const Scalar& threshold) {
  return act_backward<Act::Softplus, false>("softplus_backward", grad_output, self,
                                            beta.to_double(), threshold.to_double());
}

Tensor hardtanh(const Tensor& self, const Scalar& min_val, const Scalar& max_val,
                const Tensor& out) {
  const double lo = min_val.to_double(), hi = max_val.to_double();
  check_hardtanh_range(lo, hi);
  return unary_float("hardtanh", self, out, [=](auto tag) {
    using A = decltype(tag);
    return fn::hardtanh<A>{A(lo), A(hi)};
  });
}

Tensor hardtanh_backward(const Tensor& grad_output, const Tensor& self, const Scalar& min_val,
                         const Scalar& max_val) {
  return act_backward<Act::HardtanhResult, true>("hardtanh_backward", grad_output, self,
                                                 min_val.to_double(), max_val.to_double());
}

Tensor hardsigmoid(const Tensor& self, const Tensor& out) {
  return unary_float("hardsigmoid", self, out, stateless(fn::hardsigmoid{}));
}
Tensor hardsigmoid_backward(const Tensor& grad_output, const Tensor& self) {
  return act_backward<Act::Hardsigmoid, true>("hardsigmoid_backward", grad_output, self);
}
Tensor hardswish(const Tensor& self, const Tensor& out) {
  return unary_float("hardswish", self, out, stateless(fn::hardswish{}));
}
Tensor hardswish_backward(const Tensor& grad_output, const Tensor& self) {
  return act_backward<Act::Hardswish, true>("hardswish_backward", grad_output, self);
}
Tensor mish(const Tensor& self, const Tensor& out) {
  return unary_float("mish", self, out, stateless(fn::mish{}));
}
Tensor mish_backward(const Tensor& grad_output, const Tensor& self) {
  return act_backward<Act::Mish, false>("mish_backward", grad_output, self);
}
Tensor softsign(const Tensor& self) {
  return unary_float("softsign", self, Tensor(), stateless(fn::softsign{}));
}
Tensor logsigmoid(const Tensor& self) {
  return unary_float("logsigmoid", self, Tensor(), stateless(fn::logsigmoid{}));
}

Tensor _activation_derivative(const Tensor& self, const std::string& kind, int64_t order, double p0,
                              double p1, double p2) {
  const fn::Act act = parse_act(kind);
  check_act_order(kind, order);
  const bool second = order == 2;
  return unary_float("_activation_derivative", self, Tensor(), [=](auto tag) {
    using A = decltype(tag);
    return fn::act_derivative<A>{act, second, A(p0), A(p1), A(p2)};
  });
}

void register_activations() {
#define REG(NAME) register_kernel(#NAME, DeviceType::CUDA, &NAME)
  REG(gelu);
  REG(gelu_backward);
  REG(silu);
  REG(silu_backward);
  REG(elu);
  REG(elu_);
  REG(elu_backward);
  REG(threshold);
  REG(threshold_backward);
  REG(sigmoid_backward);
  REG(tanh_backward);
  REG(leaky_relu);
  REG(leaky_relu_);
  REG(leaky_relu_backward);
  REG(softplus);
  REG(softplus_backward);
  REG(hardtanh);
  REG(hardtanh_backward);
  REG(hardsigmoid);
  REG(hardsigmoid_backward);
  REG(hardswish);
  REG(hardswish_backward);
  REG(mish);
  REG(mish_backward);
  REG(softsign);
  REG(logsigmoid);
  REG(_activation_derivative);
#undef REG
}

}  // namespace activation
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::activation::register_activations)
