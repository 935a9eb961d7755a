// Types that appear in op signatures (see tools/codegen/schema.py for the schema mapping), and
// the device checks the generated dispatch (ops_dispatch.cpp) runs before picking a kernel.
#pragma once
#include <initializer_list>
#include <optional>
#include <string>
#include <tuple>
#include <typeinfo>
#include <vector>

#include "core/error.h"
#include "core/generator.h"
#include "core/scalar.h"
#include "core/tensor.h"

namespace ember {

// Raises NotImplementedError naming the op and the device (what a backend did not register).
[[noreturn]] void no_kernel(const char* op, DeviceType device, bool data_dependent = false);

// The device an op runs on: that of its tensor arguments (null pointers and null tensors are
// skipped), which must all agree, else PyTorch's "Expected all tensors to be on the same
// device" error naming the op and the argument. A 0-d CPU tensor (a number held in a tensor)
// may join tensors of any device, as in PyTorch. `fallback` when no tensor decides.
DeviceType common_device(const char* op, std::initializer_list<const Tensor*> tensors,
                         std::initializer_list<const char*> names,
                         std::initializer_list<const std::vector<Tensor>*> lists = {},
                         DeviceType fallback = DeviceType::CPU);

// Registers `fn` as the kernel of op `name` on `device` (a backend's way in, see
// core/backend.h). The overload is the one whose kernel type (`ops::<overload>_fn` in ops.h)
// is exactly Fn, so a kernel with a wrong signature is refused at registration, naming the op.
//   register_kernel("add", DeviceType::PrivateUse1, &my_add);
void register_kernel_erased(const char* name, DeviceType device, const std::type_info& type,
                            void* fn);
template <class Fn>
void register_kernel(const char* name, DeviceType device, Fn fn) {
  register_kernel_erased(name, device, typeid(Fn), reinterpret_cast<void*>(fn));
}

}  // namespace ember
