#include "kernels/iterator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "core/error.h"
#include "core/out_tensor.h"
#include "kernels/cpu/transpose.h"
#include "kernels/loops.h"
#include "kernels/memory_format.h"
#include "ops.h"

namespace ember {

namespace {
constexpr ScalarType kUndefined = ScalarType::NumTypes;

ScalarType promote_skip_undefined(ScalarType a, ScalarType b) {
  if (a == kUndefined) return b;
  if (b == kUndefined) return a;
  return promote_types(a, b);
}

// Dimensioned tensors decide the dtype; 0-d tensors and Python numbers only raise its category
// (bool < integer < floating < complex), as in PyTorch. A float tensor with a complex number
// becomes complex with its own precision (float32 + 1j -> complex64, float64 + 1j -> complex128).
ScalarType combine_categories(ScalarType higher, ScalarType lower) {
  if (higher == kUndefined) return lower;
  if (is_complex(higher)) return higher;
  if (is_floating(higher))
    return lower != kUndefined && is_complex(lower) ? to_complex(higher) : higher;
  if (higher == ScalarType::Bool ||
      (lower != kUndefined && (is_floating(lower) || is_complex(lower))))
    return promote_skip_undefined(higher, lower);
  return higher;
}

// Whether an element-wise op writing `out` while reading `in` would read elements it has already
// written: `in` shares out's memory through another layout (a broadcast column x[:, :1], a
// diagonal, a transpose) and the two spans meet. Exactly out's own elements are fine (each is read
// before it is written); dense partial overlaps were refused before (check_no_partial_overlap).
bool reads_what_it_writes(const Tensor& out, const Tensor& in) {
  if (!out || !in || out == in || out->numel() == 0 || in->numel() == 0 ||
      out->storage() != in->storage() || out->device().is_meta())
    return false;
  if (out->data() == in->data() && out->sizes() == in->sizes() && out->strides() == in->strides())
    return false;
  auto span = [](const Tensor& t) {  // [first byte, one past the last) (strides are >= 0)
    int64_t last = 0;
    for (int64_t d = 0; d < t->dim(); ++d) last += (t->size(d) - 1) * t->stride(d);
    const char* b = t->data();
    return std::make_pair(b, b + (last + 1) * t->itemsize());
  };
  auto [a0, a1] = span(out);
  auto [b0, b1] = span(in);
  return a0 < b1 && b0 < a1;
}
}  // namespace

DimVector broadcast_shapes(const DimVector& a, const DimVector& b, const char* op) {
  int64_t n = std::max(a.size(), b.size());
  DimVector out(n, 1);
  for (int64_t i = 0; i < n; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      EMBER_FAIL(Runtime, op, ": shapes ", shape_str(a), " and ", shape_str(b),
                 " cannot be broadcast (size ", da, " vs ", db, " at dimension ", n - 1 - i, ")");
    out[n - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

ScalarType result_type(const Tensor& a, const Scalar& b) {
  return combine_categories(a->dtype(), b.dtype());
}
ScalarType result_type(const Tensor& a, const Tensor& b) {
  ScalarType dim = kUndefined, zero = kUndefined;
  for (const Tensor* t : {&a, &b}) {
    ScalarType& slot = (*t)->dim() > 0 ? dim : zero;
    slot = promote_skip_undefined(slot, (*t)->dtype());
  }
  return combine_categories(dim, zero);
}

TensorIterator& TensorIterator::add_output(const Tensor& out) {
  Operand& o = ops_[nops_++];
  o.tensor = out;
  o.is_output = true;
  noutputs_++;
  return *this;
}

TensorIterator& TensorIterator::add_input(const Tensor& in) {
  EMBER_CHECK(nops_ < kMaxOperands, op_, ": too many operands");
  EMBER_CHECK_KIND(in != nullptr, Type, op_, ": expected a tensor, got None");
  ops_[nops_++].tensor = in;
  return *this;
}

TensorIterator& TensorIterator::add_input(const Scalar& s) {
  EMBER_CHECK(nops_ < kMaxOperands, op_, ": too many operands");
  Operand& o = ops_[nops_++];
  o.is_scalar = true;
  o.scalar = s;
  return *this;
}

void TensorIterator::compute_types() {
  ScalarType dim = kUndefined, zero = kUndefined, wrapped = kUndefined;
  for (int i = noutputs_; i < nops_; ++i) {
    const Operand& o = ops_[i];
    if (o.raw) continue;
    if (o.is_scalar) {
      wrapped = promote_skip_undefined(wrapped, o.scalar.dtype());
    } else {
      ScalarType& slot = o.tensor->dim() > 0 ? dim : zero;
      slot = promote_skip_undefined(slot, o.tensor->dtype());
    }
  }
  common_dtype_ = combine_categories(dim, combine_categories(zero, wrapped));
  if (common_dtype_ == kUndefined) common_dtype_ = default_dtype();
  if (int_to_float_ && !is_floating(common_dtype_) && !is_complex(common_dtype_))
    common_dtype_ = default_dtype();
}

TensorIterator& TensorIterator::build() {
  // Shape.
  shape_.clear();
  Device device = cpu_device();
  bool have_device = false;
  // Outputs that may not be resized take part in the shape (copy_ broadcasts into them).
  if (!resize_outputs_)
    for (int i = 0; i < noutputs_; ++i)
      if (ops_[i].tensor) shape_ = broadcast_shapes(shape_, ops_[i].tensor->sizes(), op_);
  for (int i = noutputs_; i < nops_; ++i) {
    if (ops_[i].is_scalar) continue;
    shape_ = broadcast_shapes(shape_, ops_[i].tensor->sizes(), op_);
  }
  // The device: that of the tensors, which must agree, except that a 0-d CPU tensor (a number
  // held in a tensor) joins any device; it then becomes a kernel argument like a Python number.
  const Tensor* first = nullptr;
  for (int i = 0; i < nops_; ++i) {
    const Tensor& t = ops_[i].tensor;
    if (ops_[i].is_scalar || !t) continue;
    if (!ops_[i].is_output && t->dim() == 0 && t->device().is_cpu()) continue;
    if (!first) {
      first = &t;
      device = t->device();
      have_device = true;
    } else if (t->device() != device) {
      EMBER_FAIL(Runtime, "Expected all tensors to be on the same device, but found at least two ",
                 "devices, ", device.str(), " and ", t->device().str(), "! (in ", op_, ")");
    }
  }
  (void)have_device;
  is_meta_ = device.type == DeviceType::Meta;
  numel_ = 1;
  for (int64_t s : shape_) numel_ *= s;

  compute_types();
  ScalarType compute = compute_dtype_.value_or(common_dtype_);
  ScalarType out_dtype = output_dtype_.value_or(compute);

  for (int i = 0; i < nops_; ++i) {
    Operand& o = ops_[i];
    if (o.is_output) {
      o.dtype = cast_inputs_ ? out_dtype : (o.tensor ? o.tensor->dtype() : out_dtype);
      if (!o.tensor) {
        o.result = o.compute =
            keep_layout_ ? new_output(o.dtype, device) : empty(shape_, o.dtype, device);
      } else {
        const Tensor& t = o.tensor;
        bool aliased = false;
        for (int j = noutputs_; j < nops_; ++j)
          aliased = aliased || (!ops_[j].is_scalar && ops_[j].tensor == t);
        if (t->sizes() != shape_) {
          EMBER_CHECK(resize_outputs_ && !aliased, op_, ": output with shape ",
                      shape_str(t->sizes()), " doesn't match the broadcast shape ",
                      shape_str(shape_));
          resize_out(t, shape_, op_);
          // A resized out= tensor is laid out as a new output would be (PyTorch's): a
          // channels-last input gives a channels-last out.
          if (keep_layout_) {
            Tensor like = new_output(t->dtype(), device);
            if (like->strides() != t->strides()) {
              t->set_storage(like->storage());
              t->set_sizes_strides(shape_, like->strides(), 0);
            }
          }
        }
        if (!allow_overlap_) check_no_internal_overlap(t, op_);
        if (check_partial_overlap_)
          for (int j = noutputs_; j < nops_; ++j)
            if (!ops_[j].is_scalar && ops_[j].tensor)
              check_no_partial_overlap(t, ops_[j].tensor, op_);
        if (t->dtype() != o.dtype) {
          EMBER_CHECK(!exact_out_dtype_, op_, ": expected the out= tensor to have dtype ",
                      dtype_name(o.dtype), " (the result's), but got ", dtype_name(t->dtype()));
          EMBER_CHECK(can_cast(o.dtype, t->dtype()), op_, ": result type ", dtype_name(o.dtype),
                      " can't be cast to the desired output type ", dtype_name(t->dtype()));
          o.compute = empty(shape_, o.dtype, device);
        } else {
          o.compute = t;
        }
        o.result = t;
        t->bump_version(op_);
      }
    } else if (o.is_scalar) {
      o.dtype = cast_inputs_ ? compute : o.scalar.dtype();
      store_scalar(o.scalar, o.dtype, o.scalar_buf);
    } else if (o.tensor->device() != device) {
      // A 0-d CPU tensor joining another device: passed by value, as a Python number is.
      const Tensor& t = o.tensor;
      o.dtype = cast_inputs_ && !o.raw ? compute : t->dtype();
      store_scalar(load_scalar(t->data(), t->dtype()), o.dtype, o.scalar_buf);
      o.is_scalar = true;
      o.tensor = nullptr;
    } else {
      o.compute = o.tensor;
      o.dtype = o.tensor->dtype();
      if (cast_inputs_ && !o.raw && o.dtype != compute) {
        o.compute = empty(o.tensor->sizes(), compute, device);
        dispatch::_copy_from(o.tensor, o.compute, false);
        o.dtype = compute;
      } else if (check_partial_overlap_) {
        // x.sub_(x[:, :1]) read the column after writing it (wrong rows from 70000 columns
        // on; PyTorch gets it wrong too): such an input is read from a copy.
        for (int j = 0; j < noutputs_; ++j)
          if (reads_what_it_writes(ops_[j].tensor, o.tensor)) {
            o.compute = empty(o.tensor->sizes(), o.dtype, device);
            dispatch::_copy_from(o.tensor, o.compute, false);
            break;
          }
      }
    }
    prepare_operand(o);
  }
  coalesce();
  return *this;
}

void TensorIterator::prepare_operand(Operand& o) {
  int64_t nd = shape_.size();
  o.strides.assign(nd, 0);
  if (o.is_scalar) {
    o.data = o.scalar_buf;
    return;
  }
  const Tensor& t = o.compute;
  int64_t off = nd - t->dim();
  int64_t isz = t->itemsize();
  for (int64_t d = 0; d < t->dim(); ++d)
    o.strides[off + d] = t->size(d) == 1 ? 0 : t->stride(d) * isz;
  o.data = t->data();
}

// A new output's layout, as torch's TensorIterator gives it (suggested_dim_order), then dense
// strides in that order. So x + y.t() is laid out like x, and y.t() + x like y.t() (a
// channels_last input first gives a channels_last result).
Tensor TensorIterator::new_output(ScalarType dtype, Device device) const {
  const int64_t nd = static_cast<int64_t>(shape_.size());
  if (nd < 2) return empty(shape_, dtype, device);
  std::vector<DimVector> in_strides;  // element strides over shape_, 0 along broadcast dims
  bool all_contiguous = true;
  for (int i = noutputs_; i < nops_; ++i) {
    const Operand& o = ops_[i];
    if (o.is_scalar || o.raw || !o.tensor) continue;
    const Tensor& t = o.tensor;
    all_contiguous = all_contiguous && t->is_contiguous();
    DimVector st(nd, 0);
    const int64_t off = nd - t->dim();
    for (int64_t d = 0; d < t->dim(); ++d)
      if (t->size(d) == shape_[off + d]) st[off + d] = t->stride(d);
    in_strides.push_back(std::move(st));
  }
  // (an empty input counts as contiguous whatever its strides: torch keeps them then)
  if (all_contiguous && numel_ > 0) return empty(shape_, dtype, device);
  const DimVector order = suggested_dim_order(shape_, in_strides);
  bool identity = true;
  for (int64_t k = 0; k < nd; ++k) identity = identity && order[k] == nd - 1 - k;
  if (identity) return empty(shape_, dtype, device);
  const DimVector strides = dense_strides_in_order(shape_, order);
  return empty_strided(shape_, strides, dtype, device);
}

// Iterates the dims in the memory order of the first operand (the output, usually): sorting
// them by its strides makes the innermost loop the unit-stride one, so a transposed result
// and transposed inputs still run as one flat loop. Element-wise results don't depend on the
// order in which elements are visited.
void TensorIterator::reorder_dims() {
  const int64_t nd = shape_.size();
  const Operand* ref = nullptr;
  for (int k = 0; k < nops_ && !ref; ++k)
    if (!ops_[k].is_scalar) ref = &ops_[k];
  if (!ref || nd < 2) return;
  DimVector perm(nd);
  for (int64_t d = 0; d < nd; ++d) perm[d] = d;
  // Outer to inner by decreasing stride; broadcast (stride 0) dims keep their place relative
  // to each other and go outermost, where they cost nothing.
  std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
    const int64_t sa = ref->strides[a], sb = ref->strides[b];
    if (sa == 0 || sb == 0) return sa == 0 && sb != 0;
    return sa > sb;
  });
  bool identity = true;
  for (int64_t d = 0; d < nd; ++d) identity = identity && perm[d] == d;
  if (identity) return;
  DimVector shape(nd);
  for (int64_t d = 0; d < nd; ++d) shape[d] = shape_[perm[d]];
  shape_ = shape;
  for (int k = 0; k < nops_; ++k) {
    DimVector st(nd);
    for (int64_t d = 0; d < nd; ++d) st[d] = ops_[k].strides[perm[d]];
    ops_[k].strides = st;
  }
}

void TensorIterator::coalesce() {
  int64_t nd = shape_.size();
  if (nd <= 1) return;
  if (keep_layout_) reorder_dims();
  // Walk from the innermost dim outwards, merging a dim into the current one when every
  // operand steps through both as through one.
  DimVector shape;
  std::array<DimVector, kMaxOperands> strides;
  int64_t cur = nd - 1;
  int64_t cur_size = shape_[cur];
  auto push = [&](int64_t d, int64_t size) {
    shape.push_back(size);
    for (int k = 0; k < nops_; ++k) strides[k].push_back(ops_[k].strides[d]);
  };
  for (int64_t d = nd - 2; d >= 0; --d) {
    if (shape_[d] == 1) continue;
    if (cur_size == 1) {
      cur = d;
      cur_size = shape_[d];
      continue;
    }
    bool merge = true;
    for (int k = 0; k < nops_ && merge; ++k)
      merge = ops_[k].strides[d] == ops_[k].strides[cur] * cur_size;
    if (merge) {
      cur_size *= shape_[d];
    } else {
      push(cur, cur_size);
      cur = d;
      cur_size = shape_[d];
    }
  }
  push(cur, cur_size);
  std::reverse(shape.begin(), shape.end());
  for (int k = 0; k < nops_; ++k) {
    std::reverse(strides[k].begin(), strides[k].end());
    ops_[k].strides = strides[k];
  }
  shape_ = shape;
}

void TensorIterator::finish() {
  for (int i = 0; i < noutputs_; ++i) {
    Operand& o = ops_[i];
    if (o.compute != o.result) dispatch::_copy_from(o.compute, o.result, false);
  }
}

// ---- scalars --------------------------------------------------------------------------------

void store_scalar(const Scalar& s, ScalarType dtype, void* ptr) {
  EMBER_DISPATCH_EVERY(dtype, "store_scalar",
                       [&] { *static_cast<scalar_t*>(ptr) = s.to<scalar_t>(); });
}

void check_scalar_fits(const Scalar& s, ScalarType dtype, const char* op) {
  if (dtype == ScalarType::Bool || s.is_bool() || is_complex(dtype)) return;
  // A complex number written into a real tensor would lose its imaginary part (PyTorch raises).
  if (s.is_complex())
    EMBER_FAIL(Runtime, op, ": value cannot be converted to type ", dtype_name(dtype),
               " without overflow");
  // generic, so the branches of the other kinds of type are discarded for each type
  auto overflows = [&](auto tag) -> bool {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> || is_complex_v<T>) {
      return false;
    } else if constexpr (std::is_integral_v<T>) {
      using L = std::numeric_limits<T>;
      if (s.is_integral()) {
        // 2**63 .. 2**64 - 1: uint64 holds it, every other integer type overflows
        if (s.is_unsigned()) return !(std::is_unsigned_v<T> && sizeof(T) == 8);
        const int64_t v = s.to_int();
        // unsigned: -max..max (a negative number wraps, as PyTorch); uint64 takes every int64
        if constexpr (std::is_unsigned_v<T> && sizeof(T) == 8) return false;
        if constexpr (std::is_unsigned_v<T>) return v > int64_t(L::max()) || v < -int64_t(L::max());
        return v < int64_t(L::lowest()) || v > int64_t(L::max());
      }
      // [lowest, 2^digits): exact bounds in double for every integer type (NaN fails too).
      const double v = s.to_double();
      return !(v >= double(L::lowest()) && v < std::ldexp(1.0, L::digits));
    } else {
      double max = 0;
      if constexpr (std::is_same_v<T, Half>)
        max = 65504.0;
      else if constexpr (std::is_same_v<T, BFloat16>)
        max = 3.3895313892515355e38;
      else if constexpr (std::is_same_v<T, float>)
        max = std::numeric_limits<float>::max();
      else if constexpr (std::is_same_v<T, Float8_e4m3fn>)
        max = 448.0;
      else if constexpr (std::is_same_v<T, Float8_e5m2>)
        max = 57344.0;
      else
        return false;  // double holds every Python number
      const double v = s.to_double();
      return std::isfinite(v) && std::fabs(v) > max;
    }
  };
  const bool overflow = EMBER_DISPATCH_EVERY(dtype, op, [&] { return overflows(scalar_t{}); });
  if (!overflow) return;
  if (s.is_integral() && s.is_unsigned())
    EMBER_FAIL(Runtime, op, ": value ", static_cast<uint64_t>(s.to_int()),
               " cannot be converted to type ", dtype_name(dtype), " without overflow");
  if (s.is_integral())
    EMBER_FAIL(Runtime, op, ": value ", s.to_int(), " cannot be converted to type ",
               dtype_name(dtype), " without overflow");
  EMBER_FAIL(Runtime, op, ": value ", s.to_double(), " cannot be converted to type ",
             dtype_name(dtype), " without overflow");
}

namespace {
template <class T>
Scalar to_scalar(T v) {
  if constexpr (is_complex_v<T>) {
    return Scalar(std::complex<double>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return Scalar(v);
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    return Scalar::from_uint64(v);
  } else if constexpr (std::is_integral_v<T>) {
    return Scalar(static_cast<int64_t>(v));
  } else {
    return Scalar(static_cast<double>(v));
  }
}
}  // namespace

Scalar load_scalar(const void* ptr, ScalarType dtype) {
  return EMBER_DISPATCH_EVERY(dtype, "item", [&]() -> Scalar {
    return to_scalar(load<scalar_t>(static_cast<const char*>(ptr)));
  });
}

// ---- copy with conversion -------------------------------------------------------------------

namespace {
// One element of S converted to D. Complex to real keeps the real part (as PyTorch's copy_
// does); real to complex gets a zero imaginary part.
template <class D, class S>
inline D convert(S v) {
  if constexpr (is_complex_v<S> && is_complex_v<D>) {
    return D(v);
  } else if constexpr (is_complex_v<S>) {
    if constexpr (std::is_same_v<D, bool>)
      return v.real() != 0 || v.imag() != 0;
    else
      return static_cast<D>(v.real());
  } else if constexpr (is_complex_v<D>) {
    using P = typename D::value_type;
    return D(static_cast<P>(static_cast<opmath_t<S>>(v)), P(0));
  } else if constexpr (std::is_unsigned_v<D> && !std::is_same_v<D, bool> &&
                       !std::is_integral_v<S>) {
    // float -> unsigned goes through int64 (-1.0 -> the largest value, 70000.0 wraps in
    // uint16), as PyTorch converts; only uint64 takes values past int64's range directly.
    // uint16 goes through int32 as PyTorch's does (on x86 a value past int32 reads as INT_MIN,
    // whose low half is 0).
    const double d = static_cast<double>(static_cast<opmath_t<S>>(v));
    if (std::is_same_v<D, uint64_t> && d >= 9223372036854775808.0)
      return d < 18446744073709551616.0 ? static_cast<D>(d) : D(0);
    if (sizeof(D) < 4)
      return static_cast<D>(d > -2147483649.0 && d < 2147483648.0 ? int32_t(d) : 0);
    return static_cast<D>(std::isnan(d) ? 0 : static_cast<int64_t>(d));
  } else {
    return static_cast<D>(static_cast<opmath_t<S>>(v));
  }
}

template <class D, class S>
void convert_loop(char** data, const int64_t* st, int64_t n) {
  char* out = data[0];
  const char* in = data[1];
  if (st[0] == sizeof(D) && st[1] == sizeof(S)) {
    D* o = reinterpret_cast<D*>(out);
    const S* a = reinterpret_cast<const S*>(in);
    if constexpr (std::is_same_v<D, S> && !std::is_same_v<S, bool>) {
      std::memcpy(o, a, n * sizeof(D));
    } else {  // a bool source reads any nonzero byte as true (so a copy leaves only 0 and 1)
      for (int64_t i = 0; i < n; ++i) o[i] = convert<D, S>(load_at(a, i));
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    S v = load<S>(in + i * st[1]);
    *reinterpret_cast<D*>(out + i * st[0]) = convert<D, S>(v);
  }
}
}  // namespace

void check_no_internal_overlap(const Tensor& t, const char* op) {
  if (t->numel() == 0) return;  // no element is written: (2, 0) with stride (0, 1) is fine
  for (int64_t d = 0; d < t->dim(); ++d)
    if (t->size(d) > 1 && t->stride(d) == 0)
      EMBER_FAIL(Runtime, op,
                 ": unsupported operation: more than one element of the written-to tensor (size ",
                 shape_str(t->sizes()), ", stride ", shape_str(t->strides()),
                 ") refers to a single memory location. Please clone() the tensor before "
                 "performing the operation.");
}

namespace {
// Whether t's elements occupy distinct locations that together fill [data, data + nbytes).
bool non_overlapping_and_dense(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims of size > 1
  for (int64_t d = 0; d < t->dim(); ++d)
    if (t->size(d) != 1) dims.push_back({t->stride(d), t->size(d)});
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}
}  // namespace

void check_no_partial_overlap(const Tensor& out, const Tensor& in, const char* op) {
  if (out == in || out->numel() == 0 || in->numel() == 0 || out->storage() != in->storage() ||
      out->device().is_meta())
    return;
  if (!non_overlapping_and_dense(out) || !non_overlapping_and_dense(in)) return;
  const char* a0 = out->data();
  const char* a1 = a0 + out->numel() * out->itemsize();
  const char* b0 = in->data();
  const char* b1 = b0 + in->numel() * in->itemsize();
  if (a0 == b0 && a1 == b1 && out->sizes() == in->sizes() && out->strides() == in->strides())
    return;  // the very same elements: each is read before it is written
  EMBER_CHECK(!(a0 < b1 && b0 < a1), op,
              ": unsupported operation: some elements of the input tensor and the written-to "
              "tensor refer to a single memory location. Please clone() the tensor before "
              "performing the operation.");
}

namespace {
// A contiguous dst copied from a batch of transposed matrices (x.t().contiguous(),
// x.transpose(-1, -2).contiguous()) of its dtype: by tiles, several times faster than the
// element loop's strided reads. False (nothing done) when the copy is not of that form.
bool transposed_copy(const Tensor& dst, const Tensor& src) {
  const int64_t d = dst->dim();
  if (d < 2 || dst->dtype() != src->dtype() || dst->dtype() == ScalarType::Bool ||
      is_complex(dst->dtype()) || !dst->device().is_cpu() || !src->device().is_cpu() ||
      dst->sizes() != src->sizes() || dst->storage() == src->storage() || !dst->is_contiguous())
    return false;
  const int64_t A = src->size(d - 2), B = src->size(d - 1);
  if (A < 16 || B < 16 || src->stride(d - 2) != 1 || src->stride(d - 1) != A) return false;
  int64_t expect = A * B;  // the batch dims must be dense outside the matrices
  for (int64_t i = d - 3; i >= 0; --i) {
    if (src->size(i) != 1 && src->stride(i) != expect) return false;
    expect *= src->size(i);
  }
  // src is (N, B, A) in memory; dst is its (N, A, B) transpose.
  return cpu::transpose_items(src, dst, dst->numel() / (A * B), B, A);
}
}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  if (transposed_copy(dst, src)) return;
  if (dst->numel() == 0) {
    // Nothing to write, but src must still fit (x[5:] = y with a wrongly shaped y is an error).
    EMBER_CHECK(broadcast_shapes(dst->sizes(), src->sizes(), "copy_") == dst->sizes(),
                "copy_: source of shape ", shape_str(src->sizes()),
                " cannot be broadcast to the destination shape ", shape_str(dst->sizes()));
    return;
  }
  TensorIterator it("copy_");
  it.add_output(dst).add_input(src).resize_outputs(false).no_casting();
  if (src->numel() == 1) it.allow_overlapping_output();  // every write stores the same value
  it.build();
  ScalarType dt = dst->dtype(), st = src->dtype();
  EMBER_DISPATCH_EVERY(dt, "copy_", [&] {
    using D = scalar_t;
    EMBER_DISPATCH_EVERY(st, "copy_", [&] {
      using S = scalar_t;
      it.for_each([](char** data, const int64_t* strides, int64_t n) {
        convert_loop<D, S>(data, strides, n);
      });
    });
  });
}

}  // namespace ember
