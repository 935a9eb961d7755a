// Loading cuDNN at run time (cudnn_api.h): dlopen of libcudnn.so.9 and dlsym of each entry point
// ember uses, the switches of ember.backends.cudnn, and the per-thread handles.
#include "cuda/cudnn_api.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <type_traits>

#include "core/error.h"
#include "cuda/cuda_context.h"
#include "cuda/dynamic_library.h"

namespace ember {
namespace cuda {
namespace cudnn {
namespace {

constexpr const char* kSoname = "libcudnn.so.9";

struct Loader {
  std::mutex mutex;
  bool attempted = false;
  bool ok = false;
  Api api{};
  std::string error;
  std::string path;
  std::vector<std::string> dirs;
};

Loader& loader() {
  static Loader* l = new Loader();  // never destroyed: kernels may run during interpreter exit
  return *l;
}

// Resolves every entry point of `lib` into `api`; on a missing one, names it in *missing.
bool resolve(void* lib, Api* api, std::string* missing) {
  dynlib::Symbols symbols(lib);
  auto get = [&](auto& fn, const char* name, bool required = true) {
    symbols.get(fn, name, required);
  };
  get(api->GetVersion, "cudnnGetVersion");
  get(api->GetErrorString, "cudnnGetErrorString");
  get(api->GetLastErrorString, "cudnnGetLastErrorString", false);
  get(api->Create, "cudnnCreate");
  get(api->SetStream, "cudnnSetStream");
  get(api->CreateTensorDescriptor, "cudnnCreateTensorDescriptor");
  get(api->SetTensorNdDescriptor, "cudnnSetTensorNdDescriptor");
  get(api->DestroyTensorDescriptor, "cudnnDestroyTensorDescriptor");
  get(api->CreateFilterDescriptor, "cudnnCreateFilterDescriptor");
  get(api->SetFilterNdDescriptor, "cudnnSetFilterNdDescriptor");
  get(api->DestroyFilterDescriptor, "cudnnDestroyFilterDescriptor");
  get(api->CreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor");
  get(api->SetConvolutionNdDescriptor, "cudnnSetConvolutionNdDescriptor");
  get(api->SetConvolutionMathType, "cudnnSetConvolutionMathType");
  get(api->SetConvolutionGroupCount, "cudnnSetConvolutionGroupCount");
  get(api->DestroyConvolutionDescriptor, "cudnnDestroyConvolutionDescriptor");
  get(api->GetConvolutionNdForwardOutputDim, "cudnnGetConvolutionNdForwardOutputDim", false);
  get(api->GetConvolutionForwardAlgorithm_v7, "cudnnGetConvolutionForwardAlgorithm_v7");
  get(api->FindConvolutionForwardAlgorithmEx, "cudnnFindConvolutionForwardAlgorithmEx");
  get(api->GetConvolutionForwardWorkspaceSize, "cudnnGetConvolutionForwardWorkspaceSize");
  get(api->ConvolutionForward, "cudnnConvolutionForward");
  get(api->GetConvolutionBackwardDataAlgorithm_v7, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
  get(api->FindConvolutionBackwardDataAlgorithmEx, "cudnnFindConvolutionBackwardDataAlgorithmEx");
  get(api->GetConvolutionBackwardDataWorkspaceSize, "cudnnGetConvolutionBackwardDataWorkspaceSize");
  get(api->ConvolutionBackwardData, "cudnnConvolutionBackwardData");
  get(api->GetConvolutionBackwardFilterAlgorithm_v7,
      "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
  get(api->FindConvolutionBackwardFilterAlgorithmEx,
      "cudnnFindConvolutionBackwardFilterAlgorithmEx");
  get(api->GetConvolutionBackwardFilterWorkspaceSize,
      "cudnnGetConvolutionBackwardFilterWorkspaceSize");
  get(api->ConvolutionBackwardFilter, "cudnnConvolutionBackwardFilter");
  get(api->BackendCreateDescriptor, "cudnnBackendCreateDescriptor", false);
  get(api->BackendDestroyDescriptor, "cudnnBackendDestroyDescriptor", false);
  get(api->BackendFinalize, "cudnnBackendFinalize", false);
  get(api->BackendSetAttribute, "cudnnBackendSetAttribute", false);
  get(api->BackendGetAttribute, "cudnnBackendGetAttribute", false);
  get(api->BackendExecute, "cudnnBackendExecute", false);
  *missing = symbols.missing();
  return symbols.ok();
}

// Tries one candidate: true when loaded and complete (l.api, l.path set); else appends why.
bool try_load(Loader& l, const std::string& candidate, std::ostringstream& why) {
  void* lib = dynlib::open(candidate, why);
  if (!lib) return false;
  Api api{};
  std::string missing;
  if (!resolve(lib, &api, &missing)) {
    why << "\n  " << candidate << ": loaded, but it has no symbol " << missing;
    dlclose(lib);
    return false;
  }
  const size_t version = api.GetVersion();
  if (version / 10000 != 9) {
    why << "\n  " << candidate << ": cuDNN " << version
        << " is not a cuDNN 9 (ember's declarations are checked against cuDNN 9)";
    dlclose(lib);
    return false;
  }
  l.api = api;
  l.path = candidate;
  return true;
}

void load_locked(Loader& l) {
  if (l.attempted) return;
  l.attempted = true;
  std::vector<std::string> candidates;
  const char* env = std::getenv("EMBER_CUDNN_LIBRARY");
  const bool from_env = env && *env;
  if (from_env) {
    // Only this one: EMBER_CUDNN_LIBRARY chooses the library (or, naming no library, none).
    const std::string p(env);
    candidates.push_back(dynlib::is_dir(p) ? p + "/" + kSoname : p);
  } else {
    for (const std::string& d : l.dirs)
      if (dynlib::is_dir(d)) candidates.push_back(d + "/" + kSoname);
    candidates.push_back(kSoname);  // LD_LIBRARY_PATH and the system's folders
  }
  std::ostringstream why;
  for (const std::string& c : candidates) {
    if (try_load(l, c, why)) {
      l.ok = true;
      l.error.clear();
      return;
    }
  }
  std::ostringstream msg;
  msg << "cuDNN is not available: could not load " << kSoname;
  if (from_env)
    msg << " from EMBER_CUDNN_LIBRARY";
  else
    msg << " (install NVIDIA's wheel nvidia-cudnn-cu13, or set EMBER_CUDNN_LIBRARY to its path)";
  msg << "; tried:" << why.str();
  l.error = msg.str();
}

std::atomic<bool> g_enabled{true}, g_benchmark{false}, g_deterministic{false}, g_tf32{true};

// Handles of this thread, one per device, created on first use. Never destroyed: destroying a
// handle at thread or process exit can race CUDA's own teardown; a thread that ends hands its
// handles to a pool the next new thread takes them from, so threads that come and go reuse them.
struct HandlePool {
  std::mutex mutex;
  std::vector<std::vector<Handle>> free_by_device;
};
HandlePool& handle_pool() {
  static HandlePool* p = new HandlePool();
  return *p;
}

struct ThreadHandles {
  std::vector<Handle> by_device;
  ~ThreadHandles() {
    HandlePool& pool = handle_pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    for (size_t d = 0; d < by_device.size(); ++d) {
      if (!by_device[d]) continue;
      if (pool.free_by_device.size() <= d) pool.free_by_device.resize(d + 1);
      pool.free_by_device[d].push_back(by_device[d]);
    }
  }
};

}  // namespace

void set_search_dirs(std::vector<std::string> dirs) {
  Loader& l = loader();
  std::lock_guard<std::mutex> lock(l.mutex);
  if (dirs != l.dirs && !l.ok) l.attempted = false;  // new places: a failed load may succeed
  l.dirs = std::move(dirs);
}

const Api* api() {
  Loader& l = loader();
  std::lock_guard<std::mutex> lock(l.mutex);
  load_locked(l);
  return l.ok ? &l.api : nullptr;
}

std::string load_error() {
  Loader& l = loader();
  std::lock_guard<std::mutex> lock(l.mutex);
  return l.error;
}

std::string loaded_path() {
  Loader& l = loader();
  std::lock_guard<std::mutex> lock(l.mutex);
  return l.ok ? l.path : std::string();
}

std::string error_string(Status s) {
  const Api* a = api();
  if (!a) return std::string();
  std::string msg = a->GetErrorString(s);
  if (a->GetLastErrorString) {
    char buf[1024] = {0};
    a->GetLastErrorString(buf, sizeof(buf));
    buf[sizeof(buf) - 1] = '\0';
    if (buf[0]) msg += std::string(" (") + buf + ")";
  }
  return msg;
}

Flags flags() {
  Flags f;
  f.enabled = g_enabled.load(std::memory_order_relaxed);
  f.benchmark = g_benchmark.load(std::memory_order_relaxed);
  f.deterministic = g_deterministic.load(std::memory_order_relaxed);
  f.allow_tf32 = g_tf32.load(std::memory_order_relaxed);
  return f;
}

void set_flags(const Flags& f) {
  g_enabled.store(f.enabled, std::memory_order_relaxed);
  g_benchmark.store(f.benchmark, std::memory_order_relaxed);
  g_deterministic.store(f.deterministic, std::memory_order_relaxed);
  g_tf32.store(f.allow_tf32, std::memory_order_relaxed);
}

Handle handle_for_current_stream(const char* op) {
  const Api* a = api();
  EMBER_CHECK(a != nullptr, op, ": ", load_error());
  thread_local ThreadHandles mine;
  const int device = current_device();
  EMBER_CHECK(device >= 0, op, ": no current CUDA device");
  const size_t d = static_cast<size_t>(device);
  if (mine.by_device.size() <= d) mine.by_device.resize(d + 1, nullptr);
  Handle& h = mine.by_device[d];
  if (!h) {
    HandlePool& pool = handle_pool();
    std::lock_guard<std::mutex> lock(pool.mutex);
    if (pool.free_by_device.size() > d && !pool.free_by_device[d].empty()) {
      h = pool.free_by_device[d].back();
      pool.free_by_device[d].pop_back();
    }
  }
  if (!h) {
    Handle created = nullptr;
    const Status s = a->Create(&created);
    EMBER_CHECK(s == kSuccess, op, ": cudnnCreate failed on CUDA device ", device, ": ",
                error_string(s));
    h = created;
  }
  const Status s = a->SetStream(h, current_stream(device));
  EMBER_CHECK(s == kSuccess, op, ": cudnnSetStream failed: ", error_string(s));
  return h;
}

}  // namespace cudnn
}  // namespace cuda
}  // namespace ember
