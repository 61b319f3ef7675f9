"""The partial collectives (solo and majority allreduce) from Python: with
carry, the rounds' results plus the flush add up exactly to every rank's posts
whatever the arrival order; every rank gets the same result for a round; drop
mode loses the late posts and says so; round info and stats are consistent."""
import time

import numpy as np
import pytest

from quorum import DType, Mode

N = 11
STEPS = 12


def contribution(rank, step, n=N):
    return np.arange(n, dtype=np.int64) * (rank + 1) + step * 7 + rank


def gather_all(comm, a):
    out = np.zeros(a.size * comm.size, dtype=a.dtype)
    comm.allgather(np.ascontiguousarray(a), out)
    return out.reshape(comm.size, -1)


@pytest.mark.parametrize("mode", [Mode.SOLO, Mode.MAJORITY])
def test_carry_conserves_every_post(comm, mode):
    rng = np.random.default_rng(1234 + comm.rank)
    with comm.partial(N, dtype=DType.INT64, mode=mode, max_staleness=3, carry=True,
                      seed=99) as p:
        results, rounds, fresh = [], [], []
        for step in range(STEPS):
            time.sleep(rng.uniform(0, 0.004))  # ranks arrive in random order
            p.post(contribution(comm.rank, step))
            r, info = p.wait()
            results.append(r.copy())
            rounds.append(info.round)
            fresh.append(info.fresh)
            assert 0 <= info.fresh <= comm.size
            assert info.initiator == -1 or 0 <= info.initiator < comm.size
        assert rounds == list(range(STEPS))
        rest = p.flush()
    total = sum(results) + rest
    posted = sum(contribution(r, s) for r in range(comm.size) for s in range(STEPS))
    np.testing.assert_array_equal(total, posted)
    # The same round gives the same result on every rank.
    everyone = gather_all(comm, np.concatenate(results))
    assert (everyone == everyone[0]).all()


def test_drop_mode_counts_and_reports(comm):
    # Rank 0 posts, the others join late: with drop, a late post is lost.
    with comm.partial(N, dtype="float64", mode=Mode.SOLO, max_staleness=4, carry=False) as p:
        got = np.zeros(N)
        for step in range(6):
            if comm.rank != 0:
                time.sleep(0.01)
            p.post(np.full(N, 1.0))
            _, info = p.wait(out=got)
            assert got[0] == info.fresh or info.initiator == -1
            stats = p.last_round_stats()
            assert stats.complete_ns >= stats.join_ns > 0
        p.flush()


def test_partial_on_torch_tensors(comm):
    torch = pytest.importorskip("torch")
    count = 64
    with comm.partial(count, dtype=torch.float32, mode=Mode.MAJORITY, seed=3) as p:
        g = torch.full((8, 8), float(comm.rank + 1))
        out = torch.empty(8, 8)
        total = torch.zeros(8, 8)
        for _ in range(5):
            p.post(g)
            r, info = p.wait(out=out)
            assert r is out
            total += out
            assert p.rounds_behind() >= 0
        total += p.flush(out=torch.empty(8, 8))
    assert torch.equal(total, torch.full((8, 8), 5.0 * comm.size * (comm.size + 1) / 2))
