"""quorum.torch on 2+ ranks under quorum-run: torch.distributed (gloo on
loopback) started over the quorum ranks, a quorum communicator handed over
from it (quorum_init_oob on torch's allgather), and the DDP communication hook:
under injected imbalance, sync, solo and majority keep the replicas bitwise
identical, and sync trains exactly as DDP's own allreduce does (up to float
rounding)."""
import time

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import quorum
import quorum.torch as qt


@pytest.fixture(scope="module")
def pg(comm):
    if comm.size < 2:
        pytest.skip("needs 2 or more ranks")
    qt.init_process_group(comm, backend="gloo")
    yield
    dist.destroy_process_group()


def test_handover_needs_torch_distributed():
    assert not dist.is_initialized()  # runs before the pg fixture starts it
    with pytest.raises(RuntimeError, match="not initialized"):
        qt.init()


def test_handover_from_torch_distributed(comm, pg):
    assert dist.get_rank() == comm.rank and dist.get_world_size() == comm.size
    with qt.init() as c:
        assert (c.rank, c.size) == (comm.rank, comm.size)
        x = torch.full((5,), float(c.rank))
        c.allreduce(x)
        assert (x == sum(range(c.size))).all()


def test_hook_rejects_bad_options():
    with pytest.raises(ValueError, match="reduce"):
        qt.hook(reduce="all")
    with pytest.raises(ValueError, match="carry_weight"):
        qt.hook(reduce="solo", carry_weight=0)
    with pytest.raises(ValueError, match="partial_scale"):
        qt.hook(reduce="solo", partial_scale="half")


def train(comm, hook, steps=10, delay_s=0.004):
    """A small MLP under DDP; each step one rank drawn from a shared seed sleeps
    before its backward pass (the paper's imbalance). Returns its parameters."""
    torch.manual_seed(0)  # the same initial model everywhere (DDP broadcasts it anyway)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 4))
    ddp = DDP(model, bucket_cap_mb=0.01)  # several buckets
    if hook is not None:
        ddp.register_comm_hook(comm, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator().manual_seed(100 + comm.rank)  # each rank its own data
    slow = np.random.default_rng(7)
    for _ in range(steps):
        x = torch.randn(16, 20, generator=data)
        y = torch.randint(0, 4, (16,), generator=data)
        loss = nn.functional.cross_entropy(ddp(x), y)
        if slow.integers(comm.size) == comm.rank:
            time.sleep(delay_s)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def same_everywhere(comm, params):
    everyone = torch.zeros(comm.size, params.numel())
    comm.allgather(params, everyone)
    return all(torch.equal(everyone[0], everyone[r]) for r in range(comm.size))


def test_sync_hook_matches_ddp_allreduce(comm, pg):
    ref = train(comm, None)
    h = qt.hook(reduce="sync")
    mine = train(comm, h)
    assert same_everywhere(comm, mine)
    torch.testing.assert_close(mine, ref, rtol=1e-5, atol=1e-6)
    assert h.stats()["steps"] == 10 and h.stats()["partial_rounds"] == 0


@pytest.mark.parametrize("reduce", ["solo", "majority"])
def test_partial_hook_keeps_replicas_identical(comm, pg, reduce):
    h = qt.hook(reduce=reduce, max_staleness=3, carry_weight=0.5, seed=11)
    params = train(comm, h, steps=12)
    assert same_everywhere(comm, params), "replicas differ"
    stats = h.stats()
    # The first step is synchronous (DDP rebuilds its buckets after it); the
    # rest ran as partial rounds, one per bucket and step.
    assert stats["steps"] == 12
    assert stats["partial_rounds"] >= 11 and stats["partial_rounds"] % 11 == 0
    assert 1 <= stats["mean_fresh"] <= comm.size
    h.close()
