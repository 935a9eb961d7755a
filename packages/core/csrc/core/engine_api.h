// The C++ entry points ember._C hands to extension modules that are built separately (the CUDA
// module, later third-party backends) through the capsule `ember._C._engine_api`, so that they
// register into the one engine instead of linking a second copy of its state.
#pragma once
#include "core/allocator.h"

namespace ember {

struct EngineApi {
  static constexpr int kVersion = 1;
  int version;
  void (*register_device_allocator)(DeviceType type, Allocator* alloc);
};

}  // namespace ember
