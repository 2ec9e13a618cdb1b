"""Historical exchange on typed graphs (issue 45 item 6): bytes per epoch by category and test
accuracy, ``--exchange historical`` against ``--exchange exact``, 2 workers, data parallel.

Datasets: ACM (``acm:PATH?split=20``, 3 node types, every type with features) and the
ogbn-mag-shaped ``synthetic-mag?num_nodes=N`` (4 node types, three of them featureless: their
learned embeddings are pulled and pushed by the step hooks, in both modes). Both are cut by
METIS into 2 parts once, in ``--workdir``. Every run uses the same options and seeds but
``--exchange``; layer ``rel:sage``, fan-outs 5,5.

Reported per dataset and mode: the median over epochs after the first of the bytes sent per
epoch by category (the metrics' ``bytes_sent_by_category``: sampling requests and responses,
feature rows, learned-embedding rows and gradients, halo ``embedding`` pushes, gradient
all-reduce ...), their total, the start-up fill (halo tables' embedding and feature bytes, the
held halo features' cache fill), and the test accuracy of each seed and its median. ACM:
the median over ``--seeds`` seeds of historical against exact, in points, and whether it is
within 1 point. Baseline and change run in the same invocation (ratios).

    python benchmarks/typed_exchange.py --json typed_exchange.json          # 5 seeds on ACM
    python benchmarks/typed_exchange.py --smoke --json /tmp/s.json          # seconds: 1 seed, tiny mag

Prints a table and writes JSON (``--json``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ACM = "/work/shared/data/acm"
MODES = ("exact", "historical")


def cut(dataset: str, out: Path) -> Path:
    """``dataset`` cut by METIS into 2 typed parts in ``out`` (reused when already there)."""
    meta = out / "meta.json"
    if meta.exists() and json.loads(meta.read_text()).get("dataset") == dataset:
        return out
    from gnnscale.datasets import load_dataset
    from gnnscale.partitioning import partition_graph

    ds = load_dataset(dataset)
    partition_graph(ds, 2, out, method="metis", dataset=dataset)
    return out


def run(parts: Path, exchange: str, seed: int, epochs: int, batch_size: int, threads: int) -> dict:
    import gnnscale

    t0 = time.perf_counter()
    r = gnnscale.train(parts_dir=str(parts), workers=2, layer="rel:sage", fanouts=(5, 5), batch_size=batch_size,
                       hidden=32, epochs=epochs, eval_every=epochs, verify=False, progress=False, timeout=300.0,
                       device="cpu", lr=0.01, seed=seed, exchange=exchange, threads=threads)
    later = r["epochs"][1:] or r["epochs"]  # the epochs after the first (the first may warm caches)
    cats = sorted({c for e in later for c in e["bytes_sent_by_category"]})
    per_epoch = {c: statistics.median(e["bytes_sent_by_category"].get(c, 0) for e in later) for c in cats}
    ex = r.get("exchange") or {}
    cache = r.get("cache") or {}
    return {"exchange": exchange, "seed": seed, "test_acc": r["test_acc"], "val_acc": r["val_acc"],
            "bytes_per_epoch_by_category": per_epoch, "bytes_per_epoch": sum(per_epoch.values()),
            "fill_embedding_bytes": ex.get("fill_embedding_bytes", 0),
            "fill_feature_bytes": ex.get("fill_feature_bytes", 0),
            "cache_fill_bytes_all_ranks": cache.get("fill_bytes_received_all_ranks", 0),
            "halo_rows_rank0": ex.get("halo_rows"), "embedding_age_max": r["epochs"][-1].get("embedding_age_max"),
            "epoch_seconds_median": statistics.median(e["epoch_seconds"] for e in later),
            "wall_s": time.perf_counter() - t0}


def compare(name: str, parts: Path, seeds: list[int], epochs: int, batch_size: int, threads: int) -> dict:
    runs = {m: [run(parts, m, s, epochs, batch_size, threads) for s in seeds] for m in MODES}
    out = {"dataset": name, "seeds": seeds, "epochs": epochs, "batch_size": batch_size, "runs": runs}
    for m in MODES:
        rs = runs[m]
        cats = sorted({c for r in rs for c in r["bytes_per_epoch_by_category"]})
        out[m] = {"test_acc_median": statistics.median(r["test_acc"] for r in rs),
                  "test_acc": [r["test_acc"] for r in rs],
                  "bytes_per_epoch_by_category": {c: statistics.median(r["bytes_per_epoch_by_category"].get(c, 0)
                                                                       for r in rs) for c in cats},
                  "bytes_per_epoch": statistics.median(r["bytes_per_epoch"] for r in rs),
                  "startup_fill_bytes": statistics.median(r["fill_embedding_bytes"] + r["fill_feature_bytes"]
                                                          + r["cache_fill_bytes_all_ranks"] for r in rs)}
    ex, hi = out["exact"], out["historical"]
    out["bytes_per_epoch_ratio_historical_to_exact"] = hi["bytes_per_epoch"] / max(ex["bytes_per_epoch"], 1)
    out["test_acc_gap_points"] = 100 * (hi["test_acc_median"] - ex["test_acc_median"])
    out["within_1_point"] = abs(out["test_acc_gap_points"]) <= 1.0
    return out


def show(res: dict) -> None:
    print(f"\n{res['dataset']} ({len(res['seeds'])} seed(s), {res['epochs']} epochs, 2 workers)")
    ex, hi = res["exact"]["bytes_per_epoch_by_category"], res["historical"]["bytes_per_epoch_by_category"]
    cats = sorted(set(ex) | set(hi))
    print(f"{'bytes per epoch (all ranks)':30s} {'exact':>12s} {'historical':>12s}")
    for c in cats:
        print(f"  {c:28s} {res['exact']['bytes_per_epoch_by_category'].get(c, 0):12.0f} "
              f"{res['historical']['bytes_per_epoch_by_category'].get(c, 0):12.0f}")
    print(f"  {'total':28s} {res['exact']['bytes_per_epoch']:12.0f} {res['historical']['bytes_per_epoch']:12.0f}"
          f"   ratio {res['bytes_per_epoch_ratio_historical_to_exact']:.3f}")
    print(f"  {'start-up fill':28s} {res['exact']['startup_fill_bytes']:12.0f} "
          f"{res['historical']['startup_fill_bytes']:12.0f}")
    print(f"test accuracy, median: exact {res['exact']['test_acc_median']:.4f} {res['exact']['test_acc']}, "
          f"historical {res['historical']['test_acc_median']:.4f} {res['historical']['test_acc']}; "
          f"gap {res['test_acc_gap_points']:+.2f} points (within 1: {res['within_1_point']})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--acm", default=ACM, help="ACM's folder (default %(default)s)")
    ap.add_argument("--mag-nodes", type=int, default=100_000, help="synthetic-mag's num_nodes (default 100,000)")
    ap.add_argument("--seeds", type=int, default=5, help="ACM seeds (median; default 5)")
    ap.add_argument("--epochs", type=int, default=40, help="ACM epochs (default 40)")
    ap.add_argument("--mag-epochs", type=int, default=3, help="synthetic-mag epochs (1 seed; default 3)")
    ap.add_argument("--threads", type=int, default=1, help="threads per worker (default 1)")
    ap.add_argument("--workdir", default=None, help="where the partitions go (default: a temporary folder)")
    ap.add_argument("--smoke", action="store_true", help="1 ACM seed of 2 epochs, a 3,000-node mag of 2 epochs")
    ap.add_argument("--json", default=None, help="write the figures here")
    a = ap.parse_args()
    if a.smoke:
        a.seeds, a.epochs, a.mag_nodes, a.mag_epochs = 1, 2, 3000, 2
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from _common import fork_smoke_workers

        fork_smoke_workers(2)  # the 4 runs' workers fork from one server
    work = Path(a.workdir or tempfile.mkdtemp(prefix="typed_exchange_"))
    acm = f"acm:{a.acm}?split=20"
    mag = f"synthetic-mag?num_nodes={a.mag_nodes}"
    out = {"smoke": a.smoke, "workers": 2, "layer": "rel:sage", "fanouts": [5, 5],
           "loadavg_1_5_15_at_start": os.getloadavg()}
    res_acm = compare(acm, cut(acm, work / "acm2"), list(range(a.seeds)), a.epochs, 32, a.threads)
    show(res_acm)
    res_mag = compare(mag, cut(mag, work / f"mag{a.mag_nodes}_2"), [0], a.mag_epochs, 1024, a.threads)
    show(res_mag)
    out |= {"acm": res_acm, "synthetic_mag": res_mag, "loadavg_1_5_15_at_end": os.getloadavg()}
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1, default=str))
        print(f"wrote {a.json}", file=sys.stderr)


if __name__ == "__main__":
    main()
