// Types that appear in op signatures (see tools/codegen/schema.py for the schema mapping).
#pragma once
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/generator.h"
#include "core/scalar.h"
#include "core/tensor.h"

namespace ember {

[[noreturn]] inline void no_kernel(const char* op, DeviceType device) {
  EMBER_FAIL(NotImplemented, op, ": no kernel for device ",
             device == DeviceType::CPU ? "cpu" : "cuda",
             device == DeviceType::CUDA ? " (this build of ember has no CUDA kernel for it)" : "");
}

}  // namespace ember
