// Convolution passes through cuDNN's graph (backend) API, the path PyTorch takes: an operation
// graph of one convolution, engine configurations from cuDNN's heuristics (mode A, then its
// fallback engines), filtered by the switches (deterministic, TF32, no down-conversion), and one
// finalized execution plan per problem, cached. With ember.backends.cudnn.benchmark every
// candidate (heuristics and fallback) is finalized and timed on the current stream and the
// fastest kept. It reaches engines the legacy API (cudnn_conv.cpp) does not.
//
// On by default for float16 / bfloat16 (the private switch ember._C_cuda._set_cudnn_graph: True
// for every dtype, False for none, None by dtype): cudnn_conv.cpp's run() tries this path first
// and the legacy API wherever it declines. On an H200, ResNet-50 bf16 training ran 3.5x faster
// than through the legacy API alone, whose per-call host cost (about 0.4 ms a pass in cuDNN 9)
// the cached plans avoid; VGG-19 and AlexNet in float32 ran slower through it (0.76x / 0.90x of
// PyTorch against 1.03x / 1.10x), so float32 / float64 stay on the legacy API by default.
#pragma once
#include <pybind11/pybind11.h>

#include <functional>
#include <string>

#include "core/tensor.h"
#include "cuda/cudnn_api.h"
#include "cuda/cudnn_conv.h"

namespace ember {
namespace cuda {
namespace cudnn {
namespace graph {

// The switch (process-wide): on, off, or by dtype (the default): the 16-bit floats take the
// graph path, float32 / float64 the legacy API (measured faster there for VGG-19 / AlexNet).
enum class Mode { Off, Auto, On };
Mode mode();
void set_mode(Mode m);
// Whether a pass in dtype tries the graph path first under the current mode.
bool used_for(ScalarType dtype);

// Runs the pass of p on the current stream through the graph API, with h (this thread's handle
// for p.device, bound to the current stream); x, w and y as cudnn::run takes them. True when it
// ran. False when it declines: this cuDNN has no graph API, the descriptors or the operation graph
// are refused, no engine configuration suits the switches and finalizes, or its workspace does not
// fit (counted in graph_declines with the reason in graph_last_decline; the caller then tries the
// legacy API). A problem declined for any reason but memory is remembered as such, and declined
// at once from then on. Raises RuntimeError naming op, describe(), the engine and cuDNN's
// message when an execution fails otherwise.
bool run(const Api* a, Handle h, const Problem& p, const char* op, const Tensor& x, const Tensor& w,
         const Tensor& y, const std::function<std::string()>& describe);

// Builds and finalizes p's tensor, convolution and operation descriptors (no handle or GPU
// needed; alignment 16): "" when cuDNN accepts them, else the step that failed and cuDNN's
// message. A check of the descriptors for tests on machines without a GPU.
std::string check_descriptors(const Api* a, const Problem& p);

// The graph path's counters into d (graph_runs, graph_declines, graph_last_decline, ...).
void add_stats(pybind11::dict& d);
// Forgets every cached plan.
void clear_cache();
// ember._C_cuda's _set_cudnn_graph and _cudnn_graph_enabled.
void bind(pybind11::module_& m);

}  // namespace graph
}  // namespace cudnn
}  // namespace cuda
}  // namespace ember
