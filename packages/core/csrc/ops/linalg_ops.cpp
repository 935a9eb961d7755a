// Composite linear-algebra ops (ops/linalg.yaml): einsum, tensordot, kron, outer, addr, inner.
// They only rearrange views and call other ops (bmm, mm, mv, mul, add), so every device that has
// those gets them. Reshapes are views whenever the strides allow, copies otherwise.
#include <algorithm>
#include <array>
#include <complex>
#include <optional>
#include <string>
#include <vector>

#include "kernels/iterator.h"
#include "ops.h"

namespace ember {
namespace composite {
namespace {

Tensor permuted(const Tensor& t, const DimVector& perm) {
  DimVector sizes, strides;
  for (int64_t p : perm) {
    sizes.push_back(t->size(p));
    strides.push_back(t->stride(p));
  }
  return make_view(t, sizes, strides, t->storage_offset());
}

// Strides that let `t` be viewed with `shape` without copying, if any (PyTorch's computeStride).
std::optional<DimVector> view_strides(const Tensor& t, const DimVector& shape) {
  const int64_t nd = shape.size();
  if (t->numel() == 0 || t->dim() == 0) return contiguous_strides(shape);
  DimVector st(nd, 1);
  int64_t view_d = nd - 1;
  int64_t base = t->stride(t->dim() - 1), tensor_numel = 1, view_numel = 1;
  for (int64_t d = t->dim() - 1; d >= 0; --d) {
    tensor_numel *= t->size(d);
    if (d == 0 || (t->size(d - 1) != 1 && t->stride(d - 1) != tensor_numel * base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        st[view_d] = view_numel * base;
        view_numel *= shape[view_d];
        view_d--;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        base = t->stride(d - 1);
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return st;
}

Tensor reshaped(const Tensor& t, const DimVector& shape) {
  if (auto st = view_strides(t, shape)) return make_view(t, shape, *st, t->storage_offset());
  Tensor c = t->is_contiguous() ? ops::clone(t) : ops::contiguous(t);
  return make_view(c, shape, contiguous_strides(shape), c->storage_offset());
}

void append(DimVector& v, const DimVector& w) {
  for (int64_t x : w) v.push_back(x);
}

int64_t prod(const DimVector& v) {
  int64_t n = 1;
  for (int64_t s : v) n *= s;
  return n;
}

}  // namespace

// ---- outer / addr / inner ---------------------------------------------------------------------

Tensor outer(const Tensor& self, const Tensor& vec2) {
  EMBER_CHECK(self->dim() == 1, "outer: expected 1-D argument self, but got ", self->dim(), "-D");
  EMBER_CHECK(vec2->dim() == 1, "outer: expected 1-D argument vec2, but got ", vec2->dim(), "-D");
  Tensor col = make_view(self, {self->size(0), 1}, {self->stride(0), 0}, self->storage_offset());
  return ops::mul(col, vec2, Tensor());
}

Tensor addr(const Tensor& self, const Tensor& vec1, const Tensor& vec2, const Scalar& beta,
            const Scalar& alpha) {
  EMBER_CHECK(vec1->dim() == 1, "addr: expected 1-D argument vec1, but got ", vec1->dim(), "-D");
  EMBER_CHECK(vec2->dim() == 1, "addr: expected 1-D argument vec2, but got ", vec2->dim(), "-D");
  DimVector shape{vec1->size(0), vec2->size(0)};
  EMBER_CHECK(broadcast_shapes(self->sizes(), shape, "addr") == shape, "addr: self of shape ",
              shape_str(self->sizes()), " can't be broadcast to the result shape ",
              shape_str(shape));
  if (self->dtype() == ScalarType::Bool && vec1->dtype() == ScalarType::Bool &&
      vec2->dtype() == ScalarType::Bool) {
    // All bool: alpha and beta act as truth values and the result stays bool (PyTorch).
    const std::complex<double> zero(0.0, 0.0);
    Tensor o = alpha.to_complex() != zero ? outer(vec1, vec2)
                                          : ops::zeros(shape, ScalarType::Bool, self->device());
    if (beta.to_complex() == zero) return o;
    return ops::logical_or(o, self, Tensor());
  }
  Tensor r = outer(vec1, vec2);
  // (the comparisons take the imaginary part of a complex alpha / beta into account)
  if (!(alpha.to_complex() == std::complex<double>(1.0, 0.0) && !alpha.is_bool()))
    r = ops::mul(r, alpha, Tensor());
  // beta == 0 ignores self entirely (NaN in it does not propagate), as in PyTorch.
  if (beta.to_complex() == std::complex<double>(0.0, 0.0))
    return ops::add(r, ops::zeros(shape, self->dtype(), self->device()), 1, Tensor());
  return ops::add(r, self, beta, Tensor());
}

Tensor inner(const Tensor& self, const Tensor& other) {
  if (self->dim() == 0 || other->dim() == 0) return ops::mul(self, other, Tensor());
  const int64_t ka = self->size(self->dim() - 1), kb = other->size(other->dim() - 1);
  EMBER_CHECK(ka == kb,
              "inner: the last dimension must match on both input tensors but got shapes ",
              shape_str(self->sizes()), " and ", shape_str(other->sizes()));
  // (named here: tensordot's product would report mm's m1 and m2, which the caller never saw)
  EMBER_CHECK(self->dtype() == other->dtype(), "inner: expected both inputs to have the same ",
              "dtype, but got ", dtype_name(self->dtype()), " and ", dtype_name(other->dtype()));
  return ops::tensordot(self, other, DimVector{-1}, DimVector{-1});
}

// ---- tensordot --------------------------------------------------------------------------------

Tensor tensordot(const Tensor& a, const Tensor& b, const DimVector& dims_a,
                 const DimVector& dims_b) {
  EMBER_CHECK(dims_a.size() == dims_b.size(),
              "tensordot: both dimension lists should have same length (got ", dims_a.size(),
              " and ", dims_b.size(), ")");
  EMBER_CHECK(a->dtype() == b->dtype(), "tensordot: expected both inputs to have the same dtype, ",
              "but got ", dtype_name(a->dtype()), " and ", dtype_name(b->dtype()));
  std::vector<bool> ca(a->dim(), false), cb(b->dim(), false);
  DimVector da, db;
  for (int64_t i = 0; i < dims_a.size(); ++i) {
    // wrap_dim lets dim 0 / -1 through for a 0-d tensor, which has no dim to contract.
    EMBER_CHECK_KIND(a->dim() > 0 && b->dim() > 0, Index, "tensordot: dimension specified as ",
                     a->dim() == 0 ? dims_a[i] : dims_b[i], " but tensor has no dimensions");
    int64_t x = wrap_dim(dims_a[i], a->dim(), "tensordot"),
            y = wrap_dim(dims_b[i], b->dim(), "tensordot");
    EMBER_CHECK(!ca[x], "tensordot: dim ", dims_a[i], " appears multiple times in dims_a");
    EMBER_CHECK(!cb[y], "tensordot: dim ", dims_b[i], " appears multiple times in dims_b");
    EMBER_CHECK(a->size(x) == b->size(y),
                "tensordot: contracted dimensions need to match, but first has size ", a->size(x),
                " in dim ", dims_a[i], " and second has size ", b->size(y), " in dim ", dims_b[i]);
    ca[x] = cb[y] = true;
    da.push_back(x);
    db.push_back(y);
  }
  DimVector pa, pb, out_shape;
  int64_t m = 1, n = 1, k = 1;
  for (int64_t d = 0; d < a->dim(); ++d)
    if (!ca[d]) {
      pa.push_back(d);
      out_shape.push_back(a->size(d));
      m *= a->size(d);
    }
  for (int64_t d : da) {
    pa.push_back(d);
    k *= a->size(d);
  }
  pb = db;
  for (int64_t d = 0; d < b->dim(); ++d)
    if (!cb[d]) {
      pb.push_back(d);
      out_shape.push_back(b->size(d));
      n *= b->size(d);
    }
  Tensor r = ops::mm(reshaped(permuted(a, pa), {m, k}), reshaped(permuted(b, pb), {k, n}));
  return reshaped(r, out_shape);
}

Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims) {
  EMBER_CHECK(dims >= 0, "tensordot: expects dims >= 0, but got dims=", dims);
  EMBER_CHECK(dims <= a->dim() && dims <= b->dim(),
              "tensordot: expects dims <= ndim_a and ndim_b, but got dims=", dims,
              " for tensors of ", a->dim(), " and ", b->dim(), " dims");
  DimVector da, db;
  for (int64_t i = 0; i < dims; ++i) {
    da.push_back(i - dims);  // negative, so errors name dims as PyTorch does (-1 = last)
    db.push_back(i);
  }
  return tensordot(a, b, da, db);
}

// ---- kron -------------------------------------------------------------------------------------

Tensor kron(const Tensor& self, const Tensor& other) {
  const int64_t nd = std::max(self->dim(), other->dim());
  // self as (a0, 1, a1, 1, ...) and other as (1, b0, 1, b1, ...): their product, read as
  // (a0*b0, a1*b1, ...), is the Kronecker product.
  auto interleave = [nd](const Tensor& t, bool first) {
    DimVector sizes(2 * nd, 1), strides(2 * nd, 0);
    const int64_t pad = nd - t->dim();
    for (int64_t d = 0; d < t->dim(); ++d) {
      sizes[2 * (d + pad) + (first ? 0 : 1)] = t->size(d);
      strides[2 * (d + pad) + (first ? 0 : 1)] = t->stride(d);
    }
    return make_view(t, sizes, strides, t->storage_offset());
  };
  Tensor prod_t = ops::mul(interleave(self, true), interleave(other, false), Tensor());
  DimVector shape(nd);
  for (int64_t d = 0; d < nd; ++d) shape[d] = prod_t->size(2 * d) * prod_t->size(2 * d + 1);
  return reshaped(prod_t, shape);
}

// ---- einsum -----------------------------------------------------------------------------------

namespace {

constexpr int kLetters = 52;  // A-Z then a-z: label order is ASCII order (implicit output)
constexpr int kEllipsis = -1;

int label_of(char c) { return c >= 'A' && c <= 'Z' ? c - 'A' : c - 'a' + 26; }
char label_char(int l) { return l < 26 ? char('A' + l) : char('a' + l - 26); }

// One side of the equation: letters as label ids and kEllipsis for "...".
std::vector<int> parse_term(const std::string& eq, size_t begin, size_t end, bool output) {
  std::vector<int> labels;
  bool ellipsis = false;
  for (size_t i = begin; i < end; ++i) {
    char c = eq[i];
    if (c == ' ') continue;
    if (c == '.') {
      EMBER_CHECK(i + 2 < end && eq[i + 1] == '.' && eq[i + 2] == '.', "einsum(): found '.' for ",
                  output ? "output" : "an operand", " but not part of a valid ellipsis (...)");
      EMBER_CHECK(!ellipsis, "einsum(): found more than one ellipsis ('...') in ",
                  output ? "the output" : "an operand");
      ellipsis = true;
      labels.push_back(kEllipsis);
      i += 2;
      continue;
    }
    EMBER_CHECK((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'),
                "einsum(): invalid subscript given at index ", i,
                " in the equation string, subscripts must be in [a-zA-Z]");
    labels.push_back(label_of(c));
  }
  return labels;
}

// Sums `t` (one dim per global label) over the labels in `sum`, keeping them as size-1 dims.
Tensor sum_labels(const Tensor& t, const std::vector<bool>& sum) {
  DimVector keep, drop, keep_sizes;
  int64_t S = 1;
  for (int64_t d = 0; d < t->dim(); ++d) {
    if (sum[d] && t->size(d) != 1) {
      drop.push_back(d);
      S *= t->size(d);
    } else {
      keep.push_back(d);
      keep_sizes.push_back(t->size(d));
    }
  }
  if (drop.empty()) return t;
  DimVector perm = keep;
  append(perm, drop);
  const int64_t R = prod(keep_sizes);
  Tensor ones = ops::ones(DimVector{S}, t->dtype(), t->device());
  Tensor r = ops::mv(reshaped(permuted(t, perm), {R, S}), ones);  // contiguous (R,)
  DimVector sizes(t->dim(), 1), strides(t->dim(), 0);
  DimVector ks = contiguous_strides(keep_sizes);
  for (int64_t i = 0; i < keep.size(); ++i) {
    sizes[keep[i]] = keep_sizes[i];
    strides[keep[i]] = ks[i];
  }
  return make_view(r, sizes, strides, r->storage_offset());
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& tensors) {
  EMBER_CHECK(!tensors.empty(), "einsum(): must provide at least one operand");
  const size_t arrow = equation.find("->");
  const size_t lhs_end = arrow == std::string::npos ? equation.size() : arrow;
  std::vector<std::vector<int>> terms;
  for (size_t begin = 0;;) {
    size_t comma = equation.find(',', begin);
    size_t end = std::min(comma, lhs_end);
    terms.push_back(parse_term(equation, begin, end, false));
    if (comma == std::string::npos || comma >= lhs_end) break;
    begin = comma + 1;
  }
  EMBER_CHECK(terms.size() == tensors.size(),
              terms.size() > tensors.size()
                  ? "einsum(): fewer operands were provided than specified in the equation"
                  : "einsum(): more operands were provided than specified in the equation");
  const size_t nops = tensors.size();
  for (size_t i = 1; i < nops; ++i)
    EMBER_CHECK(tensors[i]->dtype() == tensors[0]->dtype(),
                "einsum(): expected all operands to have the same dtype, "
                "but operand 0 has ",
                dtype_name(tensors[0]->dtype()), " and operand ", i, " has ",
                dtype_name(tensors[i]->dtype()));

  // Ellipsis dims become labels kLetters + j (right-aligned across operands, so they broadcast).
  int64_t n_ell = 0;
  std::vector<int64_t> op_ell(nops, 0);
  std::array<int, kLetters> count{};
  for (size_t i = 0; i < nops; ++i) {
    int64_t letters = 0;
    bool has_ell = false;
    for (int l : terms[i]) {
      if (l == kEllipsis) {
        has_ell = true;
      } else {
        letters++;
        count[l]++;
      }
    }
    const int64_t nd = tensors[i]->dim();
    if (has_ell) {
      EMBER_CHECK(nd >= letters, "einsum(): the number of subscripts in the equation (", letters,
                  ") is more than the number of dimensions (", nd, ") for operand ", i);
      op_ell[i] = nd - letters;
    } else {
      EMBER_CHECK(nd == letters, "einsum(): the number of subscripts in the equation (", letters,
                  ") does not match the number of dimensions (", nd, ") for operand ", i,
                  " and no ellipsis was given");
    }
    n_ell = std::max(n_ell, op_ell[i]);
  }
  const int64_t nlabels = kLetters + n_ell;

  // Output labels.
  std::vector<int> out;
  if (arrow != std::string::npos) {
    std::vector<bool> seen(kLetters, false);
    for (int l : parse_term(equation, arrow + 2, equation.size(), true)) {
      if (l == kEllipsis) {
        for (int64_t j = 0; j < n_ell; ++j) out.push_back(kLetters + j);
        continue;
      }
      EMBER_CHECK(count[l] > 0, "einsum(): output subscript ", label_char(l),
                  " does not appear in the equation for any input operand");
      EMBER_CHECK(!seen[l], "einsum(): output subscript ", label_char(l),
                  " appears more than once in the output");
      seen[l] = true;
      out.push_back(l);
    }
  } else {
    for (int64_t j = 0; j < n_ell; ++j) out.push_back(kLetters + j);
    for (int l = 0; l < kLetters; ++l)
      if (count[l] == 1) out.push_back(l);
  }
  std::vector<bool> in_out(nlabels, false);
  for (int l : out) in_out[l] = true;

  // Global dims: every label used anywhere, in label order. Each operand becomes a view with one
  // dim per global label (size 1, stride 0 where it lacks the label; diagonals for repeats).
  std::vector<int> used;
  {
    std::vector<bool> u(nlabels, false);
    for (int l = 0; l < kLetters; ++l) u[l] = count[l] > 0;
    for (int64_t j = 0; j < n_ell; ++j) u[kLetters + j] = true;
    for (int l = 0; l < nlabels; ++l)
      if (u[l]) used.push_back(l);
  }
  std::vector<int64_t> pos(nlabels, -1);
  for (size_t i = 0; i < used.size(); ++i) pos[used[i]] = i;
  const int64_t G = used.size();
  std::vector<int64_t> label_size(nlabels, 1);
  std::vector<int64_t> last_use(nlabels, -1);
  std::vector<Tensor> aligned;
  for (size_t i = 0; i < nops; ++i) {
    const Tensor& t = tensors[i];
    DimVector sizes(G, 1), strides(G, 0);
    std::vector<bool> have(G, false);
    int64_t d = 0;
    for (int l : terms[i]) {
      std::vector<int> ls;
      if (l == kEllipsis) {
        for (int64_t j = 0; j < op_ell[i]; ++j) ls.push_back(kLetters + n_ell - op_ell[i] + j);
      } else {
        ls.push_back(l);
      }
      for (int lab : ls) {
        const int64_t g = pos[lab], s = t->size(d);
        if (have[g]) {
          EMBER_CHECK(sizes[g] == s, "einsum(): subscript ", label_char(lab),
                      " is repeated for operand ", i, " but the sizes don't match, ", sizes[g],
                      " != ", s);
          strides[g] += t->stride(d);
        } else {
          have[g] = true;
          sizes[g] = s;
          strides[g] = t->stride(d);
        }
        d++;
      }
    }
    for (int64_t g = 0; g < G; ++g) {
      if (!have[g]) continue;
      const int lab = used[g];
      last_use[lab] = i;
      if (sizes[g] == 1) {
        strides[g] = 0;
        continue;
      }
      EMBER_CHECK(label_size[lab] == 1 || label_size[lab] == sizes[g], "einsum(): ",
                  lab < kLetters ? std::string("subscript ") + label_char(lab)
                                 : std::string("an ellipsis dim"),
                  " has size ", sizes[g], " for operand ", i,
                  " which does not broadcast with previously seen size ", label_size[lab]);
      label_size[lab] = sizes[g];
    }
    aligned.push_back(make_view(t, sizes, strides, t->storage_offset()));
  }

  // Contract left to right: each step is one bmm over (batch, left, contracted, right) labels.
  Tensor result = aligned[0];
  for (size_t i = 1; i < nops; ++i) {
    const Tensor& rhs = aligned[i];
    std::vector<bool> sum_l(G, false), sum_r(G, false);
    DimVector batch, left, right, contract;
    for (int64_t g = 0; g < G; ++g) {
      const int lab = used[g];
      const bool keep = in_out[lab] || last_use[lab] > static_cast<int64_t>(i);
      const bool a = result->size(g) != 1, b = rhs->size(g) != 1;
      if (keep) {
        if (a && b)
          batch.push_back(g);
        else if (a)
          left.push_back(g);
        else if (b)
          right.push_back(g);
      } else {
        if (a && b)
          contract.push_back(g);
        else if (a)
          sum_l[g] = true;
        else if (b)
          sum_r[g] = true;
      }
    }
    Tensor l = sum_labels(result, sum_l), r = sum_labels(rhs, sum_r);
    DimVector bs, ms, ns;
    for (int64_t g : batch) bs.push_back(l->size(g));
    for (int64_t g : left) ms.push_back(l->size(g));
    for (int64_t g : right) ns.push_back(r->size(g));
    int64_t K = 1;
    for (int64_t g : contract) K *= l->size(g);
    const int64_t B = prod(bs), M = prod(ms), N = prod(ns);
    DimVector pl = batch, pr = batch;
    append(pl, left);
    append(pl, contract);
    append(pr, contract);
    append(pr, right);
    // The other G dims of each side all have size 1: dropping them is a view.
    auto squeeze_to = [](const Tensor& t, const DimVector& dims) {
      DimVector sizes, strides;
      for (int64_t g : dims) {
        sizes.push_back(t->size(g));
        strides.push_back(t->stride(g));
      }
      return make_view(t, sizes, strides, t->storage_offset());
    };
    Tensor lv = reshaped(squeeze_to(l, pl), {B, M, K}), rv = reshaped(squeeze_to(r, pr), {B, K, N});
    // No contracted label: an outer product per batch, a mul as in PyTorch's einsum (the same
    // products; mul also takes uint16/32/64, which bmm refuses). Made contiguous like bmm's.
    Tensor prod_t =
        contract.empty() ? ops::contiguous(ops::mul(lv, rv, Tensor())) : ops::bmm(lv, rv);
    // (B, M, N) contiguous -> one dim per global label.
    DimVector res_dims = batch;
    append(res_dims, left);
    append(res_dims, right);
    DimVector res_sizes;
    for (int64_t g : batch) res_sizes.push_back(l->size(g));
    for (int64_t g : left) res_sizes.push_back(l->size(g));
    for (int64_t g : right) res_sizes.push_back(r->size(g));
    DimVector cs = contiguous_strides(res_sizes);
    DimVector sizes(G, 1), strides(G, 0);
    for (int64_t j = 0; j < res_dims.size(); ++j) {
      sizes[res_dims[j]] = res_sizes[j];
      strides[res_dims[j]] = cs[j];
    }
    result = make_view(prod_t, sizes, strides, prod_t->storage_offset());
  }

  // Sum what the output doesn't keep, then order the dims as the output asks.
  std::vector<bool> sum_rest(G, false);
  for (int64_t g = 0; g < G; ++g) sum_rest[g] = !in_out[used[g]];
  result = sum_labels(result, sum_rest);
  DimVector sizes, strides;
  for (int l : out) {
    sizes.push_back(result->size(pos[l]));
    strides.push_back(result->stride(pos[l]));
  }
  return make_view(result, sizes, strides, result->storage_offset());
}

}  // namespace composite
}  // namespace ember
