// ember._C's side of ember.sparse's dispatch: a bound function or Tensor method can be given a
// last overload that hands calls with a sparse operand (an ember.sparse.SparseTensor) to a
// Python dispatcher. The overload takes part in pybind11's converting pass only, after every
// dense overload has failed, so dense calls never reach it and cost nothing more.
// The same kind of late overload lets a bound function take a Python number as its first
// operand (torch.pow(2, t), torch.add(1, t)): the call goes to a Python handler.
#include "python/bind_support.h"

namespace ember {
namespace {

// A Python number (int, bool, float, complex; numpy's float64 too) as the first operand: also
// loads only in the converting pass, so a tensor first operand never gets here.
struct LateNumber {
  py::object value;
};

}  // namespace
}  // namespace ember

namespace pybind11 {
namespace detail {
template <>
struct type_caster<ember::LateNumber> {
  PYBIND11_TYPE_CASTER(ember::LateNumber, const_name("Number"));
  bool load(handle src, bool convert) {
    PyObject* o = src.ptr();
    if (!convert || !(PyLong_Check(o) || PyFloat_Check(o) || PyComplex_Check(o))) return false;
    value.value = reinterpret_borrow<object>(src);
    return true;
  }
};
}  // namespace detail
}  // namespace pybind11

namespace ember {
namespace {

PyObject* g_sparse_type = nullptr;  // ember.sparse.SparseTensor (kept alive for the process)
PyObject* g_dispatch = nullptr;     // dispatch(name, args: tuple, kwargs: dict)

bool is_sparse(PyObject* o) {
  return g_sparse_type && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(g_sparse_type));
}

// An operand, or an element of a list/tuple operand (cat, stack), that is sparse.
bool has_sparse(PyObject* o) {
  if (is_sparse(o)) return true;
  if (PyList_Check(o) || PyTuple_Check(o)) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(o);
    for (py::handle item : seq)
      if (is_sparse(item.ptr())) return true;
  }
  return false;
}

py::object dispatch_or_next(const std::string& name, const py::tuple& all, const py::kwargs& kw) {
  bool found = false;
  for (py::handle a : all) found = found || has_sparse(a.ptr());
  for (auto item : kw) found = found || has_sparse(item.second.ptr());
  // No sparse operand: the call fails as before, with pybind11's list of signatures.
  if (!found || !g_dispatch) throw py::reference_cast_error();
  return py::reinterpret_borrow<py::object>(g_dispatch)(name, all, kw);
}

// pybind11 appends a new overload to the existing function's chain (the same object); any other
// outcome (a new function) would hide the existing overloads. `who` names the caller.
py::object joined_overload(const py::object& f, py::handle existing, const char* who,
                           const std::string& name) {
  auto function_of = [](py::handle h) {
    return PyInstanceMethod_Check(h.ptr()) ? py::handle(PyInstanceMethod_GET_FUNCTION(h.ptr())) : h;
  };
  if (!function_of(f).is(function_of(existing)))
    EMBER_FAIL(Runtime, who, ": ", name, " is not a bound function that takes another overload");
  return f;
}

}  // namespace

void bind_sparse_dispatch(py::module_& m) {
  m.def(
      "_set_sparse_dispatch",
      [](py::object type, py::object fn) {
        Py_XDECREF(g_sparse_type);
        Py_XDECREF(g_dispatch);
        g_sparse_type = type.release().ptr();
        g_dispatch = fn.release().ptr();
      },
      "Registers ember.sparse's tensor type and its dispatcher(name, args, kwargs).");
  m.def(
      "_add_sparse_fallback",
      [](py::object owner, const std::string& name, bool method) {
        py::object existing = py::getattr(owner, name.c_str());
        py::cpp_function f;
        if (method) {
          f = py::cpp_function(
              [name](py::object self, LateOperand other, py::args args, py::kwargs kw) {
                py::tuple head = py::make_tuple(self, other.value);
                return dispatch_or_next(name, py::tuple(head + args), kw);
              },
              py::name(name.c_str()), py::is_method(owner), py::sibling(existing));
        } else {
          f = py::cpp_function(
              [name](LateOperand first, py::args args, py::kwargs kw) {
                py::tuple head = py::make_tuple(first.value);
                return dispatch_or_next(name, py::tuple(head + args), kw);
              },
              py::name(name.c_str()), py::scope(owner), py::sibling(existing));
        }
        return joined_overload(f, existing, "_add_sparse_fallback", name);
      },
      py::arg("owner"), py::arg("name"), py::arg("method"),
      "Gives owner.name (a bound function, or a Tensor method with method=True) a last overload "
      "that passes calls with a sparse operand to the registered dispatcher.");
  m.def(
      "_add_number_first_overload",
      [](py::object owner, const std::string& name, py::object handler) {
        py::object existing = py::getattr(owner, name.c_str());
        py::cpp_function f(
            [handler](LateNumber first, py::args args, py::kwargs kw) {
              return handler(*(py::make_tuple(first.value) + args), **kw);
            },
            py::name(name.c_str()), py::scope(owner), py::sibling(existing));
        return joined_overload(f, existing, "_add_number_first_overload", name);
      },
      py::arg("owner"), py::arg("name"), py::arg("handler"),
      "Gives owner.name (a bound function) a last overload for calls whose first operand is a "
      "Python number; they go to handler(number, *args, **kwargs).");
}

}  // namespace ember
