// ember._C_cuda: the CUDA backend, built only with EMBER_CUDA=ON so the CPU build never needs
// the CUDA runtime. It links libember_engine.so, the engine ember._C uses, and importing it
// registers into that engine (core/backend.h describes the slot):
//   - a caching allocator per device over cudaMalloc as the allocator of DeviceType::CUDA
//     (cuda_allocator.h);
//   - DeviceHooks: host <-> device copies on the current stream (copy_ops.cu);
//   - every kernel file's registrations (cuda_registry.h).
#include <pybind11/pybind11.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>

#include "core/allocator.h"
#include "core/error.h"
#include "cuda/cuda_allocator.h"
#include "cuda/cuda_context.h"
#include "cuda/cuda_registry.h"
#include "cuda/cudnn_conv.h"
#include "cuda/device_checks.h"
#include "cuda/linalg_ops.h"
#include "cuda/nn_attention_mma.h"
#include "cuda/nn_attention_tc.h"
#include "cuda/nn_conv_depthwise.h"
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

void register_copy_hooks();         // copy_ops.cu
void bind_runtime(py::module_& m);  // cuda_runtime_py.cpp
void bind_ipc(py::module_& m);      // cuda_ipc.cpp
void bind_extras(py::module_& m);   // cuda_extras.cu
void install_fork_guard();          // cuda_context.cpp
namespace cupti {
void bind(py::module_& m);  // cupti_activity.cpp: ember.profiler's CUDA kernel timing
}
}  // namespace cuda
}  // namespace ember

namespace {
// On the H200 machine, test processes crashed at the first error message that formatted a
// number (std::ostream << unsigned long) after CUDA work, while messages of text alone worked.
// The C++ runtime creates its number-formatting state (the global locale's numpunct caches) on
// first use; this creates it now, before CUDA starts, in case state made after CUDA init is what
// breaks. A mitigation under test, not a known cause: EMBER_CUDA_NO_FORMAT_WARMUP=1 skips it
// (tools/gpu_smoke.py runs both ways to tell).
void warm_up_number_formatting() {
  const char* off = std::getenv("EMBER_CUDA_NO_FORMAT_WARMUP");
  if (off && *off && std::strcmp(off, "0") != 0) return;
  std::ostringstream os;
  os << 1UL << ' ' << -1L << ' ' << 1 << ' ' << 1.5 << ' ' << 1.5f << ' ' << true;
}
}  // namespace

PYBIND11_MODULE(_C_cuda, m) {
  using namespace ember;
  using namespace ember::cuda;
  m.doc() = "ember's CUDA backend (allocator, copies, kernels, device queries).";
  warm_up_number_formatting();      // before anything initializes CUDA (device_count below)
  py::module_::import("ember._C");  // loads the engine this module registers into
  register_all_kernels();
  if (device_count() > 0) {
    register_device_allocator(DeviceType::CUDA, &cuda_device_allocator());
    register_copy_hooks();
    install_fork_guard();  // a forked child cannot use CUDA: say so instead of failing oddly
  }

  bind_linalg(m);  // linalg_ops.cpp: the TF32 switch
  m.def("_get_sdpa_tensor_cores", &sdpa_tensor_cores,
        "Whether float16 / bfloat16 fused attention may use the tensor-core kernels (default on).");
  m.def("_set_sdpa_tensor_cores", &set_sdpa_tensor_cores, py::arg("on"),
        "Allows or forbids the tensor-core kernels of the fused attention (for A/B comparisons).");
  m.def("_get_sdpa_mma", &sdpa_mma,
        "Whether the tensor-core fused attention runs the mma.sync kernels (default on).");
  m.def("_set_sdpa_mma", &set_sdpa_mma, py::arg("on"),
        "Off: the tensor-core fused attention runs the WMMA kernels (for A/B comparisons).");
  bind_random(m);  // random_ops.cu: the per-device generators
  cudnn::bind(m);  // cudnn_conv.cpp: cuDNN loading, switches and algorithm cache
  cupti::bind(m);  // cupti_activity.cpp: CUPTI kernel timing for ember.profiler
  // nn_conv_depthwise.cu: the A/B switch of the native depthwise kernels, and their pass count.
  m.def("_set_depthwise_native", &depthwise::set_native_enabled, py::arg("on"));
  m.def("_depthwise_native", &depthwise::native_enabled);
  m.def("_depthwise_native_passes", &depthwise::native_passes);
  // device_checks.cpp: kernels' input errors raised at the op (default) or at the next wait.
  m.def("_set_deferred_errors", &checks::set_deferred, py::arg("on"),
        "Errors that kernels find in their inputs (embedding indices, loss targets) are raised "
        "at the next wait for the device instead of at the op, which then does not wait.");
  m.def("_deferred_errors", &checks::deferred);
  m.def("_deferred_errors_pending", &checks::pending, py::arg("device") = 0);
  m.def("is_available", [] { return device_count() > 0; });
  m.def("device_count", &device_count);
  m.def("current_device", &current_device);
  m.def("set_device", &set_device);
  m.def("get_device_name", [](int d) {
    cudaDeviceProp prop{};
    EMBER_CUDA_CHECK(cudaGetDeviceProperties(&prop, d));
    return std::string(prop.name);
  });
  bind_runtime(m);
  bind_ipc(m);     // cuda_ipc.cpp: CUDA tensors across processes
  bind_extras(m);  // cuda_extras.cu: arch list, peer access, memory fraction, NVTX, sync debug
  // Raw allocation round trip through the caching allocator (the device-side smoke test).
  m.def("_allocator_roundtrip", [](size_t nbytes) {
    DataPtr p = cuda_device_allocator().allocate(nbytes);
    EMBER_CUDA_CHECK(cudaMemset(p.get(), 0, nbytes));
    EMBER_CUDA_CHECK(cudaDeviceSynchronize());
    return device_caching_allocator().stats().allocated_bytes;
  });
}
