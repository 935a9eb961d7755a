// Where a tensor lives. CPU kernels are built in; CUDA and PrivateUse1 backends register
// theirs from their own extension modules (core/backend.h); Meta tensors carry sizes, strides
// and dtype but no data.
#pragma once
#include <cstdint>
#include <string>

namespace ember {

enum class DeviceType : int8_t { CPU = 0, CUDA = 1, Meta = 2, PrivateUse1 = 3 };
constexpr int kNumDeviceTypes = 4;

// The name of a device type as Python spells it ("cpu", "cuda", "meta", and the PrivateUse1
// backend's name, "privateuseone" until a backend renames it).
std::string device_type_name(DeviceType type);
// Renames the PrivateUse1 slot (once; PyTorch's rename_privateuse1_backend).
void rename_privateuse1_backend(const std::string& name);

struct Device {
  DeviceType type = DeviceType::CPU;
  int8_t index = -1;  // -1: the current device of that type
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_meta() const { return type == DeviceType::Meta; }
  // Whether the host can read the data directly (CPU memory).
  bool is_host() const { return type == DeviceType::CPU; }
  std::string str() const {
    std::string s = device_type_name(type);
    if (index >= 0) s += ":" + std::to_string(index);
    return s;
  }
};

inline Device cpu_device() { return Device{DeviceType::CPU, -1}; }
inline Device meta_device() { return Device{DeviceType::Meta, -1}; }

// Where factories allocate when no device is given (ember.set_default_device; cpu by default).
Device default_device();
void set_default_device(Device d);

}  // namespace ember
