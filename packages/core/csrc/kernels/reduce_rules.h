// Device-neutral rules of the reductions and scans (ops/reduce.yaml), shared by the CPU kernels
// (kernels/cpu/reduce_ops.cpp, sort_ops.cpp) and the CUDA ones (cuda/reduce_ops.cu, sort_ops.cu):
// which dims are reduced, output shapes and dtypes, argument checks with PyTorch's messages, the
// layout of a reduction (kept dims x reduced dims), and the var/std op bodies (VarOps below).
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "core/error.h"
#include "core/tensor.h"

namespace ember {
namespace reduce {

// PyTorch's names of the dtypes ("Long"), for messages that repeat PyTorch's wording.
inline const char* torch_type_name(ScalarType t) {
  switch (t) {
    case ScalarType::Bool:
      return "Bool";
    case ScalarType::UInt8:
      return "Byte";
    case ScalarType::Int8:
      return "Char";
    case ScalarType::Int16:
      return "Short";
    case ScalarType::Int32:
      return "Int";
    case ScalarType::Int64:
      return "Long";
    case ScalarType::Float16:
      return "Half";
    case ScalarType::BFloat16:
      return "BFloat16";
    case ScalarType::Float32:
      return "Float";
    case ScalarType::Float64:
      return "Double";
    case ScalarType::Complex64:
      return "ComplexFloat";
    case ScalarType::Complex128:
      return "ComplexDouble";
    case ScalarType::UInt16:
      return "UInt16";
    case ScalarType::UInt32:
      return "UInt32";
    case ScalarType::UInt64:
      return "UInt64";
    case ScalarType::Float8_e4m3fn:
      return "Float8_e4m3fn";
    case ScalarType::Float8_e5m2:
      return "Float8_e5m2";
    default:
      return "Unknown";
  }
}

// Which dims are reduced: none given (or an empty list) means all of them.
inline std::vector<bool> dim_mask(const DimVector* dims, int64_t ndim, const char* op) {
  std::vector<bool> mask(ndim, dims == nullptr || dims->empty());
  if (dims == nullptr) return mask;
  // A 0-d tensor has no dim to mark, but accepts dim 0 / -1 once (a repeat is still an error).
  std::vector<bool> seen(std::max<int64_t>(ndim, 1), false);
  for (int64_t d : *dims) {
    int64_t w = wrap_dim(d, ndim, op);
    EMBER_CHECK(!seen[w], op, ": dim ", w, " appears multiple times in the list of dims");
    seen[w] = true;
    if (ndim > 0) mask[w] = true;
  }
  return mask;
}
inline std::vector<bool> dim_mask(const std::optional<DimVector>& dims, int64_t ndim,
                                  const char* op) {
  return dim_mask(dims ? &*dims : nullptr, ndim, op);
}
inline std::vector<bool> dim_mask(std::optional<int64_t> dim, int64_t ndim, const char* op) {
  if (!dim) return dim_mask(static_cast<const DimVector*>(nullptr), ndim, op);
  DimVector d{*dim};
  return dim_mask(&d, ndim, op);
}

inline DimVector reduced_sizes(const DimVector& sizes, const std::vector<bool>& mask,
                               bool keepdim) {
  DimVector out;
  for (int64_t d = 0; d < sizes.size(); ++d) {
    if (!mask[d])
      out.push_back(sizes[d]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

// Number of elements each output reduces.
inline int64_t reduced_numel(const DimVector& sizes, const std::vector<bool>& mask) {
  int64_t n = 1;
  for (int64_t d = 0; d < sizes.size(); ++d)
    if (mask[d]) n *= sizes[d];
  return n;
}

// PyTorch's errors for reductions without an identity (max, argmax, median ...) over nothing.
inline void check_nonempty(const Tensor& self, const std::vector<bool>& mask, bool dim_given,
                           const char* op, ErrorKind no_dim_kind = ErrorKind::Index) {
  if (self->numel() != 0) return;
  if (!dim_given || self->dim() == 0) {
    detail::fail(no_dim_kind, op,
                 "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                 "reduction dim with the 'dim' argument.");
  }
  for (int64_t d = 0; d < self->dim(); ++d)
    if (mask[d] && self->size(d) == 0)
      EMBER_FAIL(Index, op, "(): Expected reduction dim ", d, " to have non-zero size.");
}

// ---- dtypes and checks of the ops -------------------------------------------------------------

// sum / prod / cumsum: floating inputs keep their dtype, integers and bool accumulate in int64.
inline ScalarType sum_dtype(ScalarType t) {
  return is_floating(t) || is_complex(t) ? t : ScalarType::Int64;
}
// sum / nansum / prod with dtype= a storage type: a uint16/32/64 input sums into int64 and, as in
// PyTorch, no kernel writes those dtypes, so the op refuses them (before casting the input).
inline void check_sum_dtype_arg(std::optional<ScalarType> dtype, const char* op) {
  if (dtype && is_storage_type(*dtype))
    detail::fail(ErrorKind::DtypeNotImplemented, op, ": not implemented for dtype ",
                 dtype_name(*dtype), " (supported: every real dtype but " EMBER_STORAGE_DTYPES ")");
}

// cumsum / cumprod: no bool scan (PyTorch has no kernel; a bool cumsum, dtype= or out=, was a
// running "any").
inline void check_cum_dtype(ScalarType ot, const char* op) {
  if (ot == ScalarType::Bool)
    detail::fail(ErrorKind::DtypeNotImplemented, op, ": not implemented for dtype bool");
}

// mean: the result dtype must be floating (`dtype`, else self's).
void check_mean_dtype(const Tensor& self, std::optional<ScalarType> dtype);
// nanmean: self must be floating, and so must dtype= (real: nansum has no complex kernel).
void check_nanmean_dtype(const Tensor& self, std::optional<ScalarType> dtype);
// argmax / argmin: PyTorch refuses bool and complex input (max / min take bool).
void check_arg_reduction_dtype(const Tensor& self, const char* op);
// amax / amin (and their aminmax): no reduced dim may be empty.
void check_no_empty_reduced_dim(const Tensor& self, const std::vector<bool>& mask, const char* op);
// amax / amin of an empty tensor over every dim (dim None or []): PyTorch's RuntimeError asking
// for a dim, not the IndexError about one empty dim.
void check_amax_dims(const Tensor& self, const std::optional<DimVector>& dim, const char* op);
// aminmax: the reduced dims, refusing an empty reduction.
std::vector<bool> aminmax_mask(const Tensor& self, std::optional<int64_t> dim);

// all / any: an explicit empty dim list reduces nothing (PyTorch 2.x); None reduces everything.
std::vector<bool> all_any_mask(const Tensor& self, const std::optional<DimVector>& dim,
                               const char* op);
// all / any / count_nonzero / nonzero of a complex tensor look at (self != 0) (real or imaginary
// part nonzero), as PyTorch's do: that bool tensor, on self's device.
Tensor complex_nonzero_mask(const Tensor& self);
// all / any return uint8 for uint8 inputs, else bool.
inline ScalarType all_any_dtype(ScalarType t) {
  return t == ScalarType::UInt8 ? ScalarType::UInt8 : ScalarType::Bool;
}

// linalg.vector_norm (norm): which norm an order p is.
enum class NormKind { Two, One, Inf, NegInf, Zero, P };
// Checks the dtype rule of norm (`dtype`, else self's, must be floating).
void check_norm_dtype(const Tensor& self, std::optional<ScalarType> dtype);
// The kind of the p-norm of x over the dims in mask; refuses p < 0 and inf over nothing.
NormKind norm_kind(const Tensor& x, const std::vector<bool>& mask, double p);

// ---- var / std ---------------------------------------------------------------------------------

// The correction of var / std from `unbiased` or `correction` (at most one given; default 1).
double var_correction(std::optional<bool> unbiased, const std::optional<Scalar>& correction,
                      const char* op);

// A var / std reduction, checked, with its outputs made (mean: only for var_mean / std_mean).
struct VarPlan {
  std::vector<bool> mask;
  double correction = 1;
  bool take_sqrt = false;
  Tensor out, mean;
};
VarPlan var_plan(const Tensor& self, const std::optional<DimVector>& dim,
                 std::optional<bool> unbiased, bool keepdim,
                 const std::optional<Scalar>& correction, bool take_sqrt, bool want_mean,
                 const char* op);

// var, std, var_mean and std_mean of every device: Device::var_into(self, plan, op) runs the
// reduction of `plan` (Welford's, in double) into plan.out and, when defined, plan.mean.
template <class Device>
struct VarOps {
  static Tensor var(const Tensor& self, const std::optional<DimVector>& dim,
                    std::optional<bool> unbiased, bool keepdim,
                    const std::optional<Scalar>& correction) {
    return std::get<0>(run(self, dim, unbiased, keepdim, correction, false, false, "var"));
  }
  static Tensor std(const Tensor& self, const std::optional<DimVector>& dim,
                    std::optional<bool> unbiased, bool keepdim,
                    const std::optional<Scalar>& correction) {
    return std::get<0>(run(self, dim, unbiased, keepdim, correction, true, false, "std"));
  }
  static std::tuple<Tensor, Tensor> var_mean(const Tensor& self,
                                             const std::optional<DimVector>& dim,
                                             std::optional<bool> unbiased, bool keepdim,
                                             const std::optional<Scalar>& correction) {
    return run(self, dim, unbiased, keepdim, correction, false, true, "var_mean");
  }
  static std::tuple<Tensor, Tensor> std_mean(const Tensor& self,
                                             const std::optional<DimVector>& dim,
                                             std::optional<bool> unbiased, bool keepdim,
                                             const std::optional<Scalar>& correction) {
    return run(self, dim, unbiased, keepdim, correction, true, true, "std_mean");
  }

 private:
  static std::tuple<Tensor, Tensor> run(const Tensor& self, const std::optional<DimVector>& dim,
                                        std::optional<bool> unbiased, bool keepdim,
                                        const std::optional<Scalar>& correction, bool take_sqrt,
                                        bool want_mean, const char* op) {
    VarPlan plan = var_plan(self, dim, unbiased, keepdim, correction, take_sqrt, want_mean, op);
    Device::var_into(self, plan, op);
    return {plan.out, plan.mean};
  }
};

// ---- the layout of a reduction -----------------------------------------------------------------

// Merges neighbouring dims (outer first) that step through memory as one.
inline void coalesce(DimVector& sizes, DimVector& strides) {
  DimVector s, t;
  for (int64_t i = 0; i < sizes.size(); ++i) {
    if (!s.empty() && t[t.size() - 1] == strides[i] * sizes[i]) {
      s[s.size() - 1] *= sizes[i];
      t[t.size() - 1] = strides[i];
    } else {
      s.push_back(sizes[i]);
      t.push_back(strides[i]);
    }
  }
  sizes = std::move(s);
  strides = std::move(t);
}

struct Geometry {
  DimVector ksizes, kstrides;  // kept dims, in the outputs' row-major order
  DimVector rsizes, rstrides;  // reduced dims
  int64_t nout = 1, nred = 1;
};

// `ordered`: the reducer reports flat indices (argmax), so reduced dims keep their logical order;
// otherwise they are sorted by stride so that any permutation of a dense tensor coalesces.
inline Geometry make_geometry(const Tensor& in, const std::vector<bool>& mask, bool ordered) {
  Geometry g;
  for (int64_t d = 0; d < in->dim(); ++d) {
    int64_t n = in->size(d);
    if (mask[d]) {
      g.nred *= n;
    } else {
      g.nout *= n;
    }
    if (n == 1) continue;
    (mask[d] ? g.rsizes : g.ksizes).push_back(n);
    (mask[d] ? g.rstrides : g.kstrides).push_back(in->stride(d));
  }
  if (!ordered && g.rsizes.size() > 1) {
    std::vector<std::pair<int64_t, int64_t>> r;
    for (int64_t i = 0; i < g.rsizes.size(); ++i) r.emplace_back(g.rstrides[i], g.rsizes[i]);
    std::stable_sort(r.begin(), r.end(), [](auto a, auto b) { return a.first > b.first; });
    for (int64_t i = 0; i < g.rsizes.size(); ++i) {
      g.rstrides[i] = r[i].first;
      g.rsizes[i] = r[i].second;
    }
  }
  coalesce(g.ksizes, g.kstrides);
  coalesce(g.rsizes, g.rstrides);
  return g;
}

}  // namespace reduce
}  // namespace ember
