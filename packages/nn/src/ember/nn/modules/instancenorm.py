"""Instance normalization layers, at the module path PyTorch gives them
(``torch.nn.modules.instancenorm``); they are defined in :mod:`ember.nn.modules.normalization`.

>>> from ember.nn.modules.instancenorm import InstanceNorm2d
>>> InstanceNorm2d(3)
InstanceNorm2d(3, eps=1e-05, momentum=0.1, affine=False, track_running_stats=False)
"""

from ember.nn.modules.normalization import InstanceNorm1d, InstanceNorm2d, InstanceNorm3d

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]
