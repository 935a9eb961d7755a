// Storages memory-mapped from a file (ember.load(..., mmap=True)), guarded against the file
// shrinking under them.
//
// A mapping is private and copy-on-write (MAP_PRIVATE): the storage is writable and writes
// never reach the file. Pages are read from the file on first touch, so if another program
// truncates the file while a tensor still maps it, touching a page past the new end would raise
// SIGBUS and kill the process. A SIGBUS handler (installed with the first mapping) catches
// faults inside these mappings and puts a zero-filled private page in place of the vanished
// one, so such a read sees zeros instead of crashing; mapped_file_faults() counts the pages
// replaced. Faults anywhere else go to the handler that was installed before (or the default
// action).
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace ember {

// A 1-D uint8 tensor over bytes [offset, offset + nbytes) of the open file `fd` (any offset:
// the mapping starts at the page boundary below it). The file descriptor may be closed after.
Tensor map_file_range(int fd, int64_t offset, int64_t nbytes);
// Pages of mapped files replaced by zeros because the file had shrunk below them.
int64_t mapped_file_faults();

}  // namespace ember
