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

constexpr int kTcMaxBatchDims = 8;

// A (batch..., rows, D) operand whose last dim is contiguous: the batch dims coalesced (offsets
// in elements), rows `row` elements apart. Every offset is a multiple of 8 elements and the data
// 16-byte aligned, so rows load in 16-byte chunks. (Shared with nn_attention_mma.cu.)
struct TcOperand {
  const void* p = nullptr;
  int nd = 0;
  int64_t size[kTcMaxBatchDims] = {};
  int64_t stride[kTcMaxBatchDims] = {};
  int64_t row = 0;
};

// One problem: B slices of L queries and S keys, head dim D (a template argument of the kernels).
struct TcProblem {
  int64_t B = 0, L = 0, S = 0;
  bool causal = false;
  float scale = 1.f;       // scale (dK, dQ)
  float scale_log2 = 1.f;  // scale * log2(e) (the scores in base 2)
  TcOperand q, k, v;
};

// The problem's sizes and float scales (operands not set).
TcProblem tc_problem(int64_t B, int64_t L, int64_t S, bool causal, double scale);

// The TcOperand of t (read in place: last dim contiguous, other strides multiples of 8
// elements, data 16-byte aligned), replacing t by a fresh contiguous copy when it is not one.
TcOperand tc_view(Tensor& t, const char* op);

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
