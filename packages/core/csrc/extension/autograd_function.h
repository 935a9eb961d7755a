// Custom autograd functions in C++ (ATen's torch::autograd::Function): a struct with
//   static Tensor forward(AutogradContext* ctx, <args>);        // runs with grad mode off
//   static variable_list backward(AutogradContext* ctx, variable_list grad_outputs);
// called as MyFn::apply(args...). When an input requires grad, the outputs get a node of the
// engine's graph (CppNode) whose backward calls MyFn::backward; it returns one gradient per
// forward argument (undefined for non-tensor arguments and unneeded gradients), each summed to
// its input's shape as the engine does for every op.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "autograd/autograd.h"
#include "extension/tensor.h"

namespace ember {
namespace api {
namespace autograd {

using variable_list = std::vector<Tensor>;

// A value kept in ctx->saved_data (ATen's IValue, for the types extensions keep there).
class IValue {
 public:
  IValue() = default;
  IValue(bool v) : v_(v) {}                             // NOLINT
  IValue(int v) : v_(int64_t{v}) {}                     // NOLINT
  IValue(int64_t v) : v_(v) {}                          // NOLINT
  IValue(double v) : v_(v) {}                           // NOLINT
  IValue(std::string v) : v_(std::move(v)) {}           // NOLINT
  IValue(const char* v) : v_(std::string(v)) {}         // NOLINT
  IValue(Tensor v) : v_(std::move(v)) {}                // NOLINT
  IValue(std::vector<int64_t> v) : v_(std::move(v)) {}  // NOLINT
  bool isNone() const { return v_.index() == 0; }
  bool toBool() const { return get<bool>("bool"); }
  int64_t toInt() const { return get<int64_t>("int"); }
  double toDouble() const {
    if (auto* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
    return get<double>("double");
  }
  const std::string& toStringRef() const { return get<std::string>("string"); }
  const Tensor& toTensor() const { return get<Tensor>("Tensor"); }
  const std::vector<int64_t>& toIntVector() const { return get<std::vector<int64_t>>("int[]"); }

 private:
  template <class T>
  const T& get(const char* what) const {
    const T* p = std::get_if<T>(&v_);
    EMBER_CHECK(p != nullptr, "IValue: expected a ", what, " in saved_data");
    return *p;
  }
  std::variant<std::monostate, bool, int64_t, double, std::string, Tensor, std::vector<int64_t>> v_;
};

template <class T>
class CppNode;

class AutogradContext {
 public:
  // Tensors the backward reads; an in-place change to one of them before backward is caught.
  void save_for_backward(variable_list to_save) { to_save_ = std::move(to_save); }
  variable_list get_saved_variables() const {
    EMBER_CHECK(!released_,
                "Trying to backward through the graph a second time (or directly access saved "
                "tensors after they have already been freed). Specify retain_graph=True if you "
                "need to backward through the graph a second time.");
    variable_list out;
    out.reserve(saved_.size());
    for (const auto& s : saved_) out.emplace_back(s.unpack(node_));
    return out;
  }
  // Outputs that get no gradient (integer results, indices).
  void mark_non_differentiable(const variable_list& outputs) {
    for (const auto& t : outputs) non_differentiable_.push_back(t.impl().get());
  }
  // Whether undefined output gradients reach backward as zeros (the default) or undefined.
  void set_materialize_grads(bool value) { materialize_grads_ = value; }
  // Whether forward argument `i` needs a gradient.
  bool needs_input_grad(size_t i) const { return i < needs_.size() && needs_[i]; }

  std::unordered_map<std::string, IValue> saved_data;

 private:
  template <class T>
  friend class CppNode;
  template <class T>
  friend struct Function;
  variable_list to_save_;
  std::vector<ember::autograd::SavedVariable> saved_;
  std::vector<void*> non_differentiable_;
  std::vector<bool> needs_;
  const ember::autograd::Node* node_ = nullptr;
  bool materialize_grads_ = true;
  bool released_ = false;
};

template <class T>
class CppNode final : public ember::autograd::Node {
 public:
  std::vector<ember::Tensor> apply(std::vector<ember::Tensor>&& grads) override {
    variable_list gs;
    gs.reserve(grads.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i] && ctx.materialize_grads_ && i < outputs.size())
        grads[i] = ember::autograd::zeros_like_meta(outputs[i]);
      gs.emplace_back(std::move(grads[i]));
    }
    variable_list res = T::backward(&ctx, std::move(gs));
    EMBER_CHECK(res.size() == num_args, "function ", name(),
                " returned an incorrect number of gradients (expected ", num_args, ", got ",
                res.size(), ")");
    std::vector<ember::Tensor> out(inputs.size());
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Tensor& g = res[arg_of_input[k]];
      if (g.defined() && should_compute(k)) out[k] = ember::autograd::reduce_grad(g, inputs[k]);
    }
    return out;
  }
  std::string name() const override { return "CppNode"; }
  void release_variables() override {
    for (auto& s : ctx.saved_) s.reset();
    ctx.released_ = true;
  }

  AutogradContext ctx;
  std::vector<ember::autograd::InputMeta> inputs, outputs;
  std::vector<size_t> arg_of_input;  // the forward argument each tensor input was
  size_t num_args = 0;
};

template <class T>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    auto node = std::make_shared<CppNode<T>>();
    AutogradContext& ctx = node->ctx;
    ctx.node_ = node.get();
    node->num_args = sizeof...(Args);
    // The tensor arguments: their positions, and whether each needs a gradient.
    variable_list tensor_inputs;
    size_t pos = 0;
    auto visit = [&](const auto& a) {
      using A = std::decay_t<decltype(a)>;
      bool needs = false;
      if constexpr (std::is_base_of_v<TensorBase, A>) {
        if (a.defined()) {
          tensor_inputs.emplace_back(a.impl());
          node->arg_of_input.push_back(pos);
          needs = a.requires_grad();
        }
      }
      ctx.needs_.push_back(needs);
      ++pos;
    };
    (visit(args), ...);
    bool record = ember::autograd::grad_enabled() &&
                  std::any_of(ctx.needs_.begin(), ctx.needs_.end(), [](bool b) { return b; });
    using Out = decltype(T::forward(&ctx, std::forward<Args>(args)...));
    Out result = [&] {
      ember::autograd::GradModeGuard no_grad(false);
      return T::forward(&ctx, std::forward<Args>(args)...);
    }();
    if (!record) return result;
    variable_list* outs = nullptr;
    variable_list single;
    if constexpr (std::is_same_v<Out, variable_list>) {
      outs = &result;
    } else {
      static_assert(std::is_base_of_v<TensorBase, Out>,
                    "autograd::Function: forward must return a Tensor or a variable_list");
      single.push_back(result);
      outs = &single;
    }
    for (const auto& t : tensor_inputs) {
      node->inputs.emplace_back(t.impl());
      node->next_edges.push_back(t.requires_grad() ? ember::autograd::gradient_edge(t.impl())
                                                   : ember::autograd::Edge());
    }
    node->num_outputs = static_cast<uint32_t>(outs->size());
    for (size_t i = 0; i < outs->size(); ++i) {
      Tensor& o = (*outs)[i];
      if (!o.defined()) {
        node->outputs.emplace_back();
        continue;
      }
      // An input returned as is becomes a new tensor over the same memory, so the input's own
      // history stays as it was.
      for (const auto& t : tensor_inputs)
        if (t.impl() == o.impl()) o = Tensor(ember::autograd::detach(o.impl()));
      node->outputs.emplace_back(o.impl());
      bool nondiff = std::find(ctx.non_differentiable_.begin(), ctx.non_differentiable_.end(),
                               o.impl().get()) != ctx.non_differentiable_.end();
      if (!nondiff) ember::autograd::set_history(o.impl(), node, static_cast<uint32_t>(i));
    }
    for (const auto& t : ctx.to_save_) {
      bool is_output = false;
      for (const auto& o : *outs) is_output = is_output || (o.defined() && o.impl() == t.impl());
      ctx.saved_.emplace_back(t.impl(), is_output);
    }
    ctx.to_save_.clear();
    if constexpr (std::is_same_v<Out, variable_list>) {
      return result;
    } else {
      return single[0];
    }
  }
};

}  // namespace autograd
}  // namespace api
}  // namespace ember
