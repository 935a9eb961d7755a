// Tensor indexing in the C++ frontend (ATen's torch::indexing): x.index({Slice(), 0, None}),
// x.index({"...", mask}) and x.index_put_({Slice(0, 2)}, value), with Python's rules. Integers,
// slices, None and the ellipsis make one strided view (ops::as_strided, so autograd sees it);
// tensor indices then index that view (ops::_index / ops::index_put_), a bool mask standing for
// the long indices of its true elements.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "extension/tensor.h"

namespace ember {
namespace api {
namespace indexing {

struct NoneIndex {};
struct EllipsisIndex {};
constexpr NoneIndex None{};
constexpr EllipsisIndex Ellipsis{};

// start:stop:step, each optional (None) as in Python.
class Slice {
 public:
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        std::optional<int64_t> step = std::nullopt)
      : start_(start), stop_(stop), step_(step.value_or(1)) {
    EMBER_CHECK_KIND(step_ > 0, Value, "step must be greater than zero (got ", step_, ")");
  }
  Slice(NoneIndex, std::optional<int64_t> stop = std::nullopt,  // NOLINT
        std::optional<int64_t> step = std::nullopt)
      : Slice(std::nullopt, stop, step) {}
  Slice(std::optional<int64_t> start, NoneIndex, std::optional<int64_t> step = std::nullopt)
      : Slice(start, std::nullopt, step) {}
  // The (start, length) this slice selects from a dim of `size`.
  std::pair<int64_t, int64_t> bounds(int64_t size) const {
    auto clamp = [size](int64_t v) {
      if (v < 0) v += size;
      return v < 0 ? int64_t{0} : (v > size ? size : v);
    };
    int64_t b = start_ ? clamp(*start_) : 0;
    int64_t e = stop_ ? clamp(*stop_) : size;
    return {b, e > b ? (e - b + step_ - 1) / step_ : 0};
  }
  int64_t step() const { return step_; }

 private:
  std::optional<int64_t> start_, stop_;
  int64_t step_;
};

class TensorIndex {
 public:
  enum class Kind { None, Ellipsis, Integer, Boolean, Slice, Tensor };
  TensorIndex(NoneIndex) : kind_(Kind::None) {}          // NOLINT
  TensorIndex(EllipsisIndex) : kind_(Kind::Ellipsis) {}  // NOLINT
  TensorIndex(const char* s) : kind_(Kind::Ellipsis) {   // NOLINT
    EMBER_CHECK_KIND(std::string(s) == "...", Index, "index: expected \"...\", got \"", s, "\"");
  }
  TensorIndex(int64_t i) : kind_(Kind::Integer), integer_(i) {}          // NOLINT
  TensorIndex(int i) : kind_(Kind::Integer), integer_(i) {}              // NOLINT
  TensorIndex(bool b) : kind_(Kind::Boolean), integer_(b) {}             // NOLINT
  TensorIndex(Slice s) : kind_(Kind::Slice), slice_(s) {}                // NOLINT
  TensorIndex(Tensor t) : kind_(Kind::Tensor), tensor_(std::move(t)) {}  // NOLINT
  Kind kind() const { return kind_; }
  int64_t integer() const { return integer_; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }
  // Dims of the indexed tensor this index consumes.
  int64_t consumes() const {
    if (kind_ == Kind::Integer || kind_ == Kind::Slice) return 1;
    if (kind_ == Kind::Tensor)
      return tensor_.scalar_type() == kBool || tensor_.scalar_type() == kByte ? tensor_.dim() : 1;
    return 0;
  }

 private:
  Kind kind_;
  int64_t integer_ = 0;
  Slice slice_;
  Tensor tensor_;
};

namespace detail {
// The view that the basic indices select, and the positions of tensor indices in it (each as
// its long index tensors; empty where a dim is not tensor-indexed).
struct Indexed {
  Tensor view;
  std::vector<std::optional<Tensor>> indices;
  bool advanced = false;
};

inline Indexed apply(const Tensor& self, const std::vector<TensorIndex>& items) {
  const ember::Tensor& t = self.impl();
  EMBER_CHECK(t != nullptr, "index: the tensor is undefined");
  int64_t consumed = 0, ellipses = 0;
  for (const auto& it : items) {
    consumed += it.consumes();
    ellipses += it.kind() == TensorIndex::Kind::Ellipsis;
  }
  EMBER_CHECK_KIND(ellipses <= 1, Index, "an index can only have a single ellipsis ('...')");
  EMBER_CHECK_KIND(consumed <= t->dim(), Index, "too many indices for tensor of dimension ",
                   t->dim(), " (got ", consumed, ")");
  DimVector sizes, strides;
  int64_t offset = t->storage_offset(), d = 0;
  Indexed out;
  auto keep = [&](int64_t n) {
    for (int64_t k = 0; k < n; ++k, ++d) {
      sizes.push_back(t->size(d));
      strides.push_back(t->stride(d));
      out.indices.emplace_back();
    }
  };
  for (const auto& it : items) {
    switch (it.kind()) {
      case TensorIndex::Kind::None:
      case TensorIndex::Kind::Boolean:  // x[True] adds a dim of 1; x[False] one of 0
        sizes.push_back(it.kind() == TensorIndex::Kind::Boolean && !it.integer() ? 0 : 1);
        strides.push_back(1);
        out.indices.emplace_back();
        break;
      case TensorIndex::Kind::Ellipsis:
        keep(t->dim() - consumed);
        break;
      case TensorIndex::Kind::Integer: {
        int64_t size = t->size(d), i = it.integer();
        EMBER_CHECK_KIND(i >= -size && i < size, Index, "index ", i,
                         " is out of bounds for dimension ", d, " with size ", size);
        offset += (i < 0 ? i + size : i) * t->stride(d);
        ++d;
        break;
      }
      case TensorIndex::Kind::Slice: {
        auto [start, len] = it.slice().bounds(t->size(d));
        offset += start * t->stride(d);
        sizes.push_back(len);
        strides.push_back(t->stride(d) * it.slice().step());
        out.indices.emplace_back();
        ++d;
        break;
      }
      case TensorIndex::Kind::Tensor: {
        const Tensor& ix = it.tensor();
        if (ix.scalar_type() == kBool || ix.scalar_type() == kByte) {
          // a mask over its dims: the long indices of its true elements, one per dim
          std::vector<Tensor> cols = nonzero(ix.to(kBool)).unbind(1);
          for (int64_t k = 0; k < ix.dim(); ++k) {
            sizes.push_back(t->size(d));
            strides.push_back(t->stride(d));
            out.indices.emplace_back(cols[k]);
            ++d;
          }
        } else {
          sizes.push_back(t->size(d));
          strides.push_back(t->stride(d));
          out.indices.emplace_back(ix);
          ++d;
        }
        out.advanced = true;
        break;
      }
    }
  }
  keep(t->dim() - d);
  out.view = Tensor(ops::as_strided(t, sizes, strides, offset));
  return out;
}
}  // namespace detail
}  // namespace indexing

inline Tensor Tensor::index(std::initializer_list<indexing::TensorIndex> items) const {
  return index(std::vector<indexing::TensorIndex>(items));
}
inline Tensor Tensor::index(const std::vector<indexing::TensorIndex>& items) const {
  indexing::detail::Indexed ix = indexing::detail::apply(*this, items);
  return ix.advanced ? _index(ix.view, ix.indices) : ix.view;
}
inline const Tensor& Tensor::index_put_(std::initializer_list<indexing::TensorIndex> items,
                                        const Tensor& value) const {
  indexing::detail::Indexed ix = indexing::detail::apply(*this, items);
  if (ix.advanced) {
    ix.view.index_put_(ix.indices, value);
  } else {
    ix.view.copy_(value);
  }
  return *this;
}
inline const Tensor& Tensor::index_put_(std::initializer_list<indexing::TensorIndex> items,
                                        const Scalar& value) const {
  return index_put_(items, Tensor(ops::full({}, value, to_core(scalar_type()), impl()->device())));
}

}  // namespace api
}  // namespace ember
