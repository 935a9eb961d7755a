// Device-neutral parts of the matrix products (ops/linalg.yaml), shared by the CPU kernels
// (kernels/cpu/linalg_ops.cpp, OpenBLAS) and the CUDA ones (cuda/linalg_ops.cpp, cuBLAS): the
// argument checks and their messages, how a strided matrix is read by a BLAS, and the op bodies,
// which reduce every op to one call of the device's product core (MatmulOps below).
#pragma once
#include <algorithm>
#include <climits>
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"
#include "ops.h"

namespace ember {
namespace linalg {

// Both scipy-openblas32 and cuBLAS take 32-bit sizes, strides and leading dimensions.
constexpr int64_t kBlasIntMax = INT32_MAX;

// ---- checks (PyTorch's messages) ---------------------------------------------------------------

// PyTorch names dtypes by their C++ type in these messages ("float != double").
const char* ctype_name(ScalarType t);
void check_dtypes(const char* op, const char* na, const Tensor& a, const char* nb, const Tensor& b);
void check_dim(const char* op, const char* name, const Tensor& t, int64_t dim);
void check_multipliable(const char* op, const Tensor& a, const Tensor& b, int64_t ka, int64_t kb);
// PyTorch refuses fractional alpha/beta for integer tensors rather than truncating them.
void check_scalars(const char* op, ScalarType dt, const Scalar& beta, const Scalar& alpha);
// `self` of addmm & co. must broadcast to the result shape.
void check_broadcastable_to(const char* op, const Tensor& self, const DimVector& shape);
// batch1 / batch2 of bmm, baddbmm and addbmm.
void check_bmm(const char* op, const Tensor& b1, const Tensor& b2);

// ---- operand layouts ---------------------------------------------------------------------------

// How a BLAS reads one rows x cols matrix: row-major with leading dimension ld, or column-major
// (trans: the row-major storage of its transpose).
struct Mat {
  bool trans = false;
  int64_t ld = 1;
};

// Strides (elements) -> layout; false when a BLAS can't read it (then it is copied).
bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, Mat* m);

// Strides (elements) of t's batch dims (all but the last two) broadcast to `batch`: 0 where t has
// size 1 or lacks the dim.
DimVector batch_strides(const Tensor& t, const DimVector& batch);

// If the batch dims and the row dim of A stack into one row-major (n*M) x K matrix, its row stride.
bool fold_rows(const DimVector& batch, const DimVector& sa, int64_t M, int64_t rs, int64_t K,
               int64_t* row_stride);

// [batch..., M, N]: the result shape of a product core.
DimVector product_shape(const DimVector& batch, int64_t M, int64_t N);

// ---- the ops -----------------------------------------------------------------------------------

// Views that present vectors as matrices and a contiguous result in a new shape (no data moves).
Tensor as_row(const Tensor& v);  // (K,) -> (1, K)
Tensor as_col(const Tensor& v);  // (K,) -> (K, 1)
Tensor reshaped(const Tensor& contiguous, DimVector sizes);

// The op bodies of every device. Device supplies two static functions:
//   core(op, a, b, batch, init, beta, alpha): beta * init + alpha * (a @ b) for a: [batch_a...,
//     M, K], b: [batch_b..., K, N] whose batch dims broadcast to `batch` (dtypes and K checked
//     here); `init` (may be null) broadcasts to [batch..., M, N] and is not read when beta == 0.
//     Returns a new contiguous tensor.
//   gather(op, t, sizes, strides): a new contiguous tensor of t's elements over `sizes`, read
//     with `strides` (elements) from t's offset.
template <class Device>
struct MatmulOps {
  static Tensor matmul(const Tensor& self, const Tensor& other) {
    const int64_t d1 = self->dim(), d2 = other->dim();
    EMBER_CHECK(d1 >= 1 && d2 >= 1,
                "matmul: both arguments to matmul need to be at least 1D, but they are ", d1,
                "D and ", d2, "D");
    check_dtypes("matmul", "m1", self, "m2", other);
    if (d1 == 1 && d2 == 1) return vector_dot("matmul", self, other);
    Tensor a = d1 == 1 ? as_row(self) : self;
    Tensor b = d2 == 1 ? as_col(other) : other;
    const int64_t M = a->size(a->dim() - 2), K = a->size(a->dim() - 1);
    const int64_t K2 = b->size(b->dim() - 2), N = b->size(b->dim() - 1);
    check_multipliable("matmul", self, other, K, K2);
    // Batch dims broadcast (right-aligned).
    const int64_t ba = a->dim() - 2, bb = b->dim() - 2, nd = std::max(ba, bb);
    DimVector batch(nd, 1);
    for (int64_t i = 0; i < nd; ++i) {
      int64_t sa = i - (nd - ba) >= 0 ? a->size(i - (nd - ba)) : 1;
      int64_t sb = i - (nd - bb) >= 0 ? b->size(i - (nd - bb)) : 1;
      EMBER_CHECK(sa == sb || sa == 1 || sb == 1, "matmul: batch dimensions of shapes ",
                  shape_str(self->sizes()), " and ", shape_str(other->sizes()),
                  " cannot be broadcast (", sa, " != ", sb, " at batch dim ", i, ")");
      batch[i] = sa == 1 ? sb : sa;
    }
    Tensor r = Device::core("matmul", a, b, batch, Tensor(), 0, 1);
    DimVector shape = batch;
    if (d1 > 1) shape.push_back(M);
    if (d2 > 1) shape.push_back(N);
    return reshaped(r, shape);
  }

  static Tensor mm(const Tensor& self, const Tensor& mat2) {
    check_dim("mm", "self", self, 2);
    check_dim("mm", "mat2", mat2, 2);
    check_dtypes("mm", "m1", self, "m2", mat2);
    check_multipliable("mm", self, mat2, self->size(1), mat2->size(0));
    return Device::core("mm", self, mat2, {}, Tensor(), 0, 1);
  }

  static Tensor bmm(const Tensor& self, const Tensor& mat2) {
    check_bmm("bmm", self, mat2);
    return Device::core("bmm", self, mat2, {self->size(0)}, Tensor(), 0, 1);
  }

  static Tensor mv(const Tensor& self, const Tensor& vec) {
    check_dim("mv", "self", self, 2);
    check_dim("mv", "vec", vec, 1);
    check_dtypes("mv", "mat", self, "vec", vec);
    check_multipliable("mv", self, vec, self->size(1), vec->size(0));
    Tensor r = Device::core("mv", self, as_col(vec), {}, Tensor(), 0, 1);
    return reshaped(r, {self->size(0)});
  }

  static Tensor dot(const Tensor& self, const Tensor& tensor) {
    return vector_dot("dot", self, tensor);
  }

  // vdot conjugates its first operand (the product core sums plain products).
  static Tensor vdot(const Tensor& self, const Tensor& other) {
    if (is_complex(self->dtype()) && self->dtype() == other->dtype())
      return vector_dot("vdot", dispatch::conj_physical(self, Tensor()), other);
    return vector_dot("vdot", self, other);
  }

  static Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2,
                      const Scalar& beta, const Scalar& alpha) {
    check_dim("addmm", "mat1", mat1, 2);
    check_dim("addmm", "mat2", mat2, 2);
    check_dtypes("addmm", "m1", mat1, "m2", mat2);
    check_dtypes("addmm", "self", self, "mat1", mat1);
    check_multipliable("addmm", mat1, mat2, mat1->size(1), mat2->size(0));
    check_broadcastable_to("addmm", self, {mat1->size(0), mat2->size(1)});
    check_scalars("addmm", self->dtype(), beta, alpha);
    return Device::core("addmm", mat1, mat2, {}, self, beta, alpha);
  }

  static Tensor addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, const Scalar& beta,
                      const Scalar& alpha) {
    check_dim("addmv", "mat", mat, 2);
    check_dim("addmv", "vec", vec, 1);
    check_dtypes("addmv", "mat", mat, "vec", vec);
    check_dtypes("addmv", "self", self, "mat", mat);
    check_multipliable("addmv", mat, vec, mat->size(1), vec->size(0));
    check_broadcastable_to("addmv", self, {mat->size(0)});
    check_scalars("addmv", self->dtype(), beta, alpha);
    // The product is computed as an (M, 1) matrix: self (M,) becomes a column to broadcast into it.
    Tensor init = self->dim() == 1 ? as_col(self) : self;
    Tensor r = Device::core("addmv", mat, as_col(vec), {}, init, beta, alpha);
    return reshaped(r, {mat->size(0)});
  }

  static Tensor baddbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2,
                        const Scalar& beta, const Scalar& alpha) {
    check_bmm("baddbmm", batch1, batch2);
    check_dtypes("baddbmm", "self", self, "batch1", batch1);
    check_broadcastable_to("baddbmm", self, {batch1->size(0), batch1->size(1), batch2->size(2)});
    check_scalars("baddbmm", self->dtype(), beta, alpha);
    return Device::core("baddbmm", batch1, batch2, {batch1->size(0)}, self, beta, alpha);
  }

  static Tensor addbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2,
                       const Scalar& beta, const Scalar& alpha) {
    check_bmm("addbmm", batch1, batch2);
    check_dtypes("addbmm", "self", self, "batch1", batch1);
    const int64_t B = batch1->size(0), M = batch1->size(1), K = batch1->size(2);
    const int64_t N = batch2->size(2);
    check_broadcastable_to("addbmm", self, {M, N});
    check_scalars("addbmm", self->dtype(), beta, alpha);
    // sum_b batch1[b] @ batch2[b] == (M, B*K) @ (B*K, N): lay batch1 out as (M, B, K).
    Tensor b1 = Device::gather("addbmm", batch1, {M, B, K},
                               {batch1->stride(1), batch1->stride(0), batch1->stride(2)});
    Tensor b2 = batch2->is_contiguous()
                    ? batch2
                    : Device::gather("addbmm", batch2, batch2->sizes(), batch2->strides());
    return Device::core("addbmm", reshaped(b1, {M, B * K}), reshaped(b2, {B * K, N}), {}, self,
                        beta, alpha);
  }

 private:
  static Tensor vector_dot(const char* op, const Tensor& self, const Tensor& other) {
    EMBER_CHECK(self->dim() == 1 && other->dim() == 1, op, ": 1D tensors expected, but got ",
                self->dim(), "D and ", other->dim(), "D tensors");
    EMBER_CHECK(self->dtype() == other->dtype(), op,
                ": expected both vectors to have the same dtype, but got: ",
                ctype_name(self->dtype()), " != ", ctype_name(other->dtype()));
    check_multipliable(op, self, other, self->size(0), other->size(0));
    Tensor r = Device::core(op, as_row(self), as_col(other), {}, Tensor(), 0, 1);
    return reshaped(r, {});
  }
};

}  // namespace linalg
}  // namespace ember
