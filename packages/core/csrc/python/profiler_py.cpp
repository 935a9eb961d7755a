// ember._C's side of ember.profiler: start and stop the C++ profiler (autograd/profiler.h), open
// and close record_function ranges, and turn what the threads recorded into Python tuples once,
// at the end.
#include <unordered_map>

#include "autograd/profiler.h"
#include "python/tensor_py.h"

namespace ember {
namespace {

// record_function ranges opened from Python, by handle: a Range ends on the thread it began on.
struct UserRanges {
  std::unordered_map<int64_t, profiler::Range> open;
  int64_t next = 1;
};
UserRanges& user_ranges() {
  thread_local UserRanges r;
  return r;
}

py::object frames_to_list(const allocator_trace::Frames& f) {
  py::list out;
  for (const auto& fr : *f)
    out.append(py::str(fr.filename + "(" + std::to_string(fr.line) + "): " + fr.name));
  return std::move(out);
}

py::dict result_to_python(profiler::Result&& r) {
  py::dict out;
  out["start_ns"] = r.start_ns;
  out["stop_ns"] = r.stop_ns;
  out["start_wall_us"] = r.start_wall_us;
  py::list threads, events, memory, device_events;
  std::unordered_map<const char*, py::object> names;  // one str per op name
  int64_t base = 0;
  for (profiler::ThreadEvents& t : r.threads) {
    threads.append(py::make_tuple(t.tid, t.thread_name));
    std::vector<py::object> stacks(t.stacks.size());
    for (size_t i = 0; i < t.stacks.size(); ++i) stacks[i] = frames_to_list(t.stacks[i]);
    for (size_t i = 0; i < t.events.size(); ++i) {
      const profiler::Event& e = t.events[i];
      py::object name;
      if (e.name) {
        auto it = names.find(e.name);
        if (it == names.end()) it = names.emplace(e.name, py::str(e.name)).first;
        name = it->second;
      } else {
        name = py::str(t.names[e.name_index]);
      }
      py::object shapes = py::none(), dtypes = py::none();
      if (e.inputs_count > 0) {
        py::list s, d;
        for (uint32_t k = 0; k < e.inputs_count; ++k) {
          const profiler::InputInfo& in = t.inputs[e.inputs_begin + k];
          py::list dims;
          for (uint8_t j = 0; j < in.ndim; ++j) dims.append(t.dims[in.dims_begin + j]);
          s.append(dims);
          d.append(in.dtype >= 0 ? dtype_name(static_cast<ScalarType>(in.dtype)) : "Scalar");
        }
        shapes = s;
        dtypes = d;
      }
      py::object stack = e.stack >= 0 ? stacks[e.stack] : py::none();
      events.append(py::make_tuple(base + static_cast<int64_t>(i), name, static_cast<int>(e.kind),
                                   t.tid, e.start_ns, e.end_ns,
                                   e.parent >= 0 ? base + e.parent : -1, e.seq_nr, e.children_ns,
                                   shapes, dtypes, e.self_mem, e.total_mem, stack));
    }
    for (const profiler::MemoryEvent& m : t.memory)
      memory.append(py::make_tuple(t.tid, m.time_ns, m.addr, m.bytes, m.allocated, m.reserved,
                                   device_type_name(m.device.type),
                                   static_cast<int>(m.device.index), m.op >= 0 ? base + m.op : -1));
    base += static_cast<int64_t>(t.events.size());
  }
  for (const profiler::DeviceEvent& d : r.device_events)
    device_events.append(py::make_tuple(d.name, device_type_name(d.device.type),
                                        static_cast<int>(d.device.index), d.stream, d.start_ns,
                                        d.end_ns, d.correlation_op));
  out["threads"] = threads;
  out["events"] = events;
  out["memory"] = memory;
  out["device_events"] = device_events;
  return out;
}

}  // namespace

void bind_profiler(py::module_& m) {
  m.def(
      "_profiler_start",
      [](bool record_shapes, bool profile_memory, bool with_stack, bool device_activity) {
        profiler::Config c;
        c.record_shapes = record_shapes;
        c.profile_memory = profile_memory;
        c.with_stack = with_stack;
        c.device_activity = device_activity;
        profiler::start(c);
      },
      py::arg("record_shapes") = false, py::arg("profile_memory") = false,
      py::arg("with_stack") = false, py::arg("device_activity") = false,
      "Start the C++ profiler (ember.profiler.profile does this).");
  m.def(
      "_profiler_stop",
      [] {
        profiler::Result r;
        {
          py::gil_scoped_release nogil;  // threads still recording may want the GIL for stacks
          r = profiler::stop();
        }
        return result_to_python(std::move(r));
      },
      "Stop the C++ profiler and return what every thread recorded.");
  m.def("_profiler_enabled", [] { return profiler::running(); });
  m.def("_profiler_now_ns", [] { return profiler::now_ns(); });
  m.def("_profiler_has_device_activity", [](const std::string& type) {
    if (type == "cuda") return profiler::has_device_activity(DeviceType::CUDA);
    if (type == "cpu") return false;
    throw py::value_error("_profiler_has_device_activity: expected 'cpu' or 'cuda', got '" + type +
                          "'");
  });
  m.def(
      "_profiler_push_range",
      [](std::string name) -> int64_t {
        if (!profiler::running()) return 0;
        profiler::Range r;
        r.begin(std::move(name), profiler::Kind::UserRange);
        if (!r.open()) return 0;
        UserRanges& u = user_ranges();
        int64_t h = u.next++;
        u.open.emplace(h, std::move(r));
        return h;
      },
      py::arg("name"),
      "Open a record_function range on this thread; returns its handle (0: none).");
  m.def(
      "_profiler_pop_range",
      [](int64_t handle) {
        if (handle == 0) return;
        user_ranges().open.erase(handle);  // the Range's destructor ends it
      },
      py::arg("handle"), "Close the range _profiler_push_range opened on this thread.");
}

}  // namespace ember
