// The Python dispatch hook (PyTorch's __torch_dispatch__): every generated dispatch::<op> of an
// op with a device kernel table (and of the view ops and *_like factories, which PyTorch also
// dispatches) starts with
//
//     if (python_dispatch::on()) {
//       if (python_dispatch::call(<index>, args, &ret, ...)) return ret;
//     }
//
// so it runs below autograd (backward ops reach it one by one) and before the device kernel.
// on() is one relaxed atomic load of a counter that is nonzero only while a TorchDispatchMode
// is entered on some thread or once a Tensor subclass with __torch_dispatch__ has been made:
// with neither, an op pays that one predictable branch. The Python layer installs the handler
// (python/python_dispatch_py.cpp), which decides whether this call goes to Python (a mode is
// entered on this thread, or a tensor argument is an instance of such a subclass).
#pragma once
#include <atomic>
#include <initializer_list>
#include <vector>

#include "core/tensor.h"

namespace ember {
namespace python_dispatch {

namespace detail {
extern std::atomic<int> g_on;
}

inline bool on() { return __builtin_expect(detail::g_on.load(std::memory_order_relaxed) != 0, 0); }
// A mode entered (+1) or exited (-1), or the first dispatch subclass made (+1, for good).
void add(int delta);

// op: the op's index in the generated table; args: pointers to the op's arguments in schema
// order; ret: where the result goes (null for ops returning nothing); tensors, lists: the
// tensor arguments (null entries for absent ones). True when Python produced the result.
using Handler = bool (*)(int op, const void* const* args, void* ret,
                         std::initializer_list<const Tensor*> tensors,
                         std::initializer_list<const std::vector<Tensor>*> lists);
void set_handler(Handler h);
// The op index of autograd's detach (not a declared op; saving an op's output for backward and
// Tensor.detach() go through it).
constexpr int kDetach = -1;
// Tensor.item() (and bool(), float(), int() of a tensor): PyTorch's aten._local_scalar_dense.
constexpr int kLocalScalarDense = -2;
bool call(int op, const void* const* args, void* ret, std::initializer_list<const Tensor*> tensors,
          std::initializer_list<const std::vector<Tensor>*> lists);

// Whether t's Python object is an instance of a Tensor subclass with __torch_dispatch__ (false
// until the Python layer installs its check): such a tensor must keep its object, so autograd
// copies it (through the hook) where it would otherwise take the buffer over.
using SubclassCheck = bool (*)(const Tensor& t);
void set_subclass_check(SubclassCheck f);
bool is_subclass(const Tensor& t);

}  // namespace python_dispatch
}  // namespace ember
