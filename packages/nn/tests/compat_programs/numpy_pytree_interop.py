"""NumPy interop and pytrees as data-science code and training utilities use them:
torch.from_numpy / Tensor.numpy() sharing memory both ways (writes show through), torch.as_tensor
(sharing or copying by dtype), torch.tensor always copying, np.asarray / np.array of tensors,
dtype mappings (float64 arrays stay float64, NumPy scalars of each kind, np.bool_), mixing NumPy
scalars and arrays with tensors in arithmetic (which type comes out, which dtype), non-writable
and negative-stride arrays, .numpy(force=True) on a tensor that requires grad, .tolist() /
.item() types, DLPack round trips, torch.utils._pytree (tree_flatten / tree_unflatten /
tree_map / tree_leaves over nested dicts, tuples, namedtuples and None, register_pytree_node for
a dataclass) used to move a nested batch, cast it and average per-leaf gradients, and a
least-squares model fitted with NumPy and torch side by side. Written against `torch`; the test
suite runs it unchanged on torch and, through an import shim, on ember. Prints RESULT <fit
difference> <leaves> <shared writes>."""

import collections
import dataclasses
import warnings

import numpy as np
import torch
import torch.utils._pytree as pytree

shared = 0

# ---- sharing memory ----
arr = np.arange(6, dtype=np.float32).reshape(2, 3)
t = torch.from_numpy(arr)
arr[0, 0] = 100.0
t[1, 2] = -5.0
shared += int(t[0, 0].item() == 100.0) + int(arr[1, 2] == -5.0)
print("from_numpy shares:", t[0, 0].item(), arr[1, 2], t.dtype, t.shape)
back = t.numpy()
back[0, 1] = 7.0
shared += int(t[0, 1].item() == 7.0)
print("numpy() shares:", t[0, 1].item(), type(back).__name__, back.dtype)
a64 = np.linspace(0, 1, 4)
print("as_tensor float64 shares:", torch.as_tensor(a64).dtype,
      np.shares_memory(torch.as_tensor(a64).numpy(), a64),
      "with dtype copies:", np.shares_memory(torch.as_tensor(a64, dtype=torch.float32).numpy(),
                                              a64),
      "torch.tensor copies:", np.shares_memory(torch.tensor(a64).numpy(), a64))
print("np.asarray", np.asarray(t).dtype, np.asarray(t, dtype=np.float64).dtype,
      np.array(torch.tensor([1, 2])).dtype, np.asarray(torch.tensor(True)).dtype,
      np.asarray(torch.tensor(2.5)).shape)

# ---- dtypes ----
for a in (np.zeros(2, np.float16), np.zeros(2, np.int8), np.zeros(2, np.uint8),
          np.zeros(2, np.int16), np.zeros(2, np.int32), np.zeros(2, np.int64),
          np.zeros(2, np.bool_), np.zeros(2, np.complex64), np.zeros(2, np.complex128)):
    print("from_numpy", a.dtype, "->", torch.from_numpy(a).dtype, "-> numpy",
          torch.from_numpy(a).numpy().dtype)
print("tensor of numpy scalars", torch.tensor(np.float64(1.5)).dtype,
      torch.tensor(np.float32(1.5)).dtype, torch.tensor(np.int32(3)).dtype,
      torch.tensor(np.bool_(True)).dtype, torch.tensor([np.float32(1), np.float32(2)]).dtype,
      torch.tensor(np.array(3, dtype=np.int16)).dtype)

# ---- mixing with NumPy in arithmetic ----
x = torch.tensor([1.0, 2.0])
r1 = x * np.float64(2.0)
r2 = np.float64(2.0) * x
r3 = x + np.int64(1)
r4 = x * np.float32(0.5)
print("tensor * np.float64:", type(r1).__name__, r1.dtype, r1.tolist())
print("np.float64 * tensor:", type(r2).__name__, getattr(r2, "dtype", None),
      np.asarray(r2).tolist())
print("tensor + np.int64:", type(r3).__name__, r3.dtype, "tensor * np.float32:", r4.dtype)
r5 = x.to(torch.int32) * np.float64(1.5)
print("int tensor * np.float64:", r5.dtype, r5.tolist())
print("torch.tensor(np.float64) * float32 tensor:", (torch.tensor(np.float64(2.0)) * x).dtype)

# ---- awkward arrays ----
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "not writable" (once per process)
    ro = np.arange(3.0)
    ro.flags.writeable = False
    t_ro = torch.from_numpy(ro)
print("non-writable array:", t_ro.tolist(), "shared:", np.shares_memory(t_ro.numpy(), ro))
rev = np.arange(5.0)[::-1]
try:
    torch.from_numpy(rev)
except ValueError as e:
    print("negative strides: ValueError", "stride" in str(e))
print("copy of reversed:", torch.from_numpy(rev.copy()).tolist(),
      "as_tensor of reversed:", torch.as_tensor(rev.copy()).tolist())
print("non-contiguous view:", torch.from_numpy(np.arange(12.0).reshape(3, 4)[:, ::2]).stride())
w = torch.ones(2, requires_grad=True)
try:
    w.numpy()
except RuntimeError:
    print("numpy() of a tensor that requires grad: RuntimeError")
print("force=True:", w.numpy(force=True).tolist(), "detach:", w.detach().numpy().dtype)
print("tolist types", type(torch.tensor([1]).tolist()[0]).__name__,
      type(torch.tensor([1.5]).tolist()[0]).__name__,
      type(torch.tensor([True]).tolist()[0]).__name__, type(torch.tensor(2).item()).__name__,
      type(torch.tensor(2.5, dtype=torch.float16).item()).__name__)

# ---- DLPack ----
src = torch.arange(6.0).view(2, 3)
cap = torch.utils.dlpack.to_dlpack(src)
dl = torch.utils.dlpack.from_dlpack(cap)
dl[0, 0] = 42.0
shared += int(src[0, 0].item() == 42.0)
print("dlpack shares:", src[0, 0].item(), dl.shape)
npd = np.from_dlpack(src)
print("np.from_dlpack", npd.dtype, npd.shape, np.shares_memory(npd, src.numpy()))
tn = torch.from_dlpack(np.arange(4, dtype=np.int32))
print("torch.from_dlpack(ndarray)", tn.dtype, tn.tolist())

# ---- pytrees ----
Batch = collections.namedtuple("Batch", ["images", "labels"])


@dataclasses.dataclass
class Extras:
    weights: torch.Tensor
    note: str


pytree.register_pytree_node(
    Extras,
    lambda e: ([e.weights], e.note),
    lambda children, note: Extras(children[0], note),
)
tree = {"batch": Batch(torch.ones(2, 3), torch.tensor([0, 1])),
        "aux": [torch.zeros(2), None, (torch.full((1,), 3.0), 5)],
        "extras": Extras(torch.tensor([0.5, 1.5]), "w")}
leaves, spec = pytree.tree_flatten(tree)
print("leaves", len(leaves), [type(v).__name__ for v in leaves])
print("num_leaves", spec.num_leaves, "leaves again", len(pytree.tree_leaves(tree)))
doubled = pytree.tree_map(lambda v: v * 2 if isinstance(v, torch.Tensor) else v, tree)
print("tree_map keeps structure:", type(doubled["batch"]).__name__,
      doubled["batch"].labels.tolist(), type(doubled["extras"]).__name__,
      doubled["extras"].note, doubled["extras"].weights.tolist(), doubled["aux"][1],
      doubled["aux"][2][1])
rebuilt = pytree.tree_unflatten(leaves, spec)
print("unflatten round trip:", rebuilt["batch"].images.shape, rebuilt["extras"].note,
      rebuilt["aux"][2][0].item())
halved = pytree.tree_map_only(torch.Tensor, lambda v: v.double(), tree)
print("tree_map_only dtypes", sorted({str(v.dtype) for v in pytree.tree_leaves(halved)
                                      if isinstance(v, torch.Tensor)}))
grads = [pytree.tree_map(lambda v: v + k if isinstance(v, torch.Tensor) and
                         v.is_floating_point() else v, tree) for k in range(3)]
stacked = pytree.tree_map(lambda *vs: torch.stack(vs).mean(0) if isinstance(vs[0], torch.Tensor)
                          and vs[0].is_floating_point() else vs[0], *grads)
print("per-leaf mean over 3 trees:", stacked["batch"].images[0].tolist(),
      stacked["extras"].weights.tolist())

# ---- least squares, NumPy and torch side by side ----
rng = np.random.default_rng(0)
A = rng.standard_normal((30, 4))
coef = np.array([1.0, -2.0, 0.5, 3.0])
b = A @ coef + 0.01 * rng.standard_normal(30)
np_sol = np.linalg.lstsq(A, b, rcond=None)[0]
th_sol = torch.linalg.lstsq(torch.from_numpy(A), torch.from_numpy(b).unsqueeze(1)).solution
diff = float(np.abs(th_sol.squeeze(1).numpy() - np_sol).max())
print("lstsq agrees with NumPy:", diff < 1e-10, [round(float(v), 4) for v in np_sol])
print(f"RESULT {diff:.1e} {len(leaves)} {shared}")
