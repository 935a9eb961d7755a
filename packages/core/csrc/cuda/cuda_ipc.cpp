// CUDA IPC: CUDA tensors cross processes (ember.multiprocessing) as CUDA IPC handles.
//
// Producer (the sending process), for each tensor it sends:
//   - the storage's cudaMalloc allocation (the caching allocator's segment that holds the block)
//     is exported once per segment with cudaIpcGetMemHandle (cached while a sent storage of that
//     segment is held); the message carries the handle and the storage's offset in the segment;
//   - an interprocess event is recorded on the current stream, so that the consumer's stream
//     waits for the writes the producer has queued;
//   - a reference count in a slot of a small shared-memory file (core/shared_memory.h, Owner
//     policy: "/dev/shm/ember_<pid>_*", unlinked at exit, removed by the parent or the janitor
//     after a SIGKILL) is set to 1 for the message. The storage (and the event) stay in this
//     process's registry of sent data until the count is back to 0; only then does the block go
//     back to the caching allocator. The registry is collected at each send, by
//     ember.cuda.ipc_collect() and at exit.
// Consumer (the receiving process), for each message:
//   - checks that the producer is alive (a clear error otherwise), maps the reference file and
//     takes over the message's count (released when its storage is freed, or at its exit);
//   - opens the event and makes its current stream wait for it;
//   - opens the memory handle once per process (opening a handle twice fails; the mapping is
//     closed when the last storage on it goes) and wraps base + offset as a CUDA storage. A
//     storage received again while the first one is alive is that same storage, so views of one
//     storage stay views of one storage.
// A received storage can be sent on: the message carries the original handle, and the forwarder
// holds its received storage (and so its own count at the producer) until its consumers let go.
// A message read back by its own sender is the storage it sent (CUDA opens no handle in the
// process that exported it). A consumer records its pid beside the count it takes: the count of
// a consumer that died without giving it back (SIGKILL) is reclaimed once it is reaped.
// Limits: a message never received holds its storage until the producer exits; writes queued
// on a stream other than the sending thread's current one and the tensor's allocation stream are
// not waited for (as with record_stream: synchronize first); a forwarded storage whose forwarder
// is killed may be reclaimed while the last consumer still maps it.
#include <cuda.h>  // CUdeviceptr and the cuMemGetAddressRange prototype (called by entry point)
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/allocator.h"
#include "core/shared_memory.h"
#include "core/tensor.h"
#include "cuda/cuda_allocator.h"
#include "cuda/cuda_context.h"

namespace py = pybind11;

namespace ember {
namespace cuda {
namespace {

// A reference file: kSlots counts, then the pid of the consumer that took each slot's reference
// (0 until taken), so that the references of a consumer that died without releasing them (a
// SIGKILL) are reclaimed instead of holding the producer's memory until it exits.
constexpr int64_t kSlots = 1024;
constexpr size_t kRefFileBytes = 2 * kSlots * sizeof(int64_t);  // 16 KiB
static_assert(sizeof(std::atomic<int64_t>) == sizeof(int64_t) &&
                  std::atomic<int64_t>::is_always_lock_free,
              "reference counts in shared memory must be lock-free 64-bit atomics");

std::atomic<int64_t>* slot_ptr(const Storage& file, int64_t slot) {
  return reinterpret_cast<std::atomic<int64_t>*>(file->data.get()) + slot;
}
std::atomic<int64_t>* taker_ptr(const Storage& file, int64_t slot) {
  return reinterpret_cast<std::atomic<int64_t>*>(file->data.get()) + kSlots + slot;
}

// Whether a slot's reference is still held: its count is above 0 and the consumer that took it
// (if one did) has not exited and been reaped (its driver context, and so its use of the
// memory, is gone by then).
bool slot_held(const Storage& file, int64_t slot) {
  if (slot_ptr(file, slot)->load(std::memory_order_acquire) <= 0) return false;
  int64_t taker = taker_ptr(file, slot)->load(std::memory_order_acquire);
  return taker <= 0 || kill(static_cast<pid_t>(taker), 0) == 0 || errno != ESRCH;
}

// Whether process `pid` still runs: a zombie (exited, not reaped yet) does not.
bool process_alive(long pid) {
  if (pid <= 0) return true;
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return true;  // no procfs: trust kill()
  size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return true;
  char state = text[paren + 2];
  return state != 'Z' && state != 'X';
}

[[noreturn]] void fail_producer_gone(long pid) {
  EMBER_FAIL(Runtime, "the process that shared this CUDA tensor (pid ", pid,
             ") has exited; keep it alive until consumers have received the CUDA tensors it "
             "sends and released them (CUDA IPC memory belongs to the process that allocated it: "
             "e.g. have the consumer signal back through a Queue or Event, or join the "
             "consumers, before the producer returns)");
}

void check_producer(long owner, long sender) {
  if (!process_alive(owner)) fail_producer_gone(owner);
  if (sender != owner && !process_alive(sender)) fail_producer_gone(sender);
}

std::string handle_key(const cudaIpcMemHandle_t& h) {
  return std::string(reinterpret_cast<const char*>(&h), sizeof h);
}

template <typename Handle>
Handle handle_from(const std::string& bytes, const char* what) {
  Handle h{};
  EMBER_CHECK_KIND(bytes.size() == sizeof h, Value, "cuda ipc: the ", what, " handle has ",
                   bytes.size(), " bytes, expected ", sizeof h);
  std::memcpy(&h, bytes.data(), sizeof h);
  return h;
}

// ---- producer: the registry of sent data -------------------------------------------------------

struct RefFile {
  Storage storage;  // an Owner segment: its name goes when the storage is freed
  std::string name;
  std::vector<bool> used = std::vector<bool>(kSlots, false);
  int64_t in_use = 0;
};

struct SentEntry {
  Storage storage;  // keeps the memory alive (null for the tests' entries)
  size_t file = 0;
  int64_t slot = 0;
  cudaEvent_t event = nullptr;
  int device = -1;
  uintptr_t cached_base = 0;  // the handle cache entry this send uses (0: none)
};

struct CachedHandle {
  cudaIpcMemHandle_t handle{};
  size_t size = 0;
  StreamId stream = 0;  // the stream whose pool the caching allocator's segment belongs to
  int64_t live = 0;     // sent entries on this segment: the segment cannot be freed while > 0
};

struct Producer {
  std::mutex mutex;
  pid_t pid = getpid();
  std::vector<RefFile> files;
  std::list<SentEntry> sent;
  std::map<std::pair<int, uintptr_t>, CachedHandle> handles;  // by (device, segment base)
};

Producer& producer() {
  static auto* p = new Producer();  // leaked: storages may outlive static teardown
  return *p;
}

// A forked child inherits the parent's registry: those entries are the parent's. The child
// forgets them without touching CUDA (which it cannot use) and starts its own.
void forget_inherited_locked(Producer& p) {
  if (p.pid == getpid()) return;
  for (auto& e : p.sent) (void)new Storage(std::move(e.storage));   // never freed here
  for (auto& f : p.files) (void)new Storage(std::move(f.storage));  // its name is the parent's
  p.sent.clear();
  p.files.clear();
  p.handles.clear();
  p.pid = getpid();
}

// Removes the entries whose count is back to 0; their storages go to `freed` (released by the
// caller outside the lock: a forwarded storage's deleter takes the consumer's lock).
int64_t collect_locked(Producer& p, std::vector<Storage>& freed) {
  int64_t n = 0;
  for (auto it = p.sent.begin(); it != p.sent.end();) {
    RefFile& f = p.files[it->file];
    if (slot_held(f.storage, it->slot)) {
      ++it;
      continue;
    }
    if (it->event) {
      // Never raises here: an entry half collected would be freed twice.
      (void)cudaEventDestroy(it->event);
      (void)cudaGetLastError();
    }
    if (it->cached_base) {
      auto h = p.handles.find({it->device, it->cached_base});
      if (h != p.handles.end() && --h->second.live <= 0) p.handles.erase(h);
    }
    f.used[it->slot] = false;
    f.in_use--;
    if (it->storage) freed.push_back(std::move(it->storage));
    it = p.sent.erase(it);
    ++n;
  }
  return n;
}

// At exit, should the Python exit hook not have run: the reference files' names leave /dev/shm
// (nothing else: CUDA may be gone by now).
void unlink_ref_files_at_exit() {
  Producer& p = producer();
  std::unique_lock<std::mutex> lock(p.mutex, std::try_to_lock);  // never wait at exit
  if (!lock.owns_lock() || p.pid != getpid()) return;
  for (const RefFile& f : p.files) shm_unlink_name(f.name);
}

// A free slot set to 1 (the message's reference): (file index, slot).
std::pair<size_t, int64_t> acquire_slot_locked(Producer& p) {
  static const bool at_exit = std::atexit(&unlink_ref_files_at_exit) == 0;
  (void)at_exit;
  for (size_t i = 0; i < p.files.size(); ++i) {
    RefFile& f = p.files[i];
    if (f.in_use == kSlots) continue;
    for (int64_t s = 0; s < kSlots; ++s) {
      if (f.used[s]) continue;
      f.used[s] = true;
      f.in_use++;
      taker_ptr(f.storage, s)->store(0, std::memory_order_release);
      slot_ptr(f.storage, s)->store(1, std::memory_order_release);
      return {i, s};
    }
  }
  RefFile f;
  f.storage = new_shared_storage(kRefFileBytes, ShmPolicy::Owner);  // zero-filled
  f.name = shared_segment(*f.storage)->name;
  f.used[0] = true;
  f.in_use = 1;
  slot_ptr(f.storage, 0)->store(1, std::memory_order_release);
  p.files.push_back(std::move(f));
  return {p.files.size() - 1, 0};
}

// ---- consumer: opened handles, mapped reference files, received storages -----------------------

// The message's reference, taken over by the consumer: released (the slot decremented) once.
class SlotRef {
 public:
  SlotRef(Storage file, int64_t slot) : file_(std::move(file)), slot_(slot) {}
  ~SlotRef() { release(); }
  SlotRef(const SlotRef&) = delete;
  SlotRef& operator=(const SlotRef&) = delete;
  void release() {
    if (file_ && !released_.exchange(true)) slot_ptr(file_, slot_)->fetch_sub(1);
  }

 private:
  Storage file_;
  int64_t slot_;
  std::atomic<bool> released_{false};
};

struct OpenedMem {
  void* base = nullptr;
  int device = 0;
  int64_t uses = 0;
};

struct Received {
  std::string key;  // the memory handle's bytes
  cudaIpcMemHandle_t handle{};
  size_t segment_size = 0;
  size_t offset = 0;
  int device = 0;
  long owner = 0;
  std::tuple<std::string, size_t, size_t> storage_key;
  std::unique_ptr<SlotRef> ref;
};

struct Consumer {
  std::mutex mutex;
  pid_t pid = getpid();
  std::map<std::string, OpenedMem> opened;
  std::map<std::string, Storage> ref_files;
  std::map<std::tuple<std::string, size_t, size_t>, std::weak_ptr<StorageImpl>> storages;
  std::set<SlotRef*> held;  // every reference taken and not yet released (released at exit)
  std::vector<std::unique_ptr<SlotRef>> test_refs;
};

Consumer& consumer() {
  static auto* c = new Consumer();
  return *c;
}

void forget_inherited_locked(Consumer& c) {
  if (c.pid == getpid()) return;
  // The parent's mappings and references: kept as they are (the parent releases its own).
  c.opened.clear();
  c.storages.clear();
  c.held.clear();
  for (auto& r : c.test_refs) (void)r.release();  // leaked, not decremented: the parent's
  c.test_refs.clear();
  c.pid = getpid();
}

// The creator's pid in a segment name "/ember_<pid>_..." (0 when it has another form).
long creator_of(const std::string& name) {
  const std::string prefix = "/ember_";
  if (name.compare(0, prefix.size(), prefix) != 0) return 0;
  long pid = 0;
  for (size_t i = prefix.size(); i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i)
    pid = pid * 10 + (name[i] - '0');
  return pid;
}

Storage ref_file_locked(Consumer& c, const std::string& name, size_t nbytes, long sender) {
  auto it = c.ref_files.find(name);
  if (it != c.ref_files.end()) return it->second;
  EMBER_CHECK_KIND(nbytes == kRefFileBytes, Value, "cuda ipc: reference file ", name, " of ",
                   nbytes, " bytes, expected ", kRefFileBytes);
  Storage file;
  try {
    file = open_shared_storage(name, nbytes, ShmPolicy::Owner);
  } catch (const Error&) {
    if (!process_alive(sender)) fail_producer_gone(sender);
    throw;
  }
  if (c.ref_files.size() >= 64) {  // unmap the files of producers gone that nothing here uses
    for (auto f = c.ref_files.begin(); f != c.ref_files.end();) {
      if (f->second.use_count() == 1 && !process_alive(creator_of(f->first)))
        f = c.ref_files.erase(f);
      else
        ++f;
    }
  }
  c.ref_files.emplace(name, file);
  return file;
}

// Takes over the message's reference in slot `slot` of the sender's file `name`.
std::unique_ptr<SlotRef> take_ref_locked(Consumer& c, const std::string& name, size_t nbytes,
                                         int64_t slot, long sender) {
  EMBER_CHECK_KIND(slot >= 0 && slot < kSlots, Value, "cuda ipc: reference slot ", slot,
                   " out of range [0, ", kSlots, ")");
  Storage file = ref_file_locked(c, name, nbytes, sender);
  if (slot_ptr(file, slot)->load(std::memory_order_acquire) < 1)
    EMBER_FAIL(Runtime, "cuda ipc: the message of this CUDA tensor holds no reference (slot ", slot,
               " of ", name, " is 0): a message carrying a CUDA tensor can be received only once");
  taker_ptr(file, slot)->store(getpid(), std::memory_order_release);
  return std::make_unique<SlotRef>(std::move(file), slot);
}

void release_received(void* ctx) {
  std::unique_ptr<Received> r(static_cast<Received*>(ctx));
  Consumer& c = consumer();
  bool same_process = true;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    same_process = c.pid == getpid();
    auto it = c.storages.find(r->storage_key);
    if (it != c.storages.end() && it->second.expired()) c.storages.erase(it);
    if (same_process) {
      // Work queued on this device's current stream may still use the memory: it must be done
      // before the producer may reuse the block. Errors (a context torn down at exit) are
      // ignored: a destructor must not throw, and a dead context runs nothing.
      int prev = -1;
      if (cudaGetDevice(&prev) == cudaSuccess && prev != r->device) (void)cudaSetDevice(r->device);
      auto stream_it = c.opened.find(r->key);
      cudaStream_t stream = nullptr;
      try {
        stream = current_stream(r->device);
      } catch (const std::exception&) {
      }
      (void)cudaStreamSynchronize(stream);
      if (stream_it != c.opened.end() && --stream_it->second.uses == 0) {
        (void)cudaIpcCloseMemHandle(stream_it->second.base);
        c.opened.erase(stream_it);
      }
      if (prev >= 0 && prev != r->device) (void)cudaSetDevice(prev);
      (void)cudaGetLastError();
      c.held.erase(r->ref.get());
    }
  }
  // After the mapping is closed: the producer may free (and its allocator give back) the block.
  // A forked child's inherited storage holds the parent's reference: it leaves it alone.
  if (r->ref && same_process) r->ref->release();
  if (!same_process) (void)r->ref.release();
}

// A consumer's refusal with the producer's state: gone, or the CUDA error of `what`.
[[noreturn]] void fail_open(cudaError_t err, const char* what, long owner, long sender) {
  (void)cudaGetLastError();
  check_producer(owner, sender);
  EMBER_FAIL(Runtime, "cuda ipc: ", what, " failed: ", cudaGetErrorString(err),
             " (the tensor was shared by pid ", owner,
             ", which still runs; CUDA IPC needs both processes on the same machine and GPU, "
             "and the receiver started with the 'spawn' or 'forkserver' method)");
}

// cuMemGetAddressRange through the runtime's driver entry point (no link against libcuda): the
// allocation that holds `p`, for storages that the caching allocator did not make.
bool driver_address_range(const void* p, uintptr_t* base, size_t* size) {
  using Fn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  static Fn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &f, 12000, cudaEnableDefault,
                                         &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<Fn>(nullptr);
    }
    return reinterpret_cast<Fn>(f);
  }();
  if (!fn) return false;
  CUdeviceptr b = 0;
  size_t s = 0;
  if (fn(&b, &s, static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p))) != CUDA_SUCCESS)
    return false;
  *base = static_cast<uintptr_t>(b);
  *size = s;
  return true;
}

// The allocation (base, size) that holds a storage: the caching allocator's segment (one
// cudaMalloc) and the stream it was allocated on when it made the storage, else the driver's
// answer (stream 0).
bool allocation_of(const DataPtr& data, uintptr_t* base, size_t* size, StreamId* stream) {
  const auto addr = reinterpret_cast<uintptr_t>(data.get());
  *stream = 0;
  if (CachingAllocator* alloc = CachingAllocator::owner_of(data)) {
    for (const SegmentInfo& s : alloc->snapshot()) {
      if (addr >= s.address && addr < s.address + static_cast<uint64_t>(s.total_size)) {
        *base = static_cast<uintptr_t>(s.address);
        *size = static_cast<size_t>(s.total_size);
        *stream = s.stream;
        return true;
      }
    }
    return false;
  }
  return driver_address_range(data.get(), base, size);
}

std::tuple<int, py::bytes, size_t, size_t, size_t, py::bytes, std::string, size_t, int64_t, long,
           long>
share(const Tensor& t) {
  const Storage& storage = t->storage();
  if (storage->device().type != DeviceType::CUDA)
    EMBER_FAIL(Runtime, "cuda ipc: expected a CUDA tensor, got one on ", storage->device().str());
  EMBER_CHECK(storage->nbytes > 0 && storage->data.get(),
              "cuda ipc: an empty CUDA storage has no memory to share");
  int device = resolve_device(storage->device().index);
  Producer& p = producer();
  std::vector<Storage> freed;
  std::unique_lock<std::mutex> lock(p.mutex);
  forget_inherited_locked(p);
  collect_locked(p, freed);

  DeviceGuard guard(device);
  cudaIpcMemHandle_t handle{};
  size_t segment_size = 0, offset = 0;
  uintptr_t cached_base = 0;
  bool new_handle = false;
  StreamId alloc_stream = 0;
  long owner = getpid();
  if (storage->data.deleter() == &release_received) {  // forwarding a received storage
    const auto* r = static_cast<const Received*>(storage->data.ctx());
    handle = r->handle;
    segment_size = r->segment_size;
    offset = r->offset;
    owner = r->owner;
  } else {
    const void* ptr = storage->data.get();
    const auto addr = reinterpret_cast<uintptr_t>(ptr);
    // A cached handle of the allocation that holds ptr: valid while a sent storage of that
    // allocation is held here (the allocation cannot be freed meanwhile).
    uintptr_t base = 0;
    size_t size = 0;
    auto next = p.handles.upper_bound({device, addr});
    if (next != p.handles.begin()) {
      auto prev = std::prev(next);
      if (prev->first.first == device && addr < prev->first.second + prev->second.size) {
        base = prev->first.second;
        size = prev->second.size;
        handle = prev->second.handle;
        alloc_stream = prev->second.stream;
      }
    }
    if (!base) {
      if (!allocation_of(storage->data, &base, &size, &alloc_stream))
        EMBER_FAIL(Runtime, "cuda ipc: cannot find the CUDA allocation that holds this tensor's ",
                   "memory (on ", storage->device().str(), ")");
      EMBER_CUDA_CHECK(cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(base)));
      new_handle = true;
    }
    segment_size = size;
    offset = addr - base;
    cached_base = base;
  }

  // The consumer's stream waits for the writes queued here so far: on this thread's current
  // stream, and on the stream the tensor was allocated on (a Queue sends from its feeder thread,
  // whose current stream is the default one, while the tensor was written on the caller's).
  cudaStream_t stream = current_stream(device);
  if (alloc_stream != 0 && reinterpret_cast<cudaStream_t>(alloc_stream) != stream) {
    cudaEvent_t written = acquire_event(device);
    std::unique_ptr<CUevent_st, void (*)(cudaEvent_t)> written_guard(written, &release_event);
    EMBER_CUDA_CHECK(cudaEventRecord(written, reinterpret_cast<cudaStream_t>(alloc_stream)));
    EMBER_CUDA_CHECK(cudaStreamWaitEvent(stream, written, 0));
  }
  cudaEvent_t event = nullptr;
  EMBER_CUDA_CHECK(
      cudaEventCreateWithFlags(&event, cudaEventInterprocess | cudaEventDisableTiming));
  std::unique_ptr<CUevent_st, void (*)(cudaEvent_t)> event_guard(
      event, [](cudaEvent_t e) { (void)cudaEventDestroy(e); });
  EMBER_CUDA_CHECK(cudaEventRecord(event, stream));
  cudaIpcEventHandle_t event_handle{};
  EMBER_CUDA_CHECK(cudaIpcGetEventHandle(&event_handle, event));

  auto [file, slot] = acquire_slot_locked(p);
  SentEntry e;
  e.storage = storage;
  e.file = file;
  e.slot = slot;
  e.event = event_guard.release();
  e.device = device;
  e.cached_base = cached_base;
  if (cached_base) {  // cached from now on (not before: a failed send leaves no entry)
    CachedHandle& cached = p.handles[{device, cached_base}];
    if (new_handle) {
      cached.handle = handle;
      cached.size = segment_size;
      cached.stream = alloc_stream;
    }
    cached.live++;
  }
  p.sent.push_back(std::move(e));
  std::string ref_name = p.files[file].name;
  lock.unlock();
  freed.clear();
  return {device,
          py::bytes(handle_key(handle)),
          segment_size,
          offset,
          static_cast<size_t>(storage->nbytes),
          py::bytes(std::string(reinterpret_cast<const char*>(&event_handle), sizeof event_handle)),
          ref_name,
          kRefFileBytes,
          slot,
          owner,
          static_cast<long>(getpid())};
}

// Bytes a strided view reaches in its storage.
size_t extent_bytes(const DimVector& sizes, const DimVector& strides, int64_t offset,
                    ScalarType dt) {
  int64_t last = offset;
  for (int64_t i = 0; i < static_cast<int64_t>(sizes.size()); ++i) {
    if (sizes[i] == 0) return 0;
    EMBER_CHECK_KIND(strides[i] >= 0, Value, "cuda ipc: negative stride ", strides[i]);
    last += (sizes[i] - 1) * strides[i];
  }
  return static_cast<size_t>(last + 1) * itemsize(dt);
}

// A message this process sent to itself: the storage it sent (CUDA cannot open a handle in the
// process that exported it), after the current stream waits for the send's event; the
// message's reference is released. Null when no such entry is held.
Storage take_own_message(const std::string& ref_name, int64_t slot) {
  Producer& p = producer();
  std::lock_guard<std::mutex> lock(p.mutex);
  forget_inherited_locked(p);
  for (SentEntry& e : p.sent) {
    const RefFile& f = p.files[e.file];
    if (e.slot != slot || f.name != ref_name || !e.storage) continue;
    std::atomic<int64_t>* count = slot_ptr(f.storage, slot);
    if (count->load(std::memory_order_acquire) < 1)
      EMBER_FAIL(Runtime, "cuda ipc: the message of this CUDA tensor holds no reference (slot ",
                 slot, " of ", ref_name,
                 " is 0): a message carrying a CUDA tensor can be received only once");
    if (e.event) {
      DeviceGuard guard(e.device);
      EMBER_CUDA_CHECK(cudaStreamWaitEvent(current_stream(e.device), e.event, 0));
    }
    Storage s = e.storage;
    count->fetch_sub(1, std::memory_order_acq_rel);  // collected at the next send
    return s;
  }
  return nullptr;
}

Storage open_storage(int device, const std::string& mem_handle, size_t segment_size, size_t offset,
                     size_t nbytes, const std::string& event_handle, const std::string& ref_name,
                     size_t ref_nbytes, int64_t slot, long owner, long sender) {
  // Before any CUDA call: a producer that is gone gives a clear error, not a CUDA one.
  check_producer(owner, sender);
  EMBER_CHECK_KIND(offset + nbytes <= segment_size && nbytes > 0, Value, "cuda ipc: a storage of ",
                   nbytes, " bytes at offset ", offset, " does not fit its allocation of ",
                   segment_size, " bytes");
  auto handle = handle_from<cudaIpcMemHandle_t>(mem_handle, "memory");
  if (sender == getpid()) {  // sent to itself (a queue read by the process that wrote it)
    if (Storage own = take_own_message(ref_name, slot)) return own;
  }
  Consumer& c = consumer();
  std::lock_guard<std::mutex> lock(c.mutex);
  forget_inherited_locked(c);
  std::unique_ptr<SlotRef> ref = take_ref_locked(c, ref_name, ref_nbytes, slot, sender);
  // From here an error releases the reference (ref's destructor): the producer is not stuck.

  EMBER_CHECK_KIND(device >= 0 && device < device_count(), Value,
                   "cuda ipc: the tensor is on "
                   "cuda:",
                   device, " but this process sees ", device_count(), " CUDA device(s)");
  DeviceGuard guard(device);
  if (!event_handle.empty()) {
    auto eh = handle_from<cudaIpcEventHandle_t>(event_handle, "event");
    cudaEvent_t event = nullptr;
    cudaError_t err = cudaIpcOpenEventHandle(&event, eh);
    if (err != cudaSuccess) fail_open(err, "cudaIpcOpenEventHandle", owner, sender);
    err = cudaStreamWaitEvent(current_stream(device), event, 0);
    (void)cudaEventDestroy(event);  // the wait is queued: the event may go
    if (err != cudaSuccess) fail_open(err, "cudaStreamWaitEvent", owner, sender);
  }

  std::string key = handle_key(handle);
  auto storage_key = std::make_tuple(key, offset, nbytes);
  auto cached = c.storages.find(storage_key);
  if (cached != c.storages.end()) {
    if (Storage alive = cached->second.lock()) return alive;  // `ref` is released: one is held
    c.storages.erase(cached);
  }

  auto opened = c.opened.find(key);
  if (opened == c.opened.end()) {
    void* base = nullptr;
    cudaError_t err = cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) fail_open(err, "cudaIpcOpenMemHandle", owner, sender);
    opened = c.opened.emplace(key, OpenedMem{base, device, 0}).first;
  }
  auto r = std::make_unique<Received>();
  r->key = key;
  r->handle = handle;
  r->segment_size = segment_size;
  r->offset = offset;
  r->device = device;
  r->owner = owner;
  r->storage_key = storage_key;
  r->ref = std::move(ref);
  c.held.insert(r->ref.get());
  opened->second.uses++;
  void* data = static_cast<char*>(opened->second.base) + offset;
  Device dev{DeviceType::CUDA, static_cast<int8_t>(device)};
  Storage storage =
      std::make_shared<StorageImpl>(DataPtr(data, r.release(), &release_received, dev), nbytes);
  c.storages[storage_key] = storage;
  return storage;
}

DimVector to_dims(const std::vector<int64_t>& v) {
  DimVector d;
  for (int64_t x : v) d.push_back(x);
  return d;
}

}  // namespace

void bind_ipc(py::module_& m) {
  m.def("_ipc_share", &share, py::arg("tensor"),
        "Shares a CUDA tensor's storage for another process: (device, memory handle, allocation "
        "size, offset, nbytes, event handle, reference file, its size, slot, owner pid, sender "
        "pid). The storage stays alive here until the receiver lets go (see cuda_ipc.cpp).");
  m.def(
      "_ipc_open",
      [](int device, const py::bytes& mem_handle, size_t segment_size, size_t offset, size_t nbytes,
         const py::bytes& event_handle, const std::string& ref_name, size_t ref_nbytes,
         int64_t slot, long owner, long sender, const Tensor& like,
         const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
         int64_t storage_offset) {
        const ScalarType dtype = like->dtype();  // (the dtype caster lives in ember._C)
        DimVector sizes = to_dims(shape), st = to_dims(strides);
        EMBER_CHECK_KIND(sizes.size() == st.size() && storage_offset >= 0, Value,
                         "cuda ipc: inconsistent tensor metadata");
        EMBER_CHECK_KIND(extent_bytes(sizes, st, storage_offset, dtype) <= nbytes, Value,
                         "cuda ipc: the tensor reaches past the end of its storage of ", nbytes,
                         " bytes");
        Storage storage =
            open_storage(device, std::string(mem_handle), segment_size, offset, nbytes,
                         std::string(event_handle), ref_name, ref_nbytes, slot, owner, sender);
        return std::make_shared<TensorImpl>(std::move(storage), dtype, sizes, st, storage_offset,
                                            std::make_shared<VersionCounter>());
      },
      py::arg("device"), py::arg("mem_handle"), py::arg("segment_size"), py::arg("offset"),
      py::arg("nbytes"), py::arg("event_handle"), py::arg("ref_name"), py::arg("ref_nbytes"),
      py::arg("slot"), py::arg("owner"), py::arg("sender"), py::arg("like"), py::arg("shape"),
      py::arg("strides"), py::arg("storage_offset"),
      "A tensor over a CUDA storage shared by another process (_ipc_share's tuple), of the "
      "dtype of `like` (any tensor).");
  m.def(
      "_ipc_collect",
      [] {
        Producer& p = producer();
        std::vector<Storage> freed;
        std::lock_guard<std::mutex> lock(p.mutex);
        forget_inherited_locked(p);
        return collect_locked(p, freed);
      },
      "Frees the sent storages that no receiver holds any more; returns how many.");
  m.def(
      "_ipc_pending",
      [] {
        Producer& p = producer();
        std::lock_guard<std::mutex> lock(p.mutex);
        forget_inherited_locked(p);
        return static_cast<int64_t>(p.sent.size());
      },
      "Sent storages still held for their receivers.");
  m.def("_ipc_is_received",
        [](const Tensor& t) { return t->storage()->data.deleter() == &release_received; });
  m.def("_ipc_shutdown", [] {
    // At exit: release what this process received (its mappings die with it), free what no
    // receiver holds, and drop the reference files (their names leave /dev/shm). Returns the
    // sent storages still held by receivers.
    Consumer& c = consumer();
    {
      std::lock_guard<std::mutex> lock(c.mutex);
      forget_inherited_locked(c);
      if (!c.held.empty()) {
        // Kernels of this process may still use the memory: done before the producers reuse it.
        std::set<int> devices;
        for (const auto& kv : c.opened) devices.insert(kv.second.device);
        for (int d : devices)
          if (cudaSetDevice(d) == cudaSuccess) (void)cudaDeviceSynchronize();
        (void)cudaGetLastError();
      }
      for (SlotRef* r : c.held) r->release();
      c.held.clear();
      c.test_refs.clear();
    }
    Producer& p = producer();
    std::vector<Storage> freed;
    std::vector<RefFile> files;
    int64_t held = 0;
    {
      std::lock_guard<std::mutex> lock(p.mutex);
      forget_inherited_locked(p);
      collect_locked(p, freed);
      held = static_cast<int64_t>(p.sent.size());
      for (auto& e : p.sent) {  // still mapped elsewhere: keep the memory until the process ends
        (void)new Storage(std::move(e.storage));
        (void)new Storage(std::move(p.files[e.file].storage));  // mappings stay; the name goes
        shm_unlink_name(p.files[e.file].name);
      }
      p.sent.clear();
      p.handles.clear();
      files = std::move(p.files);
      p.files.clear();
    }
    freed.clear();
    files.clear();
    return held;
  });
  m.def("_ipc_producer_alive", &process_alive, py::arg("pid"),
        "Whether process pid runs (a zombie does not).");

  // Reference-count files without CUDA, for tests of their rules on any machine.
  m.def(
      "_ipc_test_entry",
      [] {
        Producer& p = producer();
        std::lock_guard<std::mutex> lock(p.mutex);
        forget_inherited_locked(p);
        auto [file, slot] = acquire_slot_locked(p);
        SentEntry e;
        e.file = file;
        e.slot = slot;
        p.sent.push_back(std::move(e));
        return py::make_tuple(p.files[file].name, kRefFileBytes, slot);
      },
      "Registers a sent entry without memory: (reference file, size, slot), count 1.");
  m.def(
      "_ipc_test_take",
      [](const std::string& name, size_t nbytes, int64_t slot, long sender, bool hold) {
        check_producer(sender, sender);
        Consumer& c = consumer();
        std::lock_guard<std::mutex> lock(c.mutex);
        forget_inherited_locked(c);
        std::unique_ptr<SlotRef> ref = take_ref_locked(c, name, nbytes, slot, sender);
        if (hold) {  // released at this process's exit (_ipc_shutdown)
          c.held.insert(ref.get());
          c.test_refs.push_back(std::move(ref));
        }
      },
      py::arg("name"), py::arg("nbytes"), py::arg("slot"), py::arg("sender"),
      py::arg("hold") = false,
      "A consumer taking the reference of a message (released now, or at exit with hold).");
  m.def(
      "_ipc_test_count",
      [](const std::string& name, int64_t slot) -> int64_t {
        Producer& p = producer();
        std::lock_guard<std::mutex> lock(p.mutex);
        for (auto& f : p.files)
          if (f.name == name) {
            EMBER_CHECK_KIND(slot >= 0 && slot < kSlots, Value, "slot out of range");
            return slot_ptr(f.storage, slot)->load();
          }
        EMBER_FAIL(Value, "cuda ipc: no reference file ", name, " in this process");
      },
      py::arg("name"), py::arg("slot"));
}

}  // namespace cuda
}  // namespace ember
