"""FlexAttention on the CPU: ``flex_attention`` with a causal BlockMask and with an ALiBi
``score_mod``, the same calls in both frameworks. Both run eagerly here (torch's fused kernels
need ``torch.compile``; its eager CPU path evaluates the mods over the whole score matrix, while
ember's evaluates them per query chunk and skips the key blocks a block mask leaves out). Forward
only: torch has no eager CPU backward for it."""

from __future__ import annotations

import importlib
import warnings

from harness import Stmt, case

B, H, L, E = 1, 8, 512, 64


def _flex(fw):
    return importlib.import_module(f"{fw.name}.nn.attention.flex_attention")


def _qkv(fw):
    return dict(q=fw.randn(B, H, L, E, seed=1), k=fw.randn(B, H, L, E, seed=2),
                v=fw.randn(B, H, L, E, seed=3))


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


@case("flex_attention/causal block mask", unit="ms", rtol=1e-4, atol=1e-5,
      doc=f"flex_attention(q, k, v, block_mask=causal), {B}x{H} heads, {L} tokens, dim {E}, "
          "float32; the mask built once outside the timing")  # fmt: skip
def _causal_case(fw):
    flex = _flex(fw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mask = flex.create_block_mask(_causal, None, None, L, L, device="cpu")
    return Stmt("f(q, k, v, block_mask=mask)", f=flex.flex_attention, mask=mask, **_qkv(fw))


@case("flex_attention/alibi score_mod", unit="ms", rtol=1e-4, atol=1e-5,
      doc=f"flex_attention(q, k, v, score_mod=alibi) with per-head slopes captured from a "
          f"tensor, {B}x{H} heads, {L} tokens, dim {E}, float32")  # fmt: skip
def _alibi_case(fw):
    flex = _flex(fw)
    slopes = fw.mod.exp2(-fw.mod.arange(1, H + 1, dtype=fw.mod.float32))

    def alibi(score, b, h, q_idx, kv_idx):
        return score + slopes[h] * (kv_idx - q_idx)

    return Stmt("f(q, k, v, score_mod=alibi)", f=flex.flex_attention, alibi=alibi, **_qkv(fw))
