// ember.Tensor's attributes, conversions and Python operators.
#include "python/tensor_py.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "autograd/autograd.h"
#include "autograd/hooks.h"
#include "core/dispatch.h"
#include "kernels/iterator.h"
#include "ops.h"
#include "ops/python_dispatch.h"
#include "python/python_autograd.h"

namespace ember {

bool torch_function_skippable(PyObject* self);  // torch_function_py.cpp

namespace {
// A Scalar as a Python int: uint64 elements from 2**63 up read unsigned.
py::int_ int_to_py(const Scalar& s) {
  if (s.is_unsigned()) return py::int_(static_cast<uint64_t>(s.to_int()));
  return py::int_(s.to_int());
}

PyTypeObject* g_tensor_type = nullptr;
PyObject* g_size_type = nullptr;  // ember.Size (a tuple subclass defined in Python)

// The names x.size(dim) / x.stride(dim) give a dim of the wrong type (a bool, a float).
constexpr char kSizeDim[] = "size(): argument 'dim'";
constexpr char kStrideDim[] = "stride(): argument 'dim'";

py::object make_size(const DimVector& sizes) {
  PyObject* t;
  if (g_size_type) {
    auto* type = reinterpret_cast<PyTypeObject*>(g_size_type);
    t = type->tp_alloc(type, sizes.size());
  } else {
    t = PyTuple_New(sizes.size());
  }
  if (!t) throw py::error_already_set();
  for (int64_t i = 0; i < sizes.size(); ++i) PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(sizes[i]));
  return py::reinterpret_steal<py::object>(t);
}

// ---- fast property reads ----------------------------------------------------------------------
// The hottest Tensor properties are CPython getset descriptors (one C call per read) rather than
// pybind11 properties behind a __torch_function__ wrapper (three calls). The getter does the
// protocol check itself: when no mode is entered and the tensor's type does not override
// __torch_function__ it reads the value directly; otherwise it calls the wrapper of the original
// getter (ember.overrides), so overrides see the same func (Tensor.<name>.__get__) as before.
// ember.overrides installs them (_tf_fast_properties) once it has wrapped the getters.

PyObject* device_object(const Device& d) {
  // ember.device objects are immutable, so one per device is shared between reads.
  static std::vector<std::pair<Device, PyObject*>> cache;
  for (auto& [dev, obj] : cache)
    if (dev == d) {
      Py_INCREF(obj);
      return obj;
    }
  PyObject* obj = py::cast(d).release().ptr();
  if (cache.size() < 16) {
    Py_INCREF(obj);
    cache.emplace_back(d, obj);
  }
  return obj;
}

PyObject* py_bool(bool b) { return Py_NewRef(b ? Py_True : Py_False); }

PyObject* get_shape(const Tensor& t) { return make_size(t->sizes()).release().ptr(); }
PyObject* get_ndim(const Tensor& t) { return PyLong_FromLongLong(t->dim()); }
PyObject* get_dtype(const Tensor& t) { return Py_NewRef(dtype_object(t->dtype())); }
PyObject* get_device(const Tensor& t) { return device_object(t->device()); }
PyObject* get_requires_grad(const Tensor& t) { return py_bool(autograd::requires_grad(t)); }
PyObject* get_is_leaf(const Tensor& t) { return py_bool(autograd::is_leaf(t)); }
PyObject* get_grad_fn(const Tensor& t) {
  AutogradMeta* am = autograd::meta(t);
  if (!am || !am->grad_fn) return Py_NewRef(Py_None);
  return node_to_py(am->grad_fn).release().ptr();
}
PyObject* get_is_cuda(const Tensor& t) { return py_bool(t->device().type == DeviceType::CUDA); }
PyObject* get_is_cpu(const Tensor& t) { return py_bool(t->device().is_cpu()); }

struct FastProperty {
  FastProperty(const char* n, PyObject* (*r)(const Tensor&)) : name(n), read(r) {}
  const char* name;
  PyObject* (*read)(const Tensor&);
  PyObject* getter = nullptr;  // the __torch_function__ wrapper of the original getter
  PyObject* setter = nullptr;  // the original property's fset (requires_grad), or null
  std::string doc;
};

FastProperty g_fast_properties[] = {{"shape", get_shape},
                                    {"ndim", get_ndim},
                                    {"dtype", get_dtype},
                                    {"device", get_device},
                                    {"requires_grad", get_requires_grad},
                                    {"is_leaf", get_is_leaf},
                                    {"grad_fn", get_grad_fn},
                                    {"is_cuda", get_is_cuda},
                                    {"is_cpu", get_is_cpu}};
constexpr size_t kFastProperties = sizeof(g_fast_properties) / sizeof(g_fast_properties[0]);
PyGetSetDef g_fast_getset[kFastProperties];

PyObject* fast_property_get(PyObject* self, void* closure) {
  auto* p = static_cast<FastProperty*>(closure);
  if (torch_function_skippable(self)) {
    auto* inst = reinterpret_cast<py::detail::instance*>(self);
    py::detail::value_and_holder vh = inst->get_value_and_holder(nullptr, false);
    if (vh && vh.holder_constructed()) {
      const Tensor& t = vh.holder<Tensor>();
      if (t) {
        try {
          return p->read(t);
        } catch (py::error_already_set& e) {
          e.restore();
          return nullptr;
        } catch (...) {
          // Other C++ errors: the original getter raises them as Python exceptions.
        }
      }
    }
  }
  return PyObject_CallOneArg(p->getter, self);
}

int fast_property_set(PyObject* self, PyObject* value, void* closure) {
  auto* p = static_cast<FastProperty*>(closure);
  if (value == nullptr) {
    PyErr_Format(PyExc_AttributeError, "cannot delete attribute '%s' of Tensor", p->name);
    return -1;
  }
  if (std::strcmp(p->name, "requires_grad") == 0 && !PyBool_Check(value)) {
    PyErr_Format(PyExc_TypeError, "Tensor.%s must be a bool, got %s", p->name,
                 Py_TYPE(value)->tp_name);
    return -1;
  }
  PyObject* r = PyObject_CallFunctionObjArgs(p->setter, self, value, nullptr);
  if (r == nullptr) return -1;
  Py_DECREF(r);
  return 0;
}

// Replaces the properties named in `getters` (name -> the wrapper of its getter) by getset
// descriptors; a name already replaced, or not in the table, is left as it is.
void install_fast_properties(py::dict getters) {
  auto* type = reinterpret_cast<PyObject*>(g_tensor_type);
  for (size_t i = 0; i < kFastProperties; ++i) {
    FastProperty& p = g_fast_properties[i];
    if (p.getter != nullptr || !getters.contains(p.name)) continue;
    py::object current =
        py::reinterpret_borrow<py::object>(PyDict_GetItemString(g_tensor_type->tp_dict, p.name));
    if (!current || !PyObject_TypeCheck(current.ptr(), &PyProperty_Type))
      throw py::type_error(std::string("_tf_fast_properties: Tensor.") + p.name +
                           " is not a property");
    py::object fset = current.attr("fset");
    py::object doc = current.attr("__doc__");
    p.doc = doc.is_none() ? std::string() : doc.cast<std::string>();
    g_fast_getset[i] = {p.name, fast_property_get, fset.is_none() ? nullptr : fast_property_set,
                        p.doc.empty() ? nullptr : p.doc.c_str(), &p};
    PyObject* descr = PyDescr_NewGetSet(g_tensor_type, &g_fast_getset[i]);
    if (descr == nullptr) throw py::error_already_set();
    int rc = PyObject_SetAttrString(type, p.name, descr);
    Py_DECREF(descr);
    if (rc < 0) throw py::error_already_set();
    p.getter = py::object(getters[p.name]).release().ptr();
    p.setter = fset.is_none() ? nullptr : fset.release().ptr();
  }
}

py::object scalar_to_py(const Scalar& s) {
  return py::reinterpret_steal<py::object>(
      py::detail::make_caster<Scalar>::cast(s, py::return_value_policy::copy, {}));
}

// tolist() and tensor(data) recurse once per dim; deeper nesting would overflow the C++ stack
// (a segfault), so it is refused. NumPy stops at 64 dims, Python's recursion limit at 1000.
constexpr int64_t kMaxNesting = 1000;

// A number read from a tensor of `dt` as a Python object. Scalar holds integers as int64; a
// uint64 value past its range comes back wrapped, and is unwrapped here (the mapping is 1:1).
py::object element_to_py(const Scalar& s, ScalarType dt) {
  if (dt == ScalarType::UInt64)
    return py::reinterpret_steal<py::object>(
        PyLong_FromUnsignedLongLong(static_cast<uint64_t>(s.to_int())));
  return scalar_to_py(s);
}

py::object tolist_rec(const TensorImpl& t, const char* p, int64_t d) {
  if (d == t.dim()) return element_to_py(load_scalar(p, t.dtype()), t.dtype());
  py::list l(t.size(d));
  for (int64_t i = 0; i < t.size(d); ++i)
    l[i] = tolist_rec(t, p + i * t.stride(d) * t.itemsize(), d + 1);
  return std::move(l);
}

Scalar item(const Tensor& t) {
  if (python_dispatch::on()) {  // aten._local_scalar_dense reaches __torch_dispatch__
    const void* const pd_args[] = {&t};
    Scalar r;
    if (python_dispatch::call(python_dispatch::kLocalScalarDense, pd_args, &r, {&t}, {})) return r;
  }
  EMBER_CHECK(t->numel() == 1, "item: a Tensor with ", t->numel(),
              " elements cannot be converted to Scalar");
  return scalar_value(t);
}

// ---- tensor(data): nested Python sequences -> a new tensor ----------------------------------

enum Kind { kBool = 0, kInt = 1, kFloat = 2, kComplex = 3 };

void infer_shape(py::handle obj, DimVector& shape) {
  PyObject* o = obj.ptr();
  while (PyList_Check(o) || PyTuple_Check(o)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    shape.push_back(n);
    if (n == 0) return;
    o = PySequence_Fast_GET_ITEM(o, 0);
  }
  if (is_tensor_object(o)) {
    auto t = py::reinterpret_borrow<py::object>(o).cast<Tensor>();
    // A one-element tensor is a number, as in PyTorch (tensor([t1, t2]) of (1,)-shaped t1, t2
    // is (2,), not (2, 1): the extra dim broadcast against a (2,) target silently). Larger
    // tensors are rows (PyTorch refuses them).
    if (t->numel() != 1)
      for (int64_t s : t->sizes()) shape.push_back(s);
  }
}

// Whether o is a Python int past int64's range (2**70): not an int64 element, but a float or
// complex list, or a floating / uint64 dtype=, takes it (as PyTorch's tensor()).
bool is_big_int(PyObject* o) {
  if (!PyLong_Check(o) || PyBool_Check(o)) return false;
  int overflow = 0;
  PyLong_AsLongLongAndOverflow(o, &overflow);
  return overflow != 0;
}

// Stores the big Python int o as an element of dt (see is_big_int).
void store_big_int(PyObject* o, ScalarType dt, char* p) {
  if (is_floating(dt) || is_complex(dt)) {
    const double v = PyLong_AsDouble(o);  // past double's range: Python's OverflowError
    if (v == -1.0 && PyErr_Occurred()) throw py::error_already_set();
    store_scalar(Scalar(v), dt, p);  // a narrower float saturates to inf, as any float does
    return;
  }
  if (dt == ScalarType::UInt64) {  // [2**63, 2**64): held wrapped in the int64 Scalar
    const unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (!(v == static_cast<unsigned long long>(-1) && PyErr_Occurred())) {
      store_scalar(Scalar(static_cast<int64_t>(v)), dt, p);
      return;
    }
    PyErr_Clear();
  }
  throw py::value_error("value cannot be converted to an integer type without overflow");
}

// A NumPy scalar's (or 0-d array's) dtype: PyTorch's tensor() infers a list of them as their
// dtype (tensor([np.float64(1.5)]) is float64, tensor([np.int8(1)]) int8).
std::optional<ScalarType> numpy_dtype(PyObject* o) {
  if (std::string(Py_TYPE(o)->tp_name).rfind("numpy.", 0) != 0) return std::nullopt;
  py::object dt = py::reinterpret_borrow<py::object>(o).attr("dtype");
  const std::string name = py::str(dt).cast<std::string>();
  for (int i = 0; i < kNumScalarTypes; ++i)
    if (name == dtype_name(static_cast<ScalarType>(i))) return static_cast<ScalarType>(i);
  return std::nullopt;
}

// An element tensor() cannot type (None, a set, an arbitrary object): PyTorch's RuntimeError,
// or its TypeError when a dtype was given (the value then fails to convert to it).
struct UntypableObject : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// PyTorch's inference of tensor()'s dtype: each element's own dtype (a Python float the default
// dtype, an int int64, a bool bool, a complex the default complex dtype, a tensor or a NumPy
// scalar its dtype), promoted over the elements. kind tracks the widest category for the callers.
void scan_dtype(py::handle obj, std::optional<ScalarType>& acc, int& kind, int64_t depth = 0) {
  PyObject* o = obj.ptr();
  auto add = [&](ScalarType dt) {
    acc = acc ? promote_types(*acc, dt) : dt;
    kind = std::max(kind, is_complex(dt)           ? int(kComplex)
                          : is_floating(dt)        ? int(kFloat)
                          : dt == ScalarType::Bool ? int(kBool)
                                                   : int(kInt));
  };
  if (is_big_int(o)) {  // an integer element: fill_rec decides whether dt holds it
    add(ScalarType::Int64);
    return;
  }
  if (PyList_Check(o) || PyTuple_Check(o)) {
    if (depth >= kMaxNesting)  // ragged deep nesting ([1, [[[...]]]]) that infer_shape missed
      throw py::value_error("tensor(): sequences nested more than " + std::to_string(kMaxNesting) +
                            " levels deep are not supported");
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    for (Py_ssize_t i = 0; i < n; ++i)
      scan_dtype(PySequence_Fast_GET_ITEM(o, i), acc, kind, depth + 1);
    return;
  }
  if (is_tensor_object(o)) {
    add(py::reinterpret_borrow<py::object>(o).cast<Tensor>()->dtype());
    return;
  }
  if (!PyFloat_CheckExact(o) && !PyLong_CheckExact(o)) {
    if (std::optional<ScalarType> dt = numpy_dtype(o)) {
      add(*dt);
      return;
    }
  }
  Scalar s;
  if (!scalar_from_object(o, &s)) {
    // PyTorch: TypeError for text, RuntimeError for any other object it cannot type
    const std::string msg =
        std::string("tensor(): could not infer dtype of ") + Py_TYPE(o)->tp_name;
    if (PyUnicode_Check(o) || PyBytes_Check(o)) throw py::type_error(msg);
    throw UntypableObject(msg);
  }
  add(s.is_complex()    ? to_complex(default_dtype())
      : s.is_floating() ? default_dtype()
      : s.is_bool()     ? ScalarType::Bool
                        : ScalarType::Int64);
}

void fill_rec(py::handle obj, const DimVector& shape, int64_t d, char*& p, ScalarType dt) {
  PyObject* o = obj.ptr();
  if (d == shape.size()) {
    if (is_big_int(o)) {
      store_big_int(o, dt, p);
      p += itemsize(dt);
      return;
    }
    Scalar s;
    if (!scalar_from_object(o, &s))
      throw py::type_error(std::string("tensor(): expected a number, got ") + Py_TYPE(o)->tp_name);
    // 300 into int8 or inf into int64 must not wrap (PyTorch raises); floats saturate to inf.
    if (s.is_complex() && !is_complex(dt))  // as Python's float(1j)
      throw py::type_error(std::string("tensor(): must be real number, not complex (dtype ") +
                           dtype_name(dt) + ")");
    if (!is_floating(dt) && !is_complex(dt)) check_scalar_fits(s, dt, "tensor()");
    store_scalar(s, dt, p);
    p += itemsize(dt);
    return;
  }
  if (is_tensor_object(o)) {
    auto t = py::reinterpret_borrow<py::object>(o).cast<Tensor>();
    DimVector rest(shape.begin() + d, shape.end());
    if (t->sizes() != rest)
      throw py::value_error("tensor(): expected a tensor of shape " + shape_str(rest) + " at dim " +
                            std::to_string(d) + " (got " + shape_str(t->sizes()) + ")");
    Tensor dst = empty(rest, dt);
    copy_into(dst, host_readable(t));  // a tensor of another device: its values, on the host
    std::memcpy(p, dst->data(), dst->numel() * itemsize(dt));
    p += dst->numel() * itemsize(dt);
    return;
  }
  if (!PyList_Check(o) && !PyTuple_Check(o))  // PyTorch's TypeError "not a sequence"
    throw py::type_error("tensor(): expected a sequence at dim " + std::to_string(d) + ", got " +
                         Py_TYPE(o)->tp_name);
  Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  if (n != shape[d])
    throw py::value_error("tensor(): expected sequence of length " + std::to_string(shape[d]) +
                          " at dim " + std::to_string(d) + " (got " + std::to_string(n) + ")");
  for (Py_ssize_t i = 0; i < n; ++i) fill_rec(PySequence_Fast_GET_ITEM(o, i), shape, d + 1, p, dt);
}

}  // namespace

PyTypeObject* tensor_type() { return g_tensor_type; }

namespace {

// The AccumulateGrad node of leaf t that is alive and holds t (an extra reference to it).
std::shared_ptr<autograd::Node> live_accumulator(const Tensor& t) {
  AutogradMeta* m = t->autograd_meta();
  if (!m || m->grad_fn) return nullptr;
  std::shared_ptr<autograd::Node> node = m->grad_accumulator.lock();
  auto* acc = dynamic_cast<autograd::AccumulateGrad*>(node.get());
  return acc && acc->variable == t ? node : nullptr;
}

struct PoisonedAccumulator final : autograd::FunctionPreHook {
  std::vector<Tensor> operator()(const std::vector<Tensor>&) override {
    EMBER_FAIL(Runtime,
               "Trying to execute AccumulateGrad node that was poisoned by swap_tensors: the "
               "backward reached a tensor swapped after the forward ran. With "
               "ember.__future__.set_swap_module_params_on_conversion(True), change a module's "
               "device or dtype before its forward (or after the backward), not in between.");
  }
};

}  // namespace

Tensor tensor_from_buffer(py::handle obj, bool share);  // interop_py.cpp

Tensor tensor_from_data(py::handle data, std::optional<ScalarType> dtype) {
  if (is_tensor_object(data.ptr())) {
    Tensor src = data.cast<Tensor>();
    Tensor out = empty(src->sizes(), dtype.value_or(src->dtype()), src->device());
    copy_into(out, src);
    return out;
  }
  if (PyObject_CheckBuffer(data.ptr()) && !PyBytes_Check(data.ptr())) {
    Tensor src = tensor_from_buffer(data, /*share=*/true);
    ScalarType dt = src->dtype();
    // Only NumPy arrays and scalars keep their dtype. Other buffers (bytearray, array.array,
    // memoryview) are sequences of Python numbers to PyTorch: int64 or the default float dtype
    // (a bytearray was uint8, so that bytearray([200]) + 100 wrapped to 44).
    if (!PyObject_HasAttrString(data.ptr(), "__array_interface__"))
      dt = is_complex(dt)           ? to_complex(default_dtype())
           : is_floating(dt)        ? default_dtype()
           : dt == ScalarType::Bool ? ScalarType::Bool
                                    : ScalarType::Int64;
    Tensor out = empty(src->sizes(), dtype.value_or(dt), src->device());
    copy_into(out, src);
    return out;
  }
  DimVector shape;
  infer_shape(data, shape);
  if (static_cast<int64_t>(shape.size()) > kMaxNesting)
    throw py::value_error("tensor(): sequences nested more than " + std::to_string(kMaxNesting) +
                          " levels deep are not supported");
  int kind = kBool;
  std::optional<ScalarType> inferred;
  try {
    scan_dtype(data, inferred, kind);
  } catch (const UntypableObject& e) {
    if (dtype) throw py::type_error(e.what());
    throw;
  }
  ScalarType dt = dtype.value_or(inferred.value_or(ScalarType::Bool));
  if (!dtype && shape.size() > 0 && shape[shape.size() - 1] == 0 && kind == kBool)
    dt = default_dtype();
  Tensor out = empty(shape, dt);
  char* p = out->data();
  fill_rec(data, shape, 0, p, dt);
  return out;
}

void bind_tensor(py::module_& m, TensorClass& cls) {
  g_tensor_type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  // Tensor(data) is an alias of data without autograd history (shared storage and version
  // counter); Python subclasses such as nn.Parameter construct themselves through it.
  cls.def(py::init([](const Tensor& data) { return autograd::detach(data); }), py::arg("data"));
  cls.def(py::init([]() { return empty(DimVector{0}, ScalarType::Float32); }));
  // The C++ half of ember.utils.swap_tensors (which swaps the Python objects' classes and
  // dicts): refused while anything but the two Python objects holds either tensor (a graph
  // node that saved it, a view of it, ...), as PyTorch refuses.
  m.def("_swap_tensor_impl", [](const py::handle& a, const py::handle& b) {
    EMBER_CHECK_KIND(is_tensor_object(a.ptr()) && is_tensor_object(b.ptr()), Type,
                     "swap_tensors: expected two tensors, got ", Py_TYPE(a.ptr())->tp_name, " and ",
                     Py_TYPE(b.ptr())->tp_name);
    Tensor ta = a.cast<Tensor>(), tb = b.cast<Tensor>();
    if (ta == tb) return;
    // 2: the Python object's holder and ta / tb here; 3 for a leaf whose AccumulateGrad node
    // (alive while a graph uses it) holds it. As PyTorch, that swap goes through and poisons
    // the node: a backward reaching it would write into the swapped tensor.
    const std::shared_ptr<autograd::Node> acc_a = live_accumulator(ta),
                                          acc_b = live_accumulator(tb);
    const long na = ta.use_count() - (acc_a ? 1 : 0), nb = tb.use_count() - (acc_b ? 1 : 0);
    EMBER_CHECK(na <= 2, "Expected single reference to a's Tensor object but got ", na - 1);
    EMBER_CHECK(nb <= 2, "Expected single reference to b's Tensor object but got ", nb - 1);
    for (const auto& acc : {acc_a, acc_b})
      if (acc) autograd::register_node_prehook(acc, std::make_shared<PoisonedAccumulator>());
    ta->swap_contents(*tb);
    // The poisoned nodes stay with the graphs that hold them; a later graph gets a fresh one.
    for (const Tensor& t : {ta, tb})
      if (AutogradMeta* m = t->autograd_meta()) m->grad_accumulator.reset();
  });
  m.def("_set_size_type", [](py::object t) { g_size_type = t.release().ptr(); });
  m.def("_tf_fast_properties", &install_fast_properties, py::arg("getters"),
        "Makes the hot Tensor properties named in getters (name -> their __torch_function__ "
        "wrapper) one-call getset descriptors that check the protocol themselves.");
  m.def(
      "tensor",
      [](py::handle data, std::optional<ScalarType> dtype, std::optional<Device> device,
         bool requires_grad) {
        Tensor t = tensor_from_data(data, dtype);
        const Device d = device.value_or(default_device());
        if (!d.is_cpu()) t = dispatch::_to_copy(t, std::nullopt, d, false);
        if (requires_grad) autograd::set_requires_grad(t, true);
        return t;
      },
      py::arg("data"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      py::arg("requires_grad") = false);

  cls.def_property_readonly("shape", [](const Tensor& t) { return make_size(t->sizes()); })
      .def("size", [](const Tensor& t) { return make_size(t->sizes()); })
      .def(
          "size",
          [](const Tensor& t, std::optional<NamedIntArg<kSizeDim>> d) -> py::object {
            if (!d) return make_size(t->sizes());  // x.size(None), as torch
            return py::cast(t->size(wrap_dim(d->get(), t->dim(), "size")));
          },
          py::arg("dim"))
      .def("stride", [](const Tensor& t) { return py::cast(t->strides()); })
      .def(
          "stride",
          [](const Tensor& t, std::optional<NamedIntArg<kStrideDim>> d) -> py::object {
            if (!d) return py::cast(t->strides());
            return py::cast(t->stride(wrap_dim(d->get(), t->dim(), "stride")));
          },
          py::arg("dim"))
      .def_property_readonly("dtype", [](const Tensor& t) { return t->dtype(); })
      .def_property_readonly("device", [](const Tensor& t) { return t->device(); })
      .def_property_readonly("ndim", [](const Tensor& t) { return t->dim(); })
      .def("dim", [](const Tensor& t) { return t->dim(); })
      .def("ndimension", [](const Tensor& t) { return t->dim(); })
      .def("numel", [](const Tensor& t) { return t->numel(); })
      .def("nelement", [](const Tensor& t) { return t->numel(); })
      .def("element_size", [](const Tensor& t) { return t->itemsize(); })
      .def_property_readonly("itemsize", [](const Tensor& t) { return t->itemsize(); })
      .def_property_readonly("nbytes", [](const Tensor& t) { return t->numel() * t->itemsize(); })
      .def_property_readonly("is_cuda",
                             [](const Tensor& t) { return t->device().type == DeviceType::CUDA; })
      .def_property_readonly("is_meta", [](const Tensor& t) { return t->device().is_meta(); })
      .def_property_readonly("is_cpu", [](const Tensor& t) { return t->device().is_cpu(); })
      .def("is_floating_point", [](const Tensor& t) { return is_floating(t->dtype()); })
      .def("is_contiguous", [](const Tensor& t) { return t->is_contiguous(); })
      .def("is_inference", [](const Tensor& t) { return t->is_inference(); })
      .def("data_ptr",
           [](const Tensor& t) -> uintptr_t {
             return t->storage()->data.get() ? reinterpret_cast<uintptr_t>(t->data()) : 0;
           })
      .def("storage_offset", [](const Tensor& t) { return t->storage_offset(); })
      .def("untyped_storage_ptr",
           [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t->storage()->data.get()); })
      .def("_storage_nbytes", [](const Tensor& t) { return t->storage()->nbytes; })
      .def_property_readonly("_version", [](const Tensor& t) { return t->version(); })
      .def_property_readonly("_base",
                             [](const Tensor& t) -> py::object {
                               return t->base() ? py::cast(t->base()) : py::none();
                             })
      .def("_is_view", [](const Tensor& t) { return t->base() != nullptr; })
      .def("item", [](const Tensor& t) { return element_to_py(item(t), t->dtype()); })
      .def("tolist",
           [](const Tensor& t) {
             EMBER_CHECK_KIND(t->dim() <= kMaxNesting, Value, "tolist: a tensor with ", t->dim(),
                              " dims is too deep to convert to nested lists (at most ", kMaxNesting,
                              ")");
             Tensor h = host_readable(t);
             return tolist_rec(*h, h->data(), 0);
           })
      .def("__float__",
           [](const Tensor& t) {
             const Scalar s = item(t);
             if (s.is_complex()) throw py::type_error("can't convert complex to float");
             return s.to_double();
           })
      .def("__int__",
           [](const Tensor& t) {
             const Scalar s = item(t);
             if (s.is_complex()) throw py::type_error("can't convert complex to int");
             return int_to_py(s);
           })
      .def("__bool__",
           [](const Tensor& t) {
             EMBER_CHECK(t->numel() == 1, "Boolean value of Tensor with ",
                         t->numel() == 0 ? "no values" : "more than one value", " is ambiguous");
             return item(t).to_bool();
           })
      .def("__index__",
           [](const Tensor& t) {
             EMBER_CHECK_KIND(
                 t->numel() == 1 && is_integral(t->dtype(), true), Type,
                 "only integer tensors of a single element can be converted to an index");
             return int_to_py(item(t));
           })
      .def("__len__",
           [](const Tensor& t) {
             EMBER_CHECK_KIND(t->dim() > 0, Type, "len() of a 0-d tensor");
             return t->size(0);
           })
      .def("__hash__", [](py::handle self) { return reinterpret_cast<intptr_t>(self.ptr()); });

  // Python operators. Reflected forms with a number on the left make a 0-d tensor of it, which
  // promotes exactly like PyTorch's wrapped numbers for these ops.
  // A Python number as the left operand of a reflected op: a 0-d tensor (which promotes like the
  // number would). Floats stay float64 when the tensor is floating, so 0.1 / float64_tensor
  // does not go through float32; a 0-d tensor never widens a floating tensor's dtype.
  auto num = [](const Scalar& s, const Tensor& like) {
    ScalarType dt =
        (is_floating(s.dtype()) && is_floating(like->dtype())) ? ScalarType::Float64 : s.dtype();
    Tensor t = empty(DimVector{}, dt);
    store_scalar(s, dt, t->data());
    return t;
  };
  // Next to a 0-d tensor that 0-d number would tie and widen the result (1.0 / t a float64,
  // 2 // t an int64): torch's wrapped number keeps t's dtype when it is of t's own kind.
  auto like_dtype = [](Tensor r, const Tensor& like) {
    auto kind = [](ScalarType t) {
      return is_complex(t) ? 3 : is_floating(t) ? 2 : is_integral(t, false) ? 1 : 0;
    };
    if (like->dim() == 0 && r->dtype() != like->dtype() && kind(r->dtype()) == kind(like->dtype()))
      r = ops::_to_copy(r, like->dtype(), std::nullopt, false);
    return r;
  };
  auto none = Tensor();
  cls.def(
         "__add__",
         [](const Tensor& a, const TensorOrScalar& b) { return ops::add(a, b, 1, Tensor()); },
         py::is_operator())
      .def(
          "__radd__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::add(a, b, 1, Tensor()); },
          py::is_operator())
      .def(
          "__iadd__", [](const Tensor& a, const TensorOrScalar& b) { return ops::add(a, b, 1, a); },
          py::is_operator())
      .def(
          "__sub__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::sub(a, b, 1, Tensor()); },
          py::is_operator())
      .def(
          "__rsub__", [](const Tensor& a, const TensorOrScalar& b) { return ops::rsub(a, b, 1); },
          py::is_operator())
      .def(
          "__isub__", [](const Tensor& a, const TensorOrScalar& b) { return ops::sub(a, b, 1, a); },
          py::is_operator())
      .def(
          "__mul__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::mul(a, b, Tensor()); },
          py::is_operator())
      .def(
          "__rmul__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::mul(a, b, Tensor()); },
          py::is_operator())
      .def(
          "__imul__", [](const Tensor& a, const TensorOrScalar& b) { return ops::mul(a, b, a); },
          py::is_operator())
      .def(
          "__truediv__",
          [](const Tensor& a, const TensorOrScalar& b) {
            return ops::div(a, b, std::nullopt, Tensor());
          },
          py::is_operator())
      .def(
          "__rtruediv__",
          [num, like_dtype](const Tensor& a, const Scalar& b) {
            return like_dtype(ops::div(num(b, a), a, std::nullopt, Tensor()), a);
          },
          py::is_operator())
      .def(
          "__itruediv__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::div(a, b, std::nullopt, a); },
          py::is_operator())
      .def(
          "__floordiv__",
          [](const Tensor& a, const TensorOrScalar& b) {
            return ops::div(a, b, std::string("floor"), Tensor());
          },
          py::is_operator())
      .def(
          "__rfloordiv__",
          [num, like_dtype](const Tensor& a, const Scalar& b) {
            return like_dtype(ops::div(num(b, a), a, std::string("floor"), Tensor()), a);
          },
          py::is_operator())
      .def(
          "__ifloordiv__",
          [](const Tensor& a, const TensorOrScalar& b) {
            return ops::div(a, b, std::string("floor"), a);
          },
          py::is_operator())
      .def(
          "__mod__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::remainder(a, b, Tensor()); },
          py::is_operator())
      .def(
          "__rmod__",
          [num, like_dtype](const Tensor& a, const Scalar& b) {
            return like_dtype(ops::remainder(num(b, a), a, Tensor()), a);
          },
          py::is_operator())
      .def(
          "__imod__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::remainder(a, b, a); },
          py::is_operator())
      .def(
          "__pow__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::pow(a, b, Tensor()); },
          py::is_operator())
      .def(
          "__rpow__", [](const Tensor& a, const Scalar& b) { return ops::rpow(a, b); },
          py::is_operator())
      .def(
          "__ipow__", [](const Tensor& a, const TensorOrScalar& b) { return ops::pow(a, b, a); },
          py::is_operator())
      .def(
          "__and__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::bitwise_and(a, b, Tensor()); },
          py::is_operator())
      .def(
          "__rand__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::bitwise_and(a, b, Tensor()); },
          py::is_operator())
      .def(
          "__iand__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::bitwise_and(a, b, a); },
          py::is_operator())
      .def(
          "__or__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::bitwise_or(a, b, Tensor()); },
          py::is_operator())
      .def(
          "__ror__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::bitwise_or(a, b, Tensor()); },
          py::is_operator())
      .def(
          "__ior__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::bitwise_or(a, b, a); },
          py::is_operator())
      .def(
          "__xor__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::bitwise_xor(a, b, Tensor()); },
          py::is_operator())
      .def(
          "__rxor__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::bitwise_xor(a, b, Tensor()); },
          py::is_operator())
      .def(
          "__ixor__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::bitwise_xor(a, b, a); },
          py::is_operator())
      .def(
          "__lshift__",
          [](const Tensor& a, const TensorOrScalar& b) {
            return ops::bitwise_left_shift(a, b, Tensor());
          },
          py::is_operator())
      .def(
          "__rlshift__",
          [num, like_dtype](const Tensor& a, const Scalar& b) {
            return like_dtype(ops::bitwise_left_shift(num(b, a), a, Tensor()), a);
          },
          py::is_operator())
      .def(
          "__ilshift__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::bitwise_left_shift(a, b, a); },
          py::is_operator())
      .def(
          "__rshift__",
          [](const Tensor& a, const TensorOrScalar& b) {
            return ops::bitwise_right_shift(a, b, Tensor());
          },
          py::is_operator())
      .def(
          "__rrshift__",
          [num, like_dtype](const Tensor& a, const Scalar& b) {
            return like_dtype(ops::bitwise_right_shift(num(b, a), a, Tensor()), a);
          },
          py::is_operator())
      .def(
          "__irshift__",
          [](const Tensor& a, const TensorOrScalar& b) {
            return ops::bitwise_right_shift(a, b, a);
          },
          py::is_operator())
      .def(
          "__eq__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::eq(a, b, Tensor()); },
          py::is_operator())
      .def(
          "__ne__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::ne(a, b, Tensor()); },
          py::is_operator())
      .def(
          "__lt__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::lt(a, b, Tensor()); },
          py::is_operator())
      .def(
          "__le__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::le(a, b, Tensor()); },
          py::is_operator())
      .def(
          "__gt__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::gt(a, b, Tensor()); },
          py::is_operator())
      .def(
          "__ge__",
          [](const Tensor& a, const TensorOrScalar& b) { return ops::ge(a, b, Tensor()); },
          py::is_operator())
      .def(
          "__matmul__", [](const Tensor& a, const Tensor& b) { return ops::matmul(a, b); },
          py::is_operator())
      .def(
          "__rmatmul__", [](const Tensor& a, const Tensor& b) { return ops::matmul(b, a); },
          py::is_operator())
      .def("__neg__", [](const Tensor& a) { return ops::neg(a, Tensor()); })
      .def("__pos__", [](const Tensor& a) { return a; })
      .def("__abs__", [](const Tensor& a) { return ops::abs(a, Tensor()); })
      .def("__invert__", [](const Tensor& a) { return ops::bitwise_not(a, Tensor()); });
  (void)none;
}

}  // namespace ember
