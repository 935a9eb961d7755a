// CPU kernels of the GradScaler ops: the fused inf/NaN check and unscale of a list of gradients,
// and the scale update (kernels/amp_rules.h holds the checks and the update shared with CUDA).
#include <atomic>
#include <vector>

#include "core/dispatch.h"
#include "kernels/amp_rules.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace cpu {

void _amp_foreach_non_finite_check_and_unscale_(const std::vector<Tensor>& self,
                                                const Tensor& found_inf, const Tensor& inv_scale) {
  const char* op = "_amp_foreach_non_finite_check_and_unscale_";
  nn::check_amp_unscale(op, self, found_inf, inv_scale);
  const float inv = *inv_scale->data_as<float>();
  std::atomic<bool> found{false};
  for (const Tensor& t : self) {
    if (t->numel() == 0) continue;
    // Worked on directly when contiguous, else through a contiguous copy written back.
    Tensor work = nn::contig(t);
    EMBER_DISPATCH_FLOAT(t->dtype(), op, [&] {
      using T = scalar_t;
      using A = opmath_t<T>;
      T* p = work->data_as<T>();
      const A s = static_cast<A>(inv);
      parallel_for(0, t->numel(), kPointwiseGrain, [&](int64_t b, int64_t e) {
        bool bad = false;
        for (int64_t i = b; i < e; ++i) {
          const A v = static_cast<A>(p[i]);
          bad |= !nn::amp_finite(v);
          if (inv != 1.0f) p[i] = static_cast<T>(v * s);
        }
        if (bad) found.store(true, std::memory_order_relaxed);
      });
    });
    if (work != t) copy_into(t, work);
    t->bump_version();
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
