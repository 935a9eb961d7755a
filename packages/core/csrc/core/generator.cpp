#include "core/generator.h"

namespace ember {
Generator& default_generator() {
  static Generator* g = new Generator();  // leaked: used until process exit
  return *g;
}
}  // namespace ember
