// CPU kernels of embedding (and its dense backward), dropout, and the fused multi-tensor
// optimizer updates (SGD, Adam/AdamW) that step every tensor of a param group in one call.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dispatch.h"
#include "core/generator.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/cpu/nn_vec.h"
#include "kernels/embedding_rules.h"
#include "kernels/optim_rules.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace cpu {

// ---- embedding ------------------------------------------------------------------------------

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx,
                 bool scale_grad_by_freq, bool sparse) {
  (void)padding_idx;
  (void)scale_grad_by_freq;
  nn::check_embedding(weight, indices, sparse);
  const int64_t V = weight->size(0), D = weight->size(1), n = indices->numel();
  Tensor idx = nn::contig(indices, ScalarType::Int64);
  Tensor w = nn::contig(weight);
  DimVector shape = indices->sizes();
  shape.push_back(D);
  Tensor out = ember::empty(shape, w->dtype(), w->device());
  const int64_t* pi = idx->data_as<int64_t>();
  const int64_t isz = w->itemsize();
  const char* src = w->data();
  char* dst = out->data();
  parallel_for(0, n, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(D, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t i = b; i < e; ++i) {
                   const int64_t k = pi[i];
                   EMBER_CHECK_KIND(k >= 0 && k < V, Index,
                                    nn::embedding_index_error("embedding", k, V));
                   std::memcpy(dst + i * D * isz, src + k * D * isz, D * isz);
                 }
               });
  return out;
}

Tensor embedding_dense_backward(const Tensor& grad_output, const Tensor& indices,
                                int64_t num_weights, int64_t padding_idx, bool scale_grad_by_freq) {
  const char* op = "embedding_backward";
  nn::check_embedding_indices(op, indices);
  const int64_t n = indices->numel();
  const int64_t D = nn::embedding_grad_dim(op, grad_output, indices);
  Tensor idx = nn::contig(indices, ScalarType::Int64);
  Tensor g = nn::contig(grad_output);
  Tensor gw = ember::empty({num_weights, D}, g->dtype(), g->device());
  const int64_t* pi = idx->data_as<int64_t>();
  std::vector<int64_t> counts;
  if (scale_grad_by_freq) {
    counts.assign(num_weights, 0);
    for (int64_t i = 0; i < n; ++i)
      if (pi[i] >= 0 && pi[i] < num_weights) counts[pi[i]]++;
  }
  for (int64_t i = 0; i < n; ++i)
    EMBER_CHECK_KIND(pi[i] >= 0 && pi[i] < num_weights, Index,
                     nn::embedding_index_error(op, pi[i], num_weights));
  EMBER_DISPATCH_FLOAT(g->dtype(), op, [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* pg = g->data_as<T>();
    T* po = gw->data_as<T>();
    std::fill(po, po + gw->numel(), T(0));
    // Threads own disjoint column ranges, so rows hit by several indices need no locking.
    parallel_for(0, D, std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(n, 1)),
                 [&](int64_t c0, int64_t c1) {
                   for (int64_t i = 0; i < n; ++i) {
                     const int64_t k = pi[i];
                     if (k == padding_idx) continue;
                     const A s = scale_grad_by_freq ? A(1) / static_cast<A>(counts[k]) : A(1);
                     T* row = po + k * D;
                     const T* gr = pg + i * D;
                     for (int64_t c = c0; c < c1; ++c)
                       row[c] = static_cast<T>(static_cast<A>(row[c]) + static_cast<A>(gr[c]) * s);
                   }
                 });
  });
  return gw;
}

// ---- dropout --------------------------------------------------------------------------------

std::tuple<Tensor, Tensor> native_dropout(const Tensor& input, double p, bool train) {
  EMBER_CHECK_KIND(p >= 0.0 && p <= 1.0, Value,
                   "dropout: probability has to be between 0 and 1, but got ", p);
  EMBER_CHECK_KIND(is_floating(input->dtype()), DtypeNotImplemented,
                   "dropout: expected a floating-point input, got ", dtype_name(input->dtype()));
  Tensor x = nn::contig(input);
  Tensor mask = ember::empty(x->sizes(), ScalarType::Bool, x->device());
  Tensor out = ember::empty(x->sizes(), x->dtype(), x->device());
  if (!train || p == 0.0) {
    std::fill(mask->data_as<bool>(), mask->data_as<bool>() + mask->numel(), true);
    copy_into(out, x);
    return {out, mask};
  }
  // Element i is kept when the top 24 bits of word i % 4 of counter (base + i / 4), read as a
  // uniform in [0, 1), fall below 1 - p: the mask and the output in one pass, the Philox words
  // made a tile at a time by the vectorized generator.
  const int64_t n = x->numel(), nblocks = (n + 3) / 4;
  Generator& gen = default_generator();
  const uint64_t base = gen.reserve(static_cast<uint64_t>(nblocks)), seed = gen.seed();
  const double keep = 1.0 - p;
  const uint32_t thresh = static_cast<uint32_t>(std::ceil(keep * 16777216.0));  // u < keep
  const double scale = p >= 1.0 ? 0.0 : 1.0 / keep;
  EMBER_DISPATCH_FLOAT(x->dtype(), "dropout", [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    const T* px = x->data_as<T>();
    bool* pm = mask->data_as<bool>();
    T* po = out->data_as<T>();
    const A s = static_cast<A>(scale);
    parallel_for(0, nblocks, kPointwiseGrain / 4, [&](int64_t b0, int64_t b1) {
      constexpr int64_t kTile = 256;
      uint32_t w[4 * kTile];
      for (int64_t tb = b0; tb < b1; tb += kTile) {
        const int64_t nt = std::min(kTile, b1 - tb);
        nn::vec::philox_blocks(seed, base + static_cast<uint64_t>(tb), nt, w);
        const int64_t i0 = tb * 4, cnt = std::min(nt * 4, n - i0);
        // Two loops with local copies: a store through bool* may alias anything, which would
        // keep the output loop scalar (and its select a branch).
        const uint32_t th = thresh;
        const A sc = s;
        const T* xi = px + i0;
        T* oi = po + i0;
        for (int64_t j = 0; j < cnt; ++j) {
          const A v = static_cast<A>(xi[j]) * sc;  // read unconditionally: the select can blend
          oi[j] = static_cast<T>((w[j] >> 8) < th ? v : A(0));
        }
        bool* mi = pm + i0;
        for (int64_t j = 0; j < cnt; ++j) mi[j] = (w[j] >> 8) < th;
      }
    });
  });
  return {out, mask};
}

// ---- fused optimizer updates ----------------------------------------------------------------

namespace {

// A tensor to update in place: worked on directly when contiguous, else through a contiguous
// copy written back at the end.
struct Operand {
  Tensor target, work;
  Operand(const Tensor& t, const char* op) : target(t), work(nn::contig(t)) {
    t->check_writable(op);  // before the update writes into it
  }
  void finish() const {
    if (work != target) copy_into(target, work);
    target->bump_version();
  }
};

// Runs body(tensor index, begin, end) over chunks of every tensor, chunks spread over the pool
// (small tensors are whole chunks, so a group of many small params parallelizes too).
template <class F>
void for_chunks(const std::vector<int64_t>& sizes, const F& body) {
  constexpr int64_t kChunk = 1 << 16;
  std::vector<std::tuple<int64_t, int64_t, int64_t>> tasks;
  int64_t total = 0;
  for (size_t t = 0; t < sizes.size(); ++t) {
    for (int64_t b = 0; b < sizes[t]; b += kChunk)
      tasks.emplace_back(t, b, std::min(sizes[t], b + kChunk));
    total += sizes[t];
  }
  const int64_t grain = total < 2 * kPointwiseGrain ? static_cast<int64_t>(tasks.size()) : 1;
  parallel_for(0, tasks.size(), std::max<int64_t>(grain, 1), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      auto [t, lo, hi] = tasks[i];
      body(t, lo, hi);
    }
  });
}

}  // namespace

void _fused_sgd_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& momentum_buffer_list, double weight_decay,
                 double momentum, double lr, double dampening, bool nesterov, bool maximize,
                 bool is_first_step) {
  const char* op = "_fused_sgd_";
  if (params.empty()) return;
  nn::check_fused_sgd(op, params, grads, momentum_buffer_list, momentum, dampening, nesterov);
  std::vector<Operand> ps, bufs;
  std::vector<Tensor> gs;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < params.size(); ++i) {
    ps.emplace_back(params[i], op);
    gs.push_back(nn::contig(grads[i]));
    if (momentum != 0.0) bufs.emplace_back(momentum_buffer_list[i], op);
    sizes.push_back(params[i]->numel());
  }
  EMBER_DISPATCH_BLAS(params[0]->dtype(), op, [&] {
    using T = scalar_t;
    const T wd = static_cast<T>(weight_decay), mom = static_cast<T>(momentum);
    const T damp1 = static_cast<T>(1.0 - dampening), neg_lr = static_cast<T>(-lr);
    for_chunks(sizes, [&](int64_t t, int64_t b, int64_t e) {
      T* p = ps[t].work->data_as<T>();
      const T* g = gs[t]->data_as<T>();
      T* buf = momentum != 0.0 ? bufs[t].work->data_as<T>() : nullptr;
      if constexpr (std::is_same_v<T, float>) {  // vectorized (nn_vec.h), same rounding
        auto f32 = [](T v) { return static_cast<float>(v); };
        const nn::vec::SgdScalars sc{
            f32(wd),  f32(mom), f32(damp1),   f32(neg_lr), weight_decay != 0.0,
            nesterov, maximize, is_first_step};
        // T is float here; the casts only let the branch compile for double.
        auto f = [](auto* q) { return reinterpret_cast<float*>(const_cast<T*>(q)); };
        nn::vec::sgd(f(p) + b, f(g) + b, buf ? f(buf) + b : nullptr, e - b, sc);
        return;
      }
      for (int64_t i = b; i < e; ++i) {
        T d = maximize ? -g[i] : g[i];
        if (weight_decay != 0.0) d = d + wd * p[i];
        if (buf) {
          buf[i] = is_first_step ? d : buf[i] * mom + damp1 * d;
          d = nesterov ? d + mom * buf[i] : buf[i];
        }
        p[i] = p[i] + neg_lr * d;
      }
    });
  });
  for (auto& o : ps) o.finish();
  for (auto& o : bufs) o.finish();
}

void _fused_adam_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                  const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                  const std::vector<Tensor>& max_exp_avg_sqs,
                  const std::vector<Tensor>& state_steps, double lr, double beta1, double beta2,
                  double weight_decay, double eps, bool amsgrad, bool maximize, bool decoupled) {
  const char* op = decoupled ? "_fused_adamw_" : "_fused_adam_";
  if (params.empty()) return;
  nn::check_fused_adam(op, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
                       amsgrad);
  // Steps: incremented here, then read (as torch.optim's single-tensor Adam does).
  std::vector<double> steps;
  for (size_t i = 0; i < state_steps.size(); ++i) {
    const Tensor& s = state_steps[i];
    nn::check_state_step(op, s, i);
    double v = load_scalar(s->data(), s->dtype()).to_double() + 1.0;
    store_scalar(Scalar(v), s->dtype(), s->data());
    s->bump_version();
    steps.push_back(v);
  }
  std::vector<Operand> ps, m1, m2, mx;
  std::vector<Tensor> gs;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < params.size(); ++i) {
    ps.emplace_back(params[i], op);
    m1.emplace_back(exp_avgs[i], op);
    m2.emplace_back(exp_avg_sqs[i], op);
    if (amsgrad) mx.emplace_back(max_exp_avg_sqs[i], op);
    gs.push_back(nn::contig(grads[i]));
    sizes.push_back(params[i]->numel());
  }
  EMBER_DISPATCH_BLAS(params[0]->dtype(), op, [&] {
    using T = scalar_t;
    // Scalars rounded to T as the tensor ops of the single-tensor path do.
    const T one_minus_b1 = static_cast<T>(1.0 - beta1), b2 = static_cast<T>(beta2);
    const T one_minus_b2 = static_cast<T>(1.0 - beta2), wd = static_cast<T>(weight_decay);
    const T decay = static_cast<T>(1.0 - lr * weight_decay), teps = static_cast<T>(eps);
    const bool lerp_low = one_minus_b1 < T(0.5);
    const T lerp_rest = T(1) - one_minus_b1;
    for_chunks(sizes, [&](int64_t t, int64_t b, int64_t e) {
      const double step = steps[t];
      const double bc1 = 1.0 - std::pow(beta1, step);
      const double bc2 = 1.0 - std::pow(beta2, step);
      const T neg_step_size = static_cast<T>(-(lr / bc1));
      const T bc2_sqrt = static_cast<T>(std::sqrt(bc2));
      T* p = ps[t].work->data_as<T>();
      const T* g = gs[t]->data_as<T>();
      T* ea = m1[t].work->data_as<T>();
      T* es = m2[t].work->data_as<T>();
      T* em = amsgrad ? mx[t].work->data_as<T>() : nullptr;
      if constexpr (std::is_same_v<T, float>) {  // vectorized (nn_vec.h), same rounding
        auto f32 = [](T v) { return static_cast<float>(v); };
        const nn::vec::AdamScalars sc{
            f32(one_minus_b1), f32(lerp_rest), f32(b2),   f32(one_minus_b2),
            f32(wd),           f32(decay),     f32(teps), f32(neg_step_size),
            f32(bc2_sqrt),     lerp_low,       maximize,  weight_decay != 0.0,
            decoupled};
        // T is float here; the casts only let the branch compile for double.
        auto f = [](auto* q) { return reinterpret_cast<float*>(const_cast<T*>(q)); };
        nn::vec::adam(f(p) + b, f(g) + b, f(ea) + b, f(es) + b, em ? f(em) + b : nullptr, e - b,
                      sc);
        return;
      }
      for (int64_t i = b; i < e; ++i) {
        T gr = maximize ? -g[i] : g[i];
        if (weight_decay != 0.0) {
          if (decoupled)
            p[i] = p[i] * decay;
          else
            gr = gr + wd * p[i];
        }
        // lerp(exp_avg, grad, 1 - beta1), with lerp's two forms.
        ea[i] = lerp_low ? ea[i] + one_minus_b1 * (gr - ea[i]) : gr - (gr - ea[i]) * lerp_rest;
        es[i] = es[i] * b2 + one_minus_b2 * gr * gr;
        T v = es[i];
        if (em) {
          em[i] = (em[i] != em[i]) ? em[i] : (v != v ? v : (v > em[i] ? v : em[i]));
          v = em[i];
        }
        const T denom = std::sqrt(v) / bc2_sqrt + teps;
        p[i] = p[i] + neg_step_size * ea[i] / denom;
      }
    });
  });
  for (auto* list : {&ps, &m1, &m2, &mx})
    for (auto& o : *list) o.finish();
}

}  // namespace cpu
}  // namespace ember
