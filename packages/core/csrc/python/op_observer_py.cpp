// ember._C._set_op_observer: a Python callable that sees the outermost op of each call
// (autograd/op_observer.h); ember.onnx.export records through it.
#include "autograd/op_observer.h"
#include "python/tensor_py.h"

namespace ember {
namespace {

py::object* g_observer = nullptr;  // never freed: it may outlive the interpreter's teardown

void call_observer(const char* op, const std::vector<Tensor>& inputs,
                   const std::vector<Tensor>& outputs) {
  py::gil_scoped_acquire gil;
  if (g_observer == nullptr || g_observer->is_none()) return;
  py::tuple ins(inputs.size()), outs(outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) ins[i] = py::cast(inputs[i]);
  for (size_t i = 0; i < outputs.size(); ++i) outs[i] = py::cast(outputs[i]);
  (*g_observer)(op, ins, outs);
}

}  // namespace

void bind_op_observer(py::module_& m) {
  m.def(
      "_set_op_observer",
      [](py::object fn) {
        if (fn.is_none()) {
          op_observer::set_callback(nullptr);
          if (g_observer != nullptr) *g_observer = py::none();
          return;
        }
        if (!PyCallable_Check(fn.ptr()))
          throw py::type_error("_set_op_observer: expected a callable or None");
        if (g_observer == nullptr) g_observer = new py::object();
        *g_observer = std::move(fn);
        op_observer::set_callback(&call_observer);
      },
      py::arg("callback"),
      "Install callback(op_name, input_tensors, output_tensors), called after the outermost op of "
      "each call on any thread (the ops it runs inside are not reported); None removes it.");
}

}  // namespace ember
