// Kernel timing for ember.profiler on CUDA, through CUPTI's Activity API: the DeviceActivity of
// DeviceType::CUDA (autograd/profiler.h). While a profile with ProfilerActivity.CUDA runs, CUPTI
// records every kernel (CONCURRENT_KERNEL), copy (MEMCPY) and fill (MEMSET) the GPU executes, and
// every runtime / driver API call (RUNTIME, DRIVER) with the thread that made it; stop() turns
// them into DeviceEvents on the profiler's steady clock.
//
// libcupti is loaded at run time with dlopen (no link-time dependency: ember._C_cuda imports
// where CUPTI is missing). cupti.h is used for its types and constants only; every function comes
// from dlsym. Where load() looks, in order:
//   - $EMBER_CUPTI_LIBRARY (a file, or a folder holding libcupti.so.13): then only there;
//   - the lib folders of NVIDIA's wheels of this Python (nvidia/cu13/lib, nvidia/cuda_cupti/lib in
//     each entry of the `nvidia` namespace package's path, found when ember._C_cuda is imported);
//   - the CUDA toolkit: $CUDA_HOME and $CUDA_PATH, /usr/local/cuda, /usr/local/cuda-13*, each's
//     lib64, lib and extras/CUPTI/lib64;
//   - the loader's own search for libcupti.so.13, then libcupti.so.
// The library must be CUPTI 13 (the records are read with cupti_activity.h's 13.x layouts).
//
// Clocks: when CUPTI accepts a timestamp callback (cuptiActivityRegisterTimestampCallback), it
// takes its timestamps from profiler::now_ns() and the records are on the profiler's clock;
// otherwise the offset between cuptiGetTimestamp() and now_ns(), taken at start(), maps them.
//
// Which host op launched a kernel: the kernel's correlationId names its launch's RUNTIME (or
// DRIVER) record, which says the launching thread (CUPTI is set to report system thread ids,
// the ids the profiler records) and when the call ran. The profiler's Result has no field for
// that, so stop() keeps it aside, one entry per DeviceEvent it returns, and ember.profiler reads
// it (_cupti_take_launches) to attribute each kernel to the innermost host op on that thread
// that was open at the launch.
//
// No CUPTI call can raise through the profiler: start() and stop() run inside profiler::start /
// stop, so a failing call records its reason (CUPTI's own message) and the session records no
// device events; _cupti_status() reports it, and ember.profiler warns with it.
#include <cupti.h>
#include <cxxabi.h>
#include <dirent.h>
#include <dlfcn.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/device_activity.h"
#include "cuda/cuda_context.h"
#include "cuda/dynamic_library.h"

namespace py = pybind11;

namespace ember {
namespace cuda {
namespace cupti {
namespace {

constexpr const char* kSoname = "libcupti.so.13";
constexpr uint32_t kMajor = CUPTI_API_VERSION / 10000;  // 13: cuptiGetVersion() is 13xxxx

// ---- loading ------------------------------------------------------------------------------------

// The entry points ember uses, with cupti.h's signatures.
struct Api {
  decltype(&::cuptiGetVersion) GetVersion;
  decltype(&::cuptiGetResultString) GetResultString;
  decltype(&::cuptiGetTimestamp) GetTimestamp;
  decltype(&::cuptiSetThreadIdType) SetThreadIdType;
  decltype(&::cuptiActivityRegisterCallbacks) ActivityRegisterCallbacks;
  decltype(&::cuptiActivityRegisterTimestampCallback) ActivityRegisterTimestampCallback;  // opt.
  decltype(&::cuptiActivityEnable) ActivityEnable;
  decltype(&::cuptiActivityDisable) ActivityDisable;
  decltype(&::cuptiActivityFlushAll) ActivityFlushAll;
  decltype(&::cuptiActivityGetNextRecord) ActivityGetNextRecord;
  decltype(&::cuptiActivityGetNumDroppedRecords) ActivityGetNumDroppedRecords;
};

struct Loaded {
  bool ok = false;
  Api api{};
  std::string path;
  uint32_t version = 0;
  std::string error;  // why not loaded, naming every path tried
};

bool resolve(void* lib, Api* api, std::string* missing) {
  dynlib::Symbols symbols(lib);
  auto get = [&](auto& fn, const char* name, bool required = true) {
    symbols.get(fn, name, required);
  };
  get(api->GetVersion, "cuptiGetVersion");
  get(api->GetResultString, "cuptiGetResultString");
  get(api->GetTimestamp, "cuptiGetTimestamp");
  get(api->SetThreadIdType, "cuptiSetThreadIdType");
  get(api->ActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks");
  get(api->ActivityRegisterTimestampCallback, "cuptiActivityRegisterTimestampCallback", false);
  get(api->ActivityEnable, "cuptiActivityEnable");
  get(api->ActivityDisable, "cuptiActivityDisable");
  get(api->ActivityFlushAll, "cuptiActivityFlushAll");
  get(api->ActivityGetNextRecord, "cuptiActivityGetNextRecord");
  get(api->ActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
  *missing = symbols.missing();
  return symbols.ok();
}

// Tries one candidate: true when loaded, complete and CUPTI 13; else appends why to `why`. A
// library that loaded but is not usable stays loaded (unloading CUPTI is not safe to do).
bool try_load(const std::string& candidate, Loaded* out, std::ostringstream& why) {
  void* lib = dynlib::open(candidate, why);
  if (!lib) return false;
  Api api{};
  std::string missing;
  if (!resolve(lib, &api, &missing)) {
    why << "\n  " << candidate << ": loaded, but it has no symbol " << missing;
    return false;
  }
  uint32_t version = 0;
  const CUptiResult st = api.GetVersion(&version);
  if (st != CUPTI_SUCCESS) {
    why << "\n  " << candidate << ": cuptiGetVersion failed (CUPTI error " << static_cast<int>(st)
        << ")";
    return false;
  }
  if (version / 10000 != kMajor) {
    why << "\n  " << candidate << ": CUPTI API version " << version << " is not a CUPTI " << kMajor
        << " (ember reads the records with CUPTI " << kMajor << "'s layouts)";
    return false;
  }
  out->ok = true;
  out->api = api;
  out->path = candidate;
  out->version = version;
  out->error.clear();
  return true;
}

// The lib folders of the CUDA toolkits on this machine.
std::vector<std::string> toolkit_dirs() {
  std::vector<std::string> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* v = std::getenv(var);
    if (v && *v) roots.push_back(v);
  }
  roots.push_back("/usr/local/cuda");
  if (DIR* d = opendir("/usr/local")) {
    std::vector<std::string> versioned;
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind("cuda-" + std::to_string(kMajor), 0) == 0)
        versioned.push_back("/usr/local/" + name);
    }
    closedir(d);
    std::sort(versioned.rbegin(), versioned.rend());  // the newest first
    roots.insert(roots.end(), versioned.begin(), versioned.end());
  }
  std::vector<std::string> out;
  for (const std::string& r : roots)
    for (const char* sub : {"/lib64", "/lib", "/extras/CUPTI/lib64"}) out.push_back(r + sub);
  return out;
}

// A search with the current environment. `wheel_dirs`: the nvidia wheels' lib folders.
Loaded search(const std::vector<std::string>& wheel_dirs) {
  Loaded out;
  std::vector<std::string> candidates;
  const char* env = std::getenv("EMBER_CUPTI_LIBRARY");
  const bool from_env = env && *env;
  if (from_env) {
    const std::string p(env);
    candidates.push_back(dynlib::is_dir(p) ? p + "/" + kSoname : p);
  } else {
    std::vector<std::string> dirs = wheel_dirs;
    const std::vector<std::string> tk = toolkit_dirs();
    dirs.insert(dirs.end(), tk.begin(), tk.end());
    for (const std::string& d : dirs) {
      for (const char* name : {kSoname, "libcupti.so"}) {
        const std::string f = d + "/" + name;
        if (dynlib::is_file(f) &&
            std::find(candidates.begin(), candidates.end(), f) == candidates.end())
          candidates.push_back(f);
      }
    }
    candidates.push_back(kSoname);  // LD_LIBRARY_PATH and the system's folders
    candidates.push_back("libcupti.so");
  }
  std::ostringstream why;
  for (const std::string& c : candidates)
    if (try_load(c, &out, why)) return out;
  std::ostringstream msg;
  msg << "CUPTI is not available: could not load " << kSoname;
  if (from_env)
    msg << " from EMBER_CUPTI_LIBRARY";
  else
    msg << " (install NVIDIA's wheel nvidia-cuda-cupti, or set EMBER_CUPTI_LIBRARY to its path)";
  msg << "; tried:" << why.str();
  out.error = msg.str();
  return out;
}

std::mutex g_load_mutex;
std::vector<std::string>* g_wheel_dirs = new std::vector<std::string>();
Loaded* g_loaded = nullptr;  // the library the activity uses (loaded once, never unloaded)

const Loaded& loaded() {
  std::lock_guard<std::mutex> lock(g_load_mutex);
  if (!g_loaded) g_loaded = new Loaded(search(*g_wheel_dirs));
  return *g_loaded;
}

// ---- the activity -------------------------------------------------------------------------------

const char* kind_name(CUpti_ActivityKind k) {
  switch (k) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL";
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return "CUPTI_ACTIVITY_KIND_MEMCPY";
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return "CUPTI_ACTIVITY_KIND_MEMSET";
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      return "CUPTI_ACTIVITY_KIND_RUNTIME";
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return "CUPTI_ACTIVITY_KIND_DRIVER";
    default:
      return "CUPTI_ACTIVITY_KIND_?";
  }
}

const char* copy_kind_name(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "PtoP";
    default:
      return "Unknown";
  }
}

const char* memory_kind_name(uint32_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
      return "Pageable";
    case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
      return "Pinned";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE:
      return "Device";
    case CUPTI_ACTIVITY_MEMORY_KIND_ARRAY:
      return "Array";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED:
      return "Managed";
    case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
      return "Device Static";
    case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
      return "Managed Static";
    default:
      return "Unknown";
  }
}

uint64_t CUPTIAPI steady_timestamp() { return static_cast<uint64_t>(profiler::now_ns()); }

// The launch of one device event: the API call with its correlation id.
struct Launch {
  int64_t correlation_id = -1;
  int64_t tid = -1;                    // system thread id, -1: no API record seen
  int64_t start_ns = -1, end_ns = -1;  // the API call, on the profiler's clock
};

class CuptiActivity final : public profiler::DeviceActivity {
 public:
  explicit CuptiActivity(const Api& api) : api_(api) {}

  void start() override {
    try {
      start_impl();
    } catch (const std::exception& e) {  // no exception may leave profiler::start
      set_error(std::string("CUPTI profiling could not start: ") + e.what());
    }
  }

  std::vector<profiler::DeviceEvent> stop() override {
    try {
      return stop_impl();
    } catch (const std::exception& e) {
      set_error(std::string("CUPTI profiling could not stop cleanly: ") + e.what());
      std::lock_guard<std::mutex> lock(data_mutex_);
      collecting_ = false;
      raw_.clear();
      calls_.clear();
      return {};
    }
  }

  // Called by CUPTI (its worker thread, or inside cuptiActivityFlushAll) with a full buffer.
  void on_buffer(uint8_t* buffer, size_t valid) {
    std::lock_guard<std::mutex> lock(data_mutex_);
    if (!collecting_) return;  // after stop(): not ours to keep
    CUpti_Activity* rec = nullptr;
    for (;;) {
      const CUptiResult st = api_.ActivityGetNextRecord(buffer, valid, &rec);
      if (st == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // the end of the buffer
      if (st != CUPTI_SUCCESS) {
        buffer_error_ = "cuptiActivityGetNextRecord failed: " + result_string(st);
        break;
      }
      take(rec);
    }
    size_t dropped = 0;
    if (api_.ActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS)
      dropped_ += dropped;
  }

  std::string last_error() {
    std::lock_guard<std::mutex> lock(data_mutex_);
    return error_;
  }
  size_t dropped() {
    std::lock_guard<std::mutex> lock(data_mutex_);
    return dropped_;
  }
  bool own_clock() {
    std::lock_guard<std::mutex> lock(ctl_mutex_);
    return own_clock_;
  }
  std::vector<Launch> take_launches() {
    std::lock_guard<std::mutex> lock(data_mutex_);
    return std::move(launches_);
  }
  std::vector<std::pair<int64_t, int64_t>> take_launch_times() {
    std::lock_guard<std::mutex> lock(data_mutex_);
    return std::move(launch_event_times_);
  }

 private:
  // A device record as it came, on CUPTI's clock.
  struct Raw {
    std::string name;
    int device;
    uint32_t stream;
    uint64_t start, end;
    uint32_t correlation;
  };
  struct Call {
    uint32_t tid;
    uint64_t start, end;
  };

  static constexpr CUpti_ActivityKind kKinds[] = {
      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
      CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

  std::string result_string(CUptiResult st) const {
    const char* s = nullptr;
    std::string out;
    if (api_.GetResultString(st, &s) == CUPTI_SUCCESS && s)
      out = s;
    else
      out = "CUPTI error";
    return out + " (" + std::to_string(static_cast<int>(st)) + ")";
  }

  void set_error(std::string e) {
    std::lock_guard<std::mutex> lock(data_mutex_);
    error_ = std::move(e);
  }

  void start_impl() {
    std::lock_guard<std::mutex> ctl(ctl_mutex_);
    {
      std::lock_guard<std::mutex> lock(data_mutex_);
      error_.clear();
      buffer_error_.clear();
      dropped_ = 0;
      raw_.clear();
      calls_.clear();
      names_.clear();
      launches_.clear();
      launch_event_times_.clear();
    }
    // Before any kind is enabled: the clock, the thread ids, the buffers. Again at every start:
    // another CUPTI client of this process (torch.profiler's, when it loaded the same
    // libcupti) may have put its own in place since the last profile.
    if (api_.ActivityRegisterTimestampCallback &&
        api_.ActivityRegisterTimestampCallback(&steady_timestamp) == CUPTI_SUCCESS)
      own_clock_ = true;  // stays: CUPTI keeps a callback once it has one
    CUptiResult st = api_.SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    system_tids_ = st == CUPTI_SUCCESS;  // else kernels cannot be matched to host threads
    st = api_.ActivityRegisterCallbacks(&buffer_requested, &buffer_completed);
    if (st != CUPTI_SUCCESS) {
      set_error("cuptiActivityRegisterCallbacks failed: " + result_string(st));
      return;
    }
    offset_ns_ = 0;
    if (!own_clock_) {
      // The offset from CUPTI's clock to now_ns(): the sample read in the shortest bracket.
      int64_t best_width = -1;
      for (int i = 0; i < 5; ++i) {
        uint64_t c = 0;
        const int64_t t0 = profiler::now_ns();
        const CUptiResult st = api_.GetTimestamp(&c);
        const int64_t t1 = profiler::now_ns();
        if (st != CUPTI_SUCCESS) {
          set_error("cuptiGetTimestamp failed: " + result_string(st));
          return;
        }
        if (best_width < 0 || t1 - t0 < best_width) {
          best_width = t1 - t0;
          offset_ns_ = t0 + (t1 - t0) / 2 - static_cast<int64_t>(c);
        }
      }
    }
    {
      std::lock_guard<std::mutex> lock(data_mutex_);
      collecting_ = true;
    }
    size_t enabled = 0;
    for (CUpti_ActivityKind k : kKinds) {
      const CUptiResult st = api_.ActivityEnable(k);
      if (st != CUPTI_SUCCESS) {
        for (size_t i = 0; i < enabled; ++i) api_.ActivityDisable(kKinds[i]);
        api_.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        std::lock_guard<std::mutex> lock(data_mutex_);
        collecting_ = false;
        raw_.clear();
        calls_.clear();
        error_ =
            std::string("cuptiActivityEnable(") + kind_name(k) + ") failed: " + result_string(st);
        if (st == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
          error_ += " (another profiler, e.g. Nsight Systems, owns CUPTI in this process)";
        return;
      }
      ++enabled;
    }
    active_ = true;
  }

  std::vector<profiler::DeviceEvent> stop_impl() {
    std::lock_guard<std::mutex> ctl(ctl_mutex_);
    if (!active_) return {};
    active_ = false;
    std::string problem;
    for (CUpti_ActivityKind k : kKinds) {
      const CUptiResult st = api_.ActivityDisable(k);
      if (st != CUPTI_SUCCESS && problem.empty())
        problem =
            std::string("cuptiActivityDisable(") + kind_name(k) + ") failed: " + result_string(st);
    }
    // Hands over every buffer, with the records of work still running (those are left out
    // below: ember.profiler synchronizes the device before it stops).
    const CUptiResult st = api_.ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (st != CUPTI_SUCCESS && problem.empty())
      problem = "cuptiActivityFlushAll failed: " + result_string(st);

    std::vector<Raw> raw;
    std::unordered_map<uint32_t, Call> calls;
    {
      std::lock_guard<std::mutex> lock(data_mutex_);
      collecting_ = false;
      raw.swap(raw_);
      calls.swap(calls_);
      names_.clear();
      if (problem.empty() && !buffer_error_.empty()) problem = buffer_error_;
      if (problem.empty() && dropped_ > 0)
        problem = std::to_string(dropped_) + " CUPTI records were dropped (buffers full)";
      error_ = problem;
    }

    std::sort(raw.begin(), raw.end(), [](const Raw& a, const Raw& b) { return a.start < b.start; });
    std::vector<profiler::DeviceEvent> events;
    std::vector<Launch> launches;
    std::vector<std::pair<int64_t, int64_t>> times;
    events.reserve(raw.size());
    for (Raw& r : raw) {
      if (r.start == 0 || r.end < r.start) continue;  // incomplete (still running at the flush)
      profiler::DeviceEvent e;
      e.name = std::move(r.name);
      e.device = Device{DeviceType::CUDA, static_cast<int8_t>(r.device)};
      e.stream = static_cast<int64_t>(r.stream);
      e.start_ns = static_cast<int64_t>(r.start) + offset_ns_;
      e.end_ns = static_cast<int64_t>(r.end) + offset_ns_;
      e.correlation_op = -1;  // ember.profiler attributes it from the launch below
      Launch l;
      l.correlation_id = r.correlation;
      auto it = calls.find(r.correlation);
      if (it != calls.end() && system_tids_) {
        l.tid = it->second.tid;
        l.start_ns = static_cast<int64_t>(it->second.start) + offset_ns_;
        l.end_ns = static_cast<int64_t>(it->second.end) + offset_ns_;
      }
      times.emplace_back(e.start_ns, e.end_ns);
      events.push_back(std::move(e));
      launches.push_back(l);
    }
    {
      std::lock_guard<std::mutex> lock(data_mutex_);
      launches_ = std::move(launches);
      launch_event_times_ = std::move(times);
    }
    return events;
  }

  // One record (under data_mutex_).
  void take(const CUpti_Activity* rec) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        raw_.push_back({kernel_name(k->name), static_cast<int>(k->deviceId), k->streamId, k->start,
                        k->end, k->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
        std::string name = std::string("Memcpy ") + copy_kind_name(m->copyKind) + " (" +
                           memory_kind_name(m->srcKind) + " -> " + memory_kind_name(m->dstKind) +
                           ")";
        raw_.push_back({std::move(name), static_cast<int>(m->deviceId), m->streamId, m->start,
                        m->end, m->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
        std::string name = std::string("Memset (") + memory_kind_name(m->memoryKind) + ")";
        raw_.push_back({std::move(name), static_cast<int>(m->deviceId), m->streamId, m->start,
                        m->end, m->correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
        calls_.emplace(a->correlationId, Call{a->threadId, a->start, a->end});  // the first
        break;
      }
      default:
        break;
    }
  }

  // The demangled name (CUPTI shares one name string among a kernel's records: cached by it).
  std::string kernel_name(const char* mangled) {
    if (!mangled) return "<unnamed kernel>";
    auto it = names_.find(mangled);
    if (it != names_.end()) return it->second;
    int status = 0;
    char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    std::string name = (status == 0 && d) ? std::string(d) : std::string(mangled);
    std::free(d);
    names_.emplace(mangled, name);
    return name;
  }

  static void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer,
                                        size_t size, size_t valid);

  const Api api_;
  std::mutex ctl_mutex_;  // start / stop (never held by the buffer callbacks)
  bool own_clock_ = false, system_tids_ = false, active_ = false;
  int64_t offset_ns_ = 0;
  std::mutex data_mutex_;  // what the buffer callbacks fill, and the results
  bool collecting_ = false;
  std::vector<Raw> raw_;
  std::unordered_map<uint32_t, Call> calls_;
  std::unordered_map<const char*, std::string> names_;
  std::string error_, buffer_error_;
  size_t dropped_ = 0;
  std::vector<Launch> launches_;
  std::vector<std::pair<int64_t, int64_t>> launch_event_times_;
};

CuptiActivity* g_activity = nullptr;  // never destroyed: CUPTI may call back until exit

constexpr size_t kBufferBytes = size_t{4} << 20;  // per buffer CUPTI asks for
constexpr size_t kBufferAlign = 8;                // what CUPTI requires of a buffer

void CUPTIAPI CuptiActivity::buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;  // no memory: CUPTI drops the records (counted)
  *max_records = 0;                    // as many as fit
}

void CUPTIAPI CuptiActivity::buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t,
                                              size_t valid) {
  try {
    if (g_activity && buffer && valid > 0) g_activity->on_buffer(buffer, valid);
  } catch (...) {  // nothing may unwind into CUPTI; what was read before stays
  }
  std::free(buffer);
}

py::dict status_dict(const Loaded& l) {
  py::dict d;
  d["loaded"] = l.ok;
  d["path"] = l.path;
  d["version"] = l.version;
  d["error"] = l.error;
  return d;
}

// The lib folders of NVIDIA's wheels that may hold libcupti.so.13, found without importing them.
std::vector<std::string> wheel_dirs() {
  std::vector<std::string> out;
  try {
    py::object spec = py::module_::import("importlib.util").attr("find_spec")("nvidia");
    if (spec.is_none()) return out;
    py::object locations = spec.attr("submodule_search_locations");
    if (locations.is_none()) return out;
    for (py::handle root : locations) {
      const std::string r = py::str(root);
      for (const char* sub : {"/cu13/lib", "/cuda_cupti/lib"})
        if (dynlib::is_dir(r + sub)) out.push_back(r + sub);
    }
  } catch (py::error_already_set&) {  // no `nvidia` package, or a broken one: not a place
  }
  return out;
}

}  // namespace

void bind(py::module_& m) {
  {
    std::lock_guard<std::mutex> lock(g_load_mutex);
    *g_wheel_dirs = wheel_dirs();
  }
  // Registered only where it can work: a GPU, and a CUPTI 13 that loads. Otherwise
  // ProfilerActivity.CUDA warns (with _cupti_status()'s reason) and records host ops only.
  if (device_count() > 0) {
    const Loaded& l = loaded();
    if (l.ok) {
      g_activity = new CuptiActivity(l.api);
      profiler::register_device_activity(DeviceType::CUDA, g_activity);
    }
  }
  m.def(
      "_cupti_status",
      [] {
        py::dict d = status_dict(loaded());
        d["registered"] = g_activity != nullptr;
        d["last_error"] = g_activity ? g_activity->last_error() : std::string();
        d["dropped"] = g_activity ? g_activity->dropped() : size_t{0};
        d["own_clock"] = g_activity ? g_activity->own_clock() : false;
        return d;
      },
      "CUPTI as ember.profiler uses it: loaded (bool), path, version, error (why it did not "
      "load), registered (the CUDA device activity is in place), last_error (why the last "
      "profile recorded no device events, '' if it did), dropped (records CUPTI dropped).");
  m.def(
      "_cupti_probe",
      [] {
        std::vector<std::string> dirs;
        {
          std::lock_guard<std::mutex> lock(g_load_mutex);
          dirs = *g_wheel_dirs;
        }
        return status_dict(search(dirs));
      },
      "Search for libcupti again with the current environment (EMBER_CUPTI_LIBRARY, ...) and "
      "say what it found (loaded, path, version, error); the library in use does not change.");
  m.def(
      "_cupti_take_launches",
      [] {
        py::list out;
        if (!g_activity) return out;
        std::vector<Launch> launches = g_activity->take_launches();
        std::vector<std::pair<int64_t, int64_t>> times = g_activity->take_launch_times();
        for (size_t i = 0; i < launches.size() && i < times.size(); ++i) {
          const Launch& l = launches[i];
          out.append(py::make_tuple(times[i].first, times[i].second, l.correlation_id, l.tid,
                                    l.start_ns, l.end_ns));
        }
        return out;
      },
      "The launches of the device events the last profile's stop returned, in their order: "
      "(event start_ns, event end_ns, correlation id, launching thread id or -1, API call "
      "start_ns, end_ns); taken once.");
}

}  // namespace cupti
}  // namespace cuda
}  // namespace ember
