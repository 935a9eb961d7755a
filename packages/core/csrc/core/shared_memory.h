// Storages in POSIX shared memory (shm_open + posix_fallocate + mmap), so tensors can cross
// process boundaries by name without copying their bytes.
//
// A segment is named "/ember_<creator pid>_<counter>_<random>" (visible as /dev/shm/ember_...),
// which lets a process that supervises others (the DataLoader) remove whatever a dead child left
// behind by listing its prefix. Who removes the name:
//   - Owner:   the creator, when its storage is freed (Tensor.share_memory_()); receivers that
//              mapped it before keep their mapping.
//   - Handoff: the receiver, right after mapping it (the sender may drop its reference as soon
//              as the tensor is sent; the receiver owns it from then).
//   - Pooled:  nobody while the creator lives: the creator (a DataLoader worker) recycles its
//              segments. A 64-byte header holds a cross-process reference count (creator +
//              receivers); a segment whose count is back to 0 is reused for the next batch, and
//              the receiver keeps its mapping cached, so a steady stream of batches costs no
//              system calls and no page faults on either side (fresh pages cost ~5 us each).
//              The supervisor unlinks the names when the creator exits (shm_prefix).
//   - Unnamed: the creator, right after creating it: the segment crosses processes as a file
//              descriptor (ember.multiprocessing's "file_descriptor" strategy) and its pages go
//              when the last descriptor and mapping close, however the processes end.
//   - PooledUnnamed: Pooled (recycled, reference-counted header, receivers' cached mappings,
//              known by inode) on Unnamed segments.
#pragma once
#include <cstddef>
#include <string>

#include "core/tensor.h"

namespace ember {

enum class ShmPolicy { Owner = 0, Handoff = 1, Pooled = 2, Unnamed = 3, PooledUnnamed = 4 };

struct ShmSegment {
  std::string name;   // with the leading '/'
  size_t nbytes = 0;  // bytes the storage uses
  ShmPolicy policy = ShmPolicy::Owner;
};

// A new storage of `nbytes` in shared memory. Raises RuntimeError naming /dev/shm and what to do
// when it is full (instead of the SIGBUS a sparse mapping would give on first touch).
Storage new_shared_storage(size_t nbytes, ShmPolicy policy);
// Maps the segment `name` created by another process with `policy` (Handoff: removes the name
// once mapped; Pooled: through the mapping cache, releasing the reference the sender took).
Storage open_shared_storage(const std::string& name, size_t nbytes, ShmPolicy policy);
// Called when a storage is sent: for Pooled, the receiver's reference (released when it frees
// it); for Handoff, marks it sent (otherwise the creator unlinks it at free).
void shm_add_receiver_ref(const StorageImpl& storage);
// Unlinks this process's Pooled segments and stops recycling them (idle ones are unmapped).
// idle_only: only those no receiver holds and no message in flight names (a process's exit
// while its last sends are unread).
int64_t shm_pool_clear(bool idle_only = false);
// Unmaps the cached mappings of Pooled segments that no tensor uses (a loader's shutdown).
int64_t shm_trim_cache();
// Maps an Unnamed segment received as the descriptor `fd` (the caller keeps fd); pooled: a
// PooledUnnamed one, through the mapping cache, releasing the reference the sender took.
Storage open_shared_fd(int fd, size_t nbytes, bool pooled = false);
// The descriptor of an Unnamed or PooledUnnamed segment (owned by its creator), or -1.
int shared_fd(const StorageImpl& storage);
// The policy of the segments Tensor.share_memory_() creates (Owner, or Unnamed).
void set_share_policy(ShmPolicy policy);
// The segment behind a storage, or nullptr when it is not in shared memory.
const ShmSegment* shared_segment(const StorageImpl& storage);
// Moves the storage's bytes into a new Owner segment in place: every view of it sees the move.
void share_storage_(StorageImpl& storage);
// Removes a segment's name (ENOENT is not an error). Returns whether a name was removed.
bool shm_unlink_name(const std::string& name);
// The name prefix of the segments created by process `pid` ("ember_<pid>_", no leading '/').
std::string shm_prefix(long pid);
// Segments this process has created and not yet freed (for tests and leak checks).
int64_t shm_live_segments();
// Runs before a process (each pid: again in a forked child) creates its first named segment, with
// no lock held. The Python module installs one that starts (or joins) the janitor process that
// removes the segments of processes killed before they could (ember/_shm_janitor.py), so that a
// segment never exists before its creator is known to a janitor.
using ShmCreateHook = void (*)();
void set_shm_create_hook(ShmCreateHook hook);

}  // namespace ember
