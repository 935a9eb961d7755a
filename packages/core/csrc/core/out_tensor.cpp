// out= preparation and engine warnings (see out_tensor.h).
#include "core/out_tensor.h"

#include <atomic>
#include <cstdio>

#include "core/error.h"

namespace ember {

namespace {
std::atomic<WarningHandler> g_warning_handler{nullptr};
}  // namespace

void set_warning_handler(WarningHandler handler) { g_warning_handler.store(handler); }

void warn(const std::string& message) {
  if (WarningHandler h = g_warning_handler.load()) {
    h(message);
    return;
  }
  std::fprintf(stderr, "UserWarning: %s\n", message.c_str());
}

bool resize_out(const Tensor& out, const DimVector& sizes, const char* op) {
  if (out->sizes() == sizes) return false;
  if (out->numel() != 0)
    warn(std::string(op) + ": the out= tensor had shape " + shape_str(out->sizes()) + " (" +
         std::to_string(out->numel()) + " elements) and was resized to the result's shape " +
         shape_str(sizes) +
         ". Resizing an out= tensor that holds elements is deprecated (PyTorch plans to make it "
         "an error); pass an out= tensor of the result's shape, or an empty one (resize it "
         "with out.resize_(0)) to be resized without this warning.");
  Tensor fresh = empty(sizes, out->dtype(), out->device());
  out->set_storage(fresh->storage());
  out->set_sizes_strides(sizes, fresh->strides(), 0);
  return true;
}

void check_out(const Tensor& out, ScalarType dtype, Device device, const char* op, OutDtype rule) {
  out->check_writable(op);
  if (rule == OutDtype::CanCast)
    EMBER_CHECK(can_cast(dtype, out->dtype()), op, ": result type ", dtype_name(dtype),
                " can't be cast to the desired output type ", dtype_name(out->dtype()));
  else if (rule == OutDtype::Exact)
    EMBER_CHECK(out->dtype() == dtype, op, ": expected the out= tensor to have dtype ",
                dtype_name(dtype), ", but got ", dtype_name(out->dtype()));
  else if (rule == OutDtype::Logical)
    EMBER_CHECK(out->dtype() == ScalarType::Bool || out->dtype() == ScalarType::UInt8, op,
                ": expected the out= tensor to have dtype bool or uint8, but got ",
                dtype_name(out->dtype()));
  EMBER_CHECK(out->device() == device, op, ": expected the out= tensor on device ", device.str(),
              " (where the result is), but got a tensor on ", out->device().str());
}

void prepare_out(const Tensor& out, const DimVector& sizes, ScalarType dtype, Device device,
                 const char* op, OutDtype rule) {
  check_out(out, dtype, device, op, rule);
  resize_out(out, sizes, op);
}

}  // namespace ember
