#include "autograd/op_observer.h"

#include "autograd/op_hooks.h"

namespace ember {
namespace op_hooks::detail {
std::atomic<int> g_count{0};
}

namespace op_observer {

namespace detail {
std::atomic<Callback> g_callback{nullptr};
int& depth() {
  thread_local int d = 0;
  return d;
}
}  // namespace detail

void set_callback(Callback cb) {
  Callback old = detail::g_callback.exchange(cb);
  if (old == nullptr && cb != nullptr) op_hooks::add(1);
  if (old != nullptr && cb == nullptr) op_hooks::add(-1);
}

Scope::Scope(const char* op, std::initializer_list<const Tensor*> tensors,
             std::initializer_list<const std::vector<Tensor>*> lists)
    : op_(op) {
  ++detail::depth();
  for (const Tensor* t : tensors)
    if (t && *t) inputs_.push_back(*t);
  for (const auto* l : lists)
    for (const Tensor& t : *l)
      if (t) inputs_.push_back(t);
}

void Scope::emit(const std::vector<Tensor>& outs) {
  Callback cb = detail::g_callback.load();
  if (cb) cb(op_, inputs_, outs);
}

}  // namespace op_observer
}  // namespace ember
