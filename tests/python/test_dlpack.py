"""DLPack inputs: torch tensors and numpy arrays are reached through
__dlpack__ (an object that offers nothing else works too), every dtype in
place and out of place, the consumed capsule is released once the call (or a
non-blocking call's wait) is over, and what DLPack cannot give is refused with
the reason. Every rank runs the same collectives in the same order."""
import gc
import importlib
import sys
import weakref

import numpy as np
import pytest

from quorum import Op, QuorumError, Status

N = 29
TORCH_DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64"]
NUMPY_DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64]


def import_torch():
    return importlib.import_module("torch")


class DLPackOnly:
    """Offers an array through __dlpack__ alone (no buffer protocol, no
    data_ptr), and keeps the capsules it handed out to inspect them."""

    def __init__(self, array, device=None):
        self.array = array
        self.device = device
        self.capsules = []

    def __dlpack__(self, stream=None):
        capsule = self.array.__dlpack__()
        self.capsules.append(capsule)
        return capsule

    def __dlpack_device__(self):
        return self.device or self.array.__dlpack_device__()


def values(rank, n=N):
    return (np.arange(n) % 5) + rank


def total(size, n=N):
    return sum(values(r, n) for r in range(size))


def invalid(call, *words):
    with pytest.raises(QuorumError) as e:
        call()
    assert e.value.status == Status.ERR_INVALID_ARG
    for w in words:
        assert w in e.value.detail, (w, e.value.detail)
    return e.value


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_dlpack_torch_dtypes_in_and_out_of_place(comm, dtype):
    torch = import_torch()
    dt = getattr(torch, dtype)
    want = torch.from_numpy(total(comm.size)).to(dt)
    send = DLPackOnly(torch.from_numpy(values(comm.rank)).to(dt))
    recv = DLPackOnly(torch.full((N,), -1).to(dt))
    assert comm.allreduce(send, recv) is recv
    assert torch.equal(recv.array, want)
    assert torch.equal(send.array, torch.from_numpy(values(comm.rank)).to(dt))  # untouched
    assert all('"used_dltensor"' in repr(c) for c in send.capsules + recv.capsules)
    comm.allreduce(send)  # in place
    assert torch.equal(send.array, want)
    t = torch.from_numpy(values(comm.rank)).to(dt).reshape(1, N)  # plain tensor, 2-d
    comm.allreduce(t, op=Op.MAX)
    assert torch.equal(t[0], torch.from_numpy(values(comm.size - 1)).to(dt))


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_dlpack_numpy_in_and_out_of_place(comm, dtype):
    if not hasattr(np.ndarray, "__dlpack__"):
        pytest.skip("this numpy has no __dlpack__")
    send = DLPackOnly(values(comm.rank).astype(dtype))
    recv = DLPackOnly(np.zeros(N, dtype=dtype))
    comm.allreduce(send, recv)
    np.testing.assert_array_equal(recv.array, total(comm.size).astype(dtype))
    assert send.capsules and '"used_dltensor"' in repr(send.capsules[0])
    comm.allreduce(send)
    np.testing.assert_array_equal(send.array, recv.array)


def test_dlpack_untyped_bytes_and_allgather(comm):
    buf = DLPackOnly(np.full(7, comm.rank, dtype=np.uint8))  # no reduction, bytes only
    comm.bcast(buf, root=comm.size - 1)
    assert (buf.array == comm.size - 1).all()
    out = DLPackOnly(np.zeros((comm.size, 3), dtype=np.int16))
    comm.allgather(DLPackOnly(np.full(3, comm.rank + 1, dtype=np.int16)), out)
    np.testing.assert_array_equal(out.array[:, 0], np.arange(comm.size) + 1)


def test_dlpack_capsule_released_after_blocking_and_nonblocking_calls(comm):
    a = values(comm.rank).astype(np.float64)
    wrapper = DLPackOnly(a)
    base = sys.getrefcount(a)
    comm.allreduce(wrapper)
    assert sys.getrefcount(a) == base  # the exported tensor's deleter ran
    req = comm.iallreduce(wrapper)
    assert sys.getrefcount(a) == base + 1  # held by the exported tensor while in flight
    req.wait()
    assert sys.getrefcount(a) == base
    np.testing.assert_array_equal(a, total(comm.size) * comm.size)


def test_dlpack_torch_kept_alive_while_in_flight(comm):
    torch = import_torch()
    t = torch.from_numpy(values(comm.rank).astype(np.float32))
    alive = weakref.ref(t)
    req = comm.iallreduce(t)
    del t
    gc.collect()
    assert alive() is not None
    result = alive()
    req.wait()
    assert torch.equal(result, torch.from_numpy(total(comm.size).astype(np.float32)))
    del req, result
    gc.collect()
    assert alive() is None  # nothing kept after the wait


def test_dlpack_torch_refusals_name_the_cause(comm):
    torch = import_torch()
    invalid(lambda: comm.allreduce(torch.zeros(4, 6).t()), "not contiguous", "(6, 4)")
    invalid(lambda: comm.allreduce(DLPackOnly(torch.zeros(4, 6)[:, 1])), "recv",
            "not contiguous")
    invalid(lambda: comm.allreduce(DLPackOnly(np.zeros(2 * N, dtype=np.float32)[::2])),
            "not C-contiguous")
    invalid(lambda: comm.allreduce(torch.zeros(3, requires_grad=True)), "recv", "DLPack",
            "detach")
    invalid(lambda: comm.allreduce(torch.zeros(3, dtype=torch.complex64)), "complex64",
            "no reduction")
    invalid(lambda: comm.allreduce(torch.zeros(3), torch.zeros(3, dtype=torch.int32)),
            "float32", "int32")
    opencl = DLPackOnly(torch.zeros(3), device=(4, 0))
    invalid(lambda: comm.allreduce(opencl), "device type 4")
    assert opencl.capsules == []  # refused before anything was exported


def test_dlpack_torch_cuda_tensor(comm):
    """A CUDA tensor's pointer goes to the C API as a device buffer (the
    build has CUDA; without it the refusal says so)."""
    torch = import_torch()
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    t = torch.from_numpy(values(comm.rank).astype(np.float32)).cuda()
    torch.cuda.synchronize()
    try:
        comm.allreduce(t)
    except QuorumError as e:
        assert "built without CUDA" in e.detail, e.detail
        return
    assert torch.equal(t.cpu(), torch.from_numpy(total(comm.size).astype(np.float32)))


def test_dlpack_numpy_fallbacks_to_the_buffer_protocol(comm):
    ro = values(comm.rank).astype(np.float32)
    ro.flags.writeable = False  # DLPack refuses to export it; the buffer protocol reads it
    recv = np.zeros(N, dtype=np.float32)
    comm.allreduce(ro, recv)
    np.testing.assert_array_equal(recv, total(comm.size).astype(np.float32))
    invalid(lambda: comm.allreduce(recv, ro), "recv", "writable")
    flags = np.zeros(5, dtype=np.bool_)  # DLPack (numpy < 1.25) has no bool: bytes
    flags[comm.rank % 5] = True
    comm.bcast(flags, root=0)
    assert flags[0] and flags.sum() == 1
    swapped = values(comm.rank).astype(">i4")  # not native byte order: no reduction
    invalid(lambda: comm.allreduce(swapped), "no reduction")


def test_dlpack_bad_producers_refused(comm):
    class NotACapsule(DLPackOnly):
        def __dlpack__(self, stream=None):
            return 42

    invalid(lambda: comm.allreduce(NotACapsule(np.zeros(3))), "capsule")

    class Raises(DLPackOnly):
        def __dlpack__(self, stream=None):
            raise BufferError("cannot today")

    invalid(lambda: comm.allreduce(Raises(np.zeros(3))), "cannot today", "BufferError")
    invalid(lambda: comm.allreduce(DLPackOnly(np.zeros(3), device="cpu")), "__dlpack_device__")
