// Forward-mode automatic differentiation (ember.autograd.forward_ad), PyTorch's model:
//
// - A dual level is entered and exited from Python (`with forward_ad.dual_level():`); one level
//   at a time, as in PyTorch (nesting raises). It is global, not per thread.
// - make_dual(primal, tangent) returns an alias of primal whose AutogradMeta carries `tangent`
//   for the current level (AutogradMeta::fw_grads). Exiting the level drops every tangent of
//   that level.
// - Each op's generated wrapper (tools/codegen/gen_ops.py) checks, when a level is live, whether
//   an input carries a tangent; if so it runs the op (with forward AD off on this thread, so the
//   nested call does not see the tangents), evaluates the op's `tangent:` formula from the YAML
//   and attaches the result's tangent. Ops without a formula raise NotImplementedError instead
//   of dropping the tangent. When no level is live the whole cost is one relaxed atomic load.
// - Tangent formulas run with grad mode as the caller set it, so tangents are differentiable
//   with reverse mode (reverse-over-forward).
//
// Views: a tangent is stored with the primal's strides (copied if it came with another layout),
// so the tangent of a view is the same view of its base's tangent and in-place ops on views
// update the base's tangent. A view without a tangent of its own inherits a view of its base's
// tangent (the base may have received one by an in-place op after the view was taken).
#pragma once
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "autograd/autograd.h"

namespace ember {
namespace forward_ad {

namespace detail {
extern std::atomic<int64_t> g_level;  // the live dual level, -1 when none
}

// True while a dual level is live (any thread may then see dual tensors). The per-op check.
inline bool maybe_active() { return detail::g_level.load(std::memory_order_relaxed) >= 0; }
// The live level, or -1.
inline int64_t current_level() { return detail::g_level.load(std::memory_order_relaxed); }

// Enters a new dual level and returns it (0); raises if one is already live.
int64_t enter_dual_level();
// Exits `level` (which must be the live one), dropping every tangent of it.
void exit_dual_level(int64_t level);

// While alive, ops on this thread do not propagate tangents (used around the primal computation
// and the tangent formulas of an op that is already handling forward AD).
class DisableGuard {
 public:
  DisableGuard();
  ~DisableGuard();
  DisableGuard(const DisableGuard&) = delete;
  DisableGuard& operator=(const DisableGuard&) = delete;

 private:
  bool prev_;
};
bool disabled_here();
// Turns propagation off (true) or on for this thread; returns the previous setting. For Python
// code that cannot hold a DisableGuard (custom Functions run forward and jvp this way).
bool set_disabled_here(bool disabled);

// ---- queries --------------------------------------------------------------------------------
// The tangent of `t` at the live level (undefined when none). A view without one of its own
// inherits the matching view of its base's tangent.
Tensor tangent_of(const Tensor& t);
bool has_tangent(const Tensor& t);
// t's own tangent at the live level (none inherited from a view's base).
Tensor own_tangent(const Tensor& t);
// Attaches `tangent` to t at `level` as is (registered, so exiting the level drops it).
void store_tangent(const Tensor& t, int64_t level, Tensor tangent);
// Whether an op must handle forward AD: a level is live, this thread has not disabled it, and
// one of the tensors carries a tangent. Callers test maybe_active() first.
bool wants(std::initializer_list<const Tensor*> ts);
bool wants(std::initializer_list<const Tensor*> ts,
           std::initializer_list<const std::vector<Tensor>*> lists);

// ---- helpers of the generated wrappers and the tangent formulas -----------------------------
// `tangent: linear` formulas get a value for every input: zeros (the primal's shape and dtype)
// where a tensor has none; undefined for an absent tensor. Elementwise and custom formulas see
// undefined tangents for inputs without one (an undefined tangent means zero throughout).
Tensor tangent_or_zeros(const Tensor& t);
std::vector<Tensor> tangents_of(const std::vector<Tensor>& ts);
std::vector<Tensor> tangents_or_zeros(const std::vector<Tensor>& ts);
// The argument standing for a Tensor|Scalar input in a `tangent: linear` op: its tangent, a
// zero for a number, absent when the input is.
TensorOrScalar linear_arg(const TensorOrScalar& a, const Tensor& a_t);
// a + b where either may be undefined (elementwise formulas sum one term per input).
Tensor accumulate(const Tensor& a, const Tensor& b);

// Attaches `t` as the tangent of an op's (out-of-place) result: broadcast to its shape, cast to
// its dtype and laid out with its strides. Integer and bool results get none. A complex result
// or tangent is accepted only from ops whose tangent formula holds for complex tensors
// (`complex_ok`: the linear ops and those checked against PyTorch); any other op raises
// NotImplementedError naming `op`, rather than give a wrong tangent.
// A tangent that aliases another tensor's is copied unless the result is itself a view.
void set_tangent(const Tensor& result, Tensor t, const char* op = nullptr, bool complex_ok = false);
void set_tangents(const std::vector<Tensor>& results, const std::vector<Tensor>& ts,
                  const char* op = nullptr, bool complex_ok = false);
// For in-place ops: writes `t` (undefined = zero) into self's tangent (creating a zero one
// first; for a view, on its base, so the base and its other views see the update). A complex
// self with a tangent to write raises as set_tangent does.
void set_tangent_inplace(const Tensor& self, const Tensor& t, const char* op = nullptr,
                         bool complex_ok = false);
// Raises NotImplementedError: forward-mode AD through op's complex result or input.
[[noreturn]] void complex_not_supported(const char* op);
// The tangent an in-place write into `self` updates (created as described above).
Tensor inplace_tangent(const Tensor& self);

// Errors, each naming the op.
[[noreturn]] void not_implemented(const char* op, const char* arg = nullptr);
[[noreturn]] void out_not_supported(const char* op);
// Raises not_implemented(op) when a result that could carry a tangent is floating.
void check_not_differentiable(const char* op, std::initializer_list<const Tensor*> results);
void check_not_differentiable(const char* op, const std::vector<Tensor>& results);

// ---- Python API -----------------------------------------------------------------------------
Tensor make_dual(const Tensor& primal, const Tensor& tangent, int64_t level);
// (primal, tangent): primal is an alias without the tangent; tangent is undefined when `t` has
// none at `level`.
std::pair<Tensor, Tensor> unpack_dual(const Tensor& t, int64_t level);

}  // namespace forward_ad
}  // namespace ember
