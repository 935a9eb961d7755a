// Device-neutral rules of softmax / log_softmax and their backward (ops/nn.yaml), shared by the
// CPU kernels (kernels/cpu/nn_activation.cpp) and the CUDA ones (cuda/nn_softmax.cu): checks,
// the row shape, and the four ops over a device's softmax cores.
#pragma once
#include <optional>

#include "core/tensor.h"

namespace ember {
namespace nn {

// t seen as (outer, n, inner) around dim: softmax's rows of n elements, inner apart.
struct SoftmaxShape {
  int64_t outer = 1, n = 1, inner = 1;
};
inline SoftmaxShape softmax_shape(const Tensor& t, int64_t dim) {
  SoftmaxShape s;
  for (int64_t d = 0; d < t->dim(); ++d) {
    if (d < dim) s.outer *= t->size(d);
    if (d == dim) s.n = t->size(d);
    if (d > dim) s.inner *= t->size(d);
  }
  return s;
}

// The dtype softmax computes in: dtype= when given (floating), else self's (floating).
inline ScalarType softmax_dtype(const char* op, const Tensor& self,
                                std::optional<ScalarType> dtype) {
  ScalarType dt = self->dtype();
  if (dtype && *dtype != dt) {
    EMBER_CHECK_KIND(is_floating(*dtype), DtypeNotImplemented, op,
                     ": dtype must be a floating dtype, got ", dtype_name(*dtype));
    dt = *dtype;
  }
  EMBER_CHECK_KIND(is_floating(dt), DtypeNotImplemented, op,
                   ": expected a floating-point input (or dtype=), got ", dtype_name(dt));
  return dt;
}

inline void check_softmax_grad(const char* op, const Tensor& grad, const Tensor& output) {
  EMBER_CHECK(grad->sizes() == output->sizes(), op, ": grad_output of shape ",
              shape_str(grad->sizes()), " doesn't match output of shape ",
              shape_str(output->sizes()));
}

// The softmax ops, the same on every device around its forward and backward cores.
using SoftmaxForward = Tensor (*)(const char* op, const Tensor& self, int64_t dim,
                                  std::optional<ScalarType> dtype, bool log);
using SoftmaxBackward = Tensor (*)(const char* op, const Tensor& grad, const Tensor& output,
                                   int64_t dim, bool log);

template <SoftmaxForward Forward, SoftmaxBackward Backward>
struct SoftmaxOps {
  static Tensor softmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
    return Forward("softmax", self, dim, dtype, false);
  }
  static Tensor log_softmax(const Tensor& self, int64_t dim, std::optional<ScalarType> dtype) {
    return Forward("log_softmax", self, dim, dtype, true);
  }
  static Tensor softmax_backward(const Tensor& grad_output, const Tensor& output, int64_t dim) {
    return Backward("softmax_backward", grad_output, output, dim, false);
  }
  static Tensor log_softmax_backward(const Tensor& grad_output, const Tensor& output, int64_t dim) {
    return Backward("log_softmax_backward", grad_output, output, dim, true);
  }
};

}  // namespace nn
}  // namespace ember
