#include "ops/python_dispatch.h"

namespace ember {
namespace python_dispatch {

namespace detail {
std::atomic<int> g_on{0};
}

namespace {
std::atomic<Handler> g_handler{nullptr};
std::atomic<SubclassCheck> g_subclass_check{nullptr};
}  // namespace

void add(int delta) { detail::g_on.fetch_add(delta); }

void set_handler(Handler h) { g_handler.store(h); }

void set_subclass_check(SubclassCheck f) { g_subclass_check.store(f); }

bool is_subclass(const Tensor& t) {
  SubclassCheck f = g_subclass_check.load(std::memory_order_acquire);
  return f != nullptr && f(t);
}

bool call(int op, const void* const* args, void* ret, std::initializer_list<const Tensor*> tensors,
          std::initializer_list<const std::vector<Tensor>*> lists) {
  Handler h = g_handler.load(std::memory_order_acquire);
  return h != nullptr && h(op, args, ret, tensors, lists);
}

}  // namespace python_dispatch
}  // namespace ember
