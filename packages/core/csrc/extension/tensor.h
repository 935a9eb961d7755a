// The C++ frontend for extensions: api::Tensor with every op (frontend_ops.h, generated from the
// op YAML) and the hand-written rest -- conversions, autograd state, operators, from_blob. Each
// call runs ember's own op through ops:: (autograd records it), so an extension written with
// these functions is differentiable the way the same Python code is.
//
//   api::Tensor y = api::sigmoid(x) * x.sum(1, /*keepdim=*/true);
#pragma once
#include <functional>
#include <memory>

#include "frontend_ops.h"

namespace ember {
namespace api {

inline Device::Device(const std::string& spec) {
  std::string type = spec.substr(0, spec.find(':'));
  int index = -1;
  if (type.size() < spec.size()) {
    std::string rest = spec.substr(type.size() + 1);
    EMBER_CHECK(!rest.empty() && rest.find_first_not_of("0123456789") == std::string::npos &&
                    rest.size() < 4,
                "Invalid device string: '", spec, "'");
    index = std::stoi(rest);
  }
  if (type == "cpu") {
    d_ = {DeviceType::CPU, static_cast<int8_t>(index)};
  } else if (type == "cuda") {
    d_ = {DeviceType::CUDA, static_cast<int8_t>(index)};
  } else if (type == "meta") {
    d_ = {DeviceType::Meta, static_cast<int8_t>(index)};
  } else {
    EMBER_FAIL(Runtime,
               "Expected one of cpu, cuda, meta device type at start of device string: ", spec);
  }
}

// ---- members declared in tensor_methods.inc ----------------------------------------------------
inline Tensor Tensor::to(const TensorOptions& options, bool non_blocking, bool copy) const {
  const ember::Tensor& t = checked();
  auto dt = options.has_dtype() ? to_core(options.dtype()) : t->dtype();
  auto dev = options.has_device() ? options.device().core() : t->device();
  if (!copy && dt == t->dtype() &&
      (dev == t->device() || (dev.index < 0 && dev.type == t->device().type)))
    return *this;
  return Tensor(ops::_to_copy(t, dt, dev, non_blocking));
}
inline Tensor Tensor::to(ScalarType dtype, bool non_blocking, bool copy) const {
  return to(TensorOptions(dtype), non_blocking, copy);
}
inline Tensor Tensor::to(Device device, bool non_blocking, bool copy) const {
  return to(TensorOptions(device), non_blocking, copy);
}
inline Tensor Tensor::to(Device device, ScalarType dtype, bool non_blocking, bool copy) const {
  return to(TensorOptions(dtype).device(device), non_blocking, copy);
}
inline Tensor Tensor::cpu() const { return to(Device(kCPU)); }
inline Tensor Tensor::cuda() const { return to(Device(kCUDA)); }
inline Tensor Tensor::contiguous() const {
  return is_contiguous() ? *this : Tensor(ops::contiguous(impl()));
}
inline Tensor Tensor::detach() const { return Tensor(autograd::detach(checked())); }

inline Scalar Tensor::item() const {
  EMBER_CHECK(numel() == 1, "a Tensor with ", numel(), " elements cannot be converted to Scalar");
  Tensor h = cpu();
  const char* p = h.impl()->data();
  switch (h.impl()->dtype()) {
    case ember::ScalarType::Bool:
      return Scalar(*reinterpret_cast<const bool*>(p));
    case ember::ScalarType::UInt8:
      return Scalar(int64_t{*reinterpret_cast<const uint8_t*>(p)});
    case ember::ScalarType::Int8:
      return Scalar(int64_t{*reinterpret_cast<const int8_t*>(p)});
    case ember::ScalarType::Int16:
      return Scalar(int64_t{*reinterpret_cast<const int16_t*>(p)});
    case ember::ScalarType::Int32:
      return Scalar(int64_t{*reinterpret_cast<const int32_t*>(p)});
    case ember::ScalarType::Int64:
      return Scalar(*reinterpret_cast<const int64_t*>(p));
    case ember::ScalarType::Float16:
      return Scalar(static_cast<double>(static_cast<float>(*reinterpret_cast<const Half*>(p))));
    case ember::ScalarType::BFloat16:
      return Scalar(static_cast<double>(static_cast<float>(*reinterpret_cast<const BFloat16*>(p))));
    case ember::ScalarType::Float32:
      return Scalar(static_cast<double>(*reinterpret_cast<const float*>(p)));
    case ember::ScalarType::Float64:
      return Scalar(*reinterpret_cast<const double*>(p));
    case ember::ScalarType::Complex64:
      return Scalar(*reinterpret_cast<const std::complex<float>*>(p));
    case ember::ScalarType::Complex128:
      return Scalar(*reinterpret_cast<const std::complex<double>*>(p));
    case ember::ScalarType::UInt16:
      return Scalar(int64_t{*reinterpret_cast<const uint16_t*>(p)});
    case ember::ScalarType::UInt32:
      return Scalar(int64_t{*reinterpret_cast<const uint32_t*>(p)});
    case ember::ScalarType::UInt64:  // values past int64's range wrap, as Scalar holds int64
      return Scalar(static_cast<int64_t>(*reinterpret_cast<const uint64_t*>(p)));
    case ember::ScalarType::Float8_e4m3fn:
      return Scalar(static_cast<double>(float(*reinterpret_cast<const Float8_e4m3fn*>(p))));
    case ember::ScalarType::Float8_e5m2:
      return Scalar(static_cast<double>(float(*reinterpret_cast<const Float8_e5m2*>(p))));
    default:
      break;
  }
  EMBER_FAIL(Runtime, "item: unsupported dtype ", toString(scalar_type()));
}
template <class T>
T Tensor::item() const {
  Scalar s = item();
  if constexpr (std::is_same_v<T, double>) {
    return s.to_double();
  } else {
    return s.to<T>();
  }
}

inline Tensor Tensor::grad() const {
  AutogradMeta* m = autograd::meta(checked());
  return m ? Tensor(m->grad) : Tensor();
}
inline const Tensor& Tensor::requires_grad_(bool requires_grad) const {
  autograd::set_requires_grad(checked(), requires_grad);
  return *this;
}
inline void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph,
                             bool create_graph) const {
  bool keep = retain_graph.value_or(create_graph);
  autograd::run_backward({checked()}, {gradient.impl()}, keep, create_graph, {}, false, true);
}
inline Tensor Tensor::operator[](int64_t index) const { return select(0, index); }
inline Tensor Tensor::operator-() const { return neg(); }
inline const Tensor& Tensor::operator+=(const TensorOrScalarArg& o) const {
  ops::add(impl(), o.core(), Scalar(int64_t{1}), impl());
  return *this;
}
inline const Tensor& Tensor::operator-=(const TensorOrScalarArg& o) const {
  ops::sub(impl(), o.core(), Scalar(int64_t{1}), impl());
  return *this;
}
inline const Tensor& Tensor::operator*=(const TensorOrScalarArg& o) const {
  ops::mul(impl(), o.core(), impl());
  return *this;
}
inline const Tensor& Tensor::operator/=(const TensorOrScalarArg& o) const {
  ops::div(impl(), o.core(), std::nullopt, impl());
  return *this;
}

// ---- operators: a Tensor on either side, a tensor or a number on the other --------------------
#define EMBER_API_BINARY_OPERATOR(sym, call)                                                     \
  inline Tensor operator sym(const Tensor& a, const TensorOrScalarArg& b) { return call(a, b); } \
  template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>                          \
  inline Tensor operator sym(T a, const Tensor& b) {                                             \
    return call(Tensor(ops::full({}, Scalar(a), std::nullopt, b.impl()->device())), b);          \
  }
EMBER_API_BINARY_OPERATOR(+, add)
EMBER_API_BINARY_OPERATOR(-, sub)
EMBER_API_BINARY_OPERATOR(*, mul)
EMBER_API_BINARY_OPERATOR(/, div)
EMBER_API_BINARY_OPERATOR(==, eq)
EMBER_API_BINARY_OPERATOR(!=, ne)
EMBER_API_BINARY_OPERATOR(<, lt)
EMBER_API_BINARY_OPERATOR(<=, le)
EMBER_API_BINARY_OPERATOR(>, gt)
EMBER_API_BINARY_OPERATOR(>=, ge)
#undef EMBER_API_BINARY_OPERATOR

// ---- functions that are not single ops ----------------------------------------------------------
// y = input @ weight^T + bias (torch::linear).
inline Tensor linear(const Tensor& input, const Tensor& weight,
                     const std::optional<Tensor>& bias = std::nullopt) {
  Tensor y = matmul(input, weight.t());
  return bias && bias->defined() ? y + *bias : y;
}

// A tensor over memory the caller owns (torch::from_blob): the data is not copied and must
// outlive the tensor, unless `deleter` is given, which the last reference calls. CPU memory only
// unless options name another device whose memory `data` is.
inline Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides,
                        std::function<void(void*)> deleter, const TensorOptions& options = {}) {
  EMBER_CHECK(sizes.size() == strides.size(), "from_blob: sizes ", sizes, " and strides ", strides,
              " differ in length");
  ember::ScalarType dt = to_core(options.dtype());
  int64_t extent = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    EMBER_CHECK(sizes[i] >= 0 && strides[i] >= 0, "from_blob: negative size or stride in ", sizes,
                " / ", strides);
    if (sizes[i] == 0) extent = 0;
  }
  if (extent != 0)
    for (size_t i = 0; i < sizes.size(); ++i) extent += (sizes[i] - 1) * strides[i];
  DataPtr ptr;
  Device dev = options.device();
  if (deleter) {
    auto ctx =
        std::make_unique<std::pair<std::function<void(void*)>, void*>>(std::move(deleter), data);
    ptr = DataPtr(
        data, ctx.release(),
        [](void* c) {
          std::unique_ptr<std::pair<std::function<void(void*)>, void*>> owned(
              static_cast<std::pair<std::function<void(void*)>, void*>*>(c));
          owned->first(owned->second);
        },
        dev.core());
  } else {
    ptr = DataPtr(data, nullptr, nullptr, dev.core());
  }
  auto storage =
      std::make_shared<StorageImpl>(std::move(ptr), static_cast<size_t>(extent * itemsize(dt)));
  Tensor t(std::make_shared<TensorImpl>(std::move(storage), dt, sizes.core(), strides.core(), 0,
                                        std::make_shared<VersionCounter>()));
  if (options.requires_grad()) t.requires_grad_(true);
  return t;
}
inline Tensor from_blob(void* data, IntArrayRef sizes, const TensorOptions& options = {}) {
  return from_blob(data, sizes, IntArrayRef(contiguous_strides(sizes.core())), nullptr, options);
}
inline Tensor from_blob(void* data, IntArrayRef sizes, std::function<void(void*)> deleter,
                        const TensorOptions& options = {}) {
  return from_blob(data, sizes, IntArrayRef(contiguous_strides(sizes.core())), std::move(deleter),
                   options);
}
inline Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides,
                        const TensorOptions& options = {}) {
  return from_blob(data, sizes, strides, nullptr, options);
}

// A 1-d tensor of `values` (torch::tensor({1, 2, 3})): integers make int64, floating values the
// default dtype, bools bool, unless options say otherwise.
template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
Tensor tensor(std::initializer_list<T> values, const TensorOptions& options = {}) {
  using Host = std::conditional_t<std::is_same_v<T, bool>, bool,
                                  std::conditional_t<std::is_integral_v<T>, int64_t, double>>;
  std::vector<Host> host(values.begin(), values.end());
  ScalarType natural = std::is_same_v<T, bool> ? kBool
                       : std::is_integral_v<T> ? kLong
                                               : from_core(ember::default_dtype());
  Tensor t = from_blob(host.data(), {static_cast<int64_t>(host.size())},
                       TensorOptions(scalar_type_of<Host>))
                 .clone();
  TensorOptions o(options.has_dtype() ? options.dtype() : natural);
  if (options.has_device()) o = o.device(options.device());
  Tensor r = t.to(o);
  if (options.requires_grad()) r.requires_grad_(true);
  return r;
}

}  // namespace api
}  // namespace ember
