"""PyTorch 2.13 names ember lacked (session 18): ``jit.script_if_tracing`` and the other small
``torch.jit`` entry points, ``autograd.set_multithreading_enabled`` /
``is_multithreading_enabled``, ``autograd``'s re-exports of the ``overrides`` helpers, and a
few top-level names of ported code (``TYPE_CHECKING``, ``SymInt``, ``legacy_contiguous_format``,
``cudnn_is_acceptable``, ``thread_safe_generator``, the removed ``matrix_rank``). Where torch is
installed each check runs on it too and both must agree."""

from __future__ import annotations

import importlib.util
import threading
import warnings

import ember
import pytest

_HAS_TORCH = importlib.util.find_spec("torch") is not None


def _libs() -> list:
    libs = [ember]
    if _HAS_TORCH:
        import torch

        libs.append(torch)
    return libs


def _same(scenario):
    results = [scenario(lib) for lib in _libs()]
    if len(results) == 2:
        assert results[0] == results[1], results
    return results[0]


# ---- jit -----------------------------------------------------------------------------------------
def test_script_if_tracing_runs_the_function_eagerly():
    def scenario(lib):
        calls = []

        @lib.jit.script_if_tracing
        def scale(x, k: float = 2.0):
            calls.append(k)
            return x * k

        out = scale(lib.tensor([1.0, 2.0]), k=3.0)
        return out.tolist(), calls, scale.__name__

    assert _same(scenario) == ([3.0, 6.0], [3.0], "scale")
    assert ember.jit.script_if_tracing(len) is len  # nothing to compile: the function itself


def test_script_if_tracing_inside_a_traced_module():
    def scenario(lib):
        @lib.jit.script_if_tracing
        def clamp_pos(x):
            return x.clamp(min=0)

        class Net(lib.nn.Module):
            def forward(self, x):
                return clamp_pos(x) + 1

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traced = lib.jit.trace(Net(), (lib.tensor([-1.0, 2.0]),))
        return traced(lib.tensor([-3.0, 4.0])).tolist()

    assert _same(scenario) == [1.0, 5.0]


def test_jit_small_entry_points():
    def scenario(lib):
        seen = []
        with lib.jit.optimized_execution(False):
            seen.append(1)
        with lib.jit.fuser("fuser1"):
            seen.append(2)
        with lib.jit.fuser("none"):
            seen.append(3)
        with pytest.raises(Exception, match="unrecognized fuser option"):
            with lib.jit.fuser("nvfuser-x"):
                pass
        with pytest.warns(UserWarning, match="Only works in script mode"):
            with lib.jit.strict_fusion():
                seen.append(4)
        return seen, lib.jit.onednn_fusion_enabled()

    assert _same(scenario) == ([1, 2, 3, 4], False)
    # torch's script_method makes a stub for ScriptModule's metaclass; ember's runs eagerly
    assert ember.jit.script_method(len) is len


def test_tracer_warning_is_a_warning_category():
    def scenario(lib):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            warnings.filterwarnings("ignore", category=lib.jit.TracerWarning)
            warnings.warn("shape", lib.jit.TracerWarning)
            warnings.warn("script", lib.jit.ScriptWarning)
        return ([str(w.message) for w in rec], issubclass(lib.jit.TracerWarning, Warning),
                callable(lib.jit.TracerWarning.ignore_lib_warnings))

    assert _same(scenario) == (["script"], True, True)


def test_jit_isinstance_checks_container_elements():
    from typing import Dict, List, Optional, Tuple, Union

    def scenario(lib):
        isin = lib.jit.isinstance
        t = lib.ones(1)
        checks = [
            isin([1, 2], List[int]), isin([1, "a"], List[int]), isin([1.0], List[int]),
            isin({"a": t}, Dict[str, lib.Tensor]), isin({"a": 1}, Dict[str, lib.Tensor]),
            isin(None, Optional[int]), isin(2, Optional[int]), isin("x", Optional[int]),
            isin((1, "a"), Tuple[int, str]), isin((1, 2), Tuple[int, str]),
            isin((1,), Tuple[int, str]), isin(1, Union[int, str]), isin(2.0, Union[int, str]),
            isin([[1], [2]], List[List[int]]), isin([t, None], List[Optional[lib.Tensor]]),
            isin(True, int), isin(t, lib.Tensor), isin([1], list[int]),
        ]
        with pytest.warns(UserWarning, match="inner type of a container is lost"):
            checks.append(isin([], List[str]))
        with pytest.raises(RuntimeError, match="without a contained type"):
            isin([1], list)
        return checks

    assert _same(scenario) == [True, False, False, True, False, True, True, False, True, False,
                               False, True, False, True, True, True, True, True, True]
    assert ember.jit.isinstance is not isinstance  # the builtin stays unshadowed in ember.jit


# ---- autograd ------------------------------------------------------------------------------------
def _grad_of_square(lib) -> list:
    x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    return x.grad.tolist()


def test_set_multithreading_enabled_as_function_and_context():
    def scenario(lib):
        ag = lib.autograd
        seen = [ag.is_multithreading_enabled()]
        with ag.set_multithreading_enabled(False):
            seen.append(ag.is_multithreading_enabled())
            seen.append(_grad_of_square(lib))  # backward on the calling thread, same result
            with ag.set_multithreading_enabled(True):
                seen.append(ag.is_multithreading_enabled())
            seen.append(ag.is_multithreading_enabled())
        seen.append(ag.is_multithreading_enabled())
        ag.set_multithreading_enabled(False)  # as a function: effective at once, stays
        seen.append(ag.is_multithreading_enabled())
        seen.append(_grad_of_square(lib))
        ag.set_multithreading_enabled(True)
        seen.append(ag.is_multithreading_enabled())
        return seen

    grads = [2.0, -4.0, 6.0]
    assert _same(scenario) == [True, False, grads, True, False, True, False, grads, True]


def test_set_multithreading_enabled_is_thread_local():
    def scenario(lib):
        ag = lib.autograd
        other = []
        with ag.set_multithreading_enabled(False):
            t = threading.Thread(target=lambda: other.append(ag.is_multithreading_enabled()))
            t.start()
            t.join()
            here = ag.is_multithreading_enabled()
        return other, here

    assert _same(scenario) == ([True], False)


def test_set_multithreading_enabled_as_decorator():
    def scenario(lib):
        ag = lib.autograd

        @ag.set_multithreading_enabled(False)
        def inside():
            return ag.is_multithreading_enabled(), _grad_of_square(lib)

        got = inside()
        ag.set_multithreading_enabled(True)  # torch leaves it off from the decoration on
        return got

    assert _same(scenario) == (False, [2.0, -4.0, 6.0])
    # ember restores the mode at decoration, as set_grad_enabled does in both libraries
    ember.autograd.set_multithreading_enabled(False)(lambda: None)
    assert ember.autograd.is_multithreading_enabled()


def test_autograd_reexports_overrides_helpers():
    def scenario(lib):
        ag = lib.autograd
        t = lib.ones(1)
        return (ag.is_tensor_like(t), ag.is_tensor_like([1.0]), ag.has_torch_function((t,)),
                ag.handle_torch_function is lib.overrides.handle_torch_function)

    assert _same(scenario) == (True, False, False, True)


# ---- top level -----------------------------------------------------------------------------------
def test_small_top_level_names():
    def scenario(lib):
        t = lib.ones(2, 2)
        return (lib.TYPE_CHECKING, lib.legacy_contiguous_format is lib.contiguous_format,
                t.contiguous(memory_format=lib.legacy_contiguous_format).is_contiguous(),
                lib.cudnn_is_acceptable(t), isinstance(3, (lib.SymInt, lib.SymFloat, lib.SymBool)),
                lib.thread_safe_generator())

    assert _same(scenario) == (False, True, True, False, False, None)


def test_removed_matrix_rank_raises_torchs_error():
    for lib in _libs():
        with pytest.raises(RuntimeError, match="linalg.matrix_rank"):
            lib.matrix_rank(lib.eye(2))


def test_cudnn_is_acceptable_refuses_non_tensors():
    for lib in _libs():
        with pytest.raises(TypeError):
            lib.cudnn_is_acceptable([1.0])
