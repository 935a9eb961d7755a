// Small helpers shared by the nn_*.cpp CPU kernels.
#pragma once
#include <optional>
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

// Whether t (4-D or 5-D) is laid out channels-last (N, *, C innermost) and not contiguous:
// PyTorch's suggest_memory_format, which a norm's output and input gradient follow.
inline bool is_channels_last(const Tensor& t) {
  const int64_t n = t->dim();
  if ((n != 4 && n != 5) || t->is_contiguous()) return false;
  int64_t expect = 1;
  auto step = [&](int64_t d) {
    if (t->size(d) != 1 && t->stride(d) != expect) return false;
    expect *= t->size(d);
    return true;
  };
  if (!step(1)) return false;
  for (int64_t d = n - 1; d >= 2; --d)
    if (!step(d)) return false;
  return step(0);
}
// t (contiguous) copied into like's layout when like is channels-last; t itself otherwise.
inline Tensor in_layout_of(const Tensor& t, const Tensor& like) {
  if (!t || !is_channels_last(like)) return t;
  std::optional<DimVector> strides = dense_strides(like);
  if (!strides) return t;
  Tensor out = ember::empty_strided(t->sizes(), *strides, t->dtype(), t->device());
  copy_into(out, t);
  return out;
}

// The device-neutral rules (kernels/nn_rules.h and the family *_rules.h) are nn:: here too.
using namespace ember::nn;

}  // namespace nn
}  // namespace cpu
}  // namespace ember
