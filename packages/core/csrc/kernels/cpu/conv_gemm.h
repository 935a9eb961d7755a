// A float32 matrix product for the convolution kernels that reads its right operand in place
// (the im2col columns, or an input's planes) instead of copying it into BLAS's packed layout,
// on AVX-512 machines. OpenBLAS packs both operands of every call; with the few dozen output
// channels of small CNNs that copy costs about as much as the arithmetic.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>

namespace ember {
namespace cpu {

// True when the CPU runs the AVX-512 kernel (otherwise callers use gemm_rowmajor).
bool conv_gemm_available();

// Scratch memory of the convolution kernels, uninitialized, from a small per-thread cache of
// released blocks: a fresh allocation of a few MiB is mapped anew (and page-faulted in) on every
// call otherwise, which costs as much as the small products that use it.
// (capacity: the block's true size, at least bytes, to hand back to scratch_release.)
void* scratch_acquire(size_t bytes, size_t* capacity);
void scratch_release(void* p, size_t capacity);

template <class T>
class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(int64_t n)
      : n_(n > 0 ? n : 0),
        p_(n_ ? static_cast<T*>(scratch_acquire(static_cast<size_t>(n_) * sizeof(T), &cap_))
              : nullptr) {}
  ~Scratch() {
    if (p_) scratch_release(p_, cap_);
  }
  Scratch(Scratch&& o) noexcept : n_(o.n_), cap_(o.cap_), p_(o.p_) {
    o.p_ = nullptr, o.n_ = 0, o.cap_ = 0;
  }
  Scratch& operator=(Scratch&& o) noexcept {
    std::swap(n_, o.n_);
    std::swap(cap_, o.cap_);
    std::swap(p_, o.p_);
    return *this;
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* data() const { return p_; }
  int64_t size() const { return n_; }

 private:
  int64_t n_ = 0;
  size_t cap_ = 0;
  T* p_ = nullptr;
};

// The left operand A (M x K), element (m, k) at a[m * rs + k * cs], packed once for
// conv_gemm: blocks of 16 rows stored k-major (rows past M are zero).
struct PackedA {
  int64_t M = 0, K = 0;
  Scratch<float> data;
  PackedA(const float* a, int64_t rs, int64_t cs, int64_t M, int64_t K);
  // Columns in segments of seg: column k at a + (k / seg) * seg_stride + k % seg (row stride rs),
  // e.g. the positions of several samples one after another.
  PackedA(const float* a, int64_t rs, int64_t M, int64_t K, int64_t seg, int64_t seg_stride);
};

// C (M x N, row-major, leading dimension ldc) = A @ B, B (K x N) row-major with leading
// dimension ldb. Runs on the calling thread. Only call when conv_gemm_available().
// (accumulate: C += A @ B.)
void conv_gemm(const PackedA& a, int64_t N, const float* b, int64_t ldb, float* c, int64_t ldc,
               bool accumulate = false);

// C (M x nlines * OW, leading dimension ldc) = A @ B for a B read straight from a (padded)
// input: over output line l, row k of B is the OW contiguous floats at b + lb[l] + off[k] (off
// has K entries), and the line's outputs go to c + l * OW in each row of C. This is a stride-1
// convolution along the last dim without im2col (lb: each line's first window).
void conv_gemm_lines(const PackedA& a, int64_t nlines, int64_t OW, const float* b,
                     const int64_t* lb, const int64_t* off, float* c, int64_t ldc);

// Weight gradient of such a convolution for one sample: gw (M x K, row-major) += a @ B^T with
// a (M rows of nlines * OW positions, row stride lda; line l at a + l * OW) and B's row k over
// line l the OW contiguous floats at b + lb[l] + off[k].
void conv_wgrad_offsets(const float* a, int64_t M, int64_t lda, const float* b, const int64_t* lb,
                        int64_t nlines, int64_t OW, const int64_t* off, int64_t K, float* gw);

// C (M x 16 * npanels, leading dimension ldc) = A @ B (+ C when accumulate) for a B gathered
// by rows and by 16-column panels: B's row k over panel p is the 16 contiguous floats at
// b + row_off[k] + col_off[p] (row_off has K entries). With a channels-last (padded) input, the
// rows are output positions and the panels 16 channels of one kernel tap: the weight gradient
// without columns.
void conv_gemm_gather(const PackedA& a, int64_t npanels, const int64_t* col_off, const float* b,
                      const int64_t* row_off, float* c, int64_t ldc, bool accumulate);

// im2col from a zero-padded input: row r of cols (rows ld apart) holds, for each output line l
// in turn, the OW elements src[off[r] + lb[l] + w * sw] (w < OW). Vectorized on AVX-512.
void im2col_rows(const float* src, const int64_t* off, int64_t rows, const int64_t* lb,
                 int64_t nlines, int64_t OW, int64_t sw, float* cols, int64_t ld);

// One row of W pixels of a (C, P) input to channels-last: dst[w * ld + c] = src[c * P + w].
// Vectorized on AVX-512 (16 x 16 blocks transposed in registers).
void to_channels_last(const float* src, int64_t C, int64_t P, int64_t W, float* dst, int64_t ld);

// dst[i * len + j] = src[off[i * len] + j] for i < nruns, j < len: runs of a window (its kernel
// rows) copied next to each other. Vectorized on AVX-512 for len <= 16.
void copy_runs(const float* src, const int64_t* off, int64_t nruns, int64_t len, float* dst);

}  // namespace cpu
}  // namespace ember
