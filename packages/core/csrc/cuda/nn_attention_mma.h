// The mma.sync path of the fused attention (nn_attention_mma.cu): the calls the tensor-core path
// takes (sdpa_tc_eligible: float16 / bfloat16 on sm_80+, head dims E == Ev in {32, 64, 96, 128},
// no attn_mask), run by kernels on raw PTX mma.sync / ldmatrix / cp.async with the scores kept
// in registers. The contract is nn_attention_tc.h's exactly (outputs, float32 natural-log
// logsumexp, gradient layouts, operands read in place by tc_view's rule).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/tensor.h"

namespace ember {
namespace cuda {

// The private switch ember._C_cuda._set_sdpa_mma / _get_sdpa_mma (on by default): off, the
// tensor-core calls take the WMMA kernels of nn_attention_tc.cu instead (for A/B comparisons).
bool sdpa_mma();
void set_sdpa_mma(bool on);

// As sdpa_tc_forward / sdpa_tc_backward (nn_attention_tc.h), for calls sdpa_tc_eligible takes.
void sdpa_mma_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, double scale,
                      int64_t B, int64_t L, int64_t S, Tensor& out, Tensor& lse,
                      cudaStream_t stream);
void sdpa_mma_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& go,
                       const Tensor& lse, const Tensor& dsum, bool causal, double scale, int64_t B,
                       int64_t L, int64_t S, Tensor& gq, Tensor& gk, Tensor& gv,
                       cudaStream_t stream);

}  // namespace cuda
}  // namespace ember
