"""``torch.masked``: masked reductions and normalizations, and the ``MaskedTensor`` class.

The functions (``sum``, ``mean``, ``softmax``, ...) take a boolean ``mask`` (broadcast to the
input) and compute over the elements where it is True only. A reduction over no element gives
the operation's identity (``sum`` 0, ``prod`` 1, ``amax`` -inf or the integer minimum, ``norm``
0) or NaN where there is none (``mean``, ``var``, ``std``, ``median``); masked-out positions of
``softmax`` / ``log_softmax`` / ``softmin`` / ``normalize`` / ``cumsum`` / ``cumprod`` outputs
hold the value those operations give the identity (0, -inf, ...), and a row with nothing
unmasked is NaN in the softmaxes, as in PyTorch. Gradients reach the unmasked elements only.
``mask=None`` means every element.

:class:`MaskedTensor` (PyTorch's prototype class, built with :func:`masked_tensor` or
:func:`as_masked_tensor`) carries its data and mask together: pointwise ops keep the mask,
reductions and softmaxes ignore the masked-out elements, and gradients are MaskedTensors.

>>> import ember
>>> x = ember.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
>>> m = ember.tensor([[True, False, True], [False, False, False]])
>>> ember.masked.sum(x, 1, mask=m).tolist(), ember.masked.mean(x, 1, mask=m).tolist()
([4.0, 0.0], [2.0, nan])
>>> [round(v, 4) for v in ember.masked.softmax(x, 1, mask=m)[0].tolist()]
[0.1192, 0.0, 0.8808]
"""

from ember.masked import _mt_ops  # noqa: F401  (the ops; ember.autograd looks for it)
from ember.masked._functional import (
    amax,
    amin,
    argmax,
    argmin,
    cumprod,
    cumsum,
    log_softmax,
    logaddexp,
    logsumexp,
    mean,
    median,
    norm,
    normalize,
    prod,
    softmax,
    softmin,
    std,
    sum,
    var,
)
from ember.masked.maskedtensor import (
    MaskedTensor,
    as_masked_tensor,
    is_masked_tensor,
    masked_tensor,
)

__all__ = ["MaskedTensor", "amax", "amin", "argmax", "argmin", "as_masked_tensor", "cumprod",
           "cumsum", "is_masked_tensor", "log_softmax", "logaddexp", "logsumexp",
           "masked_tensor", "mean", "median", "norm", "normalize", "prod", "softmax", "softmin",
           "std", "sum", "var"]
