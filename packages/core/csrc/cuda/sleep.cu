// ember.cuda._sleep(cycles): a kernel that spins for a number of clock cycles on the current
// stream (PyTorch's torch.cuda._sleep). Tests use it to keep a stream busy while they check
// that other streams, events and the allocators wait for it.
#include "cuda/cuda_context.h"

namespace ember {
namespace cuda {

namespace {
__global__ void spin_kernel(int64_t cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}
}  // namespace

void sleep_on_current_stream(int64_t cycles) {
  spin_kernel<<<1, 1, 0, current_stream()>>>(cycles);
  check_launch("_sleep");
}

}  // namespace cuda
}  // namespace ember
