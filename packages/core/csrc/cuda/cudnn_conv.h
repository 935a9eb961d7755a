// Convolution passes through cuDNN (cudnn_api.h) for the CUDA convolution kernels (nn_conv.cu),
// which fall back to their GEMM-based kernels wherever this declines. The algorithm of each
// problem (pass, sizes, parameters, dtype, layout, math) is chosen once and cached: by cuDNN's
// heuristics, or, with ember.backends.cudnn.benchmark, by timing every algorithm
// (cudnnFind*AlgorithmEx), as cudnn.benchmark does in PyTorch. Workspaces come from the device's
// caching allocator; everything runs on the current stream.
#pragma once
#include <pybind11/pybind11.h>

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
