"""Where the epoch's CPU time goes, this checkout beside another, by stage and operation (issue 55 item 1).

A loaded machine makes wall clocks useless for differences of a few percent (the ``--vs-checkout``
harness of ``benchmarks/epoch.py`` read 1.10 on identical code). This script measures CPU time
instead: each training worker runs under ``cProfile`` with ``time.process_time`` as its clock
(a ``sitecustomize`` on the workers' PYTHONPATH, dumped when the worker exits), one thread per
worker (``--threads 1``), so time taken by other jobs on the machine is not counted. Both
checkouts run from copies laid out alike (``epoch.checkout_env``'s layout; their numba caches
copied so that neither compiles while profiled; each warmed by one run first), alternately, the
same graph, partition and flags (``benchmarks/epoch.py``'s model: GraphSAGE 3 x 256, fan-outs
5,10,15, batch 1024, dropout 0.5, R-MAT from ``../shared/peers/graphgen.py``).

Per run, per rank, CPU seconds per epoch of (cumulative time of these functions, both commits):

- ``epoch``: ``Trainer.train_epoch``; ``sample``: the sampler's ``sample``; ``fetch``: the
  loader's ``load`` minus ``sample`` (features, node keys, labels); ``node_keys``: the keyed
  dropout's ``NodeKeyStore.block_keys`` (original ids of a batch's rows, with its exchange);
- ``forward``: ``GNN.forward_layers``; ``backward``: ``torch.autograd.backward``;
  ``masks``: the dropout's autograd functions (mask generation, fused with ReLU and scale);
  ``loss``: ``F.cross_entropy``; ``keys_seed``: ``layer_seed`` (the masks' per-layer seeds);
  ``optimizer``: ``Optimizer.step``; ``other``: epoch - sample - fetch - forward - backward - optimizer.

and the operations with the most self CPU time (torch ops, numba kernels as their Python caller).
The figures are medians over ``--repeats`` (per rank: the mean of the ranks). cProfile adds its own
overhead to Python calls (a few percent of a step of large tensor operations, alike on both sides).

    python benchmarks/keyed_cost.py --baseline /tmp/f4be70e --sizes 100000 --repeats 3 --json results/keyed_cost.json
    python benchmarks/keyed_cost.py --smoke     # 5,000 nodes, this checkout against itself, 1 repeat
    python benchmarks/keyed_cost.py --kernels /tmp/gnnscale_keyed_cost/rmat_n100000_...-p1   # one op at a time
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

SITE = '''"""keyed_cost.py: profile this process's CPU time with cProfile (process_time clock) when
KEYED_COST_PROFILE_DIR is set; dumped at exit, os._exit included (the launcher's workers)."""
import os
_out = os.environ.get("KEYED_COST_PROFILE_DIR")
if _out:
    import atexit, cProfile, time
    _prof = cProfile.Profile(time.process_time)
    _real_exit = os._exit

    def _dump():
        _prof.disable()
        _prof.dump_stats(os.path.join(_out, f"{os.getpid()}.prof"))

    def _exit(code):
        _dump()
        _real_exit(code)

    os._exit = _exit
    atexit.register(_dump)
    _prof.enable()
'''

# category -> (path suffix, function name) pairs whose cumulative times add up (present on both commits)
CUMULATIVE = {
    "epoch": [("training/trainer.py", "train_epoch")],
    "load": [("data/loader.py", "load")],
    "sample": [("samplers/distributed.py", "sample")],
    "node_keys": [("data/node_keys.py", "block_keys")],
    "forward": [("nn/models.py", "forward_layers")],
    "backward": [("torch/autograd/__init__.py", "backward")],
    "masks": [("nn/dropout.py", "forward"), ("nn/dropout.py", "backward")],
    "loss": [("torch/nn/functional.py", "cross_entropy")],
    "keys_seed": [("nn/dropout.py", "layer_seed")],
    "optimizer": [("torch/optim/optimizer.py", "wrapper")],
}
ROWS = ["epoch", "sample", "fetch", "node_keys", "forward", "masks", "loss", "backward", "optimizer", "keys_seed",
        "other"]


def copy_checkout(path: str, out: str) -> dict:
    """``path``'s packages copied to ``out`` in the installed layout (as ``epoch.checkout_env``,
    numba caches kept: a profiled run must not compile), with the profiling sitecustomize; the
    environment that runs it."""
    shutil.rmtree(out, ignore_errors=True)
    skip = shutil.ignore_patterns("*.pyc")
    shutil.copytree(os.path.join(path, "gnnscale"), os.path.join(out, "gnnscale"), ignore=skip)
    for pkg in ("partitioning", "samplers", "datasets"):
        shutil.copytree(os.path.join(path, pkg), os.path.join(out, "gnnscale", pkg), ignore=skip)
    with open(os.path.join(out, "sitecustomize.py"), "w") as f:
        f.write(SITE)
    env = {k: v for k, v in os.environ.items() if k not in ("GNNSCALE_TREE", "PYTHONPATH")}
    return dict(env, PYTHONPATH=out)


def train(env: dict, cwd: str, parts_dir: str, workers: int, epochs: int, out: str | None,
          extra: tuple = ()) -> None:
    from epoch import MODEL

    cmd = [sys.executable, "-m", "gnnscale", "train", "--parts-dir", parts_dir, "--workers", str(workers),
           "--threads", "1", "--epochs", str(epochs), "--eval-every", "0", "--no-progress", "--device", "cpu"]
    cmd += MODEL + list(extra)
    env = dict(env)
    if out is not None:
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        env["KEYED_COST_PROFILE_DIR"] = out
        cmd += ["--metrics", os.path.join(out, "metrics.json")]
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=7200)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}")


def _matches(key: tuple, suffix: str, name: str) -> bool:
    return key[0].endswith(suffix) and key[2] == name


def rank_figures(prof: str, epochs: int) -> dict | None:
    """CPU seconds per epoch of each category and the top operations' self time, of one worker's
    profile (None: not a training worker)."""
    st = pstats.Stats(prof).stats  # {(file, line, name): (cc, nc, tt, ct, callers)}
    cum = {k: 0.0 for k in CUMULATIVE}
    for key, (_, _, tt, ct, _) in st.items():
        for cat, pairs in CUMULATIVE.items():
            if any(_matches(key, s, n) for s, n in pairs):
                cum[cat] += ct
    if cum["epoch"] <= 0:
        return None
    f = {k: v / epochs for k, v in cum.items()}
    f["fetch"] = f["load"] - f["sample"]
    f["other"] = f["epoch"] - f["load"] - f["forward"] - f["backward"] - f["optimizer"]
    ops = {}
    for key, (_, _, tt, ct, _) in st.items():
        name = key[2] if key[0] == "~" else f"{os.path.basename(key[0])}:{key[2]}"
        ops[name] = ops.get(name, 0.0) + tt / epochs
    f["ops"] = dict(sorted(ops.items(), key=lambda kv: -kv[1])[:40])
    return f


def run_figures(out: str, epochs: int) -> dict:
    ranks = [f for f in (rank_figures(p, epochs) for p in sorted(glob.glob(os.path.join(out, "*.prof")))) if f]
    if not ranks:
        raise SystemExit(f"no training worker's profile in {out}")
    fig = {k: statistics.mean(r[k] for r in ranks) for k in ROWS}
    names = set().union(*(r["ops"] for r in ranks))
    fig["ops"] = {n: statistics.mean(r["ops"].get(n, 0.0) for r in ranks) for n in names}
    fig["ranks"] = len(ranks)
    return fig


def median_figures(runs: list[dict]) -> dict:
    med = {k: statistics.median(r[k] for r in runs) for k in ROWS}
    names = set().union(*(r["ops"] for r in runs))
    med["ops"] = {n: statistics.median(r["ops"].get(n, 0.0) for r in runs) for n in names}
    return med


def table(base: dict, head: dict, labels: tuple[str, str]) -> list[str]:
    """Rows: category, baseline and this checkout's CPU ms per epoch, difference, and the
    difference as a share of the baseline's epoch."""
    ep = base["epoch"]
    lines = [f"{'stage':<12} {labels[0]:>12} {labels[1]:>12} {'diff ms':>9} {'% of epoch':>10}"]
    for k in ROWS:
        b, h = base[k] * 1e3, head[k] * 1e3
        lines.append(f"{k:<12} {b:>12.1f} {h:>12.1f} {h - b:>+9.1f} {100 * (h - b) / (ep * 1e3):>+9.2f}%")
    names = sorted(set(base["ops"]) | set(head["ops"]),
                   key=lambda n: -max(base["ops"].get(n, 0.0), head["ops"].get(n, 0.0)))[:15]
    lines.append(f"{'operation (self CPU)':<40} {labels[0]:>10} {labels[1]:>10}")
    for n in names:
        lines.append(f"{n[:40]:<40} {1e3 * base['ops'].get(n, 0.0):>10.1f} {1e3 * head['ops'].get(n, 0.0):>10.1f}")
    return lines


def _reference_kernels():
    """Two kernels to set beside the engine's masks: the ReLU and scale alone (no mask: the
    memory pass any dropout makes) and a mask of one splitmix64 hash per four elements (four
    16-bit uniforms, the generator issue 55 proposed)."""
    import numba
    import numpy as np

    @numba.njit(parallel=True, fastmath=True)
    def relu_scale(x, out, keys, seed, threshold, scale):  # pragma: no cover - compiled
        n, c = x.shape
        for i in numba.prange(n):
            for j in range(c):
                v = x[i, j]
                out[i, j] = v * scale if v > 0 else np.float32(0.0)

    @numba.njit(parallel=True, fastmath=True)
    def relu_mask_lanes(x, out, keys, seed, threshold, scale):  # pragma: no cover - compiled
        n, c = x.shape
        nb = c // 4
        for i in numba.prange(n):
            base = np.uint64(keys[i]) * np.uint64(nb) + seed
            for b in range(nb):
                z = (base + np.uint64(b)) * np.uint64(0x9E3779B97F4A7C15)
                z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
                z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
                z = z ^ (z >> np.uint64(31))
                for lane in range(4):
                    u = (z >> np.uint64(16 * lane)) & np.uint64(0xFFFF)
                    v = x[i, 4 * b + lane]
                    out[i, 4 * b + lane] = v * scale if (v > 0 and u >= threshold) else np.float32(0.0)

    return relu_scale, relu_mask_lanes


def _cpu_ms(fn, repeats: int) -> float:
    """The least CPU milliseconds of ``fn()`` over ``repeats`` calls (after one untimed call): on
    a loaded machine the least is the call that shared its caches least."""
    import time

    fn()
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return 1e3 * min(times)


def kernels(parts_dir: str, repeats: int = 21) -> dict:
    """The keyed operations one at a time, in this process (one thread, CPU time, the least of 21 calls): on the
    first batch of the 1-part folder ``parts_dir`` (batch 1024, fan-outs 5,10,15), the hidden
    matrices' fused ReLU-dropout forward: without a mask, with the unkeyed mask (f4be70e's: one
    splitmix64 hash of (seed, row, column) per element), the keyed one (one hash of (seed, original
    id, column) per element) and one hash per four elements; and the batch's node keys by a sort of
    every block's sources (before) and as prefixes of one gather (now)."""
    import numba
    import numpy as np
    import torch

    from gnnscale.data.node_keys import NodeKeyStore
    from gnnscale.nn.dropout import _relu_mask_scale, _relu_mask_scale_keyed, layer_seed
    from gnnscale.partitioning.part import load_part
    from gnnscale.samplers.local import NeighborSampler

    torch.set_num_threads(1)
    numba.set_num_threads(1)
    part = load_part(parts_dir, 0)
    sampler = NeighborSampler(part.indptr, part.indices, [15, 10, 5], seed=0, node_keys=part.orig_ids)
    seeds = torch.nonzero(part.train_mask).flatten()[:1024]
    mb = sampler.sample(seeds, epoch=0, step=0)
    blocks = mb.blocks
    relu_scale, lanes = _reference_kernels()
    out = {"block_sources": [b.num_src for b in blocks], "masks": []}
    seed, half, scale = np.uint64(layer_seed(12345, 1)), np.uint64(1 << 23), np.float32(2.0)
    for i in (1, 2):  # the hidden layers' inputs (GraphSAGE drops no raw features)
        n = blocks[i].num_src
        x = torch.randn(n, 256).numpy()
        buf = np.empty_like(x)
        keys = part.orig_ids[blocks[i].src_ids].numpy()
        out["masks"].append({
            "layer": i, "rows": n, "cols": 256,
            "relu_scale_no_mask_ms": _cpu_ms(lambda: relu_scale(x, buf, keys, seed, half, scale), repeats),
            "unkeyed_ms": _cpu_ms(lambda: _relu_mask_scale(x, buf, seed, half, scale), repeats),
            "keyed_ms": _cpu_ms(lambda: _relu_mask_scale_keyed(x, buf, keys, seed, half, scale), repeats),
            "lanes4_keyed_ms": _cpu_ms(lambda: lanes(x, buf, keys, seed, np.uint64(1 << 15), scale), repeats)})

    class _One:  # a world of one: NodeKeyStore's communicator facts
        world_size, rank = 1, 0

    store = NodeKeyStore(part.orig_ids, part.book, _One())

    def sorted_keys():
        ids = torch.cat([b.src_ids for b in blocks])
        uniq, inverse = torch.unique(ids, return_inverse=True)
        return list(torch.split(store.fetch(uniq)[inverse], [b.num_src for b in blocks]))

    out["node_keys"] = {"sort_ms": _cpu_ms(sorted_keys, repeats), "prefix_ms": _cpu_ms(lambda: store.block_keys(blocks),
                                                                                         repeats)}
    assert all(torch.equal(a, b) for a, b in zip(sorted_keys(), store.block_keys(blocks)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", default=ROOT, help="the other checkout (default: this one, the profile's spread)")
    ap.add_argument("--checkouts", default=ROOT,
                    help="the checkouts set beside the baseline, comma-separated (default: this one)")
    ap.add_argument("--sizes", default="100000", help="R-MAT node counts (comma-separated)")
    ap.add_argument("--what", default="1proc,dist2", help="1proc: one worker; dist2: 2 METIS parts, 2 workers")
    ap.add_argument("--epochs", type=int, default=4, help="epochs per profiled run")
    ap.add_argument("--repeats", type=int, default=3, help="alternating repeats")
    ap.add_argument("--workdir", default="/tmp/gnnscale_keyed_cost")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--train-args", default="", help="more flags for gnnscale train, e.g. "
                    "'--no-host-graph --no-host-features' (every remote node's key asked of its owner)")
    ap.add_argument("--smoke", action="store_true", help="5,000 nodes, 1proc, 2 epochs, 1 repeat, no warm-up run")
    ap.add_argument("--kernels", default=None, metavar="PARTS_DIR",
                    help="only time the keyed operations one at a time in this process (this checkout), on the "
                         "first batch of this 1-part folder")
    args = ap.parse_args()
    if args.kernels:
        k = kernels(args.kernels)
        print(json.dumps(k, indent=1))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(k, f, indent=1)
        return
    if args.smoke:
        args.sizes, args.what, args.epochs, args.repeats = "5000", "1proc", 2, 1
    sys.path.insert(0, os.path.abspath(os.path.join(ROOT, "..", "shared", "peers")))
    import graphgen
    from epoch import _rmat_dataset

    os.makedirs(args.workdir, exist_ok=True)
    extra = tuple(args.train_args.split())
    checkouts = [os.path.abspath(c) for c in args.checkouts.split(",")]
    sides = {"baseline": copy_checkout(args.baseline, os.path.join(args.workdir, "baseline"))}
    for i, c in enumerate(checkouts):
        sides[f"this{i}"] = copy_checkout(c, os.path.join(args.workdir, f"this{i}"))
    results = {"setup": {"baseline": os.path.abspath(args.baseline), "checkouts": checkouts, "epochs": args.epochs,
                         "repeats": args.repeats, "threads_per_worker": 1,
                         "train_args": args.train_args, "clock": "process_time (cProfile)"},
               "graphs": []}
    for n in (int(s) for s in args.sizes.split(",")):
        name, ddir = _rmat_dataset(graphgen, n, args.workdir)
        graph = {"graph": name, "num_nodes": n, "settings": {}}
        for w in args.what.split(","):
            workers = 1 if w == "1proc" else 2
            pd = os.path.join(args.workdir, f"{name}-p{workers}")
            if not os.path.exists(os.path.join(pd, "meta.json")):
                subprocess.run([sys.executable, "-m", "gnnscale", "partition", "--dataset", f"dir:{ddir}", "--parts",
                                str(workers), "--method", "metis", "--balance", "nodes,train,edges", "--out", pd],
                               check=True, capture_output=True, env=sides["this0"], cwd=args.workdir)
            for side, env in sides.items():  # warm: numba caches written, pages read (not in a smoke run)
                if not args.smoke:
                    train(env, args.workdir, pd, workers, 1, None, extra)
            runs = {side: [] for side in sides}
            for r in range(args.repeats):
                order = list(sides) if r % 2 == 0 else list(sides)[::-1]
                for side in order:
                    out = os.path.join(args.workdir, f"prof-{name}-{w}-{side}-{r}")
                    train(sides[side], args.workdir, pd, workers, args.epochs, out, extra)
                    fig = run_figures(out, args.epochs)
                    runs[side].append(fig)
                    print(f"[{name} {w} repeat {r}] {side}: epoch {fig['epoch'] * 1e3:.0f} CPU ms per rank "
                          f"(masks {fig['masks'] * 1e3:.1f}, node keys {fig['node_keys'] * 1e3:.1f})", flush=True)
            base = median_figures(runs["baseline"])
            rec = graph["settings"][w] = {"baseline": base, "runs": runs, "checkouts": {}}
            for i, c in enumerate(checkouts):
                head = median_figures(runs[f"this{i}"])
                lines = table(base, head, (os.path.basename(os.path.abspath(args.baseline)) + " ms",
                                           os.path.basename(c) + " ms"))
                print("\n".join(f"[{name} {w}] " + line for line in lines), flush=True)
                print(f"[{name} {w}] CPU epoch ratio {c} / baseline: {head['epoch'] / base['epoch']:.3f}", flush=True)
                rec["checkouts"][c] = {"figures": head, "table": lines, "epoch_ratio": head["epoch"] / base["epoch"]}
        results["graphs"].append(graph)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
