// ember._C's side of ember.memory._record_memory_history / _snapshot (core/allocator_trace.h):
// turns the allocators' histories into the dict pytorch.org/memory_viz reads, and captures
// Python stacks for the allocator and the profiler.
#include <unordered_map>

#include "core/allocator_trace.h"
#include "python/tensor_py.h"

namespace ember {
namespace {

// The calling thread's Python stack, innermost first; only when this thread holds the GIL (an
// allocation on a kernel worker thread, or with the GIL released, has none).
allocator_trace::Frames capture_python_stack() {
  if (!Py_IsInitialized() || !PyGILState_Check()) return nullptr;
  PyFrameObject* f = PyEval_GetFrame();  // borrowed
  if (f == nullptr) return nullptr;
  auto frames = std::make_shared<std::vector<allocator_trace::Frame>>();
  Py_INCREF(f);
  while (f != nullptr && frames->size() < 128) {
    PyCodeObject* code = PyFrame_GetCode(f);  // new reference
    allocator_trace::Frame fr;
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    const char* name = PyUnicode_AsUTF8(code->co_name);
    if (file == nullptr || name == nullptr) PyErr_Clear();
    fr.filename = file ? file : "??";
    fr.name = name ? name : "??";
    fr.line = PyFrame_GetLineNumber(f);
    Py_DECREF(code);
    frames->push_back(std::move(fr));
    PyFrameObject* back = PyFrame_GetBack(f);  // new reference
    Py_DECREF(f);
    f = back;
  }
  Py_XDECREF(f);
  return frames;
}

DeviceType parse_type(const std::string& s, const char* fn) {
  if (s == "cpu") return DeviceType::CPU;
  if (s == "cuda") return DeviceType::CUDA;
  throw py::value_error(std::string(fn) + ": expected device type 'cpu' or 'cuda', got '" + s +
                        "'");
}

py::list frames_list(const allocator_trace::Frames& f,
                     std::unordered_map<const void*, py::list>& cache) {
  if (!f) return py::list();
  auto it = cache.find(f.get());
  if (it != cache.end()) return it->second;
  py::list out;
  for (const auto& fr : *f) {
    py::dict d;
    d["filename"] = fr.filename;
    d["line"] = fr.line;
    d["name"] = fr.name;
    out.append(d);
  }
  cache.emplace(f.get(), out);
  return out;
}

py::dict snapshot_dict(DeviceType type) {
  std::vector<allocator_trace::AllocatorHistory> hs;
  {
    py::gil_scoped_release nogil;  // the allocators' mutexes: never wait on them holding the GIL
    hs = allocator_trace::snapshot(type);
  }
  std::unordered_map<const void*, py::list> cache;
  py::list segments;
  int max_device = 0;
  for (const auto& h : hs) max_device = std::max(max_device, static_cast<int>(h.device.index));
  std::vector<py::list> traces(static_cast<size_t>(max_device) + 1);
  for (const auto& h : hs) {
    const int dev = std::max(0, static_cast<int>(h.device.index));
    for (const SegmentInfo& s : h.segments) {
      py::dict d;
      int64_t allocated = 0, active = 0, requested = 0;
      py::list blocks;
      for (const BlockInfo& b : s.blocks) {
        py::dict bd;
        bd["address"] = b.address;
        bd["size"] = b.size;
        bd["requested_size"] = b.requested;
        bd["state"] = b.allocated      ? "active_allocated"
                      : b.pending_free ? "active_pending_free"
                                       : "inactive";
        auto fr = h.block_frames.find(b.address);
        bd["frames"] =
            b.allocated && fr != h.block_frames.end() ? frames_list(fr->second, cache) : py::list();
        blocks.append(bd);
        if (b.allocated) allocated += b.size;
        if (b.allocated || b.pending_free) active += b.size;
        requested += b.requested;
      }
      d["device"] = dev;
      d["address"] = s.address;
      d["total_size"] = s.total_size;
      d["allocated_size"] = allocated;
      d["active_size"] = active;
      d["requested_size"] = requested;
      d["stream"] = s.stream;
      d["segment_type"] = s.is_small ? "small" : "large";
      d["segment_pool_id"] = py::make_tuple(0, 0);
      d["is_expandable"] = false;
      auto sf = h.segment_frames.find(s.address);
      d["frames"] = sf != h.segment_frames.end() ? frames_list(sf->second, cache) : py::list();
      d["blocks"] = blocks;
      segments.append(d);
    }
    py::list& trace = traces[static_cast<size_t>(dev)];
    for (const allocator_trace::TraceEntry& e : h.trace) {
      py::dict d;
      d["action"] = allocator_trace::action_name(e.action);
      d["addr"] = e.addr;
      d["size"] = e.size;
      d["stream"] = e.stream;
      d["time_us"] = e.time_us;
      d["frames"] = frames_list(e.frames, cache);
      trace.append(d);
    }
  }
  py::dict out;
  out["segments"] = segments;
  py::list device_traces;
  for (auto& t : traces) device_traces.append(t);
  out["device_traces"] = device_traces;
  return out;
}

}  // namespace

void bind_memory_history(py::module_& m) {
  allocator_trace::set_python_stack_capture(&capture_python_stack);
  m.def(
      "_record_memory_history",
      [](const std::string& device_type, bool enabled, bool trace, const std::string& context,
         bool cpp, size_t max_entries, bool clear) {
        allocator_trace::HistoryConfig c;
        c.enabled = enabled;
        c.trace = trace;
        if (context == "none")
          c.context = allocator_trace::Context::None;
        else if (context == "state")
          c.context = allocator_trace::Context::State;
        else if (context == "alloc")
          c.context = allocator_trace::Context::Alloc;
        else if (context == "all")
          c.context = allocator_trace::Context::All;
        else
          throw py::value_error(
              "_record_memory_history: context must be 'none', 'state', "
              "'alloc' or 'all', got '" +
              context + "'");
        c.cpp = cpp;
        c.max_entries = max_entries;
        allocator_trace::record_memory_history(parse_type(device_type, "_record_memory_history"), c,
                                               clear);
      },
      py::arg("device_type"), py::arg("enabled"), py::arg("trace"), py::arg("context"),
      py::arg("cpp"), py::arg("max_entries"), py::arg("clear"),
      "Start, change or stop the memory history of the caching allocators of a device type.");
  m.def(
      "_memory_history_snapshot",
      [](const std::string& device_type) {
        return snapshot_dict(parse_type(device_type, "_memory_history_snapshot"));
      },
      py::arg("device_type"),
      "The allocators' segments, blocks and recorded traces (memory_viz's snapshot dict).");
}

}  // namespace ember
