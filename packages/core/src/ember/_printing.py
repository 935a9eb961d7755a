"""How tensors print (a placeholder until the full PyTorch-style formatter lands)."""

from __future__ import annotations

_OPTIONS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None) -> None:
    """Sets how tensors print, like ``torch.set_printoptions``."""
    for k, v in dict(precision=precision, threshold=threshold, edgeitems=edgeitems,
                     linewidth=linewidth).items():
        if v is not None:
            _OPTIONS[k] = v
    _OPTIONS["sci_mode"] = sci_mode


def tensor_repr(t) -> str:
    return f"tensor({t.tolist()}, dtype={t.dtype!r})"
