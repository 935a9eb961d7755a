// Channels-last layouts as PyTorch's suggest_memory_format sees them: which results of an op
// follow a channels-last input (convolution, pooling, upsampling, group_norm, cat) and the dense
// strides they are then given. Shape logic only; the copies are the callers'.
#pragma once
#include <algorithm>

#include "core/tensor.h"

namespace ember {

// Whether t's strides order a 4-D tensor N, H, W, C (5-D: N, D, H, W, C) from the outermost
// dim in: C innermost, then the spatial dims from the last, then N. Size-1 dims may take any
// stride that keeps that order, and a tensor whose C stride equals its N stride's bound is
// taken as contiguous (PyTorch's rule, so an (N, 1, H, W) or (N, C, 1, 1) tensor is
// channels-last exactly when its strides say so).
inline bool suggests_channels_last(const Tensor& t) {
  const int64_t n = t->dim();
  if (n != 4 && n != 5) return false;
  if (t->stride(1) == 0) return false;
  int64_t min = 0;
  auto step = [&](int64_t d) {
    if (t->size(d) == 0 || t->stride(d) < min) return false;
    if (d == 0 && min == t->stride(1)) return false;
    min = t->stride(d) * std::max<int64_t>(t->size(d), 1);
    return true;
  };
  if (!step(1)) return false;
  for (int64_t d = n - 1; d >= 2; --d)
    if (!step(d)) return false;
  return step(0);
}

// The dense channels-last strides of a 4-D or 5-D shape (size-0 dims count as 1, as PyTorch).
inline DimVector channels_last_strides(const DimVector& sizes) {
  const int64_t n = static_cast<int64_t>(sizes.size());
  DimVector strides(n);
  int64_t step = 1;
  auto put = [&](int64_t d) {
    strides[d] = step;
    step *= std::max<int64_t>(sizes[d], 1);
  };
  put(1);
  for (int64_t d = n - 1; d >= 2; --d) put(d);
  put(0);
  return strides;
}

}  // namespace ember
