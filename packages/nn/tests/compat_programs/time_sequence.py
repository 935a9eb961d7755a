"""Sine-wave continuation with two stacked LSTMCells trained by L-BFGS, in the style of the
public "time sequence prediction" example (written anew here): float64 throughout, a closure that
re-evaluates the loss, a test loss each step, then the model runs on its own predictions into
the future. Written against `torch`; the test suite runs it unchanged on torch and, through an
import shim, on ember. ``--save-init``/``--init-from`` move the initial weights through a NumPy
.npz file, so two runs can start from the same weights."""

import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torch.testing

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4, help="steps to run")
parser.add_argument("--out", default=".")
parser.add_argument("--save-init", default=None)
parser.add_argument("--init-from", default=None)
args = parser.parse_args(sys.argv[1:])


def make_waves(n=12, length=90, period=12, seed=2):
    """n sine waves of the given period, each shifted by a random phase."""
    rs = np.random.RandomState(seed)
    x = np.empty((n, length), np.int64)
    x[:] = np.array(range(length)) + rs.randint(-4 * period, 4 * period, n).reshape(n, 1)
    return np.sin(x / 1.0 / period * 2 * np.pi).astype("float64")


class Sequence(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.hidden = hidden
        self.lstm1 = nn.LSTMCell(1, hidden)
        self.lstm2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), self.hidden, dtype=input.dtype)
        c_t = torch.zeros(input.size(0), self.hidden, dtype=input.dtype)
        h_t2 = torch.zeros(input.size(0), self.hidden, dtype=input.dtype)
        c_t2 = torch.zeros(input.size(0), self.hidden, dtype=input.dtype)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # predicting the future: feed the output back in
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


if __name__ == "__main__":
    np.random.seed(0)
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    waves = make_waves()
    data, truth = waves[:, :60], waves[:3, 60:]  # the test waves' continuation
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    seq = Sequence()
    seq.double()
    assert next(seq.parameters()).dtype == torch.float64
    if args.save_init:
        np.savez(args.save_init, **{k: v.numpy() for k, v in seq.state_dict().items()})
    if args.init_from:
        with np.load(args.init_from) as f:
            seq.load_state_dict({k: torch.from_numpy(f[k]) for k in f.files})
    criterion = nn.MSELoss()
    # L-BFGS: the closure re-evaluates the model as often as the line search needs
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8)
    first = None
    n_evals = 0
    for i in range(args.steps):
        print("STEP: ", i)

        def closure():
            global n_evals
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            n_evals += 1
            print("loss:", f"{loss.item():.8f}")
            loss.backward()
            return loss

        loss = optimizer.step(closure)
        assert torch.is_tensor(loss) and torch.is_floating_point(loss)
        first = loss.item() if first is None else first
        # begin to predict, no need to track gradient here
        with torch.no_grad():
            future = 30
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print("test loss:", f"{loss.item():.8f}")
            y = pred.detach().numpy()
        assert y.shape == (3, test_input.size(1) + future)
    print(f"{n_evals} loss evaluations; state holds "
          f"{len(optimizer.state_dict()['state'][0]['old_dirs'])} curvature pairs")
    # the continuation against the true waves past the inputs' end
    future_mse = float(np.mean((y[:, -future:] - truth) ** 2))
    print(f"future mse: {future_mse:.6f} (the waves' own mean square: {np.mean(truth ** 2):.3f})")
    # and its slope: finite differences of the continuation against the true waves'
    slope = torch.diff(pred[:, -future - 1:], dim=1)
    true_slope = torch.from_numpy(truth).diff(dim=1, prepend=test_target[:, -1:])
    slope_mse = criterion(slope, true_slope).item()
    print(f"future slope mse: {slope_mse:.3e}")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "seq.pt")
    torch.save({"model": seq.state_dict(), "optimizer": optimizer.state_dict()}, path)
    ckpt = torch.load(path)
    again = Sequence().double()
    again.load_state_dict(ckpt["model"])
    with torch.no_grad():
        torch.testing.assert_close(again(test_input, future=5), seq(test_input, future=5))
    resumed = optim.LBFGS(again.parameters(), lr=0.8)
    resumed.load_state_dict(ckpt["optimizer"])
    assert resumed.state_dict()["state"][0]["n_iter"] == optimizer.state_dict()["state"][0]["n_iter"]

    # export the model, unrolled over a fixed input length and a 5-step continuation, to ONNX
    try:
        import onnx  # noqa: F401
        import onnxruntime as ort
    except ImportError:
        ort = None
    if ort is None:
        print("onnx: skipped (onnx/onnxruntime not installed)")
    else:
        # a float32 copy (onnxruntime's LSTM kernel has no float64), at a fixed batch size: the
        # tracer records the zero states' sizes as constants
        deploy = Sequence()
        deploy.load_state_dict(ckpt["model"])
        onnx_path = os.path.join(args.out, "seq.onnx")
        torch.onnx.export(deploy, (test_input.float(), 5), onnx_path, input_names=["input"],
                          output_names=["outputs"], opset_version=17, dynamo=False)
        sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
        with torch.no_grad():
            want = again(input[:3], future=5).numpy()  # three training waves: other data
        got = sess.run(None, {"input": input[:3].float().numpy()})[0]
        err = float(np.abs(got - want).max())
        assert err < 1e-4, err
        print(f"onnx: exported, onnxruntime max abs error {err:.1e}")
    print(f"RESULT {first:.8f} {loss.item():.8f} {future_mse:.8f}")
