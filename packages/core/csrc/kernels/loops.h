// Inner loops for TensorIterator. Each takes the operands' data pointers and innermost strides
// (output first) and applies a functor element by element. The contiguous cases are written as
// plain indexed loops so the compiler vectorizes them; values are widened to opmath_t (float for
// the 16-bit floats) before the functor sees them.
#pragma once
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"

namespace ember {

template <class T>
inline T load(const char* p) {
  return *reinterpret_cast<const T*>(p);
}
// A bool's byte may hold any value (a uint8 tensor viewed as bool, a file, a foreign buffer):
// every nonzero byte is True, as in PyTorch. Reading it as `bool` would let the compiler assume
// 0 or 1 (so 2 would count as 2, and !2 as true).
template <>
inline bool load<bool>(const char* p) {
  return *reinterpret_cast<const uint8_t*>(p) != 0;
}
// Element i of a contiguous array, with the same rule for bool.
template <class T>
inline T load_at(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    return reinterpret_cast<const uint8_t*>(p)[i] != 0;
  } else {
    return p[i];
  }
}

// Each loop calls a local copy of its functor: through the reference, a captured value (a slope,
// a bound) is read from memory that the compiler may not read ahead of the condition guarding
// it, so `x > 0 ? x : x * slope` stays a branch, mispredicted on random signs, and never
// vectorizes. The copy lives in registers.

// out = f(a)
template <class T, class R, class F>
inline void unary_loop(char** data, const int64_t* s, int64_t n, const F& f) {
  const F fn = f;  // a local copy (see above)
  using A = opmath_t<T>;
  char* out = data[0];
  const char* in = data[1];
  if (s[0] == sizeof(R) && s[1] == sizeof(T)) {
    R* o = reinterpret_cast<R*>(out);
    if constexpr (std::is_same_v<T, R> && !std::is_same_v<T, bool>) {
      if (out == in) {  // in place: one pointer, so the loop vectorizes without an alias check
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<R>(fn(static_cast<A>(o[i])));
        return;
      }
    }
    const T* a = reinterpret_cast<const T*>(in);
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<R>(fn(static_cast<A>(load_at(a, i))));
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    *reinterpret_cast<R*>(out + i * s[0]) =
        static_cast<R>(fn(static_cast<A>(load<T>(in + i * s[1]))));
}

// out = f(a, b)
template <class T, class R, class F>
inline void binary_loop(char** data, const int64_t* s, int64_t n, const F& f) {
  const F fn = f;  // a local copy (see above)
  using A = opmath_t<T>;
  R* o = reinterpret_cast<R*>(data[0]);
  const T* a = reinterpret_cast<const T*>(data[1]);
  const T* b = reinterpret_cast<const T*>(data[2]);
  if (s[0] == sizeof(R)) {
    if constexpr (std::is_same_v<T, R> && !std::is_same_v<T, bool>) {
      // In place (x.add_(y), x.mul_(2)): through one pointer, so the compiler vectorizes the
      // loop instead of guarding it with an overlap check that o == a fails.
      if (data[0] == data[1] && s[1] == sizeof(T) && s[2] == 0) {
        const A bv = static_cast<A>(load_at(b, 0));
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<R>(fn(static_cast<A>(o[i]), bv));
        return;
      }
      if (data[0] == data[1] && s[1] == sizeof(T) && s[2] == sizeof(T) && data[2] != data[0]) {
        for (int64_t i = 0; i < n; ++i)
          o[i] = static_cast<R>(fn(static_cast<A>(o[i]), static_cast<A>(load_at(b, i))));
        return;
      }
    }
    if (s[1] == sizeof(T) && s[2] == sizeof(T)) {
      for (int64_t i = 0; i < n; ++i)
        o[i] = static_cast<R>(fn(static_cast<A>(load_at(a, i)), static_cast<A>(load_at(b, i))));
      return;
    }
    if (s[1] == sizeof(T) && s[2] == 0) {
      const A bv = static_cast<A>(load_at(b, 0));
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<R>(fn(static_cast<A>(load_at(a, i)), bv));
      return;
    }
    if (s[1] == 0 && s[2] == sizeof(T)) {
      const A av = static_cast<A>(load_at(a, 0));
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<R>(fn(av, static_cast<A>(load_at(b, i))));
      return;
    }
  }
  for (int64_t i = 0; i < n; ++i)
    *reinterpret_cast<R*>(data[0] + i * s[0]) = static_cast<R>(fn(
        static_cast<A>(load<T>(data[1] + i * s[1])), static_cast<A>(load<T>(data[2] + i * s[2]))));
}

// out = f(a, b, c) (all inputs of type T)
template <class T, class R, class F>
inline void ternary_loop(char** data, const int64_t* s, int64_t n, const F& f) {
  const F fn = f;  // a local copy (see above)
  using A = opmath_t<T>;
  for (int64_t i = 0; i < n; ++i)
    *reinterpret_cast<R*>(data[0] + i * s[0]) = static_cast<R>(
        fn(static_cast<A>(load<T>(data[1] + i * s[1])), static_cast<A>(load<T>(data[2] + i * s[2])),
           static_cast<A>(load<T>(data[3] + i * s[3]))));
}

// out = f(a, b, c, d)
template <class T, class R, class F>
inline void quaternary_loop(char** data, const int64_t* s, int64_t n, const F& f) {
  const F fn = f;  // a local copy (see above)
  using A = opmath_t<T>;
  for (int64_t i = 0; i < n; ++i)
    *reinterpret_cast<R*>(data[0] + i * s[0]) = static_cast<R>(fn(
        static_cast<A>(load<T>(data[1] + i * s[1])), static_cast<A>(load<T>(data[2] + i * s[2])),
        static_cast<A>(load<T>(data[3] + i * s[3])), static_cast<A>(load<T>(data[4] + i * s[4]))));
}

}  // namespace ember
