// Intra-op parallelism: parallel_for splits a range over a small pool of worker threads.
// Ranges below the grain size run inline on the caller, so small ops pay no threading cost.
#pragma once
#include <cstdint>
#include <functional>

namespace ember {

// Elements below which a pointwise op runs on one thread (memory-bound loops gain little
// from a second thread before this).
constexpr int64_t kPointwiseGrain = 32768;

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
