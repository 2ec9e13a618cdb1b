"""Remote feature bytes per epoch with each cache policy and size (issue 5, item 1).

For each graph: partition into 4 parts (METIS), then for every rank replay its training
epoch with the engine's own sampler and count how often each remote row is an input. The
replay runs the sampler in one process over the union of the parts' CSCs keyed by original
ids, which draws exactly what the distributed sampler draws (tests/test_distributed.py
checks that), and chooses the cached rows with the engine's own policies
(gnnscale.data.feature_cache.choose_cache_ids; ``presample`` counts over 2 pre-sampling epochs
with disjoint random streams, as the trainer does). On Squirrel every configuration is also
run for real (``gnnscale train --epochs 1`` with 4 workers) and the replay must agree.

The ``oracle`` rows are not a policy: they cache, per rank, the remote rows that the measured
epoch itself reads most often, chosen in hindsight. No static cache of that size can save
more, so they bound what any policy (degree, presample, or a better one) could reach.

The real runs read every remote row through the communicator (``--no-host-features
--no-host-graph``): with host reads on, as by default, the workers of one host read each other's
parts from disk and no feature byte would cross between them. ``best_vs_oracle`` per size: the
remote rows the best policy saves (cache hits) over those the oracle saves.

    python benchmarks/cache.py --json results/cache.json
    python benchmarks/cache.py --graphs squirrel            # the small graph only
    python benchmarks/cache.py --smoke                      # a 2,000-node graph, 2 parts, 10%: seconds
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import gnnscale, run_gnnscale, smoke_in_process  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GNNSCALE_SHARED_DATA", REPO.parent / "shared" / "data"))

GRAPHS = {
    "squirrel": dict(dataset=f"npz:{SHARED / 'squirrel' / 'squirrel.npz'}", fanouts=[10, 10], batch_size=256, real=True),
    "products": dict(dataset="synthetic?num_nodes=2449029&avg_degree=25.3&num_classes=47&num_features=100",
                     fanouts=[15, 10, 5], batch_size=1024, real=False),
    "tiny": dict(dataset="synthetic?num_nodes=2000&avg_degree=8&num_features=16", fanouts=[5, 5], batch_size=128,
                 real=True),  # --smoke
}
POLICIES = ["none", "degree", "presample", "oracle"]  # oracle: replay only, an upper bound
SIZES = ["5%", "10%", "20%"]


def replay_counts(parts_dir: Path, fanouts, batch_size, seed, epochs) -> tuple[list, list, list]:
    """Per rank: its LocalPart, input-row access counts (int64 [N]) of each requested epoch."""
    from gnnscale.partitioning import load_meta, load_part
    from gnnscale.samplers import NeighborSampler
    from gnnscale.samplers.seeds import epoch_steps, shuffled_batches

    meta = load_meta(parts_dir)
    P, N = meta["num_parts"], meta["num_nodes"]
    parts = [load_part(parts_dir, p, verify=False) for p in range(P)]
    indptr = [torch.zeros(1, dtype=torch.int64)]
    off = 0
    for part in parts:  # loop over parts
        indptr.append(part.indptr[1:] + off)
        off += int(part.indptr[-1])
    indptr = torch.cat(indptr)
    indices = torch.cat([part.indices for part in parts])
    orig = torch.cat([part.orig_ids for part in parts])
    sampler = NeighborSampler(indptr, indices, fanouts, seed=seed, node_keys=orig)
    train = [torch.nonzero(p.train_mask).flatten() + p.offset for p in parts]
    steps = epoch_steps([t.numel() for t in train], batch_size)
    counts = {}
    for epoch in epochs:
        for r in range(P):  # loop over ranks and their batches
            c = torch.zeros(N, dtype=torch.int64)
            for step, seeds in enumerate(shuffled_batches(train[r], batch_size, seed, epoch, r, steps)):
                mb = sampler.sample(seeds, epoch=epoch, step=step)
                c += torch.bincount(mb.input_ids, minlength=N)
            counts[(epoch, r)] = c
    return parts, counts, meta


def evaluate(parts, counts, meta, policy, size, seed, presample_epochs) -> dict:
    from gnnscale.data.feature_cache import CacheContext, CacheSize, choose_cache_ids

    N, F = meta["num_nodes"], meta["feature_dim"]
    fetched = hits = cached_rows = 0
    for r, part in enumerate(parts):
        def pre(k, r=r):  # the trainer's shape: (ids, counts) of the nodes drawn at least once
            dense = sum(counts[(1_000_000 + e, r)] for e in range(k))
            ids = torch.nonzero(dense).flatten()
            return ids, dense[ids]

        ctx = CacheContext(part, N, presample=pre, epochs=presample_epochs)
        c = counts[(0, r)]
        remote = ctx.is_remote(torch.arange(N))
        if policy == "oracle":  # hindsight: the rows this very epoch reads most (no policy can beat it)
            k = CacheSize.parse(size).to_rows(ctx.remote_rows, 4 * F)
            ids = torch.topk(torch.where(remote, c, -1), k).indices
        else:
            ids = choose_cache_ids(policy, ctx, CacheSize.parse(size), 4 * F)
        total = int(c[remote].sum())
        h = int(c[ids].sum()) if ids.numel() else 0
        fetched += total - h
        hits += h
        cached_rows += int(ids.numel())
    return {"policy": policy, "size": size, "cached_rows": cached_rows, "remote_rows_fetched": fetched,
            "cache_hits": hits, "hit_rate": hits / max(hits + fetched, 1), "remote_feature_bytes": fetched * 4 * F}


def real_run(parts_dir: Path, spec: dict, policy: str, size: str, seed: int, presample_epochs: int, tmp: Path) -> dict:
    """``gnnscale train --epochs 1`` with this cache (no ``--cache-size`` without a policy: the plan
    refuses it), every remote row through the communicator."""
    m = tmp / f"{policy}-{size.strip('%')}.json"
    cache = ["--cache-policy", policy] + (["--cache-size", size] if policy != "none" else [])
    if policy == "presample":
        cache += ["--presample-epochs", str(presample_epochs)]
    argv = ["train", "--parts-dir", str(parts_dir), "--epochs", "1",
            "--fanouts", ",".join(map(str, spec["fanouts"])), "--batch-size", str(spec["batch_size"]),
            *cache, "--seed", str(seed), "--eval-every", "1000", "--no-host-features", "--no-host-graph",
            "--metrics", str(m), "--no-progress", "--no-verify"]
    r = run_gnnscale(argv, capture_output=True, text=True)  # --smoke: in this process, its workers forked
    if r.returncode:
        raise SystemExit(f"gnnscale {' '.join(argv)} failed:\n{r.stderr[-3000:]}")
    e = json.loads(m.read_text())["epochs"][0]
    return {"remote_feature_bytes": e["feature_bytes_fetched"], "hit_rate": e["cache_hit_rate"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", default="squirrel,products")
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--presample-epochs", type=int, default=2)
    ap.add_argument("--sizes", default=",".join(SIZES), help="cache sizes (comma-separated)")
    ap.add_argument("--smoke", action="store_true",
                    help="a 2,000-node synthetic graph, 2 parts, a 10%% cache, real runs of none and presample only")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.smoke:
        args.graphs, args.parts, args.sizes, args.presample_epochs = "tiny", 2, "10%", 1
        smoke_in_process()  # the CLI's runs in this process (torch imported once), 2-worker launches forked
    sizes = args.sizes.split(",")
    torch.set_num_threads(2)
    report = {"parts": args.parts, "graphs": {}}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for key in args.graphs.split(","):
            spec = GRAPHS[key]
            pdir = tmp / key
            t0 = time.perf_counter()
            gnnscale("partition", "--dataset", spec["dataset"], "--parts", str(args.parts), "--out", str(pdir))
            t1 = time.perf_counter()
            epochs = [0] + [1_000_000 + e for e in range(args.presample_epochs)]
            parts, counts, meta = replay_counts(pdir, spec["fanouts"], spec["batch_size"], args.seed, epochs)
            t2 = time.perf_counter()
            rows = []
            for policy in POLICIES:
                for size in (sizes if policy != "none" else ["0%"]):
                    row = evaluate(parts, counts, meta, policy, size, args.seed, args.presample_epochs)
                    if spec["real"] and policy != "oracle" and not (args.smoke and policy == "degree"):
                        real = real_run(pdir, spec, policy, size, args.seed, args.presample_epochs, tmp)
                        row["real_run_remote_feature_bytes"] = real["remote_feature_bytes"]
                        row["real_run_hit_rate"] = real["hit_rate"]
                    rows.append(row)
            base = rows[0]["remote_feature_bytes"]
            for row in rows:
                row["reduction_vs_none"] = 1 - row["remote_feature_bytes"] / max(base, 1)
                if "real_run_remote_feature_bytes" in row:
                    row["replay_agrees"] = row["real_run_remote_feature_bytes"] == row["remote_feature_bytes"]
            best = {}
            for size in sizes:
                oracle = next(r for r in rows if r["policy"] == "oracle" and r["size"] == size)
                top = max((r for r in rows if r["size"] == size and r["policy"] != "oracle"),
                          key=lambda r: r["cache_hits"])
                best[size] = {"policy": top["policy"], "best_vs_oracle": top["cache_hits"] / max(oracle["cache_hits"], 1)}
            report["graphs"][key] = {"dataset": spec["dataset"], "fanouts": spec["fanouts"],
                                     "batch_size": spec["batch_size"], "num_nodes": meta["num_nodes"],
                                     "partition_seconds": t1 - t0, "replay_seconds": t2 - t1, "rows": rows,
                                     "best_vs_oracle": best}
            print(f"\n{key}: {meta['num_nodes']} nodes, {args.parts} parts, fanouts {spec['fanouts']}, "
                  f"batch {spec['batch_size']} (replayed epoch; 'real' = gnnscale train, {args.parts} workers)")
            print("policy     size  cached rows  remote MB/epoch  hit rate  cut vs none   real MB   real hit")
            for row in rows:
                real_mb = row.get("real_run_remote_feature_bytes")
                real = (f"{real_mb / 1e6:9.2f} {row['real_run_hit_rate']:9.1%}" if real_mb is not None else "")
                print(f"{row['policy']:9s} {row['size']:>5s} {row['cached_rows']:12d} {row['remote_feature_bytes'] / 1e6:16.2f} "
                      f"{row['hit_rate']:9.1%} {row['reduction_vs_none']:11.1%} {real}")
            for size, b in best.items():
                print(f"best policy at {size}: {b['policy']}, {b['best_vs_oracle']:.2f}x of the oracle's saved rows")
            disagree = [f"{r['policy']} {r['size']}" for r in rows if r.get("replay_agrees") is False]
            if disagree:
                print(f"the real runs' remote bytes differ from the replay's: {', '.join(disagree)}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
