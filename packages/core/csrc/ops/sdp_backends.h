// Which scaled_dot_product_attention kernels may run (torch.backends.cuda.enable_*_sdp and
// torch.nn.attention.sdpa_kernel set them, on every device): the fused kernel
// (_scaled_dot_product_fused_attention; allowed while any of flash / memory-efficient / cuDNN is
// enabled, as it stands in for all three) and the math path.
#pragma once

namespace ember {

void set_sdp_backends(bool math, bool fused);
bool sdp_math_enabled();
bool sdp_fused_enabled();

}  // namespace ember
