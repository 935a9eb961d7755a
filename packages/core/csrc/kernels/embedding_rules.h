// Device-neutral checks of embedding and its backward (ops/nn.yaml), shared by the CPU kernels
// (kernels/cpu/nn_misc.cpp) and the CUDA ones (cuda/nn_embedding.cu).
#pragma once
#include <string>

#include "core/tensor.h"
#include "kernels/nn_rules.h"

namespace ember {
namespace nn {

// Indices are int64 or int32, as torch's: a float / bool tensor is a TypeError, another integer
// dtype (int8, uint8, int16) PyTorch's RuntimeError.
inline void check_embedding_indices(const char* op, const Tensor& indices) {
  const ScalarType dt = indices->dtype();
  EMBER_CHECK_KIND(is_integral(dt, false), Type, op, ": expected integer indices, got ",
                   dtype_name(dt));
  EMBER_CHECK(dt == ScalarType::Int64 || dt == ScalarType::Int32, op,
              ": expected integer indices of dtype int64 or int32, got ", dtype_name(dt));
}

// embedding: a dense lookup of integer indices in a 2-D weight (num_embeddings, dim).
inline void check_embedding(const Tensor& weight, const Tensor& indices, bool sparse,
                            DeviceCheck device_check = nullptr) {
  EMBER_CHECK_KIND(!sparse, NotImplemented,
                   "embedding: sparse gradients are not supported (use sparse=False)");
  check_device(device_check, weight, indices, "embedding", "indices");
  EMBER_CHECK(weight->dim() == 2, "embedding: expected a 2-D weight (num_embeddings, dim), got ",
              shape_str(weight->sizes()));
  check_embedding_indices("embedding", indices);
}

// embedding_backward: grad_output is (*indices.shape, dim); returns dim.
inline int64_t embedding_grad_dim(const char* op, const Tensor& grad_output,
                                  const Tensor& indices) {
  const int64_t n = indices->numel();
  EMBER_CHECK(grad_output->dim() == indices->dim() + 1 &&
                  grad_output->numel() == n * grad_output->size(grad_output->dim() - 1),
              op, ": grad_output of shape ", shape_str(grad_output->sizes()),
              " doesn't match indices of shape ", shape_str(indices->sizes()));
  return grad_output->size(grad_output->dim() - 1);
}

// The IndexError message of an index k outside [0, V) (the CPU and CUDA kernels').
inline std::string embedding_index_error(const char* op, int64_t k, int64_t V) {
  return std::string(op) + ": index " + std::to_string(k) + " is out of range for " +
         std::to_string(V) + " embeddings (indices must lie in [0, " + std::to_string(V) + "))";
}

}  // namespace nn
}  // namespace ember
