"""A model of many machines (issue 47 item 5): validated on this machine, then papers100M-shaped.

1. A generated graph (``--nodes`` nodes, average degree 29 as ogbn-papers100M, ``--features``
   features (128), ``--train-frac`` training nodes) is cut by METIS into 2 and 4 parts; each trains
   ``--epochs`` epochs of GraphSAGE (fanouts 15,10,5, batch 1024, hidden 128; evaluation and
   host reads off) through the modelled link of ``--net-bandwidth-gbps`` 1 and 10.
2. The model (:mod:`gnnscale.planning.machines`) is calibrated on ONE run (2 parts, 10 Gbit/s:
   its CPU seconds per step, input rows, remote share, sample and gradient bytes, exchanges) and
   predicts the epoch of the four runs; each prediction is set beside the measured epoch (the
   median epoch after the first, which compiles), goal within 20%. A second calibration per part count (its
   10 Gbit/s run predicting its 1 Gbit/s run) checks the network term alone.
3. The calibrated model predicts a papers100M-shaped graph (111,059,956 nodes, 1,207,179
   training nodes, 128 float32 features) at 4, 8, 16, 32 and 64 machines over 10 and 100
   Gbit/s, with the measured cut's remote share (METIS on the generated graph, kappa) and a
   random cut's (kappa 1), beside published figures. The CPU term is this machine's: one worker
   on one shared core (``--cpu-speedup`` scales it); the network term is the link's.

    python benchmarks/scaling_model.py --json results/scaling_model.json
    python benchmarks/scaling_model.py --smoke
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_json  # noqa: E402

from gnnscale.planning.machines import GraphShape, Link, as_dict, measured_from_metrics, predict_epoch  # noqa: E402

PAPERS = GraphShape("ogbn-papers100M-shaped", 111_059_956, 1_207_179, 128, avg_degree=3_231_371_744 / 111_059_956)
PUBLISHED = [  # (system, machines, hardware, seconds per epoch on ogbn-papers100M)
    ("DistDGL", 4, "CPU machines", 12.0),
    ("SALIENT", 16, "GPUs", 2.0),
    ("DistGNN-MB", 32, "CPU nodes", 2.0),
]
TRAIN = {"fanouts": (15, 10, 5), "batch_size": 1024, "hidden": 128, "eval_every": 0, "host_features": False,
         "host_graph": False}


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def measure(args, work: Path) -> tuple[dict, dict]:
    import gnnscale
    from gnnscale.datasets import load_dataset
    from gnnscale.partitioning import partition_graph

    spec = (f"synthetic?num_nodes={args.nodes}&avg_degree=29&num_features={args.features}&num_classes=32"
            f"&train_frac={args.train_frac}&val_frac=0.01")
    data = load_dataset(spec)
    graph = {"dataset": spec, "num_nodes": int(data.num_nodes), "num_edges": int(data.edge_index.shape[1]),
             "train_nodes": int(data.train_mask.sum()), "feature_dim": int(data.x.shape[1])}
    runs = {}
    for parts in args.parts:
        folder = work / f"p{parts}"
        meta = partition_graph(data, parts, folder, dataset=spec)
        graph[f"edge_cut_fraction_{parts}"] = meta["edge_cut_fraction"]
        for bw in args.bandwidths:
            t0 = time.perf_counter()
            m = gnnscale.train(parts_dir=str(folder), workers=parts, epochs=args.epochs, threads=1,
                               net_bandwidth_gbps=bw, **TRAIN)
            runs[(parts, bw)] = m
            rec = m["epochs"][-1]
            print(f"measured {parts} parts, {bw:g} Gbit/s: epoch {rec['epoch_seconds']:.2f} s "
                  f"({rec['steps']} steps; {time.perf_counter() - t0:.0f} s wall)", flush=True)
    return graph, runs


def validate(args, graph: dict, runs: dict) -> dict:
    n_cores = args.cores or cores()

    def run_of(key):
        return measured_from_metrics(runs[key], train_nodes=graph["train_nodes"], feature_dim=graph["feature_dim"],
                                     cores=n_cores, num_nodes=graph["num_nodes"], epoch=None,
                                     avg_degree=graph["num_edges"] / graph["num_nodes"])

    shape = GraphShape("measured", graph["num_nodes"], graph["train_nodes"], graph["feature_dim"])
    base_key = (args.parts[0], max(args.bandwidths))
    base = run_of(base_key)
    rows = []
    for (parts, bw) in runs:
        measured = run_of((parts, bw))
        share = min(1.0, n_cores / parts)
        single = predict_epoch(base, shape, parts, Link(bw), cpu_share=share)
        own = predict_epoch(run_of((parts, max(args.bandwidths))), shape, parts, Link(bw), cpu_share=share)
        rows.append({"parts": parts, "bandwidth_gbps": bw, "measured_epoch_seconds": measured.epoch_seconds,
                     "predicted_from_base": single["epoch_seconds"],
                     "ratio_from_base": single["epoch_seconds"] / measured.epoch_seconds,
                     "predicted_from_own_part_count": own["epoch_seconds"],
                     "ratio_from_own_part_count": own["epoch_seconds"] / measured.epoch_seconds,
                     "predicted_steps": single["steps"], "measured_steps": measured.steps,
                     "predicted_network_seconds_per_step": single["network_seconds_per_step"],
                     "predicted_cpu_seconds_per_step": single["cpu_seconds_per_step"],
                     "measured_remote_share": measured.remote_share, "predicted_remote_share": single["remote_share"],
                     "within_20_percent": abs(single["epoch_seconds"] / measured.epoch_seconds - 1) <= 0.2})
    return {"base_run": {"parts": base_key[0], "bandwidth_gbps": base_key[1], **as_dict(base)}, "cores": n_cores,
            "rows": rows}


def papers_table(args, base) -> list[dict]:
    out = []
    for kappa_name, kappa in (("measured cut", None), ("random cut", 1.0)):
        shape = GraphShape(PAPERS.name, PAPERS.num_nodes, PAPERS.train_nodes, PAPERS.feature_dim, kappa=kappa,
                           avg_degree=PAPERS.avg_degree)
        for bw in (10.0, 100.0):
            for parts in (4, 8, 16, 32, 64):
                p = predict_epoch(base, shape, parts, Link(bw), cpu_speedup=args.cpu_speedup)
                out.append({"cut": kappa_name, "kappa": base.kappa if kappa is None else kappa, "bandwidth_gbps": bw,
                            **{k: p[k] for k in ("parts", "steps", "input_rows_per_step", "remote_share",
                                                 "epoch_seconds", "network_share",
                                                 "cpu_seconds_per_step", "network_seconds_per_step")},
                            "network_seconds_per_epoch": p["steps"] * p["network_seconds_per_step"],
                            "bytes_per_step": p["bytes_per_step"]["total"]})
    return out


def print_all(res: dict) -> None:
    print(f"\nvalidation (model calibrated on {res['validation']['base_run']['parts']} parts at "
          f"{res['validation']['base_run']['bandwidth_gbps']:g} Gbit/s; {res['validation']['cores']} cores here)")
    print(f"{'parts':>5s} {'Gbit/s':>6s} {'measured s':>10s} {'predicted s':>11s} {'ratio':>6s} {'own-P pred':>10s} "
          f"{'ratio':>6s} {'remote share m/p':>17s}")
    for r in res["validation"]["rows"]:
        print(f"{r['parts']:>5d} {r['bandwidth_gbps']:>6g} {r['measured_epoch_seconds']:>10.2f} "
              f"{r['predicted_from_base']:>11.2f} {r['ratio_from_base']:>6.2f} {r['predicted_from_own_part_count']:>10.2f} "
              f"{r['ratio_from_own_part_count']:>6.2f} {r['measured_remote_share']:>8.3f}/{r['predicted_remote_share']:.3f}")
    print("\nogbn-papers100M-shaped (111M nodes, 1.21M training nodes, 128 features; GraphSAGE 15,10,5, batch 1024),"
          " predicted s/epoch (network s/epoch in brackets)")
    rows = res["papers100M"]
    for cut in dict.fromkeys(r["cut"] for r in rows):
        kappa = next(r["kappa"] for r in rows if r["cut"] == cut)
        print(f"  {cut} (kappa {kappa:.3f})")
        print(f"  {'machines':>8s} " + " ".join(f"{f'{bw:g} Gbit/s':>20s}" for bw in (10.0, 100.0)))
        for parts in (4, 8, 16, 32, 64):
            cells = []
            for bw in (10.0, 100.0):
                r = next(r for r in rows if r["cut"] == cut and r["bandwidth_gbps"] == bw and r["parts"] == parts)
                cells.append(f"{r['epoch_seconds']:>9.1f} ({r['network_seconds_per_epoch']:>6.2f})")
            print(f"  {parts:>8d} " + " ".join(f"{c:>20s}" for c in cells))
    print("  published: " + "; ".join(f"{s} {sec:g} s/epoch on {n} {hw}" for s, n, hw, sec in PUBLISHED))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--train-frac", type=float, default=0.2)
    ap.add_argument("--features", type=int, default=128,
                    help="feature width of the measured graph (wider: the link's share of the epoch grows)")
    ap.add_argument("--epochs", type=int, default=4, help="epochs per run (the median one after the first is used)")
    ap.add_argument("--parts", default="2,4")
    ap.add_argument("--bandwidths", default="1,10", help="Gbit/s of the modelled link")
    ap.add_argument("--cpu-speedup", type=float, default=1.0,
                    help="papers100M table: how much faster a machine's CPU work per step is than one core here")
    ap.add_argument("--cores", type=int, default=None,
                    help="cores the measuring workers share (default: this process's; a busy machine has fewer)")
    ap.add_argument("--work", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true", help="3,000 nodes, 2 parts, 1 epoch")
    args = ap.parse_args()
    args.parts = [int(v) for v in args.parts.split(",")]
    args.bandwidths = [float(v) for v in args.bandwidths.split(",")]
    if args.smoke:
        args.nodes, args.parts, args.epochs = 3000, [2], 1
        from _common import fork_smoke_workers

        fork_smoke_workers(2)  # its 2-worker runs fork from one server that imported torch once
    work = Path(args.work or tempfile.mkdtemp(prefix="gnnscale-scaling-"))
    graph, runs = measure(args, work)
    res = {"graph": graph, "train": {k: list(v) if isinstance(v, tuple) else v for k, v in TRAIN.items()}
           | {"epochs": args.epochs}, "validation": validate(args, graph, runs)}
    base = measured_from_metrics(runs[(args.parts[0], max(args.bandwidths))], train_nodes=graph["train_nodes"],
                                 feature_dim=graph["feature_dim"], cores=args.cores or cores(), num_nodes=graph["num_nodes"], epoch=None,
                                 avg_degree=graph["num_edges"] / graph["num_nodes"])
    res["papers100M"] = papers_table(args, base)
    res["published"] = [{"system": s, "machines": n, "hardware": hw, "epoch_seconds": sec} for s, n, hw, sec in PUBLISHED]
    res["cpu_speedup"] = args.cpu_speedup
    print_all(res)
    write_json(args.json, json.loads(json.dumps(res, default=str)))


if __name__ == "__main__":
    main()
