"""Memory that follows the part: per-worker peak memory at 2, 4 and 8 parts, and 10M nodes end to end.

Part 1 (always): the products-scale generated graph of ``partition_scale.py`` (2,449,029
nodes, ~61.9M directed edges, 100 float32 features, 47 classes) is partitioned by METIS
into 2, 4 and 8 parts, each in a fresh subprocess (its seconds and peak memory: the METIS
figures of issue 3, 66 s and 6.6 GB at 8 parts, are the bar). Then, for each part count, one
``gnnscale train`` run with as many workers (GraphSAGE, fanouts 15,10,5, batch 1024,
``--max-steps`` steps, then layer-wise evaluation of every node) reports each worker's peak
resident memory (``VmHWM``, from the run's metrics), set beside:

* its part's bytes (its files on disk: features, edges, labels, masks, ids) and its halo's
  bytes (the feature rows of its remote in-neighbors, which it would hold if it cached them);
* the law: peak <= 1.5 x (part + halo) + a fixed overhead (``--overhead-mb``: a torch process
  with numba and gloo, plus one mini-batch's rows and activations; its two parts are
  measured and reported: the start-up memory before any part is loaded is not observable
  from the trainer, so the process's memory is taken from a bare import in this script);
* the ratio of the 8-part worker's peak to the 2-part worker's (goal <= 0.35).

Part 2 (``--ten-million``): a 10M-node, 200M-edge generated graph (128 features, 32 classes,
train fraction ``--train-frac``) partitioned by LDG into 4 parts with ``gnnscale partition``,
then one epoch of GraphSAGE (fanouts 15,10,5, batch 1024) with 4 workers plus layer-wise
evaluation, with the machine's used memory sampled every second (``MemTotal - MemAvailable``).

Usage::

    python benchmarks/scale.py --json results/scale.json
    python benchmarks/scale.py --json r.json --num-nodes 200000 --parts 2,4     # quick
    python benchmarks/scale.py --json r.json --skip-products --ten-million      # 10M only
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import partition_scale  # noqa: E402  (the products-scale graph and the METIS child process)
from _common import write_json  # noqa: E402

RATIO_GOAL = 0.35
LAW_FACTOR = 1.5


class MemoryWatch:
    """The machine's used memory (MemTotal - MemAvailable) sampled every ``interval`` seconds."""

    def __init__(self, interval: float = 1.0) -> None:
        self.interval, self.peak, self.samples = interval, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def used_bytes() -> int:
        info = {}
        with open("/proc/meminfo") as fh:
            for line in fh:
                key, value = line.split(":", 1)
                info[key] = int(value.split()[0]) * 1024
        return info["MemTotal"] - info["MemAvailable"]

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.used_bytes())
            self.samples += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> "MemoryWatch":
        self.baseline = self.used_bytes()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def run(cmd: list[str], log: Path) -> dict:
    """Run ``cmd`` with its output in ``log``; wall seconds and its peak RSS as ``wait4`` gives it
    (the larger of its own and this process's at the fork: the caller says which it quotes)."""
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {code}; its log: {log}\n"
                         + log.read_text()[-3000:])
    return {"seconds": round(time.perf_counter() - t0, 2), "peak_rss_bytes": int(usage.ru_maxrss) * 1024}


def bare_process_mb() -> float:
    """Peak RSS (MB) of a process that imports torch, numba and gnnscale's trainer and compiles
    the sampler kernels: the part of the fixed overhead no data causes."""
    # VmHWM, not ru_maxrss: the child is forked from this process, which holds the graph, and
    # ru_maxrss keeps the peak of the image exec replaced.
    code = ("import torch, gnnscale.training.trainer\n"
            "from gnnscale.partitioning.resources import lifetime_peak_rss_bytes\n"
            "from gnnscale.samplers.kernels import Kernels\n"
            "Kernels(16, 'cpu').warmup()\n"
            "print(lifetime_peak_rss_bytes() / 1e6)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def part_bytes(parts_dir: Path, meta: dict) -> list[int]:
    """Bytes on disk of each part's files."""
    return [sum(f.stat().st_size for f in (parts_dir / f"part{p}").iterdir()) for p in range(meta["num_parts"])]


def train(parts_dir: Path, workers: int, args: argparse.Namespace, work: Path, tag: str, steps: int | None,
          evaluate: bool) -> dict:
    metrics = work / f"metrics-{tag}.json"
    cmd = [sys.executable, "-m", "gnnscale", "train", "--parts-dir", str(parts_dir), "--workers", str(workers),
           "--epochs", "1", "--fanouts", args.fanouts, "--batch-size", str(args.batch_size),
           "--eval-every", "1" if evaluate else "0", "--eval-method", "layerwise", "--metrics", str(metrics),
           "--timeout", "1800", "--no-progress",
           # each worker holds its own part only: no other part of the host memory-mapped, every remote
           # row and neighbour list asked for (and counted in bytes_sent)
           "--no-host-features", "--no-host-graph"]
    if steps:
        cmd += ["--max-steps", str(steps)]
    with MemoryWatch() as watch:
        res = run(cmd, work / f"train-{tag}.log")
    m = json.loads(metrics.read_text())
    ep = m["epochs"][-1]
    return {
        "wall_seconds": res["seconds"],
        "epoch_seconds": ep["epoch_seconds"],
        "epoch_seconds_with_eval": ep["epoch_seconds_with_eval"],
        "stage_seconds": ep["stage_seconds_max_over_ranks"],
        "steps": ep["steps"],
        "train_acc": ep.get("train_acc"), "val_acc": ep.get("val_acc"), "test_acc": ep.get("test_acc"),
        "bytes_sent": ep["bytes_sent"],
        "peak_rss_mb_by_rank": ep["peak_rss_mb_by_rank"],
        "startup_rss_mb_by_rank": m.get("startup_rss_mb_by_rank"),
        "rss_anon_mb_by_rank": ep["rss_anon_mb_by_rank"],
        "rss_file_mb_by_rank": ep["rss_file_mb_by_rank"],
        "machine_used_peak_gb": round(watch.peak / 1e9, 2),
        "machine_used_before_gb": round(watch.baseline / 1e9, 2),
    }


def products(args: argparse.Namespace, work: Path) -> dict:
    """Part 1: METIS at each part count, then per-worker memory at each."""
    graph_dir = Path(args.graph_dir) if args.graph_dir else work / "graph"
    if not args.graph_dir:
        print(f"generating {args.num_nodes} nodes, avg degree {args.avg_degree:.3f}", flush=True)
        graph = partition_scale.generate(args, graph_dir)
    else:
        graph = json.loads((graph_dir / "graph.json").read_text())
    print(f"graph: {graph}", flush=True)
    bare = bare_process_mb()
    rows = []
    for P in args.parts:
        ns = argparse.Namespace(parts=P, seed=args.seed, keep=True)
        print(f"== METIS into {P} parts (fresh process)", flush=True)
        part = partition_scale.run_method("metis", ns, graph_dir, work)
        if "error" in part:
            raise SystemExit(f"METIS into {P} parts failed: {part['error']}")
        pdir = work / f"parts-{P}"
        shutil.rmtree(pdir, ignore_errors=True)
        (work / "parts-metis").rename(pdir)
        meta = json.loads((pdir / "meta.json").read_text())
        own = part_bytes(pdir, meta)
        halo = [h * meta["feature_dim"] * 4 for h in meta["halo"]]
        print(f"   METIS {part['partition_seconds']:.1f} s, total {part['total_seconds']:.1f} s, "
              f"peak {part['peak_rss_bytes'] / 1e9:.2f} GB; training {P} workers", flush=True)
        t = train(pdir, P, args, work, f"p{P}", args.max_steps, evaluate=not args.no_eval)
        peak = t["peak_rss_mb_by_rank"]
        law = [LAW_FACTOR * (o + h) / 1e6 + args.overhead_mb for o, h in zip(own, halo)]
        rows.append({
            "parts": P,
            "metis": {k: part.get(k) for k in ("partition_seconds", "write_seconds", "total_seconds",
                                               "peak_rss_bytes", "edge_cut_fraction", "replication_factor")},
            "part_mb_by_rank": [o / 1e6 for o in own],
            "halo_mb_by_rank": [h / 1e6 for h in halo],
            "law_bound_mb_by_rank": law,
            "within_law_by_rank": [p <= b for p, b in zip(peak, law)],
            "train": t,
        })
        print(f"   peak per worker (MB): {[round(p) for p in peak]}; part {[round(o / 1e6) for o in own]}, halo "
              f"{[round(h / 1e6) for h in halo]}, bound {[round(b) for b in law]}; test acc {t['test_acc']}",
              flush=True)
        if P == max(args.parts):
            rows[-1]["writing"] = writing(graph_dir, pdir, work)
        if not args.keep:
            shutil.rmtree(pdir, ignore_errors=True)
    first, last = rows[0], rows[-1]
    ratio = max(last["train"]["peak_rss_mb_by_rank"]) / max(first["train"]["peak_rss_mb_by_rank"])
    working = [max(p - s for p, s in zip(r["train"]["peak_rss_mb_by_rank"], r["train"]["startup_rss_mb_by_rank"]))
               for r in rows]
    return {
        "graph": graph,
        "bare_process_mb": bare,
        "overhead_mb": args.overhead_mb,
        "step_working_set_mb_max_by_parts": dict(zip(map(str, args.parts), working)),
        "by_parts": rows,
        "ratio_largest_to_smallest_parts": ratio,
        "ratio_goal": RATIO_GOAL,
        "ratio_met": ratio <= RATIO_GOAL,
        "law_met": all(all(r["within_law_by_rank"]) for r in rows),
    }


def writing(graph_dir: Path, parts_dir: Path, work: Path) -> dict:
    """Write the same partition twice, one file at a time and with the default writer threads:
    seconds of each and whether the folders' files (and their sha256) are equal."""
    import numpy as np

    from gnnscale.partitioning.format import write_partitions

    data = partition_scale.load_graph(graph_dir)
    meta = json.loads((parts_dir / "meta.json").read_text())
    parts = np.empty(meta["num_nodes"], dtype=np.int64)
    for p in range(meta["num_parts"]):
        parts[np.load(parts_dir / f"part{p}" / "orig_ids.npy")] = p
    out: dict = {"num_parts": meta["num_parts"]}
    files = {}
    for name, threads in (("serial", 1), ("parallel", None)):
        target = work / f"write-{name}"
        t0 = time.perf_counter()
        written = write_partitions(data, parts, target, method="metis", dataset=data.name,
                                   num_parts=meta["num_parts"], write_threads=threads)
        out[f"{name}_seconds"] = round(time.perf_counter() - t0, 2)
        files[name] = written["files"]
        shutil.rmtree(target, ignore_errors=True)
    from gnnscale.partitioning.format import _writer_threads

    out["threads"] = _writer_threads()
    out["same_files_and_sha256"] = files["serial"] == files["parallel"]
    out["speedup"] = round(out["serial_seconds"] / out["parallel_seconds"], 2)
    print(f"   writing {meta['num_parts']} parts: one thread {out['serial_seconds']} s, {out['threads']} threads "
          f"{out['parallel_seconds']} s ({out['speedup']}x); same files: {out['same_files_and_sha256']}", flush=True)
    return out


def ten_million(args: argparse.Namespace, work: Path) -> dict:
    """Part 2: generate and partition 10M nodes, then one epoch and layer-wise evaluation."""
    pdir = work / "p10m"
    ds = (f"synthetic?num_nodes={args.big_nodes}&avg_degree={args.big_degree}&num_features=128&num_classes=32"
          f"&train_frac={args.train_frac}&val_frac={args.val_frac}&seed=0")
    print(f"== partition {ds} into 4 parts (ldg)", flush=True)
    with MemoryWatch() as watch:
        part = run([sys.executable, "-m", "gnnscale", "partition", "--dataset", ds, "--parts", "4", "--method", "ldg",
                    "--out", str(pdir)], work / "partition-10m.log")
    meta = json.loads((pdir / "meta.json").read_text())
    out = {
        "dataset": ds,
        "num_nodes": meta["num_nodes"], "num_edges": meta["num_edges"],
        "partition": {"wall_seconds": part["seconds"], "peak_rss_gb": round(part["peak_rss_bytes"] / 1e9, 2),
                      "machine_used_peak_gb": round(watch.peak / 1e9, 2),
                      **{k: meta.get(k) for k in ("partition_seconds", "write_seconds", "edge_cut_fraction",
                                                  "replication_factor", "halo", "partition_peak_rss_bytes",
                                                  "peak_rss_bytes")}},
        "part_mb_by_rank": [b / 1e6 for b in part_bytes(pdir, meta)],
        "train_nodes": sum(p["train"] for p in meta["parts"]),
    }
    print(f"   {part['seconds']:.0f} s, peak {part['peak_rss_bytes'] / 1e9:.2f} GB; training 4 workers", flush=True)
    out["train"] = train(pdir, 4, args, work, "10m", None, evaluate=True)
    t = out["train"]
    print(f"   epoch {t['epoch_seconds']:.0f} s ({t['steps']} steps per worker), with evaluation "
          f"{t['epoch_seconds_with_eval']:.0f} s; peak per worker (MB) {[round(p) for p in t['peak_rss_mb_by_rank']]}; "
          f"machine peak {t['machine_used_peak_gb']} GB; test acc {t['test_acc']}", flush=True)
    if not args.keep:
        shutil.rmtree(pdir, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="FILE", help="write the results here")
    ap.add_argument("--num-nodes", type=int, default=partition_scale.PRODUCTS_NODES)
    ap.add_argument("--avg-degree", type=float, default=partition_scale.PRODUCTS_EDGES / partition_scale.PRODUCTS_NODES)
    ap.add_argument("--num-features", type=int, default=100)
    ap.add_argument("--num-classes", type=int, default=47)
    ap.add_argument("--parts", default="2,4,8", help="part counts of part 1 (comma-separated)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fanouts", default="15,10,5")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--max-steps", type=int, default=10, help="training steps per worker in part 1")
    ap.add_argument("--no-eval", action="store_true", help="part 1 without the layer-wise evaluation")
    ap.add_argument("--overhead-mb", type=float, default=1200.0,
                    help="the law's fixed overhead per worker: process plus one batch's working set")
    ap.add_argument("--skip-products", action="store_true", help="leave out part 1")
    ap.add_argument("--ten-million", action="store_true", help="run part 2 (about 15 minutes on 2 cores)")
    ap.add_argument("--big-nodes", type=int, default=10_000_000)
    ap.add_argument("--big-degree", type=int, default=20)
    ap.add_argument("--train-frac", type=float, default=0.011, help="part 2's training nodes (papers100M: 1.1%%)")
    ap.add_argument("--val-frac", type=float, default=0.001)
    ap.add_argument("--workdir", default=None, help="scratch folder (default: a temp folder)")
    ap.add_argument("--graph-dir", default=None, help="reuse a graph saved by partition_scale.py or an earlier run")
    ap.add_argument("--keep", action="store_true", help="keep the graph and the parts")
    ap.add_argument("--smoke", action="store_true", help="part 1 on a 5,000-node graph, 2 parts, 2 steps")
    args = ap.parse_args(argv)
    if args.smoke:
        args.num_nodes, args.avg_degree, args.num_features, args.num_classes = 5000, 8.0, 16, 4
        args.parts, args.max_steps, args.fanouts, args.batch_size, args.ten_million = "2", 2, "5,5", 64, False
    args.parts = [int(p) for p in args.parts.split(",")]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="gnnscale-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    report: dict = {"cpu_count": os.cpu_count(), "workdir": str(work)}
    if not args.skip_products:
        report["products"] = products(args, work)
        p = report["products"]
        print(f"8-part / 2-part worker peak: {p['ratio_largest_to_smallest_parts']:.3f} (goal <= {RATIO_GOAL}); "
              f"law met: {p['law_met']}", flush=True)
    if args.ten_million:
        report["ten_million"] = ten_million(args, work)
    write_json(args.json, report)
    if not args.keep and not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
