"""Node targets of every kind and edge features in the model (issue 29, "what must be shown").
One function per ``--what``; ``--json FILE`` writes them all with the checkout's provenance.

``--what humloc`` (item 1): HumLoc (``humloc:../shared/data/humloc``: 3,106 proteins, 32 features,
14 subcellular locations, multi-label, 18,496 stored edges with 21 interaction scores each, the
fixed 1675/187/1244 split), cut by METIS into 1, 2 and 4 parts (``gnnscale partition``; the same
folders for every run). The model: 2 layers of PyG's ``GATConv`` (``--layer gat-pyg``, 4 heads,
hidden 64), **with** the edge features (``--edge-features on``: ``GATConv(edge_dim=21)``, each
sampled edge's 21 scores in the attention) and the **same model without** them
(``--edge-features off``: ``GATConv`` without ``edge_dim``, no edge row sampled or sent), binary
cross-entropy per label (no ``--pos-weight``), each trained by 1, 2 and 4 workers with seeds 0, 1,
2. Figures: the test micro-F1 (every (node, label) entry, logit > 0) and the test mean ROC-AUC
over labels (OGB's ogbn-proteins definition) at the epoch of best validation on the same metric,
median over the seeds; the gap of 2 and 4 workers to 1 worker in points (the check: within 1.0
point) and the edge features' effect (with minus without, in points, per worker count).

Two metrics, two runs: a run evaluates and selects on one ``--metric``, so each setting runs twice
(``--metric micro_f1``, ``--metric roc_auc``) with the same seed. The metric touches neither the
draws nor the weights: both runs end with the same ``final_weights_sha256`` (checked here, the run
fails otherwise), so they are one training selected on two metrics.

The protocol (``--protocol full``, the default): **full batch**, full neighbourhoods (fan-outs
-1,-1; evaluation layer-wise on full neighbourhoods), no dropout, Adam lr 0.01, weight decay 1e-3,
250 epochs (validation still creeps up at the end while test has flattened: 0.72-0.73 from epoch
~150), evaluation every 5 epochs. Every worker's batch is its part's whole training set (one step
an epoch; ``--batch-size`` = the largest part's training nodes), so the global batch is the 1,675
training nodes for every worker count and DDP's averaged gradient is the whole training set's
(each rank's mean loss weighs its part's nodes equally; the parts hold 796/879 and
439/419/404/413 of them). Without dropout or sampling the worker counts train the same function
up to the float order of the sums, and their curves stay together: measured, |W workers - 1
worker| of the same seed over the evaluated epochs, median (largest over seeds and settings):
test ROC-AUC 0.1-0.6 point, test micro-F1 0.5-0.7 point (``curve_gaps_points`` in ``--json``).

Why not mini-batches: ``--protocol mini`` (256 training nodes a step in all: 256, 128 and 64 per
worker for 1, 2 and 4 workers, fan-outs 10,10, dropout 0.5, Adam lr 0.01, 60 epochs, each
evaluated) draws other neighbours, dropout masks and batches for every worker count, so each
worker count is another random run, and what is selected is noisy twice over. Measured (edges on,
seeds 0-2): the median test micro-F1 of 4 workers was 1.86 points under 1 worker's (0.3784 vs
0.3970; ROC-AUC -0.17), the test curves of one seed differ between worker counts by 2.5 points of
micro-F1 in the median epoch (up to 14), and a run's test micro-F1 moves by ~2 points from one
epoch to the next (up to 29: at the fixed threshold logit > 0 the rare labels' predictions flip
together), against 0.5 point between evaluations 5 epochs apart under full batch. The validation
set is small for selection: 187 nodes, where 5 of the 13 labels present have 1-3 positives (label
13 none), so one node moves the mean ROC-AUC over labels by points: even under full batch, with
test curves within 0.5 point, validation curves differ by up to 1.9-3.6 points of ROC-AUC and 5-7
of micro-F1 between worker counts, which is why the test figures are medians over 3 seeds.

``--what auc`` (item 2): the project's ROC-AUC equals scikit-learn's. One run of the item-1 model
with edge features (seed 0, ``--save-model``) per worker count (1 and 4 by default); the saved
model's scores of every node (``predict_full_graph`` with the dataset's ``edge_attr``) on the test
nodes: the project's ``multilabel_roc_auc``, scikit-learn's ``roc_auc_score`` per label averaged over
the labels with both classes, OGB's ``Evaluator("ogbn-proteins")`` (with ``num_tasks`` = 14), and
the run's own figure (its last epoch's layer-wise evaluation over its parts); micro-F1 likewise
against scikit-learn's ``f1_score(average="micro")``.

``--what sampling`` (item 4): sampling throughput with edge attributes. The peers' R-MAT graph
(``../shared/peers/graphgen.py``: 100k nodes, degree 20, as ``benchmarks/sampler.py`` loads it),
8 random float32 features per edge (``torch.rand``, seeded: ogbn-proteins' width), and
``benchmarks/sampler.py``'s timing: a ``NeighborSampler`` over the whole graph, fan-outs 15,10,5,
batches of 1024 shuffled training nodes until ``--min-seeds`` (40,960) seeds, 2 threads, after a
warm-up batch; the same sampler **with** ``edge_attr`` (every block gathers its edges' rows) and
**without**, alternating (with/without, then without/with, ...) for ``--repeats`` rounds (default
5); the figure is seeds/s, the ratio of medians with / without (target >= 0.8). Then the bytes the
edge rows cost in training: the same graph as a ``dir:`` dataset with ``edge_attr.npy``, cut by
METIS into 2 parts, one epoch of ``gnnscale train --layer gat-pyg`` (GATConv, 4 heads, hidden 64;
edge_dim 8 with ``--edge-features on``, none with ``off``; fan-outs 15,10,5, batch 1024 per worker,
no evaluation, host reads off so that every row crosses the communicator as between 2 hosts):
``edge_attr`` bytes sent per epoch (all ranks) beside the sampling response's
bytes. Also timed: the rows' gather alone (``gather_edge_attr`` of the CSC positions of one
epoch's batches, 10).
Other processes' CPU during each timed run is recorded (``foreign_cpu``, ``machine_cpu``, as
``benchmarks/link.py``); over 5% is not a clean measurement.

A run at 0cfbf76 (a shared 2-core machine, other processes at most 2.2% CPU during
the timed runs): 85,634 seeds/s without, 77,252 with: 0.90x (target >= 0.8); but a quieter rerun at
195437f gave 140,776 without and 102,111 with: **0.73x, under the target** (+2.75 ms per batch, the
gather alone 2.58 ms): a busy machine slows the path without rows more. At 2986a14 (the kernels
draw every row's positions first, then read the drawn edges in one flat loop) both paths are
faster, the path without rows more (the same script beside 86470b4, alternating: 89k -> 131k
seeds/s without rows, 70k -> 86k with): 143,119 without and 89,770 with (85-116k over the 5
repeats), **0.63x** (+4.25 ms per batch; the gather alone 2.90 ms). In the first run, per batch (243k
sampled edges) 11.96 ms without, 13.26 ms with (+1.30 ms), while a separate gather of the same
rows (``np.take`` of the CSC positions from the 64 MB table) takes 4.53 ms alone: the compiled
kernels read each drawn edge's attribute row beside its neighbor id (``cpu_kernels.pack_edges``,
int32 rows of the id's two words then the attribute bits), so the id and the row share cache
lines. Before (draws, then one gather of every hop's positions): 0.59-0.72x; a parallel gather,
a preallocated output and 16-bit rows gained nothing measurable. At 01ea41b (the kernels'
second pass prefetches the row 32 slots ahead; this process on huge pages, as workers are):
130,995 without and 90,972 with, **0.69x** (+3.44 ms per batch; the gather alone 3.77 ms). In
this process, alternating: 0.78-0.83x. Why not more: the packed table (76 MB) is read from DRAM
(about 2.3 ms per batch read alone, 243k rows) while the 16 MB of ids fit the 32 MB L3; rows
padded to 64 B (one line each) gained nothing beyond noise, and cost 24 B per edge. The 2-part epoch sent 30.3 MB of
edge rows (947,427 rows of 32 B) beside 9.0 MB of sampling responses and 155.1 MB in all without
edge features (185.5 MB with).

    python benchmarks/tasks.py --json results/tasks.json                       # every item
    python benchmarks/tasks.py --what humloc --protocol mini --edge-settings on --json results/tasks_humloc_mini.json
    python benchmarks/tasks.py --what sampling --repeats 2 --min-seeds 10240   # a check

Duration (a loaded 2-core machine): humloc 36 runs, ~17 min (mini, 18 runs: ~15 min); auc 2 runs,
~1 min; sampling ~1 min of timing, ~1 min to cut the 100k graph (kept in ``--work``), 2 training
epochs.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

# The sampler timed in this process runs on the memory a worker's would: the launcher puts
# every worker's large torch tensors on transparent huge pages (launch.thread_env). torch reads
# the setting once, at its first allocation, so it is set before torch is imported.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import REPO, SHARED, run_gnnscale, smoke_in_process, write_json  # noqa: E402
from link import measured, other_frac, peers_modules, provenance  # noqa: E402

METRICS = ("micro_f1", "roc_auc")
PROTOCOLS = {
    # full batch: every worker's whole part per step; see the module docstring for why
    "full": dict(fanouts="-1,-1", global_batch=None, dropout=0.0, lr=0.01, weight_decay=1e-3, epochs=250, eval_every=5),
    # mini-batches of 256 training nodes in all (256 / workers per worker)
    "mini": dict(fanouts="10,10", global_batch=256, dropout=0.5, lr=0.01, weight_decay=0.0, epochs=60, eval_every=1),
}


def save_partial(args, obj) -> None:
    """The running item's figures so far (``--json`` with ``.<item>.partial.json``), silently."""
    if args.json_partial:
        Path(args.json_partial).write_text(json.dumps(obj, indent=1))


def protocol_of(name: str, args) -> dict:
    """A protocol's settings, its epochs overridden by ``--humloc-epochs``."""
    return dict(PROTOCOLS[name], **({"epochs": args.humloc_epochs} if args.humloc_epochs else {}))


def run_train(parts: str, workers: int, metrics: Path, extra: list[str]) -> dict:
    """``gnnscale train`` on ``parts`` with ``workers`` workers; its metrics file, plus wall seconds."""
    cmd = [sys.executable, "-m", "gnnscale", "train", "--parts-dir", parts, "--workers", str(workers), "--device", "cpu",
           "--no-progress", "--metrics", str(metrics), *extra]
    t0 = time.perf_counter()
    r = run_gnnscale(cmd[3:], capture_output=True, text=True, cwd=REPO)
    if r.returncode:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-3000:]}")
    out = json.loads(metrics.read_text())
    out["wall_seconds"] = time.perf_counter() - t0
    out["command"] = " ".join(cmd[3:])
    return out


def humloc_parts(work: Path, workers: list[int]) -> dict[int, str]:
    """HumLoc cut by METIS into each worker count's parts (``gnnscale partition``; reused)."""
    out = {}
    for p in sorted(set(workers)):
        folder = work / f"humloc-p{p}"
        if not (folder / "meta.json").exists():
            r = run_gnnscale(["partition", "--dataset", f"humloc:{SHARED / 'humloc'}", "--parts", str(p),
                              "--out", str(folder)], capture_output=True, text=True, cwd=REPO)
            if r.returncode:
                raise SystemExit(f"partitioning HumLoc into {p} parts failed:\n{r.stderr[-3000:]}")
        out[p] = str(folder)
    return out


def batch_per_worker(protocol: dict, parts: str, workers: int) -> int:
    """Full batch: the largest part's training nodes (every worker's whole part, one step an
    epoch); else the global batch split over the workers."""
    if protocol["global_batch"] is None:
        return max(p["train"] for p in json.loads((Path(parts) / "meta.json").read_text())["parts"])
    return math.ceil(protocol["global_batch"] / workers)


def model_args(protocol: dict, parts: str, workers: int, edges: str, seed: int, args) -> list[str]:
    """The item-1 model and protocol as ``gnnscale train`` flags."""
    return ["--layer", "gat-pyg", "--edge-features", edges, "--hidden", str(args.hidden),
            "--fanouts", protocol["fanouts"], "--eval-fanouts", "-1,-1",
            "--batch-size", str(batch_per_worker(protocol, parts, workers)),
            "--dropout", str(protocol["dropout"]), "--lr", str(protocol["lr"]),
            "--weight-decay", str(protocol["weight_decay"]), "--epochs", str(protocol["epochs"]),
            "--eval-every", str(protocol["eval_every"]), "--seed", str(seed)]


def curve(m: dict, metric: str) -> list:
    """[(epoch, loss, val, test)] of the evaluated epochs."""
    return [(e["epoch"], round(e["loss"], 5), e.get(f"val_{metric}"), e.get(f"test_{metric}")) for e in m["epochs"]
            if e.get(f"val_{metric}") is not None]


def run_humloc(args, work: Path) -> dict:
    """Item 1: {"runs": [...], "median": {model: {workers: {metric: ...}}}, "gap_points_vs_1_worker",
    "edge_effect_points", "within_1_point"}."""
    protocol = protocol_of(args.protocol, args)
    parts = humloc_parts(work / "humloc", args.workers)
    runs = []
    res = {"provenance": provenance(), "protocol": args.protocol,
           "settings": dict(protocol, layer="gat-pyg (torch_geometric.nn.GATConv, 4 heads)", hidden=args.hidden,
                            num_layers=2, loss="binary cross-entropy per label, no pos_weight",
                            selection="test at the best validation epoch of the same metric",
                            batch_per_worker={w: batch_per_worker(protocol, parts[w], w) for w in args.workers},
                            seeds=args.seeds, workers=args.workers, metrics=args.humloc_metrics,
                            edge_features=args.edge_settings),
           "runs": runs}
    out_dir = work / f"humloc-runs-{args.protocol}"
    out_dir.mkdir(parents=True, exist_ok=True)
    for edges in args.edge_settings:
        for seed in args.seeds:
            for w in args.workers:
                rec = {"edge_features": edges, "seed": seed, "workers": w}
                digests = {}
                for metric in args.humloc_metrics:
                    m = run_train(parts[w], w, out_dir / f"e{edges}-s{seed}-w{w}-{metric}.json",
                                  model_args(protocol, parts[w], w, edges, seed, args) + ["--metric", metric])
                    if m["metric"] != metric:
                        raise SystemExit(f"asked --metric {metric}, the run reports {m['metric']}")
                    digests[metric] = m["final_weights_sha256"]
                    rec[metric] = m[f"test_{metric}_at_best_val"]
                    rec[f"{metric}_best_val"] = m[f"best_val_{metric}"]
                    rec[f"{metric}_best_epoch"] = m["best_epoch"]
                    rec[f"{metric}_last_epoch"] = m[f"test_{metric}"]
                    rec[f"{metric}_curve"] = curve(m, metric)
                    rec["edge_attr_bytes_last_epoch"] = m["epochs"][-1]["bytes_sent_by_category"].get("edge_attr", 0)
                    rec["steps_per_epoch"] = m["epochs"][-1]["steps"]
                    rec["epoch_seconds"] = m["epoch_seconds"]
                    rec["command_" + metric] = m["command"]
                if len(set(digests.values())) != 1:
                    raise SystemExit(f"the runs of one setting with different --metric trained different weights: {digests}")
                rec["final_weights_sha256"] = next(iter(digests.values()))
                runs.append(rec)
                print(f"HumLoc edges {edges:3s} seed {seed} workers {w}: " + ", ".join(
                    f"test {k} {rec[k]:.4f} (epoch {rec[k + '_best_epoch']}, val {rec[k + '_best_val']:.4f}; "
                    f"last {rec[k + '_last_epoch']:.4f})" for k in args.humloc_metrics)
                    + f"; {rec['steps_per_epoch']} step(s)/epoch, {rec['epoch_seconds']:.2f} s/epoch", flush=True)
                save_partial(args, {"humloc": res})
    med = {e: {w: {k: statistics.median(r[k] for r in runs if r["edge_features"] == e and r["workers"] == w)
                   for k in args.humloc_metrics} for w in args.workers} for e in args.edge_settings}
    ref = args.workers[0]
    gap = {e: {w: {k: round(100 * (med[e][w][k] - med[e][ref][k]), 2) for k in args.humloc_metrics}
               for w in args.workers[1:]} for e in med}
    effect = {w: {k: round(100 * (med["on"][w][k] - med["off"][w][k]), 2) for k in args.humloc_metrics}
              for w in args.workers} if {"on", "off"} <= set(med) else None
    curves = curve_gaps(runs, args)
    res.update(median=med, gap_points_vs_1_worker=gap, edge_effect_points=effect, curve_gaps_points=curves,
               within_1_point=all(abs(v) <= 1.0 for g in gap.values() for x in g.values() for v in x.values()))
    print(f"\nHumLoc, GATConv 2 x 64, protocol {args.protocol}: test at the best validation epoch, median of seeds "
          f"{','.join(map(str, args.seeds))} (points: x 100)")
    head = "".join(f" {k:>10s}" for k in args.humloc_metrics)
    print(f"{'edge features':14s} {'workers':>7s}{head}" + "".join(f" {'gap ' + k:>14s}" for k in args.humloc_metrics))
    for e in args.edge_settings:
        for w in args.workers:
            gaps = "".join(f" {gap[e][w][k]:+14.2f}" if w != ref else f" {'-':>14s}" for k in args.humloc_metrics)
            print(f"{e:14s} {w:7d}" + "".join(f" {med[e][w][k]:10.4f}" for k in args.humloc_metrics) + gaps)
    if effect:
        print("edge features' effect (with - without, points): " + "; ".join(
            f"{w} worker(s) " + ", ".join(f"{k} {effect[w][k]:+.2f}" for k in args.humloc_metrics) for w in args.workers))
    print("epoch by epoch, |W workers - 1 worker| of the same seed (points; median / max over the evaluated "
          "epochs, the largest over seeds):")
    for e, by_w in curves.items():
        for w, c in by_w.items():
            print(f"  edges {e:3s} {w} workers: " + "; ".join(
                f"{k} test {c[k]['test_median']:.2f} / {c[k]['test_max']:.2f}, validation {c[k]['val_median']:.2f} / "
                f"{c[k]['val_max']:.2f}" for k in args.humloc_metrics))
    print(f"every gap within 1.0 point: {res['within_1_point']}", flush=True)
    return res


def curve_gaps(runs: list[dict], args) -> dict:
    """Per edge setting and worker count W > the first: how far W workers' validation and test
    curves lie from 1 worker's of the same seed, in points: the median and the max of
    |difference| over the evaluated epochs, each the largest over the seeds."""
    out = {}
    ref_w = args.workers[0]
    for e in args.edge_settings:
        out[e] = {}
        for w in args.workers[1:]:
            got = {}
            for k in args.humloc_metrics:
                per_seed = []
                for seed in args.seeds:
                    a, b = ({c[0]: c for c in r[k + "_curve"]} for r in (
                        next(r for r in runs if (r["edge_features"], r["seed"], r["workers"]) == (e, seed, x))
                        for x in (ref_w, w)))
                    common = sorted(set(a) & set(b))
                    per_seed.append({f"{split}_{stat}": f([100 * abs(a[x][i] - b[x][i]) for x in common])
                                     for split, i in (("val", 2), ("test", 3))
                                     for stat, f in (("median", statistics.median), ("max", max))})
                got[k] = {key: round(max(p[key] for p in per_seed), 2) for key in per_seed[0]}
            out[e][w] = got
    return out


def run_auc(args, work: Path) -> dict:
    """Item 2: the saved model's test ROC-AUC by the project, scikit-learn and OGB; micro-F1 by both."""
    import torch
    from sklearn.metrics import f1_score, roc_auc_score

    import gnnscale
    from gnnscale.datasets import load_dataset
    from gnnscale.tasks.scores import multilabel_roc_auc
    from gnnscale.training.model_io import predict_full_graph
    from gnnscale.tasks.node_metrics import node_metric

    protocol = protocol_of("full", args)
    data = load_dataset(f"humloc:{SHARED / 'humloc'}")
    parts = humloc_parts(work / "humloc", args.auc_workers)
    test = data.test_mask
    y = data.y[test]
    both = [c for c in range(y.shape[1]) if 0 < int(y[:, c].sum()) < y.shape[0]]
    rows = []
    for w in args.auc_workers:
        model = work / f"auc-w{w}.pt"
        m = run_train(parts[w], w, work / f"auc-w{w}.json",
                      model_args(protocol, parts[w], w, "on", 0, args) + ["--metric", "roc_auc", "--save-model", str(model)])
        with torch.no_grad():
            s = predict_full_graph(gnnscale.load_model(str(model)), data.x.float(), data.edge_index, data.edge_attr)[test]
        ours = multilabel_roc_auc(y, s)
        sk = float(np.mean([roc_auc_score(y[:, c].numpy(), s[:, c].numpy()) for c in both]))
        try:
            from ogb.nodeproppred import Evaluator

            ev = Evaluator("ogbn-proteins")
            ev.num_tasks = y.shape[1]
            ogb = float(ev.eval({"y_true": y.numpy(), "y_pred": s.numpy()})["rocauc"])
        except ImportError:
            ogb = None
        f1_ours = node_metric("micro_f1", "multilabel", s, y)
        f1_sk = float(f1_score(y.long().numpy(), (s > 0).long().numpy(), average="micro", zero_division=0))
        row = {"workers": w, "run_test_roc_auc_last_epoch": m["test_roc_auc"], "saved_model_roc_auc": ours,
               "sklearn_roc_auc": sk, "ogb_evaluator_roc_auc": ogb, "labels_with_both_classes": len(both),
               "abs_diff_sklearn": abs(ours - sk), "abs_diff_ogb": None if ogb is None else abs(ours - ogb),
               "abs_diff_run": abs(ours - m["test_roc_auc"]), "saved_model_micro_f1": f1_ours,
               "sklearn_micro_f1": f1_sk, "abs_diff_micro_f1": abs(f1_ours - f1_sk), "command": m["command"]}
        rows.append(row)
    print("\nROC-AUC of the saved model on HumLoc's 1244 test nodes (GATConv with edge features, seed 0, last epoch)")
    print(f"{'workers':>7s} {'run (parts)':>12s} {'gnnscale':>10s} {'sklearn':>10s} {'OGB':>10s} {'|diff| skl':>10s} "
          f"{'|diff| OGB':>10s} {'|diff| run':>10s} {'micro-F1':>9s} {'sklearn':>9s}")
    for r in rows:
        ogb = "n/a" if r["ogb_evaluator_roc_auc"] is None else f"{r['ogb_evaluator_roc_auc']:.6f}"
        dogb = "n/a" if r["abs_diff_ogb"] is None else f"{r['abs_diff_ogb']:.1e}"
        print(f"{r['workers']:7d} {r['run_test_roc_auc_last_epoch']:12.6f} {r['saved_model_roc_auc']:10.6f} "
              f"{r['sklearn_roc_auc']:10.6f} {ogb:>10s} {r['abs_diff_sklearn']:10.1e} {dogb:>10s} {r['abs_diff_run']:10.1e} "
              f"{r['saved_model_micro_f1']:9.6f} {r['sklearn_micro_f1']:9.6f}", flush=True)
    return {"provenance": provenance(), "rows": rows,
            "equal_to_sklearn_1e-9": all(r["abs_diff_sklearn"] <= 1e-9 for r in rows)}


def run_sampling(args, work: Path) -> dict:
    """Item 4: seeds/s of the sampler with and without 8 float32 features per edge (R-MAT 100k),
    alternating; and the edge rows' bytes per epoch of a 2-part training run."""
    import torch

    import sampler as sampler_bench

    from gnnscale.samplers import NeighborSampler

    _, benchutil, evd = peers_modules()
    torch.set_num_threads(args.threads)
    os.environ["GNNSCALE_WORKER_THREADS"] = str(args.threads)  # the engine workers' kernels (parallel)
    try:
        import numba

        numba.set_num_threads(args.threads)
    except ImportError:
        pass
    spec = sampler_bench.GRAPHS[args.sampling_graph]
    name, indptr, indices, train_idx = sampler_bench.load(spec)
    fanouts = [int(v) for v in args.fanouts.split(",")]
    attr = torch.rand(indices.numel(), args.edge_dim, generator=torch.Generator().manual_seed(0))

    def timed(with_attr: bool, seed: int) -> dict:
        s = NeighborSampler(indptr, indices, fanouts, seed=seed, backend=args.backend,
                            edge_attr=attr if with_attr else None)
        g = torch.Generator().manual_seed(seed)
        s.sample(train_idx[:args.batch_size])  # warm-up (numba's compile / cache load)
        n_seeds = n_batches = n_edges = attr_bytes = 0
        epoch = 0
        t0 = time.perf_counter()
        while n_seeds < args.min_seeds:
            perm = train_idx[torch.randperm(train_idx.numel(), generator=g)]
            for step, seeds in enumerate(torch.split(perm, args.batch_size)):
                mb = s.sample(seeds, epoch=epoch, step=step)
                n_seeds += seeds.numel()
                n_batches += 1
                n_edges += mb.num_sampled_edges
                if with_attr:
                    attr_bytes += sum(b.edge_attr.numel() * b.edge_attr.element_size() for b in mb.blocks)
                if n_seeds >= args.min_seeds:
                    break
            epoch += 1
        dt = time.perf_counter() - t0
        return {"with_edge_attr": with_attr, "time_s": dt, "seeds": n_seeds, "batches": n_batches,
                "seeds_per_s": n_seeds / dt, "mean_sampled_edges": n_edges / n_batches,
                "edge_attr_bytes_per_batch": attr_bytes / n_batches, "backend": s.kernels.name}

    runs = {"with": [], "without": []}
    for r in range(args.repeats):
        order = (True, False) if r % 2 == 0 else (False, True)
        for with_attr in order:
            rec = measured(lambda: timed(with_attr, seed=r), benchutil)
            runs["with" if with_attr else "without"].append(rec)
            print(f"[{name}] repeat {r} {'with' if with_attr else 'without':7s} edge_attr: {rec['seeds_per_s']:9,.0f} "
                  f"seeds/s ({rec['mean_sampled_edges']:,.0f} edges/batch, {rec['backend']}; other processes "
                  f"{other_frac(rec):.1%} CPU)", flush=True)
    med = {k: statistics.median(x["seeds_per_s"] for x in v) for k, v in runs.items()}
    gather = gather_cost(indptr, indices, train_idx, fanouts, attr, args)
    extra_ms = 1e3 * args.batch_size * (1 / med["with"] - 1 / med["without"])
    out = {"provenance": provenance(), "graph": name, "spec": spec, "edge_dim": args.edge_dim, "fanouts_per_hop": fanouts,
           "batch_size": args.batch_size, "min_seeds": args.min_seeds, "threads": args.threads, "runs": runs,
           "median_seeds_per_s": med, "ratio_with_over_without": med["with"] / med["without"],
           "batch_ms": {k: 1e3 * args.batch_size / v for k, v in med.items()}, "extra_ms_per_batch": extra_ms,
           "gather_alone": gather,
           "max_other_cpu_frac": max(other_frac(x) for v in runs.values() for x in v)}
    save_partial(args, {"sampling": out})
    out["training_2_parts"] = edge_bytes_2_parts(args, work, evd)
    print(f"\nsampling with edge attributes ({args.edge_dim} float32 per edge), {name}, fan-outs {args.fanouts}, batch "
          f"{args.batch_size}, {args.threads} threads, median of {args.repeats}")
    print(f"{'without':>12s} {'with':>12s} {'ratio':>6s} {'edge_attr/batch':>16s} {'max other CPU':>14s}")
    print(f"{med['without']:12,.0f} {med['with']:12,.0f} {out['ratio_with_over_without']:6.2f} "
          f"{statistics.median(x['edge_attr_bytes_per_batch'] for x in runs['with']) / 2**20:13.2f} MB "
          f"{out['max_other_cpu_frac']:13.1%}")
    print(f"per batch: {out['batch_ms']['without']:.2f} ms without, {out['batch_ms']['with']:.2f} ms with (+{extra_ms:.2f} "
          f"ms); the rows' gather alone ({gather['rows_per_batch']:,.0f} rows of {4 * args.edge_dim} B, np.take, "
          f"the same batches' positions): {gather['ms_per_batch']:.2f} ms")
    t = out["training_2_parts"]
    print(f"2-part training, one epoch (GATConv, fan-outs {args.fanouts}, batch {args.batch_size} per worker, "
          f"{t['on']['steps']} steps per worker), bytes sent by all ranks:")
    print(f"{'edge features':14s} {'edge_attr':>12s} {'rows (x32 B)':>13s} {'sample_response':>16s} {'all bytes':>12s} "
          f"{'epoch s':>8s}")
    for k in [k for k in ("on", "off") if k in t]:
        r = t[k]
        print(f"{k:14s} {r['edge_attr_bytes']:12,d} {r['edge_attr_bytes'] // (4 * args.edge_dim):13,d} "
              f"{r['sample_response_bytes']:16,d} {r['bytes_sent']:12,d} {r['epoch_seconds']:8.2f}", flush=True)
    return out


def gather_cost(indptr, indices, train_idx, fanouts, attr, args, batches: int = 20) -> dict:
    """The edge rows' gather alone: the CSC positions of ``batches`` batches' sampled edges (drawn
    as the timed sampler draws them), then ``gather_edge_attr`` of each batch's positions, timed."""
    import torch

    from gnnscale.samplers import NeighborSampler
    from gnnscale.samplers.local import gather_edge_attr

    s = NeighborSampler(indptr, indices, fanouts, seed=0, backend=args.backend)
    perm = train_idx[torch.randperm(train_idx.numel(), generator=torch.Generator().manual_seed(0))]
    positions = []
    for step, seeds in enumerate(torch.split(perm, args.batch_size)[:batches]):
        dst, pos = seeds, []
        for hop, f in enumerate(fanouts):
            counts, nbrs, edges = s.kernels.sample(indptr, indices, dst, dst, f, s.keys(0, step, hop), return_edges=True)
            pos.append(edges)
            dst = s.kernels.relabel(dst, nbrs)[0]
        positions.append(torch.cat(pos))
    gather_edge_attr(attr, positions[0])
    t0 = time.perf_counter()
    for p in positions:
        gather_edge_attr(attr, p)
    dt = time.perf_counter() - t0
    return {"batches": len(positions), "rows_per_batch": sum(p.numel() for p in positions) / len(positions),
            "ms_per_batch": 1e3 * dt / len(positions), "table_bytes": attr.numel() * attr.element_size()}


def edge_bytes_2_parts(args, work: Path, evd) -> dict:
    """One epoch of 2-worker training on the R-MAT graph with 8 features per edge, edge features
    on and off: the bytes per category (all ranks)."""
    graphgen, _, _ = peers_modules()
    ga = graphgen.add_graph_args(argparse.ArgumentParser()).parse_args(["--num-nodes", str(args.edge_bytes_nodes)])
    ga.cache_dir = "/tmp/peers/cache"
    name, data = graphgen.load_graph(ga, log=lambda *a: print(*a, file=sys.stderr))
    ddir = work / f"{name}-edge{args.edge_dim}"
    evd.write_dir_dataset(data, str(ddir))
    if not (ddir / "edge_attr.npy").exists():
        rng = np.random.default_rng(0)
        np.save(ddir / "edge_attr.npy", rng.random((int(data["src"].size), args.edge_dim), dtype=np.float32))
    del data
    parts = work / f"{name}-edge{args.edge_dim}-p2"
    if not (parts / "meta.json").exists():
        r = run_gnnscale(["partition", "--dataset", f"dir:{ddir}", "--parts", "2", "--out", str(parts)],
                         capture_output=True, text=True, cwd=REPO)
        if r.returncode:
            raise SystemExit(f"partitioning {ddir} failed:\n{r.stderr[-3000:]}")
    meta = json.loads((parts / "meta.json").read_text())
    out = {"dataset": f"dir:{ddir}", "parts": str(parts), "edge_feature_dim": meta["edge_feature_dim"],
           "edge_cut_fraction": meta.get("edge_cut_fraction")}
    for edges in ("on",) if args.smoke else ("on", "off"):  # --smoke: the run with edge rows only
        m = run_train(str(parts), 2, work / f"edge-bytes-{edges}.json",
                      ["--layer", "gat-pyg", "--edge-features", edges, "--hidden", "64", "--fanouts", args.fanouts,
                       "--batch-size", str(args.batch_size), "--epochs", "1", "--eval-every", "0", "--seed", "0",
                       "--no-verify", "--no-host-features", "--no-host-graph"]  # the exchange itself, as on 2 hosts
                      + (["--max-steps", str(args.edge_bytes_max_steps)] if args.edge_bytes_max_steps else []))
        ep = m["epochs"][-1]
        sent = ep["bytes_sent_by_category"]
        out[edges] = {"edge_attr_bytes": int(sent.get("edge_attr", 0)), "sample_response_bytes": int(sent["sample_response"]),
                      "bytes_sent": int(m["bytes_sent"]), "bytes_sent_by_category": sent, "steps": ep["steps"],
                      "epoch_seconds": ep["epoch_seconds"], "command": m["command"]}
    return out


WHATS = {"humloc": run_humloc, "auc": run_auc, "sampling": run_sampling}


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--what", default="humloc,auc,sampling", help=f"comma-separated among {', '.join(WHATS)}")
    ap.add_argument("--json", default=None, help="write every result here")
    ap.add_argument("--work", default="/tmp/gnnscale_tasks", help="folder for partitions, datasets and run files "
                    "(kept; partitions are reused)")
    h = ap.add_argument_group("humloc (item 1) and auc (item 2)")
    h.add_argument("--protocol", default="full", choices=sorted(PROTOCOLS), help="full batch (default) or mini-batches")
    h.add_argument("--seeds", default="0,1,2", type=ints)
    h.add_argument("--workers", default="1,2,4", type=ints, help="worker counts; the first is the reference")
    h.add_argument("--humloc-metrics", default="micro_f1,roc_auc", type=lambda t: t.split(","))
    h.add_argument("--edge-settings", default="on,off", type=lambda t: t.split(","),
                   help="--edge-features of the runs: on (GATConv with edge_dim), off (the same model without)")
    h.add_argument("--hidden", type=int, default=64)
    h.add_argument("--humloc-epochs", type=int, default=None, help="override the protocol's epochs (for a check)")
    h.add_argument("--auc-workers", default="1,4", type=ints)
    s = ap.add_argument_group("sampling (item 4)")
    s.add_argument("--repeats", type=int, default=5, help="alternating rounds (with and without edge_attr)")
    s.add_argument("--min-seeds", type=int, default=40960, help="seeds per timed run")
    s.add_argument("--fanouts", default="15,10,5")
    s.add_argument("--batch-size", type=int, default=1024)
    s.add_argument("--edge-dim", type=int, default=8)
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--backend", default="auto", help="sampling kernels: auto, numba or torch")
    s.add_argument("--sampling-graph", default="100k", help="the R-MAT graph of benchmarks/sampler.py's GRAPHS")
    s.add_argument("--edge-bytes-nodes", type=int, default=100_000, help="R-MAT nodes of the 2-part training epoch")
    s.add_argument("--edge-bytes-max-steps", type=int, default=0, help="cap on that epoch's steps (0: whole epoch)")
    ap.add_argument("--smoke", action="store_true", help="every item at its smallest: HumLoc 1 epoch, 1 seed, 1 "
                    "worker, edge features on, micro-F1; auc on 1 worker; sampling on a 5,000-node graph, 1 round; "
                    "a 2-part epoch of 2 steps on 5,000 nodes with edge features")
    args = ap.parse_args()
    if args.smoke:
        args.what, args.seeds, args.workers, args.humloc_epochs, args.edge_settings = "humloc,auc,sampling", [0], [1], 1, ["on"]
        args.auc_workers, args.sampling_graph, args.repeats, args.min_seeds = [1], "5k", 1, 1024
        args.batch_size, args.fanouts, args.hidden = 128, "5,5", 16
        args.humloc_metrics, args.edge_bytes_nodes, args.edge_bytes_max_steps = ["micro_f1"], 5000, 2
        smoke_in_process()  # the gnnscale commands in this process: torch imported once, 2-worker runs forked
    what = args.what.split(",")
    unknown = set(what) - set(WHATS)
    if unknown:
        raise SystemExit(f"--what: unknown {sorted(unknown)}; choose among {', '.join(WHATS)}")
    bad = set(args.humloc_metrics) - set(METRICS) - {"ap", "macro_f1"}
    if bad:
        raise SystemExit(f"--humloc-metrics: {sorted(bad)} do not fit HumLoc's multilabel targets")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    results = {}
    args.json_partial = None
    for w in what:
        if args.json:  # what is done so far, and this item's figures while it runs
            args.json_partial = str(Path(args.json).with_suffix(f".{w}.partial.json"))
        results[w] = WHATS[w](args, work)
        write_json(args.json, results)
        if args.json_partial and Path(args.json_partial).exists():
            Path(args.json_partial).unlink()


if __name__ == "__main__":
    main()
