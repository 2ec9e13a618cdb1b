"""A plain PyG loop on one process: through ``gnnscale.pyg.NeighborLoader`` against a one-process
run of ``gnnscale.pyg.start_run`` (issue 56, item 7), in the same run.

The same training epoch (PyG's ``GraphSAGE``, 2 layers, hidden 64, Adam, fan-outs 10,10, batch 32
shuffled training nodes of Cora) four ways (the last a control), each in a fresh process (a side must not inherit what
another left behind: the cause below outlived the loader that caused it), processes alternated
(plain, run over the partition folder, run in memory, plain, ...) since the machine is noisy;
each side's figure is the median epoch after a warm-up epoch, and the report gives each run's
ratio to the plain loader (above 1: slower; the goal is at most 1.2). Each run's process then
times the plain loader again (``plain_after_run``: slowed too, before the fix):

- ``plain``: ``NeighborLoader(data, ...)`` in memory;
- ``run_parts``: ``start_run(data, parts_dir=...)`` (one part), ``run.node_loader(...)``: the
  partition folder's PyG stores (the rows gathered from the memory-mapped part);
- ``run_memory``: ``start_run(data)``, ``run.node_loader(...)`` over the ``Data`` in memory;
- ``torch_only`` (the control): the same model and steps over one epoch's batches of the plain
  loader saved to a file, in a process that never imports gnnscale: what torch alone takes.

At ``--threads 2`` on a loaded machine torch's own OpenMP threads spin (its default wait policy)
and an epoch varies 10x from one to the next, ``torch_only`` as much as the others: the sides then
differ by noise. ``--omp-wait-policy PASSIVE`` (given to every side's environment) lets idle
threads sleep, and the sides' figures settle.

The cause found (issue 56): the partition stores' row gather (``data.feature_store``) was a
``numba`` ``parallel=True`` kernel called at any thread count, so its first call started numba's
OpenMP pool (``NUMBA_NUM_THREADS``, the machine's cores) in the user's process, whose idle threads
spin and take the cores from torch's own ops: the model's ``scatter_add_`` ran 5-10x slower for
the rest of the process, the plain loader's epochs too. The engine's workers never saw it (the
launcher sets ``NUMBA_NUM_THREADS`` to ``--threads``).

The second cause (issue 56, at 2 threads): the sampler's and the gather's parallel numba kernels
ran in the user's process wherever torch had 2 threads (and a cached parallel build was loaded for
the serial gather, at 1 thread too), each starting numba's pool, a second OpenMP runtime beside
torch's. Only the engine's workers run them now; a user's process never starts that pool.

    nice -n 10 python benchmarks/pyg_run_overhead.py --threads 1 --json results/pyg_run_overhead.json
    nice -n 10 python benchmarks/pyg_run_overhead.py --threads 2 --omp-wait-policy PASSIVE --json ...
    python benchmarks/pyg_run_overhead.py --smoke
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import SHARED, python_run, write_json  # noqa: E402


def _torch_only(epochs: int, threads: int, saved: str) -> dict:
    """The control: the same model and steps over saved batches, gnnscale never imported."""
    torch.set_num_threads(threads)
    from torch_geometric.nn.models import GraphSAGE

    batches, num_features, num_classes = torch.load(saved)
    torch.manual_seed(0)
    model = GraphSAGE(num_features, 64, 2, num_classes)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def epoch() -> float:
        t = time.perf_counter()
        for x, edge_index, y, size in batches:
            opt.zero_grad()
            F.cross_entropy(model(x, edge_index)[:size], y[:size]).backward()
            opt.step()
        return time.perf_counter() - t

    epoch()
    out = {"epochs": [epoch() for _ in range(epochs)]}
    assert not any(m.startswith("gnnscale") for m in sys.modules), "the control imported gnnscale"
    return out


def _save_batches(dataset: str, path: str) -> None:
    """One epoch's batches of the plain loader (x, edge_index, y, batch size) to ``path``."""
    from gnnscale.datasets import load_dataset
    from gnnscale.pyg import NeighborLoader

    data = load_dataset(dataset, root=str(SHARED / "planetoid"))
    torch.manual_seed(0)
    loader = NeighborLoader(data, num_neighbors=[10, 10], input_nodes=data.train_mask, batch_size=32, shuffle=True)
    torch.save(([(b.x, b.edge_index, b.y, int(b.batch_size)) for b in loader], data.num_features,
                int(data.num_classes)), path)


def side(name: str, epochs: int, threads: int, dataset: str) -> dict:
    """One side in this process: a warm-up epoch, then ``epochs`` timed ones; the run's sides then
    time the plain loader again in the same process (``plain_after``: what the run left behind)."""
    torch.set_num_threads(threads)
    from torch_geometric.nn.models import GraphSAGE

    from gnnscale.datasets import load_dataset
    from gnnscale.pyg import NeighborLoader, start_run

    data = load_dataset(dataset, root=str(SHARED / "planetoid"))
    plain = NeighborLoader(data, num_neighbors=[10, 10], input_nodes=data.train_mask, batch_size=32, shuffle=True)
    run = None
    if name == "plain":
        loader = plain
    else:
        parts = tempfile.mkdtemp(prefix="gnnscale-run-overhead-") if name == "run_parts" else None
        run = start_run(data, parts_dir=parts, timeout=60)
        loader = run.node_loader([10, 10], input_nodes="train", batch_size=32, shuffle=True)
    torch.manual_seed(0)
    model = GraphSAGE(data.num_features, 64, 2, int(data.num_classes))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def epoch(ld) -> float:
        t = time.perf_counter()
        for batch in ld:
            opt.zero_grad()
            out = model(batch.x, batch.edge_index)[:batch.batch_size]
            F.cross_entropy(out, batch.y[:batch.batch_size]).backward()
            opt.step()
        return time.perf_counter() - t

    epoch(loader)  # warm-up: compilation, first touches of the files
    out = {"epochs": [epoch(loader) for _ in range(epochs)]}
    if run is not None:
        out["plain_after"] = [epoch(plain) for _ in range(epochs)]
        run.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1, help="torch's intra-op threads (torch.set_num_threads)")
    ap.add_argument("--runs", type=int, default=3, help="processes per side (alternated), each timing --epochs")
    ap.add_argument("--epochs", type=int, default=3, help="timed epochs per process (after a warm-up epoch)")
    ap.add_argument("--dataset", default="planetoid:cora")
    ap.add_argument("--omp-wait-policy", default=None, choices=["ACTIVE", "PASSIVE"],
                    help="OMP_WAIT_POLICY in every side's environment (default: as this process has it)")
    ap.add_argument("--saved", default=None, help=argparse.SUPPRESS)  # the control's batches
    ap.add_argument("--json", default=None)
    ap.add_argument("--side", default=None, help=argparse.SUPPRESS)  # one side, this process (JSON on stdout)
    ap.add_argument("--smoke", action="store_true", help="1 process per side, 1 timed epoch")
    args = ap.parse_args()
    if args.side == "save":
        _save_batches(args.dataset, args.saved)
        return
    if args.side == "torch_only":
        print(json.dumps(_torch_only(args.epochs, args.threads, args.saved)))
        return
    if args.side:
        print(json.dumps(side(args.side, args.epochs, args.threads, args.dataset)))
        return
    runs, epochs = (1, 1) if args.smoke else (args.runs, args.epochs)
    sides = ["plain", "run_parts", "run_memory", "torch_only"]
    times: dict[str, list[float]] = {k: [] for k in sides}
    after: dict[str, list[float]] = {k: [] for k in ("run_parts", "run_memory")}
    env = dict(os.environ)
    if args.omp_wait_policy:
        env["OMP_WAIT_POLICY"] = args.omp_wait_policy
    saved = os.path.join(tempfile.mkdtemp(prefix="gnnscale-run-overhead-"), "batches.pt")
    # --smoke: the sides that import gnnscale run as forks of this process (python_run), which has imported
    # torch and run no op: its figures are not the point there, the script's code is; the control, which
    # must not find gnnscale imported, still runs in a fresh interpreter
    r = python_run([__file__, "--side", "save", "--saved", saved, "--dataset", args.dataset], env=env, fork=args.smoke)
    if r.returncode:
        raise SystemExit(f"saving the control's batches failed:\n{r.stderr[-3000:]}")
    for _ in range(runs):
        for k in sides:  # each side in a fresh process: what one side leaves behind cannot slow another
            r = python_run([__file__, "--side", k, "--epochs", str(epochs), "--threads", str(args.threads),
                            "--dataset", args.dataset, "--saved", saved], env=env,
                           fork=args.smoke and k != "torch_only")
            if r.returncode:
                raise SystemExit(f"side {k} failed:\n{r.stderr[-3000:]}")
            got = json.loads(r.stdout.strip().splitlines()[-1])
            times[k] += got["epochs"]
            if k in after:
                after[k] += got["plain_after"]
    med = {k: statistics.median(v) for k, v in times.items()}
    med_after = {k: statistics.median(v) for k, v in after.items()}
    res = {"dataset": args.dataset, "threads": args.threads, "omp_wait_policy": env.get("OMP_WAIT_POLICY"),
           "load_average": os.getloadavg(), "processes_per_side": runs, "epochs_per_process": epochs,
           "seconds_per_epoch": times, "median": med, "plain_after_run": after, "median_plain_after_run": med_after,
           "ratio_run_parts": med["run_parts"] / med["plain"], "ratio_run_memory": med["run_memory"] / med["plain"],
           "ratio_plain_over_torch_only": med["plain"] / med["torch_only"], "goal": 1.2}
    for k in sides:
        print(f"{k:10s} median epoch {med[k]:.3f} s  ({', '.join(f'{t:.3f}' for t in times[k])})")
    for k in after:
        print(f"plain loader after {k} in its process: median epoch {med_after[k]:.3f} s")
    print(f"ratio run_parts / plain {res['ratio_run_parts']:.2f}, run_memory / plain {res['ratio_run_memory']:.2f} "
          f"(goal at most 1.2); plain / torch_only {res['ratio_plain_over_torch_only']:.2f}")
    write_json(args.json, res)


if __name__ == "__main__":
    main()
