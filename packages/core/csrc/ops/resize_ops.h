// In-place storage changes of a tensor: Tensor.resize_ (new sizes, storage grown when needed)
// and Tensor.set_ (point at another storage). Neither is differentiable.
#pragma once
#include "core/tensor.h"

namespace ember {

// The strides resize_ gives: Keep leaves them alone when the sizes do not change (contiguous
// otherwise), as PyTorch's resize_ without memory_format does.
enum class ResizeFormat { Keep, Contiguous, ChannelsLast, ChannelsLast3d };

// Grows `storage` in place to at least `nbytes` (new memory, the old bytes copied to its start);
// every tensor on the storage sees the new memory. Never shrinks (see shrink_storage). Raises for a
// storage ember does not own ("Trying to resize storage that is not resizable").
void grow_storage(const Storage& storage, size_t nbytes);

// Shrinks `storage` in place to `nbytes` (< its size), keeping its first bytes. Only the size
// changes: tensors on the storage may still view bytes past the new end, so its memory stays
// until the storage grows again or dies (they read stale bytes rather than freed memory). Raises
// for a storage ember does not own.
void shrink_storage(const Storage& storage, size_t nbytes);

// self takes `sizes` (dense strides in `format`), its storage grown when it is too small.
// Raises for a tensor that requires grad, negative sizes and a format of the wrong rank.
Tensor resize_(const Tensor& self, const DimVector& sizes, ResizeFormat format);

// self views `storage` from element `offset` with `sizes`/`strides` (the storage grown when it is
// too small, like PyTorch's set_).
Tensor set_storage_(const Tensor& self, const Storage& storage, int64_t offset,
                    const DimVector& sizes, const DimVector& strides);
// self shares source's storage, offset, sizes and strides (same dtype required).
Tensor set_tensor_(const Tensor& self, const Tensor& source);
// self becomes an empty 1-d tensor with a new, empty storage.
Tensor set_empty_(const Tensor& self);

}  // namespace ember
