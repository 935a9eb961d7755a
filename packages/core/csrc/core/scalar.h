// A Python number (bool, int, float or complex) passed to an op without wrapping it in a tensor.
// Ints are int64, or, from 2**63 to 2**64 - 1, uint64 (as PyTorch, for uint64 and the floating
// types): those keep their bits in the int64 and read as unsigned.
#pragma once
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/dtype.h"

namespace ember {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float, Complex };
  Scalar() : kind_(Kind::Int), i_(0) {}
  Scalar(double v) : kind_(Kind::Float), d_(v) {}                                        // NOLINT
  Scalar(float v) : kind_(Kind::Float), d_(v) {}                                         // NOLINT
  Scalar(int64_t v) : kind_(Kind::Int), i_(v) {}                                         // NOLINT
  Scalar(int v) : kind_(Kind::Int), i_(v) {}                                             // NOLINT
  Scalar(bool v) : kind_(Kind::Bool), i_(v ? 1 : 0) {}                                   // NOLINT
  Scalar(std::complex<double> v) : kind_(Kind::Complex), d_(v.real()), im_(v.imag()) {}  // NOLINT
  Scalar(std::complex<float> v) : Scalar(std::complex<double>(v)) {}                     // NOLINT

  static Scalar from_uint64(uint64_t v) {
    Scalar s(static_cast<int64_t>(v));
    s.unsigned_ = v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    return s;
  }

  Kind kind() const { return kind_; }
  // An int from 2**63 up: to_int() gives its bits (what a cast to an integer type keeps).
  bool is_unsigned() const { return unsigned_; }
  bool is_floating() const { return kind_ == Kind::Float; }
  bool is_complex() const { return kind_ == Kind::Complex; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  // A complex number converts to a real type through its real part (to_bool: nonzero).
  double to_double() const {
    if (has_double()) return d_;
    return unsigned_ ? static_cast<double>(static_cast<uint64_t>(i_)) : static_cast<double>(i_);
  }
  int64_t to_int() const { return has_double() ? static_cast<int64_t>(d_) : i_; }
  bool to_bool() const { return has_double() ? (d_ != 0.0 || im_ != 0.0) : i_ != 0; }
  std::complex<double> to_complex() const { return {to_double(), is_complex() ? im_ : 0.0}; }

  template <class T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) {
      return to_bool();
    } else if constexpr (is_complex_v<T>) {
      return T(to_complex());
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
        return unsigned_ ? ScalarType::UInt64 : ScalarType::Int64;
      case Kind::Complex:
        return ::ember::to_complex(default_dtype());
      default:
        return default_dtype();
    }
  }

 private:
  Kind kind_;
  bool unsigned_ = false;
  union {
    int64_t i_;
    double d_;
  };
  double im_ = 0.0;  // the imaginary part of a complex number
  bool has_double() const { return kind_ == Kind::Float || kind_ == Kind::Complex; }
};

template <>
inline double Scalar::to<double>() const {
  return to_double();
}

}  // namespace ember
