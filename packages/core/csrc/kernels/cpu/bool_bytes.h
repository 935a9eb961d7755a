// Bool tensors whose bytes are not all 0 or 1. A bool's byte can hold any value when the memory
// came from elsewhere (a uint8 tensor viewed as bool, a foreign buffer): like PyTorch, ember
// reads every nonzero byte as True. The pointwise loops and copies do that on each load
// (loops.h); kernels that read bool arrays directly (reductions, masks, sorting) call
// bool_01() first, which hands back the tensor itself when its bytes are already clean.
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "kernels/iterator.h"

namespace ember {
namespace cpu {

// Whether any element of the bool tensor `t` has a byte other than 0 and 1.
inline bool has_unclean_bool_bytes(const Tensor& t) {
  if (t->numel() == 0) return false;
  if (t->is_contiguous()) {
    const auto* p = reinterpret_cast<const uint8_t*>(t->data());
    uint8_t acc = 0;
    for (int64_t i = 0; i < t->numel(); ++i) acc |= p[i];  // vectorizes; 0/1 bytes OR to <= 1
    return acc > 1;
  }
  TensorIterator it("bool");
  it.add_input(t).no_casting().build();
  uint8_t acc = 0;
  it.serial_for_each(
      [&acc](char** d, const int64_t* s, int64_t n) {
        for (int64_t k = 0; k < n; ++k) acc |= *reinterpret_cast<const uint8_t*>(d[0] + k * s[0]);
      },
      0, it.numel());
  return acc > 1;
}

// `t` itself unless it is a bool tensor with bytes other than 0/1; then a copy holding 0 and 1.
inline Tensor bool_01(const Tensor& t) {
  if (t->dtype() != ScalarType::Bool || !has_unclean_bool_bytes(t)) return t;
  Tensor out = ember::empty(t->sizes(), ScalarType::Bool, t->device());
  copy_into(out, t);  // the copy loop reads nonzero bytes as true
  return out;
}

}  // namespace cpu
}  // namespace ember
