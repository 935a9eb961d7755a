// Exceptions thrown by the C++ core. Each kind maps to the Python exception
// PyTorch raises in the same situation (see python/module.cpp).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace ember {

// DtypeNotImplemented: an op has no kernel for a dtype. PyTorch raises NotImplementedError there;
// ember raised TypeError before, so its Python class is both.
enum class ErrorKind {
  Runtime,
  Value,
  Type,
  Index,
  NotImplemented,
  DtypeNotImplemented,
  OutOfMemory
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& msg) : std::runtime_error(msg), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T, class... Rest>
void append(std::ostringstream& os, const T& v, const Rest&... rest) {
  os << v;
  append(os, rest...);
}
template <class... Args>
[[noreturn]] void fail(ErrorKind kind, const Args&... args) {
  std::ostringstream os;
  append(os, args...);
  throw Error(kind, os.str());
}
}  // namespace detail

}  // namespace ember

// EMBER_CHECK(cond, "op: message ", value, ...) throws RuntimeError when cond is false.
#define EMBER_CHECK(cond, ...)                                                    \
  do {                                                                            \
    if (!(cond)) ::ember::detail::fail(::ember::ErrorKind::Runtime, __VA_ARGS__); \
  } while (0)
#define EMBER_CHECK_KIND(cond, kind, ...)                                      \
  do {                                                                         \
    if (!(cond)) ::ember::detail::fail(::ember::ErrorKind::kind, __VA_ARGS__); \
  } while (0)
#define EMBER_FAIL(kind, ...) ::ember::detail::fail(::ember::ErrorKind::kind, __VA_ARGS__)
