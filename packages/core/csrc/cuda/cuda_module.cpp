// ember._C_cuda: the CUDA device plumbing, built only with EMBER_CUDA=ON so the CPU build never
// needs the CUDA runtime. It links libember_engine.so, the engine ember._C uses, and loading it
// registers a CachingAllocator over cudaMalloc/cudaFree as the allocator of DeviceType::CUDA
// (core/backend.h describes the slot). Kernels come with the CUDA backend issue and register
// into the generated per-op dispatch tables the same way.
#include <cuda_runtime.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "core/allocator.h"
#include "core/error.h"

namespace py = pybind11;

namespace ember {
namespace {

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    EMBER_FAIL(Runtime, "CUDA error in ", what, ": ", cudaGetErrorString(err));
}

class CudaRawAllocator final : public RawAllocator {
 public:
  void* raw_alloc(size_t nbytes) override {
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, nbytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear the sticky error so the caller can retry
      return nullptr;
    }
    check_cuda(err, "cudaMalloc");
    return p;
  }
  void raw_free(void* ptr, size_t) override { check_cuda(cudaFree(ptr), "cudaFree"); }
};

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

CachingAllocator& cuda_allocator() {
  // Leaked: device memory may be released by storages during interpreter teardown.
  static CachingAllocator* a =
      new CachingAllocator(std::make_unique<CudaRawAllocator>(), Device{DeviceType::CUDA, 0});
  return *a;
}

}  // namespace
}  // namespace ember

PYBIND11_MODULE(_C_cuda, m) {
  using namespace ember;
  m.doc() = "ember's CUDA device plumbing (allocator registration, device queries).";
  py::module_::import("ember._C");  // loads the engine this module registers into
  if (device_count() > 0) register_device_allocator(DeviceType::CUDA, &cuda_allocator());

  m.def("is_available", [] { return device_count() > 0; });
  m.def("device_count", &device_count);
  m.def("current_device", [] {
    int d = 0;
    check_cuda(cudaGetDevice(&d), "cudaGetDevice");
    return d;
  });
  m.def("set_device", [](int d) { check_cuda(cudaSetDevice(d), "cudaSetDevice"); });
  m.def("synchronize", [] { check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); });
  m.def("get_device_name", [](int d) {
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, d), "cudaGetDeviceProperties");
    return std::string(prop.name);
  });
  m.def("memory_allocated", [] { return cuda_allocator().stats().allocated_bytes; });
  m.def("memory_reserved", [] { return cuda_allocator().stats().reserved_bytes; });
  m.def("max_memory_allocated", [] { return cuda_allocator().stats().allocated_bytes_peak; });
  m.def("empty_cache", [] { cuda_allocator().empty_cache(); });
  // Raw allocation round trip through the caching allocator (the device-side smoke test).
  m.def("_allocator_roundtrip", [](size_t nbytes) {
    DataPtr p = cuda_allocator().allocate(nbytes);
    check_cuda(cudaMemset(p.get(), 0, nbytes), "cudaMemset");
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return cuda_allocator().stats().allocated_bytes;
  });
}
