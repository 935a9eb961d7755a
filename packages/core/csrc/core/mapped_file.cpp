#include "core/mapped_file.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "core/error.h"

namespace ember {
namespace {

// The guarded ranges, read lock-free by the signal handler. A slot is live while `begin` is
// nonzero; it is filled end-first and cleared begin-first, so the handler never pairs one
// mapping's begin with another's end. More live mappings than slots stay unguarded.
constexpr int kSlots = 4096;
struct Range {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
};
Range g_ranges[kSlots];
std::mutex g_slots_mutex;  // taken by map / unmap only, never by the handler
std::atomic<int64_t> g_faults{0};
uintptr_t g_page = 4096;
struct sigaction g_previous;

bool in_guarded_range(uintptr_t a) {
  for (int i = 0; i < kSlots; ++i) {
    uintptr_t b = g_ranges[i].begin.load(std::memory_order_acquire);
    if (b && a >= b && a < g_ranges[i].end.load(std::memory_order_acquire)) return true;
  }
  return false;
}

void on_sigbus(int sig, siginfo_t* info, void* ctx) {
  const auto addr = reinterpret_cast<uintptr_t>(info ? info->si_addr : nullptr);
  if (addr && in_guarded_range(addr)) {
    // The file shrank below this page: map a private zero page over it and retry the access.
    void* page = reinterpret_cast<void*>(addr & ~(g_page - 1));
    if (mmap(page, g_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
             0) != MAP_FAILED) {
      g_faults.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  // Not ours: whoever handled SIGBUS before us, else the default action (returning re-runs a
  // faulting access, which then terminates the process as it would have without us).
  if ((g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_sigaction) {
    g_previous.sa_sigaction(sig, info, ctx);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  } else {
    signal(SIGBUS, SIG_DFL);
    if (!info || info->si_code <= 0) raise(SIGBUS);  // sent by kill(): deliver it again
  }
}

// Puts on_sigbus first in line for SIGBUS. Checked at every mapping: a handler installed since
// (Python's faulthandler.enable(), say) becomes the one on_sigbus passes other faults on to.
void install_handler() {
  static std::mutex m;
  std::lock_guard<std::mutex> g(m);
  long page = sysconf(_SC_PAGESIZE);
  if (page > 0) g_page = static_cast<uintptr_t>(page);
  struct sigaction current;
  if (sigaction(SIGBUS, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == &on_sigbus) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = &on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  g_previous = current;
  sigaction(SIGBUS, &sa, nullptr);
}

struct Mapping {
  void* addr;
  size_t len;
  int slot;  // -1: unguarded
};

void unmap(void* ctx) {
  auto* m = static_cast<Mapping*>(ctx);
  if (m->slot >= 0) {
    std::lock_guard<std::mutex> g(g_slots_mutex);
    g_ranges[m->slot].begin.store(0, std::memory_order_release);
    g_ranges[m->slot].end.store(0, std::memory_order_release);
  }
  munmap(m->addr, m->len);
  delete m;
}

}  // namespace

Tensor map_file_range(int fd, int64_t offset, int64_t nbytes) {
  EMBER_CHECK_KIND(offset >= 0 && nbytes >= 0, Value, "map_file_range: bad range [", offset, ", ",
                   offset + nbytes, ")");
  install_handler();
  auto* m = new Mapping{nullptr, 0, -1};
  Storage storage;
  if (nbytes == 0) {
    delete m;
    storage = std::make_shared<StorageImpl>(DataPtr(nullptr, nullptr, nullptr, cpu_device()), 0);
  } else {
    const int64_t start = offset & ~static_cast<int64_t>(g_page - 1);
    const size_t skip = static_cast<size_t>(offset - start);
    m->len = skip + static_cast<size_t>(nbytes);
    m->addr = mmap(nullptr, m->len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, start);
    if (m->addr == MAP_FAILED) {
      int err = errno;
      delete m;
      EMBER_FAIL(Runtime, "mmap of ", nbytes, " bytes at offset ", offset,
                 " failed: ", std::strerror(err));
    }
    {
      std::lock_guard<std::mutex> g(g_slots_mutex);
      for (int i = 0; i < kSlots; ++i) {
        if (g_ranges[i].begin.load(std::memory_order_relaxed) == 0) {
          const auto b = reinterpret_cast<uintptr_t>(m->addr);
          g_ranges[i].end.store(b + m->len, std::memory_order_release);
          g_ranges[i].begin.store(b, std::memory_order_release);
          m->slot = i;
          break;
        }
      }
    }
    void* data = static_cast<char*>(m->addr) + skip;
    storage = std::make_shared<StorageImpl>(DataPtr(data, m, &unmap, cpu_device()),
                                            static_cast<size_t>(nbytes));
  }
  return std::make_shared<TensorImpl>(std::move(storage), ScalarType::UInt8, DimVector{nbytes},
                                      DimVector{1}, 0, std::make_shared<VersionCounter>());
}

int64_t mapped_file_faults() { return g_faults.load(std::memory_order_relaxed); }

}  // namespace ember
