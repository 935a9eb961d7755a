// pybind11 type casters for extension modules: api::Tensor and the engine's Tensor convert to
// and from ember's Python tensors (the same Python object for the same tensor; an undefined
// tensor is None), and engine errors become the Python exceptions ember raises (ValueError,
// IndexError, ...). Everything goes through ember._C's C API (extension/c_api.h), so this works
// whatever pybind11 version the extension is built with.
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "extension/c_api.h"
#include "extension/tensor.h"

namespace ember {
namespace api {
namespace detail {

// Engine errors raised inside an extension's functions become ember's Python exceptions
// (registered once per extension module, on its first tensor argument or result).
inline void register_error_translator() {
  static const bool done = [] {
    pybind11::register_local_exception_translator([](std::exception_ptr p) {
      try {
        if (p) std::rethrow_exception(p);
      } catch (const ember::Error& e) {
        extension_api().set_error(static_cast<int>(e.kind()), e.what());
      }
    });
    return true;
  }();
  (void)done;
}

template <class T>
struct tensor_caster {
  PYBIND11_TYPE_CASTER(T, pybind11::detail::const_name("ember.Tensor"));
  bool load(pybind11::handle src, bool) {
    register_error_translator();
    ember::Tensor t;
    if (!extension_api().unpack_tensor(src.ptr(), &t)) return false;
    value = T(std::move(t));
    return true;
  }
  static pybind11::handle cast(const T& t, pybind11::return_value_policy, pybind11::handle) {
    register_error_translator();
    return extension_api().wrap_tensor(static_cast<const ember::Tensor&>(t));
  }
};

}  // namespace detail
}  // namespace api
}  // namespace ember

namespace pybind11 {
namespace detail {
template <>
struct type_caster<ember::api::Tensor> : ember::api::detail::tensor_caster<ember::api::Tensor> {};
template <>
struct type_caster<ember::Tensor> : ember::api::detail::tensor_caster<ember::Tensor> {};
}  // namespace detail
}  // namespace pybind11
