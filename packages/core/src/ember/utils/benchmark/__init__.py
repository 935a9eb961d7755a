"""``ember.utils.benchmark``: timing of Python statements on ember (PyTorch's
``torch.utils.benchmark``): ``Timer`` runs a statement and returns a ``Measurement`` (per-run
times with median, IQR and a significant-figure estimate); ``Compare`` prints many of them as
tables grouped by label, sub-label, description and thread count.

``Fuzzer`` draws random parameters and tensors (``FuzzedParameter``, ``FuzzedTensor``,
``ParameterAlias``). Not provided: the C++/Callgrind paths (``language="cpp"``,
``collect_callgrind``) and ``FuzzedSparseTensor``.

>>> import ember
>>> from ember.utils import benchmark
>>> x = ember.randn(16, 16)
>>> m = benchmark.Timer("x @ x", globals={"x": x}, label="mm", sub_label="16").timeit(50)
>>> m.number_per_run, m.times[0] > 0
(50, True)
"""

from ember.utils.benchmark.utils.common import (
    Measurement,
    TaskSpec,
    ordered_unique,
    select_unit,
    set_torch_threads,
    trim_sigfig,
    unit_to_english,
)
from ember.utils.benchmark.utils.compare import Colorize, Compare
from ember.utils.benchmark.utils.fuzzer import (
    FuzzedParameter,
    FuzzedTensor,
    Fuzzer,
    ParameterAlias,
)
from ember.utils.benchmark.utils.timer import Language, Timer, timer

__all__ = [
    "Timer", "Language", "timer", "Measurement", "TaskSpec", "Compare", "Colorize",
    "Fuzzer", "FuzzedParameter", "FuzzedTensor", "ParameterAlias", "select_unit", "unit_to_english", "trim_sigfig", "ordered_unique", "set_torch_threads",
]
