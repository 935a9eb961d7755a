"""ember: eager tensors with automatic differentiation on a C++ core.

>>> import ember
>>> x = ember.ones(2, 3)
>>> (x * 2 + 1).sum().item()
18.0

Factories allocate on ``ember.get_default_device()`` unless given ``device=``. A device used as
a context manager sets it for the block; ``ember.set_default_device`` sets it until changed.
A ``meta`` tensor has sizes, strides and a dtype but no data:

>>> with ember.device("meta"):
...     ember.zeros(2, 3)
tensor(..., device='meta', size=(2, 3))
>>> ember.get_default_device()
device(type='cpu')
>>> ember.set_default_device("meta")
>>> ember.arange(4).device
device(type='meta')
>>> ember.set_default_device(None)  # back to the CPU
>>> x.to("meta", ember.float64)
tensor(..., device='meta', size=(2, 3), dtype=ember.float64)
"""

from __future__ import annotations

# ruff: noqa: I001  (import order matters: _C first, then the Python-side additions)

import importlib as _importlib
import sys as _sys

from ember import _C
from ember._C import *  # noqa: F403  (Tensor, dtypes, devices, every generated op)
from ember._C import Tensor, device, dtype  # noqa: F401
from ember._size import Size
from ember import _tensor  # noqa: F401  (Python-side Tensor methods)
from ember._memory_format import (  # noqa: F401  (memory_format= of contiguous, to, clone)
    channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format,
)
from ember._storage import TypedStorage  # noqa: F401  (resize_, set_, storage())
from ember._storage import (  # noqa: F401  (PyTorch's legacy per-dtype storage classes)
    BFloat16Storage, BoolStorage, ByteStorage, CharStorage, ComplexDoubleStorage,
    ComplexFloatStorage, DoubleStorage, FloatStorage, HalfStorage, IntStorage, LongStorage,
    ShortStorage,
)
from ember import cuda  # noqa: F401
from ember.random import manual_seed  # noqa: F401  (seeds the CUDA generators too)
from ember import autograd  # noqa: F401
from ember.autograd.grad_mode import (  # noqa: F401
    enable_grad, inference_mode, is_inference_mode_enabled, no_grad, set_grad_enabled,
)
from ember._interop import as_tensor, from_dlpack, from_numpy  # noqa: F401
from ember._functional import cdist, einsum, tensordot, unique  # noqa: F401
from ember._printing import set_printoptions  # noqa: F401
from ember._finfo import finfo, iinfo  # noqa: F401
from ember._legacy import (  # noqa: F401  (legacy constructors; tensor() for any sequence)
    BFloat16Tensor, BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor, HalfTensor,
    IntTensor, LongTensor, ShortTensor, tensor,
)

from ember._toplevel import (  # noqa: F401  (predicates, determinism switches, small ops)
    _assert, are_deterministic_algorithms_enabled, clamp_max, clamp_min, detach, diff,
    get_num_interop_threads, is_complex, is_deterministic_algorithms_warn_only_enabled,
    is_floating_point, is_nonzero, is_same_size, is_tensor, layout, logit, numel,
    set_num_interop_threads, strided, typename, use_deterministic_algorithms,
)
from ember import _foreach  # noqa: F401,E402  (ember._foreach_add_ and the other list ops)
from ember import _compat_ops  # noqa: E402  (diag, cartesian_prod, logaddexp, cov, ...)
from ember import _complex  # noqa: E402  (Tensor.real/imag, is_conj, Tensor.stft)

_complex.install(globals())

_compat_ops.install(globals())
from ember import _norm_compat  # noqa: E402  (batch_norm(..., cudnn_enabled) and the other norms)

_norm_compat.install(globals())
_memory_format_module = _sys.modules["ember._memory_format"]
_memory_format_module.install(globals())  # memory_format= of the *_like factories
from ember import linalg as _linalg  # noqa: E402  (inverse, det, svd, ... and their methods)

_linalg._install(globals())
from ember import _torch_variants  # noqa: E402  (ember.abs_, ember.transpose_copy, ...)

_torch_variants._install()
from ember import _torch_misc  # noqa: E402  (frombuffer, segment_reduce, cond, Tensor.as_subclass)

_torch_misc._install()
from ember._fake_quant import (  # noqa: E402,F401  (quantization-aware training)
    fake_quantize_per_channel_affine, fake_quantize_per_tensor_affine)
from ember import sparse  # noqa: E402,F401  (sparse COO/CSR tensors; mm/matmul/addmm take them)
from ember import _quantized  # noqa: E402  (quantized tensors: qint8, quantize_per_tensor, ...)

_quantized._install(globals())

# The followed PyTorch release with ember's own version as its local label ("2.13.0+ember.0.1.0"),
# so that programs gating on torch.__version__ take their current code paths (ember.version).
from ember.version import __version__ as __version__  # noqa: E402

_C._set_size_type(Size)
# Tensor is public as ember.Tensor (as torch.Tensor is): "<class 'ember.Tensor'>" in messages,
# and pickled class references name where the class is found.
Tensor.__module__ = "ember"

# Last: ember's public functions and Tensor's methods go behind __torch_function__.
from ember import overrides  # noqa: E402

overrides._install(globals())
overrides._install_module(vars(_linalg), "ember.linalg")  # (ember.fft / ember.special: on import)

# The sub-distributions install into this package; say which one to install when absent.
_DISTRIBUTIONS = {
    "nn": "ember-nn",
    "optim": "ember-nn",
    "fx": "ember-nn",
    "export": "ember-nn",
    "ao": "ember-nn",
    "quantization": "ember-nn",
    "data": "ember-data",
    "multiprocessing": "ember-distributed",
    "distributed": "ember-distributed",
}


def _missing(name: str) -> ModuleNotFoundError:
    dist = _DISTRIBUTIONS[name]
    return ModuleNotFoundError(
        f"ember.{name} is part of the '{dist}' distribution, which is not installed; "
        f"install it with: pip install {dist}",
        name=f"ember.{name}",
    )


class _MissingSubpackageFinder:
    """Last on sys.meta_path: turns `import ember.nn` without ember-nn into a clear error.

    Only the sub-package itself (``ember.nn``) is asked about here: Python imports it before
    anything under it, so a missing ``ember.nn.foo`` (or ``from ember.nn import NoSuchLayer``)
    means ember-nn is installed and the name is what is missing; Python's own error says so.
    """

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        parts = fullname.split(".")
        if len(parts) == 2 and parts[0] == "ember" and parts[1] in _DISTRIBUTIONS:
            raise _missing(parts[1])
        return None


_sys.meta_path.append(_MissingSubpackageFinder)

from ember import _einops  # noqa: E402

_einops.install()  # einops takes ember tensors once it is imported (it is not imported here)


# Imported on first use, to keep `import ember` fast.
_LAZY_MODULES = (
    "masked", "nested",
    "utils", "func", "random", "serialization", "distributions", "amp", "backends", "testing",
    "special", "onnx", "profiler", "memory", "return_types", "linalg", "jit", "compiler",
    "version", "hub", "fft", "signal", "quasirandom", "accelerator", "cpu", "xpu", "mps", "_dynamo",
    "library", "ops", "futures", "types", "storage", "__config__", "_utils", "__future__",
)
_LAZY_ATTRS = {
    "autocast": "ember.amp",
    "is_autocast_enabled": "ember.amp",
    "get_autocast_dtype": "ember.amp",
    "set_autocast_enabled": "ember.amp",
    "set_autocast_dtype": "ember.amp",
    "is_autocast_cache_enabled": "ember.amp",
    "set_autocast_cache_enabled": "ember.amp",
    "clear_autocast_cache": "ember.amp",
    "autocast_increment_nesting": "ember.amp",
    "autocast_decrement_nesting": "ember.amp",
    "compile": "ember._compile",
    "set_float32_matmul_precision": "ember.backends",
    "get_float32_matmul_precision": "ember.backends",
    "save": "ember.serialization",
    "load": "ember.serialization",
    "save_safetensors": "ember.serialization",
    "load_safetensors": "ember.serialization",
    "get_rng_state": "ember.random",
    "set_rng_state": "ember.random",
    "seed": "ember.random",
    "lgamma": "ember.special",
    "digamma": "ember.special",
    "xlogy": "ember.special",
    "vmap": "ember.func",
    "stft": "ember._spectral",
    "Stream": "ember._device_streams",
    "Event": "ember._device_streams",
    "GradScaler": "ember.amp",
    "to_dlpack": "ember.utils.dlpack",
    "istft": "ember._spectral",
    # PyTorch's top-level spellings of nn.functional ops
    **{name: "ember.nn.functional" for name in (
        "alpha_dropout", "feature_alpha_dropout", "bilinear", "cosine_similarity",
        "pairwise_distance", "pdist", "pixel_shuffle", "pixel_unshuffle", "prelu", "rrelu",
        "rrelu_", "threshold", "threshold_", "hardshrink", "relu_", "selu_", "celu_",
        "channel_shuffle", "native_channel_shuffle",
    )},
    # torch-level nn operators with PyTorch's positional signatures (int reductions, flat RNN
    # parameters, SyncBatchNorm's building blocks)
    **{name: "ember.nn._torch_ops" for name in (
        "cosine_embedding_loss", "hinge_embedding_loss", "margin_ranking_loss",
        "triplet_margin_loss", "poisson_nll_loss", "ctc_loss", "lstm_cell", "gru_cell",
        "rnn_tanh_cell", "rnn_relu_cell", "lstm", "gru", "rnn_tanh", "rnn_relu", "grid_sampler",
        "grid_sampler_2d", "grid_sampler_3d", "affine_grid_generator", "conv_tbc",
        "norm_except_dim", "frobenius_norm", "nuclear_norm", "native_norm", "batch_norm_stats",
        "batch_norm_elemt", "batch_norm_gather_stats", "batch_norm_gather_stats_with_counts",
        "batch_norm_backward_reduce", "batch_norm_backward_elemt", "batch_norm_update_stats",
        "dropout_", "feature_dropout_", "alpha_dropout_", "feature_alpha_dropout_",
        "embedding_renorm_",
    )},
}


def __getattr__(name: str):
    if name in _DISTRIBUTIONS or name in _LAZY_MODULES:
        return _importlib.import_module(f"ember.{name}")
    if name in _LAZY_ATTRS:
        return getattr(_importlib.import_module(_LAZY_ATTRS[name]), name)
    raise AttributeError(f"module 'ember' has no attribute {name!r}")


# Last, after every late overload (sparse operands, numbers first): a call that no overload of a
# generated function or method takes raises PyTorch's TypeError, not pybind11's signature list.
_C._install_arg_errors(_C, Tensor)
