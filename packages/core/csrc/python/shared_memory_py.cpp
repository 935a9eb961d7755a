// Python side of the shared-memory transport: Tensor.share_memory_() / is_shared(), pinned-memory
// stand-ins for the CPU-only build, and the primitives ember/multiprocessing_reductions.py pickles
// tensors with (by shared-memory name, or by value).
#include <unistd.h>

#include <cstring>

#include "core/mapped_file.h"
#include "core/shared_memory.h"
#include "ops.h"
#include "python/bind_support.h"
#include "python/tensor_py.h"

namespace ember {
namespace {

DimVector to_dims(const std::vector<int64_t>& v) {
  DimVector d;
  for (int64_t x : v) d.push_back(x);
  return d;
}

// Bytes a strided view reaches in its storage (elements), so a receiver can check the segment.
size_t extent_bytes(const DimVector& sizes, const DimVector& strides, int64_t offset,
                    ScalarType dt) {
  int64_t last = offset;
  for (int64_t i = 0; i < static_cast<int64_t>(sizes.size()); ++i) {
    if (sizes[i] == 0) return 0;
    EMBER_CHECK_KIND(strides[i] >= 0, Value, "shared memory: negative stride");
    last += (sizes[i] - 1) * strides[i];
  }
  return static_cast<size_t>(last + 1) * itemsize(dt);
}

// The shared-memory create hook: starts or joins this process tree's janitor
// (ember/_shm_janitor.py). Best effort: without a janitor, only a killed process's segments stay.
void join_shm_janitor() {
#if PY_VERSION_HEX >= 0x030D0000
  if (!Py_IsInitialized() || Py_IsFinalizing()) return;
#else
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
#endif
  py::gil_scoped_acquire gil;
  try {
    py::module_::import("ember._shm_janitor").attr("ensure_started")();
  } catch (py::error_already_set&) {
    // No janitor (no interpreter to start it, out of processes): segments stay only if killed.
  }
}

ShmPolicy to_policy(int p) {
  EMBER_CHECK_KIND(p >= 0 && p <= 4, Value, "shared memory: unknown policy ", p);
  return static_cast<ShmPolicy>(p);
}

}  // namespace

void bind_shared_memory(py::module_& m, TensorClass& cls) {
  set_shm_create_hook(&join_shm_janitor);
  // ember.load(..., mmap=True): private mappings of a checkpoint file (core/mapped_file.h).
  m.def(
      "_map_file",
      [](int fd, int64_t offset, int64_t nbytes) { return map_file_range(fd, offset, nbytes); },
      py::arg("fd"), py::arg("offset"), py::arg("nbytes"),
      "A uint8 tensor over bytes [offset, offset + nbytes) of the open file fd, mapped private "
      "and copy-on-write; reads of pages the file has lost since (truncated) see zeros.");
  m.def("_mapped_file_faults", &mapped_file_faults,
        "Pages of mapped files replaced by zeros because the file shrank below them.");
  cls.def(
         "share_memory_",
         [](const Tensor& self) {
           // CUDA memory is shared between processes by CUDA IPC as it is: nothing to move.
           if (self->device().type != DeviceType::CUDA) share_storage_(*self->storage());
           return self;
         },
         "Moves the storage to shared memory (a no-op if it already is there, and for CUDA "
         "tensors, which cross processes by CUDA IPC); returns self.")
      .def(
          "is_shared",
          [](const Tensor& self) {
            return self->device().type == DeviceType::CUDA ||
                   shared_segment(*self->storage()) != nullptr;
          },
          "Whether the storage lives in shared memory (always True for a CUDA tensor).")
      // No page-locked allocator exists without the CUDA backend: pinning is a no-op there.
      .def(
          "pin_memory", [](const Tensor& self, py::object) { return self; },
          py::arg("device") = py::none(),
          "A copy of the tensor in page-locked memory; on a build without CUDA, self.")
      .def(
          "is_pinned", [](const Tensor&, py::object) { return false; },
          py::arg("device") = py::none(),
          "Whether the tensor is in page-locked memory (never on a build without CUDA).")
      .def(
          "__reduce_ex__",
          [](py::object self, int proto) {
            return py::module_::import("ember.multiprocessing_reductions")
                .attr("_reduce_tensor")(self, proto);
          },
          py::arg("protocol"));

  m.def(
      "_empty_shared",
      [](const std::vector<int64_t>& shape, ScalarType dtype, int policy) {
        DimVector sizes = to_dims(shape);
        int64_t n = checked_numel(sizes, "_empty_shared");
        Storage st =
            new_shared_storage(static_cast<size_t>(n) * itemsize(dtype), to_policy(policy));
        return std::make_shared<TensorImpl>(std::move(st), dtype, sizes, contiguous_strides(sizes),
                                            0, std::make_shared<VersionCounter>());
      },
      py::arg("shape"), py::arg("dtype"), py::arg("policy") = 0,
      "An uninitialized contiguous tensor in shared memory. policy: 0 owner (the name goes when "
      "this process frees it), 1 handoff (the receiver removes the name), 2 pooled (a recycled "
      "segment of this process), 3 unnamed (sent by descriptor), 4 pooled and unnamed; see "
      "core/shared_memory.h.");
  m.def(
      "_shm_handle",
      [](const Tensor& t, bool for_send) -> py::object {
        const ShmSegment* s = shared_segment(*t->storage());
        if (!s) return py::none();
        if (for_send) shm_add_receiver_ref(*t->storage());
        return py::make_tuple(s->name, s->nbytes, static_cast<int>(s->policy));
      },
      py::arg("tensor"), py::arg("for_send") = false,
      "(name, nbytes, policy) of a tensor's shared-memory segment, or None. for_send=True takes "
      "the reference the receiver of a pooled segment gives back.");
  m.def(
      "_from_shm",
      [](const std::string& name, size_t nbytes, ScalarType dtype,
         const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t offset,
         int policy) {
        DimVector sizes = to_dims(shape), st = to_dims(strides);
        EMBER_CHECK_KIND(sizes.size() == st.size() && offset >= 0, Value,
                         "shared memory: inconsistent tensor metadata");
        EMBER_CHECK(extent_bytes(sizes, st, offset, dtype) <= nbytes,
                    "shared memory: the tensor reaches past the end of segment ", name);
        Storage storage = open_shared_storage(name, nbytes, to_policy(policy));
        return std::make_shared<TensorImpl>(std::move(storage), dtype, sizes, st, offset,
                                            std::make_shared<VersionCounter>());
      },
      py::arg("name"), py::arg("nbytes"), py::arg("dtype"), py::arg("shape"), py::arg("strides"),
      py::arg("offset"), py::arg("policy"));
  m.def(
      "_shm_fd", [](const Tensor& t) { return shared_fd(*t->storage()); }, py::arg("tensor"),
      "The descriptor of the tensor's unnamed segment (policy 3, or 4 on its creator's side), or "
      "-1; owned by the storage or its creator's pool.");
  m.def(
      "_from_shm_fd",
      [](int fd, size_t nbytes, ScalarType dtype, const std::vector<int64_t>& shape,
         const std::vector<int64_t>& strides, int64_t offset, bool pooled) {
        DimVector sizes = to_dims(shape), st = to_dims(strides);
        EMBER_CHECK_KIND(sizes.size() == st.size() && offset >= 0, Value,
                         "shared memory: inconsistent tensor metadata");
        EMBER_CHECK(extent_bytes(sizes, st, offset, dtype) <= nbytes,
                    "shared memory: the tensor reaches past the end of its segment");
        Storage storage = open_shared_fd(fd, nbytes, pooled);
        return std::make_shared<TensorImpl>(std::move(storage), dtype, sizes, st, offset,
                                            std::make_shared<VersionCounter>());
      },
      py::arg("fd"), py::arg("nbytes"), py::arg("dtype"), py::arg("shape"), py::arg("strides"),
      py::arg("offset"), py::arg("pooled") = false,
      "A tensor over the unnamed segment received as descriptor fd (the caller keeps fd); "
      "pooled: a recycled one (policy 4), whose reference taken by the sender it releases.");
  m.def(
      "_set_share_policy", [](int p) { set_share_policy(to_policy(p)); }, py::arg("policy"),
      "The policy of the segments Tensor.share_memory_() creates: 0 (named, owner) or 3 (unnamed, "
      "sent by file descriptor).");
  m.def("_shm_pool_clear", &shm_pool_clear, py::arg("idle_only") = false,
        "Unlinks this process's recycled (pooled) segments and starts a new pool; idle_only: only "
        "the segments no receiver holds and no message in flight names.");
  m.def("_shm_trim_cache", &shm_trim_cache,
        "Unmaps the cached mappings of received pooled segments no tensor uses.");
  m.def(
      "_tensor_to_bytes",
      [](const Tensor& t) {
        Tensor h = host_readable(t);  // another device's data is copied; meta raises
        Tensor c = h->is_contiguous() ? h : ops::contiguous(h);
        return py::bytes(c->data(), static_cast<size_t>(c->numel()) * c->itemsize());
      },
      "The tensor's elements in row-major order, as bytes.");
  m.def(
      "_tensor_from_bytes",
      [](const py::bytes& b, ScalarType dtype, const std::vector<int64_t>& shape) {
        DimVector sizes = to_dims(shape);
        Tensor t = empty(sizes, dtype);
        std::string_view v = b;
        size_t need = static_cast<size_t>(t->numel()) * t->itemsize();
        EMBER_CHECK_KIND(v.size() == need, Value, "_tensor_from_bytes: got ", v.size(),
                         " bytes for a tensor of shape ", shape_str(sizes), " that needs ", need);
        if (need) std::memcpy(t->data(), v.data(), need);
        return t;
      },
      py::arg("data"), py::arg("dtype"), py::arg("shape"));
  m.def(
      "_shm_unlink", [](const std::string& name) { return shm_unlink_name(name); },
      "Removes a shared-memory name (True if it existed).");
  m.def(
      "_shm_prefix", [](long pid) { return shm_prefix(pid); }, py::arg("pid"),
      "The /dev/shm name prefix of the segments process `pid` creates.");
  m.def("_shm_live_segments", &shm_live_segments,
        "Shared-memory segments created by this process and still mapped by it.");
}

}  // namespace ember
