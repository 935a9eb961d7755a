#include "kernels/parallel.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/error.h"

extern "C" void scipy_openblas_set_num_threads(int num_threads);

namespace ember {
namespace {

thread_local bool t_in_parallel = false;

// One iteration of a busy-wait: tells the core we spin (frees the sibling hyperthread, saves
// power) without giving up the time slice.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

using Clock = std::chrono::steady_clock;

// How long a worker keeps polling for the next region after finishing one before it blocks,
// and how long the caller polls for the workers' chunks before it blocks. Back-to-back ops then
// hand over in about a microsecond, while an idle process sleeps (no CPU) after this long.
int64_t ns_from_env(const char* name, int64_t dflt_us) {
  const char* s = std::getenv(name);
  if (!s || !*s) return dflt_us * 1000;
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || v < 0) return dflt_us * 1000;
  return static_cast<int64_t>(std::min<long>(v, 1'000'000)) * 1000;
}
const int64_t kSpinNs = ns_from_env("EMBER_POOL_SPIN_US", 200);
const int64_t kPauseNs = ns_from_env("EMBER_POOL_PAUSE_US", 2);

// A polite busy-wait: pause instructions only for the first kPauseNs, then it yields the core
// between polls, so that a thread queued behind this one (OpenBLAS's workers; anything under
// SCHED_FIFO, where an equal-priority spinner is never preempted) runs. spin() turns false
// once kSpinNs have passed.
class Backoff {
 public:
  bool spin() {
    if (++iter_ % 16 == 0) {
      const int64_t ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count();
      if (ns >= kSpinNs) return false;
      yield_ = ns >= kPauseNs;
    }
    if (yield_)
      sched_yield();
    else
      cpu_relax();
    return true;
  }

 private:
  const Clock::time_point start_ = Clock::now();
  unsigned iter_ = 0;
  bool yield_ = false;
};

// A region's chunk count shares the atomic word with its generation, so a worker reads both in
// one load and never pairs one region's generation with another's count (a worker that skips a
// region may wake up late, when the next one is already published).
constexpr int kChunkBits = 16;
constexpr uint64_t kChunkMask = (uint64_t{1} << kChunkBits) - 1;
constexpr int kMaxThreads = static_cast<int>(kChunkMask);

// A fixed set of workers; the caller publishes a region by bumping `state_` and runs chunk 0.
//
// Hand-off without locks: the caller stores the task, resets `claim_` and bumps `state_`
// (release); a worker polling `state_` (acquire) sees the new generation and claims chunks by
// compare-and-swap on `claim_` ((generation << 32) | next chunk), so a chunk runs exactly once
// and a worker that arrives after the region ended claims nothing. The caller claims chunks too
// once its own is done: a worker that is still waking up (or descheduled on a busy machine)
// delays nobody, the caller just runs its chunk. Every finished chunk counts in `done_`, which
// the caller polls; the next region cannot start before all chunks are done, so the task a
// worker runs stays alive.
//
// Sleeping: a worker that saw no region for kSpinNs blocks on `sleep_cv_`. It registers in
// `sleepers_` before re-checking `state_`, and the caller bumps `state_` before reading
// `sleepers_` (both seq_cst), so either the worker sees the new region or the caller sees the
// sleeper and notifies it (under the mutex, so the notification cannot slip in between the
// worker's check and its wait). The caller waits for the chunks the same way (`caller_asleep_`).
class ThreadPool {
 public:
  explicit ThreadPool(int n) { start(n); }
  ~ThreadPool() { stop(); }

  int size() const { return nthreads_.load(std::memory_order_relaxed); }

  // Runs task(i) once for every i in [0, nchunks) (at most kMaxThreads); the caller takes
  // chunk 0, then any chunk no worker has claimed yet. A pool whose size differs from `want`
  // (set_num_threads changed it) is rebuilt first, here, where no region can be running:
  // set_num_threads itself only stores the count, so it never waits for a busy pool.
  void run(int nchunks, int want, const std::function<void(int)>& task) {
    std::lock_guard<std::mutex> lock(run_mutex_);  // one parallel region at a time
    EMBER_CHECK(nchunks >= 1 && nchunks <= kMaxThreads, "parallel_for: ", nchunks,
                " chunks is outside [1, ", kMaxThreads, "]");
    want = std::min(std::max(want, 1), kMaxThreads);
    if (want != size()) {
      stop();
      start(want);
    }
    task_ = &task;
    error_ = nullptr;
    done_.store(0, std::memory_order_relaxed);
    if (park_.load(std::memory_order_relaxed)) park_.store(false, std::memory_order_relaxed);
    const uint64_t gen = (state_.load(std::memory_order_relaxed) >> kChunkBits) + 1;
    claim_.store((gen << 32) | 1, std::memory_order_relaxed);  // chunk 0 is the caller's
    state_.store((gen << kChunkBits) | static_cast<uint64_t>(nchunks), std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      {
        std::lock_guard<std::mutex> g(sleep_mutex_);
      }
      sleep_cv_.notify_all();
    }
    run_one(0, nchunks);
    drain(static_cast<uint32_t>(gen), nchunks);
    wait_for_chunks(nchunks);
    task_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

  // Tells spinning workers to go to sleep now rather than at the end of their spin: the caller
  // is about to run something that brings its own threads (OpenBLAS), which a spinning worker
  // would take a core from. The next region wakes them.
  void park() {
    if (!park_.load(std::memory_order_relaxed)) park_.store(true, std::memory_order_relaxed);
  }

 private:
  void start(int n) {
    n = std::min(n, kMaxThreads);
    stopping_.store(false, std::memory_order_relaxed);
    nthreads_.store(n, std::memory_order_relaxed);
    // Workers start from the current state so they neither miss the next region nor re-run a
    // finished one.
    const uint64_t seen = state_.load(std::memory_order_relaxed);
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, i, seen] { work(i, seen); });
  }

  void stop() {
    {
      std::lock_guard<std::mutex> g(sleep_mutex_);
      stopping_.store(true, std::memory_order_seq_cst);
    }
    sleep_cv_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
    nthreads_.store(1, std::memory_order_relaxed);
  }

  // Runs chunk i and counts it done; the last chunk of a region wakes a sleeping caller.
  void run_one(int i, int nchunks) {
    t_in_parallel = true;
    try {
      (*task_)(i);
    } catch (...) {
      std::lock_guard<std::mutex> g(error_mutex_);
      if (!error_) error_ = std::current_exception();
    }
    t_in_parallel = false;
    if (done_.fetch_add(1, std::memory_order_seq_cst) + 1 == nchunks &&
        caller_asleep_.load(std::memory_order_seq_cst)) {
      {
        std::lock_guard<std::mutex> g(done_mutex_);
      }
      done_cv_.notify_one();
    }
  }

  // Claims and runs chunks of region `gen` until none is left.
  void drain(uint32_t gen, int nchunks) {
    uint64_t w = claim_.load(std::memory_order_acquire);
    while (static_cast<uint32_t>(w >> 32) == gen && static_cast<int>(w & 0xffffffff) < nchunks) {
      if (!claim_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel,
                                        std::memory_order_acquire))
        continue;
      run_one(static_cast<int>(w & 0xffffffff), nchunks);
      w = claim_.load(std::memory_order_acquire);
    }
  }

  void wait_for_chunks(int nchunks) {
    for (Backoff b; b.spin();)
      if (done_.load(std::memory_order_acquire) == nchunks) return;
    // A chunk runs long (or its worker was descheduled): stop burning the core.
    std::unique_lock<std::mutex> g(done_mutex_);
    caller_asleep_.store(true, std::memory_order_seq_cst);
    done_cv_.wait(g, [&] { return done_.load(std::memory_order_seq_cst) == nchunks; });
    caller_asleep_.store(false, std::memory_order_relaxed);
  }

  // Returns the first state different from `seen` (or any state once stopping).
  uint64_t wait_for_region(uint64_t seen) {
    uint64_t s = state_.load(std::memory_order_acquire);
    if (s != seen) return s;
    for (Backoff b; b.spin();) {
      s = state_.load(std::memory_order_acquire);
      if (s != seen || stopping_.load(std::memory_order_relaxed)) return s;
      if (park_.load(std::memory_order_relaxed)) break;
    }
    std::unique_lock<std::mutex> g(sleep_mutex_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    sleep_cv_.wait(g, [&] {
      s = state_.load(std::memory_order_seq_cst);
      return s != seen || stopping_.load(std::memory_order_relaxed);
    });
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    return s;
  }

  void work(int id, uint64_t seen) {
    for (;;) {
      seen = wait_for_region(seen);
      if (stopping_.load(std::memory_order_acquire)) return;
      const int nchunks = static_cast<int>(seen & kChunkMask);
      if (id >= nchunks) continue;  // a region with fewer chunks than threads
      drain(static_cast<uint32_t>(seen >> kChunkBits), nchunks);
    }
  }

  std::vector<std::thread> workers_;
  std::atomic<int> nthreads_{1};  // read by parallel_for without run_mutex_
  std::mutex run_mutex_, error_mutex_;
  const std::function<void(int)>* task_ = nullptr;
  std::exception_ptr error_;

  // Written by the caller, polled by the workers: (generation << kChunkBits) | nchunks.
  alignas(64) std::atomic<uint64_t> state_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> park_{false};
  // Claimed by everyone: (generation << 32) | next chunk.
  alignas(64) std::atomic<uint64_t> claim_{0};
  // Counted by whoever runs a chunk, polled by the caller.
  alignas(64) std::atomic<int> done_{0};
  std::atomic<bool> caller_asleep_{false};

  alignas(64) std::atomic<int> sleepers_{0};
  std::mutex sleep_mutex_, done_mutex_;
  std::condition_variable sleep_cv_, done_cv_;
};

// A positive integer from the environment variable `name`, or 0 when it is unset or not one.
int threads_from_env(const char* name) {
  const char* s = std::getenv(name);
  if (!s || !*s) return 0;
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  // "4" and "4,2" (OpenMP's nested list: the first level is ours) are accepted.
  if (end == s || (*end != '\0' && *end != ',') || v < 1) return 0;
  return static_cast<int>(std::min<long>(v, 4096));
}

// CPUs this process may run on (taskset, cpusets, a container's --cpuset-cpus); 0 if unknown.
int affinity_cpus() {
  for (int ncpu = CPU_SETSIZE; ncpu <= (1 << 16); ncpu *= 4) {
    cpu_set_t* set = CPU_ALLOC(ncpu);
    if (!set) return 0;
    size_t size = CPU_ALLOC_SIZE(ncpu);
    CPU_ZERO_S(size, set);
    int rc = sched_getaffinity(0, size, set);
    int count = rc == 0 ? CPU_COUNT_S(size, set) : 0;
    CPU_FREE(set);
    if (rc == 0) return count;
    if (errno != EINVAL) return 0;  // EINVAL: the kernel's mask is larger; retry with more CPUs
  }
  return 0;
}

// The CPU bandwidth a cgroup grants (`docker --cpus=2.5` -> 3), or 0 when unlimited/unknown:
// cgroup v2 "cpu.max" ("<quota> <period>" or "max <period>"), else v1 cpu.cfs_quota_us/period.
int cgroup_cpu_quota() {
  auto ratio = [](long long quota, long long period) {
    if (quota <= 0 || period <= 0) return 0;
    return static_cast<int>(std::max<long long>(1, (quota + period - 1) / period));
  };
  if (FILE* f = std::fopen("/sys/fs/cgroup/cpu.max", "r")) {
    char q[32] = {0};
    long long period = 0;
    int got = std::fscanf(f, "%31s %lld", q, &period);
    std::fclose(f);
    if (got == 2 && std::strcmp(q, "max") != 0) return ratio(std::atoll(q), period);
    return 0;
  }
  long long quota = -1, period = 0;
  if (FILE* f = std::fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "r")) {
    if (std::fscanf(f, "%lld", &quota) != 1) quota = -1;
    std::fclose(f);
  }
  if (FILE* f = std::fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "r")) {
    if (std::fscanf(f, "%lld", &period) != 1) period = 0;
    std::fclose(f);
  }
  return ratio(quota, period);
}

// As PyTorch: EMBER_NUM_THREADS, else OMP_NUM_THREADS, else MKL_NUM_THREADS decide; otherwise the
// CPUs in the affinity mask, capped by a cgroup CPU quota, so that a container or several ranks
// sharing a node are never oversubscribed.
int default_threads() {
  for (const char* var : {"EMBER_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"})
    if (int n = threads_from_env(var)) return n;
  int n = affinity_cpus();
  if (n <= 0) {
    unsigned hw = std::thread::hardware_concurrency();
    n = hw == 0 ? 1 : static_cast<int>(hw);
  }
  if (int quota = cgroup_cpu_quota(); quota > 0) n = std::min(n, quota);
  return std::max(n, 1);
}

std::atomic<int> g_num_threads{default_threads()};

std::atomic<ThreadPool*> g_pool{nullptr};

// A forked child has only the forking thread: the parent's workers (and any lock they held)
// are gone, so the child abandons that pool (leaked) and builds a fresh one on first use.
void reset_pool_in_child() {
  g_pool.store(nullptr);
  t_in_parallel = false;
}

ThreadPool& pool() {
  ThreadPool* p = g_pool.load();
  if (p) return *p;
  static const bool registered = pthread_atfork(nullptr, nullptr, reset_pool_in_child) == 0;
  (void)registered;
  // Leaked on purpose: joining threads during static destruction can deadlock at exit.
  auto* fresh = new ThreadPool(g_num_threads.load());
  if (!g_pool.compare_exchange_strong(p, fresh)) {
    delete fresh;  // another thread won the race
    return *p;
  }
  return *fresh;
}

}  // namespace

namespace {
// A count OpenBLAS has not been told yet (0: none). OpenBLAS sizes its own pool from the core
// count, so a smaller default (affinity mask, cgroup quota, *_NUM_THREADS) is passed on at the
// first BLAS call.
int initial_blas_pending() {
  unsigned hw = std::thread::hardware_concurrency();
  int n = g_num_threads.load();
  return hw != 0 && n != static_cast<int>(hw) ? n : 0;
}
std::atomic<int> g_blas_threads_pending{initial_blas_pending()};
}  // namespace

int get_num_threads() { return g_num_threads.load(); }

void set_num_threads(int n) {
  EMBER_CHECK_KIND(n >= 1, Runtime, "set_num_threads: expected a positive number of threads, got ",
                   n);
  // Only the count changes here: the pool takes it at the start of its next region (under its
  // run lock), so this call never waits for parallel work other threads are running.
  g_num_threads.store(n);
  // OpenBLAS learns the count just before its next call (sync_blas_threads): setting it now
  // would restart its thread pool, which in a forked DataLoader worker busy-waits ~100 ms of CPU
  // even if the worker never multiplies a matrix.
  g_blas_threads_pending.store(n);
}

void sync_blas_threads() {
  // OpenBLAS runs large products on its own threads: our workers must not spin meanwhile.
  if (!t_in_parallel) {
    if (ThreadPool* p = g_pool.load(std::memory_order_relaxed)) p->park();
  }
  if (g_blas_threads_pending.load(std::memory_order_relaxed) == 0) return;
  int n = g_blas_threads_pending.exchange(0);
  if (n > 0) scipy_openblas_set_num_threads(n);
}

bool in_parallel_region() { return t_in_parallel; }

void parallel_for(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& f) {
  int64_t n = end - begin;
  if (n <= 0) return;
  int nthreads = get_num_threads();
  if (nthreads <= 1 || n < 2 * std::max<int64_t>(grain, 1) || t_in_parallel) {
    f(begin, end);
    return;
  }
  ThreadPool& p = pool();
  int64_t nchunks = std::min<int64_t>(
      {static_cast<int64_t>(std::min(nthreads, kMaxThreads)), n / std::max<int64_t>(grain, 1)});
  nchunks = std::max<int64_t>(nchunks, 1);
  int64_t chunk = (n + nchunks - 1) / nchunks;
  p.run(static_cast<int>(nchunks), nthreads, [&](int i) {
    int64_t b = begin + i * chunk;
    int64_t e = std::min(end, b + chunk);
    if (b < e) f(b, e);
  });
}

}  // namespace ember
