#include "autograd/overload_hint.h"

namespace ember {
namespace autograd {

namespace {
thread_local bool dims_overload_flag = false;
}  // namespace

bool dims_overload() { return dims_overload_flag; }

DimsOverloadGuard::DimsOverloadGuard(bool given) : prev_(dims_overload_flag) {
  dims_overload_flag = given;
}

DimsOverloadGuard::~DimsOverloadGuard() { dims_overload_flag = prev_; }

}  // namespace autograd
}  // namespace ember
