// Shared by the pad kernels (kernels/cpu/nn_pad.cpp, cuda/nn_pad.cu) and the derivative
// (autograd/formulas_shape.h): where each output position of a padded dim reads from, and the
// checks of pad and its backward.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "kernels/iterator.h"

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
  int64_t out = 0;
  const bool overflow =
      __builtin_add_overflow(n, left, &out) || __builtin_add_overflow(out, right, &out);
  EMBER_CHECK(!overflow, op, ": padding (", left, ", ", right, ") of dimension ", dim,
              " with size ", n, " overflows int64");
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

// Index maps of pad's dims for the non-constant modes (identity for the dims pad leaves alone);
// raises as pad does.
inline std::vector<std::vector<int64_t>> pad_maps(const DimVector& sizes, const DimVector& pad,
                                                  PadMode m, const std::string& mode,
                                                  const char* op) {
  const int64_t nd = sizes.size(), np = pad.size() / 2;
  EMBER_CHECK_KIND(np >= 1 && np <= 3 && (nd == np + 1 || nd == np + 2), NotImplemented, op,
                   ": padding length ", pad.size(), " is not supported for a ", nd,
                   "D input with mode '", mode,
                   "'; non-constant padding pads the last 1, 2 or 3 dims of a 2D/3D, 3D/4D or "
                   "4D/5D input (padding length 2, 4 or 6)");
  std::vector<std::vector<int64_t>> maps(nd);
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t i = nd - 1 - d;  // pad pair of dim d, if any
    if (i < np) {
      maps[d] = pad_source_index(sizes[d], pad[2 * i], pad[2 * i + 1], d, m, op);
    } else {
      maps[d].resize(sizes[d]);
      for (int64_t k = 0; k < sizes[d]; ++k) maps[d][k] = k;
    }
  }
  return maps;
}

// pad / constant_pad_nd: pairs of pads, at most one pair per dim of self.
inline void check_pad_list(const Tensor& self, const DimVector& pad, const char* op) {
  EMBER_CHECK(pad.size() % 2 == 0, op, ": padding length must be divisible by 2 (got ", pad.size(),
              ")");
  EMBER_CHECK(static_cast<int64_t>(pad.size()) / 2 <= self->dim(), op,
              ": padding length should be less than or equal to two times the input dimension "
              "but got padding length ",
              pad.size(), " and input of dimension ", self->dim());
}

// constant_pad_nd: a value that pads (some pad is positive) must fit self's dtype, as PyTorch's
// fill of the result checks (1e6 into float16 was written as inf, 1000 into int8 wrapped).
inline void check_pad_value(const Tensor& self, const DimVector& pad, const Scalar& value,
                            const char* op) {
  for (int64_t p : pad)
    if (p > 0) return check_scalar_fits(value, self->dtype(), op);
}

// pad_backward: the padding fits input_size.
inline void check_pad_backward(const DimVector& pad, const DimVector& input_size, const char* op) {
  EMBER_CHECK(pad.size() % 2 == 0 && pad.size() / 2 <= input_size.size(), op,
              ": padding of length ", pad.size(), " does not fit an input of shape ",
              shape_str(input_size));
  for (int64_t s : input_size)
    EMBER_CHECK(s >= 0, op, ": input_size ", shape_str(input_size), " has a negative dimension");
}

// pad_backward: grad_output has the padded shape out_sizes.
inline void check_pad_grad_output(const Tensor& grad_output, const DimVector& out_sizes,
                                  const DimVector& input_size, const DimVector& pad,
                                  const char* op) {
  EMBER_CHECK(grad_output->sizes() == out_sizes, op, ": expected grad_output of shape ",
              shape_str(out_sizes), " (input ", shape_str(input_size), " padded by ",
              shape_str(pad), "), got ", shape_str(grad_output->sizes()));
}

}  // namespace pad_detail
}  // namespace ember
