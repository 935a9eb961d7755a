#include "core/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace ember {
namespace {

std::atomic<int64_t> g_live{0};
std::atomic<uint64_t> g_counter{0};
std::atomic<ShmCreateHook> g_create_hook{nullptr};
std::atomic<long> g_hooked_pid{0};

// The create hook, once per pid, before the first named segment (see set_shm_create_hook).
void before_named_segment() {
  long me = static_cast<long>(getpid());
  // Once per pid, even when the hook fails (it is best effort). No lock: the hook takes the GIL,
  // which a thread waiting here could hold.
  if (g_hooked_pid.exchange(me) == me) return;
  if (ShmCreateHook hook = g_create_hook.load()) hook();
}

// The head of a Pooled segment; the data starts kHeader bytes in (cache-line aligned).
struct Header {
  std::atomic<int64_t> refs;
};
constexpr size_t kHeader = 64;
constexpr size_t kPoolMax = 16;   // a worker's recycled segments (busy ones included)
constexpr size_t kCacheMax = 64;  // a receiver's cached mappings

// One mapping of a segment in this process.
struct Mapping {
  std::string name;
  char* base = nullptr;
  size_t len = 0;
  pid_t creator = 0;
  int fd = -1;             // Unnamed: the segment's descriptor (its only handle)
  int64_t local_uses = 0;  // receiver cache: live storages on this mapping
  bool orphan = false;     // receiver cache: dropped from the cache, unmap at last use
  Header* header() const { return reinterpret_cast<Header*>(base); }
};

// The DataPtr context of every shared storage.
struct ShmRef : ShmSegment {
  std::unique_ptr<Mapping> owned;  // Owner / Handoff: this storage's own mapping
  Mapping* map = nullptr;
  std::atomic<bool> sent{false};  // Handoff: a receiver will unlink the name
};

std::string errno_str(int err) { return std::string(std::strerror(err)); }

std::string shm_space() {
  struct statvfs st{};
  if (statvfs("/dev/shm", &st) != 0) return "";
  double total = double(st.f_blocks) * st.f_frsize, avail = double(st.f_bavail) * st.f_frsize;
  std::ostringstream os;
  os.precision(4);
  os << " (/dev/shm has " << avail / (1 << 20) << " MiB free of " << total / (1 << 20) << " MiB)";
  return os.str();
}

[[noreturn]] void fail_no_space(size_t nbytes, int err) {
  EMBER_FAIL(Runtime, "unable to allocate ", nbytes,
             " bytes of shared memory in /dev/shm: ", errno_str(err), shm_space(),
             ". /dev/shm is too small; in a Docker container raise it with --shm-size (e.g. "
             "`docker run --shm-size=8g`), or on the host remount it larger "
             "(`mount -o remount,size=8G /dev/shm`). Otherwise lower the memory in flight: "
             "DataLoader(num_workers=0), fewer workers, a smaller batch_size or prefetch_factor.");
}

char* map_fd(int fd, size_t len, const std::string& name) {
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    EMBER_FAIL(Runtime, "shared memory: mmap of ", len, " bytes of ", name,
               " failed: ", errno_str(err));
  }
  return static_cast<char*>(p);
}

// Creates, reserves and maps a new segment of `len` bytes (unnamed: removes the name at once and
// keeps the descriptor).
std::unique_ptr<Mapping> create_mapping(size_t len, size_t nbytes, bool unnamed = false) {
  static const uint32_t salt = std::random_device{}();
  auto m = std::make_unique<Mapping>();
  m->creator = getpid();
  m->len = len;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    m->name = "/" + shm_prefix(m->creator) + std::to_string(g_counter.fetch_add(1)) + "_" +
              std::to_string(salt);
    fd = shm_open(m->name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && (errno != EEXIST || attempt > 100)) {
      int err = errno;
      if (err == ENOSPC) fail_no_space(nbytes, err);
      EMBER_FAIL(Runtime, "shared memory: shm_open(", m->name, ") failed: ", errno_str(err),
                 err == EMFILE ? " (too many open files: raise `ulimit -n`)" : "");
    }
  }
  // Reserve the pages now: a sparse ftruncate'd segment would SIGBUS on first touch when
  // /dev/shm fills up, instead of raising here.
  int rc;
  do {
    rc = posix_fallocate(fd, 0, static_cast<off_t>(len));
  } while (rc == EINTR);
  if (rc == EOPNOTSUPP || rc == EINVAL) rc = ftruncate(fd, static_cast<off_t>(len)) ? errno : 0;
  if (rc != 0) {
    close(fd);
    shm_unlink(m->name.c_str());
    if (rc == ENOSPC || rc == EFBIG || rc == ENOMEM) fail_no_space(nbytes, rc);
    EMBER_FAIL(Runtime, "shared memory: reserving ", nbytes, " bytes in ", m->name,
               " failed: ", errno_str(rc));
  }
  try {
    m->base = map_fd(fd, len, m->name);
  } catch (...) {
    close(fd);
    shm_unlink(m->name.c_str());
    throw;
  }
  if (unnamed) {
    shm_unlink(m->name.c_str());
    m->fd = fd;
  } else {
    close(fd);  // the mapping keeps the segment alive
  }
  return m;
}

std::unique_ptr<Mapping> map_open_fd(int fd, const std::string& name, size_t min_len);

std::unique_ptr<Mapping> open_mapping(const std::string& name, size_t min_len) {
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    int err = errno;
    EMBER_FAIL(Runtime, "shared memory: cannot open segment ", name, ": ", errno_str(err),
               err == ENOENT ? " (the sender freed the tensor, or it was already received once, "
                               "before this process mapped it: keep the tensor alive in the "
                               "sending process until it has been received)"
                             : "");
  }
  auto m = map_open_fd(fd, name, min_len);
  close(fd);
  return m;
}

// Maps the open segment fd (the caller closes or keeps fd).
std::unique_ptr<Mapping> map_open_fd(int fd, const std::string& name, size_t min_len) {
  struct stat st{};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < min_len) {
    EMBER_FAIL(Runtime, "shared memory: segment ", name, " holds ", st.st_size,
               " bytes, fewer than the ", min_len, " expected");
  }
  auto m = std::make_unique<Mapping>();
  m->name = name;
  m->len = static_cast<size_t>(st.st_size);
  m->base = map_fd(fd, m->len, name);
  return m;
}

// ---- Owner / Handoff: one mapping per storage -------------------------------------------------

void release_owned(void* ctx) {
  std::unique_ptr<ShmRef> ref(static_cast<ShmRef*>(ctx));
  munmap(ref->owned->base, ref->owned->len);
  if (ref->owned->fd >= 0) close(ref->owned->fd);
  // A forked child freeing its inherited copy must not remove the parent's name; a handoff
  // segment that was never sent has no receiver to remove it.
  bool unsent_handoff = ref->policy == ShmPolicy::Handoff && !ref->sent.load();
  if ((ref->policy == ShmPolicy::Owner || unsent_handoff) && ref->owned->creator == getpid())
    shm_unlink(ref->name.c_str());
  g_live.fetch_sub(1, std::memory_order_relaxed);
}

// ---- Pooled, creator side: recycled segments --------------------------------------------------

struct Pool {
  std::mutex mutex;
  std::vector<std::unique_ptr<Mapping>> entries;
  pid_t owner = getpid();
};
Pool& pool() {
  static auto* p = new Pool();  // never destroyed: storages may outlive static teardown
  return *p;
}

void release_pooled_creator(void* ctx) {
  std::unique_ptr<ShmRef> ref(static_cast<ShmRef*>(ctx));
  ref->map->header()->refs.fetch_sub(1, std::memory_order_acq_rel);
}

// A forked child inherits its parent's pool: those segments are the parent's to recycle (it may
// hand them out again at any time), so the child stops recycling them. Their mappings stay (an
// inherited tensor may still use one).
void forget_inherited_locked(Pool& p) {
  pid_t me = getpid();
  if (p.owner == me) return;
  for (auto& m : p.entries) {
    if (m->creator != me) m.release();
  }
  p.entries.erase(std::remove(p.entries.begin(), p.entries.end(), nullptr), p.entries.end());
  p.owner = me;
}

// Forgets a pooled segment: an unnamed one by closing its descriptor, a named one by its name.
void drop_pooled_handle(Mapping& m) {
  if (m.fd >= 0) {
    close(m.fd);
    m.fd = -1;
  } else {
    shm_unlink(m.name.c_str());
  }
}

Mapping* acquire_pooled(size_t nbytes, bool unnamed) {
  size_t need = nbytes == 0 ? 1 : nbytes;
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  forget_inherited_locked(p);
  for (auto& m : p.entries) {
    size_t cap = m->len - kHeader;
    if ((m->fd >= 0) == unnamed && cap >= need && cap <= 2 * need + (64 << 10) &&
        m->header()->refs.load(std::memory_order_acquire) == 0) {
      m->header()->refs.store(1, std::memory_order_release);
      return m.get();
    }
  }
  if (p.entries.size() >= kPoolMax) {  // make room: drop the idle segments that did not fit
    std::vector<std::unique_ptr<Mapping>> keep;
    for (auto& m : p.entries) {
      if (m->header()->refs.load(std::memory_order_acquire) == 0) {
        munmap(m->base, m->len);
        drop_pooled_handle(*m);
        g_live.fetch_sub(1, std::memory_order_relaxed);
      } else {
        keep.push_back(std::move(m));
      }
    }
    p.entries = std::move(keep);
  }
  size_t cap = (need + 4095) / 4096 * 4096;
  auto m = create_mapping(kHeader + cap, nbytes, unnamed);
  new (m->base) Header{};
  m->header()->refs.store(1, std::memory_order_release);
  g_live.fetch_add(1, std::memory_order_relaxed);
  p.entries.push_back(std::move(m));
  return p.entries.back().get();
}

// ---- Pooled, receiver side: cached mappings ---------------------------------------------------

struct Cache {
  std::mutex mutex;
  std::unordered_map<std::string, std::unique_ptr<Mapping>> entries;
};
Cache& cache() {
  static auto* c = new Cache();
  return *c;
}

void release_pooled_receiver(void* ctx) {
  std::unique_ptr<ShmRef> ref(static_cast<ShmRef*>(ctx));
  Mapping* m = ref->map;
  m->header()->refs.fetch_sub(1, std::memory_order_acq_rel);  // the creator may reuse it now
  std::lock_guard<std::mutex> lock(cache().mutex);
  if (--m->local_uses == 0 && m->orphan) {
    munmap(m->base, m->len);
    delete m;
  }
}

int64_t trim_locked(Cache& c, bool all) {
  int64_t n = 0;
  for (auto it = c.entries.begin(); it != c.entries.end();) {
    Mapping* m = it->second.get();
    if (m->local_uses == 0) {
      munmap(m->base, m->len);
      it = c.entries.erase(it);
      ++n;
    } else if (all) {
      m->orphan = true;  // unmapped by its last storage
      it->second.release();
      it = c.entries.erase(it);
    } else {
      ++it;
    }
  }
  return n;
}

Storage make_storage(std::unique_ptr<ShmRef> ref, char* data, void (*deleter)(void*)) {
  size_t nbytes = ref->nbytes;
  return std::make_shared<StorageImpl>(DataPtr(data, ref.release(), deleter, cpu_device()), nbytes);
}

}  // namespace

std::string shm_prefix(long pid) { return "ember_" + std::to_string(pid) + "_"; }

Storage new_shared_storage(size_t nbytes, ShmPolicy policy) {
  if (policy != ShmPolicy::Unnamed && policy != ShmPolicy::PooledUnnamed) before_named_segment();
  auto ref = std::make_unique<ShmRef>();
  ref->nbytes = nbytes;
  ref->policy = policy;
  if (policy == ShmPolicy::Pooled || policy == ShmPolicy::PooledUnnamed) {
    ref->map = acquire_pooled(nbytes, policy == ShmPolicy::PooledUnnamed);
    ref->name = ref->map->name;
    char* data = ref->map->base + kHeader;
    return make_storage(std::move(ref), data, &release_pooled_creator);
  }
  ref->owned = create_mapping(nbytes == 0 ? 1 : nbytes, nbytes, policy == ShmPolicy::Unnamed);
  ref->map = ref->owned.get();
  ref->name = ref->map->name;
  g_live.fetch_add(1, std::memory_order_relaxed);
  char* data = ref->map->base;
  return make_storage(std::move(ref), data, &release_owned);
}

// A receiver's storage on a pooled segment, through the mapping cache (by `key`: the name, or
// the inode of an unnamed segment); `open` maps the segment on a miss.
template <typename Open>
Storage open_pooled_cached(const std::string& key, size_t nbytes, ShmPolicy policy, Open open) {
  auto ref = std::make_unique<ShmRef>();
  ref->nbytes = nbytes;
  ref->policy = policy;
  ref->name = key;
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto it = c.entries.find(key);
  Mapping* m;
  if (it != c.entries.end() && it->second->len >= kHeader + nbytes) {
    m = it->second.get();
  } else {
    if (it != c.entries.end()) {  // a stale mapping under a reused name
      it->second->orphan = true;
      if (it->second->local_uses == 0)
        munmap(it->second->base, it->second->len);
      else
        it->second.release();
      c.entries.erase(it);
    }
    if (c.entries.size() >= kCacheMax) trim_locked(c, false);
    std::unique_ptr<Mapping> fresh = open(kHeader + nbytes);
    m = fresh.get();
    c.entries.emplace(key, std::move(fresh));
  }
  m->local_uses++;
  ref->map = m;
  char* data = m->base + kHeader;
  return make_storage(std::move(ref), data, &release_pooled_receiver);
}

Storage open_shared_storage(const std::string& name, size_t nbytes, ShmPolicy policy) {
  if (policy == ShmPolicy::Pooled) {
    return open_pooled_cached(name, nbytes, policy,
                              [&](size_t len) { return open_mapping(name, len); });
  }
  auto ref = std::make_unique<ShmRef>();
  ref->nbytes = nbytes;
  ref->policy = policy;
  ref->name = name;
  ref->owned = open_mapping(name, nbytes == 0 ? 1 : nbytes);
  ref->map = ref->owned.get();
  ref->owned->creator = -1;  // never unlinks at free
  if (policy == ShmPolicy::Handoff) shm_unlink(name.c_str());
  char* data = ref->map->base;
  return make_storage(std::move(ref), data, &release_owned);
}

Storage open_shared_fd(int fd, size_t nbytes, bool pooled) {
  if (pooled) {  // the mapping cache knows the segment by its inode; fd is not kept
    struct stat st{};
    if (fstat(fd, &st) != 0) {
      int err = errno;
      EMBER_FAIL(Runtime, "shared memory: fstat of descriptor ", fd, " failed: ", errno_str(err));
    }
    std::string key = "<inode " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ">";
    return open_pooled_cached(key, nbytes, ShmPolicy::PooledUnnamed,
                              [&](size_t len) { return map_open_fd(fd, key, len); });
  }
  int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) {
    int err = errno;
    EMBER_FAIL(Runtime, "shared memory: cannot duplicate descriptor ", fd, ": ", errno_str(err),
               err == EMFILE ? " (too many open files: raise `ulimit -n`, or use the "
                               "\"file_system\" sharing strategy)"
                             : "");
  }
  auto ref = std::make_unique<ShmRef>();
  ref->nbytes = nbytes;
  ref->policy = ShmPolicy::Unnamed;
  ref->name = "<fd " + std::to_string(fd) + ">";
  try {
    ref->owned = map_open_fd(own, ref->name, nbytes == 0 ? 1 : nbytes);
  } catch (...) {
    close(own);
    throw;
  }
  ref->owned->fd = own;
  ref->owned->creator = -1;
  ref->map = ref->owned.get();
  char* data = ref->map->base;
  return make_storage(std::move(ref), data, &release_owned);
}

int shared_fd(const StorageImpl& storage) {
  auto d = storage.data.deleter();
  if (d != &release_owned && d != &release_pooled_creator) return -1;
  return static_cast<const ShmRef*>(storage.data.ctx())->map->fd;
}

namespace {
std::atomic<int> g_share_policy{static_cast<int>(ShmPolicy::Owner)};
}

void set_share_policy(ShmPolicy policy) {
  EMBER_CHECK_KIND(policy == ShmPolicy::Owner || policy == ShmPolicy::Unnamed, Value,
                   "share_memory_: the policy must be Owner or Unnamed");
  g_share_policy.store(static_cast<int>(policy));
}

void shm_add_receiver_ref(const StorageImpl& storage) {
  if (storage.data.deleter() == &release_owned) {
    static_cast<ShmRef*>(storage.data.ctx())->sent.store(true);
    return;
  }
  if (storage.data.deleter() != &release_pooled_creator) return;
  static_cast<ShmRef*>(storage.data.ctx())
      ->map->header()
      ->refs.fetch_add(1, std::memory_order_acq_rel);
}

int64_t shm_pool_clear(bool idle_only) {
  Pool& p = pool();
  std::lock_guard<std::mutex> lock(p.mutex);
  forget_inherited_locked(p);
  int64_t n = 0;
  std::vector<std::unique_ptr<Mapping>> keep;
  for (auto& m : p.entries) {
    bool idle = m->header()->refs.load(std::memory_order_acquire) == 0;
    if (idle_only && !idle) {  // a receiver still holds it, or a message naming it is in flight
      keep.push_back(std::move(m));
      continue;
    }
    drop_pooled_handle(*m);
    ++n;
    if (idle) {
      munmap(m->base, m->len);
      g_live.fetch_sub(1, std::memory_order_relaxed);
    } else {
      m.release();  // still used by a live storage here: its pages go with the process
    }
  }
  p.entries = std::move(keep);
  return n;
}

int64_t shm_trim_cache() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return trim_locked(c, true);
}

const ShmSegment* shared_segment(const StorageImpl& storage) {
  auto d = storage.data.deleter();
  if (d != &release_owned && d != &release_pooled_creator && d != &release_pooled_receiver)
    return nullptr;
  return static_cast<const ShmRef*>(storage.data.ctx());
}

void share_storage_(StorageImpl& storage) {
  if (shared_segment(storage)) return;
  EMBER_CHECK(storage.device().is_cpu(),
              "share_memory_: only CPU tensors can be moved to shared memory in this build");
  Storage fresh = new_shared_storage(storage.nbytes, static_cast<ShmPolicy>(g_share_policy.load()));
  if (storage.nbytes) std::memcpy(fresh->data.get(), storage.data.get(), storage.nbytes);
  storage.data = std::move(fresh->data);  // the old block goes back to its allocator
  storage.resizable = false;              // a segment other processes map has a fixed size
}

bool shm_unlink_name(const std::string& name) {
  std::string n = name.empty() || name[0] == '/' ? name : "/" + name;
  return shm_unlink(n.c_str()) == 0;
}

int64_t shm_live_segments() { return g_live.load(std::memory_order_relaxed); }

void set_shm_create_hook(ShmCreateHook hook) { g_create_hook.store(hook); }

}  // namespace ember
