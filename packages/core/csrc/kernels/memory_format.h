// Channels-last layouts as PyTorch's suggest_memory_format sees them: which results of an op
// follow a channels-last input (convolution, pooling, upsampling, group_norm, cat) and the dense
// strides they are then given. Shape logic only; the copies are the callers'.
#pragma once
#include <algorithm>
#include <utility>
#include <vector>

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

// The memory order, innermost dim first, that PyTorch's TensorIterator gives a new result of
// shape `sizes`: each pair of dims is ordered by the first input whose strides for the two are
// both non-zero and differ (the smaller stride inner); equal strides put the smaller dim inner;
// a pair no input decides keeps its place. in_strides: each input's element strides over
// `sizes`, 0 along broadcast dims.
inline DimVector suggested_dim_order(const DimVector& sizes,
                                     const std::vector<DimVector>& in_strides) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  // > 0: dim a (now inner of b) belongs outside it; < 0: it stays inner; 0: no input decides.
  auto outer_than = [&](int64_t a, int64_t b) {
    for (const DimVector& st : in_strides) {
      if (st[a] == 0 || st[b] == 0) continue;
      if (st[a] != st[b]) return st[a] > st[b] ? 1 : -1;
      if (sizes[a] > sizes[b]) return 1;
    }
    return 0;
  };
  DimVector order(nd);
  for (int64_t k = 0; k < nd; ++k) order[k] = nd - 1 - k;
  // insertion sort that leaves undecided pairs where they are
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
  return order;
}

// Dense strides for `sizes` laid out in `order` (innermost dim first; size-0 dims count as 1).
inline DimVector dense_strides_in_order(const DimVector& sizes, const DimVector& order) {
  DimVector strides(sizes.size());
  int64_t step = 1;
  for (const int64_t d : order) {
    strides[d] = step;
    step *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

// The strides PyTorch's preserve_format gives a copy of t: t's own when t is dense (no gaps or
// overlaps: contiguous, transposed, channels-last), else dense strides in the memory order t's
// strides suggest (dims by decreasing stride, equal strides by decreasing size, a broadcast
// dim left where it stands among the others).
inline DimVector preserved_strides(const Tensor& t) {
  if (dense_strides(t)) return t->strides();
  std::vector<DimVector> in_strides{t->strides()};
  return dense_strides_in_order(t->sizes(), suggested_dim_order(t->sizes(), in_strides));
}

}  // namespace ember
