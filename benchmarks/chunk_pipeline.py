"""Chunk pipelining (issue 14, GNNPipe): accuracy, communication and speed of GCNII trained on
the whole graph with its chunks flowing through K layer stages. Prints tables, writes JSON.

- ``accuracy``: GCNII (16 layers, hidden 64) on Cora, CiteSeer and squirrel_filtered: chunk
  pipelining (K = 4 stages, the 4 METIS parts as chunks) against single-process full-graph
  training of the same model, same epochs, 3 seeds; final test accuracy, medians.
- ``comm``: GCNII 16 layers, hidden 64, on a generated graph of --comm-nodes nodes cut into 4
  METIS parts: bytes per epoch of chunk pipelining (K = 4 workers; measured in a real run:
  activations forward, their gradients backward, the encoder copies' gradient all-reduce; its
  chunks are --comm-chunks METIS parts: every node crosses each stage boundary once per pass
  whatever the chunking, which only sets the memory held) against graph-parallel training on
  the 4 parts with 4 workers (computed from the parts' halos: every layer each part receives
  its halo's h^i and sends their gradients back).
- ``speed``: GCNII 16 layers on a generated graph: K = 2 stages on 2 processes of 1 thread
  against one 1-thread process running every layer on the same chunks (epoch = the optimizer
  step's wall time, the slowest stage); each stage's bubble beside (K-1)/(M+K-1). Beside them
  the machine's floor: two whole one-process runs at once (no messages): each is slowed by the
  other (shared memory bandwidth and caches), and half their epoch time is the best that any
  split of the work over 2 processes can reach on these cores.

    python benchmarks/chunk_pipeline.py --json results/chunk_pipeline.json
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the single-process reference

from _common import SHARED, graph_parallel_bytes, write_json  # noqa: E402
from references import full_graph_reference  # noqa: E402

from gnnscale.config import TrainConfig  # noqa: E402
from gnnscale.parallel.chunk_graph import load_chunk_graph  # noqa: E402
from gnnscale.planning.schedules import bubble_fraction  # noqa: E402
from gnnscale.process.launch import launch_local  # noqa: E402
from gnnscale.training.trainer import train_worker  # noqa: E402


def _partition(spec: str, parts: int, out: str, root: str | None = None) -> str:
    from gnnscale.datasets import load_dataset
    from gnnscale.partitioning import partition_graph

    if not os.path.exists(os.path.join(out, "meta.json")):
        partition_graph(load_dataset(spec, root=root), parts, out, method="metis", dataset=spec)
    return out


def _gcnii(**kw) -> TrainConfig:
    base = dict(layer="gcnii", num_layers=16, hidden=64, lr=0.01, dropout=0.6, weight_decay=5e-4, chunks=True,
                timeout=600.0, device="cpu", verify=False, eval_every=0, progress=False)
    base.update(kw)
    return TrainConfig(**base)


def _chunks(parts: str, cfg: TrainConfig, k: int, schedule: str = "1f1b", threads: int | None = 1) -> dict:
    """Rank 0's result of a chunk pipeline of ``k`` stages (the one trainer)."""
    from dataclasses import replace

    cfg = replace(cfg, pipeline_stages=k, schedule=schedule)
    return launch_local(train_worker, k, args=(parts, cfg), threads_per_worker=threads)[0]


def _evaluations(res: dict) -> list[dict]:
    return [dict(epoch=e["epoch"], val=e["val_acc"], test=e["test_acc"]) for e in res["epochs"]
            if e.get("val_acc") is not None]


def best_val_test(history: list[dict]) -> float:
    """Test accuracy at the evaluation with the best validation accuracy (the first, on ties):
    model selection on the validation set, as GCNII's authors report it."""
    return max(history, key=lambda h: (h["val"], -h["epoch"]))["test"]


def accuracy(args, workdir: str) -> dict:
    shared = SHARED
    datasets = [("cora", "planetoid:cora", str(shared / "planetoid" / "raw")),
                ("citeseer", "planetoid:citeseer", str(shared / "planetoid" / "raw")),
                ("squirrel_filtered", f"npz:{shared / 'squirrel' / 'squirrel_filtered.npz'}", None)]
    rows = []
    datasets = [d for d in datasets if d[0] in args.datasets.split(",")]
    every = args.eval_every
    for name, spec, root in datasets:
        one = _partition(spec, 1, os.path.join(workdir, f"{name}-p1"), root)
        K = args.stages
        four = _partition(spec, K, os.path.join(workdir, f"{name}-p{K}"), root)
        ref, pipe, ref_best, pipe_best = [], [], [], []
        for seed in range(args.seeds):
            cfg = _gcnii(epochs=args.epochs, seed=seed, eval_every=every or args.epochs, num_layers=args.layers)
            t0 = time.perf_counter()
            full = full_graph_reference(one, cfg, eval_every=every)
            ref.append(full["accuracy"]["test"])
            t1 = time.perf_counter()
            res = _chunks(four, cfg, K)
            pipe.append(_evaluations(res)[-1]["test"])
            if every:
                ref_best.append(best_val_test(full["history"]))
                pipe_best.append(best_val_test(_evaluations(res)))
            print(f"{name} seed {seed}: full graph {ref[-1]:.4f} ({t1 - t0:.0f} s), chunk pipeline K={K} "
                  f"{pipe[-1]:.4f} ({time.perf_counter() - t1:.0f} s)"
                  + (f"; at the best validation epoch {ref_best[-1]:.4f} and {pipe_best[-1]:.4f}" if every else ""),
                  flush=True)
        row = dict(dataset=name, full_graph=ref, chunk_pipeline=pipe, full_graph_median=statistics.median(ref),
                   chunk_pipeline_median=statistics.median(pipe))
        row["difference_points"] = 100 * (row["chunk_pipeline_median"] - row["full_graph_median"])
        if every:
            row.update(full_graph_best_val=ref_best, chunk_pipeline_best_val=pipe_best,
                       full_graph_best_val_median=statistics.median(ref_best),
                       chunk_pipeline_best_val_median=statistics.median(pipe_best))
            row["best_val_difference_points"] = 100 * (row["chunk_pipeline_best_val_median"]
                                                       - row["full_graph_best_val_median"])
        rows.append(row)
    print(f"\n{'dataset':18} {'full graph':>10} {'chunks K=' + str(args.stages):>10} {'diff (pt)':>9}"
          + ("   at the best validation epoch: full, chunks, diff" if every else ""))
    for r in rows:
        print(f"{r['dataset']:18} {r['full_graph_median']:10.4f} {r['chunk_pipeline_median']:10.4f} "
              f"{r['difference_points']:9.2f}"
              + (f"   {r['full_graph_best_val_median']:.4f} {r['chunk_pipeline_best_val_median']:.4f} "
                 f"{r['best_val_difference_points']:6.2f}" if every else ""))
    return dict(setup=dict(model=f"GCNII {args.layers} layers, hidden 64, alpha 0.1, theta 0.5", epochs=args.epochs,
                           lr=0.01, dropout=0.6, weight_decay=5e-4, seeds=args.seeds, chunks=f"{args.stages} METIS parts",
                           stages=args.stages, schedule="1f1b", eval_every=every,
                           metric="final test accuracy, median over seeds"
                           + ("; and test accuracy at the evaluation with the best validation accuracy" if every
                              else "")), rows=rows)


def comm(args, workdir: str) -> dict:
    spec = f"synthetic?num_nodes={args.comm_nodes}&num_features=128&num_classes=16&avg_degree={args.comm_degree}"
    t0 = time.perf_counter()
    tag = f"comm-n{args.comm_nodes}-d{args.comm_degree}-h{args.comm_homophily}"
    spec += f"&homophily={args.comm_homophily}"
    K = args.stages
    four = _partition(spec, K, os.path.join(workdir, f"{tag}-p{K}"))
    chunks = four if args.comm_chunks == K else _partition(spec, args.comm_chunks,
                                                           os.path.join(workdir, f"{tag}-p{args.comm_chunks}"))
    print(f"partitioned in {time.perf_counter() - t0:.0f} s", flush=True)
    cfg = _gcnii(epochs=args.comm_epochs, hidden=args.comm_hidden, num_layers=args.layers)
    t0 = time.perf_counter()
    res = _chunks(chunks, cfg, K, threads=None)
    wall = time.perf_counter() - t0
    graph = load_chunk_graph(four, verify=False, features=False)
    n = graph.num_nodes
    per = res["epochs"][-1]["pipeline"]
    measured = dict(activation=sum(e["bytes_sent"]["activation"] for e in per),
                    activation_grad=sum(e["bytes_sent"]["activation_grad"] for e in per),
                    encoder_gradient=res["epochs"][-1]["bytes_sent_by_category"].get("encoder_gradient", 0))
    measured["total"] = sum(measured.values())
    base = graph_parallel_bytes(graph, cfg.hidden, cfg.num_layers)
    expected = (K - 1) * n * cfg.hidden * 4  # every node crosses each of the K-1 boundaries once per pass, each way
    out = dict(graph=spec, num_nodes=n, num_edges=int(graph.degree.sum()), parts=K, chunks=args.comm_chunks,
               hidden=cfg.hidden,
               layers=cfg.num_layers, halos=graph.halo_sizes, halo_rows=base["halo_rows"],
               halo_per_node=base["halo_rows"] / n,
               chunk_pipeline_measured=measured, chunk_pipeline_expected_each_way=expected,
               fill_pass_bytes=0,  # every stage fills its tables from the whole graph it holds: no message
               graph_parallel_computed=base, ratio=base["total"] / measured["total"],
               epoch_seconds=[max(st["step_seconds"] for st in e["pipeline"]) for e in res["epochs"]],
               job_seconds=wall, table_mb=[e["table_bytes"] / 1e6 for e in per],
               peak_activation_mb=[e["peak_activation_bytes"] / 1e6 for e in per], max_age=[e["max_age"] for e in per])
    mb = 1e6
    print(f"\n{spec}: {n} nodes, {out['num_edges']} edges, {K} parts, halo rows {base['halo_rows']} "
          f"({out['halo_per_node']:.2f} per node)")
    print(f"chunk pipelining K={K} (measured): {measured['activation'] / mb:.1f} MB forward + "
          f"{measured['activation_grad'] / mb:.1f} MB backward + {measured['encoder_gradient'] / mb:.2f} MB encoder "
          f"gradients = {measured['total'] / mb:.1f} MB per epoch")
    print(f"graph parallel (computed): {base['forward'] / mb:.1f} MB forward + {base['backward'] / mb:.1f} MB backward "
          f"= {base['total'] / mb:.1f} MB per epoch  ->  {out['ratio']:.2f}x fewer bytes")
    return out


def side_by_side(parts: str, cfg) -> list[float]:
    """One rank of the machine's floor for two processes: every rank trains the whole model on
    all chunks alone (a one-stage chunk pipeline, no messages between the ranks), all ranks at
    once after a barrier. Returns this rank's seconds per epoch. Two such ranks on the 2 cores
    show what any 2-process split of the same work can reach here: half their epoch time."""
    from gnnscale.nn.spec import ModelSpec
    from gnnscale.parallel.chunk_pipeline import ChunkStage
    from gnnscale.parallel.stage import rng_key
    from gnnscale.process.comm import Communicator
    from gnnscale.process.groups import init_distributed, shutdown_distributed

    info = init_distributed(timeout=cfg.timeout)
    try:
        graph = load_chunk_graph(parts, verify=False)
        layers = cfg.model_layers()
        model = ModelSpec.of(cfg, graph.feature_dim, graph.num_classes).build(cfg.seed)
        stage = ChunkStage(model, [(0, layers)], 0, [0], Communicator(), graph, staleness=cfg.staleness, lr=cfg.lr,
                           weight_decay=cfg.weight_decay, halo_gradients=cfg.halo_gradients)  # fills its tables
        Communicator(info.rank, info.world_size, timeout=cfg.timeout).barrier()
        return [stage.step(e, [rng_key(cfg.seed, e, 0, c) for c in range(graph.num_chunks)], "1f1b").step_seconds
                for e in range(cfg.epochs)]
    finally:
        shutdown_distributed()


def speed(args, workdir: str) -> dict:
    spec = f"synthetic?num_nodes={args.speed_nodes}&num_features=128&num_classes=16&avg_degree=10"
    parts = _partition(spec, args.speed_chunks, os.path.join(workdir, f"speed-n{args.speed_nodes}-p{args.speed_chunks}"))
    whole = None if args.smoke else _partition(spec, 1, os.path.join(workdir, f"speed-n{args.speed_nodes}-p1"))
    cfg = _gcnii(epochs=args.speed_epochs, hidden=64, num_layers=args.layers)
    m = args.speed_chunks
    # The baseline runs the same chunks; "1 chunk" is plain full-graph training (no tables).
    settings = [("1 process", parts, 1, "1f1b"), ("2 stages 1f1b", parts, 2, "1f1b"),
                ("2 stages gpipe", parts, 2, "gpipe"), ("1 process, 1 chunk", whole, 1, "1f1b")]
    if args.smoke:  # one run each of the baseline and a 2-stage pipeline (and the floor below)
        settings = settings[:2]
    runs: dict = {s[0]: [] for s in settings}
    floor: list[dict] = []
    for rep in range(args.repeats):
        for name, parts, k, sched in settings:
            res = _chunks(parts, cfg, k, sched)
            timed = range(1, cfg.epochs)  # the first epoch loads compiled kernels
            secs = statistics.median(max(st["step_seconds"] for st in res["epochs"][e]["pipeline"]) for e in timed)
            summ = [dict(bubble=sum(res["epochs"][e]["pipeline"][s]["wait_seconds"] for e in timed)
                         / max(sum(res["epochs"][e]["pipeline"][s]["step_seconds"] for e in timed), 1e-12),
                         peak_micro_batches=max(res["epochs"][e]["pipeline"][s]["peak_micro_batches"] for e in timed),
                         peak_activation_bytes=max(res["epochs"][e]["pipeline"][s]["peak_activation_bytes"]
                                                   for e in timed)) for s in range(k)]
            runs[name].append(dict(epoch_seconds=secs, layers=res["stages"],
                                   bubble=[round(s["bubble"], 4) for s in summ],
                                   peak_micro_batches=[s["peak_micro_batches"] for s in summ],
                                   peak_activation_mb=[round(s["peak_activation_bytes"] / 1e6, 1) for s in summ],
                                   layer_costs_ms=[round(1e3 * c, 2) for c in (res["layer_costs"] or [])]))
            print(f"[repeat {rep}] {name}: {secs:.3f} s per epoch, bubble {runs[name][-1]['bubble']}", flush=True)
        res = launch_local(side_by_side, 2, args=(parts, cfg), threads_per_worker=1)
        secs = statistics.median(max(r[e] for r in res) for e in range(1, cfg.epochs))
        floor.append(dict(each_epoch_seconds=secs, epoch_seconds=secs / 2))
        print(f"[repeat {rep}] 2 whole runs side by side: {secs:.3f} s per epoch each, {secs / 2:.3f} s per epoch "
              "of work", flush=True)
    base = statistics.median(r["epoch_seconds"] for r in runs["1 process"])
    rows = []
    print(f"\n{'setting':16} {'epoch s':>8} {'ratio':>6} {'bubble (ideal)':>20} {'held':>6} {'peak MB':>12} layers")
    for name, _, k, sched in settings:
        rec = dict(runs[name][-1], name=name, stages=k, schedule=sched,
                   epoch_seconds_runs=[r["epoch_seconds"] for r in runs[name]])
        rec["epoch_seconds"] = statistics.median(rec["epoch_seconds_runs"])
        rec["ratio_to_one_process"] = rec["epoch_seconds"] / base
        rec["ideal_bubble"] = bubble_fraction(k, m) if k > 1 else 0.0
        rec["bubble_over_ideal_points"] = [round(100 * (b - rec["ideal_bubble"]), 1) for b in rec["bubble"]]
        rows.append(rec)
        bubble = "/".join(f"{b:.0%}" for b in rec["bubble"]) + f" ({rec['ideal_bubble']:.0%})"
        print(f"{name:16} {rec['epoch_seconds']:8.3f} {rec['ratio_to_one_process']:6.2f} {bubble:>20} "
              f"{'/'.join(map(str, rec['peak_micro_batches'])):>6} "
              f"{'/'.join(f'{v:.0f}' for v in rec['peak_activation_mb']):>12} {rec['layers']}")
    each = statistics.median(f["each_epoch_seconds"] for f in floor)
    floor_row = dict(each_epoch_seconds=each, epoch_seconds=each / 2, ratio_to_one_process=each / 2 / base,
                     contention=each / base, runs=floor)
    print(f"{'2 side by side':16} {each / 2:8.3f} {each / 2 / base:6.2f}   (floor: two whole runs at once, "
          f"each {each:.3f} s per epoch = {each / base:.2f}x alone; half of it is the best any split of the work "
          f"over 2 processes can do on these cores)")
    return dict(graph=spec, chunks=m, model=f"GCNII {args.layers} layers, hidden 64", threads_per_worker=1, rows=rows,
                side_by_side=floor_row)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--what", default="speed,accuracy,comm", help="parts to run (comma-separated)")
    ap.add_argument("--epochs", type=int, default=200, help="accuracy: training epochs")
    ap.add_argument("--seeds", type=int, default=3, help="accuracy: seeds per dataset")
    ap.add_argument("--datasets", default="cora,citeseer,squirrel_filtered", help="accuracy: which datasets")
    ap.add_argument("--eval-every", type=int, default=0,
                    help="accuracy: also evaluate every this many epochs and report the test accuracy at the best "
                         "validation accuracy (0: the final weights only)")
    ap.add_argument("--layers", type=int, default=16, help="GCNII's layers in every part (at least --stages)")
    ap.add_argument("--stages", type=int, default=4, help="accuracy and comm: K stages = workers = METIS parts")
    ap.add_argument("--comm-nodes", type=int, default=1_000_000)
    ap.add_argument("--comm-degree", type=int, default=10)
    ap.add_argument("--comm-hidden", type=int, default=64)
    ap.add_argument("--comm-epochs", type=int, default=1)
    ap.add_argument("--comm-homophily", type=float, default=0.8, help="comm: the generator's homophily (halo size)")
    ap.add_argument("--comm-chunks", type=int, default=8,
                    help="comm: chunks of the pipeline (METIS parts; bytes do not depend on it, memory does)")
    ap.add_argument("--speed-nodes", type=int, default=50_000)
    ap.add_argument("--speed-chunks", type=int, default=16, help="speed: chunks = micro-batches M")
    ap.add_argument("--speed-epochs", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2, help="speed: alternating repeats; medians reported")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "gnnscale_chunk_pipeline"))
    ap.add_argument("--smoke", action="store_true",
                    help="every part at its smallest: GCNII 4 layers, K = 2 stages; Cora 1 epoch 1 seed; 3,000-node "
                         "graphs, 1 repeat; speed: 4 chunks, 1 process and 2 stages 1f1b only")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.smoke:
        args.epochs, args.seeds, args.datasets = 1, 1, "cora"
        args.comm_nodes, args.comm_chunks, args.speed_nodes, args.speed_chunks = 3000, 2, 3000, 4
        args.speed_epochs, args.repeats, args.layers, args.stages = 2, 1, 4, 2
        from _common import fork_smoke_workers

        fork_smoke_workers(2)  # the 2-process launches fork from one server
    out: dict = dict(setup=vars(args))
    parts = [p.strip() for p in args.what.split(",") if p.strip()]
    for part in parts:
        if part not in ("speed", "accuracy", "comm"):
            ap.error(f"--what takes speed, accuracy, comm; found {part!r}")
    for part in parts:
        out[part] = {"speed": speed, "accuracy": accuracy, "comm": comm}[part](args, args.workdir)
        write_json(args.json, out)  # after each part: nothing lost if a later one fails


if __name__ == "__main__":
    main()
