"""Every collective of the Python bindings on numpy arrays and torch tensors,
every dtype, in place and out of place, with integer-valued data (exact
results); and the errors for bad arguments. Runs as one process and as 2-3
ranks under quorum-run."""
import importlib

import numpy as np
import pytest

import quorum
from quorum import DType, Op, QuorumError, Status

NUMPY_DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64]
TORCH_DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64"]


def import_torch():
    """torch, imported by the tests named *torch* only (the 3-rank run leaves
    them out: torch takes seconds to import on a loaded 2-core machine)."""
    return importlib.import_module("torch")
N = 37  # not a multiple of anything


def values(rank, n=N):
    """Small integers (exact in float16 and bfloat16 even when summed)."""
    return (np.arange(n) % 5) + rank


def expected(size, op, n=N):
    per_rank = np.stack([values(r, n) for r in range(size)])
    return {Op.SUM: per_rank.sum(0), Op.MIN: per_rank.min(0), Op.MAX: per_rank.max(0),
            Op.PROD: per_rank.prod(0)}[op]


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("op", [Op.SUM, Op.MIN, Op.MAX])
def test_allreduce_numpy(comm, dtype, op):
    send = values(comm.rank).astype(dtype)
    recv = np.full(N, -1, dtype=dtype)
    assert comm.allreduce(send, recv, op=op) is recv
    np.testing.assert_array_equal(recv, expected(comm.size, op).astype(dtype))
    np.testing.assert_array_equal(send, values(comm.rank).astype(dtype))  # untouched
    comm.allreduce(send, op=op)  # in place
    np.testing.assert_array_equal(send, recv)


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_allreduce_torch(comm, dtype):
    torch = import_torch()
    dtype = getattr(torch, dtype)
    t = torch.from_numpy(values(comm.rank)).to(dtype)
    view = t.view(-1)  # same memory: the result lands in t
    comm.allreduce(view, op=Op.SUM)
    assert torch.equal(t, torch.from_numpy(expected(comm.size, Op.SUM)).to(dtype))
    out = torch.empty_like(t)
    comm.allreduce(torch.ones_like(t), out, op=Op.PROD)
    assert torch.equal(out, torch.ones_like(t))


def test_allreduce_avg_and_2d(comm):
    x = np.tile(values(comm.rank).astype(np.float64), (3, 1))  # 3 x N, C-contiguous
    comm.allreduce(x, op=Op.AVG)
    np.testing.assert_array_equal(x[2], expected(comm.size, Op.SUM) / comm.size)


def test_iallreduce_wait_and_test(comm):
    a = values(comm.rank).astype(np.int64)
    b = np.zeros(N, dtype=np.int64)
    req = comm.iallreduce(a, b)
    req.wait()
    assert req.done
    np.testing.assert_array_equal(b, expected(comm.size, Op.SUM))
    a = values(comm.rank).astype(np.float32)
    req = comm.iallreduce(a)
    while not req.test():
        pass
    req.wait()  # a no-op once done
    np.testing.assert_array_equal(a, expected(comm.size, Op.SUM).astype(np.float32))


def test_iallreduce_torch(comm):
    torch = import_torch()
    t = torch.from_numpy(values(comm.rank).astype(np.float32))
    req = comm.iallreduce(t)
    while not req.test():
        pass
    req.wait()
    assert torch.equal(t, torch.from_numpy(expected(comm.size, Op.SUM).astype(np.float32)))


def test_bcast_any_dtype(comm):
    for root in range(comm.size):
        buf = np.full(10, comm.rank, dtype=np.uint8)
        comm.bcast(buf, root=root)
        assert (buf == root).all()


def test_bcast_torch(comm):
    torch = import_torch()
    t = torch.full((4, 5), float(comm.rank), dtype=torch.bfloat16)
    comm.bcast(t, root=comm.size - 1)
    assert (t == comm.size - 1).all()


def test_barrier(comm):
    comm.barrier()


def test_allgather(comm):
    send = np.full(3, comm.rank + 1, dtype=np.int16)  # any dtype: moved as bytes
    recv = np.zeros(3 * comm.size, dtype=np.int16)
    comm.allgather(send, recv)
    np.testing.assert_array_equal(recv, np.repeat(np.arange(comm.size) + 1, 3))


def test_allgather_torch(comm):
    torch = import_torch()
    t = torch.full((2,), comm.rank, dtype=torch.int64)
    out = torch.zeros(comm.size, 2, dtype=torch.int64)
    comm.allgather(t, out)
    assert torch.equal(out[:, 0], torch.arange(comm.size))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_reduce_scatter(comm, dtype):
    per = 5
    send = np.concatenate([np.full(per, comm.rank + 10 * r) for r in range(comm.size)]).astype(dtype)
    recv = np.zeros(per, dtype=dtype)
    comm.reduce_scatter(send, recv, op=Op.SUM)
    want = sum(q + 10 * comm.rank for q in range(comm.size))
    np.testing.assert_array_equal(recv, np.full(per, want, dtype=dtype))


def invalid(call, *words):
    with pytest.raises(QuorumError) as e:
        call()
    assert e.value.status == Status.ERR_INVALID_ARG
    for w in words:
        assert w in str(e.value) and w in e.value.detail, (w, str(e.value))
    return e.value


def test_bad_arguments_raise(comm):
    f32 = np.zeros(N, dtype=np.float32)
    invalid(lambda: comm.allreduce(np.zeros(N, dtype=np.uint8)), "uint8", "no reduction")
    invalid(lambda: comm.allreduce(np.zeros(N, dtype=np.float64), f32), "float64", "float32")
    invalid(lambda: comm.allreduce(np.zeros(2 * N, dtype=np.float32)[::2]), "not C-contiguous")
    invalid(lambda: comm.allreduce(np.zeros(N + 1, dtype=np.float32), f32), str(N + 1), str(N))
    ro = np.zeros(N, dtype=np.float32)
    ro.flags.writeable = False
    invalid(lambda: comm.allreduce(f32, ro), "recv", "writable")
    invalid(lambda: comm.allreduce([1.0, 2.0]), "list")
    invalid(lambda: comm.allgather(f32, np.zeros(N * comm.size + 1, dtype=np.float32)),
            "allgather")
    invalid(lambda: comm.reduce_scatter(f32, np.zeros(N, dtype=np.float32)), "reduce_scatter") \
        if comm.size > 1 else None
    e = invalid(lambda: comm.bcast(f32, root=comm.size), "root")
    assert isinstance(e, RuntimeError)
    with pytest.raises(QuorumError) as e:
        comm.partial(4, dtype="uint8")
    assert "uint8" in e.value.detail


def test_bad_torch_tensors_raise(comm):
    torch = import_torch()
    invalid(lambda: comm.allreduce(torch.zeros(4, 6).t()), "not contiguous")
    invalid(lambda: comm.allreduce(torch.zeros(4, dtype=torch.complex64)), "complex64")
    invalid(lambda: comm.allreduce(torch.zeros(4), torch.zeros(4, dtype=torch.float64)),
            "float32", "float64")
    invalid(lambda: comm.bcast(torch.zeros(4, 6)[:, 1]), "not contiguous")


def test_partial_arguments_checked(comm):
    with comm.partial(N, dtype=DType.INT64) as p:
        invalid(lambda: p.post(np.zeros(N, dtype=np.int32)), "int32", "int64")
        invalid(lambda: p.post(np.zeros(N - 1, dtype=np.int64)), str(N - 1))
        p.post(np.ones(N, dtype=np.int64))
        total, info = p.wait()
        assert total.dtype == np.int64 and info.round == 0
        p.flush()


def test_finalized_comm_refuses_calls():
    # A second communicator alongside the session's one (collective on every rank).
    c = quorum.init()
    with c:
        assert c.size >= 1
    assert c.finalized
    invalid(lambda: c.barrier(), "finalized")


def test_init_oob_with_python_allgather():
    # A one-rank group of its own on every rank: the allgather is the identity.
    calls = []

    def identity(data):
        calls.append(len(data))
        return data

    with quorum.init_oob(0, 1, identity) as c:
        assert (c.rank, c.size) == (0, 1) and calls
        x = np.arange(3, dtype=np.int32)
        c.allreduce(x)
        np.testing.assert_array_equal(x, np.arange(3))


def test_init_oob_errors_name_the_cause():
    def broken(data):
        raise ValueError("no network today")

    with pytest.raises(QuorumError) as e:
        quorum.init_oob(0, 1, broken)
    assert e.value.status == Status.ERR_BOOTSTRAP and "no network today" in e.value.detail
    with pytest.raises(QuorumError) as e:
        quorum.init_oob(0, 1, lambda data: data + b"x")
    assert "bytes" in e.value.detail
    with pytest.raises(QuorumError) as e:
        quorum.init_oob(2, 2, lambda data: data)
    assert e.value.status == Status.ERR_INVALID_ARG and "rank 2" in e.value.detail
