#include "autograd/forward_ad.h"

#include <algorithm>
#include <mutex>

#include "autograd/op_hooks.h"
#include "ops.h"

namespace ember {
namespace forward_ad {

namespace detail {
std::atomic<int64_t> g_level{-1};
}

namespace {
thread_local bool t_disabled = false;

// Every tensor that received a tangent at the live level, so exiting it can drop them all.
std::mutex g_registry_mutex;
std::vector<std::weak_ptr<TensorImpl>> g_registry;
size_t g_prune_at = 1024;

void store(const Tensor& t, int64_t level, Tensor tangent) {
  AutogradMeta& m = autograd::materialize_meta(t);
  for (auto& e : m.fw_grads) {
    if (e.first == level) {
      e.second = std::move(tangent);
      return;
    }
  }
  m.fw_grads.emplace_back(level, std::move(tangent));
  std::lock_guard<std::mutex> lock(g_registry_mutex);
  g_registry.emplace_back(t);
  if (g_registry.size() >= g_prune_at) {  // long loops inside one level: drop dead entries
    g_registry.erase(std::remove_if(g_registry.begin(), g_registry.end(),
                                    [](const std::weak_ptr<TensorImpl>& w) { return w.expired(); }),
                     g_registry.end());
    g_prune_at = std::max<size_t>(1024, 2 * g_registry.size());
  }
}

// The entry of `level` in t's meta: `found` says whether there is one (it may be an undefined
// tensor: "explicitly no tangent", e.g. the primal returned by unpack_dual).
Tensor find_own(const Tensor& t, int64_t level, bool* found) {
  *found = false;
  AutogradMeta* m = autograd::meta(t);
  if (!m) return Tensor();
  for (const auto& e : m->fw_grads) {
    if (e.first == level) {
      *found = true;
      return e.second;
    }
  }
  return Tensor();
}

// Same sizes and, where a dim has more than one element, the same strides.
bool same_layout(const Tensor& a, const Tensor& b) {
  if (a->sizes() != b->sizes()) return false;
  for (int64_t d = 0; d < a->dim(); ++d)
    if (a->size(d) > 1 && a->stride(d) != b->stride(d)) return false;
  return true;
}

// Whether t's elements tile a block of memory exactly once (any dim order).
bool non_overlapping_dense(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims with > 1 element
  for (int64_t d = 0; d < t->dim(); ++d) {
    if (t->size(d) == 0) return false;
    if (t->size(d) > 1) dims.emplace_back(t->stride(d), t->size(d));
  }
  std::sort(dims.begin(), dims.end());
  int64_t expected = 1;
  for (const auto& [stride, size] : dims) {
    if (stride != expected) return false;
    expected *= size;
  }
  return true;
}

// An uninitialized tensor laid out like `like` (its strides when they are dense).
Tensor empty_with_layout(const Tensor& like) {
  if (non_overlapping_dense(like))
    return empty_strided(like->sizes(), like->strides(), like->dtype(), like->device());
  return empty(like->sizes(), like->dtype(), like->device());
}

Tensor zeros_with_layout(const Tensor& like) {
  Tensor z = empty_with_layout(like);
  ops::zero_(z);
  return z;
}

// The view of base's tangent that corresponds to the view `t` of base (undefined when the base
// has none).
Tensor derive_from_base(const Tensor& t, int64_t level) {
  const Tensor& b = t->base();
  if (!b || !(is_floating(t->dtype()) || is_complex(t->dtype()))) return Tensor();
  bool found = false;
  Tensor bt = find_own(b, level, &found);
  if (!bt) return Tensor();
  EMBER_CHECK_KIND(t->dtype() == b->dtype() && same_layout(bt, b), NotImplemented,
                   "forward-mode AD: the tangent of a view of shape ", shape_str(t->sizes()),
                   " can't be taken from its base's tangent (the view reinterprets the dtype, or "
                   "the base of shape ",
                   shape_str(b->sizes()), " has overlapping memory)");
  return make_view(bt, t->sizes(), t->strides(),
                   bt->storage_offset() + (t->storage_offset() - b->storage_offset()));
}

const char* level_note() { return " (an input carries a tangent at the live dual level)"; }
}  // namespace

// ---- levels ---------------------------------------------------------------------------------

int64_t enter_dual_level() {
  int64_t expected = -1;
  op_hooks::add(1);  // before the level is visible: an op that sees the level also sees this
  if (!detail::g_level.compare_exchange_strong(expected, 0)) {
    op_hooks::add(-1);
    EMBER_FAIL(Runtime, "Nested forward mode AD is not supported at the moment (dual level ",
               expected, " is already live)");
  }
  return 0;
}

void exit_dual_level(int64_t level) {
  int64_t cur = current_level();
  EMBER_CHECK(cur >= 0, "exit_dual_level: no dual level is live");
  EMBER_CHECK(level == cur, "exit_dual_level: trying to exit dual level ", level,
              " but the live level is ", cur);
  std::vector<std::weak_ptr<TensorImpl>> registry;
  {
    std::lock_guard<std::mutex> lock(g_registry_mutex);
    registry.swap(g_registry);
    g_prune_at = 1024;
  }
  for (const auto& w : registry) {
    Tensor t = w.lock();
    if (!t) continue;
    if (AutogradMeta* m = autograd::meta(t)) {
      auto& v = m->fw_grads;
      v.erase(std::remove_if(v.begin(), v.end(), [&](const auto& e) { return e.first == level; }),
              v.end());
    }
  }
  detail::g_level.store(-1);
  op_hooks::add(-1);
}

DisableGuard::DisableGuard() : prev_(t_disabled) { t_disabled = true; }
DisableGuard::~DisableGuard() { t_disabled = prev_; }
bool disabled_here() { return t_disabled; }
bool set_disabled_here(bool disabled) {
  bool prev = t_disabled;
  t_disabled = disabled;
  return prev;
}

// ---- queries --------------------------------------------------------------------------------

Tensor tangent_of(const Tensor& t) {
  int64_t level = current_level();
  if (level < 0 || !t) return Tensor();
  bool found = false;
  Tensor own = find_own(t, level, &found);
  if (found) return own;
  Tensor d = derive_from_base(t, level);
  if (d) store(t, level, d);  // later in-place writes then go through the same view
  return d;
}

bool has_tangent(const Tensor& t) { return static_cast<bool>(tangent_of(t)); }

Tensor own_tangent(const Tensor& t) {
  int64_t level = current_level();
  bool found = false;
  return level < 0 || !t ? Tensor() : find_own(t, level, &found);
}

void store_tangent(const Tensor& t, int64_t level, Tensor tangent) {
  if (t && tangent) store(t, level, std::move(tangent));
}

namespace {
// Hands a result's new tangent to the SavedVariables of its grad_fn (share_output_tangent keeps
// only the one that saved this result).
class ShareOutputTangent final : public autograd::SavedValueVisitor {
 public:
  ShareOutputTangent(const Tensor& result, const Tensor& tangent, int64_t level)
      : result_(result), tangent_(tangent), level_(level) {}
  void tensor(const char* /*name*/, autograd::SavedVariable& v) override {
    v.share_output_tangent(result_, tangent_, level_);
  }
  void tensor_list(const char* /*name*/, std::vector<autograd::SavedVariable>& v) override {
    for (auto& s : v) s.share_output_tangent(result_, tangent_, level_);
  }
  void optional_tensors(const char* /*name*/, const std::vector<Tensor>& /*v*/) override {}
  void none(const char* /*name*/) override {}
  void boolean(const char* /*name*/, bool /*v*/) override {}
  void integer(const char* /*name*/, int64_t /*v*/) override {}
  void real(const char* /*name*/, double /*v*/) override {}
  void scalar(const char* /*name*/, const Scalar& /*v*/) override {}
  void ints(const char* /*name*/, const DimVector& /*v*/) override {}
  void string(const char* /*name*/, const std::string& /*v*/) override {}
  void dtype(const char* /*name*/, ScalarType /*v*/) override {}
  void device(const char* /*name*/, Device /*v*/) override {}

 private:
  const Tensor& result_;
  const Tensor& tangent_;
  int64_t level_;
};
}  // namespace

bool wants(std::initializer_list<const Tensor*> ts) {
  if (t_disabled) return false;
  for (const Tensor* t : ts)
    if (t && *t && has_tangent(*t)) return true;
  return false;
}

bool wants(std::initializer_list<const Tensor*> ts,
           std::initializer_list<const std::vector<Tensor>*> lists) {
  if (t_disabled) return false;
  if (wants(ts)) return true;
  for (const auto* l : lists)
    for (const Tensor& t : *l)
      if (t && has_tangent(t)) return true;
  return false;
}

// ---- helpers --------------------------------------------------------------------------------

Tensor tangent_or_zeros(const Tensor& t) {
  if (!t) return Tensor();
  Tensor g = tangent_of(t);
  if (g) return g;
  return ops::zeros_like(t, std::nullopt, std::nullopt);
}

std::vector<Tensor> tangents_of(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(tangent_of(t));
  return out;
}

std::vector<Tensor> tangents_or_zeros(const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(tangent_or_zeros(t));
  return out;
}

TensorOrScalar linear_arg(const TensorOrScalar& a, const Tensor& a_t) {
  if (a.is_tensor()) return TensorOrScalar(a_t);
  if (a.is_none()) return TensorOrScalar();
  return TensorOrScalar(Scalar(0.0));
}

Tensor accumulate(const Tensor& a, const Tensor& b) {
  if (!a) return b;
  if (!b) return a;
  return ops::add(a, b, Scalar(int64_t(1)), Tensor());
}

void complex_not_supported(const char* op) {
  EMBER_FAIL(NotImplemented, "forward-mode AD is not supported for complex tensors in op ",
             op ? op : "(an op without a name)",
             ": its tangent formula is not known to hold for complex tensors; compute with real "
             "tensors (view_as_real) or leave the dual level");
}

void set_tangent(const Tensor& result, Tensor t, const char* op, bool complex_ok) {
  int64_t level = current_level();
  if (!t || !result || level < 0) return;
  if (!complex_ok && (is_complex(result->dtype()) || is_complex(t->dtype())))
    complex_not_supported(op);
  if (!is_floating(result->dtype()) && !is_complex(result->dtype())) return;
  bool found = false;
  if (find_own(result, level, &found) == t) return;  // an op that returned its input as is
  DisableGuard off;
  if (t->sizes() != result->sizes()) t = ops::expand(t, result->sizes());  // broadcast inputs
  if (t->dtype() != result->dtype()) t = ops::_to_dtype(t, result->dtype(), false);
  // A fresh (non-view) result must not share its tangent with an input, or an in-place op on
  // one would change the other's tangent.
  bool shared = !result->base() && (t.use_count() > 1 || t->storage().use_count() > 1);
  if (shared || !same_layout(t, result)) {
    Tensor fresh = empty_with_layout(result);
    ops::copy_(fresh, t, false);
    t = fresh;
  }
  // The op saved its result for backward before this tangent existed: share it with that copy.
  const AutogradMeta* m = autograd::meta(result);
  if (m && m->grad_fn) {
    ShareOutputTangent share(result, t, level);
    m->grad_fn->visit_saved(share);
  }
  store(result, level, std::move(t));
}

void set_tangents(const std::vector<Tensor>& results, const std::vector<Tensor>& ts, const char* op,
                  bool complex_ok) {
  EMBER_CHECK(results.size() == ts.size(), "forward-mode AD: a tangent formula returned ",
              ts.size(), " tangents for ", results.size(), " outputs");
  for (size_t i = 0; i < results.size(); ++i) set_tangent(results[i], ts[i], op, complex_ok);
}

Tensor inplace_tangent(const Tensor& self) {
  int64_t level = current_level();
  Tensor cur = tangent_of(self);
  if (cur || level < 0) return cur;
  DisableGuard off;
  const Tensor& b = self->base();
  if (b && b->dtype() == self->dtype() && !has_tangent(b) && non_overlapping_dense(b)) {
    // Writing a tangent into a view: the base gets a zero tangent and the view a view of it,
    // so the base and every other view of it see the write.
    store(b, level, zeros_with_layout(b));
    Tensor d = derive_from_base(self, level);
    store(self, level, d);
    return d;
  }
  Tensor z = zeros_with_layout(self);
  store(self, level, z);
  return z;
}

void set_tangent_inplace(const Tensor& self, const Tensor& t, const char* op, bool complex_ok) {
  if (current_level() < 0) return;
  if (!complex_ok &&
      ((t && is_complex(t->dtype())) || (is_complex(self->dtype()) && (t || has_tangent(self)))))
    complex_not_supported(op);
  if (!is_floating(self->dtype()) && !is_complex(self->dtype())) return;
  DisableGuard off;
  Tensor cur = inplace_tangent(self);
  if (t) {
    if (t != cur) ops::copy_(cur, t, false);
  } else {
    ops::zero_(cur);
  }
}

void not_implemented(const char* op, const char* arg) {
  if (arg)
    EMBER_FAIL(NotImplemented, "forward-mode AD for '", op, "' with respect to argument '", arg,
               "' is not implemented", level_note());
  EMBER_FAIL(NotImplemented, "forward-mode AD for '", op, "' is not implemented", level_note());
}

void out_not_supported(const char* op) {
  EMBER_FAIL(NotImplemented, op,
             ": functions with out=... arguments don't support forward-mode AD, but an input "
             "or out carries a tangent at the live dual level");
}

void check_not_differentiable(const char* op, std::initializer_list<const Tensor*> results) {
  for (const Tensor* r : results)
    if (r && *r && (is_floating((*r)->dtype()) || is_complex((*r)->dtype()))) not_implemented(op);
}

void check_not_differentiable(const char* op, const std::vector<Tensor>& results) {
  for (const Tensor& r : results)
    if (r && (is_floating(r->dtype()) || is_complex(r->dtype()))) not_implemented(op);
}

// ---- Python API -----------------------------------------------------------------------------

Tensor make_dual(const Tensor& primal, const Tensor& tangent, int64_t level) {
  int64_t cur = current_level();
  EMBER_CHECK(cur >= 0,
              "make_dual: trying to create a dual Tensor for forward AD but no dual level is "
              "live; enter one first (with ember.autograd.forward_ad.dual_level(): ...)");
  EMBER_CHECK(level == cur, "make_dual: dual level ", level, " is not live (the live level is ",
              cur, ")");
  EMBER_CHECK_KIND(is_floating(primal->dtype()) || is_complex(primal->dtype()), Value,
                   "make_dual: expected primal to be floating point or complex, but got ",
                   dtype_name(primal->dtype()));
  EMBER_CHECK_KIND(is_floating(tangent->dtype()) || is_complex(tangent->dtype()), Value,
                   "make_dual: expected tangent to be floating point or complex, but got ",
                   dtype_name(tangent->dtype()));
  EMBER_CHECK(tangent->sizes() == primal->sizes(), "make_dual: the tangent's shape ",
              shape_str(tangent->sizes()), " doesn't match the primal's shape ",
              shape_str(primal->sizes()));
  EMBER_CHECK(tangent->dtype() == primal->dtype(), "make_dual: the tangent's dtype ",
              dtype_name(tangent->dtype()), " doesn't match the primal's dtype ",
              dtype_name(primal->dtype()));
  EMBER_CHECK(tangent->device() == primal->device(), "make_dual: the tangent is on ",
              tangent->device().str(), " but the primal is on ", primal->device().str());
  EMBER_CHECK(!has_tangent(primal),
              "make_dual: making a dual Tensor based on a Tensor that already has a tangent at "
              "the same level ",
              cur, " is not supported");
  EMBER_CHECK(!has_tangent(tangent), "make_dual: the tangent (shape ", shape_str(tangent->sizes()),
              ") is itself a dual Tensor at level ", cur, "; unpack_dual() it first");
  Tensor r;
  {
    DisableGuard off;
    r = ops::view(primal, primal->sizes());  // an alias, differentiable in reverse mode
  }
  set_tangent(r, tangent, "make_dual", true);
  return r;
}

std::pair<Tensor, Tensor> unpack_dual(const Tensor& t, int64_t level) {
  int64_t cur = current_level();
  // With propagation off on this thread (a custom Function's forward) tensors look plain.
  if (cur < 0 || level != cur || t_disabled) return {t, Tensor()};
  Tensor tangent = tangent_of(t);
  if (!tangent) return {t, Tensor()};
  Tensor primal;
  {
    DisableGuard off;
    primal = ops::view(t, t->sizes());
  }
  store(primal, cur, Tensor());  // explicitly no tangent (not inherited from a base either)
  return {primal, tangent};
}

}  // namespace forward_ad
}  // namespace ember
