"""The MPI-style calls of the Python bindings: split / dup, send / recv /
isend / irecv, rooted reduce, gather and scatter, alltoall and alltoallv, and
the non-blocking forms of the collectives; on numpy arrays and torch tensors
with integer-valued data (exact results), on the whole communicator and on a
sub-communicator from split; and the QuorumErrors for bad arguments. Runs as
one process and as 2-3 ranks under quorum-run: every rank makes the same
collective calls in the same order, and a call refused on one rank only is one
that no other rank makes."""
import gc
import importlib

import numpy as np
import pytest

import quorum
from quorum import Op, QuorumError, Status

NUMPY_DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64]
TORCH_DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64"]
N = 7  # elements per block: not a multiple of anything


def import_torch():
    """torch, imported by the tests named *torch* only (left out at 3 ranks)."""
    return importlib.import_module("torch")


def values(rank, n=N):
    """Small integers (exact in float16 and bfloat16 even when reduced)."""
    return (np.arange(n) % 5) + rank


def expected(size, op, n=N):
    per_rank = np.stack([values(r, n) for r in range(size)])
    return {Op.SUM: per_rank.sum(0), Op.MIN: per_rank.min(0), Op.MAX: per_rank.max(0),
            Op.PROD: per_rank.prod(0)}[op]


def block(src, dst, n=N):
    """The block rank src sends rank dst (alltoall, gather, scatter)."""
    return 100 * src + 10 * dst + np.arange(n) % 10


def v_count(src, dst):
    """alltoallv: how many elements rank src sends rank dst (0 for some pairs)."""
    return (src + 2 * dst) % 3


def refused(status, call, *words):
    with pytest.raises(QuorumError) as e:
        call()
    assert e.value.status == status, (e.value.status, e.value.detail)
    for w in words:
        assert w in e.value.detail and w in str(e.value), (w, e.value.detail)
    return e.value


def invalid(call, *words):
    return refused(Status.ERR_INVALID_ARG, call, *words)


# --- split and dup -----------------------------------------------------------

def test_split_by_parity_ranked_by_key(comm):
    sub = comm.split(comm.rank % 2, key=-comm.rank)  # reversed order within a color
    same = [r for r in range(comm.size) if r % 2 == comm.rank % 2]
    assert sub.size == len(same)
    assert sub.rank == sorted(same, reverse=True).index(comm.rank)
    x = np.array([comm.rank], dtype=np.int64)
    sub.allreduce(x)
    assert x[0] == sum(same)
    sub.finalize()
    assert sub.finalized


def test_split_undefined_and_dup(comm):
    sub = comm.split(None if comm.rank == 0 else 1)
    if comm.rank == 0:
        assert sub is None
    else:
        assert sub.size == comm.size - 1 and sub.rank == comm.rank - 1
        sub.finalize()
    assert comm.split(quorum.UNDEFINED) is None
    with comm.dup() as d:
        assert (d.rank, d.size) == (comm.rank, comm.size)
        out = np.zeros(comm.size, dtype=np.int32)
        d.allgather(np.array([comm.rank * 3], dtype=np.int32), out)
        np.testing.assert_array_equal(out, np.arange(comm.size) * 3)
    assert d.finalized
    invalid(lambda: d.send(np.zeros(1), 0), "finalized")
    invalid(lambda: comm.split("red"), "color", "str")


# --- point-to-point ----------------------------------------------------------

@pytest.mark.parametrize("dtype", NUMPY_DTYPES + [np.uint8])
def test_send_recv_numpy(comm, dtype):
    if comm.size == 1:
        pytest.skip("needs a peer")
    p, r = comm.size, comm.rank
    # A ring: isend to the next rank, blocking recv from the previous one.
    out = np.full(N, 99, dtype=dtype)
    req = comm.isend(block(r, (r + 1) % p).astype(dtype), (r + 1) % p, tag=5)
    assert comm.recv(out, (r - 1) % p, tag=5) is out
    req.wait()
    np.testing.assert_array_equal(out, block((r - 1) % p, r).astype(dtype))
    # Blocking send and recv between ranks 0 and 1, 2-D arrays.
    if r == 0:
        assert comm.send(np.full((2, 3), 7, dtype=dtype), 1) is None
    elif r == 1:
        got = np.zeros((2, 3), dtype=dtype)
        comm.recv(got, 0)
        np.testing.assert_array_equal(got, np.full((2, 3), 7, dtype=dtype))


def test_tags_match_out_of_order(comm):
    if comm.size == 1:
        pytest.skip("needs a peer")
    if comm.rank == 0:
        reqs = [comm.isend(np.full(3, t, dtype=np.int64), 1, tag=t) for t in (1, 2, 3)]
        for q in reqs:
            q.wait()
    elif comm.rank == 1:
        got = {t: np.zeros(3, dtype=np.int64) for t in (3, 1, 2)}
        reqs = [comm.irecv(got[t], 0, tag=t) for t in (3, 1, 2)]
        while not all([q.test() for q in reqs]):
            pass
        for t, a in got.items():
            np.testing.assert_array_equal(a, np.full(3, t))
    comm.barrier()


def test_blocking_recv_releases_the_gil(comm):
    """Rank 0 waits in recv on a dup in a second thread while its main thread
    sends on comm the message that makes rank 1 answer: with the GIL held by
    the waiting recv this would time out."""
    if comm.size == 1:
        pytest.skip("needs a peer")
    import threading
    with comm.dup() as d:
        got = np.zeros(3, dtype=np.int64)
        if comm.rank == 0:
            errors = []

            def wait_for_answer():
                try:
                    d.recv(got, 1, tag=2)
                except QuorumError as e:  # reported by the main thread
                    errors.append(e)
            t = threading.Thread(target=wait_for_answer)
            t.start()
            comm.send(np.full(3, 41, dtype=np.int64), 1, tag=3)
            t.join()
            assert not errors, errors
            np.testing.assert_array_equal(got, np.full(3, 42))
        elif comm.rank == 1:
            comm.recv(got, 0, tag=3)
            d.send(got + 1, 0, tag=2)


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_send_recv_torch(comm, dtype):
    if comm.size == 1:
        pytest.skip("needs a peer")
    torch = import_torch()
    dtype = getattr(torch, dtype)
    p, r = comm.size, comm.rank
    out = torch.zeros(N, dtype=dtype)
    req = comm.isend(torch.from_numpy(block(r, (r + 1) % p)).to(dtype), (r + 1) % p)
    comm.irecv(out, (r - 1) % p).wait()
    req.wait()
    assert torch.equal(out, torch.from_numpy(block((r - 1) % p, r)).to(dtype))


# --- rooted reduce, gather, scatter ------------------------------------------

@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("op", [Op.SUM, Op.MIN, Op.MAX, Op.PROD])
def test_reduce_numpy(comm, dtype, op):
    want = expected(comm.size, op).astype(dtype)
    for root in range(comm.size):
        send = values(comm.rank).astype(dtype)
        recv = np.full(N, -1, dtype=dtype)
        got = comm.reduce(send, recv, op=op, root=root)
        if comm.rank == root:
            assert got is recv
            np.testing.assert_array_equal(recv, want)
        else:
            assert got is None
            np.testing.assert_array_equal(recv, np.full(N, -1, dtype=dtype))  # unused
        np.testing.assert_array_equal(send, values(comm.rank).astype(dtype))  # untouched
        # In place on the root; off the root send alone.
        x = values(comm.rank).astype(dtype)
        comm.reduce(x, op=op, root=root)
        np.testing.assert_array_equal(x, want if comm.rank == root else values(comm.rank))


@pytest.mark.parametrize("dtype", NUMPY_DTYPES + [np.uint8])
def test_gather_numpy(comm, dtype):
    p, r = comm.size, comm.rank
    for root in range(p):
        recv = np.zeros((p, N), dtype=dtype) if r == root else None
        got = comm.gather(block(r, root).astype(dtype), recv, root=root)
        if r == root:
            assert got is recv
            np.testing.assert_array_equal(recv, np.stack([block(j, root) for j in range(p)]))
        else:
            assert got is None
    # In place: the root's own block already lies in recv.
    root = p - 1
    recv = np.zeros(p * N, dtype=dtype)
    recv[root * N:(root + 1) * N] = block(root, root)
    comm.gather(None if r == root else block(r, root).astype(dtype),
                recv if r == root else None, root=root)
    if r == root:
        np.testing.assert_array_equal(recv, np.concatenate([block(j, root) for j in range(p)]))


@pytest.mark.parametrize("dtype", NUMPY_DTYPES + [np.uint8])
def test_scatter_numpy(comm, dtype):
    p, r = comm.size, comm.rank
    for root in range(p):
        send = np.stack([block(root, j) for j in range(p)]).astype(dtype) if r == root else None
        recv = np.zeros(N, dtype=dtype)
        assert comm.scatter(send, recv, root=root) is recv
        np.testing.assert_array_equal(recv, block(root, r).astype(dtype))


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_rooted_torch(comm, dtype):
    torch = import_torch()
    dtype = getattr(torch, dtype)
    p, r, root = comm.size, comm.rank, comm.size - 1
    t = torch.from_numpy(values(r)).to(dtype)
    comm.reduce(t, op=Op.SUM, root=root)  # in place on the root
    if r == root:
        assert torch.equal(t, torch.from_numpy(expected(p, Op.SUM)).to(dtype))
    recv = torch.zeros(p, N, dtype=dtype) if r == 0 else None
    comm.gather(torch.from_numpy(block(r, 0)).to(dtype), recv, root=0)
    if r == 0:
        assert torch.equal(recv, torch.from_numpy(np.stack([block(j, 0) for j in range(p)]))
                           .to(dtype))
    send = torch.from_numpy(np.stack([block(0, j) for j in range(p)])).to(dtype)
    out = torch.zeros(N, dtype=dtype)
    comm.scatter(send if r == 0 else None, out, root=0)
    assert torch.equal(out, torch.from_numpy(block(0, r)).to(dtype))


# --- alltoall and alltoallv --------------------------------------------------

@pytest.mark.parametrize("dtype", NUMPY_DTYPES + [np.uint8])
def test_alltoall_numpy(comm, dtype):
    p, r = comm.size, comm.rank
    send = np.stack([block(r, j) for j in range(p)]).astype(dtype)
    recv = np.zeros((p, N), dtype=dtype)
    assert comm.alltoall(send, recv) is recv
    np.testing.assert_array_equal(recv, np.stack([block(j, r) for j in range(p)]))
    np.testing.assert_array_equal(send, np.stack([block(r, j) for j in range(p)]))


def alltoallv_arrays(p, r, dtype, gap=0):
    """send and recv for alltoallv, with `gap` untouched elements after each
    block; the counts and offsets (elements)."""
    sc = [v_count(r, j) for j in range(p)]
    rc = [v_count(j, r) for j in range(p)]
    so = list(np.cumsum([0] + [c + gap for c in sc])[:-1])
    ro = list(np.cumsum([0] + [c + gap for c in rc])[:-1])
    send = np.full(sum(sc) + gap * p, -5, dtype=dtype)
    for j in range(p):
        send[so[j]:so[j] + sc[j]] = block(r, j, sc[j])
    recv = np.full(sum(rc) + gap * p, -7, dtype=dtype)
    want = np.full_like(recv, -7)
    for j in range(p):
        want[ro[j]:ro[j] + rc[j]] = block(j, r, rc[j])
    return send, sc, so, recv, rc, ro, want


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
def test_alltoallv_numpy(comm, dtype):
    p, r = comm.size, comm.rank
    send, sc, _, recv, rc, _, want = alltoallv_arrays(p, r, dtype)
    assert comm.alltoallv(send, sc, recv, rc) is recv  # offsets: back to back
    np.testing.assert_array_equal(recv, want)
    # Explicit offsets with a gap after each block, which stays untouched;
    # counts and offsets as numpy integer arrays.
    send, sc, so, recv, rc, ro, want = alltoallv_arrays(p, r, dtype, gap=2)
    comm.alltoallv(send, np.array(sc), recv, rc, send_offsets=np.array(so), recv_offsets=ro)
    np.testing.assert_array_equal(recv, want)


def test_alltoall_torch(comm):
    torch = import_torch()
    p, r = comm.size, comm.rank
    send = torch.from_numpy(np.stack([block(r, j) for j in range(p)])).to(torch.bfloat16)
    recv = torch.zeros(p, N, dtype=torch.bfloat16)
    comm.alltoall(send, recv)
    assert torch.equal(recv, torch.from_numpy(np.stack([block(j, r) for j in range(p)]))
                       .to(torch.bfloat16))
    s, sc, so, rv, rc, ro, want = alltoallv_arrays(p, r, np.int32, gap=1)
    out = torch.from_numpy(rv.copy())
    comm.alltoallv(torch.from_numpy(s), sc, out, rc, so, ro)
    assert torch.equal(out, torch.from_numpy(want))


# --- non-blocking forms ------------------------------------------------------

def test_nonblocking_all_in_flight(comm):
    """ireduce, igather, iscatter, ialltoall and ialltoallv started together
    (inputs are temporaries: the requests keep them alive), completed in
    reverse order, by wait and by test."""
    p, r, root = comm.size, comm.rank, 0
    red = np.full(N, -1, dtype=np.int64)
    gat = np.zeros((p, N), dtype=np.int32) if r == root else None
    sca = np.zeros(N, dtype=np.float64)
    a2a = np.zeros((p, N), dtype=np.int64)
    _, sc, _, a2v, rc, _, want_v = alltoallv_arrays(p, r, np.float32)
    reqs = [
        comm.ireduce(values(r).astype(np.int64), red, op=Op.MAX, root=root),
        comm.igather(block(r, root).astype(np.int32), gat, root=root),
        comm.iscatter(np.stack([block(root, j) for j in range(p)]).astype(np.float64)
                      if r == root else None, sca, root=root),
        comm.ialltoall(np.stack([block(r, j) for j in range(p)]).astype(np.int64), a2a),
        comm.ialltoallv(alltoallv_arrays(p, r, np.float32)[0], sc, a2v, rc),
    ]
    gc.collect()
    for q in reversed(reqs[2:]):
        q.wait()
        assert q.done
    while not reqs[1].test():
        pass
    reqs[0].wait()
    if r == root:
        np.testing.assert_array_equal(red, expected(p, Op.MAX))
        np.testing.assert_array_equal(gat, np.stack([block(j, root) for j in range(p)]))
    else:
        np.testing.assert_array_equal(red, np.full(N, -1))
    np.testing.assert_array_equal(sca, block(root, r))
    np.testing.assert_array_equal(a2a, np.stack([block(j, r) for j in range(p)]))
    np.testing.assert_array_equal(a2v, want_v)


def test_nonblocking_torch(comm):
    torch = import_torch()
    p, r = comm.size, comm.rank
    t = torch.from_numpy(values(r).astype(np.float32))
    recv = torch.zeros(p, N, dtype=torch.int64)
    reqs = [comm.ireduce(t, root=p - 1),
            comm.ialltoall(torch.from_numpy(np.stack([block(r, j) for j in range(p)])), recv)]
    for q in reqs:
        q.wait()
    if r == p - 1:
        assert torch.equal(t, torch.from_numpy(expected(p, Op.SUM).astype(np.float32)))
    assert torch.equal(recv, torch.from_numpy(np.stack([block(j, r) for j in range(p)])))


# --- on a sub-communicator ---------------------------------------------------

def test_every_call_on_a_split(comm):
    """The calls on the communicator of one parity, in its own rank numbering
    (key reverses the order)."""
    sub = comm.split(comm.rank % 2, key=comm.size - comm.rank)
    p, r = sub.size, sub.rank
    x = values(r).astype(np.int32)
    sub.reduce(x, root=p - 1)
    if r == p - 1:
        np.testing.assert_array_equal(x, expected(p, Op.SUM))
    recv = np.zeros((p, N), dtype=np.int64) if r == 0 else None
    sub.gather(block(r, 0).astype(np.int64), recv)
    if r == 0:
        np.testing.assert_array_equal(recv, np.stack([block(j, 0) for j in range(p)]))
    out = np.zeros(N, dtype=np.int64)
    sub.scatter(np.stack([block(0, j) for j in range(p)]) if r == 0 else None, out)
    np.testing.assert_array_equal(out, block(0, r))
    a2a = np.zeros((p, N), dtype=np.int64)
    sub.ialltoall(np.stack([block(r, j) for j in range(p)]), a2a).wait()
    np.testing.assert_array_equal(a2a, np.stack([block(j, r) for j in range(p)]))
    send, sc, so, rv, rc, ro, want = alltoallv_arrays(p, r, np.int64, gap=1)
    sub.alltoallv(send, sc, rv, rc, so, ro)
    np.testing.assert_array_equal(rv, want)
    if p > 1:
        got = np.zeros(N, dtype=np.int64)
        req = sub.irecv(got, (r - 1) % p, tag=9)
        sub.send(block(r, (r + 1) % p), (r + 1) % p, tag=9)
        req.wait()
        np.testing.assert_array_equal(got, block((r - 1) % p, r))
    sub.finalize()


# --- bad arguments -----------------------------------------------------------

def test_bad_root_and_peer_raise(comm):
    p, r = comm.size, comm.rank
    a = values(r).astype(np.float32)
    b = np.zeros(p * N, dtype=np.float32)
    for root in (p, -1):
        invalid(lambda: comm.reduce(a, root=root), "root")
        invalid(lambda: comm.ireduce(a, root=root), "root")
        invalid(lambda: comm.gather(a, b, root=root), "root")
        invalid(lambda: comm.igather(a, b, root=root), "root")
        invalid(lambda: comm.scatter(b, a, root=root), "root")
        invalid(lambda: comm.iscatter(b, a, root=root), "root")
    for call in (comm.send, comm.recv, comm.isend, comm.irecv):
        invalid(lambda: call(a, r), "itself")
        invalid(lambda: call(a, p), "peer", "outside")
        invalid(lambda: call(a, -1), "peer", "outside")
        if p > 1:
            invalid(lambda: call(a, (r + 1) % p, tag=-1), "tag")
            invalid(lambda: call(a, (r + 1) % p, tag=1 << 28), "tag")
    ro = np.zeros(N, dtype=np.float32)
    ro.flags.writeable = False
    invalid(lambda: comm.recv(ro, (r + 1) % p), "buf", "writable")
    invalid(lambda: comm.isend([1, 2], (r + 1) % p), "buf", "list")


def test_bad_sizes_raise(comm):
    p, r = comm.size, comm.rank
    f32 = np.zeros(N, dtype=np.float32)
    ro = np.zeros(N, dtype=np.float32)
    ro.flags.writeable = False
    # Refused on the root (the other ranks do not call).
    if r == 0:
        invalid(lambda: comm.reduce(f32, np.zeros(N + 1, dtype=np.float32)), "reduce",
                str(N + 1), str(N))
        invalid(lambda: comm.ireduce(f32, np.zeros(N, dtype=np.float64)), "ireduce",
                "float32", "float64")
        invalid(lambda: comm.reduce(np.zeros(N, dtype=np.uint8)), "uint8", "no reduction")
        invalid(lambda: comm.reduce(f32, ro), "recv", "writable")
        invalid(lambda: comm.gather(f32, np.zeros(p * N + 1, dtype=np.float32)), "gather",
                "%d bytes" % (4 * (p * N + 1)))
        invalid(lambda: comm.gather(f32), "gather", "needs recv")
        invalid(lambda: comm.igather(None, np.zeros(p * N + 1, dtype=np.float32))
                if p > 1 else comm.igather(f32, np.zeros(N + 1, dtype=np.float32)), "igather")
        invalid(lambda: comm.scatter(np.zeros(p * N - 1, dtype=np.float32), f32), "scatter",
                "bytes")
        invalid(lambda: comm.iscatter(None, f32), "send")
    # Refused everywhere.
    invalid(lambda: comm.scatter(f32, ro), "recv", "writable")
    invalid(lambda: comm.alltoall(f32 if p == 1 else np.zeros(p * N, dtype=np.float32),
                                  np.zeros(p * N + p, dtype=np.float32)), "alltoall", "bytes")
    if p > 1:
        invalid(lambda: comm.ialltoall(np.zeros(p * N + 1), np.zeros(p * N + 1)),
                "ialltoall", "multiple")
    a = np.zeros(p * N, dtype=np.float32)
    invalid(lambda: comm.alltoall(a, a), "overlap")
    counts = [1] * p
    invalid(lambda: comm.alltoallv(a, counts + [1], a.copy(), counts), "send_counts",
            "one per rank")
    invalid(lambda: comm.alltoallv(a, counts, a.copy(), [-1] + counts[1:]), "recv_counts[0]",
            "non-negative")
    invalid(lambda: comm.alltoallv(a, counts, a.copy(), counts, send_offsets=[p * N] * p),
            "ends past")
    invalid(lambda: comm.alltoallv(a, counts, a.copy(), counts, recv_offsets=["x"] * p),
            "recv_offsets[0]")
    invalid(lambda: comm.ialltoallv(a, 3, a.copy(), counts), "send_counts", "int")
    invalid(lambda: comm.ialltoallv(a, counts, a.astype(np.int32), counts), "float32", "int32")


def test_recv_of_another_size_is_a_mismatch(comm):
    if comm.size == 1:
        pytest.skip("needs a peer")
    if comm.rank == 0:
        comm.send(np.zeros(1, dtype=np.int32), 1, tag=4)
    elif comm.rank == 1:
        refused(Status.ERR_MISMATCH, lambda: comm.recv(np.zeros(1, dtype=np.int64), 0, tag=4))
    comm.barrier()


def test_bad_torch_arguments_raise(comm):
    torch = import_torch()
    p = comm.size
    invalid(lambda: comm.alltoall(torch.zeros(4, 6).t(), torch.zeros(24)), "not contiguous")
    if comm.rank == 0:
        invalid(lambda: comm.reduce(torch.zeros(4), torch.zeros(4, dtype=torch.float64)),
                "float32", "float64")
        invalid(lambda: comm.gather(torch.zeros(4), torch.zeros(p * 4 + 1)), "gather")
