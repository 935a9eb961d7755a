// The few cuDNN entry points the CUDA backend uses (the legacy convolution API, and optionally
// the graph API's), loaded at run time with dlopen: ember builds without cuDNN's headers or
// libraries, and uses libcudnn.so.9 from NVIDIA's wheel (nvidia-cudnn-cu13) when a process can
// find it. The types, enum values and signatures below are ember's own declarations of cuDNN's
// C ABI, checked against cuDNN 9.28.1 (cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h): handles and
// descriptors are opaque pointers, every enum is a C enum (an int), so an int stands for each.
//
// Also here: the process-wide switches of ember.backends.cudnn (enabled, benchmark,
// deterministic, allow_tf32), and one cuDNN handle per (thread, device).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ember {
namespace cuda {
namespace cudnn {

// ---- the ABI ------------------------------------------------------------------------------------
using Handle = struct cudnnContext*;
using TensorDesc = struct cudnnTensorStruct*;
using FilterDesc = struct cudnnFilterStruct*;
using ConvDesc = struct cudnnConvolutionStruct*;
using BackendDesc = void*;  // cudnnBackendDescriptor_t (the graph API's descriptors)
using Status = int;         // cudnnStatus_t

constexpr Status kSuccess = 0;
// 3000 .. 3999: CUDNN_STATUS_NOT_SUPPORTED and its refinements (shape, layout, data type, ...).
inline bool is_not_supported(Status s) { return s >= 3000 && s < 4000; }
// 2000 .. 2999: CUDNN_STATUS_BAD_PARAM and its refinements.
inline bool is_bad_param(Status s) { return s >= 2000 && s < 3000; }

// cudnnDataType_t
constexpr int kDataFloat = 0, kDataDouble = 1, kDataHalf = 2, kDataBFloat16 = 9;
// cudnnTensorFormat_t
constexpr int kFormatNCHW = 0, kFormatNHWC = 1;
// cudnnMathType_t
constexpr int kDefaultMath = 0, kTensorOpMath = 1, kTensorOpMathAllowConversion = 2, kFmaMath = 3;
// cudnnConvolutionMode_t
constexpr int kCrossCorrelation = 1;
// cudnnDeterminism_t
constexpr int kDeterministic = 1;
// Algorithm counts (CUDNN_CONVOLUTION_{FWD,BWD_DATA,BWD_FILTER}_ALGO_COUNT).
constexpr int kFwdAlgoCount = 8, kBwdDataAlgoCount = 6, kBwdFilterAlgoCount = 7;

// cudnnConvolution{Fwd,BwdData,BwdFilter}AlgoPerf_t share this layout.
struct AlgoPerf {
  int algo;
  Status status;
  float time;
  size_t memory;
  int determinism;
  int math_type;
  int reserved[3];
};
static_assert(sizeof(AlgoPerf) == 48, "cuDNN's algorithm perf struct is 48 bytes");

// The entry points, filled by load(). All are cuDNN 9 symbols of libcudnn.so.9 (the convolution
// ones forward to libcudnn_cnn.so.9, which it loads on first use).
struct Api {
  size_t (*GetVersion)();
  const char* (*GetErrorString)(Status);
  void (*GetLastErrorString)(char*, size_t);  // may be null (optional)
  Status (*Create)(Handle*);
  Status (*SetStream)(Handle, cudaStream_t);
  Status (*CreateTensorDescriptor)(TensorDesc*);
  Status (*SetTensorNdDescriptor)(TensorDesc, int data_type, int nb_dims, const int dims[],
                                  const int strides[]);
  Status (*DestroyTensorDescriptor)(TensorDesc);
  Status (*CreateFilterDescriptor)(FilterDesc*);
  Status (*SetFilterNdDescriptor)(FilterDesc, int data_type, int format, int nb_dims,
                                  const int dims[]);
  Status (*DestroyFilterDescriptor)(FilterDesc);
  Status (*CreateConvolutionDescriptor)(ConvDesc*);
  Status (*SetConvolutionNdDescriptor)(ConvDesc, int array_length, const int pad[],
                                       const int stride[], const int dilation[], int mode,
                                       int compute_type);
  Status (*SetConvolutionMathType)(ConvDesc, int math_type);
  Status (*SetConvolutionGroupCount)(ConvDesc, int groups);
  Status (*DestroyConvolutionDescriptor)(ConvDesc);
  // Optional (a check of the descriptors that needs no GPU: _cudnn_forward_output_dims).
  Status (*GetConvolutionNdForwardOutputDim)(ConvDesc, TensorDesc x, FilterDesc w, int nb_dims,
                                             int out[]);
  // Forward: x, w -> y.
  Status (*GetConvolutionForwardAlgorithm_v7)(Handle, TensorDesc x, FilterDesc w, ConvDesc,
                                              TensorDesc y, int requested, int* returned,
                                              AlgoPerf* perf);
  Status (*FindConvolutionForwardAlgorithmEx)(Handle, TensorDesc, const void* x, FilterDesc,
                                              const void* w, ConvDesc, TensorDesc, void* y,
                                              int requested, int* returned, AlgoPerf* perf,
                                              void* workspace, size_t workspace_bytes);
  Status (*GetConvolutionForwardWorkspaceSize)(Handle, TensorDesc x, FilterDesc w, ConvDesc,
                                               TensorDesc y, int algo, size_t* bytes);
  Status (*ConvolutionForward)(Handle, const void* alpha, TensorDesc, const void* x, FilterDesc,
                               const void* w, ConvDesc, int algo, void* workspace,
                               size_t workspace_bytes, const void* beta, TensorDesc, void* y);
  // Backward data: w, dy -> dx.
  Status (*GetConvolutionBackwardDataAlgorithm_v7)(Handle, FilterDesc w, TensorDesc dy, ConvDesc,
                                                   TensorDesc dx, int requested, int* returned,
                                                   AlgoPerf* perf);
  Status (*FindConvolutionBackwardDataAlgorithmEx)(Handle, FilterDesc, const void* w, TensorDesc,
                                                   const void* dy, ConvDesc, TensorDesc, void* dx,
                                                   int requested, int* returned, AlgoPerf* perf,
                                                   void* workspace, size_t workspace_bytes);
  Status (*GetConvolutionBackwardDataWorkspaceSize)(Handle, FilterDesc w, TensorDesc dy, ConvDesc,
                                                    TensorDesc dx, int algo, size_t* bytes);
  Status (*ConvolutionBackwardData)(Handle, const void* alpha, FilterDesc, const void* w,
                                    TensorDesc, const void* dy, ConvDesc, int algo, void* workspace,
                                    size_t workspace_bytes, const void* beta, TensorDesc, void* dx);
  // Backward filter: x, dy -> dw.
  Status (*GetConvolutionBackwardFilterAlgorithm_v7)(Handle, TensorDesc x, TensorDesc dy, ConvDesc,
                                                     FilterDesc dw, int requested, int* returned,
                                                     AlgoPerf* perf);
  Status (*FindConvolutionBackwardFilterAlgorithmEx)(Handle, TensorDesc, const void* x, TensorDesc,
                                                     const void* dy, ConvDesc, FilterDesc, void* dw,
                                                     int requested, int* returned, AlgoPerf* perf,
                                                     void* workspace, size_t workspace_bytes);
  Status (*GetConvolutionBackwardFilterWorkspaceSize)(Handle, TensorDesc x, TensorDesc dy, ConvDesc,
                                                      FilterDesc dw, int algo, size_t* bytes);
  Status (*ConvolutionBackwardFilter)(Handle, const void* alpha, TensorDesc, const void* x,
                                      TensorDesc, const void* dy, ConvDesc, int algo,
                                      void* workspace, size_t workspace_bytes, const void* beta,
                                      FilterDesc, void* dw);
  // The graph (backend) API: optional, all or none (has_backend()); cudnn_graph_conv.cpp uses
  // it. Types and names are the ints of cudnn_graph.h's enums (cudnn_graph_conv.cpp).
  Status (*BackendCreateDescriptor)(int descriptor_type, BackendDesc* out);
  Status (*BackendDestroyDescriptor)(BackendDesc);
  Status (*BackendFinalize)(BackendDesc);
  Status (*BackendSetAttribute)(BackendDesc, int name, int type, int64_t count,
                                const void* elements);
  Status (*BackendGetAttribute)(BackendDesc, int name, int type, int64_t requested, int64_t* count,
                                void* elements);
  Status (*BackendExecute)(Handle, BackendDesc plan, BackendDesc variant_pack);

  bool has_backend() const {
    return BackendCreateDescriptor && BackendDestroyDescriptor && BackendFinalize &&
           BackendSetAttribute && BackendGetAttribute && BackendExecute;
  }
};

// ---- loading ------------------------------------------------------------------------------------
// Where load() looks, in order: $EMBER_CUDNN_LIBRARY (a file, or a folder holding
// libcudnn.so.9), then each of these folders (ember.backends.cudnn passes the lib folders of the
// `nvidia` namespace package when ember._C_cuda is imported), then the loader's own search
// (LD_LIBRARY_PATH, the system's). Other folders after a failed attempt allow another.
void set_search_dirs(std::vector<std::string> dirs);
// The entry points, loading libcudnn.so.9 on first call (thread-safe, attempted once); null when
// it cannot be loaded (load_error() says why).
const Api* api();
// Why the last load failed ("" when loaded or not attempted), naming each path tried.
std::string load_error();
// The file the library was loaded from ("" when not loaded).
std::string loaded_path();
// cuDNN's message for a status ("CUDNN_STATUS_..."), with cuDNN's last detailed error when it has
// one; "" when not loaded.
std::string error_string(Status s);

// ---- switches (ember.backends.cudnn) ------------------------------------------------------------
struct Flags {
  bool enabled = true;
  bool benchmark = false;
  bool deterministic = false;
  bool allow_tf32 = true;
};
Flags flags();
void set_flags(const Flags& f);

// This thread's handle for the current device, bound to its current stream (cudnnSetStream on
// every call). Raises on a cuDNN error.
Handle handle_for_current_stream(const char* op);

}  // namespace cudnn
}  // namespace cuda
}  // namespace ember
