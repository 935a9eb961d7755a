"""ember.utils.benchmark: Timer, Measurement, Compare (compared with torch.utils.benchmark
where torch is installed). No timing assertions beyond sanity: the machine is shared."""

from __future__ import annotations

import re

import ember
import pytest
from ember.utils import benchmark
from ember.utils.benchmark import Compare, Measurement, TaskSpec, Timer

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _m(times, number=1, **spec):
    spec.setdefault("stmt", "x")
    spec.setdefault("setup", "pass")
    return Measurement(number, times, TaskSpec(**spec))


def test_module_paths():
    import ember.utils.benchmark as b
    from ember.utils.benchmark.utils.common import Measurement as M2
    from ember.utils.benchmark.utils.compare import Compare as C2
    from ember.utils.benchmark.utils.timer import Timer as T2

    assert ember.utils.benchmark is b
    assert (M2, C2, T2) == (Measurement, Compare, Timer)


def test_timeit_fields():
    x = ember.ones(8, 8)
    m = Timer("x + 1", globals={"x": x}, label="add", sub_label="8x8",
              description="ones").timeit(50)
    assert m.number_per_run == 50 and len(m.raw_times) == 1 and len(m.times) == 1
    assert m.median > 0 and m.mean > 0 and m.iqr == 0
    assert m.times[0] == pytest.approx(m.raw_times[0] / 50)
    assert (m.label, m.sub_label, m.description, m.num_threads) == ("add", "8x8", "ones", 1)
    assert m.task_spec.stmt == "x + 1" and m.title == "add: 8x8"
    assert m.as_row_name == "8x8" and m.env is None
    assert 1 <= m.significant_figures <= 4


def test_timer_namespace_and_setup():
    # `torch` (and `ember`) name ember inside the statements; setup runs before the timing
    m = Timer("torch.add(y, z)", setup="y = torch.ones(3)\nz = ember.ones(3)").timeit(5)
    assert m.median > 0
    # an indented block statement is dedented as timeit would need
    m = Timer("""
        for i in range(3):
            y = i
    """).timeit(3)
    assert m.task_spec.stmt.startswith("for i")


def test_blocked_autorange_and_callback():
    calls = []
    m = Timer("sum(range(20))").blocked_autorange(
        callback=lambda n, t: calls.append((n, t)), min_run_time=0.02)
    assert m.number_per_run >= 1 and len(m.times) >= 1
    assert len(calls) == len(m.raw_times)
    assert all(n == m.number_per_run and t >= 0 for n, t in calls)
    assert sum(m.raw_times) >= 0.02


def test_adaptive_autorange_bounded():
    m = Timer("1 + 1").adaptive_autorange(threshold=0.5, min_run_time=0.01, max_run_time=0.5)
    assert m.number_per_run >= 1 and m.median > 0
    assert sum(m.raw_times) < 5.0  # stops by max_run_time (plus one block) at the latest


def test_autorange_and_repeat():
    m = Timer("[0] * 100").autorange()
    assert len(m.raw_times) == 1 and m.raw_times[0] >= 0.2 and m.number_per_run >= 1
    r = Timer("[0] * 100").repeat(repeat=3, number=10)
    assert len(r.raw_times) == 3 and r.number_per_run == 10


def test_num_threads_set_and_restored():
    prior = ember.get_num_threads()
    seen = []
    Timer("seen.append(torch.get_num_threads())", globals={"seen": seen},
          num_threads=1).timeit(2)
    assert set(seen) == {1}
    assert ember.get_num_threads() == prior


def test_statement_errors_propagate():
    with pytest.raises(ZeroDivisionError):
        Timer("1 / 0").timeit(2)
    with pytest.raises(SyntaxError):
        Timer("x +")


@pytest.mark.parametrize("kwargs, match", [
    (dict(stmt=lambda: 1), "stmt must be a str"),
    (dict(global_setup="int x;"), "global_setup is C\\+\\+ only"),
    (dict(language="cpp"), "not supported"),
    (dict(language="rust"), "invalid language"),
    (dict(num_threads=0), "num_threads"),
])
def test_timer_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Timer(**kwargs)


def test_timer_bad_counts():
    t = Timer("pass")
    with pytest.raises(ValueError, match="number must be an int >= 1"):
        t.timeit(0)
    with pytest.raises(ValueError, match="min_run_time"):
        t.blocked_autorange(min_run_time=-1)
    with pytest.raises(ValueError, match="max_run_time"):
        t.adaptive_autorange(min_run_time=1.0, max_run_time=0.5)


def test_measurement_statistics():
    m = _m([2.0, 4.0, 6.0, 8.0], number=2)
    assert m.times == [1.0, 2.0, 3.0, 4.0]
    assert m.median == 2.5 and m.mean == 2.5 and m.iqr == pytest.approx(1.5)
    assert not m.meets_confidence() and m.has_warnings
    tight = _m([1e-3, 1.001e-3, 1.002e-3, 0.999e-3, 1e-3], number=10)
    assert tight.meets_confidence() and not tight.has_warnings
    assert tight.significant_figures == 3
    with pytest.raises(ValueError, match="raw_times is empty"):
        _m([])
    with pytest.raises(ValueError, match="number_per_run"):
        _m([1.0], number=0)


def test_measurement_merge():
    a = _m([2.0], number=2, label="L")
    b = _m([3.0, 5.0], number=1, label="L")
    c = _m([1.0], number=1, label="other")
    merged = Measurement.merge([a, b, c])
    assert [m.times for m in merged] == [[1.0, 3.0, 5.0], [1.0]]
    assert all(m.number_per_run == 1 for m in merged)


def test_units_and_sigfig():
    assert benchmark.select_unit(2e-8) == ("ns", 1e-9)
    assert benchmark.select_unit(5e-5) == ("us", 1e-6)
    assert benchmark.select_unit(3e-2) == ("ms", 1e-3)
    assert benchmark.select_unit(12.0) == ("s", 1)
    assert benchmark.trim_sigfig(123.456, 2) == 120.0
    assert benchmark.unit_to_english("us") == "microsecond"


def test_repr_shapes():
    one = _m([1e-3], number=10, num_threads=2)
    assert repr(one).splitlines()[1:] == ["x", "  100.00 us",
                                          "  1 measurement, 10 runs , 2 threads"]
    many = _m([1e-3, 1.001e-3, 1.002e-3, 0.999e-3, 1e-3], number=10, label="L", sub_label="S",
              description="D", setup="a = 1\nb = 2")
    lines = repr(many).splitlines()
    assert lines[0].startswith("<ember.utils.benchmark.utils.common.Measurement object at ")
    assert lines[1:] == ["L: S", "D", "setup:", "  a = 1", "  b = 2", "",
                         "  Median: 100.00 us", "  IQR:    0.10 us (100.00 to 100.10)",
                         "  5 measurements, 10 runs per measurement, 1 thread"]
    noisy = _m([1e-3, 2e-3], number=10)
    assert "WARNING: Interquartile range is 33.3% of the median" in repr(noisy)
    assert "IQR" not in repr(noisy)


def _grid():
    """Measurements over 2 sub-labels x 2 descriptions x 2 thread counts, plus a 2nd label."""
    out = []
    for threads in (1, 2):
        for n, base in (("n=16", 2e-6), ("n=64", 14e-6)):
            for d, f in (("ones", 1.0), ("zeros", 3.0)):
                out.append(_m([base * f * threads, base * f * threads * 1.001], stmt="y + 1",
                              label="add", sub_label=n, description=d, num_threads=threads))
    out.append(_m([12e-6], stmt="y * 2", label="mul", sub_label="n=64", description="ones"))
    return out


def test_compare_layout():
    text = str(Compare(_grid()))
    assert text == (
        "[----------- add -----------]\n"
        "            |  ones  |  zeros\n"
        "1 threads: ------------------\n"
        "      n=16  |   2.0  |    6.0\n"
        "      n=64  |  14.0  |   42.0\n"
        "2 threads: ------------------\n"
        "      n=16  |   4.0  |   12.0\n"
        "      n=64  |  28.0  |   84.0\n"
        "\n"
        "Times are in microseconds (us).\n"
        "\n"
        "[------ mul ------]\n"
        "            |  ones\n"
        "1 threads: --------\n"
        "      n=64  |  12.0\n"
        "\n"
        "Times are in microseconds (us).\n"
    )


def test_compare_options():
    results = _grid() + [_m([1e-6, 1e-6, 3e-6, 3e-6], label="noisy", sub_label="a")]
    c = Compare(results)
    c.trim_significant_figures()
    c.colorize()
    c.highlight_warnings()
    text = str(c)
    assert "\x1b[92m\x1b[1m" in text  # the best cell of a column
    assert "(! " in text and "(! XX%) Measurement has high variance" in text
    plain = ANSI.sub("", text)
    assert "[----------- add" in plain
    c2 = Compare(_grid())
    c2.colorize(rowwise=True)
    assert "\x1b[" in str(c2)
    with pytest.raises(ValueError, match="expected Measurement"):
        Compare([1.0])


def test_compare_env_and_missing_cells():
    res = [_m([1e-6], sub_label="a", description="d1", env="E1", label="L"),
           _m([2e-6], sub_label="a", description="d2", env="E2", label="L")]
    lines = str(Compare(res)).splitlines()
    assert any(line.startswith("  (E1)") for line in lines)
    assert any(line.startswith("  (E2)") for line in lines)


def test_compare_print(capsys):
    Compare(_grid()[:1]).print()
    assert "Times are in microseconds (us)." in capsys.readouterr().out


# ---------------------------------------------------------------------------- against torch
def _torch_pair():
    torch = pytest.importorskip("torch")
    import torch.utils.benchmark as tb
    from torch.utils.benchmark.utils.common import Measurement as TM
    from torch.utils.benchmark.utils.common import TaskSpec as TS
    return torch, tb, TM, TS


def test_timer_fields_match_torch():
    torch, tb, _, _ = _torch_pair()
    kw = dict(label="add", sub_label="n=4", description="ones", num_threads=1)
    mt = tb.Timer("x + 1", globals={"x": torch.ones(4)}, **kw).timeit(20)
    me = Timer("x + 1", globals={"x": ember.ones(4)}, **kw).timeit(20)
    for name in ("number_per_run", "label", "sub_label", "description", "num_threads", "stmt",
                 "title", "as_row_name", "env"):
        assert getattr(me, name) == getattr(mt, name), name
    assert len(me.times) == len(mt.times) == 1
    assert repr(me).splitlines()[1:3] == repr(mt).splitlines()[1:3]


def test_measurement_matches_torch():
    _, _, TM, TS = _torch_pair()
    cases = [([1e-3], 10), ([1e-3, 2e-3], 10), ([1e-3, 1e-3, 1.5e-3], 10),
             ([1e-3] * 3 + [5e-3], 10), ([1e-3, 1.001e-3, 1.002e-3, 0.999e-3, 1e-3], 10),
             ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], 3)]
    for raw, n in cases:
        spec = dict(stmt="x", setup="a=1\nb=2", label="L", sub_label="S", description="D",
                    num_threads=2)
        t = TM(n, raw, TS(**spec))
        e = Measurement(n, raw, TaskSpec(**spec))
        assert e.median == pytest.approx(t.median) and e.mean == pytest.approx(t.mean)
        assert e.iqr == pytest.approx(t.iqr)
        assert e.significant_figures == t.significant_figures, raw
        assert e.has_warnings == t.has_warnings and e.meets_confidence() == t.meets_confidence()
        assert repr(e).splitlines()[1:] == repr(t).splitlines()[1:], raw


def test_compare_matches_torch():
    _, tb, TM, TS = _torch_pair()

    def build(M, S):
        out = []
        for threads in (1, 2):
            for n, base in (("n=16", 2.1e-6), ("n=64", 14.6e-6)):
                for d, f in (("ones", 1.0), ("zeros", 2.3)):
                    raw = [base * f * threads * k for k in (1.0, 1.02, 0.99, 1.3)]
                    out.append(M(7, raw, S("y + 1", "pass", label="add", sub_label=n,
                                           description=d, num_threads=threads, env="E1")))
        out.append(M(7, [12.3e-6], S("y * 2", "pass", label="mul", sub_label="n=64",
                                     description="ones", env="E1")))
        out.append(M(1, [3e-3, 3.1e-3], S("z", "pass", label="mul", sub_label="n=64",
                                          description="zeros", env="E2")))
        return out

    for opts in ((), ("trim",), ("trim", "color"), ("trim", "color", "warn"), ("rowwise",),
                 ("warn",)):
        ct, ce = tb.Compare(build(TM, TS)), Compare(build(Measurement, TaskSpec))
        for c in (ct, ce):
            if "trim" in opts:
                c.trim_significant_figures()
            if "color" in opts:
                c.colorize()
            if "rowwise" in opts:
                c.colorize(rowwise=True)
            if "warn" in opts:
                c.highlight_warnings()
        assert str(ce) == str(ct), opts


def test_cuda_workloads_are_synchronized(monkeypatch):
    # with CUDA available, the default clock synchronizes the device before each read
    calls = []
    monkeypatch.setattr(ember.cuda, "is_available", lambda: True)
    monkeypatch.setattr(ember.cuda, "synchronize", lambda device=None: calls.append(1))
    Timer("pass").timeit(3)
    assert len(calls) >= 4  # warm-up and measured block, start and end of each


def test_custom_timer_and_pickle():
    import pickle

    ticks = iter(range(1000))
    m = Timer("pass", timer=lambda: float(next(ticks)), label="fake").timeit(10)
    assert m.raw_times == [1.0] and m.times == [0.1]  # one tick per block of 10
    back = pickle.loads(pickle.dumps(m))
    assert back.raw_times == m.raw_times and back.label == "fake" and back.median == m.median


# ---------------------------------------------------------------------------- fuzzers
def test_fuzzer_tensors_and_properties():
    from ember.utils.benchmark import FuzzedParameter, FuzzedTensor, Fuzzer

    fuzzer = Fuzzer(
        parameters=[
            FuzzedParameter("k0", 2, 16, distribution="loguniform"),
            FuzzedParameter("k1", distribution={1: 0.5, 4: 0.5}),
            [FuzzedParameter("d", 1, 2, distribution="uniform"),
             FuzzedParameter("s", distribution={1: 0.5, 2: 0.5})],
        ],
        tensors=[FuzzedTensor("x", size=("k0", "k1"), steps=("s", 1), dim_parameter="d",
                              probability_contiguous=0.5, max_elements=40),
                 FuzzedTensor("i", size=("k1",), dtype=ember.int64,
                              probability_contiguous=1.0)],
        seed=0)
    draws = list(fuzzer.take(12))
    assert len(draws) == 12
    layouts = set()
    for tensors, props, params in draws:
        x = tensors["x"]
        want = (params["k0"], params["k1"])[:params["d"]]
        assert tuple(x.shape) == want and x.dtype == ember.float32
        assert props["x"]["numel"] == x.numel() <= 40
        assert 2 <= params["k0"] <= 16 and params["k1"] in (1, 4)
        assert props["x"]["is_contiguous"] == x.is_contiguous()
        layouts.add(props["x"]["is_contiguous"])
        assert ((x >= 0) & (x < 1)).all().item()
        assert tensors["i"].dtype == ember.int64 and tensors["i"].is_contiguous()
    assert layouts == {True, False}  # both strided/permuted and contiguous draws
    # reproducible from the seed
    again = list(fuzzer.take(12))
    assert [p for _, _, p in again] == [p for _, _, p in draws]
    assert all(ember.equal(a[0]["x"], b[0]["x"]) for a, b in zip(again, draws))
    assert 0.0 <= fuzzer.rejection_rate < 1.0


def test_fuzzer_alias_constraints_and_errors():
    from ember.utils.benchmark import FuzzedParameter, FuzzedTensor, Fuzzer, ParameterAlias

    f = Fuzzer([FuzzedParameter("a", 1.0, 2.0, distribution="uniform"),
                FuzzedParameter("b", distribution={ParameterAlias("a"): 1.0})], [],
               constraints=[lambda a, b: a < 1.9], seed=1)
    for _, _, p in f.take(5):
        assert p["a"] == p["b"] and isinstance(p["a"], float) and p["a"] < 1.9
    never = Fuzzer([FuzzedParameter("a", 1, 2, distribution="uniform")], [],
                   constraints=[lambda a: a > 5], seed=0)
    with pytest.raises(RuntimeError, match="no parameters satisfying"):
        next(never.take(1))
    with pytest.raises(ValueError, match="sum to 1"):
        FuzzedParameter("p", distribution={1: 0.3})
    with pytest.raises(ValueError, match="needs minval and maxval"):
        FuzzedParameter("p", distribution="uniform")
    with pytest.raises(ValueError, match="distribution must be"):
        FuzzedParameter("p", 1, 2, distribution="normal")
    with pytest.raises(ValueError, match="duplicate parameters"):
        Fuzzer([FuzzedParameter("p", 1, 2, "uniform")] * 2, [])
    with pytest.raises(ValueError, match="steps"):
        FuzzedTensor("t", size=(2, 3), steps=(1,))
    cyc = Fuzzer([FuzzedParameter("a", distribution={ParameterAlias("b"): 1.0}),
                  FuzzedParameter("b", distribution={ParameterAlias("a"): 1.0})], [], seed=0)
    with pytest.raises(ValueError, match="cycle"):
        next(cyc.take(1))


def test_fuzzer_api_matches_torch():
    pytest.importorskip("torch")
    import inspect

    import torch.utils.benchmark as tb

    for name in ("Fuzzer", "FuzzedParameter", "FuzzedTensor"):
        tp = list(inspect.signature(getattr(tb, name)).parameters)
        ep = list(inspect.signature(getattr(benchmark, name)).parameters)
        assert tp == ep, name
    assert list(inspect.signature(tb.Fuzzer.take).parameters) == list(
        inspect.signature(benchmark.Fuzzer.take).parameters)
