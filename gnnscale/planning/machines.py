"""A model of many machines: the epoch of a data-parallel sampled run at P = 2..64 machines,
predicted from one measured run's figures (torch-free arithmetic).

A measured run (:class:`MeasuredRun`, read from a ``--metrics`` file by :func:`measured_from_metrics`)
gives, per worker and training step: the CPU seconds (the epoch's wall time less the modelled
link's seconds, over the steps), the input rows a step reads and the share of them
owned by other parts, the other bytes it exchanges (sampling requests and replies, ids), the
gradient bytes and the exchanges it makes. For a graph of a given shape (:class:`GraphShape`)
on P machines (one worker each) joined by a link (:class:`Link`), :func:`predict_epoch`::

    steps(P)       = ceil(train_nodes / (P * batch_size))
    rows           = input_rows_measured * sampled(shape) / sampled(measured graph)
    sampled(G)     = N (1 - exp(-draws / N)), draws = B + B f1 + B f1 f2 + ...  (f_h capped at the degree)
    q(P)           = kappa * (P - 1) / P                      remote share of a step's input rows
    kappa          = q_measured / ((P_m - 1) / P_m)           1 for a random cut, less for METIS
    feature bytes  = input_rows * q(P) * F * bytes_per_value  per step and worker
    id bytes       = input_rows * q(P) * 8                    (feature requests)
    sample bytes   = sample_bytes_measured * q(P) / q_measured
    gradient bytes = 2 (P - 1) / P * model bytes              ring all-reduce (as the modelled link)
    network s      = exchanges * latency + bytes * 8 / bandwidth
    cpu s          = cpu_per_step_measured * rows / input_rows_measured * share_measured / share(P)
    epoch(P)       = steps(P) * (cpu s + network s)

``sampled`` is the expected count of distinct nodes among a step's draws if they fell uniformly
on the N nodes: a step's input rows grow with the graph until the draws stop colliding (a
100k-node graph holds few of the ~940k draws of fanouts 15,10,5 at batch 1024; a 111M-node graph
nearly all), and the CPU work of a step is taken to grow with its rows (the gather, the first
layer's transform). ``share`` is the CPU time each worker gets: 1 with a core per worker, ``cores / workers`` when
workers outnumber cores (the measuring machine's 4 workers on 2 cores), so that a measured
2-part run predicts the same machine's 4-part run. The modelled link of ``--net-bandwidth-gbps``
holds each exchange for ``latency + max(sent, received) * 8 / bandwidth`` with nothing
overlapped, which this model follows; a real network overlaps some of it (the prediction is then
an upper bound), and machines with more cores per worker shrink the CPU term (``cpu_speedup``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

ID_BYTES = 8


@dataclass(frozen=True)
class Link:
    """A network: bandwidth in Gbit/s and a latency per exchange in ms."""

    bandwidth_gbps: float
    latency_ms: float = 0.05

    def seconds(self, nbytes: float, exchanges: float) -> float:
        return exchanges * self.latency_ms * 1e-3 + nbytes * 8 / (self.bandwidth_gbps * 1e9)


@dataclass(frozen=True)
class GraphShape:
    """What the prediction needs of a graph: its training nodes, feature width and value bytes,
    and ``kappa``, its cut's remote share relative to a random cut (None: the measured run's)."""

    name: str
    num_nodes: int
    train_nodes: int
    feature_dim: int
    value_bytes: int = 4
    kappa: float | None = None
    avg_degree: float | None = None  # None: a step reads the measured run's rows


@dataclass(frozen=True)
class MeasuredRun:
    """One measured epoch's figures, per worker and step (the slowest worker's CPU seconds).

    Attributes:
        parts: P_m, one worker per part. steps: training steps per worker in the epoch.
        batch_size: seeds per step. train_nodes: training nodes of the graph.
        cpu_seconds_per_step: the epoch's seconds less the modelled link's, per step.
        input_rows_per_step: feature rows a step reads (owned, cached, fetched).
        remote_share: the share of them fetched from other parts (q_measured).
        sample_bytes_per_step: sampling requests and replies (and other small exchanges).
        model_bytes: the gradient all-reduce's buffer (parameters x 4 B).
        exchanges_per_step: modelled exchanges a step makes (each one latency).
        feature_dim, value_bytes: the measured graph's row width and bytes per value.
        cpu_share: CPU a worker got when measured (1, or cores / workers).
        epoch_seconds: the measured epoch (for validation).
    """

    parts: int
    steps: int
    batch_size: int
    train_nodes: int
    cpu_seconds_per_step: float
    input_rows_per_step: float
    remote_share: float
    sample_bytes_per_step: float
    model_bytes: float
    exchanges_per_step: float
    feature_dim: int
    value_bytes: int = 4
    cpu_share: float = 1.0
    epoch_seconds: float | None = None
    fanouts: tuple = ()
    num_nodes: int = 0
    avg_degree: float = 0.0

    @property
    def kappa(self) -> float:
        """The measured cut's remote share over a random cut's, ``(P_m - 1) / P_m``."""
        return self.remote_share / ((self.parts - 1) / self.parts) if self.parts > 1 else 1.0


def sampled_rows(num_nodes: int, batch_size: int, fanouts, avg_degree: float) -> float:
    """Expected distinct nodes among a step's draws (seeds and every hop's neighbours, each hop's
    fan-out capped at the average degree) if they fell uniformly on ``num_nodes`` nodes."""
    draws = frontier = float(batch_size)
    for f in fanouts:
        frontier *= min(float(f), avg_degree) if f > 0 else avg_degree
        draws += frontier
    return num_nodes * -math.expm1(-draws / num_nodes)


def remote_share(kappa: float, parts: int) -> float:
    """q(P) = kappa (P - 1) / P, at most 1."""
    return min(1.0, kappa * (parts - 1) / parts)


def predict_epoch(run: MeasuredRun, shape: GraphShape, parts: int, link: Link, *, cpu_share: float = 1.0,
                  cpu_speedup: float = 1.0) -> dict:
    """The predicted epoch of ``shape`` on ``parts`` machines joined by ``link``.

    Args:
        run: the measured run. shape: the graph (its kappa, or the run's).
        parts: P. link: the network.
        cpu_share: CPU a worker gets (1: a core per worker; ``cores / workers`` on a crowded machine).
        cpu_speedup: how much faster a worker's CPU work is than the measuring worker's.

    Returns:
        ``parts, steps, remote_share, bytes_per_step {feature, ids, sample, gradient, total},
        network_seconds_per_step, cpu_seconds_per_step, step_seconds, epoch_seconds, network_share``.
    """
    if parts < 1:
        raise ValueError(f"expected parts >= 1, found {parts}")
    kappa = run.kappa if shape.kappa is None else shape.kappa
    q = remote_share(kappa, parts) if parts > 1 else 0.0
    steps = math.ceil(shape.train_nodes / (parts * run.batch_size))
    grow = 1.0
    if shape.avg_degree is not None:
        grow = (sampled_rows(shape.num_nodes, run.batch_size, run.fanouts, shape.avg_degree)
                / sampled_rows(run.num_nodes, run.batch_size, run.fanouts, run.avg_degree))
    rows = run.input_rows_per_step * grow
    remote_rows = rows * q
    sample = run.sample_bytes_per_step * grow * (q / run.remote_share if run.remote_share else 0.0)
    grad = 2 * (parts - 1) / parts * run.model_bytes
    by = {"feature": remote_rows * shape.feature_dim * shape.value_bytes, "ids": remote_rows * ID_BYTES,
          "sample": sample, "gradient": grad}
    by["total"] = sum(by.values())
    net = link.seconds(by["total"], run.exchanges_per_step) if parts > 1 else 0.0
    cpu = run.cpu_seconds_per_step * grow * run.cpu_share / cpu_share / cpu_speedup
    step = cpu + net
    return {"parts": parts, "steps": steps, "input_rows_per_step": rows, "remote_share": q, "bytes_per_step": by,
            "network_seconds_per_step": net, "cpu_seconds_per_step": cpu, "step_seconds": step,
            "epoch_seconds": steps * step, "network_share": net / step if step else 0.0}


def measured_from_metrics(metrics: dict, *, train_nodes: int, feature_dim: int, value_bytes: int = 4,
                          cores: int | None = None, epoch: int | None = -1, num_nodes: int = 0,
                          avg_degree: float = 0.0) -> MeasuredRun:
    """A :class:`MeasuredRun` from a ``gnnscale train --metrics`` file's dict (data parallel, one
    worker per part, a modelled link: ``--net-bandwidth-gbps``, host reads off).

    Args:
        metrics: the metrics dict (its byte counts are every rank's, summed).
        train_nodes, feature_dim, value_bytes, num_nodes, avg_degree: the measured graph's.
        cores: the measuring machine's cores (None: a core per worker).
        epoch: which epoch's figures; None: the epoch of median seconds among all but the first
            (which compiles kernels), the least disturbed by a busy machine's other load.
    """
    recs = metrics["epochs"]
    if epoch is None:
        steady = sorted(recs[1:] or recs, key=lambda r: r["epoch_seconds"])
        rec = steady[(len(steady) - 1) // 2]
    else:
        rec = recs[epoch]
    world = int(metrics["num_parts"])
    steps = max(int(rec["steps"]), 1)
    per = steps * world
    by_rank = rec.get("modelled_network_by_rank") or [{"seconds": 0.0, "exchanges": 0}]
    slow = max(by_rank, key=lambda r: r["seconds"])  # the rank the step waits for
    cpu = float(rec["epoch_seconds"]) - slow["seconds"]  # the epoch's wall time less the modelled link's
    received = rec["bytes_received_by_category"]
    remote = rec["feature_rows_remote_fetched"]
    rows = remote + rec["feature_rows_local"] + rec.get("feature_rows_from_cache", 0) + rec.get("feature_rows_host", 0)
    ring = 2 * (world - 1) / world if world > 1 else 1.0
    return MeasuredRun(
        parts=world, steps=steps, batch_size=int(metrics["config"]["batch_size"]), train_nodes=int(train_nodes),
        cpu_seconds_per_step=max(cpu, 0.0) / steps, input_rows_per_step=rows / per,
        remote_share=remote / rows if rows else 0.0,
        sample_bytes_per_step=sum(v for k, v in received.items() if k not in ("feature", "feature_request", "gradient"))
        / per,
        model_bytes=received.get("gradient", 0) / per / ring, exchanges_per_step=slow["exchanges"] / steps,
        feature_dim=int(feature_dim), value_bytes=int(value_bytes),
        cpu_share=min(1.0, cores / world) if cores else 1.0, epoch_seconds=float(rec["epoch_seconds"]),
        fanouts=tuple(int(f) for f in metrics["config"]["fanouts"]), num_nodes=int(num_nodes),
        avg_degree=float(avg_degree),
    )


def as_dict(run: MeasuredRun) -> dict:
    return asdict(run) | {"kappa": run.kappa}
