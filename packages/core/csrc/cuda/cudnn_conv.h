// Convolution passes through cuDNN (cudnn_api.h) for the CUDA convolution kernels (nn_conv.cu),
// which fall back to their GEMM-based kernels wherever this declines. The algorithm of each
// problem (pass, sizes, parameters, dtype, layout, math) is chosen once and cached: by cuDNN's
// heuristics, or, with ember.backends.cudnn.benchmark, by timing every algorithm
// (cudnnFind*AlgorithmEx), as cudnn.benchmark does in PyTorch. Workspaces come from the device's
// caching allocator; everything runs on the current stream. float16 / bfloat16 passes try cuDNN's
// graph API first (cudnn_graph_conv.h: its cached execution plans cost the host far less per
// call) and this legacy path where that declines; the private switch
// ember._C_cuda._set_cudnn_graph (True: every dtype, False: none) changes which.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ember {
namespace cuda {
namespace cudnn {

// The three passes of one convolution problem x (N, C, *sx) * w (K, C / groups, *ks) = y (N, K,
// *sy): Forward writes y from x and w; BackwardData writes x (as dx) from w and y (as dy);
// BackwardFilter writes w (as dw) from x and y (as dy). A transposed convolution is the
// BackwardData pass of the convolution whose output is its input.
enum class Pass { Forward, BackwardData, BackwardFilter };

struct ConvParams {
  DimVector pad, stride, dilation;  // one value per spatial dim
  int64_t groups = 1;
};

const char* pass_name(Pass p);  // "forward", "backward data", "backward filter"

// One pass of one problem in cuDNN's terms (cudnn_conv.cpp's make_problem), for both of its
// APIs: tensors of nd = 4 or 5 dims (a 1-d convolution gets a unit height: (N, C, 1, L)), dense
// in NCHW order or channels-last (nhwc); the weight's dims are (K, C / groups, *ks). The switches
// it was made under (tf32, deterministic, benchmark) are part of it: key() identifies it in the
// caches.
struct Problem {
  Pass pass = Pass::Forward;
  ScalarType dtype = ScalarType::Float32;
  bool nhwc = false, tf32 = false, deterministic = false, benchmark = false;
  int device = 0;
  int nd = 4;
  int xdim[5] = {}, wdim[5] = {}, ydim[5] = {};
  int xstr[5] = {}, wstr[5] = {}, ystr[5] = {};
  int pad[3] = {}, stride[3] = {}, dil[3] = {};
  int groups = 1;

  std::vector<int64_t> key() const {
    std::vector<int64_t> k{static_cast<int64_t>(pass),
                           static_cast<int64_t>(dtype),
                           nhwc,
                           tf32,
                           deterministic,
                           benchmark,
                           device,
                           nd,
                           groups};
    for (int i = 0; i < nd; ++i) k.insert(k.end(), {xdim[i], wdim[i], ydim[i]});
    for (int i = 0; i < nd - 2; ++i) k.insert(k.end(), {pad[i], stride[i], dil[i]});
    return k;
  }
};

struct KeyHash {
  size_t operator()(const std::vector<int64_t>& k) const {
    uint64_t h = 1469598103934665603ULL;
    for (int64_t v : k) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ULL;
    return static_cast<size_t>(h);
  }
};

// Whether cuDNN may be tried for dtype dt now: ember.backends.cudnn.enabled, the library loads,
// and dt is float32, float64, float16 or bfloat16.
bool usable(ScalarType dt);

// Whether t (4 or 5 dims) is dense in channels-last order (NHWC / NDHWC; the strides of size-1
// dims do not matter).
bool channels_last_dense(const Tensor& t);
// Whether t prefers channels-last: channels_last_dense and not also contiguous.
bool is_channels_last(const Tensor& t);
// Contiguous strides for sizes in channels-last order (the channel dim 1 innermost).
DimVector channels_last_strides(const DimVector& sizes);

// Runs one pass on the current device and stream. x, w and y are dense in one layout: contiguous
// (channels_last false) or channels-last (true: 4 or 5 dims); 1 to 3 spatial dims. Returns false,
// having written nothing the caller keeps, when cuDNN declines the problem (off, not loaded,
// sizes beyond its 32-bit API, no algorithm, NOT_SUPPORTED): the caller then computes the pass
// itself. Raises RuntimeError naming op, the shapes and cuDNN's message on any other cuDNN error.
bool run(Pass pass, const char* op, const Tensor& x, const Tensor& w, const Tensor& y,
         const ConvParams& p, bool channels_last);

// ember._C_cuda's _cudnn_* functions (ember.backends.cudnn).
void bind(pybind11::module_& m);

}  // namespace cudnn
}  // namespace cuda
}  // namespace ember
