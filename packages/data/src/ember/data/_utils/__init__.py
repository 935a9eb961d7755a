"""``torch.utils.data._utils``: the collate module programs extend (``collate`` with a
``collate_fn_map``).

>>> from ember.data._utils import collate
>>> collate.default_collate([1, 2]).tolist()
[1, 2]
"""

from ember.data._utils import collate  # noqa: F401
