// CPU kernels of the GradScaler ops: the fused inf/NaN check and unscale of a list of gradients,
// and the scale update (kernels/amp_rules.h holds the checks and the update shared with CUDA).
// The check reads the exponent bits of the stored values (all ones: inf or NaN), which is what
// the CUDA kernel's x - x == 0 test decides in the compute type.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dispatch.h"
#include "kernels/amp_rules.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace cpu {

namespace {

// The exponent bits of each floating storage type: all ones means inf or NaN.
template <class T>
struct FloatBits;
template <>
struct FloatBits<float> {
  using U = uint32_t;
  static constexpr U kExp = 0x7f800000u;
};
template <>
struct FloatBits<double> {
  using U = uint64_t;
  static constexpr U kExp = 0x7ff0000000000000ull;
};
template <>
struct FloatBits<Half> {
  using U = uint16_t;
  static constexpr U kExp = 0x7c00u;
};
template <>
struct FloatBits<BFloat16> {
  using U = uint16_t;
  static constexpr U kExp = 0x7f80u;
};

// Whether any of p[0, n) is inf or NaN (an OR over comparisons of the exponent bits: integer
// work that vectorizes), with p[0, n) multiplied by s in the same pass unless scale is false.
template <class T>
bool unscale_range(T* p, int64_t n, opmath_t<T> s, bool scale) {
  using U = typename FloatBits<T>::U;
  constexpr U kExp = FloatBits<T>::kExp;
  U any = 0;
  if (scale) {
    for (int64_t i = 0; i < n; ++i) {
      U b;
      std::memcpy(&b, p + i, sizeof(U));
      any |= static_cast<U>((b & kExp) == kExp);
      p[i] = static_cast<T>(static_cast<opmath_t<T>>(p[i]) * s);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      U b;
      std::memcpy(&b, p + i, sizeof(U));
      any |= static_cast<U>((b & kExp) == kExp);
    }
  }
  return any != 0;
}

}  // namespace

void _amp_foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& self,
                                                const Tensor& found_inf, const Tensor& inv_scale) {
  const char* op = "_amp_foreach_non_finite_check_and_unscale_";
  nn::check_amp_unscale(op, self, found_inf, inv_scale);
  const float inv = *inv_scale->data_as<float>();
  std::atomic<bool> found{false};
  for (const Tensor& t : self) {
    if (t->numel() == 0) continue;
    t->bump_version(op);  // first: it refuses read-only memory
    // Worked on directly when contiguous, else through a contiguous copy written back.
    Tensor work = nn::contig(t);
    EMBER_DISPATCH_FLOAT(t->dtype(), op, [&] {
      using T = scalar_t;
      T* p = work->data_as<T>();
      const auto s = static_cast<opmath_t<T>>(inv);
      parallel_for(0, t->numel(), kPointwiseGrain, [&](int64_t b, int64_t e) {
        if (unscale_range(p + b, e - b, s, inv != 1.0f))
          found.store(true, std::memory_order_relaxed);
      });
    });
    if (work != t) copy_into(t, work);
  }
  if (found.load()) {
    *found_inf->data_as<float>() = 1.0f;
    found_inf->bump_version();
  }
}

Tensor _amp_update_scale_(const Tensor& self, const Tensor& growth_tracker, const Tensor& found_inf,
                          double scale_growth_factor, double scale_backoff_factor,
                          int64_t growth_interval) {
  nn::check_amp_update_scale("_amp_update_scale_", self, growth_tracker, found_inf);
  nn::amp_update_scale(self->data_as<float>(), growth_tracker->data_as<int32_t>(),
                       *found_inf->data_as<float>(), static_cast<float>(scale_growth_factor),
                       static_cast<float>(scale_backoff_factor), growth_interval);
  self->bump_version();
  growth_tracker->bump_version();
  return self;
}

}  // namespace cpu
}  // namespace ember
