// PyTorch names some graph nodes after the overload a Python call picked, which the C++
// arguments no longer tell apart: x.sum(dim=None) records SumBackward1 (x.sum() SumBackward0),
// x.squeeze((0,)) SqueezeBackward2 (x.squeeze(0) SqueezeBackward1). The binding of such an op
// (YAML `dims_overload`) marks, for the length of the call, that its dims argument came as a
// sequence or an explicit None; the op's node_name expression reads the mark.
#pragma once

namespace ember {
namespace autograd {

// Whether the innermost marked call got its dims as a sequence or an explicit None.
bool dims_overload();

class DimsOverloadGuard {
 public:
  explicit DimsOverloadGuard(bool given);
  ~DimsOverloadGuard();
  DimsOverloadGuard(const DimsOverloadGuard&) = delete;
  DimsOverloadGuard& operator=(const DimsOverloadGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace autograd
}  // namespace ember
