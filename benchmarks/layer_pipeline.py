"""Layer pipeline (issue 14): speed, bubble and held activations of K stages, beside one process
and beside data parallelism, on the same work. Prints a table and writes JSON.

Work: a generated graph (``synthetic``, --nodes nodes, 128 features), one epoch of steps of
M micro-batches of --batch-size seeds, a --layers-deep GraphSAGE of hidden --hidden, fan-outs
--fanout per hop. Every setting trains the same steps (the same seeds, the same draws):

- ``1 process``: one worker, 1 thread, the whole model (K = 1, D = 1), steps of M x
  --batch-size seeds: the baseline;
- ``K stages``: K workers, 1 thread each, the layers split into K stages (1F1B and GPipe),
  steps of M micro-batches of --batch-size seeds;
- ``D = 2``: two data-parallel workers, 1 thread each, the whole model on 2 parts (each
  trains half the steps: its epoch is half the baseline's work per worker).

Per setting: the epoch's seconds (the slowest worker's wall time of the second epoch, sampling
included), its
ratio to the baseline, each stage's bubble (seconds waiting for a neighbour stage / step
seconds) beside the ideal (K-1)/(M+K-1), the peak of held micro-batches and of saved
activation bytes per stage, and the bytes sent between stages (activations forward, their
gradients backward) beside what receiving the blocks instead of re-sampling them would move.

    python benchmarks/layer_pipeline.py --json results/layer_pipeline.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gnnscale.config import TrainConfig  # noqa: E402
from gnnscale.planning.schedules import bubble_fraction  # noqa: E402
from gnnscale.process.launch import launch_local  # noqa: E402
from gnnscale.training.trainer import train_worker  # noqa: E402


def _partition(spec: str, parts: int, out: str) -> str:
    from gnnscale.datasets import load_dataset
    from gnnscale.partitioning import partition_graph

    if not os.path.exists(os.path.join(out, "meta.json")):
        partition_graph(load_dataset(spec), parts, out, method="metis", dataset=spec)
    return out


def _run(parts_dir: str, cfg: TrainConfig, stages: int, workers: int, micro: int, schedule: str) -> dict:
    pipelines = workers // stages
    # The same work in every setting: D pipelines each train 1/D of the steps (their parts' seeds),
    # each step M x batch-size seeds (one batch of them without stages).
    cfg = replace(cfg, max_steps=cfg.max_steps // pipelines)
    if stages > 1:
        cfg = replace(cfg, pipeline_stages=stages, micro_batches=micro, schedule=schedule)
    else:
        cfg = replace(cfg, batch_size=cfg.batch_size * micro)
    res = launch_local(train_worker, workers, args=(parts_dir, cfg), threads_per_worker=1)[0]
    last = res["epochs"][-1]
    per_rank = last["pipeline"] or [dict(bubble=0.0, peak_micro_batches=0, peak_activation_bytes=0, stage=0,
                                         bytes_sent={"activation": 0, "activation_grad": 0}, block_bytes=0)]
    return dict(
        stages=stages, workers=workers, micro_batches=micro, schedule=schedule,
        layers=res["stages"] or [[0, len(cfg.fanouts)]],
        epoch_seconds=last["epoch_seconds"],  # sampling included, slowest rank
        layer_costs_ms=[round(1e3 * c, 2) for c in (res["layer_costs"] or [])],
        steps=last["steps"],
        bubble=[round(p["bubble"], 4) for p in per_rank],
        peak_micro_batches=[p["peak_micro_batches"] for p in per_rank],
        peak_activation_mb=[round(p["peak_activation_bytes"] / 1e6, 2) for p in per_rank],
        activation_mb_forward=sum(p["bytes_sent"]["activation"] for p in per_rank) / 1e6,
        activation_grad_mb_backward=sum(p["bytes_sent"]["activation_grad"] for p in per_rank) / 1e6,
        blocks_mb_if_received=sum(p["block_bytes"] for p in per_rank if p["stage"] > 0) / 1e6,
        final_loss=last["loss"],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--nodes", type=int, default=50000)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--fanout", type=int, default=4, help="neighbors per hop")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--micro-batches", type=int, default=8, help="M")
    ap.add_argument("--stages", default="2", help="K values to run (comma-separated)")
    ap.add_argument("--max-steps", type=int, default=6,
                    help="steps per epoch (2 epochs; the second is timed); D = 2 workers take half each")
    ap.add_argument("--repeats", type=int, default=2, help="alternating repeats; medians reported")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "gnnscale_layer_pipeline"))
    ap.add_argument("--smoke", action="store_true", help="a 3,000-node graph, 2 layers, hidden 16, 2 steps, 1 repeat")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.smoke:
        args.nodes, args.layers, args.hidden, args.batch_size, args.micro_batches = 3000, 2, 16, 32, 2
        args.max_steps, args.repeats = 2, 1
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _common import fork_smoke_workers

        fork_smoke_workers(2)  # the 2-worker launches fork from one server

    spec = f"synthetic?num_nodes={args.nodes}&num_features=128&num_classes=16&avg_degree=15"
    one = _partition(spec, 1, os.path.join(args.workdir, f"n{args.nodes}-p1"))
    two = _partition(spec, 2, os.path.join(args.workdir, f"n{args.nodes}-p2"))
    cfg = TrainConfig(epochs=2, max_steps=args.max_steps, fanouts=(args.fanout,) * args.layers,
                      batch_size=args.batch_size, hidden=args.hidden, lr=0.003, dropout=0.5, seed=0, timeout=300.0,
                      device="cpu", verify=False, eval_every=0, progress=False)  # evaluation is not part of the epoch
    m = args.micro_batches
    settings = [("1 process", one, 1, 1, "1f1b")]
    for k in (int(v) for v in args.stages.split(",")):
        settings += [(f"{k} stages 1f1b", one, k, k, "1f1b"), (f"{k} stages gpipe", one, k, k, "gpipe")]
    settings.append(("D = 2 data parallel", two, 1, 2, "1f1b"))
    runs: dict[str, list] = {name: [] for name, *_ in settings}
    for r in range(args.repeats):
        for name, parts, k, w, sched in settings:
            runs[name].append(_run(parts, cfg, k, w, m, sched))
            print(f"[repeat {r}] {name}: {runs[name][-1]['epoch_seconds']:.2f} s", flush=True)
    base = statistics.median(x["epoch_seconds"] for x in runs["1 process"])
    rows = []
    print(f"\n{'setting':22} {'epoch s':>8} {'ratio':>6} {'bubble (ideal)':>22} {'peak held':>10} {'peak MB':>14} "
          f"{'fwd/bwd MB':>12} {'blocks MB':>9}")
    for name, parts, k, w, sched in settings:
        rec = dict(runs[name][-1])
        rec["epoch_seconds_runs"] = [x["epoch_seconds"] for x in runs[name]]
        rec["epoch_seconds"] = statistics.median(rec["epoch_seconds_runs"])
        rec["ratio_to_one_process"] = rec["epoch_seconds"] / base
        rec["ideal_bubble"] = bubble_fraction(k, m) if k > 1 else 0.0
        rec["name"] = name
        rows.append(rec)
        bubble = "/".join(f"{b:.0%}" for b in rec["bubble"]) + f" ({rec['ideal_bubble']:.0%})"
        held = "/".join(map(str, rec["peak_micro_batches"]))
        peak_mb = "/".join(f"{v:.0f}" for v in rec["peak_activation_mb"])
        traffic = f"{rec['activation_mb_forward']:.1f}/{rec['activation_grad_mb_backward']:.1f}"
        print(f"{name:22} {rec['epoch_seconds']:8.2f} {rec['ratio_to_one_process']:6.2f} {bubble:>22} {held:>10} "
              f"{peak_mb:>14} {traffic:>12} {rec['blocks_mb_if_received']:9.1f}")
    out = dict(setup=dict(vars(args), graph=spec, model=f"GraphSAGE {args.layers} layers, hidden {args.hidden}",
                          threads_per_worker=1), rows=rows)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
