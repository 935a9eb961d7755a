// torch.cuda.set_sync_debug_mode for ember's synchronizing CUDA operations: 0 (default) does
// nothing, 1 ("warn") emits a UserWarning, 2 ("error") raises, each time an operation makes the
// host wait for the device: a blocking device <-> host copy (.item(), .cpu(), .tolist(),
// printing, ember.tensor(..., device="cuda")) and the kernels that read a count or flag back
// (nonzero / masked_select, unique, equal / allclose), and the immediate error checks of
// device_checks.h (embedding indices, loss targets). Not reported yet: index_common.cuh's
// to_host / to_device. Explicit synchronization
// (ember.cuda.synchronize, Stream / Event synchronize) is never reported, as in PyTorch. Defined in
// cuda_extras.cu.
#pragma once

namespace ember {
namespace cuda {

void set_sync_debug_mode(int mode);
int sync_debug_mode();
// Reports the synchronizing operation `what` per the mode (a no-op in mode 0).
void sync_debug_check(const char* what);

}  // namespace cuda
}  // namespace ember
