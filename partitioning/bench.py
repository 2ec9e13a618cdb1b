"""``gnnscale bench-partition``: compare partitioning strategies on one graph.

For every (number of parts, method): partition (timed, peak memory), then measure edge cut,
balance, halo, replication and the remote feature bytes one training epoch would fetch
(the real sampler replayed over the trainer's batches). Prints a table, and with ``--out``
writes ``results.json`` and PNG plots. On a typed graph every row also has ``typed``
(per relation: edges and cut; per node type: nodes per part and balance), printed after the
table by :func:`format_typed`.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Sequence

from gnnscale.partitioning import assign_parts, partition_metrics
from gnnscale.partitioning.resources import ResourceMeter

log = logging.getLogger("gnnscale.bench")

COLUMNS = (
    ("parts", "{:>5d}"), ("method", "{:<10s}"), ("seconds", "{:>8.2f}"), ("peak_MB", "{:>8.0f}"),
    ("edge_cut", "{:>10d}"), ("cut_%", "{:>6.2f}"), ("bal_nodes", "{:>9.3f}"), ("bal_train", "{:>9.3f}"),
    ("bal_edges", "{:>9.3f}"), ("replication", "{:>11.3f}"), ("remote_MB/epoch", "{:>15.2f}"),
)


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
) -> list[dict]:
    """One row (a plain dict) per (parts, method), in the order given."""
    rows = []
    for p in parts_list:
        for method in methods:
            with ResourceMeter() as meter:
                parts = assign_parts(data, p, method=method, balance=balance, imbalance=imbalance, seed=seed)
            m = partition_metrics(data, parts, p, fanouts=list(fanouts), batch_size=batch_size, seed=seed)
            comm = m.get("communication", {})
            row = {
                "parts": p,
                "method": method,
                "seconds": meter.seconds,
                "peak_rss_bytes": meter.peak_rss_bytes,
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
            log.info("%s", format_row(row))
    return rows


def _cells(row: dict) -> list:
    b = row["balance"]
    return [
        row["parts"], row["method"], row["seconds"], row["peak_rss_bytes"] / 2**20, int(row["edge_cut"]),
        100 * row["edge_cut_fraction"], b.get("nodes", float("nan")), b.get("train") or float("nan"),
        b.get("in_edges", float("nan")), row["replication_factor"], (row["remote_bytes_per_epoch"] or 0) / 1e6,
    ]


def format_header() -> str:
    return " ".join(f"{name:>{len(fmt.format(*([0] if 'd' in fmt or 'f' in fmt else [''])))}s}" for name, fmt in COLUMNS)


def format_row(row: dict) -> str:
    return " ".join(fmt.format(v) for (_, fmt), v in zip(COLUMNS, _cells(row)))


def format_table(rows: list[dict]) -> str:
    return "\n".join([format_header()] + [format_row(r) for r in rows])


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
