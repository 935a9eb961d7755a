// <ATen/cuda/CUDAContext.h> for ember: at::cuda::getCurrentCUDAStream() and the CUDA runtime
// API, over extension/cuda.h.
#pragma once
#include <cuda_runtime.h>

#include "c10/cuda/CUDAException.h"
#include "c10/cuda/CUDAGuard.h"
#include "extension/cuda.h"

namespace at {
namespace cuda {
using ember::api::cuda::CUDAStream;
using ember::api::cuda::getCurrentCUDAStream;
inline int64_t current_device() { return ember::api::cuda::current_device(); }
}  // namespace cuda
}  // namespace at
