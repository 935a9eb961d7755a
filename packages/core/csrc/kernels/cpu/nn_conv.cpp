// CPU kernels of im2col / col2im (F.unfold / F.fold, for 1 to 3 spatial dims) and of
// convolution: the input's sliding windows are laid out as columns (im2col) and multiplied by
// the weight with one batched BLAS product (cpu::matmul, which tiles the work over the thread
// pool) per chunk of the batch; transposed convolution multiplies first and folds (col2im).
#include <algorithm>
#include <cstring>

#include "core/dispatch.h"
#include "kernels/cpu/nn_utils.h"
#include "kernels/parallel.h"
#include "ops.h"

namespace ember {
namespace cpu {
namespace {

// Sizes of a k-d sliding window op, padded to 3 spatial dims (missing leading dims are 1).
struct Geom {
  int64_t k = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, ks[3] = {1, 1, 1};
  int64_t st[3] = {1, 1, 1}, pd[3] = {0, 0, 0}, dl[3] = {1, 1, 1};
  int64_t kernel_numel() const { return ks[0] * ks[1] * ks[2]; }
  int64_t in_numel() const { return in[0] * in[1] * in[2]; }
  int64_t out_numel() const { return out[0] * out[1] * out[2]; }
};

// in: the spatial input sizes. Checks the parameters and computes the output positions.
Geom make_geom(const char* op, const DimVector& in, const DimVector& kernel_size,
               const DimVector& dilation, const DimVector& padding, const DimVector& stride) {
  const int64_t k = kernel_size.size();
  EMBER_CHECK_KIND(k >= 1 && k <= 3, Value, op, ": expected 1 to 3 spatial dims (kernel_size ",
                   shape_str(kernel_size), ")");
  DimVector dl = nn::expand_param(dilation, k, "dilation", op);
  DimVector pd = nn::expand_param(padding, k, "padding", op);
  DimVector st = nn::expand_param(stride, k, "stride", op);
  Geom g;
  g.k = k;
  for (int64_t d = 0; d < k; ++d) {
    const int64_t j = 3 - k + d;
    EMBER_CHECK_KIND(kernel_size[d] > 0 && dl[d] > 0 && st[d] > 0 && pd[d] >= 0, Value, op,
                     ": kernel_size, dilation and stride must be positive and padding "
                     "non-negative, got kernel_size=",
                     shape_str(kernel_size), " dilation=", shape_str(dl), " stride=", shape_str(st),
                     " padding=", shape_str(pd));
    g.in[j] = in[d];
    g.ks[j] = kernel_size[d];
    g.st[j] = st[d];
    g.pd[j] = pd[d];
    g.dl[j] = dl[d];
    const int64_t span = dl[d] * (kernel_size[d] - 1) + 1;
    const int64_t padded = in[d] + 2 * pd[d];
    EMBER_CHECK(padded >= span, op, ": the kernel ", shape_str(kernel_size), " with dilation ",
                shape_str(dl), " spans ", span, " elements along spatial dim ", d,
                ", more than the padded input (", in[d], " + 2 * ", pd[d], " = ", padded, ")");
    g.out[j] = (padded - span) / st[d] + 1;
  }
  return g;
}

// cols (C * K, L) from one sample x (C, *in).
template <class T>
void im2col_sample(const T* x, T* cols, int64_t c0, int64_t c1, const Geom& g) {
  const int64_t K = g.kernel_numel(), L = g.out_numel(), P = g.in_numel();
  for (int64_t c = c0; c < c1; ++c) {
    const T* xc = x + c * P;
    for (int64_t kd = 0; kd < g.ks[0]; ++kd)
      for (int64_t kh = 0; kh < g.ks[1]; ++kh)
        for (int64_t kw = 0; kw < g.ks[2]; ++kw) {
          T* row = cols + (c * K + (kd * g.ks[1] + kh) * g.ks[2] + kw) * L;
          for (int64_t od = 0; od < g.out[0]; ++od) {
            const int64_t id = od * g.st[0] - g.pd[0] + kd * g.dl[0];
            for (int64_t oh = 0; oh < g.out[1]; ++oh) {
              const int64_t ih = oh * g.st[1] - g.pd[1] + kh * g.dl[1];
              T* r = row + (od * g.out[1] + oh) * g.out[2];
              if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
                std::fill(r, r + g.out[2], T(0));
                continue;
              }
              const T* xr = xc + (id * g.in[1] + ih) * g.in[2];
              const int64_t off = kw * g.dl[2] - g.pd[2];
              if (g.st[2] == 1 && off >= 0 && off + g.out[2] <= g.in[2]) {
                std::memcpy(r, xr + off, sizeof(T) * g.out[2]);
                continue;
              }
              for (int64_t ow = 0; ow < g.out[2]; ++ow) {
                const int64_t iw = ow * g.st[2] + off;
                r[ow] = (iw >= 0 && iw < g.in[2]) ? xr[iw] : T(0);
              }
            }
          }
        }
  }
}

// x (C, *in) += fold(cols (C * K, L)) for channels [c0, c1).
template <class T>
void col2im_sample(const T* cols, T* x, int64_t c0, int64_t c1, const Geom& g) {
  using A = opmath_t<T>;
  const int64_t K = g.kernel_numel(), L = g.out_numel(), P = g.in_numel();
  for (int64_t c = c0; c < c1; ++c) {
    T* xc = x + c * P;
    for (int64_t kd = 0; kd < g.ks[0]; ++kd)
      for (int64_t kh = 0; kh < g.ks[1]; ++kh)
        for (int64_t kw = 0; kw < g.ks[2]; ++kw) {
          const T* row = cols + (c * K + (kd * g.ks[1] + kh) * g.ks[2] + kw) * L;
          for (int64_t od = 0; od < g.out[0]; ++od) {
            const int64_t id = od * g.st[0] - g.pd[0] + kd * g.dl[0];
            if (id < 0 || id >= g.in[0]) continue;
            for (int64_t oh = 0; oh < g.out[1]; ++oh) {
              const int64_t ih = oh * g.st[1] - g.pd[1] + kh * g.dl[1];
              if (ih < 0 || ih >= g.in[1]) continue;
              const T* r = row + (od * g.out[1] + oh) * g.out[2];
              T* xr = xc + (id * g.in[1] + ih) * g.in[2];
              for (int64_t ow = 0; ow < g.out[2]; ++ow) {
                const int64_t iw = ow * g.st[2] - g.pd[2] + kw * g.dl[2];
                if (iw >= 0 && iw < g.in[2])
                  xr[iw] = static_cast<T>(static_cast<A>(xr[iw]) + static_cast<A>(r[ow]));
              }
            }
          }
        }
  }
}

// Runs f(n, c0, c1) over samples x channel ranges, in parallel.
template <class F>
void for_planes(int64_t n, int64_t c, int64_t work_per_plane, const F& f) {
  const int64_t grain =
      std::max<int64_t>(1, kPointwiseGrain / std::max<int64_t>(work_per_plane, 1));
  parallel_for(0, n * c, grain, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e;) {
      const int64_t s = p / c, c0 = p % c, c1 = std::min(c, c0 + (e - p));
      f(s, c0, c1);
      p += c1 - c0;
    }
  });
}

// im2col of a contiguous batch x (N, C, *in) into cols (N, C * K, L).
void im2col_into(const Tensor& x, const Tensor& cols, const Geom& g) {
  const int64_t N = x->size(0), C = x->size(1);
  const int64_t in_plane = g.in_numel(), col_plane = g.kernel_numel() * g.out_numel();
  EMBER_DISPATCH_FLOAT(x->dtype(), "im2col", [&] {
    using T = scalar_t;
    const T* px = x->data_as<T>();
    T* pc = cols->data_as<T>();
    for_planes(N, C, col_plane, [&](int64_t s, int64_t c0, int64_t c1) {
      im2col_sample<T>(px + s * C * in_plane, pc + s * C * col_plane, c0, c1, g);
    });
  });
}

// out (N, C, *in) = col2im of contiguous cols (N, C * K, L).
void col2im_into(const Tensor& cols, const Tensor& out, const Geom& g) {
  const int64_t N = out->size(0), C = out->size(1);
  const int64_t in_plane = g.in_numel(), col_plane = g.kernel_numel() * g.out_numel();
  EMBER_DISPATCH_FLOAT(out->dtype(), "col2im", [&] {
    using T = scalar_t;
    const T* pc = cols->data_as<T>();
    T* po = out->data_as<T>();
    std::fill(po, po + out->numel(), T(0));
    for_planes(N, C, col_plane, [&](int64_t s, int64_t c0, int64_t c1) {
      col2im_sample<T>(pc + s * C * col_plane, po + s * C * in_plane, c0, c1, g);
    });
  });
}

DimVector trailing(const Tensor& t, int64_t k) {
  DimVector out;
  for (int64_t d = t->dim() - k; d < t->dim(); ++d) out.push_back(t->size(d));
  return out;
}

Tensor view_as_shape(const Tensor& contiguous, const DimVector& sizes) {
  return make_view(contiguous, sizes, contiguous_strides(sizes), contiguous->storage_offset());
}

}  // namespace

Tensor im2col(const Tensor& self, const DimVector& kernel_size, const DimVector& dilation,
              const DimVector& padding, const DimVector& stride) {
  const int64_t k = kernel_size.size();
  EMBER_CHECK_KIND(is_floating(self->dtype()), Type,
                   "im2col: expected a floating-point input, got ", dtype_name(self->dtype()));
  EMBER_CHECK(self->dim() == k + 2 || self->dim() == k + 1, "im2col: expected a ", k + 1, "-D (",
              "unbatched) or ", k + 2, "-D (batched) input for a ", k,
              "-D kernel_size, but got input of shape ", shape_str(self->sizes()));
  const bool batched = self->dim() == k + 2;
  Tensor x = nn::contig(batched ? self : view_as_shape(nn::contig(self), [&] {
    DimVector s{1};
    for (int64_t v : self->sizes()) s.push_back(v);
    return s;
  }()));
  Geom g = make_geom("im2col", trailing(x, k), kernel_size, dilation, padding, stride);
  const int64_t N = x->size(0), C = x->size(1);
  Tensor cols = ember::empty({N, C * g.kernel_numel(), g.out_numel()}, x->dtype(), x->device());
  if (cols->numel() > 0) im2col_into(x, cols, g);
  return batched ? cols : view_as_shape(cols, {C * g.kernel_numel(), g.out_numel()});
}

Tensor col2im(const Tensor& self, const DimVector& output_size, const DimVector& kernel_size,
              const DimVector& dilation, const DimVector& padding, const DimVector& stride) {
  const int64_t k = kernel_size.size();
  EMBER_CHECK_KIND(is_floating(self->dtype()), Type,
                   "col2im: expected a floating-point input, got ", dtype_name(self->dtype()));
  DimVector os = nn::expand_param(output_size, k, "output_size", "col2im");
  EMBER_CHECK(self->dim() == 3 || self->dim() == 2,
              "col2im: expected a 2-D (unbatched) or 3-D (batched) input (N, C * prod(kernel_size),"
              " L), got ",
              shape_str(self->sizes()));
  const bool batched = self->dim() == 3;
  Tensor cols = nn::contig(self);
  if (!batched) cols = view_as_shape(cols, {1, self->size(0), self->size(1)});
  Geom g = make_geom("col2im", os, kernel_size, dilation, padding, stride);
  const int64_t K = g.kernel_numel();
  EMBER_CHECK(cols->size(1) % K == 0, "col2im: expected size(", batched ? 1 : 0,
              ") of the input to be divisible by the product of kernel_size (", K, "), got ",
              shape_str(self->sizes()));
  EMBER_CHECK(cols->size(2) == g.out_numel(), "col2im: expected ", g.out_numel(),
              " blocks (the sliding positions of kernel_size ", shape_str(kernel_size),
              " over output_size ", shape_str(os), "), but the input has ", cols->size(2),
              " (shape ", shape_str(self->sizes()), ")");
  DimVector out_shape{cols->size(0), cols->size(1) / K};
  for (int64_t v : os) out_shape.push_back(v);
  Tensor out = ember::empty(out_shape, cols->dtype(), cols->device());
  if (out->numel() > 0) col2im_into(cols, out, g);
  if (batched) return out;
  DimVector unb(out_shape.begin() + 1, out_shape.end());
  return view_as_shape(out, unb);
}

namespace {
constexpr int64_t kColumnBudget = 64 << 20;  // bytes of im2col columns per batch chunk

void add_bias(const Tensor& out, const Tensor& bias) {
  const int64_t N = out->size(0), C = out->size(1), P = out->numel() / std::max<int64_t>(N * C, 1);
  Tensor b = nn::contig(bias, out->dtype());
  EMBER_DISPATCH_FLOAT(out->dtype(), "convolution", [&] {
    using T = scalar_t;
    using A = opmath_t<T>;
    T* po = out->data_as<T>();
    const T* pb = b->data_as<T>();
    for_planes(N, C, P, [&](int64_t s, int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        T* p = po + (s * C + c) * P;
        const A bv = static_cast<A>(pb[c]);
        for (int64_t i = 0; i < P; ++i) p[i] = static_cast<T>(static_cast<A>(p[i]) + bv);
      }
    });
  });
}
}  // namespace

Tensor convolution(const Tensor& input, const Tensor& weight, const Tensor& bias,
                   const DimVector& stride, const DimVector& padding, const DimVector& dilation,
                   bool transposed, const DimVector& output_padding, int64_t groups) {
  const char* op = transposed ? "conv_transpose" : "convolution";
  const int64_t k = weight->dim() - 2;
  EMBER_CHECK(k >= 1 && k <= 3, op, ": expected a 3-D, 4-D or 5-D weight, got shape ",
              shape_str(weight->sizes()));
  EMBER_CHECK(input->dim() == k + 2, op, ": expected a ", k + 2, "-D (batched) input for the ",
              k + 2, "-D weight of shape ", shape_str(weight->sizes()), ", but got input of shape ",
              shape_str(input->sizes()));
  EMBER_CHECK_KIND(is_floating(input->dtype()), Type, op, ": expected a floating-point input, got ",
                   dtype_name(input->dtype()));
  EMBER_CHECK(input->dtype() == weight->dtype(), op, ": input type (", dtype_name(input->dtype()),
              ") and weight type (", dtype_name(weight->dtype()), ") should be the same");
  EMBER_CHECK_KIND(groups > 0, Value, op, ": groups must be positive, got ", groups);
  const int64_t N = input->size(0), C = input->size(1);
  const int64_t Co = transposed ? weight->size(1) * groups : weight->size(0);
  const int64_t w_in = transposed ? weight->size(0) : weight->size(1) * groups;
  EMBER_CHECK(C == w_in, op, ": expected input of shape ", shape_str(input->sizes()), " to have ",
              w_in, " channels (weight of shape ", shape_str(weight->sizes()), ", groups=", groups,
              "), but it has ", C);
  EMBER_CHECK(weight->size(0) % groups == 0, op, ": weight of shape ", shape_str(weight->sizes()),
              ": size(0) must be divisible by groups=", groups);
  if (bias) {
    EMBER_CHECK(bias->dim() == 1 && bias->size(0) == Co, op, ": expected bias of shape (", Co,
                ",), got ", shape_str(bias->sizes()));
    EMBER_CHECK(bias->dtype() == input->dtype(), op, ": bias type (", dtype_name(bias->dtype()),
                ") and input type (", dtype_name(input->dtype()), ") should be the same");
  }
  DimVector ks = trailing(weight, k);
  const int64_t K = nn::prod(ks);
  const int64_t G = groups;
  Tensor w = nn::contig(weight);
  Tensor x = nn::contig(input);
  const int64_t isz = x->itemsize();

  if (!transposed) {
    Geom g = make_geom(op, trailing(x, k), ks, dilation, padding, stride);
    DimVector out_shape{N, Co};
    for (int64_t d = 0; d < k; ++d) out_shape.push_back(g.out[3 - k + d]);
    Tensor out = ember::empty(out_shape, x->dtype(), x->device());
    if (out->numel() == 0) return out;
    const int64_t L = g.out_numel(), CK = (C / G) * K;
    bool pointwise = true;  // 1x1 kernel, stride 1, no padding: the input is its own columns
    for (int64_t d = 0; d < 3; ++d) pointwise &= g.ks[d] == 1 && g.st[d] == 1 && g.pd[d] == 0;
    Tensor wv = view_as_shape(w, {G, Co / G, CK});
    const int64_t per_sample = C * K * L * isz;
    const int64_t chunk = pointwise ? N : std::max<int64_t>(1, kColumnBudget / per_sample);
    for (int64_t n0 = 0; n0 < N; n0 += chunk) {
      const int64_t nb = std::min(chunk, N - n0);
      Tensor xs = make_view(x, {nb, C, g.in_numel()}, {C * g.in_numel(), g.in_numel(), 1},
                            x->storage_offset() + n0 * C * g.in_numel());
      Tensor cols;
      if (pointwise) {
        cols = xs;
      } else {
        cols = ember::empty({nb, C * K, L}, x->dtype(), x->device());
        im2col_into(xs, cols, g);
      }
      Tensor r = cpu::matmul(wv, view_as_shape(nn::contig(cols), {nb, G, CK, L}));
      Tensor dst = make_view(out, {nb, G, Co / G, L}, contiguous_strides({nb, G, Co / G, L}),
                             out->storage_offset() + n0 * Co * L);
      if (nb == N) {
        out = view_as_shape(r, out_shape);
      } else {
        copy_into(dst, r);
      }
    }
    if (bias) add_bias(out, bias);
    return out;
  }

  // Transposed: columns = W^T @ x per group, folded into the (larger) output.
  DimVector st = nn::expand_param(stride, k, "stride", op);
  DimVector pd = nn::expand_param(padding, k, "padding", op);
  DimVector dl = nn::expand_param(dilation, k, "dilation", op);
  DimVector opd = nn::expand_param(output_padding, k, "output_padding", op);
  DimVector out_sp;
  for (int64_t d = 0; d < k; ++d) {
    EMBER_CHECK_KIND(st[d] > 0 && dl[d] > 0 && pd[d] >= 0, Value, op,
                     ": stride and dilation must be positive and padding non-negative");
    EMBER_CHECK_KIND(opd[d] >= 0 && (opd[d] < st[d] || opd[d] < dl[d]), Value, op,
                     ": output_padding must be smaller than either stride or dilation, got "
                     "output_padding=",
                     shape_str(opd), " stride=", shape_str(st), " dilation=", shape_str(dl));
    const int64_t o = (x->size(d + 2) - 1) * st[d] - 2 * pd[d] + dl[d] * (ks[d] - 1) + opd[d] + 1;
    EMBER_CHECK(o > 0, op, ": the output size along spatial dim ", d, " would be ", o,
                " for input of shape ", shape_str(input->sizes()));
    out_sp.push_back(o);
  }
  Geom g = make_geom(op, out_sp, ks, dl, pd, st);
  DimVector out_shape{N, Co};
  for (int64_t v : out_sp) out_shape.push_back(v);
  Tensor out = ember::empty(out_shape, x->dtype(), x->device());
  if (out->numel() == 0) return out;
  const int64_t Lin = nn::prod(trailing(x, k)), Cg = C / G, CoK = (Co / G) * K;
  // (G, Cg, CoK) transposed to (G, CoK, Cg): a view, BLAS reads it as is.
  Tensor wt = make_view(w, {G, CoK, Cg}, {Cg * CoK, 1, CoK}, w->storage_offset());
  const int64_t per_sample = Co * K * Lin * isz;
  const int64_t chunk = std::max<int64_t>(1, kColumnBudget / per_sample);
  for (int64_t n0 = 0; n0 < N; n0 += chunk) {
    const int64_t nb = std::min(chunk, N - n0);
    Tensor xs = make_view(x, {nb, G, Cg, Lin}, contiguous_strides({nb, G, Cg, Lin}),
                          x->storage_offset() + n0 * C * Lin);
    Tensor cols = cpu::matmul(wt, xs);  // (nb, G, CoK, Lin) == (nb, Co * K, Lin)
    Tensor dst = make_view(out, {nb, Co, g.in[0], g.in[1], g.in[2]},
                           contiguous_strides({nb, Co, g.in[0], g.in[1], g.in[2]}),
                           out->storage_offset() + n0 * Co * g.in_numel());
    col2im_into(view_as_shape(nn::contig(cols), {nb, Co * K, Lin}), dst, g);
  }
  if (bias) add_bias(out, bias);
  return out;
}

}  // namespace cpu
}  // namespace ember
