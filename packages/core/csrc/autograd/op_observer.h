// Op observer: lets a recorder (ember.onnx.export) see every op a program runs, whatever the
// path to it (Python bindings, hand-bound operators, a function reference kept in a module).
//
// Each generated `ops::<name>` wrapper starts with
//     if (op_hooks::any()) {  // one relaxed load, shared with forward AD (op_hooks.h)
//       if (op_observer::active() && op_observer::outermost()) return <name>_observed(...);
//       ...the forward-AD check...
//     }
// so an op pays nothing more when no recorder runs. `<name>_observed` (out of line, cold)
// enters a Scope (this thread's depth + 1,
// so the ops the call runs inside are not reported), calls `ops::<name>` again, and reports the
// op's name, its tensor arguments and its tensor results to the callback: only the outermost
// op of each call tree on a thread is reported (`linear`, not the matmul inside it).
#pragma once
#include <atomic>
#include <initializer_list>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/tensor.h"

namespace ember {
namespace op_observer {

// op: the op's name; inputs: its defined tensor arguments (lists flattened); outputs: its
// tensor results. May throw: the exception leaves the op (after the op ran).
using Callback = void (*)(const char* op, const std::vector<Tensor>& inputs,
                          const std::vector<Tensor>& outputs);

namespace detail {
extern std::atomic<Callback> g_callback;
int& depth();  // this thread's nesting of observed ops
}  // namespace detail

inline bool active() { return detail::g_callback.load(std::memory_order_relaxed) != nullptr; }
inline bool outermost() { return detail::depth() == 0; }

// Installs (or, with nullptr, removes) the callback.
void set_callback(Callback cb);

class Scope {
 public:
  Scope(const char* op, std::initializer_list<const Tensor*> tensors,
        std::initializer_list<const std::vector<Tensor>*> lists = {});
  ~Scope() { --detail::depth(); }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  template <class R>
  void report(const R& result) {
    --detail::depth();  // the callback's own ops are outermost again (and reported if needed)
    std::vector<Tensor> outs;
    collect(result, outs);
    struct Restore {
      ~Restore() { ++detail::depth(); }
    } restore;
    emit(outs);
  }
  void report_void() { report(0); }

 private:
  static void collect(const Tensor& t, std::vector<Tensor>& outs) {
    if (t) outs.push_back(t);
  }
  static void collect(const std::vector<Tensor>& ts, std::vector<Tensor>& outs) {
    for (const Tensor& t : ts) collect(t, outs);
  }
  template <class... T>
  static void collect(const std::tuple<T...>& tup, std::vector<Tensor>& outs) {
    std::apply([&](const auto&... e) { (collect(e, outs), ...); }, tup);
  }
  template <class T, class = std::enable_if_t<!std::is_same_v<T, Tensor>>>
  static void collect(const T&, std::vector<Tensor>&) {}
  void emit(const std::vector<Tensor>& outs);

  const char* op_;
  std::vector<Tensor> inputs_;
};

}  // namespace op_observer
}  // namespace ember
