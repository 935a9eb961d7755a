"""``ember.utils.model_zoo.load_url``: the older name of
:func:`ember.hub.load_state_dict_from_url`, as in PyTorch."""

from __future__ import annotations

from ember.hub import load_state_dict_from_url as load_url

__all__ = ["load_url"]
