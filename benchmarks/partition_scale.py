"""Partitioning at the size of ogbn-products: seconds and peak memory per method.

Generates the products-scale synthetic graph once (2,449,029 nodes, ~61.9M directed edges,
100 float32 features, 47 classes; ``gnnscale.datasets.generate_synthetic``), saves
it as .npy files, then for every method runs ``partition_graph`` into ``--parts`` parts,
written to a temporary folder, IN A FRESH SUBPROCESS, so each method's peak resident memory
is its own: the child's ``ru_maxrss`` as reported by ``os.wait4`` for that child (it includes
the ~2 GB of the graph itself, loaded fully into memory as a user's process would hold it).

Usage::

    python benchmarks/partition_scale.py --json results.json
    python benchmarks/partition_scale.py --json r.json --methods fennel,ldg --num-nodes 200000

Targets (checked and reported in the JSON under ``targets``): METIS under 600 s (partition +
write) with peak RSS under 12 GB; the streaming methods (ldg, fennel) at least 5x faster than
METIS in partition seconds (the partitioner itself; writing the parts costs every method the
same and is reported separately).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PRODUCTS_NODES = 2_449_029
PRODUCTS_EDGES = 61_859_140  # directed edges of ogbn-products (both directions stored)
GRAPH_FILES = ("edge_index", "x", "y", "train_mask", "val_mask", "test_mask")
STREAMING = ("ldg", "fennel")
METIS_SECONDS_TARGET = 600.0
METIS_RSS_TARGET = 12e9
SPEEDUP_TARGET = 5.0


def _gb(b: float | int | None) -> str:
    return "-" if b is None else f"{b / 1e9:.2f}"


def generate(args: argparse.Namespace, graph_dir: Path) -> dict:
    """Generate the graph and save it as .npy files in ``graph_dir``; returns its summary."""
    import numpy as np

    from gnnscale.datasets import generate_synthetic

    t0 = time.perf_counter()
    data = generate_synthetic(
        num_nodes=args.num_nodes,
        avg_degree=args.avg_degree,
        num_classes=args.num_classes,
        num_features=args.num_features,
        seed=args.seed,
        name="synthetic-products",
    )
    seconds = time.perf_counter() - t0
    graph_dir.mkdir(parents=True, exist_ok=True)
    for name in GRAPH_FILES:
        np.save(graph_dir / f"{name}.npy", getattr(data, name).numpy(), allow_pickle=False)
    info = {
        "num_nodes": int(data.num_nodes),
        "num_edges": int(data.edge_index.shape[1]),
        "num_features": int(data.x.shape[1]),
        "num_classes": int(data.num_classes),
        "train_nodes": int(data.train_mask.sum()),
        "generate_seconds": round(seconds, 2),
        "name": data.name,
    }
    (graph_dir / "graph.json").write_text(json.dumps(info))
    return info


def load_graph(graph_dir: Path):
    """The saved graph as a ``Data`` held fully in memory."""
    import numpy as np
    import torch
    from torch_geometric.data import Data

    info = json.loads((graph_dir / "graph.json").read_text())
    arrays = {n: torch.from_numpy(np.load(graph_dir / f"{n}.npy")) for n in GRAPH_FILES}
    data = Data(**arrays, num_nodes=info["num_nodes"])
    data.num_classes = info["num_classes"]
    data.name = info["name"]
    return data


def child(args: argparse.Namespace) -> int:
    """One method: load the graph, partition_graph it, write the result JSON."""
    import logging

    from gnnscale.partitioning import partition_graph
    from gnnscale.partitioning.bench import split_method
    from gnnscale.partitioning.resources import current_rss_bytes, lifetime_peak_rss_bytes

    logging.basicConfig(level=logging.INFO, format="  [%(name)s] %(message)s")
    t0 = time.perf_counter()
    data = load_graph(Path(args.graph_dir))
    load_seconds = time.perf_counter() - t0
    rss_loaded = current_rss_bytes()
    name, options = split_method(args.child)  # NAME?KEY=VALUE, e.g. kaminpar?context=fast
    meta = partition_graph(
        data, args.parts, args.out, method=name, seed=args.seed, dataset=data.name, options=options
    )
    result = {
        "method": args.child,
        "load_seconds": round(load_seconds, 2),
        "rss_after_load_bytes": rss_loaded,
        "self_peak_rss_bytes": lifetime_peak_rss_bytes(),
    }
    for key in (
        "partition_seconds",
        "write_seconds",
        "total_seconds",
        "partition_peak_rss_bytes",
        "peak_rss_growth_bytes",
        "edge_cut",
        "edge_cut_fraction",
        "undirected_edges",
        "balance",
        "halo",
        "replication_factor",
    ):
        result[key] = meta.get(key)
    result["nodes_per_part"] = [p["nodes"] for p in meta["parts"]]
    result["train_per_part"] = [p["train"] for p in meta["parts"]]
    Path(args.result).write_text(json.dumps(result))
    return 0


def run_method(method: str, args: argparse.Namespace, graph_dir: Path, work: Path) -> dict:
    """Partition in a fresh subprocess; its own peak RSS comes from ``os.wait4``."""
    out = work / f"parts-{method}"
    result_file = work / f"result-{method}.json"
    cmd = [
        sys.executable, os.path.abspath(__file__), "--child", method, "--graph-dir",
        str(graph_dir), "--out", str(out), "--result", str(result_file), "--parts",
        str(args.parts), "--seed", str(args.seed),
    ]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0 or not result_file.is_file():
        return {"method": method, "error": f"child exited with status {proc.returncode}"}
    res = json.loads(result_file.read_text())
    res["peak_rss_bytes"] = int(usage.ru_maxrss) * 1024  # KiB on Linux
    res["child_wall_seconds"] = round(wall, 2)
    res["bytes_on_disk"] = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return res


def print_table(results: list[dict]) -> None:
    cols = (
        f"{'method':8s} {'part s':>8s} {'write s':>8s} {'total s':>8s} {'peak GB':>8s} "
        f"{'edge cut':>11s} {'cut %':>7s} {'bal nodes':>9s} {'repl':>6s}"
    )
    print(cols)
    print("-" * len(cols))
    for r in results:
        if "error" in r:
            print(f"{r['method']:8s} ERROR: {r['error']}")
            continue
        print(
            f"{r['method']:8s} {r['partition_seconds']:8.1f} {r['write_seconds']:8.1f} "
            f"{r['total_seconds']:8.1f} {_gb(r['peak_rss_bytes']):>8s} {r['edge_cut']:11d} "
            f"{100 * r['edge_cut_fraction']:7.2f} {r['balance']['nodes']:9.3f} "
            f"{r['replication_factor']:6.2f}"
        )


def targets(results: list[dict]) -> dict:
    by = {r["method"]: r for r in results if "error" not in r}
    out: dict = {}
    m = by.get("metis")
    if m:
        out["metis_total_seconds"] = m["total_seconds"]
        out["metis_under_600_s"] = m["total_seconds"] < METIS_SECONDS_TARGET
        out["metis_peak_rss_gb"] = round(m["peak_rss_bytes"] / 1e9, 3)
        out["metis_peak_under_12_gb"] = m["peak_rss_bytes"] < METIS_RSS_TARGET
        for s in STREAMING:
            if s in by:
                speed = m["partition_seconds"] / max(by[s]["partition_seconds"], 1e-9)
                out[f"{s}_speedup_vs_metis"] = round(speed, 2)
                out[f"{s}_at_least_5x_faster"] = speed >= SPEEDUP_TARGET
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="FILE", help="write the results here")
    ap.add_argument("--methods", default="metis,ldg,fennel,random,hash,range",
                    help="comma-separated; a method's options as NAME?KEY=VALUE&KEY=VALUE (kaminpar?context=fast, kahip?mode=eco)")
    ap.add_argument("--num-nodes", type=int, default=PRODUCTS_NODES)
    ap.add_argument(
        "--avg-degree", type=float, default=None,
        help=f"default: {PRODUCTS_EDGES} / {PRODUCTS_NODES} (products' directed edges per node)",
    )
    ap.add_argument("--num-features", type=int, default=100)
    ap.add_argument("--num-classes", type=int, default=47)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=None, help="scratch folder (default: a temp folder)")
    ap.add_argument("--graph-dir", default=None, help="reuse a graph saved by an earlier run")
    ap.add_argument("--keep", action="store_true", help="keep the graph and the parts")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--result", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true", help="a 5,000-node graph, 2 parts, metis and random only")
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    if args.smoke:
        args.num_nodes, args.avg_degree, args.num_features, args.num_classes = 5000, 8.0, 16, 4
        args.parts, args.methods = 2, "metis,random"
    if args.avg_degree is None:
        args.avg_degree = PRODUCTS_EDGES / PRODUCTS_NODES
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="gnnscale-partition-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.graph_dir:
        graph_dir = Path(args.graph_dir)
        graph = json.loads((graph_dir / "graph.json").read_text())
        print(f"reusing the graph in {graph_dir}: {graph}", flush=True)
    else:
        graph_dir = work / "graph"
        print(f"generating {args.num_nodes} nodes, avg degree {args.avg_degree:.3f}", flush=True)
        graph = generate(args, graph_dir)
        print(f"generated: {graph}", flush=True)
    results = []
    for method in methods:  # one fresh process per method
        print(f"== {method}", flush=True)
        res = run_method(method, args, graph_dir, work)
        results.append(res)
        if "error" not in res:
            print(
                f"   {method}: partition {res['partition_seconds']:.1f} s, total "
                f"{res['total_seconds']:.1f} s, peak {_gb(res['peak_rss_bytes'])} GB, "
                f"edge cut {res['edge_cut']} ({100 * res['edge_cut_fraction']:.2f}%)",
                flush=True,
            )
    print()
    print_table(results)
    report = {
        "graph": graph,
        "parts": args.parts,
        "seed": args.seed,
        "cpu_count": os.cpu_count(),
        "methods": results,
        "targets": targets(results),
    }
    print(json.dumps(report["targets"], indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
        print(f"wrote {args.json}")
    if not args.keep and not args.graph_dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
