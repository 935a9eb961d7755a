// CUDA kernels of the GradScaler ops (kernels/cpu/nn_amp.cpp is the CPU reference):
// _amp_foreach_non_finite_check_and_unscale_ checks and unscales a whole list of gradients with
// one launch per dtype (multi-tensor, as cuda/fused_optim.cu: a table of tensors cut into
// chunks, one block per chunk), reading inv_scale and writing found_inf on the device, so the
// host never waits; _amp_update_scale_ is one thread updating the scale and growth tracker in
// place (kernels/amp_rules.h's amp_update_scale, the CPU kernel's arithmetic).
#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "core/dispatch.h"
#include "cuda/cuda_registry.h"
#include "cuda/device_types.cuh"
#include "cuda/index_common.cuh"
#include "kernels/amp_rules.h"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {
namespace amp {

constexpr int64_t kChunk = int64_t(1) << 15;  // elements per block

struct Slice {
  uint64_t ptr;  // device address of a contiguous tensor's first element
  int64_t n;
};

struct Chunk {
  int64_t tensor, begin, end;
};

template <class T>
__global__ void unscale_kernel(const Slice* __restrict__ slices, const Chunk* __restrict__ chunks,
                               float* found_inf, const float* inv_scale) {
  using A = dev_opmath_t<T>;
  const Chunk c = chunks[blockIdx.x];
  T* p = reinterpret_cast<T*>(slices[c.tensor].ptr);
  const float inv = *inv_scale;
  const A s = static_cast<A>(inv);
  bool bad = false;
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) {
    const A v = to_op<T>(p[i]);
    bad |= !nn::amp_finite(v);
    if (inv != 1.0f) p[i] = from_op<T>(v * s);
  }
  // Every writer stores the same value, so the race between them is harmless.
  if (bad) *found_inf = 1.0f;
}

__global__ void update_scale_kernel(float* scale, int32_t* tracker, const float* found_inf,
                                    float growth, float backoff, int64_t interval) {
  nn::amp_update_scale(scale, tracker, *found_inf, growth, backoff, interval);
}

void _amp_foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& self,
                                                const Tensor& found_inf, const Tensor& inv_scale) {
  const char* op = "_amp_foreach_non_finite_check_and_unscale_";
  ix::check_cuda(found_inf, op, "found_inf");
  nn::check_amp_unscale(op, self, found_inf, inv_scale, &ix::check_same_device);
  if (self.empty()) return;
  DeviceGuard guard(ix::device_index(found_inf));
  cudaStream_t stream = current_stream();
  // Contiguous work tensors (non-contiguous ones through a copy written back at the end),
  // grouped by dtype: one kernel instantiation per group.
  std::vector<Tensor> work(self.size());
  std::map<ScalarType, std::vector<size_t>> by_dtype;
  for (size_t i = 0; i < self.size(); ++i) {
    if (self[i]->numel() == 0) continue;
    work[i] = ix::contiguous(self[i], op);
    by_dtype[self[i]->dtype()].push_back(i);
  }
  for (const auto& group : by_dtype) {
    const ScalarType dtype = group.first;  // (a plain variable: lambdas capture it below)
    const std::vector<size_t>& idx = group.second;
    std::vector<Slice> slices;
    std::vector<Chunk> chunks;
    for (size_t k = 0; k < idx.size(); ++k) {
      const Tensor& w = work[idx[k]];
      slices.push_back(Slice{reinterpret_cast<uint64_t>(w->data()), w->numel()});
      for (int64_t b = 0; b < w->numel(); b += kChunk)
        chunks.push_back(Chunk{static_cast<int64_t>(k), b, std::min(w->numel(), b + kChunk)});
    }
    EMBER_CHECK(chunks.size() < (size_t(1) << 31), op, ": too many chunks (", chunks.size(), ")");
    // The table goes to the device in one stream-ordered copy (staged from pageable memory
    // before cudaMemcpyAsync returns, so the host vectors may go right after).
    const size_t slice_bytes = slices.size() * sizeof(Slice);
    const size_t bytes = slice_bytes + chunks.size() * sizeof(Chunk);
    std::vector<char> host(bytes);
    std::memcpy(host.data(), slices.data(), slice_bytes);
    std::memcpy(host.data() + slice_bytes, chunks.data(), chunks.size() * sizeof(Chunk));
    Tensor table =
        empty(DimVector{static_cast<int64_t>(bytes)}, ScalarType::UInt8, found_inf->device());
    EMBER_CUDA_CHECK(
        cudaMemcpyAsync(table->data(), host.data(), bytes, cudaMemcpyHostToDevice, stream));
    const auto* dslices = reinterpret_cast<const Slice*>(table->data());
    const auto* dchunks = reinterpret_cast<const Chunk*>(table->data() + slice_bytes);
    const unsigned nblocks = static_cast<unsigned>(chunks.size());
    EMBER_DISPATCH_FLOAT(dtype, op, [&] {
      unscale_kernel<scalar_t><<<nblocks, kBlockSize, 0, stream>>>(
          dslices, dchunks, found_inf->data_as<float>(), inv_scale->data_as<float>());
      check_launch(op);
    });
  }
  for (size_t i = 0; i < self.size(); ++i) {
    if (!work[i]) continue;
    if (work[i] != self[i]) ix::copy(self[i], work[i], op);
    self[i]->bump_version();
  }
  found_inf->bump_version();
}

Tensor _amp_update_scale_(const Tensor& self, const Tensor& growth_tracker, const Tensor& found_inf,
                          double scale_growth_factor, double scale_backoff_factor,
                          int64_t growth_interval) {
  const char* op = "_amp_update_scale_";
  ix::check_cuda(self, op, "self (the scale)");
  nn::check_amp_update_scale(op, self, growth_tracker, found_inf, &ix::check_same_device);
  DeviceGuard guard(ix::device_index(self));
  update_scale_kernel<<<1, 1, 0, current_stream()>>>(
      self->data_as<float>(), growth_tracker->data_as<int32_t>(), found_inf->data_as<float>(),
      static_cast<float>(scale_growth_factor), static_cast<float>(scale_backoff_factor),
      growth_interval);
  check_launch(op);
  self->bump_version();
  growth_tracker->bump_version();
  return self;
}

void register_amp_ops() {
  register_kernel("_amp_foreach_non_finite_check_and_unscale_", DeviceType::CUDA,
                  &_amp_foreach_non_finite_check_and_unscale_);
  register_kernel("_amp_update_scale_", DeviceType::CUDA, &_amp_update_scale_);
}

}  // namespace amp
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::amp::register_amp_ops)
