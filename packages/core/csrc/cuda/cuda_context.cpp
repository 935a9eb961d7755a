#include "cuda/cuda_context.h"

#include <pthread.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace ember {
namespace cuda {

// In a child forked after this process loaded CUDA (install_fork_guard, called when the CUDA
// extension loads with a device present), every checked CUDA call raises PyTorch's error: the
// driver cannot be used across fork.
namespace {
std::atomic<bool> g_bad_fork{false};
void mark_forked_child() { g_bad_fork.store(true, std::memory_order_relaxed); }
bool in_bad_fork() { return g_bad_fork.load(std::memory_order_relaxed); }
}  // namespace

void install_fork_guard() {
  static const bool installed = pthread_atfork(nullptr, nullptr, &mark_forked_child) == 0;
  (void)installed;
}

void check(cudaError_t err, const char* what) {
  if (in_bad_fork()) {  // before looking at err: the call itself was not valid here
    EMBER_FAIL(Runtime,
               "Cannot re-initialize CUDA in forked subprocess. To use CUDA with "
               "multiprocessing, you must use the 'spawn' start method (",
               what, ")");
  }
  if (err == cudaSuccess) return;
  const char* msg = cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    EMBER_FAIL(OutOfMemory, "CUDA out of memory in ", what, ": ", msg);
  }
  EMBER_FAIL(Runtime, "CUDA error in ", what, ": ", msg,
             " (CUDA kernel errors are reported asynchronously; set EMBER_LAUNCH_BLOCKING=1 to "
             "report them at the op that launched the kernel)");
}

bool launch_blocking() {
  static const bool on = [] {
    const char* v = std::getenv("EMBER_LAUNCH_BLOCKING");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

void check_launch(const char* op) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    EMBER_FAIL(Runtime, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
  if (launch_blocking()) {
    err = cudaStreamSynchronize(current_stream());
    if (err != cudaSuccess)
      EMBER_FAIL(Runtime, op, ": CUDA error in the kernel: ", cudaGetErrorString(err));
  }
}

int device_count() {
  static const int n = [] {
    int c = 0;
    if (cudaGetDeviceCount(&c) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return c;
  }();
  return n;
}

int current_device() {
  int d = 0;
  // Most CUDA work starts here: a forked child raises before calling into the driver at all.
  if (in_bad_fork()) check(cudaErrorInitializationError, "cudaGetDevice");
  EMBER_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void set_device(int index) {
  if (index < 0 || index >= device_count())
    EMBER_FAIL(Value, "cuda: invalid device index ", index, " (", device_count(),
               " CUDA device(s) visible)");
  EMBER_CUDA_CHECK(cudaSetDevice(index));
}

int resolve_device(int index) { return index < 0 ? current_device() : index; }

DeviceGuard::DeviceGuard(int index) {
  if (index < 0) return;
  int cur = current_device();
  if (cur != index) {
    set_device(index);
    prev_ = cur;
  }
}
DeviceGuard::~DeviceGuard() {
  if (prev_ >= 0) (void)cudaSetDevice(prev_);
}

namespace {
thread_local std::vector<cudaStream_t> t_current;  // per device; null: the default stream
}

cudaStream_t current_stream(int index) {
  index = resolve_device(index);
  return index < static_cast<int>(t_current.size()) ? t_current[index] : nullptr;
}

void set_current_stream(int index, cudaStream_t stream) {
  index = resolve_device(index);
  if (index >= static_cast<int>(t_current.size())) t_current.resize(index + 1, nullptr);
  t_current[index] = stream;
}

}  // namespace cuda
}  // namespace ember
