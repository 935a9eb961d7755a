#include "cuda/streams.h"

#include <array>
#include <map>
#include <mutex>
#include <vector>

namespace ember {
namespace cuda {

namespace {
constexpr int kStreamsPerPool = 32;

struct Pool {
  std::array<cudaStream_t, kStreamsPerPool> streams{};
  int next = 0;
};

std::mutex g_mutex;
// (device, priority) -> pool. Leaked: streams live as long as the process.
std::map<std::pair<int, int>, Pool>& pools() {
  static auto* p = new std::map<std::pair<int, int>, Pool>();
  return *p;
}
}  // namespace

std::pair<int, int> stream_priority_range(int index) {
  DeviceGuard guard(resolve_device(index));
  int least = 0, greatest = 0;
  EMBER_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return {least, greatest};
}

cudaStream_t pool_stream(int index, int priority) {
  index = resolve_device(index);
  if (index >= device_count())
    EMBER_FAIL(Value, "cuda: invalid device index ", index, " (", device_count(),
               " CUDA device(s) visible)");
  auto [least, greatest] = stream_priority_range(index);
  if (priority > least) priority = least;
  if (priority < greatest) priority = greatest;
  std::lock_guard<std::mutex> lock(g_mutex);
  Pool& pool = pools()[{index, priority}];
  cudaStream_t& s = pool.streams[pool.next];
  pool.next = (pool.next + 1) % kStreamsPerPool;
  if (!s) {
    DeviceGuard guard(index);
    EMBER_CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, priority));
  }
  return s;
}

}  // namespace cuda
}  // namespace ember
