// Hand-written parts of the Python binding of ember.Tensor (the ops come from the generator).
#pragma once
#include "python/bind_support.h"

namespace ember {
// Attributes, conversions (item, tolist, to), Python operators, tensor() from nested data.
void bind_tensor(py::module_& m, TensorClass& cls);
// __getitem__ / __setitem__ (python/indexing_py.cpp).
void bind_indexing(py::module_& m, TensorClass& cls);
// requires_grad, grad, grad_fn, graph nodes, grad mode, backward (python/autograd_py.cpp).
void bind_autograd(py::module_& m, TensorClass& cls);
// NumPy (buffer protocol) and DLPack exchange (python/interop_py.cpp).
void bind_interop(py::module_& m, TensorClass& cls);
void bind_shared_memory(py::module_& m, TensorClass& cls);  // python/shared_memory_py.cpp
// UntypedStorage, untyped_storage(), resize_ and set_ (python/storage_py.cpp).
void bind_storage(py::module_& m, TensorClass& cls);
}  // namespace ember
