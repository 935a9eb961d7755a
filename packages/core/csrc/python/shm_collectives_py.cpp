// ember._C._ShmGroup: the data path of ember.distributed's `shm` backend. One shared-memory
// segment per process group holds a header (per-rank arrival counters, pids, the collective each
// rank is in, debug descriptors), two sets of per-rank slots (double buffering: a collective step
// writes one set while a slow rank may still read the other) and a mailbox per ordered pair of
// ranks for send/recv. Ranks synchronize through a lock-free barrier on the arrival counters
// (each rank publishes "I reached barrier k" and waits until every counter is >= k); every wait
// spins briefly, then sleeps on a futex in the segment; it has a timeout and watches the peers'
// pids and an abort flag, so a dead or hung rank is reported instead of hanging. The reductions are
// plain loops over restrict pointers that the compiler vectorizes. Python
// (ember/distributed/_shm.py) composes the collectives from these pieces.
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "python/bind_support.h"

namespace ember {
namespace {

constexpr size_t kLine = 64;
constexpr uint64_t kMagic = 0x656d6265725f7368ull;  // "ember_sh"
constexpr size_t kDescBytes = 1024;                 // debug descriptor per rank
constexpr size_t kOpNameBytes = 48;
constexpr size_t kSigTextBytes = kLine - 16;  // a barrier's signature line: k, hash, text
constexpr int64_t kSmallBytes = 64 << 10;     // all_reduce of up to this many bytes: one barrier

// Status codes shared with ember/distributed/_shm.py.
enum Status : int { kOk = 0, kTimeout = 1, kPeerDead = 2, kAborted = 3, kMismatch = 4 };

enum Op : int {
  kSum = 0,
  kAvg = 1,
  kProduct = 2,
  kMin = 3,
  kMax = 4,
  kBand = 5,
  kBor = 6,
  kBxor = 7
};

inline uint64_t load_acq(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
inline void store_rel(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

bool pid_alive(int64_t pid) {
  if (pid <= 0) return true;  // not registered yet
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  // A zombie (exited, not yet reaped by its parent) still answers kill(pid, 0).
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!std::getline(f, s)) return true;
  size_t p = s.rfind(')');
  return !(p != std::string::npos && p + 2 < s.size() && (s[p + 2] == 'Z' || s[p + 2] == 'X'));
}

// ---- reductions: d[i] = f(d[i], a[i]) (and f(f(d, a), b) for two sources per pass) ----------
#pragma GCC push_options
#pragma GCC optimize("O3")

template <typename T, typename F>
void combine1(T* __restrict d, const T* __restrict a, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) d[i] = f(d[i], a[i]);
}
template <typename T, typename F>
void combine2(T* __restrict d, const T* __restrict a, const T* __restrict b, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) d[i] = f(f(d[i], a[i]), b[i]);
}
template <typename T>
void scale(T* __restrict d, int64_t n, double s) {
  using A = opmath_t<T>;
  const A k = static_cast<A>(s);
  for (int64_t i = 0; i < n; ++i) d[i] = static_cast<T>(static_cast<A>(d[i]) * k);
}

template <typename T, typename F>
void reduce_all(T* d, const std::vector<const T*>& srcs, int64_t n, F f) {
  size_t k = 0;
  for (; k + 1 < srcs.size(); k += 2) combine2(d, srcs[k], srcs[k + 1], n, f);
  if (k < srcs.size()) combine1(d, srcs[k], n, f);
}

// Sums / products / averages of 16-bit floats: every rank's value accumulated in float and
// rounded once, so the result is the nearest 16-bit value to the exact one whatever the number
// of ranks (rounding after each addition can land an ulp away, differently per rank order).
template <typename T>
void reduce_16bit_float(T* d, const std::vector<const T*>& s, int64_t n, int op) {
  constexpr int64_t kBlock = 512;
  float acc[kBlock];
  const float k = op == kAvg ? 1.0f / static_cast<float>(s.size() + 1) : 1.0f;
  for (int64_t at = 0; at < n; at += kBlock) {
    const int64_t m = std::min(kBlock, n - at);
    for (int64_t i = 0; i < m; ++i) acc[i] = static_cast<float>(d[at + i]);
    for (const T* p : s) {
      if (op == kProduct) {
        for (int64_t i = 0; i < m; ++i) acc[i] *= static_cast<float>(p[at + i]);
      } else {
        for (int64_t i = 0; i < m; ++i) acc[i] += static_cast<float>(p[at + i]);
      }
    }
    for (int64_t i = 0; i < m; ++i) d[at + i] = static_cast<T>(op == kAvg ? acc[i] * k : acc[i]);
  }
}

template <typename T>
void reduce_typed(void* dst, const std::vector<const void*>& raw, int64_t n, int op) {
  using A = opmath_t<T>;
  T* d = static_cast<T*>(dst);
  std::vector<const T*> s;
  for (const void* p : raw) s.push_back(static_cast<const T*>(p));
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    if (op == kSum || op == kAvg || op == kProduct) return reduce_16bit_float(d, s, n, op);
  }
  switch (op) {
    case kSum:
    case kAvg:
      if constexpr (std::is_same_v<T, bool>) {
        reduce_all(d, s, n, [](bool x, bool y) { return x || y; });
      } else {
        reduce_all(d, s, n, [](T x, T y) { return static_cast<T>(A(x) + A(y)); });
      }
      break;
    case kProduct:
      if constexpr (std::is_same_v<T, bool>) {
        reduce_all(d, s, n, [](bool x, bool y) { return x && y; });
      } else {
        reduce_all(d, s, n, [](T x, T y) { return static_cast<T>(A(x) * A(y)); });
      }
      break;
    case kMin:  // NaN propagates, as torch's min does
      reduce_all(d, s, n, [](T x, T y) {
        A a = A(x), b = A(y);
        if constexpr (std::is_floating_point_v<A>) {
          if (a != a) return x;
          if (b != b) return y;
        }
        return b < a ? y : x;
      });
      break;
    case kMax:
      reduce_all(d, s, n, [](T x, T y) {
        A a = A(x), b = A(y);
        if constexpr (std::is_floating_point_v<A>) {
          if (a != a) return x;
          if (b != b) return y;
        }
        return b > a ? y : x;
      });
      break;
    case kBand:
    case kBor:
    case kBxor:
      if constexpr (std::is_integral_v<T>) {
        if (op == kBand) reduce_all(d, s, n, [](T x, T y) { return static_cast<T>(x & y); });
        if (op == kBor) reduce_all(d, s, n, [](T x, T y) { return static_cast<T>(x | y); });
        if (op == kBxor) reduce_all(d, s, n, [](T x, T y) { return static_cast<T>(x ^ y); });
      }
      break;
    default:
      break;
  }
  if constexpr (!std::is_same_v<T, bool> && !std::is_integral_v<T>) {
    if (op == kAvg) scale(d, n, 1.0 / static_cast<double>(raw.size() + 1));
  }
}

#pragma GCC pop_options

void reduce_dispatch(ScalarType dt, void* dst, const std::vector<const void*>& srcs, int64_t n,
                     int op) {
  switch (dt) {
    case ScalarType::Bool:
      return reduce_typed<bool>(dst, srcs, n, op);
    case ScalarType::UInt8:
      return reduce_typed<uint8_t>(dst, srcs, n, op);
    case ScalarType::Int8:
      return reduce_typed<int8_t>(dst, srcs, n, op);
    case ScalarType::Int16:
      return reduce_typed<int16_t>(dst, srcs, n, op);
    case ScalarType::Int32:
      return reduce_typed<int32_t>(dst, srcs, n, op);
    case ScalarType::Int64:
      return reduce_typed<int64_t>(dst, srcs, n, op);
    case ScalarType::Float16:
      return reduce_typed<Half>(dst, srcs, n, op);
    case ScalarType::BFloat16:
      return reduce_typed<BFloat16>(dst, srcs, n, op);
    case ScalarType::Float32:
      return reduce_typed<float>(dst, srcs, n, op);
    case ScalarType::Float64:
      return reduce_typed<double>(dst, srcs, n, op);
    default:
      break;  // refused before any rank waits (all_reduce's first check)
  }
}

// ---- the segment ---------------------------------------------------------------------------
class ShmGroup {
 public:
  ShmGroup(const std::string& name, bool create, int world, int rank, int64_t slot_bytes,
           int64_t mailbox_bytes)
      : name_(name), world_(world), rank_(rank), slot_(slot_bytes), mbox_(mailbox_bytes) {
    EMBER_CHECK_KIND(world >= 1 && rank >= 0 && rank < world, Value, "shm group: rank ", rank,
                     " outside world size ", world);
    EMBER_CHECK_KIND(slot_bytes >= 4096 && slot_bytes % kLine == 0 && mailbox_bytes >= 4096 &&
                         mailbox_bytes % kLine == 0,
                     Value, "shm group: slot and mailbox sizes must be multiples of 64, >= 4096");
    layout();
    int flags = create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR;
    int fd = shm_open(name.c_str(), flags, 0600);
    EMBER_CHECK_KIND(fd >= 0, Runtime, "shm group: cannot ", create ? "create" : "open",
                     " shared memory ", name, ": ", std::strerror(errno));
    if (create) {
      // posix_fallocate reserves the pages now: a full /dev/shm is an error here, not a SIGBUS
      // at the first write.
      int e = ftruncate(fd, static_cast<off_t>(total_)) == 0
                  ? posix_fallocate(fd, 0, static_cast<off_t>(total_))
                  : errno;
      if (e != 0) {
        close(fd);
        shm_unlink(name.c_str());
        struct statvfs vfs;
        std::string room = "";
        if (statvfs("/dev/shm", &vfs) == 0)
          room = " (/dev/shm has " + std::to_string(vfs.f_bavail * vfs.f_frsize >> 20) + " of " +
                 std::to_string(vfs.f_blocks * vfs.f_frsize >> 20) + " MiB free)";
        EMBER_FAIL(Runtime, "shm group: cannot reserve ", total_ >> 20,
                   " MiB of shared memory for ", name, ": ", std::strerror(e), room,
                   "; free space in /dev/shm, enlarge it (docker run --shm-size=...), or lower "
                   "EMBER_SHM_SLOT_BYTES");
      }
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < total_) {
      close(fd);
      EMBER_FAIL(Runtime, "shm group: shared memory ", name, " is smaller than the ", total_,
                 " bytes this group's layout needs (ranks disagree on world size or slot size?)");
    }
    void* p = mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    EMBER_CHECK_KIND(p != MAP_FAILED, Runtime, "shm group: cannot map ", name, ": ",
                     std::strerror(errno));
    base_ = static_cast<char*>(p);
    if (create) {
      // ftruncate gave zeroed pages; the magic marks the header as laid out.
      *u64(0) = kMagic;
      *u64(8) = static_cast<uint64_t>(world);
      *u64(16) = static_cast<uint64_t>(slot_bytes);
    } else {
      EMBER_CHECK_KIND(*u64(0) == kMagic && *u64(8) == static_cast<uint64_t>(world) &&
                           *u64(16) == static_cast<uint64_t>(slot_bytes),
                       Runtime, "shm group: segment ", name,
                       " was made for another group layout (world size or slot size differ)");
    }
    store_rel(u64(pid_off_ + rank * kLine), static_cast<uint64_t>(getpid()));
  }
  ~ShmGroup() { unmap(); }

  void unmap() {
    if (base_) munmap(base_, total_);
    base_ = nullptr;
  }
  bool unlink() { return shm_unlink(name_.c_str()) == 0; }

  // Blocks until every rank reached this barrier. Returns a Status; on kTimeout / kPeerDead the
  // ranks that did not arrive are in `missing()`.
  int barrier(double timeout_s) {
    check_mapped();
    uint64_t k = ++arrivals_;
    // Every rank publishes the signature of the collective it is in before it arrives; once all
    // arrived, each compares them, so ranks that disagree (another collective, other sizes,
    // dtypes or roots) all fail here instead of mixing unrelated bytes. Lines alternate with
    // the barrier's parity: a peer can be one barrier ahead, never two.
    char* line = sig_line(k, rank_);
    std::memcpy(line + 16, sig_text_, kSigTextBytes);
    *reinterpret_cast<uint64_t*>(line + 8) = sig_;
    store_rel(reinterpret_cast<uint64_t*>(line), k);
    store_rel(arrival(rank_), k);
    notify();
    int s = wait_all(k, timeout_s);
    if (s != kOk) return s;
    for (int j = 0; j < world_; ++j) {
      const char* other = sig_line(k, j);
      if (load_acq(reinterpret_cast<const uint64_t*>(other)) == k &&
          *reinterpret_cast<const uint64_t*>(other + 8) == sig_)
        continue;
      mismatch_.clear();
      for (int r = 0; r < world_; ++r) {
        const char* t = sig_line(k, r) + 16;
        mismatch_.emplace_back(r, std::string(t, strnlen(t, kSigTextBytes)));
      }
      return kMismatch;
    }
    return kOk;
  }

  // The signature the next barriers publish (see barrier): what every rank must agree on.
  void set_sig(const std::string& text) {
    std::memset(sig_text_, 0, kSigTextBytes);
    std::memcpy(sig_text_, text.data(), std::min(text.size(), kSigTextBytes - 1));
    sig_ = 1469598103934665603ull;  // FNV-1a: the same hash in every process
    for (unsigned char c : text) sig_ = (sig_ ^ c) * 1099511628211ull;
  }
  // (rank, signature) of every rank at the last barrier that found them different.
  std::vector<std::pair<int, std::string>> mismatch() const { return mismatch_; }

  // all_reduce (dst < 0) or reduce to dst of `numel` elements at `ptr`, in chunks of slot size.
  int all_reduce(uintptr_t ptr, int64_t numel, int dtype, int op, int dst, double timeout_s) {
    check_mapped();
    const ScalarType dt = static_cast<ScalarType>(dtype);
    EMBER_CHECK_KIND(dtype >= 0 && dtype < kNumScalarTypes && !is_complex(dt), Type,
                     "all_reduce: not implemented for dtype ", dtype_name(dt),
                     " (supported: all real dtypes)");
    const int64_t isz = itemsize(dt);
    const int64_t per_chunk = slot_ / isz;
    const int64_t line = static_cast<int64_t>(kLine) / isz;  // shares start on cache lines
    char* data = reinterpret_cast<char*>(ptr);
    for (int64_t start = 0; start < numel; start += per_chunk) {
      const int64_t n = std::min(per_chunk, numel - start);
      char* src = data + start * isz;
      const int set = flip();
      const int64_t share = ((n + world_ - 1) / world_ + line - 1) / line * line;
      auto lo = [&](int j) { return std::min<int64_t>(n, share * j); };
      auto hi = [&](int j) { return std::min<int64_t>(n, share * (j + 1)); };
      auto bytes = [&](int64_t k) { return static_cast<size_t>(k * isz); };
      const bool fused = dst < 0;
      if (fused && n * isz <= kSmallBytes) {
        // Small: one barrier instead of two. Every rank reduces all slots itself, in rank order,
        // so all ranks get the same bits.
        std::memcpy(slot(set, rank_), src, bytes(n));
        int s = barrier(timeout_s);
        if (s != kOk) return s;
        std::vector<const void*> others;
        for (int j = 1; j < world_; ++j) others.push_back(slot(set, j));
        std::memcpy(src, slot(set, 0), bytes(n));
        reduce_dispatch(dt, src, others, n, op);
        continue;
      }
      // all_reduce: publish the shares the other ranks reduce; this rank's own share is read
      // from the tensor itself. reduce: publish everything (the tensor stays unchanged).
      for (int j = 0; j < world_; ++j)
        if ((j != rank_ || !fused) && hi(j) > lo(j))
          std::memcpy(slot(set, rank_) + bytes(lo(j)), src + bytes(lo(j)), bytes(hi(j) - lo(j)));
      int s = barrier(timeout_s);
      if (s != kOk) return s;
      // Reduce-scatter: this rank reduces the rank-th share of every rank's contribution and
      // publishes the result in its own slot. Blocks of 64 KiB keep the result in cache between
      // the reduction and the copy.
      const int64_t block = std::max<int64_t>(line, (int64_t{1} << 16) / isz);
      for (int64_t b = lo(rank_); b < hi(rank_); b += block) {
        const int64_t m = std::min(block, hi(rank_) - b);
        std::vector<const void*> others;
        for (int j = 0; j < world_; ++j)
          if (j != rank_) others.push_back(slot(set, j) + bytes(b));
        char* mine = slot(set, rank_) + bytes(b);
        if (fused) {
          reduce_dispatch(dt, src + bytes(b), others, m, op);
          std::memcpy(mine, src + bytes(b), bytes(m));
        } else {
          reduce_dispatch(dt, mine, others, m, op);
        }
      }
      s = barrier(timeout_s);
      if (s != kOk) return s;
      // All-gather: copy each reduced share from the slot of the rank that made it.
      if (fused || dst == rank_) {
        for (int j = 0; j < world_; ++j)
          if ((j != rank_ || !fused) && hi(j) > lo(j))
            std::memcpy(src + bytes(lo(j)), slot(set, j) + bytes(lo(j)), bytes(hi(j) - lo(j)));
      }
    }
    return kOk;
  }

  // One exchange step: writes each (dst_offset, src_ptr, nbytes) into this rank's slot of the
  // next buffer set, waits for every rank, then copies each (owner, src_offset, dst_ptr, nbytes)
  // out of rank `owner`'s slot and runs each (dst_ptr, offset, numel, dtype, op) reduction over
  // all slots. Offsets are within a slot.
  int exchange(const std::vector<std::tuple<int64_t, uintptr_t, int64_t>>& puts,
               const std::vector<std::tuple<int, int64_t, uintptr_t, int64_t>>& gets,
               const std::vector<std::tuple<uintptr_t, int64_t, int64_t, int, int>>& reduces,
               double timeout_s) {
    check_mapped();
    const int set = flip();
    for (const auto& [off, p, nb] : puts) {
      EMBER_CHECK_KIND(off >= 0 && nb >= 0 && off + nb <= slot_, Value,
                       "shm exchange: put out of slot");
      std::memcpy(slot(set, rank_) + off, reinterpret_cast<const void*>(p),
                  static_cast<size_t>(nb));
    }
    int s = barrier(timeout_s);
    if (s != kOk) return s;
    for (const auto& [owner, off, p, nb] : gets) {
      EMBER_CHECK_KIND(owner >= 0 && owner < world_ && off >= 0 && nb >= 0 && off + nb <= slot_,
                       Value, "shm exchange: get out of slot");
      std::memcpy(reinterpret_cast<void*>(p), slot(set, owner) + off, static_cast<size_t>(nb));
    }
    // Reductions over every rank's slot at one offset: dst = op(slot0[off:], slot1[off:], ...).
    for (const auto& [p, off, numel, dtype, op] : reduces) {
      ScalarType dt = static_cast<ScalarType>(dtype);
      const int64_t nb = numel * itemsize(dt);
      EMBER_CHECK_KIND(off >= 0 && numel >= 0 && off + nb <= slot_, Value,
                       "shm exchange: reduce out of slot");
      void* d = reinterpret_cast<void*>(p);
      std::memcpy(d, slot(set, 0) + off, static_cast<size_t>(nb));
      std::vector<const void*> others;
      for (int j = 1; j < world_; ++j) others.push_back(slot(set, j) + off);
      reduce_dispatch(dt, d, others, numel, op);
    }
    return kOk;
  }

  // Point to point through the (src -> dst) mailbox: a one-message channel, in chunks.
  // Returns (status, bytes of the message the receiver found, its tag).
  std::tuple<int, int64_t, int64_t> send(int dst, uintptr_t ptr, int64_t nbytes, int64_t tag,
                                         double timeout_s) {
    check_peer(dst);
    char* mb = mailbox(rank_, dst);
    uint64_t* written = reinterpret_cast<uint64_t*>(mb);
    uint64_t* read = reinterpret_cast<uint64_t*>(mb + kLine);
    int64_t* meta = reinterpret_cast<int64_t*>(mb + 2 * kLine);
    const char* src = reinterpret_cast<const char*>(ptr);
    int64_t done = 0;
    do {
      const uint64_t w = load_acq(written);
      int s = wait_value(read, w, dst, timeout_s);  // the previous chunk was taken
      if (s != kOk) return {s, 0, 0};
      const int64_t n = std::min(mbox_, nbytes - done);
      meta[0] = nbytes;
      meta[1] = tag;
      meta[2] = done;
      std::memcpy(mb + 3 * kLine, src + done, static_cast<size_t>(n));
      store_rel(written, w + 1);
      notify();
      done += n;
    } while (done < nbytes);
    return {kOk, nbytes, tag};
  }

  std::tuple<int, int64_t, int64_t> recv(int src, uintptr_t ptr, int64_t nbytes, int64_t tag,
                                         double timeout_s) {
    check_peer(src);
    char* mb = mailbox(src, rank_);
    uint64_t* written = reinterpret_cast<uint64_t*>(mb);
    uint64_t* read = reinterpret_cast<uint64_t*>(mb + kLine);
    int64_t* meta = reinterpret_cast<int64_t*>(mb + 2 * kLine);
    char* out = reinterpret_cast<char*>(ptr);
    int64_t done = 0;
    do {
      const uint64_t r = load_acq(read);
      int s = wait_value(written, r + 1, src, timeout_s);
      if (s != kOk) return {s, 0, 0};
      if (meta[0] != nbytes || meta[1] != tag) {
        // Leave the message for a matching receive; the caller reports the mismatch.
        return {kMismatch, meta[0], meta[1]};
      }
      const int64_t n = std::min(mbox_, nbytes - done);
      std::memcpy(out + done, mb + 3 * kLine, static_cast<size_t>(n));
      store_rel(read, r + 1);
      notify();
      done += n;
    } while (done < nbytes);
    return {kOk, nbytes, tag};
  }

  // Whether a message from src is waiting: (waiting, its bytes, its tag); does not block.
  std::tuple<bool, int64_t, int64_t> peek(int src) const {
    check_peer(src);
    char* mb = mailbox(src, rank_);
    const uint64_t w = load_acq(reinterpret_cast<const uint64_t*>(mb));
    const uint64_t r = load_acq(reinterpret_cast<const uint64_t*>(mb + kLine));
    if (w <= r) return {false, 0, 0};
    const int64_t* meta = reinterpret_cast<const int64_t*>(mb + 2 * kLine);
    return {true, meta[0], meta[1]};
  }

  // Diagnostics and the debug check.
  std::vector<int> missing() const {
    std::vector<int> out;
    for (int j = 0; j < world_; ++j)
      if (load_acq(arrival(j)) < arrivals_) out.push_back(j);
    return out;
  }
  std::vector<int> dead() const {
    std::vector<int> out;
    for (int j = 0; j < world_; ++j)
      if (!pid_alive(static_cast<int64_t>(load_acq(u64(pid_off_ + j * kLine))))) out.push_back(j);
    return out;
  }
  int64_t pid(int r) const { return static_cast<int64_t>(load_acq(u64(pid_off_ + r * kLine))); }
  void set_op(uint64_t seq, const std::string& name) {
    set_sig(name);  // refined by the collective's sizes where the backend knows them
    char* line = base_ + op_off_ + rank_ * kLine;
    std::memset(line + 8, 0, kOpNameBytes);
    std::memcpy(line + 8, name.data(), std::min(name.size(), kOpNameBytes - 1));
    store_rel(reinterpret_cast<uint64_t*>(line), seq);
  }
  py::tuple get_op(int r) const {
    const char* line = base_ + op_off_ + r * kLine;
    return py::make_tuple(load_acq(reinterpret_cast<const uint64_t*>(line)),
                          std::string(line + 8, strnlen(line + 8, kOpNameBytes)));
  }
  void set_desc(const std::string& d) {
    EMBER_CHECK_KIND(d.size() < kDescBytes - 8, Value, "shm group: descriptor too long");
    char* p = base_ + desc_off_ + rank_ * kDescBytes;
    *reinterpret_cast<uint64_t*>(p) = d.size();
    std::memcpy(p + 8, d.data(), d.size());
  }
  py::bytes get_desc(int r) const {
    const char* p = base_ + desc_off_ + r * kDescBytes;
    return py::bytes(p + 8, *reinterpret_cast<const uint64_t*>(p));
  }
  void abort(const std::string& why) {
    if (!base_) return;
    char* p = base_ + abort_off_;
    std::memset(p + 16, 0, kDescBytes - 16);
    std::memcpy(p + 16, why.data(), std::min(why.size(), kDescBytes - 17));
    *reinterpret_cast<int64_t*>(p + 8) = rank_;
    store_rel(reinterpret_cast<uint64_t*>(p), 1);
    notify();
  }
  py::object abort_reason() const {
    const char* p = base_ + abort_off_;
    if (!load_acq(reinterpret_cast<const uint64_t*>(p))) return py::none();
    return py::make_tuple(*reinterpret_cast<const int64_t*>(p + 8),
                          std::string(p + 16, strnlen(p + 16, kDescBytes - 17)));
  }

  void set_wait_policy(int64_t spin_us, int64_t yield_us) {
    spin_us_ = std::max<int64_t>(0, spin_us);
    yield_us_ = std::max<int64_t>(0, yield_us);
  }
  int64_t slot_bytes() const { return slot_; }
  int64_t mailbox_bytes() const { return mbox_; }
  int64_t total_bytes() const { return static_cast<int64_t>(total_); }
  const std::string& name() const { return name_; }

 private:
  void layout() {
    size_t off = 3 * kLine;  // magic, world, slot size; then the abort record
    abort_off_ = off;
    off += kDescBytes;
    arrive_off_ = off;
    off += world_ * kLine;
    pid_off_ = off;
    off += world_ * kLine;
    op_off_ = off;
    off += world_ * kLine;
    desc_off_ = off;
    off += world_ * kDescBytes;
    sig_off_ = off;
    off += 2 * world_ * kLine;
    off = (off + 4095) / 4096 * 4096;
    slots_off_ = off;
    off += 2 * static_cast<size_t>(world_) * slot_;
    mbox_off_ = off;
    off += static_cast<size_t>(world_) * world_ * (3 * kLine + mbox_);
    total_ = off;
  }
  uint64_t* u64(size_t off) const { return reinterpret_cast<uint64_t*>(base_ + off); }
  uint64_t* arrival(int r) const { return u64(arrive_off_ + r * kLine); }
  char* sig_line(uint64_t k, int r) const {
    return base_ + sig_off_ + ((k & 1) * world_ + r) * kLine;
  }
  char* slot(int set, int r) const {
    return base_ + slots_off_ + (static_cast<size_t>(set) * world_ + r) * slot_;
  }
  char* mailbox(int src, int dst) const {
    return base_ + mbox_off_ + (static_cast<size_t>(src) * world_ + dst) * (3 * kLine + mbox_);
  }
  int flip() { return static_cast<int>(steps_++ & 1); }
  void check_mapped() const {
    EMBER_CHECK_KIND(base_ != nullptr, Runtime, "shm group: the process group was destroyed");
  }
  void check_peer(int r) const {
    check_mapped();
    EMBER_CHECK_KIND(r >= 0 && r < world_ && r != rank_, Value, "shm group: peer rank ", r,
                     " is not another rank of a group of size ", world_);
  }

  // The group's futex: every state change (arrival, mailbox) bumps the word and wakes sleepers,
  // if any. Waiters spin for a few tens of microseconds (a peer on another core arrives within
  // that), then yield for up to a millisecond (a peer sharing this core runs), then sleep on the
  // futex, so a long wait gives the CPU to the rank being waited for.
  uint32_t* fword() const { return reinterpret_cast<uint32_t*>(base_ + kLine); }
  uint32_t* fwaiters() const { return reinterpret_cast<uint32_t*>(base_ + 2 * kLine); }
  void notify() {
    __atomic_fetch_add(fword(), 1u, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(fwaiters(), __ATOMIC_SEQ_CST) > 0)
      syscall(SYS_futex, fword(), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }

  // Checks the abort flag, the peers' pids (every 50 ms) and the clock while waiting.
  template <typename Ready, typename Peers>
  int wait_for(Ready ready, Peers waiting_on, double timeout_s) {
    if (ready()) return kOk;
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const uint64_t* aborted = u64(abort_off_);
    for (int it = 0;; ++it) {
      for (int i = 0; i < 64; ++i) {
        if (ready()) return kOk;
        cpu_relax();
      }
      if (load_acq(aborted)) return kAborted;
      if ((it & 7) != 7) continue;
      const auto waited = clock::now() - t0;
      if (waited > std::chrono::microseconds(spin_us_ + yield_us_)) break;
      if (waited > std::chrono::microseconds(spin_us_)) sched_yield();
    }
    __atomic_fetch_add(fwaiters(), 1u, __ATOMIC_SEQ_CST);
    auto last_check = clock::now();
    int result = kOk;
    for (;;) {
      const uint32_t v = __atomic_load_n(fword(), __ATOMIC_SEQ_CST);
      if (ready()) break;
      if (load_acq(aborted)) {
        result = kAborted;
        break;
      }
      timespec ts{0, 20 * 1000 * 1000};
      syscall(SYS_futex, fword(), FUTEX_WAIT, v, &ts, nullptr, 0);
      const auto now = clock::now();
      if (now - last_check > std::chrono::milliseconds(50)) {
        last_check = now;
        if (ready()) break;
        if (waiting_on()) {
          result = kPeerDead;
          break;
        }
        if (std::chrono::duration<double>(now - t0).count() > timeout_s) {
          result = kTimeout;
          break;
        }
      }
    }
    __atomic_fetch_sub(fwaiters(), 1u, __ATOMIC_SEQ_CST);
    return result;
  }
  int wait_all(uint64_t k, double timeout_s) {
    auto ready = [&] {
      for (int j = 0; j < world_; ++j)
        if (load_acq(arrival(j)) < k) return false;
      return true;
    };
    auto dead_peer = [&] {
      for (int j = 0; j < world_; ++j)
        if (load_acq(arrival(j)) < k && !pid_alive(pid(j))) return true;
      return false;
    };
    return wait_for(ready, dead_peer, timeout_s);
  }
  int wait_value(const uint64_t* p, uint64_t v, int peer, double timeout_s) {
    return wait_for([&] { return load_acq(p) >= v; }, [&] { return !pid_alive(pid(peer)); },
                    timeout_s);
  }

  std::string name_;
  int world_, rank_;
  int64_t slot_, mbox_;
  size_t abort_off_ = 0, arrive_off_ = 0, pid_off_ = 0, op_off_ = 0, desc_off_ = 0, sig_off_ = 0,
         slots_off_ = 0, mbox_off_ = 0, total_ = 0;
  char* base_ = nullptr;
  uint64_t arrivals_ = 0, steps_ = 0;
  int64_t spin_us_ = 50, yield_us_ = 1000;  // then the futex
  uint64_t sig_ = 0;
  char sig_text_[kSigTextBytes] = {};
  std::vector<std::pair<int, std::string>> mismatch_;
};

}  // namespace

void bind_shm_collectives(py::module_& m) {
  py::class_<ShmGroup>(m, "_ShmGroup",
                       "Shared-memory segment of one ember.distributed `shm` process group.")
      .def(py::init<const std::string&, bool, int, int, int64_t, int64_t>(), py::arg("name"),
           py::arg("create"), py::arg("world_size"), py::arg("rank"), py::arg("slot_bytes"),
           py::arg("mailbox_bytes"))
      .def("unmap", &ShmGroup::unmap)
      .def("unlink", &ShmGroup::unlink)
      .def("barrier", &ShmGroup::barrier, py::call_guard<py::gil_scoped_release>(),
           py::arg("timeout"))
      .def("all_reduce", &ShmGroup::all_reduce, py::call_guard<py::gil_scoped_release>(),
           py::arg("ptr"), py::arg("numel"), py::arg("dtype"), py::arg("op"), py::arg("dst"),
           py::arg("timeout"))
      .def("exchange", &ShmGroup::exchange, py::call_guard<py::gil_scoped_release>(),
           py::arg("puts"), py::arg("gets"), py::arg("reduces"), py::arg("timeout"))
      .def("send", &ShmGroup::send, py::call_guard<py::gil_scoped_release>(), py::arg("dst"),
           py::arg("ptr"), py::arg("nbytes"), py::arg("tag"), py::arg("timeout"))
      .def("recv", &ShmGroup::recv, py::call_guard<py::gil_scoped_release>(), py::arg("src"),
           py::arg("ptr"), py::arg("nbytes"), py::arg("tag"), py::arg("timeout"))
      .def("peek", &ShmGroup::peek, py::arg("src"))
      .def("missing", &ShmGroup::missing)
      .def("dead", &ShmGroup::dead)
      .def("pid", &ShmGroup::pid)
      .def("set_op", &ShmGroup::set_op)
      .def("get_op", &ShmGroup::get_op)
      .def("set_desc", [](ShmGroup& g, const py::bytes& b) { g.set_desc(std::string(b)); })
      .def("get_desc", &ShmGroup::get_desc)
      .def("set_sig", &ShmGroup::set_sig, py::arg("text"),
           "What every rank must agree on in the current collective (checked at each barrier).")
      .def("mismatch", &ShmGroup::mismatch)
      .def("abort", &ShmGroup::abort)
      .def("abort_reason", &ShmGroup::abort_reason)
      .def("set_wait_policy", &ShmGroup::set_wait_policy, py::arg("spin_us"), py::arg("yield_us"),
           "Microseconds a wait spins, then yields, before it sleeps on the futex.")
      .def_property_readonly("slot_bytes", &ShmGroup::slot_bytes)
      .def_property_readonly("mailbox_bytes", &ShmGroup::mailbox_bytes)
      .def_property_readonly("total_bytes", &ShmGroup::total_bytes)
      .def_property_readonly("name", &ShmGroup::name);
  m.def(
      "_shm_reduce",
      [](uintptr_t dst, const std::vector<uintptr_t>& srcs, int64_t numel, int dtype, int op) {
        std::vector<const void*> s;
        for (uintptr_t p : srcs) s.push_back(reinterpret_cast<const void*>(p));
        py::gil_scoped_release nogil;
        reduce_dispatch(static_cast<ScalarType>(dtype), reinterpret_cast<void*>(dst), s, numel, op);
      },
      py::arg("dst"), py::arg("srcs"), py::arg("numel"), py::arg("dtype"), py::arg("op"),
      "dst[i] = op(dst[i], srcs[0][i], ...) over raw contiguous buffers (AVG divides by "
      "len(srcs) + 1); the reduction loops of the shm backend.");
}

}  // namespace ember
