// Channels-last layouts as PyTorch's suggest_memory_format sees them: which results of an op
// follow a channels-last input (convolution, pooling, upsampling, group_norm, cat) and the dense
// strides they are then given. Shape logic only; the copies are the callers'.
#pragma once
#include <algorithm>
#include <utility>

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

// The strides PyTorch's preserve_format gives a copy of t: t's own when t is dense (no gaps or
// overlaps: contiguous, transposed, channels-last), else dense strides in the memory order t's
// strides suggest (dims by decreasing stride, equal strides by decreasing size, a broadcast
// dim left where it stands among the others).
inline DimVector preserved_strides(const Tensor& t) {
  if (dense_strides(t)) return t->strides();
  const int64_t nd = t->dim();
  DimVector order(nd);  // innermost first
  for (int64_t k = 0; k < nd; ++k) order[k] = nd - 1 - k;
  // > 0: dim a (now inner of b) belongs outside it; < 0: it stays inner; 0: undecided.
  auto outer_than = [&](int64_t a, int64_t b) {
    const int64_t sa = t->stride(a), sb = t->stride(b);
    if (sa == 0 || sb == 0) return 0;
    if (sa != sb) return sa > sb ? 1 : -1;
    return t->size(a) > t->size(b) ? 1 : 0;
  };
  for (int64_t i = 1; i < nd; ++i) {
    int64_t cur = i;
    for (int64_t j = i - 1; j >= 0; --j) {
      const int c = outer_than(order[j], order[cur]);
      if (c > 0) {
        std::swap(order[j], order[cur]);
        cur = j;
      } else if (c < 0) {
        break;
      }
    }
  }
  DimVector strides(nd);
  int64_t step = 1;
  for (int64_t k = 0; k < nd; ++k) {
    strides[order[k]] = step;
    step *= std::max<int64_t>(t->size(order[k]), 1);
  }
  return strides;
}

}  // namespace ember
