// Tensor.__getitem__ / __setitem__ with PyTorch's rules. Basic indices (ints, slices with steps,
// None, Ellipsis) only compute a view from sizes and strides -- no temporary Python objects or
// tensors -- so x[0] stays cheap. Advanced indices (integer and bool tensors, lists, NumPy arrays,
// Python bools) are collected per dim of that view and handed to the _index / index_put_ ops,
// which put the broadcast index dims where PyTorch does (in place when the advanced indices are
// adjacent, first otherwise). Ints stay basic (a select) even next to advanced indices, as in
// PyTorch (NumPy would treat them as advanced).
#include <cstring>
#include <string>

#include "autograd/autograd.h"
#include "autograd/forward_ad.h"
#include "autograd/untracked_views.h"
#include "autograd/views.h"
#include "kernels/iterator.h"
#include "ops.h"
#include "ops/python_dispatch.h"
#include "python/python_dispatch_py.h"
#include "python/tensor_py.h"

namespace ember {

Tensor tensor_from_data(py::handle data, std::optional<ScalarType> dtype);  // python/tensor_py.cpp

namespace {

bool is_basic(PyObject* o) {
  return (PyLong_Check(o) && !PyBool_Check(o)) || PySlice_Check(o) || o == Py_None ||
         o == Py_Ellipsis;
}

[[noreturn]] void out_of_bounds(int64_t idx, int64_t dim, int64_t size) {
  EMBER_FAIL(Index, "index ", idx, " is out of bounds for dimension ", dim, " with size ", size);
}

int64_t as_index(PyObject* o) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow)
    EMBER_FAIL(Index, "index ", py::str(o).cast<std::string>(), " is too large to be an index");
  return v;
}

// Applies a tuple of basic indices; returns the view. The hot path of x[i].
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
      int64_t idx = as_index(o);
      int64_t size = self->size(d);
      if (idx < -size || idx >= size) out_of_bounds(idx, d, size);
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

// PyTorch's grad_fn name for basic indexing (ember makes one strided view; PyTorch applies the
// items in order, so its grad_fn is the last op's): an int is a select, None an unsqueeze, a
// slice a slice; inside a tuple a slice over a whole dim and `...` are skipped, and a tuple that
// applies nothing gives an alias. Run only for views that record history.
const char* basic_index_node_name(const Tensor& self, PyObject* const* items, Py_ssize_t n,
                                  bool tuple) {
  if (!tuple) {
    PyObject* o = items[0];
    return o == Py_None       ? "UnsqueezeBackward0"
           : o == Py_Ellipsis ? "AliasBackward0"
           : PySlice_Check(o) ? "SliceBackward0"
                              : "SelectBackward0";
  }
  const char* name = "AliasBackward0";
  int64_t consumed = 0;
  for (Py_ssize_t i = 0; i < n; ++i)
    if (items[i] != Py_None && items[i] != Py_Ellipsis) consumed++;
  int64_t d = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* o = items[i];
    if (o == Py_None) {
      name = "UnsqueezeBackward0";
    } else if (o == Py_Ellipsis) {
      d += self->dim() - consumed;
    } else if (PySlice_Check(o)) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(o, &start, &stop, &step) < 0) throw py::error_already_set();
      Py_ssize_t len = PySlice_AdjustIndices(self->size(d), &start, &stop, step);
      if (!(start == 0 && step == 1 && len == self->size(d))) name = "SliceBackward0";
      ++d;
    } else {
      name = "SelectBackward0";
      ++d;
    }
  }
  return name;
}

// The same through the dispatched view ops (select, narrow, unsqueeze; unfold for a slice with
// a step), which record their own autograd history: what x[...] runs while the
// __torch_dispatch__ hook is on (ops/python_dispatch.h), so handlers see it.
Tensor basic_index_dispatched(const Tensor& self, PyObject* const* items, Py_ssize_t n) {
  int64_t consumed = 0;
  for (Py_ssize_t i = 0; i < n; ++i)
    if (items[i] != Py_None && items[i] != Py_Ellipsis) consumed++;
  EMBER_CHECK_KIND(consumed <= self->dim(), Index, "too many indices for tensor of dimension ",
                   self->dim(), " (got ", consumed, ")");
  Tensor v = self;
  int64_t d = 0;   // current dim of v
  int64_t sd = 0;  // dim of self it came from (for messages)
  bool seen_ellipsis = false;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* o = items[i];
    if (o == Py_None) {
      v = ops::unsqueeze(v, d);
      ++d;
    } else if (o == Py_Ellipsis) {
      EMBER_CHECK_KIND(!seen_ellipsis, Index, "an index can only have a single ellipsis ('...')");
      seen_ellipsis = true;
      d += self->dim() - consumed;  // the dims the ellipsis spans
      sd += self->dim() - consumed;
    } else if (PySlice_Check(o)) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(o, &start, &stop, &step) < 0) throw py::error_already_set();
      EMBER_CHECK_KIND(step > 0, Value, "step must be greater than zero (got ", step, ")");
      Py_ssize_t len = PySlice_AdjustIndices(v->size(d), &start, &stop, step);
      if (step == 1 || len == 0) {
        v = ops::narrow(v, d, start, len);
      } else {  // every step-th element: windows of one element, step apart
        v = ops::narrow(v, d, start, (len - 1) * step + 1);
        v = ops::select(ops::unfold(v, d, 1, step), -1, 0);
      }
      ++d;
      ++sd;
    } else {
      int64_t idx = as_index(o);
      int64_t size = v->size(d);
      if (idx < -size || idx >= size) out_of_bounds(idx, sd, size);
      v = ops::select(v, d, idx);
      ++sd;
    }
  }
  return v == self ? ops::view(self, self->sizes()) : v;  // x[...]: a view all the same
}

// ---- the general path -----------------------------------------------------------------------

struct Item {
  enum Kind { Int, Slice, None, Ellipsis, Bool, Tensor } kind = None;
  int64_t value = 0;         // Int; Bool (0/1)
  bool from_tensor = false;  // an Int given as a 0-d tensor: selects, but the result is a copy
  PyObject* slice = nullptr;
  ember::Tensor tensor;
  bool is_mask() const {
    return kind == Tensor &&
           (tensor->dtype() == ScalarType::Bool || tensor->dtype() == ScalarType::UInt8);
  }
};

bool is_numpy_bool(PyObject* o) {
  const char* n = Py_TYPE(o)->tp_name;
  return std::strcmp(n, "numpy.bool") == 0 || std::strcmp(n, "numpy.bool_") == 0;
}

Item tensor_item(Tensor t) {
  ScalarType dt = t->dtype();
  Item it;
  if (t->dim() == 0 && (dt == ScalarType::Bool || dt == ScalarType::UInt8)) {
    it.kind = Item::Bool;  // a 0-d mask acts like a Python bool
    it.value = scalar_value(t).to_bool();
    return it;
  }
  // A 0-d integer tensor of any width acts like an int (as in PyTorch: int8 and uint16 too);
  // only index tensors with elements must be long, int, byte or bool.
  if (t->dim() == 0 && is_integral(dt, false)) {
    it.kind = Item::Int;
    it.value = scalar_value(t).to_int();
    it.from_tensor = true;
    return it;
  }
  if (dt != ScalarType::Int64 && dt != ScalarType::Int32 && dt != ScalarType::Bool &&
      dt != ScalarType::UInt8)
    EMBER_FAIL(Index, "tensors used as indices must be long, int, byte or bool tensors (got ",
               dtype_name(dt), ")");
  it.kind = Item::Tensor;
  it.tensor = std::move(t);
  return it;
}

Item classify(PyObject* o) {
  Item it;
  if (PyBool_Check(o) || is_numpy_bool(o)) {
    it.kind = Item::Bool;
    it.value = PyObject_IsTrue(o);
  } else if (PyLong_Check(o)) {
    it.kind = Item::Int;
    it.value = as_index(o);
  } else if (PySlice_Check(o)) {
    it.kind = Item::Slice;
    it.slice = o;
  } else if (o == Py_None) {
    it.kind = Item::None;
  } else if (o == Py_Ellipsis) {
    it.kind = Item::Ellipsis;
  } else if (is_tensor_object(o)) {
    return tensor_item(py::reinterpret_borrow<py::object>(o).cast<Tensor>());
  } else if (PyIndex_Check(o) && !PySequence_Check(o)) {  // NumPy integer scalars (not arrays)
    it.kind = Item::Int;
    it.value = PyNumber_AsSsize_t(o, PyExc_IndexError);
    if (it.value == -1 && PyErr_Occurred()) throw py::error_already_set();
  } else if ((PySequence_Check(o) && !PyUnicode_Check(o) && !PyBytes_Check(o)) ||
             PyObject_CheckBuffer(o)) {
    Tensor t = tensor_from_data(o, std::nullopt);
    if (t->numel() == 0 && is_floating(t->dtype()))
      t = ops::_to_dtype(t, ScalarType::Int64, false);  // x[[]]
    return tensor_item(std::move(t));
  } else {
    EMBER_FAIL(
        Index,
        "only integers, slices (`:`), ellipsis (`...`), None and long or byte tensors are valid "
        "indices (got ",
        Py_TYPE(o)->tp_name, ")");
  }
  return it;
}

// PyTorch's (and old NumPy's) rule for a non-tuple sequence index: it is a tuple of indices when it
// holds a slice, Ellipsis, None, a tensor or another sequence (x[[[0, 1], [1, 2]]] == x[[0, 1], [1,
// 2]]); otherwise it is one index (x[[0, 1]]). NumPy arrays and tensors are always one index.
bool sequence_as_tuple(PyObject* o) {
  if (PyTuple_Check(o)) return true;
  if (is_tensor_object(o) || !PyList_Check(o)) return false;
  Py_ssize_t n = PyList_GET_SIZE(o);
  if (n >= 32) return false;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* x = PyList_GET_ITEM(o, i);
    if (is_tensor_object(x) || PySlice_Check(x) || x == Py_Ellipsis || x == Py_None) return true;
    if (PySequence_Check(x) && !PyUnicode_Check(x) && !PyBytes_Check(x)) return true;
  }
  return false;
}

struct Indexed {
  Tensor view;  // self after the basic indices (a view)
  std::vector<Tensor>
      indices;  // advanced indices per dim of view (null: none; a mask spans its dims)
  bool advanced = false;
  bool copy = false;  // PyTorch returns a copy even without advanced indices (a 0-d tensor index)
};

Indexed apply_indices(const Tensor& self, PyObject* index) {
  std::vector<Item> items;
  if (sequence_as_tuple(index)) {
    py::tuple t = py::reinterpret_borrow<py::object>(index).cast<py::tuple>();
    items.reserve(t.size());
    for (auto x : t) items.push_back(classify(x.ptr()));
  } else {
    items.push_back(classify(index));
  }
  int64_t specified = 0;
  bool seen_ellipsis = false;
  for (const Item& it : items) {
    if (it.kind == Item::Int || it.kind == Item::Slice) specified++;
    if (it.kind == Item::Tensor) specified += it.is_mask() ? it.tensor->dim() : 1;
    if (it.kind == Item::Ellipsis) {
      EMBER_CHECK_KIND(!seen_ellipsis, Index, "an index can only have a single ellipsis ('...')");
      seen_ellipsis = true;
    }
  }
  EMBER_CHECK_KIND(specified <= self->dim(), Index, "too many indices for tensor of dimension ",
                   self->dim(), " (got ", specified, ")");

  Indexed r;
  DimVector sizes, strides;
  int64_t offset = self->storage_offset();
  int64_t d = 0;  // dim of self
  auto keep_dim = [&] {
    sizes.push_back(self->size(d));
    strides.push_back(self->stride(d));
    ++d;
  };
  auto new_dim = [&] {
    sizes.push_back(1);
    strides.push_back(d < self->dim() ? self->stride(d) * self->size(d) : 1);
  };
  for (const Item& it : items) {
    switch (it.kind) {
      case Item::Int: {
        int64_t idx = it.value, size = self->size(d);
        if (idx < -size || idx >= size) out_of_bounds(idx, d, size);
        offset += (idx < 0 ? idx + size : idx) * self->stride(d);
        r.copy |= it.from_tensor;
        ++d;
        break;
      }
      case Item::Slice: {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(it.slice, &start, &stop, &step) < 0) throw py::error_already_set();
        EMBER_CHECK_KIND(step > 0, Value, "step must be greater than zero (got ", step, ")");
        Py_ssize_t len = PySlice_AdjustIndices(self->size(d), &start, &stop, step);
        offset += start * self->stride(d);
        sizes.push_back(len);
        strides.push_back(self->stride(d) * step);
        r.indices.push_back(nullptr);
        ++d;
        break;
      }
      case Item::None:
        new_dim();
        r.indices.push_back(nullptr);
        break;
      case Item::Ellipsis:
        for (int64_t k = self->dim() - specified; k > 0; --k) {
          keep_dim();
          r.indices.push_back(nullptr);
        }
        break;
      case Item::Bool: {  // a new size-1 dim indexed by [0] (True) or [] (False)
        new_dim();
        Tensor ix = empty(DimVector{it.value ? 1 : 0}, ScalarType::Int64);
        if (it.value) *ix->data_as<int64_t>() = 0;
        r.indices.push_back(ix);
        r.advanced = true;
        break;
      }
      case Item::Tensor: {
        int64_t span = it.is_mask() ? it.tensor->dim() : 1;
        for (int64_t k = 0; k < span; ++k) keep_dim();
        r.indices.push_back(it.tensor);
        r.advanced = true;
        break;
      }
    }
  }
  while (d < self->dim()) keep_dim();
  r.view = make_view(self, std::move(sizes), std::move(strides), offset);
  return r;
}

// The basic indices of index, with each tensor index replaced by full slices (one per dim it
// spans) and each Python bool by None: applied by basic indexing, they give the view that
// apply_indices' advanced indices refer to.
py::tuple basic_part(PyObject* index) {
  std::vector<py::object> objs;
  if (sequence_as_tuple(index)) {
    for (auto x : py::reinterpret_borrow<py::object>(index).cast<py::tuple>())
      objs.push_back(py::reinterpret_borrow<py::object>(x));
  } else {
    objs.push_back(py::reinterpret_borrow<py::object>(index));
  }
  py::list out;
  py::object full = py::reinterpret_steal<py::object>(PySlice_New(nullptr, nullptr, nullptr));
  for (const py::object& x : objs) {
    Item it = classify(x.ptr());
    if (it.kind == Item::Tensor) {
      for (int64_t k = 0; k < (it.is_mask() ? it.tensor->dim() : 1); ++k) out.append(full);
    } else if (it.kind == Item::Bool) {
      out.append(py::none());
    } else if (it.kind == Item::Int && it.from_tensor) {
      out.append(py::int_(it.value));
    } else {
      out.append(x);
    }
  }
  return py::tuple(out);
}

Tensor getitem(const Tensor& self, py::handle index) {
  // Views of a tensor that requires grad get a grad_fn (or, in no_grad mode, are remembered as
  // such); nothing is recorded otherwise, so the plain x[i] path stays cheap.
  bool track =
      autograd::requires_grad(self) && (is_floating(self->dtype()) || is_complex(self->dtype()));
  // An expanded (self-overlapping) self: no strided view of its base describes the result, so
  // the view ops (select / narrow / unsqueeze, each with its own backward) index it. The result
  // stays a view, as PyTorch's (a write goes through to the shared memory); indexing a copy of
  // all of self instead made list(x) quadratic in time and memory.
  const bool view_ops = track && autograd::grad_enabled() &&
                        autograd::maybe_overlapping(self->sizes(), self->strides());
  PyObject* o = index.ptr();
  auto basic = [&](PyObject* const* items, Py_ssize_t n, bool tuple) {
    if (view_ops || (python_dispatch::on() && python_dispatch_wanted(self)))
      return basic_index_dispatched(self, items, n);
    Tensor v = basic_index(self, items, n);
    // Untracked: a[0] of an output a of split/chunk/unbind keeps its in-place restriction.
    if (track)
      autograd::record_strided_view(self, v, basic_index_node_name(self, items, n, tuple));
    else if (self->autograd_meta() && autograd::grad_enabled())
      autograd::untracked_view(v, self);
    return v;
  };
  if (is_basic(o)) return basic(&o, 1, false);
  if (PyTuple_Check(o)) {
    Py_ssize_t n = PyTuple_GET_SIZE(o);
    bool all_basic = true;
    for (Py_ssize_t i = 0; i < n && all_basic; ++i) all_basic = is_basic(PyTuple_GET_ITEM(o, i));
    if (all_basic) return basic(&PyTuple_GET_ITEM(o, 0), n, true);
  }
  if (view_ops || (python_dispatch::on() && is_python_dispatch_subclass(self))) {
    // The basic part as dispatched views of the subclass instance, then aten.index.Tensor on
    // that view with the advanced indices (as the plain path, whose view is made directly).
    Indexed sub = apply_indices(self, o);
    py::tuple items = basic_part(o);
    Tensor view = basic_index_dispatched(self, &PyTuple_GET_ITEM(items.ptr(), 0),
                                         PyTuple_GET_SIZE(items.ptr()));
    if (!sub.advanced) return sub.copy ? ops::clone(view) : view;
    return ops::_index(view, sub.indices);
  }
  Indexed ix = apply_indices(self, o);
  if (track)
    autograd::record_strided_view(self, ix.view);
  else if (self->autograd_meta() && autograd::grad_enabled())
    autograd::untracked_view(ix.view, self);
  if (!ix.advanced) return ix.copy ? ops::clone(ix.view) : ix.view;
  if (ix.view->device().is_meta())
    for (const Tensor& t : ix.indices)
      if (t && (t->dtype() == ScalarType::Bool || t->dtype() == ScalarType::UInt8))
        no_kernel("index with a boolean mask", DeviceType::Meta, /*data_dependent=*/true);
  return ops::_index(ix.view, ix.indices);
}

// x[...] = value: value is a number or a tensor (cast to x's dtype, broadcast to the indexed
// shape).
void setitem(const Tensor& self, py::handle index, py::handle value) {
  PyObject* v = value.ptr();
  Tensor vt;
  Scalar vs;
  if (is_tensor_object(v)) {
    vt = value.cast<Tensor>();
  } else if (!scalar_from_object(v, &vs)) {
    throw py::type_error(std::string("can't assign a ") + Py_TYPE(v)->tp_name +
                         " to a tensor of dtype " + dtype_name(self->dtype()) +
                         " (expected a number or a tensor)");
  } else {
    // store_scalar below would wrap it silently (x[0] = 300 into int8 stored 44, NaN into an
    // integer tensor 0): PyTorch's overflow check, whichever path writes the value
    check_scalar_fits(vs, self->dtype(), "__setitem__");
  }
  // With autograd the write is an in-place op (copy_, fill_, masked_fill_, index_put_) into a
  // view of self, which rewrites the history of self's base (autograd/views.h).
  bool grad = autograd::grad_enabled() &&
              (autograd::requires_grad(self) || (vt && autograd::requires_grad(vt)));
  // An output of split/chunk/unbind refuses recorded writes (the plain path's view below
  // carries no autograd state to tell).
  if (grad) {
    const AutogradMeta* m = self->autograd_meta();
    if (m && m->multi_output_view) autograd::check_inplace_view(self, "__setitem__");
  }
  PyObject* o = index.ptr();
  Indexed ix;
  bool dispatched_view = false;
  // basic indices through the dispatched views (handlers see them)
  if (python_dispatch::on() &&
      (python_dispatch_wanted(self) || (vt && python_dispatch_wanted(vt)))) {
    bool all_basic = is_basic(o);
    Py_ssize_t n = 1;
    PyObject* const* items = &o;
    if (!all_basic && PyTuple_Check(o)) {
      n = PyTuple_GET_SIZE(o);
      items = &PyTuple_GET_ITEM(o, 0);
      all_basic = true;
      for (Py_ssize_t i = 0; i < n && all_basic; ++i) all_basic = is_basic(items[i]);
    }
    py::tuple basic_items;
    if (!all_basic) {  // advanced: its basic part as dispatched views, then index_put_ below
      ix = apply_indices(self, o);
      basic_items = basic_part(o);
      items = &PyTuple_GET_ITEM(basic_items.ptr(), 0);
      n = PyTuple_GET_SIZE(basic_items.ptr());
      dispatched_view = ix.advanced;
    }
    if (dispatched_view) {
      ix.view = basic_index_dispatched(self, items, n);
    } else {
      Tensor view = basic_index_dispatched(self, items, n);
      if (!vt) {
        ops::fill_(view, TensorOrScalar(vs));
        return;
      }
      int64_t drop = 0;  // leading size-1 dims beyond the target's rank (x[0] = y[None])
      while (vt->dim() - drop > view->dim() && vt->size(drop) == 1) ++drop;
      if (drop > 0) vt = ops::reshape(vt, DimVector(vt->sizes().begin() + drop, vt->sizes().end()));
      EMBER_CHECK(vt->dim() <= view->dim(), "shape mismatch: value tensor of shape ",
                  shape_str(vt->sizes()), " cannot be broadcast to indexing result of shape ",
                  shape_str(view->sizes()));
      if (vt->storage() == view->storage()) vt = ops::clone(vt);
      ops::copy_(view, vt, false);
      return;
    }
  }
  if (dispatched_view) {
    // ix holds the advanced indices and the dispatched view they apply to
  } else if (is_basic(o)) {
    ix.view = basic_index(self, &o, 1);
  } else {
    ix = apply_indices(self, o);
  }
  const Tensor& view = ix.view;
  if (!ix.advanced) {
    if (!vt) {
      if (grad) {
        ops::fill_(view, TensorOrScalar(vs));
        return;
      }
      // A 0-d CPU value, which every device's copy kernel takes as a number.
      Tensor s = empty(DimVector{}, view->dtype(), cpu_device());
      store_scalar(vs, view->dtype(), s->data());
      dispatch::_copy_from(s, view, false);
      return;
    }
    // Leading size-1 dims beyond the target's rank are dropped (x[0] = y[None]).
    int64_t drop = 0;
    while (vt->dim() - drop > view->dim() && vt->size(drop) == 1) ++drop;
    if (drop > 0) {
      DimVector rest(vt->sizes().begin() + drop, vt->sizes().end());
      vt = grad ? ops::reshape(vt, rest)
                : make_view(vt, rest, DimVector(vt->strides().begin() + drop, vt->strides().end()),
                            vt->storage_offset());
    }
    EMBER_CHECK(vt->dim() <= view->dim(), "shape mismatch: value tensor of shape ",
                shape_str(vt->sizes()), " cannot be broadcast to indexing result of shape ",
                shape_str(view->sizes()));
    if (vt->storage() == view->storage())
      vt = ops::clone(vt);  // overlapping source: read before writing
    if (grad) {
      ops::copy_(view, vt, false);
      return;
    }
    dispatch::copy_(view, vt, false);  // vt may be on another device (a CPU value into cuda)
    return;
  }
  // One bool mask over the leading dims and a single value: masked_fill_, no index tensors.
  if (ix.indices.size() == 1 && ix.indices[0]->dtype() == ScalarType::Bool &&
      (!vt || vt->dim() == 0)) {
    Tensor mask = ix.indices[0];
    // The mask must match the dims it covers (a (1,) mask must not broadcast over 4 rows).
    EMBER_CHECK_KIND(mask->dim() <= view->dim(), Index, "too many indices for tensor of dimension ",
                     view->dim(), " (got ", mask->dim(), ")");
    for (int64_t j = 0; j < mask->dim(); ++j)
      if (mask->size(j) != view->size(j))
        EMBER_FAIL(Index, "The shape of the mask ", shape_str(mask->sizes()), " at index ", j,
                   " does not match the shape of the indexed tensor ", shape_str(view->sizes()),
                   " at index ", j);
    DimVector ms = mask->sizes(), mst = mask->strides();
    while (static_cast<int64_t>(ms.size()) < view->dim()) {
      ms.push_back(1);
      mst.push_back(0);
    }
    Tensor m = make_view(mask, ms, mst, mask->storage_offset());
    if (vt) {
      ops::masked_fill_(view, m, TensorOrScalar(vt));
    } else {
      ops::masked_fill_(view, m, TensorOrScalar(vs));
    }
    return;
  }
  if (!vt) {
    vt = empty(DimVector{}, view->dtype(), cpu_device());  // joins any device as a number
    store_scalar(vs, view->dtype(), vt->data());
  } else if (vt->dtype() != view->dtype()) {
    vt = ops::_to_dtype(vt, view->dtype(), false);
  }
  ops::index_put_(view, ix.indices, vt, false);
}

py::object nonzero_tuple(const Tensor& self) {
  // A 0-d input counts as a 1-element vector here, as in PyTorch.
  Tensor s1 =
      self->dim() == 0 ? make_view(self, DimVector{1}, DimVector{1}, self->storage_offset()) : self;
  Tensor nz = ops::nonzero(s1, Tensor());
  std::vector<Tensor> cols;
  for (int64_t j = 0; j < s1->dim(); ++j)
    cols.push_back(
        make_view(nz, DimVector{nz->size(0)}, DimVector{nz->stride(0)}, nz->storage_offset() + j));
  return tensor_tuple(cols);
}

}  // namespace

void bind_indexing(py::module_& m, TensorClass& cls) {
  cls.def("__getitem__", [](const Tensor& self, py::handle index) {
    // getitem records reverse-mode history itself (views get a grad_fn, autograd/views.h).
    if (forward_ad::maybe_active() && forward_ad::wants({&self})) {
      // Indexing is linear: the result's tangent is self's tangent indexed the same way (a view
      // of it for basic indexing, so in-place writes reach self's tangent).
      Tensor r, t;
      {
        forward_ad::DisableGuard no_fw;
        r = getitem(self, index);
        t = getitem(forward_ad::tangent_of(self), index);
      }
      forward_ad::set_tangent(r, t, "__getitem__", /*complex_ok=*/true);
      return r;
    }
    return getitem(self, index);
  });
  cls.def("__setitem__", [](const Tensor& self, py::handle index, py::handle value) {
    // With autograd, setitem writes through in-place ops into a view of self (differentiable).
    bool value_tensor = is_tensor_object(value.ptr());
    if (forward_ad::maybe_active()) {
      Tensor vt = value_tensor ? value.cast<Tensor>() : Tensor();
      if (forward_ad::wants({&self, &vt})) {
        // The written region of self's tangent takes the value's tangent (zero for a number).
        forward_ad::DisableGuard no_fw;
        setitem(self, index, value);
        // Linear: complex tensors too.
        if (!is_floating(self->dtype()) && !is_complex(self->dtype())) return;
        Tensor st = forward_ad::inplace_tangent(self);
        if (vt)
          setitem(st, index, py::cast(forward_ad::tangent_or_zeros(vt)));
        else
          setitem(st, index, py::float_(0.0));
        return;
      }
    }
    setitem(self, index, value);
  });
  // nonzero(as_tuple=...): an overload next to the generated nonzero(input, *, out=None).
  auto nz = [](const Tensor& self, bool as_tuple) -> py::object {
    if (as_tuple) return nonzero_tuple(self);
    return py::cast(ops::nonzero(self, Tensor()));
  };
  m.def("nonzero", nz, py::arg("input"), py::kw_only(), py::arg("as_tuple"));
  cls.def("nonzero", nz, py::kw_only(), py::arg("as_tuple"));
}

}  // namespace ember
