"""DTensor on a CUDA mesh (one rank, the nccl backend): the storage-less wrapper reports its
CUDA device to C++, so the composites pick the CUDA paths (fused attention, native dropout)
and make their temporaries on the GPU; the pieces are computed there, equal to whole tensors.
Skips without a GPU and NCCL."""

from __future__ import annotations

import ember
import ember.distributed as dist
import numpy as np
import pytest
from test_cuda_nccl import _nccl_loads

pytestmark = pytest.mark.skipif(not (ember.cuda.is_available() and _nccl_loads()),
                                reason="needs a CUDA device and NCCL")


@pytest.fixture
def mesh():
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1)
    from ember.distributed.device_mesh import init_device_mesh

    yield init_device_mesh("cuda", (1,))
    dist.destroy_process_group()


def test_attention_dropout_and_loss_on_gpu_pieces(mesh):
    from ember.distributed.tensor import Shard, distribute_tensor
    from ember.distributed.tensor.parallel import loss_parallel

    gen = ember.Generator().manual_seed(0)
    q = ember.randn(2, 4, 8, 16, generator=gen).cuda()
    d = distribute_tensor(q, mesh, [Shard(1)]).requires_grad_()
    assert d.device.type == "cuda" and d.to_local().is_cuda
    out = ember.nn.functional.scaled_dot_product_attention(d, d, d, is_causal=True)
    assert out.placements == (Shard(dim=1),) and out.to_local().is_cuda
    want = ember.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
    np.testing.assert_allclose(out.full_tensor().detach().cpu().numpy(), want.cpu().numpy(),
                               rtol=2e-4, atol=2e-5)
    out.sum().backward()
    assert d.grad.placements == (Shard(dim=1),) and d.grad.to_local().is_cuda
    dropped = ember.nn.functional.dropout(d, 0.5)
    assert dropped.to_local().is_cuda and dropped.placements == (Shard(dim=1),)
    logits = distribute_tensor(ember.randn(6, 10, generator=gen).cuda(), mesh, [Shard(1)])
    target = ember.tensor([1, 0, 9, 3, 3, 7]).cuda()
    with loss_parallel():
        loss = ember.nn.functional.cross_entropy(logits, target)
    want = ember.nn.functional.cross_entropy(logits.full_tensor(), target)
    np.testing.assert_allclose(loss.full_tensor().cpu().item(), want.cpu().item(), rtol=1e-5)
