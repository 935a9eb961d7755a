"""A spatial transformer network, in the style of the public PyTorch STN tutorial, on synthetic
shifted digit-like glyphs: a localization network regressing a 2x3 affine theta (initialized
to the identity through ``fc_loc[2].weight.data.zero_()`` and ``bias.data.copy_``),
F.affine_grid + F.grid_sample warping the input, a classifier on the warped image with
max_pool2d/dropout2d/log_softmax, SGD, and a max-unpooling autoencoder side check
(MaxPool2d(return_indices=True) + MaxUnpool2d). The model is wrapped in nn.DataParallel as
the multi-GPU examples do. Written against `torch`; the test suite runs it unchanged on torch
and, through an import shim, on ember. Prints RESULT <first test loss> <last> <accuracy>."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
SIDE = 16
GLYPHS = np.array([
    [[0, 1, 1, 0], [1, 0, 0, 1], [1, 0, 0, 1], [0, 1, 1, 0]],  # ring
    [[0, 1, 0, 0], [1, 1, 0, 0], [0, 1, 0, 0], [1, 1, 1, 0]],  # one
    [[1, 1, 1, 1], [0, 0, 1, 0], [0, 1, 0, 0], [1, 1, 1, 1]],  # zed
    [[1, 0, 0, 1], [1, 1, 1, 1], [0, 0, 0, 1], [0, 0, 0, 1]],  # four
], dtype=np.float32)


def make(n, seed):
    """Glyphs scaled 2x to 8x8 and dropped at a random place on a noisy 16x16 canvas."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.1, (n, 1, SIDE, SIDE)).astype(np.float32)
    y = rng.integers(0, 4, n)
    for i in range(n):
        g = np.kron(GLYPHS[y[i]], np.ones((2, 2), np.float32))
        r, c = rng.integers(0, SIDE - 8 + 1, size=2)
        x[i, 0, r:r + 8, c:c + 8] += g
    return TensorDataset(torch.from_numpy(x), torch.from_numpy(y.astype(np.int64)))


train_loader = DataLoader(make(512, 0), batch_size=64, shuffle=True, num_workers=0)
test_loader = DataLoader(make(256, 1), batch_size=64, shuffle=False, num_workers=0)


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 8, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=3, padding=1)
        self.conv2_drop = nn.Dropout2d(0.1)
        self.fc1 = nn.Linear(16 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, 4)
        # spatial transformer localization network
        self.localization = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=5, padding=2),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True),
            nn.Conv2d(8, 10, kernel_size=3, padding=1),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True),
        )
        self.fc_loc = nn.Sequential(
            nn.Linear(10 * 4 * 4, 32),
            nn.ReLU(True),
            nn.Linear(32, 3 * 2),
        )
        # start from the identity transformation
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

    def stn(self, x):
        xs = self.localization(x)
        xs = xs.view(-1, 10 * 4 * 4)
        theta = self.fc_loc(xs)
        theta = theta.view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size(), align_corners=False)
        x = F.grid_sample(x, grid, align_corners=False)
        return x

    def forward(self, x):
        x = self.stn(x)
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 16 * 4 * 4)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, 0.1, training=self.training)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


model = nn.DataParallel(Net()).to(device)
# at the identity, the transformer returns its input
x0 = next(iter(test_loader))[0][:4]
with torch.no_grad():
    assert torch.allclose(model.module.stn(x0), x0, atol=1e-5)
optimizer = optim.Adam(model.parameters(), lr=3e-3)


def train(epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % 4 == 0:
            print("Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))


def test():
    with torch.no_grad():
        model.eval()
        test_loss = 0
        correct = 0
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, size_average=False).item()
            pred = output.max(1, keepdim=True)[1]
            correct += pred.eq(target.view_as(pred)).sum().item()
        test_loss /= len(test_loader.dataset)
        print("\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n".format(
            test_loss, correct, len(test_loader.dataset),
            100. * correct / len(test_loader.dataset)))
        return test_loss, correct / len(test_loader.dataset)


losses = [test()[0]]
for epoch in range(1, 7):
    train(epoch)
    loss, acc = test()
    losses.append(loss)

with torch.no_grad():
    warped = model.module.stn(x0).cpu()
    theta = model.module.fc_loc(model.module.localization(x0).view(-1, 160)).view(-1, 2, 3)
print("warped batch", tuple(warped.shape), "theta[0]", theta[0].shape)

# max-unpooling: pooled maxima put back in place, everything else zero
pool = nn.MaxPool2d(2, stride=2, return_indices=True)
unpool = nn.MaxUnpool2d(2, stride=2)
pooled, indices = pool(x0)
restored = unpool(pooled, indices)
assert restored.shape == x0.shape
assert torch.equal(restored.amax(dim=(2, 3)), x0.amax(dim=(2, 3)))
assert (restored != 0).sum().item() == pooled.numel()
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {acc:.4f}")
