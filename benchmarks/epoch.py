"""Whole training epochs of ``gnnscale train`` beside DGL 2.1 and DistDGL, alternating, same graph.

The setup of issue 13 (the peers' ``epoch_vs_dgl.py``): R-MAT graphs from
``../shared/peers/graphgen.py`` (degree 20, 128 features, 16 classes, 10% training nodes),
GraphSAGE mean, 3 layers, hidden 256, dropout 0.5, Adam lr 3e-3, batch 1024, fan-outs 5,10,15
per hop from the seeds (DGL ``NeighborSampler([15, 10, 5])``), 8 epochs per run on graphs under
500k nodes and 3 above (``--epochs`` sets one count for all): a 100k epoch is ten 60 ms steps, and
on this noisy machine a run's median of 2 epochs after the warm-up moved its compute by 1.2x
between repeats (0.581 against 0.686-0.690 s), the median of 7 by 1.01x (0.595-0.601 s).

- ``1proc``: one process, 2 threads: ``gnnscale train --workers 1 --threads 2`` beside DGL's
  single-process loop (``dgl_bench.py --tasks train --threads 2``).
- ``dist2``: 2 METIS parts, one trainer per part, 1 thread each: ``gnnscale train --workers 2
  --threads 1`` beside DistDGL (a graph server and a trainer per part, ``--tasks dist``).

Each repeat runs gnnscale then DGL (alternating); a run's epoch time is the median of its
epochs after the first (warm-up). Figures per setting: the ratio of the medians over repeats
(gnnscale / DGL: below 1 is faster), each side's stage times (sample, fetch, compute) and the
accuracy on the training batches of the last epoch (both sides measure it the same way).

Partitions: METIS balancing nodes, training nodes and in-edges on both sides (DistDGL:
``partition_graph(balance_ntypes=train_mask, balance_edges=True)`` in ``dgl_bench.py``;
gnnscale: ``--balance nodes,train,edges``). On R-MAT the edges matter: balancing nodes and
training nodes alone left one part 87% of the in-edges (its rank serves most remote rows).

Start-up, two definitions, both sides measured the same way:
- ``startup_s``: inside each trainer, from after the imports to the first step (max over
  trainers): DGL's own ``startup_s`` (DistGraph connect, node split, model, DDP, optimizer);
  gnnscale's ``startup_seconds`` (part load, process groups, sampler, model, DDP, optimizer).
- ``job_overhead_s``: the job's wall time minus its epochs (imports, launch, start-up,
  teardown). DistDGL's partitioning is timed apart (``partition_s``), as is gnnscale's.

Needs the DGL virtual environment of ``../shared/peers/setup_peers.sh dgl`` (/tmp/peers/dgl).

Roofline (``benchmarks/roofline.py``, issue 30): for each graph and setting, the epoch's exact
work counted from the blocks the engine samples (matrix-product FLOPs per layer forward and
backward, aggregation FLOPs and bytes, the gathered feature bytes, sampling bytes) and the
machine's rates measured in the same run (torch's matrix product at the layers' shapes with the
training's threads, the copy bandwidth of a 1 GiB buffer; measured before the runs and again
after each repeat, the best kept); per stage (sample, fetch, compute, epoch) gnnscale's seconds,
DGL's, the bound and both ratios to it, under ``"roofline"`` in each setting's JSON. This
machine's speed drifts within minutes (the same replayed epoch 8.0 against 10.3 s), so each run
is also paired with the measurement next to it (``"paired"``: the one just before repeat r's
gnnscale run, the one just after its peer's run): compute over the bound of that measurement,
per repeat, and the spread of the compute bound over the run's measurements. And since the
bound takes the best of every rate measured (best of 5 bursts, each measurement), ``"best"``
sets the best epoch's compute stage beside it (of all repeats, after the warm-up epoch; each
side's own): best against best. Each run's share of CPU time stolen by the hypervisor
(``/proc/stat``) is ``steal_frac``.
``--roofline-only`` counts and measures without training either side (a quick check).
In the 1-process setting the compute stage is also split (``benchmarks/compute_split.py``): the
epoch's real steps replayed, their matrix products timed apart from the rest, beside the
bound's matmul and aggregation + elementwise parts (``"compute_split"`` under ``"roofline"``;
``--no-compute-split`` leaves it out).

``--vs-checkout DIR`` times another checkout of gnnscale (e.g. a ``git worktree`` of an
earlier commit) instead of DGL, on the same graphs, partitions and flags, alternating which
side runs first: the ratio of medians says whether a change made epochs slower (no DGL needed).
Both sides run from copies laid out alike (:func:`checkout_env`), each warmed once; ``--vs-checkout .``
(this checkout against itself) gives the harness's own spread.

    python benchmarks/epoch.py --json results/epoch.json                  # 100k and 1M
    python benchmarks/epoch.py --sizes 100000 --what 1proc,dist2 --repeats 2
    python benchmarks/epoch.py --sizes 100000 --vs-checkout ../old --repeats 3 --json results/vs_old.json
    python benchmarks/epoch.py --sizes 100000 --what 1proc --roofline-only    # counts, rates, bounds only
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.path.abspath(os.path.join(ROOT, "..", "shared", "peers"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import DGL_PYTHON as DGL_PY, dgl_python  # noqa: E402
MODEL = ["--fanouts", "5,10,15", "--batch-size", "1024", "--hidden", "256", "--lr", "3e-3", "--dropout", "0.5"]


def _cpu_ticks() -> list[int] | None:
    """The machine's CPU ticks by kind (``/proc/stat``'s first line: user, nice, system, idle,
    iowait, irq, softirq, steal, ...); None where there is no /proc."""
    try:
        with open("/proc/stat") as f:
            return [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return None


def steal_fraction(before: list[int] | None, after: list[int] | None) -> float | None:
    """The share of the CPU time between two ``_cpu_ticks`` that the hypervisor gave to other
    guests (steal): a run's time inflated by a busy host, not by its own work."""
    if before is None or after is None or len(before) < 8:
        return None
    d = [b - a for a, b in zip(before, after)]
    return d[7] / max(sum(d), 1)


def _run(cmd: list[str], timeout: float = 3600, env: dict | None = None, cwd: str = ROOT) -> tuple[float, str]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-3000:] + p.stderr[-3000:])
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}")
    return wall, p.stdout + p.stderr


def _write_dir_dataset(data: dict, out: str) -> None:
    """The graph as a ``dir:`` dataset (edge_index, x, y, split), once."""
    if os.path.exists(os.path.join(out, "done")):
        return
    os.makedirs(out, exist_ok=True)
    n = int(data["num_nodes"])
    np.save(os.path.join(out, "edge_index.npy"), np.stack([data["src"], data["dst"]]).astype(np.int64))
    np.save(os.path.join(out, "x.npy"), data["x"])
    np.save(os.path.join(out, "y.npy"), data["y"])
    rest = np.random.default_rng(1).permutation(np.setdiff1d(np.arange(n), data["train_idx"]))
    np.savez(os.path.join(out, "split.npz"), train_idx=data["train_idx"], val_idx=np.sort(rest[: n // 20]),
             test_idx=np.sort(rest[n // 20: n // 10]))
    open(os.path.join(out, "done"), "w").close()


def _rmat_dataset(graphgen, n: int, workdir: str) -> tuple[str, str]:
    """(name, folder) of the peers' R-MAT graph of ``n`` nodes written as a ``dir:`` dataset."""
    ga = graphgen.add_graph_args(argparse.ArgumentParser()).parse_args(["--num-nodes", str(n)])
    name, data = graphgen.load_graph(ga)
    ddir = os.path.join(workdir, name)
    _write_dir_dataset(data, ddir)
    return name, ddir


SMALL_GRAPH_NODES, SMALL_GRAPH_EPOCHS, LARGE_GRAPH_EPOCHS = 500_000, 8, 3  # default epochs a run, below / at or above
DEFAULT_EPOCHS = f"{SMALL_GRAPH_EPOCHS} under {SMALL_GRAPH_NODES // 1000}k nodes, {LARGE_GRAPH_EPOCHS} above"


def epochs_per_run(num_nodes: int, requested: int | None) -> int:
    """Epochs per run: ``requested`` (``--epochs``) if given, else 8 on graphs under 500k nodes
    (sub-second epochs: 7 after the warm-up make a run's median steady) and 3 above."""
    if requested is not None:
        return requested
    return SMALL_GRAPH_EPOCHS if num_nodes < SMALL_GRAPH_NODES else LARGE_GRAPH_EPOCHS


def _steady(epochs: list[float]) -> float:
    return statistics.median(epochs[1:] if len(epochs) > 1 else epochs)


def checkout_env(path: str, workdir: str, tag: str = "") -> tuple[dict, str]:
    """(environment, working folder) that run a checkout's gnnscale: its packages copied under
    ``workdir`` as the installed layout (gnnscale with partitioning, samplers and datasets inside
    it) first on PYTHONPATH, the command run from there. Both sides of ``--vs-checkout`` run so,
    this checkout too: the same layout, and neither side's bytecode or numba cache (``__pycache__``,
    ``*.nbi``/``*.nbc``) copied, so each compiles its own in the warm-up run (the installed checkout
    against a copy of itself read 1.103 / 1.012 when only the baseline was a copy)."""
    import shutil

    path = os.path.abspath(path)
    out = os.path.join(workdir, f"checkout{tag}-" + str(abs(hash(path)) % 10 ** 8))
    shutil.rmtree(out, ignore_errors=True)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc")
    shutil.copytree(os.path.join(path, "gnnscale"), os.path.join(out, "gnnscale"), ignore=skip)
    for pkg in ("partitioning", "samplers", "datasets"):
        shutil.copytree(os.path.join(path, pkg), os.path.join(out, "gnnscale", pkg), ignore=skip)
    return dict(os.environ, PYTHONPATH=out), out


def _pct(frac: float | None) -> str:
    return "-" if frac is None else f"{100 * frac:.1f}%"


def _timed_run(cmd: list[str], env: dict | None = None, cwd: str = ROOT) -> tuple[float, float | None]:
    """(wall seconds, steal fraction) of one training job (``_run``)."""
    ticks = _cpu_ticks()
    wall, _ = _run(cmd, env=env, cwd=cwd)
    return wall, steal_fraction(ticks, _cpu_ticks())


def gnnscale_run(parts_dir: str, workers: int, threads: int, epochs: int, metrics: str, env: dict | None = None,
                 cwd: str = ROOT) -> dict:
    cmd = [sys.executable, "-m", "gnnscale", "train", "--parts-dir", parts_dir, "--workers", str(workers),
           "--threads", str(threads), "--epochs", str(epochs), "--eval-every", "0", "--metrics", metrics,
           "--no-progress", "--device", "cpu"] + MODEL
    wall, steal = _timed_run(cmd, env=env, cwd=cwd)
    m = json.load(open(metrics))
    ep = [e["epoch_seconds"] for e in m["epochs"]]
    cpu = [e.get("epoch_cpu_seconds") for e in m["epochs"]]
    last = m["epochs"][-1]
    stages = [e["stage_seconds_max_over_ranks"] for e in m["epochs"][1:]] or [m["epochs"][0]["stage_seconds_max_over_ranks"]]
    return dict(epoch_s=_steady(ep), epochs=ep, epoch_cpu_s=None if None in cpu else _steady(cpu), epochs_cpu=cpu,
                startup_s=m["startup_seconds"], job_wall_s=wall,
                job_overhead_s=wall - sum(ep), train_acc=last["train_acc"], loss=last["loss"], steal_frac=steal,
                stages={k: statistics.median(s[k] for s in stages) for k in ("sample", "fetch", "compute", "grad_sync")},
                best_compute_s=min(s["compute"] for s in stages))


def dgl_run(task: str, num_nodes: int, epochs: int, out: str) -> dict:
    cmd = [DGL_PY, os.path.join(PEERS, "dgl_bench.py"), "--tasks", task, "--num-nodes", str(num_nodes),
           "--fanouts", "5,10,15", "--epochs", str(epochs), "--dist-epochs", str(epochs), "--out", out]
    if task == "train":
        cmd += ["--threads", "2"]
    wall, steal = _timed_run(cmd)
    r = json.load(open(out))
    if task == "train":
        eps = r["train"]["epochs"]
        rest = eps[1:] or eps
        return dict(epoch_s=_steady([e["time_s"] for e in eps]), epochs=[e["time_s"] for e in eps],
                    train_acc=eps[-1]["train_acc"], loss=eps[-1]["loss"], steal_frac=steal,
                    stages={"sample": statistics.median(e["sample_s"] for e in rest),
                            "fetch": statistics.median(e["gather_s"] for e in rest),
                            "compute": statistics.median(e["compute_s"] for e in rest)},
                    best_compute_s=min(e["compute_s"] for e in rest),
                    foreign_cpu=r.get("info", {}).get("foreign_cpu"))
    d = r["dist"]["run"]
    if d.get("returncodes") != [0, 0] or not d.get("trainers"):
        raise SystemExit(f"DistDGL run failed: {d.get('returncodes')}")
    eps = d["epoch_s"]
    per_ep = [[t["epochs"][e] for t in d["trainers"]] for e in range(len(eps))]
    rest = per_ep[1:] or per_ep
    last = per_ep[-1]
    seeds = sum(t["seeds"] for t in last)
    return dict(epoch_s=_steady(eps), epochs=eps, startup_s=d["startup_s"], job_wall_s=d["job_wall_s"],
                job_overhead_s=d["job_wall_s"] - sum(eps), partition_s=r["dist"].get("partition_s"), steal_frac=steal,
                train_acc=sum(t["train_acc"] * t["seeds"] for t in last) / max(seeds, 1),
                loss=statistics.mean(t["loss"] for t in last),
                stages={k: statistics.median(max(t[k + "_s"] for t in ep) for ep in rest)
                        for k in ("sample", "fetch", "compute")},
                best_compute_s=min(max(t["compute_s"] for t in ep) for ep in rest))


def _roofline_module():
    """benchmarks/roofline.py (torch imported only when the roofline runs), with the heap the
    trainers run with, so its rates are the workers' rates: torch's huge-page allocation
    (``THP_MEM_ALLOC_ENABLE``, which torch reads once, at its first allocation; unset again
    after it so that DGL's runs do not inherit it) and freed memory kept (``keep_freed_memory``).
    Without them a product whose output passes glibc's mmap threshold (32 MiB: layer 1's at 1M
    nodes, [36421, 256]) faults its pages in on every call: 71-77 against 96-103 GFLOP/s on one
    thread here, which loosened the 1M bound."""
    if "torch" in sys.modules:
        raise RuntimeError("epoch.py: torch was imported before the roofline could set the workers' heap")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gnnscale.process.launch import thread_env
    from gnnscale.process.memory import keep_freed_memory

    prev = os.environ.get("THP_MEM_ALLOC_ENABLE")
    os.environ["THP_MEM_ALLOC_ENABLE"] = thread_env(1, 1)["THP_MEM_ALLOC_ENABLE"]
    try:
        import torch

        torch.empty(1)  # the first allocation: torch reads the variable now
        keep_freed_memory()  # while the variable is set (it checks it); measure() records the state
        import roofline
    finally:
        if prev is None:
            del os.environ["THP_MEM_ALLOC_ENABLE"]
        else:
            os.environ["THP_MEM_ALLOC_ENABLE"] = prev
    return roofline


def _compute_split(parts_dir: str, roof: dict, tag: str, args) -> dict:
    """compute_split.py on the 1-process folder, in a process of its own with a worker's thread
    and allocator environment (``launch.thread_env``), printed beside the roofline's parts."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import compute_split

    from gnnscale.process.launch import thread_env

    out = os.path.join(args.workdir, "compute_split.json")
    cmd = [sys.executable, os.path.join(here, "compute_split.py"), parts_dir,
           "--threads", "2", "--repeats", "3", "--json", out]
    if args.roofline_steps:
        cmd += ["--steps", str(args.roofline_steps)]
    _run(cmd, env=dict(os.environ, **thread_env(2, 1)))
    s = json.load(open(out))
    print("\n".join(tag + line for line in compute_split.describe(s, roof)), flush=True)
    return s


def ratio(a: list[float], b: list[float]) -> float:
    return statistics.median(a) / statistics.median(b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000", help="R-MAT node counts (comma-separated)")
    ap.add_argument("--what", default="1proc,dist2", help="settings: 1proc, dist2")
    ap.add_argument("--what-large", default="1proc",
                    help="settings for sizes of 1M nodes and more (DistDGL's partitioning of 1M takes minutes)")
    ap.add_argument("--repeats", type=int, default=2, help="alternating repeats (>= 2 for a claim)")
    ap.add_argument("--epochs", type=int, default=None,
                    help=f"epochs per run, the first a warm-up (default: {DEFAULT_EPOCHS})")
    ap.add_argument("--workdir", default="/tmp/gnnscale_epoch_bench")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--roofline-only", action="store_true",
                    help="count the epochs' work and measure the machine's rates, print the bounds; no training, no DGL")
    ap.add_argument("--no-roofline", action="store_true", help="leave the roofline out")
    ap.add_argument("--roofline-steps", type=int, default=None, metavar="N",
                    help="count only each rank's first N steps, scaled to the epoch (default: every step)")
    ap.add_argument("--roofline-buffer-mib", type=int, default=1024, help="the copy-bandwidth buffer (MiB)")
    ap.add_argument("--no-compute-split", action="store_true",
                    help="leave out the 1-process compute split (compute_split.py: the real steps' matrix products "
                         "timed apart from the rest, beside the roofline's parts; it runs with the roofline only)")
    ap.add_argument("--vs-checkout", default=None, metavar="DIR",
                    help="time this other checkout of gnnscale instead of DGL (same graphs and flags)")
    ap.add_argument("--smoke", action="store_true",
                    help="a 5,000-node R-MAT graph, 1proc, 2 epochs, 1 repeat, the roofline on 2 steps; without "
                         "DGL's environment: the roofline and gnnscale's run alone")
    args = ap.parse_args()
    gnnscale_alone = False
    if args.smoke:
        args.sizes, args.what, args.epochs, args.repeats = "5000", "1proc", 2, 1
        args.roofline_steps, args.roofline_buffer_mib, args.no_compute_split = 2, 64, True
        if dgl_python()[0] is None:
            print(f"{dgl_python()[1]}: gnnscale's side alone", flush=True)
            args.roofline_only = gnnscale_alone = True
    if args.epochs is not None and args.epochs < 2:
        ap.error(f"--epochs: expected at least 2 (the first is a warm-up and is not timed), found {args.epochs}")
    if args.vs_checkout:
        return versus_checkout(args)
    if args.roofline_only and args.no_roofline:
        raise SystemExit("--roofline-only and --no-roofline leave nothing to do; give one of them")
    if not args.roofline_only and dgl_python()[0] is None:
        raise SystemExit(dgl_python()[1])
    sys.path.insert(0, PEERS)
    import graphgen

    os.makedirs(args.workdir, exist_ok=True)
    results = {"setup": {"model": "GraphSAGE mean, 3 layers, hidden 256, dropout 0.5, Adam 3e-3",
                         "fanouts_from_seeds": [5, 10, 15], "batch_size": 1024,
                         "epochs_per_run": args.epochs or DEFAULT_EPOCHS,
                         "repeats": 0 if args.roofline_only else args.repeats, "cpu_count": os.cpu_count(),
                         "roofline_only": args.roofline_only}, "graphs": []}
    rl = None if args.no_roofline else _roofline_module()
    for n in (int(s) for s in args.sizes.split(",")):
        name, ddir = _rmat_dataset(graphgen, n, args.workdir)
        what = (args.what_large if n >= 1_000_000 else args.what).split(",")
        parts = {}
        for p in sorted({1 if w == "1proc" else 2 for w in what}):
            pd = os.path.join(args.workdir, f"{name}-p{p}")
            if not os.path.exists(os.path.join(pd, "meta.json")):
                wall, _ = _run([sys.executable, "-m", "gnnscale", "partition", "--dataset", f"dir:{ddir}",
                                "--parts", str(p), "--method", "metis", "--balance", "nodes,train,edges",
                                "--out", pd])
                print(f"[{name}] gnnscale partition into {p}: {wall:.1f} s", flush=True)
            parts[p] = pd
        epochs = epochs_per_run(n, args.epochs)
        graph = {"graph": name, "num_nodes": n, "epochs_per_run": epochs, "settings": {}}
        for w in what:
            counts = rates = None
            if rl is not None:
                counts = rl.count(parts[1 if w == "1proc" else 2], 2 if w == "1proc" else 1, args.roofline_steps)
                rates = rl.measure(counts, args.roofline_buffer_mib)
            if args.roofline_only:
                roof = rl.finish(counts, rates)
                roof["table"] = rl.table(roof, None, None)[1]
                graph["settings"][w] = {"roofline": roof}
                print("\n".join(f"[{name} {w}] " + line for line in rl.describe(roof)), flush=True)
                if gnnscale_alone:
                    g = gnnscale_run(parts[1 if w == "1proc" else 2], 1 if w == "1proc" else 2,
                                     2 if w == "1proc" else 1, epochs, os.path.join(args.workdir, f"m-{name}-{w}.json"))
                    graph["settings"][w]["gnnscale"] = g
                    print(f"[{name} {w}] epoch gnnscale {g['epoch_s']:.2f} s (no DGL run to compare)", flush=True)
                if w == "1proc" and not args.no_compute_split:
                    roof["compute_split"] = _compute_split(parts[1], roof, f"[{name} {w}] ", args)
                continue
            runs, measured = [], [rates] if rates is not None else []
            for r in range(args.repeats):
                tag = f"{name}-{w}-{r}"
                if w == "1proc":
                    g = gnnscale_run(parts[1], 1, 2, epochs, os.path.join(args.workdir, f"m-{tag}.json"))
                    d = dgl_run("train", n, epochs, os.path.join(args.workdir, f"dgl-{tag}.json"))
                else:
                    g = gnnscale_run(parts[2], 2, 1, epochs, os.path.join(args.workdir, f"m-{tag}.json"))
                    d = dgl_run("dist", n, epochs, os.path.join(args.workdir, f"dgl-{tag}.json"))
                runs.append({"gnnscale": g, "dgl": d})
                line = (f"[{name} {w} repeat {r}] epoch gnnscale {g['epoch_s']:.2f} s (sample {g['stages']['sample']:.2f}"
                        f" fetch {g['stages']['fetch']:.2f} compute {g['stages']['compute']:.2f}, train acc "
                        f"{g['train_acc']:.3f}) | DGL {d['epoch_s']:.2f} s (sample {d['stages']['sample']:.2f} fetch "
                        f"{d['stages']['fetch']:.2f} compute {d['stages']['compute']:.2f}, train acc {d['train_acc']:.3f})")
                line += f" | steal {_pct(g['steal_frac'])} vs {_pct(d['steal_frac'])}"
                if w == "dist2":
                    line += (f" | start-up {g['startup_s']:.2f} vs {d['startup_s']:.2f} s, job overhead "
                             f"{g['job_overhead_s']:.1f} vs {d['job_overhead_s']:.1f} s")
                print(line, flush=True)
                if rl is not None:  # the machine's rates again: the best of the run is its capability
                    measured.append(rl.measure(counts, args.roofline_buffer_mib))
                    rates = rl.best_rates(rates, measured[-1])
            rec = {"runs": runs,
                   "epoch_ratio": ratio([x["gnnscale"]["epoch_s"] for x in runs], [x["dgl"]["epoch_s"] for x in runs]),
                   "gnnscale_epoch_median_s": statistics.median(x["gnnscale"]["epoch_s"] for x in runs),
                   "dgl_epoch_median_s": statistics.median(x["dgl"]["epoch_s"] for x in runs),
                   "gnnscale_train_acc": [x["gnnscale"]["train_acc"] for x in runs],
                   "dgl_train_acc": [x["dgl"]["train_acc"] for x in runs]}
            if w == "dist2":
                rec["startup_ratio"] = ratio([x["gnnscale"]["startup_s"] for x in runs],
                                             [x["dgl"]["startup_s"] for x in runs])
                rec["job_overhead_ratio"] = ratio([x["gnnscale"]["job_overhead_s"] for x in runs],
                                                  [x["dgl"]["job_overhead_s"] for x in runs])
            if rl is not None:
                roof = rl.finish(counts, rates)
                med = lambda side: dict(  # noqa: E731
                    {k: statistics.median(x[side]["stages"][k] for x in runs) for k in ("sample", "fetch", "compute")},
                    epoch=statistics.median(x[side]["epoch_s"] for x in runs))
                lines, roof["table"] = rl.table(roof, med("gnnscale"), med("dgl"),
                                                peer="DGL" if w == "1proc" else "DistDGL")
                roof["paired"] = rl.paired(counts, measured, [x["gnnscale"]["stages"]["compute"] for x in runs],
                                           [x["dgl"]["stages"]["compute"] for x in runs])
                roof["best"] = rl.best_of(roof, min(x["gnnscale"]["best_compute_s"] for x in runs),
                                          min(x["dgl"]["best_compute_s"] for x in runs))
                peer = "DGL" if w == "1proc" else "DistDGL"
                lines += [rl.describe_paired(roof["paired"], peer=peer), rl.describe_best(roof["best"], peer=peer)]
                rec["roofline"] = roof
                print("\n".join(f"[{name} {w}] " + line for line in rl.describe(roof) + lines), flush=True)
                if w == "1proc" and not args.no_compute_split:
                    roof["compute_split"] = _compute_split(parts[1], roof, f"[{name} {w}] ", args)
            graph["settings"][w] = rec
            msg = f"[{name} {w}] epoch ratio gnnscale/DGL (medians of {args.repeats}): {rec['epoch_ratio']:.2f}"
            if w == "dist2":
                msg += (f"; start-up ratio {rec['startup_ratio']:.2f}; job overhead ratio "
                        f"{rec['job_overhead_ratio']:.2f}")
            print(msg, flush=True)
        results["graphs"].append(graph)
        if args.json:  # after each graph: nothing lost if a later one fails
            os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
            json.dump(results, open(args.json, "w"), indent=1)
    if args.json:
        print(f"written to {args.json}")


def _cpu(run: dict) -> str:
    return "-" if run.get("epoch_cpu_s") is None else f"{run['epoch_cpu_s']:.3f} s"


def _cpu_ratio(runs: list[dict]) -> float | None:
    """The ratio of the medians of the epochs' CPU seconds (all ranks' processes, every thread):
    what the code costs, without the wall clock's waits for a core that other jobs or the
    hypervisor hold (None where a side's metrics have no CPU figure: a checkout before it)."""
    if any(x[s].get("epoch_cpu_s") is None for x in runs for s in ("new", "old")):
        return None
    return ratio([x["new"]["epoch_cpu_s"] for x in runs], [x["old"]["epoch_cpu_s"] for x in runs])


def versus_checkout(args) -> None:
    """This checkout against ``--vs-checkout``: epochs of the same runs, alternating, ratio of medians."""
    sys.path.insert(0, PEERS)
    import graphgen

    os.makedirs(args.workdir, exist_ok=True)
    env, cwd = checkout_env(args.vs_checkout, args.workdir, "-old")
    env_here, here = checkout_env(ROOT, args.workdir, "-new")  # this checkout laid out as the other
    results = {"setup": {"model": "GraphSAGE mean, 3 layers, hidden 256, dropout 0.5, Adam 3e-3",
                         "baseline": os.path.abspath(args.vs_checkout), "repeats": args.repeats,
                         "epochs_per_run": args.epochs or DEFAULT_EPOCHS, "cpu_count": os.cpu_count()},
               "graphs": []}
    for n in (int(v) for v in args.sizes.split(",")):
        name, ddir = _rmat_dataset(graphgen, n, args.workdir)
        epochs = epochs_per_run(n, args.epochs)
        graph = {"graph": name, "num_nodes": n, "epochs_per_run": epochs, "settings": {}}
        for w in args.what.split(","):
            p = 1 if w == "1proc" else 2
            pd = os.path.join(args.workdir, f"{name}-p{p}")
            if not os.path.exists(os.path.join(pd, "meta.json")):
                _run([sys.executable, "-m", "gnnscale", "partition", "--dataset", f"dir:{ddir}", "--parts", str(p),
                      "--method", "metis", "--balance", "nodes,train,edges", "--out", pd])
            workers, threads = (1, 2) if w == "1proc" else (2, 1)
            sides = [("new", env_here, here), ("old", env, cwd)]
            for side, e, c in sides:  # one untimed run each: bytecode and numba caches compiled alike
                gnnscale_run(pd, workers, threads, 1, os.path.join(args.workdir, f"m-{name}-{w}-{side}-warm.json"),
                             env=e, cwd=c)
            runs = []
            for r in range(args.repeats):
                got = {}
                for side, e, c in (sides if r % 2 == 0 else sides[::-1]):  # alternate which runs first
                    got[side] = gnnscale_run(pd, workers, threads, epochs,
                                             os.path.join(args.workdir, f"m-{name}-{w}-{side}-{r}.json"), env=e, cwd=c)
                runs.append(got)
                print(f"[{name} {w} repeat {r}] epoch this checkout {got['new']['epoch_s']:.3f} s "
                      f"({_cpu(got['new'])} CPU), the other {got['old']['epoch_s']:.3f} s ({_cpu(got['old'])} CPU)",
                      flush=True)
            rec = {"runs": runs, "epoch_ratio": ratio([x["new"]["epoch_s"] for x in runs],
                                                      [x["old"]["epoch_s"] for x in runs]),
                   "cpu_ratio": _cpu_ratio(runs),
                   "new_epoch_median_s": statistics.median(x["new"]["epoch_s"] for x in runs),
                   "old_epoch_median_s": statistics.median(x["old"]["epoch_s"] for x in runs),
                   "new_train_acc": [x["new"]["train_acc"] for x in runs],
                   "old_train_acc": [x["old"]["train_acc"] for x in runs]}
            graph["settings"][w] = rec
            print(f"[{name} {w}] epoch ratio this checkout / the other (medians of {args.repeats}): "
                  f"{rec['epoch_ratio']:.3f} wall, "
                  + ("-" if rec["cpu_ratio"] is None else f"{rec['cpu_ratio']:.3f}") + " CPU", flush=True)
        results["graphs"].append(graph)
        if args.json:
            os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
            json.dump(results, open(args.json, "w"), indent=1)
    if args.json:
        print(f"written to {args.json}")


if __name__ == "__main__":
    main()
