// Convolution passes through cuDNN's graph (backend) API (cudnn_graph_conv.h): descriptors of
// the convolution, engine heuristics and their filter, plan selection (first that finalizes, or
// the fastest when benchmarking), the plan cache, execution with a variant pack.
#include "cuda/cudnn_graph_conv.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "cuda/cuda_context.h"

namespace py = pybind11;

namespace ember {
namespace cuda {
namespace cudnn {
namespace graph {
namespace {

// ---- cudnn_graph.h's enum values (checked against cuDNN 9.28.1) -------------------------------
// cudnnBackendDescriptorType_t
constexpr int kConvolutionDescriptor = 1, kEngineDescriptor = 2, kEngineCfgDescriptor = 3,
              kEngineHeurDescriptor = 4, kExecutionPlanDescriptor = 5,
              kOpConvForwardDescriptor = 10, kOpConvBackwardFilterDescriptor = 11,
              kOpConvBackwardDataDescriptor = 12, kOperationGraphDescriptor = 15,
              kVariantPackDescriptor = 16, kTensorDescriptor = 17;
// cudnnBackendAttributeType_t
constexpr int kTypeHandle = 0, kTypeDataType = 1, kTypeInt64 = 3, kTypeFloat = 4, kTypeDouble = 5,
              kTypeVoidPtr = 6, kTypeConvolutionMode = 7, kTypeHeurMode = 8,
              kTypeNumericalNote = 11, kTypeBackendDescriptor = 15;
// cudnnBackendAttributeName_t
constexpr int kConvCompType = 100, kConvMode = 101, kConvDilations = 102, kConvFilterStrides = 103,
              kConvPostPaddings = 104, kConvPrePaddings = 105, kConvSpatialDims = 106;
constexpr int kHeurMode = 200, kHeurOperationGraph = 201, kHeurResults = 202;
constexpr int kEngineCfgEngine = 300;
constexpr int kPlanHandle = 400, kPlanEngineConfig = 401, kPlanWorkspaceSize = 402;
constexpr int kOperationGraphHandle = 800, kOperationGraphOps = 801;
constexpr int kTensorByteAlignment = 900, kTensorDataType = 901, kTensorDimensions = 902,
              kTensorStrides = 903, kTensorUniqueId = 906;
constexpr int kVariantPackUniqueIds = 1000, kVariantPackDataPointers = 1001,
              kVariantPackWorkspace = 1003;
constexpr int kEngineGlobalIndex = 1301, kEngineNumericalNote = 1303;
// The attributes of the three convolution operations, in the order alpha, beta, convolution
// descriptor, and the descriptors of x, w and y (dx, dw, dy where the pass writes or reads them).
struct OpAttrs {
  int type, alpha, beta, conv, x, w, y;
};
constexpr OpAttrs kForwardAttrs{kOpConvForwardDescriptor, 700, 701, 702, 704, 703, 705};
constexpr OpAttrs kBackwardDataAttrs{kOpConvBackwardDataDescriptor, 706, 707, 708, 710, 709, 711};
constexpr OpAttrs kBackwardFilterAttrs{
    kOpConvBackwardFilterDescriptor, 712, 713, 714, 716, 715, 717};
// cudnnBackendHeurMode_t
constexpr int kHeurModeFallback = 2, kHeurModeA = 3;
// cudnnBackendNumericalNote_t
constexpr int kNoteTensorCore = 0, kNoteDownConvertInputs = 1, kNoteReducedPrecisionReduction = 2,
              kNoteNondeterministic = 4;
// CUDNN_NUMERICAL_NOTE_TYPE_COUNT: the notes an engine may have, requested as PyTorch's cuDNN
// frontend requests them.
constexpr int kMaxNotes = 10;
// The unique ids of the three tensors in the graph and its variant packs.
constexpr int64_t kUidX = 'x', kUidW = 'w', kUidY = 'y';

// ---- counters (_cudnn_stats's graph_* entries) ------------------------------------------------
struct Stats {
  std::atomic<int64_t> runs{0}, declines{0}, heuristic_queries{0}, benchmark_queries{0},
      cache_hits{0}, last_engine{-1};
  std::mutex mutex;
  std::string last_decline;
};
Stats& stats() {
  static Stats* s = new Stats();
  return *s;
}

bool decline(const std::string& why) {
  Stats& s = stats();
  s.declines.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(s.mutex);
  s.last_decline = why;
  return false;
}

std::atomic<int> g_mode{static_cast<int>(Mode::Auto)};

// ---- descriptors ------------------------------------------------------------------------------
// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  Desc() = default;
  Desc(const Api* a, int type) : a_(a) {
    status_ = a->BackendCreateDescriptor(type, &d_);
    if (status_ != kSuccess) d_ = nullptr;
  }
  ~Desc() { reset(); }
  Desc(Desc&& o) noexcept : a_(o.a_), d_(o.d_), status_(o.status_) { o.d_ = nullptr; }
  Desc& operator=(Desc&& o) noexcept {
    if (this != &o) {
      reset();
      a_ = o.a_;
      d_ = o.d_;
      status_ = o.status_;
      o.d_ = nullptr;
    }
    return *this;
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  BackendDesc get() const { return d_; }
  // cudnnBackendCreateDescriptor's status.
  Status created() const { return status_; }

 private:
  void reset() {
    if (d_) a_->BackendDestroyDescriptor(d_);
    d_ = nullptr;
  }
  const Api* a_ = nullptr;
  BackendDesc d_ = nullptr;
  Status status_ = kSuccess;
};

// The first failure of a sequence of backend calls: its status and which call it was.
struct Failure {
  Status status = kSuccess;
  std::string what;
  // Records a failing s as the call `what`; whether s succeeded.
  bool check(Status s, const std::string& w) {
    if (s == kSuccess) return true;
    status = s;
    what = w;
    return false;
  }
};

bool set_attr(const Api* a, const Desc& d, int name, int type, int64_t count, const void* values,
              const char* what, Failure* f) {
  return f->check(a->BackendSetAttribute(d.get(), name, type, count, values),
                  std::string("setting ") + what);
}

bool set_desc(const Api* a, const Desc& d, int name, const Desc& value, const char* what,
              Failure* f) {
  BackendDesc v = value.get();
  return set_attr(a, d, name, kTypeBackendDescriptor, 1, &v, what, f);
}

bool create(const Api* a, int type, Desc* out, const char* what, Failure* f) {
  *out = Desc(a, type);
  return f->check(out->created(), std::string("creating the ") + what);
}

bool finalize(const Api* a, const Desc& d, const char* what, Failure* f) {
  return f->check(a->BackendFinalize(d.get()), std::string("finalizing the ") + what);
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

int64_t element_size(ScalarType dt) {
  switch (dt) {
    case ScalarType::Float64:
      return 8;
    case ScalarType::Float16:
    case ScalarType::BFloat16:
      return 2;
    default:
      return 4;
  }
}

// The largest power of two up to 16 dividing the address of p.
int64_t alignment_of(const void* p) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  int64_t a = 16;
  while (a > 1 && v % static_cast<uintptr_t>(a) != 0) a /= 2;
  return a;
}

// The descriptors of one convolution's operation graph (kept alive with its plans).
struct Graph {
  Desc x, w, y, conv, op, graph;
};

bool make_tensor(const Api* a, const Problem& p, const int* dims, const int* strides, int64_t uid,
                 int64_t alignment, const char* what, Desc* out, Failure* f) {
  if (!create(a, kTensorDescriptor, out, what, f)) return false;
  int64_t d[5], s[5];
  for (int i = 0; i < p.nd; ++i) {
    d[i] = dims[i];
    s[i] = strides[i];
  }
  const int dt = data_type(p.dtype);
  return set_attr(a, *out, kTensorDataType, kTypeDataType, 1, &dt, "its data type", f) &&
         set_attr(a, *out, kTensorDimensions, kTypeInt64, p.nd, d, "its dimensions", f) &&
         set_attr(a, *out, kTensorStrides, kTypeInt64, p.nd, s, "its strides", f) &&
         set_attr(a, *out, kTensorUniqueId, kTypeInt64, 1, &uid, "its unique id", f) &&
         set_attr(a, *out, kTensorByteAlignment, kTypeInt64, 1, &alignment, "its alignment", f) &&
         finalize(a, *out, what, f);
}

const OpAttrs& op_attrs(Pass pass) {
  switch (pass) {
    case Pass::Forward:
      return kForwardAttrs;
    case Pass::BackwardData:
      return kBackwardDataAttrs;
    default:
      return kBackwardFilterAttrs;
  }
}

// The tensor, convolution and operation descriptors of p, finalized; false (and *f) on the first
// refusal. align: the byte alignments of x, w and y.
bool build_operation(const Api* a, const Problem& p, const int64_t align[3], Graph* g, Failure* f) {
  if (!make_tensor(a, p, p.xdim, p.xstr, kUidX, align[0], "x tensor descriptor", &g->x, f) ||
      !make_tensor(a, p, p.wdim, p.wstr, kUidW, align[1], "w tensor descriptor", &g->w, f) ||
      !make_tensor(a, p, p.ydim, p.ystr, kUidY, align[2], "y tensor descriptor", &g->y, f))
    return false;

  const int sd = p.nd - 2;
  int64_t pad[3], stride[3], dil[3];
  for (int i = 0; i < sd; ++i) {
    pad[i] = p.pad[i];
    stride[i] = p.stride[i];
    dil[i] = p.dil[i];
  }
  const int64_t spatial = sd;
  const int compute = p.dtype == ScalarType::Float64 ? kDataDouble : kDataFloat;
  const int mode = kCrossCorrelation;
  if (!create(a, kConvolutionDescriptor, &g->conv, "convolution descriptor", f) ||
      !set_attr(a, g->conv, kConvCompType, kTypeDataType, 1, &compute, "its compute type", f) ||
      !set_attr(a, g->conv, kConvMode, kTypeConvolutionMode, 1, &mode, "its mode", f) ||
      !set_attr(a, g->conv, kConvSpatialDims, kTypeInt64, 1, &spatial, "its spatial dims", f) ||
      !set_attr(a, g->conv, kConvDilations, kTypeInt64, sd, dil, "its dilations", f) ||
      !set_attr(a, g->conv, kConvFilterStrides, kTypeInt64, sd, stride, "its strides", f) ||
      !set_attr(a, g->conv, kConvPrePaddings, kTypeInt64, sd, pad, "its pre-paddings", f) ||
      !set_attr(a, g->conv, kConvPostPaddings, kTypeInt64, sd, pad, "its post-paddings", f) ||
      !finalize(a, g->conv, "convolution descriptor", f))
    return false;

  // y = 1 * conv(x, w) + 0 * y: scalars of the compute type (double for float64, else float).
  const OpAttrs& at = op_attrs(p.pass);
  const bool dbl = p.dtype == ScalarType::Float64;
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const int scalar_type = dbl ? kTypeDouble : kTypeFloat;
  const void* alpha = dbl ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
  const void* beta = dbl ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
  return create(a, at.type, &g->op, "convolution operation", f) &&
         set_attr(a, g->op, at.alpha, scalar_type, 1, alpha, "its alpha", f) &&
         set_attr(a, g->op, at.beta, scalar_type, 1, beta, "its beta", f) &&
         set_desc(a, g->op, at.conv, g->conv, "its convolution descriptor", f) &&
         set_desc(a, g->op, at.x, g->x, "its x tensor", f) &&
         set_desc(a, g->op, at.w, g->w, "its w tensor", f) &&
         set_desc(a, g->op, at.y, g->y, "its y tensor", f) &&
         finalize(a, g->op, "convolution operation", f);
}

// The operation graph of g's operation, finalized for handle h. The handle attributes of the
// operation graph and the execution plan are deprecated (cuDNN 9.28 finalizes a graph without
// one; execution takes the handle): set where this cuDNN takes them, else left out.
bool build_graph(const Api* a, Handle h, Graph* g, Failure* f) {
  BackendDesc op = g->op.get();
  if (!create(a, kOperationGraphDescriptor, &g->graph, "operation graph", f)) return false;
  a->BackendSetAttribute(g->graph.get(), kOperationGraphHandle, kTypeHandle, 1, &h);
  return set_attr(a, g->graph, kOperationGraphOps, kTypeBackendDescriptor, 1, &op, "its operations",
                  f) &&
         finalize(a, g->graph, "operation graph", f);
}

// The engine configurations of cuDNN's heuristics in `mode` for the graph, best first, appended
// to *out.
bool heuristic_configs(const Api* a, const Graph& g, int mode, std::vector<Desc>* out, Failure* f) {
  Desc heur;
  BackendDesc graph = g.graph.get();
  if (!create(a, kEngineHeurDescriptor, &heur, "engine heuristics", f) ||
      !set_attr(a, heur, kHeurOperationGraph, kTypeBackendDescriptor, 1, &graph,
                "its operation graph", f) ||
      !set_attr(a, heur, kHeurMode, kTypeHeurMode, 1, &mode, "its mode", f) ||
      !finalize(a, heur, "engine heuristics", f))
    return false;
  int64_t count = 0;
  if (!f->check(a->BackendGetAttribute(heur.get(), kHeurResults, kTypeBackendDescriptor, 0, &count,
                                       nullptr),
                "counting the heuristics' results"))
    return false;
  if (count <= 0) return true;
  std::vector<Desc> cfgs;
  std::vector<BackendDesc> raw;
  for (int64_t i = 0; i < count; ++i) {
    Desc c;
    if (!create(a, kEngineCfgDescriptor, &c, "engine configuration", f)) return false;
    raw.push_back(c.get());
    cfgs.push_back(std::move(c));
  }
  int64_t got = 0;
  if (!f->check(a->BackendGetAttribute(heur.get(), kHeurResults, kTypeBackendDescriptor, count,
                                       &got, raw.data()),
                "reading the heuristics' results"))
    return false;
  got = std::max<int64_t>(0, std::min(got, count));
  for (int64_t i = 0; i < got; ++i) out->push_back(std::move(cfgs[i]));
  return true;
}

// What cuDNN says of the engine of a configuration: its global index and numerical notes.
struct EngineInfo {
  int64_t index = -1;
  std::vector<int> notes;
  bool has(int note) const { return std::find(notes.begin(), notes.end(), note) != notes.end(); }
};

bool engine_info(const Api* a, const Desc& cfg, EngineInfo* info, Failure* f) {
  Desc engine;
  if (!create(a, kEngineDescriptor, &engine, "engine descriptor", f)) return false;
  BackendDesc e = engine.get();
  int64_t n = 0;
  if (!f->check(
          a->BackendGetAttribute(cfg.get(), kEngineCfgEngine, kTypeBackendDescriptor, 1, &n, &e),
          "reading a configuration's engine"))
    return false;
  if (!f->check(
          a->BackendGetAttribute(engine.get(), kEngineGlobalIndex, kTypeInt64, 1, &n, &info->index),
          "reading an engine's index"))
    return false;
  int notes[kMaxNotes] = {};
  n = 0;
  if (!f->check(a->BackendGetAttribute(engine.get(), kEngineNumericalNote, kTypeNumericalNote,
                                       kMaxNotes, &n, notes),
                "reading an engine's numerical notes"))
    return false;
  n = std::max<int64_t>(0, std::min<int64_t>(n, kMaxNotes));
  info->notes.assign(notes, notes + n);
  return true;
}

// Whether an engine suits the switches (as PyTorch filters them): deterministic when asked, no
// down-conversion of the inputs, float32 off the tensor cores unless TF32 is allowed, and no
// reduced-precision reduction for float32 without TF32 or for float64.
bool acceptable(const Problem& p, const EngineInfo& e) {
  if (p.deterministic && e.has(kNoteNondeterministic)) return false;
  if (e.has(kNoteDownConvertInputs)) return false;
  const bool strict32 = p.dtype == ScalarType::Float32 && !p.tf32;
  if (strict32 && e.has(kNoteTensorCore)) return false;
  if ((strict32 || p.dtype == ScalarType::Float64) && e.has(kNoteReducedPrecisionReduction))
    return false;
  return true;
}

// A finalized plan with everything it was built from.
struct Plan {
  Graph graph;
  Desc cfg, plan;
  int64_t workspace = 0;
  int64_t engine = -1;
};

// A problem's entry: its plan, or (plan null) why the graph path declines it: such a problem
// goes straight to the legacy API, not through the heuristics and finalization again.
struct Entry {
  std::shared_ptr<Plan> plan;
  std::string declined;
};

struct Cache {
  std::mutex mutex;
  std::unordered_map<std::vector<int64_t>, Entry, KeyHash> map;
};
Cache& cache() {
  static Cache* c = new Cache();
  return *c;
}

// The execution plan of cfg for handle h, finalized; its workspace size.
bool make_plan(const Api* a, Handle h, Desc* cfg, Plan* out, Failure* f) {
  BackendDesc c = cfg->get();
  if (!create(a, kExecutionPlanDescriptor, &out->plan, "execution plan", f)) return false;
  a->BackendSetAttribute(out->plan.get(), kPlanHandle, kTypeHandle, 1, &h);  // see build_graph
  if (!set_attr(a, out->plan, kPlanEngineConfig, kTypeBackendDescriptor, 1, &c,
                "its engine configuration", f) ||
      !finalize(a, out->plan, "execution plan", f))
    return false;
  int64_t n = 0, bytes = 0;
  if (!f->check(
          a->BackendGetAttribute(out->plan.get(), kPlanWorkspaceSize, kTypeInt64, 1, &n, &bytes),
          "reading the plan's workspace size"))
    return false;
  out->workspace = std::max<int64_t>(0, bytes);
  out->cfg = std::move(*cfg);
  return true;
}

// A workspace of `bytes` from the caching allocator of `device` (the current stream's pool) into
// *out (left null for 0 bytes); false when the device is out of memory.
bool allocate_workspace(int64_t bytes, Device device, Tensor* out) {
  *out = Tensor();
  if (bytes <= 0) return true;
  try {
    *out = empty(DimVector{bytes}, ScalarType::UInt8, device);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::OutOfMemory) return false;
    throw;
  }
  return true;
}

constexpr const char* kExecuting = "executing the plan";

// Runs plan once on h's stream with the tensors' data and workspace ws; cuDNN's status (and *f:
// the variant pack's step that failed, or kExecuting).
Status execute(const Api* a, Handle h, const Plan& plan, const Tensor& x, const Tensor& w,
               const Tensor& y, const Tensor& ws, Failure* f) {
  Desc vp;
  int64_t uids[3] = {kUidX, kUidW, kUidY};
  void* ptrs[3] = {x->data(), w->data(), y->data()};
  void* wp = ws ? ws->data() : nullptr;
  if (!create(a, kVariantPackDescriptor, &vp, "variant pack", f) ||
      !set_attr(a, vp, kVariantPackUniqueIds, kTypeInt64, 3, uids, "its unique ids", f) ||
      !set_attr(a, vp, kVariantPackDataPointers, kTypeVoidPtr, 3, ptrs, "its data pointers", f) ||
      !set_attr(a, vp, kVariantPackWorkspace, kTypeVoidPtr, 1, &wp, "its workspace", f) ||
      !finalize(a, vp, "variant pack", f))
    return f->status;
  const Status s = a->BackendExecute(h, plan.plan.get(), vp.get());
  f->check(s, kExecuting);
  return s;
}

// A status after which another engine (or the legacy API) may still run the problem.
bool declinable(Status s) {
  // 2003: CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER.
  return is_not_supported(s) || s == 2003;
}

// Two CUDA events, destroyed with their owner.
struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  Events() {
    EMBER_CUDA_CHECK(cudaEventCreate(&start));
    const cudaError_t e = cudaEventCreate(&stop);
    if (e != cudaSuccess) {
      cudaEventDestroy(start);
      check(e, "cudaEventCreate(&stop)");
    }
  }
  ~Events() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
};

// At most this many configurations are timed per problem, and none whose workspace exceeds
// kMaxBenchmarkWorkspace (as the legacy benchmark's bound).
constexpr size_t kMaxTimed = 64;
constexpr int64_t kMaxBenchmarkWorkspace = int64_t(2) << 30;

std::string failure_text(const Failure& f) {
  if (f.status == kSuccess) return f.what;
  return f.what + ": " + error_string(f.status);
}

// The convolution's descriptors and operation graph for the problem: *g; "" or why not.
std::string prepare(const Api* a, Handle h, const Problem& p, const int64_t align[3], Graph* g) {
  Failure f;
  if (!build_operation(a, p, align, g, &f) || !build_graph(a, h, g, &f)) return failure_text(f);
  return "";
}

// The search for a problem's plan: the best so far and why the others were passed over.
struct Search {
  std::shared_ptr<Plan> best;
  float best_ms = 0.0f;
  int offered = 0, filtered = 0, refused = 0, without_workspace = 0;
  size_t timed = 0;
  std::string last;  // the last reason a configuration was passed over
  std::unique_ptr<Events> events;
};

// Considers one configuration of the search: heuristics take the first whose engine suits the
// switches, whose plan finalizes and whose workspace fits; benchmarking times each such one (1
// warm-up, then the median of 3 runs on the current stream) and keeps the fastest. True when
// the search is over.
bool consider(const Api* a, Handle h, const Problem& p, Desc* cfg, const char* op, const Tensor& x,
              const Tensor& w, const Tensor& y, const std::function<std::string()>& describe,
              Search* s) {
  const bool timing = p.benchmark;
  ++s->offered;
  EngineInfo info;
  Failure f;
  if (!engine_info(a, *cfg, &info, &f)) {
    ++s->filtered;
    s->last = failure_text(f);
    return false;
  }
  if (!acceptable(p, info)) {
    ++s->filtered;
    return false;
  }
  auto plan = std::make_shared<Plan>();
  if (!make_plan(a, h, cfg, plan.get(), &f)) {
    ++s->refused;
    s->last = failure_text(f);
    return false;
  }
  plan->engine = info.index;
  Tensor ws;
  if ((timing && plan->workspace > kMaxBenchmarkWorkspace) ||
      !allocate_workspace(plan->workspace, x->device(), &ws)) {
    ++s->without_workspace;
    s->last = "no workspace of " + std::to_string(plan->workspace) + " bytes";
    return false;
  }
  if (!timing) {
    s->best = std::move(plan);
    return true;
  }
  if (!s->events) s->events = std::make_unique<Events>();
  const Events& ev = *s->events;
  cudaStream_t stream = current_stream(p.device);
  Status st = execute(a, h, *plan, x, w, y, ws, &f);
  float ms[3] = {};
  for (int r = 0; r < 3 && st == kSuccess; ++r) {
    EMBER_CUDA_CHECK(cudaEventRecord(ev.start, stream));
    st = execute(a, h, *plan, x, w, y, ws, &f);
    EMBER_CUDA_CHECK(cudaEventRecord(ev.stop, stream));
    if (st != kSuccess) break;
    EMBER_CUDA_CHECK(cudaEventSynchronize(ev.stop));
    EMBER_CUDA_CHECK(cudaEventElapsedTime(&ms[r], ev.start, ev.stop));
  }
  if (st != kSuccess) {
    // An engine that refuses (2xxx, 3xxx) or fails inside cuDNN (4xxx: e.g. its runtime
    // compilation) is passed over, as PyTorch's benchmark does; an execution failure is real.
    if (st >= 5000 || st < 2000)
      EMBER_FAIL(Runtime, op, ": cuDNN graph ", pass_name(p.pass), " failed (", describe(),
                 ", engine ", info.index, ", while benchmarking): ", failure_text(f));
    ++s->refused;
    s->last = failure_text(f);
  } else {
    check_launch(op);
    std::sort(ms, ms + 3);
    if (!s->best || ms[1] < s->best_ms) {
      s->best = std::move(plan);
      s->best_ms = ms[1];
    }
  }
  return ++s->timed >= kMaxTimed;
}

// The chosen plan of the problem (Search); null and *why when none serves (*lasting: whether
// that holds for later calls too, i.e. not for want of memory). Candidates: cuDNN's heuristics
// mode A, then its fallback engines (all timed together when benchmarking; otherwise only when
// none of mode A's serves).
std::shared_ptr<Plan> choose(const Api* a, Handle h, const Problem& p, const int64_t align[3],
                             const char* op, const Tensor& x, const Tensor& w, const Tensor& y,
                             const std::function<std::string()>& describe, std::string* why,
                             bool* lasting) {
  *lasting = true;
  auto g = std::make_unique<Graph>();
  const std::string refused = prepare(a, h, p, align, g.get());
  if (!refused.empty()) {
    *why = "cuDNN refused the convolution's graph: " + refused;
    return nullptr;
  }
  const bool timing = p.benchmark;
  (timing ? stats().benchmark_queries : stats().heuristic_queries)
      .fetch_add(1, std::memory_order_relaxed);

  Search s;
  std::vector<Desc> cfgs;
  Failure fa, ff;
  const bool a_ok = heuristic_configs(a, *g, kHeurModeA, &cfgs, &fa);
  if (!a_ok) s.last = "engine heuristics (mode A): " + failure_text(fa);
  bool fallback_ok = true;
  if (timing) fallback_ok = heuristic_configs(a, *g, kHeurModeFallback, &cfgs, &ff);
  for (Desc& c : cfgs)
    if (consider(a, h, p, &c, op, x, w, y, describe, &s)) break;
  if (!s.best && !timing) {
    std::vector<Desc> more;
    fallback_ok = heuristic_configs(a, *g, kHeurModeFallback, &more, &ff);
    for (Desc& c : more)
      if (consider(a, h, p, &c, op, x, w, y, describe, &s)) break;
  }
  if (!fallback_ok && s.last.empty()) s.last = "engine heuristics (fallback): " + failure_text(ff);
  if (!s.best) {
    std::ostringstream os;
    os << "no engine configuration served (" << s.offered << " offered, " << s.filtered
       << " filtered by the switches, " << s.refused << " refused, " << s.without_workspace
       << " without workspace)";
    if (!s.last.empty()) os << "; last: " << s.last;
    *why = os.str();
    *lasting = s.without_workspace == 0;
    return nullptr;
  }
  s.best->graph = std::move(*g);
  return std::move(s.best);
}

}  // namespace

Mode mode() { return static_cast<Mode>(g_mode.load(std::memory_order_relaxed)); }
void set_mode(Mode m) { g_mode.store(static_cast<int>(m), std::memory_order_relaxed); }
bool used_for(ScalarType dtype) {
  switch (mode()) {
    case Mode::On:
      return true;
    case Mode::Off:
      return false;
    case Mode::Auto:
      break;
  }
  return dtype == ScalarType::Float16 || dtype == ScalarType::BFloat16;
}

bool run(const Api* a, Handle h, const Problem& p, const char* op, const Tensor& x, const Tensor& w,
         const Tensor& y, const std::function<std::string()>& describe) {
  if (!a->has_backend()) return decline(std::string(op) + ": this cuDNN lacks the graph API");
  const int64_t esize = element_size(p.dtype);
  const int64_t align[3] = {alignment_of(x->data()), alignment_of(w->data()),
                            alignment_of(y->data())};
  for (int64_t al : align)
    if (al < esize)
      return decline(std::string(op) + ": a tensor not aligned to its element size (" + describe() +
                     ")");
  // The problem, its pointers' alignments and the handle the plan is finalized for (one per
  // thread and device) identify a plan.
  std::vector<int64_t> key = p.key();
  key.insert(key.end(),
             {align[0], align[1], align[2], static_cast<int64_t>(reinterpret_cast<uintptr_t>(h))});

  std::shared_ptr<Plan> plan;
  bool known = false;
  std::string declined;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.map.find(key);
    if (it != c.map.end()) {
      known = true;
      plan = it->second.plan;
      declined = it->second.declined;
    }
  }
  if (known) {
    if (!plan) return decline(declined);
    stats().cache_hits.fetch_add(1, std::memory_order_relaxed);
  } else {
    std::string why;
    bool lasting = true;
    plan = choose(a, h, p, align, op, x, w, y, describe, &why, &lasting);
    Entry e;
    e.plan = plan;
    if (!plan) e.declined = std::string(op) + ": " + why + " (" + describe() + ")";
    if (plan || lasting) {
      Cache& c = cache();
      std::lock_guard<std::mutex> lock(c.mutex);
      c.map[key] = e;
    }
    if (!plan) return decline(e.declined);
  }

  Tensor ws;
  if (!allocate_workspace(plan->workspace, x->device(), &ws))
    return decline(std::string(op) + ": out of memory for a workspace of " +
                   std::to_string(plan->workspace) + " bytes (" + describe() + ")");
  Failure f;
  const Status s = execute(a, h, *plan, x, w, y, ws, &f);
  if (s == kSuccess) {
    check_launch(op);
    stats().runs.fetch_add(1, std::memory_order_relaxed);
    stats().last_engine.store(plan->engine, std::memory_order_relaxed);
    return true;
  }
  if (declinable(s) || f.what != kExecuting) {
    // This plan cannot run the problem after all (or its variant pack was refused): the problem
    // goes to the legacy API from now on.
    const std::string why = std::string(op) + ": engine " + std::to_string(plan->engine) +
                            " declined (" + describe() + "): " + failure_text(f);
    Cache& c = cache();
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      auto it = c.map.find(key);
      if (it != c.map.end() && it->second.plan == plan) it->second = Entry{nullptr, why};
    }
    return decline(why);
  }
  EMBER_FAIL(Runtime, op, ": cuDNN graph ", pass_name(p.pass), " failed (", describe(), ", engine ",
             plan->engine, "): ", failure_text(f));
}

std::string check_descriptors(const Api* a, const Problem& p) {
  if (!a->has_backend()) return "this cuDNN lacks the graph API";
  const int64_t align[3] = {16, 16, 16};
  Graph g;
  Failure f;
  if (!build_operation(a, p, align, &g, &f)) return failure_text(f);
  return "";
}

void add_stats(py::dict& d) {
  Stats& s = stats();
  d["graph_runs"] = s.runs.load();
  d["graph_declines"] = s.declines.load();
  d["graph_heuristic_queries"] = s.heuristic_queries.load();
  d["graph_benchmark_queries"] = s.benchmark_queries.load();
  d["graph_cache_hits"] = s.cache_hits.load();
  d["graph_last_engine"] = s.last_engine.load();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    d["graph_last_decline"] = s.last_decline;
  }
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  int64_t plans = 0, declined = 0;
  for (const auto& kv : c.map) (kv.second.plan ? plans : declined) += 1;
  d["graph_cached_plans"] = plans;
  d["graph_declined_problems"] = declined;
}

void clear_cache() {
  // Destroy the plans outside the lock (a plan in use elsewhere lives on in its shared_ptr).
  std::unordered_map<std::vector<int64_t>, Entry, KeyHash> old;
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    old.swap(c.map);
  }
}

void bind(py::module_& m) {
  m.def(
      "_set_cudnn_graph",
      [](std::optional<bool> on) {
        set_mode(!on ? Mode::Auto : *on ? Mode::On : Mode::Off);
      },
      py::arg("on"),
      "Convolutions try cuDNN's graph API first (falling back to the legacy API where it "
      "declines): True for every dtype, False for none, None (the default) for float16 and "
      "bfloat16 only.");
  m.def(
      "_cudnn_graph_enabled",
      []() -> std::optional<bool> {
        const Mode m = mode();
        if (m == Mode::Auto) return std::nullopt;
        return m == Mode::On;
      },
      "The switch: True (every dtype), False (none) or None (by dtype, the default).");
}

}  // namespace graph
}  // namespace cudnn
}  // namespace cuda
}  // namespace ember
