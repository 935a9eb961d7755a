#include "autograd/autograd.h"

#include <atomic>
#include <mutex>
#include <queue>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "autograd/forward_ad.h"
#include "autograd/profiler.h"
#include "autograd/views.h"
#include "core/backend.h"
#include "kernels/iterator.h"
#include "ops.h"
#include "ops/host_sync.h"
#include "ops/python_dispatch.h"

namespace ember {
namespace autograd {

namespace {
// The dtypes that take part in autograd: floating and complex.
bool differentiable(ScalarType t) { return is_floating(t) || is_complex(t); }
}  // namespace

// ---- grad mode ------------------------------------------------------------------------------

namespace {
// Locks for concurrent backward passes (several threads calling backward on graphs that share
// nodes or leaves), striped by address so that nodes and tensors carry no mutex of their own.
// node_lock(n) is held while the engine runs n (its hooks, apply, releasing its saved tensors);
// it is recursive because a hook may run a nested backward that reaches a node of the same
// stripe on this thread. grad_lock(leaf) makes AccumulateGrad's update of .grad atomic.
constexpr size_t kLockStripes = 64;
size_t stripe(const void* p) {
  auto a = reinterpret_cast<uintptr_t>(p);
  return static_cast<size_t>((a >> 4) ^ (a >> 10)) % kLockStripes;
}
std::recursive_mutex& node_lock(const Node* n) {
  static std::recursive_mutex locks[kLockStripes];
  return locks[stripe(n)];
}
std::mutex& grad_lock(const TensorImpl* leaf) {
  static std::mutex locks[kLockStripes];
  return locks[stripe(leaf)];
}

thread_local bool t_grad_enabled = true;
std::atomic<uint64_t> g_sequence_nr{0};

void delete_meta(AutogradMeta* m) { delete m; }
}  // namespace

bool grad_enabled() { return t_grad_enabled && !inference_mode_enabled(); }
bool grad_mode_flag() { return t_grad_enabled; }

}  // namespace autograd

uint64_t profiler::peek_sequence_nr() {
  return autograd::g_sequence_nr.load(std::memory_order_relaxed);
}

namespace autograd {
void set_grad_enabled(bool enabled) { t_grad_enabled = enabled; }

// ---- tensor-level ---------------------------------------------------------------------------

AutogradMeta* meta(const Tensor& t) {
  if (t->base()) refresh_view(t);
  return t->autograd_meta();
}

AutogradMeta& materialize_meta(const Tensor& t) {
  if (!t->autograd_meta())
    t->set_autograd_meta(
        std::unique_ptr<AutogradMeta, void (*)(AutogradMeta*)>(new AutogradMeta(), &delete_meta));
  return *t->autograd_meta();
}

void set_requires_grad(const Tensor& t, bool requires_grad) {
  if (requires_grad) {
    EMBER_CHECK(differentiable(t->dtype()),
                "only Tensors of floating point and complex dtype can require gradients (got ",
                dtype_name(t->dtype()), ")");
    EMBER_CHECK(!t->is_inference() || inference_mode_enabled(),
                "Setting requires_grad=True on inference tensor outside InferenceMode is not "
                "allowed.");
  }
  AutogradMeta* m = meta(t);
  if (!requires_grad && m && m->grad_fn)
    EMBER_FAIL(Runtime,
               "you can only change requires_grad flags of leaf variables. If you want "
               "to use a computed variable in a subgraph that doesn't require "
               "differentiation use var_no_grad = var.detach().");
  if (!m && !requires_grad) return;
  // A view taken while its base needed no grad becomes a leaf that keeps its base (as torch:
  // _is_view() and _base still report it); its history is its own, not regenerated from the
  // base, and views taken of it record ops back to it (check_inplace_view refuses in-place
  // writes to them).
  AutogradMeta& meta_t = materialize_meta(t);
  if (requires_grad && t->base() && !meta_t.grad_fn && !autograd::requires_grad(t->base()))
    meta_t.is_view = meta_t.view_no_grad = false;
  meta_t.requires_grad = requires_grad;
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = t ? meta(t) : nullptr;
  if (!m) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  if (!m->requires_grad) return {};
  // Threads building graphs from one leaf at once share its AccumulateGrad node.
  static std::mutex accumulator_mutex;
  {
    std::lock_guard<std::mutex> lock(accumulator_mutex);
    if (std::shared_ptr<Node> acc = m->grad_accumulator.lock()) return {acc, 0};
  }
  // Made outside the lock: in anomaly mode a node's constructor runs Python, which lets another
  // thread take the GIL and then wait here for the lock. A node that loses the race is dropped
  // after the lock is released (declared before it).
  auto fresh = std::make_shared<AccumulateGrad>(t);
  std::lock_guard<std::mutex> lock(accumulator_mutex);
  std::shared_ptr<Node> acc = m->grad_accumulator.lock();
  if (!acc) {
    acc = fresh;
    m->grad_accumulator = acc;
  }
  return {acc, 0};
}

void set_history(const Tensor& result, const std::shared_ptr<Node>& node, uint32_t output_nr) {
  // Integer and bool outputs are not differentiable; an absent one (a fused backward's gradient
  // that was not asked for) has nothing to record.
  if (!result || !differentiable(result->dtype())) return;
  AutogradMeta& m = materialize_meta(result);
  if (m.retains_grad && m.grad_fn && m.grad_fn != node) {
    // In-place on a non-leaf that retains its grad: the new grad_fn now feeds .grad.
    if (NodeHooks* h = m.grad_fn->hooks.get()) {
      auto& r = h->retains_grad;
      for (auto it = r.begin(); it != r.end(); ++it) {
        if (it->second.lock() == result) {
          r.erase(it);
          break;
        }
      }
    }
    node->materialize_hooks().retains_grad.push_back({output_nr, result});
  }
  m.grad_fn = node;
  m.output_nr = output_nr;
  m.requires_grad = true;
  const Device dev = result->device();
  if (!dev.is_host() && node->stream_device < 0) record_stream(*node, dev);
}

void record_stream(Node& node, Device dev) {
  if (dev.index < 0 || !has_device_hooks(dev.type)) return;
  const DeviceHooks& h = device_hooks(dev.type);
  if (!h.current_stream || !h.set_current_stream) return;
  node.stream_type = dev.type;
  node.stream_device = dev.index;
  node.stream = h.current_stream(dev.index);
}

namespace {
// The backward pass runs each node on the stream its forward used. Nodes run one after another
// on this thread, so making each node's stream wait for the stream the previous node ran on
// orders every gradient after the work that produced it; the caller's stream waits for the
// last one at the end (and the first waits for the caller's, which made the seeds).
class BackwardStreams {
 public:
  ~BackwardStreams() {
    try {
      join_caller();
    } catch (...) {  // a device error: the next sync point reports it
    }
  }
  // A node without a recorded stream (AccumulateGrad, a CPU node) runs on the caller's stream.
  void enter_default() {
    if (hooks_) join_caller();
  }
  // Sets the node's stream as current; returns whether it did (then restore() after the call).
  bool enter(const Node& node) {
    const DeviceHooks& h = device_hooks(node.stream_type);
    if (&h != hooks_ || node.stream_device != device_) {
      // Another device (or the first node): start its chain from the caller's stream there.
      join_caller();
      hooks_ = &h;
      device_ = node.stream_device;
      caller_ = prev_ = h.current_stream(device_);
    }
    if (node.stream != prev_ && h.stream_wait) h.stream_wait(device_, node.stream, prev_);
    prev_ = node.stream;
    if (node.stream == caller_) return false;
    h.set_current_stream(device_, node.stream);
    return true;
  }
  void restore() { hooks_->set_current_stream(device_, caller_); }

 private:
  void join_caller() {
    if (hooks_ && prev_ != caller_ && hooks_->stream_wait)
      hooks_->stream_wait(device_, caller_, prev_);
    prev_ = caller_;
  }

  const DeviceHooks* hooks_ = nullptr;
  int device_ = -1;
  int64_t caller_ = 0, prev_ = 0;
};

struct StreamRestore {
  BackwardStreams* streams = nullptr;
  ~StreamRestore() {
    if (streams) streams->restore();
  }
};
}  // namespace

Tensor detach(const Tensor& t) {
  if (python_dispatch::on()) {  // aten.detach reaches __torch_dispatch__, as in PyTorch
    const void* const pd_args[] = {&t};
    Tensor pd_ret;
    if (python_dispatch::call(python_dispatch::kDetach, pd_args, &pd_ret, {&t}, {})) return pd_ret;
  }
  auto out = std::make_shared<TensorImpl>(t->storage(), t->dtype(), t->sizes(), t->strides(),
                                          t->storage_offset(), t->version_counter());
  return out;
}

// ---- nodes ----------------------------------------------------------------------------------

Node::Node() : sequence_nr(g_sequence_nr.fetch_add(1, std::memory_order_relaxed)) {
  if (anomaly_mode_enabled()) anomaly = capture_anomaly_metadata();
}

Node::~Node() {
  // Freeing a long chain recursively would overflow the stack (a 100k-op graph is a 100k-deep
  // chain of shared_ptrs): hand edges whose node we hold the last reference to to a loop.
  thread_local std::vector<std::shared_ptr<Node>>* pending = nullptr;
  std::vector<std::shared_ptr<Node>> local;
  bool top = pending == nullptr;
  if (top) pending = &local;
  for (Edge& e : next_edges)
    if (e.fn) pending->push_back(std::move(e.fn));
  next_edges.clear();
  if (!top) return;
  while (!local.empty()) {
    std::shared_ptr<Node> n = std::move(local.back());
    local.pop_back();
    n.reset();  // may run ~Node, which appends to `local` instead of recursing
  }
  pending = nullptr;
}

Tensor reduce_grad(const Tensor& grad, const InputMeta& m) {
  if (!grad) return grad;
  Tensor g = grad;
  if (g->sizes() != m.sizes) {
    int64_t lead = g->dim() - m.sizes.size();
    EMBER_CHECK(lead >= 0, "autograd: gradient of shape ", shape_str(g->sizes()),
                " can't be reduced to the input shape ", shape_str(m.sizes));
    if (lead > 0) {
      DimVector dims;
      for (int64_t d = 0; d < lead; ++d) dims.push_back(d);
      g = ops::sum(g, dims, false, std::nullopt);
    }
    DimVector ones;
    for (int64_t d = 0; d < m.sizes.size(); ++d)
      if (m.sizes[d] == 1 && g->size(d) != 1) ones.push_back(d);
    if (!ones.empty()) g = ops::sum(g, ones, true, std::nullopt);
    EMBER_CHECK(g->sizes() == m.sizes, "autograd: gradient of shape ", shape_str(grad->sizes()),
                " can't be reduced to the input shape ", shape_str(m.sizes));
  }
  // (a real input's gradient from complex ones is their real part)
  if (g->dtype() != m.dtype && differentiable(m.dtype)) g = ops::_to_dtype(g, m.dtype, false);
  if (g->device() != m.device) g = ops::_to_copy(g, std::nullopt, m.device, false);
  return g;
}

// On the tensor's own device: a CUDA op's unused output gets CUDA zeros, not the default device's.
Tensor zeros_like_meta(const InputMeta& m) { return ops::zeros(m.sizes, m.dtype, m.device); }

namespace {
// False when no gradient arrived; else zero-fills the missing gradients of floating outputs i
// with fill(i).
template <class Fill>
bool materialize_where(std::vector<Tensor>& grads, const std::vector<InputMeta>& outputs,
                       const Fill& fill) {
  bool any = false;
  for (const Tensor& g : grads) any = any || static_cast<bool>(g);
  if (!any) return false;
  // result_metas lists the Tensor outputs in order; tuple returns have only Tensor outputs here.
  for (size_t i = 0; i < grads.size() && i < outputs.size(); ++i)
    if (!grads[i] && fill(i) && differentiable(outputs[i].dtype))
      grads[i] = zeros_like_meta(outputs[i]);
  return true;
}
}  // namespace

bool materialize_grads(std::vector<Tensor>& grads, const std::vector<InputMeta>& outputs) {
  return materialize_where(grads, outputs, [](size_t) { return true; });
}

bool materialize_grads(std::vector<Tensor>& grads, const std::vector<InputMeta>& outputs,
                       std::initializer_list<bool> fill) {
  return materialize_where(grads, outputs,
                           [&](size_t i) { return i < fill.size() && fill.begin()[i]; });
}

void check_list_grads(const char* node, size_t got, size_t expected) {
  EMBER_CHECK(got == expected, node, ": the derivative formula returned ", got,
              " gradients for a list of ", expected, " tensors");
}

struct SavedVariable::Hooked {
  std::unique_ptr<SavedVariableHooks> hooks;
  // When unpack hands back the same storage, in-place writes since saving are still caught.
  std::shared_ptr<VersionCounter> version_counter;
  std::shared_ptr<Node> grad_fn;         // of a saved non-leaf input
  std::weak_ptr<Node> grad_accumulator;  // of a saved leaf input that requires grad
};

SavedVariable::SavedVariable(const Tensor& t, bool is_output) : is_output_(is_output) {
  if (!t) return;
  EMBER_CHECK(!t->is_inference() || inference_mode_enabled(),
              "Inference tensors cannot be saved for backward. To work around you can make a "
              "clone to get a normal tensor and use it in autograd.");
  defined_ = true;
  version_ = t->version();
  AutogradMeta* m = meta(t);
  requires_grad_ = m && m->requires_grad;
  if (is_output && m) {
    weak_grad_fn_ = m->grad_fn;
    output_nr_ = m->output_nr;
  }
  if (std::unique_ptr<SavedVariableHooks> hooks = default_saved_variable_hooks()) {
    auto h = std::make_shared<Hooked>();
    h->version_counter = t->version_counter();
    if (!is_output && m && m->grad_fn) {
      h->grad_fn = m->grad_fn;
      output_nr_ = m->output_nr;
    } else if (!is_output && requires_grad_) {
      h->grad_accumulator = gradient_edge(t).fn;
    }
    {
      GradModeGuard no_grad(false);
      hooks->call_pack_hook(t);
    }
    EMBER_CHECK(t->version() == version_,
                "A saved tensor pack hook is modifying its input in place. Tensors provided as "
                "input to pack hook can not be modified by in-place operations as this can lead "
                "to unexpected side-effects.");
    h->hooks = std::move(hooks);
    hooked_ = std::move(h);
    return;
  }
  // An output is kept without autograd state: no cycle through our own grad_fn.
  data_ = is_output ? detach(t) : t;
}

void SavedVariable::fail_version(const Tensor& data, const Node* node) const {
  std::ostringstream os;
  os << "one of the variables needed for gradient computation has been modified by an inplace "
        "operation: [ember."
     << dtype_name(data->dtype()) << " " << shape_str(data->sizes()) << "]";
  if (node) os << ", which is saved by " << node->name();
  os << ", is at version " << data->version() << "; expected version " << version_ << " instead.";
  throw Error(ErrorKind::Runtime, os.str());
}

Tensor SavedVariable::unpack(const Node* node) const {
  if (!defined_) return Tensor();
  if (released_)
    EMBER_FAIL(Runtime,
               "Trying to backward through the graph a second time (or directly access saved "
               "tensors after they have already been freed). Saved intermediate values of the "
               "graph are freed when you call .backward() or autograd.grad(). Specify "
               "retain_graph=True if you need to backward through the graph a second time or "
               "if you need to access saved tensors after calling backward.");
  if (hooked_) return unpack_hooked(node);
  if (data_->version() != version_) fail_version(data_, node);
  if (!is_output_) return data_;
  Tensor t = detach(data_);
  if (auto fn = weak_grad_fn_.lock()) {
    AutogradMeta& m = materialize_meta(t);
    m.grad_fn = fn;
    m.output_nr = output_nr_;
    m.requires_grad = true;
  }
  // The tangent shared by share_output_tangent (dropped with its level: data_ is registered).
  if (forward_ad::maybe_active()) {
    if (Tensor tangent = forward_ad::own_tangent(data_))
      forward_ad::store_tangent(t, forward_ad::current_level(), std::move(tangent));
  }
  return t;
}

void SavedVariable::share_output_tangent(const Tensor& result, const Tensor& tangent,
                                         int64_t level) {
  if (!is_output_ || !defined_ || released_ || hooked_ || !data_ || !tangent) return;
  const AutogradMeta* m = meta(result);
  if (!m || m->output_nr != output_nr_) return;
  // Only the alias of this very result (a node may save several outputs).
  if (data_->storage() != result->storage() ||
      data_->storage_offset() != result->storage_offset() || data_->sizes() != result->sizes() ||
      data_->strides() != result->strides() || data_->dtype() != result->dtype())
    return;
  forward_ad::store_tangent(data_, level, tangent);
}

Tensor SavedVariable::unpack_hooked(const Node* node) const {
  Tensor data = hooked_->hooks->call_unpack_hook();
  EMBER_CHECK(data, "the unpack hook of a saved tensor returned no tensor");
  if (data->version_counter() == hooked_->version_counter && data->version() != version_)
    fail_version(data, node);
  // A fresh alias carrying the saved tensor's place in the graph (so create_graph reaches it).
  Tensor t = detach(data);
  std::shared_ptr<Node> fn = is_output_ ? weak_grad_fn_.lock() : hooked_->grad_fn;
  if (fn) {
    AutogradMeta& m = materialize_meta(t);
    m.grad_fn = std::move(fn);
    m.output_nr = output_nr_;
    m.requires_grad = true;
  } else if (!is_output_ && requires_grad_ && differentiable(t->dtype())) {
    AutogradMeta& m = materialize_meta(t);
    m.requires_grad = true;
    m.grad_accumulator = hooked_->grad_accumulator;
  }
  return t;
}

void SavedVariable::register_hooks(std::unique_ptr<SavedVariableHooks> hooks) {
  EMBER_CHECK(!hooked_,
              "Calling register_hooks on a saved tensor whose hooks have already been set. Hint: "
              "only one pair of hooks is allowed at a time.");
  EMBER_CHECK(!released_,
              "Calling register_hooks on a saved tensor after it has been freed. Saved "
              "intermediate values of the graph are freed when you call .backward() or "
              "autograd.grad(). Specify retain_graph=True if you need to backward through the "
              "graph a second time or if you need to access saved variables after calling "
              "backward.");
  EMBER_CHECK(defined_, "Calling register_hooks on a saved tensor with value None is forbidden");
  auto h = std::make_shared<Hooked>();
  h->version_counter = data_->version_counter();
  if (!is_output_) {
    AutogradMeta* m = meta(data_);
    if (m && m->grad_fn) {
      h->grad_fn = m->grad_fn;
      output_nr_ = m->output_nr;
    } else if (requires_grad_) {
      h->grad_accumulator = gradient_edge(data_).fn;
    }
  }
  {
    GradModeGuard no_grad(false);
    hooks->call_pack_hook(data_);
  }
  h->hooks = std::move(hooks);
  hooked_ = std::move(h);
  data_.reset();
}

void SavedVariable::reset() {
  if (!defined_) return;
  data_.reset();
  hooked_.reset();
  released_ = true;
}

namespace {
// PyTorch's layout contract for a leaf's .grad: the leaf's own strides when it is dense (no
// gaps or overlaps: a channels-last or transposed parameter), else contiguous.
bool obeys_layout(const Tensor& g, const Tensor& variable) {
  if (!dense_strides(variable)) return g->is_contiguous();
  if (g->sizes() != variable->sizes()) return false;
  for (int64_t d = 0; d < g->dim(); ++d)
    if (g->size(d) != 1 && g->stride(d) != variable->stride(d)) return false;
  return true;
}
// A copy of g laid out by that contract (differentiable when grad mode is on).
Tensor copy_obeying_layout(const Tensor& g, const Tensor& variable) {
  // (A __torch_dispatch__ subclass is cloned through its hook, so .grad keeps its class.)
  if (python_dispatch::on() && python_dispatch::is_subclass(g)) return ops::clone(g);
  if (!dense_strides(variable) || g->sizes() != variable->sizes())
    return g->is_contiguous() ? ops::clone(g) : ops::contiguous(g);
  Tensor out = empty_strided(variable->sizes(), variable->strides(), g->dtype(), g->device());
  if (grad_enabled()) return ops::copy_(out, g, false);
  dispatch::_copy_from(g, out, false);
  return out;
}
}  // namespace

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = std::move(grads[0]);
  if (!g) return {};
  AutogradMeta& m = materialize_meta(variable);
  if (m.grad_dtype && g->dtype() != *m.grad_dtype) g = ops::_to_dtype(g, *m.grad_dtype, false);
  // Atomic per leaf: concurrent backward passes (through this node or another AccumulateGrad of
  // the same leaf) each add their whole gradient.
  {
    std::lock_guard<std::mutex> lock(grad_lock(variable.get()));
    if (!m.grad) {
      // Steal the buffer when nobody else holds it; otherwise copy so later in-place
      // accumulation cannot write into a tensor the user still sees. The .grad is laid out as
      // the variable (PyTorch's layout contract; fused optimizers want dense memory, and an
      // expanded gradient must not become a .grad whose elements alias).
      const bool layout_ok = obeys_layout(g, variable);
      // A tensor subclass with __torch_dispatch__ is copied (through the hook, so .grad keeps its
      // class); a plain tensor is taken over under a TorchDispatchMode too, which then sees the
      // detach PyTorch's AccumulateGrad runs, not a copy.
      const bool steal = g.use_count() == 1 && !grad_enabled() && layout_ok &&
                         !(python_dispatch::on() && python_dispatch::is_subclass(g));
      m.grad = steal ? detach(g) : copy_obeying_layout(g, variable);
      if (!grad_enabled()) {
        if (AutogradMeta* gm = meta(m.grad)) gm->grad_fn.reset();
      }
    } else if (grad_enabled()) {
      m.grad = ops::add(m.grad, g, Scalar(int64_t(1)), Tensor());
    } else {
      ops::add(m.grad, g, Scalar(int64_t(1)), m.grad);
    }
  }
  if (m.leaf_hooks && !m.leaf_hooks->post_accumulate.empty())
    for (const auto& e : m.leaf_hooks->post_accumulate.snapshot()) (*e.hook)(variable);
  return {};
}

// Whether t can be written in place: no element repeats (an expanded gradient), and nothing but
// this handle reaches its memory: no other reference to the tensor, and its
// storage is held only by it (and, for a view, by its base that only the view keeps alive).
static bool exclusively_owned(const Tensor& t) {
  if (t.use_count() != 1 || maybe_overlapping(t->sizes(), t->strides())) return false;
  const Tensor& base = t->base();
  if (!base) return t->storage().use_count() == 1;
  return base.use_count() == 1 && base->storage() == t->storage() && t->storage().use_count() == 2;
}

std::vector<Tensor> NotImplementedBackward::apply(std::vector<Tensor>&&) {
  EMBER_FAIL(NotImplemented, "the derivative for '", op_,
             "' is not implemented yet; backward through it is not possible");
}

// ---- wrapper helpers ------------------------------------------------------------------------

bool any_requires_grad(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (t && *t && requires_grad(*t)) return true;
  return false;
}

void check_inplace(const Tensor& self, const char* op) {
  if (self->is_inference() && !inference_mode_enabled()) fail_inference_update();
  AutogradMeta* m = meta(self);
  if (m && m->custom_function_view && grad_enabled()) {
    // PyTorch's wording: the Function's name without the node's "Backward" suffix.
    std::string fn = m->grad_fn ? m->grad_fn->name() : std::string("a custom Function");
    const size_t cut = fn.rfind("Backward");
    if (m->grad_fn && cut != std::string::npos && cut > 0) fn.resize(cut);
    EMBER_FAIL(Runtime, "Output ", m->output_nr, " of ", fn,
               " is a view and is being modified inplace. This view was created inside a custom "
               "Function (or because an input was returned as-is) and the autograd logic to "
               "handle view+inplace would override the custom backward associated with the "
               "custom Function, leading to incorrect gradients. This behavior is forbidden. You "
               "can fix this by cloning the output of the custom Function.");
  }
  if (self->base() && grad_enabled()) check_inplace_view(self, op);
  if (m && m->requires_grad && !m->grad_fn && grad_enabled())
    EMBER_FAIL(Runtime, self->base() ? "a view of a leaf" : "a leaf",
               " Variable that requires grad is being used in an in-place operation.");
}

void check_out_no_grad(const char* op) {
  EMBER_FAIL(Runtime, op,
             "(): functions with out=... arguments don't support automatic differentiation, but "
             "one of the arguments requires grad.");
}

// ---- engine ---------------------------------------------------------------------------------

namespace {
bool has_nan(const Tensor& t) {
  if (!is_floating(t->dtype()) || t->device().is_meta()) return false;
  Tensor any = host_values(ops::any(ops::isnan(t, Tensor()), std::nullopt, false), "anomaly mode");
  return *any->data_as<bool>();
}

// A node with hooks, or any node in anomaly mode (which checks for errors and NaN).
std::vector<Tensor> call_function(const std::shared_ptr<Node>& node, std::vector<Tensor>&& buf) {
  if (!anomaly_mode_enabled()) return call_with_node_hooks(*node, std::move(buf));
  AnomalyParentGuard parent(node);
  std::vector<Tensor> outs;
  try {
    outs = call_with_node_hooks(*node, std::move(buf));
  } catch (...) {
    report_anomaly(*node);
    throw;
  }
  if (anomaly_check_nan()) {
    GradModeGuard no_grad(false);
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i] && has_nan(outs[i])) {
        report_anomaly(*node);
        EMBER_FAIL(Runtime, "Function '", node->name(), "' returned nan values in its ", i,
                   "th output.");
      }
    }
  }
  return outs;
}

struct CompareSeq {
  bool operator()(const std::shared_ptr<Node>& a, const std::shared_ptr<Node>& b) const {
    return a->sequence_nr < b->sequence_nr;  // newest node first
  }
};

// A backward run from inside another one (a hook or a custom Function's backward calling
// backward) runs on the same thread's stack; each level takes a few KB of C++ and Python
// frames, so past this depth (about 2000 levels overflowed an 8 MB stack) it is refused
// instead of crashing.
constexpr int kMaxReentrantDepth = 1000;
thread_local int t_reentrant_depth = 0;

struct ReentrantDepthGuard {
  ReentrantDepthGuard() {
    EMBER_CHECK(t_reentrant_depth < kMaxReentrantDepth,
                "backward: reentrant backward calls (a backward run from a hook or a custom "
                "Function's backward while another backward runs) are nested more than ",
                kMaxReentrantDepth,
                " levels deep; ember runs them on the calling thread's stack, which deeper "
                "nesting would overflow");
    ++t_reentrant_depth;
  }
  ~ReentrantDepthGuard() { --t_reentrant_depth; }
  ReentrantDepthGuard(const ReentrantDepthGuard&) = delete;
  ReentrantDepthGuard& operator=(const ReentrantDepthGuard&) = delete;
};
}  // namespace

namespace {
// The edges the running node must compute (run_backward with inputs): the node and a mask of its
// next_edges. A nested backward (a custom Function's backward calling autograd.grad) sets its
// own and restores this one.
struct EdgeMask {
  const Node* node = nullptr;
  const std::vector<bool>* wanted = nullptr;
};
thread_local EdgeMask t_edge_mask;

class EdgeMaskScope {
 public:
  EdgeMaskScope(const Node* node, const std::vector<bool>* wanted) : saved_(t_edge_mask) {
    t_edge_mask = {node, wanted};
  }
  ~EdgeMaskScope() { t_edge_mask = saved_; }
  EdgeMaskScope(const EdgeMaskScope&) = delete;
  EdgeMaskScope& operator=(const EdgeMaskScope&) = delete;

 private:
  EdgeMask saved_;
};
}  // namespace

bool edge_wanted(const Node* node, size_t i) {
  const EdgeMask& m = t_edge_mask;
  return m.node != node || !m.wanted || (i < m.wanted->size() && (*m.wanted)[i]);
}

std::vector<Tensor> run_backward(const std::vector<Tensor>& outputs,
                                 const std::vector<Tensor>& grad_outputs, bool keep_graph,
                                 bool create_graph, const std::vector<Tensor>& inputs,
                                 bool allow_unused, bool accumulate) {
  ReentrantDepthGuard depth;
  EMBER_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), "backward: got ",
              outputs.size(), " tensors and ", grad_outputs.size(), " gradients");
  std::vector<Edge> roots;
  std::vector<Tensor> seeds;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    Edge e = gradient_edge(t);
    EMBER_CHECK(e.valid(), "element ", i,
                " of tensors does not require grad and does not have a grad_fn");
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!g) {
      EMBER_CHECK(t->numel() == 1,
                  "grad can be implicitly created only for scalar outputs (got "
                  "an output of shape ",
                  shape_str(t->sizes()), ")");
      // d(complex)/d(x) has no implicit seed: the caller must say which real part they mean
      EMBER_CHECK(!is_complex(t->dtype()),
                  "grad can be implicitly created only for real scalar outputs but got ember.",
                  dtype_name(t->dtype()));
      g = ops::ones_like(t, std::nullopt, std::nullopt);
    } else {
      EMBER_CHECK(g->sizes() == t->sizes(), "Mismatch in shape: grad_output[", i,
                  "] has a shape of ", shape_str(g->sizes()), " and output[", i,
                  "] has a shape of ", shape_str(t->sizes()), ".");
      EMBER_CHECK_KIND(differentiable(g->dtype()), Type, "backward: grad_output[", i,
                       "] must be a floating point tensor like output[", i, "] (",
                       dtype_name(t->dtype()), "), got ", dtype_name(g->dtype()));
      // a complex seed for a real output (or a real one for a complex output) has no single
      // meaning: casting would drop the imaginary part silently
      EMBER_CHECK(is_complex(g->dtype()) == is_complex(t->dtype()),
                  "For complex Tensors, both grad_output and output are required to have the same "
                  "dtype. Mismatch in dtype: grad_output[",
                  i, "] has a dtype of ember.", dtype_name(g->dtype()), " and output[", i,
                  "] has a dtype of ember.", dtype_name(t->dtype()), ".");
      if (g->dtype() != t->dtype()) g = ops::_to_dtype(g, t->dtype(), false);
    }
    roots.push_back(e);
    seeds.push_back(g);
  }

  // autograd.grad: the gradients w.r.t. `inputs` are captured and returned. backward(inputs=)
  // (accumulate): they go to those tensors' .grad -- a leaf's through its AccumulateGrad node
  // (so its hooks run), a non-leaf's by retain_grad (as PyTorch does) -- and nowhere else.
  std::vector<Tensor> captured(inputs.size());
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> captures;
  for (size_t j = 0; j < inputs.size(); ++j) {
    Edge e = gradient_edge(inputs[j]);
    EMBER_CHECK(e.valid(), "One of the differentiated Tensors (input ", j,
                ") does not require grad");
    if (accumulate && !is_leaf(inputs[j])) retain_grad(inputs[j]);
    captures[e.fn.get()].push_back({e.input_nr, j});
  }

  // Dependencies: how many edges point at each node reachable from the roots.
  std::unordered_map<Node*, int> deps;
  std::unordered_map<Node*, std::shared_ptr<Node>> owned;
  {
    std::vector<Node*> stack;
    for (const Edge& e : roots) {
      if (!owned.count(e.fn.get())) {
        owned[e.fn.get()] = e.fn;
        stack.push_back(e.fn.get());
      }
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next_edges) {
        if (!e.fn) continue;
        deps[e.fn.get()]++;
        if (!owned.count(e.fn.get())) {
          owned[e.fn.get()] = e.fn;
          stack.push_back(e.fn.get());
        }
      }
    }
  }

  // With `inputs`, only nodes from which one of them can be reached need to run; the others are
  // skipped (the node of a non-leaf input itself only has its gradient hooks run, unless another
  // input lies beyond it). Every parent of a needed node is needed, so dependency counts stay
  // exact for the nodes that run.
  std::unordered_set<Node*> needed;
  if (!inputs.empty()) {
    std::unordered_map<Node*, std::vector<Node*>> parents;
    for (const auto& [n, fn] : owned)
      for (const Edge& e : n->next_edges)
        if (e.fn) parents[e.fn.get()].push_back(n);
    std::vector<Node*> stack;
    for (const auto& [n, caps] : captures) {
      if (!owned.count(n)) continue;  // not part of this graph
      for (Node* p : parents[n])
        if (needed.insert(p).second) stack.push_back(p);
      // A leaf's AccumulateGrad does the accumulating; a non-leaf's grad_fn need not run.
      if (accumulate && dynamic_cast<AccumulateGrad*>(n)) needed.insert(n);
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (Node* p : parents[n])
        if (needed.insert(p).second) stack.push_back(p);
    }
  }

  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto add_to = [&](Node* n, uint32_t nr, const Tensor& g) {
    auto& buf = buffers[n];
    if (buf.size() < n->num_outputs) buf.resize(n->num_outputs);
    if (!buf[nr]) {
      buf[nr] = g;
    } else if (!grad_enabled() && exclusively_owned(buf[nr]) && buf[nr]->sizes() == g->sizes() &&
               buf[nr]->dtype() == g->dtype()) {
      // Only this buffer holds the running sum: add in place. No allocation, and the sum keeps
      // its layout (a transposed weight's gradient summed over 35 LSTM steps stays one flat loop).
      ops::add(buf[nr], g, Scalar(int64_t(1)), buf[nr]);
    } else {
      buf[nr] = ops::add(buf[nr], g, Scalar(int64_t(1)), Tensor());
    }
  };
  for (size_t i = 0; i < roots.size(); ++i) add_to(roots[i].fn.get(), roots[i].input_nr, seeds[i]);
  seeds.clear();  // the buffers hold them now; they go as soon as their node has run

  std::priority_queue<std::shared_ptr<Node>, std::vector<std::shared_ptr<Node>>, CompareSeq> ready;
  for (const Edge& e : roots) {
    if (deps[e.fn.get()] == 0) {
      deps[e.fn.get()] = -1;  // queued once
      ready.push(e.fn);
    }
  }

  GradModeGuard mode(create_graph);
  BackwardStreams streams;
  while (!ready.empty()) {
    std::shared_ptr<Node> node = ready.top();
    ready.pop();
    std::vector<Tensor> buf = std::move(buffers[node.get()]);
    buffers.erase(node.get());
    buf.resize(node->num_outputs);
    auto cap = captures.find(node.get());
    bool run = inputs.empty() || needed.count(node.get());
    if (!run && cap == captures.end()) continue;  // leads to none of the inputs
    std::vector<Tensor> outs;
    {
      // Under the profiler: the node's range, named as PyTorch's engine names it and linked to
      // its forward op by the sequence number.
      profiler::Range prof_range;
      if (profiler::active())
        prof_range.begin("autograd::engine::evaluate_function: " + node->name(),
                         profiler::Kind::Backward, static_cast<int64_t>(node->sequence_nr));
      // Another thread's backward may be running this node (a shared graph or leaf).
      std::lock_guard<std::recursive_mutex> lock(node_lock(node.get()));
      // The node's hooks and backward run on the stream its forward used.
      StreamRestore on_stream;
      if (node->stream_device >= 0) {
        if (streams.enter(*node)) on_stream.streams = &streams;
      } else {
        streams.enter_default();
      }
      if (node->hooks || node->leaf_hooks()) call_tensor_pre_hooks(*node, buf);
      if (cap != captures.end())
        for (auto& [nr, j] : cap->second) captured[j] = buf[nr];
      if (!run || (!accumulate && dynamic_cast<AccumulateGrad*>(node.get()))) continue;
      // With inputs, only the edges leading to one of them get a gradient (should_compute).
      std::vector<bool> wanted;
      if (!inputs.empty()) {
        wanted.resize(node->next_edges.size());
        for (size_t k = 0; k < wanted.size(); ++k) {
          Node* next = node->next_edges[k].fn.get();
          wanted[k] = next && (needed.count(next) || captures.count(next));
        }
      }
      EdgeMaskScope mask(node.get(), inputs.empty() ? nullptr : &wanted);
      profiler::Range prof_apply;
      if (prof_range.open())
        prof_apply.begin(node->name(), profiler::Kind::Backward,
                         static_cast<int64_t>(node->sequence_nr));
      outs = (node->hooks || anomaly_mode_enabled()) ? call_function(node, std::move(buf))
                                                     : node->apply(std::move(buf));
      prof_apply.end();
      if (!keep_graph) node->release_variables();
    }
    EMBER_CHECK(outs.size() == node->next_edges.size() || node->next_edges.empty(), "function ",
                node->name(), " returned ", outs.size(), " gradients but expected ",
                node->next_edges.size());
    for (size_t k = 0; k < node->next_edges.size(); ++k) {
      const Edge& e = node->next_edges[k];
      if (!e.fn) continue;
      if (outs[k]) add_to(e.fn.get(), e.input_nr, outs[k]);
      if (--deps[e.fn.get()] == 0) {
        deps[e.fn.get()] = -1;
        ready.push(e.fn);
      }
    }
  }
  if (accumulate) return {};
  for (size_t j = 0; j < inputs.size(); ++j) {
    if (!captured[j] && !allow_unused)
      EMBER_FAIL(Runtime, "One of the differentiated Tensors (input ", j,
                 ") appears to not have been used in the graph. Set allow_unused=True if this is "
                 "the desired behavior.");
  }
  return captured;
}

}  // namespace autograd
}  // namespace ember
