// The out= tensor of an op: the checks and the resize every op with out= shares, and the
// warnings the engine raises (passed to Python's warnings module when the bindings are loaded).
#pragma once
#include <string>

#include "core/tensor.h"

namespace ember {

// Where engine warnings go. The Python module installs a handler that calls warnings.warn
// (UserWarning); a handler may throw (a warning filter turned it into an error). Without one,
// warnings are written to stderr.
using WarningHandler = void (*)(const std::string& message);
void set_warning_handler(WarningHandler handler);
void warn(const std::string& message);

// How the out= dtype must relate to the result's: CanCast (torch.can_cast(result, out), the
// rule of pointwise ops and reductions), Exact (index ops, sort), Logical (bool or uint8, as
// all / any) or Any (the caller checked it).
enum class OutDtype { CanCast, Exact, Logical, Any };

// Raises RuntimeError naming the op when out's dtype breaks `rule` against `dtype` or out is not
// on `device`.
void check_out(const Tensor& out, ScalarType dtype, Device device, const char* op,
               OutDtype rule = OutDtype::CanCast);

// Makes `out` hold `sizes`: a no-op when it already does; otherwise out gets new contiguous
// memory of that shape, and when it had elements (numel != 0) a UserWarning names the op and
// both shapes first (as PyTorch does: only empty out= tensors are resized silently). Returns
// whether it resized.
bool resize_out(const Tensor& out, const DimVector& sizes, const char* op);

// The shared out= preparation: check_out, then resize_out.
void prepare_out(const Tensor& out, const DimVector& sizes, ScalarType dtype, Device device,
                 const char* op, OutDtype rule = OutDtype::CanCast);

}  // namespace ember
