// A float32 matrix product for the convolution kernels that reads its right operand in place
// (the im2col columns, or an input's planes) instead of copying it into BLAS's packed layout,
// on AVX-512 machines. OpenBLAS packs both operands of every call; with the few dozen output
// channels of small CNNs that copy costs about as much as the arithmetic.
#pragma once
#include <cstdint>
#include <vector>

namespace ember {
namespace cpu {

// True when the CPU runs the AVX-512 kernel (otherwise callers use gemm_rowmajor).
bool conv_gemm_available();

// The left operand A (M x K), element (m, k) at a[m * rs + k * cs], packed once for
// conv_gemm: blocks of 16 rows stored k-major (rows past M are zero).
struct PackedA {
  int64_t M = 0, K = 0;
  std::vector<float> data;
  PackedA(const float* a, int64_t rs, int64_t cs, int64_t M, int64_t K);
};

// C (M x N, row-major, leading dimension ldc) = A @ B, B (K x N) row-major with leading
// dimension ldb. Runs on the calling thread. Only call when conv_gemm_available().
void conv_gemm(const PackedA& a, int64_t N, const float* b, int64_t ldb, float* c, int64_t ldc);

// C (M x N, leading dimension ldc) = A @ B for a B read straight from a (padded) input: row k
// of B is the N contiguous floats at b + off[k] (off has K entries). This is a stride-1
// convolution along the last dim without im2col: b points at an output line's first window.
void conv_gemm_offsets(const PackedA& a, int64_t N, const float* b, const int64_t* off, float* c,
                       int64_t ldc);

// Weight gradient of such a convolution for one sample: gw (M x K, row-major) += a @ B^T with
// a (M rows of nlines * OW positions, row stride lda; line l at a + l * OW) and B's row k over
// line l the OW contiguous floats at b + lb[l] + off[k].
void conv_wgrad_offsets(const float* a, int64_t M, int64_t lda, const float* b, const int64_t* lb,
                        int64_t nlines, int64_t OW, const int64_t* off, int64_t K, float* gw);

}  // namespace cpu
}  // namespace ember
