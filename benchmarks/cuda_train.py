"""GPU training throughput (issue 12): ember against PyTorch on the same GPU, eager mode both.

Each case builds one model from the same code in both frameworks (the framework module is a
parameter: ``benchmarks/paper/models.py`` for Table 1's models, ``cases_nn_train.gpt_model`` and
``rnn_lm`` for the language models), gives ember PyTorch's initial weights (the state_dict is
copied, so both start from the same point), moves model and one fixed batch to the GPU, and
times full training steps (``zero_grad``, forward under autocast where the case says so, loss,
``backward``, gradient clipping where the case says so, ``optimizer.step``):

* warm-up steps (the first one is the initial loss of the table, the cuDNN autotuning and the
  optimizer's state allocation happen here), then samples of ``k`` steps between two
  synchronizations; the step time is the median over the samples (``k`` makes a sample about
  0.25 s; the number of samples is what the case's share of ``--budget`` allows, 1 to 7);
* peak memory: ``<fw>.cuda.max_memory_allocated()`` over the timed steps, after
  ``reset_peak_memory_stats()`` at their start (parameters, gradients, optimizer state and the
  activations of a step: the steady state);
* GPU busy: NVML's ``utilization.gpu`` (the fraction of time a kernel ran), sampled every 20 ms
  by a thread during the timed steps and averaged; ``n/a`` without ``pynvml`` (nvidia-ml-py).

The cases (``--list``; the batch of each is in the table and can be changed with ``--batch``):

| case | model | batch | precision | optimizer |
| --- | --- | --- | --- | --- |
| resnet50 fp32 / bf16 | ResNet-50, 224², 1000 classes | 64 | fp32 / bf16 autocast | SGD 0.9 momentum, wd 1e-4 |
| vgg19 | VGG-19 (no BN), 224², classifier 512-4096-4096-1000 | 64 | fp32 | SGD |
| alexnet | AlexNet, 224², classifier 1024-4096-4096-1000 | 128 | fp32 | SGD |
| mobilenet_v2 | MobileNetV2, 224², 1000 classes | 128 | fp32 | SGD |
| gpt2-small bf16 | GPT-2-small shape: 12 layers, 768 wide, 12 heads, vocab 50257, seq 1024, causal SDPA | 8 | bf16 autocast | AdamW |
| lstm lm | Embedding(10000, 1024), 2-layer LSTM 1024, seq 35 | 64 | fp32 | SGD, clip_grad_norm_ 0.25 |
| ncf | NeuMF (GMF 32 + MLP 128-64-32), 138493 users x 26744 items (MovieLens-20M) | 65536 | fp32 | Adam |

TF32 is off in both frameworks (``backends.cuda.matmul.allow_tf32`` and
``backends.cudnn.allow_tf32``; ``--tf32`` turns it on in both) and ``cudnn.benchmark`` is on in
both. Each case runs in its own process (torch first, then ember) so that a crash or a hang of
one case costs only that row; ``--in-process`` runs them all in this process. A case gets an
equal share of what is left of the budget; after ``--hard-limit`` seconds (default 1.4 x budget
+ 30) no case starts and a running one is stopped.

    PYTHONPATH=build/dev/site python3 benchmarks/cuda_train.py            # ~150 s on an H100
    PYTHONPATH=build/dev/site python3 benchmarks/cuda_train.py --quick    # ~60 s
    PYTHONPATH=build/dev/site python3 benchmarks/cuda_train.py --filter resnet --batch resnet50=32
    PYTHONPATH=build/dev/site python3 benchmarks/cuda_train.py --device cpu --tiny --in-process

``--device cpu --tiny`` runs every case with tiny sizes on the CPU (the CI check that this script
keeps working; the throughputs mean nothing). The table goes to stdout (a row as each case
ends), the JSON to ``--json``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent


def _paths() -> None:
    """benchmarks/ (cases_nn_train, harness) and benchmarks/paper/ (models) on sys.path: the
    builders import them when called, wherever this module was imported from."""
    for p in (HERE, HERE / "paper"):
        if str(p) not in sys.path:
            sys.path.insert(0, str(p))


_paths()

DEFAULT_JSON = HERE / "results_cuda_train.json"
RESULT_MARK = "@@cuda_train "  # a child's result lines on its stdout
THROUGHPUT_TARGET = 0.9  # ember throughput / torch throughput, at least
MEMORY_TARGET = 1.05  # ember peak / torch peak, at most


# ---- the cases --------------------------------------------------------------------------------


@dataclass
class Built:
    """One case built in one framework, on the CPU: the model, its fixed batch (inputs,
    targets), the loss, the optimizer factory, and what a step processes."""

    model: Any
    inputs: Any
    targets: Any
    loss_fn: Any
    make_opt: Callable[[Any], Any]
    items: int


@dataclass(frozen=True)
class Case:
    name: str
    unit: str  # "img/s" or "tok/s" or "samples/s"
    build: Callable[[Any, bool, int], Built]  # (framework module, tiny, batch)
    batch: int  # the full-size batch
    tiny_batch: int
    autocast: str | None = None  # "bfloat16" or None
    clip: float | None = None  # clip_grad_norm_ max norm
    doc: str = ""


def _sgd(mod: Any) -> Callable[[Any], Any]:
    return lambda params: mod.optim.SGD(params, lr=0.01, momentum=0.9, weight_decay=1e-4)


def _table1(model: str, image: int, tiny_image: int) -> Callable[[Any, bool, int], Built]:
    def build(mod: Any, tiny: bool, batch: int) -> Built:
        _paths()
        from models import Size
        from models import build as build_model

        if tiny:
            size = Size(image=tiny_image, batch=batch, width=1 / 16, hidden=32, classes=10)
        else:
            size = Size(image=image, batch=batch, width=1.0, hidden=4096, classes=1000)
        net, make_batch, loss_fn, items = build_model(model, mod, size)
        x, y = make_batch()
        return Built(net, x, y, loss_fn, _sgd(mod), items)

    return build


def _gpt2(mod: Any, tiny: bool, batch: int) -> Built:
    _paths()
    from cases_nn_train import gpt_model

    if tiny:
        vocab, d, heads, layers, seq = 97, 32, 2, 2, 16
    else:
        vocab, d, heads, layers, seq = 50257, 768, 12, 12, 1024
    mod.manual_seed(0)
    net = gpt_model(mod, 0.0, vocab=vocab, d=d, heads=heads, layers=layers, seq=seq, dropout=0.1)
    rng = np.random.default_rng(2)
    x = mod.tensor(rng.integers(0, vocab, (batch, seq)))
    y = mod.tensor(rng.integers(0, vocab, batch * seq))
    return Built(net, x, y, mod.nn.CrossEntropyLoss(),
                 lambda p: mod.optim.AdamW(p, lr=3e-4, weight_decay=0.1), batch * seq)


def _lstm_lm(mod: Any, tiny: bool, batch: int) -> Built:
    _paths()
    from cases_nn_train import rnn_lm

    vocab, d, seq = (50, 16, 8) if tiny else (10000, 1024, 35)
    mod.manual_seed(0)
    net = rnn_lm(mod, "LSTM", vocab=vocab, d=d, layers=2)
    rng = np.random.default_rng(1)
    x = mod.tensor(rng.integers(0, vocab, (seq, batch)))  # sequence-first
    y = mod.tensor(rng.integers(0, vocab, seq * batch))
    return Built(net, x, y, mod.nn.CrossEntropyLoss(), lambda p: mod.optim.SGD(p, lr=1.0),
                 seq * batch)


def _ncf(mod: Any, tiny: bool, batch: int) -> Built:
    _paths()
    from models import Size
    from models import build as build_model

    users, items = (100, 80) if tiny else (138493, 26744)
    size = Size(ncf_users=users, ncf_items=items, ncf_batch=batch)
    net, make_batch, loss_fn, n = build_model("ncf", mod, size)
    x, y = make_batch()
    return Built(net, x, y, loss_fn, lambda p: mod.optim.Adam(p, lr=1e-3), n)


CASES: list[Case] = [
    Case("resnet50 fp32", "img/s", _table1("resnet50", 224, 32), 64, 2,
         doc="ResNet-50 (bottleneck [3, 4, 6, 3]), 224x224, 1000 classes, fp32"),
    Case("resnet50 bf16", "img/s", _table1("resnet50", 224, 32), 64, 2, autocast="bfloat16",
         doc="ResNet-50 under autocast('cuda', dtype=bfloat16)"),
    Case("vgg19", "img/s", _table1("vgg19", 224, 32), 64, 2,
         doc="VGG-19 without batch norm, global average pool, classifier 512-4096-4096-1000"),
    Case("alexnet", "img/s", _table1("alexnet", 224, 64), 128, 2,
         doc="AlexNet, adaptive average pool to 2x2, classifier 1024-4096-4096-1000"),
    Case("mobilenet_v2", "img/s", _table1("mobilenet_v2", 224, 32), 128, 2,
         doc="MobileNetV2 (width 1.0), 224x224, 1000 classes"),
    Case("gpt2-small bf16", "tok/s", _gpt2, 8, 2, autocast="bfloat16",
         doc="GPT-2-small shape (12 x 768, 12 heads, vocab 50257, untied head, dropout 0.1), "
             "seq 1024, causal F.scaled_dot_product_attention, bf16 autocast, AdamW"),
    Case("lstm lm", "tok/s", _lstm_lm, 64, 4, clip=0.25,
         doc="Embedding(10000, 1024) -> 2-layer LSTM 1024 -> Linear(10000), seq 35, SGD lr 1, "
             "clip_grad_norm_(0.25) (PyTorch's word-language-model example, large)"),
    Case("ncf", "samples/s", _ncf, 65536, 64,
         doc="NeuMF: GMF 32 + MLP 128-64-32 over 138493 users x 26744 items, BCE, Adam"),
]


# ---- measuring ----------------------------------------------------------------------------------


def _to(obj: Any, device: str) -> Any:
    if isinstance(obj, (tuple, list)):
        return type(obj)(_to(o, device) for o in obj)
    return obj.to(device)


def _sync(mod: Any, device: str) -> None:
    if device == "cuda":
        mod.cuda.synchronize()


class GpuBusy:
    """NVML's GPU utilization, sampled by a thread every ``period`` seconds while active.
    ``fraction`` is the mean (0..1), None without pynvml or a device."""

    def __init__(self, enabled: bool, period: float = 0.02) -> None:
        self.period = period
        self.handle = None
        self.why = "no GPU"
        self.samples: list[int] = []
        if not enabled:
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            vis = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
            if vis.startswith("GPU-"):
                self.handle = pynvml.nvmlDeviceGetHandleByUUID(vis)
            else:
                self.handle = pynvml.nvmlDeviceGetHandleByIndex(int(vis) if vis.isdigit() else 0)
            self._nvml = pynvml
            self.why = ""
        except Exception as e:  # noqa: BLE001  (not installed, no driver: n/a)
            self.handle = None
            self.why = f"NVML unavailable ({type(e).__name__}: {str(e)[:80]})"

    def __enter__(self) -> GpuBusy:
        self.samples = []
        self._stop = threading.Event()
        if self.handle is not None:
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(int(self._nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu))
            except Exception:  # noqa: BLE001
                return
            self._stop.wait(self.period)

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self.handle is not None:
            self._thread.join(timeout=2)

    @property
    def fraction(self) -> float | None:
        return statistics.fmean(self.samples) / 100 if self.samples else None


@dataclass
class Side:
    """One framework's result of one case."""

    status: str = "n/a"  # ok, error, n/a
    message: str = ""
    step_s: float | None = None
    throughput: float | None = None
    samples_s: list[float] = field(default_factory=list)
    steps_per_sample: int = 0
    peak_bytes: int | None = None
    gpu_busy: float | None = None
    loss0: float | None = None
    loss_last: float | None = None
    same_init: bool = False
    seconds: float = 0.0


def _apply_switches(mod: Any, switches: dict[str, bool]) -> None:
    """ember's private kernel-path switches (``ember._C_cuda._set_<name>(on)``, e.g.
    depthwise_native or sdpa_tensor_cores), for A/B runs of one path against another."""
    if not switches:
        return
    ext = getattr(mod, "_C_cuda", None)
    if ext is None:
        import importlib

        try:
            ext = importlib.import_module("ember._C_cuda")
        except ImportError as e:
            raise SystemExit(f"--ember-switch: ember's CUDA extension is not built ({e})") from e
    for name, on in switches.items():
        setter = getattr(ext, f"_set_{name}", None)
        if setter is None:
            raise SystemExit(f"--ember-switch {name}: ember._C_cuda has no _set_{name}")
        setter(on)


def _settings(mod: Any, device: str, tf32: bool, ember_sdp: str = "default",
              switches: dict[str, bool] | None = None) -> None:
    """The same switches in both frameworks: TF32 as asked, cuDNN autotuning on; one CPU
    thread for the CPU dry run (its numbers mean nothing; on a busy machine more threads only
    wait for each other). ``ember_sdp`` ("math" / "fused") restricts ember's attention to one
    path (an experiment: which is faster on this GPU); ``switches`` sets ember's private
    kernel-path switches (see _apply_switches)."""
    if mod.__name__ == "ember" and switches:
        _apply_switches(mod, switches)
    if mod.__name__ == "ember" and ember_sdp != "default":
        mod.backends.cuda.enable_math_sdp(ember_sdp == "math")
        for name in ("flash", "mem_efficient", "cudnn"):
            getattr(mod.backends.cuda, f"enable_{name}_sdp")(ember_sdp == "fused")
    if device != "cuda":
        mod.set_num_threads(1)
        return
    mod.backends.cuda.matmul.allow_tf32 = tf32
    mod.backends.cudnn.allow_tf32 = tf32
    mod.backends.cudnn.benchmark = True


def _step_fn(mod: Any, device: str, b: Built, opt: Any, case: Case) -> Callable[[], Any]:
    model, x, y, loss_fn = b.model, b.inputs, b.targets, b.loss_fn
    if case.autocast:
        dtype = getattr(mod, case.autocast)
        ctx: Callable[[], Any] = lambda: mod.autocast(device, dtype=dtype)  # noqa: E731
    else:
        ctx = contextlib.nullcontext
    params = [p for p in model.parameters() if p.requires_grad]

    def step() -> Any:
        opt.zero_grad(set_to_none=True)
        with ctx():
            loss = loss_fn(model(x), y)
        loss.backward()
        if case.clip is not None:
            mod.nn.utils.clip_grad_norm_(params, case.clip)
        opt.step()
        return loss

    return step


def _state_numpy(model: Any) -> dict[str, np.ndarray]:
    return {k: np.array(v.detach().cpu().numpy(), copy=True) for k, v in model.state_dict().items()}


def _load_numpy(mod: Any, model: Any, state: dict[str, np.ndarray]) -> bool:
    """Loads state (another framework's initial weights) into model when names and shapes
    agree; False (the model keeps its own initialization) otherwise."""
    own = model.state_dict()
    if set(own) != set(state) or any(tuple(own[k].shape) != state[k].shape for k in state):
        return False
    model.load_state_dict({k: mod.tensor(v) for k, v in state.items()})
    return True


def measure(mod: Any, case: Case, *, device: str, tiny: bool, batch: int, budget_s: float,
            warmup: int, max_samples: int, sample_s: float, tf32: bool,
            init: dict[str, np.ndarray] | None, keep_init: dict | None = None,
            ember_sdp: str = "default", switches: dict[str, bool] | None = None) -> Side:
    """Builds the case in ``mod``, trains it on ``device`` and returns the measurements. With
    ``init`` (numpy state of the other framework) the model starts from those weights; with
    ``keep_init`` (a dict) the model's own initial state is stored there under "state"."""
    t_start = time.perf_counter()
    side = Side()
    _settings(mod, device, tf32, ember_sdp, switches)
    b = case.build(mod, tiny, batch)
    if keep_init is not None:
        keep_init["state"] = _state_numpy(b.model)
    if init is not None:
        side.same_init = _load_numpy(mod, b.model, init)
    b.model.to(device)
    b.model.train()
    b.inputs, b.targets = _to(b.inputs, device), _to(b.targets, device)
    opt = b.make_opt(b.model.parameters())
    step = _step_fn(mod, device, b, opt, case)

    side.loss0 = float(step().item())  # the initial loss (syncs)
    step_est = 0.0
    for i in range(max(1, warmup)):
        # A slow side (seconds per step) stops warming up after one more step, so that the
        # case stays near its share of the budget.
        if i > 0 and time.perf_counter() - t_start > budget_s / 2:
            break
        t0 = time.perf_counter()
        step()
        _sync(mod, device)
        step_est = time.perf_counter() - t0

    left = budget_s - (time.perf_counter() - t_start)
    k = max(1, round(sample_s / max(step_est, 1e-6)))
    if left < 3 * k * step_est:  # fewer steps per sample to get 3 samples, if they fit at all
        k = max(1, int(left / (3 * max(step_est, 1e-6))))
    n = int(left / max(k * step_est, 1e-6))
    n = max(1, min(max_samples, n))
    if device == "cuda":
        mod.cuda.reset_peak_memory_stats()
    busy = GpuBusy(device == "cuda")
    loss = None
    with busy:
        for _ in range(n):
            _sync(mod, device)
            t0 = time.perf_counter()
            for _ in range(k):
                loss = step()
            _sync(mod, device)
            side.samples_s.append((time.perf_counter() - t0) / k)
    if device == "cuda":
        side.peak_bytes = int(mod.cuda.max_memory_allocated())
    side.gpu_busy = busy.fraction
    side.loss_last = float(loss.item()) if loss is not None else None
    side.steps_per_sample = k
    side.step_s = statistics.median(side.samples_s)
    side.throughput = b.items / side.step_s
    side.status = "ok"
    side.seconds = time.perf_counter() - t_start
    if busy.why and device == "cuda":
        side.message = busy.why
    return side


def _free(*mods: Any) -> None:
    gc.collect()
    for mod in mods:
        with contextlib.suppress(Exception):
            if mod is not None and mod.cuda.is_available():
                mod.cuda.synchronize()
                mod.cuda.empty_cache()


def _error(e: BaseException) -> str:
    first = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {first}"[:300]


def _import(name: str) -> tuple[Any, str]:
    try:
        return __import__(name), ""
    except Exception as e:  # noqa: BLE001
        return None, f"not importable ({_error(e)})"


def _check_device(mod: Any, name: str, device: str) -> str:
    if device == "cuda" and not (hasattr(mod, "cuda") and mod.cuda.is_available()):
        return f"{name} has no usable CUDA device (or no CUDA build)"
    return ""


def run_case(case: Case, cfg: dict[str, Any], budget_s: float) -> dict[str, Any]:
    """Both sides of one case (torch first, whose initial weights ember then gets)."""
    device, tiny = cfg["device"], cfg["tiny"]
    batch = cfg["batches"].get(case.name, case.tiny_batch if tiny else case.batch)
    kw = dict(device=device, tiny=tiny, batch=batch, warmup=cfg["warmup"],
              max_samples=cfg["max_samples"], sample_s=cfg["sample_s"], tf32=cfg["tf32"],
              ember_sdp=cfg.get("ember_sdp", "default"), switches=cfg.get("switches") or {})
    out: dict[str, Any] = {"case": case.name, "unit": case.unit, "batch": batch, "doc": case.doc}
    init: dict[str, Any] = {}
    t0 = time.perf_counter()
    for name in ("torch", "ember"):
        if name == "torch" and cfg.get("no_torch"):
            mod, why = None, "--no-torch"
        else:
            mod, why = _import(name)
            why = why or _check_device(mod, name, device)
        side = Side(message=why)
        if not why:
            share = budget_s / 2 if name == "torch" else budget_s - (time.perf_counter() - t0)
            try:
                side = measure(mod, case, budget_s=max(share, 0.0),
                               init=init.get("state") if name == "ember" else None,
                               keep_init=init if name == "torch" else None, **kw)
            except Exception as e:  # noqa: BLE001  (missing op, OOM...: the row says so)
                print(f"[{case.name}] {name}:", file=sys.stderr)
                traceback.print_exc(file=sys.stderr)
                side = Side(status="error", message=_error(e))
        out[name] = side.__dict__
        if cfg.get("child"):  # the parent reads the sides from the child's stdout
            print(RESULT_MARK + json.dumps({"case": case.name, "side": name, **side.__dict__}),
                  flush=True)
        _free(mod)
    return out


# ---- reporting ----------------------------------------------------------------------------------


def _fmt_tp(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f} {unit}" if v >= 100 else f"{v:.3g} {unit}"


def _fmt_mib(v: int | None) -> str:
    return "-" if v is None else f"{v / 2**20:,.0f} MiB"


def _fmt_busy(v: float | None) -> str:
    return "n/a" if v is None else f"{100 * v:.0f}%"


def _cell(side: dict[str, Any], unit: str) -> str:
    if side["status"] == "ok":
        return _fmt_tp(side["throughput"], unit)
    if side["status"] == "error":
        return "error: " + side["message"].replace("|", "/")[:160]
    return "n/a" + (f" ({side['message'][:60]})" if side["message"] else "")


HEADER = ("| case | batch | ember | torch | ember/torch | peak mem ember | peak mem torch | "
          "mem ember/torch | GPU busy ember / torch | loss0 ember / torch | met? |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")


def summarize(row: dict[str, Any]) -> None:
    """Adds the ratios and the verdict to a case's result."""
    e, t = row["ember"], row["torch"]
    ok = e["status"] == "ok" and t["status"] == "ok"
    row["throughput_ratio"] = e["throughput"] / t["throughput"] if ok else None
    row["memory_ratio"] = (e["peak_bytes"] / t["peak_bytes"]
                           if ok and e["peak_bytes"] and t["peak_bytes"] else None)
    if row["throughput_ratio"] is None or not row.get("judged", True):
        row["met"] = None  # no numbers, or CPU dry-run numbers (meaningless)
    else:
        row["met"] = (row["throughput_ratio"] >= THROUGHPUT_TARGET
                      and (row["memory_ratio"] is None or row["memory_ratio"] <= MEMORY_TARGET))


def table_row(row: dict[str, Any]) -> str:
    e, t, unit = row["ember"], row["torch"], row["unit"]
    tr, mr = row.get("throughput_ratio"), row.get("memory_ratio")
    loss = "-"
    if e["loss0"] is not None or t["loss0"] is not None:
        fl = lambda v: "-" if v is None or not math.isfinite(v) else f"{v:.4g}"  # noqa: E731
        own = e["status"] == "ok" and t["status"] == "ok" and not e["same_init"]
        loss = f"{fl(e['loss0'])} / {fl(t['loss0'])}" + (" (own init)" if own else "")
    met = {None: "-", True: "yes", False: "no"}[row.get("met")]
    return (f"| {row['case']} | {row['batch']} | {_cell(e, unit)} | {_cell(t, unit)} | "
            f"{'-' if tr is None else f'{tr:.2f}'} | {_fmt_mib(e['peak_bytes'])} | "
            f"{_fmt_mib(t['peak_bytes'])} | {'-' if mr is None else f'{mr:.2f}'} | "
            f"{_fmt_busy(e['gpu_busy'])} / {_fmt_busy(t['gpu_busy'])} | {loss} | {met} |")


def _meta(device: str, torch: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                            "python": platform.python_version(), "device": device}
    for name in ("ember", "torch") if torch else ("ember",):
        mod, why = _import(name)
        if mod is None:
            meta[name] = why
            continue
        info = getattr(mod, "__version__", "?")
        if name == "torch":
            info += f" (CUDA {mod.version.cuda})"
        meta[name] = str(info)
        if device == "cuda" and "gpu" not in meta:
            with contextlib.suppress(Exception):
                if mod.cuda.is_available():
                    meta["gpu"] = mod.cuda.get_device_name(0)
    if device == "cuda":
        with contextlib.suppress(Exception):
            meta["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=10).stdout.strip()
    return meta


# ---- running: in this process or one process per case -------------------------------------------


def _child(case_name: str, cfg: dict[str, Any], budget_s: float) -> int:
    case = next(c for c in CASES if c.name == case_name)
    run_case(case, {**cfg, "child": True}, budget_s)
    return 0


def _run_isolated(case: Case, cfg: dict[str, Any], budget_s: float,
                  timeout_s: float) -> dict[str, Any]:
    """run_case in a child process; a side that never reported (crash, hang) is an error
    naming the exit status and the child's last stderr line."""
    cmd = [sys.executable, "-X", "faulthandler", str(Path(__file__).resolve()), "--child",
           case.name, "--child-config", json.dumps({**cfg, "budget_s": budget_s})]
    sides: dict[str, Any] = {}
    why = ""
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=timeout_s, check=False)
        stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        stderr = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        rc, why = None, f"timed out after {timeout_s:.0f} s"
    sys.stderr.write(stderr)
    for line in stdout.splitlines():
        if line.startswith(RESULT_MARK):
            d = json.loads(line[len(RESULT_MARK):])
            sides[d.pop("side")] = {k: v for k, v in d.items() if k != "case"}
    if not why and rc != 0:
        last = [ln for ln in stderr.splitlines() if ln.strip()][-1:] or [""]
        why = f"the case's process exited with status {rc} ({last[0][:150]})"
    out = _skipped(case, cfg, why or "no result", status="error")
    out.update(sides)
    return out


def _skipped(case: Case, cfg: dict[str, Any], why: str, status: str = "n/a") -> dict[str, Any]:
    batch = cfg["batches"].get(case.name, case.tiny_batch if cfg["tiny"] else case.batch)
    out: dict[str, Any] = {"case": case.name, "unit": case.unit, "batch": batch, "doc": case.doc}
    for name in ("torch", "ember"):
        out[name] = Side(status=status, message=why).__dict__
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--tiny", action="store_true", help="tiny sizes (the CPU dry run)")
    ap.add_argument("--quick", action="store_true", help="a ~60 s budget, fewer warm-up steps")
    ap.add_argument("--budget", type=float, default=None,
                    help="seconds for all cases together (default 150; 60 with --quick)")
    ap.add_argument("--hard-limit", type=float, default=None,
                    help="seconds after which no case starts and a running one is stopped "
                         "(default: 1.4 x budget + 30)")
    ap.add_argument("--filter", action="append", default=[],
                    help="cases whose name contains this (repeatable)")
    ap.add_argument("--batch", action="append", default=[], metavar="CASE=N",
                    help="another batch for a case, e.g. --batch vgg19=32 (repeatable)")
    ap.add_argument("--tf32", action="store_true", help="allow TF32 in both frameworks")
    ap.add_argument("--ember-sdp", default="default", choices=("default", "math", "fused"),
                    help="ember's attention on one path only (torch unchanged)")
    ap.add_argument("--ember-switch", action="append", default=[], metavar="NAME=0|1",
                    help="ember._C_cuda._set_NAME(bool) before the run, e.g. "
                         "depthwise_native=0 (repeatable; torch unchanged)")
    ap.add_argument("--no-torch", action="store_true", help="ember only")
    ap.add_argument("--in-process", action="store_true",
                    help="run the cases in this process (default on the CPU; on CUDA each case "
                         "runs in its own process)")
    ap.add_argument("--isolate", action="store_true",
                    help="one process per case on the CPU too (the CUDA default)")
    ap.add_argument("--json", default=str(DEFAULT_JSON), help="where the results go ('-': none)")
    ap.add_argument("--list", action="store_true", help="list the cases")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-config", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        cfg = json.loads(args.child_config)
        return _child(args.child, cfg, cfg.pop("budget_s"))

    cases = [c for c in CASES
             if not args.filter or any(f.lower() in c.name.lower() for f in args.filter)]
    if args.list:
        for c in cases:
            print(f"{c.name:18s} batch {c.batch:6d}  {c.doc}")
        return 0
    if not cases:
        print(f"no case matches {args.filter}", file=sys.stderr)
        return 2
    batches: dict[str, int] = {}
    for spec in args.batch:
        name, _, n = spec.rpartition("=")
        if not name or not n.isdigit() or not any(c.name == name for c in CASES):
            ap.error(f"--batch {spec!r}: expected CASE=N with CASE one of {[c.name for c in CASES]}")
        batches[name] = int(n)
    switches: dict[str, bool] = {}
    for spec in args.ember_switch:
        name, _, v = spec.partition("=")
        if not name.isidentifier() or v not in ("0", "1"):
            ap.error(f"--ember-switch {spec!r}: expected NAME=0 or NAME=1")
        switches[name] = v == "1"
    budget = args.budget if args.budget is not None else (60.0 if args.quick else 150.0)
    if args.tiny:
        budget = min(budget, 2.0 * len(cases))
    cfg = {"device": args.device, "tiny": args.tiny, "batches": batches, "tf32": args.tf32,
           "ember_sdp": args.ember_sdp, "switches": switches,
           "no_torch": args.no_torch,
           "warmup": 1 if args.tiny else (2 if args.quick else 3),
           "max_samples": 2 if args.tiny else (3 if args.quick else 7),
           "sample_s": 0.05 if args.tiny else 0.25}
    isolate = args.isolate or (args.device == "cuda" and not args.in_process)

    meta = _meta(args.device, not args.no_torch) if not isolate else {}
    t_begin = time.perf_counter()
    print(f"GPU training throughput, ember vs torch ({args.device}"
          f"{', tiny sizes' if args.tiny else ''}; budget {budget:.0f} s; TF32 "
          f"{'on' if args.tf32 else 'off'}; ember/torch = throughput ratio, target >= "
          f"{THROUGHPUT_TARGET}; memory target <= {MEMORY_TARGET}x"
          + "".join(f"; ember {k}={int(v)}" for k, v in switches.items())
          + (f"; ember sdp {args.ember_sdp}" if args.ember_sdp != "default" else "")
          + ")\n", flush=True)
    print(HEADER, flush=True)
    hard = args.hard_limit if args.hard_limit is not None else 1.4 * budget + 30
    rows = []
    for i, case in enumerate(cases):
        elapsed = time.perf_counter() - t_begin
        share = max((budget - elapsed) / (len(cases) - i), 0.0)
        if isolate and hard - elapsed < 15:
            row = _skipped(case, cfg, f"not run: the {hard:.0f} s limit (--hard-limit) was "
                                      "reached")
        elif isolate:
            timeout = min(max(60.0, 3 * share) + 30, hard - elapsed)
            row = _run_isolated(case, cfg, share, timeout_s=timeout)
        else:
            row = run_case(case, cfg, share)
        row["judged"] = args.device == "cuda" and not args.tiny
        summarize(row)
        rows.append(row)
        print(table_row(row), flush=True)
        if args.json != "-":
            Path(args.json).write_text(json.dumps({"meta": meta, "cases": rows}, indent=1))
    if isolate:
        meta = _meta(args.device, not args.no_torch)  # after the children: this process never held the GPU
    meta["seconds"] = round(time.perf_counter() - t_begin, 1)
    meta["budget_s"] = budget
    meta["tf32"] = args.tf32
    print()
    print("- " + ", ".join(f"{k}: {v}" for k, v in meta.items()))
    for row in rows:
        e, t = row["ember"], row["torch"]
        line = f"- {row['case']} (batch {row['batch']}): {row['doc']}"
        for name, side in (("ember", e), ("torch", t)):
            if side["status"] == "ok":
                line += (f"; {name} {side['step_s'] * 1e3:.1f} ms/step (median of "
                         f"{len(side['samples_s'])} x {side['steps_per_sample']} steps)")
            elif side["message"]:
                line += f"; {name}: {side['message']}"
        print(line)
    nvml = {side["message"] for row in rows for side in (row["ember"], row["torch"])
            if side["status"] == "ok" and side["message"]}
    if nvml:
        print(f"- GPU busy n/a: {'; '.join(sorted(nvml))}")
    if args.tiny:
        print("- tiny sizes: the descriptions above are the full run's; these throughputs mean "
              "nothing")
    print("- ember/torch: ember's throughput over torch's (>= 0.9 met); peak memory: "
          "max_memory_allocated over the timed steps; GPU busy: NVML utilization.gpu during "
          "them; loss0: the first step's loss (ember starts from torch's initial weights; "
          "dropout draws differ)")
    if args.json != "-":
        Path(args.json).write_text(json.dumps({"meta": meta, "cases": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
