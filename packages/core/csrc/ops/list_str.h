// Sizes as PyTorch's error messages print them, as a list: [2, 3] (shape_str prints (2, 3)).
#pragma once
#include <sstream>
#include <string>

#include "core/tensor.h"

namespace ember {

inline std::string list_str(const DimVector& v) {
  std::ostringstream os;
  os << "[";
  for (int64_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

}  // namespace ember
