"""The one metrics schema: every mode's epochs and results have the same figures, by name.

An epoch record (``result["epochs"][e]``) holds the loss and accuracies, the epoch's seconds
and each stage's (``stage_seconds_max_over_ranks``: sample, fetch, compute, wait, bubble,
grad_sync), the bytes every rank sent and received by category (sampling, features,
embeddings, gradients, activations and their gradients, control), the feature cache's and the
halo tables' figures, the modelled link's seconds, every rank's memory, and for pipelined runs
each stage's figures (``pipeline``: bubble, busy seconds, peaks of held micro-batches and
activation bytes, table reads and ages). Every reduction travels by name
(:meth:`~gnnscale.process.comm.Communicator.all_reduce_named`).
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import torch

from gnnscale.config import LOWER_IS_BETTER
from gnnscale.process.comm import CATEGORIES

STAGES = ("sample", "fetch", "compute", "wait", "bubble", "grad_sync")
# Every category any rank may count (all_reduce_named needs the same names on every rank).
ALL_CATEGORIES = list(CATEGORIES) + ["cache_fill_request", "cache_fill", "degree_request", "degree",
                                     # a typed graph's learned embeddings, sharded by owner
                                     "embedding_pull_request", "embedding_pull", "embedding_grad_ids",
                                     "embedding_grad", "embedding_gather",
                                     # link prediction: negatives checked by their owners, evaluation's row fetches
                                     "negative_filter_request", "negative_filter", "link_fetch_request", "link_fetch",
                                     # edge features: the rows of sampled remote edges, sent by their owners
                                     "edge_attr",
                                     # keyed dropout: original ids of other parts' nodes in a batch
                                     "node_key_request", "node_key"]


def process_figures() -> dict:
    """This process's memory and open file descriptors now (None where unknown).

    ``rss_mb`` resident now, ``peak_rss_mb`` the lifetime peak (``VmHWM``), ``rss_anon_mb``
    and ``rss_file_mb`` the resident split between private memory and file pages (memory-mapped
    part arrays and shared libraries, which the kernel can drop and reread), ``open_fds``.
    """
    from gnnscale.partitioning.resources import current_rss_bytes, lifetime_peak_rss_bytes, proc_status_bytes

    split = proc_status_bytes("RssAnon", "RssFile")
    out: dict = {"rss_mb": (current_rss_bytes() / 1e6) or None, "peak_rss_mb": lifetime_peak_rss_bytes() / 1e6,
                 "rss_anon_mb": None if split["RssAnon"] is None else split["RssAnon"] / 1e6,
                 "rss_file_mb": None if split["RssFile"] is None else split["RssFile"] / 1e6, "open_fds": None}
    try:
        out["open_fds"] = len(os.listdir("/proc/self/fd"))
    except OSError:
        pass
    return out


def traffic(comms, data, embedding=None) -> dict:
    """This rank's bytes per category over ``comms``, its modelled-link figures and exchange rounds
    (those of the ``data`` communicator, and the pushes and refresh fetches of ``embedding``)."""
    sent, received = {}, {}
    for c in comms:
        for k, v in c.stats.sent.items():
            sent[k] = sent.get(k, 0) + v
        for k, v in c.stats.received.items():
            received[k] = received.get(k, 0) + v
    modelled = {"seconds": sum(c.stats.modelled_seconds for c in comms),
                "exchanges": sum(c.stats.modelled_exchanges for c in comms),
                "bytes": sum(c.stats.modelled_bytes for c in comms)}
    rounds = dict(data.stats.rounds)
    if embedding is not None:
        for k, v in embedding.stats.rounds.items():  # pushes and the refresh's feature fetch
            if k in ("embedding", "feature_request"):
                rounds[k] = rounds.get(k, 0) + v
    return {"sent": sent, "received": received, "modelled": modelled, "rounds": rounds}


def sum_traffic(comm, mine: dict, feat: dict, steps: int, ages: dict, bound: int, row_bytes: int,
                network=None) -> dict:
    """Every rank's figures summed: bytes by category, cache, embedding ages, the modelled link.

    Args:
        comm: the world's communicator. mine: :func:`traffic` of this rank. feat: its feature
            store's counters (``cache_hits``, ``remote_rows``, ``local_rows``, ``host_rows``). steps: the
            epoch's steps. ages: {age: rows read} of its stale-row tables, ages 0..``bound``.
        row_bytes: bytes of one feature row. network: the modelled link (per-rank figures too).
    """
    cats = ALL_CATEGORIES
    vals = {f"sent.{c}": mine["sent"].get(c, 0) for c in cats}
    vals |= {f"received.{c}": mine["received"].get(c, 0) for c in cats}
    vals |= {"cache_hits": feat.get("cache_hits", 0), "remote_rows": feat.get("remote_rows", 0),
             "local_rows": feat.get("local_rows", 0), "host_rows": feat.get("host_rows", 0),
             "distinct_rows": feat.get("distinct_rows", 0),
             "modelled_seconds": mine["modelled"]["seconds"]}
    # Ages read, as a histogram over 0..bound (a fixed set of names on every rank; reads refuse
    # older rows): the rows used and the mean, min and max ages all derive from it.
    vals |= {f"age.{a}": ages.get(a, 0) for a in range(bound + 1)}
    t = comm.all_reduce_named(vals, "sum")
    age_counts = {a: int(t[f"age.{a}"]) for a in range(bound + 1) if t[f"age.{a}"]}
    used = sum(age_counts.values())
    sent = {c: int(t[f"sent.{c}"]) for c in cats if t[f"sent.{c}"]}
    received = {c: int(t[f"received.{c}"]) for c in cats if t[f"received.{c}"]}
    hits, misses, local = int(t["cache_hits"]), int(t["remote_rows"]), int(t["local_rows"])
    host, distinct = int(t["host_rows"]), int(t["distinct_rows"])
    by_source = {"local": local * row_bytes, "owners": misses * row_bytes, "cache": hits * row_bytes,
                 "host": host * row_bytes}
    moved = sum(by_source.values())
    rounds = mine["rounds"]
    per = max(steps, 1)
    out = {
        "sampling_rounds_per_batch": rounds.get("sample_request", 0) / per,
        "feature_rounds_per_batch": rounds.get("feature_request", 0) / per,
        "embedding_rounds_per_batch": rounds.get("embedding", 0) / per,
        "embedding_bytes": received.get("embedding", 0),
        "embedding_rows_used": used,
        "embedding_age_mean": sum(a * n for a, n in age_counts.items()) / used if used else None,
        "embedding_age_max": max(age_counts) if used else None,
        "embedding_age_min": min(age_counts) if used else None,
        "embedding_age_counts": age_counts,
        "bytes_sent": sum(sent.values()),
        "bytes_received": sum(received.values()),
        "bytes_sent_by_category": sent,
        "bytes_received_by_category": received,
        "sampling_rounds_rank0": rounds,
        "feature_rows_local": local,
        "feature_rows_remote_fetched": misses,
        "feature_rows_from_cache": hits,
        # --host-features: other parts' rows read from this host's partition folder, not sent
        "feature_rows_host": int(t["host_rows"]),
        "feature_bytes_host": int(t["host_rows"]) * row_bytes,
        "cache_hit_rate": hits / max(hits + misses, 1),
        "cache_bytes_served": hits * row_bytes,
        "feature_bytes_fetched": received.get("feature", 0),
        # the input rows the epoch's batches read, by where they came from, and the byte floor: the
        # distinct rows the epoch needed (each rank's, summed); epoch_record adds the bandwidth
        "feature_bytes_moved": moved,
        "feature_bytes_by_source": by_source,
        "feature_rows_distinct": distinct,
        "feature_bytes_floor": distinct * row_bytes,
        "feature_floor_ratio": moved / (distinct * row_bytes) if distinct and row_bytes else None,
        "modelled_network_seconds": t["modelled_seconds"],
    }
    if network is not None:
        # Per rank, by name: each rank fills its own entries, the others add zeros.
        names = ("seconds", "exchanges", "bytes")
        world, rank = comm.world_size, comm.rank
        mine_by_rank = {f"{r}.{k}": (mine["modelled"][k] if r == rank else 0) for r in range(world) for k in names}
        got = comm.all_reduce_named(mine_by_rank, "sum")
        by_rank = [{k: got[f"{r}.{k}"] for k in names} for r in range(world)]
        for rec in by_rank:
            rec["exchanges"], rec["bytes"] = int(rec["exchanges"]), int(rec["bytes"])
        out["modelled_network_by_rank"] = by_rank
        out["modelled_network_seconds_max_over_ranks"] = max(r["seconds"] for r in by_rank)
    return out


def weights_digest(params) -> str:
    """sha256 of the parameters in order (to compare runs bit for bit)."""
    h = hashlib.sha256()
    for p in params:
        h.update(p.detach().cpu().numpy().tobytes())
    return h.hexdigest()


def epoch_line(rec: dict, cache_rows: int, network: bool) -> str:
    """Rank 0's log line of one epoch."""
    metric = "" if rec.get("metric", "accuracy") == "accuracy" else f" {rec['metric']}"
    acc = f" val{metric} {rec['val_acc']:.4f} test{metric} {rec['test_acc']:.4f}" if rec.get("val_acc") is not None else ""
    st = rec["stage_seconds_max_over_ranks"]
    loss = rec["loss"]
    line = (f"epoch {rec['epoch']:3d} | loss {loss:.4f} | train {rec['train_acc']:.4f}{acc} | "
            f"{rec['epoch_seconds']:.2f} s (sample {st['sample']:.2f} fetch {st['fetch']:.2f} compute "
            f"{st['compute']:.2f} wait {st['wait']:.2f}"
            + (f" bubble {st['bubble']:.2f}" if rec.get("pipeline") else "") + ") | "
            f"sent {rec['bytes_sent'] / 1e6:.2f} MB recv {rec['bytes_received'] / 1e6:.2f} MB (all ranks)")
    if rec.get("feature_bytes_moved"):
        line += f" | {feature_phrase(rec)}"
    if cache_rows:
        line += f" | cache hit {rec['cache_hit_rate']:.1%}"
    if network:
        line += f" | {rec['modelled_network_seconds']:.2f} s modelled network (all ranks)"
    if rec["embedding_age_mean"] is not None:
        line += (f" | stale rows {rec['embedding_bytes'] / 1e6:.2f} MB, age mean {rec['embedding_age_mean']:.2f} "
                 f"max {rec['embedding_age_max']}")
    if rec.get("pipeline"):
        line += " | " + stage_phrase(rec["pipeline"])
    return line


def feature_phrase(rec: dict) -> str:
    """An epoch's feature bytes as one log phrase: moved, their floor (the distinct rows needed) and
    how far above it, and the effective bandwidth of the fetch stage."""
    bw = rec.get("feature_bandwidth_gb_per_s")
    ratio = rec.get("feature_floor_ratio")
    return (f"features {rec['feature_bytes_moved'] / 1e6:.1f} MB"
            + (f" ({ratio:.2f}x the floor {rec['feature_bytes_floor'] / 1e6:.1f} MB)" if ratio else "")
            + (f" at {bw:.2f} GB/s" if bw else ""))


def stage_phrase(every: list[dict]) -> str:
    """Every stage's epoch as one log phrase: activation bytes each way, each stage's bubble and
    its peak of held micro-batches and bytes."""
    mb = 1e6
    return (f"activations {sum(e['bytes_sent']['activation'] for e in every) / mb:.2f} MB forward, gradients "
            f"{sum(e['bytes_sent']['activation_grad'] for e in every) / mb:.2f} MB backward | bubble "
            + "/".join(f"{e['bubble']:.0%}" for e in every) + " | peak held "
            + "/".join(str(e["peak_micro_batches"]) for e in every) + " micro-batches, "
            + "/".join(f"{e['peak_activation_bytes'] / mb:.1f}" for e in every) + " MB")


def tensorboard_epoch(writer, rec: dict) -> None:
    """One epoch's figures (already reduced over the ranks) as TensorBoard scalars."""
    epoch = rec["epoch"]
    scalars = {"loss/train": rec["loss"], "accuracy/train": rec["train_acc"], "accuracy/val": rec.get("val_acc"),
               "accuracy/test": rec.get("test_acc"), "time/epoch": rec["epoch_seconds"],
               "bytes/total": rec["bytes_sent"], "cache/hit_rate": rec["cache_hit_rate"],
               "embedding/age_mean": rec["embedding_age_mean"], "embedding/age_max": rec["embedding_age_max"]}
    scalars |= {f"time/{k}": v for k, v in rec["stage_seconds_max_over_ranks"].items()}
    scalars |= {f"bytes/{k}": v for k, v in rec["bytes_sent_by_category"].items()}
    for s in rec.get("pipeline") or []:
        scalars[f"pipeline/bubble_stage{s['stage']}_pipeline{s['pipeline']}"] = s["bubble"]
    for tag, value in scalars.items():
        if value is not None:
            writer.add_scalar(tag, float(value), epoch)
    writer.flush()


def as_tensor_free(result: dict) -> dict:
    """``result`` without what JSON cannot hold (this rank's own step losses stay in the returned dict)."""
    return {k: v for k, v in result.items() if k != "step_losses"}


def reduce_counts(comm, loss_sum: float, correct: int, count: int) -> tuple[float, float]:
    """(mean loss, accuracy) over every rank's steps (one float64 all-reduce)."""
    tot = comm.all_reduce(torch.tensor([loss_sum, float(correct), float(count)], dtype=torch.float64))
    return float(tot[0] / max(tot[2], 1)), float(tot[1] / max(tot[2], 1))


# The result schema: what an epoch record and a run's result hold, by name (the trainer fills them).

PROCESS_KEYS = ("rss_mb", "peak_rss_mb", "rss_anon_mb", "rss_file_mb", "open_fds", "training_peak_rss_mb",
                "evaluation_peak_rss_mb", "epoch_cpu_seconds")


@dataclass
class Selection:
    """The epoch a run keeps: the best validation figure of the run's selection metric so far and
    the test figure of that epoch. ``metric`` is accuracy, F1, ROC-AUC, AP, Hits@K, MRR, MAE or
    RMSE, ...: higher is better except for :data:`~gnnscale.config.LOWER_IS_BETTER`. The JSON
    keeps the names it always had (``best_val_acc``, ``test_acc_at_best_val``, ``best_epoch``;
    and the same by the metric's name), a checkpoint its ``best`` record (:meth:`record`)."""

    val: float = -1.0
    test: float = 0.0
    epoch: int = -1  # -1: no evaluation yet

    def improves(self, value: float, metric: str | None) -> bool:
        """Whether validation figure ``value`` of ``metric`` beats :attr:`val`."""
        if metric in LOWER_IS_BETTER:
            return self.epoch < 0 or value < self.val
        return value > self.val

    def record(self) -> dict:
        """As a checkpoint keeps it: ``{"val_acc", "test_acc", "epoch"}`` (the names of every checkpoint so far)."""
        return {"val_acc": self.val, "test_acc": self.test, "epoch": self.epoch}

    @classmethod
    def from_record(cls, rec: dict) -> "Selection":
        return cls(rec["val_acc"], rec["test_acc"], rec["epoch"])


def add_evaluation(rec: dict, scores: dict, metric: str) -> None:
    """An evaluated epoch's figures into its record: ``scores`` ``{"val", "test", "evaluation"?}``
    of the selection metric, under ``val_acc``/``test_acc`` (the names every run's JSON has had,
    whatever ``metric`` is), ``metric``, and the same by the metric's name (``val_rmse``, ...)."""
    rec["val_acc"], rec["test_acc"], rec["evaluation"] = scores["val"], scores["test"], scores.get("evaluation")
    rec["metric"] = metric  # what val_acc/test_acc measure
    rec[f"val_{metric}"], rec[f"test_{metric}"] = scores["val"], scores["test"]


def epoch_record(rec: dict, epoch: int, seconds: torch.Tensor, totals: dict, procs: list[dict]) -> dict:
    """Epoch ``epoch``'s record (``result["epochs"][e]``), completed in place and returned.

    Args:
        rec: the epoch's training figures (loss, train_acc, steps, stage_seconds, ...) and
            :func:`add_evaluation`'s.
        seconds: float64 [2 + len(STAGES)], max over the ranks: the epoch's training seconds,
            with evaluation, then each stage's (:data:`STAGES`).
        totals: :func:`sum_traffic`'s figures (bytes by category, cache, tables, modelled link).
        procs: every rank's :func:`process_figures` with its training and evaluation peaks and
            ``epoch_cpu_seconds`` (the CPU seconds its process spent in the epoch's training, all
            threads, evaluation left out).
    """
    for key in PROCESS_KEYS:
        rec[f"{key}_by_rank"] = [p.get(key) for p in procs]
    cpu = [p.get("epoch_cpu_seconds") for p in procs]
    # the CPU the epoch's training took, all ranks together: unlike epoch_seconds, not lengthened by
    # a hypervisor's steal or by other jobs waiting for the same cores (it is what --vs-checkout compares too)
    rec["epoch_cpu_seconds"] = float(sum(cpu)) if cpu and None not in cpu else None
    rec.update(epoch=epoch, epoch_seconds=float(seconds[0]), epoch_seconds_with_eval=float(seconds[1]),
               stage_seconds_max_over_ranks={k: float(v) for k, v in zip(STAGES, seconds[2:])}, **totals)
    fetch = rec["stage_seconds_max_over_ranks"]["fetch"]
    moved = rec.get("feature_bytes_moved", 0)
    # the effective bandwidth of the epoch's feature fetches: bytes moved over the fetch stage's seconds
    rec["feature_bandwidth_gb_per_s"] = moved / fetch / 1e9 if fetch > 0 and moved else None
    return rec


def epoch_timing(history: list[dict]) -> dict[str, float]:
    """``first_epoch_seconds`` (the first epoch of this run, which pays numba's compilation and the
    first touches of memory) and ``steady_epoch_seconds`` (the median of the later epochs; the
    first's own when there is one epoch only)."""
    times = [float(h["epoch_seconds"]) for h in history]
    later = sorted(times[1:]) or times[:1]
    mid = len(later) // 2
    steady = later[mid] if len(later) % 2 else (later[mid - 1] + later[mid]) / 2
    return {"first_epoch_seconds": times[0], "steady_epoch_seconds": steady}


def run_result(*, config: dict, plan: dict, meta: dict, info: dict, history: list[dict], best: Selection,
               startup: float, phases: dict, startup_memory: list[dict], device: str, network: dict | None,
               digest: str, resumed_at: int | None, process: dict, step_losses: list[float]) -> dict:
    """A run's result (the ``--metrics`` JSON, :func:`as_tensor_free` of it): the run's options and
    plan, every epoch's record, the last and the best (:class:`Selection`) validation and test
    figures of the selection metric (under ``*_acc`` and by the metric's name), time, start-up,
    bytes, the axis's figures (``info``: task, metric, cache, exchange, stages, layer costs), the
    final weights' sha256 and what this run's live objects used (``process``)."""
    last = history[-1]
    metric = info.get("metric", "accuracy")
    return {
        "config": config,
        "plan": plan,
        "dataset": meta.get("dataset"),
        "task": info.get("task", "node"),
        # what val_acc, test_acc and their best measure: accuracy, or a link split's auc, hits@K or mrr
        "metric": metric,
        "num_parts": int(meta["num_parts"]),
        "epochs": history,
        "val_acc": last.get("val_acc"),
        "test_acc": last.get("test_acc"),
        "best_val_acc": best.val,
        "test_acc_at_best_val": best.test,
        "best_epoch": best.epoch,
        # the same by the metric's name (docs/targets_and_edge_features.md section 5)
        f"val_{metric}": last.get("val_acc"),
        f"test_{metric}": last.get("test_acc"),
        f"best_val_{metric}": best.val,
        f"test_{metric}_at_best_val": best.test,
        "epoch_seconds": sum(h["epoch_seconds"] for h in history) / len(history),  # the mean, first included
        **epoch_timing(history),
        "startup_seconds": startup,
        "startup_phase_seconds_max_over_ranks": phases,
        "startup_rss_mb_by_rank": [p["rss_mb"] for p in startup_memory],
        "startup_rss_anon_mb_by_rank": [p["rss_anon_mb"] for p in startup_memory],
        "device": device,
        "bytes_sent": sum(h["bytes_sent"] for h in history),
        "bytes_received": sum(h["bytes_received"] for h in history),
        "cache": info.get("cache"),
        "exchange": info.get("exchange"),
        "stages": info.get("stages"),
        "layer_costs": info.get("layer_costs"),
        "network_model": network,
        "final_weights_sha256": digest,
        "resumed_at": resumed_at,
        "process": process,  # what this run's live objects used (not echoed from the options)
        "step_losses": step_losses,
    }


def summary_figures(result: dict) -> dict:
    """What ``gnnscale report``'s summary shows of a result: the last and the best validation
    figures of its selection metric and the test figure at each (``metric`` names it)."""
    return {"metric": result.get("metric", "accuracy"), "val": result.get("val_acc"), "test": result.get("test_acc"),
            "best_val": result.get("best_val_acc"), "test_at_best_val": result.get("test_acc_at_best_val")}
