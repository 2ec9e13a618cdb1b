"""Feature rows stored at lower precision (issue 47 item 4): accuracy and bytes fetched.

For each graph the same cut is written three times (``--feature-dtype`` float32, float16,
bfloat16; the assignment is the same, only ``x.npy`` differs) and trained on 2 workers with host
reads off (every remote row crosses the communicator), seeds 0..S-1. Per graph and dtype: the
median test accuracy at the best validation epoch, and the feature bytes fetched in the last
epoch (the ``feature`` category, all ranks), with the ratios to float32 from the same run.

Graphs: Cora with row-normalized features (``planetoid:cora?normalize=row``: real values that
float16 and bfloat16 round; Cora's raw 0/1 features are exact in both) and a synthetic graph
shaped like ogbn-products per node (average degree 25, 100 features, 47 classes, 8% training
nodes) at ``--synthetic-nodes`` nodes (default 200,000: the 2.45M-node graph takes hours per run
on this machine's two shared cores).

    python benchmarks/feature_dtype.py --json results/feature_dtype.json
    python benchmarks/feature_dtype.py --smoke
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

DTYPES = ("float32", "float16", "bfloat16")


def graphs(args) -> list[tuple[str, str, dict]]:
    """(label, dataset spec, training options) per graph (``--smoke``: Cora alone)."""
    cora = ("cora-normalized", "planetoid:cora?normalize=row",
            {"epochs": args.epochs, "fanouts": (10, 10), "batch_size": 64, "hidden": 64, "lr": 0.01})
    n = args.synthetic_nodes
    synth = (f"synthetic-products-shape-{n}",
             f"synthetic?num_nodes={n}&avg_degree=25&num_features=100&num_classes=47&train_frac=0.08&val_frac=0.02",
             {"epochs": args.synthetic_epochs, "fanouts": (10, 5), "batch_size": 1024, "hidden": 128})
    return [g for g in ([cora] if args.smoke else [cora, synth]) if g[0].split("-")[0] in args.graphs]


def run(args) -> dict:
    import gnnscale
    from gnnscale.datasets import load_dataset
    from gnnscale.partitioning import assign_parts
    from gnnscale.partitioning.format import write_partitions

    work = Path(args.work or tempfile.mkdtemp(prefix="gnnscale-fdtype-"))
    out: dict = {"graphs": {}, "seeds": args.seeds, "workers": 2}
    for label, spec, opts in graphs(args):
        data = load_dataset(spec, root=str(SHARED / "planetoid"))
        parts = assign_parts(data, 2, method="metis", seed=0)
        rows = {}
        for dtype in DTYPES[:2] if args.smoke else DTYPES:
            folder = work / f"{label}-{dtype}"
            meta = write_partitions(data, parts, folder, method="metis", dataset=spec, feature_dtype=dtype)
            x_bytes = sum((folder / f"part{p}" / "x.npy").stat().st_size for p in range(2))
            accs, fetched = [], []
            for seed in range(args.seeds):
                t0 = time.perf_counter()
                m = gnnscale.train(parts_dir=str(folder), workers=2, seed=seed, host_features=False, host_graph=False,
                                   eval_every=1, threads=1, **opts)
                accs.append(float(m["test_acc_at_best_val"]))
                fetched.append(int(m["epochs"][-1]["bytes_received_by_category"].get("feature", 0)))
                print(f"{label} {dtype} seed {seed}: test {accs[-1]:.4f}, feature bytes {fetched[-1]:,} "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
            rows[dtype] = {"test_acc": accs, "median_test_acc": statistics.median(accs),
                           "feature_bytes_last_epoch": fetched, "x_npy_bytes": x_bytes,
                           "feature_dtype": meta["feature_dtype"]}
        base = rows["float32"]
        for dtype in rows:
            r = rows[dtype]
            r["bytes_ratio_to_float32"] = [a / b if b else None for a, b in
                                           zip(r["feature_bytes_last_epoch"], base["feature_bytes_last_epoch"])]
            r["disk_ratio_to_float32"] = r["x_npy_bytes"] / base["x_npy_bytes"]
            r["median_acc_points_vs_float32"] = 100 * (r["median_test_acc"] - base["median_test_acc"])
        out["graphs"][label] = {"dataset": spec, "num_nodes": int(data.num_nodes),
                                "num_edges": int(data.edge_index.shape[1]), "train": opts, "dtypes": rows}
    return out


def table(res: dict) -> str:
    lines = [f"{'graph':<34s} {'dtype':<9s} {'median test':>11s} {'vs f32 (pt)':>11s} {'feat. bytes/epoch':>17s} "
             f"{'ratio':>6s} {'x.npy MB':>9s}"]
    for label, g in res["graphs"].items():
        for dtype, r in g["dtypes"].items():
            ratio = r["bytes_ratio_to_float32"][0]
            lines.append(f"{label:<34s} {dtype:<9s} {r['median_test_acc']:>11.4f} "
                         f"{r['median_acc_points_vs_float32']:>+11.2f} {r['feature_bytes_last_epoch'][0]:>17,d} "
                         f"{ratio if ratio is not None else float('nan'):>6.3f} {r['x_npy_bytes'] / 1e6:>9.2f}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=30, help="Cora's epochs")
    ap.add_argument("--synthetic-nodes", type=int, default=200_000)
    ap.add_argument("--synthetic-epochs", type=int, default=5)
    ap.add_argument("--graphs", default="cora,synthetic", help="which graphs, comma-separated: cora, synthetic")
    ap.add_argument("--work", default=None, help="folder for the partitions (default: a temporary one)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true", help="Cora only, 1 seed, 1 epoch, float32 and float16")
    args = ap.parse_args()
    args.graphs = args.graphs.split(",")
    if args.smoke:
        args.seeds, args.epochs = 1, 1
        from _common import fork_smoke_workers

        fork_smoke_workers(2)  # the 2-worker runs fork from one server
    res = run(args)
    print(table(res))
    write_json(args.json, res)


if __name__ == "__main__":
    main()
