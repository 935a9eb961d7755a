"""The dtype rules data-processing code leans on without noticing, in the style of the public
preprocessing / tokenization / image-decoding snippets: type promotion of tensors with Python
scalars and with each other (int + float scalar, uint8 + int8, bool arithmetic, int tensor *
float tensor, integer true division, torch.result_type / promote_types / can_cast), uint8
wrap-around in image arithmetic and the usual .float() / .clamp(0, 255).to(torch.uint8) fix,
integer division and remainders with negatives (floor_divide, div(rounding_mode="trunc" /
"floor"), remainder vs fmod), bitwise ops and shifts on int64 hashes (a feature-hashing trick),
frexp / ldexp / nextafter / copysign, integer overflow of cumsum on int32 and sum's int64
result, iinfo / finfo, mean refused on an integer tensor, argmax of a bool mask cast to int, float16 / bfloat16
rounding of a small model's weights and logits, as_strided sliding windows, renorm, and the
to(dtype) of a whole model with its buffers (an int64 counter kept). Everything printed is
exact: the outputs are equal on both libraries. Written against `torch`; the test suite runs it
unchanged on torch and, through an import shim, on ember. Prints RESULT <ok checks> <checks>
<hash buckets used>."""

import numpy as np
import torch
import torch.nn as nn

checks = []


def show(label, t):
    print(f"{label:28s} {t.dtype} {t.tolist()}")


a_u8 = torch.tensor([250, 10, 128], dtype=torch.uint8)
a_i8 = torch.tensor([-5, 3, 127], dtype=torch.int8)
a_i32 = torch.tensor([7, -7, 9], dtype=torch.int32)
a_i64 = torch.tensor([7, -7, 9])
f32 = torch.tensor([0.5, 1.5, -2.5])
b = torch.tensor([True, False, True])

show("uint8 + 10", a_u8 + 10)
show("uint8 + int8", a_u8 + a_i8)
show("uint8 * 2.5", a_u8 * 2.5)
show("int32 + int64", a_i32 + a_i64)
show("int64 / 2", a_i64 / 2)
show("int32 * float32", a_i32 * f32)
show("bool + bool", b + b)
show("bool * 3", b * 3)
show("bool.sum()", b.sum())
show("int32.sum()", a_i32.sum())
show("int32 + 1.0", a_i32 + 1.0)
show("float32 + float64 scalar", f32 + np.float64(0.1).item())
show("float16 + float32", torch.ones(2, dtype=torch.float16) + torch.ones(2))
show("bfloat16 + float16", torch.ones(2, dtype=torch.bfloat16) + torch.ones(2, dtype=torch.float16))
show("int8 * True", a_i8 * True)
print("result_type", torch.result_type(a_u8, 1.0), torch.result_type(a_i32, a_i64),
      torch.result_type(b, 2), torch.result_type(torch.tensor(1.0, dtype=torch.float64), f32))
print("promote_types", torch.promote_types(torch.uint8, torch.int8),
      torch.promote_types(torch.bfloat16, torch.float16), torch.promote_types(torch.bool,
                                                                              torch.float16))
print("can_cast", torch.can_cast(torch.float32, torch.int32), torch.can_cast(torch.int32,
                                                                             torch.float32))

# image arithmetic: uint8 wraps
img = torch.tensor([[200, 100], [30, 255]], dtype=torch.uint8)
show("uint8 brighten (wraps)", img + 100)
show("float brighten, clamped", (img.float() + 100).clamp(0, 255).to(torch.uint8))
show("uint8 - 50 (wraps)", img - 50)
show("float -> uint8 truncates", torch.tensor([1.7, 254.9, 0.2]).to(torch.uint8))

# integer division and remainders
n = torch.tensor([7, -7, 7, -7])
d = torch.tensor([2, 2, -2, -2])
show("floor_divide", torch.floor_divide(n, d))
show("div trunc", torch.div(n, d, rounding_mode="trunc"))
show("div floor", torch.div(n, d, rounding_mode="floor"))
show("//", n // d)
show("remainder", torch.remainder(n, d))
show("fmod", torch.fmod(n, d))
show("%", n % d)
show("float remainder", torch.remainder(torch.tensor([-3.5, 3.5]), 2))

# feature hashing with bitwise ops
tokens = torch.tensor([104, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100])
h = torch.zeros((), dtype=torch.int64)
hashes = []
for t in tokens:
    h = (h * 31 + t) & 0xFFFFFF
    hashes.append(int(h))
buckets = torch.tensor(hashes) % 16
print("rolling hashes", hashes[:4], "buckets", buckets.tolist())
x = torch.tensor([0b1011, 0b0110, -1])
show("and", x & 0b0011)
show("or", x | 0b1000)
show("xor", x ^ 0b1111)
show("not", ~x)
show("shift left", x << 2)
show("shift right", x >> 1)
show("bitwise_and bool", torch.bitwise_and(b, torch.tensor([True, True, False])))

# floating-point helpers
m, e = torch.frexp(torch.tensor([8.0, 0.3, -5.0]))
show("frexp mantissa", m)
show("frexp exponent", e)
show("ldexp", torch.ldexp(m, e))
show("nextafter", torch.nextafter(torch.tensor([1.0]), torch.tensor([2.0])) - 1.0)
show("copysign", torch.copysign(torch.tensor([1.0, 2.0]), torch.tensor([-0.0, 3.0])))

# overflow and reductions
big = torch.tensor([2 ** 30, 2 ** 30, 2 ** 30], dtype=torch.int32)
show("int32 cumsum", torch.cumsum(big, 0))
show("int32 cumsum as int64", torch.cumsum(big, 0, dtype=torch.int64))
show("int32 sum", big.sum())
show("uint8 sum", a_u8.sum())
print("iinfo int16", torch.iinfo(torch.int16).min, torch.iinfo(torch.int16).max,
      "finfo float16 eps", torch.finfo(torch.float16).eps, "bfloat16 max",
      torch.finfo(torch.bfloat16).max)
try:
    a_i64.mean()
    print("int mean: allowed")
except RuntimeError:
    print("int mean: RuntimeError")
show("bool as int argmax", torch.tensor([False, True, True]).int().argmax())
show("int max", a_i32.max())

# half-precision rounding of a small model
torch.manual_seed(0)
lin = nn.Linear(4, 3)
with torch.no_grad():
    lin.weight.copy_(torch.tensor([[0.1, 0.2, 0.3, 0.4], [1 / 3, -2 / 3, 1e-4, 1e4],
                                   [3.14159, 2.71828, -1.41421, 0.57722]]))
    lin.bias.copy_(torch.tensor([0.1, 0.01, 0.001]))
xin = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
print("fp16 weights", lin.half().weight[1].tolist())
print("bf16 weights", lin.float().bfloat16().weight[2].tolist())
print("bf16 logits", lin(xin.bfloat16()).tolist())
print("fp32 logits", lin.float()(xin).tolist())


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        self.register_buffer("scale", torch.ones(2))


c = Counter().to(torch.float64)
print("model.to(float64):", c.lin.weight.dtype, c.scale.dtype, "counter kept", c.steps.dtype)
c = c.half()
print("model.half():", c.lin.weight.dtype, c.scale.dtype, c.steps.dtype)

# strided windows and renorm
seq = torch.arange(10.0)
win = seq.as_strided((4, 4), (2, 1))
show("as_strided windows", win)
show("unfold windows agree", (win == seq.unfold(0, 4, 2)).all())
W = torch.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
show("renorm rows to 1", torch.renorm(W, p=2, dim=0, maxnorm=1.0))

checks = [
    (a_u8 + 10).dtype == torch.uint8, (a_u8 + a_i8).dtype == torch.int16,
    (a_i64 / 2).dtype == torch.float32, (b + b).dtype == torch.int64,
    torch.equal(n // d, torch.floor_divide(n, d)),
    int(torch.cumsum(big, 0)[-1]) < 0, big.sum().dtype == torch.int64,
]
print("checks", checks)
print(f"RESULT {sum(checks)} {len(checks)} {len(set(buckets.tolist()))}")
