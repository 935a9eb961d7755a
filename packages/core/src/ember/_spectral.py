"""Short-time Fourier transforms: ``ember.stft`` and ``ember.istft`` (as ``torch.stft`` /
``torch.istft``), written with ember's own ops: reflect padding, ``unfold`` into frames, the
window, ``ember.fft.rfft`` / ``fft``; the inverse overlap-adds the windowed frames (``col2im``)
and divides by the overlap-added squared window.

>>> import ember
>>> x = ember.arange(16.0)
>>> spec = ember.stft(x, 8, hop_length=2, window=ember.hann_window(8), return_complex=True)
>>> spec.shape, spec.dtype
(ember.Size([5, 9]), ember.complex64)
>>> y = ember.istft(spec, 8, hop_length=2, window=ember.hann_window(8), length=16)
>>> bool((y - x).abs().max() < 1e-4)
True
"""

from __future__ import annotations

import warnings

from ember import _C
from ember._C import Tensor

__all__ = ["stft", "istft"]


def _full_window(window: Tensor | None, win_length: int, n_fft: int, like: Tensor,
                 op: str) -> Tensor | None:
    """The window zero-padded on both sides to n_fft (None: no window, i.e. all ones)."""
    if window is None:
        if win_length == n_fft:
            return None
        window = _C.ones([win_length], dtype=like.dtype if not like.dtype.is_complex
                         else (_C.float64 if like.dtype is _C.complex128 else _C.float32),
                         device=like.device)
    if not isinstance(window, Tensor) or window.ndim != 1 or window.shape[0] != win_length:
        shape = tuple(window.shape) if isinstance(window, Tensor) else type(window).__name__
        raise RuntimeError(f"{op}: expected a 1D window tensor of size equal to win_length="
                           f"{win_length}, but got window with size {shape}")
    if win_length == n_fft:
        return window
    left = (n_fft - win_length) // 2
    return _C.pad(window, [left, n_fft - win_length - left], "constant", 0.0)


def _check_sizes(n_fft: int, hop_length: int, win_length: int, op: str) -> None:
    if n_fft <= 0:
        raise RuntimeError(f"{op}: expected n_fft > 0, but got n_fft={n_fft}")
    if hop_length <= 0:
        raise RuntimeError(f"{op}: expected hop_length > 0, but got hop_length={hop_length}")
    if not 0 < win_length <= n_fft:
        raise RuntimeError(f"{op}: expected 0 < win_length <= n_fft, but got "
                           f"win_length={win_length}")


_warned_rectangular = False


def _warn_rectangular_window_once() -> None:
    # PyTorch warns once per process when stft is given no window.
    global _warned_rectangular
    if _warned_rectangular:
        return
    _warned_rectangular = True
    warnings.warn("stft: a window was not provided, so a rectangular window is applied, which is "
                  "known to cause spectral leakage; consider ember.hann_window or "
                  "ember.hamming_window. To silence this, pass window=ember.ones(n_fft).",
                  UserWarning, stacklevel=3)


def stft(input: Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
         window: Tensor | None = None, center: bool = True, pad_mode: str = "reflect",
         normalized: bool = False, onesided: bool | None = None,
         return_complex: bool | None = None) -> Tensor:
    """Short-time Fourier transform of a 1D signal or a batch of them (``(B, L)``).

    The result is ``(B?, n_fft // 2 + 1, n_frames)`` (``n_fft`` rows when not one-sided), frame
    ``t`` holding the (windowed) samples ``[t * hop_length, t * hop_length + n_fft)`` of the
    input, padded by ``n_fft // 2`` on both sides when ``center``.

    >>> import ember
    >>> ember.stft(ember.ones(8), 4, return_complex=True).shape
    ember.Size([3, 9])
    """
    op = "stft"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor as input, got {type(input).__name__}")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"{op}: expected a 1D or 2D tensor, but got {input.ndim}D")
    complex_in = input.dtype.is_complex or (window is not None and window.dtype.is_complex)
    if return_complex is None:
        if not complex_in:
            raise RuntimeError("stft requires the return_complex parameter be given for real "
                               "inputs, and will further require that return_complex=True in a "
                               "future PyTorch release.")
        return_complex = True
    hop_length = n_fft // 4 if hop_length is None else int(hop_length)
    win_length = n_fft if win_length is None else int(win_length)
    _check_sizes(n_fft, hop_length, win_length, op)
    if onesided is None:
        onesided = not complex_in
    elif onesided and complex_in:
        raise RuntimeError(f"{op}: Cannot have onesided output if window or input is complex")
    x = input if input.ndim == 2 else input.unsqueeze(0)
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError(f"{op}: expected a floating point or complex input, got {x.dtype}")
    if center:
        pad = n_fft // 2
        if pad_mode not in ("constant", "reflect", "replicate", "circular"):
            raise ValueError(f"{op}: unsupported pad_mode {pad_mode!r}")
        x = _C.pad(x.unsqueeze(1), [pad, pad], pad_mode).squeeze(1)
    length = x.shape[-1]
    if not 0 < n_fft <= length:
        raise RuntimeError(f"{op}: expected 0 < n_fft <= {length}, but got n_fft={n_fft}")
    frames = x.unfold(-1, n_fft, hop_length)  # (B, n_frames, n_fft)
    if window is None:
        _warn_rectangular_window_once()
    w = _full_window(window, win_length, n_fft, x, op)
    if w is not None:
        frames = frames * w
    from ember import fft as _fft

    norm = "ortho" if normalized else "backward"
    spec = _fft.rfft(frames, dim=-1, norm=norm) if onesided else _fft.fft(frames, dim=-1,
                                                                           norm=norm)
    spec = spec.transpose(-1, -2)
    if input.ndim == 1:
        spec = spec.squeeze(0)
    if not return_complex:
        warnings.warn("stft with return_complex=False is deprecated; use return_complex=True "
                      "and ember.view_as_real", UserWarning, stacklevel=2)
        return _C.view_as_real(spec.contiguous())
    return spec


def istft(input: Tensor, n_fft: int, hop_length: int | None = None,
          win_length: int | None = None, window: Tensor | None = None, center: bool = True,
          normalized: bool = False, onesided: bool | None = None, length: int | None = None,
          return_complex: bool = False) -> Tensor:
    """Inverse of :func:`stft`: overlap-adds the inverse FFTs of the frames, divided by the
    overlap-added squared window (which must be nonzero everywhere: the NOLA condition).

    >>> import ember
    >>> x = ember.rand(32)
    >>> spec = ember.stft(x, 8, window=ember.hann_window(8), return_complex=True)
    >>> bool((ember.istft(spec, 8, window=ember.hann_window(8), length=32) - x).abs().max() < 1e-5)
    True
    """
    op = "istft"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor as input, got {type(input).__name__}")
    if not input.dtype.is_complex:
        raise RuntimeError(f"{op} requires a complex-valued input tensor")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{op}: expected a tensor with 2 or 3 dimensions of complex, got "
                           f"{input.ndim}")
    hop_length = n_fft // 4 if hop_length is None else int(hop_length)
    win_length = n_fft if win_length is None else int(win_length)
    _check_sizes(n_fft, hop_length, win_length, op)
    if length is not None:
        if isinstance(length, bool) or not isinstance(length, int) and not (
                isinstance(length, Tensor) and length.numel() == 1
                and not length.dtype.is_floating_point):
            raise TypeError(f"{op}: length must be an int, got {type(length).__name__}")
        if int(length) < 0:
            raise RuntimeError(f"{op}: length must be non-negative, got {int(length)}")
    spec = input if input.ndim == 3 else input.unsqueeze(0)
    n_freq, n_frames = spec.shape[1], spec.shape[2]
    if onesided is None:
        onesided = n_freq != n_fft
    if onesided:
        if n_fft // 2 + 1 != n_freq:
            raise RuntimeError(f"{op}: expected the frequency dimension (3rd to the last) of the "
                               f"input tensor to match n_fft / 2 + 1 when onesided=True, but got "
                               f"{n_freq}")
        if return_complex:
            raise RuntimeError(f"{op}: cannot have onesided output if window or input is complex")
    elif n_freq != n_fft:
        raise RuntimeError(f"{op}: expected the frequency dimension (3rd to the last) of the "
                           f"input tensor to match n_fft when onesided=False, but got {n_freq}")
    if n_frames < 1:
        raise RuntimeError(f"{op}: expected at least one frame, got an input with 0 frames")
    from ember import fft as _fft

    norm = "ortho" if normalized else "backward"
    frames = spec.transpose(1, 2)  # (B, n_frames, n_freq)
    if onesided:
        frames = _fft.irfft(frames, n=n_fft, dim=-1, norm=norm)
    else:
        frames = _fft.ifft(frames, n=n_fft, dim=-1, norm=norm)
        if not return_complex:
            frames = frames.real.contiguous()
    real_dtype = _C.float64 if input.dtype is _C.complex128 else _C.float32
    w = _full_window(window, win_length, n_fft, frames, op)
    if w is None:
        w = _C.ones([n_fft], dtype=real_dtype, device=input.device)
    frames = frames * w
    expected = n_fft + hop_length * (n_frames - 1)
    y = _overlap_add(frames, expected, n_fft, hop_length)
    env = _overlap_add((w * w).to(real_dtype).expand(1, n_frames, n_fft), expected, n_fft,
                       hop_length)
    start = n_fft // 2 if center else 0
    if length is None:
        end = expected - n_fft // 2 if center else expected
    else:
        end = start + int(length)
    end = min(end, expected)
    y = y[:, start:end]
    env = env[:, start:end]
    if env.numel() and float(env.abs().min()) < 1e-11:
        raise RuntimeError(f"{op}: window overlap add min: {float(env.abs().min())} (the window "
                           "does not satisfy the NOLA condition: its overlap-added square is 0 "
                           "somewhere)")
    y = y / env
    if length is not None and y.shape[-1] < length:
        warnings.warn("istft: the signal is shorter than the length parameter; the result is "
                      "padded with zeros in the tail (check center and hop_length)", UserWarning,
                      stacklevel=2)
        y = _C.pad(y.unsqueeze(1), [0, int(length) - y.shape[-1]], "constant", 0.0).squeeze(1)
    return y if input.ndim == 3 else y.squeeze(0)


def _overlap_add(frames: Tensor, total: int, n_fft: int, hop: int) -> Tensor:
    """Sums frame t of (B, n_frames, n_fft) into [t * hop, t * hop + n_fft) of a (B, total)."""
    if frames.dtype.is_complex:
        parts = [_overlap_add(p, total, n_fft, hop) for p in (frames.real, frames.imag)]
        return _C.complex(parts[0], parts[1])
    cols = frames.transpose(1, 2).contiguous()  # (B, n_fft, n_frames)
    out = _C.col2im(cols, [1, total], [1, n_fft], [1, 1], [0, 0], [1, hop])
    return out.reshape(frames.shape[0], total)

