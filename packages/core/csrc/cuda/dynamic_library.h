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

// dlopen(path) (RTLD_NOW | RTLD_LOCAL); null with dlerror()'s reason (it names the file)
// appended to `why` as a "\n  " line when it fails.
template <class Out>
void* open(const std::string& path, Out& why) {
  dlerror();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    why << "\n  " << (e ? std::string(e) : path + ": dlopen failed");
  }
  return lib;
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
