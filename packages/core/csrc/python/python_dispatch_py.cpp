// __torch_dispatch__: the handler behind the hook at the top of dispatch::<op>
// (ops/python_dispatch.h). It runs only while the hook is on (a TorchDispatchMode entered on some
// thread, or a subclass with __torch_dispatch__ defined) and sends the call to Python
// (ember.utils._python_dispatch._dispatch) when a mode is entered on this thread or a tensor
// argument's Python object is an instance of such a subclass; otherwise the kernel runs.
#include "python/python_dispatch_py.h"

#include <memory>
#include <unordered_map>

#include "core/storageless.h"
#include "ops/python_dispatch.h"

namespace ember {
namespace {

PyObject* g_py_dispatch = nullptr;  // ember.utils._python_dispatch._dispatch
PyObject* g_disabled = nullptr;     // _C._disabled_torch_dispatch_impl
PyObject* g_name = nullptr;         // interned "__torch_dispatch__"
thread_local int t_modes = 0;       // TorchDispatchModes entered on this thread (not popped)
bool g_subclasses_on = false;

// Whether instances of tp send their ops to tp.__torch_dispatch__.
bool dispatches(PyTypeObject* tp) {
  if (tp == tensor_type()) return false;
  PyObject* attr = _PyType_Lookup(tp, g_name);  // borrowed
  if (attr == nullptr) return false;
  if (attr == g_disabled) return false;
  if (Py_TYPE(attr) == &PyClassMethod_Type || Py_TYPE(attr) == &PyStaticMethod_Type) {
    PyObject* fn = PyObject_GetAttrString(attr, "__func__");
    bool off = fn == g_disabled;
    Py_XDECREF(fn);
    if (fn == nullptr) PyErr_Clear();
    return !off;
  }
  return true;
}

// A subclass instance whose Python object died while C++ still held its tensor (an input
// saved for backward, say): its class and attributes, so the object comes back when the
// tensor reaches Python again (PyTorch keeps such objects alive instead). The weak reference
// tells a live tensor from a freed one whose address was reused.
struct Stashed {
  std::weak_ptr<TensorImpl> tensor;
  py::object cls;
  py::object dict;
};
// Never freed: its Python objects must not be released after the interpreter is gone.
auto& g_stash = *new std::unordered_map<const TensorImpl*, Stashed>();

void stash(py::handle self) {
  Tensor t = self.cast<Tensor>();
  // the Python object's holder, t, and someone else's reference
  if (t.use_count() <= 2) return;
  if (g_stash.size() >= 1024) {  // forget entries whose tensor is gone
    for (auto it = g_stash.begin(); it != g_stash.end();)
      it = it->second.tensor.expired() ? g_stash.erase(it) : std::next(it);
  }
  py::object dict = py::reinterpret_steal<py::object>(PyObject_GenericGetDict(self.ptr(), nullptr));
  if (!dict) throw py::error_already_set();
  g_stash[t.get()] = Stashed{
      t, py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(Py_TYPE(self.ptr()))),
      py::dict(dict)};
}

// The Python object of t: the live one, or a stashed subclass instance brought back (kept in
// keep for the call).
py::handle find_object(const Tensor& t, const py::detail::type_info* tinfo, py::list& keep) {
  py::handle h = py::detail::get_object_handle(t.get(), tinfo);
  if (h || g_stash.empty()) return h;
  auto it = g_stash.find(t.get());
  if (it == g_stash.end()) return h;
  Stashed st = std::move(it->second);
  g_stash.erase(it);
  if (st.tensor.lock().get() != t.get()) return h;
  PyTypeObject* cls = reinterpret_cast<PyTypeObject*>(st.cls.ptr());
  py::tuple no_args;
  // pybind11's allocation (Tensor's base): Tensor.__new__ is PyTorch's legacy constructor,
  // written in Python (ember/_legacy.py), which a subclass's own __new__ may override.
  py::object obj = py::reinterpret_steal<py::object>(
      tensor_type()->tp_base->tp_new(cls, no_args.ptr(), nullptr));
  if (!obj) throw py::error_already_set();
  auto* inst = reinterpret_cast<py::detail::instance*>(obj.ptr());
  inst->owned = false;
  py::detail::values_and_holders(inst).begin()->value_ptr() = t.get();
  inst->owned = true;
  tinfo->init_instance(inst, &t);
  if (PyObject_GenericSetDict(obj.ptr(), st.dict.ptr(), nullptr) != 0)
    throw py::error_already_set();
  keep.append(obj);
  return obj;
}

void add_type(py::list& types, const Tensor& t, const py::detail::type_info* tinfo,
              py::list& keep) {
  if (!t) return;
  py::handle h = find_object(t, tinfo, keep);
  if (!h) return;
  PyTypeObject* tp = Py_TYPE(h.ptr());
  if (!dispatches(tp)) return;
  py::handle type(reinterpret_cast<PyObject*>(tp));
  for (py::handle seen : types)
    if (seen.ptr() == type.ptr()) return;
  // subclasses before their bases, as PyTorch orders the overloaded types
  size_t at = 0;
  for (py::handle seen : types) {
    if (PyType_IsSubtype(tp, reinterpret_cast<PyTypeObject*>(seen.ptr()))) break;
    ++at;
  }
  types.insert(at, type);
}

py::list box_self(const void* const* a) {
  py::list l;
  l.append(pd_box<Tensor>(a[0]));
  return l;
}
const PyDispatchOp kDetachOp = {"detach",  "default",         "[('self', False, None, 'Tensor')]",
                                &box_self, &pd_unbox<Tensor>, true};

const PyDispatchOp kLocalScalarDenseOp = {
    "_local_scalar_dense", "default", "[('self', False, None, 'Tensor')]", &box_self,
    &pd_unbox<Scalar>,     true};

const PyDispatchOp& op_info(int op) {
  if (op == python_dispatch::kDetach) return kDetachOp;
  if (op == python_dispatch::kLocalScalarDense) return kLocalScalarDenseOp;
  return kPyDispatchOps[op];
}

bool handler(int op, const void* const* args, void* ret,
             std::initializer_list<const Tensor*> tensors,
             std::initializer_list<const std::vector<Tensor>*> lists) {
  if (g_py_dispatch == nullptr || !Py_IsInitialized() || _Py_IsFinalizing()) return false;
  py::gil_scoped_acquire gil;
  py::list types, keep;
  if (g_subclasses_on) {
    const py::detail::type_info* tinfo = py::detail::get_type_info(typeid(TensorImpl));
    for (const Tensor* t : tensors)
      if (t != nullptr) add_type(types, *t, tinfo, keep);
    for (const std::vector<Tensor>* l : lists)
      for (const Tensor& t : *l) add_type(types, t, tinfo, keep);
  }
  const PyDispatchOp& info = op_info(op);
  if (types.empty() && (t_modes == 0 || !info.modes)) return false;
  py::object r =
      py::reinterpret_borrow<py::object>(g_py_dispatch)(op, info.box(args), py::tuple(types));
  if (info.unbox == nullptr) return true;
  try {
    info.unbox(r, ret);
  } catch (py::cast_error&) {
    throw py::type_error(std::string("__torch_dispatch__ for aten.") + info.name + "." +
                         info.overload + " returned " + Py_TYPE(r.ptr())->tp_name +
                         ", which does not match the op's result type");
  }
  return true;
}

}  // namespace

bool is_python_dispatch_subclass(const Tensor& t) {
  if (!g_subclasses_on || !t || !Py_IsInitialized()) return false;
  py::gil_scoped_acquire gil;
  py::list keep;
  py::handle h = find_object(t, py::detail::get_type_info(typeid(TensorImpl)), keep);
  return h && dispatches(Py_TYPE(h.ptr()));
}

bool python_dispatch_wanted(const Tensor& t) {
  return t_modes > 0 || is_python_dispatch_subclass(t);
}

Tensor pd_unbox_tensor(py::handle r) {
  if (r.is_none()) return Tensor();
  if (!is_tensor_object(r.ptr()))
    throw py::type_error(std::string("__torch_dispatch__ returned ") + Py_TYPE(r.ptr())->tp_name +
                         " where the op returns a Tensor");
  Tensor t = r.cast<Tensor>();
  if (!dispatches(Py_TYPE(r.ptr()))) return t;
  // The C++ reference owns the Python object, which owns the TensorImpl: the subclass instance
  // lives while autograd (or any C++ holder) keeps the tensor.
  PyObject* obj = r.ptr();
  Py_INCREF(obj);
  std::shared_ptr<PyObject> owner(obj, [](PyObject* o) {
    if (!Py_IsInitialized() || _Py_IsFinalizing()) return;  // the interpreter is going away
    py::gil_scoped_acquire gil;
    Py_DECREF(o);
  });
  return Tensor(owner, t.get());
}

void bind_python_dispatch(py::module_& m) {
  g_name = PyUnicode_InternFromString("__torch_dispatch__");
  m.def(
      "_disabled_torch_dispatch_impl",
      [](py::args, py::kwargs) -> py::object {
        throw py::type_error("__torch_dispatch__ is disabled for this class");
      },
      "The __torch_dispatch__ a subclass sets to opt out of dispatch (as PyTorch's).");
  g_disabled = m.attr("_disabled_torch_dispatch_impl").ptr();
  Py_INCREF(g_disabled);
  m.def("_python_dispatch_install", [](py::object fn) {
    Py_XDECREF(g_py_dispatch);
    g_py_dispatch = fn.release().ptr();
    python_dispatch::set_handler(&handler);
    python_dispatch::set_subclass_check(&is_python_dispatch_subclass);
  });
  m.def("_python_dispatch_mode_delta", [](int delta) {
    t_modes += delta;
    python_dispatch::add(delta);
  });
  m.def("_python_dispatch_modes_on_thread", []() { return t_modes; });
  m.def("_python_dispatch_enable_subclasses", []() {
    if (g_subclasses_on) return;
    g_subclasses_on = true;
    python_dispatch::add(1);  // for good: instances may live anywhere from now on
  });
  m.def(
      "_make_storageless",
      [](const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, int64_t offset,
         ScalarType dtype, const Device& device) {
        return make_storageless(DimVector(sizes), DimVector(strides), offset, dtype, device);
      },
      "A tensor with sizes, strides, dtype and device but no memory (core/storageless.h): the "
      "base of Tensor._make_wrapper_subclass.");
  m.def("_python_dispatch_stash", &stash,
        "Called as a __torch_dispatch__ subclass instance dies: remember its class and "
        "attributes while C++ still holds its tensor.");
  m.def("_python_dispatch_stashed", []() { return g_stash.size(); });
  m.def("_python_dispatch_hook_on", []() { return python_dispatch::on(); });
  m.def("_python_dispatch_num_ops", []() { return kNumPyDispatchOps; });
  m.def("_python_dispatch_op_info", [](int i) {
    if (i < python_dispatch::kLocalScalarDense || i >= kNumPyDispatchOps)
      throw py::index_error("no dispatched op with this index");
    const PyDispatchOp& o = op_info(i);
    return py::make_tuple(o.name, o.overload, o.schema, o.modes);
  });
}

}  // namespace ember
