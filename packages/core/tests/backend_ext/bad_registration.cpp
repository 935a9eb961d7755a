// Registers a kernel whose signature matches no overload of `add`: the import must fail with
// a clear error (test_backend_slot.py), not install a kernel that would be called wrongly.
#include <Python.h>

#include "ops.h"

namespace {
ember::Tensor wrong_add(const ember::Tensor& self, const ember::Tensor&) { return self; }
PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "ember_bad_registration", nullptr, -1, nullptr};
}  // namespace

PyMODINIT_FUNC PyInit_ember_bad_registration() {
  try {
    ember::register_kernel("add", ember::DeviceType::PrivateUse1, &wrong_add);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  return PyModule_Create(&kModule);
}
