"""``ember.storage``: the storage classes (PyTorch's ``torch.storage``). ``UntypedStorage``
is the bytes under a tensor (``Tensor.untyped_storage()``, shared by all its views);
``TypedStorage`` views them as elements of a dtype (``Tensor.storage()``).

>>> import ember
>>> from ember.storage import TypedStorage, UntypedStorage
>>> x = ember.arange(3.)
>>> isinstance(x.untyped_storage(), UntypedStorage), isinstance(x.storage(), TypedStorage)
(True, True)
>>> x.untyped_storage().nbytes()
12
"""

from ember._storage import TypedStorage, UntypedStorage

__all__ = ["TypedStorage", "UntypedStorage"]
