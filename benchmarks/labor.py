"""Layer-neighbour sampling (``--sampler labor``, LABOR-0) against neighbour sampling (issue 55 item 4).

Per dataset, per seed, both samplers run back to back (which goes first alternates with the seed),
one data-parallel worker, the same model, fan-outs and batch; figures per run:

- ``nodes_per_batch``: distinct input nodes of a training batch (the rows the batch fetches),
  the mean over the epochs' steps;
- ``feature_bytes_per_epoch``: the input rows the epoch's batches read (``feature_bytes_moved``),
  its byte floor (``feature_bytes_floor``: the distinct rows the epoch needed) and their ratio,
  and the fetch stage's effective bandwidth;
- ``epoch_s``: the median epoch after the first (which compiles and warms up);
- ``acc``: test accuracy at the epoch of best validation accuracy (evaluation every epoch; on
  R-MAT once, after the last epoch: the final test accuracy).

Per dataset the medians over seeds and LABOR / neighbour ratios of them (measured in the same
run, alternating); the machine's 1-minute load average before every run (``load``): this machine
is shared, so only the ratios of one run are comparable.

Datasets: R-MAT (``../shared/peers/graphgen.py`` as ``benchmarks/epoch.py`` makes it: degree 20,
128 features, 16 classes; GraphSAGE 3 x 256, fan-outs 5,10,15 from the seeds, batch 1024, 2
threads), Cora (``planetoid:cora``: sage 2 x 64, fan-outs 5,5, batch 32) and ACM (``rel:sage``
2 x 64, fan-outs 5,5, batch 32, split 20; relation-wise LABOR).

    python benchmarks/labor.py --json results/labor.json                       # R-MAT 100k, Cora, ACM, 3 seeds
    python benchmarks/labor.py --datasets rmat --rmat-nodes 1000000 --seeds 0  # 1M nodes
    python benchmarks/labor.py --datasets rmat --rmat-nodes 1000000 --seeds 1 --first 1  # its next seed, labor first
    python benchmarks/labor.py --smoke                                         # tiny: Cora, 1 seed, 2 epochs
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import SHARED, fork_smoke_workers, write_json  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.path.abspath(os.path.join(ROOT, "..", "shared", "peers"))

COMMON = dict(workers=1, verify=False, progress=False, device="cpu", timeout=600.0)
SETUPS = {
    "rmat": dict(hidden=256, dropout=0.5, lr=3e-3, fanouts=(5, 10, 15), batch_size=1024, threads=2, epochs=3),
    "cora": dict(dataset="planetoid:cora", root=str(SHARED / "planetoid"), layer="sage", hidden=64, dropout=0.5,
                 lr=0.01, weight_decay=5e-4, fanouts=(5, 5), batch_size=32, epochs=10, eval_every=1, threads=1),
    "acm": dict(dataset=f"acm:{SHARED / 'acm'}?split=20", layer="rel:sage", hidden=64, dropout=0.5, lr=0.01,
                weight_decay=5e-4, fanouts=(5, 5), batch_size=32, epochs=10, eval_every=1, threads=1),
}
SAMPLERS = ("neighbor", "labor")


def rmat_dataset(n: int, workdir: str) -> str:
    """The ``dir:`` dataset spec of the peers' R-MAT graph of ``n`` nodes (written once)."""
    sys.path.insert(0, PEERS)
    import graphgen
    from epoch import _rmat_dataset

    _, ddir = _rmat_dataset(graphgen, n, workdir)
    return f"dir:{ddir}"


def figures(res: dict) -> dict:
    """One run's figures from its result (:mod:`gnnscale.training.metrics`' schema)."""
    eps = res["epochs"]
    later = eps[1:] or eps

    def med(key):
        return statistics.median(float(e[key] or 0) for e in later)

    rows = [sum(e[k] for k in ("feature_rows_local", "feature_rows_remote_fetched", "feature_rows_from_cache",
                               "feature_rows_host")) / max(e["steps"], 1) for e in eps]
    return {"nodes_per_batch": statistics.mean(rows),
            "feature_bytes_per_epoch": med("feature_bytes_moved"),
            "feature_bytes_floor": med("feature_bytes_floor"),
            "floor_ratio": med("feature_floor_ratio"),
            "bandwidth_gb_per_s": med("feature_bandwidth_gb_per_s"),
            "epoch_s": statistics.median(e["epoch_seconds"] for e in later),
            "fetch_s": statistics.median(e["stage_seconds_max_over_ranks"]["fetch"] for e in later),
            "sample_s": statistics.median(e["stage_seconds_max_over_ranks"]["sample"] for e in later),
            "acc": res["test_acc_at_best_val"] if res.get("best_epoch", -1) >= 0 else res.get("test_acc"),
            "steps": eps[-1]["steps"]}


def run(name: str, spec: dict, seeds: list[int], workdir: str, save=None, first: int = 0) -> dict:
    """Both samplers on every seed; ``save(runs)`` after each run (a long run keeps what it
    measured); ``first``: the position of ``seeds[0]`` in the alternation (a seed run on its own
    keeps the order it has in a run of several: ``--seeds 1 --first 1`` runs labor first)."""
    import gnnscale

    runs = {s: [] for s in SAMPLERS}
    for i, seed in enumerate(seeds):  # which sampler goes first alternates with the seed
        order = SAMPLERS if (i + first) % 2 == 0 else SAMPLERS[::-1]
        for sampler in order:
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            res = gnnscale.train(**COMMON, **spec, seed=seed, sampler=sampler, cache_dir=workdir)
            f = figures(res) | {"seed": seed, "load": load, "wall_s": time.perf_counter() - t0}
            runs[sampler].append(f)
            print(f"{name} seed {seed} {sampler:8s}: {f['nodes_per_batch']:9.0f} nodes/batch, "
                  f"{f['feature_bytes_per_epoch'] / 1e6:8.1f} MB/epoch ({f['floor_ratio'] or 0:.2f}x floor "
                  f"{f['feature_bytes_floor'] / 1e6:.1f} MB, {f['bandwidth_gb_per_s'] or 0:.2f} GB/s), epoch "
                  f"{f['epoch_s']:.3f} s, acc {f['acc']:.4f} (load {load:.1f})", flush=True)
            if save is not None:
                save(runs)
    out = {"runs": runs, "median": {}, "labor_over_neighbor": {}}
    for s in SAMPLERS:
        out["median"][s] = {k: statistics.median(r[k] for r in runs[s]) for k in
                            ("nodes_per_batch", "feature_bytes_per_epoch", "feature_bytes_floor", "epoch_s",
                             "fetch_s", "sample_s", "acc")}
    a, b = out["median"]["labor"], out["median"]["neighbor"]
    out["labor_over_neighbor"] = {k: (a[k] / b[k] if b[k] else None) for k in
                                  ("nodes_per_batch", "feature_bytes_per_epoch", "feature_bytes_floor", "epoch_s")}
    out["accuracy_gap_points"] = 100 * (a["acc"] - b["acc"])
    out["load_range"] = [min(r["load"] for s in SAMPLERS for r in runs[s]),
                         max(r["load"] for s in SAMPLERS for r in runs[s])]
    r = out["labor_over_neighbor"]
    print(f"{name}: labor / neighbor (medians over {len(seeds)} seeds): nodes per batch {r['nodes_per_batch']:.3f}, "
          f"bytes per epoch {r['feature_bytes_per_epoch']:.3f}, epoch {r['epoch_s']:.3f}; accuracy "
          f"{a['acc']:.4f} vs {b['acc']:.4f} ({out['accuracy_gap_points']:+.2f} points); load "
          f"{out['load_range'][0]:.1f}-{out['load_range'][1]:.1f}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="rmat,cora,acm", help="comma-separated among rmat, cora, acm")
    ap.add_argument("--rmat-nodes", type=int, default=100_000)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--first", type=int, default=0,
                    help="the first seed's position in the alternation (even: neighbour first; odd: labor first)")
    ap.add_argument("--epochs", type=int, default=None, help="epochs per run (default: per dataset)")
    ap.add_argument("--workdir", default=None, help="datasets and partitions (default: a temporary folder)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true", help="Cora, 1 seed, 2 epochs (a quick check)")
    args = ap.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="gnnscale-labor-")
    os.makedirs(workdir, exist_ok=True)
    if args.smoke:
        fork_smoke_workers(1)
        args.datasets, args.seeds, args.epochs = "cora", "0", 2
    seeds = [int(s) for s in args.seeds.split(",")]
    out = {"setup": {"seeds": seeds, "cpu_count": os.cpu_count(), "rmat_nodes": args.rmat_nodes,
                     "setups": {k: {kk: (list(v) if isinstance(v, tuple) else v) for kk, v in s.items()}
                                for k, s in SETUPS.items()}}, "datasets": {}}
    for name in args.datasets.split(","):
        spec = dict(SETUPS[name])
        if name == "rmat":
            spec["dataset"] = rmat_dataset(args.rmat_nodes, workdir)
            spec["eval_every"] = spec["epochs"] if args.epochs is None else args.epochs
        if args.epochs is not None:
            spec["epochs"] = args.epochs

        def save(runs, name=name):
            out["datasets"][name] = {"runs": runs, "partial": True}
            write_json(args.json, out)

        out["datasets"][name] = run(name, spec, seeds, workdir, save, args.first)
        write_json(args.json, out)  # after each dataset: a long run keeps what it measured


if __name__ == "__main__":
    main()
