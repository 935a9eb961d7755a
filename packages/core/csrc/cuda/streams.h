// CUDA streams handed out to Python (ember.cuda.Stream): like PyTorch's, they come from a pool
// per device and priority (32 non-blocking streams, handed out round robin, never destroyed), so
// a stream id stays valid for the whole process and the allocator's per-stream pools never see
// a handle reused by another stream.
#pragma once
#include "cuda/cuda_context.h"

namespace ember {
namespace cuda {

// A pool stream of device `index` (-1: current) with `priority` (clamped to the device's range;
// lower numbers run first, as in CUDA).
cudaStream_t pool_stream(int index, int priority);
// The device's range: (least, greatest) priority, e.g. (0, -5).
std::pair<int, int> stream_priority_range(int index);

}  // namespace cuda
}  // namespace ember
