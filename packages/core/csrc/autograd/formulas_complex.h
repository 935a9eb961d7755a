// Derivative helpers of the complex ops (ops/complex.yaml) and of abs on complex inputs, in
// PyTorch's convention: the gradient of a real loss L with respect to z = x + iy is
// dL/dx + i dL/dy, so a complex-linear map's backward is its conjugate transpose and a real
// input receives the real part. Included by formulas.h.
#pragma once
#include <complex>
#include <optional>

#include "autograd/formulas_base.h"
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

// The conjugate of a multiplication's other factor (real tensors and numbers: themselves).
inline TensorOrScalar conj_factor(const TensorOrScalar& x) {
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
  if (alpha.is_complex()) return mul(t, TensorOrScalar(Scalar(std::conj(alpha.to_complex()))));
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
