// Bindings of the smaller torch.cuda functions (ember/cuda.py builds the public API on them):
// the architectures _C_cuda was compiled for, peer access, the per-process memory fraction, NVTX
// ranges and marks (NVTX v3, header-only: a
// no-op unless a profiler such as Nsight Systems is attached), and the sync debug mode.
// A .cu file so that nvcc's __CUDA_ARCH_LIST__ (the compiled architectures) is defined.
#include <nvtx3/nvToolsExt.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda/cuda_context.h"
#include "cuda/sync_debug.h"

namespace py = pybind11;

namespace ember {
namespace cuda {

// cuda_allocator.cpp: torch.cuda.set_per_process_memory_fraction. Device `index`'s caching
// allocator may hold at most fraction * the device's total memory from cudaMalloc (1: no limit of
// ember's own); a request past it frees the cache and retries, then raises OutOfMemoryError.
void set_memory_fraction(double fraction, int index);
double memory_fraction(int index);

namespace {

std::atomic<int> g_sync_debug_mode{0};

// The compute capabilities (major * 10 + minor) of the code in this module.
std::vector<int> compiled_archs() {
#ifdef __CUDA_ARCH_LIST__
  const int archs[] = {__CUDA_ARCH_LIST__};  // e.g. 800, 900
  std::vector<int> out;
  for (int a : archs) {
    const int cc = a / 10;
    bool seen = false;
    for (int v : out) seen = seen || v == cc;
    if (!seen) out.push_back(cc);
  }
  return out;
#else
  return {};
#endif
}

void check_device_index(int d, const char* op) {
  EMBER_CHECK_KIND(d >= 0 && d < device_count(), Value, op, ": invalid device index ", d, " (",
                   device_count(), " CUDA device(s) visible)");
}

}  // namespace

void set_sync_debug_mode(int mode) {
  EMBER_CHECK_KIND(mode >= 0 && mode <= 2, Value, "set_sync_debug_mode: invalid mode ", mode,
                   " (expected 0 / \"default\", 1 / \"warn\" or 2 / \"error\")");
  g_sync_debug_mode.store(mode, std::memory_order_relaxed);
}

int sync_debug_mode() { return g_sync_debug_mode.load(std::memory_order_relaxed); }

void sync_debug_check(const char* what) {
  const int mode = sync_debug_mode();
  if (mode == 0) return;
  const std::string msg = std::string(what) + ": called a synchronizing CUDA operation";
  if (mode == 2) EMBER_FAIL(Runtime, msg);
  // A Python UserWarning (the GIL may have been released around the op: take it). A warning
  // filter that turns it into an error raises it as ember's error instead.
  py::gil_scoped_acquire gil;
  if (PyErr_WarnEx(PyExc_UserWarning, msg.c_str(), 1) != 0) {
    PyErr_Clear();
    EMBER_FAIL(Runtime, msg, " (a warning filter made the warning an error)");
  }
}

void bind_extras(py::module_& m) {
  m.def("_arch_list", &compiled_archs,
        "Compute capabilities (major * 10 + minor) ember._C_cuda holds code for.");
  m.def(
      "_can_device_access_peer",
      [](int device, int peer) {
        check_device_index(device, "can_device_access_peer");
        check_device_index(peer, "can_device_access_peer");
        if (device == peer) return false;  // not its own peer (and the runtime may refuse)
        int ok = 0;
        EMBER_CUDA_CHECK(cudaDeviceCanAccessPeer(&ok, device, peer));
        return ok != 0;
      },
      py::arg("device"), py::arg("peer"));
  m.def("_set_memory_fraction", &set_memory_fraction, py::arg("fraction"), py::arg("device"));
  m.def("_get_memory_fraction", &memory_fraction, py::arg("device"));
  m.def("_set_sync_debug_mode", &set_sync_debug_mode, py::arg("mode"));
  m.def("_get_sync_debug_mode", &sync_debug_mode);
  // NVTX: the nesting depth after a push / before a pop (negative when nothing is attached to
  // record it: NVTX's own convention), a start/end range id.
  m.def(
      "_nvtx_range_push", [](const std::string& msg) { return nvtxRangePushA(msg.c_str()); },
      py::arg("msg"));
  m.def("_nvtx_range_pop", [] { return nvtxRangePop(); });
  m.def(
      "_nvtx_range_start",
      [](const std::string& msg) { return static_cast<uint64_t>(nvtxRangeStartA(msg.c_str())); },
      py::arg("msg"));
  m.def(
      "_nvtx_range_end", [](uint64_t id) { nvtxRangeEnd(static_cast<nvtxRangeId_t>(id)); },
      py::arg("range_id"));
  m.def("_nvtx_mark", [](const std::string& msg) { nvtxMarkA(msg.c_str()); }, py::arg("msg"));
}

}  // namespace cuda
}  // namespace ember
