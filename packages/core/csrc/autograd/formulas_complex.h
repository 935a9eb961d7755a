// Derivative helpers of the complex ops (ops/complex.yaml) and of abs on complex inputs, in
// PyTorch's convention: the gradient of a real loss L with respect to z = x + iy is
// dL/dx + i dL/dy, so a complex-linear map's backward is its conjugate transpose and a real
// input receives the real part. Included by formulas.h.
#pragma once
#include <complex>
#include <optional>
#include <vector>

#include "autograd/formulas_base.h"
#include "autograd/formulas_shape.h"
#include "ops.h"

namespace ember {
namespace autograd {
namespace formulas {

// abs: grad * z / |z| (0 where z == 0) for complex z; grad * sign(x) for real x.
inline Tensor abs_backward(const Tensor& grad, const Tensor& self) {
  if (!is_complex(self->dtype())) return mul(grad, sign(self));
  Tensor a = ops::abs(self, Tensor());
  Tensor denom = ops::add(a, ops::eq(a, Scalar(0.0), Tensor()), Scalar(int64_t(1)), Tensor());
  return mul(grad, ops::div(self, denom, std::nullopt, Tensor()));
}

// view_as_real: the pairs of grad back into complex numbers.
inline Tensor view_as_real_backward(const Tensor& grad) {
  return ops::view_as_complex(ops::contiguous(grad));
}

// real / imag of a complex input: grad + 0i and 0 + i grad (real of a real input: grad).
inline Tensor real_backward(const Tensor& grad, const InputMeta& self) {
  if (!is_complex(self.dtype)) return grad;
  return ops::complex(grad, ops::zeros_like(grad, std::nullopt, std::nullopt), Tensor());
}
inline Tensor imag_backward(const Tensor& grad) {
  return ops::complex(ops::zeros_like(grad, std::nullopt, std::nullopt), grad, Tensor());
}

// polar(abs, angle) = abs * u with u = exp(i angle): d/dabs = u and d/dangle = i * result, so
// the (real) inputs receive the real parts of grad * conj(u) and grad * conj(i * result).
inline Tensor polar_backward_abs(const Tensor& grad, const Tensor& angle) {
  Tensor unit = ops::polar(ops::ones_like(angle, std::nullopt, std::nullopt), angle, Tensor());
  return ops::mul(grad, TensorOrScalar(ops::conj_physical(unit, Tensor())), Tensor());
}
inline Tensor polar_backward_angle(const Tensor& grad, const Tensor& result) {
  Tensor g = ops::mul(grad, TensorOrScalar(ops::conj_physical(result, Tensor())), Tensor());
  return ops::mul(g, TensorOrScalar(Scalar(std::complex<double>(0.0, -1.0))), Tensor());
}

// The conjugate of a multiplication's other factor (real tensors and numbers: themselves).
inline TensorOrScalar conj_factor(const TensorOrScalar& x) {
  if (t_holomorphic_tangent) return x;  // a JVP (see HolomorphicTangent)
  if (x.is_tensor())
    return is_complex(x.tensor->dtype()) ? TensorOrScalar(ops::conj_physical(x.tensor, Tensor()))
                                         : x;
  if (x.scalar.is_complex()) return TensorOrScalar(Scalar(std::conj(x.scalar.to_complex())));
  return x;
}

// mul's backward: grad * conj(other) (a real input keeps the real part, see reduce_grad).
inline Tensor mul_backward(const Tensor& grad, const TensorOrScalar& other) {
  return mul(grad, conj_factor(other));
}

// add / sub's derivative for other: t * conj(alpha) (alpha = 1 costs nothing).
inline Tensor scale_conj(const Tensor& t, const Scalar& alpha) {
  if (alpha.is_complex())
    return mul(
        t, TensorOrScalar(t_holomorphic_tangent ? alpha : Scalar(std::conj(alpha.to_complex()))));
  return alpha.to_double() == 1.0 ? t : mul(t, TensorOrScalar(alpha));
}

// mul's forward-mode tangent: self_t * other + other_t * self (complex-linear: no conjugate).
inline Tensor mul_tangent(const Tensor& self_t, const Tensor& other_t, const Tensor& self,
                          const TensorOrScalar& other) {
  Tensor r;
  if (self_t) r = mul(self_t, other);
  if (other_t) {
    Tensor t = mul(other_t, TensorOrScalar(self));
    r = r ? ops::add(r, t, Scalar(int64_t(1)), Tensor()) : t;
  }
  return r;
}

// tanh and sigmoid: grad * conj(1 - y^2) and grad * conj(y (1 - y)) for complex y; the fused
// real kernels otherwise.
inline Tensor tanh_backward_c(const Tensor& grad, const Tensor& result) {
  if (!is_complex(result->dtype())) return ops::tanh_backward(grad, result);
  return mul(grad, cj(one_minus(square(result))));
}
inline Tensor sigmoid_backward_c(const Tensor& grad, const Tensor& result) {
  if (!is_complex(result->dtype())) return ops::sigmoid_backward(grad, result);
  return mul(grad, cj(mul(result, one_minus(result))));
}

// sgn(z) = z / |z|, not holomorphic: d/dz = 1 / (2|z|), d/dconj(z) = -s^2 / (2|z|), so the
// gradient grad / (2|z|) - conj(grad) s^2 / (2|z|) is (grad - s Re(grad conj(s))) / |z|, 0 where
// z == 0. Real inputs: sign's (zero) gradient.
inline Tensor sgn_backward(const Tensor& grad, const Tensor& self, const Tensor& result) {
  if (!is_complex(self->dtype())) return ops::zeros_like(grad, std::nullopt, std::nullopt);
  Tensor a = ops::abs(self, Tensor());
  Tensor zero = ops::eq(a, Scalar(0.0), Tensor());
  Tensor denom = ops::add(a, zero, Scalar(int64_t(1)), Tensor());
  Tensor along = mul(result, TensorOrScalar(ops::real(mul(grad, TensorOrScalar(cj(result))))));
  Tensor g = div(sub(grad, TensorOrScalar(along)), TensorOrScalar(denom));
  return ops::masked_fill(g, zero, TensorOrScalar(Scalar(0.0)));
}

// div's derivatives: grad / conj(other) and -grad * conj(self / other / other). The latter reads
// self, not the result (as torch), so writing into the quotient in place leaves it valid.
inline Tensor div_backward_self(const Tensor& grad, const TensorOrScalar& other) {
  return div(grad, conj_factor(other));
}
inline Tensor div_backward_other(const Tensor& grad, const Tensor& self,
                                 const TensorOrScalar& other) {
  return div(mul(neg(grad), cj(div(self, other))), conj_factor(other));
}

// pow's derivative for self, complex self or exponent: grad * conj(e * self^(e - 1)) (0 for
// e == 0); real ones take pow_backward_self.
inline Tensor pow_backward_self_c(const Tensor& grad, const Tensor& self, const TensorOrScalar& e) {
  const bool complex_e = e.is_tensor() ? is_complex(e.tensor->dtype()) : e.scalar.is_complex();
  if (!is_complex(self->dtype()) && !complex_e) return pow_backward_self(grad, self, e);
  if (!e.is_tensor()) {
    const std::complex<double> x = e.scalar.to_complex();
    if (x == std::complex<double>(0.0, 0.0))
      return ops::zeros_like(grad, std::nullopt, std::nullopt);
    Tensor p = ops::pow(self, TensorOrScalar(Scalar(x - 1.0)), Tensor());
    return mul(grad, cj(mul(p, TensorOrScalar(e.scalar))));
  }
  Tensor p = ops::pow(self, TensorOrScalar(sub(e.tensor, Scalar(int64_t(1)))), Tensor());
  Tensor g = mul(grad, cj(mul(e.tensor, TensorOrScalar(p))));
  return ops::where(ops::eq(e.tensor, TensorOrScalar(Scalar(0.0)), Tensor()),
                    TensorOrScalar(Scalar(0.0)), TensorOrScalar(g), Tensor());
}
// rpow (base ** self, base a number): grad * (result * log(base)), 0 where base == 0 and
// self >= 0 (as torch's pow(Scalar, Tensor)).
inline Tensor rpow_backward(const Tensor& grad, const Tensor& self, const Scalar& base,
                            const Tensor& result) {
  Tensor d = mul(result, Scalar(std::log(base.to_double())));
  if (base.to_double() == 0.0)
    d = ops::where(ops::ge(self, Scalar(0.0), Tensor()), TensorOrScalar(Scalar(0.0)),
                   TensorOrScalar(d), Tensor());
  return mul(grad, TensorOrScalar(d));
}
// ... and for the exponent: grad * conj(result * log(self)), the factor 0 where self == 0 and the
// exponent is real and >= 0.
inline Tensor pow_backward_exponent_c(const Tensor& grad, const Tensor& self,
                                      const TensorOrScalar& exponent, const Tensor& result) {
  if (!is_complex(result->dtype())) return pow_backward_exponent(grad, self, exponent, result);
  const Tensor& e = exponent.tensor;
  Tensor nonneg = is_complex(e->dtype())
                      ? ops::logical_and(ops::eq(ops::imag(e), Scalar(0.0), Tensor()),
                                         ops::ge(ops::real(e), Scalar(0.0), Tensor()), Tensor())
                      : ops::ge(e, Scalar(0.0), Tensor());
  Tensor cond = ops::logical_and(ops::eq(self, TensorOrScalar(Scalar(int64_t(0))), Tensor()),
                                 nonneg, Tensor());
  Tensor d = ops::where(cond, TensorOrScalar(Scalar(0.0)),
                        TensorOrScalar(cj(mul(result, TensorOrScalar(log(self))))), Tensor());
  return mul(grad, TensorOrScalar(d));
}

// angle: 0 for real inputs; grad * i z / |z|^2 (0 where z == 0) for complex z.
// Forward mode: abs's tangent. Real: t * sign(x); complex: Re(conj(z) t) / |z| (0 at z = 0),
// the real rate of change of |z| along t.
inline Tensor abs_jvp(const Tensor& self, const Tensor& t) {
  if (!is_complex(self->dtype())) return mul(t, sign(self));
  Tensor a = ops::abs(self, Tensor());
  Tensor denom = ops::add(a, ops::eq(a, Scalar(0.0), Tensor()), Scalar(int64_t(1)), Tensor());
  Tensor num = ops::real(mul(t, TensorOrScalar(ops::conj_physical(self, Tensor()))));
  return div(num, TensorOrScalar(denom));
}
// Forward mode: angle's tangent. Real: 0; complex: Im(conj(z) t) / |z|^2 (0 at z = 0).
inline Tensor angle_jvp(const Tensor& self, const Tensor& t) {
  if (!is_complex(self->dtype())) return ops::zeros_like(t, std::nullopt, std::nullopt);
  Tensor a = ops::abs(self, Tensor());
  Tensor a2 = mul(a, TensorOrScalar(a));
  Tensor denom = ops::add(a2, ops::eq(a2, Scalar(0.0), Tensor()), Scalar(int64_t(1)), Tensor());
  Tensor num = ops::imag(mul(t, TensorOrScalar(ops::conj_physical(self, Tensor()))));
  return div(num, TensorOrScalar(denom));
}

inline Tensor angle_backward(const Tensor& grad, const Tensor& self) {
  if (!is_complex(self->dtype())) return ops::zeros_like(grad, std::nullopt, std::nullopt);
  Tensor a = ops::abs(self, Tensor());
  Tensor a2 = mul(a, TensorOrScalar(a));
  Tensor denom = ops::add(a2, ops::eq(a2, Scalar(0.0), Tensor()), Scalar(int64_t(1)), Tensor());
  Tensor iz = mul(self, TensorOrScalar(Scalar(std::complex<double>(0.0, 1.0))));
  return mul(iz, TensorOrScalar(div(grad, TensorOrScalar(denom))));
}

// _index of a complex tensor: index_put has real kernels only, so the accumulation runs on the
// (..., 2) real view of grad; the index tensors address the leading dims either way.
inline Tensor index_backward_c(const Tensor& grad, const InputMeta& self,
                               const std::vector<Tensor>& indices) {
  if (!is_complex(grad->dtype())) return index_backward(grad, self, indices);
  DimVector sizes = self.sizes;
  sizes.push_back(2);
  Tensor acc = ops::zeros(sizes, to_real(grad->dtype()), grad->device());
  Tensor r = ops::index_put(acc, indices, ops::view_as_real(ops::contiguous(grad)), true);
  return ops::view_as_complex(r);
}

// grad padded with zeros (or trimmed) at the end of dim to `size`.
inline Tensor resize_dim(const Tensor& grad, int64_t dim, int64_t size) {
  const int64_t cur = grad->size(dim);
  if (cur == size) return grad;
  if (cur > size) return ops::narrow(grad, dim, 0, size);
  DimVector shape = grad->sizes();
  shape[dim] = size - cur;
  Tensor zeros = ops::zeros(shape, grad->dtype(), grad->device());
  return ops::cat({grad, zeros}, dim, Tensor());
}

// _fft_r2c: y = P F x for real x (P keeps the first n // 2 + 1 bins when onesided): the real
// part of F^H P^T grad, i.e. the unnormalized inverse transform of the zero-padded grad.
inline Tensor fft_r2c_backward(const Tensor& grad, const DimVector& dim, int64_t normalization,
                               bool onesided, const InputMeta& self) {
  Tensor g = grad;
  if (onesided) {
    const int64_t last = wrap_dim(dim.back(), g->dim(), "_fft_r2c_backward");
    g = resize_dim(g, last, self.sizes[last]);
  }
  return ops::contiguous(ops::real(ops::_fft_c2c(g, dim, normalization, false)));
}

// _fft_c2r: the forward real-to-complex transform of grad; the bins that the Hermitian
// extension used twice (all but the first and, for even n, the last) count twice.
inline Tensor fft_c2r_backward(const Tensor& grad, const DimVector& dim, int64_t normalization,
                               const InputMeta& self) {
  const int64_t last = wrap_dim(dim.back(), grad->dim(), "_fft_c2r_backward");
  const int64_t n = grad->size(last), half = n / 2 + 1;
  Tensor g = ops::_fft_r2c(grad, dim, normalization, true);
  const int64_t doubled = n - half;
  if (doubled > 0) {
    Tensor twice = ops::ones(DimVector{half}, to_real(g->dtype()), g->device());
    ops::fill_(ops::narrow(twice, 0, 1, doubled), TensorOrScalar(Scalar(2.0)));
    DimVector shape(g->dim(), 1);
    shape[last] = half;
    g = mul(g, ops::reshape(twice, shape));
  }
  return resize_dim(g, last, self.sizes[last]);
}

}  // namespace formulas
}  // namespace autograd
}  // namespace ember
