// Building blocks of the derivative formulas written in ops/*.yaml (`derivatives:`). Formulas
// are C++ expressions over `grad`, the op's arguments and `result`; these short helpers keep
// them readable. Every helper calls ops::, so with create_graph=True the backward pass records
// itself and gradients of gradients work. The helpers of one family of ops build on these
// (formulas_math.h, formulas_nn.h, ...); autograd/formulas.h includes them all.
#pragma once
#include <cctype>
#include <string>

#include "autograd/autograd.h"
#include "ops.h"

namespace ember {
namespace autograd {
namespace formulas {

inline Tensor add(const Tensor& a, const TensorOrScalar& b) {
  return ops::add(a, b, Scalar(int64_t(1)), Tensor());
}
inline Tensor sub(const Tensor& a, const TensorOrScalar& b) {
  return ops::sub(a, b, Scalar(int64_t(1)), Tensor());
}
inline Tensor mul(const Tensor& a, const TensorOrScalar& b) { return ops::mul(a, b, Tensor()); }
inline Tensor mul(const Tensor& a, const Scalar& b) {
  return ops::mul(a, TensorOrScalar(b), Tensor());
}
inline Tensor div(const Tensor& a, const TensorOrScalar& b) {
  return ops::div(a, b, std::nullopt, Tensor());
}
inline Tensor neg(const Tensor& a) { return ops::neg(a, Tensor()); }
inline Tensor exp(const Tensor& a) { return ops::exp(a, Tensor()); }
inline Tensor log(const Tensor& a) { return ops::log(a, Tensor()); }
inline Tensor sqrt(const Tensor& a) { return ops::sqrt(a, Tensor()); }
inline Tensor sin(const Tensor& a) { return ops::sin(a, Tensor()); }
inline Tensor cos(const Tensor& a) { return ops::cos(a, Tensor()); }
inline Tensor sign(const Tensor& a) { return ops::sign(a, Tensor()); }
inline Tensor square(const Tensor& a) { return ops::mul(a, TensorOrScalar(a), Tensor()); }
// Forward mode reuses the reverse formulas of elementwise ops (`tangent: elementwise`) with the
// tangent in place of grad. A holomorphic f's reverse formula is grad * conj(f'(z)) and its JVP
// is t * f'(z): while a HolomorphicTangent is live on this thread, cj and the other conjugating
// helpers leave their argument as it is, so the same formula gives the JVP. Only the ops whose
// tangents were checked for complex tensors (the codegen's COMPLEX_TANGENT_OK) accept them.
inline thread_local bool t_holomorphic_tangent = false;
class HolomorphicTangent {
 public:
  HolomorphicTangent() : prev_(t_holomorphic_tangent) { t_holomorphic_tangent = true; }
  ~HolomorphicTangent() { t_holomorphic_tangent = prev_; }
  HolomorphicTangent(const HolomorphicTangent&) = delete;
  HolomorphicTangent& operator=(const HolomorphicTangent&) = delete;

 private:
  bool prev_;
};

// conj(t) for a complex t; a real t as it is (costs nothing). A holomorphic f's backward is
// grad * conj(f'(z)) (PyTorch's convention), which for real inputs is the usual grad * f'(x).
inline Tensor cj(const Tensor& t) {
  return is_complex(t->dtype()) && !t_holomorphic_tangent ? ops::conj_physical(t, Tensor()) : t;
}
inline Tensor one_minus(const Tensor& a) {
  return ops::rsub(a, TensorOrScalar(Scalar(int64_t(1))), Scalar(int64_t(1)));
}
inline Tensor gt0(const Tensor& a) {  // 1 where a > 0, else 0, in a's dtype
  return ops::_to_dtype(ops::gt(a, TensorOrScalar(Scalar(int64_t(0))), Tensor()), a->dtype(),
                        false);
}

// d/dself of self ** exponent: grad * (e * self^(e - 1)), 0 where e == 0 (as torch: there
// 0 * 0^-1 would be NaN at self == 0).
inline Tensor pow_backward_self(const Tensor& grad, const Tensor& self, const TensorOrScalar& e) {
  if (!e.is_tensor()) {
    double x = e.scalar.to_double();
    if (x == 0.0) return ops::zeros_like(self, std::nullopt, std::nullopt);
    Tensor p = ops::pow(self, TensorOrScalar(Scalar(x - 1.0)), Tensor());
    return mul(grad, TensorOrScalar(mul(p, Scalar(x))));
  }
  Tensor p = ops::pow(self, TensorOrScalar(sub(e.tensor, Scalar(int64_t(1)))), Tensor());
  Tensor g = mul(grad, TensorOrScalar(mul(e.tensor, TensorOrScalar(p))));
  return ops::where(ops::eq(e.tensor, TensorOrScalar(Scalar(0.0)), Tensor()),
                    TensorOrScalar(Scalar(0.0)), TensorOrScalar(g), Tensor());
}
// d/dexponent of self ** exponent = grad * (result * log(self)), the factor 0 where self == 0 and
// exponent >= 0 (as torch; 0^-1 = inf keeps its -inf derivative).
inline Tensor pow_backward_exponent(const Tensor& grad, const Tensor& self,
                                    const TensorOrScalar& exponent, const Tensor& result) {
  Tensor d = mul(result, TensorOrScalar(log(self)));
  Tensor zero_base = ops::eq(self, TensorOrScalar(Scalar(int64_t(0))), Tensor());
  Tensor cond =
      ops::logical_and(zero_base, ops::ge(exponent.tensor, Scalar(0.0), Tensor()), Tensor());
  d = ops::where(cond, TensorOrScalar(Scalar(0.0)), TensorOrScalar(d), Tensor());
  return mul(grad, TensorOrScalar(d));
}

// Gradient of a reduction over `dim` (all dims when absent): grad broadcast back to self.
inline Tensor sum_backward(const Tensor& grad, const InputMeta& self,
                           const std::optional<DimVector>& dim, bool keepdim) {
  Tensor g = grad;
  int64_t nd = self.sizes.size();
  if (!keepdim && nd > 0) {
    if (!dim || dim->empty()) {
      // a 0-d gradient expands as it is (PyTorch's sum backward runs expand alone)
      if (g->dim() != 0) g = ops::reshape(g, DimVector(nd, 1));
    } else {
      DimVector dims;
      for (int64_t d : *dim) dims.push_back(wrap_dim(d, nd, "sum_backward"));
      std::sort(dims.begin(), dims.end());
      for (int64_t d : dims) g = ops::unsqueeze(g, d);
    }
  }
  return ops::expand(g, self.sizes);
}
inline Tensor mean_backward(const Tensor& grad, const InputMeta& self,
                            const std::optional<DimVector>& dim, bool keepdim) {
  int64_t n = 1;
  int64_t nd = self.sizes.size();
  if (!dim || dim->empty()) {
    for (int64_t s : self.sizes) n *= s;
  } else {
    for (int64_t d : *dim) n *= self.sizes[wrap_dim(d, nd, "mean_backward")];
  }
  return div(sum_backward(grad, self, dim, keepdim), Scalar(n));
}

// a @ b as the gradient of a 2-D operand: for a column-major operand (F.linear's weight.t())
// it is computed as (bᵀ @ aᵀ)ᵀ, column-major too, so the gradient that reaches the contiguous
// weight through t() is contiguous as well (as in PyTorch) and optimizers and gradient
// accumulation run over dense memory.
inline Tensor mm_like(const Tensor& a, const Tensor& b, const InputMeta& like) {
  if (like.col_major) return ops::t(ops::mm(ops::t(b), ops::t(a)));
  return ops::mm(a, b);
}
// The gradients of mat1 @ mat2 for mat1 (grad @ mat2ᵀ) and mat2 (mat1ᵀ @ grad), computed
// transposed for a column-major operand as in mm_like but without transposing an operand twice:
// the ops PyTorch's mm backward runs (t, mm; or t, mm, t).
inline Tensor mm_mat1_grad(const Tensor& grad, const Tensor& mat2, const InputMeta& mat1) {
  if (mat1.col_major) return ops::t(ops::mm(mat2, ops::t(grad)));
  return ops::mm(grad, ops::t(mat2));
}
inline Tensor mm_mat2_grad(const Tensor& grad, const Tensor& mat1, const InputMeta& mat2) {
  if (mat2.col_major) return ops::t(ops::mm(ops::t(grad), mat1));
  return ops::mm(ops::t(mat1), grad);
}

// The grad_fn name of a pooling op over k spatial dims, PyTorch's: its 1-d pooling runs the 2-d
// one on an unsqueezed input and squeezes the result.
inline const char* pool_node_name(size_t k, const char* two_d, const char* three_d) {
  return k == 1 ? "SqueezeBackward1" : k == 2 ? two_d : three_d;
}
// pad's grad_fn name, PyTorch's per mode and number of padded dims (circular keeps ember's: in
// PyTorch it is a CopySlices of the in-place copies that build it).
inline const char* pad_node_name(const std::string& mode, size_t pad_len) {
  const size_t k = pad_len / 2;
  if (mode == "constant") return "ConstantPadNdBackward0";
  if (mode == "reflect" && k >= 1 && k <= 3)
    return k == 1   ? "ReflectionPad1DBackward0"
           : k == 2 ? "ReflectionPad2DBackward0"
                    : "ReflectionPad3DBackward0";
  if (mode == "replicate" && k >= 1 && k <= 3)
    return k == 1   ? "ReplicationPad1DBackward0"
           : k == 2 ? "ReplicationPad2DBackward0"
                    : "ReplicationPad3DBackward0";
  return "PadBackward0";
}

// matmul's grad_fn name, PyTorch's: that of the op its call lowers to for these operand dims
// (a batched operand folds into mm and a view; a matrix times a batch is computed transposed
// and made contiguous).
inline const char* matmul_node_name(const Tensor& self, const Tensor& other) {
  int64_t a = self->dim(), b = other->dim();
  if (a == 1 && b == 1) return "DotBackward0";
  if (a == 2 && b == 1) return "MvBackward0";
  if (a == 1 && b == 2) return "SqueezeBackward4";
  if (a == 2 && b == 2) return "MmBackward0";
  if (a == 2) return "CloneBackward0";
  return "UnsafeViewBackward0";
}

// einsum's grad_fn name, PyTorch's: the node of the last step of its lowering, a permute (one
// operand) or a multiply (several) when no label is summed out, else a sum (one operand) or the
// view after the last batched product.
inline const char* einsum_node_name(const std::string& equation,
                                    const std::vector<Tensor>& tensors) {
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  int counts[128] = {};
  for (char c : lhs)
    if (std::isalpha(static_cast<unsigned char>(c))) ++counts[static_cast<unsigned char>(c) & 127];
  bool summed = false;
  for (int c = 0; c < 128; ++c) {
    if (!counts[c]) continue;
    // Implicit output: the labels that appear once.
    const bool kept = arrow == std::string::npos
                          ? counts[c] == 1
                          : equation.find(static_cast<char>(c), arrow + 2) != std::string::npos;
    summed = summed || !kept;
  }
  if (tensors.size() == 1) return summed ? "SumBackward1" : "PermuteBackward0";
  return summed ? "ViewBackward0" : "MulBackward0";
}

// matmul's gradients, following its batching rules (1-D operands gain and lose a dim).
// matmul's gradients read the other operand and only the sizes of the one they are for (as
// torch, whose mm saves an input only when the other needs a gradient): a write into an input
// whose partner is frozen keeps backward valid.
inline Tensor matmul_backward_self(const Tensor& grad, const InputMeta& self, const Tensor& other) {
  const size_t self_dim = self.sizes.size();
  if (self_dim == 1 && other->dim() == 1) return mul(other, grad);
  Tensor o = other->dim() == 1 ? ops::unsqueeze(other, 1) : other;
  Tensor g = grad;
  if (other->dim() == 1) g = ops::unsqueeze(g, -1);
  if (self_dim == 1) g = ops::unsqueeze(g, -2);
  Tensor r = self_dim == 2 && o->dim() == 2 && g->dim() == 2
                 ? mm_like(g, ops::t(o), self)
                 : ops::matmul(g, ops::transpose(o, -1, -2));
  if (self_dim == 1) r = ops::squeeze(r, DimVector{-2});
  return r;  // reduce_grad sums broadcast batch dims
}
inline Tensor matmul_backward_other(const Tensor& grad, const Tensor& self,
                                    const InputMeta& other) {
  const int64_t other_dim = static_cast<int64_t>(other.sizes.size());
  if (self->dim() == 1 && other_dim == 1) return mul(self, grad);
  Tensor s = self->dim() == 1 ? ops::unsqueeze(self, 0) : self;
  Tensor g = grad;
  if (self->dim() == 1) g = ops::unsqueeze(g, -2);
  if (other_dim == 1) g = ops::unsqueeze(g, -1);
  if (s->dim() > 2 && other_dim == 2) {
    // a batch of rows against one matrix: the batch folds into the rows, one product (as the
    // forward and PyTorch's backward run it) instead of a batched product and a sum
    const int64_t k = s->size(s->dim() - 1), m = g->size(g->dim() - 1);
    return mm_mat2_grad(ops::reshape(g, DimVector{-1, m}), ops::reshape(s, DimVector{-1, k}),
                        other);
  }
  Tensor r = s->dim() == 2 && other_dim == 2 && g->dim() == 2
                 ? mm_like(ops::t(s), g, other)
                 : ops::matmul(ops::transpose(s, -1, -2), g);
  if (other_dim == 1) r = ops::squeeze(r, DimVector{-1});
  if (r->dim() > other_dim) {  // batch dims of self that other broadcast over
    DimVector lead;
    for (int64_t d = 0; d < r->dim() - other_dim; ++d) lead.push_back(d);
    r = ops::sum(r, lead, false, std::nullopt);
  }
  return r;
}

// Inverse of a permutation.
inline DimVector invert_perm(const DimVector& dims) {
  DimVector inv(dims.size(), 0);
  for (int64_t i = 0; i < dims.size(); ++i) inv[wrap_dim(dims[i], dims.size(), "permute")] = i;
  return inv;
}
// Gradient of an expand/broadcast: reduce_grad sums back to the input's shape.
inline Tensor same(const Tensor& grad) { return grad; }

// Gradient of clamp: grad where min <= self <= max (NaN passes), else 0.
inline Tensor clamp_backward(const Tensor& grad, const Tensor& self, const TensorOrScalar& min,
                             const TensorOrScalar& max) {
  Tensor keep = ops::ones_like(self, ScalarType::Bool, std::nullopt);
  if (!min.is_none()) keep = ops::logical_and(keep, ops::ge(self, min, Tensor()), Tensor());
  if (!max.is_none()) keep = ops::logical_and(keep, ops::le(self, max, Tensor()), Tensor());
  return ops::where(keep, TensorOrScalar(grad), TensorOrScalar(Scalar(0.0)), Tensor());
}

}  // namespace formulas
}  // namespace autograd
}  // namespace ember
