// <torch/extension.h> for ember: <torch/types.h>'s names plus pybind11 and the casters that
// pass tensors to and from Python (extension/pybind.h), so the C++ sources of a PyTorch
// extension built with ember.utils.cpp_extension (load_inline, load, CppExtension) compile
// against ember unchanged.
#pragma once
#include "extension/autograd_function.h"
#include "extension/pybind.h"
#include "torch/types.h"

namespace py = pybind11;
