"""Sanity checks of the gradient runner itself (op_db.run_case) on a few ops, and of how the
op table files its gradient cases."""

import pytest
from op_db import GradCase, lib, run_case

CASES = [
    GradCase("exp", lambda a: a.exp(), lambda rng: [rng.standard_normal((3, 4))]),
    GradCase("mul_broadcast", lambda a, b: a * b,
             lambda rng: [rng.standard_normal((3, 4)), rng.standard_normal(4)]),
    GradCase("cat", lambda a, b: lib(a).cat([a, b], 1),
             lambda rng: [rng.standard_normal((2, 3)), rng.standard_normal((2, 2))]),
    GradCase("split", lambda a: a.split(2, 1), lambda rng: [rng.standard_normal((3, 5))]),
    GradCase("chunk", lambda a: a.chunk(2, 0), lambda rng: [rng.standard_normal((3, 2))]),
    GradCase("unbind", lambda a: a.unbind(1), lambda rng: [rng.standard_normal((3, 2))]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case(case):
    run_case(case)


def test_runner_catches_a_wrong_gradient():
    import ember

    # ember's and torch's versions of this function disagree, so the runner must fail.
    bad = GradCase("bad", lambda a: a * 2.0 if isinstance(a, ember.Tensor) else a * 3.0,
                   lambda rng: [rng.standard_normal(3)], noncontig=False)
    torch = pytest.importorskip("torch")
    assert torch is not None
    with pytest.raises(AssertionError):
        run_case(bad)


def test_every_gradient_case_is_filed_under_a_differentiable_op():
    from op_db import DB, GRAD_MATH, GRAD_SHAPE

    for case in GRAD_MATH + GRAD_SHAPE:
        assert case.op in DB, f"{case.name}: no YAML op {case.op!r}"
        assert case in DB[case.op].grad_cases
        assert DB[case.op].differentiable, f"{case.name}: {case.op} is not flagged differentiable"
