// PyTorch's __torch_function__ protocol: the wrappers that ember's public functions, Tensor
// methods, operators and nn.functional go through (ember/overrides.py installs them), the
// overloaded-argument scan, the per-thread switches (DisableTorchFunction[Subclass]) and the
// per-thread stack of TorchFunctionModes.
//
// Cost: a wrapper is a C callable with vectorcall. With no mode entered anywhere, a call whose
// arguments are all exact ember.Tensors or basic Python values (None, bool, int, float, str,
// dtype, device, slices, tuples/lists of these) is forwarded as is; anything else costs one
// cached type lookup of __torch_function__ (a Parameter finds the disabled implementation and is
// forwarded too). Only a real override, or an entered mode, goes to Python
// (ember.overrides._dispatch).
#include <vector>

#include "python/bind_support.h"
// After Python.h (bind_support.h includes it):
#include <structmember.h>

namespace ember {
namespace {

struct Wrapper {
  PyObject_HEAD PyObject* wrapped;  // the function called when no override applies
  PyObject* dict;                   // __name__, __qualname__, ... set on the wrapper
  vectorcallfunc vectorcall;
  PyObject* public_fn;  // the func __torch_function__ is given (Tensor.add for __add__), or null
};

PyObject* g_dispatch = nullptr;         // ember.overrides._dispatch
PyObject* g_reduce = nullptr;           // ember.overrides._reduce (pickling a wrapper)
PyObject* g_disabled_impl = nullptr;    // _C._disabled_torch_function_impl
PyObject* g_tf_name = nullptr;          // interned "__torch_function__"
PyTypeObject* g_tensor_type = nullptr;  // ember.Tensor (a copy of tensor_type(), read inline)
PyTypeObject* g_dtype_type = nullptr;
PyTypeObject* g_device_type = nullptr;
PyTypeObject* g_function_type = nullptr;  // wraps builtins: not a descriptor
PyTypeObject* g_method_type = nullptr;    // wraps methods and Python functions: binds like one
Py_ssize_t g_mode_count = 0;              // modes entered, all threads together (under the GIL)
// 0: on; 1: arguments' __torch_function__ off (DisableTorchFunctionSubclass); 2: modes off too
// (DisableTorchFunction).
thread_local int t_disabled = 0;
thread_local std::vector<PyObject*> t_modes;  // owned references, innermost last

inline bool is_basic(PyObject* o, PyTypeObject* t) {
  return o == Py_None || t == &PyLong_Type || t == &PyFloat_Type || t == &PyBool_Type ||
         t == &PyUnicode_Type || t == g_dtype_type || t == g_device_type || t == &PySlice_Type ||
         o == Py_Ellipsis || t == &PyComplex_Type;
}

// Whether t has a __torch_function__ other than the disabled one (a cached type lookup).
inline bool type_overrides(PyTypeObject* t) {
  PyObject* f = _PyType_Lookup(t, g_tf_name);
  return f != nullptr && f != g_disabled_impl;
}

// Whether o (or, one level down, an element of a tuple or list) defines __torch_function__.
bool arg_overrides(PyObject* o, bool nested) {
  PyTypeObject* t = Py_TYPE(o);
  if (t == g_tensor_type || is_basic(o, t)) return false;
  if (nested && (t == &PyList_Type || t == &PyTuple_Type)) return false;  // nested data
  if (!nested && (PyTuple_Check(o) || PyList_Check(o))) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    PyObject** items = PySequence_Fast_ITEMS(o);
    for (Py_ssize_t i = 0; i < n; ++i)
      if (arg_overrides(items[i], true)) return true;
    return false;
  }
  return type_overrides(t);
}

// Adds o to `out` (a list) in PyTorch's order: one argument per type, subclasses before their
// bases, otherwise left to right. The wrappers look one level into tuples and lists and skip
// plain tensors; handle_torch_function (plain = true) takes its arguments as they are.
void collect(PyObject* o, PyObject* out, bool nested, bool plain = false) {
  PyTypeObject* t = Py_TYPE(o);
  if ((t == g_tensor_type && !plain) || is_basic(o, t)) return;
  if (!nested && (PyTuple_Check(o) || PyList_Check(o))) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    for (Py_ssize_t i = 0; i < n; ++i) collect(PySequence_Fast_GET_ITEM(o, i), out, true);
    return;
  }
  if (!type_overrides(t)) return;
  Py_ssize_t n = PyList_GET_SIZE(out), pos = n;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyTypeObject* u = Py_TYPE(PyList_GET_ITEM(out, i));
    if (u == t) return;
    if (pos == n && PyType_IsSubtype(t, u)) pos = i;
  }
  if (PyList_Insert(out, pos, o) < 0) throw py::error_already_set();
}

inline bool modes_active() { return g_mode_count > 0 && t_disabled < 2 && !t_modes.empty(); }

PyObject* slow_call(Wrapper* w, PyObject* self, PyObject* const* args, size_t nargsf,
                    PyObject* kwnames) {
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  bool modes = modes_active();
  if (t_disabled >= 1 && !modes) return PyObject_Vectorcall(w->wrapped, args, nargsf, kwnames);
  PyObject* overloaded = PyList_New(0);
  if (overloaded == nullptr) return nullptr;
  if (t_disabled == 0) {
    try {
      for (Py_ssize_t i = 0; i < n + nkw; ++i) collect(args[i], overloaded, false);
    } catch (py::error_already_set& e) {
      Py_DECREF(overloaded);
      e.restore();
      return nullptr;
    }
  }
  if (PyList_GET_SIZE(overloaded) == 0 && !modes) {
    Py_DECREF(overloaded);
    return PyObject_Vectorcall(w->wrapped, args, nargsf, kwnames);
  }
  if (g_dispatch == nullptr) {
    Py_DECREF(overloaded);
    PyErr_SetString(PyExc_RuntimeError, "__torch_function__ dispatch is not installed");
    return nullptr;
  }
  PyObject* tuple = PyTuple_New(n);
  PyObject* kwargs = PyDict_New();
  PyObject* result = nullptr;
  if (tuple != nullptr && kwargs != nullptr) {
    for (Py_ssize_t i = 0; i < n; ++i) {
      Py_INCREF(args[i]);
      PyTuple_SET_ITEM(tuple, i, args[i]);
    }
    bool ok = true;
    for (Py_ssize_t i = 0; i < nkw && ok; ++i)
      ok = PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[n + i]) == 0;
    if (ok)
      result = PyObject_CallFunctionObjArgs(g_dispatch, w->public_fn ? w->public_fn : self,
                                            w->wrapped, overloaded, tuple, kwargs, nullptr);
  }
  Py_XDECREF(tuple);
  Py_XDECREF(kwargs);
  Py_DECREF(overloaded);
  return result;
}

PyObject* wrapper_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                             PyObject* kwnames) {
  auto* w = reinterpret_cast<Wrapper*>(self);
  if (g_mode_count == 0) {  // the fast path: one type test per argument
    Py_ssize_t total = PyVectorcall_NARGS(nargsf) + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    Py_ssize_t i = 0;
    for (; i < total; ++i) {
      PyObject* a = args[i];
      if (Py_TYPE(a) != g_tensor_type && arg_overrides(a, false)) break;
    }
    if (i == total) return PyObject_Vectorcall(w->wrapped, args, nargsf, kwnames);
  }
  return slow_call(w, self, args, nargsf, kwnames);
}

int wrapper_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* w = reinterpret_cast<Wrapper*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(w->wrapped);
  Py_VISIT(w->dict);
  Py_VISIT(w->public_fn);
  return 0;
}

int wrapper_clear(PyObject* self) {
  auto* w = reinterpret_cast<Wrapper*>(self);
  Py_CLEAR(w->wrapped);
  Py_CLEAR(w->dict);
  Py_CLEAR(w->public_fn);
  return 0;
}

void wrapper_dealloc(PyObject* self) {
  PyTypeObject* t = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  wrapper_clear(self);
  t->tp_free(self);
  Py_DECREF(t);
}

// Attributes not set on the wrapper (__name__, __qualname__, __doc__, __module__, ...) are the
// wrapped function's.
PyObject* wrapper_getattro(PyObject* self, PyObject* name) {
  auto* w = reinterpret_cast<Wrapper*>(self);
  if (w->dict != nullptr) {
    PyObject* v = PyDict_GetItemWithError(w->dict, name);
    if (v != nullptr) {
      Py_INCREF(v);
      return v;
    }
    if (PyErr_Occurred()) return nullptr;
  }
  if (PyUnicode_Check(name) && (PyUnicode_CompareWithASCIIString(name, "__doc__") == 0 ||
                                PyUnicode_CompareWithASCIIString(name, "__module__") == 0))
    return PyObject_GetAttr(w->wrapped, name);
  PyObject* v = PyObject_GenericGetAttr(self, name);
  if (v != nullptr || !PyErr_ExceptionMatches(PyExc_AttributeError)) return v;
  PyErr_Clear();
  return PyObject_GetAttr(w->wrapped, name);
}

PyObject* wrapper_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

PyObject* wrapper_repr(PyObject* self) {
  auto* w = reinterpret_cast<Wrapper*>(self);
  return PyObject_Repr(w->wrapped);
}

// Pickled by reference, as functions are (ember.overrides._reduce).
PyObject* wrapper_reduce(PyObject* self, PyObject*) {
  if (g_reduce == nullptr) return PyObject_GetAttrString(self, "__qualname__");
  return PyObject_CallOneArg(g_reduce, self);
}

PyObject* wrapper_get_wrapped(PyObject* self, void*) {
  PyObject* v = reinterpret_cast<Wrapper*>(self)->wrapped;
  Py_INCREF(v);
  return v;
}

PyMethodDef g_wrapper_methods[] = {{"__reduce__", wrapper_reduce, METH_NOARGS, nullptr},
                                   {nullptr, nullptr, 0, nullptr}};
PyMemberDef g_wrapper_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Wrapper, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(Wrapper, dict), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};
PyGetSetDef g_wrapper_getset[] = {
    {"__wrapped__", wrapper_get_wrapped, nullptr, nullptr, nullptr},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject* make_wrapper_type(const char* name, bool method) {
  std::vector<PyType_Slot> slots = {
      {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
      {Py_tp_traverse, reinterpret_cast<void*>(wrapper_traverse)},
      {Py_tp_clear, reinterpret_cast<void*>(wrapper_clear)},
      {Py_tp_dealloc, reinterpret_cast<void*>(wrapper_dealloc)},
      {Py_tp_getattro, reinterpret_cast<void*>(wrapper_getattro)},
      {Py_tp_setattro, reinterpret_cast<void*>(PyObject_GenericSetAttr)},
      {Py_tp_repr, reinterpret_cast<void*>(wrapper_repr)},
      {Py_tp_methods, g_wrapper_methods},
      {Py_tp_members, g_wrapper_members},
      {Py_tp_getset, g_wrapper_getset}};
  if (method) slots.push_back({Py_tp_descr_get, reinterpret_cast<void*>(wrapper_descr_get)});
  slots.push_back({0, nullptr});
  unsigned flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL;
  if (method) flags |= Py_TPFLAGS_METHOD_DESCRIPTOR;
  PyType_Spec spec{name, static_cast<int>(sizeof(Wrapper)), 0, flags, slots.data()};
  PyObject* t = PyType_FromSpec(&spec);
  if (t == nullptr) throw py::error_already_set();
  return reinterpret_cast<PyTypeObject*>(t);
}

py::object wrap(py::object fn, bool method, py::object public_fn) {
  if (!PyCallable_Check(fn.ptr())) throw py::type_error("_tf_wrap: expected a callable");
  PyTypeObject* t = method ? g_method_type : g_function_type;
  auto* w = PyObject_GC_New(Wrapper, t);
  if (w == nullptr) throw py::error_already_set();
  w->wrapped = fn.release().ptr();
  w->dict = nullptr;
  w->vectorcall = wrapper_vectorcall;
  w->public_fn = public_fn.is_none() ? nullptr : public_fn.release().ptr();
  PyObject_GC_Track(w);
  return py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(w));
}

// Sets this thread's switch for a block (DisableTorchFunctionSubclass: 1, DisableTorchFunction:
// 2); a switch already further off stays so.
template <int Level>
struct DisableGuard {
  int previous = 0;
};

template <int Level>
void bind_disable_guard(py::module_& m, const char* name, const char* doc) {
  py::class_<DisableGuard<Level>>(m, name, doc)
      .def(py::init<>())
      .def("__enter__",
           [](DisableGuard<Level>& g) {
             g.previous = t_disabled;
             if (t_disabled < Level) t_disabled = Level;
           })
      .def("__exit__", [](DisableGuard<Level>& g, py::args) { t_disabled = g.previous; });
}

py::list overloaded_args(py::iterable args) {
  py::list out;
  for (py::handle a : args) collect(a.ptr(), out.ptr(), true, true);
  return out;
}

bool any_overrides(py::iterable args) {
  if (modes_active()) return true;
  if (t_disabled >= 1) return false;
  for (py::handle a : args)
    if (arg_overrides(a.ptr(), true)) return true;
  return false;
}

}  // namespace

// Whether a property read on self may skip __torch_function__: no mode is entered and self's
// type does not override it (an exact ember.Tensor, or a class that opts out like nn.Parameter).
// The fast property getters of tensor_py.cpp ask this; otherwise they call the getter's wrapper.
bool torch_function_skippable(PyObject* self) {
  if (g_mode_count != 0) return false;
  PyTypeObject* t = Py_TYPE(self);
  return t == g_tensor_type || !type_overrides(t);
}

void bind_torch_function(py::module_& m) {
  g_tf_name = PyUnicode_InternFromString("__torch_function__");
  g_tensor_type = tensor_type();
  g_dtype_type = Py_TYPE(dtype_object(ScalarType::Float32));
  g_device_type = reinterpret_cast<PyTypeObject*>(m.attr("device").ptr());
  g_function_type = make_wrapper_type("ember._C._TorchFunctionWrapper", false);
  g_method_type = make_wrapper_type("ember._C._TorchFunctionMethod", true);
  m.attr("_TorchFunctionWrapper") = py::handle(reinterpret_cast<PyObject*>(g_function_type));
  m.attr("_TorchFunctionMethod") = py::handle(reinterpret_cast<PyObject*>(g_method_type));

  m.def("_tf_wrap", &wrap, py::arg("fn"), py::arg("method") = false, py::arg("public") = py::none(),
        "fn behind the __torch_function__ check; method=True binds like a function (for class "
        "attributes); public: the func handed to __torch_function__ (default: the wrapper).");
  m.def(
      "_tf_set_dispatch",
      [](py::object fn, py::object reduce) {
        Py_XDECREF(g_dispatch);
        g_dispatch = fn.release().ptr();
        Py_XDECREF(g_reduce);
        g_reduce = reduce.release().ptr();
      },
      py::arg("dispatch"), py::arg("reduce"),
      "Sets the Python function overridden calls go to: dispatch(func, original, overloaded, "
      "args, kwargs), and reduce(wrapper) for pickling.");
  m.def("_get_overloaded_args", &overloaded_args, py::arg("relevant_args"),
        "The arguments whose type defines __torch_function__, in the order they are tried.");
  m.def("_has_torch_function", &any_overrides, py::arg("relevant_args"));
  m.def(
      "_has_torch_function_unary",
      [](py::handle a) {
        return modes_active() || (t_disabled == 0 && arg_overrides(a.ptr(), true));
      },
      py::arg("obj"));
  m.def("_has_torch_function_variadic", [](py::args args) { return any_overrides(args); });
  m.def("_is_torch_function_enabled", []() { return t_disabled == 0; });
  m.def("_is_torch_function_mode_enabled", []() { return modes_active(); });
  m.def("_torch_function_disabled_level", []() { return t_disabled; });
  m.def(
      "_set_torch_function_disabled_level",
      [](int level) {
        if (level < 0 || level > 2)
          throw py::value_error("_set_torch_function_disabled_level: level must be 0, 1 or 2");
        int previous = t_disabled;
        t_disabled = level;
        return previous;
      },
      py::arg("level"));
  m.def(
      "_push_on_torch_function_stack",
      [](py::object mode) {
        t_modes.push_back(mode.release().ptr());
        ++g_mode_count;
      },
      py::arg("mode"));
  m.def("_pop_torch_function_stack", []() {
    if (t_modes.empty()) throw py::index_error("_pop_torch_function_stack: no mode entered");
    PyObject* mode = t_modes.back();
    t_modes.pop_back();
    --g_mode_count;
    return py::reinterpret_steal<py::object>(mode);
  });
  m.def("_len_torch_function_stack", []() { return t_modes.size(); });
  m.def(
      "_get_function_stack_at",
      [](Py_ssize_t i) {
        if (i < 0 || static_cast<size_t>(i) >= t_modes.size())
          throw py::index_error("_get_function_stack_at: index out of range");
        return py::reinterpret_borrow<py::object>(t_modes[i]);
      },
      py::arg("index"));

  bind_disable_guard<1>(m, "DisableTorchFunctionSubclass",
                        "A block in which arguments' __torch_function__ is ignored (modes still "
                        "apply).");
  bind_disable_guard<2>(m, "DisableTorchFunction",
                        "A block in which __torch_function__ (arguments and modes) is ignored.");

  py::object disabled = py::cpp_function(
      [](py::object func, py::object, py::object args, py::object kwargs) {
        int previous = t_disabled;
        if (t_disabled < 1) t_disabled = 1;
        try {
          py::tuple a = args.is_none() ? py::tuple() : py::tuple(args);
          py::dict k = kwargs.is_none() ? py::dict() : py::dict(kwargs);
          py::object r = func(*a, **k);
          t_disabled = previous;
          return r;
        } catch (...) {
          t_disabled = previous;
          throw;
        }
      },
      py::name("_disabled_torch_function_impl"), py::arg("func"), py::arg("types"),
      py::arg("args") = py::tuple(), py::arg("kwargs") = py::none(),
      "__torch_function__ of classes that opt out (nn.Parameter): runs func as plain tensors.");
  m.attr("_disabled_torch_function_impl") = disabled;
  g_disabled_impl = disabled.ptr();  // kept alive by the module
}

}  // namespace ember
