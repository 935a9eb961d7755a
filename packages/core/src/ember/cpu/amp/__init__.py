"""``ember.cpu.amp``: PyTorch's older CPU spellings of ``autocast`` and ``GradScaler``,
deprecated (a FutureWarning) in favour of ``ember.amp.autocast("cpu", ...)`` and
``ember.amp.GradScaler("cpu", ...)``, as in PyTorch 2.4+.

>>> import warnings, ember
>>> from ember.cpu.amp import autocast
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore", FutureWarning)
...     with autocast():
...         y = ember.mm(ember.randn(2, 3), ember.randn(3, 2))
>>> y.dtype
ember.bfloat16
"""

from ember.cpu.amp.autocast_mode import autocast
from ember.cpu.amp.grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler"]
