"""Model zoo: GAT and GCN with 2 workers against 1 worker, and a 16-layer GCNII (issue 7, item 2).

For Cora and CiteSeer (public splits): ``gnnscale partition`` into 2 parts and into 1 part,
then ``gnnscale train --layer gat|gcn`` on each with seeds 0/1/2; the figure is the test
accuracy at the epoch of best validation accuracy (full-graph layer-wise evaluation), median
over seeds. Two protocols, both with sampled neighborhoods (fanouts 10,10):

- ``planetoid``: the standard protocol of these datasets (PyG's ``examples/gat.py`` and
  ``gcn.py``): every step takes the whole training set (each worker its own part of it, so
  1 and 2 workers take the same optimizer steps), 200 epochs; GAT with 8 heads of 8 features,
  dropout 0.6 on inputs and attention, lr 0.005; GCN with 16 hidden features, dropout 0.5,
  lr 0.01; weight decay 5e-4.
- ``minibatch``: a global batch of 32 seeds per optimizer step (16 per worker with 2
  workers), 50 epochs, hidden 64, lr 0.01, weight decay 5e-4, dropout 0.5, GAT with 4 heads.
  With 120-140 training nodes this is 4-5 steps per epoch; the model overfits within a few
  epochs and the test accuracy swings by about 2 points from epoch to epoch, so the
  best-validation pick is noisy.

Then GCNII with 16 layers on Cora with 2 workers: every epoch's loss must stay finite and the
loss must fall.

    python benchmarks/zoo.py --json results/zoo.json
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
from pathlib import Path

from _common import SHARED, gnnscale, smoke_in_process  # benchmarks/ is the script folder
ROOT = SHARED / "planetoid" / "raw"
SAMPLING = ["--fanouts", "10,10", "--eval-fanouts=-1,-1", "--no-progress", "--no-verify", "--weight-decay", "5e-4"]
PROTOCOLS = {
    "planetoid": {
        "epochs": 200,
        "global_batch": None,  # the whole training set per step
        "layers": {
            "gcn": ["--hidden", "16", "--dropout", "0.5", "--lr", "0.01"],
            "gat": ["--hidden", "64", "--dropout", "0.6", "--lr", "0.005",
                    "--layer-kwargs", '{"heads": 8, "dropout": 0.6}'],
        },
    },
    "minibatch": {
        "epochs": 50,
        "global_batch": 32,
        "layers": {
            "gcn": ["--hidden", "64", "--dropout", "0.5", "--lr", "0.01"],
            "gat": ["--hidden", "64", "--dropout", "0.5", "--lr", "0.01", "--layer-kwargs", '{"heads": 4}'],
        },
    },
}


def parts(dataset: str, p: int, work: Path) -> Path:
    out = work / f"{dataset}-{p}"
    if not (out / "meta.json").exists():
        gnnscale("partition", "--dataset", f"planetoid:{dataset}", "--root", str(ROOT), "--parts", str(p), "--out", str(out))
    return out


def compare(protocol: str, seeds: list[int], work: Path, epochs: int | None = None,
            datasets: tuple[str, ...] = ("cora", "citeseer"), models: tuple[str, ...] = ("gcn", "gat")) -> dict:
    spec = dict(PROTOCOLS[protocol], epochs=epochs or PROTOCOLS[protocol]["epochs"])
    spec["layers"] = {k: v for k, v in spec["layers"].items() if k in models}
    out = {"epochs": spec["epochs"], "global_batch": spec["global_batch"] or "all training nodes",
           "hyperparameters": {k: " ".join(SAMPLING + v) for k, v in spec["layers"].items()}, "pairs": {}}
    for dataset in datasets:
        for layer, extra in spec["layers"].items():
            row = {}
            for p in (2, 1):
                batch = spec["global_batch"] // p if spec["global_batch"] else 1 << 20
                runs = []
                for seed in seeds:
                    m = work / f"{protocol}-{dataset}-{layer}-{p}-{seed}.json"
                    gnnscale("train", "--parts-dir", str(parts(dataset, p, work)), "--layer", layer, *extra,
                             "--batch-size", str(batch), "--epochs", str(spec["epochs"]),
                             "--seed", str(seed), "--metrics", str(m), *SAMPLING)
                    r = json.loads(m.read_text())
                    runs.append({"seed": seed, "test_acc_at_best_val": r["test_acc_at_best_val"],
                                 "best_val_acc": r["best_val_acc"], "final_test_acc": r["test_acc"]})
                    print(f"  {protocol} {dataset:9s} {layer} workers={p} seed {seed}: test@best-val "
                          f"{r['test_acc_at_best_val']:.4f} (final {r['test_acc']:.4f})", flush=True)
                row[p] = {"runs": runs, "median": statistics.median(x["test_acc_at_best_val"] for x in runs)}
            row["gap_points"] = 100 * (row[1]["median"] - row[2]["median"])
            out["pairs"][f"{dataset}/{layer}"] = row
    print(f"\n{protocol}: model, graph   2 workers  1 worker  gap (points, 1 worker - 2 workers; target |gap| <= 1.5)")
    for key, row in out["pairs"].items():
        print(f"{key:18s} {row[2]['median']:9.4f} {row[1]['median']:9.4f}  {row['gap_points']:+.2f}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--protocols", default="planetoid,minibatch", help="comma-separated: planetoid, minibatch")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--models", default="gcn,gat", help="comma-separated: gcn, gat")
    ap.add_argument("--gcnii-layers", type=int, default=16)
    ap.add_argument("--gcnii-epochs", type=int, default=30)
    ap.add_argument("--epochs", type=int, default=None, help="epochs of the comparisons (default: the protocol's)")
    ap.add_argument("--smoke", action="store_true",
                    help="the minibatch protocol on Cora, GAT only, 1 seed, 1 epoch; GCNII 4 layers, 1 epoch")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    datasets: tuple[str, ...] = ("cora", "citeseer")
    if args.smoke:
        args.protocols, args.seeds, args.epochs, args.gcnii_layers, args.gcnii_epochs = "minibatch", "0", 1, 4, 1
        args.models = "gat"
        datasets = ("cora",)
        smoke_in_process()  # gnnscale() in this process: torch imported once, 2-worker launches forked
    if set(args.models.split(",")) - {"gcn", "gat"}:
        ap.error(f"--models: expected among gcn, gat; found {args.models}")
    seeds = [int(s) for s in args.seeds.split(",")]
    work = Path(tempfile.mkdtemp())
    report = {"seeds": seeds, "protocols": {}}
    for protocol in args.protocols.split(","):
        report["protocols"][protocol] = compare(protocol, seeds, work, args.epochs, datasets,
                                                tuple(args.models.split(",")))
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
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
