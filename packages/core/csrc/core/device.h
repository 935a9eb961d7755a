// Where a tensor lives. CUDA is reserved for the CUDA backend (csrc/cuda).
#pragma once
#include <cstdint>
#include <string>

namespace ember {

enum class DeviceType : int8_t { CPU = 0, CUDA = 1 };
constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::CPU;
  int8_t index = -1;  // -1: the current device of that type
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  bool is_cpu() const { return type == DeviceType::CPU; }
  std::string str() const {
    std::string s = type == DeviceType::CPU ? "cpu" : "cuda";
    if (index >= 0) s += ":" + std::to_string(index);
    return s;
  }
};

inline Device cpu_device() { return Device{DeviceType::CPU, -1}; }

}  // namespace ember
