"""PyG-shaped loading (gnnscale.pyg) beside the engine's block sampler, in the same run (issue 46).

One graph (below: 100,000 nodes, average degree 20, 128 features),
fan-outs 15,10,5 from the seeds, batch 1024 shuffled training nodes, 2 threads. Two pairs,
timed alternately (engine, PyG-shaped, engine, ...) since the machine is noisy; ratios of medians:

- sampler: ``GnnscaleSampler.sample_from_nodes`` (PyG's ``SamplerOutput``: node, row, col,
  e_id, per-hop counts) against ``samplers.NeighborSampler.sample`` (the engine's blocks);
- loader: iterating ``gnnscale.pyg.NeighborLoader`` (PyG's ``NodeLoader``: sampling, then PyG's
  ``filter_data`` gathering x, y, masks and e_id into a ``Data``) against the engine's sample plus
  the gather of its input rows' x and its seeds' y (what the engine's loader fetches).

The PyG shape draws each node's in-edges once (at the hop that reached it); the engine's blocks
draw every destination of every hop (the seeds again at hop 2, ...), so they draw more edges.

A third pair (``--epoch-runs``, default 2 runs per side): one training epoch of a plain PyG loop
(``gnnscale.pyg.NeighborLoader`` + PyG's ``torch_geometric.nn.models.GraphSAGE``, Adam,
zero_grad/forward/loss/backward/step; once calling ``model(x, edge_index)`` and once with
``num_sampled_nodes_per_hop``/``num_sampled_edges_per_hop`` so PyG's ``trim_to_layer`` drops the
rows and edges a layer no longer needs) against ``gnnscale.train(model="torch_geometric.nn.models:
GraphSAGE")`` (the engine's loop, one worker, the same model, fan-outs, batch, threads), timed
alternately; each run's figure is the median epoch after its first; the report gives the ratio of
medians of seconds per epoch (PyG loop / engine: above 1, the plain loop is slower).

The graph is the peers' R-MAT 100k (``--graph rmat``: ``../shared/peers/graphgen.py``, 100,000 nodes,
degree 20, 128 features, 10% training nodes, as benchmarks/sampler.py) or ``datasets.synthetic``
(``--graph synthetic``, the smoke run's).

    nice -n 10 python benchmarks/pyg_loader.py --threads 1 --json results/pyg_loader.json
    python benchmarks/pyg_loader.py --smoke
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from types import SimpleNamespace

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import REPO, write_json  # noqa: E402

from gnnscale.datasets.synthetic import generate_synthetic  # noqa: E402
from gnnscale.pyg import GnnscaleSampler, NeighborLoader  # noqa: E402
from gnnscale.samplers import NeighborSampler  # noqa: E402
from torch_geometric.data import Data  # noqa: E402
from torch_geometric.nn.models import GraphSAGE  # noqa: E402
from torch_geometric.sampler import NodeSamplerInput  # noqa: E402

USER_MODEL = "torch_geometric.nn.models:GraphSAGE"


def rmat_graph(num_nodes: int, avg_degree: float, features: int) -> Data:
    """The peers' R-MAT graph (``graphgen.load_graph``, cached in /tmp/peers/cache) as a ``Data``:
    x [N, F] float32, y [N] int64, edge_index [2, E] int64, train_mask [N] bool (10% of the nodes)."""
    peers = os.environ.get("GNNSCALE_PEERS", str(REPO.parent / "shared" / "peers"))
    sys.path.insert(0, peers)
    import graphgen

    spec = SimpleNamespace(graph="synthetic", num_classes=16, train_frac=0.1, seed=0, rmat="0.45,0.22,0.22,0.11",
                           cache_dir="/tmp/peers/cache", planetoid_dir="", planetoid_split="frac",
                           planetoid_missing_allx="error", num_nodes=num_nodes, avg_degree=avg_degree,
                           feat_dim=features)
    _, g = graphgen.load_graph(spec, log=lambda *a: print(*a, file=sys.stderr))
    n = int(g["num_nodes"])
    train_mask = torch.zeros(n, dtype=torch.bool)
    train_mask[torch.as_tensor(g["train_idx"])] = True
    edge_index = torch.stack([torch.as_tensor(g["src"]), torch.as_tensor(g["dst"])])
    return Data(x=torch.as_tensor(g["x"]), y=torch.as_tensor(g["y"]), edge_index=edge_index, num_nodes=n,
                train_mask=train_mask)


def steady(epochs: list[float]) -> float:
    """A run's epoch figure: the median epoch after the first (which pays warm-up)."""
    return statistics.median(epochs[1:] if len(epochs) > 1 else epochs)


def pyg_loop_epochs(data: Data, fanouts: list[int], args, trim: bool, classes: int) -> list[float]:
    """Seconds of each of ``args.epochs`` epochs of a plain PyG loop (PyG's GraphSAGE, Adam)."""
    torch.manual_seed(0)
    loader = NeighborLoader(data, num_neighbors=fanouts, input_nodes=data.train_mask, batch_size=args.batch_size,
                            shuffle=True, seed=0)
    model = GraphSAGE(data.num_features, hidden_channels=args.hidden, num_layers=len(fanouts),
                      out_channels=classes)
    opt = torch.optim.Adam(model.parameters(), lr=0.003)
    times = []
    for _ in range(args.epochs):
        model.train()
        t0 = time.perf_counter()
        for batch in loader:
            opt.zero_grad()
            if trim:
                out = model(batch.x, batch.edge_index, num_sampled_nodes_per_hop=batch.num_sampled_nodes,
                            num_sampled_edges_per_hop=batch.num_sampled_edges)
            else:
                out = model(batch.x, batch.edge_index)
            loss = F.cross_entropy(out[:batch.batch_size], batch.y[:batch.batch_size])
            loss.backward()
            opt.step()
        times.append(time.perf_counter() - t0)
    return times


def engine_epochs(data: Data, fanouts: list[int], args, cache: str) -> list[float]:
    """Seconds of each epoch of ``gnnscale.train(data, model=PyG's GraphSAGE)``, one worker."""
    import gnnscale

    r = gnnscale.train(data, workers=1, threads=args.threads, model=USER_MODEL, epochs=args.epochs,
                       fanouts=fanouts, batch_size=args.batch_size, hidden=args.hidden, lr=0.003, dropout=0.0,
                       eval_every=10 ** 6, verify=False, seed=0, cache_dir=cache)
    return [float(h["epoch_seconds"]) for h in r["epochs"]]


def timed(fn, min_seeds: int) -> dict:
    """Run ``fn() -> iterator of (seeds, edges)`` until ``min_seeds`` seeds are done."""
    n_seeds = n_edges = n_batches = 0
    t0 = time.perf_counter()
    while n_seeds < min_seeds:
        for seeds, edges in fn():
            n_seeds, n_edges, n_batches = n_seeds + seeds, n_edges + edges, n_batches + 1
            if n_seeds >= min_seeds:
                break
    dt = time.perf_counter() - t0
    return dict(seconds=dt, seeds=n_seeds, seeds_per_s=n_seeds / dt, mean_edges=n_edges / n_batches)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num-nodes", type=int, default=100_000)
    ap.add_argument("--avg-degree", type=float, default=20)
    ap.add_argument("--features", type=int, default=128)
    ap.add_argument("--fanouts", default="15,10,5")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--repeats", type=int, default=3, help="alternating runs per side")
    ap.add_argument("--min-seeds", type=int, default=20480, help="seeds per timed run")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--graph", choices=("rmat", "synthetic"), default="rmat")
    ap.add_argument("--hidden", type=int, default=256, help="GraphSAGE's hidden width (epoch pair)")
    ap.add_argument("--epochs", type=int, default=3, help="epochs per epoch-pair run (the first is not counted)")
    ap.add_argument("--epoch-runs", type=int, default=2, help="alternating epoch-pair runs per side (0: skip)")
    ap.add_argument("--smoke", action="store_true", help="5,000 nodes, 16 features, 1 run per side")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.smoke:
        args.num_nodes, args.features, args.repeats, args.min_seeds, args.batch_size = 5000, 16, 1, 2048, 256
        args.graph, args.hidden, args.epochs, args.epoch_runs = "synthetic", 16, 2, 1
    fanouts = [int(f) for f in args.fanouts.split(",")]
    torch.set_num_threads(args.threads)
    # both loaders as the engine's workers run them (a user's own process keeps the serial kernels): parallel with several threads, as in a worker the launcher started
    # (samplers.cpu_kernels.WORKER_THREADS_ENV)
    os.environ["GNNSCALE_WORKER_THREADS"] = str(args.threads)
    try:
        import numba

        numba.set_num_threads(args.threads)
    except ImportError:
        pass

    if args.graph == "rmat":
        data = rmat_graph(args.num_nodes, args.avg_degree, args.features)
    else:
        data = generate_synthetic(num_nodes=args.num_nodes, avg_degree=args.avg_degree,
                                  num_features=args.features, train_frac=0.3, seed=0)
    train = torch.nonzero(data.train_mask).flatten()
    pyg = GnnscaleSampler(data.edge_index, data.num_nodes, fanouts, seed=0)
    engine = NeighborSampler(pyg.indptr, pyg.indices, fanouts, seed=0)
    loader = NeighborLoader(data, num_neighbors=fanouts, input_nodes=train, batch_size=args.batch_size,
                            shuffle=True, seed=0)
    gen = torch.Generator().manual_seed(0)

    def engine_batches(fetch: bool):
        perm = train[torch.randperm(train.numel(), generator=gen)]
        for step, seeds in enumerate(torch.split(perm, args.batch_size)):
            mb = engine.sample(seeds, epoch=0, step=step)
            if fetch:
                data.x[mb.input_ids], data.y[seeds]
            yield seeds.numel(), mb.num_sampled_edges

    def pyg_samples():
        perm = torch.randperm(train.numel(), generator=gen)
        for ids in torch.split(perm, args.batch_size):
            out = pyg.sample_from_nodes(NodeSamplerInput(input_id=ids, node=train[ids]))
            yield ids.numel(), out.row.numel()

    def pyg_loader():
        for batch in loader:
            yield batch.batch_size, batch.edge_index.size(1)

    pairs = {"sampler": (lambda: engine_batches(False), pyg_samples),
             "loader": (lambda: engine_batches(True), pyg_loader)}
    for eng, ours in pairs.values():  # warm-up: numba's compile / cache load, first allocations
        next(iter(eng())), next(iter(ours()))
    report = dict(graph=dict(kind=args.graph, num_nodes=data.num_nodes, train_nodes=int(train.numel()),
                             num_edges=data.edge_index.size(1), features=args.features),
                  fanouts=fanouts, batch_size=args.batch_size, threads=args.threads, kernels=pyg.kernels.name,
                  target_ratio=0.8, pairs={})
    for name, (eng, ours) in pairs.items():
        runs = {"engine": [], "pyg": []}
        for r in range(args.repeats):
            runs["engine"].append(timed(eng, args.min_seeds))
            runs["pyg"].append(timed(ours, args.min_seeds))
            print(f"[{name}] run {r}: engine {runs['engine'][-1]['seeds_per_s']:,.0f} seeds/s "
                  f"({runs['engine'][-1]['mean_edges']:,.0f} edges/batch), PyG-shaped "
                  f"{runs['pyg'][-1]['seeds_per_s']:,.0f} seeds/s ({runs['pyg'][-1]['mean_edges']:,.0f} edges/batch)",
                  flush=True)
        med = {k: statistics.median(r["seeds_per_s"] for r in v) for k, v in runs.items()}
        report["pairs"][name] = dict(runs=runs, median_seeds_per_s=med,
                                     ratio_pyg_over_engine=med["pyg"] / med["engine"])
    print("\npair      engine seeds/s   PyG-shaped seeds/s   ratio (target >= 0.8)")
    for name, e in report["pairs"].items():
        m = e["median_seeds_per_s"]
        print(f"{name:8s} {m['engine']:15,.0f} {m['pyg']:20,.0f} {e['ratio_pyg_over_engine']:7.2f}")
    if args.epoch_runs:
        report["epoch"] = epoch_pair(data, fanouts, args)
    write_json(args.json, report)


def epoch_pair(data: Data, fanouts: list[int], args) -> dict:
    """Seconds per epoch: the engine with PyG's GraphSAGE (``--model``) and a plain PyG loop
    without and with trim_to_layer, run alternately; ratios of medians (loop / engine)."""
    classes = int(data.y.max()) + 1
    cache = tempfile.mkdtemp(prefix="gnnscale-pyg-loader-")
    sides = {"engine --model GraphSAGE": lambda: engine_epochs(data, fanouts, args, cache),
             "PyG loop": lambda: pyg_loop_epochs(data, fanouts, args, False, classes),
             "PyG loop + trim_to_layer": lambda: pyg_loop_epochs(data, fanouts, args, True, classes)}
    runs: dict[str, list[list[float]]] = {k: [] for k in sides}
    for r in range(args.epoch_runs):
        for name, fn in sides.items():
            runs[name].append(fn())
            print(f"[epoch] run {r} {name}: " + ", ".join(f"{t:.2f}" for t in runs[name][-1]) + " s", flush=True)
    med = {k: statistics.median(steady(e) for e in v) for k, v in runs.items()}
    base = med["engine --model GraphSAGE"]
    out = dict(hidden=args.hidden, epochs_per_run=args.epochs, runs=runs, median_epoch_seconds=med,
               ratio_loop_over_engine={k: v / base for k, v in med.items() if k != "engine --model GraphSAGE"})
    print("\nepoch (s, median of runs' steady epochs)   ratio to the engine (above 1: slower)")
    for k, v in med.items():
        print(f"{k:28s} {v:8.2f} {v / base:8.2f}")
    return out


if __name__ == "__main__":
    main()
