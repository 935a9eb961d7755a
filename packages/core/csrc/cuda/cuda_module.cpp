// ember._C_cuda: the CUDA backend, built only with EMBER_CUDA=ON so the CPU build never needs
// the CUDA runtime. It links libember_engine.so, the engine ember._C uses, and importing it
// registers into that engine (core/backend.h describes the slot):
//   - a caching allocator over cudaMalloc as the allocator of DeviceType::CUDA;
//   - DeviceHooks: host <-> device copies on the current stream (copy_ops.cu);
//   - every kernel file's registrations (cuda_registry.h).
#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "core/allocator.h"
#include "core/error.h"
#include "cuda/cuda_context.h"
#include "cuda/cuda_registry.h"
#include "cuda/linalg_ops.h"
#include "cuda/random_ops.h"

namespace py = pybind11;

namespace ember {
namespace cuda {

std::vector<RegisterFn>& registrations() {
  static std::vector<RegisterFn> fns;
  return fns;
}

void register_all_kernels() {
  for (RegisterFn fn : registrations()) fn();
}

namespace {

class CudaRawAllocator final : public RawAllocator {
 public:
  void* raw_alloc(size_t nbytes) override {
    void* p = nullptr;
    cudaError_t err = cudaMalloc(&p, nbytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear the error so the caller can free its cache and retry
      return nullptr;
    }
    check(err, "cudaMalloc");
    return p;
  }
  void raw_free(void* ptr, size_t) override { check(cudaFree(ptr), "cudaFree"); }
};

CachingAllocator& cuda_allocator() {
  // Leaked: device memory may be released by storages during interpreter teardown.
  static CachingAllocator* a =
      new CachingAllocator(std::make_unique<CudaRawAllocator>(), Device{DeviceType::CUDA, 0});
  return *a;
}

}  // namespace
void register_copy_hooks();  // copy_ops.cu
}  // namespace cuda
}  // namespace ember

PYBIND11_MODULE(_C_cuda, m) {
  using namespace ember;
  using namespace ember::cuda;
  m.doc() = "ember's CUDA backend (allocator, copies, kernels, device queries).";
  py::module_::import("ember._C");  // loads the engine this module registers into
  register_all_kernels();
  if (device_count() > 0) {
    register_device_allocator(DeviceType::CUDA, &cuda_allocator());
    register_copy_hooks();
  }

  bind_linalg(m);  // linalg_ops.cpp: the TF32 switch
  bind_random(m);  // random_ops.cu: the per-device generators
  m.def("is_available", [] { return device_count() > 0; });
  m.def("device_count", &device_count);
  m.def("current_device", &current_device);
  m.def("set_device", &set_device);
  m.def("synchronize", [] { EMBER_CUDA_CHECK(cudaDeviceSynchronize()); });
  m.def("get_device_name", [](int d) {
    cudaDeviceProp prop{};
    EMBER_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    return std::string(prop.name);
  });
  m.def("memory_allocated", [] { return cuda_allocator().stats().allocated_bytes; });
  m.def("memory_reserved", [] { return cuda_allocator().stats().reserved_bytes; });
  m.def("max_memory_allocated", [] { return cuda_allocator().stats().allocated_bytes_peak; });
  m.def("empty_cache", [] { cuda_allocator().empty_cache(); });
  // Raw allocation round trip through the caching allocator (the device-side smoke test).
  m.def("_allocator_roundtrip", [](size_t nbytes) {
    DataPtr p = cuda_allocator().allocate(nbytes);
    EMBER_CUDA_CHECK(cudaMemset(p.get(), 0, nbytes));
    EMBER_CUDA_CHECK(cudaDeviceSynchronize());
    return cuda_allocator().stats().allocated_bytes;
  });
}
