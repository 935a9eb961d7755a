"""``ember.signal``: signal-processing helpers (PyTorch's ``torch.signal``); the window
functions are in :mod:`ember.signal.windows`.

>>> import ember
>>> ember.signal.windows.hann(3).tolist()
[0.0, 1.0, 0.0]
"""

from __future__ import annotations

from ember.signal import windows

__all__ = ["windows"]
