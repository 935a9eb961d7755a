// The explicit sync points of the composites: the one way they read tensor values on the host
// (a size that depends on data, a check of values), and the one way a factory computed on the
// host (ranges, eye, randperm) reaches the device it was asked for.
#pragma once
#include <optional>

#include "core/tensor.h"

namespace ember {

// t's values readable on the host: t itself on the CPU, a copy from any other device (which
// waits for its queued work). Meta tensors have no values: raises NotImplementedError naming op.
Tensor host_values(const Tensor& t, const char* op);

// A factory result computed on the host, moved to `device` (the default device when unset).
Tensor to_factory_device(const Tensor& host, std::optional<Device> device);

}  // namespace ember
