"""quorum.torch: quorum for PyTorch programs.

- init(group=None): a quorum communicator over the ranks of a torch.distributed
  process group (hand-over through quorum_init_oob; the group's own allgather
  carries quorum's addresses).
- init_process_group(comm, backend="gloo"): the other way round, for programs
  launched by quorum-run (or mpirun / srun without torchrun's MASTER_* vars):
  starts torch.distributed over the quorum ranks.
- hook(reduce="sync"|"solo"|"majority", ...): a DDP communication hook that
  reduces the gradient buckets with quorum:

      comm = quorum.torch.init()      # after dist.init_process_group(...)
      ddp.register_comm_hook(comm, quorum.torch.hook(reduce="majority"))
"""
import math
import socket
from datetime import timedelta

import torch
import torch.distributed as dist

from . import Comm, Mode, Op, Partial, QuorumError, Status

_PARTIAL_SCALES = ("world", "sqrt", "count")


def _group_allgather(group):
    """allgather(bytes) -> bytes over a torch.distributed group."""
    world = dist.get_world_size(group)
    nccl = dist.get_backend(group) == "nccl"

    def allgather(data):
        if not dist.is_initialized():
            raise RuntimeError("torch.distributed's process group is gone: finalize the quorum "
                               "communicator before torch.distributed.destroy_process_group()")
        mine = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        if nccl:  # NCCL gathers device tensors into one tensor
            out = torch.empty(len(data) * world, dtype=torch.uint8, device="cuda")
            dist.all_gather_into_tensor(out, mine.cuda(), group=group)
            return out.cpu().numpy().tobytes()
        parts = [torch.empty_like(mine) for _ in range(world)]
        dist.all_gather(parts, mine, group=group)
        return torch.cat(parts).numpy().tobytes()

    return allgather


def init(group=None):
    """A quorum communicator whose ranks are those of the torch.distributed group
    (default: the world); collective over the group."""
    if not dist.is_initialized():
        raise RuntimeError("quorum.torch.init: torch.distributed is not initialized "
                           "(call torch.distributed.init_process_group first, or quorum.init())")
    return Comm.init_oob(dist.get_rank(group), dist.get_world_size(group),
                         _group_allgather(group))


def init_process_group(comm, backend="gloo", timeout=timedelta(seconds=120)):
    """Starts torch.distributed with the ranks of comm (rank r of comm is rank r of
    the default group). Rank 0 serves the rendezvous store on an ephemeral port
    (on 127.0.0.1 when every rank is on its host, else on its host name) and
    broadcasts the address with quorum."""
    import numpy as np
    host = socket.gethostname().encode()
    hosts = np.zeros(comm.size * 256, dtype=np.uint8)
    mine = np.zeros(256, dtype=np.uint8)
    mine[:len(host)] = np.frombuffer(host[:255], dtype=np.uint8)
    comm.allgather(mine, hosts)
    one_host = all((hosts[i * 256:(i + 1) * 256] == mine).all() for i in range(comm.size))
    addr = "127.0.0.1" if one_host else socket.gethostname()
    store = None
    port = np.zeros(1, dtype=np.int64)
    if comm.rank == 0:
        store = dist.TCPStore(addr, 0, comm.size, True, timeout, wait_for_workers=False)
        port[0] = store.port
    comm.bcast(port, root=0)
    if comm.rank != 0:
        addr = bytes(hosts[:256]).rstrip(b"\0").decode() if not one_host else addr
        store = dist.TCPStore(addr, int(port[0]), comm.size, False, timeout)
    dist.init_process_group(backend, store=store, rank=comm.rank, world_size=comm.size,
                            timeout=timeout)


class CommHook:
    """A DDP communication hook (see hook()). Call close() (collective) when
    training ends to release the partial allreduces; stats() reports the rounds."""

    def __init__(self, reduce="sync", max_staleness=32, carry_weight=0.5,
                 partial_scale="world", drop_late=False, seed=0, sync_steps=1,
                 activation_delay_ms=0.0):
        if reduce not in ("sync", "solo", "majority"):
            raise ValueError(f"reduce={reduce!r}: expected 'sync', 'solo' or 'majority'")
        if partial_scale not in _PARTIAL_SCALES:
            raise ValueError(f"partial_scale={partial_scale!r}: expected one of {_PARTIAL_SCALES}")
        if not 0 < carry_weight <= 1:
            raise ValueError(f"carry_weight={carry_weight}: expected a weight in (0, 1]")
        if drop_late and carry_weight != 1:
            carry_weight = 1.0  # nothing is carried: the weight means nothing
        if max_staleness < 0 or sync_steps < 0:
            raise ValueError("max_staleness and sync_steps must be 0 or more")
        self.reduce = reduce
        self.__name__ = self.__qualname__ = f"quorum_{reduce}_hook"  # DDP logs the name
        self.max_staleness = int(max_staleness)
        self.carry_weight = float(carry_weight)
        self.partial_scale = partial_scale
        self.carry = not drop_late
        self.seed = int(seed)
        # DDP rebuilds its buckets after the first step: partial objects (one
        # per bucket, created collectively) start once the layout is final.
        self.sync_steps = max(1, int(sync_steps)) if reduce != "sync" else 0
        self.activation_delay_us = int(round(activation_delay_ms * 1000))
        self._comm = None
        self._partials = {}
        self._pending = []
        self.steps = 0
        self._rounds = self._fresh = self._carried = 0

    def _comm_of(self, state):
        if isinstance(state, Comm):
            return state
        if self._comm is None:
            if state is not None:
                raise TypeError("quorum.torch.hook: the hook's state must be a quorum.Comm or None "
                                f"(got {type(state).__name__})")
            self._comm = init()
        return self._comm

    def _partial(self, comm, index, buf):
        p = self._partials.get(index)
        if p is None:
            p = comm.partial(buf.numel(), dtype=buf.dtype,
                             mode=Mode.SOLO if self.reduce == "solo" else Mode.MAJORITY,
                             max_staleness=self.max_staleness, carry=self.carry, seed=self.seed,
                             carry_weight=self.carry_weight if self.carry else 0.0,
                             activation_delay_us=self.activation_delay_us)
            self._partials[index] = p
        elif p.count != buf.numel():
            raise QuorumError(Status.ERR_INVALID_ARG,
                              f"DDP bucket {index} changed from {p.count} to {buf.numel()} "
                              "elements", "bucket layout changed")
        return p

    def _scale(self, comm, partial, info):
        carried = partial.last_round_stats().carried
        n = info.fresh + self.carry_weight * carried
        self._rounds += 1
        self._fresh += info.fresh
        self._carried += carried
        k = max(1.0, n)
        if self.partial_scale == "sqrt":
            return 1.0 / math.sqrt(comm.size * k)
        if self.partial_scale == "count":
            return 1.0 / k
        return 1.0 / comm.size

    def __call__(self, state, bucket):
        comm = self._comm_of(state)
        buf = bucket.buffer()
        fut = torch.futures.Future()
        try:
            if self.steps < self.sync_steps or self.reduce == "sync":
                work = comm.iallreduce(buf, op=Op.AVG)
            else:
                work = self._partial(comm, bucket.index(), buf)
                work.post(buf)
            self._pending.append((fut, buf, work))
            if bucket.is_last():
                self._complete(comm)
        except BaseException as e:
            for f, _, _ in self._pending:
                if not f.done():
                    f.set_exception(e)
            self._pending = []
            raise
        return fut

    def _complete(self, comm):
        # The buckets went out as the backward pass made them final; DDP waits
        # for the futures once every bucket was handed over, i.e. after this.
        for fut, buf, work in self._pending:
            if isinstance(work, Partial):
                _, info = work.wait(out=buf)
                buf.mul_(self._scale(comm, work, info))
            else:
                work.wait()
            fut.set_result(buf)
        self._pending = []
        self.steps += 1

    def stats(self):
        """Steps, partial rounds, mean fresh contributions per round, carried gradients."""
        return {"steps": self.steps, "partial_rounds": self._rounds,
                "mean_fresh": self._fresh / self._rounds if self._rounds else float("nan"),
                "carried": self._carried}

    def close(self):
        """Collective: destroys the partial allreduces (call on every rank at the end)."""
        for p in self._partials.values():
            p.destroy()
        self._partials = {}


def hook(reduce="sync", max_staleness=32, carry_weight=0.5, partial_scale="world",
         drop_late=False, seed=0, sync_steps=1, activation_delay_ms=0.0):
    """A DDP communication hook reducing gradient buckets with quorum:

        ddp.register_comm_hook(comm, quorum.torch.hook(reduce="majority"))

    The state is a quorum.Comm (or None: one over torch.distributed's default
    group, made at the first bucket). reduce="sync" averages each bucket with a
    non-blocking allreduce; "solo" / "majority" run one partial allreduce per
    bucket (eager-SGD): a round's sum of n gradients (fresh, plus carried ones
    weighted by carry_weight) is divided by the world size (partial_scale=
    "world"), by sqrt(world x n) ("sqrt") or by n ("count"), as quorum-train's
    options of the same names. Every rank applies the same rounds, so replicas
    stay identical. The first sync_steps steps (at least 1: DDP rebuilds its
    buckets after the first) are synchronous."""
    return CommHook(reduce=reduce, max_staleness=max_staleness, carry_weight=carry_weight,
                    partial_scale=partial_scale, drop_late=drop_late, seed=seed,
                    sync_steps=sync_steps, activation_delay_ms=activation_delay_ms)
