// A device backend that lives in its own extension module and reaches ember only through the
// backend slot (core/backend.h, ops/op_types.h): the tests build it with
// ember.utils.cpp_extension.load and run tensors, factories, copies, a few ops and autograd on
// it. Its "device memory" is host memory from its own allocator, so its kernels are plain loops;
// what it proves is the plumbing a real backend (ember._C_cuda) uses:
//   - an allocator (register_device_allocator), counted so tests see the memory on the device;
//   - DeviceHooks: byte copies between host and device memory;
//   - kernels registered by op name: _copy_from (copies within the device), add, mul, neg,
//     sum, mm. Anything else raises NotImplementedError naming the op and the device.
#include <Python.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/backend.h"
#include "kernels/iterator.h"
#include "ops.h"

namespace {
using namespace ember;

constexpr DeviceType kDevice = DeviceType::PrivateUse1;
std::atomic<int64_t> g_live_bytes{0}, g_copies_to_host{0}, g_copies_from_host{0}, g_kernels{0};

// ---- memory -----------------------------------------------------------------------------------
struct Block {
  void* ptr;
  size_t nbytes;
};

void free_block(void* ctx) {
  auto* b = static_cast<Block*>(ctx);
  g_live_bytes -= static_cast<int64_t>(b->nbytes);
  std::free(b->ptr);
  delete b;
}

class DeviceAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t nbytes) override {
    const size_t rounded = (nbytes + 63) / 64 * 64 + 64;
    void* p = std::aligned_alloc(64, rounded);
    if (!p) EMBER_FAIL(OutOfMemory, "test backend: out of memory allocating ", nbytes, " bytes");
    g_live_bytes += static_cast<int64_t>(nbytes);
    return DataPtr(p, new Block{p, nbytes}, &free_block, Device{kDevice, 0});
  }
};

void copy_to_host(void* dst, const void* src, size_t n, int, bool) {
  g_copies_to_host++;
  std::memcpy(dst, src, n);
}
void copy_from_host(void* dst, const void* src, size_t n, int, bool) {
  g_copies_from_host++;
  std::memcpy(dst, src, n);
}
const DeviceHooks kHooks{&copy_to_host, &copy_from_host, nullptr, nullptr};

// ---- kernels ----------------------------------------------------------------------------------
// The dtypes this backend supports; anything else is a clear error naming the op.
#define TB_DISPATCH(dtype, op, ...)                                                             \
  [&] {                                                                                         \
    switch (dtype) {                                                                            \
      case ScalarType::Float32: {                                                               \
        using scalar_t = float;                                                                 \
        return __VA_ARGS__();                                                                   \
      }                                                                                         \
      case ScalarType::Float64: {                                                               \
        using scalar_t = double;                                                                \
        return __VA_ARGS__();                                                                   \
      }                                                                                         \
      case ScalarType::Int64: {                                                                 \
        using scalar_t = int64_t;                                                               \
        return __VA_ARGS__();                                                                   \
      }                                                                                         \
      case ScalarType::Bool: {                                                                  \
        using scalar_t = bool;                                                                  \
        return __VA_ARGS__();                                                                   \
      }                                                                                         \
      default:                                                                                  \
        EMBER_FAIL(Type, op, ": the test backend has no kernel for dtype ", dtype_name(dtype)); \
    }                                                                                           \
  }()

template <class T>
T& at(char* base, int64_t i, int64_t stride) {
  return *reinterpret_cast<T*>(base + i * stride);
}

Tensor copy_from(const Tensor& self, const Tensor& dst, bool) {
  g_kernels++;
  TensorIterator it("copy_");
  it.add_output(dst).add_input(self).resize_outputs(false).no_casting();
  if (self->numel() == 1) it.allow_overlapping_output();
  it.build();
  TB_DISPATCH(dst->dtype(), "copy_", [&] {
    using D = scalar_t;
    TB_DISPATCH(it.dtype(1), "copy_", [&] {
      using S = scalar_t;
      it.for_each([](char** d, const int64_t* s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) at<D>(d[0], i, s[0]) = static_cast<D>(at<S>(d[1], i, s[1]));
      });
    });
  });
  return dst;
}

template <class F>
Tensor binary(const char* op, const Tensor& self, const TensorOrScalar& other, const Tensor& out,
              F f) {
  g_kernels++;
  TensorIterator it(op);
  it.add_output(out).add_input(self).add_input(other).keep_layout().build();
  TB_DISPATCH(it.common_dtype(), op, [&] {
    using T = scalar_t;
    it.for_each([&](char** d, const int64_t* s, int64_t n) {
      for (int64_t i = 0; i < n; ++i)
        at<T>(d[0], i, s[0]) = f(at<T>(d[1], i, s[1]), at<T>(d[2], i, s[2]));
    });
  });
  it.finish();
  return it.output();
}

Tensor add(const Tensor& self, const TensorOrScalar& other, const Scalar& alpha,
           const Tensor& out) {
  const double a = alpha.to_double();
  return binary("add", self, other, out, [a](auto x, auto y) {
    using T = decltype(x);
    return static_cast<T>(x + static_cast<T>(a) * y);
  });
}

Tensor mul(const Tensor& self, const TensorOrScalar& other, const Tensor& out) {
  return binary("mul", self, other, out,
                [](auto x, auto y) { return static_cast<decltype(x)>(x * y); });
}

Tensor neg(const Tensor& self, const Tensor& out) {
  return binary("neg", self, TensorOrScalar(Scalar(int64_t(-1))), out,
                [](auto x, auto y) { return static_cast<decltype(x)>(x * y); });
}

// sum over dims: the output, viewed with stride 0 along the reduced dims, accumulates in one
// serial pass of the iterator.
Tensor sum(const Tensor& self, const std::optional<DimVector>& dim, bool keepdim,
           std::optional<ScalarType> dtype) {
  g_kernels++;
  const int64_t nd = self->dim();
  std::vector<bool> reduce(nd, !dim || dim->empty());
  if (dim)
    for (int64_t d : *dim) reduce[wrap_dim(d, nd, "sum")] = true;
  const ScalarType out_dt =
      dtype.value_or(is_floating(self->dtype()) ? self->dtype() : ScalarType::Int64);
  DimVector kept, keep_sizes;
  for (int64_t d = 0; d < nd; ++d) {
    keep_sizes.push_back(reduce[d] ? 1 : self->size(d));
    if (!reduce[d]) kept.push_back(self->size(d));
  }
  Tensor out = empty(keep_sizes, out_dt, self->device());
  std::memset(out->data(), 0, out->numel() * out->itemsize());
  DimVector st = out->strides();
  for (int64_t d = 0; d < nd; ++d)
    if (reduce[d]) st[d] = 0;
  Tensor acc = make_view(out, self->sizes(), st, 0);
  TensorIterator it("sum");
  it.add_output(acc).add_input(self).resize_outputs(false).allow_overlapping_output().no_casting();
  it.build();
  TB_DISPATCH(out_dt, "sum", [&] {
    using D = scalar_t;
    TB_DISPATCH(self->dtype(), "sum", [&] {
      using S = scalar_t;
      it.serial_for_each(
          [](char** d, const int64_t* s, int64_t n) {
            for (int64_t i = 0; i < n; ++i)
              at<D>(d[0], i, s[0]) =
                  static_cast<D>(at<D>(d[0], i, s[0]) + static_cast<D>(at<S>(d[1], i, s[1])));
          },
          0, it.numel());
    });
  });
  out->reset_version();
  if (keepdim) return out;
  return make_view(out, kept, contiguous_strides(kept), 0);
}

Tensor mm(const Tensor& a, const Tensor& b) {
  g_kernels++;
  EMBER_CHECK(a->dim() == 2 && b->dim() == 2 && a->size(1) == b->size(0), "mm: shapes ",
              shape_str(a->sizes()), " and ", shape_str(b->sizes()), " cannot be multiplied");
  EMBER_CHECK(a->dtype() == b->dtype(), "mm: dtypes differ");
  const int64_t M = a->size(0), K = a->size(1), N = b->size(1);
  Tensor out = empty({M, N}, a->dtype(), a->device());
  TB_DISPATCH(a->dtype(), "mm", [&] {
    using T = scalar_t;
    if constexpr (!std::is_same_v<T, bool>) {
      const T* pa = a->data_as<T>();
      const T* pb = b->data_as<T>();
      T* po = out->data_as<T>();
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          T acc = 0;
          for (int64_t k = 0; k < K; ++k)
            acc +=
                pa[i * a->stride(0) + k * a->stride(1)] * pb[k * b->stride(0) + j * b->stride(1)];
          po[i * N + j] = acc;
        }
    } else {
      EMBER_FAIL(Type, "mm: the test backend has no bool kernel");
    }
  });
  return out;
}

DeviceAllocator g_allocator;

PyObject* stats(PyObject*, PyObject*) {
  return Py_BuildValue("{s:L,s:L,s:L,s:L}", "live_bytes", (long long)g_live_bytes.load(),
                       "copies_to_host", (long long)g_copies_to_host.load(), "copies_from_host",
                       (long long)g_copies_from_host.load(), "kernels",
                       (long long)g_kernels.load());
}

PyMethodDef kMethods[] = {{"stats", stats, METH_NOARGS, "allocator and copy counters"},
                          {nullptr, nullptr, 0, nullptr}};
PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "ember_test_backend",
                       "a PrivateUse1 backend for ember's tests", -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit_ember_test_backend() {
  try {
    register_device_allocator(kDevice, &g_allocator);
    register_device_hooks(kDevice, &kHooks);
    register_kernel("_copy_from", kDevice, &copy_from);
    register_kernel("add", kDevice, &add);
    register_kernel("mul", kDevice, &mul);
    register_kernel("neg", kDevice, &neg);
    register_kernel("sum", kDevice, &sum);
    register_kernel("mm", kDevice, &mm);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  return PyModule_Create(&kModule);
}
