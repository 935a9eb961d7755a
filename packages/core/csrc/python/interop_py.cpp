// Zero-copy exchange with NumPy (the buffer protocol: NumPy needs no import for it) and with any
// DLPack producer/consumer.
#include <cstring>

#include "autograd/autograd.h"
#include "core/storageless.h"
#include "python/tensor_py.h"

namespace ember {
namespace {

const char* buffer_format(ScalarType t) {
  switch (t) {
    case ScalarType::Bool:
      return "?";
    case ScalarType::UInt8:
      return "B";
    case ScalarType::Int8:
      return "b";
    case ScalarType::Int16:
      return "h";
    case ScalarType::Int32:
      return "i";
    case ScalarType::Int64:
      return "q";
    case ScalarType::Float16:
      return "e";
    case ScalarType::Float32:
      return "f";
    case ScalarType::Float64:
      return "d";
    case ScalarType::Complex64:
      return "Zf";
    case ScalarType::Complex128:
      return "Zd";
    case ScalarType::UInt16:
      return "H";
    case ScalarType::UInt32:
      return "I";
    case ScalarType::UInt64:
      return "Q";
    default:
      EMBER_FAIL(Type, "numpy: can't convert a ", dtype_name(t),
                 " tensor to NumPy (NumPy has no such dtype); convert it first, e.g. .float()");
  }
}

bool dtype_from_format(std::string f, int64_t itemsize, ScalarType* out) {
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<')) f = f.substr(1);
  if (f == "Zf" || f == "Zd") {
    *out = f == "Zf" ? ScalarType::Complex64 : ScalarType::Complex128;
    return itemsize == (f == "Zf" ? 8 : 16);
  }
  if (f.size() != 1) return false;
  switch (f[0]) {
    case '?':
      *out = ScalarType::Bool;
      return true;
    case 'B':
      *out = ScalarType::UInt8;
      return true;
    case 'b':
      *out = ScalarType::Int8;
      return true;
    case 'h':
      *out = ScalarType::Int16;
      return true;
    case 'i':
    case 'l':
    case 'q':
      if (itemsize == 4) {
        *out = ScalarType::Int32;
        return true;
      }
      if (itemsize == 8) {
        *out = ScalarType::Int64;
        return true;
      }
      return false;
    case 'H':
      *out = ScalarType::UInt16;
      return itemsize == 2;
    case 'I':
    case 'L':
    case 'Q':
      if (itemsize == 4 || itemsize == 8) {
        *out = itemsize == 4 ? ScalarType::UInt32 : ScalarType::UInt64;
        return true;
      }
      return false;
    case 'e':
      *out = ScalarType::Float16;
      return true;
    case 'f':
      *out = ScalarType::Float32;
      return true;
    case 'd':
      *out = ScalarType::Float64;
      return true;
    default:
      return false;
  }
}

// Keeps the exporter's Py_buffer until the storage dies.
void release_buffer(void* ctx) {
  py::gil_scoped_acquire gil;
  auto* view = static_cast<Py_buffer*>(ctx);
  PyBuffer_Release(view);
  delete view;
}

// ---- DLPack (the ABI is fixed by the DLPack specification) ----------------------------------
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLComplex = 5, kDLBool = 6 };
enum { kDLCPU = 1, kDLCUDA = 2 };

struct DLPackHolder {  // what our exported DLManagedTensor owns
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed;
};

DLDataType to_dl(ScalarType t) {
  uint8_t bits = static_cast<uint8_t>(itemsize(t) * 8);
  switch (t) {
    case ScalarType::Bool:
      return {kDLBool, 8, 1};
    case ScalarType::UInt8:
    case ScalarType::UInt16:
    case ScalarType::UInt32:
    case ScalarType::UInt64:
      return {kDLUInt, bits, 1};
    case ScalarType::Float8_e4m3fn:
    case ScalarType::Float8_e5m2:
      EMBER_FAIL(Type, "to_dlpack: ", dtype_name(t), " tensors can't be exported (DLPack has no ",
                 "such dtype); convert them first, e.g. .float()");
    case ScalarType::BFloat16:
      return {kDLBfloat, 16, 1};
    case ScalarType::Complex64:
    case ScalarType::Complex128:
      return {kDLComplex, bits, 1};
    default:
      return {static_cast<uint8_t>(is_floating(t) ? kDLFloat : kDLInt), bits, 1};
  }
}

ScalarType from_dl(DLDataType d) {
  EMBER_CHECK_KIND(d.lanes == 1, Type, "from_dlpack: vector dtypes (lanes=", d.lanes,
                   ") are not supported");
  if (d.code == kDLBool && d.bits == 8) return ScalarType::Bool;
  if (d.code == kDLUInt) {
    switch (d.bits) {
      case 8:
        return ScalarType::UInt8;
      case 16:
        return ScalarType::UInt16;
      case 32:
        return ScalarType::UInt32;
      case 64:
        return ScalarType::UInt64;
    }
  }
  if (d.code == kDLBfloat && d.bits == 16) return ScalarType::BFloat16;
  if (d.code == kDLComplex && d.bits == 64) return ScalarType::Complex64;
  if (d.code == kDLComplex && d.bits == 128) return ScalarType::Complex128;
  if (d.code == kDLInt) {
    switch (d.bits) {
      case 8:
        return ScalarType::Int8;
      case 16:
        return ScalarType::Int16;
      case 32:
        return ScalarType::Int32;
      case 64:
        return ScalarType::Int64;
    }
  }
  if (d.code == kDLFloat) {
    switch (d.bits) {
      case 16:
        return ScalarType::Float16;
      case 32:
        return ScalarType::Float32;
      case 64:
        return ScalarType::Float64;
    }
  }
  EMBER_FAIL(Type, "from_dlpack: unsupported DLPack dtype (code ", int(d.code), ", bits ",
             int(d.bits), ")");
}

void dlpack_capsule_destructor(PyObject* capsule) {
  // Only called for capsules nobody consumed (a consumer renames them "used_dltensor").
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (m && m->deleter) m->deleter(m);
  }
}

void release_dlpack(void* ctx) {
  py::gil_scoped_acquire gil;  // a Python producer's deleter may touch Python objects
  auto* m = static_cast<DLManagedTensor*>(ctx);
  if (m->deleter) m->deleter(m);
}

}  // namespace

Tensor tensor_from_buffer(py::handle obj, bool share) {
  (void)share;
  auto view = std::make_unique<Py_buffer>();
  if (PyObject_GetBuffer(obj.ptr(), view.get(), PyBUF_RECORDS_RO | PyBUF_FORMAT) != 0) {
    PyErr_Clear();
    if (PyObject_GetBuffer(obj.ptr(), view.get(), PyBUF_FULL_RO) != 0)
      throw py::error_already_set();
  }
  ScalarType dt;
  std::string fmt = view->format ? view->format : "B";
  if (!dtype_from_format(fmt, view->itemsize, &dt)) {
    std::string tn = Py_TYPE(obj.ptr())->tp_name;
    const uint16_t one = 1;
    const bool little = *reinterpret_cast<const unsigned char*>(&one) == 1;
    const char order = fmt.empty() ? '=' : fmt[0];
    const bool foreign =
        view->itemsize > 1 && (little ? order == '>' || order == '!' : order == '<');
    PyBuffer_Release(view.get());
    // A byte-swapped array ('>f4' on this machine): PyTorch's ValueError, which a program
    // catching the byte-order case expects (it was a TypeError listing the supported types).
    if (foreign)
      EMBER_FAIL(Value, "can't convert ", tn, " with buffer format '", fmt,
                 "': its byte order is not the native one; convert it first "
                 "(array.astype(array.dtype.newbyteorder('=')))");
    EMBER_FAIL(Type, "can't convert ", tn, " with buffer format '", fmt,
               "'. The only supported types are: float64, float32, float16, complex64, "
               "complex128, int64, int32, int16, int8, uint64, uint32, uint16, uint8, and bool");
  }
  DimVector sizes, strides;
  for (int i = 0; i < view->ndim; ++i) {
    sizes.push_back(view->shape[i]);
    Py_ssize_t st = view->strides ? view->strides[i] : 0;
    if (st % view->itemsize != 0 || st < 0) {
      PyBuffer_Release(view.get());
      EMBER_FAIL(Value,
                 "from_numpy: arrays with negative or non-itemsize-multiple strides are not "
                 "supported; make a copy first (e.g. numpy.ascontiguousarray)");
    }
    strides.push_back(st / view->itemsize);
  }
  if (!view->strides) strides = contiguous_strides(sizes);
  int64_t extent = 1;
  for (int64_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) extent = 0;
  }
  if (extent) {
    for (int64_t d = 0; d < sizes.size(); ++d) extent += (sizes[d] - 1) * strides[d];
  }
  size_t nbytes = static_cast<size_t>(extent * view->itemsize);
  void* data = view->buf;
  Py_buffer* raw = view.release();
  const bool read_only = raw->readonly != 0;
  auto storage =
      std::make_shared<StorageImpl>(DataPtr(data, raw, &release_buffer, cpu_device()), nbytes);
  // Writes would change memory its owner promised not to change, or crash on a read-only
  // mapping (np.memmap(mode='r')): they raise instead (TensorImpl::check_writable).
  storage->read_only = read_only;
  return std::make_shared<TensorImpl>(std::move(storage), dt, sizes, strides, 0,
                                      std::make_shared<VersionCounter>());
}

void bind_interop(py::module_& m, TensorClass& cls) {
  m.def(
      "from_numpy",
      [](py::handle arr) {
        // Only NumPy arrays (as torch): a Tensor or bytearray has a buffer too, but sharing one
        // is frombuffer's / as_tensor's job.
        const py::object ndarray = py::module_::import("numpy").attr("ndarray");
        if (!PyObject_CheckBuffer(arr.ptr()) || !py::isinstance(arr, ndarray))
          throw py::type_error(std::string("from_numpy: expected np.ndarray (got ") +
                               Py_TYPE(arr.ptr())->tp_name + ")");
        return tensor_from_buffer(arr, true);
      },
      py::arg("ndarray"));
  m.def("_from_buffer", [](py::handle obj) { return tensor_from_buffer(obj, true); });

  cls.def_buffer([](TensorImpl& t) -> py::buffer_info {
    if (is_storageless(t)) fail_storageless("the buffer protocol");
    // NumPy reads a buffer before __array__: refusing here sends np.asarray(t) to Tensor.__array__
    // (numpy()), which raises PyTorch's error, instead of letting the values escape autograd.
    AutogradMeta* m = t.autograd_meta();
    EMBER_CHECK(!(m && m->requires_grad && autograd::grad_enabled()),
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                "instead.");
    EMBER_CHECK_KIND(t.device().is_cpu(), Type, "can't convert ", t.device().str(),
                     " device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
                     "memory first.");
    std::vector<py::ssize_t> shape(t.sizes().begin(), t.sizes().end());
    std::vector<py::ssize_t> strides;
    for (int64_t s : t.strides()) strides.push_back(s * t.itemsize());
    return py::buffer_info(t.data(), t.itemsize(), buffer_format(t.dtype()), t.dim(), shape,
                           strides, /*readonly=*/t.storage() && t.storage()->read_only);
  });

  cls.def("__dlpack__", [](const Tensor& t, py::kwargs) {
    EMBER_CHECK_KIND(t->device().is_cpu() || t->device().type == DeviceType::CUDA, Type,
                     "__dlpack__: tensors on ", t->device().str(),
                     " can't be exported through DLPack (cpu and cuda tensors can)");
    // DLPack (as ember speaks it) can't say "read-only": the consumer would write into it.
    if (t->storage() && t->storage()->read_only)
      throw py::buffer_error(
          "__dlpack__: can't export a read-only tensor (it shares a non-writable NumPy array or "
          "buffer) since signalling read-only is unsupported by DLPack; export tensor.clone()");
    if (is_storageless(*t)) fail_storageless("__dlpack__");
    auto h = std::make_unique<DLPackHolder>();
    h->tensor = t;
    h->shape.assign(t->sizes().begin(), t->sizes().end());
    h->strides.assign(t->strides().begin(), t->strides().end());
    DLTensor& dl = h->managed.dl_tensor;
    dl.data = t->storage()->data.get();
    dl.byte_offset = static_cast<uint64_t>(t->storage_offset() * t->itemsize());
    dl.device = {t->device().is_cpu() ? kDLCPU : kDLCUDA, std::max<int32_t>(t->device().index, 0)};
    dl.ndim = static_cast<int32_t>(t->dim());
    dl.dtype = to_dl(t->dtype());
    dl.shape = h->shape.data();
    dl.strides = h->strides.data();
    h->managed.manager_ctx = h.get();
    h->managed.deleter = [](DLManagedTensor* self) {
      delete static_cast<DLPackHolder*>(self->manager_ctx);
    };
    DLManagedTensor* managed = &h.release()->managed;
    return py::reinterpret_steal<py::object>(
        PyCapsule_New(managed, "dltensor", dlpack_capsule_destructor));
  });
  cls.def("__dlpack_device__", [](const Tensor& t) {
    return py::make_tuple(t->device().is_cpu() ? int(kDLCPU) : int(kDLCUDA),
                          std::max<int>(t->device().index, 0));
  });

  m.def("_from_dlpack_capsule", [](py::capsule cap) {
    PyObject* c = cap.ptr();
    EMBER_CHECK_KIND(PyCapsule_IsValid(c, "dltensor"), Type,
                     "from_dlpack: expected an unconsumed 'dltensor' capsule");
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    const DLTensor& dl = m->dl_tensor;
    EMBER_CHECK(dl.device.device_type == kDLCPU,
                "from_dlpack: only CPU tensors are supported in this build (device type ",
                dl.device.device_type, ")");
    ScalarType dt = from_dl(dl.dtype);
    DimVector sizes(dl.shape, dl.shape + dl.ndim);
    DimVector strides =
        dl.strides ? DimVector(dl.strides, dl.strides + dl.ndim) : contiguous_strides(sizes);
    int64_t extent = 1;
    for (int64_t d = 0; d < sizes.size(); ++d) extent = sizes[d] == 0 ? 0 : extent;
    if (extent)
      for (int64_t d = 0; d < sizes.size(); ++d) extent += (sizes[d] - 1) * strides[d];
    char* data = static_cast<char*>(dl.data) + dl.byte_offset;
    PyCapsule_SetName(c, "used_dltensor");
    auto storage = std::make_shared<StorageImpl>(DataPtr(data, m, &release_dlpack, cpu_device()),
                                                 static_cast<size_t>(extent * itemsize(dt)));
    return std::make_shared<TensorImpl>(std::move(storage), dt, sizes, strides, 0,
                                        std::make_shared<VersionCounter>());
  });
}

}  // namespace ember
