"""Link prediction's quality and evaluation memory (issue 28, items 1 and 3); ``benchmarks/link.py``
runs them (``--what cora``, ``--what memory``).

**cora** (item 1): Cora and CiteSeer (``../shared/data/planetoid``), each split at random
85/5/10 (``random_link_split``, seeded by the run's seed; validation and test pairs and their
reverses out of message passing; as many fixed negatives as positives), the graph auto-encoder
of Kipf & Welling (2016): a 2-layer GCN encoder (hidden = embedding = 32), a dot-product decoder,
binary cross-entropy against one uniform negative per positive (drawn afresh every epoch),
full neighbourhoods (fan-outs -1,-1), Adam 0.01, no dropout, **full batch** as the GAE trains:
one step an epoch over every training edge (each worker's batch is its equal share,
``ceil(train edges / workers)``, so DDP's averaged gradient is the whole graph's), ``--cora-epochs``
epochs (default 200, the paper's), the training edges kept in message passing as the GAE keeps
them (``--no-exclude-seed-edges``). The same model through ``gnnscale train`` on the split cut by
METIS into 1 part (the single-process reference), 2 and 4 parts; test ROC-AUC and AP at the last
epoch (the paper's protocol), median over ``--seeds``, and for reference the test figures at the
epoch of best validation AUC (evaluated every 10 epochs); the published figures (GAE: Cora AUC
91.0, AP 92.0; CiteSeer 89.5 and 89.9) beside them.

Why full batch: mini-batches of 512 edges (~9 steps an epoch) took the GAE to its best within
10-20 epochs and then overfitted (Cora, seed 0, 1 worker: test AUC 0.909 at epoch 10, 0.875 at
epoch 100), so last-epoch figures scattered by up to 5 points between seeds and worker counts
(2 workers' Cora AP median 1.8 points under 1 worker's, 3 seeds); full batch climbs smoothly to a
plateau (seed 0, 1 worker: 0.903 / 0.914 at epoch 100, 0.898 / 0.912 at 200).

**memory** (item 3): a generated graph (``synthetic?num_nodes=N&avg_degree=D``, default 1M
nodes), split with 100k test edges, each with 1000 fixed per-source negatives (uniform over all
nodes, as ogbl-citation2's: MRR), cut into 4 METIS parts, trained by 4 workers (``--memory-workers``) for
``--memory-steps`` steps (GraphSAGE 2 x 64, fan-outs 10,5) and evaluated once: the largest
process's peak RSS during training (VmHWM before evaluation, start-up included) beside its peak
during the MRR evaluation (``evaluation_peak_rss_mb_by_rank``), and their ratio.
"""
from __future__ import annotations

import json
import math
import statistics
import sys
import time
from pathlib import Path

from _common import SHARED, run_gnnscale

PUBLISHED = {"cora": {"auc": 0.910, "ap": 0.920}, "citeseer": {"auc": 0.895, "ap": 0.899}}


def _train(parts: str, workers: int, metrics: Path, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "gnnscale", "train", "--parts-dir", parts, "--workers", str(workers), "--task", "link",
           "--no-progress", "--metrics", str(metrics), *extra]
    t0 = time.perf_counter()
    r = run_gnnscale(cmd[3:], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    out = json.loads(metrics.read_text())
    out["wall_seconds"] = time.perf_counter() - t0
    return out


def _split_and_cut(data, parts: int, out: Path, seed: int, **split) -> str:
    from gnnscale.datasets.link_split import random_link_split
    from gnnscale.partitioning import partition_graph

    if not (out / "meta.json").exists():
        partition_graph(random_link_split(data, seed=seed, **split), parts, out, dataset=str(data.name))
    return str(out)


def run_cora(args, work: Path) -> dict:
    """Item 1: {dataset: {"published", "runs": [...], "median": {workers: {auc, ap}}, "gap_points"}}."""
    from gnnscale.datasets import load_dataset

    res = {}
    for name in args.graphs:
        data = load_dataset(f"planetoid:{name}", root=str(SHARED / "planetoid" / "raw"))
        runs = []
        for seed in args.seeds:
            for workers in args.workers:
                parts = _split_and_cut(data, workers, work / f"{name}-s{seed}-p{workers}", seed, val=0.05, test=0.10)
                train_edges = json.loads((Path(parts) / "meta.json").read_text())["link"]["counts"]["train"]
                m = _train(parts, workers, work / f"{name}-s{seed}-w{workers}.json",
                           ["--layer", "gcn", "--fanouts", "-1,-1", "--hidden", "32", "--dropout", "0", "--lr", "0.01",
                            "--epochs", str(args.cora_epochs), "--eval-every", "10",
                            "--batch-size", str(math.ceil(train_edges / workers)), "--seed", str(seed),
                            "--no-exclude-seed-edges"])
                evals = [(e["epoch"], e["evaluation"]["metrics"]) for e in m["epochs"]
                         if (e.get("evaluation") or {}).get("metrics")]
                best_epoch, best = max(evals, key=lambda em: (em[1]["val"]["auc"], -em[0]))
                test, sel = evals[-1][1]["test"], best["test"]
                runs.append({"seed": seed, "workers": workers, "auc": test["auc"], "ap": test["ap"],
                             "steps_per_epoch": m["epochs"][-1]["steps"], "batch_per_worker": math.ceil(train_edges / workers),
                             "best_val_epoch": best_epoch, "best_val_auc": best["val"]["auc"],
                             "auc_at_best_val": sel["auc"], "ap_at_best_val": sel["ap"],
                             "epoch_seconds": m["epoch_seconds"], "bytes_sent": m["bytes_sent"]})
                print(f"{name} seed {seed} workers {workers}: test AUC {test['auc']:.4f} AP {test['ap']:.4f} at the last "
                      f"epoch ({sel['auc']:.4f} / {sel['ap']:.4f} at best validation, epoch {best_epoch}; "
                      f"{m['epoch_seconds']:.2f} s/epoch)", flush=True)
        med = {w: {k: statistics.median(r[k] for r in runs if r["workers"] == w)
                   for k in ("auc", "ap", "auc_at_best_val", "ap_at_best_val")} for w in args.workers}
        ref = med[args.workers[0]]
        gap = {w: {k: round(100 * (med[w][k] - ref[k]), 2) for k in ("auc", "ap")} for w in args.workers[1:]}
        res[name] = {"published": PUBLISHED[name], "runs": runs, "median": med, "gap_points_vs_1_worker": gap,
                     "within_1_point": all(abs(v) <= 1.0 for g in gap.values() for v in g.values())}
        print(f"{name}: median test AUC/AP by workers {json.dumps(med)}; gap vs 1 worker (points) {json.dumps(gap)}; "
              f"published GAE {PUBLISHED[name]}", flush=True)
    return res


def run_memory(args, work: Path) -> dict:
    """Item 3: the largest process's peak RSS in training and in MRR evaluation."""
    from gnnscale.datasets import load_dataset

    name = f"synthetic?num_nodes={args.memory_nodes}&avg_degree={args.memory_degree}"
    workers = getattr(args, "memory_workers", 4)
    folder = work / (f"mem-{args.memory_nodes}" + (f"-p{workers}" if workers != 4 else ""))
    t0 = time.perf_counter()
    if not (folder / "meta.json").exists():
        data = load_dataset(name)
        pairs = data.edge_index.shape[1] // 2
        test = args.memory_test_edges / pairs
        _split_and_cut(data, workers, folder, 0, val=1000 / pairs, test=test, neg_per_source=args.memory_negatives)
        del data
    prep = time.perf_counter() - t0
    meta = json.loads((folder / "meta.json").read_text())
    m = _train(str(folder), workers, work / "mem.json",
               ["--fanouts", "10,5", "--hidden", "64", "--batch-size", "1024", "--epochs", "1",
                "--max-steps", str(args.memory_steps), "--timeout", "1800", "--threads", "1"])
    ep = m["epochs"][-1]
    train_peak, eval_peak = ep["training_peak_rss_mb_by_rank"], ep["evaluation_peak_rss_mb_by_rank"]
    out = {"graph": name, "num_nodes": meta["num_nodes"], "num_edges": meta["num_edges"],
           "test_edges": meta["link"]["counts"]["test"], "negatives_per_source": meta["link"]["neg_per_source"],
           "prepare_seconds": prep, "steps": ep["steps"], "test_mrr": ep["test_acc"],
           "evaluation_bytes_by_category": ep["evaluation"]["bytes_sent_by_category"],
           "training_peak_rss_mb_by_rank": train_peak, "evaluation_peak_rss_mb_by_rank": eval_peak,
           "largest_training_peak_mb": max(train_peak), "largest_evaluation_peak_mb": max(eval_peak),
           "ratio": max(eval_peak) / max(train_peak), "epoch_seconds_with_eval": ep["epoch_seconds_with_eval"],
           "epoch_seconds": ep["epoch_seconds"]}
    print(f"memory: {out['num_nodes']} nodes, {out['test_edges']} test edges x {out['negatives_per_source']} "
          f"negatives: peak RSS training {max(train_peak):.0f} MB, MRR evaluation {max(eval_peak):.0f} MB "
          f"(ratio {out['ratio']:.2f}); evaluation {ep['epoch_seconds_with_eval'] - ep['epoch_seconds']:.1f} s, "
          f"test MRR {ep['test_acc']:.4f}", flush=True)
    return out
