// Convolution passes through cuDNN's legacy API (cudnn_conv.h): descriptors from the tensors'
// sizes and layout, the algorithm cache, workspaces from the caching allocator, the bindings.
#include "cuda/cudnn_conv.h"

#include <pybind11/stl.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "cuda/cuda_context.h"
#include "cuda/cudnn_api.h"
#include "cuda/cudnn_graph_conv.h"

namespace py = pybind11;

namespace ember {
namespace cuda {
namespace cudnn {
namespace {

// ---- counters (for tests and diagnosis: _cudnn_stats) -----------------------------------------
struct Stats {
  std::atomic<int64_t> runs{0}, fallbacks{0}, heuristic_queries{0}, benchmark_queries{0},
      cache_hits{0};
  std::mutex mutex;
  std::string last_fallback;
};
Stats& stats() {
  static Stats* s = new Stats();
  return *s;
}

bool decline(const std::string& why) {
  Stats& s = stats();
  s.fallbacks.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.last_fallback = why;
  return false;
}

struct Cache {
  std::mutex mutex;
  std::unordered_map<std::vector<int64_t>, std::vector<AlgoPerf>, KeyHash> map;
};
Cache& cache() {
  static Cache* c = new Cache();
  return *c;
}

int data_type(ScalarType dt) {
  switch (dt) {
    case ScalarType::Float64:
      return kDataDouble;
    case ScalarType::Float16:
      return kDataHalf;
    case ScalarType::BFloat16:
      return kDataBFloat16;
    default:
      return kDataFloat;
  }
}

// Dense strides of dims (n of them) in NCHW order, or with the channel dim 1 innermost (NHWC).
void layout_strides(const int* dims, int n, bool nhwc, int* out) {
  if (!nhwc) {
    int64_t s = 1;
    for (int i = n - 1; i >= 0; --i) {
      out[i] = static_cast<int>(s);
      s *= std::max(dims[i], 1);
    }
    return;
  }
  int64_t s = 1;
  out[1] = 1;
  s *= std::max(dims[1], 1);
  for (int i = n - 1; i >= 2; --i) {
    out[i] = static_cast<int>(s);
    s *= std::max(dims[i], 1);
  }
  out[0] = static_cast<int>(s);
}

// sizes padded to nd dims (a unit height for a 1-d problem) into out; false when a size or the
// element count exceeds cuDNN's int.
bool padded_dims(const DimVector& sizes, int nd, int* out) {
  int64_t numel = 1;
  for (int64_t v : sizes) {
    if (v > INT_MAX) return false;
    numel *= v;
    if (numel > INT_MAX) return false;
  }
  const int64_t k = static_cast<int64_t>(sizes.size()) - 2;
  out[0] = static_cast<int>(sizes[0]);
  out[1] = static_cast<int>(sizes[1]);
  const int64_t lead = nd - 2 - k;  // 1 for a 1-d problem, else 0
  for (int64_t i = 0; i < lead; ++i) out[2 + i] = 1;
  for (int64_t i = 0; i < k; ++i) out[2 + lead + i] = static_cast<int>(sizes[2 + i]);
  return true;
}

// The problem of x (N, C, *sx) * w = y over 1 to 3 spatial dims, in the switches f; false (and
// *why) when its sizes or parameters exceed cuDNN's 32-bit API.
bool make_problem(Pass pass, ScalarType dtype, const DimVector& xs, const DimVector& ws,
                  const DimVector& ys, const ConvParams& cp, bool nhwc, const Flags& f, Problem* p,
                  std::string* why) {
  const int64_t k = static_cast<int64_t>(xs.size()) - 2;
  EMBER_CHECK(k >= 1 && k <= 3 && static_cast<int64_t>(ws.size()) == k + 2 &&
                  static_cast<int64_t>(ys.size()) == k + 2 &&
                  static_cast<int64_t>(cp.pad.size()) == k &&
                  static_cast<int64_t>(cp.stride.size()) == k &&
                  static_cast<int64_t>(cp.dilation.size()) == k,
              "cuDNN convolution: internal error: ", xs.size(), "-d input, ", ws.size(),
              "-d weight, ", ys.size(), "-d output, ", cp.pad.size(), " padding values");
  EMBER_CHECK(!nhwc || k >= 2, "cuDNN convolution: internal error: channels_last 1-d problem");
  p->pass = pass;
  p->dtype = dtype;
  p->nhwc = nhwc;
  p->tf32 = f.allow_tf32;
  p->deterministic = f.deterministic;
  p->benchmark = f.benchmark;
  p->nd = k == 3 ? 5 : 4;
  if (!padded_dims(xs, p->nd, p->xdim) || !padded_dims(ws, p->nd, p->wdim) ||
      !padded_dims(ys, p->nd, p->ydim) || cp.groups > INT_MAX || cp.groups < 1) {
    *why = "sizes beyond cuDNN's 32-bit API";
    return false;
  }
  layout_strides(p->xdim, p->nd, p->nhwc, p->xstr);
  layout_strides(p->wdim, p->nd, p->nhwc, p->wstr);
  layout_strides(p->ydim, p->nd, p->nhwc, p->ystr);
  const int64_t lead = p->nd - 2 - k;
  for (int64_t i = 0; i < p->nd - 2; ++i) {
    const bool unit = i < lead;
    const int64_t pd = unit ? 0 : cp.pad[i - lead];
    const int64_t st = unit ? 1 : cp.stride[i - lead];
    const int64_t dl = unit ? 1 : cp.dilation[i - lead];
    if (pd > INT_MAX || st > INT_MAX || dl > INT_MAX) {
      *why = "parameters beyond cuDNN's 32-bit API";
      return false;
    }
    p->pad[i] = static_cast<int>(pd);
    p->stride[i] = static_cast<int>(st);
    p->dil[i] = static_cast<int>(dl);
  }
  p->groups = static_cast<int>(cp.groups);
  return true;
}

std::string describe(Pass pass, const Tensor& x, const Tensor& w, const Tensor& y,
                     const ConvParams& p, bool nhwc) {
  std::ostringstream os;
  os << "input " << shape_str(x->sizes()) << ", weight " << shape_str(w->sizes()) << ", output "
     << shape_str(y->sizes()) << ", " << dtype_name(x->dtype()) << ", "
     << (nhwc ? "channels_last" : "contiguous") << ", stride " << shape_str(p.stride)
     << ", padding " << shape_str(p.pad) << ", dilation " << shape_str(p.dilation) << ", groups "
     << p.groups << "; " << pass_name(pass);
  return os.str();
}

// ---- descriptors ------------------------------------------------------------------------------
struct Descs {
  const Api* a;
  TensorDesc x = nullptr, y = nullptr;
  FilterDesc w = nullptr;
  ConvDesc c = nullptr;
  explicit Descs(const Api* api) : a(api) {}
  ~Descs() {
    if (x) a->DestroyTensorDescriptor(x);
    if (y) a->DestroyTensorDescriptor(y);
    if (w) a->DestroyFilterDescriptor(w);
    if (c) a->DestroyConvolutionDescriptor(c);
  }
  Descs(const Descs&) = delete;
  Descs& operator=(const Descs&) = delete;
};

int initial_math_type(const Problem& p) {
  switch (p.dtype) {
    case ScalarType::Float32:
      return p.tf32 ? kTensorOpMath : kFmaMath;
    case ScalarType::Float16:
    case ScalarType::BFloat16:
      return kTensorOpMath;
    default:
      return kDefaultMath;
  }
}

// Creates and sets the descriptors; the first failing status (kSuccess when all are set).
Status build(const Api* a, const Problem& p, Descs& d) {
  const int dt = data_type(p.dtype);
  const int compute = p.dtype == ScalarType::Float64 ? kDataDouble : kDataFloat;
  Status s;
  if ((s = a->CreateTensorDescriptor(&d.x)) != kSuccess) return s;
  if ((s = a->SetTensorNdDescriptor(d.x, dt, p.nd, p.xdim, p.xstr)) != kSuccess) return s;
  if ((s = a->CreateTensorDescriptor(&d.y)) != kSuccess) return s;
  if ((s = a->SetTensorNdDescriptor(d.y, dt, p.nd, p.ydim, p.ystr)) != kSuccess) return s;
  if ((s = a->CreateFilterDescriptor(&d.w)) != kSuccess) return s;
  if ((s = a->SetFilterNdDescriptor(d.w, dt, p.nhwc ? kFormatNHWC : kFormatNCHW, p.nd, p.wdim)) !=
      kSuccess)
    return s;
  if ((s = a->CreateConvolutionDescriptor(&d.c)) != kSuccess) return s;
  if ((s = a->SetConvolutionNdDescriptor(d.c, p.nd - 2, p.pad, p.stride, p.dil, kCrossCorrelation,
                                         compute)) != kSuccess)
    return s;
  if ((s = a->SetConvolutionGroupCount(d.c, p.groups)) != kSuccess) return s;
  return a->SetConvolutionMathType(d.c, initial_math_type(p));
}

// Whether an algorithm cuDNN offers suits the switches: it ran (or may run), is deterministic
// when asked, and keeps float32 / float64 out of reduced precision (no TF32 unless allowed, never
// a conversion to 16 bits).
bool acceptable(const Problem& p, const AlgoPerf& perf) {
  if (perf.status != kSuccess) return false;
  if (p.deterministic && perf.determinism != kDeterministic) return false;
  const bool wide = p.dtype == ScalarType::Float32 || p.dtype == ScalarType::Float64;
  if (wide && perf.math_type == kTensorOpMathAllowConversion) return false;
  if (p.dtype == ScalarType::Float32 && !p.tf32 && perf.math_type == kTensorOpMath) return false;
  return true;
}

int algo_count(Pass pass) {
  switch (pass) {
    case Pass::Forward:
      return kFwdAlgoCount;
    case Pass::BackwardData:
      return kBwdDataAlgoCount;
    default:
      return kBwdFilterAlgoCount;
  }
}

Status workspace_size(const Api* a, Handle h, const Problem& p, const Descs& d, int algo,
                      size_t* bytes) {
  *bytes = 0;
  switch (p.pass) {
    case Pass::Forward:
      return a->GetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.c, d.y, algo, bytes);
    case Pass::BackwardData:
      return a->GetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.c, d.x, algo, bytes);
    default:
      return a->GetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.c, d.w, algo, bytes);
  }
}

// A workspace of `bytes` from the caching allocator of `device` (the current stream's pool) into
// *out (left null for 0 bytes); false when the device is out of memory.
bool allocate_workspace(size_t bytes, Device device, Tensor* out) {
  *out = Tensor();
  if (bytes == 0) return true;
  try {
    *out = empty(DimVector{static_cast<int64_t>(bytes)}, ScalarType::UInt8, device);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::OutOfMemory) return false;
    throw;
  }
  return true;
}

// The largest workspace benchmarking offers the algorithms: enough for the hungriest one, at
// most this much.
constexpr size_t kMaxBenchmarkWorkspace = size_t(2) << 30;

}  // namespace

// ---- public -----------------------------------------------------------------------------------

const char* pass_name(Pass p) {
  switch (p) {
    case Pass::Forward:
      return "forward";
    case Pass::BackwardData:
      return "backward data";
    case Pass::BackwardFilter:
      return "backward filter";
  }
  return "?";
}

bool usable(ScalarType dt) {
  if (!flags().enabled) return false;
  if (dt != ScalarType::Float32 && dt != ScalarType::Float64 && dt != ScalarType::Float16 &&
      dt != ScalarType::BFloat16)
    return false;
  return api() != nullptr;
}

bool is_channels_last(const Tensor& t) { return !t->is_contiguous() && channels_last_dense(t); }

bool channels_last_dense(const Tensor& t) {
  const int64_t n = t->dim();
  if (n != 4 && n != 5) return false;
  const DimVector expect = channels_last_strides(t->sizes());
  for (int64_t i = 0; i < n; ++i)
    if (t->size(i) != 1 && t->stride(i) != expect[i]) return false;
  return true;
}

DimVector channels_last_strides(const DimVector& sizes) {
  const int64_t n = sizes.size();
  DimVector st(n, 1);
  int64_t s = std::max<int64_t>(sizes[1], 1);
  st[1] = 1;
  for (int64_t i = n - 1; i >= 2; --i) {
    st[i] = s;
    s *= std::max<int64_t>(sizes[i], 1);
  }
  st[0] = s;
  return st;
}

bool run(Pass pass, const char* op, const Tensor& x, const Tensor& w, const Tensor& y,
         const ConvParams& cp, bool channels_last) {
  const Api* a = api();
  if (!a) return decline(load_error());
  const Flags f = flags();
  Problem p;
  std::string why;
  if (!make_problem(pass, x->dtype(), x->sizes(), w->sizes(), y->sizes(), cp, channels_last, f, &p,
                    &why))
    return decline(std::string(op) + ": " + why);
  p.device = current_device();

  Handle h = nullptr;
  try {
    h = handle_for_current_stream(op);
  } catch (const Error& e) {  // cudnnCreate refused this device: the GEMM kernels still work
    return decline(e.what());
  }
  // The graph API first where the switch says so; where it declines, the legacy API below.
  if (graph::used_for(p.dtype) &&
      graph::run(a, h, p, op, x, w, y, [&] { return describe(pass, x, w, y, cp, p.nhwc); })) {
    stats().runs.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  Descs d(a);
  Status s = build(a, p, d);
  if (s != kSuccess) {
    if (is_not_supported(s) || is_bad_param(s))
      return decline(std::string(op) + ": cuDNN descriptors refused (" +
                     describe(pass, x, w, y, cp, p.nhwc) + "): " + error_string(s));
    EMBER_FAIL(Runtime, op, ": cuDNN ", pass_name(pass), " setup failed (",
               describe(pass, x, w, y, cp, p.nhwc), "): ", error_string(s));
  }

  // The ranked algorithms: cached, or from the heuristics, or timed (benchmark).
  const std::vector<int64_t> key = p.key();
  std::vector<AlgoPerf> ranked;
  bool cached = false;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.map.find(key);
    if (it != c.map.end()) {
      ranked = it->second;
      cached = true;
    }
  }
  const int count = algo_count(pass);
  if (cached) {
    stats().cache_hits.fetch_add(1, std::memory_order_relaxed);
  } else {
    AlgoPerf perf[8] = {};
    int returned = 0;
    if (!f.benchmark) {
      stats().heuristic_queries.fetch_add(1, std::memory_order_relaxed);
      switch (pass) {
        case Pass::Forward:
          s = a->GetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.c, d.y, count, &returned, perf);
          break;
        case Pass::BackwardData:
          s = a->GetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.c, d.x, count, &returned,
                                                        perf);
          break;
        case Pass::BackwardFilter:
          s = a->GetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.c, d.w, count, &returned,
                                                          perf);
          break;
      }
    } else {
      stats().benchmark_queries.fetch_add(1, std::memory_order_relaxed);
      size_t most = 0;
      for (int algo = 0; algo < count; ++algo) {
        size_t bytes = 0;
        if (workspace_size(a, h, p, d, algo, &bytes) == kSuccess) most = std::max(most, bytes);
      }
      most = std::min(most, kMaxBenchmarkWorkspace);
      Tensor ws;
      while (!allocate_workspace(most, x->device(), &ws)) most /= 2;
      void* wp = ws ? ws->data() : nullptr;
      switch (pass) {
        case Pass::Forward:
          s = a->FindConvolutionForwardAlgorithmEx(h, d.x, x->data(), d.w, w->data(), d.c, d.y,
                                                   y->data(), count, &returned, perf, wp, most);
          break;
        case Pass::BackwardData:
          s = a->FindConvolutionBackwardDataAlgorithmEx(h, d.w, w->data(), d.y, y->data(), d.c, d.x,
                                                        x->data(), count, &returned, perf, wp,
                                                        most);
          break;
        case Pass::BackwardFilter:
          s = a->FindConvolutionBackwardFilterAlgorithmEx(h, d.x, x->data(), d.y, y->data(), d.c,
                                                          d.w, w->data(), count, &returned, perf,
                                                          wp, most);
          break;
      }
    }
    if (s != kSuccess) {
      if (is_not_supported(s) || is_bad_param(s))
        return decline(std::string(op) + ": cuDNN has no algorithm (" +
                       describe(pass, x, w, y, cp, p.nhwc) + "): " + error_string(s));
      EMBER_FAIL(Runtime, op, ": cuDNN ", pass_name(pass), " algorithm search failed (",
                 describe(pass, x, w, y, cp, p.nhwc), "): ", error_string(s));
    }
    returned = std::max(0, std::min(returned, count));
    for (int i = 0; i < returned; ++i)
      if (acceptable(p, perf[i])) ranked.push_back(perf[i]);
    if (!ranked.empty()) {
      Cache& c = cache();
      std::lock_guard<std::mutex> lock(c.mutex);
      c.map[key] = ranked;
    }
  }
  if (ranked.empty())
    return decline(std::string(op) + ": no cuDNN algorithm suits (" +
                   describe(pass, x, w, y, cp, p.nhwc) + ")");

  // Run the best algorithm whose workspace fits; the next on out-of-memory or NOT_SUPPORTED.
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const bool dbl = p.dtype == ScalarType::Float64;
  const void* alpha = dbl ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
  const void* beta = dbl ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
  std::string last;
  for (const AlgoPerf& c : ranked) {
    const int math = p.dtype == ScalarType::Float32 && !p.tf32 ? kFmaMath : c.math_type;
    s = a->SetConvolutionMathType(d.c, math);
    if (s != kSuccess) {
      last = error_string(s);
      continue;
    }
    size_t bytes = 0;
    s = workspace_size(a, h, p, d, c.algo, &bytes);
    if (s != kSuccess) {
      if (is_not_supported(s) || is_bad_param(s)) {
        last = error_string(s);
        continue;
      }
      EMBER_FAIL(Runtime, op, ": cuDNN ", pass_name(pass), " workspace query failed (",
                 describe(pass, x, w, y, cp, p.nhwc), "): ", error_string(s));
    }
    Tensor ws;
    if (!allocate_workspace(bytes, x->device(), &ws)) {
      last = "out of memory for a workspace of " + std::to_string(bytes) + " bytes";
      continue;
    }
    void* wp = ws ? ws->data() : nullptr;
    switch (pass) {
      case Pass::Forward:
        s = a->ConvolutionForward(h, alpha, d.x, x->data(), d.w, w->data(), d.c, c.algo, wp, bytes,
                                  beta, d.y, y->data());
        break;
      case Pass::BackwardData:
        s = a->ConvolutionBackwardData(h, alpha, d.w, w->data(), d.y, y->data(), d.c, c.algo, wp,
                                       bytes, beta, d.x, x->data());
        break;
      case Pass::BackwardFilter:
        s = a->ConvolutionBackwardFilter(h, alpha, d.x, x->data(), d.y, y->data(), d.c, c.algo, wp,
                                         bytes, beta, d.w, w->data());
        break;
    }
    if (s == kSuccess) {
      check_launch(op);
      stats().runs.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    // 2003: CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER (the caller's kernel has no such needs).
    if (is_not_supported(s) || s == 2003) {
      last = error_string(s);
      continue;
    }
    EMBER_FAIL(Runtime, op, ": cuDNN ", pass_name(pass), " failed (",
               describe(pass, x, w, y, cp, p.nhwc), ", algorithm ", c.algo, "): ", error_string(s));
  }
  return decline(std::string(op) + ": no cuDNN algorithm ran (" +
                 describe(pass, x, w, y, cp, p.nhwc) + "): " + last);
}

void bind(py::module_& m) {
  m.def(
      "_cudnn_set_search_dirs",
      [](std::vector<std::string> dirs) { set_search_dirs(std::move(dirs)); }, py::arg("dirs"),
      "Folders searched for libcudnn.so.9 (before the loader's own search).");
  m.def(
      "_cudnn_is_available", [] { return api() != nullptr; },
      "Loads libcudnn.so.9 on first call; whether it loaded.");
  m.def("_cudnn_load_error", &load_error, "Why libcudnn.so.9 did not load ('' when it did).");
  m.def("_cudnn_library_path", &loaded_path, "The file cuDNN was loaded from.");
  m.def(
      "_cudnn_version",
      [](void) -> py::object {
        const Api* a = api();
        if (!a) return py::none();
        return py::int_(a->GetVersion());
      },
      "cuDNN's version (major * 10000 + minor * 100 + patch), None when not loaded.");
  m.def(
      "_cudnn_error_string", [](int status) { return error_string(status); }, py::arg("status"),
      "cuDNN's name of a status code ('' when not loaded).");
  m.def(
      "_cudnn_set_flags",
      [](bool enabled, bool benchmark, bool deterministic, bool allow_tf32) {
        Flags f;
        f.enabled = enabled;
        f.benchmark = benchmark;
        f.deterministic = deterministic;
        f.allow_tf32 = allow_tf32;
        set_flags(f);
      },
      py::arg("enabled"), py::arg("benchmark"), py::arg("deterministic"), py::arg("allow_tf32"));
  m.def("_cudnn_get_flags", [] {
    const Flags f = flags();
    return py::make_tuple(f.enabled, f.benchmark, f.deterministic, f.allow_tf32);
  });
  m.def(
      "_cudnn_stats",
      [] {
        Stats& s = stats();
        py::dict d;
        d["runs"] = s.runs.load();
        d["fallbacks"] = s.fallbacks.load();
        d["heuristic_queries"] = s.heuristic_queries.load();
        d["benchmark_queries"] = s.benchmark_queries.load();
        d["cache_hits"] = s.cache_hits.load();
        {
          std::lock_guard<std::mutex> lock(s.mutex);
          d["last_fallback"] = s.last_fallback;
        }
        {
          Cache& c = cache();
          std::lock_guard<std::mutex> lock(c.mutex);
          d["cached_problems"] = c.map.size();
        }
        graph::add_stats(d);
        return d;
      },
      "Counters of the cuDNN convolution path (runs, fallbacks, algorithm queries, cache; "
      "graph_*: the graph API's share of the runs, its declines, queries and plan cache).");
  m.def(
      "_cudnn_forward_output_dims",
      [](const std::vector<int64_t>& xv, const std::vector<int64_t>& wv,
         const std::vector<int64_t>& pad, const std::vector<int64_t>& stride,
         const std::vector<int64_t>& dilation, int64_t groups, const std::string& dtype,
         bool nhwc) {
        auto dims = [](const std::vector<int64_t>& v) { return DimVector(v); };
        const DimVector xs = dims(xv), ws = dims(wv);
        const Api* a = api();
        EMBER_CHECK(a != nullptr, "_cudnn_forward_output_dims: ", load_error());
        EMBER_CHECK(a->GetConvolutionNdForwardOutputDim != nullptr,
                    "_cudnn_forward_output_dims: this cuDNN lacks "
                    "cudnnGetConvolutionNdForwardOutputDim");
        const ScalarType dt = dtype == "float64"    ? ScalarType::Float64
                              : dtype == "float16"  ? ScalarType::Float16
                              : dtype == "bfloat16" ? ScalarType::BFloat16
                                                    : ScalarType::Float32;
        DimVector ys{xs.empty() ? 0 : xs[0], ws.empty() ? 0 : ws[0]};
        for (int64_t i = 2; i < xs.size(); ++i) ys.push_back(1);  // not read by the query
        Problem p;
        std::string why;
        const ConvParams cp{dims(pad), dims(stride), dims(dilation), groups};
        EMBER_CHECK(make_problem(Pass::Forward, dt, xs, ws, ys, cp, nhwc, flags(), &p, &why),
                    "_cudnn_forward_output_dims: ", why);
        Descs d(a);
        Status s = build(a, p, d);
        EMBER_CHECK(s == kSuccess,
                    "_cudnn_forward_output_dims: descriptors refused: ", error_string(s));
        int out[5] = {};
        s = a->GetConvolutionNdForwardOutputDim(d.c, d.x, d.w, p.nd, out);
        EMBER_CHECK(s == kSuccess, "_cudnn_forward_output_dims: ", error_string(s));
        return std::vector<int>(out, out + p.nd);
      },
      py::arg("input"), py::arg("weight"), py::arg("padding"), py::arg("stride"),
      py::arg("dilation"), py::arg("groups"), py::arg("dtype"), py::arg("channels_last"),
      "cuDNN's output sizes (padded to 4 or 5 dims) for ember's descriptors of a forward "
      "convolution: a check of the descriptors that needs the library, not a GPU.");
  m.def(
      "_cudnn_clear_cache",
      [] {
        {
          Cache& c = cache();
          std::lock_guard<std::mutex> lock(c.mutex);
          c.map.clear();
        }
        graph::clear_cache();
      },
      "Forgets every cached algorithm choice and graph API plan.");
  m.def(
      "_cudnn_graph_check_descriptors",
      [](const std::vector<int64_t>& xv, const std::vector<int64_t>& wv,
         const std::vector<int64_t>& yv, const std::vector<int64_t>& pad,
         const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation, int64_t groups,
         const std::string& dtype, bool nhwc, const std::string& pass) {
        const Api* a = api();
        EMBER_CHECK(a != nullptr, "_cudnn_graph_check_descriptors: ", load_error());
        const ScalarType dt = dtype == "float64"    ? ScalarType::Float64
                              : dtype == "float16"  ? ScalarType::Float16
                              : dtype == "bfloat16" ? ScalarType::BFloat16
                                                    : ScalarType::Float32;
        EMBER_CHECK(pass == "forward" || pass == "backward_data" || pass == "backward_filter",
                    "_cudnn_graph_check_descriptors: pass must be 'forward', 'backward_data' or "
                    "'backward_filter', got '",
                    pass, "'");
        const Pass ps = pass == "forward"         ? Pass::Forward
                        : pass == "backward_data" ? Pass::BackwardData
                                                  : Pass::BackwardFilter;
        Problem p;
        std::string why;
        const ConvParams cp{DimVector(pad), DimVector(stride), DimVector(dilation), groups};
        EMBER_CHECK(make_problem(ps, dt, DimVector(xv), DimVector(wv), DimVector(yv), cp, nhwc,
                                 flags(), &p, &why),
                    "_cudnn_graph_check_descriptors: ", why);
        return graph::check_descriptors(a, p);
      },
      py::arg("input"), py::arg("weight"), py::arg("output"), py::arg("padding"), py::arg("stride"),
      py::arg("dilation"), py::arg("groups"), py::arg("dtype"), py::arg("channels_last"),
      py::arg("pass_"),
      "Builds and finalizes the graph API's tensor, convolution and operation descriptors of "
      "one pass (no GPU needed): '' when cuDNN accepts them, else the step that failed and "
      "cuDNN's message.");
  graph::bind(m);  // _set_cudnn_graph, _cudnn_graph_enabled
  // ember.backends.cudnn hands over the wheel folders and the switches set before this import.
  try {
    py::module_::import("ember.backends.cudnn").attr("_attach")(m);
  } catch (py::error_already_set&) {
    // Without the Python package (a bare engine build) only EMBER_CUDNN_LIBRARY and the
    // loader's search find cuDNN; the switches keep their defaults.
  }
}

}  // namespace cudnn
}  // namespace cuda
}  // namespace ember
