"""``HistogramObserver``: a running histogram of the values seen, and the range that
minimizes the (approximate) L2 quantization error of that histogram, as PyTorch's observer of
the name chooses it (the activation observer of ``get_default_qconfig``)."""

from __future__ import annotations

import math
import struct
import warnings
from typing import Any

import ember
from ember import Tensor
from ember.ao.quantization.observer import _EPS, UniformQuantizationObserverBase, _is_per_tensor


def _f32(v: float) -> float:
    return struct.unpack("f", struct.pack("f", v))[0]


class HistogramObserver(UniformQuantizationObserverBase):
    """Quantization parameters from a histogram of everything seen (``bins`` bins over the
    running range); ``calculate_qparams`` first narrows the range to cut outliers where that
    lowers the L2 error of quantizing the histogram.

    >>> import ember
    >>> obs = HistogramObserver(bins=64)
    >>> _ = obs(ember.arange(100, dtype=ember.float32) / 10)
    >>> scale, zp = obs.calculate_qparams()
    >>> zp.tolist()
    [0]
    """

    def __init__(self, bins: int = 2048, dtype: Any = ember.quint8,
                 qscheme: Any = ember.per_tensor_affine, reduce_range: bool = False,
                 quant_min: int | None = None, quant_max: int | None = None,
                 factory_kwargs: Any = None, eps: float = _EPS, is_dynamic: bool = False,
                 **kwargs: Any) -> None:
        if not _is_per_tensor(qscheme):
            raise NotImplementedError("HistogramObserver's qscheme only support "
                                      "ember.per_tensor_symmetric and ember.per_tensor_affine.")
        if is_dynamic:
            raise NotImplementedError("HistogramObserver doesn't support dynamic quantization")
        super().__init__(dtype, qscheme, reduce_range, quant_min, quant_max, factory_kwargs, eps,
                         is_dynamic, **kwargs)
        self.bins = bins
        self.register_buffer("histogram", ember.zeros(bins))
        self.register_buffer("min_val", ember.tensor(math.inf))
        self.register_buffer("max_val", ember.tensor(-math.inf))
        self.dst_nbins = 2 ** (8 * dtype.itemsize)
        self.upsample_rate = 16  # finer bins when a histogram is spread over a wider range

    @staticmethod
    def _get_norm(delta_begin: Any, delta_end: Any, density: Tensor) -> Tensor:
        # density * integral of x^2 over [begin, end]
        return density * ((delta_end * delta_end * delta_end
                           - delta_begin * delta_begin * delta_begin) / 3)

    def _compute_quantization_error(self, next_start_bin: int, next_end_bin: int) -> float:
        bin_width = (self.max_val.item() - self.min_val.item()) / self.bins
        dst_bin_width = bin_width * (next_end_bin - next_start_bin + 1) / self.dst_nbins
        if dst_bin_width == 0.0:
            return 0.0
        src_bin = ember.arange(self.bins)
        src_begin = (src_bin - next_start_bin) * bin_width
        src_end = src_begin + bin_width
        dst_of_begin = ember.clamp(ember.div(src_begin, dst_bin_width, rounding_mode="floor"), 0,
                                   self.dst_nbins - 1)
        dst_of_begin_center = (dst_of_begin + 0.5) * dst_bin_width
        dst_of_end = ember.clamp(ember.div(src_end, dst_bin_width, rounding_mode="floor"), 0,
                                 self.dst_nbins - 1)
        density = self.histogram / bin_width
        norm = ember.zeros(self.bins)
        norm += self._get_norm(src_begin - dst_of_begin_center,
                               ember.ones(self.bins) * (dst_bin_width / 2), density)
        norm += (dst_of_end - dst_of_begin - 1) * self._get_norm(
            ember.tensor(-dst_bin_width / 2), ember.tensor(dst_bin_width / 2), density)
        dst_of_end_center = dst_of_end * dst_bin_width + dst_bin_width / 2
        norm += self._get_norm(ember.tensor(-dst_bin_width / 2), src_end - dst_of_end_center,
                               density)
        return norm.sum().item()

    def _non_linear_param_search(self) -> tuple[Tensor, Tensor]:
        """The (min, max) whose quantization error is (approximately) least: drop bins from
        the side holding less of the mass, 1e-5 of it at a time, while the error falls."""
        if self.histogram.shape[0] != self.bins:
            raise AssertionError("bins mismatch")
        bin_width = (self.max_val - self.min_val) / self.bins
        total = self.histogram.sum().item()
        csum = self.histogram.cumsum(0).tolist()
        stepsize = 1e-5
        alpha, beta = 0.0, 1.0
        start_bin, end_bin = 0, self.bins - 1
        norm_min = math.inf
        while alpha < beta:
            next_alpha = alpha + stepsize
            next_beta = beta - stepsize
            lo_bound, hi_bound = _f32(next_alpha * total), _f32(next_beta * total)
            left, right = start_bin, end_bin
            while left < end_bin and csum[left] < lo_bound:
                left += 1
            while right > start_bin and csum[right] > hi_bound:
                right -= 1
            next_start, next_end = start_bin, end_bin
            if (left - start_bin) > (end_bin - right):
                next_start = left
                alpha = next_alpha
            else:
                next_end = right
                beta = next_beta
            if next_start == start_bin and next_end == end_bin:
                continue
            norm = self._compute_quantization_error(next_start, next_end)
            if norm > norm_min:
                break
            norm_min = norm
            start_bin, end_bin = next_start, next_end
        return self.min_val + bin_width * start_bin, self.min_val + bin_width * (end_bin + 1)

    def _upscale_histogram(self, histogram: Tensor, orig_min: Tensor, orig_max: Tensor,
                           update_min: Tensor, update_max: Tensor) -> Tensor:
        histogram = histogram.repeat_interleave(self.upsample_rate) / self.upsample_rate
        n = self.bins * self.upsample_rate
        bin_size = (orig_max - orig_min) / n
        mids = ember.linspace(orig_min, orig_max, n + 1)[:-1] + 0.5 * bin_size
        bounds = ember.linspace(update_min, update_max, self.bins + 1)
        where = ember.bucketize(mids, bounds, right=True) - 1
        where = where.clamp(0, self.bins - 1)
        return ember.bincount(where, weights=histogram, minlength=self.bins)

    def _combine_histograms(self, orig_hist: Tensor, orig_min: Tensor, orig_max: Tensor,
                            update_hist: Tensor, update_min: Tensor,
                            update_max: Tensor) -> Tensor:
        if update_min.item() == orig_min.item() and update_max.item() == orig_max.item():
            return orig_hist + update_hist
        if orig_min.item() == orig_max.item():
            moved = ember.histc(orig_min.reshape(1), bins=self.bins, min=update_min.item(),
                                max=update_max.item()) * orig_hist.sum()
            return moved + update_hist
        return update_hist + self._upscale_histogram(orig_hist, orig_min, orig_max, update_min,
                                                     update_max)

    def forward(self, x_orig: Tensor) -> Tensor:
        if x_orig.numel() == 0:
            return x_orig
        x = x_orig.detach()
        x_min, x_max = ember.aminmax(x)
        if x_min.item() == -math.inf or x_max.item() == math.inf:
            warnings.warn("inf detected in input tensor, ignoring input", stacklevel=2)
            x = x[x.abs() != math.inf]
            if x.numel() == 0:
                return x_orig
            x_min, x_max = ember.aminmax(x)
        if self.min_val.item() == math.inf or self.max_val.item() == -math.inf:
            self.min_val.copy_(x_min)
            self.max_val.copy_(x_max)
            self.histogram = ember.histc(x, self.bins, min=x_min.item(), max=x_max.item())
            return x_orig
        cur_min, cur_max = self.min_val.clone(), self.max_val.clone()
        new_min = ember.minimum(cur_min, x_min)
        new_max = ember.maximum(cur_max, x_max)
        update = ember.histc(x, self.bins, min=new_min.item(), max=new_max.item())
        if new_min.item() == cur_min.item() and new_max.item() == cur_max.item():
            self.histogram = self.histogram + update
        else:
            self.histogram = self._combine_histograms(self.histogram, cur_min, cur_max, update,
                                                      new_min, new_max).to(ember.float32)
            self.min_val.copy_(new_min)
            self.max_val.copy_(new_max)
        return x_orig

    def calculate_qparams(self) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        if self.min_val.item() == math.inf and self.max_val.item() == -math.inf:
            warnings.warn("must run observer before calling calculate_qparams. Returning "
                          "default scale and zero point", stacklevel=2)
            return ember.tensor([1.0]), ember.tensor([0])
        if self.bins != len(self.histogram):
            raise AssertionError("The number of bins in histogram should be equal to the "
                                 "number of bins supplied while making this observer")
        new_min, new_max = self._non_linear_param_search()
        return self._calculate_qparams(new_min, new_max)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"
