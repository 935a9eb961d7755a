// Small helpers shared by the nn_*.cpp CPU kernels.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"
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
// dst (N, B, A) = src (N, A, B) transposed per sample, for items of type U: 32 x 32 tiles
// moved as 8 x 8 blocks, so both sides touch few cache lines at a time whatever the plane's
// power-of-two strides (several times faster than the strided copy kernel).
template <class U>
void transpose_planes(const U* src, U* dst, int64_t N, int64_t A, int64_t B) {
  constexpr int64_t kTile = 32, kBlock = 8;
  const int64_t at = (A + kTile - 1) / kTile, bt = (B + kTile - 1) / kTile;
  const int64_t grain = std::max<int64_t>(1, kPointwiseGrain / (kTile * kTile));
  parallel_for(0, N * at * bt, grain, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      const int64_t n = i / (at * bt), a0 = (i / bt) % at * kTile, b0 = i % bt * kTile;
      const int64_t a1 = std::min(A, a0 + kTile), b1 = std::min(B, b0 + kTile);
      const U* s = src + n * A * B;
      U* d = dst + n * A * B;
      for (int64_t bb = b0; bb < b1; bb += kBlock)
        for (int64_t aa = a0; aa < a1; aa += kBlock) {
          const int64_t be = std::min(b1, bb + kBlock), ae = std::min(a1, aa + kBlock);
          for (int64_t b = bb; b < be; ++b)
            for (int64_t a = aa; a < ae; ++a) d[b * A + a] = s[a * B + b];
        }
    }
  });
}

// dst (N, B, A) = src (N, A, B) per sample for any item size (false: not one of 1/2/4/8).
inline bool transpose_items(const Tensor& src, const Tensor& dst, int64_t N, int64_t A, int64_t B) {
  switch (src->itemsize()) {
    case 1:
      transpose_planes(src->data_as<uint8_t>(), dst->data_as<uint8_t>(), N, A, B);
      return true;
    case 2:
      transpose_planes(src->data_as<uint16_t>(), dst->data_as<uint16_t>(), N, A, B);
      return true;
    case 4:
      transpose_planes(src->data_as<uint32_t>(), dst->data_as<uint32_t>(), N, A, B);
      return true;
    case 8:
      transpose_planes(src->data_as<uint64_t>(), dst->data_as<uint64_t>(), N, A, B);
      return true;
    default:
      return false;
  }
}

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
