// Python parts of autograd shared between the binding files: Python hooks
// (python_hooks.cpp) and custom Functions (python_function.cpp).
#pragma once
#include <memory>

#include "autograd/autograd.h"
#include "python/bind_support.h"

namespace ember {

using NodeClass = py::class_<autograd::Node, std::shared_ptr<autograd::Node>>;

// The Python object for a graph node: a custom Function's node is its ctx object
// (`MyFnBackward`), every other node is an ember._C.Node.
py::object node_to_py(const std::shared_ptr<autograd::Node>& node);

// Drops a Python reference from C++ code that may run without the GIL (node and hook
// destructors run wherever the last reference to the graph goes away, e.g. in backward).
void release_py(py::object& o);

// Python's cycle collector and a tensor's hooks (python_hooks.cpp): a hook whose closure refers
// to its own tensor forms a cycle through C++ that the collector can only see this way. Both
// only act on what `self` alone keeps alive (the tensor, and the grad_fn holding a non-leaf's
// hooks); anything also referenced from C++ (a graph, a view) is not garbage.
int traverse_tensor_hooks(PyObject* self, visitproc visit, void* arg);
int clear_tensor_hooks(PyObject* self);

// Tensor.register_hook and friends, node hooks, saved-tensor hooks, anomaly mode.
void bind_autograd_hooks(py::module_& m, TensorClass& cls, NodeClass& node_cls);
// One saved tensor's (pack, unpack) pair of Python callables (python_hooks.cpp).
std::unique_ptr<autograd::SavedVariableHooks> make_py_saved_variable_hooks(py::object pack,
                                                                           py::object unpack);
// grad_fn._saved_<name> / _raw_saved_<name> and dir(grad_fn) (saved_values_py.cpp).
void bind_saved_values(py::module_& m, NodeClass& node_cls);
// ember.autograd.Function's C++ half: the graph node of a custom Function.
void bind_python_function(py::module_& m);

}  // namespace ember
