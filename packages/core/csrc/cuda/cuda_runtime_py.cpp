// The Python side of the CUDA runtime (bind_runtime, called by cuda_module.cpp): devices,
// streams, events, the caching allocators' statistics and snapshots, record_stream and pinned
// memory. ember/cuda.py builds the public API (Stream, Event, device, ...) on these; streams and
// events cross as integers (their handles' values; the legacy default stream is 0).
#include <dlfcn.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <locale>
#include <string>

#include "core/allocator.h"
#include "core/tensor.h"
#include "cuda/cuda_allocator.h"
#include "cuda/cuda_context.h"
#include "cuda/device_checks.h"
#include "cuda/pinned_allocator.h"
#include "cuda/streams.h"
#include "kernels/iterator.h"
#include "ops.h"

namespace py = pybind11;

namespace ember {
namespace cuda {

void sleep_on_current_stream(int64_t cycles);  // sleep.cu

namespace {

bool g_initialized = false;

cudaStream_t as_stream(int64_t h) { return reinterpret_cast<cudaStream_t>(h); }
int64_t as_handle(cudaStream_t s) { return reinterpret_cast<int64_t>(s); }
cudaEvent_t as_event(int64_t h) { return reinterpret_cast<cudaEvent_t>(h); }

void init() {
  if (device_count() == 0)
    EMBER_FAIL(Runtime, "ember.cuda: no CUDA device available (no GPU or driver is present)");
  EMBER_CUDA_CHECK(cudaFree(nullptr));  // creates the primary context of the current device
  g_initialized = true;
}

py::dict stats_dict(const MemoryStats& s) {
  py::dict d;
  d["allocated_bytes.all.current"] = s.allocated_bytes;
  d["allocated_bytes.all.peak"] = s.allocated_bytes_peak;
  d["reserved_bytes.all.current"] = s.reserved_bytes;
  d["reserved_bytes.all.peak"] = s.reserved_bytes_peak;
  d["active_bytes.all.current"] = s.active_bytes;
  d["active_bytes.all.peak"] = s.active_bytes_peak;
  d["requested_bytes.all.current"] = s.requested_bytes;
  d["inactive_split_bytes.all.current"] = s.reserved_bytes - s.active_bytes;
  d["allocation.all.current"] = s.active_blocks - s.pending_event_blocks;
  d["active.all.current"] = s.active_blocks;
  d["segment.all.current"] = s.segments;
  d["segment.all.peak"] = s.segments_peak;
  d["pending_event_blocks"] = s.pending_event_blocks;
  d["num_alloc"] = s.num_allocs;
  d["num_free"] = s.num_frees;
  d["num_device_alloc"] = s.num_raw_allocs;
  d["num_device_free"] = s.num_raw_frees;
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_splits"] = s.num_splits;
  d["num_merges"] = s.num_merges;
  d["num_cache_hits"] = s.num_cache_hits;
  return d;
}

py::list snapshot_list(const std::vector<SegmentInfo>& segs, int device) {
  py::list out;
  for (const auto& s : segs) {
    py::dict d;
    d["device"] = device;
    d["address"] = s.address;
    d["total_size"] = s.total_size;
    d["stream"] = s.stream;
    d["segment_type"] = s.is_small ? "small" : "large";
    int64_t allocated = 0, active = 0;
    py::list blocks;
    for (const auto& b : s.blocks) {
      py::dict bd;
      bd["address"] = b.address;
      bd["size"] = b.size;
      bd["requested_size"] = b.requested;
      bd["state"] = b.allocated      ? "active_allocated"
                    : b.pending_free ? "active_pending_free"
                                     : "inactive";
      if (b.allocated) allocated += b.size;
      if (b.allocated || b.pending_free) active += b.size;
      blocks.append(bd);
    }
    d["allocated_size"] = allocated;
    d["active_size"] = active;
    d["blocks"] = blocks;
    out.append(d);
  }
  return out;
}

MemoryStats device_stats(int device) {
  device = resolve_device(device);
  if (!has_device_caching_allocator(device)) {
    if (device < 0 || device >= device_count())
      EMBER_FAIL(Value, "cuda: invalid device index ", device, " (", device_count(),
                 " CUDA device(s) visible)");
    return MemoryStats{};
  }
  return device_caching_allocator(device).stats();
}

Tensor pin_memory(const Tensor& self) {
  if (!self->device().is_cpu())
    EMBER_FAIL(Runtime, "pin_memory: cannot pin '", self->device().str(),
               "' memory: only dense CPU tensors can be pinned");
  if (is_pinned(self->storage()->data)) return self;
  std::optional<DimVector> dense = dense_strides(self);
  DimVector strides = dense ? *dense : contiguous_strides(self->sizes());
  const size_t nbytes = static_cast<size_t>(self->numel()) * self->itemsize();
  auto storage = std::make_shared<StorageImpl>(allocate_pinned(nbytes), nbytes);
  Tensor out = std::make_shared<TensorImpl>(std::move(storage), self->dtype(), self->sizes(),
                                            strides, 0, std::make_shared<VersionCounter>());
  copy_into(out, self);  // both on the host: the CPU copy kernel
  return fresh(out);
}

// Where the C++ global locale's number-formatting facets live (gpu_smoke.py's diagnostic of
// engine errors that crashed in std::ostream << unsigned long after CUDA work): each facet's
// address and vtable with the shared object holding them, read without formatting a number.
py::dict cxx_locale_info() {
  auto where = [](const void* p) -> std::string {
    Dl_info info{};
    if (p && dladdr(p, &info) && info.dli_fname) return info.dli_fname;
    return "?";
  };
  auto facet = [&](const std::locale::facet& f) {
    const void* vtable = *reinterpret_cast<const void* const*>(&f);
    py::dict d;
    d["address"] = reinterpret_cast<uintptr_t>(&f);
    d["object_in"] = where(&f);
    d["vtable"] = reinterpret_cast<uintptr_t>(vtable);
    d["vtable_in"] = where(vtable);
    return d;
  };
  const std::locale global;
  py::dict d;
  d["global_name"] = global.name();
  d["global_is_classic"] = global == std::locale::classic();
  d["num_put"] = facet(std::use_facet<std::num_put<char>>(global));
  d["numpunct"] = facet(std::use_facet<std::numpunct<char>>(global));
  d["ctype"] = facet(std::use_facet<std::ctype<char>>(global));
  d["classic_num_put"] = facet(std::use_facet<std::num_put<char>>(std::locale::classic()));
  return d;
}

}  // namespace

void bind_runtime(py::module_& m) {
  m.def("_debug_cxx_locale", &cxx_locale_info);
  // ---- devices ----
  m.def("_init", &init);
  m.def("_is_initialized", [] { return g_initialized; });
  m.def("_exchange_device", [](int index) {
    int prev = current_device();
    if (index >= 0 && index != prev) set_device(index);
    return prev;
  });
  m.def(
      "synchronize",
      [](int device) {
        DeviceGuard guard(device);
        EMBER_CUDA_CHECK(cudaDeviceSynchronize());
        checks::after_wait(current_device(), checks::Wait::Device);
      },
      py::arg("device") = -1, py::call_guard<py::gil_scoped_release>());
  m.def("_device_properties", [](int device) {
    cudaDeviceProp p{};
    EMBER_CUDA_CHECK(cudaGetDeviceProperties(&p, resolve_device(device)));
    py::dict d;
    d["name"] = std::string(p.name);
    d["total_memory"] = static_cast<int64_t>(p.totalGlobalMem);
    d["major"] = p.major;
    d["minor"] = p.minor;
    d["multi_processor_count"] = p.multiProcessorCount;
    d["L2_cache_size"] = p.l2CacheSize;
    d["max_threads_per_multi_processor"] = p.maxThreadsPerMultiProcessor;
    d["warp_size"] = p.warpSize;
    d["is_integrated"] = p.integrated;
    d["is_multi_gpu_board"] = p.isMultiGpuBoard;
    char uuid[37];
    const auto* u = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
    std::snprintf(uuid, sizeof uuid,
                  "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                  u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                  u[14], u[15]);
    d["uuid"] = std::string(uuid);
    return d;
  });
  m.def(
      "mem_get_info",
      [](int device) {
        DeviceGuard guard(resolve_device(device));
        size_t free = 0, total = 0;
        EMBER_CUDA_CHECK(cudaMemGetInfo(&free, &total));
        return py::make_tuple(free, total);
      },
      py::arg("device") = -1);

  // ---- streams ----
  m.def("_stream_create", [](int device, int priority) {
    g_initialized = true;
    return as_handle(pool_stream(device, priority));
  });
  m.def("_stream_priority_range", [](int device) {
    auto [least, greatest] = stream_priority_range(device);
    return py::make_tuple(least, greatest);
  });
  m.def("_stream_priority", [](int64_t s, int device) {
    DeviceGuard guard(device);
    int p = 0;
    EMBER_CUDA_CHECK(cudaStreamGetPriority(as_stream(s), &p));
    return p;
  });
  m.def("_stream_query", [](int64_t s, int device) {
    DeviceGuard guard(device);
    cudaError_t err = cudaStreamQuery(as_stream(s));
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    check(err, "cudaStreamQuery");
    return true;
  });
  m.def(
      "_stream_synchronize",
      [](int64_t s, int device) {
        DeviceGuard guard(device);
        EMBER_CUDA_CHECK(cudaStreamSynchronize(as_stream(s)));
        checks::after_wait(current_device(), checks::Wait::Stream, as_stream(s));
      },
      py::call_guard<py::gil_scoped_release>());
  m.def("_stream_wait_event", [](int64_t s, int64_t e, int device) {
    DeviceGuard guard(device);
    EMBER_CUDA_CHECK(cudaStreamWaitEvent(as_stream(s), as_event(e), 0));
  });
  m.def("_current_stream", [](int device) { return as_handle(current_stream(device)); });
  m.def("_set_stream", [](int device, int64_t s) { set_current_stream(device, as_stream(s)); });

  m.def("_sleep", &sleep_on_current_stream, py::arg("cycles"),
        "Spins a kernel for `cycles` GPU clock cycles on the current stream (for tests).");

  // ---- events ----
  m.def("_event_create", [](int device, bool enable_timing, bool blocking, bool interprocess) {
    DeviceGuard guard(device);
    unsigned flags = (enable_timing ? 0u : cudaEventDisableTiming) |
                     (blocking ? cudaEventBlockingSync : 0u) |
                     (interprocess ? cudaEventInterprocess : 0u);
    cudaEvent_t e = nullptr;
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&e, flags));
    return reinterpret_cast<int64_t>(e);
  });
  m.def("_event_destroy", [](int64_t e, int device) {
    DeviceGuard guard(device);
    (void)cudaEventDestroy(as_event(e));  // from __del__: never raise
  });
  m.def("_event_record", [](int64_t e, int64_t s, int device) {
    DeviceGuard guard(device);
    EMBER_CUDA_CHECK(cudaEventRecord(as_event(e), as_stream(s)));
  });
  m.def("_event_query", [](int64_t e, int device) {
    DeviceGuard guard(device);
    cudaError_t err = cudaEventQuery(as_event(e));
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    check(err, "cudaEventQuery");
    return true;
  });
  m.def(
      "_event_synchronize",
      [](int64_t e, int device) {
        DeviceGuard guard(device);
        EMBER_CUDA_CHECK(cudaEventSynchronize(as_event(e)));
        checks::after_wait(current_device(), checks::Wait::Event);
      },
      py::call_guard<py::gil_scoped_release>());
  m.def("_event_elapsed_time", [](int64_t start, int64_t end, int device) {
    DeviceGuard guard(device);
    float ms = 0;
    EMBER_CUDA_CHECK(cudaEventElapsedTime(&ms, as_event(start), as_event(end)));
    return ms;
  });

  // ---- the caching allocator ----
  m.def("_memory_stats", [](int device) { return stats_dict(device_stats(device)); });
  m.def("_reset_peak_memory_stats", [](int device) {
    device = resolve_device(device);
    if (has_device_caching_allocator(device)) device_caching_allocator(device).reset_peak_stats();
  });
  m.def("_memory_snapshot", [] {
    py::list out;
    for (int d = 0; d < device_count(); ++d)
      if (has_device_caching_allocator(d))
        for (auto seg : snapshot_list(device_caching_allocator(d).snapshot(), d)) out.append(seg);
    return out;
  });
  m.def("empty_cache", &empty_all_caches);
  m.def("_record_stream", [](const std::shared_ptr<TensorImpl>& t, int64_t s, int device) {
    if (t->device().type != DeviceType::CUDA)
      EMBER_FAIL(Runtime, "record_stream: expected a CUDA tensor, got one on ", t->device().str());
    CachingAllocator::record_stream(t->storage()->data, s, device);
  });

  // ---- pinned host memory ----
  m.def("_pin_memory", [](const std::shared_ptr<TensorImpl>& t) { return pin_memory(t); });
  m.def("_is_pinned", [](const std::shared_ptr<TensorImpl>& t) {
    return t->device().is_cpu() && is_pinned(t->storage()->data);
  });
  m.def("_host_memory_stats", [] { return stats_dict(pinned_allocator().stats()); });
  m.def("_host_empty_cache", [] { pinned_allocator().empty_cache(); });
}

}  // namespace cuda
}  // namespace ember
