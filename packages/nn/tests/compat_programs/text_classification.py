"""Text classification with nn.EmbeddingBag, in the style of the public PyTorch "text
classification with the torchtext library" tutorial (without torchtext: a tokenizer and a vocab
written here): a Counter-built vocabulary with an <unk> default, a collate_fn that packs
variable-length texts into one flat tensor plus offsets (cumsum), EmbeddingBag in mean and sum
modes (checked against a padded computation), uniform init, SGD with StepLR, gradient clipping,
accuracy, and prediction on new sentences. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember.
Prints RESULT <first epoch accuracy> <last accuracy> <test accuracy>."""

import argparse
import re
import sys
import time
from collections import Counter, OrderedDict

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader
from torch.utils.data.dataset import random_split

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args(sys.argv[1:])
torch.manual_seed(args.seed)

TOPICS = {
    1: "World", 2: "Sports", 3: "Business", 4: "Sci/Tec",
}
WORDS = {
    1: "government minister election war president country talks leaders peace border",
    2: "match team season coach goal player league win cup championship",
    3: "stocks market shares company profit bank prices investors quarter deal",
    4: "software computer internet space research technology scientists phone chip data",
}
FILLER = "the a of in on and to for with as new says after over".split()


def make_split(n, seed):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        label = int(rng.integers(1, 5))
        topic = WORDS[label].split()
        words = [topic[i] for i in rng.integers(0, len(topic), rng.integers(2, 5))]
        words += [FILLER[i] for i in rng.integers(0, len(FILLER), rng.integers(3, 9))]
        if rng.random() < 0.3:  # a word from another topic, as noise
            other = WORDS[int(rng.integers(1, 5))].split()
            words.append(other[int(rng.integers(0, len(other)))])
        rng.shuffle(words)
        out.append((label, " ".join(words).capitalize() + "."))
    return out


train_iter = make_split(800, 1)
test_iter = make_split(200, 2)


def tokenizer(line):
    return re.findall(r"[a-z/]+", line.lower())


class Vocab:
    def __init__(self, counter, specials=("<unk>",)):
        ordered = OrderedDict(sorted(counter.items(), key=lambda kv: (-kv[1], kv[0])))
        self.itos = list(specials) + [w for w in ordered if w not in specials]
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.default_index = None

    def set_default_index(self, index):
        self.default_index = index

    def __len__(self):
        return len(self.itos)

    def __call__(self, tokens):
        return [self.stoi.get(t, self.default_index) for t in tokens]


counter = Counter()
for _, text in train_iter:
    counter.update(tokenizer(text))
vocab = Vocab(counter)
vocab.set_default_index(vocab.stoi["<unk>"])
print(f"vocab size {len(vocab)}; ids of 'the market xyzzy': {vocab(['the', 'market', 'xyzzy'])}")

text_pipeline = lambda x: vocab(tokenizer(x))  # noqa: E731
label_pipeline = lambda x: int(x) - 1  # noqa: E731
device = torch.device("cpu")


def collate_batch(batch):
    label_list, text_list, offsets = [], [], [0]
    for (_label, _text) in batch:
        label_list.append(label_pipeline(_label))
        processed_text = torch.tensor(text_pipeline(_text), dtype=torch.int64)
        text_list.append(processed_text)
        offsets.append(processed_text.size(0))
    label_list = torch.tensor(label_list, dtype=torch.int64)
    offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
    text_list = torch.cat(text_list)
    return label_list.to(device), text_list.to(device), offsets.to(device)


class TextClassificationModel(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class):
        super(TextClassificationModel, self).__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
        self.fc = nn.Linear(embed_dim, num_class)
        self.init_weights()

    def init_weights(self):
        initrange = 0.5
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.fc.weight.data.uniform_(-initrange, initrange)
        self.fc.bias.data.zero_()

    def forward(self, text, offsets):
        embedded = self.embedding(text, offsets)
        return self.fc(embedded)


num_class = len(set([label for (label, text) in train_iter]))
vocab_size = len(vocab)
emsize = 16
model = TextClassificationModel(vocab_size, emsize, num_class).to(device)

# EmbeddingBag's bags agree with a padded mean / sum
labels, text, offsets = collate_batch(train_iter[:5])
lengths = torch.diff(torch.cat([offsets, torch.tensor([text.numel()])]))
padded = nn.utils.rnn.pad_sequence(list(text.split(lengths.tolist())), batch_first=True)
mask = (torch.arange(padded.size(1)).unsqueeze(0) < lengths.unsqueeze(1)).float()
emb = model.embedding.weight[padded] * mask.unsqueeze(-1)
assert torch.allclose(model.embedding(text, offsets), emb.sum(1) / lengths.unsqueeze(1),
                      atol=1e-6)
bag_sum = nn.EmbeddingBag.from_pretrained(model.embedding.weight.detach(), mode="sum")
assert torch.allclose(bag_sum(text, offsets), emb.sum(1), atol=1e-5)
fixed = text[:6].view(2, 3)  # a 2-D input: each row one bag
assert torch.allclose(bag_sum(fixed), model.embedding.weight[fixed].sum(1), atol=1e-5)
assert not bag_sum.weight.requires_grad


def train(dataloader, epoch):
    model.train()
    total_acc, total_count = 0, 0
    log_interval = 10
    start_time = time.time()
    for idx, (label, text, offsets) in enumerate(dataloader):
        optimizer.zero_grad()
        predicted_label = model(text, offsets)
        loss = criterion(predicted_label, label)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()
        total_acc += (predicted_label.argmax(1) == label).sum().item()
        total_count += label.size(0)
        if idx % log_interval == 0 and idx > 0:
            elapsed = time.time() - start_time
            print("| epoch {:3d} | {:5d}/{:5d} batches | accuracy {:8.3f}".format(
                epoch, idx, len(dataloader), total_acc / total_count), f"({elapsed:.0f} s)")
            total_acc, total_count = 0, 0
            start_time = time.time()


def evaluate(dataloader):
    model.eval()
    total_acc, total_count = 0, 0
    with torch.no_grad():
        for idx, (label, text, offsets) in enumerate(dataloader):
            predicted_label = model(text, offsets)
            total_acc += (predicted_label.argmax(1) == label).sum().item()
            total_count += label.size(0)
    return total_acc / total_count


EPOCHS = args.epochs
LR = 5
BATCH_SIZE = 32
criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=LR)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
total_accu = None
num_train = int(len(train_iter) * 0.95)
split_train_, split_valid_ = random_split(train_iter, [num_train, len(train_iter) - num_train])
train_dataloader = DataLoader(split_train_, batch_size=BATCH_SIZE, shuffle=True,
                              collate_fn=collate_batch)
valid_dataloader = DataLoader(split_valid_, batch_size=BATCH_SIZE, shuffle=True,
                              collate_fn=collate_batch)
test_dataloader = DataLoader(test_iter, batch_size=BATCH_SIZE, shuffle=True,
                             collate_fn=collate_batch)
accs = []
for epoch in range(1, EPOCHS + 1):
    epoch_start_time = time.time()
    train(train_dataloader, epoch)
    accu_val = evaluate(valid_dataloader)
    if total_accu is not None and total_accu > accu_val:
        scheduler.step()
    else:
        total_accu = accu_val
    accs.append(accu_val)
    print("-" * 59)
    print("| end of epoch {:3d} | valid accuracy {:8.3f} | lr {:.4f}".format(
        epoch, accu_val, scheduler.get_last_lr()[0]))
    print("-" * 59)
accu_test = evaluate(test_dataloader)
print("test accuracy {:8.3f}".format(accu_test))


def predict(text, text_pipeline):
    with torch.no_grad():
        text = torch.tensor(text_pipeline(text))
        output = model(text, torch.tensor([0]))
        return output.argmax(1).item() + 1


ex_text_str = "The team won the cup after a late goal by their best player."
model = model.to("cpu")
print("This is a %s news" % TOPICS[predict(ex_text_str, text_pipeline)])
print(f"RESULT {accs[0]:.4f} {accs[-1]:.4f} {accu_test:.4f}")
