// <c10/cuda/CUDAException.h> for ember: checks of CUDA runtime calls and kernel launches that
// raise RuntimeError naming the error.
#pragma once
#include "extension/cuda.h"

#define C10_CUDA_CHECK(expr) ::ember::api::cuda::check((expr), #expr)
#define C10_CUDA_KERNEL_LAUNCH_CHECK() EMBER_CUDA_KERNEL_LAUNCH_CHECK()
