"""C++ extensions: the same `<torch/extension.h>` source built by each framework's
`utils.cpp_extension.load_inline` (ember's against its C++ frontend, torch's against ATen), then
called from Python. What is timed is what an extension's user pays per call: crossing into C++
with tensors (pybind11 casters), and the ops the extension runs through each framework's C++
API (an LLTM cell, the classic extension example, at a small size where overhead dominates),
forward and forward+backward. The builds themselves (tens of seconds, cached on disk) are not
timed."""

from __future__ import annotations

import functools

from harness import Stmt, case

_SOURCE = r"""
torch::Tensor identity(torch::Tensor x) { return x; }

std::vector<torch::Tensor> lltm_forward(torch::Tensor input, torch::Tensor weights,
                                        torch::Tensor bias, torch::Tensor old_h,
                                        torch::Tensor old_cell) {
  auto X = torch::cat({old_h, input}, /*dim=*/1);
  auto gate_weights = torch::addmm(bias, X, weights.transpose(0, 1));
  auto gates = gate_weights.chunk(3, /*dim=*/1);
  auto input_gate = torch::sigmoid(gates[0]);
  auto output_gate = torch::sigmoid(gates[1]);
  auto candidate_cell = torch::elu(gates[2], /*alpha=*/1.0);
  auto new_cell = old_cell + candidate_cell * input_gate;
  auto new_h = torch::tanh(new_cell) * output_gate;
  return {new_h, new_cell};
}
"""

BATCH, FEATURES, STATE = 4, 8, 8


@functools.cache
def _extension(name: str):
    import importlib

    cpp_extension = importlib.import_module(f"{name}.utils.cpp_extension")
    try:
        return cpp_extension.load_inline(f"bench_lltm_{name}", _SOURCE,
                                         functions=["identity", "lltm_forward"])
    except Exception as e:  # noqa: BLE001 - no compiler / headers: the case reports it
        raise NotImplementedError(f"{name}: building the extension failed: {e}") from e


def _lltm_inputs(fw, grad: bool):
    x = fw.randn(BATCH, FEATURES, seed=1)
    w = fw.randn(3 * STATE, STATE + FEATURES, seed=2)
    b = fw.randn(3 * STATE, seed=3)
    h, c = fw.randn(BATCH, STATE, seed=4), fw.randn(BATCH, STATE, seed=5)
    if grad:
        w.requires_grad_()
        b.requires_grad_()
    return dict(x=x, w=w, b=b, h=h, c=c)


@case("cpp_ext/call identity", unit="us", check=False,
      doc="ext.identity(x): a tensor into a C++ function and back, 8 float32")  # fmt: skip
def _identity(fw):
    return Stmt("ext.identity(x)", ext=_extension(fw.name), x=fw.randn(8))


@case("cpp_ext/lltm forward", unit="us",
      doc="LLTM cell forward in C++ (cat, addmm, chunk, sigmoid, elu, tanh, 4 pointwise), "
          "batch 4, 8 features, state 8")  # fmt: skip
def _lltm_forward(fw):
    return Stmt("ext.lltm_forward(x, w, b, h, c)[0]", ext=_extension(fw.name),
                **_lltm_inputs(fw, grad=False))


@case("cpp_ext/lltm forward+backward", unit="us", check=False,
      doc="the same with weights requiring grad: forward in C++, then "
          "(h * c).sum().backward() through the graph the C++ ops recorded")  # fmt: skip
def _lltm_backward(fw):
    return Stmt("h2, c2 = ext.lltm_forward(x, w, b, h, c); (h2 * c2).sum().backward()",
                ext=_extension(fw.name), **_lltm_inputs(fw, grad=True))
