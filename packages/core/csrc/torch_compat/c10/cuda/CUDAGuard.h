// <c10/cuda/CUDAGuard.h> for ember: the device guards, over extension/cuda.h.
#pragma once
#include "extension/cuda.h"

namespace c10 {
namespace cuda {
using ember::api::cuda::CUDAGuard;
using ember::api::cuda::CUDAStream;
using ember::api::cuda::getCurrentCUDAStream;
using ember::api::cuda::OptionalCUDAGuard;
}  // namespace cuda
}  // namespace c10
namespace at {
namespace cuda {
using ember::api::cuda::CUDAGuard;
using ember::api::cuda::OptionalCUDAGuard;
}  // namespace cuda
using ember::api::device_of;
}  // namespace at
