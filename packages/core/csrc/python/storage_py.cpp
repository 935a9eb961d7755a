// ember.UntypedStorage (the bytes under a tensor: Tensor.untyped_storage()) and the in-place
// storage changes Tensor.resize_ / Tensor.set_ build on (ops/resize_ops.h). The argument
// parsing of resize_/set_ (sizes as varargs, memory_format, typed storages) is in
// ember/_storage.py.
#include "autograd/autograd.h"
#include "ops/resize_ops.h"
#include "python/bind_support.h"
#include "python/tensor_py.h"

namespace ember {
namespace {

// Autograd's rules for the storage changes (checked here: the ops layer sits below autograd).
void check_resize_grad(const Tensor& t) {
  EMBER_CHECK(!autograd::requires_grad(t), "cannot resize variables that require grad");
}

void check_set_grad(const Tensor& t) {
  if (autograd::grad_enabled() && autograd::requires_grad(t)) {
    EMBER_CHECK(!autograd::is_leaf(t),
                "a leaf Variable that requires grad is being used in an in-place operation.");
    EMBER_FAIL(Runtime,
               "set_: cannot change the storage of a tensor that requires grad while grad mode "
               "is enabled (wrap the call in ember.no_grad() or call it on .detach())");
  }
}

}  // namespace

void bind_storage(py::module_& m, TensorClass& cls) {
  py::class_<StorageImpl, std::shared_ptr<StorageImpl>>(m, "UntypedStorage")
      .def(py::init([](int64_t nbytes, std::optional<Device> device) {
             EMBER_CHECK_KIND(nbytes >= 0, Value, "UntypedStorage: nbytes must be >= 0, got ",
                              nbytes);
             Tensor t = empty({nbytes}, ScalarType::UInt8, device.value_or(cpu_device()));
             return t->storage();
           }),
           py::arg("nbytes") = 0, py::kw_only(), py::arg("device") = py::none())
      .def("nbytes", [](const Storage& s) { return static_cast<int64_t>(s->nbytes); })
      .def("size", [](const Storage& s) { return static_cast<int64_t>(s->nbytes); })
      .def("__len__", [](const Storage& s) { return static_cast<int64_t>(s->nbytes); })
      .def("element_size", [](const Storage&) { return 1; })
      .def("data_ptr", [](const Storage& s) { return reinterpret_cast<uintptr_t>(s->data.get()); })
      .def_property_readonly("device", [](const Storage& s) { return s->device(); })
      .def_property_readonly("is_cuda",
                             [](const Storage& s) { return s->device().type == DeviceType::CUDA; })
      .def("resizable", [](const Storage& s) { return s->resizable; })
      .def(
          "resize_",
          [](const Storage& s, int64_t nbytes) {
            EMBER_CHECK(nbytes >= 0, "UntypedStorage.resize_: nbytes must be >= 0, got ", nbytes);
            if (static_cast<size_t>(nbytes) < s->nbytes)
              shrink_storage(s, static_cast<size_t>(nbytes));
            else
              grow_storage(s, static_cast<size_t>(nbytes));
            return s;
          },
          py::arg("size"))
      .def("_tensor",
           // A uint8 tensor over all the bytes (tolist, copies and comparisons go through it).
           [](const Storage& s) {
             const int64_t n = static_cast<int64_t>(s->nbytes);
             return std::make_shared<TensorImpl>(s, ScalarType::UInt8, DimVector{n}, DimVector{1},
                                                 0, std::make_shared<VersionCounter>());
           })
      .def(
          "_slice",
          // Bytes [start, stop) as a storage sharing s's memory (UntypedStorage[a:b]); the
          // slice keeps s alive and, like memory ember does not own, never grows.
          [](const Storage& s, int64_t start, int64_t stop) {
            EMBER_CHECK_KIND(0 <= start && start <= stop && static_cast<size_t>(stop) <= s->nbytes,
                             Index, "UntypedStorage slice [", start, ", ", stop,
                             ") out of range for storage of size ", s->nbytes);
            auto* keep = new Storage(s);
            DataPtr ptr(
                static_cast<char*>(s->data.get()) + start, keep,
                [](void* ctx) { delete static_cast<Storage*>(ctx); }, s->device());
            auto out =
                std::make_shared<StorageImpl>(std::move(ptr), static_cast<size_t>(stop - start));
            out->inference = s->inference;
            out->read_only = s->read_only;
            return out;
          },
          py::arg("start"), py::arg("stop"))
      .def("_same", [](const Storage& a, const Storage& b) { return a == b; });

  cls.def("untyped_storage", [](const Tensor& t) { return t->storage(); })
      .def(
          "_resize_",
          [](const Tensor& t, const DimVector& sizes, int format) {
            check_resize_grad(t);
            EMBER_CHECK_KIND(format >= 0 && format <= 3, Value, "resize_: unknown memory format");
            return resize_(t, sizes, static_cast<ResizeFormat>(format));
          },
          py::arg("sizes"), py::arg("format"))
      .def(
          "_set_storage_",
          [](const Tensor& t, const Storage& s, int64_t offset, const DimVector& size,
             const DimVector& stride) {
            check_set_grad(t);
            return set_storage_(t, s, offset, size, stride);
          },
          py::arg("source"), py::arg("storage_offset"), py::arg("size"), py::arg("stride"))
      .def(
          "_set_tensor_",
          [](const Tensor& t, const Tensor& source) {
            check_set_grad(t);
            return set_tensor_(t, source);
          },
          py::arg("source"))
      .def("_set_empty_", [](const Tensor& t) {
        check_set_grad(t);
        return set_empty_(t);
      });
}

}  // namespace ember
