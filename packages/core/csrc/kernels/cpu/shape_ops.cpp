// CPU kernels of ops/shape.yaml: tril/triu. The result is a contiguous copy of self whose
// dropped triangle is cleared with memset (all-zero bytes are 0 in every ember dtype), so one
// dtype-independent loop serves all dtypes.
#include <algorithm>
#include <cstring>

#include "core/out_tensor.h"
#include "kernels/iterator.h"
#include "kernels/parallel.h"
#include "kernels/triangle_rules.h"
#include "ops.h"

namespace ember {
namespace {

// Zeroes, in the contiguous tensor t, the columns [lo(i), hi(i)) of each row i of every matrix.
template <class Range>
void zero_ranges(const Tensor& t, const Range& range) {
  int64_t rows = t->size(t->dim() - 2), cols = t->size(t->dim() - 1);
  if (rows == 0 || cols == 0) return;  // nothing to clear (and no division by cols == 0)
  int64_t nrows = t->numel() / cols;   // rows over all matrices
  int64_t isz = t->itemsize();
  char* base = t->data();
  parallel_for(0, nrows, std::max<int64_t>(1, kPointwiseGrain / cols), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      auto [lo, hi] = range(r % rows);
      lo = std::clamp<int64_t>(lo, 0, cols);
      hi = std::clamp<int64_t>(hi, 0, cols);
      if (hi > lo) std::memset(base + (r * cols + lo) * isz, 0, (hi - lo) * isz);
    }
  });
}

template <class Range>
Tensor triangle(const Tensor& self, const Tensor& out, const char* op, const Range& range) {
  check_triangle_input(self, op);
  // In place (out is self) on contiguous memory: just clear the triangle.
  if (out && out == self && self->is_contiguous()) {
    self->bump_version(op);  // first: it refuses read-only memory
    zero_ranges(self, range);
    return self;
  }
  // Otherwise work in a fresh contiguous tensor; out= (or in-place on strided self) gets a copy.
  bool direct = out && out->dtype() == self->dtype() && out->sizes() == self->sizes() &&
                out->is_contiguous() && out->storage() != self->storage();
  Tensor r = direct ? out : ember::empty(self->sizes(), self->dtype(), self->device());
  copy_into(r, self);
  zero_ranges(r, range);
  if (!out || direct) return r;
  check_triangle_out(r, out, self, op);
  resize_out(out, r->sizes(), op);
  copy_into(out, r);
  return out;
}

}  // namespace

namespace cpu {

Tensor tril(const Tensor& self, int64_t diagonal_in, const Tensor& out) {
  int64_t diagonal = clamp_diagonal(diagonal_in);
  // Row i keeps columns j <= i + diagonal.
  return triangle(self, out, "tril", [&](int64_t i) {
    return std::pair<int64_t, int64_t>(i + diagonal + 1, INT64_MAX);
  });
}

Tensor triu(const Tensor& self, int64_t diagonal_in, const Tensor& out) {
  int64_t diagonal = clamp_diagonal(diagonal_in);
  // Row i keeps columns j >= i + diagonal.
  return triangle(self, out, "triu",
                  [&](int64_t i) { return std::pair<int64_t, int64_t>(INT64_MIN, i + diagonal); });
}

}  // namespace cpu
}  // namespace ember
