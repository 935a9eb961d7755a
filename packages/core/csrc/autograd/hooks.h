// Hooks the autograd engine calls: on tensors (Tensor.register_hook, retain_grad,
// register_post_accumulate_grad_hook), on graph nodes (pre- and post-hooks) and on saved tensors
// (saved_tensors_hooks). The interfaces are plain C++ so the engine stays free of Python; the
// Python layer implements them (csrc/python/python_hooks.cpp) and takes the GIL only while a
// Python hook runs.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ember {
namespace autograd {
class Node;

// Python's cycle collector asks the hooks on an unreachable-looking tensor for the Python
// objects they hold (python/python_hooks.cpp): `visit` is called with each object (a PyObject*
// passed as void*) and `arg`; a nonzero result stops the walk and is returned.
using PythonVisit = int (*)(void* object, void* arg);

// Tensor.register_hook: sees the gradient of one tensor (undefined = none flowed) and returns
// the gradient to use from then on (the same one to keep it).
struct TensorHook {
  virtual ~TensorHook() = default;
  virtual Tensor operator()(const Tensor& grad) = 0;
  virtual int visit_python(PythonVisit, void*) const { return 0; }
};

// grad_fn.register_prehook: sees the gradients flowing into a node (one per forward output)
// before it runs and returns the ones it will run with.
struct FunctionPreHook {
  virtual ~FunctionPreHook() = default;
  virtual std::vector<Tensor> operator()(const std::vector<Tensor>& grad_outputs) = 0;
};

// grad_fn.register_hook: sees what a node computed (one gradient per forward input) and what it
// was given, and returns the gradients passed on.
struct FunctionPostHook {
  virtual ~FunctionPostHook() = default;
  virtual std::vector<Tensor> operator()(const std::vector<Tensor>& grad_inputs,
                                         const std::vector<Tensor>& grad_outputs) = 0;
};

// Tensor.register_post_accumulate_grad_hook: runs after a leaf's .grad has been updated.
struct PostAccumulateGradHook {
  virtual ~PostAccumulateGradHook() = default;
  virtual void operator()(const Tensor& leaf) = 0;
  virtual int visit_python(PythonVisit, void*) const { return 0; }
};

// Registered hooks in registration order, each under an id its handle removes it by.
uint64_t next_hook_id();
template <class H>
struct HookList {
  struct Entry {
    uint64_t id;
    uint32_t output_nr;  // which gradient a tensor hook on a node watches
    std::shared_ptr<H> hook;
  };
  std::vector<Entry> entries;

  uint64_t add(std::shared_ptr<H> hook, uint32_t output_nr = 0) {
    uint64_t id = next_hook_id();
    entries.push_back({id, output_nr, std::move(hook)});
    return id;
  }
  bool remove(uint64_t id) {
    for (auto it = entries.begin(); it != entries.end(); ++it) {
      if (it->id == id) {
        entries.erase(it);
        return true;
      }
    }
    return false;
  }
  bool empty() const { return entries.empty(); }
  // The engine iterates a copy: a hook may add or remove hooks while it runs.
  std::vector<Entry> snapshot() const { return entries; }
};

// Hooks attached to one graph node (a Node owns one only once something is registered).
struct NodeHooks {
  HookList<TensorHook> tensor_pre;  // Tensor.register_hook on the node's outputs
  // Non-leaf tensors whose .grad is kept (retain_grad); they run after the tensor hooks so the
  // retained gradient is the one the hooks produced.
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retains_grad;
  HookList<FunctionPreHook> pre;
  HookList<FunctionPostHook> post;
  bool empty() const {
    return tensor_pre.empty() && retains_grad.empty() && pre.empty() && post.empty();
  }
};

// Hooks of a leaf tensor. They live on the tensor because its AccumulateGrad node is created
// lazily (and may be freed and re-created with each graph).
struct LeafHooks {
  HookList<TensorHook> pre;
  HookList<PostAccumulateGradHook> post_accumulate;
};

// ---- registration (each returns a function that removes what it registered) -----------------
using HookRemover = std::function<void()>;
// On a leaf the hook runs before its gradient is accumulated into .grad; on a non-leaf it sees
// the gradient flowing into the tensor (and may replace it for the rest of the graph).
HookRemover register_tensor_hook(const Tensor& t, std::shared_ptr<TensorHook> hook);
HookRemover register_post_accumulate_grad_hook(const Tensor& t,
                                               std::shared_ptr<PostAccumulateGradHook> hook);
HookRemover register_node_prehook(const std::shared_ptr<Node>& node,
                                  std::shared_ptr<FunctionPreHook> hook);
HookRemover register_node_posthook(const std::shared_ptr<Node>& node,
                                   std::shared_ptr<FunctionPostHook> hook);
// Tensor.retain_grad(): a non-leaf keeps its gradient in .grad (a no-op on leaves).
void retain_grad(const Tensor& t);
bool retains_grad(const Tensor& t);

// The engine's side: runs the tensor hooks (and retain_grad) of the gradients flowing into
// `node`, then the node's pre-hooks, the node, and its post-hooks.
void call_tensor_pre_hooks(Node& node, std::vector<Tensor>& grads);
std::vector<Tensor> call_with_node_hooks(Node& node, std::vector<Tensor>&& grads);

// ---- saved-tensor hooks ---------------------------------------------------------------------
// One tensor's (pack, unpack) pair: pack runs when the tensor is saved for backward and keeps
// whatever it returns in place of the tensor; unpack turns that back into a tensor in backward.
struct SavedVariableHooks {
  virtual ~SavedVariableHooks() = default;
  virtual void call_pack_hook(const Tensor& t) = 0;
  virtual Tensor call_unpack_hook() = 0;
};

// An entry of the thread-local saved_tensors_hooks stack; makes the hooks of each saved tensor.
struct SavedTensorHooksFactory {
  virtual ~SavedTensorHooksFactory() = default;
  virtual std::unique_ptr<SavedVariableHooks> make() = 0;
};
void push_saved_tensor_hooks(std::shared_ptr<SavedTensorHooksFactory> factory);
void pop_saved_tensor_hooks();
// Hooks for a tensor being saved now: from the innermost stack entry, or null (no stack).
std::unique_ptr<SavedVariableHooks> default_saved_variable_hooks();

}  // namespace autograd
}  // namespace ember
