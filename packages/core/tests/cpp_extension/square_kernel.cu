// A CUDA kernel in a PyTorch-style extension (test_cuda_cpp_extension.py): launched on ember's
// current stream under a device guard, dispatched over the floating dtypes, launch checked.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/types.h>

template <typename scalar_t>
__global__ void square_kernel(const scalar_t* in, scalar_t* out, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = in[i] * in[i];
}

torch::Tensor square(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda(), "square: expected a CUDA tensor, got one on ", x.device());
  const at::cuda::OptionalCUDAGuard guard(device_of(x));
  auto xc = x.contiguous();
  auto out = torch::empty_like(xc);
  int64_t n = xc.numel();
  if (n == 0) return out;
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "square", [&] {
    square_kernel<scalar_t><<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

int64_t current_stream_handle() {
  return reinterpret_cast<int64_t>(at::cuda::getCurrentCUDAStream().stream());
}
