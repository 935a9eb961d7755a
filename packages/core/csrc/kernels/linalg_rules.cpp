#include "kernels/linalg_rules.h"

#include <utility>
#include <vector>

namespace ember {
namespace linalg {

const char* ctype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Bool:
      return "bool";
    case ScalarType::UInt8:
      return "unsigned char";
    case ScalarType::Int8:
      return "signed char";
    case ScalarType::Int16:
      return "short int";
    case ScalarType::Int32:
      return "int";
    case ScalarType::Int64:
      return "long int";
    case ScalarType::Float16:
      return "c10::Half";
    case ScalarType::BFloat16:
      return "c10::BFloat16";
    case ScalarType::Float32:
      return "float";
    case ScalarType::Float64:
      return "double";
    case ScalarType::Complex64:
      return "c10::complex<float>";
    case ScalarType::Complex128:
      return "c10::complex<double>";
    case ScalarType::UInt16:
      return "unsigned short";
    case ScalarType::UInt32:
      return "unsigned int";
    case ScalarType::UInt64:
      return "unsigned long";
    case ScalarType::Float8_e4m3fn:
      return "c10::Float8_e4m3fn";
    case ScalarType::Float8_e5m2:
      return "c10::Float8_e5m2";
    default:
      return "?";
  }
}

void check_dtypes(const char* op, const char* na, const Tensor& a, const char* nb,
                  const Tensor& b) {
  EMBER_CHECK(a->dtype() == b->dtype(), op, ": expected ", na, " and ", nb,
              " to have the same dtype, but got: ", ctype_name(a->dtype()),
              " != ", ctype_name(b->dtype()));
}

void check_dim(const char* op, const char* name, const Tensor& t, int64_t dim) {
  EMBER_CHECK(t->dim() == dim, op, ": expected ", name, " to be a ", dim, "-D tensor, but got a ",
              t->dim(), "-D tensor of shape ", shape_str(t->sizes()));
}

void check_multipliable(const char* op, const Tensor& a, const Tensor& b, int64_t ka, int64_t kb) {
  EMBER_CHECK(ka == kb, op, ": shapes ", shape_str(a->sizes()), " and ", shape_str(b->sizes()),
              " cannot be multiplied (", ka, " != ", kb, ")");
}

void check_scalars(const char* op, ScalarType dt, const Scalar& beta, const Scalar& alpha) {
  if (is_floating(dt) || is_complex(dt)) return;
  EMBER_CHECK(!beta.is_floating(), op,
              ": for integral input tensors, argument beta must not be a floating point number");
  EMBER_CHECK(!alpha.is_floating(), op,
              ": for integral input tensors, argument alpha must not be a floating point number");
}

void check_broadcastable_to(const char* op, const Tensor& self, const DimVector& shape) {
  bool ok = self->dim() <= static_cast<int64_t>(shape.size());
  for (int64_t i = 1; ok && i <= self->dim(); ++i) {
    int64_t s = self->size(self->dim() - i);
    ok = s == 1 || s == shape[shape.size() - i];
  }
  EMBER_CHECK(ok, op, ": self of shape ", shape_str(self->sizes()),
              " can't be broadcast to the result shape ", shape_str(shape));
}

void check_bmm(const char* op, const Tensor& b1, const Tensor& b2) {
  check_dim(op, "batch1", b1, 3);
  check_dim(op, "batch2", b2, 3);
  check_dtypes(op, "batch1", b1, "batch2", b2);
  EMBER_CHECK(b1->size(0) == b2->size(0), op, ": batch sizes of shapes ", shape_str(b1->sizes()),
              " and ", shape_str(b2->sizes()), " don't match (", b1->size(0), " != ", b2->size(0),
              ")");
  check_multipliable(op, b1, b2, b1->size(2), b2->size(1));
}

bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, Mat* m) {
  if ((cs == 1 || cols <= 1) && (rows <= 1 || rs >= std::max<int64_t>(cols, 1))) {
    m->trans = false;
    m->ld = rows <= 1 ? std::max<int64_t>(cols, 1) : rs;
  } else if ((rs == 1 || rows <= 1) && (cols <= 1 || cs >= std::max<int64_t>(rows, 1))) {
    m->trans = true;
    m->ld = cols <= 1 ? std::max<int64_t>(rows, 1) : cs;
  } else {
    return false;
  }
  return m->ld <= kBlasIntMax;
}

DimVector batch_strides(const Tensor& t, const DimVector& batch) {
  const int64_t nb = batch.size(), tb = t->dim() - 2;
  DimVector s(nb, 0);
  for (int64_t i = 0; i < tb; ++i) s[nb - tb + i] = t->size(i) == 1 ? 0 : t->stride(i);
  return s;
}

bool fold_rows(const DimVector& batch, const DimVector& sa, int64_t M, int64_t rs, int64_t K,
               int64_t* row_stride) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (size, stride), size-1 dims dropped
  for (int64_t d = 0; d < batch.size(); ++d)
    if (batch[d] != 1) dims.emplace_back(batch[d], sa[d]);
  if (M != 1) dims.emplace_back(M, rs);
  if (dims.empty()) return false;
  for (size_t i = 0; i + 1 < dims.size(); ++i)
    if (dims[i].second != dims[i + 1].second * dims[i + 1].first) return false;
  *row_stride = dims.back().second;
  return *row_stride >= std::max<int64_t>(K, 1) && *row_stride <= kBlasIntMax;
}

DimVector product_shape(const DimVector& batch, int64_t M, int64_t N) {
  DimVector shape = batch;
  shape.push_back(M);
  shape.push_back(N);
  return shape;
}

Tensor as_row(const Tensor& v) {
  return make_view(v, {1, v->size(0)}, {v->size(0) * v->stride(0), v->stride(0)},
                   v->storage_offset());
}

Tensor as_col(const Tensor& v) {
  return make_view(v, {v->size(0), 1}, {v->stride(0), 1}, v->storage_offset());
}

Tensor reshaped(const Tensor& contiguous, DimVector sizes) {
  DimVector strides = contiguous_strides(sizes);
  return make_view(contiguous, std::move(sizes), std::move(strides), contiguous->storage_offset());
}

}  // namespace linalg
}  // namespace ember
