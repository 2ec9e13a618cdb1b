"""Temporal link prediction with a time-aware model beside EdgeBank (docs/temporal.md).

What ``gnnscale train --task temporal_link`` does, from Python (one implementation: the engine's
task, gnnscale.tasks.temporal_task): events ``(src, dst, t)`` split by time (70/15/15); each
training batch of events is sampled in time (every endpoint sees only edges before its event's
time, one tree each), TGAT layers (``--layer tgat``: attention over the earlier in-edges with
their ages encoded) embed both endpoints and a random negative at that time, and the link model
scores the pairs with each pair's own history before t (``--pair-features``: events between the
two before t, whether any, time since the latest). The test events are scored against one
negative (AP, AUC) and against ``--neg`` negatives each (MRR, TGB's one-vs-many, half historical),
beside EdgeBank on the same events and negatives.

    python examples/temporal_link.py                                  # CollegeMsg, one worker
    python examples/temporal_link.py --workers 2                      # data parallel over 2 parts
    python examples/temporal_link.py --dataset temporal-synthetic --leak   # the leak detector

``--leak`` samples with the cut ``<=`` instead of ``<``: the edges at the seed's own time, the
scored event itself included, are in view (pyg#7794's kind of leak); the inflated score is what
such a pipeline would report. ``--time-blind-model``: the layers read no ages (``--edge-features
off``). Set OMP_NUM_THREADS=1 on a shared machine.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import gnnscale

COLLEGEMSG = Path(os.environ.get("GNNSCALE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")) \
    / "collegemsg" / "CollegeMsg.txt"


def dataset(name: str, events: int):
    """A dataset spec or an in-memory temporal graph."""
    if name == "collegemsg":
        return f"events:{COLLEGEMSG}?sorted=true"
    if name == "temporal-synthetic":
        from gnnscale.datasets.temporal import generate_temporal_synthetic

        return generate_temporal_synthetic(num_nodes=max(50, events // 50), num_events=events)
    if name.startswith(("events:", "jodie:", "dir:")):
        return name
    raise SystemExit(f"expected --dataset collegemsg, temporal-synthetic, events:PATH, jodie:PATH or dir:PATH, found "
                     f"{name!r}")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="collegemsg")
    ap.add_argument("--events", type=int, default=20000, help="temporal-synthetic: its number of events")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=400, help="training events per step per worker")
    ap.add_argument("--fanouts", default="10")
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--neg", type=int, default=100, help="negatives per positive for MRR")
    ap.add_argument("--eval-events", type=int, default=1000, help="about this many events of each split scored (0: "
                    "all)")
    ap.add_argument("--strategy", default="last", choices=["uniform", "last"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--leak", action="store_true", help="the cut '<=': edges at the seed's time, the scored event "
                    "itself, in view (the leak detector)")
    ap.add_argument("--time-blind-model", action="store_true", help="the layers read no edge ages")
    ap.add_argument("--no-pair-features", action="store_true", help="the embeddings alone score a pair")
    ap.add_argument("--cache-dir", help="partition cache (default $GNNSCALE_CACHE or ~/.cache/gnnscale)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.epochs < 1:
        ap.error(f"--epochs must be an integer of at least 1, found {a.epochs}")
    result = gnnscale.train(
        dataset(a.dataset, a.events), workers=a.workers, cache_dir=a.cache_dir, task="temporal_link", layer="tgat",
        fanouts=[int(f) for f in a.fanouts.split(",")], hidden=a.hidden, dropout=0.1, lr=a.lr, batch_size=a.batch,
        epochs=a.epochs, eval_every=a.epochs, seed=a.seed, eval_negatives=a.neg, eval_events=a.eval_events,
        temporal_strategy=a.strategy, time_cut="<=" if a.leak else "<", pair_features=not a.no_pair_features,
        edge_features="off" if a.time_blind_model else "auto", progress=False)
    test = result["epochs"][-1]["evaluation"]["metrics"]["test"]
    out = {"dataset": a.dataset, "workers": a.workers, "seed": a.seed, "epochs": a.epochs, "leak": a.leak,
           "time_blind_model": a.time_blind_model, "pair_features": not a.no_pair_features, "strategy": a.strategy,
           "test_events": test["model"]["positives"], "model": test["model"], "edgebank": test["edgebank"],
           "epoch_seconds": result["epoch_seconds"]}
    for who in ("model", "edgebank"):
        r = out[who]
        print(f"{who:9s} test AP {r['ap']:.4f}  AUC {r['auc']:.4f}  MRR {r['mrr']:.4f} ({a.neg} negatives, half "
              "historical)")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
