"""The one thin layer every collective goes through: byte and round accounting.

Every all_to_all and all_reduce issued by the engine goes through a :class:`Communicator`,
which counts the bytes this rank sends to and receives from *other* ranks (self-traffic
never crosses a link and is not counted), per category:

- ``sample_request`` / ``sample_response``: frontier ids sent to owners, sampled neighbors back;
- ``feature_request`` / ``feature``: ids of remote feature rows, and the rows themselves;
- ``gradient``: DDP's gradient buckets (counted by a communication hook);
- ``control``: split sizes and metric reductions.

A failing collective (dead peer, timeout) raises :class:`~gnnscale.errors.PeerError` naming
the operation and this rank, instead of hanging.
"""
from __future__ import annotations

import datetime
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

import torch
import torch.distributed as dist

from gnnscale.errors import PeerError

CATEGORIES = ("sample_request", "sample_response", "feature_request", "feature", "embedding", "gradient", "control")


@dataclass
class NetworkModel:
    """A modelled link for benchmarks on one machine (loopback is far faster than a network).

    After each exchange, the caller is held for ``latency + max(bytes sent, bytes received) /
    bandwidth`` seconds, less the time the exchange really took; every report that includes
    it says it is modelled (``CommStats.modelled_seconds``).

    Args:
        bandwidth_gbps: link bandwidth in Gbit/s.
        latency_ms: one-way latency per exchange in milliseconds.
    """

    bandwidth_gbps: float = 10.0
    latency_ms: float = 0.05

    def seconds(self, nbytes: int) -> float:
        return self.latency_ms * 1e-3 + nbytes * 8 / (self.bandwidth_gbps * 1e9)

    def describe(self) -> str:
        return f"modelled link {self.bandwidth_gbps:g} Gbit/s, {self.latency_ms:g} ms latency"


@dataclass
class CommStats:
    """Counters: bytes sent/received and collective calls per category, and exchange rounds."""

    sent: dict = field(default_factory=lambda: defaultdict(int))
    received: dict = field(default_factory=lambda: defaultdict(int))
    calls: dict = field(default_factory=lambda: defaultdict(int))
    rounds: dict = field(default_factory=lambda: defaultdict(int))
    seconds: float = 0.0
    modelled_seconds: float = 0.0
    grad_sync_seconds: float = 0.0

    @property
    def bytes_sent(self) -> int:
        return int(sum(self.sent.values()))

    @property
    def bytes_received(self) -> int:
        return int(sum(self.received.values()))

    def snapshot(self) -> dict:
        return {
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "sent": dict(self.sent),
            "received": dict(self.received),
            "calls": dict(self.calls),
            "rounds": dict(self.rounds),
            "seconds": self.seconds,
            "modelled_seconds": self.modelled_seconds,
            "grad_sync_seconds": self.grad_sync_seconds,
        }

    def reset(self) -> None:
        self.sent.clear()
        self.received.clear()
        self.calls.clear()
        self.rounds.clear()
        self.seconds = 0.0
        self.modelled_seconds = 0.0
        self.grad_sync_seconds = 0.0


class Communicator:
    """Collectives with accounting for one rank.

    Args:
        rank, world_size: this process's place; with ``world_size == 1`` no process group
            is needed and every exchange is local.
        group: the torch.distributed process group (default: the world).
        timeout: seconds after which a collective is abandoned (the process group's own
            timeout must be set to the same value at init; see :mod:`gnnscale.runtime`).
    """

    def __init__(
        self, rank: int = 0, world_size: int = 1, group=None, timeout: float = 300.0,
        network: NetworkModel | None = None,
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.group = group
        self.timeout = timeout
        self.network = network
        self.stats = CommStats()

    def _model(self, t0: float, nbytes: int) -> None:
        """Hold the caller as long as the modelled link would take (see NetworkModel)."""
        if self.network is None or self.world_size == 1:
            return
        want = self.network.seconds(nbytes)
        self.stats.modelled_seconds += want
        left = want - (time.perf_counter() - t0)
        if left > 0:
            time.sleep(left)

    # -- helpers ---------------------------------------------------------------------------
    def _fail(self, op: str, category: str, err: Exception) -> PeerError:
        return PeerError(
            f"rank {self.rank}: collective {op} ({category}) failed after at most {self.timeout:.0f} s: {err}. "
            "A peer process died or stopped answering; see the other ranks' logs for the first error. "
            "If peers are merely slow, raise --timeout."
        )

    def _a2a(self, out: torch.Tensor, inp: torch.Tensor, out_splits, in_splits, category: str) -> None:
        self.stats.calls[category] += 1
        try:
            dist.all_to_all_single(out, inp, output_split_sizes=out_splits, input_split_sizes=in_splits, group=self.group)
        except Exception as err:  # gloo raises RuntimeError on timeout / closed connection
            raise self._fail("all_to_all", category, err) from err

    # -- public API ------------------------------------------------------------------------
    def exchange(self, send: Sequence[torch.Tensor], category: str) -> list[torch.Tensor]:
        """Send ``send[r]`` to rank r; return the list of tensors received from each rank.

        All tensors share dtype and trailing shape (rows may differ), e.g. int64 [n_r] ids
        or float32 [n_r, F] feature rows. One exchange = one round = a split-size
        all_to_all (``control``) plus one payload all_to_all (``category``).
        """
        if len(send) != self.world_size:
            raise ValueError(f"exchange needs one tensor per rank ({self.world_size}), got {len(send)}")
        if self.world_size == 1:
            self.stats.rounds[category] += 1
            return [send[0]]
        ref = send[0]
        trailing = tuple(ref.shape[1:])
        sizes = torch.tensor([t.shape[0] for t in send], dtype=torch.int64)
        flat = torch.cat([t.reshape((t.shape[0],) + trailing) for t in send]) if sum(sizes.tolist()) else ref.new_empty((0,) + trailing)
        out, recv_sizes = self.exchange_flat(flat, sizes, category)
        return list(torch.split(out, recv_sizes.tolist()))

    def exchange_flat(self, flat: torch.Tensor, sizes: torch.Tensor, category: str) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`exchange` without the per-rank lists (no extra copy of large payloads).

        Args:
            flat: [n, ...] the rows for rank 0, then rank 1, ... (concatenated).
            sizes: int64 [P] rows for each rank.

        Returns:
            (out [m, ...] the rows received from rank 0, then rank 1, ...; int64 [P] their counts).
        """
        self.stats.rounds[category] += 1
        if self.world_size == 1:
            return flat, sizes.clone()
        t0 = time.perf_counter()
        ref = flat
        trailing = tuple(ref.shape[1:])
        row_bytes = ref.element_size() * (int(torch.tensor(trailing).prod()) if trailing else 1)
        recv_sizes = torch.empty_like(sizes)
        self._a2a(recv_sizes, sizes, None, None, "control")
        others = torch.ones(self.world_size, dtype=torch.bool)
        others[self.rank] = False
        self.stats.sent["control"] += 8 * (self.world_size - 1)
        self.stats.received["control"] += 8 * (self.world_size - 1)
        out = ref.new_empty((int(recv_sizes.sum()),) + trailing)
        self._a2a(out, flat.contiguous(), recv_sizes.tolist(), sizes.tolist(), category)
        sent = int(sizes[others].sum()) * row_bytes
        received = int(recv_sizes[others].sum()) * row_bytes
        self.stats.sent[category] += sent
        self.stats.received[category] += received
        self._model(t0, max(sent, received))
        self.stats.seconds += time.perf_counter() - t0
        return out, recv_sizes

    def all_reduce(self, t: torch.Tensor, op: str = "sum", category: str = "control") -> torch.Tensor:
        """All-reduce ``t`` in place (op: sum, max, min) and return it."""
        if self.world_size == 1:
            return t
        ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}
        self.stats.calls[category] += 1
        nbytes = t.numel() * t.element_size()
        self.stats.sent[category] += nbytes
        self.stats.received[category] += nbytes
        t0 = time.perf_counter()
        try:
            dist.all_reduce(t, op=ops[op], group=self.group)
        except Exception as err:
            raise self._fail("all_reduce", category, err) from err
        self.stats.seconds += time.perf_counter() - t0
        return t

    def all_gather_object(self, obj) -> list:
        """Gather a small picklable object from every rank (metrics, evaluator inputs)."""
        if self.world_size == 1:
            return [obj]
        out = [None] * self.world_size
        self.stats.calls["control"] += 1
        try:
            dist.all_gather_object(out, obj, group=self.group)
        except Exception as err:
            raise self._fail("all_gather_object", "control", err) from err
        return out

    def barrier(self) -> None:
        if self.world_size == 1:
            return
        try:
            dist.monitored_barrier(group=self.group, timeout=datetime.timedelta(seconds=self.timeout))
        except Exception as err:
            raise self._fail("barrier", "control", err) from err

    def ddp_comm_hook(self):
        """A DDP communication hook that all-reduces (averages) each bucket and counts its bytes."""

        def hook(state, bucket):
            t0 = time.perf_counter()
            buf = bucket.buffer()
            nbytes = buf.numel() * buf.element_size()
            self.stats.calls["gradient"] += 1
            self.stats.sent["gradient"] += nbytes
            self.stats.received["gradient"] += nbytes
            buf.div_(self.world_size)
            fut = dist.all_reduce(buf, group=self.group, async_op=True).get_future()

            def done(f):
                # Ring all-reduce moves about 2 (P-1)/P of the buffer each way.
                self._model(t0, int(2 * nbytes * (self.world_size - 1) / self.world_size))
                self.stats.grad_sync_seconds += time.perf_counter() - t0
                return f.value()[0]

            return fut.then(done)

        return hook
