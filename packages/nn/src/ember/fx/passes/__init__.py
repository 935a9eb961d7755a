"""``torch.fx.passes``: analyses and rewrites over fx graphs (:mod:`.shape_prop`)."""

from ember.fx.passes import shape_prop

__all__ = ["shape_prop"]
