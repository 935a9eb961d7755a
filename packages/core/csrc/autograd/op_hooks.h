// The one check every generated ops:: wrapper pays for its per-op hooks: a counter that is
// nonzero while any hook is on (a live forward-AD dual level, an installed op observer). The
// wrapper reads it once (a relaxed atomic load) and only then looks at each hook.
#pragma once
#include <atomic>

namespace ember {
namespace op_hooks {

namespace detail {
extern std::atomic<int> g_count;
}

inline bool any() {
  return __builtin_expect(detail::g_count.load(std::memory_order_relaxed) != 0, 0);
}
// A hook turned on (+1) or off (-1).
inline void add(int delta) { detail::g_count.fetch_add(delta); }

}  // namespace op_hooks
}  // namespace ember
