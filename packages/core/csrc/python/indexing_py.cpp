// Tensor.__getitem__ / __setitem__. Basic indices (ints, slices with steps, None, Ellipsis)
// produce views computed directly from sizes and strides; advanced indices (bool masks, integer
// tensors and lists) go through the index ops.
#include "kernels/iterator.h"
#include "ops.h"
#include "python/tensor_py.h"

namespace ember {
namespace {

bool is_basic(PyObject* o) {
  return (PyLong_Check(o) && !PyBool_Check(o)) || PySlice_Check(o) || o == Py_None || o == Py_Ellipsis;
}

// Applies a tuple of basic indices; returns the view.
Tensor basic_index(const Tensor& self, PyObject* const* items, Py_ssize_t n) {
  int64_t consumed = 0;  // dims of self an index refers to
  for (Py_ssize_t i = 0; i < n; ++i)
    if (items[i] != Py_None && items[i] != Py_Ellipsis) consumed++;
  EMBER_CHECK_KIND(consumed <= self->dim(), Index, "too many indices for tensor of dimension ",
                   self->dim(), " (got ", consumed, ")");
  DimVector sizes, strides;
  int64_t offset = self->storage_offset();
  int64_t d = 0;  // current dim of self
  bool seen_ellipsis = false;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* o = items[i];
    if (o == Py_None) {
      sizes.push_back(1);
      strides.push_back(d < self->dim() ? self->stride(d) * self->size(d) : 1);
    } else if (o == Py_Ellipsis) {
      EMBER_CHECK_KIND(!seen_ellipsis, Index, "an index can only have a single ellipsis ('...')");
      seen_ellipsis = true;
      int64_t skip = self->dim() - consumed;
      for (int64_t k = 0; k < skip; ++k, ++d) {
        sizes.push_back(self->size(d));
        strides.push_back(self->stride(d));
      }
    } else if (PySlice_Check(o)) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(o, &start, &stop, &step) < 0) throw py::error_already_set();
      EMBER_CHECK_KIND(step > 0, Value, "step must be greater than zero (got ", step, ")");
      Py_ssize_t len = PySlice_AdjustIndices(self->size(d), &start, &stop, step);
      offset += start * self->stride(d);
      sizes.push_back(len);
      strides.push_back(self->stride(d) * step);
      ++d;
    } else {
      int64_t idx = PyLong_AsLongLong(o);
      if (idx == -1 && PyErr_Occurred()) throw py::error_already_set();
      int64_t size = self->size(d);
      EMBER_CHECK_KIND(idx >= -size && idx < size, Index, "index ", idx,
                       " is out of bounds for dimension ", d, " with size ", size);
      if (idx < 0) idx += size;
      offset += idx * self->stride(d);
      ++d;
    }
  }
  for (; d < self->dim(); ++d) {
    sizes.push_back(self->size(d));
    strides.push_back(self->stride(d));
  }
  return make_view(self, std::move(sizes), std::move(strides), offset);
}

Tensor getitem(const Tensor& self, py::handle index) {
  PyObject* o = index.ptr();
  if (is_basic(o)) return basic_index(self, &o, 1);
  if (PyTuple_Check(o)) {
    Py_ssize_t n = PyTuple_GET_SIZE(o);
    bool all_basic = true;
    for (Py_ssize_t i = 0; i < n && all_basic; ++i) all_basic = is_basic(PyTuple_GET_ITEM(o, i));
    if (all_basic) return basic_index(self, &PyTuple_GET_ITEM(o, 0), n);
  }
  EMBER_FAIL(NotImplemented, "indexing with ", Py_TYPE(o)->tp_name,
             " (advanced indexing) is not supported yet");
}

void fill_with(const Tensor& dst, const Scalar& s) {
  Tensor v = empty(DimVector{}, dst->dtype(), dst->device());
  store_scalar(s, dst->dtype(), v->data());
  copy_into(dst, v);
}

}  // namespace

void bind_indexing(py::module_&, TensorClass& cls) {
  cls.def("__getitem__", [](const Tensor& self, py::handle index) { return getitem(self, index); });
  cls.def("__setitem__", [](const Tensor& self, py::handle index, const TensorOrScalar& value) {
    Tensor view = getitem(self, index);
    if (value.is_tensor()) {
      copy_into(view, value.tensor);
    } else {
      fill_with(view, value.scalar);
    }
  });
}

}  // namespace ember
