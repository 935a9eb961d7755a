// TensorImpl: a strided view (sizes, strides, offset, dtype) of a reference-counted Storage.
// Tensor is a shared_ptr to it; Python objects hold the same shared_ptr, so memory is freed the
// moment the last reference, from C++ or Python, goes away.
#pragma once
#include <atomic>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "core/allocator.h"
#include "core/dtype.h"
#include "core/scalar.h"
#include "core/small_vector.h"

namespace ember {

// Inference mode (thread-local, switched by ember.inference_mode): storages made while it is on
// belong to inference tensors, which autograd refuses to save or to see updated in place
// outside inference mode (as PyTorch's inference tensors).
bool inference_mode_enabled();
void set_inference_mode_enabled(bool enabled);

// Raises "Inplace update to inference tensor outside InferenceMode is not allowed...".
[[noreturn]] void fail_inference_update();
// Raises a RuntimeError naming `op` (nullptr: "an in-place write"): the memory is read-only.
[[noreturn]] void fail_read_only_write(const char* op);

struct StorageImpl {
  DataPtr data;
  size_t nbytes = 0;
  bool inference = inference_mode_enabled();  // made inside inference_mode
  // Made by the device's allocator (empty/empty_strided), so Tensor.resize_ may grow it; false
  // for memory ember does not own (numpy/DLPack buffers, shared memory, mapped files).
  bool resizable = false;
  // Memory its owner marked read-only (a non-writable NumPy array or buffer, np.memmap(mode='r'),
  // which may be mapped without write access): every in-place write raises instead of crashing.
  bool read_only = false;
  StorageImpl(DataPtr d, size_t n) : data(std::move(d)), nbytes(n) {}
  Device device() const { return data.device(); }
};
using Storage = std::shared_ptr<StorageImpl>;

// Bumped by every in-place write; shared by a tensor and its views (autograd checks it).
struct VersionCounter {
  std::atomic<int64_t> version{0};
};

struct AutogradMeta;  // defined by the autograd engine; absent for tensors that need no grad

class TensorImpl;
using Tensor = std::shared_ptr<TensorImpl>;

class TensorImpl {
 public:
  TensorImpl(Storage storage, ScalarType dtype, DimVector sizes, DimVector strides, int64_t offset,
             std::shared_ptr<VersionCounter> version);
  ~TensorImpl();
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;

  const DimVector& sizes() const { return sizes_; }
  const DimVector& strides() const { return strides_; }
  int64_t size(int64_t d) const { return sizes_[d]; }
  int64_t stride(int64_t d) const { return strides_[d]; }
  int64_t dim() const { return sizes_.size(); }
  int64_t numel() const { return numel_; }
  int64_t storage_offset() const { return offset_; }
  ScalarType dtype() const { return dtype_; }
  int64_t itemsize() const { return ::ember::itemsize(dtype_); }
  Device device() const { return storage_->device(); }
  bool is_contiguous() const { return contiguous_; }
  // An inference tensor: its storage was made inside inference mode (views share it).
  bool is_inference() const { return storage_ && storage_->inference; }
  const Storage& storage() const { return storage_; }
  char* data() const {
    return static_cast<char*>(storage_->data.get()) + offset_ * ::ember::itemsize(dtype_);
  }
  template <class T>
  T* data_as() const {
    return reinterpret_cast<T*>(data());
  }

  int64_t version() const { return version_->version.load(std::memory_order_relaxed); }
  // Every in-place write bumps the version (before writing); an inference tensor refuses it
  // outside inference mode, and read-only memory always (the checks are loads of flags).
  void bump_version(const char* op = nullptr) {
    check_writable(op);
    bump_metadata_version();
  }
  // For in-place changes of sizes, strides or storage only (transpose_, resize_, set_): the data
  // is not written, so read-only memory allows them.
  void bump_metadata_version() {
    if (storage_ && storage_->inference && !inference_mode_enabled()) fail_inference_update();
    version_->version.fetch_add(1, std::memory_order_relaxed);
  }
  // Raises, naming `op`, when this tensor's memory is read-only (for a write without a bump).
  void check_writable(const char* op) const {
    if (storage_ && storage_->read_only) fail_read_only_write(op);
  }
  // For a result an op has just made and filled (nobody else has seen it): it starts at 0.
  void reset_version() { version_->version.store(0, std::memory_order_relaxed); }
  const std::shared_ptr<VersionCounter>& version_counter() const { return version_; }

  // The tensor this one is a view of (null for a base); autograd's view tracking uses it.
  const Tensor& base() const { return base_; }
  void set_base(Tensor base) { base_ = std::move(base); }

  // Metadata change in place (as_strided_, resize of an out= tensor).
  void set_sizes_strides(DimVector sizes, DimVector strides, int64_t offset);
  void set_storage(Storage storage) { storage_ = std::move(storage); }
  // Only for `Tensor.data = other`, which may change the dtype (sizes/strides follow separately).
  void set_dtype(ScalarType dtype) { dtype_ = dtype; }

  // ember.utils.swap_tensors: exchanges everything the two tensors hold (storage, metadata,
  // version counter, view base, autograd state); the caller makes sure nothing else refers to
  // either (a graph node or a view would see the other tensor's contents).
  void swap_contents(TensorImpl& other) noexcept;

  AutogradMeta* autograd_meta() const { return autograd_.get(); }
  void set_autograd_meta(std::unique_ptr<AutogradMeta, void (*)(AutogradMeta*)> m) {
    autograd_ = std::move(m);
  }

 private:
  void refresh();

  Storage storage_;
  DimVector sizes_, strides_;
  int64_t offset_;
  int64_t numel_ = 1;
  ScalarType dtype_;
  bool contiguous_ = true;
  std::shared_ptr<VersionCounter> version_;
  Tensor base_;
  std::unique_ptr<AutogradMeta, void (*)(AutogradMeta*)> autograd_{nullptr, nullptr};
};

// An operand that may be a tensor or a Python number (kept as a Scalar: no tensor is made).
// Default-constructed it is "absent" (an optional argument that was None).
struct TensorOrScalar {
  Tensor tensor;
  Scalar scalar;
  bool present = false;
  TensorOrScalar() = default;
  TensorOrScalar(Tensor t) : tensor(std::move(t)), present(true) {}  // NOLINT
  TensorOrScalar(Scalar s) : scalar(s), present(true) {}             // NOLINT
  bool is_tensor() const { return tensor != nullptr; }
  bool is_none() const { return !present; }
};

// ---- construction ---------------------------------------------------------------------------
DimVector contiguous_strides(const DimVector& sizes);
// Multiplies sizes, raising a clear error for negative sizes or overflow. `op` names the caller.
int64_t checked_numel(const DimVector& sizes, const char* op);
Tensor empty(const DimVector& sizes, ScalarType dtype, Device device = cpu_device());
Tensor empty_strided(const DimVector& sizes, const DimVector& strides, ScalarType dtype,
                     Device device = cpu_device());
// Strides for like's sizes in like's memory order (largest stride outermost) when like is dense
// (no gaps or overlaps: a transposed or channels-last tensor); nullopt otherwise.
std::optional<DimVector> dense_strides(const Tensor& like);
// A new tensor with like's sizes and like's layout when like is dense; contiguous otherwise.
Tensor empty_like_dense(const Tensor& like, ScalarType dtype, Device device);
// A new TensorImpl sharing `src`'s storage and version counter (a view).
Tensor make_view(const Tensor& src, DimVector sizes, DimVector strides, int64_t offset);
Tensor make_view(const Tensor& src, DimVector sizes, DimVector strides, int64_t offset,
                 ScalarType dtype);

// ---- small helpers used everywhere ----------------------------------------------------------
// Wraps a possibly negative dim into [0, ndim), raising IndexError naming `op` otherwise.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
std::string shape_str(const DimVector& sizes);
inline std::ostream& operator<<(std::ostream& os, const DimVector& v) { return os << shape_str(v); }

}  // namespace ember
