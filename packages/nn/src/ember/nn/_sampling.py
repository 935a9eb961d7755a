"""Spatial sampling ops composed from ember's tensor ops (so autograd differentiates them with
respect to the input and the grid): ``affine_grid`` and ``grid_sample`` (2-D and 3-D; the
spatial transformer networks' pair) and ``max_unpool1d`` / ``2d`` / ``3d`` (the inverse of max pooling
with indices). Re-exported by ``ember.nn.functional``.

>>> import ember
>>> from ember.nn import functional as F
>>> theta = ember.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])
>>> x = ember.arange(4.0).reshape(1, 1, 2, 2)
>>> F.grid_sample(x, F.affine_grid(theta, [1, 1, 2, 2], align_corners=False),
...               align_corners=False).tolist()
[[[[0.0, 1.0], [2.0, 3.0]]]]
"""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import ember
from ember import Tensor
from ember._memory_format import _suggest as _suggest_memory_format

__all__ = ["affine_grid", "grid_sample", "max_unpool1d", "max_unpool2d", "max_unpool3d"]


def _linspace_coords(n: int, align_corners: bool, like: Tensor) -> Tensor:
    """The normalized [-1, 1] coordinates of n pixel centers (or corners)."""
    if n <= 1:
        return ember.zeros(max(n, 0), dtype=like.dtype, device=like.device)
    c = ember.linspace(-1.0, 1.0, n, dtype=like.dtype, device=like.device)
    return c if align_corners else c * ((n - 1) / n)


def affine_grid(theta: Tensor, size: Sequence[int], align_corners: bool | None = None) -> Tensor:
    """The (N, H, W, 2) sampling grid of 2-D affine transforms ``theta`` (N, 2, 3) for an
    output of ``size`` (N, C, H, W): each output pixel's normalized (x, y) source location; in
    3-D, the (N, D, H, W, 3) grid of ``theta`` (N, 3, 4) for ``size`` (N, C, D, H, W), (x, y, z).

    >>> import ember
    >>> affine_grid(ember.tensor([[[1.0, 0, 0], [0, 1.0, 0]]]), [1, 1, 1, 2], False).tolist()
    [[[[-0.5, 0.0], [0.5, 0.0]]]]
    """
    if align_corners is None:
        align_corners = False
    if not theta.is_floating_point():
        raise ValueError(f"affine_grid: expected theta to have floating point type, but got "
                         f"{theta.dtype}")
    size = list(size)
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid: only 2-D and 3-D grids are supported: size must be "
                         f"(N, C, H, W) or (N, C, D, H, W), got {tuple(size)}")
    nd = len(size) - 2
    n = size[0]
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (nd, nd + 1):
        kind = "2D affine matrices of shape Nx2x3" if nd == 2 else \
            "3D affine matrices of shape Nx3x4"
        raise ValueError(f"affine_grid: expected a batch of {kind} for size {tuple(size)}. "
                         f"Got {tuple(theta.shape)}.")
    if theta.shape[0] != n:  # (a RuntimeError in torch, from its batched matmul)
        raise RuntimeError(f"affine_grid: theta holds {theta.shape[0]} affine matrices but size "
                           f"{tuple(size)} asks for a batch of {n}")
    if min(size) <= 0:
        raise ValueError(f"affine_grid: expected non-zero, positive output size. Got "
                         f"{tuple(size)}")
    spatial = size[2:]  # ([D,] H, W)
    out = 1
    for d in spatial:
        out *= d
    # the base grid holds (x, y[, z], 1) per output location: x runs along the last dim
    coords = []
    for k in range(nd):  # k = 0: x (W), 1: y (H), 2: z (D)
        dim = nd - 1 - k
        c = _linspace_coords(spatial[dim], align_corners, theta)
        view = [1] * nd
        view[dim] = spatial[dim]
        coords.append(c.view(*view).expand(*spatial))
    coords.append(ember.ones(*spatial, dtype=theta.dtype, device=theta.device))
    base = ember.stack(coords, -1)
    # (1, out, nd + 1) @ (N, nd + 1, nd) -> (N, [D,] H, W, nd)
    return (base.reshape(1, out, nd + 1) @ theta.transpose(1, 2)).reshape(n, *spatial, nd)


def _unnormalize(coord: Tensor, size: int, align_corners: bool) -> Tensor:
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _reflect_value(x: Tensor, low2: float, high2: float) -> tuple[Tensor, Tensor]:
    """x reflected into [low2 / 2, high2 / 2] (bounds given doubled, as the reference does),
    and the derivative (+-1, 0 for a one-pixel span), no autograd."""
    with ember.no_grad():
        if low2 == high2:
            return ember.zeros_like(x), ember.zeros_like(x)
        lo, span = low2 / 2, (high2 - low2) / 2
        d = x - lo
        mult = ember.where(d < 0, -1.0, 1.0).to(x.dtype)
        d = d.abs()
        flips = (d / span).floor()
        extra = d - flips * span
        even = ember.remainder(flips, 2) == 0
        return ember.where(even, extra + lo, span - extra + lo), ember.where(even, mult, -mult)


def _reflect_mult_vec(x: Tensor, size: int, align_corners: bool) -> Tensor:
    """The reflection's derivative (+-1) as PyTorch's vectorized 2-D CPU kernel decides it: from
    the distance to the low edge and whether one more flip happens past whole double spans
    (an exact half span counts as no flip, where the floor-based rule above says flip)."""
    with ember.no_grad():
        low, twice_span = (0.0, 2.0 * (size - 1)) if align_corners else (-0.5, 2.0 * size)
        if twice_span == 0:
            return ember.zeros_like(x)
        d = x - low
        a = d.abs()
        extra = a - (a / twice_span).trunc() * twice_span
        flip = (extra > twice_span - extra) ^ (d < 0)
        return ember.where(flip, -1.0, 1.0).to(x.dtype)


class _ReflectClip(ember.autograd.Function):
    """Reflection padding of a coordinate x (the reflected, clipped value c is computed by the
    caller), with PyTorch's gradient and its signed zeros: the incoming gradient (a sum that is
    +0.0 when zero) times the multiplier +-1 inside, 0 where the reflected value is clipped. The
    vectorized 2-D kernel masks that multiplier to +0.0; the scalar 3-D one multiplies it by
    the clip's 0 (so a -1 reflection gives -0.0)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, r: Tensor, c: Tensor, size: int, align_corners: bool,
                nd: int) -> Tensor:
        inside = (r > 0) & (r < size - 1)
        if nd == 2:
            m = ember.where(inside, _reflect_mult_vec(x, size, align_corners),
                            ember.zeros_like(x))
        else:
            low2, high2 = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
            m = _reflect_value(x, low2, high2)[1] * inside.to(x.dtype)
        ctx.save_for_backward(m)
        return c.clone()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None, None, None]:
        (m,) = ctx.saved_tensors
        return (grad + 0.0) * m, None, None, None, None, None


class _ClipGrad(ember.autograd.Function):
    """The clipped coordinate c, with gradient grad * (0 < x < size - 1): a clipped location's
    gradient is the incoming one times 0, so its zero keeps the incoming sign (PyTorch, whose
    incoming gradient is a sum started at +0.0, so never -0.0)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, c: Tensor, size: int) -> Tensor:
        ctx.save_for_backward(((x > 0) & (x < size - 1)).to(x.dtype))
        return c.clone()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        (inside,) = ctx.saved_tensors
        return (grad + 0.0) * inside, None, None


def _source_index(coord: Tensor, size: int, padding_mode: str, align_corners: bool,
                  nan_first: bool = False) -> Tensor:
    return _pad_coordinate(_unnormalize(coord, size, align_corners), size, padding_mode,
                           align_corners, nan_first)


def _clip_value(x: Tensor, size: int, nan_first: bool) -> Tensor:
    with ember.no_grad():
        c = x.clamp(0, size - 1)
        return ember.where(x.isnan(), ember.full_like(c, 0 if nan_first else size - 1), c)


def _clip(x: Tensor, size: int, nan_first: bool = False) -> Tensor:
    """x clamped to [0, size - 1], with no gradient on the borders themselves: PyTorch's grid
    sampler counts a location exactly on a border as clipped (its gradient there is 0, where
    clamp's would be 1).

    A NaN location (from a NaN or infinite grid value) lands where PyTorch's CPU kernels put it:
    on the first pixel in the vectorized 2-D kernel (``nan_first``: a SIMD max(NaN, 0) is 0),
    on the last in the scalar 3-D one (min(size - 1, max(NaN, 0)) loses both comparisons)."""
    c = _clip_value(x, size, nan_first)
    return _ClipGrad.apply(x, c, size) if x.requires_grad else c


def _safe_index(ix: Tensor, size: int) -> Tensor:
    """ix clamped into [0, size) as int64 indices; NaN (which the caller masks out) read as 0
    rather than cast to INT64_MIN."""
    return ix.clamp(0, size - 1).nan_to_num(0.0).to(ember.int64)


def _pad_coordinate(x: Tensor, size: int, padding_mode: str, align_corners: bool,
                    nan_first: bool = False) -> Tensor:
    """A pixel coordinate brought inside by the padding mode (zeros: left as it is)."""
    if padding_mode == "border":
        x = _clip(x, size, nan_first)
    elif padding_mode == "reflection":
        low2, high2 = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        r = _reflect_value(x, low2, high2)[0]
        c = _clip_value(r, size, nan_first)
        if x.requires_grad:
            # (nan_first marks the vectorized 2-D kernel; the 3-D one is scalar)
            c = _ReflectClip.apply(x, r, c, size, align_corners, 2 if nan_first else 3)
        x = c
    return x


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Tensor:
    """Samples ``input`` (N, C, H_in, W_in) at the normalized (x, y) locations of ``grid``
    (N, H_out, W_out, 2) (in 3-D: (N, C, D_in, H_in, W_in) at the (x, y, z) of a grid
    (N, D_out, H_out, W_out, 3), trilinearly for mode "bilinear"; "bicubic" is 2-D only), -1
    and 1 being the edges (align_corners=False: the outer pixels'
    outer edges; True: their centers): ``mode`` bilinear or nearest, ``padding_mode`` zeros,
    border or reflection for locations outside. Differentiable in input and grid.

    >>> import ember
    >>> x = ember.tensor([[[[0.0, 10.0]]]])
    >>> grid_sample(x, ember.tensor([[[[0.0, 0.0]]]]), align_corners=True).tolist()
    [[[[5.0]]]]
    """
    if align_corners is None:
        align_corners = False
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    nd = input.ndim - 2
    if input.ndim not in (4, 5) or grid.ndim != input.ndim or grid.shape[-1] != nd:
        raise RuntimeError(f"grid_sample(): expected 4D input (N, C, H, W) with a grid of shape "
                           f"(N, H_out, W_out, 2), or 5D input (N, C, D, H, W) with a grid of "
                           f"shape (N, D_out, H_out, W_out, 3), got input {tuple(input.shape)} "
                           f"and grid {tuple(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sample(): expected grid and input to have same batch size, "
                           f"but got input with sizes {tuple(input.shape)} and grid with sizes "
                           f"{tuple(grid.shape)}")
    n, c = input.shape[:2]
    spatial = list(input.shape[2:])  # ([D,] H, W)
    if 0 in spatial:
        raise RuntimeError(f"grid_sample(): expected input to have non-empty spatial dimensions, "
                           f"but input has sizes {tuple(input.shape)} with dimension "
                           f"{2 + spatial.index(0)} being empty")
    out_sp = list(grid.shape[1:-1])
    points = 1
    for d in out_sp:
        points *= d
    volume = 1
    for d in spatial:
        volume *= d
    if not input.is_floating_point():  # (ints were sampled into a float32 result)
        raise ember.DtypeNotImplementedError(
            f"grid_sample(): not implemented for input dtype {input.dtype} (expected a "
            f"floating-point input)")
    if grid.dtype != input.dtype:  # (not converted silently: torch refuses it)
        raise RuntimeError(f"grid_sample(): expected input and grid to have the same dtype, but "
                           f"input has {input.dtype} and grid has {grid.dtype}")
    # source positions per spatial dim, in the input's order: grid's last component is x (W)
    # (unbind, not one select per component: select's backward zero-fills the other components
    # and the sum of those would turn a -0.0 gradient into +0.0)
    comps = grid.unbind(-1)
    src = [_source_index(comps[nd - 1 - i], spatial[i], padding_mode, align_corners,
                         nan_first=nd == 2) for i in range(nd)]
    flat = input.reshape(n, c, volume)

    def inside_of(idx: list[Tensor]) -> Tensor:
        inside = None
        for i, ix in enumerate(idx):
            ok = (ix >= 0) & (ix <= spatial[i] - 1)
            inside = ok if inside is None else inside & ok
        return inside

    def gather(idx: list[Tensor]) -> Tensor:
        """input at integer positions idx ((N, *out) per spatial dim), zero outside."""
        lin = None
        for i, ix in enumerate(idx):
            ic = _safe_index(ix, spatial[i])
            lin = ic if lin is None else lin * spatial[i] + ic
        vals = flat.gather(2, lin.reshape(n, 1, points).expand(n, c, points))
        # where, not a product with the mask: an outside negative value reads +0.0, as torch
        vals = vals.reshape(n, c, *out_sp)
        return ember.where(inside_of(idx).unsqueeze(1), vals, ember.zeros_like(vals))

    if mode == "bicubic":
        if nd != 2:
            raise RuntimeError("grid_sample(): bicubic interpolation only supports 4D input")
        return _bicubic(input, grid, padding_mode, align_corners)
    if mode == "nearest":
        # round half to even, as nearbyint does
        out = gather([x.round() for x in src])
        if grid.requires_grad and ember.is_grad_enabled():
            # piecewise constant in the grid: PyTorch still records the op and gives the grid a
            # zero gradient (a graph that reaches the grid only through here must backward)
            out = (_ZeroGridGrad2d if nd == 2 else _ZeroGridGrad3d).apply(out, grid)
        return out
    lows = [x.floor() for x in src]
    w1 = [(x - lo).unsqueeze(1) for x, lo in zip(src, lows)]
    w0 = [1 - w for w in w1]
    lows = [lo.detach() for lo in lows]
    out = None
    # the 2^nd corners, x changing fastest; each value times its x, y (, z) weights
    for corner in itertools.product((0, 1), repeat=nd):
        idx = [lo + b for lo, b in zip(lows, corner)]
        term = gather(idx)
        for i in reversed(range(nd)):
            term = term * (w1[i] if corner[i] else w0[i])
        if nd == 3:  # PyTorch's 3-D kernel adds in-bounds corners only (an outside one's NaN
            # weight, at a NaN or infinite location, is skipped); its 2-D one multiplies through
            term = ember.where(inside_of(idx).unsqueeze(1), term, ember.zeros_like(term))
        out = term if out is None else out + term
    return out


class _ZeroGridGrad(ember.autograd.Function):
    """Passes ``out`` through and gives ``grid`` a zero gradient (nearest sampling)."""

    @staticmethod
    def forward(ctx: Any, out: Tensor, grid: Tensor) -> Tensor:
        ctx.grid_shape, ctx.grid_dtype = grid.shape, grid.dtype
        ctx.grid_device = grid.device
        return out.view_as(out)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor]:
        return grad, ember.zeros(ctx.grid_shape, dtype=ctx.grid_dtype, device=ctx.grid_device)


class _ZeroGridGrad2d(_ZeroGridGrad):
    _node_name = "GridSampler2DBackward0"  # torch's node


class _ZeroGridGrad3d(_ZeroGridGrad):
    _node_name = "GridSampler3DBackward0"  # torch's node


def _cubic_weights(t: Tensor) -> list[Tensor]:
    """The cubic convolution weights (A = -0.75, as PyTorch and OpenCV) of the taps at offsets
    -1, 0, 1, 2 for a fractional position t in [0, 1)."""
    a = -0.75

    def near(d: Tensor) -> Tensor:  # |d| <= 1
        return ((a + 2) * d - (a + 3)) * d * d + 1

    def far(d: Tensor) -> Tensor:  # 1 < |d| < 2
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _bicubic(input: Tensor, grid: Tensor, padding_mode: str, align_corners: bool) -> Tensor:
    """grid_sample's bicubic mode: a 4 x 4 neighbourhood around the unnormalized location
    (not padded: the padding applies to each tap), weighted by cubic convolution along x,
    then y; taps outside the image after padding read 0."""
    n, c, h, w = input.shape
    ho, wo = grid.shape[1:3]
    x = _unnormalize(grid[..., 0], w, align_corners)
    y = _unnormalize(grid[..., 1], h, align_corners)
    x0, y0 = x.floor(), y.floor()
    wx, wy = _cubic_weights((x - x0).unsqueeze(1)), _cubic_weights((y - y0).unsqueeze(1))
    x0, y0 = x0.detach(), y0.detach()
    flat = input.reshape(n, c, h * w)

    def tap(ix: Tensor, iy: Tensor) -> Tensor:
        with ember.no_grad():
            px = _pad_coordinate(ix, w, padding_mode, align_corners, nan_first=True)
            py = _pad_coordinate(iy, h, padding_mode, align_corners, nan_first=True)
            inside = (px >= 0) & (px <= w - 1) & (py >= 0) & (py <= h - 1)
            lin = (_safe_index(py, h) * w + _safe_index(px, w)).reshape(n, 1, ho * wo)
        vals = flat.gather(2, lin.expand(n, c, ho * wo)).reshape(n, c, ho, wo)
        # where, not a product with the mask: a tap outside reads +0.0 (a negative value times
        # 0 would be -0.0), as torch
        return ember.where(inside.unsqueeze(1), vals, ember.zeros_like(vals))

    out = None
    for j in range(4):
        row = None
        for i in range(4):
            term = tap(x0 + (i - 1), y0 + (j - 1)) * wx[i]
            row = term if row is None else row + term
        term = row * wy[j]
        out = term if out is None else out + term
    return out


def _unpool(op: str, nd: int, input: Tensor, indices: Tensor, kernel_size: Any, stride: Any,
            padding: Any, output_size: Sequence[int] | None) -> Tensor:
    from ember.nn.functional import _tuple

    k = _tuple(kernel_size, nd, "kernel_size", op)
    s = _tuple(stride if stride is not None else kernel_size, nd, "stride", op)
    p = _tuple(padding, nd, "padding", op)
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{op}: expected {nd + 1}-D or {nd + 2}-D input, got shape "
                           f"{tuple(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"{op}: expected indices of the input's shape {tuple(input.shape)}, "
                           f"got {tuple(indices.shape)}")
    spatial_in = list(input.shape[-nd:])
    default = [(i - 1) * st - 2 * pd + kk for i, st, pd, kk in zip(spatial_in, s, p, k)]
    if output_size is None:
        out_sp = default
    else:
        out_sp = list(output_size)[-nd:]
        for o, d, st in zip(out_sp, default, s):
            if not d - st < o < d + st:
                raise ValueError(f"{op}: invalid output_size {tuple(output_size)} (dims must be "
                                 f"between {[x - y + 1 for x, y in zip(default, s)]} and "
                                 f"{[x + y - 1 for x, y in zip(default, s)]})")
    lead = list(input.shape[:-nd])
    total = 1
    for o in out_sp:
        total *= o
    n_in = 1
    for i in spatial_in:
        n_in *= i
    src = input.reshape(*lead, n_in)  # (not -1: ambiguous for an empty batch)
    idx = indices.reshape(*lead, n_in).to(ember.int64)
    if idx.numel():
        lo, hi = idx.min().item(), idx.max().item()
        if lo < 0 or hi >= total:  # name the index that is out of range (a negative one too)
            raise RuntimeError(f"{op}: found an invalid max index {lo if lo < 0 else hi} (output "
                               f"volumes are of size {'x'.join(map(str, out_sp))})")
    out = ember.zeros(*lead, total, dtype=input.dtype, device=input.device)
    out = out.scatter(len(lead), idx, src).reshape(*lead, *out_sp)
    # (PyTorch's 2-d unpooling keeps a channels-last input's layout; its 3-d one does not)
    if nd == 2 and _suggest_memory_format(input) is ember.channels_last:
        out = out.contiguous(memory_format=ember.channels_last)
    return out


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Sequence[int] | None = None) -> Tensor:
    """The partial inverse of max_pool1d: each value put back at its ``indices`` position in
    a zero tensor of the pooled input's length.

    >>> import ember
    >>> max_unpool1d(ember.tensor([[[5.0]]]), ember.tensor([[[1]]]), 2).tolist()
    [[[0.0, 5.0]]]
    """
    return _unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Sequence[int] | None = None) -> Tensor:
    """The partial inverse of max_pool2d: each value put back at its flat ``h * W + w``
    index in a zero (N, C, H, W) tensor.

    >>> import ember
    >>> max_unpool2d(ember.tensor([[[[5.0]]]]), ember.tensor([[[[3]]]]), 2).tolist()
    [[[[0.0, 0.0], [0.0, 5.0]]]]
    """
    return _unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None,
                 padding: Any = 0, output_size: Sequence[int] | None = None) -> Tensor:
    """The partial inverse of max_pool3d: each value put back at its flat
    ``(d * H + h) * W + w`` index in a zero (N, C, D, H, W) tensor.

    >>> import ember
    >>> max_unpool3d(ember.tensor([[[[[5.0]]]]]), ember.tensor([[[[[7]]]]]), 2).flatten().tolist()
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 5.0]
    """
    return _unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding, output_size)
