"""The building blocks of ember.nn: Module, containers and layers."""

from ember.nn.modules.container import (
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
)
from ember.nn.modules.flatten import Flatten, Unflatten
from ember.nn.modules.linear import Bilinear, Identity, Linear
from ember.nn.modules.module import Module

__all__ = [
    "Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict",
    "Identity", "Linear", "Bilinear", "Flatten", "Unflatten",
]
