// CPU kernels of ops/sort.yaml: sort, topk, kthvalue, median, mode and unique. Each views the
// input as rows along the dim (reduce::dim_rows), copies a row into a (value, index) buffer,
// runs a std algorithm with a NaN-aware comparator (NaN is the largest value, as in PyTorch) and
// writes the row of results. Rows are spread over the threads.
#include <algorithm>
#include <numeric>
#include <vector>

#include "core/dispatch.h"
#include "kernels/cpu/reduce_utils.h"
#include "kernels/iterator.h"
#include "kernels/sort_rules.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

using reduce::DimRows;
using reduce::is_nan;
using reduce::nan_equal;
using reduce::nan_less;

template <class V>
struct Item {
  V v;
  int64_t i;
};

// Ascending by value (NaN last), ties by index: a strict total order, so results are
// deterministic whichever algorithm runs.
template <class V>
inline bool item_less(const Item<V>& a, const Item<V>& b) {
  if (nan_less(a.v, b.v)) return true;
  if (nan_less(b.v, a.v)) return false;
  return a.i < b.i;
}
// Descending by value (NaN first), ties by index.
template <class V>
inline bool item_greater(const Item<V>& a, const Item<V>& b) {
  if (nan_less(b.v, a.v)) return true;
  if (nan_less(a.v, b.v)) return false;
  return a.i < b.i;
}

// Loads row r of `d` into buf as (value, index) pairs.
template <class T>
void load_row(const DimRows& d, const T* src, int64_t r, std::vector<Item<opmath_t<T>>>& buf) {
  const int64_t off = d.offset(r);
  buf.resize(d.n);
  for (int64_t i = 0; i < d.n; ++i) buf[i] = {static_cast<opmath_t<T>>(src[off + i * d.inner]), i};
}

// Row-wise selection shared by kthvalue / median / nanmedian / mode: pick(buf) returns the chosen
// (value, index); results have the row dim removed (or kept as 1).
template <class Pick>
std::tuple<Tensor, Tensor> select_rows(const Tensor& self, int64_t d, bool keepdim, const char* op,
                                       const Pick& pick) {
  DimVector shape = selection_shape(self, d, keepdim);
  Tensor values = ember::empty(shape, self->dtype(), self->device());
  Tensor indices = ember::empty(shape, ScalarType::Int64, self->device());
  if (values->numel() == 0) return {values, indices};
  DimRows rows = reduce::dim_rows(self, d);
  EMBER_DISPATCH_ALL(self->dtype(), op, [&] {
    using V = opmath_t<scalar_t>;
    const scalar_t* src = rows.t->data_as<scalar_t>();
    scalar_t* vo = values->data_as<scalar_t>();
    int64_t* io = indices->data_as<int64_t>();
    reduce::for_rows(rows, 4, [&](int64_t b, int64_t e) {
      std::vector<Item<V>> buf;
      for (int64_t r = b; r < e; ++r) {
        load_row(rows, src, r, buf);
        Item<V> it = pick(buf);
        // Write the element itself (keeps NaN payloads and the exact 16-bit value).
        vo[r] = src[rows.offset(r) + it.i * rows.inner];
        io[r] = it.i;
      }
    });
  });
  return {values, indices};
}

// The k-th smallest (0-based) of buf, NaN largest.
template <class V>
Item<V> nth(std::vector<Item<V>>& buf, int64_t k) {
  std::nth_element(buf.begin(), buf.begin() + k, buf.end(), item_less<V>);
  return buf[k];
}

template <class V>
Item<V> median_of(std::vector<Item<V>>& buf, bool ignore_nan) {
  if (!ignore_nan) {
    for (const auto& it : buf)
      if (is_nan(it.v)) return it;  // the first NaN
    return nth(buf, (static_cast<int64_t>(buf.size()) - 1) / 2);
  }
  auto end =
      std::partition(buf.begin(), buf.end(), [](const Item<V>& it) { return !is_nan(it.v); });
  int64_t m = end - buf.begin();
  if (m == 0) {  // all NaN: NaN at index 0, like PyTorch
    Item<V> first = buf[0];
    for (const auto& it : buf)
      if (it.i < first.i) first = it;
    return first;
  }
  buf.resize(m);
  return nth(buf, (m - 1) / 2);
}

// Median of every element (flattened): a 0-d tensor, NaN for an empty input.
Tensor median_all(const Tensor& self, bool ignore_nan, const char* op) {
  if (self->numel() == 0)
    return dispatch::full(DimVector{}, empty_median_value(self->dtype()), self->dtype(),
                          self->device());
  check_selection_dtype(self, op);
  Tensor flat = self;
  if (!flat->is_contiguous()) {
    flat = ember::empty(self->sizes(), self->dtype(), self->device());
    copy_into(flat, self);
  }
  flat = make_view(flat, DimVector{flat->numel()}, DimVector{1}, flat->storage_offset());
  return std::get<0>(
      select_rows(flat, 0, false, op, [&](auto& buf) { return median_of(buf, ignore_nan); }));
}

std::tuple<Tensor, Tensor> median_dim(const Tensor& self, int64_t dim, bool keepdim,
                                      bool ignore_nan, const char* op) {
  const int64_t d = selection_dim(self, dim, op);
  check_selection_dtype(self, op);
  return select_rows(self, d, keepdim, op, [&](auto& buf) { return median_of(buf, ignore_nan); });
}

// topk picks a few of many by a bounded heap (below) when k * kHeapSelectRatio <= n.
constexpr int64_t kHeapSelectRatio = 16;

// The k items of row x (n elements `inner` apart) that come first in cmp's order (Largest:
// item_greater, else item_less), into buf[0, k) (unordered): a heap of the best k so far whose
// top is the worst of them. Elements come in index order, so one that only ties the top's value
// loses to it: most elements cost one inlined value comparison (no copy of the whole row). The
// order is strict and total, so the set is the one nth_element finds.
template <bool Largest, class T>
void heap_select(const T* x, int64_t inner, int64_t n, int64_t k,
                 std::vector<Item<opmath_t<T>>>& buf) {
  using V = opmath_t<T>;
  const auto cmp = [](const Item<V>& a, const Item<V>& b) {
    return Largest ? item_greater(a, b) : item_less(a, b);
  };
  buf.resize(k);
  for (int64_t i = 0; i < k; ++i) buf[i] = {static_cast<V>(x[i * inner]), i};
  std::make_heap(buf.begin(), buf.end(), cmp);  // the top is the last in cmp's order
  V top = buf.front().v;
  for (int64_t i = k; i < n; ++i) {
    const V v = static_cast<V>(x[i * inner]);
    if (!(Largest ? nan_less(top, v) : nan_less(v, top))) continue;
    std::pop_heap(buf.begin(), buf.end(), cmp);
    buf.back() = {v, i};
    std::push_heap(buf.begin(), buf.end(), cmp);
    top = buf.front().v;
  }
}

}  // namespace

std::tuple<Tensor, Tensor> sort(const Tensor& self, int64_t dim, bool descending, bool stable) {
  (void)stable;  // always stable: equal elements keep their order
  int64_t d = wrap_dim(dim, self->dim(), "sort");
  Tensor values = ember::empty(self->sizes(), self->dtype(), self->device());
  Tensor indices = ember::empty(self->sizes(), ScalarType::Int64, self->device());
  if (self->numel() == 0) return {values, indices};
  DimRows rows = reduce::dim_rows(self, d);
  EMBER_DISPATCH_ALL_AND_UINT(self->dtype(), "sort", [&] {
    using V = opmath_t<scalar_t>;
    const scalar_t* src = rows.t->data_as<scalar_t>();
    scalar_t* vo = values->data_as<scalar_t>();
    int64_t* io = indices->data_as<int64_t>();
    reduce::for_rows(rows, 16, [&](int64_t b, int64_t e) {
      std::vector<Item<V>> buf;
      for (int64_t r = b; r < e; ++r) {
        load_row(rows, src, r, buf);
        // The index tie-break makes std::sort stable (and faster than std::stable_sort).
        std::sort(buf.begin(), buf.end(), descending ? item_greater<V> : item_less<V>);
        const int64_t off = rows.offset(r), s = rows.inner;
        for (int64_t i = 0; i < rows.n; ++i) {
          vo[off + i * s] = src[off + buf[i].i * s];
          io[off + i * s] = buf[i].i;
        }
      }
    });
  });
  return {values, indices};
}

Tensor argsort(const Tensor& self, int64_t dim, bool descending, bool stable) {
  return std::get<1>(sort(self, dim, descending, stable));
}

std::tuple<Tensor, Tensor> topk(const Tensor& self, int64_t k, int64_t dim, bool largest,
                                bool sorted) {
  (void)sorted;  // results always come sorted, which PyTorch allows for sorted=False
  // as torch's CPU kernel (its CUDA one takes bool)
  EMBER_CHECK(self->dtype() != ScalarType::Bool,
              "topk does not support bool dtypes on CPU (convert the input, e.g. x.to(int8))");
  const int64_t d = topk_dim(self, k, dim);
  DimVector shape = sizes_with_dim(self, d, k);
  Tensor values = ember::empty(shape, self->dtype(), self->device());
  Tensor indices = ember::empty(shape, ScalarType::Int64, self->device());
  if (values->numel() == 0) return {values, indices};
  DimRows rows = reduce::dim_rows(self, d);
  const int64_t n = rows.n;
  // A 0-d self has a 0-d (one-element) result even for k = 0: it is self and index 0, as torch.
  if (self->dim() == 0) k = 1;
  EMBER_DISPATCH_ALL(self->dtype(), "topk", [&] {
    using V = opmath_t<scalar_t>;
    const scalar_t* src = rows.t->data_as<scalar_t>();
    scalar_t* vo = values->data_as<scalar_t>();
    int64_t* io = indices->data_as<int64_t>();
    reduce::for_rows(rows, 4, [&](int64_t b, int64_t e) {
      std::vector<Item<V>> buf;
      for (int64_t r = b; r < e; ++r) {
        auto cmp = largest ? item_greater<V> : item_less<V>;
        if (k > 0 && k * kHeapSelectRatio <= n) {
          if (largest)
            heap_select<true>(src + rows.offset(r), rows.inner, n, k, buf);
          else
            heap_select<false>(src + rows.offset(r), rows.inner, n, k, buf);
        } else {
          load_row(rows, src, r, buf);
          if (k < n) {
            std::nth_element(buf.begin(), buf.begin() + k, buf.end(), cmp);  // O(n)
          }
        }
        std::sort(buf.begin(), buf.begin() + k, cmp);
        const int64_t in_off = rows.offset(r), s = rows.inner;
        const int64_t out_off = (r / s) * k * s + r % s;
        for (int64_t i = 0; i < k; ++i) {
          vo[out_off + i * s] = src[in_off + buf[i].i * s];
          io[out_off + i * s] = buf[i].i;
        }
      }
    });
  });
  return {values, indices};
}

std::tuple<Tensor, Tensor> kthvalue(const Tensor& self, int64_t k, int64_t dim, bool keepdim) {
  const int64_t d = kthvalue_dim(self, k, dim);
  return select_rows(self, d, keepdim, "kthvalue", [&](auto& buf) { return nth(buf, k - 1); });
}

Tensor median(const Tensor& self) { return median_all(self, false, "median"); }

std::tuple<Tensor, Tensor> median(const Tensor& self, int64_t dim, bool keepdim) {
  return median_dim(self, dim, keepdim, false, "median");
}

Tensor nanmedian(const Tensor& self) { return median_all(self, true, "nanmedian"); }

std::tuple<Tensor, Tensor> nanmedian(const Tensor& self, int64_t dim, bool keepdim) {
  return median_dim(self, dim, keepdim, true, "nanmedian");
}

std::tuple<Tensor, Tensor> mode(const Tensor& self, int64_t dim, bool keepdim) {
  const int64_t d = selection_dim(self, dim, "mode");
  // The most frequent value (the smallest on ties) and the index of the last of its run once
  // the row, in index order, is sorted by value alone with std::sort, as PyTorch's CPU kernel
  // does: the last occurrence for rows of up to 16 (insertion sort), for longer rows whichever
  // the unstable sort leaves there, which programs printing mode's indices then print alike.
  // (The CUDA kernel sorts stably: the last occurrence.)
  return select_rows(self, d, keepdim, "mode", [](auto& buf) {
    using It = std::decay_t<decltype(buf[0])>;
    std::sort(buf.begin(), buf.end(), [](const It& a, const It& b) { return nan_less(a.v, b.v); });
    It best = buf[0];
    int64_t best_count = 0;
    for (size_t i = 0; i < buf.size();) {
      size_t j = i;
      while (j + 1 < buf.size() && nan_equal(buf[j + 1].v, buf[i].v)) ++j;
      int64_t count = static_cast<int64_t>(j - i + 1);
      if (count > best_count) {
        best_count = count;
        best = buf[j];
      }
      i = j + 1;
    }
    return best;
  });
}

// ---- unique ------------------------------------------------------------------------------------

namespace {

// unique of the flattened tensor: sorted values; NaNs never compare equal, so each is its own.
std::tuple<Tensor, Tensor, Tensor> unique_flat(const Tensor& self, bool return_inverse,
                                               bool return_counts) {
  const int64_t n = self->numel();
  Tensor flat = cpu::bool_01(self);  // any nonzero bool byte is one value, True
  if (!flat->is_contiguous()) {
    flat = ember::empty(self->sizes(), self->dtype(), self->device());
    copy_into(flat, self);
  }
  Tensor inverse = ember::empty(return_inverse ? self->sizes() : DimVector{0}, ScalarType::Int64,
                                self->device());
  Tensor values, counts;
  EMBER_DISPATCH_ALL_AND_UINT(self->dtype(), "unique", [&] {
    using V = opmath_t<scalar_t>;
    const scalar_t* src = flat->data_as<scalar_t>();
    std::vector<Item<V>> buf(n);
    for (int64_t i = 0; i < n; ++i) buf[i] = {static_cast<V>(src[i]), i};
    std::sort(buf.begin(), buf.end(), item_less<V>);
    std::vector<int64_t> starts;  // first position in buf of each group
    for (int64_t i = 0; i < n; ++i)
      if (i == 0 || !(buf[i].v == buf[i - 1].v)) starts.push_back(i);
    const int64_t m = starts.size();
    values = ember::empty(DimVector{m}, self->dtype(), self->device());
    counts = ember::empty(DimVector{return_counts ? m : 0}, ScalarType::Int64, self->device());
    scalar_t* vo = values->data_as<scalar_t>();
    int64_t* co = counts->data_as<int64_t>();
    int64_t* io = inverse->data_as<int64_t>();
    for (int64_t g = 0; g < m; ++g) {
      const int64_t end = g + 1 < m ? starts[g + 1] : n;
      vo[g] = src[buf[starts[g]].i];
      if (return_counts) co[g] = end - starts[g];
      if (return_inverse)
        for (int64_t i = starts[g]; i < end; ++i) io[buf[i].i] = g;
    }
  });
  return {values, inverse, counts};
}

// unique slices along dim, sorted lexicographically (slice = the sub-tensor at one index of dim,
// read in row-major order).
std::tuple<Tensor, Tensor, Tensor> unique_dim(const Tensor& self, int64_t dim, bool return_inverse,
                                              bool return_counts) {
  int64_t d = wrap_dim(dim, self->dim(), "unique");
  EMBER_CHECK(self->dim() > 0, "unique(): dim is not supported for 0-d tensors");
  DimRows rows = reduce::dim_rows(self, d);
  const int64_t n = rows.n, outer = rows.outer, inner = rows.inner;
  Tensor inverse =
      ember::empty(DimVector{return_inverse ? n : 0}, ScalarType::Int64, self->device());
  Tensor values, counts;
  EMBER_DISPATCH_ALL_AND_UINT(self->dtype(), "unique", [&] {
    using V = opmath_t<scalar_t>;
    const scalar_t* src = rows.t->data_as<scalar_t>();
    auto at = [&](int64_t slice, int64_t j) {  // j-th element of a slice
      return static_cast<V>(src[(j / inner) * n * inner + slice * inner + j % inner]);
    };
    const int64_t len = outer * inner;
    auto less = [&](int64_t a, int64_t b) {
      for (int64_t j = 0; j < len; ++j) {
        V x = at(a, j), y = at(b, j);
        if (nan_less(x, y)) return true;
        if (nan_less(y, x)) return false;
      }
      return a < b;
    };
    auto equal = [&](int64_t a, int64_t b) {
      for (int64_t j = 0; j < len; ++j)
        if (!(at(a, j) == at(b, j))) return false;
      return true;
    };
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), less);
    std::vector<int64_t> starts;
    for (int64_t i = 0; i < n; ++i)
      if (i == 0 || !equal(order[i], order[i - 1])) starts.push_back(i);
    const int64_t m = starts.size();
    values = ember::empty(sizes_with_dim(self, d, m), self->dtype(), self->device());
    counts = ember::empty(DimVector{return_counts ? m : 0}, ScalarType::Int64, self->device());
    scalar_t* vo = values->data_as<scalar_t>();
    for (int64_t g = 0; g < m; ++g) {
      const int64_t s = order[starts[g]], end = g + 1 < m ? starts[g + 1] : n;
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t k = 0; k < inner; ++k)
          vo[o * m * inner + g * inner + k] = src[o * n * inner + s * inner + k];
      if (return_counts) counts->data_as<int64_t>()[g] = end - starts[g];
      if (return_inverse)
        for (int64_t i = starts[g]; i < end; ++i) inverse->data_as<int64_t>()[order[i]] = g;
    }
  });
  return {values, inverse, counts};
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& self, bool sorted, bool return_inverse,
                                          bool return_counts, std::optional<int64_t> dim) {
  (void)sorted;  // the output is always sorted, as PyTorch's CPU kernel does
  if (dim) return unique_dim(self, *dim, return_inverse, return_counts);
  return unique_flat(self, return_inverse, return_counts);
}

}  // namespace cpu
}  // namespace ember
