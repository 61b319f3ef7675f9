"""quorum: collectives and partial (solo / majority) allreduce for Python.

    import numpy as np
    import quorum

    with quorum.init() as comm:         # under quorum-run, mpirun, srun, or alone
        x = np.arange(4, dtype=np.float32)
        comm.allreduce(x)               # in place, sum over the ranks

Arrays are anything with DLPack (torch tensors, numpy arrays) or the buffer
protocol, C-contiguous, used in place: nothing is copied on the way in or out. Reductions take
float32, float64, float16, bfloat16 (torch only), int32 and int64; bcast and
allgather move any dtype as bytes.

Comm's calls: allreduce, iallreduce, bcast, barrier, allgather,
reduce_scatter, partial (solo / majority); and the MPI-style split, dup,
send, recv, isend, irecv, reduce, gather, scatter, alltoall, alltoallv with
ireduce, igather, iscatter, ialltoall, ialltoallv (docs/python.md).
Failures raise QuorumError, whose status is a Status and detail the
library's exact cause. quorum.torch holds the
PyTorch side: the hand-over from torch.distributed and the DDP hook.
"""
from ._quorum import (  # noqa: F401
    Comm,
    DType,
    Mode,
    Op,
    Partial,
    QuorumError,
    Request,
    RoundInfo,
    RoundStats,
    UNDEFINED,
    Status,
    version,
)

__version__ = version()


def init():
    """A communicator bootstrapped from the launcher's environment: PMIx (mpirun,
    srun --mpi=pmix), QUORUM_* (quorum-run), else a single process. Use it as a
    context manager, or call finalize()."""
    return Comm.init()


def init_oob(rank, size, allgather):
    """A communicator over ranks the caller already has: allgather(data: bytes)
    must return the size ranks' data concatenated in rank order (e.g. built on
    MPI's or torch.distributed's allgather; see quorum.torch.init)."""
    return Comm.init_oob(rank, size, allgather)


__all__ = ["Comm", "DType", "Mode", "Op", "Partial", "QuorumError", "Request", "RoundInfo",
           "RoundStats", "Status", "UNDEFINED", "init", "init_oob", "version"]
