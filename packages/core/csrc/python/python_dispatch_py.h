// The Python side of the dispatch hook (ops/python_dispatch.h): how an op's C++ arguments
// become Python objects for __torch_dispatch__ and how the handler's result comes back. The
// per-op table (kPyDispatchOps) is generated (bind_python_dispatch.cpp).
#pragma once
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/generator.h"
#include "python/bind_support.h"

namespace ember {

struct PyDispatchOp {
  const char* name;
  const char* overload;
  const char* schema;  // a Python literal: [(name, keyword_only, default or None, type), ...]
  py::list (*box)(const void* const* args);
  void (*unbox)(py::handle result, void* out);  // null for ops that return nothing
  bool modes;  // TorchDispatchModes see it (else only subclasses do; modes see its parts)
};
extern const PyDispatchOp kPyDispatchOps[];
extern const int kNumPyDispatchOps;

// Whether t's Python object is an instance of a Tensor subclass that defines __torch_dispatch__
// (call only while python_dispatch::on(); takes the GIL).
bool is_python_dispatch_subclass(const Tensor& t);
// Whether an op on t must be seen by Python: a TorchDispatchMode is on for this thread, or t is
// such a subclass instance (call only while python_dispatch::on()). The hook, once on, stays on
// for the process; plain tensors outside modes keep their own paths (and grad_fn names).
bool python_dispatch_wanted(const Tensor& t);

// A tensor the handler returned; a __torch_dispatch__ subclass instance stays alive as long
// as C++ holds the tensor (so the saved tensors and gradients of autograd keep their class).
Tensor pd_unbox_tensor(py::handle r);

template <class T>
py::object pd_box(const void* p) {
  return py::cast(*static_cast<const T*>(p));
}
template <>
inline py::object pd_box<Generator*>(const void* p) {
  Generator* g = *static_cast<Generator* const*>(p);
  if (g == nullptr) return py::none();
  return py::cast(g, py::return_value_policy::reference);
}

template <>
inline py::object pd_box<TensorOrScalar>(const void* p) {  // an absent optional is None
  const auto& v = *static_cast<const TensorOrScalar*>(p);
  if (v.is_none()) return py::none();
  return py::cast(v);
}

template <class T>
struct PdUnbox {
  static T get(py::handle r) { return r.cast<T>(); }
};
template <>
struct PdUnbox<Tensor> {
  static Tensor get(py::handle r) { return pd_unbox_tensor(r); }
};
template <>
struct PdUnbox<std::vector<Tensor>> {
  static std::vector<Tensor> get(py::handle r) {
    std::vector<Tensor> v;
    for (py::handle item : py::reinterpret_borrow<py::sequence>(r))
      v.push_back(pd_unbox_tensor(item));
    return v;
  }
};
template <class... Ts>
struct PdUnbox<std::tuple<Ts...>> {
  template <size_t... I>
  static std::tuple<Ts...> get_items(const py::sequence& s, std::index_sequence<I...>) {
    return std::tuple<Ts...>{PdUnbox<Ts>::get(s[I])...};
  }
  static std::tuple<Ts...> get(py::handle r) {
    py::sequence s = py::reinterpret_borrow<py::sequence>(r);
    if (static_cast<size_t>(py::len(s)) != sizeof...(Ts))
      throw py::type_error("__torch_dispatch__ returned " + std::to_string(py::len(s)) +
                           " results, expected " + std::to_string(sizeof...(Ts)));
    return get_items(s, std::index_sequence_for<Ts...>{});
  }
};

template <class T>
void pd_unbox(py::handle r, void* out) {
  *static_cast<T*>(out) = PdUnbox<T>::get(r);
}

}  // namespace ember
