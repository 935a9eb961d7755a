// CUDA kernel of _pad_backward (ops/nn.yaml), the adjoint of pad in every mode, with the CPU
// kernel's checks (kernels/cpu/nn_pad.cpp). The forward's index maps (kernels/pad.h: which
// input index each output index of a dim reads; -1 for constant padding) are built on the host
// and inverted per dim (CSR: for every input index, the output indices that read it, in
// increasing order); one thread per input element then gathers and sums the gradient of every
// output position that read it. A gather: no atomics, any numeric dtype, and the sums run in the
// CPU's order (row-major over the output).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "cuda/cuda_registry.h"
#include "cuda/device_types.cuh"
#include "cuda/index_common.cuh"
#include "kernels/pad.h"
#include "ops.h"
#include "ops/op_types.h"

namespace ember {
namespace cuda {
namespace pad {

using pad_detail::PadMode;
constexpr int kMaxDims = ix::kMaxDims;

// in_sizes: the input gradient's (contiguous) sizes; out_strides: grad_output's contiguous
// strides; dim d's inverse map starts at first_off[d] of the map buffer: in_sizes[d] + 1
// offsets (absolute positions in the buffer) delimiting each input index's output indices.
struct PadWalk {
  int nd = 0;
  int64_t in_sizes[kMaxDims] = {};
  int64_t out_strides[kMaxDims] = {};
  int64_t first_off[kMaxDims] = {};
};

template <class T>
__global__ void pad_backward_kernel(int64_t total, const T* __restrict__ g, T* __restrict__ gi,
                                    const int64_t* __restrict__ maps, PadWalk w) {
  using A = dev_opmath_t<T>;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t lo[kMaxDims], hi[kMaxDims], cur[kMaxDims];
    int64_t rem = e;
    bool none = false;
    for (int d = w.nd - 1; d >= 0; --d) {
      const int64_t i = rem % w.in_sizes[d];
      rem /= w.in_sizes[d];
      lo[d] = maps[w.first_off[d] + i];
      hi[d] = maps[w.first_off[d] + i + 1];
      none |= lo[d] == hi[d];
      cur[d] = lo[d];
    }
    A acc = A(0);
    if (!none) {
      while (true) {
        int64_t off = 0;
        for (int d = 0; d < w.nd; ++d) off += maps[cur[d]] * w.out_strides[d];
        acc = static_cast<A>(acc + to_op<T>(g[off]));
        int d = w.nd - 1;
        for (; d >= 0; --d) {  // next output position, last dim fastest
          if (++cur[d] < hi[d]) break;
          cur[d] = lo[d];
        }
        if (d < 0) break;
      }
    }
    gi[e] = from_op<T>(acc);
  }
}

using pad_detail::pad_maps;

// Constant padding's maps: output j of a padded dim reads input lo + j - pl, or nothing (-1).
std::vector<std::vector<int64_t>> constant_maps(const DimVector& sizes, const DimVector& pad,
                                                const char* op) {
  const int64_t nd = sizes.size(), np = pad.size() / 2;
  std::vector<std::vector<int64_t>> maps(nd);
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t i = nd - 1 - d, n = sizes[d];
    const int64_t l = i < np ? pad[2 * i] : 0, r = i < np ? pad[2 * i + 1] : 0;
    const int64_t out = pad_detail::padded_size(n, l, r, d, op);
    const int64_t lo = std::max<int64_t>(-l, 0), pl = std::max<int64_t>(l, 0);
    const int64_t m = n - lo - std::max<int64_t>(-r, 0);
    maps[d].resize(out);
    for (int64_t j = 0; j < out; ++j) maps[d][j] = j - pl >= 0 && j - pl < m ? lo + j - pl : -1;
  }
  return maps;
}

Tensor _pad_backward(const Tensor& grad_output, const DimVector& input_size, const DimVector& pad,
                     const std::string& mode) {
  const char* op = "pad_backward";
  PadMode m = pad_detail::parse_pad_mode(mode);
  pad_detail::check_pad_backward(pad, input_size, op);
  std::vector<std::vector<int64_t>> maps = m == PadMode::Constant
                                               ? constant_maps(input_size, pad, op)
                                               : pad_maps(input_size, pad, m, mode, op);
  const int64_t nd = input_size.size();
  DimVector out_sizes(nd);
  for (int64_t d = 0; d < nd; ++d) out_sizes[d] = maps[d].size();
  pad_detail::check_pad_grad_output(grad_output, out_sizes, input_size, pad, op);
  DeviceGuard guard(ix::device_index(grad_output));
  Tensor gi = empty(input_size, grad_output->dtype(), grad_output->device());
  const int64_t total = gi->numel();
  if (total == 0) return gi;
  if (grad_output->numel() == 0) {  // everything was cropped away
    ix::zero(gi);
    return gi;
  }
  ix::check_dims(nd, op);
  // The inverse maps, one buffer: per dim its offsets (in_size + 1), then every dim's lists.
  int64_t n_first = 0, n_list = 0;
  for (int64_t d = 0; d < nd; ++d) {
    n_first += input_size[d] + 1;
    n_list += out_sizes[d];
  }
  Tensor hbuf = empty(DimVector{n_first + n_list}, ScalarType::Int64, cpu_device());
  int64_t* hb = hbuf->data_as<int64_t>();
  PadWalk w;
  w.nd = static_cast<int>(nd);
  int64_t first_pos = 0, list_pos = n_first, stride = 1;
  for (int64_t d = nd - 1; d >= 0; --d) {
    w.out_strides[d] = stride;
    stride *= out_sizes[d];
  }
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t n = input_size[d];
    w.in_sizes[d] = n;
    w.first_off[d] = first_pos;
    std::vector<int64_t> count(n + 1, 0);
    for (int64_t v : maps[d])
      if (v >= 0) ++count[v + 1];
    for (int64_t i = 0; i < n; ++i) count[i + 1] += count[i];
    for (int64_t i = 0; i <= n; ++i) hb[first_pos + i] = list_pos + count[i];
    std::vector<int64_t> fill(count.begin(), count.end() - 1);
    for (int64_t j = 0; j < static_cast<int64_t>(maps[d].size()); ++j) {
      const int64_t v = maps[d][j];
      if (v >= 0) hb[list_pos + fill[v]++] = j;
    }
    first_pos += n + 1;
    list_pos += count[n];
  }
  Tensor dbuf = ix::to_device(hbuf, grad_output->device());
  Tensor g = ix::contiguous(grad_output, op);
  EMBER_DISPATCH_NUMERIC(g->dtype(), op, [&] {
    using T = scalar_t;
    pad_backward_kernel<T><<<blocks_for(total), kBlockSize, 0, current_stream()>>>(
        total, g->data_as<T>(), gi->data_as<T>(), dbuf->data_as<int64_t>(), w);
    check_launch(op);
  });
  return gi;
}

void register_pad() { register_kernel("_pad_backward", DeviceType::CUDA, &_pad_backward); }

}  // namespace pad
}  // namespace cuda
}  // namespace ember

EMBER_CUDA_REGISTER(ember::cuda::pad::register_pad)
