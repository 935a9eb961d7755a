// TensorIterator: the one strided n-d iteration engine behind every pointwise op.
//
// It broadcasts the inputs, works out the result dtype with PyTorch's promotion rules (Python
// numbers are operands of their own, held inline, never tensors), allocates or checks the
// outputs, casts inputs that differ from the compute dtype, coalesces dimensions that are
// contiguous in every operand, and finally calls a 1-d inner loop
//     loop(char** data, const int64_t* strides, int64_t n)
// over the innermost dimension, on one thread or split over the pool for large tensors.
#pragma once
#include <array>
#include <optional>

#include "core/scalar.h"
#include "core/tensor.h"
#include "kernels/parallel.h"

namespace ember {

class TensorIterator {
 public:
  static constexpr int kMaxOperands = 5;

  explicit TensorIterator(const char* op) : op_(op) {}

  // Outputs first, then inputs. A null output is allocated by build().
  TensorIterator& add_output(const Tensor& out);
  TensorIterator& add_input(const Tensor& in);
  TensorIterator& add_input(const Scalar& s);
  TensorIterator& add_input(const TensorOrScalar& v) {
    return v.is_tensor() ? add_input(v.tensor) : add_input(v.scalar);
  }
  // An input that keeps its own dtype and takes no part in type promotion (a where() mask).
  TensorIterator& add_input_raw(const Tensor& in) {
    add_input(in);
    ops_[nops_ - 1].raw = true;
    return *this;
  }
  // Inputs are cast to this dtype instead of their promoted type.
  TensorIterator& compute_dtype(ScalarType t) {
    compute_dtype_ = t;
    return *this;
  }
  // Dtype of allocated outputs (default: the compute dtype), e.g. bool for comparisons.
  TensorIterator& output_dtype(ScalarType t) {
    output_dtype_ = t;
    return *this;
  }
  // For element-wise ops, whose results don't depend on the order elements are visited in:
  // new outputs take the inputs' layout as torch's TensorIterator orders it (the first input
  // decides between two dims, see new_output), and the dims are walked in
  // the memory order of the first operand (unit stride innermost). Off by default: some users
  // (masked_select, nonzero...) fill their output in row-major order.
  TensorIterator& keep_layout() {
    keep_layout_ = true;
    return *this;
  }
  // In-place ops: the output must already have the broadcast shape.
  TensorIterator& resize_outputs(bool r) {
    resize_outputs_ = r;
    return *this;
  }
  // Promote integer inputs to the default float dtype (true division, sqrt, exp ...).
  TensorIterator& promote_int_to_float(bool p) {
    int_to_float_ = p;
    return *this;
  }
  // Let a given output have internal overlap (a stride-0 dim of size > 1). Only safe when every
  // write to a shared location stores the same value (fill_ of one element).
  TensorIterator& allow_overlapping_output() {
    allow_overlap_ = true;
    return *this;
  }
  // Element-wise ops: an output that shares memory with an input without being exactly that
  // input (x[2:] written from x[:4]) is refused, as in PyTorch (elements would be read after
  // they were overwritten).
  TensorIterator& check_partial_overlap() {
    check_partial_overlap_ = true;
    return *this;
  }
  // A given output must have exactly the result's dtype, not one it casts to: PyTorch's unary
  // ops that keep their input's dtype (neg, abs, floor, ...) refuse any other out= dtype (an
  // int16 neg written into int8 would wrap).
  TensorIterator& exact_output_dtype() {
    exact_out_dtype_ = true;
    return *this;
  }
  // Keep each input's own dtype (the loop converts); used by copy/cast.
  TensorIterator& no_casting() {
    cast_inputs_ = false;
    return *this;
  }

  TensorIterator& build();

  // The dtype inputs were promoted to (set by build()).
  ScalarType common_dtype() const { return common_dtype_; }
  ScalarType dtype(int i) const { return ops_[i].dtype; }
  const Tensor& output(int i = 0) const { return ops_[i].result; }
  int64_t numel() const { return numel_; }
  // Whether the operands live on the meta device (no data: for_each does nothing).
  bool is_meta() const { return is_meta_; }
  // The plan, for a device's own loop (a GPU launch reads these instead of calling for_each):
  // operand k's data pointer and byte strides over shape() (after coalescing), and whether it
  // is a scalar held by value in host memory (a Python number or a 0-d CPU tensor).
  char* data(int k) const { return ops_[k].data; }
  const DimVector& strides(int k) const { return ops_[k].strides; }
  bool is_scalar(int k) const { return ops_[k].is_scalar; }
  int ntensors() const { return nops_; }
  const DimVector& shape() const { return shape_; }

  template <class Loop>
  void for_each(const Loop& loop, int64_t grain = kPointwiseGrain) const {
    if (numel_ == 0 || is_meta_) return;  // meta tensors: the plan is all there is
    if (numel_ < 2 * grain || get_num_threads() == 1) {
      serial_for_each(loop, 0, numel_);
      return;
    }
    parallel_for(0, numel_, grain, [&](int64_t b, int64_t e) { serial_for_each(loop, b, e); });
  }

  template <class Loop>
  void serial_for_each(const Loop& loop, int64_t begin, int64_t end) const {
    std::array<char*, kMaxOperands> ptrs{};
    std::array<int64_t, kMaxOperands> inner{};
    const int64_t nd = shape_.size();
    if (nd == 0) {
      for (int k = 0; k < nops_; ++k) ptrs[k] = ops_[k].data;
      loop(ptrs.data(), inner.data(), 1);
      return;
    }
    for (int k = 0; k < nops_; ++k) inner[k] = ops_[k].strides[nd - 1];
    // Multi-index of `begin` (dims outer -> inner).
    DimVector idx(nd, 0);
    int64_t rem = begin;
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx[d] = rem % shape_[d];
      rem /= shape_[d];
    }
    int64_t todo = end - begin;
    while (todo > 0) {
      for (int k = 0; k < nops_; ++k) {
        char* p = ops_[k].data;
        for (int64_t d = 0; d < nd; ++d) p += idx[d] * ops_[k].strides[d];
        ptrs[k] = p;
      }
      int64_t n = std::min(shape_[nd - 1] - idx[nd - 1], todo);
      loop(ptrs.data(), inner.data(), n);
      todo -= n;
      idx[nd - 1] += n;
      for (int64_t d = nd - 1; d > 0 && idx[d] == shape_[d]; --d) {
        idx[d] = 0;
        idx[d - 1]++;
      }
    }
  }

 private:
  struct Operand {
    Tensor tensor;   // as given (null for an output to allocate)
    Tensor result;   // outputs: what the caller gets back
    Tensor compute;  // the tensor actually iterated (a cast copy or a temporary)
    char* data = nullptr;
    DimVector strides;  // in bytes, broadcast to shape_
    ScalarType dtype = ScalarType::Float32;
    bool is_output = false;
    bool is_scalar = false;
    bool raw = false;
    Scalar scalar;
    alignas(16) char scalar_buf[16] = {};
  };
  void compute_types();
  void prepare_operand(Operand& op);
  void coalesce();
  void reorder_dims();
  Tensor new_output(ScalarType dtype, Device device) const;

  const char* op_;
  std::array<Operand, kMaxOperands> ops_;
  int nops_ = 0, noutputs_ = 0;
  DimVector shape_;
  int64_t numel_ = 0;
  std::optional<ScalarType> compute_dtype_, output_dtype_;
  ScalarType common_dtype_ = ScalarType::Float32;
  bool keep_layout_ = false, resize_outputs_ = true, int_to_float_ = false, cast_inputs_ = true,
       allow_overlap_ = false, is_meta_ = false, check_partial_overlap_ = false,
       exact_out_dtype_ = false;

 public:
  // Outputs computed into a temporary (dtype differs from out=) are copied back here.
  void finish();
};

// Broadcast shape of two shapes, raising "op: shapes (2, 3) and (4,) cannot be broadcast".
DimVector broadcast_shapes(const DimVector& a, const DimVector& b, const char* op);

// Raises PyTorch's "unsupported operation" error when several elements of t share one memory
// location (an expanded tensor): writing through such a view silently loses results.
void check_no_internal_overlap(const Tensor& t, const char* op);
// Raises when `out` and `in` share some but not all memory locations (both dense; for other
// layouts the overlap is not worked out, as in PyTorch).
void check_no_partial_overlap(const Tensor& out, const Tensor& in, const char* op);

// Writes src into dst (broadcasting src, converting dtypes). The copy kernel of every device.
void copy_into(const Tensor& dst, const Tensor& src);
// copy_into and the in-place kernels bump the destination's version; a tensor an op has just
// made and filled that way goes back to version 0 through this (PyTorch's factories give 0).
inline Tensor fresh(Tensor t) {
  t->reset_version();
  return t;
}
// PyTorch's overflow check for a Python number written into a tensor of `dtype` (fill_, full,
// masked_fill, index_fill, clamp bounds): raises "op: value v cannot be converted to type T
// without overflow" when an integer does not fit (unsigned types also take negatives down to
// -max, which wrap), a float is out of an integer type's range (or NaN/inf), or a finite float
// exceeds a narrower floating type. Bool targets take anything.
void check_scalar_fits(const Scalar& s, ScalarType dtype, const char* op);
// Stores a Scalar converted to dtype at ptr.
void store_scalar(const Scalar& s, ScalarType dtype, void* ptr);
// Reads one element as a Scalar (bool / int64 / double).
Scalar load_scalar(const void* ptr, ScalarType dtype);
// PyTorch's result_type for a tensor and a Python number.
ScalarType result_type(const Tensor& a, const Scalar& b);
ScalarType result_type(const Tensor& a, const Tensor& b);

}  // namespace ember
