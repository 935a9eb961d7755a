// The tensor-core path of the fused attention (nn_attention_tc.cu), which nn_attention.cu routes
// to: float16 / bfloat16 query, key and value on an sm_80+ device, head dims E == Ev in
// {32, 64, 96, 128}, no attn_mask (is_causal either way). Everything else keeps the CUDA-core
// kernels of nn_attention.cu. The outputs follow that file's contract exactly: out (B, L, Ev)
// contiguous in the inputs' dtype, logsumexp (B, L) float32 (natural log); the gradients
// contiguous in q's, k's and v's shapes.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/tensor.h"

namespace ember {
namespace cuda {

// The private switch ember._C_cuda._set_sdpa_tensor_cores / _get_sdpa_tensor_cores (on by
// default): off, every call takes the CUDA-core kernels (for A/B comparisons).
bool sdpa_tensor_cores();
void set_sdpa_tensor_cores(bool on);

// Whether the tensor-core kernels take q (..., L, E) against values of width Ev without a mask
// (mask: the expanded attn_mask, empty for none) on q's device.
bool sdpa_tc_eligible(const Tensor& q, const Tensor& mask, int64_t E, int64_t Ev);

// The forward: fills out (contiguous (B, L, E)) and lse (contiguous float32 (B, L)) of the B
// slices of q (L x E), k (S x E), v (S x E) on `stream`. S >= 1, L >= 1.
void sdpa_tc_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                     int64_t B, int64_t L, int64_t S, Tensor& out, Tensor& lse,
                     cudaStream_t stream);

// The backward after D = rowsum(dO * O): go contiguous (B, L, E) in q's dtype, lse and dsum
// contiguous float32 (B, L); fills gq, gk, gv (contiguous, q's / k's / v's shapes).
void sdpa_tc_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& go,
                      const Tensor& lse, const Tensor& dsum, bool causal, double scale, int64_t B,
                      int64_t L, int64_t S, Tensor& gq, Tensor& gk, Tensor& gv,
                      cudaStream_t stream);

}  // namespace cuda
}  // namespace ember
