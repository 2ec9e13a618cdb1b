"""Cross-partition embedding exchange: accuracy and bytes of exact / historical / local (issue 6).

Part 1 (accuracy): Cora, CiteSeer, squirrel_filtered (split 0) and the generated default graph,
4 parts each (METIS), GraphSAGE with 2 and 3 layers (hidden 128, fanouts 10 per layer,
dropout 0.5, weight decay 5e-4), modes ``exact``, ``historical`` and ``local``, seeds 0/1/2;
the figure is the test accuracy at the epoch of best validation accuracy (full-graph
layer-wise evaluation for every mode), median over seeds. Epochs, batch and lr per graph are
in ``GRAPHS``.

Part 2 (bytes): the products-scale generated graph (2,449,029 nodes, 100 features), 4 parts,
fanouts 15,10,5, batch 1024, hidden 256: bytes of features, sampling and embeddings per
training step in each mode (gradients are the same in every mode and not counted), measured
over the second of two runs of ``--max-steps`` steps (or, with ``--full-epoch``, over the
second of two whole epochs for ``historical``) and scaled to the epoch's step count; and the
sampling rounds per batch. ``historical`` runs at staleness bound S (default: one epoch's steps, the staleness of
GNNAutoScale's histories), with 16-bit embeddings, holding its halo's input features by
default. Its one-time costs (the table fill by layer-wise inference and the halo features) are
reported apart. A row is pushed at most once per P = S // 2 steps, so a window shorter than P
under-counts the pushes of a long run: the per-epoch ``bound`` adds, instead of the window's
pushes, the most they can move, ceil(steps / P) pushes of every boundary row of every
hidden layer (sized by the fill's exchange, plus the keys). The bytes part turns host reads off
(``--no-host-features --no-host-graph``): with them on, as by default, the workers of one host
read each other's parts from disk, and exact exchange would move no bytes between them at all.

    python benchmarks/exchange.py --json results/exchange.json
    python benchmarks/exchange.py --part accuracy --graphs cora --layers 2
    python benchmarks/exchange.py --smoke      # Cora 1 epoch and a 3,000-node graph, 2 parts: a minute
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from _common import SHARED, gnnscale, smoke_in_process  # benchmarks/ is the script folder
MODES = ["exact", "historical", "local"]
DATA_CATEGORIES = ("sample_request", "sample_response", "feature_request", "feature", "embedding")
HIDDEN = 256  # the bytes part's hidden size
PRODUCTS = "synthetic?num_nodes=2449029&avg_degree=25.3&num_classes=47&num_features=100"

# Per graph: epochs, seeds per step per worker (None: the worker's whole training set), lr.
# Cora and CiteSeer follow the standard Planetoid protocol (the whole training set per step);
# on Squirrel, lr 0.01 peaked validation at epoch 2-3 and the best-validation pick was noise,
# so it trains at lr 0.001, where validation plateaus over epochs 7-20.
GRAPHS = {
    "cora": dict(dataset="planetoid:cora", root=SHARED / "planetoid" / "raw", epochs=100, batch=None, lr=0.01),
    "citeseer": dict(dataset="planetoid:citeseer", root=SHARED / "planetoid" / "raw", epochs=100, batch=None,
                     lr=0.01),
    "squirrel_filtered": dict(dataset=f"npz:{SHARED / 'squirrel' / 'squirrel_filtered.npz'}?split=0", root=None,
                              epochs=30, batch=64, lr=0.001),
    "generated": dict(dataset="synthetic", root=None, epochs=10, batch=256, lr=0.01),
}
SMOKE_BYTES_DATASET = "synthetic?num_nodes=3000&avg_degree=8&num_features=16"


def partition(spec: dict, parts: int, out: Path) -> None:
    if (out / "meta.json").exists():
        return
    cmd = ["partition", "--dataset", spec["dataset"], "--parts", str(parts), "--out", str(out)]
    if spec.get("root"):
        cmd += ["--root", str(spec["root"])]
    gnnscale(*cmd)


def accuracy(args, work: Path) -> dict:
    out = {}
    for name in args.graphs.split(","):
        spec = GRAPHS[name]
        pdir = work / f"{name}-{args.parts}"
        partition(spec, args.parts, pdir)
        for layers in [int(x) for x in args.layers.split(",")]:
            fan = ",".join(["10"] * layers)
            row = {}
            for mode in args.modes.split(","):
                runs = []
                for seed in [int(s) for s in args.seeds.split(",")]:
                    m = work / f"{name}-{layers}-{mode}-{seed}.json"
                    if not (args.reuse and m.exists()):
                        gnnscale("train", "--parts-dir", str(pdir), "--exchange", mode, "--seed", str(seed),
                                 "--epochs", str(args.epochs or spec["epochs"]),
                                 "--batch-size", str(spec["batch"] or 1 << 20),
                                 "--hidden", "128", "--lr", str(spec["lr"]), "--weight-decay", "5e-4",
                                 "--dropout", "0.5", "--fanouts", fan,
                                 "--eval-fanouts=" + ",".join(["-1"] * layers), "--staleness", str(args.staleness),
                                 "--metrics", str(m), "--no-progress", "--no-verify")
                    r = json.loads(m.read_text())
                    runs.append({"seed": seed, "test_acc_at_best_val": r["test_acc_at_best_val"],
                                 "final_test_acc": r["test_acc"], "epoch_seconds": r["epoch_seconds"],
                                 "embedding_age_max": max((e["embedding_age_max"] or 0) for e in r["epochs"])})
                    print(f"  {name:18s} L={layers} {mode:10s} seed {seed}: test@best-val "
                          f"{r['test_acc_at_best_val']:.4f} ({r['epoch_seconds']:.2f} s/epoch)", flush=True)
                row[mode] = {"runs": runs, "median": statistics.median(x["test_acc_at_best_val"] for x in runs)}
            row["historical_minus_exact_points"] = (100 * (row["historical"]["median"] - row["exact"]["median"])
                                                    if "historical" in row and "exact" in row else None)
            out[f"{name}/L{layers}"] = row
    print("\ngraph, layers            exact   historical   local   historical - exact (points; target |.| <= 1.0)")
    def cell(row: dict, mode: str, width: int) -> str:  # the mode's median, or '-' where it did not run
        return f"{row[mode]['median']:{width}.4f}" if mode in row else "-".rjust(width)

    for key, row in out.items():
        diff = row["historical_minus_exact_points"]
        print(f"{key:22s} {cell(row, 'exact', 7)} {cell(row, 'historical', 12)} {cell(row, 'local', 7)}   "
              + (f"{diff:+.2f}" if diff is not None else "-"))
    return out


def _staleness(text: str, steps_per_epoch: int) -> int:
    """A bound from the command line: an integer number of steps, or 'epoch' (one epoch's steps)."""
    return steps_per_epoch if text == "epoch" else int(text)


def traffic(args, work: Path) -> dict:
    """Bytes per epoch of each mode; see the module docstring."""
    spec = {"dataset": args.bytes_dataset}
    P, batch, hidden = args.parts, args.bytes_batch_size, args.bytes_hidden
    pdir = work / f"bytes-{P}"
    t0 = time.perf_counter()
    partition(spec, P, pdir)
    part_s = time.perf_counter() - t0
    from gnnscale.partitioning import load_part

    # Steps of a whole epoch: every rank runs the max over ranks of ceil(train nodes / batch).
    steps_per_epoch = max(-(-int(load_part(pdir, p, verify=False).train_mask.sum()) // batch) for p in range(P))
    rows = {}
    variants = [("exact", "exact", None, "float32", None), ("local", "local", None, "float32", None)]
    for dt in args.embedding_dtypes.split(","):
        for text in args.bytes_staleness.split(","):
            s = _staleness(text, steps_per_epoch)
            for hf in args.halo_features.split(","):
                variants.append((f"historical S={s} {dt} {hf}", "historical", s, dt, hf))
    for name, mode, s, dt, hf in variants:
        full = args.full_epoch and mode == "historical"
        m = work / f"bytes-{name.replace(' ', '_')}{'-epochs' if full else ''}.json"
        # Host reads off: every remote row and neighbour list through the communicator, counted.
        cmd = ["train", "--parts-dir", str(pdir), "--exchange", mode, "--eval-every", "0",
               "--fanouts", args.bytes_fanouts, "--batch-size", str(batch), "--hidden", str(hidden),
               "--metrics", str(m), "--no-progress", "--no-verify", "--embedding-dtype", dt,
               "--no-host-features", "--no-host-graph"]
        cmd += ["--epochs", "2"] if full else ["--epochs", "2", "--max-steps", str(args.max_steps)]
        if s is not None:
            cmd += ["--staleness", str(s), "--halo-features", hf]
        t1 = time.perf_counter()
        if not (args.reuse and m.exists()):
            try:
                gnnscale(*cmd)
            except SystemExit as err:  # e.g. a worker killed for memory: recorded, the others still run
                rows[name] = {"mode": mode, "staleness": s, "embedding_dtype": dt, "failed": str(err)[-1500:]}
                print(f"  {name:32s} FAILED: {str(err).splitlines()[-1][:300]}", flush=True)
                continue
        r = json.loads(m.read_text())
        e = r["epochs"][-1]  # the second window of --max-steps steps, or the second whole epoch
        got = e["bytes_received_by_category"]
        data = {k: got.get(k, 0) for k in DATA_CATEGORIES}
        steps = e["steps"]
        ex = r["exchange"]
        rows[name] = {"mode": mode, "staleness": s, "embedding_dtype": dt, "halo_features": hf,
                      "measured": "the second whole epoch after the fill" if full else f"steps {steps}..{2 * steps - 1}",
                      "first_epoch_bytes_by_category": {k: r["epochs"][0]["bytes_received_by_category"].get(k, 0)
                                                        for k in DATA_CATEGORIES},
                      "steps_measured": steps, "bytes_by_category": data,
                      "bytes_per_step": sum(data.values()) / steps, "gradient_bytes": got.get("gradient", 0),
                      "sampling_rounds_per_batch": e["sampling_rounds_per_batch"],
                      "feature_rounds_per_batch": e["feature_rounds_per_batch"],
                      "embedding_rounds_per_batch": e["embedding_rounds_per_batch"],
                      "embedding_age_mean": e["embedding_age_mean"], "embedding_age_max": e["embedding_age_max"],
                      "train_seconds": e["epoch_seconds"], "wall_seconds": time.perf_counter() - t1, "exchange": ex,
                      "halo_feature_bytes_held": r["cache"]["bytes"] if r["cache"]["policy"] == "halo" else 0,
                      "halo_feature_fill_bytes": r["cache"].get("fill_bytes_received_all_ranks", 0)
                      if r["cache"]["policy"] == "halo" else 0}
        print(f"  {name:32s} {rows[name]['bytes_per_step'] / 1e6:8.1f} MB/step (features+sampling+embeddings, all "
              f"ranks), {e['sampling_rounds_per_batch']:.0f} sampling rounds/batch, {data['embedding'] / 1e6:.1f} MB "
              f"embeddings, {e['epoch_seconds']:.1f} s for {steps} steps", flush=True)
    if "failed" in rows["exact"] or rows["exact"]["bytes_per_step"] == 0:
        raise SystemExit("exchange.py: exact exchange moved no bytes between workers (or failed): nothing to "
                         "compare the other modes against; are the workers reading each other's parts from disk "
                         "(host reads)?")
    base = rows["exact"]["bytes_per_step"] * steps_per_epoch
    print(f"\nper epoch ({steps_per_epoch} steps). measured: bytes per measured step x steps. bound (historical): "
          "the measured non-embedding bytes x steps, plus the most the pushes can move: a row is pushed at most "
          "once per P steps, so at most ceil(steps / P) pushes of every boundary row (sized by the fill's exchange, "
          "plus the 8-byte keys)")
    for name, row in rows.items():
        if "failed" in row:
            print(f"  {name:32s} failed (see the JSON)")
            continue
        steps = row["steps_measured"]
        row["bytes_per_epoch_measured"] = measured = row["bytes_per_step"] * steps_per_epoch
        row["ratio_to_exact_measured"] = measured / base
        line = f"  {name:32s} measured {measured / 1e9:7.2f} GB/epoch = {measured / base:.3f} x exact"
        if row["mode"] == "historical":
            ex = row["exchange"]
            dims_bytes = ex["fill_embedding_bytes"]  # every boundary row of every hidden layer, once
            itemsize = {"float32": 4, "bfloat16": 2, "float16": 2}[row["embedding_dtype"]]
            key = 8 * ex["fill_embedding_bytes"] / (hidden * itemsize)  # one int64 key per row and layer
            full_push = dims_bytes + key
            pushes = -(-steps_per_epoch // ex["push_interval"])
            other = (row["bytes_per_step"] - row["bytes_by_category"]["embedding"] / steps) * steps_per_epoch
            bound = other + pushes * full_push
            row.update(push_bound_bytes_per_epoch=pushes * full_push, bytes_per_epoch_bound=bound,
                       ratio_to_exact_bound=bound / base)
            line += (f"; bound {bound / 1e9:7.2f} GB/epoch = {bound / base:.3f} x exact (P={ex['push_interval']}, "
                     f"R={ex['refresh_period']}; one-time fill {ex['fill_seconds']:.0f} s: "
                     f"{ex['fill_embedding_bytes'] / 1e9:.2f} GB embeddings + "
                     f"{(ex['fill_feature_bytes'] + row['halo_feature_fill_bytes']) / 1e9:.2f} GB halo features; "
                     f"tables {ex['halo_table_bytes'] / 1e9:.2f} GB + held features "
                     f"{row['halo_feature_bytes_held'] / 1e9:.2f} GB on rank 0)")
        print(line)
    return {"dataset": args.bytes_dataset, "parts": P, "fanouts": [int(f) for f in args.bytes_fanouts.split(",")],
            "batch_size": batch, "hidden": hidden, "host_reads": False, "steps_per_epoch": steps_per_epoch,
            "partition_seconds": part_s, "variants": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=["all", "accuracy", "bytes"], default="all")
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--layers", default="2,3")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--modes", default=",".join(MODES), help="accuracy part: exchange modes compared")
    ap.add_argument("--staleness", type=int, default=4, help="historical mode's bound in the accuracy part")
    ap.add_argument("--bytes-staleness", default="epoch",
                    help="bounds compared in the bytes part: steps, or 'epoch' (one epoch's steps, the staleness "
                    "of GNNAutoScale's histories)")
    ap.add_argument("--halo-features", default="hold", help="historical variants in the bytes part: hold,fetch")
    ap.add_argument("--full-epoch", action="store_true",
                    help="bytes part: run historical for two whole epochs and measure the second (steady "
                    "state: pushes recur every P steps), instead of a --max-steps window")
    ap.add_argument("--embedding-dtypes", default="bfloat16", help="exchange dtypes in the bytes part")
    ap.add_argument("--bytes-dataset", default=PRODUCTS)
    ap.add_argument("--max-steps", type=int, default=8, help="steps measured per mode in the bytes part")
    ap.add_argument("--bytes-batch-size", type=int, default=1024, help="seeds per step per worker in the bytes part")
    ap.add_argument("--bytes-fanouts", default="15,10,5", help="fan-outs of the bytes part")
    ap.add_argument("--bytes-hidden", type=int, default=HIDDEN, help="hidden size of the bytes part")
    ap.add_argument("--parts", type=int, default=4, help="parts = workers of every run")
    ap.add_argument("--epochs", type=int, default=None, help="accuracy part: epochs of every graph (default: GRAPHS')")
    ap.add_argument("--smoke", action="store_true",
                    help="Cora 1 epoch (L=2, seed 0, historical only) and a 3,000-node graph for the bytes (every "
                    "mode), 2 parts, 2 steps")
    ap.add_argument("--workdir", default=None, help="keep partitions here (reused when present)")
    ap.add_argument("--reuse", action="store_true", help="reuse a run's metrics file left in --workdir")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.smoke:
        args.graphs, args.layers, args.seeds, args.epochs, args.parts = "cora", "2", "0", 1, 2
        args.modes = "historical"  # the bytes part runs every mode
        args.bytes_dataset, args.bytes_batch_size, args.bytes_fanouts, args.bytes_hidden = SMOKE_BYTES_DATASET, 64, "5,5", 16
        args.max_steps = 2
        smoke_in_process()  # gnnscale() in this process: torch imported once, 2-worker launches forked
    if set(args.modes.split(",")) - set(MODES):
        ap.error(f"--modes: expected among {', '.join(MODES)}; found {args.modes}")
    report = {"args": vars(args)}
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp())
    work.mkdir(parents=True, exist_ok=True)
    if args.part in ("all", "accuracy"):
        report["accuracy"] = accuracy(args, work)
    if args.part in ("all", "bytes"):
        report["bytes"] = traffic(args, work)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
