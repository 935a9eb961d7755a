// Python surface of autograd: Tensor.requires_grad / grad / grad_fn / is_leaf / detach, graph
// nodes, grad mode, and the entry point of the engine (which runs without the GIL).
#include <algorithm>
#include <memory>
#include <unordered_map>

#include "autograd/autograd.h"
#include "autograd/views.h"
#include "python/python_autograd.h"
#include "python/python_dispatch_py.h"
#include "python/tensor_py.h"

namespace ember {

using autograd::Node;

constexpr const char* kGradDtypeAdvice =
    "The gradient must match the tensor's grad_dtype (defaults to the tensor's dtype). You can "
    "set the tensor's grad_dtype attribute with a specific dtype, or None to allow any dtype.";

namespace {
// grad_fn.metadata: one dict per graph node, kept as long as the node whatever Python wrapper
// reads it (wrappers come and go with each grad_fn access). The table lives here, not on Node,
// so the engine stays free of Python; an entry is found by the node's address and trusted only
// while its weak_ptr still points at that node (a freed node's address may be reused). Dicts of
// freed nodes are dropped by a sweep whenever the table has doubled since the last one.
struct MetadataEntry {
  std::weak_ptr<Node> node;
  py::object dict;
};
std::unordered_map<const Node*, MetadataEntry>& metadata_table() {
  // never destroyed: its dicts must not be released after the interpreter is gone
  static auto* table = new std::unordered_map<const Node*, MetadataEntry>();
  return *table;
}

py::object node_metadata(Node& n) {
  auto& table = metadata_table();
  static size_t sweep_at = 64;
  auto it = table.find(&n);
  if (it != table.end()) {
    auto alive = it->second.node.lock();
    if (alive.get() == &n) return it->second.dict;
    table.erase(it);
  }
  if (table.size() >= sweep_at) {
    for (auto e = table.begin(); e != table.end();)
      e = e->second.node.expired() ? table.erase(e) : std::next(e);
    sweep_at = std::max<size_t>(64, 2 * table.size());
  }
  py::dict d;
  table.emplace(&n, MetadataEntry{n.weak_from_this(), d});
  return std::move(d);
}
}  // namespace

void bind_autograd(py::module_& m, TensorClass& cls) {
  NodeClass node_cls(m, "Node");
  node_cls.def("name", &Node::name)
      .def_property_readonly("next_functions",
                             [](const Node& n) {
                               py::tuple t(n.next_edges.size());
                               for (size_t i = 0; i < n.next_edges.size(); ++i) {
                                 const auto& e = n.next_edges[i];
                                 t[i] = py::make_tuple(node_to_py(e.fn), e.input_nr);
                               }
                               return t;
                             })
      .def_property_readonly("_sequence_nr", [](const Node& n) { return n.sequence_nr; })
      // One dict per node, whichever Python object reads it (PyTorch keeps it with the node).
      .def_property_readonly("metadata", [](Node& n) { return node_metadata(n); })
      // A leaf's AccumulateGrad node names the tensor it accumulates into (graph walkers
      // such as torchviz read it); other nodes have no such attribute.
      .def_property_readonly("variable",
                             [](const Node& n) -> Tensor {
                               const auto* acc = dynamic_cast<const autograd::AccumulateGrad*>(&n);
                               if (!acc)
                                 throw py::attribute_error("'" + n.name() +
                                                           "' object has no attribute "
                                                           "'variable'");
                               return acc->variable;
                             })
      .def("__repr__", [](const Node& n) { return "<" + n.name() + " object>"; });

  m.def("is_grad_enabled", &autograd::grad_mode_flag);
  m.def("_set_grad_enabled", &autograd::set_grad_enabled);
  m.def("_is_inference_mode_enabled", &inference_mode_enabled);
  m.def("_set_inference_mode_enabled", &set_inference_mode_enabled);
  m.def(
      "_run_backward",
      [](const std::vector<Tensor>& outputs, const std::vector<std::optional<Tensor>>& grads,
         bool keep_graph, bool create_graph, const std::vector<Tensor>& inputs, bool allow_unused,
         bool accumulate) {
        std::vector<Tensor> g;
        for (const auto& x : grads) g.push_back(x ? *x : Tensor());
        std::vector<Tensor> r;
        {
          py::gil_scoped_release nogil;
          r = autograd::run_backward(outputs, g, keep_graph, create_graph, inputs, allow_unused,
                                     accumulate);
        }
        py::tuple t(r.size());
        for (size_t i = 0; i < r.size(); ++i) t[i] = r[i] ? py::cast(r[i]) : py::none();
        return t;
      },
      py::arg("outputs"), py::arg("grad_outputs"), py::arg("keep_graph"), py::arg("create_graph"),
      py::arg("inputs"), py::arg("allow_unused"), py::arg("accumulate"));

  cls.def_property(
         "requires_grad", [](const Tensor& t) { return autograd::requires_grad(t); },
         [](const Tensor& t, bool r) { autograd::set_requires_grad(t, r); })
      .def(
          "requires_grad_",
          [](const Tensor& t, py::handle r) {
            // a bool only, as in PyTorch (pybind11 would take None as False)
            if (!PyBool_Check(r.ptr()))
              throw py::type_error(
                  std::string("requires_grad_(): argument 'requires_grad' (position 1) must be "
                              "bool, not ") +
                  Py_TYPE(r.ptr())->tp_name);
            autograd::set_requires_grad(t, r.ptr() == Py_True);
            return t;
          },
          py::arg("requires_grad") = true)
      .def_property_readonly("is_leaf", [](const Tensor& t) { return autograd::is_leaf(t); })
      .def_property_readonly("grad_fn",
                             [](const Tensor& t) -> py::object {
                               AutogradMeta* am = autograd::meta(t);
                               if (!am || !am->grad_fn) return py::none();
                               return node_to_py(am->grad_fn);
                             })
      .def_property(
          "grad",
          [](const Tensor& t) -> py::object {
            AutogradMeta* am = autograd::meta(t);
            if (am && !am->grad && am->grad_fn && !am->retains_grad) {
              // backward() never fills a non-leaf's .grad: reading it is almost always a bug
              // (the leaf was meant), so say so as PyTorch does instead of a silent None
              const std::string message =
                  "The .grad attribute of a Tensor that is not a leaf Tensor (it was computed "
                  "by " +
                  am->grad_fn->name() +
                  ") is being accessed; backward() does not populate it. Call .retain_grad() "
                  "on this tensor before backward() to keep its gradient, or read the .grad of "
                  "the leaf tensor it was computed from.";
              if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) < 0)
                throw py::error_already_set();
            }
            if (!am || !am->grad) return py::none();
            return py::cast(am->grad);
          },
          [](const Tensor& t, const py::object& value) {
            std::optional<Tensor> g;
            if (!value.is_none()) {
              if (!is_tensor_object(value.ptr()))
                EMBER_FAIL(Type,
                           "assigned grad expected to be a Tensor or None but got grad of type ",
                           Py_TYPE(value.ptr())->tp_name);
              g = pd_unbox_tensor(value);  // a subclass gradient (DTensor) keeps its object
            }
            if (g) {
              const Device have = t->device(), got = (*g)->device();
              EMBER_CHECK(have.type == got.type &&
                              (have.index < 0 || got.index < 0 || have.index == got.index),
                          "attempting to assign a gradient with device '", got.str(),
                          "' to a tensor with device '", have.str(),
                          "'. Please ensure that the gradient and the tensor are on the same "
                          "device");
              EMBER_CHECK((*g)->sizes() == t->sizes(),
                          "assigned grad has data of a different size (", shape_str((*g)->sizes()),
                          " vs ", shape_str(t->sizes()), ")");
              AutogradMeta* am = autograd::meta(t);
              if (!am || !am->grad_dtype_any) {
                ScalarType want = am && am->grad_dtype ? *am->grad_dtype : t->dtype();
                EMBER_CHECK((*g)->dtype() == want, "attempting to assign a gradient with dtype '",
                            dtype_name((*g)->dtype()), "' to a tensor with grad_dtype '",
                            dtype_name(want), "'. ", kGradDtypeAdvice);
              }
              autograd::materialize_meta(t).grad = *g;
            } else if (AutogradMeta* am = autograd::meta(t)) {
              am->grad.reset();
            }
          })
      .def_property(
          "grad_dtype",
          [](const Tensor& t) -> py::object {
            EMBER_CHECK(autograd::is_leaf(t), "grad_dtype can only be accessed on leaf tensors.");
            AutogradMeta* am = autograd::meta(t);
            if (am && am->grad_dtype_any) return py::none();
            return py::reinterpret_borrow<py::object>(
                dtype_object(am && am->grad_dtype ? *am->grad_dtype : t->dtype()));
          },
          [](const Tensor& t, py::object dt) {
            EMBER_CHECK(autograd::is_leaf(t), "grad_dtype can only be set on leaf tensors.");
            ScalarType want = t->dtype();
            const bool is_dtype = Py_TYPE(dt.ptr()) == Py_TYPE(dtype_object(ScalarType::Float32));
            if (!dt.is_none() && (!is_dtype || !dtype_from_object(dt.ptr(), &want)))
              EMBER_FAIL(Runtime, "grad_dtype must be a ember.dtype or None, but got ",
                         Py_TYPE(dt.ptr())->tp_name);
            AutogradMeta& am = autograd::materialize_meta(t);
            EMBER_CHECK(dt.is_none() || !am.grad || am.grad->dtype() == want,
                        "Cannot set grad_dtype to '", dtype_name(want),
                        "' because there is already a gradient with dtype '",
                        dtype_name(am.grad ? am.grad->dtype() : want),
                        "'. Please clear the gradient (.grad = None) before changing grad_dtype, "
                        "or ensure the new grad_dtype matches the existing gradient's dtype.");
            am.grad_dtype_any = dt.is_none();
            am.grad_dtype = dt.is_none() ? std::nullopt : std::optional<ScalarType>(want);
          },
          "The dtype of .grad for this leaf (default: its own dtype): incoming gradients are "
          "cast to it; None keeps any dtype.")
      .def("detach", [](const Tensor& t) { return autograd::detach(t); })
      .def("detach_",
           [](const Tensor& t) {
             autograd::check_detach_inplace(t);
             if (AutogradMeta* am = autograd::meta(t)) {
               am->grad_fn.reset();
               am->requires_grad = false;
             }
             return t;
           })
      .def_property(
          "data",
          [](const Tensor& t) {
            Tensor d = autograd::detach(t);  // (reaches __torch_dispatch__, as in PyTorch)
            if (d->version_counter() != t->version_counter()) return d;
            // PyTorch's .data: the same memory under a version counter of its own, so writes
            // through it are not seen by the saved-tensor checks (what .data is for).
            Tensor out = std::make_shared<TensorImpl>(d->storage(), d->dtype(), d->sizes(),
                                                      d->strides(), d->storage_offset(),
                                                      std::make_shared<VersionCounter>());
            return out;
          },
          [](const Tensor& t, const py::object& value) {
            if (!is_tensor_object(value.ptr()))
              EMBER_FAIL(Type, "Variable data has to be a tensor, but got ",
                         Py_TYPE(value.ptr())->tp_name);
            const Tensor src = value.cast<Tensor>();
            // an integer tensor under requires_grad=True would reach backward kernels as such
            EMBER_CHECK(!autograd::requires_grad(t) || is_floating(src->dtype()) ||
                            is_complex(src->dtype()),
                        "data set to a tensor that requires gradients must be floating point or "
                        "complex dtype (got ember.",
                        dtype_name(src->dtype()), ")");
            t->set_storage(src->storage());
            t->set_dtype(src->dtype());
            t->set_sizes_strides(src->sizes(), src->strides(), src->storage_offset());
          });

  bind_autograd_hooks(m, cls, node_cls);
  bind_python_function(m);
  bind_saved_values(m, node_cls);
}

}  // namespace ember
