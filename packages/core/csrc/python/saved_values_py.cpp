// grad_fn._saved_<name> and grad_fn._raw_saved_<name>: what a graph node saved for backward, by
// PyTorch's names (graph walkers such as torchviz's make_dot(show_saved=True) list them through
// dir(grad_fn)). The nodes list their values through Node::visit_saved; tensors are unpacked as
// backward would see them, so reading one after the graph was freed raises as backward does.
#include <string>
#include <utility>
#include <vector>

#include "autograd/autograd.h"
#include "python/python_autograd.h"
#include "python/tensor_py.h"

namespace ember {

using autograd::Node;
using autograd::SavedVariable;

namespace {

constexpr const char* kSavedPrefix = "_saved_";
constexpr const char* kRawSavedPrefix = "_raw_saved_";

// grad_fn._raw_saved_<name> (PyTorch's SavedTensor): one saved tensor of a node, which it keeps
// alive; register_hooks replaces what is kept by what pack returns.
struct SavedTensorRef {
  std::shared_ptr<Node> node;
  SavedVariable* var;  // a member of *node
};

py::object tensor_or_none(const Tensor& t) { return t ? py::cast(t) : py::none(); }

// Collects a node's saved values: every name (for dir), or the one value asked for.
class Collector final : public autograd::SavedValueVisitor {
 public:
  Collector(std::shared_ptr<Node> node, std::string want, bool raw)
      : node_(std::move(node)), want_(std::move(want)), raw_(raw) {}

  std::vector<std::string> names;  // "_saved_x" and, for tensors, "_raw_saved_x"
  py::object found;                // the value asked for (null: no such saved value)

  void tensor(const char* name, SavedVariable& v) override {
    if (!take(name, true)) return;
    if (raw_)
      found = py::cast(SavedTensorRef{node_, &v});
    else
      found = tensor_or_none(v.unpack(node_.get()));
  }
  void tensor_list(const char* name, std::vector<SavedVariable>& v) override {
    if (!take(name, true)) return;
    py::tuple t(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      t[i] =
          raw_ ? py::cast(SavedTensorRef{node_, &v[i]}) : tensor_or_none(v[i].unpack(node_.get()));
    found = std::move(t);
  }
  void optional_tensors(const char* name, const std::vector<Tensor>& v) override {
    if (!take(name, false)) return;
    py::tuple t(v.size());
    for (size_t i = 0; i < v.size(); ++i) t[i] = tensor_or_none(v[i]);
    found = std::move(t);
  }
  void none(const char* name) override { set(name, py::none()); }
  void boolean(const char* name, bool v) override { set(name, py::bool_(v)); }
  void integer(const char* name, int64_t v) override { set(name, py::int_(v)); }
  void real(const char* name, double v) override { set(name, py::float_(v)); }
  void scalar(const char* name, const Scalar& v) override { set(name, py::cast(v)); }
  void ints(const char* name, const DimVector& v) override {
    if (!take(name, false)) return;
    py::tuple t(static_cast<size_t>(v.size()));
    for (int64_t i = 0; i < v.size(); ++i) t[static_cast<size_t>(i)] = py::int_(v[i]);
    found = std::move(t);
  }
  void string(const char* name, const std::string& v) override { set(name, py::str(v)); }
  void dtype(const char* name, ScalarType v) override { set(name, py::cast(v)); }
  void device(const char* name, Device v) override { set(name, py::cast(v)); }

 private:
  // Records the name; true when this is the value asked for (a raw one only for a tensor).
  bool take(const char* name, bool is_tensor) {
    if (want_.empty()) {
      names.push_back(kSavedPrefix + std::string(name));
      if (is_tensor) names.push_back(kRawSavedPrefix + std::string(name));
      return false;
    }
    return !found && want_ == name && (is_tensor || !raw_);
  }
  void set(const char* name, py::object v) {
    if (take(name, false)) found = std::move(v);
  }

  std::shared_ptr<Node> node_;
  std::string want_;
  bool raw_;
};

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

py::object saved_attr(const std::shared_ptr<Node>& node, const std::string& attr) {
  const bool raw = starts_with(attr, kRawSavedPrefix);
  if (raw || starts_with(attr, kSavedPrefix)) {
    std::string name = attr.substr(std::string(raw ? kRawSavedPrefix : kSavedPrefix).size());
    if (!name.empty()) {
      Collector c(node, std::move(name), raw);
      node->visit_saved(c);
      if (c.found) return c.found;
    }
  }
  throw py::attribute_error("'" + node->name() + "' object has no attribute '" + attr + "'");
}

}  // namespace

void bind_saved_values(py::module_& m, NodeClass& node_cls) {
  py::class_<SavedTensorRef>(m, "SavedTensor")
      .def(
          "register_hooks",
          [](SavedTensorRef& r, const py::function& pack, const py::function& unpack) {
            r.var->register_hooks(make_py_saved_variable_hooks(pack, unpack));
          },
          py::arg("pack_hook"), py::arg("unpack_hook"),
          "Packs the saved tensor with pack_hook now and keeps only what it returns; "
          "unpack_hook turns that back into the tensor whenever it is used (backward, or "
          "_saved_<name>).");
  // Looked up only when ordinary attribute lookup fails, so the bound attributes come first.
  node_cls
      .def("__getattr__", [](const std::shared_ptr<Node>& n,
                             const std::string& attr) { return saved_attr(n, attr); })
      .def("__dir__", [](const py::object& self) {
        auto n = self.cast<std::shared_ptr<Node>>();
        py::handle object_type(reinterpret_cast<PyObject*>(&PyBaseObject_Type));
        py::list out = object_type.attr("__dir__")(self);
        Collector c(n, std::string(), false);
        n->visit_saved(c);
        for (const std::string& s : c.names) out.append(py::str(s));
        out.attr("sort")();
        return out;
      });
}

}  // namespace ember
