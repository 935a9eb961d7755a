// Shared by the pad kernel (kernels/cpu/nn_pad.cpp) and its derivative
// (autograd/formulas_shape.h): where each output position of a padded dim reads from.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace ember {
namespace pad_detail {

enum class PadMode { Constant, Reflect, Replicate, Circular };

inline PadMode parse_pad_mode(const std::string& mode) {
  if (mode == "constant") return PadMode::Constant;
  if (mode == "reflect") return PadMode::Reflect;
  if (mode == "replicate") return PadMode::Replicate;
  if (mode == "circular") return PadMode::Circular;
  EMBER_FAIL(NotImplemented, "pad: unrecognised padding mode '", mode,
             "' (expected 'constant', 'reflect', 'replicate' or 'circular')");
}

// Output size of a dim of size n padded with (left, right); negative pads crop. Raises when the
// result would be negative.
inline int64_t padded_size(int64_t n, int64_t left, int64_t right, int64_t dim, const char* op) {
  int64_t out = n + left + right;
  EMBER_CHECK(out >= 0, op, ": padding (", left, ", ", right, ") of dimension ", dim, " with size ",
              n, " would give the negative size ", out);
  return out;
}

// For reflect/replicate/circular: the input index each output index of a dim reads. Negative
// pads crop first (as PyTorch does); the positive ones then extend the cropped range.
inline std::vector<int64_t> pad_source_index(int64_t n, int64_t left, int64_t right, int64_t dim,
                                             PadMode mode, const char* op) {
  int64_t lo = left < 0 ? -left : 0;              // first kept input index
  int64_t m = n - lo - (right < 0 ? -right : 0);  // kept length
  int64_t pl = left > 0 ? left : 0, pr = right > 0 ? right : 0;
  EMBER_CHECK(m >= 0, op, ": padding (", left, ", ", right, ") crops dimension ", dim, " of size ",
              n, " to a negative size");
  if (mode == PadMode::Reflect)
    EMBER_CHECK(pl < m && pr < m, op,
                ": padding size should be less than the corresponding input dimension, but got "
                "padding (",
                left, ", ", right, ") at dimension ", dim, " of size ", m);
  if (mode == PadMode::Circular)
    EMBER_CHECK(pl <= m && pr <= m, op,
                ": padding value causes wrapping around more than once (padding (", left, ", ",
                right, ") at dimension ", dim, " of size ", m, ")");
  if (mode == PadMode::Replicate)
    EMBER_CHECK(m > 0 || (pl == 0 && pr == 0), op, ": cannot replicate-pad dimension ", dim,
                " of size 0");
  std::vector<int64_t> idx(pl + m + pr);
  for (int64_t j = 0; j < static_cast<int64_t>(idx.size()); ++j) {
    int64_t s = j - pl;  // position in the kept range
    if (s < 0 || s >= m) {
      switch (mode) {
        case PadMode::Reflect:
          s = s < 0 ? -s : 2 * (m - 1) - s;
          break;
        case PadMode::Replicate:
          s = s < 0 ? 0 : m - 1;
          break;
        case PadMode::Circular:
          s = ((s % m) + m) % m;
          break;
        case PadMode::Constant:
          break;
      }
    }
    idx[j] = lo + s;
  }
  return idx;
}

}  // namespace pad_detail
}  // namespace ember
