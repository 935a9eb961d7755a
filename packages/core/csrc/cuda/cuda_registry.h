// How each kernel file of the CUDA backend joins the engine: it defines a registration function
// and names it with EMBER_CUDA_REGISTER; loading ember._C_cuda runs them all (cuda_module.cpp),
// each calling register_kernel("op", DeviceType::CUDA, &kernel) (ops/op_types.h).
//   namespace { void register_reduce() { register_kernel("sum", DeviceType::CUDA, &sum); } }
//   EMBER_CUDA_REGISTER(register_reduce)
#pragma once
#include <vector>

namespace ember {
namespace cuda {

using RegisterFn = void (*)();
std::vector<RegisterFn>& registrations();
struct Registrar {
  explicit Registrar(RegisterFn fn) { registrations().push_back(fn); }
};
// Runs every registration function once.
void register_all_kernels();

}  // namespace cuda
}  // namespace ember

#define EMBER_CUDA_REGISTER_CONCAT2(a, b) a##b
#define EMBER_CUDA_REGISTER_CONCAT(a, b) EMBER_CUDA_REGISTER_CONCAT2(a, b)
#define EMBER_CUDA_REGISTER(fn) \
  static ::ember::cuda::Registrar EMBER_CUDA_REGISTER_CONCAT(ember_cuda_registrar_, __LINE__)(&fn);
