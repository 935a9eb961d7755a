// Device-neutral checks of the fused attention ops (_scaled_dot_product_fused_attention and its
// backward in ops/nn.yaml), shared by the CPU kernels (kernels/cpu/nn_attention.cpp) and the CUDA
// ones (cuda/nn_attention.cu), so both raise the same errors: dims, dtypes shared by query, key
// and value, their shapes, the mask's dtype and broadcast, and the shapes of the backward's saved
// tensors. Which dtypes a device computes in is its own check.
#pragma once
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"
#include "ops.h"

namespace ember {
namespace nn {

// B slices (the batch dims flattened) of L queries and S keys of width E, values of width Ev.
struct AttentionDims {
  int64_t B, L, S, E, Ev;
};

// query (..., L, E), key (..., S, E), value (..., S, Ev) of one dtype and the same batch dims;
// mask (if any) bool or of the query's dtype, broadcasting to (..., L, S), not with is_causal.
// mask is replaced by its expansion to (..., L, S).
inline AttentionDims check_attention(const char* op, const Tensor& q, const Tensor& k,
                                     const Tensor& v, Tensor& mask, bool is_causal) {
  EMBER_CHECK(q->dim() >= 2 && k->dim() == q->dim() && v->dim() == q->dim(), op,
              ": expected query, key and value of the same number of dims (at least 2), got ",
              shape_str(q->sizes()), ", ", shape_str(k->sizes()), " and ", shape_str(v->sizes()));
  EMBER_CHECK(k->dtype() == q->dtype() && v->dtype() == q->dtype(), op,
              ": query, key and value must share a dtype");
  const int64_t d = q->dim();
  for (int64_t i = 0; i < d - 2; ++i)
    EMBER_CHECK(k->size(i) == q->size(i) && v->size(i) == q->size(i), op,
                ": query, key and value must share their batch dims, got ", shape_str(q->sizes()),
                ", ", shape_str(k->sizes()), " and ", shape_str(v->sizes()));
  AttentionDims a;
  a.L = q->size(d - 2);
  a.E = q->size(d - 1);
  a.S = k->size(d - 2);
  a.Ev = v->size(d - 1);
  EMBER_CHECK(k->size(d - 1) == a.E && v->size(d - 2) == a.S, op,
              ": key must be (..., S, E) and value (..., S, Ev) for query (..., L, E), got ",
              shape_str(q->sizes()), ", ", shape_str(k->sizes()), " and ", shape_str(v->sizes()));
  EMBER_CHECK_KIND(!(is_causal && mask), Value, op,
                   ": pass either attn_mask or is_causal=True, not both");
  a.B = 1;
  for (int64_t i = 0; i < d - 2; ++i) a.B *= q->size(i);
  if (mask) {
    EMBER_CHECK(mask->dtype() == ScalarType::Bool || mask->dtype() == q->dtype(), op,
                ": attn_mask must be bool or of the query's dtype (", dtype_name(q->dtype()),
                "), got ", dtype_name(mask->dtype()));
    DimVector full = q->sizes();
    full[d - 1] = a.S;
    EMBER_CHECK(mask->dim() <= d, op, ": attn_mask of shape ", shape_str(mask->sizes()),
                " does not broadcast to ", shape_str(full));
    for (int64_t i = 0; i < mask->dim(); ++i) {
      const int64_t ms = mask->size(mask->dim() - 1 - i), fs = full[d - 1 - i];
      EMBER_CHECK(ms == fs || ms == 1, op, ": attn_mask of shape ", shape_str(mask->sizes()),
                  " does not broadcast to ", shape_str(full));
    }
    mask = dispatch::expand(mask, full);
  }
  return a;
}

// The output's shape (..., L, Ev) and the log-sum-exp's (..., L) for query q.
inline DimVector attention_out_shape(const Tensor& q, const AttentionDims& a) {
  DimVector s = q->sizes();
  s[s.size() - 1] = a.Ev;
  return s;
}
inline DimVector attention_lse_shape(const Tensor& q) {
  DimVector s = q->sizes();
  s.pop_back();
  return s;
}

// The backward's grad_out and out of the output's shape, logsumexp of the log-sum-exp's.
inline void check_attention_saved(const char* op, const Tensor& q, const AttentionDims& a,
                                  const Tensor& grad_out, const Tensor& out,
                                  const Tensor& logsumexp) {
  const DimVector osz = attention_out_shape(q, a), lsz = attention_lse_shape(q);
  EMBER_CHECK(grad_out->sizes() == osz && out->sizes() == osz && logsumexp->sizes() == lsz, op,
              ": expected grad_out and out of shape ", shape_str(osz), " and logsumexp of ",
              shape_str(lsz), ", got ", shape_str(grad_out->sizes()), ", ", shape_str(out->sizes()),
              " and ", shape_str(logsumexp->sizes()));
}

}  // namespace nn
}  // namespace ember
