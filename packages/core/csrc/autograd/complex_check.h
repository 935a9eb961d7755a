// The autograd wrappers' guard for complex tensors: no derivative formula is written for them
// yet, so recording history through one raises instead of computing a wrong gradient. Results
// that record no history (bool / integer dtypes) pass.
#pragma once
#include <initializer_list>

#include "core/error.h"
#include "core/tensor.h"

namespace ember {
namespace autograd {

inline void check_complex_autograd(const char* op, std::initializer_list<const Tensor*> inputs,
                                   const Tensor* result) {
  // A bool or integer result (eq, isnan, logical_and of complex inputs) records no history.
  if (result && *result && !is_floating((*result)->dtype()) && !is_complex((*result)->dtype()))
    return;
  bool complex = result && *result && is_complex((*result)->dtype());
  for (const Tensor* t : inputs) complex = complex || (t && *t && is_complex((*t)->dtype()));
  EMBER_CHECK_KIND(!complex, NotImplemented, op,
                   ": autograd through complex tensors is not supported yet; detach() the "
                   "inputs or run the op under ember.no_grad()");
}

}  // namespace autograd
}  // namespace ember
