"""Neural-network building blocks for ember: modules, layers, initialization, utilities.

>>> import ember
>>> from ember import nn
>>> model = nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 2))
>>> model
Sequential(
  (0): Linear(in_features=4, out_features=8, bias=True)
  (1): Linear(in_features=8, out_features=2, bias=True)
)
"""

try:
    from ._version import __version__
except ImportError:  # not installed from a git checkout / sdist
    __version__ = "0.0.0"

# ruff: noqa: I001  (order matters: parameter, functional and init before the layers using them)
from ember.nn.parameter import Parameter
from ember.nn import functional, init
from ember.nn.modules import (
    Bilinear,
    Flatten,
    Identity,
    Linear,
    Module,
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
    Unflatten,
)
from ember.nn.modules.module import RemovableHandle
from ember.nn.modules.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from ember.nn.modules.attention import MultiheadAttention
from ember.nn.modules.transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from ember.nn import utils

__all__ = [
    "__version__",
    "Parameter",
    "Module",
    "RemovableHandle",
    "Sequential",
    "ModuleList",
    "ModuleDict",
    "ParameterList",
    "ParameterDict",
    "Identity",
    "Linear",
    "Bilinear",
    "Flatten",
    "Unflatten",
    "functional",
    "init",
    "utils",
]
__all__ += [
    "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
    "MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerDecoder",
    "TransformerEncoderLayer", "TransformerDecoderLayer",
]
