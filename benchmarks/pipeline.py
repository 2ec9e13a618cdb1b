"""Pipelined against sequential epochs, with a modelled network link (issue 5, item 2).

Partitions the products-scale generated graph (2,449,029 nodes, about 62M directed edges,
100 features, 47 classes), then alternates ``gnnscale train`` runs without and with
``--pipeline`` under a modelled 10 Gbit/s link (every exchange held for latency + bytes /
bandwidth, reported as modelled). Each run trains 2 epochs of ``--max-steps`` steps per
worker and the second epoch is timed (the first loads the kernels and warms the caches).
Prints epoch seconds, the stage breakdown and the ratio; writes JSON.

    python benchmarks/pipeline.py --json results/pipeline.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import gnnscale, run_gnnscale, smoke_in_process  # noqa: E402

PRODUCTS = "synthetic?num_nodes=2449029&avg_degree=25.3&num_classes=47&num_features=100"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default=PRODUCTS)
    ap.add_argument("--parts", type=int, default=2)
    ap.add_argument("--max-steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--bandwidth-gbps", type=float, default=10.0)
    ap.add_argument("--latency-ms", type=float, default=0.05)
    ap.add_argument("--fanouts", default="15,10,5")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--workdir", default=None, help="keep the partition here (reused when present)")
    ap.add_argument("--smoke", action="store_true", help="a 3,000-node graph, 2 steps, 1 repeat (checks that it runs)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.smoke:
        args.dataset = "synthetic?num_nodes=3000&avg_degree=8&num_features=16"
        args.max_steps, args.repeats, args.fanouts, args.batch_size, args.hidden = 2, 1, "5,5", 64, 16
        smoke_in_process()  # the CLI's runs in this process (torch imported once), 2-worker launches forked
    tmp = Path(args.workdir or tempfile.mkdtemp())
    pdir = tmp / f"parts{args.parts}"
    if not (pdir / "meta.json").exists():
        gnnscale("partition", "--dataset", args.dataset, "--parts", str(args.parts), "--out", str(pdir))
    runs = {"sequential": [], "pipelined": []}
    for r in range(args.repeats):
        for mode, flag in (("sequential", "--no-pipeline"), ("pipelined", "--pipeline")):
            m = tmp / f"{mode}-{r}.json"
            cmd = ["train", "--parts-dir", str(pdir), "--epochs", "2",
                   "--max-steps", str(args.max_steps), "--eval-every", "0", "--fanouts", args.fanouts,
                   "--batch-size", str(args.batch_size), "--hidden", str(args.hidden), "--seed", str(r),
                   "--net-bandwidth-gbps", str(args.bandwidth_gbps), "--net-latency-ms", str(args.latency_ms),
                   flag, "--metrics", str(m), "--no-progress", "--no-verify",
                   "--no-host-features", "--no-host-graph"]  # every remote row over the modelled link
            proc = run_gnnscale(cmd, capture_output=True, text=True)  # r is the repeat
            if proc.returncode:
                raise SystemExit(f"gnnscale {' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
            e = json.loads(m.read_text())["epochs"][-1]
            rec = {"epoch_seconds": e["epoch_seconds"], "stages_max_over_ranks": e["stage_seconds_max_over_ranks"],
                   "modelled_network_seconds_all_ranks": e["modelled_network_seconds"],
                   "bytes_received": e["bytes_received"], "steps": e["steps"], "loss": e["loss"]}
            runs[mode].append(rec)
            st = rec["stages_max_over_ranks"]
            print(f"run {r} {mode:10s} epoch {rec['epoch_seconds']:6.2f} s | sample {st['sample']:.2f} fetch "
                  f"{st['fetch']:.2f} compute {st['compute']:.2f} wait {st['wait']:.2f} grad-sync {st['grad_sync']:.2f} | "
                  f"{rec['bytes_received'] / 1e6:.0f} MB, {rec['modelled_network_seconds_all_ranks']:.2f} s modelled (all ranks)",
                  flush=True)
    seq = statistics.median(x["epoch_seconds"] for x in runs["sequential"])
    pipe = statistics.median(x["epoch_seconds"] for x in runs["pipelined"])
    print(f"\nmedian epoch: sequential {seq:.2f} s, pipelined {pipe:.2f} s, ratio {pipe / seq:.2f} "
          f"(target <= 0.75); modelled link {args.bandwidth_gbps:g} Gbit/s, {args.latency_ms:g} ms; "
          f"{args.parts} workers, {args.max_steps} steps per epoch per worker")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"args": vars(args), "runs": runs, "median_sequential_s": seq,
                                               "median_pipelined_s": pipe, "ratio": pipe / seq}, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
