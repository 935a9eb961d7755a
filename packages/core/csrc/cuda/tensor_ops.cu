// CUDA kernels of ops/tensor.yaml: _copy_from, the copy within the device that copy_, fill_,
// zero_, the factories and the iterator's dtype casts all end in (a 0-d CPU source arrives as a
// number, which is how fill_ writes its value).
#include "cuda/cuda_registry.h"
#include "cuda/elementwise.cuh"
#include "ops.h"

namespace ember {
namespace cuda {
namespace tensor_kernels {

struct Identity {
  template <class A>
  __device__ __forceinline__ A operator()(A x) const {
    return x;
  }
};

// Same dtype, both dense in the same order over the plan: bytes. Not for bool, whose copy
// normalizes every nonzero byte to 1 (as on the CPU).
bool try_memcpy(const TensorIterator& it) {
  if (it.dtype(0) != it.dtype(1) || it.dtype(0) == ScalarType::Bool || it.is_scalar(1))
    return false;
  const int64_t item = itemsize(it.dtype(0));
  if (it.shape().size() > 1) return false;
  if (it.shape().size() == 1 && (it.strides(0)[0] != item || it.strides(1)[0] != item))
    return false;
  DeviceGuard guard(it.output(0)->device().index);
  EMBER_CUDA_CHECK(cudaMemcpyAsync(it.data(0), it.data(1), it.numel() * item,
                                   cudaMemcpyDeviceToDevice, current_stream()));
  return true;
}

Tensor copy_from(const Tensor& self, const Tensor& dst, bool /*non_blocking: always async*/) {
  if (dst->numel() == 0) {
    // Nothing to write, but self must still fit (x[5:] = y with a wrongly shaped y is an error).
    EMBER_CHECK(broadcast_shapes(dst->sizes(), self->sizes(), "copy_") == dst->sizes(),
                "copy_: source of shape ", shape_str(self->sizes()),
                " cannot be broadcast to the destination shape ", shape_str(dst->sizes()));
    return dst;
  }
  TensorIterator it("copy_");
  it.add_output(dst).add_input(self).resize_outputs(false).no_casting();
  if (self->numel() == 1) it.allow_overlapping_output();  // every write stores the same value
  it.build();
  if (try_memcpy(it)) return dst;
  EMBER_DISPATCH_ALL(it.dtype(0), "copy_", [&] {
    using D = scalar_t;
    EMBER_DISPATCH_ALL(it.dtype(1), "copy_", [&] {
      using S = scalar_t;
      launch_elementwise<D, S>(it, "copy_", Identity{});
    });
  });
  return dst;
}

void register_tensor_kernels() { register_kernel("_copy_from", DeviceType::CUDA, &copy_from); }

}  // namespace tensor_kernels
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::tensor_kernels::register_tensor_kernels)
