// What the generated bindings need: pybind11 type casters for ember's C++ types (dtype, Scalar,
// TensorOrScalar, sizes) and small helpers for out=, in-place and tuple returns.
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/out_tensor.h"
#include "ops/op_types.h"

namespace py = pybind11;

namespace ember {

using TensorClass = py::class_<TensorImpl, std::shared_ptr<TensorImpl>>;

// The Python type object of ember.Tensor and the ember.dtype singletons (set by module init).
PyTypeObject* tensor_type();
PyObject* dtype_object(ScalarType t);
// Returns the ScalarType of an ember.dtype object (or Python's float/int/bool), or false.
bool dtype_from_object(PyObject* o, ScalarType* out);
inline bool is_tensor_object(PyObject* o) {
  return Py_TYPE(o) == tensor_type() || PyType_IsSubtype(Py_TYPE(o), tensor_type());
}
// Reads a Python bool/int/float (or anything with __index__/__float__, or a one-element
// tensor) as a Scalar; false if it is none of these.
bool scalar_from_object(PyObject* o, Scalar* out);
bool sizes_from_object(PyObject* o, DimVector* out);
// Where o holds a Python int past int64: 0 for o itself, i for the i-th item (from 1) of a
// tuple / list, -1 nowhere. The casters then raise PyTorch's errors (a ValueError "Overflow
// when unpacking long long" for an int, a TypeError for a sequence) instead of letting pybind11
// list every signature.
int64_t int64_overflow_position(PyObject* o);

DimVector sizes_from_args(const py::args& args, const char* op);
// The same, where the sizes may instead come as the keyword `name` (zeros(size=(2, 3)),
// x.permute(dims=(1, 0))); any other keyword left in `kwargs` is a TypeError naming op.
DimVector sizes_from_args(const py::args& args, const py::kwargs& kwargs, const char* name,
                          const char* op);
// "cpu", "cuda", "cuda:1" -> Device (ValueError otherwise).
Device parse_device(const std::string& spec, std::optional<int64_t> index = std::nullopt);
py::object make_return_tuple(const char* name, std::initializer_list<const char*> fields,
                             py::tuple values);
template <class... T>
py::object make_return_tuple(const char* name, std::initializer_list<const char*> fields,
                             std::tuple<T...> values) {
  return make_return_tuple(name, fields, py::cast(std::move(values)));
}
py::tuple tensor_tuple(const std::vector<Tensor>& ts);
std::vector<Tensor> unwrap_optional_tensors(const std::vector<std::optional<Tensor>>& ts);
// out= for ops computed into a fresh tensor: resize `out` if needed and copy (casting) `r` in.
// The dtype rule: torch.can_cast(r.dtype, out.dtype), or the same dtype (YAML `out: exact`).
void write_out(const Tensor& out, const Tensor& r, const char* op,
               OutDtype rule = OutDtype::CanCast);
// out= of an op returning several tensors (sort, topk, max(dim), ...): one out= tensor per
// result, each of the result's dtype and device (checked for all before any is written), then
// resized and written as write_out does.
void write_outs(const std::vector<Tensor>& out, std::initializer_list<Tensor> results,
                const char* op);
// In-place form of a non-native op: `r` must have self's shape and be castable to its dtype.
void write_inplace(const Tensor& self, const Tensor& r, const char* op);
// An in-place op's dtype= (cumsum_, cumprod_) must be self's: the result is written into self.
void check_inplace_dtype(const Tensor& self, std::optional<ScalarType> dtype, const char* op);

// Reads an `int` argument as PyTorch's parser does: a Python int (not a bool), a NumPy integer
// or a 0-dim integer (not bool) tensor; false for anything else (bool, float, str, None, other
// tensors). A Python int past int64 sets *overflow where given (the caller raises PyTorch's
// ValueError "Overflow when unpacking long long" once the other arguments have parsed, as torch
// does), or raises it.
bool int_arg_from_object(PyObject* o, int64_t* out, bool* overflow = nullptr);
// The name PyTorch's argument errors give o's type: "bool", "NoneType", "Tensor", "numpy.bool".
std::string arg_type_name(PyObject* o);
// PyTorch's "<label> must be <expected>, not <type of given>" TypeError; label is
// "op(): argument 'name'".
[[noreturn]] void raise_arg_type_error(const char* label, const char* expected, PyObject* given);
// The TypeError PyTorch gives a bad `int[]` argument: "... must be tuple of ints, not float" or
// "..., but found element of type float at pos 0" (sizes_from_object failed on `given`).
[[noreturn]] void raise_sizes_type_error(const char* label, PyObject* given);

// An `int` argument of a generated binding (the op gets .get()), read by int_arg_from_object:
// a bool, a float or a tensor fails the overload (pybind11's TypeError); an int past int64
// raises PyTorch's ValueError when the binding reads it, so that a wrong type of a later
// argument is the TypeError PyTorch reports first.
struct IntArg {
  int64_t value = 0;
  bool overflow = false;
  int64_t get() const {
    if (overflow) throw py::value_error("Overflow when unpacking long long");
    return value;
  }
};
// A `bool` argument: only True or False, as in PyTorch (pybind11's own bool conversion takes
// None, ints and anything with __bool__).
struct BoolArg {
  bool value = false;
  bool get() const { return value; }
};
// An `int[]` argument read by sizes_from_object.
struct SizesArg {
  DimVector value;
  const DimVector& get() const { return value; }
};
// The same, for a binding that is its name's only overload: a wrong type raises PyTorch's
// TypeError naming the op, the argument (Label: "op(): argument 'name'"), the expected and the
// given type, where pybind11 would list the signature. (With several overloads a later one may
// still match, so they keep the plain kinds.)
template <const char* Label>
struct NamedIntArg : IntArg {};
template <const char* Label>
struct NamedBoolArg : BoolArg {};
template <const char* Label>
struct NamedSizesArg : SizesArg {};
// .get() of an optional argument of these kinds.
template <class A>
auto opt_value(const std::optional<A>& a) -> std::optional<std::decay_t<decltype(a->get())>> {
  if (!a) return std::nullopt;
  return a->get();
}

// The value of a one-element tensor on the host: read in place on the CPU, copied from any
// other device (a sync point); meta tensors raise PyTorch's "Tensor.item() cannot be called on
// meta tensors".
Scalar scalar_value(const Tensor& t);
// t's data readable on the host (t itself on the CPU, else a CPU copy); meta tensors raise
// NotImplementedError "Cannot copy out of meta tensor; no data!".
Tensor host_readable(const Tensor& t);

// Any Python object, but only in pybind11's converting pass: the first parameter of the late
// overloads appended to a bound function (the sparse fallback, the TypeErrors of
// python/arg_errors_py.cpp), which so run only after every real overload failed to convert.
struct LateOperand {
  py::object value;
};

// One generated binding (bind_all.cpp, from the YAML): its Python name, whether it is a Tensor
// method, and its parameters as `kind|type|name|=default` joined by ';' (kind: p positional,
// k keyword-only, v the *size of factories and views).
struct BindingSpec {
  const char* name;
  bool method;
  const char* params;
};
extern const BindingSpec kBindingSpecs[];
extern const size_t kNumBindingSpecs;

}  // namespace ember

namespace pybind11 {
namespace detail {

template <>
struct type_caster<ember::LateOperand> {
  PYBIND11_TYPE_CASTER(ember::LateOperand, const_name("object"));
  bool load(handle src, bool convert) {
    if (!convert) return false;
    value.value = reinterpret_borrow<object>(src);
    return true;
  }
};

template <>
struct type_caster<ember::ScalarType> {
  PYBIND11_TYPE_CASTER(ember::ScalarType, const_name("dtype"));
  bool load(handle src, bool) { return ember::dtype_from_object(src.ptr(), &value); }
  static handle cast(ember::ScalarType t, return_value_policy, handle) {
    PyObject* o = ember::dtype_object(t);
    Py_INCREF(o);
    return o;
  }
};

template <>
struct type_caster<ember::Scalar> {
  PYBIND11_TYPE_CASTER(ember::Scalar, const_name("Number"));
  bool load(handle src, bool) { return ember::scalar_from_object(src.ptr(), &value); }
  static handle cast(const ember::Scalar& s, return_value_policy, handle) {
    if (s.is_bool()) return PyBool_FromLong(s.to_bool());
    if (s.is_integral() && s.is_unsigned())
      return PyLong_FromUnsignedLongLong(static_cast<uint64_t>(s.to_int()));
    if (s.is_integral()) return PyLong_FromLongLong(s.to_int());
    if (s.is_complex()) return PyComplex_FromDoubles(s.to_complex().real(), s.to_complex().imag());
    return PyFloat_FromDouble(s.to_double());
  }
};

// A Tensor argument never accepts None: pybind11's holder caster would hand the op a null
// shared_ptr (it lets None through in its convert pass), which the op then dereferences.
// Optional arguments are std::optional<Tensor>, whose caster handles None before this one runs.
template <>
class type_caster<ember::Tensor> : public copyable_holder_caster<ember::TensorImpl, ember::Tensor> {
 public:
  bool load(handle src, bool convert) {
    if (src.is_none()) return false;
    return copyable_holder_caster<ember::TensorImpl, ember::Tensor>::load(src, convert);
  }
};

template <>
struct type_caster<ember::IntArg> {
  PYBIND11_TYPE_CASTER(ember::IntArg, const_name("int"));
  bool load(handle src, bool) {
    return ember::int_arg_from_object(src.ptr(), &value.value, &value.overflow);
  }
  static handle cast(const ember::IntArg& v, return_value_policy, handle) {
    return PyLong_FromLongLong(v.value);
  }
};

template <const char* Label>
struct type_caster<ember::NamedIntArg<Label>> {
  PYBIND11_TYPE_CASTER(ember::NamedIntArg<Label>, const_name("int"));
  bool load(handle src, bool convert) {
    if (ember::int_arg_from_object(src.ptr(), &value.value, &value.overflow)) return true;
    if (convert) ember::raise_arg_type_error(Label, "int", src.ptr());
    return false;
  }
  static handle cast(const ember::NamedIntArg<Label>& v, return_value_policy, handle) {
    return PyLong_FromLongLong(v.value);
  }
};

template <>
struct type_caster<ember::BoolArg> {
  PYBIND11_TYPE_CASTER(ember::BoolArg, const_name("bool"));
  bool load(handle src, bool) {
    if (!PyBool_Check(src.ptr())) return false;
    value.value = src.ptr() == Py_True;
    return true;
  }
  static handle cast(const ember::BoolArg& v, return_value_policy, handle) {
    return PyBool_FromLong(v.value);
  }
};

template <const char* Label>
struct type_caster<ember::NamedBoolArg<Label>> {
  PYBIND11_TYPE_CASTER(ember::NamedBoolArg<Label>, const_name("bool"));
  bool load(handle src, bool convert) {
    if (PyBool_Check(src.ptr())) {
      value.value = src.ptr() == Py_True;
      return true;
    }
    if (convert) ember::raise_arg_type_error(Label, "bool", src.ptr());
    return false;
  }
  static handle cast(const ember::NamedBoolArg<Label>& v, return_value_policy, handle) {
    return PyBool_FromLong(v.value);
  }
};

template <>
struct type_caster<ember::TensorOrScalar> {
  PYBIND11_TYPE_CASTER(ember::TensorOrScalar, const_name("Tensor | Number"));
  bool load(handle src, bool convert) {
    if (ember::is_tensor_object(src.ptr())) {
      copyable_holder_caster<ember::TensorImpl, ember::Tensor> c;
      if (!c.load(src, convert)) return false;
      value.tensor = static_cast<ember::Tensor>(c);
      value.present = true;
      return true;
    }
    value.tensor.reset();
    value.present = ember::scalar_from_object(src.ptr(), &value.scalar);
    return value.present;
  }
  static handle cast(const ember::TensorOrScalar& v, return_value_policy p, handle parent) {
    if (v.is_tensor()) return make_caster<ember::Tensor>::cast(v.tensor, p, parent);
    return make_caster<ember::Scalar>::cast(v.scalar, p, parent);
  }
};

template <>
struct type_caster<ember::DimVector> {
  PYBIND11_TYPE_CASTER(ember::DimVector, const_name("Sequence[int]"));
  bool load(handle src, bool) {
    if (ember::sizes_from_object(src.ptr(), &value)) return true;
    const int64_t pos = ember::int64_overflow_position(src.ptr());
    if (pos == 0) throw value_error("Overflow when unpacking long long");
    if (pos > 0)
      throw type_error("an int sequence failed to unpack the object at pos " + std::to_string(pos) +
                       " with error \"Overflow when unpacking long long\"");
    return false;
  }
  static handle cast(const ember::DimVector& v, return_value_policy, handle) {
    PyObject* t = PyTuple_New(v.size());
    for (int64_t i = 0; i < v.size(); ++i) PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(v[i]));
    return t;
  }
};

template <>
struct type_caster<ember::SizesArg> {
  PYBIND11_TYPE_CASTER(ember::SizesArg, const_name("Sequence[int]"));
  bool load(handle src, bool convert) {
    make_caster<ember::DimVector> c;
    if (!c.load(src, convert)) return false;
    value.value = std::move(cast_op<ember::DimVector&>(c));
    return true;
  }
  static handle cast(const ember::SizesArg& v, return_value_policy p, handle parent) {
    return make_caster<ember::DimVector>::cast(v.value, p, parent);
  }
};

template <const char* Label>
struct type_caster<ember::NamedSizesArg<Label>> {
  PYBIND11_TYPE_CASTER(ember::NamedSizesArg<Label>, const_name("Sequence[int]"));
  bool load(handle src, bool convert) {
    make_caster<ember::DimVector> c;
    if (c.load(src, convert)) {
      value.value = std::move(cast_op<ember::DimVector&>(c));
      return true;
    }
    if (convert) ember::raise_sizes_type_error(Label, src.ptr());
    return false;
  }
  static handle cast(const ember::NamedSizesArg<Label>& v, return_value_policy p, handle parent) {
    return make_caster<ember::DimVector>::cast(v.value, p, parent);
  }
};

// Device arguments accept an ember.device or a string ("cpu", "cuda:0").
template <>
struct type_caster<std::optional<ember::Device>> {
  PYBIND11_TYPE_CASTER(std::optional<ember::Device>, const_name("device | str | None"));
  bool load(handle src, bool convert) {
    if (src.is_none()) {
      value = std::nullopt;
      return true;
    }
    if (PyUnicode_Check(src.ptr())) {
      value = ember::parse_device(src.cast<std::string>());
      return true;
    }
    make_caster<ember::Device> c;
    if (!c.load(src, convert)) return false;
    value = cast_op<ember::Device>(c);
    return true;
  }
  static handle cast(const std::optional<ember::Device>& v, return_value_policy p, handle parent) {
    if (!v) return none().release();
    return make_caster<ember::Device>::cast(*v, p, parent);
  }
};

}  // namespace detail
}  // namespace pybind11
