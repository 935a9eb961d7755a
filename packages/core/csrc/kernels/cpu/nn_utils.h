// Small helpers shared by the nn_*.cpp CPU kernels.
#pragma once
#include <string>

#include "core/tensor.h"
#include "kernels/iterator.h"

namespace ember {
namespace cpu {
namespace nn {

// t itself when it already has dtype dt, else a converted copy.
inline Tensor cast(const Tensor& t, ScalarType dt) {
  if (t->dtype() == dt) return t;
  Tensor out = ember::empty(t->sizes(), dt, t->device());
  copy_into(out, t);
  return out;
}
// t itself when contiguous, else a contiguous copy.
inline Tensor contig(const Tensor& t) {
  if (t->is_contiguous()) return t;
  Tensor out = ember::empty(t->sizes(), t->dtype(), t->device());
  copy_into(out, t);
  return out;
}
inline Tensor contig(const Tensor& t, ScalarType dt) { return contig(cast(t, dt)); }

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
  EMBER_CHECK_KIND(static_cast<int64_t>(v.size()) == k, Value, op, ": ", name,
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

}  // namespace nn
}  // namespace cpu
}  // namespace ember
