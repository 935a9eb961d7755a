// The CPU reduction engine shared by reduce_ops.cpp and sort_ops.cpp.
//
// A reduction is described by a Reducer (see SumReducer in reduce_ops.cpp for the shape of one):
//   in_t, acc_t            input element type and accumulator
//   identity()             accumulator of nothing
//   step(acc, x, idx)      adds element x (flat index idx within the reduced elements)
//   combine(a, b)          merges the accumulators of two consecutive ranges (a first)
//   block(p, n, base)      accumulator of a contiguous run (the vectorized hot loop)
//   strided(p, s, n, base) the same for a strided run
//   rows(acc, row, n, idx) acc[k] = step(acc[k], row[k]) for one contiguous row of n columns
//   write(o, acc)          stores the result of output o (outputs are contiguous, row-major)
// ReducerBase supplies block/strided/rows from step for reducers without a faster version.
//
// run_reduction() lays the tensor out as kept dims x reduced dims (size-1 dims dropped,
// mergeable dims coalesced) and picks one of two loops:
//   rows:    reduce along the innermost reduced dim, one output at a time (long reductions in
//            fixed pieces, spread over the threads and their partials combined in order);
//   columns: when the innermost kept dim is contiguous and the reduced dims are not (sum(dim=0)
//            of a matrix): accumulate whole rows into a vector of accumulators.
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "core/tensor.h"
#include "kernels/cpu/bool_bytes.h"
#include "kernels/iterator.h"
#include "kernels/parallel.h"
#include "kernels/reduce_rules.h"

namespace ember {
namespace reduce {

// Elements below which a reduction stays on one thread.
constexpr int64_t kReduceGrain = 32768;

// Walks a multi-index over `sizes` in row-major order, tracking the offset sum(idx * strides).
class NdIter {
 public:
  NdIter(const DimVector& sizes, const DimVector& strides)
      : sizes_(sizes), strides_(strides), idx_(sizes.size(), 0) {}
  void seek(int64_t flat) {
    off = 0;
    for (int64_t d = sizes_.size() - 1; d >= 0; --d) {
      idx_[d] = flat % sizes_[d];
      flat /= sizes_[d];
      off += idx_[d] * strides_[d];
    }
  }
  void next() {
    for (int64_t d = sizes_.size() - 1; d >= 0; --d) {
      if (++idx_[d] < sizes_[d]) {
        off += strides_[d];
        return;
      }
      off -= (sizes_[d] - 1) * strides_[d];
      idx_[d] = 0;
    }
  }
  int64_t off = 0;

 private:
  const DimVector& sizes_;
  const DimVector& strides_;
  DimVector idx_;
};

// Supplies the generic loops of a reducer from its step().
template <class Derived, class T, class Acc>
struct ReducerBase {
  using in_t = T;
  using acc_t = Acc;
  const Derived& self() const { return static_cast<const Derived&>(*this); }
  Acc block(const T* p, int64_t n, int64_t base) const {
    Acc a = self().identity();
    for (int64_t i = 0; i < n; ++i) self().step(a, p[i], base + i);
    return a;
  }
  Acc strided(const T* p, int64_t s, int64_t n, int64_t base) const {
    Acc a = self().identity();
    for (int64_t i = 0; i < n; ++i) self().step(a, p[i * s], base + i);
    return a;
  }
  void rows(Acc* acc, const T* row, int64_t n, int64_t idx) const {
    for (int64_t k = 0; k < n; ++k) self().step(acc[k], row[k], idx);
  }
  // Optional: writes outputs [o0, o1), whole rows of n contiguous elements `step` apart from p,
  // several rows at a time; false (the default) leaves them to block() one by one.
  bool short_rows(const T*, int64_t, int64_t, int64_t, int64_t) const { return false; }
};

namespace detail_engine {

// A plain array of accumulators (std::vector<bool> would not give a bool*).
template <class Acc>
class AccBuffer {
 public:
  explicit AccBuffer(int64_t n) : p_(new Acc[n]) {}
  Acc* data() { return p_.get(); }
  Acc& operator[](int64_t i) { return p_[i]; }

 private:
  std::unique_ptr<Acc[]> p_;
};

// One thread's share of the items: [lo, hi) packed as lo | hi << 32, on its own cache line.
struct alignas(64) ItemRange {
  std::atomic<uint64_t> v{0};
};

// Claims the first (owner) or last (thief) item of a range; -1 when it is empty.
inline int64_t claim(ItemRange& r, bool front) {
  uint64_t v = r.v.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t lo = v & 0xffffffffu, hi = v >> 32;
    if (lo >= hi) return -1;
    const uint64_t next = front ? ((lo + 1) | (hi << 32)) : (lo | ((hi - 1) << 32));
    if (r.v.compare_exchange_weak(v, next, std::memory_order_relaxed)) {
      return static_cast<int64_t>(front ? lo : hi - 1);
    }
  }
}

}  // namespace detail_engine

// Calls f(item) once for each item in [0, nitems), in parallel when `work` (elements touched in
// all) is worth it. Each thread walks its own contiguous share from the front (so its memory
// stream stays sequential) and then takes items from the back of the others' shares: a worker
// that the OS starts late (the machine is busy, or its CPU has to wake up) costs only its own
// delay instead of leaving its whole share to run after everyone else's. Which thread runs an
// item never changes what the item computes, so results do not depend on timing.
template <class F>
void balanced_for(int64_t nitems, int64_t work, const F& f) {
  const int nth = get_num_threads();
  if (nth == 1 || nitems < 2 || work < 2 * kReduceGrain || in_parallel_region()) {
    for (int64_t i = 0; i < nitems; ++i) f(i);
    return;
  }
  if (nitems > int64_t{0xffffffff}) {  // too many to pack: plain static split
    parallel_for(0, nitems, std::max<int64_t>(1, nitems / nth), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) f(i);
    });
    return;
  }
  const int nslots = static_cast<int>(std::min<int64_t>(nth, nitems));
  std::vector<detail_engine::ItemRange> slots(nslots);
  for (int t = 0; t < nslots; ++t) {
    const uint64_t lo = static_cast<uint64_t>(nitems * t / nslots);
    const uint64_t hi = static_cast<uint64_t>(nitems * (t + 1) / nslots);
    slots[t].v.store(lo | (hi << 32), std::memory_order_relaxed);
  }
  parallel_for(0, nslots, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      for (int64_t i; (i = detail_engine::claim(slots[t], true)) >= 0;) f(i);
      for (int k = 1; k < nslots; ++k) {
        auto& other = slots[(t + k) % nslots];
        for (int64_t i; (i = detail_engine::claim(other, false)) >= 0;) f(i);
      }
    }
  });
}

namespace detail_engine {

// Elements per piece when the outputs' reductions are split (to keep all threads busy with few
// outputs): up to 64 pieces per output, at most ~4096 pieces in all, none under the grain. It
// depends on the shape alone, so the partial results (combined in order) do not depend on the
// thread count. A multiple of 4096 keeps whole blocks of the vectorized sum loops.
inline int64_t split_chunk(int64_t nred, int64_t nout) {
  const int64_t pieces = std::max<int64_t>(1, std::min<int64_t>(64, 4096 / nout));
  const int64_t c = std::max<int64_t>(kReduceGrain, (nred + pieces - 1) / pieces);
  return (c + 4095) / 4096 * 4096;
}

template <class R>
void rows_path(Geometry& g, const typename R::in_t* base, const R& r) {
  using T = typename R::in_t;
  using Acc = typename R::acc_t;
  if (g.rsizes.empty()) {
    g.rsizes.push_back(1);
    g.rstrides.push_back(1);
  }
  const int64_t inner = g.rsizes[g.rsizes.size() - 1];
  const int64_t istride = g.rstrides[g.rstrides.size() - 1];
  DimVector osz(g.rsizes.begin(), g.rsizes.end() - 1),
      ost(g.rstrides.begin(), g.rstrides.end() - 1);
  auto run = [&](const T* p, int64_t n, int64_t b) {
    return istride == 1 ? r.block(p, n, b) : r.strided(p, istride, n, b);
  };
  // Accumulator of reduced elements [a, b) (flat, row-major over the reduced dims) of one output.
  auto range = [&](const T* p, int64_t a, int64_t b) -> Acc {
    if (osz.empty()) return run(p + a * istride, b - a, a);
    Acc acc = r.identity();
    NdIter it(osz, ost);
    it.seek(a / inner);
    int64_t i = a % inner;
    while (a < b) {
      int64_t len = std::min(inner - i, b - a);
      acc = r.combine(acc, run(p + it.off + i * istride, len, a));
      a += len;
      i = 0;
      it.next();
    }
    return acc;
  };
  const int64_t nred = g.nred, nout = g.nout;
  const int64_t chunk = split_chunk(nred, nout);
  if (nred < 2 * chunk) {
    // Short reductions: whole outputs, in groups of ~grain elements.
    const int64_t per = std::max<int64_t>(1, kReduceGrain / nred);
    if (osz.empty() && g.ksizes.size() <= 1) {
      // One run per output at a fixed step (a contiguous tensor's rows): no index walking, which
      // costs as much as the sum itself for rows of a few dozen elements.
      const int64_t step = g.ksizes.empty() ? 0 : g.kstrides[0];
      balanced_for((nout + per - 1) / per, nout * nred, [&](int64_t item) {
        const int64_t b = item * per, e = std::min(nout, b + per);
        if (istride == 1 && r.short_rows(base + b * step, nred, step, b, e)) return;
        for (int64_t o = b; o < e; ++o) r.write(o, run(base + o * step, nred, 0));
      });
      return;
    }
    balanced_for((nout + per - 1) / per, nout * nred, [&](int64_t item) {
      const int64_t b = item * per, e = std::min(nout, b + per);
      NdIter kit(g.ksizes, g.kstrides);
      kit.seek(b);
      for (int64_t o = b; o < e; ++o, kit.next()) r.write(o, range(base + kit.off, 0, nred));
    });
    return;
  }
  // Long reductions: every output's range in pieces, all of them in one parallel region, then
  // each output's pieces combined in order.
  const int64_t npieces = (nred + chunk - 1) / chunk;
  std::vector<Acc> parts(nout * npieces);
  std::vector<int64_t> offs(nout);
  {
    NdIter kit(g.ksizes, g.kstrides);
    kit.seek(0);
    for (int64_t o = 0; o < nout; ++o, kit.next()) offs[o] = kit.off;
  }
  balanced_for(nout * npieces, nout * nred, [&](int64_t item) {
    const int64_t o = item / npieces, c = item % npieces;
    parts[item] = range(base + offs[o], c * chunk, std::min(nred, (c + 1) * chunk));
  });
  for (int64_t o = 0; o < nout; ++o) {
    Acc acc = parts[o * npieces];
    for (int64_t c = 1; c < npieces; ++c) acc = r.combine(acc, parts[o * npieces + c]);
    r.write(o, acc);
  }
}

template <class R>
void columns_path(Geometry& g, const typename R::in_t* base, const R& r) {
  using Acc = typename R::acc_t;
  const int64_t I = g.ksizes[g.ksizes.size() - 1];
  DimVector osz(g.ksizes.begin(), g.ksizes.end() - 1),
      ost(g.kstrides.begin(), g.kstrides.end() - 1);
  const int64_t outer = g.nout / I, nred = g.nred;
  const int nth = get_num_threads();
  // Whole rows when the accumulators fit in L1/L2 (rows then stream through memory); the rows
  // are split over the threads below when there are too few column tiles to go round.
  int64_t tile = std::max<int64_t>(16, 32768 / static_cast<int64_t>(sizeof(Acc)));
  const int64_t ntiles = (I + tile - 1) / tile, items = outer * ntiles;
  // Accumulates reduced rows [ra, rb) of columns [c0, c0 + len) of outer index `ok` into acc.
  auto accumulate = [&](Acc* acc, int64_t ok, int64_t c0, int64_t len, int64_t ra, int64_t rb) {
    NdIter oit(osz, ost);
    oit.seek(ok);
    const auto* p = base + oit.off + c0;
    NdIter it(g.rsizes, g.rstrides);
    it.seek(ra);
    for (int64_t f = ra; f < rb; ++f, it.next()) r.rows(acc, p + it.off, len, f);
  };
  if (items >= nth || nth == 1 || items * tile * nred < 2 * kReduceGrain || in_parallel_region()) {
    balanced_for(items, g.nout * nred, [&](int64_t item) {
      const int64_t ok = item / ntiles, c0 = (item % ntiles) * tile;
      const int64_t len = std::min(tile, I - c0);
      AccBuffer<Acc> acc(len);
      std::fill(acc.data(), acc.data() + len, r.identity());
      accumulate(acc.data(), ok, c0, len, 0, nred);
      for (int64_t j = 0; j < len; ++j) r.write(ok * I + c0 + j, acc[j]);
    });
    return;
  }
  // Few narrow columns, many rows: split the rows over the threads, then combine in order.
  int64_t nchunks = std::min<int64_t>(nth, nred);
  int64_t chunk = (nred + nchunks - 1) / nchunks;
  std::vector<AccBuffer<Acc>> parts;
  for (int64_t c = 0; c < nchunks; ++c) parts.emplace_back(std::min(tile, I));
  for (int64_t item = 0; item < items; ++item) {
    int64_t ok = item / ntiles, c0 = (item % ntiles) * tile, len = std::min(tile, I - c0);
    parallel_for(0, nchunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        std::fill(parts[c].data(), parts[c].data() + len, r.identity());
        accumulate(parts[c].data(), ok, c0, len, c * chunk, std::min(nred, (c + 1) * chunk));
      }
    });
    for (int64_t j = 0; j < len; ++j) {
      Acc acc = parts[0][j];
      for (int64_t c = 1; c < nchunks; ++c) acc = r.combine(acc, parts[c][j]);
      r.write(ok * I + c0 + j, acc);
    }
  }
}

}  // namespace detail_engine

// Runs reducer `r` over `in` (any strides) reducing the dims set in `mask`. Outputs with nothing
// to reduce get identity().
template <class R>
void run_reduction(const Tensor& input, const std::vector<bool>& mask, const R& r, bool ordered) {
  const Tensor in = cpu::bool_01(input);  // the reducers read bool bytes as 0/1
  Geometry g = make_geometry(in, mask, ordered);
  if (g.nout == 0) return;
  if (g.nred == 0) {
    for (int64_t o = 0; o < g.nout; ++o) r.write(o, r.identity());
    return;
  }
  const auto* base = in->template data_as<typename R::in_t>();
  bool columns = !g.ksizes.empty() && g.kstrides[g.kstrides.size() - 1] == 1 &&
                 (g.rsizes.empty() ? false : g.rstrides[g.rstrides.size() - 1] != 1);
  if (columns) {
    detail_engine::columns_path(g, base, r);
  } else {
    detail_engine::rows_path(g, base, r);
  }
}

// ---- rows along one dim (sort, cumsum, median ...) -------------------------------------------

// `t` seen as (outer, n, inner) around `dim`, made contiguous (copied if needed). Row r = (o, k)
// starts at o * n * inner + k and steps by `inner`; outputs of the same shape use the same layout.
struct DimRows {
  Tensor t;
  int64_t outer = 1, n = 1, inner = 1;
  int64_t rows() const { return outer * inner; }
  int64_t offset(int64_t r) const { return (r / inner) * n * inner + r % inner; }
};

inline DimRows dim_rows(const Tensor& self, int64_t dim) {
  DimRows d;
  d.t = cpu::bool_01(self);  // the scans and sorts read bool bytes as 0/1
  if (!d.t->is_contiguous()) {
    d.t = empty(self->sizes(), self->dtype(), self->device());
    copy_into(d.t, self);
  }
  for (int64_t i = 0; i < self->dim(); ++i) {
    if (i < dim) d.outer *= self->size(i);
    if (i == dim) d.n = self->size(i);
    if (i > dim) d.inner *= self->size(i);
  }
  return d;
}

// Calls f(begin, end) over ranges of rows, in parallel when there is enough work.
template <class F>
void for_rows(const DimRows& d, int64_t work_per_elem, const F& f) {
  int64_t per_row = std::max<int64_t>(1, d.n * work_per_elem);
  parallel_for(0, d.rows(), std::max<int64_t>(1, kReduceGrain / per_row), f);
}

// NaN-aware orderings: NaN compares as larger than everything (PyTorch's sort order).
template <class V>
inline bool is_nan(V v) {
  if constexpr (std::is_floating_point_v<V>) {
    return v != v;
  } else {
    return false;
  }
}
template <class V>
inline bool nan_less(V a, V b) {  // a < b with NaN largest
  if constexpr (std::is_floating_point_v<V>) {
    return (a < b) || (b != b && a == a);
  } else {
    return a < b;
  }
}
template <class V>
inline bool nan_equal(V a, V b) {  // equal, NaN equal to NaN
  if constexpr (std::is_floating_point_v<V>) {
    return a == b || (a != a && b != b);
  } else {
    return a == b;
  }
}

}  // namespace reduce
}  // namespace ember
