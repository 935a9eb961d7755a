// The integers a dtype holds: used by the random kernels (random_ range checks) and by the
// randperm factory (ops/creation_ops.cpp), which computes on the host for any device.
#pragma once
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "core/half.h"

namespace ember {

// Largest integer a floating type holds exactly with all smaller ones: 2^digits.
template <class T>
uint64_t float_int_limit() {
  if constexpr (std::is_same_v<T, Half>)
    return uint64_t(1) << 11;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return uint64_t(1) << 8;
  else if constexpr (std::is_same_v<T, float>)
    return uint64_t(1) << 24;
  else
    return uint64_t(1) << 53;
}

// [min, max] of the integers a dtype can hold (floats: the exactly representable range).
template <class T>
std::pair<int64_t, uint64_t> int_bounds() {
  if constexpr (std::is_same_v<T, bool>) {
    return {0, 1};
  } else if constexpr (std::is_integral_v<T>) {
    return {static_cast<int64_t>(std::numeric_limits<T>::min()),
            static_cast<uint64_t>(std::numeric_limits<T>::max())};
  } else {
    const uint64_t lim = float_int_limit<T>();
    return {-static_cast<int64_t>(lim), lim};
  }
}

}  // namespace ember
