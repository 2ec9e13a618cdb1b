"""Model zoo: GAT and GCN with 2 workers against 1 worker, and a 16-layer GCNII (issue 7, item 2).

For Cora and CiteSeer (public splits): ``gnnscale partition`` into 2 parts and into 1 part,
then ``gnnscale train --layer gat|gcn`` on each with seeds 0/1/2 and the same global batch
(32 seeds per optimizer step: 16 per worker with 2 workers, as DDP is meant to be compared); the figure is the test
accuracy at the epoch of best validation accuracy (full-graph layer-wise evaluation), median
over seeds. Then GCNII with 16 layers on Cora with 2 workers: every epoch's loss must stay
finite and the loss must fall.

    python benchmarks/zoo.py --json results/zoo.json
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
from pathlib import Path

from _common import SHARED, gnnscale  # benchmarks/ is the script folder
ROOT = SHARED / "planetoid" / "raw"
COMMON = ["--hidden", "64", "--lr", "0.01", "--weight-decay", "5e-4", "--dropout", "0.5",
          "--fanouts", "10,10", "--eval-fanouts=-1,-1", "--no-progress", "--no-verify"]
LAYERS = {"gcn": [], "gat": ["--layer-kwargs", '{"heads": 4}']}



def parts(dataset: str, p: int, work: Path) -> Path:
    out = work / f"{dataset}-{p}"
    if not (out / "meta.json").exists():
        gnnscale("partition", "--dataset", f"planetoid:{dataset}", "--root", str(ROOT), "--parts", str(p), "--out", str(out))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--global-batch", type=int, default=32,
                    help="seeds per optimizer step over all workers (each of P workers takes global/P), so that "
                    "1 and 2 workers take the same number of steps per epoch")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--gcnii-layers", type=int, default=16)
    ap.add_argument("--gcnii-epochs", type=int, default=30)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    work = Path(tempfile.mkdtemp())
    report = {"epochs": args.epochs, "seeds": seeds, "global_batch": args.global_batch,
              "hyperparameters": " ".join(COMMON), "pairs": {}}
    for dataset in ("cora", "citeseer"):
        for layer, extra in LAYERS.items():
            row = {}
            for p in (2, 1):
                runs = []
                for seed in seeds:
                    m = work / f"{dataset}-{layer}-{p}-{seed}.json"
                    gnnscale("train", "--parts-dir", str(parts(dataset, p, work)), "--layer", layer, *extra,
                             "--batch-size", str(args.global_batch // p), "--epochs", str(args.epochs),
                             "--seed", str(seed), "--metrics", str(m), *COMMON)
                    r = json.loads(m.read_text())
                    runs.append({"seed": seed, "test_acc_at_best_val": r["test_acc_at_best_val"],
                                 "final_test_acc": r["test_acc"]})
                    print(f"  {dataset:9s} {layer} workers={p} seed {seed}: test@best-val {r['test_acc_at_best_val']:.4f}",
                          flush=True)
                row[p] = {"runs": runs, "median": statistics.median(x["test_acc_at_best_val"] for x in runs)}
            row["gap_points"] = 100 * (row[1]["median"] - row[2]["median"])
            report["pairs"][f"{dataset}/{layer}"] = row
    print("\nmodel, graph       2 workers  1 worker  gap (points, target |gap| <= 1.5)")
    for key, row in report["pairs"].items():
        print(f"{key:18s} {row[2]['median']:9.4f} {row[1]['median']:9.4f}  {row['gap_points']:+.2f}")
    L = args.gcnii_layers
    m = work / "gcnii.json"
    gnnscale("train", "--parts-dir", str(parts("cora", 2, work)), "--layer", "gcnii", "--layer-kwargs",
             '{"alpha": 0.1, "theta": 0.5}', "--fanouts", ",".join(["3"] * L), "--eval-fanouts=" + ",".join(["-1"] * L),
             "--epochs", str(args.gcnii_epochs), "--batch-size", "32", "--hidden", "64", "--lr", "0.01",
             "--weight-decay", "5e-4", "--dropout", "0.6", "--metrics", str(m), "--no-progress", "--no-verify")
    r = json.loads(m.read_text())
    losses = [e["loss"] for e in r["epochs"]]
    finite = all(math.isfinite(x) for x in losses)
    report["gcnii"] = {"layers": L, "losses": losses, "all_finite": finite, "first_loss": losses[0],
                       "last_loss": losses[-1], "test_acc_at_best_val": r["test_acc_at_best_val"],
                       "epoch_seconds": r["epoch_seconds"]}
    print(f"\nGCNII, {L} layers, Cora, 2 workers: loss {losses[0]:.3f} -> {losses[-1]:.3f} (all finite: {finite}), "
          f"test@best-val {r['test_acc_at_best_val']:.4f}, {r['epoch_seconds']:.2f} s/epoch")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
