"""The PyTorch "Learn the Basics" tutorials in one program (written anew, on synthetic data):
tensors (creation from data, NumPy and other tensors, attributes, indexing and slicing, joining,
arithmetic, single-element tensors, in-place ops, the NumPy bridge), the model-building page
(nn.Flatten, nn.Sequential, nn.Softmax, named_parameters), autograd (requires_grad, grad_fn,
detach, no_grad, Jacobian-vector products with retain_graph, grad accumulation), an
optimization loop with train/test functions, and saving/loading weights. Everything printed is
deterministic: the test compares ember's output to torch's line by line.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember."""

import os
import tempfile

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

# ---- tensors ----
data = [[1, 2], [3, 4]]
x_data = torch.tensor(data)
np_array = np.array(data)
x_np = torch.from_numpy(np_array)
x_ones = torch.ones_like(x_data)
print(f"Ones Tensor: \n {x_ones} \n")
x_full = torch.full_like(x_data, 7, dtype=torch.float)
print(f"Full Tensor: \n {x_full} \n")
shape = (2, 3,)
ones_tensor = torch.ones(shape)
zeros_tensor = torch.zeros(shape)
print(f"Ones Tensor: \n {ones_tensor} \n")
print(f"Zeros Tensor: \n {zeros_tensor}")
tensor = torch.arange(12, dtype=torch.float32).reshape(3, 4)
print(f"Shape of tensor: {tensor.shape}")
print(f"Datatype of tensor: {tensor.dtype}")
print(f"Device tensor is stored on: {tensor.device}")
if torch.cuda.is_available():
    tensor = tensor.to("cuda")
print(f"First row: {tensor[0]}")
print(f"First column: {tensor[:, 0]}")
print(f"Last column: {tensor[..., -1]}")
tensor[:, 1] = 0
print(tensor)
t1 = torch.cat([tensor, tensor, tensor], dim=1)
print(t1.shape, torch.stack([tensor, tensor]).shape, torch.hstack([tensor, tensor]).shape,
      torch.vstack([tensor, tensor]).shape)
y1 = tensor @ tensor.T
y2 = tensor.matmul(tensor.T)
y3 = torch.rand_like(y1)
torch.matmul(tensor, tensor.T, out=y3)
assert torch.equal(y1, y2) and torch.equal(y1, y3)
z1 = tensor * tensor
z2 = tensor.mul(tensor)
z3 = torch.rand_like(tensor)
torch.mul(tensor, tensor, out=z3)
assert torch.equal(z1, z3) and torch.equal(z1, z2)
print(y1)
agg = tensor.sum()
agg_item = agg.item()
print(agg_item, type(agg_item))
print(f"{tensor} \n")
tensor.add_(5)
print(tensor)
t = torch.ones(5)
print(f"t: {t}")
n = t.numpy()
print(f"n: {n}")
t.add_(1)
print(f"t: {t}")
print(f"n: {n}")
n = np.ones(5)
t = torch.from_numpy(n)
np.add(n, 1, out=n)
print(f"t: {t}")
print(f"n: {n}")
# a few more everyday operations
a = torch.tensor([[3.0, -1.5, 2.25], [0.0, 7.0, -4.0]])
print(a.max(), a.argmax(), a.max(dim=1), a.min(1).indices)
print(a.sort(dim=1, descending=True))
print(a.topk(2))
print(torch.where(a > 0, a, torch.zeros_like(a)))
print(a.clamp(min=-1, max=3), a.abs().sqrt().round(decimals=2))
print(a.T.contiguous().view(-1), a.flatten().tolist(), a.numel(), a.dim(), a.size(1))
print(a.mean(), a.std(), a.var(dim=0), a.median(), a.cumsum(1), a.prod(1))
print(torch.linspace(0, 1, 5), torch.logspace(0, 2, 3), torch.eye(2), torch.arange(0, 10, 3))
print(a.unsqueeze(0).shape, a.permute(1, 0).shape, a.chunk(2, dim=1)[0], a.split([1, 2], 1)[1])
print(a[a > 0], a.masked_fill(a < 0, -1), a.nonzero(), a.any(), a.all(dim=1))
print(torch.tensor([1, 2, 3]).float().dtype, torch.tensor([1.5]).long(), a.to(torch.int32))
print(a.new_zeros(2), a.new_ones(1, 2), a.new_full((2,), 3.5), a.new_tensor([1, 2]))
print(torch.tensor([[1, 2], [3, 4]]).repeat(2, 1), torch.tensor([1, 2]).expand(2, 2))
print(torch.tensor(3.5), torch.tensor([]).shape, torch.empty(0, 3).shape)
print(torch.tensor([1.0, float("nan"), float("inf")]), torch.tensor([1e10, 1e-10]))
print(torch.tensor([0.1, 0.25], dtype=torch.float64), torch.tensor([1, 2], dtype=torch.uint8))
print(torch.tensor([[True, False]]), torch.zeros(2, 2, dtype=torch.int16))
print(torch.tensor([123456789.0]), torch.tensor([1.0, 2.0, 3.0]) / 3)
print(torch.arange(6).reshape(2, 3).tolist(), torch.tensor([2.5]).item())

# ---- build the neural network ----
torch.manual_seed(0)


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(6 * 6, 32),
            nn.ReLU(),
            nn.Linear(32, 32),
            nn.ReLU(),
            nn.Linear(32, 4),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits


model = NeuralNetwork()
print(model)
X = torch.rand(1, 6, 6)
logits = model(X)
pred_probab = nn.Softmax(dim=1)(logits)
y_pred = pred_probab.argmax(1)
assert y_pred.shape == (1,)
for name, param in model.named_parameters():
    print(f"Layer: {name} | Size: {param.size()} | requires_grad: {param.requires_grad}")

# ---- autograd ----
x = torch.ones(5)
y = torch.zeros(3)
w = torch.tensor(np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3), requires_grad=True)
b = torch.tensor([0.1, -0.2, 0.3], requires_grad=True)
z = torch.matmul(x, w) + b
loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
print(f"Gradient function for z = {type(z.grad_fn).__name__ != ''}")
print(f"Gradient function for loss = {loss.grad_fn is not None}")
loss.backward()
print(w.grad)
print(b.grad)
z = torch.matmul(x, w) + b
print(z.requires_grad)
with torch.no_grad():
    z = torch.matmul(x, w) + b
print(z.requires_grad)
z_det = (torch.matmul(x, w) + b).detach()
print(z_det.requires_grad)
inp = torch.eye(4, 5, requires_grad=True)
out = (inp + 1).pow(2).t()
out.backward(torch.ones_like(out), retain_graph=True)
print(f"First call\n{inp.grad}")
out.backward(torch.ones_like(out), retain_graph=True)
print(f"\nSecond call\n{inp.grad}")
inp.grad.zero_()
out.backward(torch.ones_like(out), retain_graph=True)
print(f"\nCall after zeroing gradients\n{inp.grad}")

# ---- optimization loop ----
rng = np.random.default_rng(0)
images = rng.random((256, 6, 6), dtype=np.float32)
labels = (images[:, :3].mean((1, 2)) > images[:, 3:].mean((1, 2))).astype(np.int64) \
    + 2 * (images[:, :, :3].mean((1, 2)) > images[:, :, 3:].mean((1, 2))).astype(np.int64)
training_data = TensorDataset(torch.from_numpy(images[:192]), torch.from_numpy(labels[:192]))
test_data = TensorDataset(torch.from_numpy(images[192:]), torch.from_numpy(labels[192:]))
train_dataloader = DataLoader(training_data, batch_size=32)
test_dataloader = DataLoader(test_data, batch_size=32)
learning_rate, epochs = 0.5, 8
model = NeuralNetwork()
g = np.random.default_rng(1)
with torch.no_grad():  # the same starting weights on every library
    for p in model.parameters():
        p.copy_(torch.from_numpy(g.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)


def train_loop(dataloader, model, loss_fn, optimizer):
    size = len(dataloader.dataset)
    model.train()
    for batch, (X, y) in enumerate(dataloader):
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if batch % 3 == 0:
            loss, current = loss.item(), batch * 32 + len(X)
            print(f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]")


def test_loop(dataloader, model, loss_fn):
    model.eval()
    size = len(dataloader.dataset)
    num_batches = len(dataloader)
    test_loss, correct = 0, 0
    with torch.no_grad():
        for X, y in dataloader:
            pred = model(X)
            test_loss += loss_fn(pred, y).item()
            correct += (pred.argmax(1) == y).type(torch.float).sum().item()
    test_loss /= num_batches
    correct /= size
    print(f"Test Error: \n Accuracy: {(100*correct):>0.1f}%, Avg loss: {test_loss:>8f} \n")
    return test_loss


for t in range(epochs):
    print(f"Epoch {t+1}\n-------------------------------")
    train_loop(train_dataloader, model, loss_fn, optimizer)
    last = test_loop(test_dataloader, model, loss_fn)
print("Done!")
with tempfile.TemporaryDirectory() as d:
    torch.save(model.state_dict(), os.path.join(d, "model_weights.pth"))
    model2 = NeuralNetwork()
    model2.load_state_dict(torch.load(os.path.join(d, "model_weights.pth"), weights_only=True))
    model2.eval()
    torch.save(model, os.path.join(d, "model.pth"))
    model3 = torch.load(os.path.join(d, "model.pth"), weights_only=False)
with torch.no_grad():
    assert torch.equal(model2(X), model(X)) and torch.equal(model3(X), model(X))
print(f"RESULT {last:.6f}")
