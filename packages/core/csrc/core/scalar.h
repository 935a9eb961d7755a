// A Python number (bool, int or float) passed to an op without wrapping it in a tensor.
#pragma once
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"

namespace ember {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };
  Scalar() : kind_(Kind::Int), i_(0) {}
  Scalar(double v) : kind_(Kind::Float), d_(v) {}       // NOLINT
  Scalar(float v) : kind_(Kind::Float), d_(v) {}        // NOLINT
  Scalar(int64_t v) : kind_(Kind::Int), i_(v) {}        // NOLINT
  Scalar(int v) : kind_(Kind::Int), i_(v) {}            // NOLINT
  Scalar(bool v) : kind_(Kind::Bool), i_(v ? 1 : 0) {}  // NOLINT

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  double to_double() const { return kind_ == Kind::Float ? d_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == Kind::Float ? static_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0.0 : i_ != 0; }

  template <class T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) {
      return to_bool();
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(to_int());
    } else {
      return static_cast<T>(static_cast<float>(to_double()));
    }
  }

  // The dtype a Python number of this kind takes in type promotion.
  ScalarType dtype() const {
    switch (kind_) {
      case Kind::Bool:
        return ScalarType::Bool;
      case Kind::Int:
        return ScalarType::Int64;
      default:
        return default_dtype();
    }
  }

 private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

template <>
inline double Scalar::to<double>() const {
  return to_double();
}

}  // namespace ember
