// ember._C._gamma_values: the CPU kernel of lgamma / digamma / trigamma (kernels/cpu/
// gamma_values.h) under ember.special's autograd Functions (which take another path for tensors
// on other devices).
#include "core/error.h"
#include "kernels/cpu/gamma_values.h"
#include "python/tensor_py.h"

namespace ember {

void bind_gamma_values(py::module_& m) {
  m.def(
      "_gamma_values",
      [](const Tensor& self, int64_t order) {
        EMBER_CHECK(self->device().type == DeviceType::CPU,
                    "_gamma_values: expected a CPU tensor, got one on ", self->device().str());
        py::gil_scoped_release no_gil;
        return cpu::gamma_values(self, order);
      },
      py::arg("input"), py::arg("order"));
}

}  // namespace ember
