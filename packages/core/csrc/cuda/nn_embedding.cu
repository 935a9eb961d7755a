// CUDA kernels of embedding (and its dense backward) and of native_dropout (semantics:
// kernels/cpu/nn_misc.cpp).
//   - embedding copies rows of weight (raw elements, any dtype); indices out of range are
//     reported through a device flag read back after the launch (a sync point) and raised as the
//     CPU's IndexError.
//   - embedding_dense_backward adds grad_output rows into the (num_weights, dim) gradient with
//     atomicAdd, in float32 for the 16-bit floats (converted at the end) and in the dtype itself
//     for float32 / float64; scale_grad_by_freq divides by per-row index counts (atomic counts).
//   - native_dropout draws its bool mask with the device Philox (random_ops.h) and applies it.
#include "core/dispatch.h"
#include "cuda/cuda_registry.h"
#include "cuda/nn_common.cuh"
#include "cuda/random_ops.h"
#include "kernels/embedding_rules.h"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {
namespace {

using nnk::acc_t;
using nnk::ErrorSlot;

// ---- embedding --------------------------------------------------------------------------------

// The CPU kernel's IndexError for an index out of [0, V).
checks::Describe out_of_range(const char* op, int64_t V) {
  return [op, V](int64_t v) {
    return checks::Report{ErrorKind::Index, nn::embedding_index_error(op, v, V)};
  };
}

template <class U>
__global__ void embedding_kernel(const U* w, const int64_t* idx, U* out, int64_t n, int64_t D,
                                 int64_t V, ErrorSlot* err) {
  const int64_t total = n * D;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e / D, d = e - i * D;
    const int64_t k = idx[i];
    if (k < 0 || k >= V) {
      if (d == 0) nnk::report_error(err, k);
      out[e] = U(0);
    } else {
      out[e] = w[k * D + d];
    }
  }
}

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx,
                 bool scale_grad_by_freq, bool sparse) {
  (void)padding_idx;
  (void)scale_grad_by_freq;
  const char* op = "embedding";
  // weight on a CUDA device, indices on the same one (after the sparse check, as before).
  nn::check_embedding(weight, indices, sparse,
                      [](const Tensor& w, const Tensor& t, const char* o, const char* what) {
                        ix::check_cuda(w, o, "weight");
                        nnk::check_device(w, t, o, what);
                      });
  const int64_t V = weight->size(0), D = weight->size(1), n = indices->numel();
  DeviceGuard guard(ix::device_index(weight));
  Tensor idx = nnk::contig(indices, ScalarType::Int64, op);
  Tensor w = nnk::contig(weight, op);
  DimVector shape = indices->sizes();
  shape.push_back(D);
  Tensor out = empty(shape, w->dtype(), w->device());
  if (n * D == 0) return out;
  checks::DeviceCheck check = nnk::error_check(w, out_of_range("embedding", V));
  ix::by_itemsize(w->itemsize(), [&](auto tag) {
    using U = decltype(tag);
    embedding_kernel<U><<<blocks_for(n * D, 4), kBlockSize, 0, ix::stream_of(w)>>>(
        reinterpret_cast<const U*>(w->data()), idx->data_as<int64_t>(),
        reinterpret_cast<U*>(out->data()), n, D, V, check.slot());
    check_launch(op);
  });
  check.done();
  return out;
}

// Reports indices out of [0, num_weights); counts[k] += 1 per index (counts may be null).
__global__ void embedding_count_kernel(const int64_t* idx, int64_t n, int64_t num_weights,
                                       int* counts, ErrorSlot* err) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = idx[i];
    if (k < 0 || k >= num_weights) {
      nnk::report_error(err, k);
    } else if (counts) {
      atomicAdd(counts + k, 1);
    }
  }
}

template <class T>
__global__ void embedding_backward_kernel(const T* g, const int64_t* idx, const int* counts,
                                          acc_t<T>* out, int64_t n, int64_t D, int64_t num_weights,
                                          int64_t padding_idx) {
  using A = acc_t<T>;
  const int64_t total = n * D;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e / D, d = e - i * D;
    const int64_t k = idx[i];
    if (k == padding_idx || k < 0 || k >= num_weights) continue;
    A v = to_op<T>(g[e]);
    if (counts) v = v * (A(1) / static_cast<A>(counts[k]));
    atomicAdd(out + k * D + d, v);
  }
}

Tensor embedding_dense_backward(const Tensor& grad_output, const Tensor& indices,
                                int64_t num_weights, int64_t padding_idx, bool scale_grad_by_freq) {
  const char* op = "embedding_backward";
  ix::check_cuda(grad_output, op, "grad_output");
  nnk::check_device(grad_output, indices, op, "indices");
  nn::check_embedding_indices(op, indices);
  EMBER_CHECK_KIND(is_floating(grad_output->dtype()), Type, op,
                   ": expected a floating-point grad_output, got ",
                   dtype_name(grad_output->dtype()));
  const int64_t n = indices->numel();
  const int64_t D = nn::embedding_grad_dim(op, grad_output, indices);
  DeviceGuard guard(ix::device_index(grad_output));
  const Device dev = grad_output->device();
  Tensor idx = nnk::contig(indices, ScalarType::Int64, op);
  Tensor g = nnk::contig(grad_output, op);
  const ScalarType dt = g->dtype();
  const ScalarType at = dt == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
  Tensor acc = empty(DimVector{num_weights, D}, at, dev);
  ix::zero(acc);
  if (n > 0) {
    checks::DeviceCheck check = nnk::error_check(g, out_of_range(op, num_weights));
    Tensor counts;
    if (scale_grad_by_freq) {
      counts = empty(DimVector{std::max<int64_t>(num_weights, 1)}, ScalarType::Int32, dev);
      ix::zero(counts);
    }
    cudaStream_t st = ix::stream_of(g);
    embedding_count_kernel<<<blocks_for(n), kBlockSize, 0, st>>>(
        idx->data_as<int64_t>(), n, num_weights, counts ? counts->data_as<int>() : nullptr,
        check.slot());
    check_launch(op);
    if (D > 0) {
      EMBER_DISPATCH_FLOAT(dt, op, [&] {
        using T = scalar_t;
        using A = acc_t<T>;
        embedding_backward_kernel<T><<<blocks_for(n * D, 4), kBlockSize, 0, st>>>(
            g->data_as<T>(), idx->data_as<int64_t>(), counts ? counts->data_as<int>() : nullptr,
            acc->data_as<A>(), n, D, num_weights, padding_idx);
        check_launch(op);
      });
    }
    check.done();
  }
  if (dt == at) return acc;
  return nnk::contig(acc, dt, op);
}

// ---- dropout ----------------------------------------------------------------------------------

template <class T>
__global__ void dropout_kernel(const T* x, const bool* mask, T* out, int64_t n, double scale) {
  using A = acc_t<T>;
  const A s = static_cast<A>(scale);
  const uint8_t* m = reinterpret_cast<const uint8_t*>(mask);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = m[i] ? from_op<T>(to_op<T>(x[i]) * s) : from_op<T>(A(0));
}

std::tuple<Tensor, Tensor> native_dropout(const Tensor& input, double p, bool train) {
  const char* op = "dropout";
  EMBER_CHECK_KIND(p >= 0.0 && p <= 1.0, Value,
                   "dropout: probability has to be between 0 and 1, but got ", p);
  ix::check_cuda(input, op, "input");
  EMBER_CHECK_KIND(is_floating(input->dtype()), Type,
                   "dropout: expected a floating-point input, got ", dtype_name(input->dtype()));
  DeviceGuard guard(ix::device_index(input));
  Tensor x = nnk::contig(input, op);
  Tensor mask = empty(x->sizes(), ScalarType::Bool, x->device());
  Tensor out = empty(x->sizes(), x->dtype(), x->device());
  const int64_t n = x->numel();
  if (n == 0) return {out, mask};
  if (!train || p == 0.0) {
    EMBER_CUDA_CHECK(cudaMemsetAsync(mask->data(), 1, n, ix::stream_of(x)));
    ix::copy(out, x, op);
    return {out, mask};
  }
  bernoulli_scalar_(mask, 1.0 - p, nullptr);
  const double scale = p >= 1.0 ? 0.0 : 1.0 / (1.0 - p);
  EMBER_DISPATCH_FLOAT(x->dtype(), op, [&] {
    using T = scalar_t;
    dropout_kernel<T><<<blocks_for(n, 4), kBlockSize, 0, ix::stream_of(x)>>>(
        x->data_as<T>(), mask->data_as<bool>(), out->data_as<T>(), n, scale);
    check_launch(op);
  });
  return {out, mask};
}

void register_embedding_dropout() {
  register_kernel("embedding", DeviceType::CUDA, &embedding);
  register_kernel("embedding_dense_backward", DeviceType::CUDA, &embedding_dense_backward);
  register_kernel("native_dropout", DeviceType::CUDA, &native_dropout);
}

}  // namespace
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::register_embedding_dropout)
