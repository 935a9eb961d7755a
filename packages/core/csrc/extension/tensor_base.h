// The C++ frontend for extensions, part 1: the value types of ATen's C++ API (the API of
// <torch/extension.h>) over ember's engine. api::Tensor (frontend_ops.h, generated from the op
// YAML) derives from TensorBase below; both hold an engine Tensor, so converting is free and
// every op an extension calls is ember's own, autograd included.
#pragma once
#include <complex>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/autograd.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/tensor.h"
#include "ops.h"

namespace ember {
namespace api {

// ---- dtypes: ATen's names, numbered as the engine's ScalarType ------------------------------
enum class ScalarType : int8_t {
  Bool = 0,
  Byte,
  Char,
  Short,
  Int,
  Long,
  Half,
  BFloat16,
  Float,
  Double,
  ComplexFloat,
  ComplexDouble,
  UInt16,
  UInt32,
  UInt64,
  Float8_e4m3fn,
  Float8_e5m2,
  Undefined,
};
static_assert(static_cast<int>(ScalarType::Undefined) == kNumScalarTypes,
              "api::ScalarType must list the engine's dtypes in its order");
using Dtype = ScalarType;
constexpr ScalarType kBool = ScalarType::Bool, kByte = ScalarType::Byte, kUInt8 = ScalarType::Byte,
                     kChar = ScalarType::Char, kInt8 = ScalarType::Char, kShort = ScalarType::Short,
                     kInt16 = ScalarType::Short, kInt = ScalarType::Int, kInt32 = ScalarType::Int,
                     kLong = ScalarType::Long, kInt64 = ScalarType::Long, kHalf = ScalarType::Half,
                     kFloat16 = ScalarType::Half, kBFloat16 = ScalarType::BFloat16,
                     kFloat = ScalarType::Float, kFloat32 = ScalarType::Float,
                     kDouble = ScalarType::Double, kFloat64 = ScalarType::Double,
                     kComplexFloat = ScalarType::ComplexFloat,
                     kComplexDouble = ScalarType::ComplexDouble, kUInt16 = ScalarType::UInt16,
                     kUInt32 = ScalarType::UInt32, kUInt64 = ScalarType::UInt64,
                     kFloat8_e4m3fn = ScalarType::Float8_e4m3fn,
                     kFloat8_e5m2 = ScalarType::Float8_e5m2;

constexpr ember::ScalarType to_core(ScalarType t) { return static_cast<ember::ScalarType>(t); }
constexpr ScalarType from_core(ember::ScalarType t) { return static_cast<ScalarType>(t); }
inline const char* toString(ScalarType t) {
  static const char* names[] = {"Bool",          "Byte",          "Char",     "Short",  "Int",
                                "Long",          "Half",          "BFloat16", "Float",  "Double",
                                "ComplexFloat",  "ComplexDouble", "UInt16",   "UInt32", "UInt64",
                                "Float8_e4m3fn", "Float8_e5m2",   "Undefined"};
  return names[static_cast<int>(t)];
}
inline std::ostream& operator<<(std::ostream& os, ScalarType t) { return os << toString(t); }
inline int64_t elementSize(ScalarType t) { return ember::itemsize(to_core(t)); }
inline bool isFloatingType(ScalarType t) { return ember::is_floating(to_core(t)); }
inline bool isComplexType(ScalarType t) { return ember::is_complex(to_core(t)); }
inline bool isIntegralType(ScalarType t, bool include_bool) {
  return ember::is_integral(to_core(t), include_bool);
}
using ember::BFloat16;
using ember::Float8_e4m3fn;
using ember::Float8_e5m2;
using ember::Half;
template <class T>
inline constexpr ScalarType scalar_type_of = from_core(ember::TypeToScalar<T>::value);

// ---- devices ----------------------------------------------------------------------------------
using DeviceType = ember::DeviceType;
constexpr DeviceType kCPU = DeviceType::CPU, kCUDA = DeviceType::CUDA, kMeta = DeviceType::Meta,
                     kPrivateUse1 = DeviceType::PrivateUse1;
using DeviceIndex = int8_t;

class Device {
 public:
  Device(DeviceType type, DeviceIndex index = -1) : d_{type, index} {}  // NOLINT
  Device(ember::Device d) : d_(d) {}                                    // NOLINT
  // "cpu", "cuda", "cuda:1", "meta"
  Device(const std::string& spec);                         // NOLINT
  Device(const char* spec) : Device(std::string(spec)) {}  // NOLINT
  DeviceType type() const { return d_.type; }
  DeviceIndex index() const { return d_.index; }
  bool has_index() const { return d_.index >= 0; }
  bool is_cpu() const { return d_.type == DeviceType::CPU; }
  bool is_cuda() const { return d_.type == DeviceType::CUDA; }
  bool is_meta() const { return d_.type == DeviceType::Meta; }
  std::string str() const { return d_.str(); }
  ember::Device core() const { return d_; }
  bool operator==(const Device& o) const { return d_ == o.d_; }
  bool operator!=(const Device& o) const { return !(d_ == o.d_); }

 private:
  ember::Device d_;
};
inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

// ---- TensorOptions: what a factory makes (dtype, device, requires_grad) ---------------------
class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(ScalarType dtype) : dtype_(dtype) {}  // NOLINT
  TensorOptions(Device device) : device_(device) {}   // NOLINT
  TensorOptions(DeviceType type) : device_(type) {}   // NOLINT
  TensorOptions dtype(ScalarType t) const {
    TensorOptions o = *this;
    o.dtype_ = t;
    return o;
  }
  TensorOptions device(Device d) const {
    TensorOptions o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions device_index(DeviceIndex i) const { return device(Device(kCUDA, i)); }
  TensorOptions requires_grad(bool r) const {
    TensorOptions o = *this;
    o.requires_grad_ = r;
    return o;
  }
  ScalarType dtype() const { return dtype_.value_or(from_core(ember::default_dtype())); }
  Device device() const { return device_.value_or(Device(ember::default_device())); }
  bool requires_grad() const { return requires_grad_; }
  bool has_dtype() const { return dtype_.has_value(); }
  bool has_device() const { return device_.has_value(); }
  // The engine's optional arguments of a factory.
  std::optional<ember::ScalarType> core_dtype() const {
    return dtype_ ? std::optional<ember::ScalarType>(to_core(*dtype_)) : std::nullopt;
  }
  std::optional<ember::Device> core_device() const {
    return device_ ? std::optional<ember::Device>(device_->core()) : std::nullopt;
  }

 private:
  std::optional<ScalarType> dtype_;
  std::optional<Device> device_;
  bool requires_grad_ = false;
};
inline TensorOptions dtype(ScalarType t) { return TensorOptions().dtype(t); }
inline TensorOptions device(Device d) { return TensorOptions().device(d); }
inline TensorOptions requires_grad(bool r = true) { return TensorOptions().requires_grad(r); }

// ---- sizes and lists ----------------------------------------------------------------------
// ATen's IntArrayRef, owning its (small) values: from {2, 3}, a vector, or one integer.
class IntArrayRef {
 public:
  IntArrayRef() = default;
  IntArrayRef(std::initializer_list<int64_t> v) : v_(v) {}  // NOLINT
  IntArrayRef(const std::vector<int64_t>& v) : v_(v) {}     // NOLINT
  IntArrayRef(const DimVector& v) : v_(v) {}                // NOLINT
  IntArrayRef(int64_t v) : v_({v}) {}                       // NOLINT
  size_t size() const { return v_.size(); }
  bool empty() const { return v_.empty(); }
  const int64_t* data() const { return v_.data(); }
  const int64_t* begin() const { return v_.data(); }
  const int64_t* end() const { return v_.data() + v_.size(); }
  int64_t operator[](size_t i) const { return v_[i]; }
  int64_t front() const { return v_[0]; }
  int64_t back() const { return v_[v_.size() - 1]; }
  std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }
  const DimVector& core() const { return v_; }
  bool operator==(const IntArrayRef& o) const { return v_ == o.v_; }
  bool operator!=(const IntArrayRef& o) const { return !(v_ == o.v_); }

 private:
  DimVector v_;
};
// An optional list of sizes or dims that a braced list converts to ({0, 1}), as ATen's.
class OptionalIntArrayRef {
 public:
  OptionalIntArrayRef() = default;
  OptionalIntArrayRef(std::nullopt_t) {}                                         // NOLINT
  OptionalIntArrayRef(std::initializer_list<int64_t> v) : v_(IntArrayRef(v)) {}  // NOLINT
  OptionalIntArrayRef(const std::vector<int64_t>& v) : v_(IntArrayRef(v)) {}     // NOLINT
  OptionalIntArrayRef(IntArrayRef v) : v_(std::move(v)) {}                       // NOLINT
  OptionalIntArrayRef(int64_t v) : v_(IntArrayRef(v)) {}                         // NOLINT
  bool has_value() const { return v_.has_value(); }
  explicit operator bool() const { return v_.has_value(); }
  const IntArrayRef& operator*() const { return *v_; }
  const IntArrayRef* operator->() const { return &*v_; }
  const IntArrayRef& value() const { return v_.value(); }

 private:
  std::optional<IntArrayRef> v_;
};
inline std::ostream& operator<<(std::ostream& os, const IntArrayRef& v) {
  os << "[";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  return os << "]";
}

using Scalar = ember::Scalar;

// ---- TensorBase: the hand-written part of api::Tensor ---------------------------------------
class Tensor;
namespace indexing {
class TensorIndex;  // extension/indexing.h
}  // namespace indexing

// A typed view of a CPU tensor's memory for element loops (ATen's TensorAccessor).
template <class T, size_t N>
class TensorAccessor {
 public:
  TensorAccessor(T* data, const int64_t* sizes, const int64_t* strides)
      : data_(data), sizes_(sizes), strides_(strides) {}
  decltype(auto) operator[](int64_t i) const {
    if constexpr (N == 1) {
      return data_[i * strides_[0]];
    } else {
      return TensorAccessor<T, N - 1>(data_ + i * strides_[0], sizes_ + 1, strides_ + 1);
    }
  }
  int64_t size(size_t d) const { return sizes_[d]; }
  int64_t stride(size_t d) const { return strides_[d]; }
  T* data() const { return data_; }

 private:
  T* data_;
  const int64_t* sizes_;
  const int64_t* strides_;
};

class TensorBase {
 public:
  TensorBase() = default;
  TensorBase(ember::Tensor impl) : impl_(std::move(impl)) {}  // NOLINT

  // The engine tensor (what ops:: and the kernels take).
  const ember::Tensor& impl() const { return impl_; }
  operator const ember::Tensor&() const { return impl_; }  // NOLINT
  bool defined() const { return impl_ != nullptr; }
  bool is_same(const TensorBase& o) const { return impl_ == o.impl_; }
  void reset() { impl_.reset(); }

  int64_t dim() const { return checked()->dim(); }
  int64_t ndimension() const { return dim(); }
  int64_t numel() const { return checked()->numel(); }
  IntArrayRef sizes() const { return IntArrayRef(checked()->sizes()); }
  IntArrayRef strides() const { return IntArrayRef(checked()->strides()); }
  int64_t size(int64_t d) const { return checked()->size(wrap(d, "size")); }
  int64_t stride(int64_t d) const { return checked()->stride(wrap(d, "stride")); }
  int64_t storage_offset() const { return checked()->storage_offset(); }
  ScalarType scalar_type() const { return from_core(checked()->dtype()); }
  ScalarType dtype() const { return scalar_type(); }
  int64_t element_size() const { return checked()->itemsize(); }
  int64_t itemsize() const { return element_size(); }
  int64_t nbytes() const { return numel() * element_size(); }
  Device device() const { return Device(checked()->device()); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_meta() const { return device().is_meta(); }
  bool is_contiguous() const { return checked()->is_contiguous(); }
  bool is_floating_point() const { return isFloatingType(scalar_type()); }
  bool is_complex() const { return isComplexType(scalar_type()); }
  TensorOptions options() const { return TensorOptions(scalar_type()).device(device()); }
  bool requires_grad() const { return autograd::requires_grad(checked()); }
  bool is_leaf() const { return autograd::is_leaf(checked()); }

  // Raw memory (on the tensor's device).
  void* data_ptr() const { return checked()->data(); }
  const void* const_data_ptr() const { return data_ptr(); }
  void* mutable_data_ptr() const { return data_ptr(); }
  template <class T>
  T* data_ptr() const {
    check_type<T>("data_ptr");
    return checked()->template data_as<T>();
  }
  template <class T>
  const T* const_data_ptr() const {
    return data_ptr<T>();
  }
  template <class T>
  T* mutable_data_ptr() const {
    return data_ptr<T>();
  }
  template <class T, size_t N>
  TensorAccessor<T, N> accessor() const {
    check_type<T>("accessor");
    EMBER_CHECK(dim() == static_cast<int64_t>(N), "accessor: expected a ", N,
                "-d tensor, got one of ", dim(), " dims");
    EMBER_CHECK(device().is_cpu(), "accessor: expected a CPU tensor, got one on ", device().str());
    return TensorAccessor<T, N>(checked()->template data_as<T>(), checked()->sizes().data(),
                                checked()->strides().data());
  }

 protected:
  const ember::Tensor& checked() const {
    EMBER_CHECK(impl_ != nullptr, "ember extension: the tensor is undefined (default-constructed)");
    return impl_;
  }
  int64_t wrap(int64_t d, const char* what) const {
    int64_t n = checked()->dim();
    EMBER_CHECK_KIND(d >= -n && d < (n == 0 ? 1 : n), Index, what,
                     ": dimension out of range (expected to be in range of [", -n, ", ",
                     n == 0 ? 0 : n - 1, "], but got ", d, ")");
    return d < 0 ? d + n : d;
  }
  template <class T>
  void check_type(const char* what) const {
    using U = std::remove_cv_t<T>;
    EMBER_CHECK(scalar_type_of<U> == scalar_type(), what, ": expected scalar type ",
                toString(scalar_type_of<U>), " but found ", toString(scalar_type()));
  }

  ember::Tensor impl_;
};

inline std::ostream& operator<<(std::ostream& os, const TensorBase& t) {
  if (!t.defined()) return os << "[ undefined Tensor ]";
  return os << "[ Tensor " << t.sizes() << " " << t.scalar_type() << " " << t.device() << " ]";
}

// ---- operands of the generated functions (complete before api::Tensor is declared) ----------
// ATen's TensorList: from a vector or a braced list of tensors.
class TensorList {
 public:
  TensorList() = default;
  template <class T, class = std::enable_if_t<std::is_base_of_v<TensorBase, T>>>
  TensorList(const std::vector<T>& ts) {  // NOLINT
    for (const auto& t : ts) v_.push_back(t.impl());
  }
  TensorList(std::initializer_list<TensorBase> ts) {  // NOLINT
    for (const auto& t : ts) v_.push_back(t.impl());
  }
  size_t size() const { return v_.size(); }
  const std::vector<ember::Tensor>& core() const { return v_; }

 private:
  std::vector<ember::Tensor> v_;
};

// An operand that is a tensor or a number (ATen's Tensor and Scalar overloads in one).
class TensorOrScalarArg {
 public:
  TensorOrScalarArg(const TensorBase& t) : v_(t.impl()) {}  // NOLINT
  TensorOrScalarArg(const Scalar& s) : v_(s) {}             // NOLINT
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
  TensorOrScalarArg(T v) : v_(Scalar(v)) {}  // NOLINT
  const ember::TensorOrScalar& core() const { return v_; }

 private:
  ember::TensorOrScalar v_;
};

}  // namespace api
}  // namespace ember
