"""ember.fx: symbolic tracing, graph editing, GraphModule code generation, Interpreter /
Transformer, ShapeProp and the subgraph rewriter; node lists compared with torch.fx."""

from __future__ import annotations

import copy
import doctest
import importlib
import math
import operator
import pickle
import pkgutil
import re

import ember
import ember.fx as fx
import ember.nn.functional as F
import numpy as np
import pytest
from ember import nn
from ember.fx import Graph, GraphModule, Interpreter, Proxy, TraceError, Transformer, symbolic_trace
from ember.fx.passes.shape_prop import ShapeProp, TensorMetadata


# ---- models -----------------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return F.log_softmax(self.fc2(self.act(self.fc1(x))), dim=-1)


class Block(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return ember.relu(out + x)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.layer = nn.Sequential(Block(4), Block(4))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        x = ember.relu(self.bn(self.stem(x)))
        x = self.layer(x)
        x = ember.flatten(self.pool(x), 1)
        return self.fc(x)


class WithBuffer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", ember.tensor([1.0, 2.0, 3.0]))
        self.weight = nn.Parameter(ember.randn(3, 3))
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x) * self.scale
        return y @ self.weight + self.lin.bias.sum()


def ops_fn(x, y):
    a = x.view(x.shape[0], -1)
    b = a.sum(dim=1)
    c = (x * 2 + y - 1) / 3
    d = -c[:, 0] ** 2
    return b + d, c.relu().mean()


def data_dependent(x):
    if bool(x.sum() > 0):
        return x * 2
    return x - 1


fx.wrap("data_dependent")


class UsesWrapped(nn.Module):
    def forward(self, x):
        return data_dependent(x) + 1


def _names(gm):
    return [(n.op, n.name) for n in gm.graph.nodes]


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)


# ---- tracing ----------------------------------------------------------------------------------
def test_trace_mlp_outputs_and_gradients():
    m = MLP()
    gm = symbolic_trace(m)
    assert isinstance(gm, GraphModule) and isinstance(gm, nn.Module)
    assert _names(gm) == [("placeholder", "x"), ("call_module", "fc1"), ("call_module", "act"),
                          ("call_module", "fc2"), ("call_function", "log_softmax"),
                          ("output", "output")]
    x = ember.randn(4, 6)
    _close(gm(x), m(x))
    m(x).sum().backward()
    grads = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    gm(x).sum().backward()  # the submodules are shared, as in torch.fx
    for g, p in zip(grads, m.parameters()):
        _close(p.grad, g)


def test_trace_cnn_batchnorm_residual_train_and_eval():
    m = SmallCNN()
    ref = copy.deepcopy(m)
    gm = symbolic_trace(m)
    ops = [n.op for n in gm.graph.nodes]
    assert ops.count("call_module") == 12  # stem, bn, 2 x (2 conv + 2 bn), pool, fc
    adds = [n for n in gm.graph.nodes if n.target is operator.add]
    assert len(adds) == 2  # the residual adds, traced through the non-leaf Blocks
    assert "layer.0.conv1" in [n.target for n in gm.graph.nodes]
    x = ember.randn(2, 3, 8, 8, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    out, out_ref = gm(x), ref(x_ref)
    _close(out, out_ref)
    out.square().sum().backward()
    out_ref.square().sum().backward()
    _close(x.grad, x_ref.grad, 1e-4)
    for (name, p), p_ref in zip(gm.named_parameters(), ref.parameters()):
        _close(p.grad, p_ref.grad, 1e-4)
    _close(gm.bn.running_mean, ref.bn.running_mean)  # batch-norm statistics moved the same
    gm.eval()
    ref.eval()
    assert not gm.layer.get_submodule("0").bn1.training
    _close(gm(x), ref(x_ref), 1e-4)


def test_trace_function_with_operators_and_methods():
    gm = symbolic_trace(ops_fn)
    got = [(n.op, n.target if isinstance(n.target, str) else n.target.__name__)
           for n in gm.graph.nodes]
    assert got == [
        ("placeholder", "x"), ("placeholder", "y"), ("call_function", "getattr"),
        ("call_function", "getitem"), ("call_method", "view"), ("call_method", "sum"),
        ("call_function", "mul"), ("call_function", "add"), ("call_function", "sub"),
        ("call_function", "truediv"), ("call_function", "getitem"), ("call_function", "pow"),
        ("call_function", "neg"), ("call_function", "add"), ("call_method", "relu"),
        ("call_method", "mean"), ("output", "output")]
    code = gm.code
    assert "getattr_1 = x.shape" in code and "sum_1 = view.sum(dim = 1)" in code
    assert "truediv = sub / 3" in code and "getitem_1 = truediv[:, 0]" in code
    x, y = ember.randn(3, 4), ember.randn(3, 4)
    for a, b in zip(gm(x, y), ops_fn(x, y)):
        _close(a, b)


def test_module_with_buffer_and_parameter_attributes():
    m = WithBuffer()
    gm = symbolic_trace(m)
    get_attrs = [n.target for n in gm.graph.nodes if n.op == "get_attr"]
    assert get_attrs == ["scale", "weight", "lin.bias"]
    assert set(gm.state_dict()) == set(m.state_dict())
    assert "scale" in dict(gm.named_buffers())
    x = ember.randn(5, 3)
    _close(gm(x), m(x))
    gm(x).sum().backward()
    assert m.weight.grad is not None and m.weight.grad.shape == (3, 3)


def test_graph_module_is_a_module_copy_pickle_to():
    m = WithBuffer()
    gm = symbolic_trace(m)
    assert type(gm).__name__ == "WithBuffer"
    assert len(list(gm.parameters())) == 3
    x = ember.randn(2, 3)
    expected = gm(x)
    dup = copy.deepcopy(gm)
    assert dup.code == gm.code and dup.graph is not gm.graph
    assert dup.graph.owning_module is dup
    _close(dup(x), expected)
    with ember.no_grad():
        dup.weight.mul_(0)
    _close(gm(x), expected)  # the copy owns its own parameters
    assert isinstance(dup.weight, nn.Parameter)
    back = pickle.loads(pickle.dumps(gm))
    _close(back(x), expected)
    assert back.code == gm.code
    gm64 = copy.deepcopy(gm).to(ember.float64)
    assert gm64(x.double()).dtype == ember.float64
    assert gm.train() is gm and gm.training and not gm.eval().training
    text = gm.print_readable(print_output=False)
    assert text.startswith("class WithBuffer(ember.nn.Module):") and "def forward(self, x):" in text
    assert "def forward" in str(gm)


def test_control_flow_raises_trace_error():
    def branchy(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(TraceError, match="symbolically traced variables cannot be used as "
                                         "inputs to control flow"):
        symbolic_trace(branchy)

    def loops(x):
        return [v for v in x]

    with pytest.raises(TraceError, match="cannot be iterated"):
        symbolic_trace(loops)
    with pytest.raises(RuntimeError, match="'len' is not supported"):
        symbolic_trace(lambda x: len(x))
    with pytest.raises(TraceError, match="Python integer"):
        symbolic_trace(lambda x: list(range(x.shape[0])))
    # ember.nn.Module is restored after a failed trace
    assert nn.Module.__call__.__name__ == "__call__"
    m = MLP()
    _close(m(ember.ones(1, 6)), MLP.forward(m, ember.ones(1, 6)))


def test_concrete_args_specialize_branches():
    def f(x, flag=True, scale=None):
        if flag:
            x = x + 1
        if scale is not None:
            x = x * scale
        return x

    gm = symbolic_trace(f, concrete_args={"flag": False})
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"].count(operator.add) == 0
    assert "def forward(self, x, flag = False, scale = None):" in gm.code
    x = ember.ones(2)
    _close(gm(x, False, 3.0), x * 3)  # scale stays an input (traced as not None)
    with pytest.raises(AssertionError, match="flag has been specialized"):
        gm(x, True, 3.0)
    gm2 = symbolic_trace(f, concrete_args={"flag": True, "scale": None})
    _close(gm2(x), x + 1)
    with pytest.raises(AssertionError, match="scale has been specialized to have value None"):
        gm2(x, True, 2.0)
    with pytest.raises(TypeError, match="not arguments"):
        symbolic_trace(f, concrete_args={"nope": 1})
    gm3 = symbolic_trace(f, concrete_args={"x": fx.PH, "flag": True})
    _close(gm3(x, True, 2.0), (x + 1) * 2)


def test_wrap_keeps_function_as_leaf():
    m = UsesWrapped()
    gm = symbolic_trace(m)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets[0].__name__ == "data_dependent" and targets[1] is operator.add
    assert re.search(r"= data_dependent\w*\(x\)", gm.code)
    _close(gm(ember.ones(3)), ember.full((3,), 3.0))
    _close(gm(-ember.ones(3)), ember.full((3,), -1.0))
    assert data_dependent.__name__ == "data_dependent" and not hasattr(
        globals()["data_dependent"], "__fx_original__")  # unpatched after tracing
    with pytest.raises(TypeError, match="expected a function"):
        fx.wrap(3)


def test_autowrapped_math_and_tuple_unpacking():
    def f(x):
        a, b = x.chunk(2, dim=1)
        return a * math.sqrt(x.shape[1]) + b

    gm = symbolic_trace(f)
    assert any(n.target is math.sqrt for n in gm.graph.nodes)
    assert math.sqrt(4.0) == 2.0 and type(math.sqrt).__name__ == "builtin_function_or_method"
    x = ember.randn(2, 4)
    _close(gm(x), f(x))


def test_custom_tracer_leaf_and_constant_tensor():
    class Inner(nn.Module):
        def forward(self, x):
            return x + ember.ones(1)

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x) * 2

    traced = symbolic_trace(Outer())
    assert [n.op for n in traced.graph.nodes].count("get_attr") == 1  # _tensor_constant0
    assert hasattr(traced, "_tensor_constant0")
    _close(traced(ember.zeros(2)), ember.full((2,), 2.0))

    class LeafTracer(fx.Tracer):
        def is_leaf_module(self, m, qualname):
            return isinstance(m, Inner) or super().is_leaf_module(m, qualname)

    root = Outer()
    graph = LeafTracer().trace(root)
    assert [(n.op, n.target) for n in graph.nodes][1] == ("call_module", "inner")
    gm = GraphModule(root, graph)
    _close(gm(ember.zeros(2)), ember.full((2,), 2.0))


# ---- editing ----------------------------------------------------------------------------------
def test_edit_relu_to_gelu_and_recompile():
    def f(x):
        return ember.relu(x) + F.relu(x)

    gm = symbolic_trace(f)
    # as in torch, F.relu's node records its keyword inplace=False (ember.relu's has none)
    assert [dict(n.kwargs) for n in gm.graph.nodes if n.op == "call_function"
            and n.target in (ember.relu, F.relu)] == [{}, {"inplace": False}]
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in (ember.relu, F.relu):
            node.target = F.gelu
            node.kwargs = {}
    gm.graph.lint()
    gm.recompile()
    assert gm.code.count("ember.nn.functional.gelu(x)") == 2 and "ember.relu" not in gm.code
    x = ember.randn(7)
    _close(gm(x), F.gelu(x) * 2)


def test_dead_code_elimination_and_erase():
    gm = symbolic_trace(lambda x: ember.relu(x))
    g = gm.graph
    x = next(iter(g.nodes))
    relu = g.find_nodes(op="call_function", target=ember.relu)[0]
    with g.inserting_after(relu):
        unused = g.call_function(ember.sigmoid, (x,))
        g.call_method("add_", (x, 1.0))  # in place: impure, kept
    assert len(g.nodes) == 5
    with pytest.raises(RuntimeError, match="still had 1 users"):
        g.erase_node(relu)
    assert g.eliminate_dead_code() is True
    assert unused not in list(g.nodes) and len(g.nodes) == 4
    assert g.eliminate_dead_code() is False
    gm.recompile()
    x = ember.zeros(2)
    _close(gm(x), ember.zeros(2))  # relu runs before the in-place add
    _close(x, ember.ones(2))


def test_graph_building_and_insertion_points():
    g = Graph()
    x = g.placeholder("x")
    y = g.placeholder("y", default_value=2.0)
    mul = g.call_function(operator.mul, (x, y))
    out = g.output(mul)
    with g.inserting_before(mul):
        a = g.call_function(ember.neg, (x,))
        b = g.call_method("exp", (a,))
    with g.inserting_after(mul):
        c = g.call_function(operator.add, (mul, b))
        d = g.call_function(ember.tanh, (c,))
    assert [n.name for n in g.nodes] == ["x", "y", "neg", "exp", "mul", "add", "tanh", "output"]
    mul.replace_all_uses_with(d, delete_user_cb=lambda u: u.op == "output")
    assert out.args == (d,) and set(mul.users) == {c}
    assert c.all_input_nodes == [mul, b] and list(b.users) == [c]
    c.replace_input_with(b, a)
    assert c.args == (mul, a) and not b.users
    g.erase_node(b)
    assert "%tanh : [num_users=1] = call_function[target=ember.tanh](args = (%add,), kwargs = {})" \
        in str(g)
    assert str(g).startswith("graph():\n    %x : [num_users=2] = placeholder[target=x]")
    assert d.format_node() == (
        "%tanh : [num_users=1] = call_function[target=ember.tanh](args = (%add,), kwargs = {})")
    g.lint()
    gm = GraphModule(nn.Module(), g)
    xv = ember.tensor([0.5, -1.0])
    _close(gm(xv), ember.tanh(xv * 2.0 + (-xv)))
    # prepend / append move nodes
    a.append(mul)
    assert [n.name for n in g.nodes][:5] == ["x", "y", "neg", "mul", "add"]
    with pytest.raises(ValueError, match="itself"):
        a.prepend(a)
    # a node of another graph
    other = Graph()
    with pytest.raises(ValueError, match="another graph"):
        other.call_function(ember.relu, (x,))
    with pytest.raises(ValueError, match="op must be one of"):
        g.create_node("call_fn", ember.relu)
    with pytest.raises(TypeError, match="args must be a tuple"):
        g.create_node("call_function", ember.relu, [x])


def test_names_are_unique_and_valid():
    g = Graph()
    x = g.placeholder("input")
    a = g.call_function(getattr, (x, "shape"))
    s1 = g.call_method("sum", (x,))
    s2 = g.call_method("sum", (x,))
    m = g.call_module("layer1.0.conv", (x,))
    assert [x.name, a.name, s1.name, s2.name, m.name] == [
        "input_1", "getattr_1", "sum_1", "sum_2", "layer1_0_conv"]


def test_node_copy_graph_copy_deepcopy_and_lint():
    gm = symbolic_trace(MLP())
    g2 = Graph()
    env = {}
    out = g2.graph_copy(gm.graph, env)
    g2.output(out)
    assert [n.name for n in g2.nodes] == [n.name for n in gm.graph.nodes]
    g3 = copy.deepcopy(gm.graph)
    assert [n.format_node() for n in g3.nodes] == [n.format_node() for n in gm.graph.nodes]
    assert all(a is not b for a, b in zip(g3.nodes, gm.graph.nodes))
    gm2 = GraphModule(gm, g3)
    x = ember.randn(2, 6)
    _close(gm2(x), gm(x))
    # lint finds a call_module target that does not exist
    bad = copy.deepcopy(gm.graph)
    bad.find_nodes(op="call_module")[0].target = "fc9"
    bad.owning_module = gm
    with pytest.raises(RuntimeError, match="nonexistent attribute fc9"):
        bad.lint()
    with pytest.raises(RuntimeError, match="not provided in the root dict"):
        GraphModule({}, copy.deepcopy(gm.graph))
    with pytest.raises(TypeError, match="root must be"):
        GraphModule(3, Graph())
    with pytest.raises(TypeError, match="graph must be an ember.fx.Graph, got str"):
        GraphModule(gm, "graph")
    with pytest.raises(TypeError, match="expected an nn.Module or a function, got int"):
        symbolic_trace(3)


def test_print_tabular(capsys):
    gm = symbolic_trace(lambda x: x.sum(dim=0) * 2)
    gm.graph.print_tabular()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["opcode", "name", "target", "args", "kwargs"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert lines[3].split()[:3] == ["call_method", "sum_1", "sum"] and "{'dim': 0}" not in lines[3]
    assert lines[4].split() == ["call_function", "mul", "operator.mul", "(sum_1,", "2)", "{}"]
    assert len(lines) == 6


def test_graph_module_submodule_editing():
    gm = symbolic_trace(MLP())
    gm.add_submodule("extra.head", nn.Linear(3, 3))
    assert isinstance(gm.get_submodule("extra.head"), nn.Linear)
    out = next(n for n in gm.graph.nodes if n.op == "output")
    with gm.graph.inserting_before(out):
        head = gm.graph.call_module("extra.head", (out.args[0],))
    out.args = (head,)
    gm.recompile()
    assert gm(ember.randn(2, 6)).shape == (2, 3)
    assert gm.delete_submodule("act") and not gm.delete_submodule("act")
    with pytest.raises(RuntimeError, match="nonexistent attribute act"):
        gm.graph.lint()  # the graph still calls it
    with pytest.raises(RuntimeError, match="still had 1 users"):
        gm.graph.erase_node(head)


# ---- interpreter / transformer / passes ----------------------------------------------------------
def test_interpreter_matches_forward_and_hooks():
    m = SmallCNN().eval()
    gm = symbolic_trace(m)
    x = ember.randn(2, 3, 6, 6)
    _close(Interpreter(gm).run(x), gm(x))

    class Counting(Interpreter):
        def __init__(self, module):
            super().__init__(module)
            self.seen = []

        def call_module(self, target, args, kwargs):
            self.seen.append(target)
            return super().call_module(target, args, kwargs)

    interp = Counting(gm)
    _close(interp.run(x), gm(x))
    assert interp.seen[:2] == ["stem", "bn"] and len(interp.seen) == 12
    assert not interp.env or all(n.op == "output" for n in interp.env)  # values were freed
    with pytest.raises(RuntimeError, match="Expected positional argument for parameter x"):
        Interpreter(gm).run()
    with pytest.raises(TypeError, match="no fx graph"):
        Interpreter(m)


def test_interpreter_error_names_the_node():
    gm = symbolic_trace(lambda x, y: x @ y)
    with pytest.raises(Exception) as info:
        Interpreter(gm).run(ember.ones(2, 3), ember.ones(2, 3))
    assert any("While executing %matmul" in note for note in getattr(info.value, "__notes__", []))


def test_transformer_rewrites_into_new_module():
    class Swap(Transformer):
        def call_function(self, target, args, kwargs):
            if target is operator.add:
                target = operator.mul
            return super().call_function(target, args, kwargs)

        def call_module(self, target, args, kwargs):
            out = super().call_module(target, args, kwargs)
            return ember.sigmoid(out) if target == "fc2" else out

    m = WithBuffer()
    gm = symbolic_trace(m)
    new = Swap(gm).transform()
    assert isinstance(new, GraphModule) and new is not gm
    assert not any(n.target is operator.add for n in new.graph.nodes)
    x = ember.randn(4, 3)
    y = m.lin(x) * m.scale
    _close(new(x), (y @ m.weight) * m.lin.bias.sum())
    mlp = symbolic_trace(MLP())
    new2 = Swap(mlp).transform()
    assert any(n.target is ember.sigmoid for n in new2.graph.nodes)
    ones = ember.ones(2, 6)
    _close(new2(ones), F.log_softmax(ember.sigmoid(mlp.fc2(mlp.act(mlp.fc1(ones)))), dim=-1))
    plain = Transformer(mlp).transform()
    assert [n.op for n in plain.graph.nodes] == [n.op for n in mlp.graph.nodes]


def test_shape_prop_records_tensor_meta():
    gm = symbolic_trace(SmallCNN().eval())
    ShapeProp(gm).propagate(ember.randn(2, 3, 8, 8))
    meta = {n.name: n.meta.get("tensor_meta") for n in gm.graph.nodes}
    assert isinstance(meta["stem"], TensorMetadata)
    assert tuple(meta["stem"].shape) == (2, 4, 8, 8) and meta["stem"].dtype == ember.float32
    assert tuple(meta["flatten"].shape) == (2, 4) and meta["flatten"].stride == (4, 1)
    assert tuple(meta["fc"].shape) == (2, 5)
    assert gm.graph.find_nodes(op="call_module", target="fc")[0].meta["type"] is ember.Tensor


def test_replace_pattern():
    def f(x, w):
        r = ember.relu(x)
        a = r.neg()  # r has another user: not a match
        b = ember.relu(ember.relu(a).neg()).neg() @ w  # two chained matches
        return b + r

    def pattern(v):
        return ember.relu(v).neg()

    def replacement(v):
        return ember.sigmoid(v) * 2

    gm = symbolic_trace(f)
    x, w = ember.randn(3, 3), ember.randn(3, 3)
    matches = fx.replace_pattern(gm, pattern, replacement)
    assert len(matches) == 2 and all(isinstance(m.anchor, fx.Node) for m in matches)
    gm.graph.lint()
    assert sum(n.target is ember.sigmoid for n in gm.graph.nodes) == 2
    assert sum(n.target == "neg" for n in gm.graph.nodes) == 1
    s1 = ember.sigmoid(-ember.relu(x)) * 2
    _close(gm(x, w), (ember.sigmoid(s1) * 2) @ w + ember.relu(x))
    with pytest.raises(ValueError, match="takes 1 inputs"):
        fx.replace_pattern(gm, pattern, lambda p, q: p)


def test_doc_examples():
    mods = [fx] + [importlib.import_module(i.name)
                   for i in pkgutil.walk_packages(fx.__path__, "ember.fx.")]
    for mod in mods:
        result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0, f"docstring example failed in {mod.__name__}"
    assert len(mods) >= 9


def test_proxy_repr_and_torch_function():
    g = Graph()
    p = Proxy(g.placeholder("x"))
    assert repr(p) == "Proxy(x)"
    q = ember.cat([p, p], dim=0)
    assert q.node.target is ember.cat and q.node.args == ([p.node, p.node],)
    r = ember.Tensor.add(p, 1)
    assert (r.node.op, r.node.target) == ("call_method", "add")
    s = 1 - p
    assert s.node.target is operator.sub and s.node.args == (1, p.node)


# ---- against torch.fx ----------------------------------------------------------------------------
def _torch_models(torch):
    tnn, tF = torch.nn, torch.nn.functional

    class TMLP(tnn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.act, self.fc2 = tnn.Linear(6, 16), tnn.ReLU(), tnn.Linear(16, 3)

        def forward(self, x):
            return tF.log_softmax(self.fc2(self.act(self.fc1(x))), dim=-1)

    class TBlock(tnn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv1 = tnn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn1 = tnn.BatchNorm2d(c)
            self.conv2 = tnn.Conv2d(c, c, 3, padding=1, bias=False)
            self.bn2 = tnn.BatchNorm2d(c)

        def forward(self, x):
            out = tF.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return torch.relu(out + x)

    class TCNN(tnn.Module):
        def __init__(self):
            super().__init__()
            self.stem, self.bn = tnn.Conv2d(3, 4, 3, padding=1), tnn.BatchNorm2d(4)
            self.layer = tnn.Sequential(TBlock(4), TBlock(4))
            self.pool, self.fc = tnn.AdaptiveAvgPool2d(1), tnn.Linear(4, 5)

        def forward(self, x):
            x = torch.relu(self.bn(self.stem(x)))
            x = self.layer(x)
            x = torch.flatten(self.pool(x), 1)
            return self.fc(x)

    class TWithBuffer(tnn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.tensor([1.0, 2.0, 3.0]))
            self.weight = tnn.Parameter(torch.randn(3, 3))
            self.lin = tnn.Linear(3, 3)

        def forward(self, x):
            y = self.lin(x) * self.scale
            return y @ self.weight + self.lin.bias.sum()

    def t_ops_fn(x, y):
        a = x.view(x.shape[0], -1)
        b = a.sum(dim=1)
        c = (x * 2 + y - 1) / 3
        d = -c[:, 0] ** 2
        return b + d, c.relu().mean()

    return [(MLP(), TMLP()), (SmallCNN(), TCNN()), (WithBuffer(), TWithBuffer()),
            (ops_fn, t_ops_fn)]


def _signature(graph):
    def tname(t):
        return t if isinstance(t, str) else getattr(t, "__name__", repr(t))

    return [(n.op, n.name, tname(n.target)) for n in graph.nodes]


def test_node_lists_match_torch_fx():
    torch = pytest.importorskip("torch")
    torch_fx = pytest.importorskip("torch.fx")
    for ours, theirs in _torch_models(torch):
        assert _signature(symbolic_trace(ours).graph) == _signature(
            torch_fx.symbolic_trace(theirs).graph)


def test_printed_graph_and_code_match_torch_fx():
    torch = pytest.importorskip("torch")
    torch_fx = pytest.importorskip("torch.fx")
    ours, theirs = _torch_models(torch)[2]  # WithBuffer: get_attr, call_module, methods, ops
    a, b = symbolic_trace(ours), torch_fx.symbolic_trace(theirs)
    assert str(a.graph) == str(b.graph).replace("torch.", "ember.")
    assert a.code == b.code.replace("torch.", "ember.")


def test_varargs_kwargs_and_keyword_only_inputs():
    class M(nn.Module):
        def forward(self, x, *args, scale=2.0, **kwargs):
            return x + args[0] * scale + kwargs["k"]

    gm = symbolic_trace(M())
    assert [n.target for n in gm.graph.nodes if n.op == "placeholder"] == [
        "x", "*args", "scale", "**kwargs"]
    assert "def forward(self, x, *args, scale = 2.0, **kwargs):" in gm.code
    one = ember.ones(1)
    _close(gm(one, one, k=one), ember.full((1,), 4.0))
    _close(gm(one, one, scale=3.0, k=one), ember.full((1,), 5.0))

    def f(x, *, y):
        return x - y

    gf = symbolic_trace(f)
    _close(gf(one, y=one * 3), ember.full((1,), -2.0))
    _close(Interpreter(gf).run(one, one), ember.zeros(1))
    torch = pytest.importorskip("torch")
    torch_fx = pytest.importorskip("torch.fx")

    class TM(torch.nn.Module):
        def forward(self, x, *args, scale=2.0, **kwargs):
            return x + args[0] * scale + kwargs["k"]

    theirs = torch_fx.symbolic_trace(TM()).code  # its signature puts scale before *args
    assert gm.code.splitlines()[4:] == theirs.splitlines()[4:]


def test_param_shapes_constant_and_stack_traces():
    class UsesShape(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(ember.randn(4, 3))

        def forward(self, x):
            if self.w.shape[0] == 4:  # a concrete branch with param_shapes_constant
                return x @ self.w.t()
            return x

    with pytest.raises(TraceError):
        fx.Tracer().trace(UsesShape())
    tracer = fx.Tracer(param_shapes_constant=True)
    tracer.record_stack_traces = True
    m = UsesShape()
    graph = tracer.trace(m)
    gm = GraphModule(m, graph)
    x = ember.randn(2, 3)
    _close(gm(x), x @ m.w.t())
    matmul = graph.find_nodes(op="call_function", target=operator.matmul)[0]
    assert "test_fx.py" in matmul.stack_trace and "x @ self.w.t()" in matmul.stack_trace
    assert graph.output_node().op == "output"
    matmul.insert_arg(0, matmul.args[0])
    assert matmul.args[0] is matmul.args[1] and len(matmul.args) == 3
    with pytest.raises(IndexError, match="outside 0..3"):
        matmul.insert_arg(5, 1)


def test_setitem_dtype_device_constants_and_pickle():
    def f(x):
        y = x.to(dtype=ember.float64, device=ember.device("cpu"))
        y[y > 0] = 0.5
        z = y.new_zeros(2).fill_(float("-inf"))
        return y.sum() + z.sum().exp(), x.dtype == ember.float32

    gm = symbolic_trace(f)
    assert "x.to(dtype = ember.float64, device = device)" in gm.code
    assert "operator.setitem(to, gt, 0.5)" in gm.code and "fill_(-inf)" in gm.code
    assert not gm.graph.eliminate_dead_code()  # setitem and fill_ have effects
    x = ember.tensor([1.0, -2.0, 3.0])
    for g in (gm, pickle.loads(pickle.dumps(gm)), copy.deepcopy(gm)):
        total, is_f32 = g(x)
        assert total.dtype == ember.float64 and total.item() == pytest.approx(-1.0)
        assert is_f32 is True


def test_erase_while_walking_and_gradients_of_traced_function():
    gm = symbolic_trace(lambda x: ember.relu(x).neg().exp())
    g = gm.graph
    for n in g.nodes:  # erase the node after the current one while walking: the walk goes on
        if n.target is ember.relu:
            after = n.next
            after.replace_all_uses_with(n)
            g.erase_node(after)
    assert [n.name for n in g.nodes] == ["x", "relu", "exp", "output"]
    with pytest.raises(ValueError, match="was erased"):
        n.prepend(after)
    gm.recompile()
    _close(gm(ember.tensor([-1.0, 1.0])), ember.tensor([1.0, math.e]))

    traced = symbolic_trace(ops_fn)
    x, y = ember.randn(3, 4, requires_grad=True), ember.randn(3, 4, requires_grad=True)
    xr, yr = x.detach().clone().requires_grad_(True), y.detach().clone().requires_grad_(True)
    a, b = traced(x, y)
    (a.sum() + b).backward()
    ar, br = ops_fn(xr, yr)
    (ar.sum() + br).backward()
    _close(x.grad, xr.grad)
    _close(y.grad, yr.grad)


_LOGGED = []


@fx.has_side_effect
def _log_value(x):
    _LOGGED.append(x)


fx.wrap("_log_value")


def test_side_effects_initial_env_and_boxed_run():
    def f(x):
        _log_value(x)
        return x + 1

    gm = symbolic_trace(f)
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"][0] is _log_value
    assert not gm.graph.eliminate_dead_code()  # the logging call is kept
    _LOGGED.clear()
    _close(gm(ember.ones(2)), ember.full((2,), 2.0))
    assert len(_LOGGED) == 1
    x_node = next(iter(gm.graph.nodes))
    interp = Interpreter(gm)
    _close(interp.run(initial_env={x_node: ember.zeros(2)}), ember.ones(2))
    args = [ember.ones(1)]
    _close(Interpreter(gm).boxed_run(args), ember.full((1,), 2.0))
    assert args == []


def _tiny_gpt(lib, nn_, F_):
    """The same small GPT written against ember or torch (lib, lib.nn, lib.nn.functional)."""
    V, D, H, T = 16, 16, 2, 8

    class Block(nn_.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn_.Linear(D, 3 * D, bias=False)
            self.proj = nn_.Linear(D, D)
            self.ln = nn_.LayerNorm(D)
            self.fc = nn_.Linear(D, 2 * D)
            self.register_buffer("mask", lib.ones(T, T).tril().view(1, 1, T, T))

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(F_.rms_norm(x, (D,))).view(b, t, 3, H, D // H).permute(2, 0, 3, 1, 4)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = F_.softmax(att.masked_fill(self.mask == 0, float("-inf")), dim=-1)
            a = F_.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, D)) + (att @ v).mean()
            return x + self.fc(self.ln(x)).relu().square().chunk(2, dim=-1)[0]

    class GPT(nn_.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn_.Embedding(V, D)
            self.blocks = nn_.ModuleList(Block() for _ in range(2))
            self.head = nn_.Linear(D, V, bias=False)

        def forward(self, idx):
            x = self.embed(idx)
            for block in self.blocks:
                x = block(x)
            return 30 * lib.tanh(self.head(x) / 30)

    return GPT()


def test_tiny_gpt_matches_torch_fx_nodes_and_outputs():
    torch = pytest.importorskip("torch")
    torch_fx = pytest.importorskip("torch.fx")
    theirs = _tiny_gpt(torch, torch.nn, torch.nn.functional)
    ours = _tiny_gpt(ember, nn, F)
    ours.load_state_dict({k: ember.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    gm, tgm = symbolic_trace(ours), torch_fx.symbolic_trace(theirs)
    assert _signature(gm.graph) == _signature(tgm.graph)
    assert any(n.target is math.sqrt for n in gm.graph.nodes)
    idx = np.random.default_rng(0).integers(0, 16, (2, 8))
    out = gm(ember.tensor(idx))
    _close(out, ours(ember.tensor(idx)))
    np.testing.assert_allclose(out.detach().numpy(), tgm(torch.tensor(idx)).detach().numpy(),
                               rtol=1e-4, atol=1e-4)


def test_delete_all_unused_submodules():
    gm = symbolic_trace(SmallCNN().eval())
    bn = gm.graph.find_nodes(op="call_module", target="layer.1.bn2")[0]
    bn.replace_all_uses_with(bn.args[0])
    gm.graph.erase_node(bn)
    gm.recompile()
    gm.add_submodule("spare.head", nn.Linear(2, 2))
    gm.delete_all_unused_submodules()
    names = {k for k, _ in gm.named_modules()}
    assert "layer.1.bn2" not in names and "spare" not in names and "layer.1.conv2" in names
    assert gm(ember.randn(1, 3, 4, 4)).shape == (1, 5)
