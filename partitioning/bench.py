"""``gnnscale bench-partition``: compare partitioning strategies on one graph.

For every (number of parts, method): partition (timed, peak memory), then measure edge cut,
balance, halo, replication and the remote feature bytes one training epoch would fetch
(the real sampler replayed over the trainer's batches). Prints a table, and with ``--out``
writes ``results.json`` and PNG plots. On a typed graph every row also has ``typed``
(per relation: edges and cut; per node type: nodes per part and balance), printed after the
table by :func:`format_typed`.

Memory: each method partitions in a process of its own (forked from a ``forkserver`` that
imported the partitioners once), which loads the graph, resets its peak resident set size
(Linux ``/proc/self/clear_refs``) and then partitions; ``peak_MB`` is that process's peak RSS
minus its RSS before the method ran (the graph already loaded), i.e. what the method itself
added. ``isolate=False`` (or a method that cannot be sent to another process, e.g. a lambda)
measures in this process instead (``ResourceMeter``'s growth, which memory freed by an earlier
step and reused makes an underestimate); the row's ``memory_measured`` says which.

A method may carry its own options as ``NAME?KEY=VALUE&KEY=VALUE`` (the dataset names' syntax),
so one run compares presets: ``kaminpar,kaminpar?context=fast,kaminpar?context=terapart,
kahip?mode=fast``; the row's ``method`` is that whole spec. ``kahip?mode=all`` and
``kaminpar?context=all`` stand for one row per preset (:func:`expand_presets`).
"""
from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import pickle
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from gnnscale.errors import PartitionError
from gnnscale.partitioning import assign_parts, partition_metrics
from gnnscale.partitioning.api import get_partitioner
from gnnscale.partitioning.strategies import BUILTIN_STRATEGIES
from gnnscale.partitioning.resources import ResourceMeter, current_rss_bytes

log = logging.getLogger("gnnscale.bench")

COLUMNS = (
    ("parts", "{:>5d}"), ("method", "{:<10s}"), ("seconds", "{:>8.2f}"), ("peak_MB", "{:>8.1f}"),
    ("edge_cut", "{:>10d}"), ("cut_%", "{:>6.2f}"), ("bal_nodes", "{:>9.3f}"), ("bal_train", "{:>9.3f}"),
    ("bal_edges", "{:>9.3f}"), ("replication", "{:>11.3f}"), ("remote_MB/epoch", "{:>15.2f}"),
)
PEAK_NOTE = "peak_MB: the method's own peak memory (peak RSS of its process minus its RSS with the graph loaded)"


def _option_value(text: str) -> object:
    """``'3'`` -> 3, ``'0.1'`` -> 0.1, ``'true'`` -> True, else the text."""
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text.lower() == "true" if text.lower() in ("true", "false") else text


def split_method(spec: str) -> tuple[str, dict]:
    """``'kaminpar?context=fast&threads=2'`` -> ``('kaminpar', {'context': 'fast', 'threads': 2})``."""
    name, _, query = spec.partition("?")
    options = {}
    for item in filter(None, query.split("&")):
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise PartitionError(
                f"expected the method's options as NAME?KEY=VALUE&KEY=VALUE, found {item!r} in {spec!r}; "
                "write e.g. kaminpar?context=fast"
            )
        options[key.strip()] = _option_value(value.strip())
    return name, options


def expand_presets(methods: Sequence[str]) -> list[str]:
    """Each ``kahip?mode=all`` / ``kaminpar?context=all`` in ``methods`` -> one spec per preset
    (KaHIP's six modes; KaMinPar's named contexts), other options kept; the rest unchanged."""
    from gnnscale.partitioning.multilevel import KAHIP_MODES, KAMINPAR_CONTEXTS

    presets = {"kahip": ("mode", list(KAHIP_MODES)), "kaminpar": ("context", list(KAMINPAR_CONTEXTS))}
    out = []
    for spec in methods:
        name, options = split_method(spec)
        key, names = presets.get(name, (None, ()))
        if key is None or options.get(key) != "all":
            out.append(spec)
            continue
        rest = "".join(f"&{item}" for item in spec.partition("?")[2].split("&") if item.split("=")[0] != key)
        out.extend(f"{name}?{key}={preset}{rest}" for preset in names)
    return out


def _context():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["gnnscale.partitioning.bench_child"])
    return ctx


def _partition_isolated(data_file: str, method: str, fn, num_parts: int, kwargs: dict) -> tuple[np.ndarray, dict]:
    """Run :func:`assign_parts` in a fresh process; returns (int64 ``[N]`` parts, meter dict)."""
    from gnnscale.partitioning.bench_child import partition_in_child  # scipy, torch_geometric, libmetis

    ctx = _context()
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=partition_in_child, args=(send, data_file, method, fn, num_parts, kwargs),
                       name="gnnscale-bench-partition", daemon=True)
    proc.start()
    send.close()
    try:
        while not recv.poll(0.5):
            if not proc.is_alive():
                break
        try:
            msg = recv.recv()
        except EOFError:
            msg = None
    finally:
        recv.close()
        proc.join(timeout=30)
        if proc.is_alive():  # pragma: no cover - it sent its answer and hangs on exit
            proc.kill()
            proc.join(timeout=30)
    if msg is None:
        raise PartitionError(
            f"expected the process partitioning into {num_parts} parts with {method!r} to report, found it "
            f"exited with code {proc.exitcode} (killed for memory?); rerun with fewer methods or parts"
        )
    if msg[0] == "error":
        raise msg[1]
    return msg[1], msg[2]


def _picklable(obj) -> bool:
    try:
        pickle.dumps(obj)
        return True
    except Exception:  # noqa: BLE001 - lambdas, local functions
        return False


def run_bench(
    data,
    parts_list: Sequence[int],
    methods: Sequence[str],
    *,
    fanouts: Sequence[int] = (10, 10),
    batch_size: int = 512,
    balance: Sequence[str] = ("nodes", "train"),
    imbalance: float = 0.05,
    seed: int = 0,
    isolate: bool = True,
) -> list[dict]:
    """One row (a plain dict) per (parts, method), in the order given.

    Each row: ``parts``, ``method``, ``seconds`` and the memory of the partitioner
    (``peak_rss_growth_bytes``: its own peak, the ``peak_MB`` column; ``peak_rss_bytes``: its
    process's peak; ``baseline_rss_bytes``: that process before the method; ``memory_measured``:
    ``"own process"`` or ``"this process"``), ``assignment_sha256`` (of the int64 parts), the
    quality figures of :func:`partition_metrics` and ``communication``. Progress goes to the
    log (stderr), one line per method; the caller prints the rows.
    """
    rows = []
    methods = expand_presets(methods)
    total = len(parts_list) * len(methods)
    specs = [split_method(m) for m in methods]  # a malformed spec fails before any partitioning
    with tempfile.TemporaryDirectory(prefix="gnnscale-bench-") as tmp:
        data_file = None
        for p in parts_list:
            for spec, (method, options) in zip(methods, specs):
                kwargs = {"balance": balance, "imbalance": imbalance, "seed": seed, "options": options}
                fn = get_partitioner(method)  # unknown names fail here, in this process
                # built-ins and plug-ins resolve in the child by name; a registered one travels
                registered = None if BUILTIN_STRATEGIES.get(method) is fn or ":" in method else fn
                if isolate and _picklable(registered):
                    if data_file is None:
                        import torch

                        data_file = str(Path(tmp) / "graph.pt")
                        torch.save(data, data_file)
                    parts, mem = _partition_isolated(data_file, method, registered, p, kwargs)
                    where = "own process"
                else:
                    baseline = current_rss_bytes()
                    with ResourceMeter() as meter:
                        parts = assign_parts(data, p, method=method, **kwargs)
                    mem = {**meter.as_dict(), "start_rss_bytes": baseline}
                    where = "this process"
                m = partition_metrics(data, parts, p, fanouts=list(fanouts), batch_size=batch_size, seed=seed)
                comm = m.get("communication", {})
                row = {
                    "parts": p,
                    "method": spec,
                    "seconds": mem["seconds"],
                    "peak_rss_bytes": mem["peak_rss_bytes"],
                    "peak_rss_growth_bytes": mem["peak_rss_growth_bytes"],
                    "baseline_rss_bytes": mem["peak_rss_bytes"] - mem["peak_rss_growth_bytes"],
                    "memory_measured": where,
                    "assignment_sha256": hashlib.sha256(np.ascontiguousarray(parts, dtype=np.int64).tobytes()).hexdigest(),
                    "edge_cut": m["edge_cut"],
                    "edge_cut_fraction": m["edge_cut_fraction"],
                    "balance": m["balance"],
                    "halo": m["halo"],
                    "replication_factor": m["replication_factor"],
                    "remote_rows_per_epoch": comm.get("remote_rows"),
                    "remote_bytes_per_epoch": comm.get("remote_bytes"),
                    "communication": comm,
                }
                if "typed" in m:
                    row["typed"] = m["typed"]
                rows.append(row)
                log.info("bench-partition [%d/%d] %d parts, %s: %.2f s, own peak %.1f MB, %d edges cut",
                         len(rows), total, p, spec, row["seconds"], row["peak_rss_growth_bytes"] / 2**20,
                         int(row["edge_cut"]))
    return rows


def format_same(rows: list[dict]) -> str:
    """One line per row whose assignment equals an earlier row's at the same part count
    ('' when none): e.g. ``4 parts: fennel gave the same assignment as ldg``."""
    lines, seen = [], {}
    for row in rows:
        key = (row["parts"], row.get("assignment_sha256"))
        if key[1] is None:
            continue
        if key in seen:
            lines.append(f"{row['parts']} parts: {row['method']} gave the same assignment as {seen[key]}")
        else:
            seen[key] = row["method"]
    return "\n".join(lines)


def _cells(row: dict) -> list:
    b = row["balance"]
    return [
        row["parts"], row["method"], row["seconds"], row["peak_rss_growth_bytes"] / 2**20, int(row["edge_cut"]),
        100 * row["edge_cut_fraction"], b.get("nodes", float("nan")), b.get("train") or float("nan"),
        b.get("in_edges", float("nan")), row["replication_factor"], (row["remote_bytes_per_epoch"] or 0) / 1e6,
    ]


def _columns(width: int) -> tuple:
    """COLUMNS with the method column ``width`` characters wide (a spec with options is longer)."""
    return tuple((name, "{:<%ds}" % width if name == "method" else fmt) for name, fmt in COLUMNS)


def format_header(width: int = 10) -> str:
    return " ".join(f"{name:>{len(fmt.format(*([0] if 'd' in fmt or 'f' in fmt else [''])))}s}"
                    for name, fmt in _columns(width))


def format_row(row: dict, width: int = 10) -> str:
    return " ".join(fmt.format(v) for (_, fmt), v in zip(_columns(width), _cells(row)))


def format_table(rows: list[dict]) -> str:
    width = max([10] + [len(r["method"]) for r in rows])
    return "\n".join([format_header(width)] + [format_row(r, width) for r in rows])


def format_typed(rows: list[dict]) -> str:
    """The typed figures of every row: the cut of each relation (count and % of its edges)
    and the balance of each node type (max/mean over parts); '' when no row is typed."""
    lines = []
    for row in rows:
        t = row.get("typed")
        if not t:
            continue
        rels = ", ".join(
            f"{e[1]} {c}/{n} ({100 * c / n if n else 0.0:.1f}%)"
            for e, c, n in zip(t["edge_types"], t["cut_per_relation"], t["edges_per_relation"])
        )
        types = ", ".join(f"{name} {b:.3f}" for name, b in zip(t["node_types"], t["balance_per_type"]))
        lines.append(f"{row['parts']:>5d} {row['method']:<10s} cut per relation: {rels}")
        lines.append(f"{'':>5s} {'':<10s} balance per type: {types}")
    return "\n".join(lines)


def write_plots(rows: list[dict], out: Path) -> list[str]:
    """PNG plots: edge cut and remote bytes against parts (a line per method); balance per method."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed: no plots (pip install 'gnnscale[bench]')")
        return []
    methods = list(dict.fromkeys(r["method"] for r in rows))
    parts = sorted({r["parts"] for r in rows})
    written = []
    for key, ylabel, fname, scale in (
        ("edge_cut_fraction", "edge cut (fraction of edges)", "edge_cut.png", 1.0),
        ("remote_bytes_per_epoch", "remote feature MB per epoch", "remote_bytes.png", 1e-6),
    ):
        fig, ax = plt.subplots(figsize=(6, 4))
        for m in methods:
            pts = sorted((r["parts"], (r[key] or 0) * scale) for r in rows if r["method"] == m)
            ax.plot([p for p, _ in pts], [v for _, v in pts], marker="o", label=m)
        ax.set_xlabel("number of parts")
        ax.set_ylabel(ylabel)
        ax.set_xticks(parts)
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / fname, dpi=110)
        plt.close(fig)
        written.append(str(out / fname))
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), sharey=False)
    width = 0.8 / max(len(parts), 1)
    for ax, key in zip(axes, ("nodes", "train", "in_edges")):
        for i, p in enumerate(parts):
            vals = [next((r["balance"].get(key) or 0 for r in rows if r["method"] == m and r["parts"] == p), 0) for m in methods]
            ax.bar([j + i * width for j in range(len(methods))], vals, width, label=f"{p} parts")
        ax.set_xticks([j + width * (len(parts) - 1) / 2 for j in range(len(methods))])
        ax.set_xticklabels(methods, rotation=30)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_title(f"balance of {key} (max/mean)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(out / "balance.png", dpi=110)
    plt.close(fig)
    written.append(str(out / "balance.png"))
    return written


def save(rows: list[dict], out: Path, info: dict) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"info": info, "results": rows}, indent=2, default=str))
    return [str(out / "results.json")] + write_plots(rows, out)
