#include "kernels/parallel.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"

extern "C" void scipy_openblas_set_num_threads(int num_threads);

namespace ember {
namespace {

thread_local bool t_in_parallel = false;

// Busy-wait hint for spin loops.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins up to kSpin waiting for ready(), then returns ready(). Waking a thread blocked on a
// condition variable costs tens of microseconds (more in a VM), as much as a whole row-wise op
// on one core: workers and the caller spin this long before they sleep, so back-to-back ops
// (a training step) find them awake, as OpenMP's default wait policy does. The spin yields the
// core now and then, so it costs little when other threads are runnable.
template <class Ready>
bool spin_until(const Ready& ready) {
  constexpr auto kSpin = std::chrono::microseconds(300);
  if (ready()) return true;
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return ready();
    std::this_thread::yield();  // lets another runnable thread have this core meanwhile
  }
}

// A fixed set of workers waiting for the next region; the caller runs chunk 0 itself. A region
// is published as one atomic word (generation << 16 | chunk count), so a worker that reads it
// without the lock always sees a matching pair.
class ThreadPool {
 public:
  explicit ThreadPool(int n) { resize(n); }
  ~ThreadPool() { stop(); }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void resize(int n) {
    stop();
    stopping_.store(false);
    // Workers start from the current region so they neither miss the next one nor re-run a
    // finished one.
    const uint64_t seen = region_.load();
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, i, seen] { work(i, seen); });
  }

  void run(int nchunks, const std::function<void(int)>& task) {
    std::unique_lock<std::mutex> lock(run_mutex_);  // one parallel region at a time
    task_ = &task;
    error_ = nullptr;
    pending_.store(nchunks - 1, std::memory_order_relaxed);
    {
      // Under the mutex so that a worker going to sleep cannot miss the new region.
      std::lock_guard<std::mutex> g(mutex_);
      const uint64_t gen = (region_.load(std::memory_order_relaxed) >> 16) + 1;
      region_.store(gen << 16 | static_cast<uint64_t>(nchunks), std::memory_order_release);
    }
    if (sleepers_.load() > 0) cv_.notify_all();
    run_chunk(0);
    auto done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
    if (!spin_until(done)) {
      std::unique_lock<std::mutex> g(mutex_);
      done_cv_.wait(g, done);
    }
    task_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void run_chunk(int i) {
    t_in_parallel = true;
    try {
      (*task_)(i);
    } catch (...) {
      std::lock_guard<std::mutex> g(mutex_);
      if (!error_) error_ = std::current_exception();
    }
    t_in_parallel = false;
  }

  void work(int id, uint64_t seen) {
    for (;;) {
      auto ready = [&] {
        return stopping_.load(std::memory_order_relaxed) ||
               region_.load(std::memory_order_acquire) != seen;
      };
      if (!spin_until(ready)) {
        std::unique_lock<std::mutex> g(mutex_);
        sleepers_.fetch_add(1);
        cv_.wait(g, ready);
        sleepers_.fetch_sub(1);
      }
      if (stopping_.load()) return;
      seen = region_.load(std::memory_order_acquire);
      if (id >= static_cast<int>(seen & 0xffff)) continue;  // no chunk for this worker
      run_chunk(id);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        // The caller may be asleep: notify under the mutex so the wake-up cannot be lost.
        std::lock_guard<std::mutex> g(mutex_);
        done_cv_.notify_one();
      }
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> g(mutex_);
      stopping_.store(true);
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_, run_mutex_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int)>* task_ = nullptr;
  std::atomic<uint64_t> region_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  std::exception_ptr error_;
};

int default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
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
std::atomic<int> g_blas_threads_pending{0};  // a count OpenBLAS has not been told yet (0: none)
}  // namespace

int get_num_threads() { return g_num_threads.load(); }

void set_num_threads(int n) {
  EMBER_CHECK_KIND(n >= 1, Value, "set_num_threads: expected a positive number of threads, got ",
                   n);
  if (g_num_threads.exchange(n) != n) pool().resize(n);
  // OpenBLAS learns the count just before its next call (sync_blas_threads): setting it now
  // would restart its thread pool, which in a forked DataLoader worker busy-waits ~100 ms of CPU
  // even if the worker never multiplies a matrix.
  g_blas_threads_pending.store(n);
}

void sync_blas_threads() {
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
  int64_t nchunks =
      std::min<int64_t>({static_cast<int64_t>(p.size()), n / std::max<int64_t>(grain, 1)});
  nchunks = std::max<int64_t>(nchunks, 1);
  int64_t chunk = (n + nchunks - 1) / nchunks;
  p.run(static_cast<int>(nchunks), [&](int i) {
    int64_t b = begin + i * chunk;
    int64_t e = std::min(end, b + chunk);
    if (b < e) f(b, e);
  });
}

}  // namespace ember
