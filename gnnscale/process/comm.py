"""The one thin layer every collective goes through: byte and round accounting.

Every all_to_all and all_reduce issued by the engine goes through a :class:`Communicator`,
which counts the bytes this rank sends to and receives from *other* ranks (self-traffic
never crosses a link and is not counted), per category:

- ``sample_request`` / ``sample_response``: frontier ids sent to owners, sampled neighbors back;
- ``feature_request`` / ``feature``: ids of remote feature rows, and the rows themselves;
- ``gradient``, ``encoder_gradient``: gradient all-reduces (DDP's buckets through a
  communication hook, a pipeline stage's layers, chunk mode's encoder copies), all counted as a
  ring all-reduce moves them: 2 (P-1)/P of the bytes sent and as much received per rank;
- ``activation``, ``activation_grad``: pipeline stages' point-to-point tensors (:meth:`Communicator.send`,
  :meth:`Communicator.post_recv`, :meth:`Communicator.wait_recv`): forward activations and their gradients;
- ``control``: split sizes and metric reductions.

A failing collective or point-to-point receive (dead peer, timeout) raises :class:`~gnnscale.errors.PeerError` naming
the operation and this rank and, when a :class:`~gnnscale.process.health.Health` monitor is attached,
the silent ranks and the phase each was last in, instead of hanging.
"""
from __future__ import annotations

import datetime
import pickle
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

import torch
import torch.distributed as dist

from gnnscale.errors import PeerError

NO_DIAGNOSIS = "A peer process died or stopped answering; see the other ranks' logs for the first error. "
_SOURCE_TAG = re.compile(r"\[[^\]\s]*\.(?:cc|cpp|h|hpp):\d+\]\s*")  # gloo's "[/__w/.../pair.cc:553] "
_TRANSPORT_ADVICE = " This is typically caused by"  # gloo's advice and banner ("... GLHF! ...") after the reason


def transport_reason(err: BaseException) -> str:
    """The reason a collective or a receive failed, as the transport gives it, in a few words: the
    first line of ``err`` without gloo's source position and the advice it appends (which ends
    in a "GLHF!" banner); e.g. ``Connection closed by peer [127.0.0.1]:9089.``."""
    text = str(err).strip()
    first = text.splitlines()[0] if text else type(err).__name__
    first = _SOURCE_TAG.sub("", first)
    cut = first.find(_TRANSPORT_ADVICE)
    return (first[:cut] if cut > 0 else first).strip()
CATEGORIES = ("sample_request", "sample_response", "feature_request", "feature", "embedding", "gradient",
              "encoder_gradient", "activation", "activation_grad", "control")
GRADIENTS = ("gradient", "encoder_gradient")  # all-reduces counted as a ring moves them


def ring_allreduce_bytes(nbytes: int, world_size: int) -> int:
    """Bytes one rank sends (and receives) in a ring all-reduce of ``nbytes``: 2 (P-1)/P of it."""
    return 2 * nbytes * (world_size - 1) // world_size


@dataclass
class NetworkModel:
    """A modelled link for benchmarks on one machine (loopback is far faster than a network).

    After each exchange, the caller is held for ``latency + max(bytes sent, bytes received) /
    bandwidth`` seconds (a full-duplex link), less the time the exchange really took; every
    report that includes it says it is modelled. ``CommStats`` keeps the modelled seconds, the
    number of modelled exchanges and their modelled bytes (the sum of each exchange's max), so
    that ``seconds == exchanges * latency + bytes * 8 / bandwidth`` exactly.

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
    modelled_exchanges: int = 0
    modelled_bytes: int = 0
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
            "modelled_exchanges": self.modelled_exchanges,
            "modelled_bytes": self.modelled_bytes,
            "grad_sync_seconds": self.grad_sync_seconds,
        }

    def reset(self) -> None:
        self.sent.clear()
        self.received.clear()
        self.calls.clear()
        self.rounds.clear()
        self.seconds = 0.0
        self.modelled_seconds = 0.0
        self.modelled_exchanges = 0
        self.modelled_bytes = 0
        self.grad_sync_seconds = 0.0


class Communicator:
    """Collectives with accounting for one rank.

    Args:
        rank, world_size: this process's place; with ``world_size == 1`` no process group
            is needed and every exchange is local.
        group: the torch.distributed process group (default: the world).
        timeout: seconds after which a collective is abandoned (the process group's own
            timeout must be set to the same value at creation; see :func:`gnnscale.process.groups.new_group`).
        network: an optional modelled link.
        health: an optional :class:`gnnscale.process.health.Health`; a failing collective then names
            the silent ranks and their last phase.
    """

    def __init__(
        self, rank: int = 0, world_size: int = 1, group=None, timeout: float = 300.0,
        network: NetworkModel | None = None, health=None,
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.group = group
        self.timeout = timeout
        self.network = network
        self.health = health
        self.stats = CommStats()
        # Set by the DDP hook when a gradient all-reduce fails (DDP re-raises it as a plain
        # RuntimeError from backward; the trainer turns it into this PeerError).
        self.failure: PeerError | None = None

    def wait_bound(self) -> float:
        """Seconds a thread may wait for another thread's collective: the timeout, plus the
        time that collective's failure takes to diagnose (the health probe), plus 5 s."""
        return self.timeout + (self.health.probe + 5.0 if self.health is not None else 5.0)

    def _model(self, t0: float, nbytes: int) -> None:
        """Hold the caller as long as the modelled link would take (see NetworkModel)."""
        if self.network is None or self.world_size == 1:
            return
        want = self.network.seconds(nbytes)
        self.stats.modelled_seconds += want
        self.stats.modelled_exchanges += 1
        self.stats.modelled_bytes += int(nbytes)
        left = want - (time.perf_counter() - t0)
        if left > 0:
            time.sleep(left)

    # -- helpers ---------------------------------------------------------------------------
    def _fail(self, op: str, category: str, err: Exception) -> PeerError:
        who = self.health.diagnose() if self.health is not None else ""
        first = transport_reason(err)
        return PeerError(
            f"rank {self.rank}: collective {op} ({category}) failed after at most {self.timeout:.0f} s"
            f"{': ' + who if who else ''}. ({first}) "
            f"{'' if who else NO_DIAGNOSIS}"
            "If peers are merely slow, raise --timeout."
        )

    def collective_failed(self, op: str, category: str, err: Exception) -> PeerError:
        """The run's first collective failure as a :class:`PeerError` naming the silent rank:
        the one already recorded, else one made (and recorded) from ``err``. For collectives
        that torch runs on its own (DDP's gradient buckets and its unused-parameter map)."""
        if self.failure is None:
            self.failure = self._fail(op, category, err)
        return self.failure

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

    def all_reduce_named(self, values: dict, op: str = "sum", category: str = "control") -> dict:
        """All-reduce named figures: ``{name: number}`` -> ``{name: reduced float}`` (op: sum, max, min).

        Figures travel by name: they are packed in sorted-name order, so every rank must pass
        the same names (build them from fixed lists, with zeros for what a rank lacks).
        One all_reduce of float64 (integers up to 2**53 stay exact).
        """
        names = sorted(values)
        t = torch.tensor([float(values[k]) for k in names], dtype=torch.float64)
        if names:
            self.all_reduce(t, op, category)
        return {k: float(v) for k, v in zip(names, t.tolist())}

    def all_reduce(self, t: torch.Tensor, op: str = "sum", category: str = "control") -> torch.Tensor:
        """All-reduce ``t`` in place (op: sum, max, min) and return it."""
        if self.world_size == 1:
            return t
        ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}
        self.stats.calls[category] += 1
        nbytes = t.numel() * t.element_size()
        gradient = category in GRADIENTS
        moved = ring_allreduce_bytes(nbytes, self.world_size) if gradient else nbytes
        self.stats.sent[category] += moved
        self.stats.received[category] += moved
        t0 = time.perf_counter()
        try:
            dist.all_reduce(t, op=ops[op], group=self.group)
        except Exception as err:
            raise self._fail("all_reduce", category, err) from err
        if gradient:  # gradients cross the modelled link, as DDP's buckets do; control figures do not
            self._model(t0, moved)
            self.stats.grad_sync_seconds += time.perf_counter() - t0
        self.stats.seconds += time.perf_counter() - t0
        return t

    def all_gather_object(self, obj, category: str = "control") -> list:
        """Gather a picklable object from every rank (metrics, evaluator inputs).

        The pickled bytes go through :meth:`exchange_flat` (one round), so they are counted
        like every other payload: this rank sends its pickle to each peer, receives theirs.
        """
        if self.world_size == 1:
            return [obj]
        blob = torch.frombuffer(bytearray(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)), dtype=torch.uint8)
        flat = blob.repeat(self.world_size)  # the same bytes for every rank (self's copy never moves)
        sizes = torch.full((self.world_size,), blob.numel(), dtype=torch.int64)
        out, counts = self.exchange_flat(flat, sizes, category)
        return [pickle.loads(part.numpy().tobytes()) for part in torch.split(out, counts.tolist())]

    # -- point to point (pipeline stages) ----------------------------------------------------
    def send(self, tensors: Sequence[torch.Tensor], dst: int, tag: int, category: str,
             what: str | None = None, me: str | None = None) -> list:
        """Start sending each of ``tensors`` to rank ``dst`` (global rank; message tags ``tag``,
        ``tag + 1``, ...); the returned handles go to :meth:`wait_sends`. Counted as ``category``.

        Raises:
            PeerError: the receiver's connection is gone: names this rank (``me``), ``what`` was
                being sent and the receiver.
        """
        works = []
        for j, t in enumerate(tensors):
            t = t.detach().contiguous()
            try:
                works.append((dist.isend(t, dst, tag=tag + j), t))  # t lives until the send is done
            except Exception as err:  # noqa: BLE001 - gloo: the receiver closed its connection
                raise self._fail_p2p(me, f"could not send {what or category}", f"rank {dst}", err) from err
            self.stats.sent[category] += t.numel() * t.element_size()
            self.stats.calls[category] += 1
        return works

    def wait_sends(self, works: list, me: str | None = None) -> float:
        """Wait until every send of ``works`` was taken, each within the timeout; the seconds waited."""
        t0 = time.perf_counter()
        for w, _ in works:
            try:
                w.wait(datetime.timedelta(seconds=self.timeout))
            except Exception as err:  # noqa: BLE001 - gloo: timeout or closed connection
                raise self._fail_p2p(me, "could not send a message", "the receiver", err) from err
        return time.perf_counter() - t0

    def post_recv(self, shapes: Sequence[tuple[int, ...]], src: int, tag: int) -> tuple:
        """Post receives of float32 tensors of ``shapes`` from rank ``src`` now (tags ``tag``, ...),
        so that they arrive while this rank computes; :meth:`wait_recv` collects them."""
        posted = []
        for j, shape in enumerate(shapes):
            t = torch.empty(shape, dtype=torch.float32)
            try:
                posted.append((dist.irecv(t, src, tag=tag + j), t))
            except Exception as err:  # noqa: BLE001 - gloo: the sender closed its connection
                raise self._fail_p2p(None, "no message", f"rank {src}", err) from err
        return time.perf_counter(), src, posted

    def wait_recv(self, posted: tuple, category: str, what: str, me: str | None = None
                  ) -> tuple[list[torch.Tensor], float]:
        """The tensors of a :meth:`post_recv`, each waited for within the timeout, and the seconds
        waited. A modelled link holds them until latency + bytes / bandwidth after the post.

        Raises:
            PeerError: ``what`` did not arrive in time: names this rank (``me``), the sender and,
                from the heartbeats, the silent rank, its pid, host and last phase.
        """
        t_post, src, works = posted
        t0 = time.perf_counter()
        nbytes = 0
        for work, t in works:
            try:
                work.wait(datetime.timedelta(seconds=self.timeout))
            except Exception as err:  # noqa: BLE001 - gloo: timeout or closed connection
                raise self._fail_p2p(me, f"no {what}", f"rank {src}", err) from err
            nbytes += t.numel() * t.element_size()
        self.stats.received[category] += nbytes
        self.stats.calls[category] += len(works)
        self._model(t_post, nbytes)
        return [t for _, t in works], time.perf_counter() - t0

    def _fail_p2p(self, me: str | None, doing: str, peer: str, err: Exception) -> PeerError:
        """A point-to-point failure as a PeerError: ``me`` (default this rank) ``doing`` (``"no
        activations of ..."``, ``"could not send ..."``) with ``peer`` (``"rank 3"``) within the
        timeout, and the silent rank from the heartbeats where they tell."""
        who = self.health.diagnose() if self.health is not None else ""
        first = transport_reason(err)
        return PeerError(
            f"{me or f'rank {self.rank}'}: {doing} ({peer}) within {self.timeout:.0f} s"
            f"{': ' + who if who else f'; {peer} died or stopped answering'}. ({first}) "
            "If it is merely slow, raise --timeout."
        )

    def barrier(self) -> None:
        if self.world_size == 1:
            return
        try:
            dist.monitored_barrier(group=self.group, timeout=datetime.timedelta(seconds=self.timeout))
        except Exception as err:
            raise self._fail("barrier", "control", err) from err

    def ddp_comm_hook(self, per_tensor: bool = False):
        """A DDP communication hook that all-reduces (averages) each bucket and counts its bytes.

        ``per_tensor``: all-reduce each gradient of the bucket as its own tensor (asynchronously,
        in the bucket's order, the same on every rank), so that each element's sum does not depend
        on how DDP laid the parameters out in buckets: DDP without ``find_unused_parameters``
        rebuilds its buckets after the first step, and a run resumed from a checkpoint would
        otherwise reduce its first step in the other layout (bits differ beyond 2 ranks).
        """

        def hook(state, bucket):
            t0 = time.perf_counter()
            buf = bucket.buffer()
            nbytes = buf.numel() * buf.element_size()
            # Counted as a ring all-reduce moves them: 2 (P-1)/P of the buffer each way.
            moved = ring_allreduce_bytes(nbytes, self.world_size)
            buf.div_(self.world_size)
            if per_tensor:
                grads = [g for g in bucket.gradients() if g.numel()]
                self.stats.calls["gradient"] += len(grads)
                futs = [dist.all_reduce(g, group=self.group, async_op=True).get_future() for g in grads]
                fut = torch.futures.collect_all(futs)
            else:
                self.stats.calls["gradient"] += 1
                fut = dist.all_reduce(buf, group=self.group, async_op=True).get_future()
            self.stats.sent["gradient"] += moved
            self.stats.received["gradient"] += moved

            def done(f):
                try:
                    value = f.value()
                    if per_tensor:
                        for part in value:
                            part.value()  # raises the failed one's error
                        value = buf
                    else:
                        value = value[0]
                except Exception as err:  # timeout or dead peer: named by the trainer
                    self.collective_failed("all_reduce", "gradient", err)
                    raise
                self._model(t0, moved)
                self.stats.grad_sync_seconds += time.perf_counter() - t0
                return value

            return fut.then(done)

        return hook
