"""Spatial sampling ops composed from ember's tensor ops (so autograd differentiates them with
respect to the input and the grid): ``affine_grid`` and ``grid_sample`` (2-D; the spatial
transformer networks' pair) and ``max_unpool1d`` / ``2d`` / ``3d`` (the inverse of max pooling
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

from typing import Any, Sequence

import ember
from ember import Tensor

__all__ = ["affine_grid", "grid_sample", "max_unpool1d", "max_unpool2d", "max_unpool3d"]


def _linspace_coords(n: int, align_corners: bool, like: Tensor) -> Tensor:
    """The normalized [-1, 1] coordinates of n pixel centers (or corners)."""
    if n <= 1:
        return ember.zeros(max(n, 0), dtype=like.dtype, device=like.device)
    c = ember.linspace(-1.0, 1.0, n, dtype=like.dtype, device=like.device)
    return c if align_corners else c * ((n - 1) / n)


def affine_grid(theta: Tensor, size: Sequence[int], align_corners: bool | None = None) -> Tensor:
    """The (N, H, W, 2) sampling grid of 2-D affine transforms ``theta`` (N, 2, 3) for an
    output of ``size`` (N, C, H, W): each output pixel's normalized (x, y) source location.

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
    if len(size) == 5:
        raise NotImplementedError("affine_grid: 3-D (5-D size) grids are not supported yet; "
                                  "only 2-D: size (N, C, H, W) with theta (N, 2, 3)")
    if len(size) != 4:
        raise ValueError(f"affine_grid: only 2-D grids are supported: size must be (N, C, H, W), "
                         f"got {tuple(size)}")
    n, _, h, w = size
    if theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3) or theta.shape[0] != n:
        raise ValueError(f"affine_grid: expected a batch of 2D affine matrices of shape Nx2x3 "
                         f"for size {tuple(size)}. Got {tuple(theta.shape)}.")
    if min(size) <= 0:
        raise ValueError(f"affine_grid: expected non-zero, positive output size. Got "
                         f"{tuple(size)}")
    xs = _linspace_coords(w, align_corners, theta)
    ys = _linspace_coords(h, align_corners, theta)
    base = ember.stack([xs.view(1, w).expand(h, w), ys.view(h, 1).expand(h, w),
                        ember.ones(h, w, dtype=theta.dtype, device=theta.device)], -1)
    # (N, H*W, 3) @ (N, 3, 2) -> (N, H, W, 2)
    return (base.reshape(1, h * w, 3) @ theta.transpose(1, 2)).reshape(n, h, w, 2)


def _unnormalize(coord: Tensor, size: int, align_corners: bool) -> Tensor:
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _reflect(x: Tensor, low2: float, high2: float) -> Tensor:
    """x reflected into [low2 / 2, high2 / 2] (bounds given doubled, as the reference does)."""
    if low2 == high2:
        return ember.zeros_like(x)
    lo, span = low2 / 2, (high2 - low2) / 2
    x = (x - lo).abs()
    flips = (x / span).floor()
    extra = x - flips * span
    even = ember.remainder(flips, 2) == 0
    return ember.where(even, extra + lo, span - extra + lo)


def _source_index(coord: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    x = _unnormalize(coord, size, align_corners)
    if padding_mode == "border":
        x = x.clamp(0, size - 1)
    elif padding_mode == "reflection":
        if align_corners:
            x = _reflect(x, 0, 2 * (size - 1))
        else:
            x = _reflect(x, -1, 2 * size - 1)
        x = x.clamp(0, size - 1)
    return x


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Tensor:
    """Samples ``input`` (N, C, H_in, W_in) at the normalized (x, y) locations of ``grid``
    (N, H_out, W_out, 2), -1 and 1 being the edges (align_corners=False: the outer pixels'
    outer edges; True: their centers): ``mode`` bilinear or nearest, ``padding_mode`` zeros,
    border or reflection for locations outside. Differentiable in input and grid.

    >>> import ember
    >>> x = ember.tensor([[[[0.0, 10.0]]]])
    >>> grid_sample(x, ember.tensor([[[[0.0, 0.0]]]]), align_corners=True).tolist()
    [[[[5.0]]]]
    """
    if align_corners is None:
        align_corners = False
    if mode not in ("bilinear", "nearest"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear' or "
                         f"'nearest' (bicubic is not supported yet), but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    if input.ndim == 5:
        raise NotImplementedError("grid_sample: 5-D (volumetric) input is not supported yet")
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2:
        raise RuntimeError(f"grid_sample(): expected 4D input (N, C, H, W) and a grid of shape "
                           f"(N, H_out, W_out, 2), got input {tuple(input.shape)} and grid "
                           f"{tuple(grid.shape)}")
    if input.shape[0] != grid.shape[0]:
        raise RuntimeError(f"grid_sample(): expected grid and input to have same batch size, "
                           f"but got input with sizes {tuple(input.shape)} and grid with sizes "
                           f"{tuple(grid.shape)}")
    n, c, h, w = input.shape
    _, ho, wo, _ = grid.shape
    grid = grid.to(input.dtype)
    x = _source_index(grid[..., 0], w, padding_mode, align_corners)  # (N, Ho, Wo)
    y = _source_index(grid[..., 1], h, padding_mode, align_corners)
    flat = input.reshape(n, c, h * w)

    def gather(ix: Tensor, iy: Tensor) -> Tensor:
        """input at integer (ix, iy) (N, Ho, Wo), zero outside: (N, C, Ho, Wo)."""
        inside = (ix >= 0) & (ix <= w - 1) & (iy >= 0) & (iy <= h - 1)
        ixc = ix.clamp(0, w - 1).to(ember.int64)
        iyc = iy.clamp(0, h - 1).to(ember.int64)
        idx = (iyc * w + ixc).reshape(n, 1, ho * wo).expand(n, c, ho * wo)
        vals = flat.gather(2, idx).reshape(n, c, ho, wo)
        return vals * inside.unsqueeze(1).to(input.dtype)

    if mode == "nearest":
        # round half to even, as nearbyint does
        return gather(x.round(), y.round())
    x0, y0 = x.floor(), y.floor()
    x1, y1 = x0 + 1, y0 + 1
    wx1, wy1 = (x - x0).unsqueeze(1), (y - y0).unsqueeze(1)
    wx0, wy0 = 1 - wx1, 1 - wy1
    x0d, y0d, x1d, y1d = x0.detach(), y0.detach(), x1.detach(), y1.detach()
    return (gather(x0d, y0d) * wx0 * wy0 + gather(x1d, y0d) * wx1 * wy0
            + gather(x0d, y1d) * wx0 * wy1 + gather(x1d, y1d) * wx1 * wy1)


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
    src = input.reshape(*lead, -1)
    idx = indices.reshape(*lead, -1).to(ember.int64)
    if idx.numel() and (idx.min().item() < 0 or idx.max().item() >= total):
        raise RuntimeError(f"{op}: found an invalid max index {idx.max().item()} (output "
                           f"volumes are of size {'x'.join(map(str, out_sp))})")
    out = ember.zeros(*lead, total, dtype=input.dtype, device=input.device)
    out = out.scatter(len(lead), idx, src)
    return out.reshape(*lead, *out_sp)


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
