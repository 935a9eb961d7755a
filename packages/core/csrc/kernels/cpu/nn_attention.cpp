// CPU kernels of the fused scaled dot product attention (F.scaled_dot_product_attention's path
// for float32/float64 CPU tensors without dropout): the forward keeps only the log-sum-exp of
// each query row, the backward recomputes the probabilities from it. Queries are taken in blocks
// of kBlockQ rows; a block's scores are one product with the keys it may see (a causal block
// stops at its last row's key, so the masked upper triangle is never computed), the softmax and
// the product with the values follow while the block is in cache. Each (batch..., head) slice is
// independent: the slices (and, forward, the query blocks) are spread over ember's pool, every
// product running on its calling thread.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "core/dispatch.h"
#include "kernels/attention_rules.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/cpu/nn_vec.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

constexpr int64_t kBlockQ = 32;

// Whether t's rows can be handed to BLAS as they are: unit stride along the last dim and a row
// stride that does not overlap the rows.
bool blas_rows(const Tensor& t) {
  const int64_t d = t->dim();
  if (t->size(d - 1) > 1 && t->stride(d - 1) != 1) return false;
  return t->size(d - 2) <= 1 || t->stride(d - 2) >= std::max<int64_t>(t->size(d - 1), 1);
}

Tensor rows_ready(const Tensor& t) { return blas_rows(t) ? t : nn::contig(t); }

// The element offset of each flat batch index of t (the dims before the last `inner`).
std::vector<int64_t> batch_offsets(const Tensor& t, int64_t inner) {
  const int64_t nb = t->dim() - inner;
  int64_t count = 1;
  for (int64_t d = 0; d < nb; ++d) count *= t->size(d);
  std::vector<int64_t> off(count, 0);
  for (int64_t i = 0; i < count; ++i) {
    int64_t rem = i, o = 0;
    for (int64_t d = nb - 1; d >= 0; --d) {
      o += (rem % t->size(d)) * t->stride(d);
      rem /= t->size(d);
    }
    off[i] = o;
  }
  return off;
}

// One attention problem: B slices of L queries and S keys of width E, values of width Ev.
struct Attn {
  int64_t B, L, S, E, Ev;
  bool causal;
  double scale;
  std::vector<int64_t> q_off, k_off, v_off, m_off;
  int64_t q_ld, k_ld, v_ld;
  // Mask (expanded to (batch..., L, S)): bool (keep where true) or additive of the query's dtype.
  const uint8_t* mask_bool = nullptr;
  const void* mask_add = nullptr;
  int64_t m_row = 0, m_col = 0;
  // float32 products on conv_gemm's packed kernel (where OpenBLAS runs narrower kernels).
  bool packed = false;

  // The number of keys rows [i0, i1) may see.
  int64_t keys_for(int64_t i1) const { return causal ? std::min(S, i1) : S; }
};

// Validates the arguments (attention_rules.h) and lays out the problem; q/k/v/mask are replaced
// by BLAS-ready views (mask: its expansion to (..., L, S)).
Attn plan(const char* op, Tensor& q, Tensor& k, Tensor& v, Tensor& mask, bool is_causal,
          double scale) {
  const nn::AttentionDims dims = nn::check_attention(op, q, k, v, mask, is_causal);
  const int64_t d = q->dim();
  Attn a;
  a.B = dims.B;
  a.L = dims.L;
  a.S = dims.S;
  a.E = dims.E;
  a.Ev = dims.Ev;
  a.causal = is_causal;
  a.scale = scale;
  a.packed = q->dtype() == ScalarType::Float32 && packs<float>();
  q = rows_ready(q);
  k = rows_ready(k);
  v = rows_ready(v);
  a.q_off = batch_offsets(q, 2);
  a.k_off = batch_offsets(k, 2);
  a.v_off = batch_offsets(v, 2);
  a.q_ld = q->stride(d - 2);
  a.k_ld = k->stride(d - 2);
  a.v_ld = v->stride(d - 2);
  if (mask) {
    a.m_off = batch_offsets(mask, 2);
    a.m_row = mask->stride(d - 2);
    a.m_col = mask->stride(d - 1);
    if (mask->dtype() == ScalarType::Bool)
      a.mask_bool = mask->data_as<uint8_t>();
    else
      a.mask_add = mask->data();
  }
  return a;
}

// C (M x N, leading dimension ldc) = op(A) @ op(B), or C += that with accumulate; op as
// gemm_rowmajor's (lda/ldb the stored leading dimensions). With a.packed: both operands packed for
// conv_gemm (a transposed B as the packing of B^T, whose 16-row blocks are B's 16-column panels).
template <class T>
void product(const Attn& at, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
             const T* a, int64_t lda, const T* b, int64_t ldb, bool accumulate, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (at.packed && M >= 8 && N >= 8 && K >= 8) {
      const PackedA pa(a, trans_a ? 1 : lda, trans_a ? lda : 1, M, K);
      if (!trans_b) {
        conv_gemm(pa, N, b, ldb, c, ldc, accumulate);
        return;
      }
      const PackedA pb(b, ldb, 1, N, K);
      for (int64_t j = 0; j < N; j += 16)
        conv_gemm(pa, std::min<int64_t>(16, N - j), pb.data.data() + j * K, 16, c + j, ldc,
                  accumulate);
      return;
    }
  }
  gemm_rowmajor<T>(trans_a, trans_b, M, N, K, T(1), a, lda, b, ldb, accumulate ? T(1) : T(0), c,
                   ldc);
}

// Scores of query rows [i0, i1) of slice b against keys [0, n): s (ld n) = scale * q k^T, then
// the mask: -inf where a causal or bool mask hides the key, + the additive mask.
template <class T>
void block_scores(const Attn& a, int64_t b, int64_t i0, int64_t i1, int64_t n, const T* q,
                  const T* k, T* s) {
  const int64_t m = i1 - i0;
  if (a.E == 0) {
    std::fill(s, s + m * n, T(0));
  } else {
    product<T>(a, false, true, m, n, a.E, q + a.q_off[b] + i0 * a.q_ld, a.q_ld, k + a.k_off[b],
               a.k_ld, false, s, n);
    const T sc = static_cast<T>(a.scale);
    for (int64_t j = 0; j < m * n; ++j) s[j] *= sc;
  }
  const T ninf = -std::numeric_limits<T>::infinity();
  if (a.causal) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t j = i + 1; j < n; ++j) s[(i - i0) * n + j] = ninf;
  } else if (a.mask_bool) {
    for (int64_t i = i0; i < i1; ++i) {
      const uint8_t* mr = a.mask_bool + a.m_off[b] + i * a.m_row;
      T* sr = s + (i - i0) * n;
      for (int64_t j = 0; j < n; ++j)
        if (!mr[j * a.m_col]) sr[j] = ninf;
    }
  } else if (a.mask_add) {
    const T* mk = static_cast<const T*>(a.mask_add);
    for (int64_t i = i0; i < i1; ++i) {
      const T* mr = mk + a.m_off[b] + i * a.m_row;
      T* sr = s + (i - i0) * n;
      for (int64_t j = 0; j < n; ++j) sr[j] += mr[j * a.m_col];
    }
  }
}

// Row reductions written lane by lane (kLanes independent accumulators) so that they vectorize
// without reassociating a float sum.
constexpr int kLanes = 16;

// The largest element of a row; NaN elements are skipped (they reach the output through the
// exponentials), except that a row of only NaN and -inf gives NaN, not -inf (a masked row).
template <class T>
T row_max(const T* p, int64_t n) {
  T acc[kLanes];
  std::fill(acc, acc + kLanes, -std::numeric_limits<T>::infinity());
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] = p[j + l] > acc[l] ? p[j + l] : acc[l];
  for (; j < n; ++j) acc[0] = p[j] > acc[0] ? p[j] : acc[0];
  T m = acc[0];
  for (int l = 1; l < kLanes; ++l) m = acc[l] > m ? acc[l] : m;
  if (m == -std::numeric_limits<T>::infinity())
    for (int64_t k = 0; k < n; ++k)
      if (std::isnan(p[k])) return p[k];
  return m;
}

template <class T>
T row_dot(const T* a, const T* b, int64_t n) {
  T acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += a[j + l] * b[j + l];
  for (; j < n; ++j) acc[0] += a[j] * b[j];
  T s = 0;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

template <class T>
T row_sum(const T* p, int64_t n) {
  T acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += p[j + l];
  for (; j < n; ++j) acc[0] += p[j];
  T s = 0;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

// p[j] = exp(p[j] - shift) over a row of n.
template <class T>
void exp_shifted(T* p, int64_t n, T shift) {
  for (int64_t j = 0; j < n; ++j) p[j] -= shift;
  if constexpr (std::is_same_v<T, float>) {
    nn::vec::exp(p, p, n);
  } else {
    for (int64_t j = 0; j < n; ++j) p[j] = std::exp(p[j]);
  }
}

template <class T>
void forward(const Attn& a, const T* q, const T* k, const T* v, T* out, T* lse) {
  const int64_t nblk = (a.L + kBlockQ - 1) / kBlockQ;
  const int64_t work = a.S * (a.E + a.Ev) * std::min(a.L, kBlockQ);
  parallel_for(0, a.B * nblk, std::max<int64_t>(1, 32768 / std::max<int64_t>(work, 1)),
               [&](int64_t w0, int64_t w1) {
                 std::vector<T> s(static_cast<size_t>(kBlockQ * a.S));
                 for (int64_t w = w0; w < w1; ++w) {
                   const int64_t b = w / nblk, i0 = (w % nblk) * kBlockQ;
                   const int64_t i1 = std::min(a.L, i0 + kBlockQ), n = a.keys_for(i1);
                   T* ob = out + (b * a.L + i0) * a.Ev;
                   T* lb = lse + b * a.L + i0;
                   block_scores<T>(a, b, i0, i1, n, q, k, s.data());
                   for (int64_t i = 0; i < i1 - i0; ++i) {
                     T* p = s.data() + i * n;
                     const T mx = row_max(p, n);
                     if (mx == -std::numeric_limits<T>::infinity()) {
                       // Every key hidden: the row attends to nothing (output 0, as torch).
                       std::fill(p, p + n, T(0));
                       lb[i] = mx;
                       continue;
                     }
                     exp_shifted(p, n, mx);
                     const T sum = row_sum(p, n);
                     const T inv = T(1) / sum;
                     for (int64_t j = 0; j < n; ++j) p[j] *= inv;
                     lb[i] = mx + std::log(sum);
                   }
                   product<T>(a, false, false, i1 - i0, a.Ev, n, s.data(), n, v + a.v_off[b],
                              a.v_ld, false, ob, a.Ev);
                 }
               });
}

template <class T>
void backward(const Attn& a, const T* go, const T* q, const T* k, const T* v, const T* out,
              const T* lse, T* gq, T* gk, T* gv) {
  const int64_t work = a.L * a.S * (a.E + a.Ev);
  parallel_for(0, a.B, std::max<int64_t>(1, 32768 / std::max<int64_t>(work, 1)),
               [&](int64_t b0, int64_t b1) {
                 std::vector<T> p(static_cast<size_t>(kBlockQ * a.S)), dp(p.size()), dsum(kBlockQ);
                 for (int64_t b = b0; b < b1; ++b) {
                   const T* gob = go + b * a.L * a.Ev;
                   const T* ob = out + b * a.L * a.Ev;
                   const T* qb = q + a.q_off[b];
                   T* gkb = gk + b * a.S * a.E;
                   T* gvb = gv + b * a.S * a.Ev;
                   std::fill(gkb, gkb + a.S * a.E, T(0));
                   std::fill(gvb, gvb + a.S * a.Ev, T(0));
                   for (int64_t i0 = 0; i0 < a.L; i0 += kBlockQ) {
                     const int64_t i1 = std::min(a.L, i0 + kBlockQ), m = i1 - i0,
                                   n = a.keys_for(i1);
                     T* gqb = gq + (b * a.L + i0) * a.E;
                     // P, recomputed from the scores and the saved log-sum-exp.
                     block_scores<T>(a, b, i0, i1, n, q, k, p.data());
                     for (int64_t i = 0; i < m; ++i) {
                       T* pr = p.data() + i * n;
                       const T l = lse[b * a.L + i0 + i];
                       if (l == -std::numeric_limits<T>::infinity()) {
                         std::fill(pr, pr + n, T(0));
                       } else {
                         exp_shifted(pr, n, l);
                       }
                       // D_i = sum_e dO[i, e] O[i, e]
                       dsum[i] = row_dot(gob + (i0 + i) * a.Ev, ob + (i0 + i) * a.Ev, a.Ev);
                     }
                     // dV[:n] += P^T dO
                     product<T>(a, true, false, n, a.Ev, m, p.data(), n, gob + i0 * a.Ev, a.Ev,
                                true, gvb, a.Ev);
                     // dP = dO V[:n]^T, then scale dS = scale P (dP - D)
                     product<T>(a, false, true, m, n, a.Ev, gob + i0 * a.Ev, a.Ev, v + a.v_off[b],
                                a.v_ld, false, dp.data(), n);
                     const T sc = static_cast<T>(a.scale);
                     for (int64_t i = 0; i < m; ++i) {
                       const T* pr = p.data() + i * n;
                       T* dr = dp.data() + i * n;
                       const T di = dsum[i];
                       for (int64_t j = 0; j < n; ++j) dr[j] = pr[j] * (dr[j] - di) * sc;
                     }
                     // dQ = scale dS K[:n], dK[:n] += scale dS^T Q (scale is in dS now)
                     if (a.E == 0) continue;  // no dQ or dK elements (dV above still counts)
                     product<T>(a, false, false, m, a.E, n, dp.data(), n, k + a.k_off[b], a.k_ld,
                                false, gqb, a.E);
                     product<T>(a, true, false, n, a.E, m, dp.data(), n, qb + i0 * a.q_ld, a.q_ld,
                                true, gkb, a.E);
                   }
                 }
               });
}

}  // namespace

std::tuple<Tensor, Tensor> _scaled_dot_product_fused_attention(const std::vector<Tensor>& qkv,
                                                               const Tensor& attn_mask,
                                                               bool is_causal, double scale) {
  const char* op = "_scaled_dot_product_fused_attention";
  EMBER_CHECK(qkv.size() == 3, op, ": expected [query, key, value], got ", qkv.size(), " tensors");
  Tensor q = qkv[0], k = qkv[1], v = qkv[2], mask = attn_mask;
  const Attn a = plan(op, q, k, v, mask, is_causal, scale);
  const nn::AttentionDims dims{a.B, a.L, a.S, a.E, a.Ev};
  Tensor out = ember::empty(nn::attention_out_shape(q, dims), q->dtype(), q->device());
  Tensor lse = ember::empty(nn::attention_lse_shape(q), q->dtype(), q->device());
  if (out->numel() == 0) return {out, lse};
  EMBER_CHECK(a.S > 0, op, ": expected at least one key");
  SerialBlasScope serial;
  EMBER_DISPATCH_BLAS(q->dtype(), op, [&] {
    using T = scalar_t;
    forward<T>(a, q->data_as<T>(), k->data_as<T>(), v->data_as<T>(), out->data_as<T>(),
               lse->data_as<T>());
  });
  return {out, lse};
}

std::tuple<Tensor, Tensor, Tensor> _scaled_dot_product_fused_attention_backward(
    const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value,
    const Tensor& attn_mask, const Tensor& out, const Tensor& logsumexp, bool is_causal,
    double scale) {
  const char* op = "_scaled_dot_product_fused_attention_backward";
  Tensor q = query, k = key, v = value, mask = attn_mask;
  const Attn a = plan(op, q, k, v, mask, is_causal, scale);
  nn::check_attention_saved(op, q, {a.B, a.L, a.S, a.E, a.Ev}, grad_out, out, logsumexp);
  const ScalarType dt = q->dtype();
  Tensor go = nn::contig(grad_out, dt), o = nn::contig(out, dt), l = nn::contig(logsumexp, dt);
  Tensor gq = ember::empty(q->sizes(), dt, q->device());
  Tensor gk = ember::empty(k->sizes(), dt, k->device());
  Tensor gv = ember::empty(v->sizes(), dt, v->device());
  // E == 0 still has a dV: the scores are 0 (+ mask), P is not zero.
  if (a.B == 0 || a.S == 0 || a.L == 0 || a.Ev == 0) {
    dispatch::zero_(gq);
    dispatch::zero_(gk);
    dispatch::zero_(gv);
    return {gq, gk, gv};
  }
  SerialBlasScope serial;
  EMBER_DISPATCH_BLAS(dt, op, [&] {
    using T = scalar_t;
    backward<T>(a, go->data_as<T>(), q->data_as<T>(), k->data_as<T>(), v->data_as<T>(),
                o->data_as<T>(), l->data_as<T>(), gq->data_as<T>(), gk->data_as<T>(),
                gv->data_as<T>());
  });
  return {gq, gk, gv};
}

}  // namespace cpu
}  // namespace ember
