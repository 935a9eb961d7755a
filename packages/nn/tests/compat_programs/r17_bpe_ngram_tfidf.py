"""Classical NLP in PyTorch as course notebooks write it: byte-pair-encoding merges learned by
counting adjacent symbol pairs with torch.unique(dim=0, return_counts=True) and applied by
masked rewrites, a bigram language model with add-k and interpolated Kneser-Ney smoothing from
bincount over pair ids, perplexity on held-out text, TF-IDF vectors in a sparse COO matrix
(coalesce, torch.sparse.sum, sparse @ dense), cosine retrieval with topk, PPMI word vectors by
truncated SVD (torch.linalg.svd) and nearest neighbours, and a fastText-style bag of n-gram
embeddings (nn.EmbeddingBag with offsets) trained on sentiment with SGD. Written against
`torch`; the test suite runs it unchanged on torch and, through an import shim, on ember. Prints
RESULT <first loss> <last loss> <kn perplexity>."""

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

corpus = ("low lower lowest newer newest wider widest slow slower slowest new newer low low "
          "lower newest widest wide wider").split()
# BPE on characters with an end-of-word marker
symbols = sorted(set("".join(corpus)) | {"_"})
vocab = {s: i for i, s in enumerate(symbols)}
words = [torch.tensor([vocab[c] for c in w] + [vocab["_"]]) for w in corpus]
merges = []
for step in range(8):
    pairs = torch.cat([torch.stack([w[:-1], w[1:]], 1) for w in words if w.numel() > 1])
    uniq, counts = torch.unique(pairs, dim=0, return_counts=True)
    best = counts.argmax()
    a, b = uniq[best].tolist()
    new_sym = symbols[a] + symbols[b]
    symbols.append(new_sym)
    new_id = len(symbols) - 1
    merges.append((new_sym, counts[best].item()))
    out = []
    for w in words:
        keep = torch.ones(w.numel(), dtype=torch.bool)
        res = w.clone()
        i = 0
        hits = ((w[:-1] == a) & (w[1:] == b)).nonzero().flatten().tolist()
        last = -2
        for h in hits:
            if h == last + 1:
                continue  # overlapping pair (e.g. "aaa")
            res[h] = new_id
            keep[h + 1] = False
            last = h
        out.append(res[keep])
    words = out
print(f"bpe merges {merges}")
print(f"'lowest' tokenized {[symbols[i] for i in words[2].tolist()]} 'newer' {[symbols[i] for i in words[3].tolist()]}")

text = ("the cat sat on the mat . the dog sat on the log . a cat saw a dog . the dog saw the cat on the mat . "
        "a dog sat . the cat sat . a cat and a dog sat on a mat .").split()
heldout = "the dog sat on the mat . a cat sat on the log .".split()
wv = sorted(set(text + heldout))
wid = {w: i for i, w in enumerate(wv)}
V = len(wv)
ids = torch.tensor([wid[w] for w in text])
big = torch.bincount(ids[:-1] * V + ids[1:], minlength=V * V).view(V, V).double()
uni = torch.bincount(ids, minlength=V).double()
hid = torch.tensor([wid[w] for w in heldout])


def perplexity(P):
    return math.exp(-torch.log(P[hid[:-1], hid[1:]]).mean().item())


addk = (big + 0.1) / (big.sum(1, keepdim=True) + 0.1 * V)
d = 0.75
cont = (big > 0).sum(0).double()
p_cont = cont / (big > 0).sum()
lam = d * (big > 0).sum(1, keepdim=True) / big.sum(1, keepdim=True).clamp(min=1)
kn = torch.clamp(big - d, min=0) / big.sum(1, keepdim=True).clamp(min=1) + lam * p_cont
kn_rows_ok = torch.allclose(kn[big.sum(1) > 0].sum(1), torch.ones(int((big.sum(1) > 0).sum()), dtype=torch.float64))
ppl_kn = perplexity(kn)
print(f"bigram perplexity add-0.1 {perplexity(addk):.4f} kneser-ney {ppl_kn:.4f} kn rows sum to one {kn_rows_ok}")
print(f"continuation prob of 'the' {p_cont[wid['the']].item():.4f} of 'mat' {p_cont[wid['mat']].item():.4f}")

docs = ["the cat sat on the mat", "the dog sat on the log", "a cat saw a dog", "dogs and cats are pets", "the mat is on the floor"]
dv = sorted(set(" ".join(docs).split()))
did = {w: i for i, w in enumerate(dv)}
rows, cols = [], []
for r, dtext in enumerate(docs):
    for w in dtext.split():
        rows.append(r)
        cols.append(did[w])
tf = torch.sparse_coo_tensor(torch.tensor([rows, cols]), torch.ones(len(rows)), (len(docs), len(dv))).coalesce()
df = torch.bincount(tf.indices()[1], minlength=len(dv)).float()
idf = torch.log((1 + len(docs)) / (1 + df)) + 1
tfidf = torch.sparse_coo_tensor(tf.indices(), tf.values() * idf[tf.indices()[1]], tf.shape).coalesce()
norms = torch.sparse.sum(tfidf * tfidf, dim=1).to_dense().sqrt()
print(f"tf-idf nnz {tfidf._nnz()} max tf {tf.values().max().item():.0f} idf('the') {idf[did['the']].item():.4f} idf('pets') {idf[did['pets']].item():.4f}")
query = torch.zeros(len(dv), 1)
for w in "cat on the mat".split():
    query[did[w]] += idf[did[w]]
scores = torch.sparse.mm(tfidf, query).squeeze(1) / (norms * query.norm())
top = torch.topk(scores, 3)
print(f"retrieval top docs {top.indices.tolist()} scores {[round(v, 4) for v in top.values.tolist()]}")

# PPMI + SVD word vectors
win = 2
co = torch.zeros(V, V, dtype=torch.float64)
for off in range(1, win + 1):
    co.index_put_((ids[:-off], ids[off:]), torch.ones(ids.numel() - off, dtype=torch.float64), accumulate=True)
    co.index_put_((ids[off:], ids[:-off]), torch.ones(ids.numel() - off, dtype=torch.float64), accumulate=True)
pw = co.sum(1, keepdim=True) / co.sum()
pc = co.sum(0, keepdim=True) / co.sum()
pmi = torch.log((co / co.sum()) / (pw * pc))
ppmi = torch.nan_to_num(pmi, nan=0.0, neginf=0.0).clamp(min=0)
U, S, Vh = torch.linalg.svd(ppmi)
emb = U[:, :4] * S[:4].sqrt()
embn = F.normalize(emb, dim=1)
sims = embn @ embn.T
sims.fill_diagonal_(-2)
print(f"ppmi symmetric {torch.allclose(ppmi, ppmi.T)} top singular values {[round(v, 4) for v in S[:3].tolist()]}")
print(f"nearest to 'cat' by |cos| structure: cat~dog {sims[wid['cat'], wid['dog']].abs().item() > 0.5}")

# fastText-style classifier: unigrams + hashed bigrams, EmbeddingBag(mean) with offsets
rng = np.random.default_rng(1710)
pos_w = ["good", "great", "fun", "love", "nice"]
neg_w = ["bad", "awful", "boring", "hate", "poor"]
neutral = ["movie", "plot", "the", "actor", "film", "was", "very"]
allw = pos_w + neg_w + neutral
aid = {w: i for i, w in enumerate(allw)}
NB = 64


def featurize(tokens):
    uni_ids = [aid[w] for w in tokens]
    bi = [len(allw) + (hash_pair(a, b) % NB) for a, b in zip(uni_ids, uni_ids[1:])]
    return uni_ids + bi


def hash_pair(a, b):
    return (a * 1000003 + b * 7919) & 0x7FFFFFFF


samples, labels = [], []
for i in range(200):
    y = int(rng.integers(0, 2))
    ws = list(rng.choice(neutral, 4)) + list(rng.choice(pos_w if y else neg_w, 2))
    rng.shuffle(ws)
    samples.append(featurize(ws))
    labels.append(y)
flat = torch.tensor([t for s in samples for t in s])
offsets = torch.tensor([0] + list(np.cumsum([len(s) for s in samples])[:-1]))
labels = torch.tensor(labels)


class FastText(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(len(allw) + NB, 8, mode="mean")
        self.fc = nn.Linear(8, 2)

    def forward(self, flat, offsets):
        return self.fc(self.bag(flat, offsets))


model = FastText()
with torch.no_grad():
    for p in model.parameters():
        p.copy_(torch.from_numpy(rng.normal(0, 0.1, p.shape).astype(np.float32)))
opt = torch.optim.SGD(model.parameters(), lr=1.0, momentum=0.9)
losses = []
for epoch in range(30):
    loss = F.cross_entropy(model(flat, offsets), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if epoch % 10 == 0:
        print(f"epoch {epoch} loss {loss.item():.4f}")
acc = (model(flat, offsets).argmax(1) == labels).float().mean().item()
print(f"fasttext train accuracy {acc:.3f}")
print(f"RESULT {losses[0]:.4f} {losses[-1]:.4f} {ppl_kn:.4f}")
