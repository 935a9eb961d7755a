"""Eager-mode quantization workflow, as PyTorch's ``torch.ao.quantization``:
``fuse_modules`` -> ``prepare`` (observers) or ``prepare_qat`` (fake quantize) -> calibrate or
train -> ``convert`` (quantized modules); and ``quantize_dynamic``.

>>> import ember
>>> from ember import nn
>>> from ember.ao import quantization as tq
>>> m = nn.Sequential(tq.QuantStub(), nn.Linear(4, 2), tq.DeQuantStub()).eval()
>>> m.qconfig = tq.default_qconfig
>>> p = tq.prepare(m)
>>> _ = p(ember.randn(8, 4))
>>> q = tq.convert(p)
>>> type(q[1]).__name__, q(ember.randn(3, 4)).shape
('Linear', ember.Size([3, 2]))
"""

from __future__ import annotations

import copy
import warnings
from typing import Any, Callable

from ember import nn
from ember.ao.nn import intrinsic as nni
from ember.ao.nn import qat as nnqat
from ember.ao.nn import quantized as nnq
from ember.ao.nn.intrinsic import qat as nniqat
from ember.ao.nn.intrinsic import quantized as nniq
from ember.ao.nn.quantized import dynamic as nnqd
from ember.ao.quantization.fake_quantize import (
    FakeQuantizeBase,
    default_fixed_qparams_range_0to1_fake_quant,
    default_fixed_qparams_range_neg1to1_fake_quant,
)
from ember.ao.quantization.observer import ObserverBase
from ember.ao.quantization.qconfig import (
    _assert_valid_qconfig,
    default_dynamic_qconfig,
    float16_dynamic_qconfig,
)
from ember.ao.quantization.stubs import DeQuantStub, QuantStub

__all__ = [
    "prepare", "prepare_qat", "convert", "quantize", "quantize_qat", "quantize_dynamic",
    "propagate_qconfig_", "add_quant_dequant", "swap_module", "fuse_modules",
    "fuse_modules_qat", "get_default_static_quant_module_mappings",
    "get_default_qat_module_mappings", "get_default_dynamic_quant_module_mappings",
    "get_default_qconfig_propagation_list", "fuse_known_modules",
]


# ---- module mappings (the modules ember can quantize) ---------------------------------------
def get_default_static_quant_module_mappings() -> dict[type, type]:
    """Float / QAT module -> quantized module, for ``convert``."""
    return {
        QuantStub: nnq.Quantize, DeQuantStub: nnq.DeQuantize, nn.Linear: nnq.Linear,
        nn.Conv1d: nnq.Conv1d, nn.Conv2d: nnq.Conv2d, nn.ReLU6: nnq.ReLU6,
        nni.ConvReLU1d: nniq.ConvReLU1d, nni.ConvReLU2d: nniq.ConvReLU2d,
        nnqat.Conv1d: nnq.Conv1d, nniqat.ConvBn1d: nnq.Conv1d,
        nniqat.ConvBnReLU1d: nniq.ConvReLU1d, nniqat.ConvReLU1d: nniq.ConvReLU1d,
        nni.LinearReLU: nniq.LinearReLU, nnqat.Linear: nnq.Linear, nnqat.Conv2d: nnq.Conv2d,
        nniqat.ConvBn2d: nnq.Conv2d, nniqat.ConvBnReLU2d: nniq.ConvReLU2d,
        nniqat.ConvReLU2d: nniq.ConvReLU2d, nniqat.LinearReLU: nniq.LinearReLU,
        nnq.FloatFunctional: nnq.QFunctional, nn.BatchNorm2d: nnq.BatchNorm2d,
        nni.BNReLU2d: nniq.BNReLU2d, nn.Hardswish: nnq.Hardswish, nn.LeakyReLU: nnq.LeakyReLU,
        nn.ELU: nnq.ELU, nn.Dropout: nnq.Dropout, nn.ConvTranspose1d: nnq.ConvTranspose1d,
        nn.ConvTranspose2d: nnq.ConvTranspose2d, nn.LayerNorm: nnq.LayerNorm,
        nn.Embedding: nnq.Embedding, nn.EmbeddingBag: nnq.EmbeddingBag,
        nn.GroupNorm: nnq.GroupNorm, nn.InstanceNorm1d: nnq.InstanceNorm1d,
        nn.InstanceNorm2d: nnq.InstanceNorm2d, nn.PReLU: nnq.PReLU,
    }


def get_default_qat_module_mappings() -> dict[type, type]:
    """Float module -> QAT module, for ``prepare_qat``."""
    return {
        # (Conv1d and ConvReLU1d stay float during QAT, as in PyTorch's mapping)
        nni.ConvBn1d: nniqat.ConvBn1d, nni.ConvBnReLU1d: nniqat.ConvBnReLU1d,
        nn.Conv2d: nnqat.Conv2d, nn.Linear: nnqat.Linear, nni.ConvBn2d: nniqat.ConvBn2d,
        nni.ConvBnReLU2d: nniqat.ConvBnReLU2d, nni.ConvReLU2d: nniqat.ConvReLU2d,
        nni.LinearReLU: nniqat.LinearReLU,
    }


def get_default_dynamic_quant_module_mappings() -> dict[type, type]:
    """Float module -> dynamic quantized module, for ``quantize_dynamic``."""
    return {nn.Linear: nnqd.Linear, nn.LSTM: nnqd.LSTM, nn.GRU: nnqd.GRU}


def get_default_qconfig_propagation_list() -> set[type]:
    """The module types that get observers (as leaves) in ``prepare``."""
    return (set(get_default_static_quant_module_mappings())
            | set(get_default_qat_module_mappings())
            | set(get_default_dynamic_quant_module_mappings()) | {nn.Sequential})


# ---- qconfig propagation ---------------------------------------------------------------------
def _propagate_qconfig_helper(module: nn.Module, qconfig_dict: dict, qconfig_parent: Any = None,
                              prefix: str = "") -> None:
    qconfig = qconfig_dict.get(type(module), qconfig_parent)
    qconfig = qconfig_dict.get(prefix, qconfig)
    qconfig = getattr(module, "qconfig", qconfig)
    _assert_valid_qconfig(qconfig, module)
    module.qconfig = qconfig
    for name, child in module.named_children():
        _propagate_qconfig_helper(child, qconfig_dict, qconfig,
                                  f"{prefix}.{name}" if prefix else name)


def propagate_qconfig_(module: nn.Module, qconfig_dict: dict | None = None) -> None:
    """Give every submodule a ``qconfig``: its own, else the one ``qconfig_dict`` names for
    its type or qualified name, else its parent's (in place)."""
    _propagate_qconfig_helper(module, qconfig_dict or {})


# ---- observers -------------------------------------------------------------------------------
def _observer_forward_hook(self: nn.Module, input: Any, output: Any) -> Any:
    return self.activation_post_process(output)


def _observer_forward_pre_hook(self: nn.Module, input: Any) -> Any:
    return self.activation_post_process(input[0])


def _is_activation_post_process(m: Any) -> bool:
    return isinstance(m, (ObserverBase, FakeQuantizeBase))


def _memoryless(qconfig: Any) -> bool:
    act = qconfig.activation()
    app = getattr(act, "activation_post_process", act)
    return getattr(app, "averaging_constant", None) == 1 and getattr(app, "is_dynamic", False)


def _special_act_post_process(m: nn.Module) -> Any:
    """The fixed-parameter fake quantize of a bounded activation module in training (QAT)."""
    if not m.training:
        return None
    return {nn.Hardsigmoid: default_fixed_qparams_range_0to1_fake_quant,
            nn.Sigmoid: default_fixed_qparams_range_0to1_fake_quant,
            nn.Softmax: default_fixed_qparams_range_0to1_fake_quant,
            nn.Tanh: default_fixed_qparams_range_neg1to1_fake_quant}.get(type(m))


def _insert_activation_post_process(m: nn.Module, special: Any = None) -> None:
    if getattr(m, "qconfig", None) is None or isinstance(m, DeQuantStub):
        return
    m.add_module("activation_post_process", (special or m.qconfig.activation)())
    if _memoryless(m.qconfig):
        m.register_forward_pre_hook(_observer_forward_pre_hook, prepend=True)
    else:
        m.register_forward_hook(_observer_forward_hook, prepend=True)


def _add_observer_(module: nn.Module, propagation: set[type],
                   non_leaf: set[type] | None = None) -> None:
    for child in module.children():
        if type(child) is nn.Dropout:
            continue
        if isinstance(child, (nnq.FloatFunctional, nnq.QFunctional)):
            if getattr(child, "qconfig", None) is not None:
                child.activation_post_process = child.qconfig.activation()
            continue
        if isinstance(child, nni._FusedModule) or (non_leaf is not None
                                                   and type(child) in non_leaf):
            _insert_activation_post_process(child)
        elif _special_act_post_process(child) is not None:
            _insert_activation_post_process(child, _special_act_post_process(child))
        else:
            _add_observer_(child, propagation, non_leaf)
    if (not list(module.children()) and not isinstance(module, nn.Sequential)
            and type(module) in propagation):
        _insert_activation_post_process(module)


def prepare(model: nn.Module, inplace: bool = False, allow_list: set[type] | None = None,
            observer_non_leaf_module_list: set[type] | None = None,
            prepare_custom_config_dict: Any = None) -> nn.Module:
    """``model`` (a copy unless ``inplace``) with its ``qconfig`` propagated and an observer
    (``activation_post_process``, run by a forward hook) on each quantizable leaf module, for
    post-training calibration."""
    if not inplace:
        model = copy.deepcopy(model)
    propagation = allow_list if allow_list is not None else get_default_qconfig_propagation_list()
    propagate_qconfig_(model)
    if not any(getattr(m, "qconfig", None) for m in model.modules()):
        warnings.warn("None of the submodule got qconfig applied. Make sure you passed correct "
                      "configuration through `qconfig_dict` or by assigning the `.qconfig` "
                      "attribute directly on submodules", stacklevel=2)
    _add_observer_(model, propagation, observer_non_leaf_module_list)
    return model


def prepare_qat(model: nn.Module, mapping: dict[type, type] | None = None,
                inplace: bool = False) -> nn.Module:
    """``model`` (training mode) with its float / fused modules swapped for QAT modules
    (weights fake-quantized) and fake quantize modules on their outputs."""
    if not model.training:
        raise AssertionError("prepare_qat only works on models in training mode")
    if mapping is None:
        mapping = get_default_qat_module_mappings()
    if not inplace:
        model = copy.deepcopy(model)
    propagate_qconfig_(model)
    convert(model, mapping=mapping, inplace=True, remove_qconfig=False)
    prepare(model, observer_non_leaf_module_list=set(mapping.values()), inplace=True)
    return model


def _remove_activation_post_process(module: nn.Module) -> None:
    if hasattr(module, "activation_post_process") and _is_activation_post_process(
            module.activation_post_process):
        delattr(module, "activation_post_process")
    for hooks, fn in ((module._forward_pre_hooks, _observer_forward_pre_hook),
                      (module._forward_hooks, _observer_forward_hook)):
        for key in [k for k, v in hooks.items() if v is fn]:
            del hooks[key]


def _remove_qconfig(module: nn.Module) -> None:
    for child in module.children():
        _remove_qconfig(child)
    if hasattr(module, "qconfig"):
        del module.qconfig
    _remove_activation_post_process(module)


def swap_module(mod: nn.Module, mapping: dict[type, type],
                custom_module_class_mapping: dict | None = None,
                use_precomputed_fake_quant: bool = False) -> nn.Module:
    """The module ``mapping`` gives for ``mod`` (made by ``from_float``), keeping its hooks
    other than the observer's; ``mod`` itself when it has no qconfig or no mapping."""
    if getattr(mod, "qconfig", None) is None or type(mod) not in mapping:
        return mod
    new_mod = mapping[type(mod)].from_float(mod,
                                            use_precomputed_fake_quant=use_precomputed_fake_quant)
    for hook in mod._forward_pre_hooks.values():
        if hook is not _observer_forward_pre_hook:
            new_mod.register_forward_pre_hook(hook)
    for hook in mod._forward_hooks.values():
        if hook is not _observer_forward_hook:
            new_mod.register_forward_hook(hook)
    return new_mod


def _convert(module: nn.Module, mapping: dict[type, type], use_precomputed_fake_quant: bool
             ) -> None:
    reassign = {}
    for name, mod in module.named_children():
        # a fused module (a QAT conv-bn too) is swapped as one unit
        if not isinstance(mod, (nni._FusedModule, nniqat._ConvBnNd)):
            _convert(mod, mapping, use_precomputed_fake_quant)
        reassign[name] = swap_module(mod, mapping, None, use_precomputed_fake_quant)
    for name, mod in reassign.items():
        module._modules[name] = mod


def convert(module: nn.Module, mapping: dict[type, type] | None = None, inplace: bool = False,
            remove_qconfig: bool = True, is_reference: bool = False,
            convert_custom_config_dict: Any = None,
            use_precomputed_fake_quant: bool = False) -> nn.Module:
    """``module`` (a copy unless ``inplace``) with every observed module swapped for its
    quantized version (``mapping``, by default the static quantized modules), observers and
    qconfigs removed."""
    if is_reference:
        raise NotImplementedError("convert: reference quantized modules (is_reference=True)")
    if mapping is None:
        mapping = get_default_static_quant_module_mappings()
    if not inplace:
        module = copy.deepcopy(module)
    _convert(module, mapping, use_precomputed_fake_quant)
    if remove_qconfig:
        _remove_qconfig(module)
    return module


def quantize(model: nn.Module, run_fn: Callable, run_args: Any, mapping: Any = None,
             inplace: bool = False) -> nn.Module:
    """Post-training static quantization in one call: prepare, ``run_fn(model, run_args)``
    to calibrate, convert."""
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    prepare(model, inplace=True)
    run_fn(model, run_args)
    convert(model, mapping, inplace=True)
    return model


def quantize_qat(model: nn.Module, run_fn: Callable, run_args: Any,
                 inplace: bool = False) -> nn.Module:
    """Quantization-aware training in one call: prepare_qat, ``run_fn(model, run_args)`` to
    train, convert."""
    if not inplace:
        model = copy.deepcopy(model)
    model.train()
    prepare_qat(model, inplace=True)
    run_fn(model, run_args)
    convert(model, inplace=True)
    return model


def quantize_dynamic(model: nn.Module, qconfig_spec: Any = None, dtype: Any = None,
                     mapping: dict[type, type] | None = None, inplace: bool = False
                     ) -> nn.Module:
    """``model`` (a copy unless ``inplace``, in eval mode) with its Linear, LSTM and GRU
    children (or those ``qconfig_spec`` selects: a set of types, or a dict of types /
    qualified names to QConfigs) replaced by dynamically quantized ones: int8 weights,
    activations quantized on the fly per call.

    >>> import ember
    >>> from ember.ao.quantization import quantize_dynamic
    >>> q = quantize_dynamic(ember.nn.Sequential(ember.nn.Linear(3, 2)), {ember.nn.Linear},
    ...                      dtype=ember.qint8)
    >>> type(q[0]).__name__
    'Linear'
    """
    import ember

    if dtype is None:
        dtype = ember.qint8
    if qconfig_spec is None:
        if dtype is ember.qint8:
            qconfig_spec = dict.fromkeys((nn.Linear, nn.LSTM, nn.GRU), default_dynamic_qconfig)
        elif dtype is ember.float16:
            qconfig_spec = {nn.Linear: float16_dynamic_qconfig}
        else:
            raise ValueError(f"Don't know how to quantize with default settings for {dtype}. "
                             "Provide full qconfig please")
    elif isinstance(qconfig_spec, set):
        if dtype is ember.qint8:
            default = default_dynamic_qconfig
        else:
            raise RuntimeError(f"quantize_dynamic: dtype {dtype} is not supported (ember "
                               "quantizes Linear weights to qint8)")
        qconfig_spec = dict.fromkeys(qconfig_spec, default)
    if mapping is None:
        mapping = get_default_dynamic_quant_module_mappings()
    if not inplace:
        model = copy.deepcopy(model)
    model.eval()
    kept = sorted({type(m).__name__ for m in model.modules()
                   if isinstance(m, tuple(k for k in qconfig_spec if isinstance(k, type)))
                   and type(m) not in mapping})
    if kept:
        # PyTorch would quantize these (LSTM, GRU, ...); ember keeps them in float
        warnings.warn(f"quantize_dynamic: ember has no dynamic quantized version of "
                      f"{', '.join(kept)}; those modules stay float (Linear, LSTM and GRU are "
                      "quantized)",
                      stacklevel=2)
    propagate_qconfig_(model, qconfig_spec)
    convert(model, mapping, inplace=True)
    return model


def add_quant_dequant(module: nn.Module) -> nn.Module:
    """Wrap each leaf module that has a qconfig in a QuantWrapper (in place)."""
    from ember.ao.quantization.stubs import QuantWrapper

    if not list(module.children()) and getattr(module, "qconfig", None):
        return QuantWrapper(module)
    for name, child in module.named_children():
        module._modules[name] = add_quant_dequant(child)
    return module


# ---- fusion ----------------------------------------------------------------------------------
def _same_mode(*mods: nn.Module) -> None:
    if len({m.training for m in mods}) != 1:
        raise AssertionError("Conv and BN both must be in the same mode (train or eval).")


def _fuse_conv_bn(is_qat: bool, conv: nn.Module, bn: nn.Module) -> nn.Module:
    from ember.nn.utils.fusion import fuse_conv_bn_eval

    _same_mode(conv, bn)
    if is_qat:
        if bn.num_features != conv.out_channels:
            raise AssertionError("Output channel of Conv2d must match num_features of "
                                 "BatchNorm2d")
        if not (bn.affine and bn.track_running_stats):
            raise AssertionError("Only support fusing BatchNorm2d with affine set to True and "
                                 "tracking_running_stats set to True")
        return {nn.Conv1d: nni.ConvBn1d, nn.Conv2d: nni.ConvBn2d}[type(conv)](conv, bn)
    return fuse_conv_bn_eval(conv, bn)


def _fuse_conv_bn_relu(is_qat: bool, conv: nn.Module, bn: nn.Module,
                       relu: nn.Module) -> nn.Module:
    from ember.nn.utils.fusion import fuse_conv_bn_eval

    _same_mode(conv, bn, relu)
    if is_qat:
        if bn.num_features != conv.out_channels:
            raise AssertionError("Output channel of Conv must match num_features of BatchNorm")
        if not (bn.affine and bn.track_running_stats):
            raise AssertionError("Only support fusing BatchNorm with affine set to True and "
                                 "tracking_running_stats set to True")
        return {nn.Conv1d: nni.ConvBnReLU1d,
                nn.Conv2d: nni.ConvBnReLU2d}[type(conv)](conv, bn, relu)
    fused = fuse_conv_bn_eval(conv, bn)
    return {nn.Conv1d: nni.ConvReLU1d, nn.Conv2d: nni.ConvReLU2d}[type(conv)](fused, relu)


def _fuse_linear_bn(is_qat: bool, linear: nn.Module, bn: nn.Module) -> nn.Module:
    from ember.nn.utils.fusion import fuse_linear_bn_eval

    _same_mode(linear, bn)
    if is_qat:
        return nni.LinearBn1d(linear, bn)
    return fuse_linear_bn_eval(linear, bn)


_FUSERS: dict[tuple[type, ...], Callable] = {
    (nn.Conv1d, nn.BatchNorm1d): _fuse_conv_bn,
    (nn.Conv1d, nn.BatchNorm1d, nn.ReLU): _fuse_conv_bn_relu,
    (nn.Conv2d, nn.BatchNorm2d): _fuse_conv_bn,
    (nn.Conv2d, nn.BatchNorm2d, nn.ReLU): _fuse_conv_bn_relu,
    (nn.Conv1d, nn.ReLU): lambda is_qat, c, r: nni.ConvReLU1d(c, r),
    (nn.Conv2d, nn.ReLU): lambda is_qat, c, r: nni.ConvReLU2d(c, r),
    (nn.Linear, nn.BatchNorm1d): _fuse_linear_bn,
    (nn.Linear, nn.ReLU): lambda is_qat, lin, r: nni.LinearReLU(lin, r),
    (nn.BatchNorm2d, nn.ReLU): lambda is_qat, b, r: nni.BNReLU2d(b, r),
}


def fuse_known_modules(mod_list: list[nn.Module], is_qat: bool,
                       additional_fuser_method_mapping: dict | None = None) -> list[nn.Module]:
    """The fused module for ``mod_list`` followed by Identity placeholders (one per other
    module); the first module's pre-hooks and the last one's hooks move to the fused one."""
    types = tuple(type(m) for m in mod_list)
    fusers = dict(_FUSERS)
    fusers.update(additional_fuser_method_mapping or {})
    fuser = fusers.get(types)
    if fuser is None:
        raise NotImplementedError(f"Cannot fuse modules: {types}")
    fused = fuser(is_qat, *mod_list)
    for hook in mod_list[0]._forward_pre_hooks.values():
        fused.register_forward_pre_hook(hook)
    mod_list[0]._forward_pre_hooks.clear()
    for hook in mod_list[-1]._forward_hooks.values():
        fused.register_forward_hook(hook)
    mod_list[-1]._forward_hooks.clear()
    out = [fused]
    for m in mod_list[1:]:
        identity = nn.Identity()
        identity.training = mod_list[0].training
        out.append(identity)
    return out


def _get_module(model: nn.Module, name: str) -> nn.Module:
    for part in name.split("."):
        model = getattr(model, part)
    return model


def _set_module(model: nn.Module, name: str, new: nn.Module) -> None:
    *parents, last = name.split(".")
    for part in parents:
        model = getattr(model, part)
    setattr(model, last, new)


def _fuse(model: nn.Module, modules_to_fuse: list[Any], is_qat: bool, inplace: bool,
          fuser_func: Callable, fuse_custom_config_dict: Any) -> nn.Module:
    if not inplace:
        model = copy.deepcopy(model)
    extra = (fuse_custom_config_dict or {}).get("additional_fuser_method_mapping", None)
    groups = [modules_to_fuse] if all(isinstance(n, str) for n in modules_to_fuse) \
        else modules_to_fuse
    for names in groups:
        mods = [_get_module(model, n) for n in names]
        if extra is not None:
            new = fuser_func(mods, is_qat, extra)
        else:
            new = fuser_func(mods, is_qat)
        for name, m in zip(names, new):
            _set_module(model, name, m)
    return model


def fuse_modules(model: nn.Module, modules_to_fuse: list[Any], inplace: bool = False,
                 fuser_func: Callable = fuse_known_modules,
                 fuse_custom_config_dict: Any = None) -> nn.Module:
    """Fuse the named module sequences (conv-bn, conv-bn-relu, conv-relu, linear-relu,
    linear-bn, bn-relu) of an eval-mode model: batch norms fold into the preceding conv /
    linear, relus join into ``ember.ao.nn.intrinsic`` modules; the other names become Identity.

    >>> import ember
    >>> from ember import nn
    >>> from ember.ao.quantization import fuse_modules
    >>> m = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU()).eval()
    >>> f = fuse_modules(m, [["0", "1", "2"]])
    >>> [type(c).__name__ for c in f]
    ['ConvReLU2d', 'Identity', 'Identity']
    """
    return _fuse(model, modules_to_fuse, False, inplace, fuser_func, fuse_custom_config_dict)


def fuse_modules_qat(model: nn.Module, modules_to_fuse: list[Any], inplace: bool = False,
                     fuser_func: Callable = fuse_known_modules,
                     fuse_custom_config_dict: Any = None) -> nn.Module:
    """:func:`fuse_modules` for quantization-aware training (training mode): conv-bn(-relu)
    become ``ember.ao.nn.intrinsic.ConvBn2d`` / ``ConvBnReLU2d`` (the batch norm kept, folded
    during QAT)."""
    return _fuse(model, modules_to_fuse, True, inplace, fuser_func, fuse_custom_config_dict)
