// What the libraries ember loads at run time with dlopen share (cuDNN: cudnn_api.cpp; CUPTI:
// cupti_activity.cpp): file tests for their search paths, and entry points resolved by name.
#pragma once
#include <dlfcn.h>
#include <sys/stat.h>

#include <string>

namespace ember {
namespace cuda {
namespace dynlib {

inline bool is_dir(const std::string& p) {
  struct stat st{};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

inline bool is_file(const std::string& p) {
  struct stat st{};
  return stat(p.c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
}

// Looks entry points up in a loaded library; a required one that is absent makes ok() false
// and missing() names the first such.
class Symbols {
 public:
  explicit Symbols(void* lib) : lib_(lib) {}
  template <class Fn>
  void get(Fn& fn, const char* name, bool required = true) {
    void* sym = dlsym(lib_, name);
    if (!sym && required && missing_.empty()) missing_ = name;
    fn = reinterpret_cast<Fn>(sym);
  }
  bool ok() const { return missing_.empty(); }
  const std::string& missing() const { return missing_; }

 private:
  void* lib_;
  std::string missing_;
};

}  // namespace dynlib
}  // namespace cuda
}  // namespace ember
