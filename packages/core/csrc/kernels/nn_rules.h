// Device-neutral argument rules of the nn kernels (ops/nn.yaml) that several families share,
// used by the CPU kernels (kernels/cpu/nn_*.cpp) and the CUDA ones (cuda/nn_*.cu), so that each
// check and its message lives once. Family rules: conv_rules.h, norm_rules.h, loss_rules.h,
// pool_rules.h, optim_rules.h, softmax_rules.h.
#pragma once
#include <string>

#include "core/tensor.h"

namespace ember {
namespace nn {

// A backend's check that t (skipped when null) is on ref's device, naming it `what`; null where
// the dispatcher's own device check is enough (the CPU).
using DeviceCheck = void (*)(const Tensor& ref, const Tensor& t, const char* op, const char* what);
inline void check_device(DeviceCheck check, const Tensor& ref, const Tensor& t, const char* op,
                         const char* what) {
  if (check) check(ref, t, op, what);
}

inline void check_floating_input(const char* op, const Tensor& t) {
  EMBER_CHECK_KIND(is_floating(t->dtype()), DtypeNotImplemented, op,
                   ": expected a floating-point input, got ", dtype_name(t->dtype()));
}

enum class Reduction { None, Mean, Sum };
inline Reduction parse_reduction(const std::string& r, const char* op) {
  if (r == "none") return Reduction::None;
  if (r == "mean") return Reduction::Mean;
  if (r == "sum") return Reduction::Sum;
  EMBER_FAIL(Value, op, ": reduction must be 'none', 'mean' or 'sum', got '", r, "'");
}

// An int-or-tuple argument of a k-d op: one value is repeated k times; otherwise it must have k.
inline DimVector expand_param(const DimVector& v, int64_t k, const char* name, const char* op) {
  if (v.size() == 1 && k != 1) return DimVector(k, v[0]);
  EMBER_CHECK_KIND(static_cast<int64_t>(v.size()) == k, Runtime, op, ": ", name,
                   " must be an int or a tuple of ", k, " ints, got ", shape_str(v));
  return v;
}

inline int64_t prod(const DimVector& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// An output shape worked out from user-given sizes must fit a storage (as ember::empty checks)
// before anything is planned per output index: a huge size then fails at once instead of
// building tables for billions of positions first.
inline void check_output_shape(const DimVector& shape, ScalarType dtype, const char* op) {
  const int64_t n = checked_numel(shape, op);
  int64_t nbytes = 0;
  if (__builtin_mul_overflow(n, itemsize(dtype), &nbytes))
    EMBER_FAIL(Runtime, op, ": storage size of an output of size ", shape_str(shape), " and dtype ",
               dtype_name(dtype), " overflows int64 (", n, " elements of ", itemsize(dtype),
               " bytes)");
}

// The last k sizes of t.
inline DimVector trailing(const Tensor& t, int64_t k) {
  DimVector out;
  for (int64_t d = t->dim() - k; d < t->dim(); ++d) out.push_back(t->size(d));
  return out;
}

// A contiguous tensor seen with other sizes of the same numel.
inline Tensor view_as_shape(const Tensor& contiguous, const DimVector& sizes) {
  return make_view(contiguous, sizes, contiguous_strides(sizes), contiguous->storage_offset());
}

}  // namespace nn
}  // namespace ember
