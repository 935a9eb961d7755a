#include "core/allocator.h"

#include <sys/mman.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>

#include "core/allocator_trace.h"
#include "core/backend.h"
#include "core/error.h"

namespace ember {

namespace {
// Requests of 10 MiB and more ("oversize") get a segment of their own, rounded to kLargeRound,
// that is never split: a cached one serves a later request only if it wastes at most
// max(kLargeRound, request / 8). Otherwise a big cached block would end up holding a small
// tensor (and a fragment nobody fits) while the next big request maps yet another segment.
constexpr size_t kOversize = 10 << 20;
}  // namespace

struct CachingAllocator::Block {
  CachingAllocator* owner;
  void* ptr;
  size_t size;
  size_t requested = 0;
  StreamId stream;
  PoolKind kind;
  bool allocated = false;
  bool oversize = false;  // a whole segment for one request of kOversize or more; never split
  Block* prev = nullptr;  // neighbours inside the same segment, by address
  Block* next = nullptr;
  // record_stream: other (stream, device) pairs that use the block; once it is freed, the
  // number of their events still pending before it may return to its pool.
  std::vector<std::pair<StreamId, int>> stream_uses{};
  int pending_events = 0;
};

bool CachingAllocator::BlockLess::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
}

CachingAllocator::CachingAllocator(std::unique_ptr<RawAllocator> raw, Device device,
                                   AllocatorOptions options)
    : raw_(std::move(raw)), device_(device), options_(options) {
  EMBER_CHECK(options_.round > 0 && (options_.round & (options_.round - 1)) == 0,
              "CachingAllocator: round must be a power of two, got ", options_.round);
  EMBER_CHECK(options_.tiny == 0 ||
                  (options_.tiny < options_.round && (options_.tiny & (options_.tiny - 1)) == 0),
              "CachingAllocator: tiny must be 0 or a power of two below round (", options_.round,
              "), got ", options_.tiny);
  allocator_trace::allocator_created(this);
}

CachingAllocator::~CachingAllocator() {
  // Blocks still allocated belong to live storages; only free segments can be returned.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    release_free_segments_locked();
  }
  allocator_trace::allocator_destroyed(this);
}

size_t CachingAllocator::round_size(size_t n) const {
  size_t r = options_.tiny && n < options_.round ? options_.tiny : options_.round;
  return n < r ? r : (n + r - 1) / r * r;
}

CachingAllocator::Pool& CachingAllocator::pool_of(PoolKind kind) {
  switch (kind) {
    case PoolKind::Tiny:
      return tiny_pool_;
    case PoolKind::Small:
      return small_pool_;
    default:
      return large_pool_;
  }
}

size_t CachingAllocator::segment_size(size_t rounded, PoolKind kind) {
  if (kind == PoolKind::Tiny) return kTinySegment;
  if (rounded <= kSmallRequest) return kSmallSegment;
  if (rounded < 10 * (1 << 20)) return kMediumSegment;
  return (rounded + kLargeRound - 1) / kLargeRound * kLargeRound;
}

CachingAllocator::Block* CachingAllocator::find_free_block(Pool& pool, size_t size,
                                                           StreamId stream) {
  Block key{this, nullptr, size, 0, stream, PoolKind::Small};
  auto it = pool.lower_bound(&key);  // best fit: the smallest free block that is large enough
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

CachingAllocator::Block* CachingAllocator::new_segment(size_t request_size, size_t alloc_size,
                                                       StreamId stream, PoolKind kind) {
  void* p = raw_->raw_alloc(alloc_size);
  if (!p) {
    // Out of memory: wait for the blocks held by other streams' events, give the cache back
    // and try once more.
    stats_.num_alloc_retries++;
    synchronize_events_locked();
    release_free_segments_locked();
    p = raw_->raw_alloc(alloc_size);
    if (!p) throw_oom(request_size);
  }
  stats_.num_raw_allocs++;
  stats_.reserved_bytes += static_cast<int64_t>(alloc_size);
  stats_.reserved_bytes_peak = std::max(stats_.reserved_bytes_peak, stats_.reserved_bytes);
  stats_.segments++;
  stats_.segments_peak = std::max(stats_.segments_peak, stats_.segments);
  if (allocator_trace::on())
    allocator_trace::record(this, allocator_trace::Action::SegmentAlloc,
                            reinterpret_cast<uint64_t>(p), static_cast<int64_t>(alloc_size), stream,
                            stats_);
  auto* b = new Block{this, p, alloc_size, 0, stream, kind};  // owned by segments_ / the pools
  segments_.insert(b);
  segments_by_address_[reinterpret_cast<uintptr_t>(p)] = b;
  return b;
}

namespace {
std::string format_bytes(double n) {
  static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (n >= 1024 && u < 6) {
    n /= 1024;
    ++u;
  }
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(u == 0 ? 0 : 2);
  os << n << " " << units[u];
  return os.str();
}
}  // namespace

void CachingAllocator::throw_oom(size_t nbytes) {
  stats_.num_ooms++;
  if (allocator_trace::on())
    allocator_trace::record(this, allocator_trace::Action::Oom, 0, static_cast<int64_t>(nbytes), 0,
                            stats_);
  size_t free_mem = 0, total_mem = 0;
  if (raw_->memory_info(&free_mem, &total_mem)) {
    // PyTorch's message: the request, the device's total and free memory, and what the cache
    // holds (allocated, and reserved but unallocated: the part empty_cache could give back).
    std::string type = device_type_name(device_.type);
    for (char& c : type) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    std::ostringstream os;
    os << type << " out of memory. Tried to allocate " << format_bytes(double(nbytes)) << ". "
       << (device_.type == DeviceType::CUDA ? "GPU " : type + " ")
       << std::max<int>(device_.index, 0) << " has a total capacity of "
       << format_bytes(double(total_mem)) << " of which " << format_bytes(double(free_mem))
       << " is free. Of the allocated memory " << format_bytes(double(stats_.allocated_bytes))
       << " is allocated by ember, and "
       << format_bytes(double(stats_.reserved_bytes - stats_.allocated_bytes))
       << " is reserved by ember but unallocated.";
    throw Error(ErrorKind::OutOfMemory, os.str());
  }
  std::ostringstream os;
  os << device_.str() << " out of memory: tried to allocate " << nbytes << " bytes; "
     << stats_.allocated_bytes << " bytes allocated, " << stats_.reserved_bytes
     << " bytes reserved by ember's caching allocator (" << stats_.segments << " segments, "
     << stats_.num_raw_allocs << " raw allocations)";
  throw Error(ErrorKind::OutOfMemory, os.str());
}

DataPtr CachingAllocator::allocate(size_t nbytes, StreamId stream) {
  if (nbytes == 0) return DataPtr(nullptr, nullptr, nullptr, device_);
  size_t size = round_size(nbytes);
  EMBER_CHECK(size >= nbytes, "allocate: size ", nbytes, " overflows");
  std::optional<allocator_trace::CallContext> trace;
  if (allocator_trace::on()) trace.emplace(this, true);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!pending_events_.empty()) process_events_locked();
  PoolKind kind = size < options_.round && options_.tiny ? PoolKind::Tiny
                  : size <= kSmallRequest                ? PoolKind::Small
                                                         : PoolKind::Large;
  Pool& pool = pool_of(kind);
  Block* b = caching_ ? find_free_block(pool, size, stream) : nullptr;
  if (b && b->oversize && b->size - size > std::max(kLargeRound, size / 8)) {
    // The best fit is an oversize block much larger than this request: using it would waste
    // the rest (it is never split). Keep it for a request its size; take a new segment.
    pool.insert(b);
    b = nullptr;
  }
  if (b) {
    stats_.num_cache_hits++;
  } else {
    const size_t alloc = caching_ ? segment_size(size, kind) : size;
    if (caching_ && options_.bound_cache && kind == PoolKind::Large) {
      // Bound the cache before growing it: give back whole free large segments (largest
      // first) while the cache holds more than a quarter of the live bytes, so random large
      // sizes cannot grow the reserve without bound (a steady loop hits the cache and never
      // gets here).
      const int64_t allowance = (stats_.allocated_bytes + static_cast<int64_t>(alloc)) / 4;
      auto cached = [&] { return stats_.reserved_bytes - stats_.allocated_bytes; };
      if (cached() > allowance) {
        std::vector<Block*> whole;
        for (auto it = large_pool_.rbegin(); it != large_pool_.rend(); ++it)
          if (!(*it)->prev && !(*it)->next) whole.push_back(*it);
        for (Block* head : whole) {
          if (cached() <= allowance) break;
          large_pool_.erase(head);
          release_segment(head);
        }
      }
    }
    b = new_segment(nbytes, alloc, stream, kind);
    b->oversize = caching_ && kind == PoolKind::Large && size >= kOversize;
  }
  // Split off the tail when the remainder is worth keeping.
  size_t remaining = b->size - size;
  size_t min_rest = kind == PoolKind::Tiny    ? options_.tiny
                    : kind == PoolKind::Small ? options_.round
                                              : kSmallRequest + 1;
  if (remaining >= min_rest && !b->oversize) {
    auto* rest = new Block{this, static_cast<char*>(b->ptr) + size, remaining, 0, stream, kind};
    rest->prev = b;
    rest->next = b->next;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    b->size = size;
    pool.insert(rest);
    stats_.num_splits++;
  }
  b->allocated = true;
  b->requested = nbytes;
  stats_.num_allocs++;
  stats_.active_blocks++;
  stats_.active_bytes += static_cast<int64_t>(b->size);
  stats_.active_bytes_peak = std::max(stats_.active_bytes_peak, stats_.active_bytes);
  stats_.allocated_bytes += static_cast<int64_t>(b->size);
  stats_.requested_bytes += static_cast<int64_t>(nbytes);
  stats_.allocated_bytes_peak = std::max(stats_.allocated_bytes_peak, stats_.allocated_bytes);
  if (allocator_trace::on())
    allocator_trace::record(this, allocator_trace::Action::Alloc,
                            reinterpret_cast<uint64_t>(b->ptr), static_cast<int64_t>(b->size),
                            stream, stats_);
  return DataPtr(b->ptr, b, &CachingAllocator::free_block, device_);
}

void CachingAllocator::free_block(void* ctx) {
  auto* b = static_cast<Block*>(ctx);
  b->owner->free(b);
}

void CachingAllocator::free(Block* b) {
  std::optional<allocator_trace::CallContext> trace;
  if (allocator_trace::on()) trace.emplace(this, false);
  std::lock_guard<std::mutex> lock(mutex_);
  b->allocated = false;
  stats_.num_frees++;
  stats_.allocated_bytes -= static_cast<int64_t>(b->size);
  stats_.requested_bytes -= static_cast<int64_t>(b->requested);
  b->requested = 0;
  if (allocator_trace::on())
    allocator_trace::record(this, allocator_trace::Action::FreeRequested,
                            reinterpret_cast<uint64_t>(b->ptr), static_cast<int64_t>(b->size),
                            b->stream, stats_);
  if (!b->stream_uses.empty()) {
    // Used on other streams: work queued there may still read or write it. Hold it (active,
    // not allocated) until an event recorded now on each of those streams has completed.
    for (const auto& [stream, device] : b->stream_uses) {
      void* ev = raw_->record_event(stream, device);
      if (ev) {
        pending_events_.push_back({ev, b});
        b->pending_events++;
      }
    }
    b->stream_uses.clear();
    if (b->pending_events > 0) {
      stats_.pending_event_blocks++;
      return;
    }
  }
  return_block_locked(b);
}

void CachingAllocator::return_block_locked(Block* b) {
  if (allocator_trace::on())
    allocator_trace::record(this, allocator_trace::Action::FreeCompleted,
                            reinterpret_cast<uint64_t>(b->ptr), static_cast<int64_t>(b->size),
                            b->stream, stats_);
  Pool& pool = pool_of(b->kind);
  stats_.active_blocks--;
  stats_.active_bytes -= static_cast<int64_t>(b->size);
  // Merge with free neighbours; the earlier block absorbs the later so segment heads stay put.
  if (b->next && !b->next->allocated && b->next->pending_events == 0) {
    Block* n = b->next;
    pool.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (b->next) b->next->prev = b;
    delete n;
    stats_.num_merges++;
  }
  if (b->prev && !b->prev->allocated && b->prev->pending_events == 0) {
    Block* p = b->prev;
    pool.erase(p);
    p->size += b->size;
    p->next = b->next;
    if (p->next) p->next->prev = p;
    delete b;
    b = p;
    stats_.num_merges++;
  }
  if (!caching_ && !b->prev && !b->next) {
    release_segment(b);
    return;
  }
  pool.insert(b);
}

void CachingAllocator::add_stream_use_locked(Block* b, StreamId stream, int device) {
  if (device < 0) device = device_.index;
  if (stream == b->stream && (device == device_.index || device < 0)) return;  // its own stream
  for (const auto& use : b->stream_uses)
    if (use.first == stream && use.second == device) return;
  b->stream_uses.emplace_back(stream, device);
}

CachingAllocator* CachingAllocator::owner_of(const DataPtr& ptr) {
  if (ptr.deleter() != &CachingAllocator::free_block || !ptr.ctx()) return nullptr;
  return static_cast<Block*>(ptr.ctx())->owner;
}

void CachingAllocator::record_stream(const DataPtr& ptr, StreamId stream, int device) {
  CachingAllocator* owner = owner_of(ptr);
  if (!owner) {
    if (!ptr.get()) return;  // an empty storage holds no memory to protect
    EMBER_FAIL(Runtime, "record_stream: the tensor's memory (on ", ptr.device().str(),
               ") does not come from ember's caching allocator");
  }
  std::lock_guard<std::mutex> lock(owner->mutex_);
  owner->add_stream_use_locked(static_cast<Block*>(ptr.ctx()), stream, device);
}

bool CachingAllocator::record_stream_at(const void* p, StreamId stream, int device) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = segments_by_address_.upper_bound(addr);
  if (it == segments_by_address_.begin()) return false;
  --it;  // the segment starting at or below addr
  for (Block* b = it->second; b; b = b->next) {
    const auto start = reinterpret_cast<uintptr_t>(b->ptr);
    if (addr < start) return false;
    if (addr < start + b->size) {
      if (!b->allocated) return false;
      add_stream_use_locked(b, stream, device);
      return true;
    }
  }
  return false;
}

void CachingAllocator::process_events_locked() {
  // Events complete in order on one stream, not across streams: poll each one.
  for (auto it = pending_events_.begin(); it != pending_events_.end();) {
    if (!raw_->event_done(it->event)) {
      ++it;
      continue;
    }
    raw_->destroy_event(it->event);
    Block* b = it->block;
    it = pending_events_.erase(it);
    if (--b->pending_events == 0) {
      stats_.pending_event_blocks--;
      return_block_locked(b);
    }
  }
}

void CachingAllocator::synchronize_events_locked() {
  while (!pending_events_.empty()) {
    PendingEvent pe = pending_events_.front();
    pending_events_.pop_front();
    raw_->event_synchronize(pe.event);
    raw_->destroy_event(pe.event);
    if (--pe.block->pending_events == 0) {
      stats_.pending_event_blocks--;
      return_block_locked(pe.block);
    }
  }
}

void CachingAllocator::synchronize_events() {
  std::lock_guard<std::mutex> lock(mutex_);
  synchronize_events_locked();
}

void CachingAllocator::release_segment(Block* head) {
  if (allocator_trace::on())
    allocator_trace::record(this, allocator_trace::Action::SegmentFree,
                            reinterpret_cast<uint64_t>(head->ptr), static_cast<int64_t>(head->size),
                            head->stream, stats_);
  segments_by_address_.erase(reinterpret_cast<uintptr_t>(head->ptr));
  raw_->raw_free(head->ptr, head->size);
  stats_.num_raw_frees++;
  stats_.reserved_bytes -= static_cast<int64_t>(head->size);
  stats_.segments--;
  segments_.erase(head);
  delete head;
}

void CachingAllocator::release_free_segments_locked() {
  std::vector<Block*> whole;
  for (Block* head : segments_)
    if (!head->allocated && !head->next && head->pending_events == 0) whole.push_back(head);
  for (Block* head : whole) {
    pool_of(head->kind).erase(head);
    release_segment(head);
  }
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  synchronize_events_locked();
  release_free_segments_locked();
}

void CachingAllocator::set_caching(bool enabled) {
  std::lock_guard<std::mutex> lock(mutex_);
  caching_ = enabled;
  if (!enabled) release_free_segments_locked();
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.allocated_bytes_peak = stats_.allocated_bytes;
  stats_.reserved_bytes_peak = stats_.reserved_bytes;
  stats_.active_bytes_peak = stats_.active_bytes;
  stats_.segments_peak = stats_.segments;
}

std::vector<SegmentInfo> CachingAllocator::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<SegmentInfo> out;
  for (Block* head : segments_) {
    // Tiny segments count as small ones (PyTorch's snapshot knows only these two kinds).
    SegmentInfo seg{
        reinterpret_cast<uint64_t>(head->ptr), 0, head->stream, head->kind != PoolKind::Large, {}};
    for (Block* b = head; b; b = b->next) {
      seg.total_size += static_cast<int64_t>(b->size);
      seg.blocks.push_back({reinterpret_cast<uint64_t>(b->ptr), static_cast<int64_t>(b->size),
                            static_cast<int64_t>(b->requested), b->allocated,
                            !b->allocated && b->pending_events > 0});
    }
    out.push_back(std::move(seg));
  }
  return out;
}

namespace {
class CpuRawAllocator final : public RawAllocator {
 public:
  void* raw_alloc(size_t nbytes) override {
    // Segments of 2 MiB and more are 2 MiB-aligned and asked to use transparent huge pages:
    // fewer TLB misses on the large tensors that dominate bandwidth-bound ops.
    constexpr size_t kHuge = 2 << 20;
    void* p = nullptr;
    if (posix_memalign(&p, nbytes >= kHuge ? kHuge : 64, nbytes) != 0) return nullptr;
#ifdef MADV_HUGEPAGE
    // EMBER_CPU_NO_HUGEPAGES=1: plain pages (a diagnostic switch for the CUDA backend's copies
    // into host memory on systems with HMM, see tools/gpu_smoke.py).
    static const bool huge = [] {
      const char* v = std::getenv("EMBER_CPU_NO_HUGEPAGES");
      return !(v && *v && std::strcmp(v, "0") != 0);
    }();
    if (huge && nbytes >= kHuge) madvise(p, nbytes, MADV_HUGEPAGE);
#endif
    return p;
  }
  void raw_free(void* ptr, size_t) override { std::free(ptr); }
};
}  // namespace

CachingAllocator& cpu_allocator() {
  static CachingAllocator* alloc = [] {
    auto* a = new CachingAllocator(std::make_unique<CpuRawAllocator>(), cpu_device(),
                                   AllocatorOptions{64, 8, true});
    const char* env = std::getenv("EMBER_CPU_ALLOCATOR_CACHING");
    if (env && (std::strcmp(env, "0") == 0 || std::strcmp(env, "false") == 0))
      a->set_caching(false);
    return a;
  }();
  return *alloc;
}

namespace {
// Meta storages have a size and no memory: data() is null and nothing is ever read or written.
class MetaAllocator final : public Allocator {
 public:
  DataPtr allocate(size_t) override { return DataPtr(nullptr, nullptr, nullptr, meta_device()); }
};
}  // namespace

static Allocator* g_device_allocators[kNumDeviceTypes] = {};

Allocator* device_allocator(DeviceType type) {
  if (type == DeviceType::CPU) return &cpu_allocator();
  if (type == DeviceType::Meta) {
    static MetaAllocator meta;
    return &meta;
  }
  Allocator* a = g_device_allocators[static_cast<int>(type)];
  if (a == nullptr && load_backend_once(type)) a = g_device_allocators[static_cast<int>(type)];
  if (a == nullptr) {
    if (type == DeviceType::CUDA)
      EMBER_FAIL(Runtime, "no allocator for device 'cuda': ember was built without CUDA support, ",
                 "or no CUDA device is available (see ember.cuda.is_available())");
    EMBER_FAIL(Runtime, "no allocator for device '", device_type_name(type),
               "': no backend has registered one (import the backend's extension module first)");
  }
  return a;
}

void register_device_allocator(DeviceType type, Allocator* alloc) {
  g_device_allocators[static_cast<int>(type)] = alloc;
}

}  // namespace ember
