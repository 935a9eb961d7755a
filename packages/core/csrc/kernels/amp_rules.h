// Device-neutral rules of the GradScaler ops (_amp_foreach_non_finite_check_and_unscale_,
// _amp_update_scale_), shared by the CPU kernels (kernels/cpu/nn_amp.cpp) and the CUDA ones
// (cuda/amp_ops.cu): the argument checks with their messages and the scale update itself.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/nn_rules.h"

#ifdef __CUDACC__
#define EMBER_AMP_HOST_DEVICE __host__ __device__
#else
#define EMBER_AMP_HOST_DEVICE
#endif

namespace ember {
namespace nn {

// A one-element tensor of `dtype` (found_inf, inv_scale, the scale, the growth tracker).
inline void check_amp_scalar(const char* op, const Tensor& t, const char* name, ScalarType dtype) {
  EMBER_CHECK(t, op, ": ", name, " is None");
  EMBER_CHECK(t->numel() == 1, op, ": ", name, " must be a one-element tensor, got shape ",
              shape_str(t->sizes()));
  EMBER_CHECK_KIND(t->dtype() == dtype, Type, op, ": ", name, " must be a ", dtype_name(dtype),
                   " tensor, got ", dtype_name(t->dtype()));
}

// _amp_foreach_non_finite_check_and_unscale_'s arguments: floating-point tensors to unscale,
// found_inf and inv_scale one-element float32 tensors, all on one device (device_check: the
// backend's check against found_inf; null on the CPU, where the dispatcher's check suffices).
inline void check_amp_unscale(const char* op, const std::vector<Tensor>& self,
                              const Tensor& found_inf, const Tensor& inv_scale,
                              DeviceCheck device_check = nullptr) {
  check_amp_scalar(op, found_inf, "found_inf", ScalarType::Float32);
  check_amp_scalar(op, inv_scale, "inv_scale", ScalarType::Float32);
  check_device(device_check, found_inf, inv_scale, op, "inv_scale");
  for (size_t i = 0; i < self.size(); ++i) {
    const Tensor& t = self[i];
    EMBER_CHECK(t, op, ": self[", i, "] is None");
    EMBER_CHECK_KIND(is_floating(t->dtype()), Type, op, ": self[", i,
                     "] must be a floating-point tensor (a gradient to unscale), got ",
                     dtype_name(t->dtype()));
    check_device(device_check, found_inf, t, op, "every tensor of self");
  }
}

// _amp_update_scale_'s arguments: the float32 scale, the int32 growth tracker and the float32
// found_inf, each one element.
inline void check_amp_update_scale(const char* op, const Tensor& scale, const Tensor& tracker,
                                   const Tensor& found_inf, DeviceCheck device_check = nullptr) {
  check_amp_scalar(op, scale, "self (the scale)", ScalarType::Float32);
  check_amp_scalar(op, tracker, "growth_tracker", ScalarType::Int32);
  check_amp_scalar(op, found_inf, "found_inf", ScalarType::Float32);
  check_device(device_check, scale, tracker, op, "growth_tracker");
  check_device(device_check, scale, found_inf, op, "found_inf");
}

// Whether x is finite (not inf or NaN): x - x is 0 exactly for finite x and NaN otherwise (IEEE
// arithmetic; ember builds without fast-math), the same test on the host and the device.
template <class A>
EMBER_AMP_HOST_DEVICE inline bool amp_finite(A x) {
  return x - x == A(0);
}

// One scale update (host and device): after an inf/NaN step the scale backs off and the tracker
// restarts; after growth_interval clean steps in a row the scale grows (unless that overflows).
// The products are float32, as the scale is.
EMBER_AMP_HOST_DEVICE inline void amp_update_scale(float* scale, int32_t* tracker, float found_inf,
                                                   float growth, float backoff, int64_t interval) {
  if (found_inf != 0.0f) {
    *scale = *scale * backoff;
    *tracker = 0;
    return;
  }
  const int64_t clean = static_cast<int64_t>(*tracker) + 1;
  if (clean == interval) {
    const float grown = *scale * growth;
    if (amp_finite(grown)) *scale = grown;
    *tracker = 0;
  } else {
    *tracker = static_cast<int32_t>(clean);
  }
}

}  // namespace nn
}  // namespace ember
