"""``ember.__future__``: switches for behaviour that changes how ``nn.Module`` conversions treat
its parameters (PyTorch's ``torch.__future__``).

By default ``Module.to`` / ``.double()`` / ``.cuda()`` / ``to_empty`` keep each ``Parameter``
object and change it in place (``param.data = converted``), so an optimizer made before the
conversion still holds the module's parameters. With ``set_overwrite_module_params_on_conversion
(True)`` they get new ``Parameter`` objects instead; with ``set_swap_module_params_on_conversion
(True)`` the converted tensor is swapped into the existing object with
``ember.utils.swap_tensors`` (which also keeps the object; it takes precedence).

>>> import ember
>>> from ember.__future__ import get_overwrite_module_params_on_conversion
>>> get_overwrite_module_params_on_conversion()
False
"""

from __future__ import annotations

__all__ = ["set_overwrite_module_params_on_conversion", "get_overwrite_module_params_on_conversion",
           "set_swap_module_params_on_conversion", "get_swap_module_params_on_conversion"]

_overwrite_module_params_on_conversion: bool = False
_swap_module_params_on_conversion: bool = False


def set_overwrite_module_params_on_conversion(value: bool) -> None:
    """Whether module conversions assign new ``Parameter`` objects (True) instead of changing
    the existing ones in place (False, the default).

    >>> import ember
    >>> ember.__future__.set_overwrite_module_params_on_conversion(False)
    """
    global _overwrite_module_params_on_conversion
    _overwrite_module_params_on_conversion = bool(value)


def get_overwrite_module_params_on_conversion() -> bool:
    """See ``set_overwrite_module_params_on_conversion`` (default False).

    >>> import ember
    >>> ember.__future__.get_overwrite_module_params_on_conversion()
    False
    """
    return _overwrite_module_params_on_conversion


def set_swap_module_params_on_conversion(value: bool) -> None:
    """Whether module conversions swap the converted tensors into the existing parameter objects
    with ``ember.utils.swap_tensors`` (True) instead of setting ``.data`` (False, the default).
    Takes precedence over ``set_overwrite_module_params_on_conversion``.

    >>> import ember
    >>> ember.__future__.set_swap_module_params_on_conversion(False)
    """
    global _swap_module_params_on_conversion
    _swap_module_params_on_conversion = bool(value)


def get_swap_module_params_on_conversion() -> bool:
    """See ``set_swap_module_params_on_conversion`` (default False).

    >>> import ember
    >>> ember.__future__.get_swap_module_params_on_conversion()
    False
    """
    return _swap_module_params_on_conversion
