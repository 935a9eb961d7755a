// Device-neutral argument checks of the random ops (uniform_, normal_, random_, bernoulli,
// multinomial) shared by the CPU and CUDA kernels, so each rule and its message lives once.
#pragma once
#include <optional>

#include "core/tensor.h"

namespace ember {

void check_uniform_range(double from, double to);
void check_exponential_lambda(double lambd);
void check_normal_std(double std);
// random_: the width of [from, to) (to defaulting to dtype's max + 1) counted in uint64 (0 for
// the full 2^64), both ends checked against dtype's bounds.
uint64_t random_range(int64_t from, std::optional<int64_t> to, ScalarType dtype);

void check_bernoulli_self(const Tensor& self);
void check_bernoulli_p_shape(const Tensor& self, const Tensor& p);
void check_bernoulli_p(double p);
// Every one of the n probabilities lies in [0, 1].
void check_probs(const double* d, int64_t n, const char* op);
// Each of the rows (of ncat float64 probabilities) is finite, non-negative and sums above 0.
void check_multinomial_probs(const double* p, int64_t rows, int64_t ncat);

}  // namespace ember
