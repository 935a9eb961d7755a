// Define-by-run reverse-mode automatic differentiation: graph nodes, saved tensors, grad mode,
// and the engine that runs a backward pass in C++ (without the Python GIL).
//
// Every differentiable op's result gets a grad_fn Node (generated from the derivative formulas in
// ops/*.yaml by tools/codegen) whose next_edges point at the nodes of its inputs; leaves that
// require grad end in an AccumulateGrad node that sums into `.grad`.
#pragma once
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/anomaly_mode.h"
#include "autograd/hooks.h"
#include "core/tensor.h"

namespace ember {

namespace autograd {
class Node;
class SavedValueVisitor;

struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};
}  // namespace autograd

// Per-tensor autograd state; absent (null) for tensors that never took part in autograd.
struct AutogradMeta {
  bool requires_grad = false;
  bool retains_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;
  std::weak_ptr<autograd::Node> grad_accumulator;
  uint32_t output_nr = 0;
  std::unique_ptr<autograd::LeafHooks> leaf_hooks;  // hooks of a leaf; null until registered
  // Tensor.grad_dtype of a leaf: what .grad holds, incoming gradients cast to it. Unset: the
  // tensor's own dtype; grad_dtype_any (Python None): whatever dtype arrives.
  std::optional<ScalarType> grad_dtype;
  bool grad_dtype_any = false;
  // Forward-mode AD (forward_ad.h): the tangent per live dual level; an undefined tensor marks
  // "no tangent here" (so a primal from unpack_dual doesn't inherit its base's).
  std::vector<std::pair<int64_t, Tensor>> fw_grads;
  // View tracking (autograd/views.cpp): set on outputs of view ops. `view_version` is the version
  // the grad_fn was last built at; once the shared counter moves on, it is rebuilt from the base.
  bool is_view = false;
  bool view_no_grad = false;  // created in no_grad mode from a base that required grad
  // Output of a custom Function that aliases one of its inputs (returned as is, or a view made
  // inside forward): an in-place write would bypass the custom backward, so it is refused.
  bool custom_function_view = false;
  // Output of an op returning several views (split, chunk, unbind), or a view of one: as in
  // PyTorch, recorded in-place writes into it are refused (it fits in the padding before
  // view_version, so the struct's layout is unchanged).
  bool multi_output_view = false;
  int64_t view_version = 0;
};

namespace autograd {

// ---- grad mode (thread-local) ---------------------------------------------------------------
// Whether ops record the graph: the grad-mode flag, and not in inference mode (there, as in
// PyTorch, nothing is recorded even under enable_grad).
bool grad_enabled();
// The grad-mode flag as set (Python's is_grad_enabled()); what a guard saves and restores.
bool grad_mode_flag();
void set_grad_enabled(bool enabled);
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : prev_(grad_mode_flag()) { set_grad_enabled(enabled); }
  ~GradModeGuard() { set_grad_enabled(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};

// ---- tensor-level queries -------------------------------------------------------------------
AutogradMeta* meta(const Tensor& t);              // null when the tensor has none
AutogradMeta& materialize_meta(const Tensor& t);  // creates it on first use
inline bool requires_grad(const Tensor& t) {
  AutogradMeta* m = t ? meta(t) : nullptr;
  return m && m->requires_grad;
}
inline bool is_leaf(const Tensor& t) {
  AutogradMeta* m = meta(t);
  return !m || !m->grad_fn;
}
void set_requires_grad(const Tensor& t, bool requires_grad);
// The edge a gradient for `t` flows along (its grad_fn, or its leaf's AccumulateGrad).
Edge gradient_edge(const Tensor& t);
// Makes `node` the grad_fn of `result` (output number `output_nr`); integer/bool results stay
// non-differentiable.
void set_history(const Tensor& result, const std::shared_ptr<Node>& node, uint32_t output_nr = 0);
// A new TensorImpl over the same data without autograd state (Tensor.detach()).
Tensor detach(const Tensor& t);

// ---- nodes ----------------------------------------------------------------------------------
// Whether the engine wants the gradient along next_edges[i] of `node` while that node runs:
// autograd.grad(inputs=) and backward(inputs=) need only the edges that lead to an input (a
// weight's gradient is not computed when only the input's is asked for). True outside such a run.
bool edge_wanted(const Node* node, size_t i);

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  // grads[i]: gradient w.r.t. the forward op's i-th output (undefined = zero). Returns one
  // gradient per next_edge (undefined where not needed).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors once the node has run (unless retain_graph).
  virtual void release_variables() {}
  bool should_compute(size_t i) const {
    return i < next_edges.size() && next_edges[i].valid() && edge_wanted(this, i);
  }
  bool any_should_compute(size_t begin, size_t n) const {
    for (size_t i = begin; i < begin + n; ++i)
      if (should_compute(i)) return true;
    return false;
  }
  // The hooks of the leaf an AccumulateGrad node feeds (null for every other node).
  virtual LeafHooks* leaf_hooks() const { return nullptr; }
  // Lists what the node saved for backward, by PyTorch's names (Python's grad_fn._saved_<name>);
  // generated nodes override it, the others saved nothing to show.
  virtual void visit_saved(SavedValueVisitor& /*visitor*/) {}
  NodeHooks& materialize_hooks();

  std::vector<Edge> next_edges;
  uint32_t num_outputs = 1;
  uint64_t sequence_nr;
  std::unique_ptr<NodeHooks> hooks;          // null until a hook is registered
  std::unique_ptr<AnomalyMetadata> anomaly;  // set only while anomaly mode is on
  // Stream-ordered devices (CUDA): the stream the forward op ran on, which its backward runs on
  // (stream_device < 0: none recorded, the CPU's case).
  DeviceType stream_type = DeviceType::CPU;
  int8_t stream_device = -1;
  int64_t stream = 0;
};

// Records the current stream of `dev` (a stream-ordered device with stream hooks) on the node,
// for its backward to run on; set_history does this for the first device output of a node.
void record_stream(Node& node, Device dev);

// Shape and dtype of an input, to reduce broadcast gradients back to it.
struct InputMeta {
  DimVector sizes;
  ScalarType dtype = ScalarType::Float32;
  Device device;
  // A matrix stored column-major (a transposed contiguous one, like F.linear's weight.t()):
  // matrix-product gradients are then produced in that layout (formulas::mm_like).
  bool col_major = false;
  InputMeta() = default;
  explicit InputMeta(const Tensor& t)
      : sizes(t->sizes()),
        dtype(t->dtype()),
        device(t->device()),
        col_major(t->dim() == 2 && t->stride(0) == 1 && t->stride(1) == t->size(0) &&
                  t->size(0) > 1 && t->size(1) > 1) {}
};
// Sums `grad` over broadcast dims so it has `m.sizes`, casts it to `m.dtype` and moves it to
// `m.device` (the gradient of a copy between devices goes back to where its input was).
Tensor reduce_grad(const Tensor& grad, const InputMeta& m);

// A tensor saved for backward. Inputs are held as they are; an op's own output is held as an
// alias without autograd state (no reference cycle) and re-linked on unpack. The version the
// tensor had when saved is checked on unpack, so in-place changes are caught.
// Inside saved_tensors_hooks(pack, unpack) only what pack returned is kept; unpack rebuilds the
// tensor in backward and it is re-linked to the graph the same way.
class SavedVariable {
 public:
  SavedVariable() = default;
  SavedVariable(const Tensor& t, bool is_output);
  Tensor unpack(const Node* node) const;
  void reset();
  bool defined() const { return defined_; }
  // Python's grad_fn._raw_saved_<name>.register_hooks: packs the saved tensor now, and from then
  // on keeps only what pack returned (as saved_tensors_hooks would have). Refused for a tensor
  // already hooked, freed by backward, or never saved.
  void register_hooks(std::unique_ptr<SavedVariableHooks> hooks);
  // Forward AD: `result`, an op's output, has just received `tangent` at `level`. When this is
  // that output saved by its own grad_fn, the kept alias takes the tangent too, and unpack passes
  // it on: backward formulas that use the result then differentiate under forward AD
  // (forward-over-reverse), as PyTorch's saved forward grads. The op saves its output before
  // the tangent is known, hence this second step.
  void share_output_tangent(const Tensor& result, const Tensor& tangent, int64_t level);

 private:
  struct Hooked;  // the pack/unpack hooks and what re-links the unpacked tensor
  Tensor unpack_hooked(const Node* node) const;
  [[noreturn]] void fail_version(const Tensor& data, const Node* node) const;

  Tensor data_;
  std::shared_ptr<Hooked> hooked_;
  std::weak_ptr<Node> weak_grad_fn_;
  int64_t version_ = 0;
  uint32_t output_nr_ = 0;
  bool is_output_ = false;
  bool requires_grad_ = false;
  bool defined_ = false;
  bool released_ = false;
};

// Receives a node's saved values (Node::visit_saved) one at a time, by name; Python's binding
// turns each into the object grad_fn._saved_<name> returns. The generated nodes call operator(),
// which picks the kind from the member's type (an unset optional gives none()).
class SavedValueVisitor {
 public:
  virtual ~SavedValueVisitor() = default;
  virtual void tensor(const char* name, SavedVariable& v) = 0;
  virtual void tensor_list(const char* name, std::vector<SavedVariable>& v) = 0;
  // A Tensor?[] argument (index's indices), kept as given: undefined entries are None.
  virtual void optional_tensors(const char* name, const std::vector<Tensor>& v) = 0;
  virtual void none(const char* name) = 0;
  virtual void boolean(const char* name, bool v) = 0;
  virtual void integer(const char* name, int64_t v) = 0;
  virtual void real(const char* name, double v) = 0;
  virtual void scalar(const char* name, const Scalar& v) = 0;
  virtual void ints(const char* name, const DimVector& v) = 0;
  virtual void string(const char* name, const std::string& v) = 0;
  virtual void dtype(const char* name, ScalarType v) = 0;
  virtual void device(const char* name, Device v) = 0;

  void operator()(const char* n, SavedVariable& v) { tensor(n, v); }
  void operator()(const char* n, std::vector<SavedVariable>& v) { tensor_list(n, v); }
  void operator()(const char* n, const std::vector<Tensor>& v) { optional_tensors(n, v); }
  void operator()(const char* n, bool v) { boolean(n, v); }
  void operator()(const char* n, int64_t v) { integer(n, v); }
  void operator()(const char* n, double v) { real(n, v); }
  void operator()(const char* n, const Scalar& v) { scalar(n, v); }
  void operator()(const char* n, const DimVector& v) { ints(n, v); }
  void operator()(const char* n, const std::string& v) { string(n, v); }
  void operator()(const char* n, ScalarType v) { dtype(n, v); }
  void operator()(const char* n, Device v) { device(n, v); }
  template <class T>
  void operator()(const char* n, const std::optional<T>& v) {
    if (v)
      (*this)(n, *v);
    else
      none(n);
  }
  // A Tensor|Scalar argument: the saved tensor, or the number it was.
  void operator()(const char* n, SavedVariable& v, const TensorOrScalar& s, bool was_tensor) {
    if (was_tensor || v.defined())
      tensor(n, v);
    else if (s.is_none())
      none(n);
    else
      scalar(n, s.scalar);
  }
};

// Sums incoming gradients into a leaf's .grad.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable) : variable(std::move(variable)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  LeafHooks* leaf_hooks() const override;
  Tensor variable;
};

// The grad_fn of results of ops that have no derivative formula yet: backward through it fails
// with a clear message instead of silently producing a wrong gradient.
class NotImplementedBackward final : public Node {
 public:
  explicit NotImplementedBackward(std::string op) : op_(std::move(op)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return "NotImplemented"; }

 private:
  std::string op_;
};

// ---- helpers used by the generated wrappers -------------------------------------------------
bool any_requires_grad(std::initializer_list<const Tensor*> ts);
inline bool any_requires_grad_list(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts)
    if (requires_grad(t)) return true;
  return false;
}
void check_inplace(const Tensor& self, const char* op);
void check_out_no_grad(const char* op);
// Returns undefined gradients as zeros of the input's shape when a formula needs a value.
Tensor zeros_like_meta(const InputMeta& m);
// For nodes of ops with several outputs: false when no gradient arrived at all; otherwise fills
// the undefined gradients of floating outputs with zeros so formulas see every one.
bool materialize_grads(std::vector<Tensor>& grads, const std::vector<InputMeta>& outputs);
// The same, zero-filling only the outputs `fill` marks (YAML `materialize:`): the formulas take
// the others' missing gradients as undefined tensors.
bool materialize_grads(std::vector<Tensor>& grads, const std::vector<InputMeta>& outputs,
                       std::initializer_list<bool> fill);
// A formula for a Tensor[] input must give one gradient per element.
void check_list_grads(const char* node, size_t got, size_t expected);

// Gives `view` (a view of self built without ops::, e.g. by basic indexing) a grad_fn that
// scatters its gradient back into self's layout (autograd/views.cpp).
void record_view(const Tensor& self, const Tensor& view);
// Brings the grad_fn of a view (a tensor with a base) up to date after in-place writes into its
// base or into another view of it (autograd/views.cpp); meta() calls it.
void refresh_view(const Tensor& t);
// The view-related refusals of in-place ops (autograd/views.cpp); check_inplace calls it.
void check_inplace_view(const Tensor& self, const char* op);

// ---- engine ---------------------------------------------------------------------------------
// Runs backward from `outputs` (seeded with `grad_outputs`; undefined = ones for scalars).
// With `inputs` empty, gradients accumulate into leaves' .grad and nothing is returned;
// otherwise the gradients w.r.t. `inputs` are returned (autograd.grad) and .grad is untouched.
std::vector<Tensor> run_backward(const std::vector<Tensor>& outputs,
                                 const std::vector<Tensor>& grad_outputs, bool keep_graph,
                                 bool create_graph, const std::vector<Tensor>& inputs,
                                 bool allow_unused, bool accumulate);

}  // namespace autograd
}  // namespace ember
