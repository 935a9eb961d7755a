"""Views, in-place ops and autograd's version counters, as they show up in real training code
and in the questions people ask about it: which ops return views (view, transpose, narrow,
select, diagonal, unfold, expand, as_strided, split / chunk, view_as_real, indexing with slices)
and which copy (reshape of a non-contiguous tensor, advanced indexing, contiguous, flatten of a
transposed tensor), writes through views reaching the base, strides and storage offsets,
_base, is_contiguous with memory formats, the errors users meet (in-place on a leaf that
requires grad, modifying a tensor saved for backward, view of a non-contiguous tensor, writing
into an expanded tensor, resizing, a view + in-place inside no_grad used later; writes into
unbind / split outputs stay under no_grad, the common ground), .data versus
.detach(), in-place ops on views of tensors requiring grad rebasing the graph (CopySlices), and
retain_grad on views. Each error is printed as its class and whether it is raised. Written
against `torch`; the test suite runs it unchanged on torch and, through an import shim, on
ember."""

import numpy as np
import torch

rng = np.random.default_rng(1510)


def raises(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the class is what the program reports
        return type(e).__name__
    return "no error"


base = torch.arange(24.0).reshape(4, 6)
print(f"arange().reshape() is itself a view: {base._base is not None}")
base = base.clone()
views = {
    "view": base.view(6, 4),
    "t": base.t(),
    "narrow": base.narrow(1, 2, 3),
    "select": base.select(0, 1),
    "diagonal": base.diagonal(offset=1),
    "unfold": base[0].unfold(0, 3, 2),
    "expand": base[:1].expand(3, 6),
    "as_strided": base.as_strided((3, 3), (6, 2), 1),
    "chunk": base.chunk(2, dim=1)[1],
    "slice": base[1:3, ::2],
    "unsqueeze": base.unsqueeze(0),
    "movedim": base.movedim(0, 1),
}
copies = {
    "reshape(t)": base.t().reshape(24),
    "index": base[[0, 2]],
    "mask": base[base > 20],
    "contiguous(t)": base.t().contiguous(),
    "flatten(t)": base.t().flatten(),
    "clone": base.clone(),
}
for name, v in views.items():
    print(f"{name:10s} view {v._base is base} shape {tuple(v.shape)} stride {v.stride()} offset {v.storage_offset()} "
          f"contiguous {v.is_contiguous()}")
for name, c in copies.items():
    print(f"{name:13s} shares storage {c.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()} base {c._base is not None}")
print(f"reshape of contiguous is a view: {base.reshape(2, 12)._base is base} flatten too: {base.flatten()._base is base}")

# writes through views
b = torch.zeros(3, 4)
b[1].fill_(1)
b[:, 2] += 2
b.diagonal().copy_(torch.tensor([7.0, 8.0, 9.0]))
b.t()[3, 0] = -1
torch.narrow(b, 1, 0, 1).mul_(10)
print(f"after writes through views {b.tolist()}")
c = torch.zeros(2, 3)
c.view(6)[::2] = 5
print(f"strided write {c.tolist()}")

# memory formats
img = torch.from_numpy(rng.normal(size=(2, 3, 4, 5)).astype(np.float32))
cl = img.to(memory_format=torch.channels_last)
print(f"channels_last strides {cl.stride()} contiguous {cl.is_contiguous()} cl {cl.is_contiguous(memory_format=torch.channels_last)} "
      f"equal {torch.equal(cl, img)} clone keeps {torch.empty_like(cl).is_contiguous(memory_format=torch.channels_last)} "
      f"preserve {cl.clone(memory_format=torch.preserve_format).stride()}")

# the errors
leaf = torch.ones(3, requires_grad=True)
print(f"in-place on a leaf requiring grad: {raises(lambda: leaf.add_(1))}")
print(f"view of a non-contiguous tensor: {raises(lambda: base.t().view(24))}")
print(f"write into an expanded tensor: {raises(lambda: torch.zeros(1, 3).expand(2, 3).add_(1))}")


def modify_saved():
    x = torch.ones(3, requires_grad=True)
    y = x * 2
    z = y.exp()
    z.add_(1)  # exp saved its output
    z.sum().backward()


print(f"modifying a saved tensor: {raises(modify_saved)}")


def modify_saved_sigmoid_input():
    x = torch.ones(3, requires_grad=True)
    y = x * 2
    z = y * y
    y.mul_(3)  # mul saved y
    z.sum().backward()


print(f"modifying a saved input: {raises(modify_saved_sigmoid_input)}")
print(f"size mismatch in view: {raises(lambda: base.view(5, 5))} resize_ of a view {raises(lambda: base[0].resize_(12))}")
print(f"set requires_grad on non-leaf: {raises(lambda: (leaf * 2).requires_grad_(False))}")
print(f"backward twice: {raises(lambda: [(w := (leaf * leaf).sum()).backward(), w.backward()])}")

# versions
v = torch.zeros(4)
versions = [v._version]
v.add_(1)
versions.append(v._version)
v[1:3].mul_(2)
versions.append(v._version)
v2 = v.view(2, 2)
v2.zero_()
versions.append(v._version)
print(f"versions {versions} shared with views {v2._version == v._version}")

# .data vs .detach
w = torch.ones(3, requires_grad=True)
out = w.sigmoid()
out.data.mul_(2)  # invisible to autograd: backward uses the corrupted output silently
out.sum().backward()
print(f"after .data write grad {w.grad.tolist()}")
w.grad = None
out = w.sigmoid()
out.detach().mul_(2)
print(f"after .detach() write: {raises(lambda: out.sum().backward())}")

# in-place on a view of a tensor requiring grad: CopySlices
x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
y = x * 1
y[1:3] = x[1:3] ** 2
y.view(2, 2)[0, 0] *= 10
print(f"grad_fn {type(y.grad_fn).__name__} values {y.tolist()}")
y.sum().backward()
print(f"grad through the rebased view {x.grad.tolist()}")
x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
h = x.exp()
hv = h[:2]
hv.retain_grad()
(hv * torch.tensor([1.0, 3.0])).sum().backward()
print(f"retain_grad on a view {hv.grad.tolist()} x.grad {[round(g, 5) for g in x.grad.tolist()]}")

# a view created under no_grad and modified in-place later
x = torch.ones(3, requires_grad=True)
y = x * 2
with torch.no_grad():
    yv = y[:2]
print(f"no_grad view requires_grad {yv.requires_grad} in-place on it: {raises(lambda: yv.mul_(2))}")
# outputs of unbind / split: written under no_grad (torch refuses recorded writes into them;
# ember records those correctly, so the program stays on the common ground)
with torch.no_grad():
    y.unbind(0)[0].mul_(2)
    y.split(1)[1].add_(1)
ts = y.tensor_split(3)[2]
ts.mul_(3)  # tensor_split gives plain slices: a recorded write is fine in both
y.sum().backward()
print(f"writes into unbind / split outputs under no_grad, tensor_split with grad: values {y.tolist()} grad {x.grad.tolist()}")
