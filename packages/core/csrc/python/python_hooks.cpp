// Python implementations of the engine's hook interfaces (autograd/hooks.h), their
// registration from Python, saved-tensor hooks and anomaly mode's stack capture. The engine
// runs without the GIL; each Python hook takes it only while it runs.
#include <string>

#include "python/python_autograd.h"
#include "python/python_dispatch_py.h"
#include "python/tensor_py.h"

namespace ember {

using autograd::Node;

void release_py(py::object& o) {
  if (!o) return;
  if (!Py_IsInitialized()) {
    o.release();  // the interpreter is gone: leak rather than touch it
    return;
  }
  py::gil_scoped_acquire gil;
  o = py::object();
}

namespace {

std::string hook_name(const py::handle& fn) {
  if (py::hasattr(fn, "__name__")) return py::str(fn.attr("__name__"));
  return py::repr(fn);
}

// What a hook returned in place of `original`: None keeps it, a Tensor of the same dtype and
// shape replaces it.
Tensor check_hook_result(const Tensor& original, const py::handle& r, const py::handle& fn) {
  if (r.is_none()) return original;
  if (!original) EMBER_FAIL(Runtime, "can't replace a None gradient with a non-None value");
  if (!is_tensor_object(r.ptr()))
    EMBER_FAIL(Type, "expected Tensor, but hook '", hook_name(fn), "' returned '",
               std::string(py::str(py::type::handle_of(r).attr("__name__"))), "'");
  // a __torch_dispatch__ subclass (DTensor) stays one while the engine holds the gradient
  Tensor t = pd_unbox_tensor(r);
  if (t->dtype() != original->dtype())
    EMBER_FAIL(Runtime, "hook '", hook_name(fn), "' has changed the type of value (was ember.",
               dtype_name(original->dtype()), " got ember.", dtype_name(t->dtype()), ")");
  if (t->sizes() != original->sizes())
    EMBER_FAIL(Runtime, "hook '", hook_name(fn), "' has changed the size of value (was ",
               shape_str(original->sizes()), " got ", shape_str(t->sizes()), ")");
  // a gradient on another device would reach kernels that cannot read it (a meta one has no
  // data at all)
  const Device was = original->device(), got = t->device();
  if (was.type != got.type || (was.index >= 0 && got.index >= 0 && was.index != got.index))
    EMBER_FAIL(Runtime, "hook '", hook_name(fn), "' has changed the device of value (was ",
               was.str(), " got ", got.str(), ")");
  return t;
}

py::tuple to_py_tuple(const std::vector<Tensor>& ts) {
  py::tuple t(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) t[i] = ts[i] ? py::cast(ts[i]) : py::none();
  return t;
}

// A hook's return value in place of `originals`: None keeps them, else a sequence of as many.
std::vector<Tensor> check_hook_results(const std::vector<Tensor>& originals, const py::object& r,
                                       const py::handle& fn) {
  if (r.is_none()) return originals;
  if (!PyTuple_Check(r.ptr()) && !PyList_Check(r.ptr()))
    EMBER_FAIL(Type, "hook '", hook_name(fn), "' must return None or a tuple of gradients, got '",
               std::string(py::str(py::type::handle_of(r).attr("__name__"))), "'");
  py::sequence seq = r;
  if (seq.size() != originals.size())
    EMBER_FAIL(Runtime, "hook '", hook_name(fn),
               "' has returned an incorrect number of values (got ", seq.size(), ", but expected ",
               originals.size(), ")");
  // Inside a returned tuple None means "no gradient" (it does not keep the original).
  std::vector<Tensor> out(originals.size());
  for (size_t i = 0; i < originals.size(); ++i)
    if (!seq[i].is_none()) out[i] = check_hook_result(originals[i], seq[i], fn);
  return out;
}

struct PyHookBase {
  explicit PyHookBase(py::object f) : fn(std::move(f)) {}
  ~PyHookBase() { release_py(fn); }
  PyHookBase(const PyHookBase&) = delete;
  PyHookBase& operator=(const PyHookBase&) = delete;
  int visit(autograd::PythonVisit v, void* arg) const { return fn ? v(fn.ptr(), arg) : 0; }
  py::object fn;
};

struct PyTensorHook final : autograd::TensorHook, PyHookBase {
  using PyHookBase::PyHookBase;
  int visit_python(autograd::PythonVisit v, void* arg) const override { return visit(v, arg); }
  Tensor operator()(const Tensor& grad) override {
    py::gil_scoped_acquire gil;
    py::object r = fn(grad ? py::cast(grad) : py::none());
    return check_hook_result(grad, r, fn);
  }
};

struct PyFunctionPreHook final : autograd::FunctionPreHook, PyHookBase {
  using PyHookBase::PyHookBase;
  std::vector<Tensor> operator()(const std::vector<Tensor>& grad_outputs) override {
    py::gil_scoped_acquire gil;
    return check_hook_results(grad_outputs, fn(to_py_tuple(grad_outputs)), fn);
  }
};

struct PyFunctionPostHook final : autograd::FunctionPostHook, PyHookBase {
  using PyHookBase::PyHookBase;
  std::vector<Tensor> operator()(const std::vector<Tensor>& grad_inputs,
                                 const std::vector<Tensor>& grad_outputs) override {
    py::gil_scoped_acquire gil;
    py::object r = fn(to_py_tuple(grad_inputs), to_py_tuple(grad_outputs));
    return check_hook_results(grad_inputs, r, fn);
  }
};

struct PyPostAccumulateGradHook final : autograd::PostAccumulateGradHook, PyHookBase {
  using PyHookBase::PyHookBase;
  int visit_python(autograd::PythonVisit v, void* arg) const override { return visit(v, arg); }
  void operator()(const Tensor& leaf) override {
    py::gil_scoped_acquire gil;
    py::object r = fn(py::cast(leaf));
    if (!r.is_none())
      EMBER_FAIL(Runtime, "post accumulate grad hook '", hook_name(fn),
                 "' should return None (it may update the tensor's .grad in place)");
  }
};

// ---- saved-tensor hooks ---------------------------------------------------------------------

struct PySavedVariableHooks final : autograd::SavedVariableHooks {
  PySavedVariableHooks(py::object p, py::object u) : pack(std::move(p)), unpack(std::move(u)) {}
  ~PySavedVariableHooks() override {
    release_py(packed);
    release_py(pack);
    release_py(unpack);
  }
  void call_pack_hook(const Tensor& t) override {
    py::gil_scoped_acquire gil;
    packed = pack(py::cast(t));
  }
  Tensor call_unpack_hook() override {
    py::gil_scoped_acquire gil;
    py::object r = unpack(packed);
    if (!is_tensor_object(r.ptr()))
      EMBER_FAIL(Type,
                 "Output of saved tensor unpack_hook expected to be a Tensor but got result of "
                 "type ",
                 std::string(py::str(py::type::handle_of(r).attr("__name__"))));
    return r.cast<Tensor>();
  }
  py::object pack, unpack, packed;
};

struct PySavedTensorHooksFactory final : autograd::SavedTensorHooksFactory {
  PySavedTensorHooksFactory(py::object p, py::object u)
      : pack(std::move(p)), unpack(std::move(u)) {}
  ~PySavedTensorHooksFactory() override {
    release_py(pack);
    release_py(unpack);
  }
  std::unique_ptr<autograd::SavedVariableHooks> make() override {
    py::gil_scoped_acquire gil;
    return std::make_unique<PySavedVariableHooks>(pack, unpack);
  }
  py::object pack, unpack;
};

// ---- anomaly mode ---------------------------------------------------------------------------

std::string capture_python_stack() {
  py::gil_scoped_acquire gil;
  try {
    std::string out;
    for (py::handle line : py::module_::import("traceback").attr("format_stack")()) {
      out += py::str(line).cast<std::string>();
    }
    return out;
  } catch (py::error_already_set&) {
    return std::string();
  }
}

void warn_python(const std::string& message) {
  py::gil_scoped_acquire gil;
  // Called while an error is being raised: a warning filter turned into an error must not
  // replace it.
  if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) < 0) PyErr_Clear();
}

// The handle register_hook returns; remove() (or leaving its `with` block) unregisters.
struct RemovableHandle {
  autograd::HookRemover remover;
  uint64_t id;
  void remove() {
    if (!remover) return;
    autograd::HookRemover r = std::move(remover);
    remover = nullptr;
    r();
  }
};

py::object make_handle(autograd::HookRemover remover) {
  static uint64_t next_id = 0;
  return py::cast(RemovableHandle{std::move(remover), next_id++});
}

void check_callable(const py::object& fn, const char* what) {
  if (!PyCallable_Check(fn.ptr()))
    EMBER_FAIL(Type, what, ": the hook must be callable, got '",
               std::string(py::str(py::type::handle_of(fn).attr("__name__"))), "'");
}

}  // namespace

std::unique_ptr<autograd::SavedVariableHooks> make_py_saved_variable_hooks(py::object pack,
                                                                           py::object unpack) {
  return std::make_unique<PySavedVariableHooks>(std::move(pack), std::move(unpack));
}

namespace {

// The tensor a Python object wraps, when that object is its only owner (else null).
TensorImpl* solely_owned(PyObject* self) {
  auto* inst = reinterpret_cast<py::detail::instance*>(self);
  // The collector may run while pybind11 is still laying out a new instance (allocate_layout
  // creates a weakref the first time it sees a Python subclass such as nn.Parameter): the
  // object's memory is then still zeroed, with no value/holder table to look at.
  if (!inst->simple_layout && inst->nonsimple.values_and_holders == nullptr) return nullptr;
  py::detail::value_and_holder vh = inst->get_value_and_holder(nullptr, false);
  if (!vh || !vh.holder_constructed()) return nullptr;
  const auto& holder = vh.holder<std::shared_ptr<TensorImpl>>();
  return holder && holder.use_count() == 1 ? holder.get() : nullptr;
}

// The hooks the collector may see of a solely owned tensor: a leaf's own, and the tensor hooks
// on a non-leaf's grad_fn when nothing but this tensor keeps that node.
struct OwnedHooks {
  autograd::LeafHooks* leaf = nullptr;
  autograd::NodeHooks* node = nullptr;
};
OwnedHooks owned_hooks(PyObject* self) {
  OwnedHooks h;
  TensorImpl* impl = solely_owned(self);
  AutogradMeta* m = impl ? impl->autograd_meta() : nullptr;
  if (!m) return h;
  h.leaf = m->leaf_hooks.get();
  if (m->grad_fn && m->grad_fn.use_count() == 1) h.node = m->grad_fn->hooks.get();
  return h;
}

struct VisitArgs {
  visitproc visit;
  void* arg;
};
int visit_object(void* object, void* args) {
  auto* a = static_cast<VisitArgs*>(args);
  return a->visit(static_cast<PyObject*>(object), a->arg);
}
template <class List>
int visit_list(const List& list, VisitArgs& args) {
  for (const auto& e : list.entries)
    if (int r = e.hook->visit_python(&visit_object, &args)) return r;
  return 0;
}

}  // namespace

int traverse_tensor_hooks(PyObject* self, visitproc visit, void* arg) {
  OwnedHooks h = owned_hooks(self);
  VisitArgs args{visit, arg};
  int r = 0;
  if (h.leaf && !r) r = visit_list(h.leaf->pre, args);
  if (h.leaf && !r) r = visit_list(h.leaf->post_accumulate, args);
  if (h.node && !r) r = visit_list(h.node->tensor_pre, args);
  return r;
}

int clear_tensor_hooks(PyObject* self) {
  OwnedHooks h = owned_hooks(self);
  // Moved out first: dropping a hook releases its closure, which may run arbitrary Python.
  std::vector<autograd::HookList<autograd::TensorHook>::Entry> pre, node_pre;
  std::vector<autograd::HookList<autograd::PostAccumulateGradHook>::Entry> post;
  if (h.leaf) {
    pre.swap(h.leaf->pre.entries);
    post.swap(h.leaf->post_accumulate.entries);
  }
  if (h.node) node_pre.swap(h.node->tensor_pre.entries);
  return 0;
}

void bind_autograd_hooks(py::module_& m, TensorClass& cls, NodeClass& node_cls) {
  autograd::set_anomaly_callbacks(&capture_python_stack, &warn_python);

  py::class_<RemovableHandle>(m, "RemovableHandle")
      .def("remove", &RemovableHandle::remove, "Unregisters the hook (a no-op the second time).")
      .def_readonly("id", &RemovableHandle::id)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](RemovableHandle& h, py::args) { h.remove(); });

  cls.def(
         "register_hook",
         [](const Tensor& t, py::object fn) {
           check_callable(fn, "register_hook");
           return make_handle(
               autograd::register_tensor_hook(t, std::make_shared<PyTensorHook>(fn)));
         },
         py::arg("hook"),
         "Registers hook(grad) -> Tensor | None, called with this tensor's gradient; a returned "
         "tensor replaces it. Returns a handle with .remove().")
      .def(
          "register_post_accumulate_grad_hook",
          [](const Tensor& t, py::object fn) {
            check_callable(fn, "register_post_accumulate_grad_hook");
            return make_handle(autograd::register_post_accumulate_grad_hook(
                t, std::make_shared<PyPostAccumulateGradHook>(fn)));
          },
          py::arg("hook"),
          "Registers hook(tensor) -> None, called after a leaf's .grad is updated.")
      .def(
          "_leaf_hook_fns",
          [](const Tensor& t) {
            // The Python callables of a leaf's tensor hooks and post-accumulate hooks, in
            // registration order: ember.sparse runs them on gradients that do not pass through
            // the engine (sparse gradients).
            py::list pre, post;
            AutogradMeta* am = autograd::meta(t);
            if (am && am->leaf_hooks) {
              for (const auto& e : am->leaf_hooks->pre.snapshot())
                if (auto* h = dynamic_cast<PyTensorHook*>(e.hook.get()); h && h->fn)
                  pre.append(h->fn);
              for (const auto& e : am->leaf_hooks->post_accumulate.snapshot())
                if (auto* h = dynamic_cast<PyPostAccumulateGradHook*>(e.hook.get()); h && h->fn)
                  post.append(h->fn);
            }
            return py::make_tuple(pre, post);
          },
          "(tensor hooks, post-accumulate-grad hooks) of a leaf, as lists of callables.")
      .def("retain_grad", [](const Tensor& t) { autograd::retain_grad(t); })
      .def_property_readonly("retains_grad",
                             [](const Tensor& t) { return autograd::retains_grad(t); });

  node_cls
      .def(
          "register_hook",
          [](const std::shared_ptr<Node>& n, py::object fn) {
            check_callable(fn, "register_hook");
            return make_handle(
                autograd::register_node_posthook(n, std::make_shared<PyFunctionPostHook>(fn)));
          },
          py::arg("fn"),
          "Registers fn(grad_inputs, grad_outputs) -> tuple | None, called after the node ran.")
      .def(
          "register_prehook",
          [](const std::shared_ptr<Node>& n, py::object fn) {
            check_callable(fn, "register_prehook");
            return make_handle(
                autograd::register_node_prehook(n, std::make_shared<PyFunctionPreHook>(fn)));
          },
          py::arg("fn"),
          "Registers fn(grad_outputs) -> tuple | None, called before the node runs.");

  m.def("_push_saved_tensors_default_hooks", [](py::object pack, py::object unpack) {
    check_callable(pack, "saved_tensors_hooks (pack_hook)");
    check_callable(unpack, "saved_tensors_hooks (unpack_hook)");
    autograd::push_saved_tensor_hooks(std::make_shared<PySavedTensorHooksFactory>(pack, unpack));
  });
  m.def("_pop_saved_tensors_default_hooks", &autograd::pop_saved_tensor_hooks);

  m.def("is_anomaly_enabled", &autograd::anomaly_mode_enabled,
        "Whether anomaly detection (ember.autograd.detect_anomaly) is on.");
  m.def("is_anomaly_check_nan_enabled", &autograd::anomaly_check_nan,
        "Whether anomaly detection checks backward results for NaN.");
  m.def("set_anomaly_enabled", &autograd::set_anomaly_mode, py::arg("enabled"),
        py::arg("check_nan") = true, "Turns anomaly detection on or off (process-wide).");
}

}  // namespace ember
