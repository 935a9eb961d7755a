// Inner loops for TensorIterator. Each takes the operands' data pointers and innermost strides
// (output first) and applies a functor element by element. The contiguous cases are written as
// plain indexed loops so the compiler vectorizes them; values are widened to opmath_t (float for
// the 16-bit floats) before the functor sees them.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace ember {

template <class T>
inline T load(const char* p) {
  return *reinterpret_cast<const T*>(p);
}

// out = f(a)
template <class T, class R, class F>
inline void unary_loop(char** data, const int64_t* s, int64_t n, const F& f) {
  using A = opmath_t<T>;
  char* out = data[0];
  const char* in = data[1];
  if (s[0] == sizeof(R) && s[1] == sizeof(T)) {
    R* o = reinterpret_cast<R*>(out);
    const T* a = reinterpret_cast<const T*>(in);
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<R>(f(static_cast<A>(a[i])));
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    *reinterpret_cast<R*>(out + i * s[0]) =
        static_cast<R>(f(static_cast<A>(load<T>(in + i * s[1]))));
}

// out = f(a, b)
template <class T, class R, class F>
inline void binary_loop(char** data, const int64_t* s, int64_t n, const F& f) {
  using A = opmath_t<T>;
  R* o = reinterpret_cast<R*>(data[0]);
  const T* a = reinterpret_cast<const T*>(data[1]);
  const T* b = reinterpret_cast<const T*>(data[2]);
  if (s[0] == sizeof(R)) {
    if (s[1] == sizeof(T) && s[2] == sizeof(T)) {
      for (int64_t i = 0; i < n; ++i)
        o[i] = static_cast<R>(f(static_cast<A>(a[i]), static_cast<A>(b[i])));
      return;
    }
    if (s[1] == sizeof(T) && s[2] == 0) {
      const A bv = static_cast<A>(*b);
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<R>(f(static_cast<A>(a[i]), bv));
      return;
    }
    if (s[1] == 0 && s[2] == sizeof(T)) {
      const A av = static_cast<A>(*a);
      for (int64_t i = 0; i < n; ++i) o[i] = static_cast<R>(f(av, static_cast<A>(b[i])));
      return;
    }
  }
  for (int64_t i = 0; i < n; ++i)
    *reinterpret_cast<R*>(data[0] + i * s[0]) = static_cast<R>(f(
        static_cast<A>(load<T>(data[1] + i * s[1])), static_cast<A>(load<T>(data[2] + i * s[2]))));
}

// out = f(a, b, c) (all inputs of type T)
template <class T, class R, class F>
inline void ternary_loop(char** data, const int64_t* s, int64_t n, const F& f) {
  using A = opmath_t<T>;
  for (int64_t i = 0; i < n; ++i)
    *reinterpret_cast<R*>(data[0] + i * s[0]) = static_cast<R>(
        f(static_cast<A>(load<T>(data[1] + i * s[1])), static_cast<A>(load<T>(data[2] + i * s[2])),
          static_cast<A>(load<T>(data[3] + i * s[3]))));
}

// out = f(a, b, c, d)
template <class T, class R, class F>
inline void quaternary_loop(char** data, const int64_t* s, int64_t n, const F& f) {
  using A = opmath_t<T>;
  for (int64_t i = 0; i < n; ++i)
    *reinterpret_cast<R*>(data[0] + i * s[0]) = static_cast<R>(f(
        static_cast<A>(load<T>(data[1] + i * s[1])), static_cast<A>(load<T>(data[2] + i * s[2])),
        static_cast<A>(load<T>(data[3] + i * s[3])), static_cast<A>(load<T>(data[4] + i * s[4]))));
}

}  // namespace ember
