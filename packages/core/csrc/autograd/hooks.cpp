// Hook registration and the engine's calls into hooks (see hooks.h).
#include "autograd/hooks.h"

#include <atomic>

#include "autograd/autograd.h"
#include "ops.h"

namespace ember {
namespace autograd {

namespace {
std::atomic<uint64_t> g_hook_id{0};
thread_local std::vector<std::shared_ptr<SavedTensorHooksFactory>> t_saved_tensor_hooks;
}  // namespace

uint64_t next_hook_id() { return g_hook_id.fetch_add(1, std::memory_order_relaxed) + 1; }

NodeHooks& Node::materialize_hooks() {
  if (!hooks) hooks = std::make_unique<NodeHooks>();
  return *hooks;
}

LeafHooks* AccumulateGrad::leaf_hooks() const {
  AutogradMeta* m = meta(variable);
  return m ? m->leaf_hooks.get() : nullptr;
}

// ---- registration ---------------------------------------------------------------------------

namespace {
AutogradMeta& meta_for_hook(const Tensor& t) {
  EMBER_CHECK(requires_grad(t), "cannot register a hook on a tensor that doesn't require gradient");
  return *meta(t);
}

LeafHooks& materialize_leaf_hooks(AutogradMeta& m) {
  if (!m.leaf_hooks) m.leaf_hooks = std::make_unique<LeafHooks>();
  return *m.leaf_hooks;
}

template <class Member>
HookRemover leaf_remover(const Tensor& t, uint64_t id, Member member) {
  std::weak_ptr<TensorImpl> weak = t;
  return [weak, id, member] {
    Tensor t = weak.lock();
    AutogradMeta* m = t ? meta(t) : nullptr;
    if (m && m->leaf_hooks) ((*m->leaf_hooks).*member).remove(id);
  };
}

template <class Member>
HookRemover node_remover(const std::shared_ptr<Node>& node, uint64_t id, Member member) {
  std::weak_ptr<Node> weak = node;
  return [weak, id, member] {
    std::shared_ptr<Node> n = weak.lock();
    if (n && n->hooks) ((*n->hooks).*member).remove(id);
  };
}
}  // namespace

HookRemover register_tensor_hook(const Tensor& t, std::shared_ptr<TensorHook> hook) {
  AutogradMeta& m = meta_for_hook(t);
  if (m.grad_fn) {
    uint64_t id = m.grad_fn->materialize_hooks().tensor_pre.add(std::move(hook), m.output_nr);
    return node_remover(m.grad_fn, id, &NodeHooks::tensor_pre);
  }
  uint64_t id = materialize_leaf_hooks(m).pre.add(std::move(hook));
  return leaf_remover(t, id, &LeafHooks::pre);
}

HookRemover register_post_accumulate_grad_hook(const Tensor& t,
                                               std::shared_ptr<PostAccumulateGradHook> hook) {
  AutogradMeta& m = meta_for_hook(t);
  EMBER_CHECK(!m.grad_fn, "post accumulate grad hooks cannot be registered on non-leaf tensors");
  uint64_t id = materialize_leaf_hooks(m).post_accumulate.add(std::move(hook));
  return leaf_remover(t, id, &LeafHooks::post_accumulate);
}

HookRemover register_node_prehook(const std::shared_ptr<Node>& node,
                                  std::shared_ptr<FunctionPreHook> hook) {
  uint64_t id = node->materialize_hooks().pre.add(std::move(hook));
  return node_remover(node, id, &NodeHooks::pre);
}

HookRemover register_node_posthook(const std::shared_ptr<Node>& node,
                                   std::shared_ptr<FunctionPostHook> hook) {
  uint64_t id = node->materialize_hooks().post.add(std::move(hook));
  return node_remover(node, id, &NodeHooks::post);
}

void retain_grad(const Tensor& t) {
  EMBER_CHECK(requires_grad(t), "can't retain_grad on Tensor that has requires_grad=False");
  AutogradMeta& m = *meta(t);
  if (!m.grad_fn || m.retains_grad) return;  // a leaf keeps its gradient anyway
  m.grad_fn->materialize_hooks().retains_grad.push_back({m.output_nr, t});
  m.retains_grad = true;
}

bool retains_grad(const Tensor& t) {
  AutogradMeta* m = meta(t);
  return m && m->grad_fn && m->retains_grad;
}

// ---- the engine's side ----------------------------------------------------------------------

void call_tensor_pre_hooks(Node& node, std::vector<Tensor>& grads) {
  if (NodeHooks* h = node.hooks.get()) {
    for (const auto& e : h->tensor_pre.snapshot())
      grads[e.output_nr] = (*e.hook)(grads[e.output_nr]);
    auto retained = h->retains_grad;
    for (const auto& [nr, weak] : retained) {
      const Tensor& g = grads[nr];
      Tensor t = weak.lock();
      if (!t || !g) continue;
      AutogradMeta& m = materialize_meta(t);
      m.grad = m.grad ? ops::add(m.grad, g, Scalar(int64_t(1)), Tensor()) : ops::clone(g);
    }
  }
  if (LeafHooks* lh = node.leaf_hooks())
    for (const auto& e : lh->pre.snapshot()) grads[0] = (*e.hook)(grads[0]);
}

std::vector<Tensor> call_with_node_hooks(Node& node, std::vector<Tensor>&& grads) {
  NodeHooks* h = node.hooks.get();
  if (!h) return node.apply(std::move(grads));
  size_t n = grads.size();
  for (const auto& e : h->pre.snapshot()) {
    grads = (*e.hook)(grads);
    EMBER_CHECK(grads.size() == n, "a pre-hook of ", node.name(), " returned ", grads.size(),
                " gradients but expected ", n);
  }
  if (h->post.empty()) return node.apply(std::move(grads));
  std::vector<Tensor> given = grads;
  std::vector<Tensor> outs = node.apply(std::move(grads));
  size_t m = outs.size();
  for (const auto& e : h->post.snapshot()) {
    outs = (*e.hook)(outs, given);
    EMBER_CHECK(outs.size() == m, "a hook of ", node.name(), " returned ", outs.size(),
                " gradients but expected ", m);
  }
  return outs;
}

// ---- saved-tensor hooks ---------------------------------------------------------------------

void push_saved_tensor_hooks(std::shared_ptr<SavedTensorHooksFactory> factory) {
  t_saved_tensor_hooks.push_back(std::move(factory));
}

void pop_saved_tensor_hooks() {
  EMBER_CHECK(!t_saved_tensor_hooks.empty(),
              "saved_tensors_hooks: no hooks to pop (the stack of this thread is empty)");
  t_saved_tensor_hooks.pop_back();
}

std::unique_ptr<SavedVariableHooks> default_saved_variable_hooks() {
  if (t_saved_tensor_hooks.empty()) return nullptr;
  std::shared_ptr<SavedTensorHooksFactory> top = t_saved_tensor_hooks.back();
  return top->make();
}

}  // namespace autograd
}  // namespace ember
