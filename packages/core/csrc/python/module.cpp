// The ember._C extension module: dtypes, devices, generators, the Tensor class, memory and
// threading controls, and every op generated from ops/*.yaml.
#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "core/backend.h"
#include "core/generator.h"
#include "core/out_tensor.h"
#include "extension/c_api.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/parallel.h"
#include "ops.h"
#include "ops/sdp_backends.h"
#include "python/bind_support.h"
#include "python/python_autograd.h"
#include "python/tensor_py.h"

namespace ember {

void bind_generated_ops(py::module_& m, TensorClass& cls);
void bind_forward_ad(py::module_& m);
void bind_gamma_values(py::module_& m);  // python/gamma_py.cpp
void bind_op_observer(py::module_& m);
void bind_profiler(py::module_& m);         // python/profiler_py.cpp
void bind_memory_history(py::module_& m);   // python/memory_history_py.cpp
void bind_shm_collectives(py::module_& m);  // python/shm_collectives_py.cpp
void bind_sparse_dispatch(py::module_& m);  // python/sparse_dispatch_py.cpp
void bind_arg_errors(py::module_& m);       // python/arg_errors_py.cpp
void bind_torch_function(py::module_& m);   // python/torch_function_py.cpp
void bind_python_dispatch(py::module_& m);  // python/python_dispatch_py.cpp

namespace {

PyObject* g_dtype_objects[kNumScalarTypes] = {};
PyObject* g_oom_error = nullptr;
PyObject* g_dtype_error = nullptr;

struct DType {
  ScalarType type;
};

void bind_dtypes(py::module_& m) {
  py::class_<DType> cls(m, "dtype");
  cls.def_property_readonly("is_floating_point", [](const DType& d) { return is_floating(d.type); })
      .def_property_readonly("is_complex", [](const DType& d) { return is_complex(d.type); })
      .def_property_readonly("is_signed", [](const DType& d) { return is_signed(d.type); })
      .def_property_readonly("itemsize", [](const DType& d) { return itemsize(d.type); })
      .def("__repr__", [](const DType& d) { return std::string("ember.") + dtype_name(d.type); })
      .def("__reduce__", [](const DType& d) { return std::string(dtype_name(d.type)); });
  for (int i = 0; i < kNumScalarTypes; ++i) {
    auto st = static_cast<ScalarType>(i);
    py::object o = py::cast(DType{st});
    g_dtype_objects[i] = o.release().ptr();  // immortal singletons: `x.dtype is ember.float32`
    m.attr(dtype_name(st)) = py::handle(g_dtype_objects[i]);
  }
  const std::pair<const char*, ScalarType> aliases[] = {
      {"float", ScalarType::Float32},    {"double", ScalarType::Float64},
      {"half", ScalarType::Float16},     {"long", ScalarType::Int64},
      {"int", ScalarType::Int32},        {"short", ScalarType::Int16},
      {"cfloat", ScalarType::Complex64}, {"cdouble", ScalarType::Complex128}};
  for (auto& [name, st] : aliases) m.attr(name) = py::handle(g_dtype_objects[static_cast<int>(st)]);
  m.def("get_default_dtype", [] { return default_dtype(); });
  m.def("set_default_dtype", [](ScalarType t) { set_default_dtype(t); }, py::arg("d"));
  m.def(
      "promote_types", [](ScalarType a, ScalarType b) { return promote_types(a, b); },
      py::arg("type1"), py::arg("type2"));
  m.def(
      "can_cast", [](ScalarType from, ScalarType to) { return can_cast(from, to); },
      py::arg("from_"), py::arg("to"));
}

namespace {
std::vector<Device>& device_context_stack() {
  thread_local std::vector<Device> stack;
  return stack;
}
}  // namespace

void bind_device(py::module_& m) {
  py::class_<Device> cls(m, "device");
  cls.def(py::init([](const std::string& s, std::optional<int64_t> index) {
            return parse_device(s, index);
          }),
          py::arg("type"), py::arg("index") = py::none())
      .def(py::init([](const Device& d) { return d; }))
      .def_property_readonly("type", [](const Device& d) { return device_type_name(d.type); })
      .def_property_readonly("index",
                             [](const Device& d) -> py::object {
                               if (d.index < 0) return py::none();
                               return py::int_(d.index);
                             })
      .def("__eq__", [](const Device& a, const Device& b) { return a == b; })
      .def("__hash__", [](const Device& d) { return static_cast<int>(d.type) * 1000 + d.index; })
      // Pickled (and deep-copied) as device(type, index), as torch.device.
      .def("__reduce__",
           [](const Device& d) {
             py::object index = d.index < 0 ? py::object(py::none()) : py::int_(d.index);
             return py::make_tuple(py::type::of<Device>(),
                                   py::make_tuple(device_type_name(d.type), index));
           })
      .def("__str__", &Device::str)
      .def("__repr__",
           [](const Device& d) {
             std::string r = "device(type='" + device_type_name(d.type) + "'";
             if (d.index >= 0) r += ", index=" + std::to_string(d.index);
             return r + ")";
           })
      // `with ember.device("meta"):` makes factories without device= allocate there (this
      // thread only, as in PyTorch); the previous default comes back on exit.
      .def("__enter__",
           [](const Device& d) {
             device_context_stack().push_back(default_device());
             set_default_device(d);
             return d;
           })
      .def("__exit__", [](const Device&, py::args) {
        auto& st = device_context_stack();
        if (!st.empty()) {
          set_default_device(st.back());
          st.pop_back();
        }
      });
  m.def(
      "set_default_device",
      [](std::optional<Device> d) { set_default_device(d.value_or(cpu_device())); },
      py::arg("device"));
  m.def("get_default_device", [] { return default_device(); });
  m.def("_rename_privateuse1_backend", &rename_privateuse1_backend, py::arg("name"));
  m.def("_privateuse1_backend_name", [] { return device_type_name(DeviceType::PrivateUse1); });
}

void bind_generator(py::module_& m) {
  py::class_<Generator>(m, "Generator")
      .def(py::init([](std::optional<Device> device) {
             if (device && !device->is_cpu())  // PyTorch's RuntimeError
               throw std::runtime_error("Generator: only cpu generators exist in this build");
             return new Generator();
           }),
           py::arg("device") = py::none())
      .def(
          "manual_seed",
          [](Generator& g, const py::object& seed_obj) -> Generator& {
            // PyTorch: RuntimeError for anything but an int or a NumPy integer (a bool, a
            // float, a tensor)
            PyObject* o = seed_obj.ptr();
            const bool numpy_int =
                PyIndex_Check(o) && std::string(Py_TYPE(o)->tp_name).rfind("numpy.", 0) == 0;
            if ((!PyLong_Check(o) && !numpy_int) || PyBool_Check(o))
              throw std::runtime_error(std::string("manual_seed expected a long, but got ") +
                                       Py_TYPE(o)->tp_name);
            const py::int_ seed(seed_obj);
            // as torch (and ember.manual_seed): a negative seed wraps modulo 2**64; one outside
            // [-2**63, 2**64) is refused rather than aliasing a smaller seed's stream
            if (seed < py::int_(INT64_MIN) || seed > py::int_(UINT64_MAX))
              throw py::value_error("Generator.manual_seed: seed " +
                                    py::str(seed).cast<std::string>() +
                                    " is out of range: expected an int in [-2**63, 2**64)");
            g.manual_seed((seed & py::int_(UINT64_MAX)).cast<uint64_t>());
            return g;
          },
          py::return_value_policy::reference)
      .def("initial_seed", &Generator::initial_seed)
      .def("seed",
           [](Generator& g) {
             uint64_t s = std::random_device{}() | (uint64_t(std::random_device{}()) << 32);
             g.manual_seed(s);
             return s;
           })
      // As in PyTorch, the state is a uint8 tensor (here 16 bytes: the Philox seed and
      // offset, little-endian); a (seed, offset) tuple is also accepted back.
      .def("get_state",
           [](Generator& g) {
             const uint64_t words[2] = {g.seed(), g.offset()};
             Tensor t = empty(DimVector{int64_t{sizeof(words)}}, ScalarType::UInt8);
             std::memcpy(t->data(), words, sizeof(words));
             return t;
           })
      .def(
          "set_state",
          [](Generator& g, const py::object& st) {
            if (py::isinstance<py::tuple>(st)) {
              auto tup = st.cast<py::tuple>();
              EMBER_CHECK_KIND(tup.size() == 2, Value,
                               "Generator.set_state: expected a (seed, offset) tuple");
              g.set_state(tup[0].cast<uint64_t>(), tup[1].cast<uint64_t>());
              return;
            }
            Tensor t = host_readable(st.cast<Tensor>());
            uint64_t words[2];
            // PyTorch: TypeError for another dtype, RuntimeError for a wrong size
            EMBER_CHECK_KIND(t->dtype() == ScalarType::UInt8, Type,
                             "Generator.set_state: expected a uint8 tensor of ", sizeof(words),
                             " elements from get_state()");
            EMBER_CHECK(t->numel() == sizeof(words),
                        "Generator.set_state: expected a uint8 tensor of ", sizeof(words),
                        " elements from get_state(), got ", t->numel());
            Tensor c = t->is_contiguous() ? t : ops::contiguous(t);
            std::memcpy(words, c->data(), sizeof(words));
            g.set_state(words[0], words[1]);
          },
          py::arg("new_state"))
      .def_property_readonly("device", [](const Generator&) { return cpu_device(); });
  m.attr("default_generator") = py::cast(&default_generator(), py::return_value_policy::reference);
  m.def(
      "manual_seed",
      [](uint64_t seed) -> Generator& {
        default_generator().manual_seed(seed);
        return default_generator();
      },
      py::arg("seed"), py::return_value_policy::reference);
  m.def("initial_seed", [] { return default_generator().initial_seed(); });
}

py::dict stats_dict(const MemoryStats& s) {
  py::dict d;
  d["allocated_bytes.all.current"] = s.allocated_bytes;
  d["allocated_bytes.all.peak"] = s.allocated_bytes_peak;
  d["reserved_bytes.all.current"] = s.reserved_bytes;
  d["reserved_bytes.all.peak"] = s.reserved_bytes_peak;
  d["requested_bytes.all.current"] = s.requested_bytes;
  d["active.all.current"] = s.active_blocks;
  d["segment.all.current"] = s.segments;
  d["num_alloc"] = s.num_allocs;
  d["num_free"] = s.num_frees;
  d["num_raw_alloc"] = s.num_raw_allocs;
  d["num_raw_free"] = s.num_raw_frees;
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_splits"] = s.num_splits;
  d["num_merges"] = s.num_merges;
  d["num_cache_hits"] = s.num_cache_hits;
  return d;
}

py::list snapshot_list(const std::vector<SegmentInfo>& segs) {
  py::list out;
  for (const auto& s : segs) {
    py::dict d;
    d["address"] = s.address;
    d["total_size"] = s.total_size;
    d["stream"] = s.stream;
    d["segment_type"] = s.is_small ? "small" : "large";
    py::list blocks;
    for (const auto& b : s.blocks) {
      py::dict bd;
      bd["address"] = b.address;
      bd["size"] = b.size;
      bd["requested_size"] = b.requested;
      bd["state"] = b.allocated ? "active_allocated" : "inactive";
      blocks.append(bd);
    }
    d["blocks"] = blocks;
    out.append(d);
  }
  return out;
}

// A RawAllocator over a pretend address space, for testing the caching logic: counts calls and
// fails once `capacity` bytes are handed out.
class FakeRawAllocator final : public RawAllocator {
 public:
  explicit FakeRawAllocator(size_t capacity) : capacity_(capacity) {}
  void* raw_alloc(size_t n) override {
    calls++;
    if (in_use + n > capacity_) {
      failures++;
      return nullptr;
    }
    in_use += n;
    void* p = reinterpret_cast<void*>(next_);
    next_ += n + 4096;
    return p;
  }
  void raw_free(void*, size_t n) override {
    frees++;
    in_use -= n;
  }
  size_t capacity_;
  uintptr_t next_ = 0x10000000;
  int64_t calls = 0, frees = 0, failures = 0;
  size_t in_use = 0;
};

struct TestAllocator {
  FakeRawAllocator* raw;
  std::unique_ptr<CachingAllocator> alloc;
  std::vector<std::unique_ptr<DataPtr>> live;
};

void bind_memory(py::module_& m) {
  m.def("memory_stats", [] { return stats_dict(cpu_allocator().stats()); });
  m.def("memory_allocated", [] { return cpu_allocator().stats().allocated_bytes; });
  m.def("max_memory_allocated", [] { return cpu_allocator().stats().allocated_bytes_peak; });
  m.def("memory_reserved", [] { return cpu_allocator().stats().reserved_bytes; });
  m.def("max_memory_reserved", [] { return cpu_allocator().stats().reserved_bytes_peak; });
  m.def("reset_peak_memory_stats", [] { cpu_allocator().reset_peak_stats(); });
  m.def("empty_cache", [] { cpu_allocator().empty_cache(); });
  m.def("memory_snapshot", [] { return snapshot_list(cpu_allocator().snapshot()); });
  m.def(
      "set_allocator_caching", [](bool on) { cpu_allocator().set_caching(on); },
      py::arg("enabled"));
  m.def("allocator_caching", [] { return cpu_allocator().caching(); });

  py::class_<TestAllocator>(m, "_TestCachingAllocator")
      .def(py::init([](size_t capacity, size_t round, size_t tiny, bool bound_cache) {
             auto raw = std::make_unique<FakeRawAllocator>(capacity);
             auto* t = new TestAllocator{raw.get(), nullptr, {}};
             t->alloc = std::make_unique<CachingAllocator>(
                 std::move(raw), cpu_device(), AllocatorOptions{round, tiny, bound_cache});
             return t;
           }),
           py::arg("capacity"), py::arg("round") = CachingAllocator::kRound, py::arg("tiny") = 0,
           py::arg("bound_cache") = false)
      .def(
          "malloc",
          [](TestAllocator& t, size_t n, int64_t stream) {
            t.live.push_back(std::make_unique<DataPtr>(t.alloc->allocate(n, stream)));
            return py::make_tuple(t.live.size() - 1,
                                  reinterpret_cast<uintptr_t>(t.live.back()->get()));
          },
          py::arg("nbytes"), py::arg("stream") = 0)
      .def("free",
           [](TestAllocator& t, size_t handle) {
             if (handle >= t.live.size() || !t.live[handle])
               throw py::index_error("free: bad handle");
             t.live[handle].reset();
           })
      .def("empty_cache", [](TestAllocator& t) { t.alloc->empty_cache(); })
      .def("set_caching", [](TestAllocator& t, bool on) { t.alloc->set_caching(on); })
      .def("stats", [](TestAllocator& t) { return stats_dict(t.alloc->stats()); })
      .def("snapshot", [](TestAllocator& t) { return snapshot_list(t.alloc->snapshot()); })
      .def_property_readonly("raw_calls", [](TestAllocator& t) { return t.raw->calls; })
      .def_property_readonly("raw_frees", [](TestAllocator& t) { return t.raw->frees; })
      .def_property_readonly("raw_failures", [](TestAllocator& t) { return t.raw->failures; })
      .def_property_readonly("raw_in_use", [](TestAllocator& t) { return t.raw->in_use; });
}

// The Python exception PyTorch raises for an engine error of this kind.
PyObject* python_error_type(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Value:
      return PyExc_ValueError;
    case ErrorKind::Type:
      return PyExc_TypeError;
    case ErrorKind::Index:
      return PyExc_IndexError;
    case ErrorKind::NotImplemented:
      return PyExc_NotImplementedError;
    case ErrorKind::DtypeNotImplemented:
      return g_dtype_error;
    case ErrorKind::OutOfMemory:
      return g_oom_error;
    case ErrorKind::Runtime:
      break;
  }
  return PyExc_RuntimeError;
}

void translate_errors() {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(python_error_type(e.kind()), e.what());
    }
  });
}

// ember._C._C_API (extension/c_api.h): tensors and errors for extension modules.
const ExtensionApi g_extension_api = {
    kExtensionApiVersion,
    [](PyObject* obj, Tensor* out) -> int {
      py::detail::make_caster<Tensor> caster;
      if (obj == nullptr || obj == Py_None || !caster.load(obj, false)) return 0;
      *out = py::detail::cast_op<Tensor>(caster);
      return 1;
    },
    [](const Tensor& t) -> PyObject* {
      if (!t) return py::none().release().ptr();
      try {
        return py::cast(t).release().ptr();
      } catch (py::error_already_set& e) {
        e.restore();
      } catch (const std::exception& e) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
      }
      return nullptr;
    },
    [](int kind, const char* message) {
      PyErr_SetString(python_error_type(static_cast<ErrorKind>(kind)), message);
    },
};

// Testing aid for the thread pool (tests/test_thread_pool.py): parallel_for over [0, n) with
// `grain`, checking that every element is visited exactly once. The chunk holding element
// `throw_at` raises ValueError; with `nested`, every chunk runs a parallel_for over its own range
// (which must run inline on the same thread). Returns (chunks, distinct threads, nested calls).
std::tuple<int64_t, int64_t, int64_t> parallel_for_probe(int64_t n, int64_t grain, int64_t throw_at,
                                                         bool nested) {
  const char* op = "_parallel_for_probe()";
  EMBER_CHECK_KIND(n >= 0 && n <= (int64_t{1} << 28), Value, op, ": expected 0 <= n <= 2**28, got ",
                   n);
  std::vector<std::atomic<uint8_t>> hits(static_cast<size_t>(n));
  std::atomic<int64_t> chunks{0}, inner{0};
  std::mutex ids_mutex;
  std::set<std::thread::id> ids;
  auto visit = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
  };
  parallel_for(0, n, grain, [&](int64_t b, int64_t e) {
    chunks.fetch_add(1);
    const std::thread::id me = std::this_thread::get_id();
    {
      std::lock_guard<std::mutex> g(ids_mutex);
      ids.insert(me);
    }
    if (throw_at >= b && throw_at < e)
      EMBER_FAIL(Value, op, ": chunk [", b, ", ", e, ") raised at element ", throw_at);
    if (!nested) return visit(b, e);
    parallel_for(b, e, 1, [&](int64_t ib, int64_t ie) {
      inner.fetch_add(1);
      EMBER_CHECK(std::this_thread::get_id() == me, op, ": a nested region left its thread");
      visit(ib, ie);
    });
  });
  for (int64_t i = 0; i < n; ++i) {
    const int h = hits[i].load();
    EMBER_CHECK(h == 1, op, ": element ", i, " was visited ", h, " times");
  }
  return {chunks.load(), static_cast<int64_t>(ids.size()), inner.load()};
}

}  // namespace

PyObject* dtype_object(ScalarType t) { return g_dtype_objects[static_cast<int>(t)]; }

bool dtype_from_object(PyObject* o, ScalarType* out) {
  for (int i = 0; i < kNumScalarTypes; ++i) {
    if (g_dtype_objects[i] == o) {
      *out = static_cast<ScalarType>(i);
      return true;
    }
  }
  if (o == reinterpret_cast<PyObject*>(&PyFloat_Type)) {
    *out = ScalarType::Float64;
    return true;
  }
  if (o == reinterpret_cast<PyObject*>(&PyLong_Type)) {
    *out = ScalarType::Int64;
    return true;
  }
  if (o == reinterpret_cast<PyObject*>(&PyBool_Type)) {
    *out = ScalarType::Bool;
    return true;
  }
  return false;
}

}  // namespace ember

namespace {

// The Python side of ember.Tensor beyond pybind11's defaults. Tensors take part in Python's
// cycle collection through their hooks (python_hooks.cpp) and their instance __dict__
// (t.name = value, as in PyTorch); the dict is a classic slot after pybind11's instance rather
// than a managed dict, so the layout is the same on every Python version.
void setup_tensor_type(PyHeapTypeObject* heap_type) {
  PyTypeObject* type = &heap_type->ht_type;
  type->tp_name = "Tensor";  // as messages name it ("'Tensor' object has no attribute ...")
  type->tp_flags |= Py_TPFLAGS_HAVE_GC;
  type->tp_dictoffset = type->tp_basicsize;
  type->tp_basicsize += static_cast<Py_ssize_t>(sizeof(PyObject*));
  static PyGetSetDef dict_getset[] = {
      {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
      {nullptr, nullptr, nullptr, nullptr, nullptr}};
  type->tp_getset = dict_getset;
  type->tp_traverse = [](PyObject* self, visitproc visit, void* arg) {
    Py_VISIT(Py_TYPE(self));  // instances of heap types own their type
    Py_VISIT(*_PyObject_GetDictPtr(self));
    return ember::traverse_tensor_hooks(self, visit, arg);
  };
  type->tp_clear = [](PyObject* self) {
    Py_CLEAR(*_PyObject_GetDictPtr(self));
    return ember::clear_tensor_hooks(self);
  };
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  using namespace ember;
  m.doc() = "ember's C++ core: tensors, ops, memory.";
  g_oom_error = PyErr_NewExceptionWithDoc(
      "ember.OutOfMemoryError", "A device allocation failed even after freeing the cache.",
      PyExc_RuntimeError, nullptr);
  m.attr("OutOfMemoryError") = py::handle(g_oom_error);
  {
    py::tuple bases =
        py::make_tuple(py::handle(PyExc_NotImplementedError), py::handle(PyExc_TypeError));
    g_dtype_error = PyErr_NewExceptionWithDoc(
        "ember.DtypeNotImplementedError",
        "An op has no kernel for a dtype: a NotImplementedError, as PyTorch raises, and a "
        "TypeError, as earlier ember versions raised.",
        bases.ptr(), nullptr);
  }
  m.attr("DtypeNotImplementedError") = py::handle(g_dtype_error);
  translate_errors();
  m.attr("_C_API") = py::capsule(&g_extension_api, "ember._C._C_API");
  // Engine warnings (an out= tensor resized, ...) become Python UserWarnings, attributed to the
  // caller's line; a warnings filter that turns them into errors makes the op raise that error.
  set_warning_handler([](const std::string& message) {
    py::gil_scoped_acquire gil;
    if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) < 0) throw py::error_already_set();
  });
  m.def(
      "_prepare_out",
      [](const Tensor& out, const Tensor& result, const std::string& op, bool exact) {
        prepare_out(out, result->sizes(), result->dtype(), result->device(), op.c_str(),
                    exact ? OutDtype::Exact : OutDtype::CanCast);
        return out;
      },
      py::arg("out"), py::arg("result"), py::arg("op"), py::arg("exact") = false,
      "Prepares out= for `result` the way every op does: torch.can_cast(result.dtype, "
      "out.dtype) (exact: the same dtype) and the same device are required, and out takes "
      "result's shape (a UserWarning when out had elements). Python ops with out= call it "
      "before copying.");
  // A cuda tensor asked for before ember.cuda was touched loads ember._C_cuda then (when it was
  // built); without it the engine's "no backend" error stands.
  set_backend_loader([](DeviceType type) {
    if (type != DeviceType::CUDA) return;
    py::gil_scoped_acquire gil;
    try {
      py::module_::import("ember._C_cuda");
    } catch (py::error_already_set&) {
      // CPU-only build or no CUDA runtime: the caller reports that no backend is registered.
    }
  });
  bind_dtypes(m);
  bind_device(m);
  bind_generator(m);
  bind_memory(m);
  m.def(
      "_cpu_isa", [] { return cpu::isa_name(cpu::cpu_isa()); },
      "The vector instruction set the CPU kernels use (capped by EMBER_CPU_ISA).");
  m.def("get_num_threads", &get_num_threads);
  m.def("_set_sdp_backends", &set_sdp_backends, py::arg("math"), py::arg("fused"));
  m.def("_sdp_backends", [] { return py::make_tuple(sdp_math_enabled(), sdp_fused_enabled()); });
  m.def("set_num_threads", &set_num_threads, py::arg("int"));  // torch's documented name
  m.def("_parallel_for_probe", &parallel_for_probe, py::arg("n"), py::arg("grain"),
        py::arg("throw_at") = -1, py::arg("nested") = false,
        py::call_guard<py::gil_scoped_release>());

  TensorClass cls(m, "Tensor", py::buffer_protocol(), py::custom_type_setup(setup_tensor_type));
  bind_tensor(m, cls);
  bind_generated_ops(m, cls);
  bind_indexing(m, cls);
  bind_interop(m, cls);
  bind_shared_memory(m, cls);
  bind_storage(m, cls);
  bind_autograd(m, cls);
  bind_forward_ad(m);
  bind_gamma_values(m);
  bind_op_observer(m);
  bind_profiler(m);
  bind_memory_history(m);
  bind_shm_collectives(m);
  bind_sparse_dispatch(m);
  bind_arg_errors(m);
  bind_torch_function(m);
  bind_python_dispatch(m);
}
