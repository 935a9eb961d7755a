// The C API that ember._C exports to extension modules, as the PyCapsule `ember._C._C_API`.
// An extension converts Python tensors through it instead of through _C's pybind11 types, so it
// may be built with another pybind11 (or none) and still share tensors, identity and errors
// with ember. extension/pybind.h builds pybind11 casters on it.
#pragma once
#include <Python.h>

#include "core/error.h"
#include "core/tensor.h"

namespace ember {

constexpr int kExtensionApiVersion = 1;

struct ExtensionApi {
  int version;
  // 1 with *out set when `obj` is an ember Tensor (a subclass too), 0 otherwise (no Python error
  // is left set).
  int (*unpack_tensor)(PyObject* obj, Tensor* out);
  // A new reference to the Python object of `t` (the same object each time for the same tensor;
  // None for an undefined tensor), or null with a Python error set.
  PyObject* (*wrap_tensor)(const Tensor& t);
  // Sets the Python exception ember raises for an engine error of this kind (ErrorKind).
  void (*set_error)(int kind, const char* message);
};

// The API of the loaded ember._C (imported on first use; the GIL must be held). Throws
// ember::Error when ember._C is missing or older than this header.
inline const ExtensionApi& extension_api() {
  static const ExtensionApi* api = [] {
    auto* p = static_cast<const ExtensionApi*>(PyCapsule_Import("ember._C._C_API", 0));
    if (p == nullptr) {
      PyErr_Clear();
      EMBER_FAIL(Runtime,
                 "ember extension: cannot import the C API of ember._C (is ember "
                 "importable from this interpreter?)");
    }
    EMBER_CHECK(p->version >= kExtensionApiVersion, "ember extension: ember._C has C API version ",
                p->version, ", this extension needs ", kExtensionApiVersion, "; rebuild it");
    return p;
  }();
  return *api;
}

}  // namespace ember
