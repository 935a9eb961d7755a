"""Instance normalization layers, at the module path PyTorch gives them
(``torch.nn.modules.instancenorm``); they are defined in :mod:`ember.nn.modules.normalization`.

>>> import ember
>>> from ember.nn.modules.instancenorm import InstanceNorm2d
>>> InstanceNorm2d(3)(ember.randn(1, 3, 4, 4)).shape
ember.Size([1, 3, 4, 4])
"""

from ember.nn.modules.normalization import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]
