#include "python/bind_support.h"

#include "autograd/autograd.h"
#include "core/out_tensor.h"
#include "core/storageless.h"
#include "kernels/iterator.h"
#include "ops.h"

namespace ember {

namespace {
// A Python int: int64, or uint64 from 2**63 to 2**64 - 1 (PyTorch's range); beyond, PyTorch's
// OverflowError.
bool scalar_from_int(PyObject* o, Scalar* out) {
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (!overflow) {
    *out = Scalar(static_cast<int64_t>(v));
    return true;
  }
  if (overflow > 0) {
    const unsigned long long u = PyLong_AsUnsignedLongLong(o);
    if (!PyErr_Occurred()) {
      *out = Scalar::from_uint64(u);
      return true;
    }
  }
  PyErr_Clear();
  const std::string text = py::str(o).cast<std::string>();
  PyErr_SetString(PyExc_OverflowError,
                  ("value " + text +
                   " does not fit in 64 bits: ember takes Python ints from -2**63 to 2**64 - 1 "
                   "(from 2**63 up, for uint64 and the floating types)")
                      .c_str());
  throw py::error_already_set();
}
}  // namespace

bool scalar_from_object(PyObject* o, Scalar* out) {
  if (PyBool_Check(o)) {
    *out = Scalar(o == Py_True);
    return true;
  }
  if (PyLong_Check(o)) return scalar_from_int(o, out);
  if (PyFloat_Check(o)) {
    *out = Scalar(PyFloat_AS_DOUBLE(o));
    return true;
  }
  // Python's complex and NumPy's complex scalars (numpy.complex64 is no subclass of complex).
  if (PyComplex_Check(o) || std::string(Py_TYPE(o)->tp_name).rfind("numpy.complex", 0) == 0) {
    Py_complex c = PyComplex_AsCComplex(o);
    if (c.real == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    *out = Scalar(std::complex<double>(c.real, c.imag));
    return true;
  }
  if (is_tensor_object(o)) {
    auto t = py::reinterpret_borrow<py::object>(o).cast<Tensor>();
    if (t->numel() != 1) return false;
    *out = scalar_value(t);
    return true;
  }
  if (Py_TYPE(o)->tp_as_number == nullptr || PySequence_Check(o)) return false;
  // NumPy scalars and other number-likes.
  if (Py_TYPE(o)->tp_as_number->nb_index) {
    // numpy.bool_ has __index__ too, but reports itself as bool through its type name.
    if (std::string(Py_TYPE(o)->tp_name) == "numpy.bool") {
      *out = Scalar(PyObject_IsTrue(o) == 1);
      return true;
    }
    py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(o));
    if (!index) {
      PyErr_Clear();
      return false;
    }
    return scalar_from_int(index.ptr(), out);
  }
  if (Py_TYPE(o)->tp_as_number->nb_float) {
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    *out = Scalar(v);
    return true;
  }
  return false;
}

static bool index_from_object(PyObject* o, int64_t* out) {
  if (PyLong_Check(o) && !PyBool_Check(o)) {
    *out = PyLong_AsLongLong(o);
    if (*out == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    return true;
  }
  if (PyBool_Check(o) || PyFloat_Check(o)) return false;
  if (is_tensor_object(o)) {
    auto t = py::reinterpret_borrow<py::object>(o).cast<Tensor>();
    if (t->numel() != 1 || !is_integral(t->dtype(), false)) return false;
    *out = scalar_value(t).to_int();
    return true;
  }
  if (PyIndex_Check(o)) {
    *out = PyNumber_AsSsize_t(o, nullptr);
    if (*out == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    return true;
  }
  return false;
}

// Where a bool may stand for an int in a size sequence: PyTorch checks only the first element's
// type, and later ones unpack as ints (x.view(6, True) fails, x.view((6, True)) is (6, 1)).
static bool size_item_from_object(PyObject* o, Py_ssize_t pos, int64_t* out) {
  if (pos > 0 && PyBool_Check(o)) {
    *out = o == Py_True;
    return true;
  }
  return index_from_object(o, out);
}

bool sizes_from_object(PyObject* o, DimVector* out) {
  int64_t v;
  if (index_from_object(o, &v)) {
    *out = DimVector{v};
    return true;
  }
  if (!PyTuple_Check(o) && !PyList_Check(o)) return false;
  PyObject* seq = o;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  out->clear();
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!size_item_from_object(PySequence_Fast_GET_ITEM(seq, i), i, &v)) return false;
    out->push_back(v);
  }
  return true;
}

bool int_arg_from_object(PyObject* o, int64_t* out, bool* overflow) {
  if (PyBool_Check(o)) return false;
  if (PyLong_Check(o)) {
    int past = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &past);
    if (past && !overflow) throw py::value_error("Overflow when unpacking long long");
    if (past) {
      *overflow = true;
      return true;
    }
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    *out = v;
    return true;
  }
  if (is_tensor_object(o)) {
    // a 0-dim integer tensor reads as its value (x.unsqueeze(torch.tensor(1))); others do not
    auto t = py::reinterpret_borrow<py::object>(o).cast<Tensor>();
    if (t->dim() != 0 || !is_integral(t->dtype(), false)) return false;
    *out = scalar_value(t).to_int();
    return true;
  }
  // NumPy's integer scalars (numpy.bool has __index__ too, but is no int to PyTorch)
  const std::string type = Py_TYPE(o)->tp_name;
  if (type.rfind("numpy.", 0) != 0 || type == "numpy.bool" || type == "numpy.bool_" ||
      !PyIndex_Check(o))
    return false;
  py::object i = py::reinterpret_steal<py::object>(PyNumber_Index(o));
  if (!i) {
    PyErr_Clear();
    return false;
  }
  return int_arg_from_object(i.ptr(), out, overflow);
}

std::string arg_type_name(PyObject* o) {
  if (is_tensor_object(o)) return "Tensor";
  return Py_TYPE(o)->tp_name;
}

void raise_arg_type_error(const char* label, const char* expected, PyObject* given) {
  throw py::type_error(std::string(label) + " must be " + expected + ", not " +
                       arg_type_name(given));
}

void raise_sizes_type_error(const char* label, PyObject* given) {
  if (PyTuple_Check(given) || PyList_Check(given)) {
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(given); ++i) {
      PyObject* item = PySequence_Fast_GET_ITEM(given, i);
      int64_t v;
      if (size_item_from_object(item, i, &v)) continue;
      if (i == 0)
        throw py::type_error(std::string(label) +
                             " must be tuple of ints, but found element of type " +
                             arg_type_name(item) + " at pos 0");
      throw py::type_error(
          std::string(label) + " failed to unpack the object at pos " + std::to_string(i + 1) +
          " with error \"type must be tuple of ints,but got " + arg_type_name(item) + "\"");
    }
  }
  raise_arg_type_error(label, "tuple of ints", given);
}

static bool int_overflows(PyObject* o) {
  if (!PyLong_Check(o) || PyBool_Check(o)) return false;
  int overflow = 0;
  PyLong_AsLongLongAndOverflow(o, &overflow);
  if (PyErr_Occurred()) PyErr_Clear();
  return overflow != 0;
}

int64_t int64_overflow_position(PyObject* o) {
  if (!PyTuple_Check(o) && !PyList_Check(o)) return int_overflows(o) ? 0 : -1;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i)
    if (int_overflows(PySequence_Fast_GET_ITEM(o, i))) return i + 1;
  return -1;
}

DimVector sizes_from_args(const py::args& args, const char* op) {
  DimVector out;
  // a lone bool is "not bool", as a lone float or list is judged whole
  if (args.size() == 1 && (!PyLong_Check(args[0].ptr()) || PyBool_Check(args[0].ptr()))) {
    if (!sizes_from_object(args[0].ptr(), &out))
      raise_sizes_type_error((std::string(op) + "(): argument 'size'").c_str(), args[0].ptr());
    return out;
  }
  for (auto a : args) {
    int64_t v;
    if (!index_from_object(a.ptr(), &v)) {
      // an int that does not fit int64 is not "not an int": say what is wrong with it
      if (PyLong_Check(a.ptr()) && !PyBool_Check(a.ptr()))
        throw py::type_error(std::string(op) + "(): size " + std::string(py::str(a)) +
                             " at position " + std::to_string(out.size()) +
                             " does not fit in int64");
      throw py::type_error(std::string(op) +
                           "(): argument 'size' must be tuple of ints, but found "
                           "element of type " +
                           arg_type_name(a.ptr()) + " at pos " + std::to_string(out.size()));
    }
    out.push_back(v);
  }
  return out;
}

DimVector sizes_from_args(const py::args& args, const py::kwargs& kwargs, const char* name,
                          const char* op) {
  for (auto item : kwargs) {
    std::string key = py::str(item.first);
    if (key != name)
      throw py::type_error(std::string(op) + "() got an unexpected keyword argument '" + key + "'");
  }
  if (!kwargs.contains(name)) {
    if (args.size() == 0)  // f() is not f(()): as torch, the sizes are required
      throw py::type_error(std::string(op) + "() missing 1 required positional arguments: \"" +
                           name + "\"");
    return sizes_from_args(args, op);
  }
  if (args.size() != 0)
    throw py::type_error(std::string(op) + "() got multiple values for argument '" + name +
                         "' (positional sizes and " + name + "=)");
  py::object value = kwargs[name];
  DimVector out;
  if (!sizes_from_object(value.ptr(), &out)) {
    if (int64_overflow_position(value.ptr()) >= 0)
      throw py::type_error(std::string(op) + "(): argument '" + name +
                           "' holds an int that does not fit in int64");
    raise_sizes_type_error((std::string(op) + "(): argument '" + name + "'").c_str(), value.ptr());
  }
  return out;
}

py::object make_return_tuple(const char* name, std::initializer_list<const char*> fields,
                             py::tuple values) {
  static py::dict* cache = new py::dict();  // leaked: lives until interpreter exit
  py::str key(name);
  if (!cache->contains(key)) {
    py::list names;
    for (const char* f : fields) names.append(f);
    // ember.return_types makes the type: PyTorch's printing, importable by name for pickle
    (*cache)[key] = py::module_::import("ember.return_types").attr("_make")(name, names);
  }
  return (*cache)[key](*values);
}

Device parse_device(const std::string& s, std::optional<int64_t> index) {
  Device d;
  std::string type = s;
  auto colon = s.find(':');
  if (colon != std::string::npos) {
    type = s.substr(0, colon);
    // PyTorch's grammar: the index is plain digits without a leading zero ("cuda:-1", "cpu:+1",
    // "cuda:01" and "cuda:1abc" are refused; std::stoi took them, -1 meaning no index at all)
    const std::string digits = s.substr(colon + 1);
    bool ok = !digits.empty() && digits.size() <= 3 && (digits.size() == 1 || digits[0] != '0');
    for (char c : digits) ok = ok && c >= '0' && c <= '9';
    EMBER_CHECK(ok, "Invalid device string: '", s, "'");
    const int v = std::stoi(digits);
    EMBER_CHECK(v <= 127, "Device index ", v, " in device string '", s,
                "' is out of range (at most 127)");
    d.index = static_cast<int8_t>(v);
  }
  const std::string pu1 = device_type_name(DeviceType::PrivateUse1);
  if (type == "cpu") {
    d.type = DeviceType::CPU;
  } else if (type == "cuda") {
    d.type = DeviceType::CUDA;
  } else if (type == "meta") {
    d.type = DeviceType::Meta;
  } else if (type == pu1) {
    d.type = DeviceType::PrivateUse1;
  } else {
    EMBER_FAIL(Runtime, "Expected one of cpu, cuda, meta, ", pu1,
               " device type at start of device string: ", s);
  }
  if (index) {
    // an int8 index: 300 would wrap to 44, 128 to "no index"
    EMBER_CHECK(*index >= 0, "Device index must not be negative");
    EMBER_CHECK(*index <= 127, "Device index ", *index, " is out of range (at most 127)");
    d.index = static_cast<int8_t>(*index);
  }
  return d;
}

namespace {
// Pauses Python's cycle collector while it would only trace new, acyclic wrappers: wrapping a
// million views (tensor_split(x, 2**20)) otherwise spent three quarters of its time in
// collections.
class GcPause {
 public:
  GcPause() : was_enabled_(PyGC_Disable() != 0) {}
  ~GcPause() {
    if (was_enabled_) PyGC_Enable();
  }
  GcPause(const GcPause&) = delete;
  GcPause& operator=(const GcPause&) = delete;

 private:
  bool was_enabled_;
};
}  // namespace

py::tuple tensor_tuple(const std::vector<Tensor>& ts) {
  py::tuple t(ts.size());
  std::optional<GcPause> pause;
  if (ts.size() >= 4096) pause.emplace();
  for (size_t i = 0; i < ts.size(); ++i) t[i] = py::cast(ts[i]);
  return t;
}

std::vector<Tensor> unwrap_optional_tensors(const std::vector<std::optional<Tensor>>& ts) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(t ? *t : Tensor());
  return out;
}

namespace {
// As torch: out= takes no part in autograd, so neither the out= tensor nor the result may need
// a gradient (the copy into out= would drop the result's history, or keep out='s stale one).
void check_out_needs_no_grad(const Tensor& out, const Tensor& r, const char* op) {
  if (autograd::grad_enabled() && (autograd::requires_grad(out) || autograd::requires_grad(r)))
    autograd::check_out_no_grad(op);
}
}  // namespace

void write_out(const Tensor& out, const Tensor& r, const char* op, OutDtype rule) {
  check_out_needs_no_grad(out, r, op);
  prepare_out(out, r->sizes(), r->dtype(), r->device(), op, rule);
  check_no_internal_overlap(out, op);
  dispatch::_copy_from(r, out, false);
}

void write_outs(const std::vector<Tensor>& out, std::initializer_list<Tensor> results,
                const char* op) {
  EMBER_CHECK_KIND(out.size() == results.size(), Type, op, "(): out= must be a tuple of ",
                   results.size(), " tensors, got ", out.size());
  size_t i = 0;
  for (const Tensor& r : results) {
    EMBER_CHECK_KIND(out[i], Type, op, "(): out= must be a tuple of tensors, got None at ", i);
    check_out_needs_no_grad(out[i], r, op);
    check_out(out[i], r->dtype(), r->device(), op, OutDtype::Exact);
    for (size_t j = 0; j < i; ++j)
      EMBER_CHECK(out[j]->storage() != out[i]->storage() || out[i]->numel() == 0, op,
                  "(): the out= tensors must not share memory");
    ++i;
  }
  i = 0;
  for (const Tensor& r : results) {
    resize_out(out[i], r->sizes(), op);
    check_no_internal_overlap(out[i], op);
    dispatch::_copy_from(r, out[i], false);
    ++i;
  }
}

void write_inplace(const Tensor& self, const Tensor& r, const char* op) {
  // ops::copy_ (not the raw kernel) so that autograd records the write when it needs to.
  EMBER_CHECK(self->sizes() == r->sizes(), op, ": output with shape ", shape_str(self->sizes()),
              " doesn't match the broadcast shape ", shape_str(r->sizes()));
  EMBER_CHECK(can_cast(r->dtype(), self->dtype()), op, ": result type ", dtype_name(r->dtype()),
              " can't be cast to the desired output type ", dtype_name(self->dtype()));
  check_no_internal_overlap(self, op);
  ops::copy_(self, r, false);
}

void check_inplace_dtype(const Tensor& self, std::optional<ScalarType> dtype, const char* op) {
  EMBER_CHECK(!dtype || *dtype == self->dtype(), op, ": dtype=", dtype ? dtype_name(*dtype) : "",
              " differs from the dtype of self (", dtype_name(self->dtype()),
              "), which an in-place op writes its result into");
}

Scalar scalar_value(const Tensor& t) {
  if (is_storageless(*t)) fail_storageless("Tensor.item()");
  if (t->device().is_cpu()) return load_scalar(t->data(), t->dtype());
  EMBER_CHECK(!t->device().is_meta(), "Tensor.item() cannot be called on meta tensors");
  Tensor h = dispatch::_to_copy(t, std::nullopt, cpu_device(), false);
  return load_scalar(h->data(), h->dtype());
}

Tensor host_readable(const Tensor& t) {
  if (is_storageless(*t)) fail_storageless("reading a tensor's values");
  if (t->device().is_cpu()) return t;
  if (t->device().is_meta()) EMBER_FAIL(NotImplemented, "Cannot copy out of meta tensor; no data!");
  return dispatch::_to_copy(t, std::nullopt, cpu_device(), false);
}

}  // namespace ember
