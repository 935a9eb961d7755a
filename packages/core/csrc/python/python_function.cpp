// The C++ half of ember.autograd.Function (src/ember/autograd/function.py): PyNode, the graph
// node of a custom Function, which holds the Python ctx and calls the user's backward with the
// GIL taken only for it; and the steps of Function.apply that touch the graph (making the node,
// giving the outputs their history, saving tensors with SavedVariable's version checks).
#include <string>
#include <unordered_set>

#include "autograd/forward_ad.h"
#include "ops.h"
#include "python/python_autograd.h"
#include "python/python_dispatch_py.h"
#include "python/tensor_py.h"

namespace ember {

using autograd::Node;
using autograd::SavedVariable;

namespace {

std::string type_name(const py::handle& o) {
  return py::str(py::type::handle_of(o).attr("__name__")).cast<std::string>();
}

class PyNode final : public Node {
 public:
  PyNode(py::object ctx, std::string name) : ctx(std::move(ctx)), name_(std::move(name)) {}
  ~PyNode() override {
    // The GIL is needed for the saved tensors only when saved-tensor hooks hold Python objects;
    // their destructors take it themselves.
    saved.clear();
    release_py(ctx);
  }
  std::string name() const override { return name_; }
  void release_variables() override {
    for (SavedVariable& s : saved) s.reset();
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;

  struct OutputInfo {
    bool is_tensor = false;
    DimVector sizes;
    ScalarType dtype = ScalarType::Float32;
  };

  py::object ctx;                 // the MyFnBackward object the user's backward receives
  std::vector<int> arg_to_input;  // per forward argument: its next_edge, or -1
  std::vector<autograd::InputMeta> input_meta;  // per tensor input
  std::vector<OutputInfo> outputs;              // per forward output
  std::vector<SavedVariable> saved;             // ctx.save_for_backward
  bool materialize_grads = true;

 private:
  Tensor check_grad(const Tensor& g, size_t arg, const autograd::InputMeta& m) const;
  std::string name_;
};

// Whether a tensor of shape `from` can be broadcast to `to` (so a gradient of shape `to` sums
// back to it).
bool expandable(const DimVector& from, const DimVector& to) {
  if (from.size() > to.size()) return false;
  int64_t lead = to.size() - from.size();
  for (int64_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

Tensor PyNode::check_grad(const Tensor& g, size_t arg, const autograd::InputMeta& m) const {
  if (!is_floating(g->dtype()) && !(is_complex(g->dtype()) && is_complex(m.dtype)))
    EMBER_FAIL(Type, "Function ", name_, " returned an invalid gradient at index ", arg,
               " - expected a floating point gradient for an input of dtype ember.",
               dtype_name(m.dtype), ", got ember.", dtype_name(g->dtype()));
  if (g->sizes() != m.sizes && !expandable(m.sizes, g->sizes()))
    EMBER_FAIL(Runtime, "Function ", name_, " returned an invalid gradient at index ", arg,
               " - got ", shape_str(g->sizes()), " but expected shape compatible with ",
               shape_str(m.sizes));
  // a meta gradient has no data to move to the input's device (PyTorch's words; other device
  // changes are moved, as before)
  if (g->device().is_meta() && !m.device.is_meta())
    EMBER_FAIL(Runtime, "Function ", name_, " returned an invalid gradient at index ", arg,
               " - expected device ", m.device.str(), " but got ", g->device().str());
  return autograd::reduce_grad(g, m);  // sums broadcast dims, casts to the input's dtype
}

std::vector<Tensor> PyNode::apply(std::vector<Tensor>&& grads) {
  py::gil_scoped_acquire gil;
  py::tuple args(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (grads[i]) {
      args[i] = py::cast(grads[i]);
    } else if (materialize_grads && outputs[i].is_tensor) {
      args[i] = py::cast(ops::zeros(outputs[i].sizes, outputs[i].dtype, std::nullopt));
    } else {
      args[i] = py::none();
    }
  }
  py::object r = ctx.attr("apply")(*args);
  py::tuple rt = PyTuple_Check(r.ptr()) ? py::reinterpret_borrow<py::tuple>(r) : py::make_tuple(r);
  size_t expected = arg_to_input.size();
  size_t got = rt.size();
  bool extra_all_none = true;
  for (size_t i = expected; i < got; ++i) extra_all_none = extra_all_none && rt[i].is_none();
  if (got < expected || !extra_all_none)
    EMBER_FAIL(Runtime, "function ", name_, " returned an incorrect number of gradients (expected ",
               expected, ", got ", got,
               "): backward must return one gradient (or None) per argument of forward");
  std::vector<Tensor> out(next_edges.size());
  for (size_t i = 0; i < expected; ++i) {
    py::handle g = rt[i];
    int k = arg_to_input[i];
    if (k < 0) {
      if (!g.is_none())
        EMBER_FAIL(Runtime, "function ", name_,
                   " returned a gradient different than None at position ", i + 1,
                   ", but the corresponding forward input was not a Tensor");
      continue;
    }
    if (g.is_none()) continue;
    if (!is_tensor_object(g.ptr()))
      EMBER_FAIL(Type, "function ", name_, " returned a '", type_name(g), "' at position ", i + 1,
                 " where a gradient Tensor or None was expected");
    if (!next_edges[k].valid()) continue;  // that input does not need a gradient
    // a __torch_dispatch__ subclass gradient (a DTensor) keeps its Python object while the
    // engine holds it, so the next Python backward receives that object, not a bare tensor
    out[k] = check_grad(pd_unbox_tensor(g), i, input_meta[k]);
  }
  return out;
}

// Backward through the result of a @once_differentiable backward (create_graph=True).
class DelayedError final : public Node {
 public:
  explicit DelayedError(std::string msg) : msg_(std::move(msg)) {}
  std::string name() const override { return "DelayedError"; }
  std::vector<Tensor> apply(std::vector<Tensor>&&) override { EMBER_FAIL(Runtime, msg_); }

 private:
  std::string msg_;
};

// Function.apply holds `strong` while forward runs; the ctx keeps only `weak` (the node owns
// the ctx, so a strong reference back would be a cycle nothing frees).
struct FunctionNodeRef {
  std::shared_ptr<PyNode> strong;
  std::weak_ptr<PyNode> weak;
  std::shared_ptr<PyNode> lock(const char* what) const {
    std::shared_ptr<PyNode> n = weak.lock();
    if (!n)
      EMBER_FAIL(Runtime, what,
                 ": the graph node of this custom Function no longer exists (the tensors it "
                 "produced were freed)");
    return n;
  }
};

py::object attr_or(const py::handle& o, const char* name, py::object dflt) {
  return py::hasattr(o, name) ? py::reinterpret_borrow<py::object>(o.attr(name)) : dflt;
}

std::unordered_set<TensorImpl*> tensor_set(const py::object& seq, const std::string& fn_name,
                                           const char* what) {
  std::unordered_set<TensorImpl*> out;
  if (seq.is_none()) return out;
  for (py::handle h : seq) {
    if (!is_tensor_object(h.ptr()))
      EMBER_FAIL(Type, fn_name, ": ", what, " only accepts Tensors, got '", type_name(h), "'");
    out.insert(h.cast<Tensor>().get());
  }
  return out;
}

// Sets ctx.needs_input_grad and, when some tensor argument requires grad (and grad mode is on),
// creates the node; returns a reference that keeps it alive during forward (None otherwise).
py::object function_prepare(py::object ctx, py::tuple args) {
  // needs_input_grad follows requires_grad even under no_grad (as in PyTorch).
  py::tuple needs(args.size());
  bool any = false;
  for (size_t i = 0; i < args.size(); ++i) {
    bool rg = is_tensor_object(args[i].ptr()) && autograd::requires_grad(args[i].cast<Tensor>());
    needs[i] = py::bool_(rg);
    any = any || rg;
  }
  ctx.attr("needs_input_grad") = needs;
  if (!any || !autograd::grad_enabled()) {
    ctx.attr("_cdata") = py::none();
    return py::none();
  }
  std::string fn_name = py::str(py::type::handle_of(ctx).attr("__name__"));
  auto node = std::make_shared<PyNode>(ctx, fn_name);
  for (py::handle a : args) {
    if (!is_tensor_object(a.ptr())) {
      node->arg_to_input.push_back(-1);
      continue;
    }
    Tensor t = a.cast<Tensor>();
    node->arg_to_input.push_back(static_cast<int>(node->next_edges.size()));
    node->next_edges.push_back(autograd::gradient_edge(t));
    node->input_meta.emplace_back(t);
  }
  ctx.attr("_cdata") = FunctionNodeRef{nullptr, node};
  return py::cast(FunctionNodeRef{node, node});
}

// Forward-mode AD: the tangents jvp(ctx, *tangents) gets, one per forward argument (the input's
// tangent; zeros for a floating tensor without one, or None when ctx.set_materialize_grads(False);
// None for everything else). None when no dual level is live or no argument carries a tangent.
py::object function_jvp_inputs(py::tuple args, bool materialize) {
  if (forward_ad::current_level() < 0) return py::none();
  py::tuple out(args.size());
  bool any = false;
  for (size_t i = 0; i < args.size(); ++i) {
    out[i] = py::none();
    if (!is_tensor_object(args[i].ptr())) continue;
    Tensor t = args[i].cast<Tensor>();
    if (Tensor tan = forward_ad::tangent_of(t)) {
      out[i] = py::cast(tan);
      any = true;
    } else if (materialize && is_floating(t->dtype())) {
      out[i] = py::cast(ops::zeros_like(t, std::nullopt, std::nullopt));
    }
  }
  return any ? py::object(out) : py::object(py::none());
}

// Checks what jvp returned for output `i` and attaches it as that output's tangent.
void attach_tangent(const std::string& fn_name, size_t i, const Tensor& out, bool differentiable,
                    py::handle tangent, py::handle input_tangent) {
  if (tangent.is_none()) return;
  if (!is_tensor_object(tangent.ptr()))
    EMBER_FAIL(Type, "function ", fn_name, " returned a '", type_name(tangent), "' from jvp at ",
               "position ", i, " where a tangent Tensor or None was expected");
  if (!differentiable)
    EMBER_FAIL(Runtime, "function ", fn_name, "'s jvp returned a tangent at position ", i,
               ", but the corresponding forward output is not a differentiable Tensor; return "
               "None at that position instead");
  Tensor t = tangent.cast<Tensor>();
  if (!is_floating(t->dtype()))
    EMBER_FAIL(Type, "function ", fn_name, "'s jvp returned a tangent of dtype ember.",
               dtype_name(t->dtype()), " at position ", i,
               "; tangents must be floating point like the output (ember.",
               dtype_name(out->dtype()), ")");
  if (t->sizes() != out->sizes())
    EMBER_FAIL(Runtime, "function ", fn_name, "'s jvp returned a tangent of shape ",
               shape_str(t->sizes()), " at position ", i, " for an output of shape ",
               shape_str(out->sizes()), "; they must be the same");
  if (input_tangent && !input_tangent.is_none() && input_tangent.cast<Tensor>().get() != t.get())
    EMBER_FAIL(Runtime, "function ", fn_name,
               " modifies an input in place (ctx.mark_dirty) but its jvp did not modify that "
               "input's tangent in place: jvp must update the tangent it was given and return it");
  forward_ad::set_tangent(out, t);
}

// Gives forward's outputs their place in the graph (PyTorch's rules for inputs returned as
// outputs, mark_dirty and mark_non_differentiable) and saves ctx.to_save; with `out_tangents`
// (what jvp returned) attaches the outputs' tangents. Returns the outputs.
py::object function_finish(py::object ctx, py::object ref, py::tuple args, py::object raw,
                           py::object in_tangents, py::object out_tangents) {
  std::shared_ptr<PyNode> node = ref.is_none() ? nullptr : ref.cast<FunctionNodeRef&>().strong;
  std::string fn_name = py::str(py::type::handle_of(ctx).attr("_forward_cls").attr("__name__"));
  bool is_tuple = PyTuple_Check(raw.ptr());
  py::tuple outs = is_tuple ? py::reinterpret_borrow<py::tuple>(raw) : py::make_tuple(raw);

  std::unordered_set<TensorImpl*> inputs;
  std::unordered_set<const void*> input_storages;  // to spot views of inputs made in forward
  for (py::handle a : args)
    if (is_tensor_object(a.ptr())) {
      Tensor t = a.cast<Tensor>();
      inputs.insert(t.get());
      input_storages.insert(t->storage().get());
    }
  std::unordered_set<TensorImpl*> dirty =
      tensor_set(attr_or(ctx, "dirty_tensors", py::none()), fn_name, "mark_dirty");
  std::unordered_set<TensorImpl*> non_diff = tensor_set(
      attr_or(ctx, "non_differentiable", py::none()), fn_name, "mark_non_differentiable");

  size_t n = outs.size();
  const bool has_jvp = !out_tangents.is_none();
  py::tuple jvp_out;
  if (has_jvp) {
    jvp_out = PyTuple_Check(out_tangents.ptr()) ? py::reinterpret_borrow<py::tuple>(out_tangents)
                                                : py::make_tuple(out_tangents);
    if (jvp_out.size() != n)
      EMBER_FAIL(Runtime, "function ", fn_name, "'s jvp returned an invalid number of tangents ",
                 "(expected ", n, ", one per output of forward, but got ", jvp_out.size(), ")");
  }
  if (node) {
    node->num_outputs = static_cast<uint32_t>(n);
    node->outputs.resize(n);
  }
  py::tuple result(n);
  size_t dirty_returned = 0;
  for (size_t i = 0; i < n; ++i) {
    py::handle o = outs[i];
    if (!is_tensor_object(o.ptr())) {
      if (has_jvp && !jvp_out[i].is_none())
        EMBER_FAIL(Runtime, "function ", fn_name, "'s jvp returned a tangent at position ", i,
                   ", but the corresponding forward output is not a Tensor; return None there");
      result[i] = o;
      continue;
    }
    Tensor t = o.cast<Tensor>();
    bool is_input = inputs.count(t.get()) > 0;
    bool is_modified = dirty.count(t.get()) > 0;
    dirty_returned += is_modified;
    // Complex outputs are differentiable too (their grads follow torch's conjugate convention).
    bool differentiable =
        node && !non_diff.count(t.get()) && (is_floating(t->dtype()) || is_complex(t->dtype()));
    if (node) node->outputs[i] = {true, t->sizes(), t->dtype()};
    if (!differentiable) {
      // An input returned as is comes back as a new tensor without history.
      if (is_input && !is_modified) t = autograd::detach(t);
    } else if (is_modified) {
      if (autograd::is_leaf(t) && autograd::requires_grad(t))
        EMBER_FAIL(Runtime, fn_name,
                   ": a leaf Variable that requires grad has been used in an in-place operation "
                   "(it was passed to ctx.mark_dirty()).");
      if (t->base() && autograd::requires_grad(t->base()))
        EMBER_FAIL(NotImplemented, fn_name,
                   ": modifying in place (mark_dirty) a view of a tensor that requires grad is "
                   "not supported yet; clone() the view before passing it");
      if (!is_input)
        if (PyErr_WarnEx(PyExc_UserWarning,
                         "Only input Tensors should be given to ctx.mark_dirty(). If a Tensor is "
                         "not an input, there is no need to pass it to mark_dirty().",
                         1) < 0)
          throw py::error_already_set();  // warnings turned into errors
      autograd::set_history(t, node, static_cast<uint32_t>(i));
    } else {
      // An input returned as is becomes a new tensor, so the input keeps its own history.
      if (is_input) t = autograd::detach(t);
      autograd::set_history(t, node, static_cast<uint32_t>(i));
      if (is_input || input_storages.count(t->storage().get()))
        autograd::materialize_meta(t).custom_function_view = true;
    }
    result[i] = py::cast(t);
    if (has_jvp) {
      py::handle given;  // the tangent jvp got for the input this output modified in place
      if (is_modified)
        for (size_t j = 0; j < args.size(); ++j)
          if (is_tensor_object(args[j].ptr()) && args[j].cast<Tensor>().get() == t.get())
            given = py::reinterpret_borrow<py::tuple>(in_tangents)[j];
      bool fw_differentiable = !non_diff.count(t.get()) && is_floating(t->dtype());
      attach_tangent(fn_name, i, t, fw_differentiable, jvp_out[i], given);
    }
  }
  if (dirty_returned < dirty.size())
    EMBER_FAIL(Runtime, fn_name,
               ": some Tensors marked as dirty during forward (ctx.mark_dirty) were not returned "
               "as outputs; the inputs modified in place must all be outputs of the Function");

  py::object to_save = attr_or(ctx, "to_save", py::none());
  if (node) {
    node->materialize_grads = attr_or(ctx, "materialize_grads", py::bool_(true)).cast<bool>();
    if (!to_save.is_none()) {
      for (py::handle h : to_save) {
        if (h.is_none()) {
          node->saved.emplace_back();
          continue;
        }
        Tensor t = h.cast<Tensor>();
        AutogradMeta* m = autograd::meta(t);
        bool is_output = m && m->grad_fn.get() == node.get();
        node->saved.emplace_back(t, is_output);
      }
    }
  }
  // These hold outputs; kept on the ctx (which the node owns) they would be cycles.
  for (const char* a : {"to_save", "dirty_tensors", "non_differentiable"})
    if (py::hasattr(ctx, a)) py::delattr(ctx, a);
  return is_tuple ? py::object(result) : py::object(result[0]);
}

py::tuple function_saved_tensors(py::object ref) {
  if (ref.is_none()) return py::tuple();
  std::shared_ptr<PyNode> node = ref.cast<FunctionNodeRef&>().lock("saved_tensors");
  py::tuple out(node->saved.size());
  for (size_t i = 0; i < node->saved.size(); ++i) {
    Tensor t = node->saved[i].unpack(node.get());
    out[i] = t ? py::cast(t) : py::none();
  }
  return out;
}

py::tuple delayed_error(const std::string& msg, py::tuple outputs) {
  auto node = std::make_shared<DelayedError>(msg);
  node->num_outputs = static_cast<uint32_t>(outputs.size());
  py::tuple result(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    py::handle o = outputs[i];
    if (!is_tensor_object(o.ptr())) {
      result[i] = o;
      continue;
    }
    Tensor t = autograd::detach(o.cast<Tensor>());
    autograd::set_history(t, node, static_cast<uint32_t>(i));
    result[i] = py::cast(t);
  }
  return result;
}

// The Python type named `name` (SumBackward0, AccumulateGrad, ...) for graph nodes, made once
// and kept on ember._C.Node; the name is the C++ node's own, PyTorch's for the same call (the
// YAML `node_name` of each op, see tools/codegen/schema.py). Graph walkers such as torchviz label
// nodes with type(fn).__name__, as torch's nodes each have their own type. The subclass adds
// nothing to Node's instances, and it takes Node's allocator, deallocator and (absent)
// garbage-collector support, so that an instance's __class__ can be switched to it in place.
py::object named_node_type(py::handle base, const std::string& name) {
  py::object cache = py::getattr(base, "_named_types", py::none());
  if (cache.is_none()) {
    cache = py::dict();
    base.attr("_named_types") = cache;
  }
  py::dict types = cache.cast<py::dict>();
  py::str key(name);
  if (types.contains(key)) return types[key];
  py::object meta =
      py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(Py_TYPE(base.ptr())));
  py::dict ns;
  ns["__slots__"] = py::tuple();
  ns["__module__"] = "builtins";  // as torch's: repr <class 'SumBackward0'>
  py::object sub = meta(key, py::make_tuple(base), ns);
  auto* t = reinterpret_cast<PyTypeObject*>(sub.ptr());
  const auto* b = reinterpret_cast<const PyTypeObject*>(base.ptr());
  t->tp_flags = (t->tp_flags & ~Py_TPFLAGS_HAVE_GC) | (b->tp_flags & Py_TPFLAGS_HAVE_GC);
  t->tp_free = b->tp_free;
  t->tp_dealloc = b->tp_dealloc;
  t->tp_traverse = b->tp_traverse;
  t->tp_clear = b->tp_clear;
  PyType_Modified(t);
  types[key] = sub;
  return sub;
}

}  // namespace

py::object node_to_py(const std::shared_ptr<Node>& node) {
  if (!node) return py::none();
  if (auto* p = dynamic_cast<PyNode*>(node.get())) return p->ctx;
  py::object obj = py::cast(node);
  py::handle base = py::type::of<Node>();
  if (Py_TYPE(obj.ptr()) == reinterpret_cast<PyTypeObject*>(base.ptr()))
    obj.attr("__class__") = named_node_type(base, node->name());
  return obj;
}

void bind_python_function(py::module_& m) {
  py::class_<FunctionNodeRef>(m, "_FunctionNodeRef")
      .def("node",
           [](const FunctionNodeRef& r) {
             // The plain ember._C.Node view of it (hooks, next_functions).
             return py::cast(std::static_pointer_cast<Node>(r.lock("Function")));
           })
      .def("alive", [](const FunctionNodeRef& r) { return !r.weak.expired(); });
  m.def("_function_prepare", &function_prepare, py::arg("ctx"), py::arg("args"));
  m.def("_function_finish", &function_finish, py::arg("ctx"), py::arg("node"), py::arg("args"),
        py::arg("outputs"), py::arg("in_tangents") = py::none(),
        py::arg("out_tangents") = py::none());
  m.def("_function_jvp_inputs", &function_jvp_inputs, py::arg("args"), py::arg("materialize"));
  m.def("_set_fw_ad_disabled", &forward_ad::set_disabled_here, py::arg("disabled"),
        "Turns forward-mode AD propagation off (True) or on for this thread; returns the "
        "previous setting.");
  m.def("_function_saved_tensors", &function_saved_tensors, py::arg("node"));
  m.def("_delayed_error", &delayed_error, py::arg("message"), py::arg("outputs"));
}

}  // namespace ember
