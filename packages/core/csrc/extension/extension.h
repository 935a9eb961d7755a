// What an ember C++ extension includes: the C++ frontend (api::Tensor and every op, with
// autograd) and the pybind11 casters that pass tensors to and from Python.
//
//   #include "extension/extension.h"
//   ember::api::Tensor scale(const ember::api::Tensor& x, double s) { return x * s; }
//   PYBIND11_MODULE(my_ext, m) { m.def("scale", &scale); }
//
// ember.utils.cpp_extension.load / load_inline build such a module.
#pragma once
#include "extension/autograd_function.h"
#include "extension/indexing.h"
#include "extension/pybind.h"
#include "extension/tensor.h"
