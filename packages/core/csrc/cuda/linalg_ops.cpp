// CUDA matrix products (ops/linalg.yaml) through cuBLAS: mm, bmm, matmul, mv, dot, vdot, addmm,
// addmv, baddbmm, addbmm, with the CPU kernels' semantics: the op bodies, checks and messages are
// shared (kernels/linalg_rules.h), beta == 0 never reads `self`, K == 0 gives beta * self (or
// zeros).
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
#include "kernels/linalg_rules.h"
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

constexpr int64_t kCublasMax = ember::linalg::kBlasIntMax;

using ember::linalg::batch_strides;
using ember::linalg::fold_rows;
using ember::linalg::Mat;

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

// ---- layouts ----------------------------------------------------------------------------------

bool has_blas_layout(const Tensor& t, Mat* m) {
  const int64_t d = t->dim();
  return ember::linalg::blas_layout(t->size(d - 2), t->size(d - 1), t->stride(d - 2),
                                    t->stride(d - 1), m);
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

// A contiguous copy of t's elements laid out over `sizes` read with `strides` (elements).
Tensor gather(const char* op, const Tensor& t, const DimVector& sizes, const DimVector& strides) {
  Tensor out = ember::empty(sizes, t->dtype(), t->device());
  linalg::strided_copy(out->data(), t->data(), t->itemsize(), static_cast<int>(sizes.size()),
                       sizes.data(), strides.data(), current_stream(), op);
  return out;
}

// A contiguous [batch..., rows, cols] copy of t's matrices, read with batch strides s.
Tensor expand_batches(const char* op, const Tensor& t, const DimVector& batch, const DimVector& s) {
  DimVector sizes = batch, strides = s;
  sizes.push_back(t->size(t->dim() - 2));
  sizes.push_back(t->size(t->dim() - 1));
  strides.push_back(t->stride(t->dim() - 2));
  strides.push_back(t->stride(t->dim() - 1));
  return gather(op, t, sizes, strides);
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

// C (row-major m x n, leading dimension ldc) = alpha * A @ B + beta * C for every batch.
void run_gemm(const char* op, ScalarType dt, const Gemm& g, double alpha, double beta) {
  gemm_rowmajor(op, dt, dt, g.m, g.n, g.k, alpha, GemmOperand{g.a, g.A.ld, g.stride_a, g.A.trans},
                GemmOperand{g.b, g.B.ld, g.stride_b, g.B.trans}, beta, g.c, g.ldc, g.stride_c,
                g.batch);
}

// ---- the shared core --------------------------------------------------------------------------

// The product core of linalg::MatmulOps (contract in kernels/linalg_rules.h), on cuBLAS.
Tensor matmul_core(const char* op, const Tensor& a, const Tensor& b, const DimVector& batch,
                   const Tensor& init, const Scalar& beta, const Scalar& alpha) {
  const ScalarType dt = a->dtype();
  const int64_t M = a->size(a->dim() - 2), K = a->size(a->dim() - 1), N = b->size(b->dim() - 1);
  const DimVector out_shape = ember::linalg::product_shape(batch, M, N);
  EMBER_CHECK(static_cast<int64_t>(out_shape.size()) <= linalg::kMaxDims, op,
              ": tensors of more than ", linalg::kMaxDims, " dims are not supported on CUDA");
  DeviceGuard guard(a->device().index);
  Tensor out = ember::empty(out_shape, dt, a->device());
  if (out->numel() == 0) return out;
  if (dt == ScalarType::Bool)
    EMBER_FAIL(DtypeNotImplemented, op,
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
      ac = expand_batches(op, ac, batch, sa);
      has_blas_layout(ac, &g.A);
      stride_a = M * K;
    }
    if (!b_prog) {
      bc = expand_batches(op, bc, batch, sb);
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

// gather() on t's device and its stream (matmul_core's callers hold no DeviceGuard).
Tensor gather_on_device(const char* op, const Tensor& t, const DimVector& sizes,
                        const DimVector& strides) {
  DeviceGuard guard(t->device().index);
  return gather(op, t, sizes, strides);
}

// The ops' bodies (checks, shapes, views) are shared with the CPU; only the product is cuBLAS's.
struct CudaMatmul {
  static constexpr auto core = &matmul_core;
  static constexpr auto gather = &gather_on_device;
};
using Ops = ember::linalg::MatmulOps<CudaMatmul>;

void register_linalg() {
  register_kernel("matmul", DeviceType::CUDA, &Ops::matmul);
  register_kernel("mm", DeviceType::CUDA, &Ops::mm);
  register_kernel("bmm", DeviceType::CUDA, &Ops::bmm);
  register_kernel("mv", DeviceType::CUDA, &Ops::mv);
  register_kernel("dot", DeviceType::CUDA, &Ops::dot);
  register_kernel("vdot", DeviceType::CUDA, &Ops::vdot);
  register_kernel("addmm", DeviceType::CUDA, &Ops::addmm);
  register_kernel("addmv", DeviceType::CUDA, &Ops::addmv);
  register_kernel("baddbmm", DeviceType::CUDA, &Ops::baddbmm);
  register_kernel("addbmm", DeviceType::CUDA, &Ops::addbmm);
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
