// The CUDA random generators: one Philox4x32-10 stream (seed + offset, core/generator.h) per
// device, used by the random kernels (random_ops.cu) when no Generator is passed. bind_random
// adds their Python functions (manual_seed, manual_seed_all, seed, seed_all, initial_seed,
// get_state / set_state) to ember._C_cuda; cuda_module.cpp calls it.
#pragma once
#include <pybind11/pybind11.h>

#include "core/generator.h"
#include "core/tensor.h"

namespace ember {
namespace cuda {

// The default generator of CUDA device `index` (-1: the current device).
Generator& default_cuda_generator(int index = -1);

void bind_random(pybind11::module_& m);

// Fills self (a CUDA tensor of any dtype) with Bernoulli(p) draws, 1 with probability p, from
// `g` (null: the default generator of self's device), as bernoulli_(self, p) does: the C++ entry
// for kernels that need a random mask (native_dropout in nn_embedding.cu).
void bernoulli_scalar_(const Tensor& self, double p, Generator* g);

}  // namespace cuda
}  // namespace ember
