"""``ember.ao.quantization`` (also ``ember.quantization``): PyTorch's eager-mode quantization
API: observers, fake quantize modules, QConfigs, QuantStub / DeQuantStub, ``fuse_modules``,
``prepare`` / ``prepare_qat`` / ``convert`` and ``quantize_dynamic``.

>>> import ember
>>> from ember.ao.quantization import MinMaxObserver
>>> obs = MinMaxObserver()
>>> _ = obs(ember.tensor([0.0, 2.55]))
>>> obs.calculate_qparams()[1].tolist()
[0]
"""

from __future__ import annotations

from ember.ao.quantization.fake_quantize import (  # noqa: F401
    FakeQuantize,
    FakeQuantizeBase,
    FixedQParamsFakeQuantize,
    FusedMovingAvgObsFakeQuantize,
    default_fake_quant,
    default_fixed_qparams_range_0to1_fake_quant,
    default_fixed_qparams_range_neg1to1_fake_quant,
    default_fused_act_fake_quant,
    default_fused_per_channel_wt_fake_quant,
    default_fused_wt_fake_quant,
    default_histogram_fake_quant,
    default_per_channel_weight_fake_quant,
    default_weight_fake_quant,
    disable_fake_quant,
    disable_observer,
    enable_fake_quant,
    enable_observer,
)
from ember.ao.quantization.observer import (  # noqa: F401
    FixedQParamsObserver,
    HistogramObserver,
    MinMaxObserver,
    MovingAverageMinMaxObserver,
    MovingAveragePerChannelMinMaxObserver,
    NoopObserver,
    ObserverBase,
    PerChannelMinMaxObserver,
    PlaceholderObserver,
    UniformQuantizationObserverBase,
    default_dynamic_quant_observer,
    default_float_qparams_observer,
    default_histogram_observer,
    default_observer,
    default_per_channel_weight_observer,
    default_placeholder_observer,
    default_weight_observer,
)
from ember.ao.quantization.qconfig import (  # noqa: F401
    QConfig,
    QConfigDynamic,
    default_dynamic_qconfig,
    default_per_channel_qconfig,
    default_qat_qconfig,
    default_qconfig,
    float16_dynamic_qconfig,
    float_qparams_weight_only_qconfig,
    get_default_qat_qconfig,
    get_default_qconfig,
    per_channel_dynamic_qconfig,
)
from ember.ao.quantization.qconfig_mapping import (  # noqa: F401
    QConfigMapping,
    get_default_qat_qconfig_mapping,
    get_default_qconfig_mapping,
)
from ember.ao.quantization.quantize import (  # noqa: F401
    add_quant_dequant,
    convert,
    fuse_known_modules,
    fuse_modules,
    fuse_modules_qat,
    get_default_dynamic_quant_module_mappings,
    get_default_qat_module_mappings,
    get_default_qconfig_propagation_list,
    get_default_static_quant_module_mappings,
    prepare,
    prepare_qat,
    propagate_qconfig_,
    quantize,
    quantize_dynamic,
    quantize_qat,
    swap_module,
)
from ember.ao.quantization.stubs import DeQuantStub, QuantStub, QuantWrapper  # noqa: F401

__all__ = [name for name in dir() if not name.startswith("_") and name != "annotations"]
