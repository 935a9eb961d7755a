// Device-neutral rules of tril / triu shared by the CPU and CUDA kernels.
#pragma once
#include "core/tensor.h"

namespace ember {

void check_triangle_input(const Tensor& self, const char* op);
// Diagonals beyond any matrix size act alike; clamping keeps i + diagonal from overflowing.
int64_t clamp_diagonal(int64_t d);
// The result r may go to out= (of its dtype exactly; resized unless out is self).
void check_triangle_out(const Tensor& r, const Tensor& out, const Tensor& self, const char* op);

}  // namespace ember
