"""A user's whole PyG model in the engine against the built-in layer stack (issue 46, item 4).

``gnnscale.train(model="torch_geometric.nn.models:GraphSAGE")`` (PyG's own model, built as
``GraphSAGE(in_channels=F, hidden_channels=H, out_channels=C, num_layers=L, dropout=p)`` and run on
each sampled subgraph in PyG's layout) against ``gnnscale.train(layer="sage")`` (the engine's own
two SAGE layers): Cora, 2 workers, the same options and seeds; test accuracy per seed, the
medians, and whether they are within 1 point. The partition is cut once into a temporary cache.

    python benchmarks/user_model.py                 # seeds 0-2, 20 epochs (CPU: a few minutes)
    python benchmarks/user_model.py --json out.json
    python benchmarks/user_model.py --smoke         # seconds: one seed, 2 epochs

First run (2 CPU cores shared by 6 processes; 20 epochs, fan-outs 10,10, batch 32, hidden 64, lr
0.01): built-in sage 0.799 / 0.776 / 0.785 (median 0.785), --model GraphSAGE 0.786 / 0.785 / 0.797
(median 0.786).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import SHARED, write_json  # noqa: E402

MODELS = {"built-in sage": {}, "--model GraphSAGE": {"model": "torch_geometric.nn.models:GraphSAGE"}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--smoke", action="store_true", help="one seed, 2 epochs")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    import gnnscale

    seeds = [0] if args.smoke else [int(s) for s in args.seeds.split(",")]
    epochs = 2 if args.smoke else args.epochs
    if args.smoke:
        from _common import fork_smoke_workers

        fork_smoke_workers(2)  # the 2-worker runs fork from one server
    cache = tempfile.mkdtemp(prefix="gnnscale-user-model-")
    options = dict(workers=2, epochs=epochs, fanouts=[10, 10], batch_size=32, hidden=64, lr=0.01, threads=1,
                   verify=False, cache_dir=cache, root=str(SHARED / "planetoid" / "raw"))
    got: dict[str, list[float]] = {}
    for name, extra in MODELS.items():
        for seed in seeds:
            t0 = time.perf_counter()
            r = gnnscale.train("planetoid:cora", seed=seed, **options, **extra)
            got.setdefault(name, []).append(float(r["test_acc"]))
            print(f"{name:20s} seed {seed}: test {r['test_acc']:.4f} val {r['val_acc']:.4f} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    medians = {k: statistics.median(v) for k, v in got.items()}
    gap = medians["--model GraphSAGE"] - medians["built-in sage"]
    for k, v in got.items():
        print(f"{k:20s} median {medians[k]:.4f} ({', '.join(f'{a:.3f}' for a in v)})")
    print(f"--model minus built-in: {100 * gap:+.1f} points ({'within' if abs(gap) <= 0.01 else 'NOT within'} 1 point)")
    write_json(args.json, {"seeds": seeds, "epochs": epochs, "options": {k: v for k, v in options.items()
                                                                         if k not in ("cache_dir", "root")},
                           "test_acc": got, "median": medians, "gap": gap, "within_1_point": abs(gap) <= 0.01})


if __name__ == "__main__":
    main()
