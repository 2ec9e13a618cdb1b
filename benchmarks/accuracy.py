"""Accuracy of distributed training against the same command with 1 worker (issue 2, item 2).

For each dataset: ``gnnscale partition`` into P parts and into 1 part, then ``gnnscale train``
on each with the same hyperparameters and seeds; prints a table and writes JSON with every
run's figures, the medians over seeds and the gap in points.

    python benchmarks/accuracy.py --json results/accuracy.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from _common import SHARED, gnnscale, smoke_in_process  # benchmarks/ is the script folder

COMMON = ["--batch-size", "32", "--hidden", "128", "--lr", "0.01", "--weight-decay", "5e-4",
          "--dropout", "0.5", "--fanouts", "10,10", "--eval-fanouts=-1,-1", "--no-progress"]

CASES = [
    {"name": "cora", "dataset": "planetoid:cora", "root": SHARED / "planetoid" / "raw", "parts": 2, "target": 0.77},
    {"name": "citeseer", "dataset": "planetoid:citeseer", "root": SHARED / "planetoid" / "raw", "parts": 4, "target": 0.66},
    {"name": "squirrel_filtered", "dataset": f"npz:{SHARED / 'squirrel' / 'squirrel_filtered.npz'}?split=0", "root": None,
     "parts": 2, "target": None},
]



def run_case(case: dict, seeds: list[int], work: Path) -> dict:
    out = {"dataset": case["dataset"], "parts": case["parts"], "runs": {}}
    for parts in (case["parts"], 1):
        pdir = work / f"{case['name']}-{parts}"
        cmd = ["partition", "--dataset", case["dataset"], "--parts", str(parts), "--out", str(pdir)]
        if case["root"]:
            cmd += ["--root", str(case["root"])]
        gnnscale(*cmd)
        runs = []
        for seed in seeds:
            mfile = work / f"{case['name']}-{parts}-{seed}.json"
            gnnscale("train", "--parts-dir", str(pdir), "--seed", str(seed), "--metrics", str(mfile), *COMMON)
            m = json.loads(mfile.read_text())
            runs.append({k: m[k] for k in ("seed", "test_acc", "test_acc_at_best_val", "best_val_acc", "epoch_seconds",
                                           "bytes_sent", "bytes_received") if k in m} | {"seed": seed})
            print(f"  {case['name']:18s} parts={parts} seed={seed} test@best-val={m['test_acc_at_best_val']:.4f} "
                  f"final-test={m['test_acc']:.4f} {m['epoch_seconds']:.2f}s/epoch", flush=True)
        out["runs"][parts] = runs
    med = {p: statistics.median(r["test_acc_at_best_val"] for r in runs) for p, runs in out["runs"].items()}
    med_final = {p: statistics.median(r["test_acc"] for r in runs) for p, runs in out["runs"].items()}
    out["median_test_acc"] = med
    out["median_final_test_acc"] = med_final
    out["gap_points"] = 100 * (med[1] - med[case["parts"]])
    out["target"] = case["target"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", default=None, help="write results here")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default: 0,1,2)")
    ap.add_argument("--epochs", type=int, default=30, help="training epochs (default: 30)")
    ap.add_argument("--cases", default=",".join(c["name"] for c in CASES), help="subset of cases to run")
    ap.add_argument("--smoke", action="store_true", help="Cora only, 1 seed, 1 epoch (checks that it runs)")
    args = ap.parse_args()
    if args.smoke:
        args.cases, args.seeds, args.epochs = "cora", "0", 1
        smoke_in_process()  # the partitions and runs in this process: torch imported once
    seeds = [int(s) for s in args.seeds.split(",")]
    COMMON[:0] = ["--epochs", str(args.epochs)]
    wanted = set(args.cases.split(","))
    results = {"hyperparameters": " ".join(COMMON), "seeds": seeds, "cases": []}
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            if case["name"] in wanted:
                results["cases"].append(run_case(case, seeds, Path(tmp)))
    print("\ndataset             parts  median test (P parts)  median test (1 part)  gap (points)  target")
    for c in results["cases"]:
        p = c["parts"]
        tgt = f">= {c['target']:.2f}" if c["target"] else "reported"
        print(f"{c['dataset'][:18]:18s}  {p:5d}  {c['median_test_acc'][p]:21.4f}  {c['median_test_acc'][1]:20.4f}  "
              f"{c['gap_points']:12.2f}  {tgt}")
    print(f"hyperparameters: {results['hyperparameters']}; test accuracy at the epoch of best validation accuracy")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
