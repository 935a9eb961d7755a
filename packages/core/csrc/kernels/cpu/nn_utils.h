// Small helpers shared by the nn_*.cpp CPU kernels.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "kernels/cpu/transpose.h"
#include "kernels/iterator.h"
#include "kernels/memory_format.h"
#include "kernels/nn_rules.h"
#include "kernels/parallel.h"

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

// Whether t (4-D or 5-D) is laid out channels-last (N, *, C innermost): PyTorch's
// suggest_memory_format, which a norm's output and input gradient follow.
inline bool is_channels_last(const Tensor& t) { return suggests_channels_last(t); }
// t copied into the dense channels-last strides of its shape when `cl` (and t is not laid out
// so already); t itself otherwise. The kernels compute in contiguous memory; this gives the
// result the layout PyTorch's would have, with the same values.
// t itself when contiguous, else a contiguous copy (a dense channels-last t by tiles).
inline Tensor contig(const Tensor& t) {
  if (t->is_contiguous()) return t;
  Tensor out = ember::empty(t->sizes(), t->dtype(), t->device());
  if (t->device().is_cpu() && (t->dim() == 4 || t->dim() == 5) &&
      t->strides() == channels_last_strides(t->sizes())) {
    const int64_t N = t->size(0), C = t->size(1);
    const int64_t P = N != 0 && C != 0 ? t->numel() / (N * C) : 0;
    if (P != 0 && transpose_items(t, out, N, P, C)) return out;
  }
  copy_into(out, t);
  return out;
}
inline Tensor contig(const Tensor& t, ScalarType dt) { return contig(cast(t, dt)); }

inline Tensor as_channels_last(const Tensor& t, bool cl) {
  if (!t || !cl || (t->dim() != 4 && t->dim() != 5)) return t;
  DimVector strides = channels_last_strides(t->sizes());
  if (t->strides() == strides) return t;
  Tensor out = ember::empty_strided(t->sizes(), strides, t->dtype(), t->device());
  const int64_t N = t->size(0), C = t->size(1);
  const int64_t P = N != 0 && C != 0 ? t->numel() / (N * C) : 0;
  if (!t->device().is_cpu() || !t->is_contiguous() || P == 0 || !transpose_items(t, out, N, C, P))
    copy_into(out, t);
  return out;
}

// t (contiguous) copied into like's layout when like is channels-last; t itself otherwise.
inline Tensor in_layout_of(const Tensor& t, const Tensor& like) {
  return as_channels_last(t, t && is_channels_last(like));
}

// The device-neutral rules (kernels/nn_rules.h and the family *_rules.h) are nn:: here too.
using namespace ember::nn;

}  // namespace nn
}  // namespace cpu
}  // namespace ember
