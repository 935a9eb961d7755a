"""Optimizers and learning-rate schedulers for ember.

>>> import ember
>>> model = ember.nn.Linear(3, 1)
>>> opt = ember.optim.Adam(model.parameters(), lr=1e-2)
>>> loss = model(ember.ones(4, 3)).pow(2).mean()
>>> loss.backward()
>>> opt.step()
>>> opt.zero_grad()
"""

try:
    from ember.nn._version import __version__
except ImportError:  # not installed from a git checkout / sdist
    __version__ = "0.0.0"

from ember.optim import lr_scheduler, swa_utils
from ember.optim.adadelta import Adadelta
from ember.optim.adafactor import Adafactor
from ember.optim.adagrad import Adagrad
from ember.optim.adam import Adam, AdamW
from ember.optim.adamax import Adamax
from ember.optim.asgd import ASGD
from ember.optim.lbfgs import LBFGS
from ember.optim.muon import Muon
from ember.optim.nadam import NAdam
from ember.optim.optimizer import Optimizer, swap_in_optimizer_params_and_state
from ember.optim.radam import RAdam
from ember.optim.rmsprop import RMSprop
from ember.optim.rprop import Rprop
from ember.optim.sgd import SGD
from ember.optim.sparse_adam import SparseAdam

__all__ = [
    "__version__",
    "Optimizer",
    "swap_in_optimizer_params_and_state",
    "SGD",
    "SparseAdam",
    "Adam",
    "AdamW",
    "RMSprop",
    "Adagrad",
    "Adadelta",
    "Adafactor",
    "Muon",
    "Adamax",
    "NAdam",
    "RAdam",
    "LBFGS",
    "Rprop",
    "ASGD",
    "lr_scheduler",
    "swa_utils",
]
