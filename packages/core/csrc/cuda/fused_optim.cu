// CUDA kernels of the fused optimizer steps _fused_sgd_ and _fused_adam_ (AdamW: decoupled=True;
// _fused_adamw_ is a composite over it), with the CPU kernels' checks and update math
// (kernels/cpu/nn_misc.cpp, nn_vec_sgd.inc, nn_vec_adam.inc). Multi-tensor: one launch updates
// every tensor of the list. The host describes the tensors (pointers, sizes, per-tensor bias
// corrections) and cuts them into chunks; that table goes to the device with one copy and each
// block of the launch updates one chunk. Every product, sum, quotient and square root is
// explicitly rounded (__fmul_rn and friends, never contracted into an FMA), in the order of the
// CPU kernels, so the GPU's parameters match the CPU's bit for bit in float32 and float64.
// Adam's step counters may live on the CPU (updated on the host, as the CPU kernel does) or on
// the device (updated by a small kernel before the step, which also computes the corrections).
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "core/dispatch.h"
#include "cuda/cuda_registry.h"
#include "cuda/device_types.cuh"
#include "cuda/index_common.cuh"
#include "kernels/optim_rules.h"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {
namespace optim {

constexpr int64_t kChunk = int64_t(1) << 15;  // elements per block
constexpr int kMaxOperands = 5;               // param, grad, and up to three state tensors

// One tensor of the list. neg_step / bc2_sqrt: Adam's -(lr / bias_correction1) and
// sqrt(bias_correction2), already rounded to the param dtype (written on the host, or by
// adam_steps_kernel for a step counter on the device: step != 0).
struct TensorMeta {
  uint64_t ptr[kMaxOperands];
  int64_t n;
  double neg_step;
  double bc2_sqrt;
  uint64_t step;      // device address of the step counter, 0 when it is on the host
  int64_t step_code;  // its dtype: 0 float32, 1 float64, 2 int64, 3 int32
};

struct Chunk {
  int64_t tensor, begin, end;
};

// Rounded arithmetic of the param dtype.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ float sqrt_rn(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ double div_rn(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ double sqrt_rn(double a) { return __dsqrt_rn(a); }

template <class T>
struct SgdArgs {
  T wd, mom, damp1, neg_lr;
  bool weight_decay, momentum, nesterov, maximize, first_step;
};

template <class T>
__global__ void sgd_kernel(const TensorMeta* __restrict__ metas, const Chunk* __restrict__ chunks,
                           SgdArgs<T> s) {
  const Chunk c = chunks[blockIdx.x];
  const TensorMeta& m = metas[c.tensor];
  T* p = reinterpret_cast<T*>(m.ptr[0]);
  const T* g = reinterpret_cast<const T*>(m.ptr[1]);
  T* buf = reinterpret_cast<T*>(m.ptr[2]);
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) {
    T d = s.maximize ? -g[i] : g[i];
    const T pv = p[i];
    if (s.weight_decay) d = add_rn(d, mul_rn(s.wd, pv));
    if (s.momentum) {
      const T b = s.first_step ? d : add_rn(mul_rn(buf[i], s.mom), mul_rn(s.damp1, d));
      buf[i] = b;
      d = s.nesterov ? add_rn(d, mul_rn(s.mom, b)) : b;
    }
    p[i] = add_rn(pv, mul_rn(s.neg_lr, d));
  }
}

template <class T>
struct AdamArgs {
  T one_minus_b1, lerp_rest, b2, one_minus_b2, wd, decay, eps;
  bool lerp_low, maximize, amsgrad;
  int wd_mode;  // 0 none, 1 L2 (added to the gradient), 2 decoupled (AdamW)
};

template <class T>
__global__ void adam_kernel(const TensorMeta* __restrict__ metas, const Chunk* __restrict__ chunks,
                            AdamArgs<T> s) {
  const Chunk c = chunks[blockIdx.x];
  const TensorMeta& m = metas[c.tensor];
  T* p = reinterpret_cast<T*>(m.ptr[0]);
  const T* g = reinterpret_cast<const T*>(m.ptr[1]);
  T* ea = reinterpret_cast<T*>(m.ptr[2]);
  T* es = reinterpret_cast<T*>(m.ptr[3]);
  T* em = reinterpret_cast<T*>(m.ptr[4]);
  const T nss = static_cast<T>(m.neg_step), bc2s = static_cast<T>(m.bc2_sqrt);
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) {
    T gr = s.maximize ? -g[i] : g[i];
    T pv = p[i];
    if (s.wd_mode == 2) pv = mul_rn(pv, s.decay);
    if (s.wd_mode == 1) gr = add_rn(gr, mul_rn(s.wd, pv));
    // lerp(exp_avg, grad, 1 - beta1), with lerp's two forms.
    const T e0 = ea[i];
    const T mv = s.lerp_low ? add_rn(e0, mul_rn(s.one_minus_b1, sub_rn(gr, e0)))
                            : sub_rn(gr, mul_rn(sub_rn(gr, e0), s.lerp_rest));
    ea[i] = mv;
    T v = add_rn(mul_rn(es[i], s.b2), mul_rn(mul_rn(s.one_minus_b2, gr), gr));
    es[i] = v;
    if (s.amsgrad) {
      const T mx = em[i];
      const T nm = (mx != mx) ? mx : (v != v ? v : (v > mx ? v : mx));
      em[i] = nm;
      v = nm;
    }
    const T denom = add_rn(div_rn(sqrt_rn(v), bc2s), s.eps);
    p[i] = add_rn(pv, div_rn(mul_rn(nss, mv), denom));
  }
}

// Device step counters: step += 1, then the bias corrections of that step (rounded to T).
template <class T>
__global__ void adam_steps_kernel(TensorMeta* metas, int64_t n, double lr, double beta1,
                                  double beta2) {
  const int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (t >= n || metas[t].step == 0) return;
  double step = 0.0;
  void* sp = reinterpret_cast<void*>(metas[t].step);
  switch (metas[t].step_code) {
    case 0: {
      float* f = static_cast<float*>(sp);
      *f = static_cast<float>(static_cast<double>(*f) + 1.0);
      step = *f;
      break;
    }
    case 1: {
      double* f = static_cast<double*>(sp);
      *f = *f + 1.0;
      step = *f;
      break;
    }
    case 2: {
      int64_t* f = static_cast<int64_t*>(sp);
      *f = static_cast<int64_t>(static_cast<double>(*f) + 1.0);
      step = static_cast<double>(*f);
      break;
    }
    default: {
      int32_t* f = static_cast<int32_t*>(sp);
      *f = static_cast<int32_t>(static_cast<double>(*f) + 1.0);
      step = static_cast<double>(*f);
      break;
    }
  }
  const double bc1 = 1.0 - pow(beta1, step);
  const double bc2 = 1.0 - pow(beta2, step);
  metas[t].neg_step = static_cast<double>(static_cast<T>(-(lr / bc1)));
  metas[t].bc2_sqrt = static_cast<double>(static_cast<T>(sqrt(bc2)));
}

// ---- host side --------------------------------------------------------------------------------

// A tensor updated in place: worked on directly when contiguous, else through a contiguous copy
// written back at the end.
struct Operand {
  Tensor target, work;
  Operand(const Tensor& t, const char* op) : target(t), work(ix::contiguous(t, op)) {}
  void finish(const char* op) const {
    if (work != target) ix::copy(target, work, op);
    target->bump_version();
  }
};

// Copies the tensor table and its chunks to the device (one stream-ordered copy from pageable
// memory, staged before the call returns) and launches launch(metas, chunks, nchunks).
template <class F>
void run_chunks(const char* op, Device device, std::vector<TensorMeta>& metas, bool device_steps,
                const F& launch, const std::function<void(TensorMeta*)>& prep) {
  std::vector<Chunk> chunks;
  for (size_t t = 0; t < metas.size(); ++t)
    for (int64_t b = 0; b < metas[t].n; b += kChunk)
      chunks.push_back(Chunk{static_cast<int64_t>(t), b, std::min(metas[t].n, b + kChunk)});
  if (chunks.empty() && !device_steps) return;
  const size_t meta_bytes = metas.size() * sizeof(TensorMeta);
  const size_t bytes = meta_bytes + chunks.size() * sizeof(Chunk);
  std::vector<char> host(bytes);
  std::memcpy(host.data(), metas.data(), meta_bytes);
  if (!chunks.empty())
    std::memcpy(host.data() + meta_bytes, chunks.data(), chunks.size() * sizeof(Chunk));
  Tensor dev = empty(DimVector{static_cast<int64_t>(bytes)}, ScalarType::UInt8, device);
  EMBER_CUDA_CHECK(
      cudaMemcpyAsync(dev->data(), host.data(), bytes, cudaMemcpyHostToDevice, current_stream()));
  auto* dmetas = reinterpret_cast<TensorMeta*>(dev->data());
  auto* dchunks = reinterpret_cast<Chunk*>(static_cast<char*>(dev->data()) + meta_bytes);
  if (device_steps) prep(dmetas);
  if (chunks.empty()) return;
  EMBER_CHECK(chunks.size() < (size_t(1) << 31), op, ": too many chunks (", chunks.size(), ")");
  launch(dmetas, dchunks, static_cast<unsigned>(chunks.size()));
}

void _fused_sgd_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                 const std::vector<Tensor>& momentum_buffer_list, double weight_decay,
                 double momentum, double lr, double dampening, bool nesterov, bool maximize,
                 bool is_first_step) {
  const char* op = "_fused_sgd_";
  if (params.empty()) return;
  nn::check_fused_sgd(op, params, grads, momentum_buffer_list, momentum, dampening, nesterov,
                      &ix::check_same_device);
  DeviceGuard guard(ix::device_index(params[0]));
  std::vector<Operand> ps, bufs;
  std::vector<Tensor> gs;
  std::vector<TensorMeta> metas(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    ps.emplace_back(params[i], op);
    gs.push_back(ix::contiguous(grads[i], op));
    if (momentum != 0.0) bufs.emplace_back(momentum_buffer_list[i], op);
    TensorMeta& m = metas[i];
    std::memset(&m, 0, sizeof(m));
    m.ptr[0] = reinterpret_cast<uint64_t>(ps[i].work->data());
    m.ptr[1] = reinterpret_cast<uint64_t>(gs[i]->data());
    if (momentum != 0.0) m.ptr[2] = reinterpret_cast<uint64_t>(bufs[i].work->data());
    m.n = params[i]->numel();
  }
  const ScalarType dt = params[0]->dtype();
  auto go = [&](auto tag) {
    using T = decltype(tag);
    SgdArgs<T> s{static_cast<T>(weight_decay),
                 static_cast<T>(momentum),
                 static_cast<T>(1.0 - dampening),
                 static_cast<T>(-lr),
                 weight_decay != 0.0,
                 momentum != 0.0,
                 nesterov,
                 maximize,
                 is_first_step};
    run_chunks(
        op, params[0]->device(), metas, false,
        [&](const TensorMeta* dm, const Chunk* dc, unsigned nchunks) {
          sgd_kernel<T><<<nchunks, kBlockSize, 0, current_stream()>>>(dm, dc, s);
          check_launch(op);
        },
        [](TensorMeta*) {});
  };
  if (dt == ScalarType::Float64)
    go(double());
  else
    go(float());
  for (auto& o : ps) o.finish(op);
  for (auto& o : bufs) o.finish(op);
}

int step_code(ScalarType dt, const char* op, size_t i) {
  switch (dt) {
    case ScalarType::Float32:
      return 0;
    case ScalarType::Float64:
      return 1;
    case ScalarType::Int64:
      return 2;
    case ScalarType::Int32:
      return 3;
    default:
      EMBER_FAIL(Type, op, ": state_steps[", i, "] on a CUDA device has dtype ", dtype_name(dt),
                 " (supported there: float32, float64, int64, int32)");
  }
}

void _fused_adam_(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                  const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
                  const std::vector<Tensor>& max_exp_avg_sqs,
                  const std::vector<Tensor>& state_steps, double lr, double beta1, double beta2,
                  double weight_decay, double eps, bool amsgrad, bool maximize, bool decoupled) {
  const char* op = decoupled ? "_fused_adamw_" : "_fused_adam_";
  if (params.empty()) return;
  nn::check_fused_adam(op, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps,
                       amsgrad, &ix::check_same_device);
  for (size_t i = 0; i < state_steps.size(); ++i) {
    const Tensor& s = state_steps[i];
    nn::check_state_step(op, s, i);
    if (!s->device().is_cpu()) ix::check_same_device(params[0], s, op, "state_steps");
  }
  DeviceGuard guard(ix::device_index(params[0]));
  const ScalarType dt = params[0]->dtype();
  std::vector<Operand> ps, m1, m2, mx;
  std::vector<Tensor> gs;
  std::vector<TensorMeta> metas(params.size());
  bool device_steps = false;
  for (size_t i = 0; i < params.size(); ++i) {
    ps.emplace_back(params[i], op);
    m1.emplace_back(exp_avgs[i], op);
    m2.emplace_back(exp_avg_sqs[i], op);
    if (amsgrad) mx.emplace_back(max_exp_avg_sqs[i], op);
    gs.push_back(ix::contiguous(grads[i], op));
    TensorMeta& m = metas[i];
    std::memset(&m, 0, sizeof(m));
    m.ptr[0] = reinterpret_cast<uint64_t>(ps[i].work->data());
    m.ptr[1] = reinterpret_cast<uint64_t>(gs[i]->data());
    m.ptr[2] = reinterpret_cast<uint64_t>(m1[i].work->data());
    m.ptr[3] = reinterpret_cast<uint64_t>(m2[i].work->data());
    if (amsgrad) m.ptr[4] = reinterpret_cast<uint64_t>(mx[i].work->data());
    m.n = params[i]->numel();
    const Tensor& s = state_steps[i];
    if (s->device().is_cpu()) {
      // Incremented here, then read (as torch.optim's single-tensor Adam does).
      const double v = load_scalar(s->data(), s->dtype()).to_double() + 1.0;
      store_scalar(Scalar(v), s->dtype(), s->data());
      s->bump_version();
      const double bc1 = 1.0 - std::pow(beta1, v);
      const double bc2 = 1.0 - std::pow(beta2, v);
      if (dt == ScalarType::Float64) {
        m.neg_step = -(lr / bc1);
        m.bc2_sqrt = std::sqrt(bc2);
      } else {
        m.neg_step = static_cast<float>(-(lr / bc1));
        m.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
      }
    } else {
      m.step = reinterpret_cast<uint64_t>(s->data());
      m.step_code = step_code(s->dtype(), op, i);
      device_steps = true;
    }
  }
  auto go = [&](auto tag) {
    using T = decltype(tag);
    // Scalars rounded to T as the CPU kernel rounds them.
    const T one_minus_b1 = static_cast<T>(1.0 - beta1);
    AdamArgs<T> s;
    s.one_minus_b1 = one_minus_b1;
    s.lerp_rest = T(1) - one_minus_b1;
    s.b2 = static_cast<T>(beta2);
    s.one_minus_b2 = static_cast<T>(1.0 - beta2);
    s.wd = static_cast<T>(weight_decay);
    s.decay = static_cast<T>(1.0 - lr * weight_decay);
    s.eps = static_cast<T>(eps);
    s.lerp_low = one_minus_b1 < T(0.5);
    s.maximize = maximize;
    s.amsgrad = amsgrad;
    s.wd_mode = weight_decay == 0.0 ? 0 : (decoupled ? 2 : 1);
    const int64_t nt = static_cast<int64_t>(metas.size());
    run_chunks(
        op, params[0]->device(), metas, device_steps,
        [&](const TensorMeta* dm, const Chunk* dc, unsigned nchunks) {
          adam_kernel<T><<<nchunks, kBlockSize, 0, current_stream()>>>(dm, dc, s);
          check_launch(op);
        },
        [&](TensorMeta* dm) {
          adam_steps_kernel<T>
              <<<blocks_for(nt), kBlockSize, 0, current_stream()>>>(dm, nt, lr, beta1, beta2);
          check_launch(op);
        });
  };
  if (dt == ScalarType::Float64)
    go(double());
  else
    go(float());
  for (size_t i = 0; i < state_steps.size(); ++i)
    if (!state_steps[i]->device().is_cpu()) state_steps[i]->bump_version();
  for (auto* list : {&ps, &m1, &m2, &mx})
    for (auto& o : *list) o.finish(op);
}

void register_fused_optim() {
  register_kernel("_fused_sgd_", DeviceType::CUDA, &_fused_sgd_);
  register_kernel("_fused_adam_", DeviceType::CUDA, &_fused_adam_);
}

}  // namespace optim
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::optim::register_fused_optim)
