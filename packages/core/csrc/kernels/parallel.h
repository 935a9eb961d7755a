// Intra-op parallelism: parallel_for splits a range over a small pool of worker threads.
// Ranges below the grain size run inline on the caller, so small ops pay no threading cost.
#pragma once
#include <cstdint>
#include <functional>

namespace ember {

// Smallest chunk of a split pointwise loop: ops of fewer than 2 * kPointwiseGrain = 32768
// elements run on one thread (PyTorch's threshold, GRAIN_SIZE). With the pool's ~1 us hand-off,
// exp/sigmoid of 40-60k floats run 1.9x faster on two threads; copies that small break even.
constexpr int64_t kPointwiseGrain = 16384;

int get_num_threads();
void set_num_threads(int n);
// Hands a count set by set_num_threads to OpenBLAS; every BLAS wrapper calls it first.
void sync_blas_threads();
bool in_parallel_region();

// Calls f(begin, end) on disjoint chunks covering [begin, end). Exceptions thrown by any chunk
// are rethrown on the caller once every chunk finished.
void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& f);

}  // namespace ember
