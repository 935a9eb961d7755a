// CUDA matrix products (ops/linalg.yaml) through cuBLAS: mm, bmm, matmul, mv, dot, vdot, addmm,
// addmv, baddbmm, addbmm, with the CPU kernels' semantics (csrc/kernels/cpu/linalg_ops.cpp):
// same checks and messages, beta == 0 never reads `self`, K == 0 gives beta * self (or zeros).
//
// float32 / float64 / float16 / bfloat16 go to cublasGemmEx / cublasGemmStridedBatchedEx; the
// 16-bit types accumulate in float32 and are stored in their own dtype; float32 uses TF32 tensor
// cores only when allowed (allow_tf32(), off by default as in PyTorch >= 1.12). Integer dtypes run
// an exact wrapping kernel (linalg_ops.cu).
//
// Every op funnels into matmul_core(): operands [batch..., M, K] and [batch..., K, N] whose batch
// dims may be broadcast (stride 0). cuBLAS is column-major, so row-major C = A @ B is computed as
// the column-major C^T = B^T @ A^T: a row-major operand is passed as it is (op N) and a
// column-major one (a transposed view) with op T; an operand with neither unit stride is copied.
// Batches whose offsets are an arithmetic progression (a stride, 0 when broadcast) go to one
// strided-batched call; other broadcast batch layouts are expanded to a contiguous copy.
#include "cuda/linalg_ops.h"

#include <cublas_v2.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <mutex>
#include <vector>

#include "core/dispatch.h"
#include "cuda/cuda_context.h"
#include "cuda/cuda_registry.h"
#include "cuda/gemm.h"
#include "cuda/linalg_ops.cuh"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {

namespace {
std::atomic<bool> g_allow_tf32{false};
}  // namespace

bool allow_tf32() { return g_allow_tf32.load(std::memory_order_relaxed); }
void set_allow_tf32(bool on) { g_allow_tf32.store(on, std::memory_order_relaxed); }

namespace {

constexpr int64_t kCublasMax = INT32_MAX;  // cuBLAS sizes and leading dimensions are int

void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  if (status == CUBLAS_STATUS_ALLOC_FAILED)
    EMBER_FAIL(OutOfMemory, "CUDA out of memory in ", what, ": cuBLAS could not allocate memory");
  EMBER_FAIL(Runtime, "cuBLAS error in ", what, ": ", cublasGetStatusName(status), " (",
             cublasGetStatusString(status), ")");
}
#define EMBER_CUBLAS_CHECK(expr) check_cublas((expr), #expr)

// One cuBLAS handle per device, made on first use and never destroyed (a handle destroyed during
// interpreter teardown could outlive the CUDA context). The mutex covers setting the handle's
// stream and queueing the call, so threads that share the handle don't race on its stream.
struct HandleSlot {
  std::mutex mutex;
  cublasHandle_t handle = nullptr;
};

HandleSlot& handle_slot(int device) {
  static std::vector<HandleSlot>* slots =
      new std::vector<HandleSlot>(static_cast<size_t>(std::max(device_count(), 1)));
  EMBER_CHECK(device >= 0 && device < static_cast<int>(slots->size()),
              "cuBLAS: invalid CUDA device index ", device);
  return (*slots)[device];
}

// Runs f(handle) with the handle of the current device bound to its current stream.
template <class F>
void with_cublas(F&& f) {
  const int device = current_device();
  HandleSlot& slot = handle_slot(device);
  std::lock_guard<std::mutex> lock(slot.mutex);
  if (!slot.handle) EMBER_CUBLAS_CHECK(cublasCreate(&slot.handle));
  EMBER_CUBLAS_CHECK(cublasSetStream(slot.handle, current_stream(device)));
  f(slot.handle);
}

// PyTorch names dtypes by their C++ type in these messages ("float != double").
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
  if (is_floating(dt)) return;
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

// ---- layouts ----------------------------------------------------------------------------------

// How a rows x cols matrix is read: row-major with leading dimension ld, or column-major (trans:
// the row-major storage of its transpose).
struct Mat {
  bool trans = false;
  int64_t ld = 1;
};

// Strides (elements) -> layout; false when cuBLAS can't read it (then it is copied).
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
  return m->ld <= kCublasMax;
}

bool has_blas_layout(const Tensor& t, Mat* m) {
  const int64_t d = t->dim();
  return blas_layout(t->size(d - 2), t->size(d - 1), t->stride(d - 2), t->stride(d - 1), m);
}

// Strides (elements) of t's batch dims broadcast to `batch`: 0 where t has size 1 or lacks it.
DimVector batch_strides(const Tensor& t, const DimVector& batch) {
  const int64_t nb = batch.size(), tb = t->dim() - 2;
  DimVector s(nb, 0);
  for (int64_t i = 0; i < tb; ++i) s[nb - tb + i] = t->size(i) == 1 ? 0 : t->stride(i);
  return s;
}

// Whether the batch offsets (row-major over `batch`) are i * stride for one stride.
bool batch_progression(const DimVector& batch, const DimVector& s, int64_t* stride) {
  int64_t prev = -1;  // index of the previous dim of size > 1
  for (int64_t d = 0; d < static_cast<int64_t>(batch.size()); ++d) {
    if (batch[d] == 1) continue;
    if (prev >= 0 && s[prev] != s[d] * batch[d]) return false;
    prev = d;
  }
  *stride = prev >= 0 ? s[prev] : 0;
  return true;
}

// If the batch dims and the row dim of A stack into one row-major (n*M) x K matrix, its row stride.
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
  return *row_stride >= std::max<int64_t>(K, 1) && *row_stride <= kCublasMax;
}

// A contiguous copy of t's elements laid out over `sizes` read with `strides` (elements).
Tensor gather(const char* op, const Tensor& t, const DimVector& sizes, const DimVector& strides) {
  Tensor out = ember::empty(sizes, t->dtype(), t->device());
  linalg::strided_copy(out->data(), t->data(), t->itemsize(), static_cast<int>(sizes.size()),
                       sizes.data(), strides.data(), current_stream(), op);
  return out;
}

Tensor contiguous_copy(const char* op, const Tensor& t) {
  return gather(op, t, t->sizes(), t->strides());
}

// `init` (broadcastable to `out`'s shape, same dtype) copied into the contiguous `out`. A 0-d CPU
// tensor (which joins any device as a number would) is first copied to the device.
void fill_from(const char* op, const Tensor& out, Tensor init) {
  if (init->device().type != DeviceType::CUDA) {
    EMBER_CHECK(init->dim() == 0, op, ": expected self on ", out->device().str(), ", got ",
                init->device().str());
    Tensor dev = ember::empty({}, init->dtype(), out->device());
    EMBER_CUDA_CHECK(cudaMemcpyAsync(dev->data(), init->data(), init->itemsize(),
                                     cudaMemcpyHostToDevice, current_stream()));
    // Pageable host memory: the copy has been staged when the call returns.
    init = dev;
  }
  const int64_t nd = out->dim(), id = init->dim();
  DimVector strides(nd, 0);
  for (int64_t i = 0; i < id; ++i) {
    const int64_t d = nd - id + i;
    strides[d] = init->size(i) == 1 ? 0 : init->stride(i);
  }
  linalg::strided_copy(out->data(), init->data(), init->itemsize(), static_cast<int>(nd),
                       out->sizes().data(), strides.data(), current_stream(), op);
}

// ---- cuBLAS -----------------------------------------------------------------------------------

struct Gemm {
  Mat A, B;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  int64_t m = 0, n = 0, k = 0, ldc = 0;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};

void check_cublas_sizes(const char* op, const Gemm& g) {
  EMBER_CHECK(g.m <= kCublasMax && g.n <= kCublasMax && g.k <= kCublasMax && g.ldc <= kCublasMax &&
                  g.batch <= kCublasMax,
              op, ": matrix dimensions (", g.m, ", ", g.n, ", ", g.k, ") or batch count ", g.batch,
              " exceed the 32-bit sizes supported by cuBLAS (at most ", kCublasMax, ")");
}

// C (row-major m x n, leading dimension ldc) = alpha * A @ B + beta * C for every batch, as the
// column-major C^T = B^T @ A^T.
void run_gemm(const char* op, ScalarType dt, const Gemm& g, double alpha, double beta) {
  check_cublas_sizes(op, g);
  cudaDataType_t type;
  cublasComputeType_t compute;
  switch (dt) {
    case ScalarType::Float32:
      type = CUDA_R_32F;
      compute = allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      break;
    case ScalarType::Float64:
      type = CUDA_R_64F;
      compute = CUBLAS_COMPUTE_64F;
      break;
    case ScalarType::Float16:
      type = CUDA_R_16F;
      compute = CUBLAS_COMPUTE_32F;
      break;
    case ScalarType::BFloat16:
      type = CUDA_R_16BF;
      compute = CUBLAS_COMPUTE_32F;
      break;
    default:
      EMBER_FAIL(Type, op, ": \"", op, "_cuda\" not implemented for dtype ", dtype_name(dt));
  }
  // Scalars in the compute type (host pointers: the handle's default pointer mode).
  const double alpha_d = alpha, beta_d = beta;
  const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
  const void* pa = dt == ScalarType::Float64 ? static_cast<const void*>(&alpha_d)
                                             : static_cast<const void*>(&alpha_f);
  const void* pb = dt == ScalarType::Float64 ? static_cast<const void*>(&beta_d)
                                             : static_cast<const void*>(&beta_f);
  const cublasOperation_t op_b = g.B.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = g.A.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
  const int lda = static_cast<int>(g.A.ld), ldb = static_cast<int>(g.B.ld);
  const int ldc = static_cast<int>(g.ldc);
  with_cublas([&](cublasHandle_t h) {
    if (g.batch == 1) {
      EMBER_CUBLAS_CHECK(cublasGemmEx(h, op_b, op_a, n, m, k, pa, g.b, type, ldb, g.a, type, lda,
                                      pb, g.c, type, ldc, compute, CUBLAS_GEMM_DEFAULT));
    } else {
      EMBER_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          h, op_b, op_a, n, m, k, pa, g.b, type, ldb, g.stride_b, g.a, type, lda, g.stride_a, pb,
          g.c, type, ldc, g.stride_c, static_cast<int>(g.batch), compute, CUBLAS_GEMM_DEFAULT));
    }
  });
}

// ---- the shared core --------------------------------------------------------------------------

// beta * init + alpha * (a @ b) for a: [batch_a..., M, K], b: [batch_b..., K, N] whose batch dims
// broadcast to `batch` (validated by the caller, as are dtypes and K). `init` (may be null) must
// broadcast to [batch..., M, N]; it is not read when beta == 0. Returns a new contiguous tensor.
Tensor matmul_core(const char* op, const Tensor& a, const Tensor& b, const DimVector& batch,
                   const Tensor& init, const Scalar& beta, const Scalar& alpha) {
  const ScalarType dt = a->dtype();
  const int64_t M = a->size(a->dim() - 2), K = a->size(a->dim() - 1), N = b->size(b->dim() - 1);
  DimVector out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  EMBER_CHECK(static_cast<int64_t>(out_shape.size()) <= linalg::kMaxDims, op,
              ": tensors of more than ", linalg::kMaxDims, " dims are not supported on CUDA");
  DeviceGuard guard(a->device().index);
  Tensor out = ember::empty(out_shape, dt, a->device());
  if (out->numel() == 0) return out;
  if (dt == ScalarType::Bool)
    EMBER_FAIL(Type, op,
               ": not implemented for dtype bool (supported: integer and floating dtypes)");
  const bool use_init = init && beta.to_double() != 0.0;
  cudaStream_t stream = current_stream();
  if (use_init) fill_from(op, out, init);

  int64_t nb = 1;
  for (int64_t s : batch) nb *= s;

  if (!is_floating(dt)) {
    linalg::IntMatmulArgs p;
    p.nbatch = static_cast<int>(batch.size());
    const DimVector sa = batch_strides(a, batch), sb = batch_strides(b, batch);
    for (int64_t d = 0; d < batch.size(); ++d) {
      p.batch[d] = batch[d];
      p.sa[d] = sa[d];
      p.sb[d] = sb[d];
    }
    p.M = M;
    p.N = N;
    p.K = K;
    p.ars = a->stride(a->dim() - 2);
    p.acs = a->stride(a->dim() - 1);
    p.brs = b->stride(b->dim() - 2);
    p.bcs = b->stride(b->dim() - 1);
    p.alpha = alpha.to_int();
    p.beta = use_init ? beta.to_int() : 0;
    p.use_c = use_init;
    linalg::int_matmul(dt, a->data(), b->data(), out->data(), p, out->numel(), stream, op);
    return out;
  }
  EMBER_CHECK(dt == ScalarType::Float32 || dt == ScalarType::Float64 || dt == ScalarType::Float16 ||
                  dt == ScalarType::BFloat16,
              op, ": not implemented on CUDA for dtype ", dtype_name(dt));

  if (K == 0) {  // the product is zero: beta * self, or zeros
    if (use_init)
      linalg::scale_inplace(dt, out->data(), out->numel(), beta.to_double(), stream, op);
    else
      EMBER_CUDA_CHECK(cudaMemsetAsync(out->data(), 0, out->numel() * out->itemsize(), stream));
    return out;
  }

  Gemm g;
  Tensor ac = a, bc = b;
  if (!has_blas_layout(ac, &g.A)) {
    ac = contiguous_copy(op, a);
    has_blas_layout(ac, &g.A);
  }
  if (!has_blas_layout(bc, &g.B)) {
    bc = contiguous_copy(op, b);
    has_blas_layout(bc, &g.B);
  }
  DimVector sa = batch_strides(ac, batch), sb = batch_strides(bc, batch);
  g.m = M;
  g.n = N;
  g.k = K;
  g.ldc = N;
  g.batch = nb;
  g.stride_c = M * N;

  int64_t stride_b = 0, rs = 0;
  const bool b_prog = batch_progression(batch, sb, &stride_b);
  if (nb > 1 && b_prog && stride_b == 0 && !g.A.trans && nb * M <= kCublasMax &&
      fold_rows(batch, sa, M, ac->stride(ac->dim() - 2), K, &rs)) {
    // B shared by every batch and A's batches stacked row-major: one (nb*M) x K matrix.
    g.A = Mat{false, rs};
    g.m = nb * M;
    g.batch = 1;
  } else if (nb > 1) {
    int64_t stride_a = 0;
    if (!batch_progression(batch, sa, &stride_a)) {
      DimVector sizes = batch, strides = sa;
      sizes.push_back(M);
      sizes.push_back(K);
      strides.push_back(ac->stride(ac->dim() - 2));
      strides.push_back(ac->stride(ac->dim() - 1));
      ac = gather(op, ac, sizes, strides);
      has_blas_layout(ac, &g.A);
      stride_a = M * K;
    }
    if (!b_prog) {
      DimVector sizes = batch, strides = sb;
      sizes.push_back(K);
      sizes.push_back(N);
      strides.push_back(bc->stride(bc->dim() - 2));
      strides.push_back(bc->stride(bc->dim() - 1));
      bc = gather(op, bc, sizes, strides);
      has_blas_layout(bc, &g.B);
      stride_b = K * N;
    }
    g.stride_a = stride_a;
    g.stride_b = stride_b;
  }
  g.a = ac->data();
  g.b = bc->data();
  g.c = out->data();
  run_gemm(op, dt, g, alpha.to_double(), use_init ? beta.to_double() : 0.0);
  return out;
}

// Views used to present vectors as matrices (no data moves).
Tensor as_row(const Tensor& v) {  // (K,) -> (1, K)
  return make_view(v, {1, v->size(0)}, {v->size(0) * v->stride(0), v->stride(0)},
                   v->storage_offset());
}
Tensor as_col(const Tensor& v) {  // (K,) -> (K, 1)
  return make_view(v, {v->size(0), 1}, {v->stride(0), 1}, v->storage_offset());
}
Tensor reshaped(const Tensor& contiguous, DimVector sizes) {
  DimVector strides = contiguous_strides(sizes);
  return make_view(contiguous, std::move(sizes), std::move(strides), contiguous->storage_offset());
}

Tensor vector_dot(const char* op, const Tensor& self, const Tensor& other) {
  EMBER_CHECK(self->dim() == 1 && other->dim() == 1, op, ": 1D tensors expected, but got ",
              self->dim(), "D and ", other->dim(), "D tensors");
  EMBER_CHECK(self->dtype() == other->dtype(), op,
              ": expected both vectors to have the same dtype, but got: ",
              ctype_name(self->dtype()), " != ", ctype_name(other->dtype()));
  check_multipliable(op, self, other, self->size(0), other->size(0));
  Tensor r = matmul_core(op, as_row(self), as_col(other), {}, Tensor(), 0, 1);
  return reshaped(r, {});
}

// ---- the ops ----------------------------------------------------------------------------------

Tensor matmul(const Tensor& self, const Tensor& other) {
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
  Tensor r = matmul_core("matmul", a, b, batch, Tensor(), 0, 1);
  DimVector shape = batch;
  if (d1 > 1) shape.push_back(M);
  if (d2 > 1) shape.push_back(N);
  return reshaped(r, shape);
}

Tensor mm(const Tensor& self, const Tensor& mat2) {
  check_dim("mm", "self", self, 2);
  check_dim("mm", "mat2", mat2, 2);
  check_dtypes("mm", "m1", self, "m2", mat2);
  check_multipliable("mm", self, mat2, self->size(1), mat2->size(0));
  return matmul_core("mm", self, mat2, {}, Tensor(), 0, 1);
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

Tensor bmm(const Tensor& self, const Tensor& mat2) {
  check_bmm("bmm", self, mat2);
  return matmul_core("bmm", self, mat2, {self->size(0)}, Tensor(), 0, 1);
}

Tensor mv(const Tensor& self, const Tensor& vec) {
  check_dim("mv", "self", self, 2);
  check_dim("mv", "vec", vec, 1);
  check_dtypes("mv", "mat", self, "vec", vec);
  check_multipliable("mv", self, vec, self->size(1), vec->size(0));
  Tensor r = matmul_core("mv", self, as_col(vec), {}, Tensor(), 0, 1);
  return reshaped(r, {self->size(0)});
}

Tensor dot(const Tensor& self, const Tensor& tensor) { return vector_dot("dot", self, tensor); }

Tensor vdot(const Tensor& self, const Tensor& other) { return vector_dot("vdot", self, other); }

Tensor addmm(const Tensor& self, const Tensor& mat1, const Tensor& mat2, const Scalar& beta,
             const Scalar& alpha) {
  check_dim("addmm", "mat1", mat1, 2);
  check_dim("addmm", "mat2", mat2, 2);
  check_dtypes("addmm", "m1", mat1, "m2", mat2);
  check_dtypes("addmm", "self", self, "mat1", mat1);
  check_multipliable("addmm", mat1, mat2, mat1->size(1), mat2->size(0));
  check_broadcastable_to("addmm", self, {mat1->size(0), mat2->size(1)});
  check_scalars("addmm", self->dtype(), beta, alpha);
  return matmul_core("addmm", mat1, mat2, {}, self, beta, alpha);
}

Tensor addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, const Scalar& beta,
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
  Tensor r = matmul_core("addmv", mat, as_col(vec), {}, init, beta, alpha);
  return reshaped(r, {mat->size(0)});
}

Tensor baddbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
               const Scalar& alpha) {
  check_bmm("baddbmm", batch1, batch2);
  check_dtypes("baddbmm", "self", self, "batch1", batch1);
  check_broadcastable_to("baddbmm", self, {batch1->size(0), batch1->size(1), batch2->size(2)});
  check_scalars("baddbmm", self->dtype(), beta, alpha);
  return matmul_core("baddbmm", batch1, batch2, {batch1->size(0)}, self, beta, alpha);
}

Tensor addbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
              const Scalar& alpha) {
  check_bmm("addbmm", batch1, batch2);
  check_dtypes("addbmm", "self", self, "batch1", batch1);
  const int64_t B = batch1->size(0), M = batch1->size(1), K = batch1->size(2), N = batch2->size(2);
  check_broadcastable_to("addbmm", self, {M, N});
  check_scalars("addbmm", self->dtype(), beta, alpha);
  // sum_b batch1[b] @ batch2[b] == (M, B*K) @ (B*K, N): lay batch1 out as (M, B, K).
  DeviceGuard guard(batch1->device().index);
  Tensor b1 = gather("addbmm", batch1, {M, B, K},
                     {batch1->stride(1), batch1->stride(0), batch1->stride(2)});
  Tensor b2 = batch2->is_contiguous() ? batch2 : contiguous_copy("addbmm", batch2);
  return matmul_core("addbmm", reshaped(b1, {M, B * K}), reshaped(b2, {B * K, N}), {}, self, beta,
                     alpha);
}

void register_linalg() {
  register_kernel("matmul", DeviceType::CUDA, &matmul);
  register_kernel("mm", DeviceType::CUDA, &mm);
  register_kernel("bmm", DeviceType::CUDA, &bmm);
  register_kernel("mv", DeviceType::CUDA, &mv);
  register_kernel("dot", DeviceType::CUDA, &dot);
  register_kernel("vdot", DeviceType::CUDA, &vdot);
  register_kernel("addmm", DeviceType::CUDA, &addmm);
  register_kernel("addmv", DeviceType::CUDA, &addmv);
  register_kernel("baddbmm", DeviceType::CUDA, &baddbmm);
  register_kernel("addbmm", DeviceType::CUDA, &addbmm);
}

}  // namespace

// ---- the GEMM of the other kernel files (gemm.h) ------------------------------------------

void gemm_rowmajor(const char* op, ScalarType ab, ScalarType c, int64_t m, int64_t n, int64_t k,
                   double alpha, const GemmOperand& a, const GemmOperand& b, double beta,
                   void* c_data, int64_t ldc, int64_t stride_c, int64_t batch) {
  EMBER_CHECK(m <= kCublasMax && n <= kCublasMax && k <= kCublasMax && a.ld <= kCublasMax &&
                  b.ld <= kCublasMax && ldc <= kCublasMax && batch <= kCublasMax,
              op, ": matrix dimensions (", m, ", ", n, ", ", k, ") or batch count ", batch,
              " exceed the 32-bit sizes supported by cuBLAS (at most ", kCublasMax, ")");
  EMBER_CHECK(m > 0 && n > 0 && k > 0 && batch > 0, op, ": internal error: empty GEMM (", m, ", ",
              n, ", ", k, ") x ", batch);
  cudaDataType_t ab_type, c_type;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  switch (ab) {
    case ScalarType::Float32:
      ab_type = CUDA_R_32F;
      compute = allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
      break;
    case ScalarType::Float64:
      ab_type = CUDA_R_64F;
      compute = CUBLAS_COMPUTE_64F;
      break;
    case ScalarType::Float16:
      ab_type = CUDA_R_16F;
      break;
    case ScalarType::BFloat16:
      ab_type = CUDA_R_16BF;
      break;
    default:
      EMBER_FAIL(Type, op, ": no CUDA matrix product for dtype ", dtype_name(ab));
  }
  if (c == ab) {
    c_type = ab_type;
  } else {
    EMBER_CHECK(
        c == ScalarType::Float32 && (ab == ScalarType::Float16 || ab == ScalarType::BFloat16), op,
        ": internal error: GEMM of ", dtype_name(ab), " into ", dtype_name(c));
    c_type = CUDA_R_32F;
  }
  const double alpha_d = alpha, beta_d = beta;
  const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
  const bool dbl = ab == ScalarType::Float64;
  const void* pa = dbl ? static_cast<const void*>(&alpha_d) : static_cast<const void*>(&alpha_f);
  const void* pb = dbl ? static_cast<const void*>(&beta_d) : static_cast<const void*>(&beta_f);
  // Column-major C^T (n x m) = B^T @ A^T: a row-major operand is its transpose as cuBLAS reads it.
  const cublasOperation_t op_b = b.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  with_cublas([&](cublasHandle_t h) {
    if (batch == 1) {
      EMBER_CUBLAS_CHECK(cublasGemmEx(
          h, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), pa, b.data,
          ab_type, static_cast<int>(b.ld), a.data, ab_type, static_cast<int>(a.ld), pb, c_data,
          c_type, static_cast<int>(ldc), compute, CUBLAS_GEMM_DEFAULT));
    } else {
      EMBER_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          h, op_b, op_a, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), pa, b.data,
          ab_type, static_cast<int>(b.ld), b.stride, a.data, ab_type, static_cast<int>(a.ld),
          a.stride, pb, c_data, c_type, static_cast<int>(ldc), stride_c, static_cast<int>(batch),
          compute, CUBLAS_GEMM_DEFAULT));
    }
  });
}

void bind_linalg(pybind11::module_& m) {
  m.def("_get_allow_tf32", &allow_tf32,
        "Whether float32 matrix products may use TF32 tensor cores (off by default).");
  m.def("_set_allow_tf32", &set_allow_tf32, pybind11::arg("on"),
        "Allows or forbids TF32 tensor cores in float32 matrix products.");
}

}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::register_linalg)
