// Small helpers shared by the nn_*.cpp CPU kernels.
#pragma once
#include <string>

#include "core/tensor.h"
#include "kernels/iterator.h"
#include "kernels/nn_rules.h"

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

// The device-neutral rules (kernels/nn_rules.h and the family *_rules.h) are nn:: here too.
using namespace ember::nn;

}  // namespace nn
}  // namespace cpu
}  // namespace ember
