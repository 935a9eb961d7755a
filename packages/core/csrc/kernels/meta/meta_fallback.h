// The meta device's default kernel: run the op's CPU kernel on stand-ins and carry the results'
// sizes, strides and dtype back to meta tensors. A stand-in is a CPU tensor with the meta
// tensor's sizes, strides, offset and dtype over zero-filled memory that costs nothing until it
// is written (anonymous pages map the shared zero page on read), so the CPU kernel defines the
// meta result exactly: the same sizes, strides and dtype by construction. Ops whose result
// depends on data are marked `meta: data_dependent` in their YAML entry and never come here;
// element-wise ops run their CPU kernel directly (`meta: cpu`: TensorIterator skips the loops
// on meta), so this fallback carries everything else (reductions, products, nn kernels) until
// they get shape functions of their own.
#pragma once
#include <tuple>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ember {

class MetaFallback {
 public:
  explicit MetaFallback(const char* op) : op_(op) {}

  // Stand-ins for the arguments (null stays null; CPU tensors pass through: a 0-d CPU tensor
  // may join meta tensors as a number).
  Tensor in(const Tensor& t);
  TensorOrScalar in(const TensorOrScalar& v);
  std::vector<Tensor> in(const std::vector<Tensor>& ts);
  // After the kernel ran: in-place changes of the stand-ins' metadata (out= resized, version
  // bumps) are carried to the meta arguments.
  void sync_inputs();
  // The meta tensor for a CPU result: the meta argument itself, a view of a meta argument's
  // storage, or a new meta tensor with the result's sizes, strides and dtype.
  Tensor out(const Tensor& r);
  std::vector<Tensor> out(const std::vector<Tensor>& rs);

 private:
  struct Pair {
    Tensor meta, cpu;
    int64_t version0;
  };
  Storage standin_storage(const Storage& meta);
  Storage meta_storage(const Storage& cpu);

  const char* op_;
  std::vector<Pair> pairs_;
  std::vector<std::pair<Storage, Storage>> storages_;  // (meta, stand-in)
};

}  // namespace ember
