// The activations' formulas that every device computes the same way, written once for the
// CPU kernels (kernels/cpu/nn_activation.cpp) and the CUDA ones (cuda/nn_activation.cu): under
// nvcc they are __host__ __device__, and std:: math compiles to the device's functions there.
#pragma once
#include <cmath>

#include "kernels/activation_rules.h"

#ifdef __CUDACC__
#define EMBER_HOST_DEVICE __host__ __device__
#else
#define EMBER_HOST_DEVICE
#endif

namespace ember {
namespace act_math {

constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluC = 0.044715;

template <class A>
EMBER_HOST_DEVICE A sigmoid(A x) {
  return A(1) / (A(1) + std::exp(-x));
}
template <class A>
EMBER_HOST_DEVICE A softplus1(A x) {  // log(1 + exp(x)), stable for large |x|
  return x > A(20) ? x : std::log1p(std::exp(x));
}

// f'(x) (order 1) or f''(x) (order 2) of each activation; p0..p2 are its parameters.
template <class A>
EMBER_HOST_DEVICE A act_derivative(Act act, bool second, A x, A p0, A p1, A p2) {
  switch (act) {
    case Act::Gelu: {
      A pdf = A(kInvSqrt2Pi) * std::exp(A(-0.5) * x * x);
      if (second) return pdf * (A(2) - x * x);
      return A(0.5) * (A(1) + std::erf(x * A(kSqrt1_2))) + x * pdf;
    }
    case Act::GeluTanh: {
      A u = A(kSqrt2OverPi) * (x + A(kGeluC) * x * x * x);
      A t = std::tanh(u), sech2 = A(1) - t * t;
      A du = A(kSqrt2OverPi) * (A(1) + A(3 * kGeluC) * x * x);
      if (second) {
        A d2u = A(kSqrt2OverPi) * A(6 * kGeluC) * x;
        return sech2 * du + A(0.5) * x * sech2 * (d2u - A(2) * t * du * du);
      }
      return A(0.5) * (A(1) + t) + A(0.5) * x * sech2 * du;
    }
    case Act::Silu: {
      A s = sigmoid(x);
      if (second) return s * (A(1) - s) * (A(2) + x * (A(1) - A(2) * s));
      return s * (A(1) + x * (A(1) - s));
    }
    // elu's sides as PyTorch picks them: f' takes the exponential side where x <= 0 (a NaN x
    // the linear one: scale, not NaN), f'' where x < 0 (0 at x = 0 and at NaN).
    case Act::Elu: {  // x is the input; p0 alpha, p1 scale, p2 input_scale
      if (second) return x < A(0) ? p1 * p0 * p2 * p2 * std::exp(x * p2) : A(0);
      return x <= A(0) ? p1 * p0 * p2 * std::exp(x * p2) : p1;
    }
    case Act::EluResult:  // x is the output; p0 alpha, p1 scale, p2 input_scale
      if (second) return x < A(0) ? p2 : A(0);
      return x <= A(0) ? p2 * (x + p1 * p0) : p1;
    case Act::LeakyRelu:
      if (second) return A(0);
      return x > A(0) ? A(1) : p0;
    case Act::Softplus: {  // p0 beta, p1 threshold
      A z = x * p0;
      if (z > p1) return second ? A(0) : A(1);
      A s = sigmoid(z);
      return second ? p0 * s * (A(1) - s) : s;
    }
    case Act::HardtanhResult:
      if (second) return A(0);
      return (x <= p0 || x >= p1) ? A(0) : A(1);
    case Act::Hardsigmoid:
      if (second) return A(0);
      return (x > A(-3) && x < A(3)) ? A(1) / A(6) : A(0);
    case Act::HardsigmoidResult:
      if (second) return A(0);
      return (x > A(0) && x < A(1)) ? A(1) / A(6) : A(0);
    case Act::Hardswish:
      if (second) return (x > A(-3) && x < A(3)) ? A(1) / A(3) : A(0);
      return x <= A(-3) ? A(0) : (x < A(3) ? x / A(3) + A(0.5) : A(1));  // torch's ends
    case Act::Mish: {
      A t = std::tanh(softplus1(x)), s = sigmoid(x), sech2 = A(1) - t * t;
      if (second) return A(2) * sech2 * s + x * sech2 * s * ((A(1) - s) - A(2) * t * s);
      return t + x * sech2 * s;
    }
    case Act::Softsign: {
      A a = A(1) + std::abs(x);
      if (second) return A(-2) * A((x > A(0)) - (x < A(0))) / (a * a * a);
      return A(1) / (a * a);
    }
    case Act::Logsigmoid: {
      A sneg = x >= A(0) ? std::exp(-x) / (A(1) + std::exp(-x)) : A(1) / (A(1) + std::exp(x));
      if (second) return -(A(1) - sneg) * sneg;
      return sneg;
    }
  }
  return A(0);
}

}  // namespace act_math
}  // namespace ember
