"""Variable-length sequence classification as real data pipelines write it: a custom
map-style Dataset with __getitem__/__len__, random_split with a seeded Generator (and fractions),
a WeightedRandomSampler that rebalances classes, a BatchSampler, a collate_fn that pads with
pad_sequence(batch_first=True) and returns lengths, an nn.GRU (bidirectional) over
pack_padded_sequence(enforce_sorted=False) / pad_packed_sequence, masked mean pooling, Subset and
ConcatDataset, default_collate on dicts, an IterableDataset with worker_info, and a DataLoader
with a sampler. The sampler draws from each library's own generator, so the numbers are compared
in trend; what does not depend on the draws is printed and compared exactly. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember."""

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from torch.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    SequentialSampler,
    Subset,
    WeightedRandomSampler,
    get_worker_info,
    random_split,
)
from torch.utils.data.dataloader import default_collate

torch.manual_seed(0)
rng = np.random.default_rng(0)
VOCAB, PAD = 12, 0


class SequenceDataset(Dataset):
    """Class 1 sequences contain token 7; class 0 never does. One in five is class 1."""

    def __init__(self, n):
        self.items = []
        for i in range(n):
            label = int(i % 5 == 0)
            length = int(rng.integers(3, 11))
            seq = rng.integers(1, VOCAB, length)
            seq[seq == 7] = 8
            if label:
                seq[rng.integers(0, length)] = 7
            self.items.append((torch.tensor(seq), label))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        seq, label = self.items[idx]
        return {"tokens": seq, "label": torch.tensor(label), "length": len(seq)}


def pad_collate(batch):
    tokens = pad_sequence([b["tokens"] for b in batch], batch_first=True, padding_value=PAD)
    labels = torch.stack([b["label"] for b in batch])
    lengths = torch.tensor([b["length"] for b in batch])
    return tokens, labels, lengths


full = SequenceDataset(400)
train_ds, val_ds, test_ds = random_split(full, [0.7, 0.15, 0.15],
                                         generator=torch.Generator().manual_seed(1))
print(f"split sizes: {len(train_ds)} {len(val_ds)} {len(test_ds)}")
labels = torch.tensor([full.items[i][1] for i in train_ds.indices])
class_count = torch.bincount(labels)
weights = (1.0 / class_count.float())[labels]
sampler = WeightedRandomSampler(weights, num_samples=len(train_ds), replacement=True)
print(f"class counts {class_count.tolist()}, sample weights {weights.unique().tolist()}")
train_loader = DataLoader(train_ds, batch_size=32, sampler=sampler, collate_fn=pad_collate)
val_loader = DataLoader(val_ds, batch_size=64, collate_fn=pad_collate)
test_loader = DataLoader(test_ds, batch_size=64, collate_fn=pad_collate)

seen = torch.cat([lab for _, lab, _ in train_loader])
print(f"rebalanced: fraction of class 1 drawn {seen.float().mean().item():.2f}")
tokens, lab, lengths = next(iter(val_loader))
print(f"padded batch {tuple(tokens.shape)} {tokens.dtype}, lengths max {lengths.max().item()}, "
      f"pads {(tokens == PAD).sum().item() == (lengths.max() - lengths).sum().item()}")
d = default_collate([full[0], full[5]] if len(full[0]["tokens"]) == len(full[5]["tokens"])
                    else [{"a": 1, "b": torch.ones(2)}, {"a": 2, "b": torch.zeros(2)}])
print("default_collate on dicts:", sorted(d.keys()), type(d[sorted(d.keys())[0]]).__name__)


class GRUClassifier(nn.Module):
    def __init__(self, emb=16, hidden=24):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, emb, padding_idx=PAD)
        self.rnn = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, 2)

    def forward(self, tokens, lengths):
        packed = pack_padded_sequence(self.embedding(tokens), lengths.cpu(), batch_first=True,
                                      enforce_sorted=False)
        out, h_n = self.rnn(packed)
        out, out_lengths = pad_packed_sequence(out, batch_first=True, total_length=tokens.size(1))
        assert torch.equal(out_lengths, lengths)
        mask = (torch.arange(tokens.size(1))[None, :] < lengths[:, None]).unsqueeze(-1)
        pooled = (out * mask).sum(1) / lengths[:, None]
        return self.fc(pooled), h_n


model = GRUClassifier()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
criterion = nn.CrossEntropyLoss()


def evaluate(loader):
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for tokens, lab, lengths in loader:
            logits, _ = model(tokens, lengths)
            correct += (logits.argmax(1) == lab).sum().item()
            total += len(lab)
    return correct / total


first_loss = None
for epoch in range(6):
    model.train()
    for tokens, lab, lengths in train_loader:
        logits, h_n = model(tokens, lengths)
        loss = criterion(logits, lab)
        first_loss = loss.item() if first_loss is None else first_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    if epoch % 2 == 1:
        print(f"epoch {epoch}: loss {loss.item():.4f} val acc {evaluate(val_loader):.3f}")
print(f"h_n {tuple(h_n.shape)}")
test_acc = evaluate(test_loader)
print(f"test accuracy {test_acc:.3f}")

# the packed run equals running each sequence alone
model.eval()
with torch.no_grad():
    tokens, lab, lengths = next(iter(test_loader))
    logits, _ = model(tokens[:3], lengths[:3])
    alone = torch.cat([model(tokens[i:i + 1, :lengths[i]], lengths[i:i + 1])[0] for i in range(3)])
print(f"packed == one at a time: {torch.allclose(logits, alone, atol=1e-5)}")

# the other dataset tools
sub = Subset(full, [0, 5, 10])
both = ConcatDataset([sub, Subset(full, [1, 2])])
print(f"Subset/ConcatDataset: {len(both)} items, labels "
      f"{[int(both[i]['label']) for i in range(len(both))]}, cumulative {both.cumulative_sizes}")
batches = list(BatchSampler(SequentialSampler(range(10)), batch_size=4, drop_last=False))
print("BatchSampler:", batches)


class Counter(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        assert info is None  # the main process
        return iter(range(self.n))


print("IterableDataset batches:", [b.tolist() for b in DataLoader(Counter(7), batch_size=3)])
print(f"RESULT {first_loss:.6f} {loss.item():.6f} {test_acc:.4f}")
