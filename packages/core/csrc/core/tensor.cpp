#include "core/tensor.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "core/error.h"

namespace ember {

namespace {
thread_local bool t_inference_mode = false;
}  // namespace

bool inference_mode_enabled() { return t_inference_mode; }
void set_inference_mode_enabled(bool enabled) { t_inference_mode = enabled; }

void fail_inference_update() {
  EMBER_FAIL(Runtime,
             "Inplace update to inference tensor outside InferenceMode is not allowed.You can "
             "make a clone to get a normal tensor before doing inplace update.See "
             "https://github.com/pytorch/rfcs/pull/17 for more details.");
}

void fail_read_only_write(const char* op) {
  EMBER_FAIL(Runtime, op ? op : "an in-place write",
             ": can't write into a tensor whose memory is read-only (it shares a non-writable "
             "NumPy array or buffer, such as np.memmap(mode='r') or bytes). Write into a copy "
             "(tensor.clone()), or make the source writable before sharing it.");
}

TensorImpl::TensorImpl(Storage storage, ScalarType dtype, DimVector sizes, DimVector strides,
                       int64_t offset, std::shared_ptr<VersionCounter> version)
    : storage_(std::move(storage)),
      sizes_(std::move(sizes)),
      strides_(std::move(strides)),
      offset_(offset),
      dtype_(dtype),
      version_(std::move(version)) {
  refresh();
}

TensorImpl::~TensorImpl() = default;

namespace {
// Element count of sizes; a view whose count overflows int64 (x.expand(2**62, 3)) is rejected
// here, the one place every view passes through, so numel() can always be trusted.
int64_t numel_or_fail(const DimVector& sizes) {
  for (int64_t s : sizes)
    if (s == 0) return 0;  // no elements, whatever the other sizes (as PyTorch)
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (__builtin_mul_overflow(n, s, &n))
      EMBER_FAIL(Runtime, "tensor of size ", shape_str(sizes),
                 " has too many elements (the count overflows int64)");
  }
  return n;
}

// Bytes for n elements of dtype, raising a clear error instead of wrapping around.
size_t checked_nbytes(int64_t n, ScalarType dtype, const DimVector& sizes, const char* op) {
  int64_t nbytes = 0;
  if (__builtin_mul_overflow(n, itemsize(dtype), &nbytes))
    EMBER_FAIL(Runtime, op, ": storage size of a tensor of size ", shape_str(sizes), " and dtype ",
               dtype_name(dtype), " overflows int64 (", n, " elements of ", itemsize(dtype),
               " bytes)");
  return static_cast<size_t>(nbytes);
}
}  // namespace

void TensorImpl::swap_contents(TensorImpl& other) noexcept {
  using std::swap;
  swap(storage_, other.storage_);
  swap(sizes_, other.sizes_);
  swap(strides_, other.strides_);
  swap(offset_, other.offset_);
  swap(numel_, other.numel_);
  swap(dtype_, other.dtype_);
  swap(contiguous_, other.contiguous_);
  swap(version_, other.version_);
  swap(base_, other.base_);
  swap(autograd_, other.autograd_);
}

void TensorImpl::set_sizes_strides(DimVector sizes, DimVector strides, int64_t offset) {
  numel_or_fail(sizes);  // before anything changes
  sizes_ = std::move(sizes);
  strides_ = std::move(strides);
  offset_ = offset;
  refresh();
}

void TensorImpl::refresh() {
  int64_t n = numel_or_fail(sizes_);
  numel_ = n;
  // Contiguous = row-major dense; size-1 dims may have any stride (as in PyTorch).
  bool c = true;
  int64_t expected = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (sizes_[d] == 1) continue;
    if (strides_[d] != expected) {
      c = false;
      break;
    }
    expected *= sizes_[d];
  }
  contiguous_ = c || n == 0;
}

DimVector contiguous_strides(const DimVector& sizes) {
  DimVector st(sizes.size(), 1);
  int64_t acc = 1;
  for (int64_t d = sizes.size() - 1; d >= 0; --d) {
    st[d] = acc;
    acc *= std::max<int64_t>(sizes[d], 1);
  }
  return st;
}

int64_t checked_numel(const DimVector& sizes, const char* op) {
  bool empty = false;
  for (int64_t s : sizes) {
    if (s < 0)
      EMBER_FAIL(Runtime, op, ": trying to create tensor with negative dimension ", s, ": ",
                 shape_str(sizes));
    empty |= s == 0;
  }
  if (empty) return 0;  // whatever the other sizes, as PyTorch (eye(2**63 - 1, 0))
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (n > (int64_t(1) << 62) / s)  // PyTorch's RuntimeError ("Storage size ...")
      EMBER_FAIL(Runtime, op, ": size ", shape_str(sizes),
                 " has too many elements (the storage size calculation overflowed)");
    n *= s;
  }
  return n;
}

Tensor empty(const DimVector& sizes, ScalarType dtype, Device device) {
  int64_t n = checked_numel(sizes, "empty");
  size_t nbytes = checked_nbytes(n, dtype, sizes, "empty");
  auto storage = std::make_shared<StorageImpl>(
      device_allocator(device.type)->allocate_on(nbytes, device.index), nbytes);
  storage->resizable = true;
  return std::make_shared<TensorImpl>(std::move(storage), dtype, sizes, contiguous_strides(sizes),
                                      0, std::make_shared<VersionCounter>());
}

Tensor empty_strided(const DimVector& sizes, const DimVector& strides, ScalarType dtype,
                     Device device) {
  EMBER_CHECK_KIND(sizes.size() == strides.size(), Runtime, "empty_strided: size ",
                   shape_str(sizes), " and stride ", shape_str(strides),
                   " must have the same length");
  checked_numel(sizes, "empty_strided");
  int64_t extent = 1;  // elements needed to hold the largest index
  for (int64_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) {
      extent = 0;
      break;
    }
    EMBER_CHECK_KIND(strides[d] >= 0, Runtime, "empty_strided: negative stride ", strides[d]);
    int64_t span = 0;
    if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &span) ||
        __builtin_add_overflow(extent, span, &extent))
      EMBER_FAIL(Runtime, "empty_strided: size ", shape_str(sizes), " with stride ",
                 shape_str(strides), " needs a storage larger than int64 can count");
  }
  size_t nbytes = checked_nbytes(extent, dtype, sizes, "empty_strided");
  auto storage = std::make_shared<StorageImpl>(
      device_allocator(device.type)->allocate_on(nbytes, device.index), nbytes);
  storage->resizable = true;
  return std::make_shared<TensorImpl>(std::move(storage), dtype, sizes, strides, 0,
                                      std::make_shared<VersionCounter>());
}

std::optional<DimVector> dense_strides(const Tensor& like) {
  const int64_t nd = like->dim();
  DimVector perm(nd);  // dims from the largest stride to the smallest
  for (int64_t d = 0; d < nd; ++d) perm[d] = d;
  std::stable_sort(perm.begin(), perm.end(),
                   [&](int64_t a, int64_t b) { return like->stride(a) > like->stride(b); });
  DimVector strides(nd);
  int64_t step = 1;
  for (int64_t k = nd - 1; k >= 0; --k) {
    const int64_t d = perm[k];
    if (like->size(d) != 1 && like->stride(d) != step) return std::nullopt;
    strides[d] = step;
    step *= like->size(d);
  }
  return strides;
}

Tensor empty_like_dense(const Tensor& like, ScalarType dtype, Device device) {
  if (auto strides = dense_strides(like))
    return empty_strided(like->sizes(), *strides, dtype, device);
  return empty(like->sizes(), dtype, device);
}

Tensor make_view(const Tensor& src, DimVector sizes, DimVector strides, int64_t offset,
                 ScalarType dtype) {
  auto t = std::make_shared<TensorImpl>(src->storage(), dtype, std::move(sizes), std::move(strides),
                                        offset, src->version_counter());
  t->set_base(src->base() ? src->base() : src);
  return t;
}

Tensor make_view(const Tensor& src, DimVector sizes, DimVector strides, int64_t offset) {
  return make_view(src, std::move(sizes), std::move(strides), offset, src->dtype());
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // 0-d tensors accept dim 0 and -1
  if (dim < -n || dim >= n)
    EMBER_FAIL(Index, op, ": dimension out of range (expected to be in range of [", -n, ", ", n - 1,
               "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

std::string shape_str(const DimVector& sizes) {
  std::ostringstream os;
  os << "(";
  for (int64_t i = 0; i < sizes.size(); ++i) {
    if (i) os << ", ";
    os << sizes[i];
  }
  if (sizes.size() == 1) os << ",";
  os << ")";
  return os.str();
}

}  // namespace ember
