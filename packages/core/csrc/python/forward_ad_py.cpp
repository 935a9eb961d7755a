// Bindings of forward-mode AD (csrc/autograd/forward_ad.h); the Python API around them is
// ember.autograd.forward_ad.
#include "autograd/forward_ad.h"
#include "python/tensor_py.h"

namespace ember {

void bind_forward_ad(py::module_& m) {
  m.def("_enter_dual_level", &forward_ad::enter_dual_level);
  m.def("_exit_dual_level", &forward_ad::exit_dual_level, py::arg("level"));
  m.def("_current_dual_level", &forward_ad::current_level);
  m.def("_make_dual", &forward_ad::make_dual, py::arg("tensor"), py::arg("tangent"),
        py::arg("level"));
  m.def(
      "_unpack_dual",
      [](const Tensor& t, int64_t level) {
        auto [primal, tangent] = forward_ad::unpack_dual(t, level);
        return py::make_tuple(primal, tangent ? py::cast(tangent) : py::none());
      },
      py::arg("tensor"), py::arg("level"));
}

}  // namespace ember
