"""ember.distributed.fsdp.FullyShardedDataParallel on 2 spawned ranks over the shm backend.

Each rank trains on its half of every batch; the ground truth is single-process training of the
same (plain) module on the whole batch, in this process: averaged gradients make the two the
same to float tolerance. Covered: each sharding strategy, nested auto-wrap (module classes,
transformer layers, size-based), use_orig_params, tied weights, bf16 mixed precision with fp32
reduction, full / local state dicts and their round trips, optimizer state dicts,
clip_grad_norm_, no_sync accumulation, summon_full_params and what a rank holds in memory
outside forward and backward. All scenarios run in one pair of processes (a module fixture)
under one timeout; when torch is installed its FSDP (gloo, CPU) runs the basic scenarios in the
same processes and must agree too (EMBER_FSDP_TORCH=0 leaves it out)."""

from __future__ import annotations

import functools
import os
import traceback
from datetime import timedelta
from typing import Any, Callable

import ember
import ember.distributed as dist
import numpy as np
import pytest
from dist_helpers import run_ranks
from ember import nn
from ember.distributed.fsdp import (
    CPUOffload,
    FullStateDictConfig,
    LocalStateDictConfig,
    MixedPrecision,
    ShardingStrategy,
    StateDictType,
)
from ember.distributed.fsdp import FullyShardedDataParallel as FSDP
from ember.distributed.fsdp.wrap import (
    CustomPolicy,
    ModuleWrapPolicy,
    enable_wrap,
    lambda_auto_wrap_policy,
    size_based_auto_wrap_policy,
    transformer_auto_wrap_policy,
    wrap,
)

TIMEOUT = 300.0  # all scenarios, both ranks (a hang fails the fixture instead of blocking)
WORLD = 2
STEPS = 3
BATCH = 8  # rows per step; each rank gets BATCH // WORLD


# ---- models, data and training shared by the ranks and the reference ---------------------------
def _mlp(nn_: Any = nn) -> Any:
    # 56 + 72 + 27 parameters: the last unit's 27 do not divide evenly (padding)
    return nn_.Sequential(nn_.Linear(6, 8), nn_.Tanh(), nn_.Linear(8, 8), nn_.Tanh(),
                          nn_.Linear(8, 3))


class Block(nn.Module):
    """A pre-norm transformer layer."""

    def __init__(self) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(8)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.ln2 = nn.LayerNorm(8)
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 8)

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.fc2(ember.nn.functional.gelu(self.fc1(self.ln2(x))))


class TinyLM(nn.Module):
    """Embedding, two blocks, a head tied to the embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(11, 8)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.ln_f = nn.LayerNorm(8)
        self.head = nn.Linear(8, 11, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, tokens: ember.Tensor) -> ember.Tensor:
        x = self.emb(tokens)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def _init(model: Any, seed: int = 0) -> Any:
    """Deterministic parameters from NumPy (the same for every framework)."""
    rng = np.random.default_rng(seed)
    seen = set()
    with ember.no_grad():
        for _, p in model.named_parameters():
            if id(p) in seen:
                continue
            seen.add(id(p))
            v = (0.3 * rng.standard_normal(tuple(p.shape))).astype(np.float32)
            p.copy_(ember.from_numpy(v).to(p.dtype))
    return model


def _batch(kind: str, step: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(100 + step)
    if kind == "mlp":
        return (rng.standard_normal((BATCH, 6)).astype(np.float32),
                rng.standard_normal((BATCH, 3)).astype(np.float32))
    return rng.integers(0, 11, (BATCH, 5)), rng.integers(0, 11, (BATCH, 5))


def _loss(model: Any, kind: str, x: np.ndarray, y: np.ndarray) -> ember.Tensor:
    F = ember.nn.functional
    if kind == "mlp":
        out = model(ember.from_numpy(x))
        return F.mse_loss(out.float(), ember.from_numpy(y))
    logits = model(ember.from_numpy(x))
    return F.cross_entropy(logits.float().reshape(-1, 11), ember.from_numpy(y).reshape(-1))


def _rows(a: np.ndarray, rank: int | None, lo: int = 0, hi: int = BATCH) -> np.ndarray:
    """Rows [lo, hi) of a batch, and of those this rank's half (all of them for None)."""
    a = a[lo:hi]
    if rank is None:
        return a
    n = len(a) // WORLD
    return a[rank * n:(rank + 1) * n]


def _train(model: Any, opt: Any, kind: str, rank: int | None, clip: float | None = None,
           steps: int = STEPS, accumulate: bool = False) -> list[float]:
    """``steps`` optimizer steps on the batches; ``rank``: this rank's half (None: whole).
    ``clip``: clip_grad_norm_ (FSDP's own on an FSDP model); returns the norms.
    ``accumulate``: two half-batch backward passes per step (the first under no_sync)."""
    norms = []
    for step in range(steps):
        x, y = _batch(kind, step)
        if accumulate:
            for part, (lo, hi) in enumerate(((0, BATCH // 2), (BATCH // 2, BATCH))):
                no_sync = isinstance(model, FSDP) and part == 0
                ctx = model.no_sync() if no_sync else _null()
                with ctx:
                    (_loss(model, kind, _rows(x, rank, lo, hi), _rows(y, rank, lo, hi)) / 2
                     ).backward()
        else:
            _loss(model, kind, _rows(x, rank), _rows(y, rank)).backward()
        if clip is not None:
            if isinstance(model, FSDP):
                norms.append(float(model.clip_grad_norm_(clip)))
            else:
                norms.append(float(ember.nn.utils.clip_grad_norm_(model.parameters(), clip)))
        opt.step()
        opt.zero_grad()
    return norms


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _np_state(sd: dict) -> dict[str, np.ndarray]:
    return {k: v.detach().float().cpu().numpy() for k, v in sd.items()}


def _sgd(params: Any) -> Any:
    return ember.optim.SGD(params, lr=0.1, momentum=0.9)


def _adam(params: Any) -> Any:
    return ember.optim.AdamW(params, lr=0.01)


# ---- the scenarios (each rank runs each; results go back to the test process) -----------------
def _strategy(rank: int, strategy: str, **kwargs: Any) -> dict:
    if kwargs.pop("own_group", False):
        kwargs["process_group"] = dist.new_group([0, 1])
    model = FSDP(_init(_mlp()), sharding_strategy=ShardingStrategy[strategy],
                 auto_wrap_policy=ModuleWrapPolicy({nn.Linear}), **kwargs)
    names = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
    _train(model, _sgd(model.parameters()), "mlp", rank)
    return {"state": _np_state(model.state_dict()), "names": names,
            "units": len(FSDP.fsdp_modules(model))}


def _orig_params(rank: int) -> dict:
    model = FSDP(_init(_mlp()), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}),
                 use_orig_params=True)
    names = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
    _train(model, _adam(model.parameters()), "mlp", rank)
    with FSDP.summon_full_params(model):
        inside = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
    return {"state": _np_state(model.state_dict()), "names": names, "inside": inside}


def _transformer(rank: int) -> dict:
    policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})
    model = FSDP(_init(TinyLM()), auto_wrap_policy=policy)
    units = [type(u.module).__name__ for u in FSDP.fsdp_modules(model)]
    # SGD: Adam would blow the attention's key-bias gradient (zero but for rounding) up to
    # full-size steps of noise
    _train(model, _sgd(model.parameters()), "lm", rank)
    return {"state": _np_state(model.state_dict()), "units": units}


def _size_policy(rank: int) -> dict:
    policy = functools.partial(size_based_auto_wrap_policy, min_num_params=50)
    model = FSDP(_init(_mlp()), auto_wrap_policy=policy)
    wrapped = [n for n, m in model.named_modules() if isinstance(m, FSDP)]
    with enable_wrap(wrapper_cls=FSDP, sharding_strategy=ShardingStrategy.SHARD_GRAD_OP):
        manual = FSDP(nn.Sequential(wrap(_init(_mlp())), nn.Linear(3, 2)))
    _train(model, _sgd(model.parameters()), "mlp", rank)
    return {"wrapped": wrapped, "state": _np_state(model.state_dict()),
            "manual": [u.sharding_strategy.name for u in FSDP.fsdp_modules(manual)]}


def _mixed(rank: int, **mp_kwargs: Any) -> dict:
    mp_ = MixedPrecision(**{"param_dtype": ember.bfloat16, "reduce_dtype": ember.float32,
                            "buffer_dtype": ember.bfloat16, **mp_kwargs})
    model = FSDP(_init(_mlp()), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}),
                 mixed_precision=mp_)
    seen = {}
    inner = model.module[0].module

    def hook(mod: Any, args: Any, out: Any) -> None:
        seen["weight"] = str(mod.weight.dtype)
        seen["input"] = str(args[0].dtype)

    inner.register_forward_hook(hook)
    opt = _sgd(model.parameters())
    grads: dict[str, Any] = {}

    def step_hook(optimizer: Any, args: Any, kwargs: Any) -> None:
        grads.setdefault("flat", [(str(p.dtype), str(p.grad.dtype))
                                  for p in model.parameters()])

    opt.register_step_pre_hook(step_hook)
    _train(model, opt, "mlp", rank)
    flat = grads["flat"]
    return {"state": _np_state(model.state_dict()), "seen": seen, "flat": flat}


def _state_dicts(rank: int) -> dict:
    model = FSDP(_init(_mlp()), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    _train(model, _sgd(model.parameters()), "mlp", rank)
    cfg = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)
    with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):
        sd = model.state_dict()
    full = model.state_dict()  # the default: full, on every rank
    with FSDP.state_dict_type(model, StateDictType.LOCAL_STATE_DICT, LocalStateDictConfig()):
        local = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    # into a plain module and back into a fresh FSDP model (initialized differently)
    plain = _mlp()
    plain.load_state_dict(full)
    fresh = FSDP(_init(_mlp(), seed=5), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    fresh.load_state_dict(plain.state_dict())
    errors = []
    for what, fn in (("sharded", lambda: FSDP.state_dict_type(
            model, StateDictType.SHARDED_STATE_DICT).__enter__()),
            ("hybrid", lambda: FSDP(_mlp(), sharding_strategy=ShardingStrategy.HYBRID_SHARD))):
        try:
            fn()
            errors.append((what, None))
        except (NotImplementedError, ValueError) as e:
            errors.append((what, str(e)))
    return {"rank0_only": _np_state(sd), "full": _np_state(full), "local": local,
            "plain": _np_state(plain.state_dict()), "fresh": _np_state(fresh.state_dict()),
            "errors": errors}


def _same_state(a: dict, b: dict) -> bool:
    return sorted(a) == sorted(b) and all(
        bool((a[k] == b[k]).all()) if isinstance(a[k], ember.Tensor) else a[k] == b[k]
        for k in a)


def _optim_state(rank: int, use_orig_params: bool = False) -> dict:
    def build(seed: int) -> Any:
        return FSDP(_init(_mlp(), seed=seed), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}),
                    use_orig_params=use_orig_params)

    model = build(0)
    opt = _adam(model.parameters())
    _train(model, opt, "mlp", rank, steps=2)
    osd = FSDP.optim_state_dict(model, opt)
    state = {k: {s: (v.numpy() if isinstance(v, ember.Tensor) else v) for s, v in st.items()}
             for k, st in osd["state"].items()}
    # a fresh model + optimizer continue from the saved states
    fresh = build(5)
    fresh.load_state_dict(model.state_dict())
    fopt = _adam(fresh.parameters())
    fopt.load_state_dict(FSDP.optim_state_dict_to_load(fresh, fopt, osd))
    # the older API: rank 0 alone holds the full state, scattered to the ranks
    full = FSDP.full_optim_state_dict(model, opt)
    scattered = FSDP.scatter_full_optim_state_dict(full if rank == 0 else None, fresh,
                                                   optim=fopt)
    legacy = {"rank0_has_state": bool(full) if rank == 0 else not full,
              "same": bool(scattered["state"]) and all(_same_state(a, b) for a, b in zip(
                  scattered["state"].values(),
                  FSDP.optim_state_dict_to_load(fresh, fopt, osd)["state"].values()))}
    x, y = _batch("mlp", 7)
    for m, o in ((model, opt), (fresh, fopt)):
        _loss(m, "mlp", _rows(x, rank), _rows(y, rank)).backward()
        o.step()
        o.zero_grad()
    return {"state": state, "groups": osd["param_groups"], "legacy": legacy,
            "continued": _np_state(model.state_dict()),
            "fresh_continued": _np_state(fresh.state_dict())}


def _clip(rank: int) -> dict:
    out = {}
    for strategy in ("FULL_SHARD", "NO_SHARD"):
        model = FSDP(_init(_mlp()), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}),
                     sharding_strategy=ShardingStrategy[strategy])
        norms = _train(model, _sgd(model.parameters()), "mlp", rank, clip=0.5)
        out[strategy] = {"norms": norms, "state": _np_state(model.state_dict())}
    return out


def _clip_inf_norm(rank: int) -> list[float]:
    model = FSDP(_init(_mlp()), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    x, y = _batch("mlp", 0)
    _loss(model, "mlp", _rows(x, rank), _rows(y, rank)).backward()
    return [float(model.clip_grad_norm_(1e9, norm_type=float("inf")))]


def _no_sync(rank: int) -> dict:
    model = FSDP(_init(_mlp()), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    opt = _sgd(model.parameters())
    # no communication inside no_sync: the shard gradients stay None until the synced pass
    x, y = _batch("mlp", 0)
    with model.no_sync():
        _loss(model, "mlp", _rows(x, rank), _rows(y, rank)).backward()
    none_inside = all(p.grad is None for p in model.parameters())
    opt.zero_grad()
    for u in FSDP.fsdp_modules(model):
        if u._handle is not None:
            u._handle._pending_grad = None
    _train(model, opt, "mlp", rank, accumulate=True)
    return {"state": _np_state(model.state_dict()), "none_inside": none_inside}


def _memory(rank: int) -> dict:
    out: dict[str, Any] = {}
    for strategy in ("FULL_SHARD", "SHARD_GRAD_OP"):
        model = FSDP(_init(_mlp()), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}),
                     sharding_strategy=ShardingStrategy[strategy],
                     cpu_offload=CPUOffload(offload_params=True))
        units = FSDP.fsdp_modules(model)
        handles = [u._handle for u in units if u._handle is not None]
        during = []

        def hook(mod: Any, args: Any, out_: Any) -> None:
            during.append([h.is_gathered() for h in handles])

        model.module[4].module.register_forward_hook(hook)
        info: dict[str, Any] = {
            "storages": [h.flat.untyped_storage().nbytes() for h in handles],
            "shards": [h.shard_numel * 4 for h in handles],
            "numels": [h.numel for h in handles],
        }
        x, y = _batch("mlp", 0)
        loss = _loss(model, "mlp", _rows(x, rank), _rows(y, rank))
        info["after_forward"] = [h.is_gathered() for h in handles]
        loss.backward()
        info["after_backward"] = [h.is_gathered() for h in handles]
        info["during"] = during
        info["attrs"] = [str(model.module[i].module.weight.device) for i in (0, 2, 4)]
        info["grads"] = [tuple(p.grad.shape) for p in model.parameters()]
        info["storages_after"] = [h.flat.untyped_storage().nbytes() for h in handles]
        out[strategy] = info
    return out


def _summon(rank: int) -> dict:
    model = FSDP(_init(_mlp()), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    with FSDP.summon_full_params(model):
        names = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
        with ember.no_grad():
            model.module[0].module.weight.add_(1.0)  # written back
    with FSDP.summon_full_params(model, writeback=False):
        with ember.no_grad():
            model.module[2].module.bias.add_(1.0)  # not written back
    with FSDP.summon_full_params(model, rank0_only=True, writeback=False):
        shape0 = tuple(model.module[0].module.weight.shape)
    state = _np_state(model.state_dict())
    x, y = _batch("mlp", 0)
    _loss(model, "mlp", _rows(x, rank), _rows(y, rank)).backward()
    with FSDP.summon_full_params(model, with_grads=True, writeback=False):
        grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
    return {"names": names, "state": state, "shape0": shape0, "grads": grads}


def _init_options(rank: int) -> dict:
    # sync_module_states: rank 0's parameters win over each rank's own initialization
    synced = FSDP(_init(_mlp(), seed=rank), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}),
                  sync_module_states=True)
    # a module built on the meta device, materialized by param_init_fn
    with ember.device("meta"):
        meta = _mlp()
    built = FSDP(meta, param_init_fn=lambda m: _init(m.to_empty(device="cpu")))
    # an ignored module keeps its own, unsharded parameters
    model = _init(_mlp())
    ignored = FSDP(model, ignored_modules=[model[4]])
    names = [(n, tuple(p.shape)) for n, p in ignored.named_parameters()]
    # eval: a forward without grad frees what it gathered
    with ember.no_grad():
        synced(ember.ones(2, 6))
    gathered = [u._handle.is_gathered() for u in FSDP.fsdp_modules(synced)
                if u._handle is not None]
    return {"synced": _np_state(synced.state_dict()), "built": _np_state(built.state_dict()),
            "names": names, "gathered_after_eval": gathered}


class TwiceNet(nn.Module):
    """One layer applied twice, and a layer that forward never uses."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(6, 6)
        self.unused = nn.Linear(6, 6)
        self.head = nn.Linear(6, 3)

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        return self.head(ember.tanh(self.a(ember.tanh(self.a(x)))))


def _twice(rank: int) -> dict:
    model = FSDP(_init(TwiceNet()), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    _train(model, _sgd(model.parameters()), "mlp", rank)
    unused = model.module.unused._handle.flat.grad
    return {"state": _np_state(model.state_dict()), "unused_grad": unused is None}


def _frozen_mlp() -> Any:
    model = _init(_mlp())
    model[0].requires_grad_(False)  # a frozen first layer in the same unit as trainable ones
    return model


def _frozen(rank: int) -> dict:
    try:
        FSDP(_frozen_mlp())
        refused = None
    except ValueError as e:
        refused = str(e)
    model = FSDP(_frozen_mlp(), use_orig_params=True)
    opt = _sgd([p for p in model.parameters() if p.requires_grad])
    _train(model, opt, "mlp", rank)
    grads = [(n, p.grad is None) for n, p in model.named_parameters() if not p.requires_grad]
    return {"state": _np_state(model.state_dict()), "refused": refused, "frozen_grads": grads}


def _extras(rank: int) -> dict:
    out: dict[str, Any] = {}
    lam = functools.partial(lambda_auto_wrap_policy,
                            lambda_fn=lambda m: isinstance(m, nn.Linear) and m.out_features == 8)
    model = FSDP(_init(_mlp()), auto_wrap_policy=lam)
    out["lambda"] = [n for n, m in model.named_modules() if isinstance(m, FSDP)]
    custom = CustomPolicy(lambda m: {"sharding_strategy": ShardingStrategy.NO_SHARD}
                          if isinstance(m, nn.Linear) and m.out_features == 3 else False)
    model = FSDP(_init(_mlp()), auto_wrap_policy=custom)
    out["custom"] = [u.sharding_strategy.name for u in FSDP.fsdp_modules(model)]
    # use_orig_params with no_sync accumulation and clipping
    model = FSDP(_init(_mlp()), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}),
                 use_orig_params=True)
    out["norms"] = _train(model, _sgd(model.parameters()), "mlp", rank, clip=0.5,
                          accumulate=True)
    out["state"] = _np_state(model.state_dict())
    # a second backward through a retained graph gathers the freed parameters again
    model = FSDP(_init(_mlp()), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    x, y = _batch("mlp", 0)
    loss = _loss(model, "mlp", _rows(x, rank), _rows(y, rank))
    loss.backward(retain_graph=True)
    first = [p.grad.clone() for p in model.parameters()]
    loss.backward()
    # apply() runs on the full parameters and keeps what it wrote

    def init(m: Any) -> None:
        if isinstance(m, nn.Linear):
            ember.nn.init.constant_(m.weight, 0.25)

    applied = FSDP(_init(_mlp()), auto_wrap_policy=ModuleWrapPolicy({nn.Linear})).apply(init)
    out["applied"] = {k: v.tolist() for k, v in _np_state(applied.state_dict()).items()
                      if k.endswith("weight")}
    # a parameter shared across units is refused
    try:
        FSDP(TinyLM(), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
        out["shared"] = None
    except ValueError as e:
        out["shared"] = str(e)
    out["retain_graph"] = all(bool(((p.grad - 2 * g).abs() < 1e-6).all())
                              for p, g in zip(model.parameters(), first))
    return out


class CkptNet(nn.Module):
    """Two residual blocks run under activation checkpointing, either around each block
    (``"around"``: around an FSDP unit) or inside it (``"inside"``)."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode
        self.blocks = nn.ModuleList([CkptBlock(mode), CkptBlock(mode)])
        self.head = nn.Linear(6, 3)

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        from ember.utils.checkpoint import checkpoint

        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=False) if self.mode == "around" else b(x)
        return self.head(x)


class CkptBlock(nn.Module):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode
        self.fc1 = nn.Linear(6, 12)
        self.fc2 = nn.Linear(12, 6)

    def _mlp(self, x: ember.Tensor) -> ember.Tensor:
        return self.fc2(ember.tanh(self.fc1(x)))

    def forward(self, x: ember.Tensor) -> ember.Tensor:
        from ember.utils.checkpoint import checkpoint

        if self.mode == "inside":
            return x + checkpoint(self._mlp, x, use_reentrant=False)
        return x + self._mlp(x)


def _checkpointing(rank: int) -> dict:
    out = {}
    for mode in ("around", "inside"):
        model = FSDP(_init(CkptNet(mode)), auto_wrap_policy=ModuleWrapPolicy({CkptBlock}))
        _train(model, _sgd(model.parameters()), "mlp", rank, steps=2)
        out[mode] = _np_state(model.state_dict())
    return out


def _grad_scaler(rank: int) -> dict:
    from ember.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    model = FSDP(_init(_mlp()), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    scaler = ShardedGradScaler("cpu", init_scale=16.0, growth_interval=1)
    scales, states = [], []
    for step in range(2):
        x, y = _batch("mlp", step)
        scaler.scale(_loss(model, "mlp", _rows(x, rank), _rows(y, rank))).backward()
        if step == 1 and rank == 1:  # an overflow on one rank only: every rank skips
            with ember.no_grad():
                next(iter(model.parameters())).grad[0] = float("inf")
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        scales.append(scaler.get_scale())
        states.append(_np_state(model.state_dict()))
    return {"scales": scales, "states": states}


SCENARIOS: dict[str, Callable] = {
    "full_shard": functools.partial(_strategy, strategy="FULL_SHARD"),
    "shard_grad_op": functools.partial(_strategy, strategy="SHARD_GRAD_OP"),
    "no_shard": functools.partial(_strategy, strategy="NO_SHARD"),
    "shard_grad_op_orig": functools.partial(_strategy, strategy="SHARD_GRAD_OP",
                                            use_orig_params=True),
    "no_shard_orig": functools.partial(_strategy, strategy="NO_SHARD", use_orig_params=True),
    "own_group": functools.partial(_strategy, strategy="FULL_SHARD", own_group=True),
    "orig_params": _orig_params,
    "transformer": _transformer,
    "size_policy": _size_policy,
    "mixed": _mixed,
    "mixed_low_grads": functools.partial(_mixed, reduce_dtype=ember.bfloat16,
                                         keep_low_precision_grads=True),
    "state_dicts": _state_dicts,
    "optim_state": _optim_state,
    "optim_state_orig": functools.partial(_optim_state, use_orig_params=True),
    "clip": _clip,
    "clip_inf": _clip_inf_norm,
    "no_sync": _no_sync,
    "memory": _memory,
    "summon": _summon,
    "init_options": _init_options,
    "extras": _extras,
    "checkpointing": _checkpointing,
    "grad_scaler": _grad_scaler,
    "twice": _twice,
    "frozen": _frozen,
}


# ---- torch's FSDP (gloo, CPU) on the same scenarios, when installed ----------------------------
def _torch_strategy(rank: int, strategy: str, mixed: bool = False) -> dict[str, np.ndarray]:
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel as TFSDP
    from torch.distributed.fsdp import MixedPrecision as TMP
    from torch.distributed.fsdp import ShardingStrategy as TS
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy as TPolicy

    plain = _mlp(torch.nn)
    rng = np.random.default_rng(0)
    with torch.no_grad():
        for p in plain.parameters():
            p.copy_(torch.from_numpy((0.3 * rng.standard_normal(tuple(p.shape)))
                                     .astype(np.float32)))
    mp_ = TMP(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed else None
    model = TFSDP(plain, sharding_strategy=TS[strategy], auto_wrap_policy=TPolicy({torch.nn.Linear}),
                  mixed_precision=mp_, device_id=torch.device("cpu"))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(STEPS):
        x, y = _batch("mlp", step)
        out = model(torch.from_numpy(_rows(x, rank)))
        torch.nn.functional.mse_loss(out.float(), torch.from_numpy(_rows(y, rank))).backward()
        opt.step()
        opt.zero_grad()
    return {k: v.float().numpy() for k, v in model.state_dict().items()}


TORCH_SCENARIOS: dict[str, Callable] = {
    "full_shard": functools.partial(_torch_strategy, strategy="FULL_SHARD"),
    "shard_grad_op": functools.partial(_torch_strategy, strategy="SHARD_GRAD_OP"),
    "no_shard": functools.partial(_torch_strategy, strategy="NO_SHARD"),
    "mixed": functools.partial(_torch_strategy, strategy="FULL_SHARD", mixed=True),
}


def _torch_available() -> bool:
    if os.environ.get("EMBER_FSDP_TORCH", "1") == "0":
        return False
    try:
        import torch.distributed.fsdp  # noqa: F401
    except ImportError:
        return False
    return True


def _worker(rank: int, init: str, torch_port: int | None, conn: Any) -> None:
    results: dict[str, Any] = {}
    try:
        dist.init_process_group("shm", init_method=init, rank=rank, world_size=WORLD,
                                timeout=timedelta(seconds=60))
        for name, fn in SCENARIOS.items():
            try:
                results[name] = ("ok", fn(rank))
            except BaseException:  # noqa: BLE001  (reported by the scenario's test)
                results[name] = ("err", traceback.format_exc())
                break  # the ranks may be out of step now
        dist.destroy_process_group()
        if torch_port is not None:
            # torch's failures are reported by test_matches_torch_fsdp alone
            try:
                import torch.distributed as tdist

                tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{torch_port}",
                                         rank=rank, world_size=WORLD,
                                         timeout=timedelta(seconds=60))
                for name, fn in TORCH_SCENARIOS.items():
                    results["torch:" + name] = ("ok", fn(rank))
                tdist.destroy_process_group()
            except BaseException:  # noqa: BLE001
                for name in TORCH_SCENARIOS:
                    results.setdefault("torch:" + name, ("err", traceback.format_exc()))
        conn.send(("ok", results))
    except BaseException:  # noqa: BLE001
        conn.send(("err", traceback.format_exc()))


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> list[dict]:
    tmp = tmp_path_factory.mktemp("fsdp")
    torch_port = None
    if _torch_available():
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            torch_port = s.getsockname()[1]
    return run_ranks(_worker, WORLD, (f"file://{tmp / 'store'}", torch_port), TIMEOUT)


def _get(results: list[dict], name: str) -> list[Any]:
    """The scenario's result on each rank (failing with the rank's traceback)."""
    values = []
    for r, res in enumerate(results):
        if name not in res:
            pytest.fail(f"scenario {name} did not run on rank {r} (an earlier one failed)")
        status, value = res[name]
        if status == "err":
            pytest.fail(f"rank {r}:\n{value}")
        values.append(value)
    return values


# ---- the single-process references -------------------------------------------------------------
@functools.cache
def _reference(kind: str, optim: str, clip: float | None = None,
               steps: int = STEPS) -> tuple[dict[str, np.ndarray], list[float]]:
    model = _init(_mlp() if kind == "mlp" else TinyLM())
    opt = (_sgd if optim == "sgd" else _adam)(model.parameters())
    norms = _train(model, opt, kind, None, clip=clip, steps=steps)
    return _np_state(model.state_dict()), norms


def _assert_state(got: dict, want: dict, tol: float = 1e-5, what: str = "") -> None:
    assert sorted(got) == sorted(want), f"{what}: keys {sorted(got)} != {sorted(want)}"
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=tol, atol=tol, err_msg=f"{what} {k}")


# ---- tests ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["full_shard", "shard_grad_op", "no_shard",
                                  "shard_grad_op_orig", "no_shard_orig", "own_group"])
def test_strategy_matches_single_process_training(results, name):
    want, _ = _reference("mlp", "sgd")
    for r, res in enumerate(_get(results, name)):
        _assert_state(res["state"], want, what=f"{name} rank {r}")
        assert res["units"] == 4  # the root and the three Linear layers


def test_flat_parameters_are_padded_shards(results):
    # Linear(6, 8): 56 -> 28 per rank; Linear(8, 8): 72 -> 36; Linear(8, 3): 27 -> 14 (padded)
    prefix = "_fsdp_wrapped_module.{}._fsdp_wrapped_module._flat_param"
    names = [(prefix.format(i), s) for i, s in ((0, (28,)), (2, (36,)), (4, (14,)))]
    assert _get(results, "full_shard")[0]["names"] == names
    assert _get(results, "no_shard")[0]["names"] == [(n, (m,)) for (n, _), m in
                                                     zip(names, (56, 72, 27))]


def test_use_orig_params_names_and_training(results):
    want, _ = _reference("mlp", "adam")
    res0, res1 = _get(results, "orig_params")
    for r, res in enumerate((res0, res1)):
        _assert_state(res["state"], want, what=f"orig_params rank {r}")
    prefix = "_fsdp_wrapped_module.{}._fsdp_wrapped_module.{}"
    # each rank's 1-D part of each parameter: Linear(6, 8) = 48 weights + 8 biases, 28 each
    assert res0["names"][:2] == [(prefix.format(0, "weight"), (28,)),
                                 (prefix.format(0, "bias"), (0,))]
    assert res1["names"][:2] == [(prefix.format(0, "weight"), (20,)),
                                 (prefix.format(0, "bias"), (8,))]
    assert res0["inside"] == [("0.weight", (8, 6)), ("0.bias", (8,)), ("2.weight", (8, 8)),
                              ("2.bias", (8,)), ("4.weight", (3, 8)), ("4.bias", (3,))]


def test_tiny_transformer_with_tied_weights(results):
    want, _ = _reference("lm", "sgd")
    for r, res in enumerate(_get(results, "transformer")):
        assert res["units"] == ["TinyLM", "Block", "Block"]
        _assert_state(res["state"], want, tol=2e-5, what=f"transformer rank {r}")
        np.testing.assert_array_equal(res["state"]["emb.weight"], res["state"]["head.weight"])


def test_size_based_policy_and_manual_wrap(results):
    want, _ = _reference("mlp", "sgd")
    res = _get(results, "size_policy")[0]
    # 56 and 72 parameters reach min_num_params=50, the last Linear's 27 stay in the root
    assert res["wrapped"] == ["", "_fsdp_wrapped_module.0", "_fsdp_wrapped_module.2"]
    _assert_state(res["state"], want, what="size policy")
    assert res["manual"] == ["FULL_SHARD", "SHARD_GRAD_OP"]


def test_mixed_precision_close_to_fp32(results):
    want, _ = _reference("mlp", "sgd")
    for r, res in enumerate(_get(results, "mixed")):
        # bf16 parameters in forward (8 bits of mantissa): 3 steps stay within 3e-3
        _assert_state(res["state"], want, tol=3e-3, what=f"mixed rank {r}")
        assert res["seen"] == {"weight": "ember.bfloat16", "input": "ember.bfloat16"}
        # the sharded parameters and the gradients the optimizer sees stay fp32
        assert res["flat"] == [("ember.float32", "ember.float32")] * 3
    diff = max(np.abs(res["state"][k] - want[k]).max() for k in want)
    assert diff > 0  # it did run in bf16


def test_keep_low_precision_grads(results):
    want, _ = _reference("mlp", "sgd")
    for r, res in enumerate(_get(results, "mixed_low_grads")):
        # the optimizer sees the bf16 reduced gradients beside its fp32 shards
        assert res["flat"] == [("ember.float32", "ember.bfloat16")] * 3
        _assert_state(res["state"], want, tol=1e-2, what=f"low-precision grads rank {r}")


def test_full_state_dict_round_trip(results):
    want, _ = _reference("mlp", "sgd")
    res0, res1 = _get(results, "state_dicts")
    _assert_state(res0["rank0_only"], want, what="rank0_only on rank 0")
    assert res1["rank0_only"] == {}
    for r, res in enumerate((res0, res1)):
        _assert_state(res["full"], want, what=f"full rank {r}")
        _assert_state(res["plain"], res["full"], tol=0, what=f"plain module rank {r}")
        _assert_state(res["fresh"], res["full"], tol=0, what=f"fresh FSDP rank {r}")
    assert res0["local"] == {
        "_fsdp_wrapped_module.0._fsdp_wrapped_module._flat_param": (28,),
        "_fsdp_wrapped_module.2._fsdp_wrapped_module._flat_param": (36,),
        "_fsdp_wrapped_module.4._fsdp_wrapped_module._flat_param": (14,)}
    errors = dict(res0["errors"])
    assert "SHARDED_STATE_DICT" in errors["sharded"]
    # hybrid sharding without groups needs the launcher's node size (test_fsdp_hybrid.py)
    assert "HYBRID_SHARD" in errors["hybrid"] and "LOCAL_WORLD_SIZE" in errors["hybrid"]


@pytest.mark.parametrize("name", ["optim_state", "optim_state_orig"])
def test_optim_state_dict_matches_and_reloads(results, name):
    model = _init(_mlp())
    opt = _adam(model.parameters())
    _train(model, opt, "mlp", None, steps=2)
    ref = opt.state_dict()
    names = [n for n, _ in model.named_parameters()]
    for res in _get(results, name):
        assert sorted(res["state"]) == sorted(names)
        for i, n in enumerate(names):
            for k, v in ref["state"][i].items():
                np.testing.assert_allclose(np.asarray(res["state"][n][k]), v.numpy(),
                                           rtol=1e-5, atol=1e-6, err_msg=f"{n} {k}")
        assert res["groups"][0]["params"] == names
        assert res["groups"][0]["lr"] == 0.01
        _assert_state(res["fresh_continued"], res["continued"], tol=1e-6, what="continued")
        assert res["legacy"] == {"rank0_has_state": True, "same": True}


def test_clip_grad_norm_equals_unsharded_norm(results):
    want, ref_norms = _reference("mlp", "sgd", clip=0.5)
    for r, res in enumerate(_get(results, "clip")):
        for strategy in ("FULL_SHARD", "NO_SHARD"):
            np.testing.assert_allclose(res[strategy]["norms"], ref_norms, rtol=1e-5)
            _assert_state(res[strategy]["state"], want, what=f"clip {strategy} rank {r}")
    assert ref_norms[0] > 0.5  # the clipping did something


def test_clip_grad_norm_inf(results):
    model = _init(_mlp())
    x, y = _batch("mlp", 0)
    _loss(model, "mlp", x, y).backward()
    want = max(float(p.grad.abs().max()) for p in model.parameters())
    for got in _get(results, "clip_inf"):
        np.testing.assert_allclose(got, [want], rtol=1e-5)


def test_no_sync_accumulation_equals_one_big_step(results):
    want, _ = _reference("mlp", "sgd")
    for r, res in enumerate(_get(results, "no_sync")):
        assert res["none_inside"]
        _assert_state(res["state"], want, what=f"no_sync rank {r}")


@pytest.mark.parametrize("strategy", ["FULL_SHARD", "SHARD_GRAD_OP"])
def test_a_rank_holds_only_its_shard_outside_forward_and_backward(results, strategy):
    for res in _get(results, "memory"):
        info = res[strategy]
        assert info["numels"] == [56, 72, 27]
        assert info["storages"] == info["shards"] == [28 * 4, 36 * 4, 14 * 4]
        assert info["storages_after"] == info["shards"]
        assert info["grads"] == [(28,), (36,), (14,)]
        if strategy == "FULL_SHARD":
            # in the last layer's forward the earlier layers are freed already
            assert info["during"] == [[False, False, True]]
            # freed after forward (the root has no parameters of its own here)
            assert info["after_forward"] == [False, False, False]
        else:
            assert info["during"] == [[True, True, True]]
            assert info["after_forward"] == [True, True, True]  # kept until backward
        assert info["after_backward"] == [False, False, False]
        assert info["attrs"] == ["meta", "meta", "meta"]  # no data outside forward


def test_summon_full_params(results):
    want = _np_state(_init(_mlp()).state_dict())
    want["0.weight"] = want["0.weight"] + 1.0
    for res in _get(results, "summon"):
        assert res["names"] == [("0.weight", (8, 6)), ("0.bias", (8,)), ("2.weight", (8, 8)),
                                ("2.bias", (8,)), ("4.weight", (3, 8)), ("4.bias", (3,))]
        _assert_state(res["state"], want, tol=0, what="summon")
    ref = _init(_mlp())
    ref[0].weight.data.add_(1.0)
    x, y = _batch("mlp", 0)
    _loss(ref, "mlp", x, y).backward()
    for res in _get(results, "summon"):  # with_grads: the averaged full gradients
        for n, p in ref.named_parameters():
            np.testing.assert_allclose(res["grads"][n], p.grad.numpy(), rtol=1e-5, atol=1e-6)
    shapes = [res["shape0"] for res in _get(results, "summon")]
    assert shapes == [(8, 6), (8, 6)]  # placeholders keep the shapes on rank 1


@pytest.mark.parametrize("name", sorted(TORCH_SCENARIOS))
def test_matches_torch_fsdp(results, name):
    if not _torch_available():
        pytest.skip("torch.distributed.fsdp is not installed (or EMBER_FSDP_TORCH=0)")
    ours = _get(results, name)
    theirs = _get(results, "torch:" + name)
    tol = 1e-4 if name == "mixed" else 1e-5
    for r in range(WORLD):
        _assert_state(ours[r]["state"], theirs[r], tol=tol, what=f"{name} vs torch, rank {r}")


def test_wrap_policies_without_process_group():
    policy = functools.partial(size_based_auto_wrap_policy, min_num_params=10)
    assert policy(module=nn.Linear(3, 3), recurse=False, nonwrapped_numel=12)
    assert not policy(module=nn.ModuleList([nn.Linear(3, 3)]), recurse=False,
                      nonwrapped_numel=12)
    assert not policy(module=nn.MultiheadAttention(4, 2), recurse=True, nonwrapped_numel=80)
    t = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})
    assert t(module=Block(), recurse=False, nonwrapped_numel=0)
    assert not t(module=nn.Linear(2, 2), recurse=False, nonwrapped_numel=6)
    assert wrap(nn.Linear(2, 2)).__class__ is nn.Linear  # outside enable_wrap: unchanged


def test_sync_module_states_param_init_fn_ignored_modules(results):
    want = _np_state(_init(_mlp()).state_dict())
    for res in _get(results, "init_options"):
        _assert_state(res["synced"], want, tol=0, what="sync_module_states")
        _assert_state(res["built"], want, tol=0, what="param_init_fn")
        assert res["names"] == [("_fsdp_wrapped_module._flat_param", (64,)),
                                ("_fsdp_wrapped_module.4.weight", (3, 8)),
                                ("_fsdp_wrapped_module.4.bias", (3,))]
        assert res["gathered_after_eval"] == [False, False, False]


def test_lambda_and_custom_policies_orig_params_accumulation_retain_graph(results):
    want, ref_norms = _reference("mlp", "sgd", clip=0.5)
    for r, res in enumerate(_get(results, "extras")):
        assert res["lambda"] == ["", "_fsdp_wrapped_module.0", "_fsdp_wrapped_module.2"]
        assert res["custom"] == ["FULL_SHARD", "NO_SHARD"]
        np.testing.assert_allclose(res["norms"], ref_norms, rtol=1e-5)
        _assert_state(res["state"], want, what=f"orig params, no_sync, clip rank {r}")
        assert res["retain_graph"]
        assert "'emb.weight' is shared with a nested FSDP unit" in res["shared"]
        assert {k: np.unique(v).tolist() for k, v in res["applied"].items()} == {
            "0.weight": [0.25], "2.weight": [0.25], "4.weight": [0.25]}


def test_activation_checkpointing_around_and_inside_units(results):
    ref = _init(CkptNet("none"))
    _train(ref, _sgd(ref.parameters()), "mlp", None, steps=2)
    want = _np_state(ref.state_dict())
    for r, res in enumerate(_get(results, "checkpointing")):
        for mode in ("around", "inside"):
            _assert_state(res[mode], want, what=f"checkpoint {mode} rank {r}")


def test_sharded_grad_scaler_skips_on_every_rank(results):
    ref = _init(_mlp())
    _train(ref, ember.optim.SGD(ref.parameters(), lr=0.1), "mlp", None, steps=1)
    want = _np_state(ref.state_dict())
    for r, res in enumerate(_get(results, "grad_scaler")):
        assert res["scales"] == [32.0, 16.0]  # grown after the good step, backed off after
        _assert_state(res["states"][0], want, what=f"scaled step rank {r}")
        _assert_state(res["states"][1], res["states"][0], tol=0, what=f"skipped step rank {r}")


def test_unit_called_twice_and_unused_unit(results):
    ref = _init(TwiceNet())
    _train(ref, _sgd(ref.parameters()), "mlp", None)
    want = _np_state(ref.state_dict())
    for r, res in enumerate(_get(results, "twice")):
        _assert_state(res["state"], want, what=f"twice rank {r}")
        assert res["unused_grad"]  # no gradient, as for the plain module


def test_frozen_and_trainable_parameters_in_one_unit(results):
    ref = _frozen_mlp()
    _train(ref, _sgd([p for p in ref.parameters() if p.requires_grad]), "mlp", None)
    want = _np_state(ref.state_dict())
    for r, res in enumerate(_get(results, "frozen")):
        assert "uniform `requires_grad`" in res["refused"]  # use_orig_params=False
        _assert_state(res["state"], want, what=f"frozen rank {r}")
        assert [g for _, g in res["frozen_grads"]] == [True, True]
