"""An MNIST-style convolutional classifier, in the style of the public PyTorch MNIST example, on
tiny synthetic digit-like images: a Dataset subclass with a transform, random_split into train
and validation sets, DataLoaders with a seeded generator, Conv2d/Dropout/max_pool2d/flatten,
log_softmax + nll_loss, Adadelta with a StepLR schedule, test accuracy from argmax/eq/sum, and a
checkpoint of model and optimizer state_dicts saved, loaded with map_location and resumed.
Written against `torch`; the test suite runs it unchanged on torch and, through an import shim,
on ember. Prints RESULT <first epoch test loss> <last test loss> <last accuracy>."""

import argparse
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset, random_split

SIDE = 12
N_CLASSES = 4


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(16 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, N_CLASSES)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


class Shapes(Dataset):
    """Noisy images of four shapes (horizontal bar, vertical bar, box, cross) as uint8 arrays, a
    transform turning each into a normalized float tensor, like ToTensor + Normalize."""

    def __init__(self, n, seed, transform=None):
        rng = np.random.default_rng(seed)
        self.targets = rng.integers(0, N_CLASSES, size=n)
        self.data = np.zeros((n, SIDE, SIDE), dtype=np.uint8)
        for k, t in enumerate(self.targets):
            r, c = rng.integers(3, SIDE - 3, size=2)
            img = self.data[k]
            if t == 0:
                img[r, 1:-1] = 255
            elif t == 1:
                img[1:-1, c] = 255
            elif t == 2:
                img[r - 2:r + 3, c - 2:c + 3] = 255
                img[r - 1:r + 2, c - 1:c + 2] = 0
            else:
                img[r, c - 2:c + 3] = 255
                img[r - 2:r + 3, c] = 255
            noise = rng.integers(0, 60, size=(SIDE, SIDE))
            self.data[k] = np.clip(img.astype(int) + noise, 0, 255).astype(np.uint8)
        self.transform = transform

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        img, target = self.data[index], int(self.targets[index])
        if self.transform is not None:
            img = self.transform(img)
        return img, target


def to_tensor_normalized(img, mean=0.2, std=0.35):
    x = torch.from_numpy(img).float().div(255).unsqueeze(0)
    return (x - mean) / std


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print("Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}".format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    print("\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n".format(
        test_loss, correct, len(test_loader.dataset),
        100. * correct / len(test_loader.dataset)))
    return test_loss, correct / len(test_loader.dataset)


def main():
    parser = argparse.ArgumentParser(description="PyTorch MNIST-style Example")
    parser.add_argument("--batch-size", type=int, default=32, metavar="N")
    parser.add_argument("--test-batch-size", type=int, default=100, metavar="N")
    parser.add_argument("--epochs", type=int, default=4, metavar="N")
    parser.add_argument("--lr", type=float, default=1.0, metavar="LR")
    parser.add_argument("--gamma", type=float, default=0.7, metavar="M")
    parser.add_argument("--no-cuda", action="store_true", default=False)
    parser.add_argument("--seed", type=int, default=1, metavar="S")
    parser.add_argument("--log-interval", type=int, default=5, metavar="N")
    parser.add_argument("--save-model", action="store_true", default=True)
    parser.add_argument("--out", default=".")
    args = parser.parse_args(sys.argv[1:])
    use_cuda = not args.no_cuda and torch.cuda.is_available()

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if use_cuda else "cpu")
    train_kwargs = {"batch_size": args.batch_size}
    test_kwargs = {"batch_size": args.test_batch_size}
    if use_cuda:
        cuda_kwargs = {"num_workers": 1, "pin_memory": True, "shuffle": True}
        train_kwargs.update(cuda_kwargs)
        test_kwargs.update(cuda_kwargs)

    full = Shapes(400, seed=0, transform=to_tensor_normalized)
    dataset1, dataset2 = random_split(full, [0.75, 0.25],
                                      generator=torch.Generator().manual_seed(0))
    assert len(dataset1) == 300 and len(dataset2) == 100
    train_loader = DataLoader(dataset1, shuffle=True,
                              generator=torch.Generator().manual_seed(args.seed), **train_kwargs)
    test_loader = DataLoader(dataset2, **test_kwargs)
    x0, y0 = next(iter(train_loader))
    print(f"batch: {tuple(x0.shape)} {x0.dtype}, targets {tuple(y0.shape)} {y0.dtype}")

    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    losses, accs = [], []
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        loss, acc = test(model, device, test_loader)
        losses.append(loss)
        accs.append(acc)
        scheduler.step()
        print(f"lr now {scheduler.get_last_lr()[0]:.4f}")

    if args.save_model:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "mnist_cnn.pt")
        torch.save({"epoch": args.epochs, "model_state_dict": model.state_dict(),
                    "optimizer_state_dict": optimizer.state_dict(),
                    "scheduler_state_dict": scheduler.state_dict(), "loss": losses[-1]}, path)
        checkpoint = torch.load(path, map_location=torch.device("cpu"))
        model2 = Net()
        optimizer2 = optim.Adadelta(model2.parameters(), lr=args.lr)
        scheduler2 = StepLR(optimizer2, step_size=1, gamma=args.gamma)
        model2.load_state_dict(checkpoint["model_state_dict"])
        optimizer2.load_state_dict(checkpoint["optimizer_state_dict"])
        scheduler2.load_state_dict(checkpoint["scheduler_state_dict"])
        assert checkpoint["epoch"] == args.epochs
        assert optimizer2.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"]
        state = optimizer2.state_dict()["state"]
        assert len(state) == 8 and set(state[0]) >= {"square_avg", "acc_delta"}, state[0].keys()
        model2.eval()
        with torch.no_grad():
            assert torch.equal(model2(x0), model.eval()(x0))
        # one more epoch from the checkpoint
        train(args, model2, device, train_loader, optimizer2, args.epochs + 1)
        scheduler2.step()
        resumed, _ = test(model2, device, test_loader)
        print(f"resumed: loss {resumed:.4f}, lr {scheduler2.get_last_lr()[0]:.4f}")
    print(f"RESULT {losses[0]:.6f} {losses[-1]:.6f} {accs[-1]:.4f}")


if __name__ == "__main__":
    main()
