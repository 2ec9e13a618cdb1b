"""The own-part PyG graph store against the whole-topology store: memory per rank and seeds per second.

A PyG loop (``gnnscale.pyg.init_distributed`` over a partition folder, ``run.node_loader`` over the
training split, PyG's ``GraphSAGE`` in DDP, Adam) on the peers' R-MAT graph
(``../shared/peers/graphgen.py``: degree 20, 128 features, 16 classes, 10 % training nodes), written
as a ``dir:`` dataset and cut by ``gnnscale partition`` (METIS), run with ``graph_store="own"`` and
``graph_store="whole"`` (:mod:`gnnscale.pyg.own_part`):

- memory (``--memory-ranks``, default 4): each rank's anonymous resident memory, polled from
  ``/proc/self/status`` ``RssAnon`` every 5 ms by a thread of the rank (peak, and at the start of the
  worker: the forked interpreter with torch; ``VmHWM`` (peak RSS, file pages included) beside it),
  against the rank's share of the graph: its part's ``indptr.npy``, ``indices.npy`` and ``x.npy``
  bytes (topology + features). Goal: own-part peak <= 1.5x the share.
- speed (``--speed-ranks``, default 2): seeds per second over ``--batches`` steps after one warm-up
  step (every rank's seeds over the slowest rank's seconds), own against whole (goal >= 0.7x), and
  the bytes each rank sent per batch by category (the Communicator's counts over the timed steps).
  ``--repeats`` alternates the two stores (own, whole, own, whole, ...); the best of each is kept.

``--generator ooc`` (memory at scale): instead of R-MAT in memory, the out-of-core generator's
planted-community graph (``benchmarks/out_of_core.py``'s ``generate``: ``--nodes`` N, ``--edges`` E
directed edges written to disk a chunk at a time, ``--features`` float16 input columns, 1 % training
nodes), cut by ``partition_on_disk`` (``--memory-budget`` GB) with a seeded random assignment (a
random or hash cut needs no adjacency pass: on disk its cost is the bucketing of the edges), the parts'
rows stored float32. ``--stores`` picks the stores measured (one at a time when the machine's memory
is short). For example, 10M nodes / 200M directed edges over 4 ranks::

    nice -n 15 python benchmarks/pyg_own_part.py --generator ooc --nodes 10000000 --edges 200000000 \
        --features 16 --what memory --stores own --workdir /tmp/h56big --json results/pyg_own_part_10m_own.json

Prints a table and writes ``--json``. ``--smoke``: a 20k-node graph, 2 steps (CI-sized).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.path.join(os.path.dirname(ROOT), "shared", "peers")
HERE = os.path.dirname(os.path.abspath(__file__))


def _status() -> dict:
    """kB figures of /proc/self/status (RssAnon, RssFile, VmHWM, VmRSS)."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("RssAnon", "RssFile", "VmHWM", "VmRSS"):
                out[k] = int(v.split()[0]) * 1024
    return out


class PeakAnon:
    """A thread polling RssAnon every ``period`` seconds: ``peak`` bytes (the largest seen)."""

    def __init__(self, period: float = 0.005) -> None:
        import threading

        self.period, self.peak, self._stop = period, _status()["RssAnon"], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.peak = max(self.peak, _status()["RssAnon"])

    def start(self) -> "PeakAnon":
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _status()["RssAnon"])
        return self.peak


def worker(parts_dir: str, graph_store: str, fanouts: list[int], batch_size: int, batches: int, seed: int) -> dict:
    """One rank of the PyG loop: open the stores, then one warm-up step and ``batches`` timed steps."""
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GraphSAGE

    start = _status()
    peak = PeakAnon().start()
    from gnnscale.pyg import start_run

    t0 = time.perf_counter()
    run = start_run(parts_dir, timeout=1800, graph_store=graph_store)
    open_s = time.perf_counter() - t0
    opened = _status()
    fs = run.feature_store
    loader = run.node_loader(fanouts, "train", batch_size=batch_size, shuffle=True, seed=seed)
    classes = int(fs.graph.meta.get("num_classes") or 16)
    torch.manual_seed(seed)
    model = run.ddp(GraphSAGE(fs.feature_dim, 64, len(fanouts), classes))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    it = iter(loader)
    seeds, before, t_loop = 0, None, None
    steps = min(batches + 1, len(loader))
    for k in range(steps):  # loop over a pass's first steps
        if k == 1:
            before, t_loop = run.comm.stats.snapshot(), time.perf_counter()
        batch = next(it)
        opt.zero_grad()
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        loss = F.cross_entropy(out, batch.y[:batch.batch_size].long())
        loss.backward()
        opt.step()
        if k >= 1 and not loader.batch_sampler.is_repeat(k):
            seeds += int(batch.batch_size)
    loop_s = time.perf_counter() - t_loop if t_loop is not None else 0.0
    after = run.comm.stats.snapshot()
    timed = max(steps - 1, 1)
    per_batch = {c: (after["sent"].get(c, 0) - (before or {"sent": {}})["sent"].get(c, 0)) / timed
                 for c in after["sent"]}
    graph_sent = after["sent"].get("graph", 0)
    run.close()
    end = _status()
    return dict(rank=run.rank, store=type(run.graph_store).__name__, open_s=open_s, loop_s=loop_s, seeds=seeds,
                steps=timed, start_anon=start["RssAnon"], opened_anon=opened["RssAnon"], peak_anon=peak.stop(),
                vm_hwm=end["VmHWM"], sent_per_batch={c: v for c, v in per_batch.items() if v},
                graph_sent=graph_sent)


def _share(parts_dir: str, rank: int) -> dict:
    pdir = os.path.join(parts_dir, f"part{rank}")
    size = {f: os.path.getsize(os.path.join(pdir, f)) for f in ("indptr.npy", "indices.npy", "x.npy")}
    return dict(topology=size["indptr.npy"] + size["indices.npy"], features=size["x.npy"],
                total=sum(size.values()))


def _launch(parts_dir: str, ranks: int, store: str, args) -> list[dict]:
    from gnnscale.process.launch import launch_local

    return launch_local("pyg_own_part:worker", ranks, args=(parts_dir, store, args.fanouts, args.batch_size,
                                                           args.batches, 0), threads_per_worker=1)


def _dataset(args) -> tuple[str, str]:
    sys.path.insert(0, PEERS)
    sys.path.insert(0, HERE)
    import graphgen
    from epoch import _rmat_dataset

    return _rmat_dataset(graphgen, args.nodes, args.workdir)


def _ooc_dataset(args) -> tuple[str, str]:
    """(name, folder) of the out-of-core generator's graph (written once, kept in --workdir)."""
    sys.path.insert(0, HERE)
    from out_of_core import generate

    name = f"ooc_n{args.nodes}_e{args.edges}_f{args.features}"
    ddir = os.path.join(args.workdir, name)
    if not os.path.exists(os.path.join(ddir, "split.npz")):
        t0 = time.perf_counter()
        generate(__import__("pathlib").Path(ddir), args.nodes, args.edges, args.features, communities=64, p_in=0.9,
                 seed=0)
        print(f"[{name}] generated in {time.perf_counter() - t0:.1f} s", flush=True)
    return name, ddir


def _partition_ooc(name: str, ddir: str, parts: int, args) -> str:
    """The folder cut out of core (partition_on_disk) by a seeded random assignment, float32 rows."""
    import numpy as np

    from gnnscale.partitioning.out_of_core import partition_on_disk

    out = os.path.join(args.workdir, f"{name}-random-p{parts}")
    if not os.path.exists(os.path.join(out, "meta.json")):
        t0 = time.perf_counter()
        n = np.load(os.path.join(ddir, "y.npy"), mmap_mode="r").shape[0]
        assign = np.random.default_rng(0).integers(0, parts, n).astype(np.int32)
        meta = partition_on_disk(ddir, parts, out, method="random", parts=assign, memory_budget_gb=args.memory_budget,
                                 show_progress=False, feature_dtype="float32")
        print(f"[{name}] partition_on_disk into {parts} (random): {time.perf_counter() - t0:.1f} s, peak "
              f"{meta['out_of_core']['peak_rss_bytes'] / 1e9:.2f} GB", flush=True)
    return out


def _partition(name: str, ddir: str, parts: int, args) -> str:
    if args.generator == "ooc":
        return _partition_ooc(name, ddir, parts, args)
    out = os.path.join(args.workdir, f"{name}-p{parts}")
    if not os.path.exists(os.path.join(out, "meta.json")):
        t0 = time.perf_counter()
        from _common import run_gnnscale  # --smoke: in this process

        r = run_gnnscale(["partition", "--dataset", f"dir:{ddir}", "--parts", str(parts), "--method", "metis",
                          "--out", out], capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"gnnscale partition into {parts} failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
        print(f"[{name}] gnnscale partition into {parts}: {time.perf_counter() - t0:.1f} s", flush=True)
    return out


# -- --typed: a typed folder (format 2), gnnscale.pyg.typed_own_part against the whole typed store ------------------

def typed_worker(parts_dir: str, graph_store: str, fanouts: list[int], batch_size: int, batches: int,
                 seed: int) -> dict:
    """One rank over a typed folder: open the stores (``graph_store``), then ``batches`` node batches of the
    training split (every relation ``fanouts``), reading their rows; memory and the topology held."""
    start = _status()
    peak = PeakAnon().start()
    from gnnscale.pyg import start_run

    run = start_run(parts_dir, timeout=1800, graph_store=graph_store)
    opened = _status()
    gs = run.graph_store
    loader = run.node_loader({et: fanouts for et in gs.edge_types}, "train", batch_size=batch_size, shuffle=True,
                             seed=seed)
    it, seeds = iter(loader), 0
    for _ in range(min(batches, len(loader))):  # a pass's first batches
        seeds += int(next(it)[gs.target_type].batch_size)
    held = sum(int(c[1].numel()) for c in gs.relation_csc().values())
    out = dict(rank=run.rank, store=type(gs).__name__, held_edges=held, topology_bytes=gs.topology_bytes(),
               start_anon=start["RssAnon"], opened_anon=opened["RssAnon"], seeds=seeds,
               graph_sent=run.comm.stats.snapshot()["sent"].get("graph", 0))
    run.close()
    out.update(peak_anon=peak.stop(), vm_hwm=_status()["VmHWM"])
    return out


def _typed_folder(args) -> tuple[str, dict]:
    """A generated typed graph (papers with 64 features and 8 classes citing papers, authors writing papers, and
    the reverse; ``--nodes`` papers, 3/4 as many authors, 10 citations and 5 authors per paper, seed 0), cut into
    ``--memory-ranks`` parts (``method="random"``: the cut does not matter to what a rank holds)."""
    import torch
    from torch_geometric.data import HeteroData

    from gnnscale.partitioning import partition_graph

    n_p, n_a = args.nodes, args.nodes * 3 // 4
    out = os.path.join(args.workdir, f"typed-{n_p}-p{args.memory_ranks}")
    if not os.path.exists(os.path.join(out, "meta.json")):
        g = torch.Generator().manual_seed(0)
        data = HeteroData()
        data["paper"].x = torch.randn(n_p, 64, generator=g)
        data["paper"].y = torch.randint(0, 8, (n_p,), generator=g)
        data["paper"].train_mask = torch.rand(n_p, generator=g) < 0.1
        data["author"].num_nodes = n_a
        cites = torch.stack([torch.randint(0, n_p, (10 * n_p,), generator=g), torch.arange(n_p).repeat(10)])
        writes = torch.stack([torch.randint(0, n_a, (5 * n_p,), generator=g), torch.arange(n_p).repeat(5)])
        data["paper", "cites", "paper"].edge_index = cites
        data["author", "writes", "paper"].edge_index = writes
        data["paper", "written_by", "author"].edge_index = writes.flip(0)
        t0 = time.perf_counter()
        partition_graph(data, args.memory_ranks, out, method="random")
        print(f"[typed] partition into {args.memory_ranks}: {time.perf_counter() - t0:.1f} s", flush=True)
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    return out, dict(nodes=int(meta["num_nodes"]), edges=int(meta["num_edges"]))


def typed_memory(args) -> dict:
    """Memory per rank over a typed folder, own part against the whole typed topology (``--typed``)."""
    parts_dir, size = _typed_folder(args)
    rows = []
    for store in ("own", "whole"):
        from gnnscale.process.launch import launch_local

        for r in launch_local("pyg_own_part:typed_worker", args.memory_ranks,
                              args=(parts_dir, store, args.fanouts, args.batch_size, args.memory_batches, 0),
                              threads_per_worker=1):
            rows.append(dict(r, graph_store=store))
    mib = 1 << 20
    print(f"typed graph: {size['nodes']} nodes, {size['edges']} edges, {args.memory_ranks} ranks; MiB", flush=True)
    print(f"{'store':6} {'rank':>4} {'edges held':>11} {'topology':>9} {'start':>8} {'opened':>8} {'peak':>8} "
          f"{'VmHWM':>8}")
    for r in rows:
        print(f"{r['graph_store']:6} {r['rank']:>4} {r['held_edges']:>11} {r['topology_bytes'] / mib:9.1f} "
              f"{r['start_anon'] / mib:8.1f} {r['opened_anon'] / mib:8.1f} {r['peak_anon'] / mib:8.1f} "
              f"{r['vm_hwm'] / mib:8.1f}", flush=True)
    return {"typed_memory": {"graph": size, "ranks": args.memory_ranks, "parts_dir": parts_dir, "rows": rows}}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--generator", default="rmat", choices=["rmat", "ooc"],
                    help="rmat: the peers' R-MAT graph in memory, METIS; ooc: the out-of-core generator, random cut")
    ap.add_argument("--edges", type=int, default=None, help="ooc: directed edges (default 20 x --nodes)")
    ap.add_argument("--features", type=int, default=16, help="ooc: feature columns (float32 in the parts)")
    ap.add_argument("--memory-budget", type=float, default=4.0, help="ooc: partition_on_disk's budget, GB")
    ap.add_argument("--stores", default="own,whole", help="the graph stores measured for memory, in this order")
    ap.add_argument("--workdir", default="/tmp/pyg_own_part")
    ap.add_argument("--what", default="memory,speed")
    ap.add_argument("--memory-ranks", type=int, default=4)
    ap.add_argument("--speed-ranks", type=int, default=2)
    ap.add_argument("--fanouts", default="10,5", help="per hop from the seeds")
    ap.add_argument("--batch-size", type=int, default=512, help="seeds per rank per step")
    ap.add_argument("--batches", type=int, default=20, help="timed steps (after one warm-up step)")
    ap.add_argument("--memory-batches", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", default="pyg_own_part.json")
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--typed", action="store_true", help="memory per rank over a generated typed folder (--nodes "
                    "papers), the typed own-part store against the whole typed store (typed_memory)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.nodes, args.batches, args.memory_batches, args.repeats = 20_000, 2, 2, 1
    args.fanouts = [int(f) for f in args.fanouts.split(",")]
    os.makedirs(args.workdir, exist_ok=True)
    os.environ["PYTHONPATH"] = os.pathsep.join([HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                         if p])
    sys.path.insert(0, HERE)
    if args.smoke:  # the partitions in this process, the workers forked from one server that imported PyG
        from _common import smoke_in_process

        smoke_in_process(preload=("torch_geometric",))
    if args.typed:
        res = typed_memory(args)
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
        print(f"wrote {args.json}")
        return res
    if args.edges is None:
        args.edges = 20 * args.nodes
    name, ddir = _ooc_dataset(args) if args.generator == "ooc" else _dataset(args)
    what = args.what.split(",")
    res = {"setup": {"graph": name, "nodes": args.nodes, "generator": args.generator,
                     "edges": args.edges if args.generator == "ooc" else None,
                     "features": args.features if args.generator == "ooc" else 128, "fanouts_from_seeds": args.fanouts,
                     "batch_size_per_rank": args.batch_size, "model": "PyG GraphSAGE, hidden 64, Adam 3e-3 (DDP)",
                     "memory": "RssAnon of /proc/self/status polled every 5 ms by a thread of each rank (peak); "
                               "VmHWM beside it (file pages included)",
                     "cpu_count": os.cpu_count(), "load_average": os.getloadavg()}}
    if "memory" in what:
        parts_dir = _partition(name, ddir, args.memory_ranks, args)
        rows = []
        for store in args.stores.split(","):
            mem = dict(vars(args), batches=args.memory_batches)
            for r in _launch(parts_dir, args.memory_ranks, store, argparse.Namespace(**mem)):
                share = _share(parts_dir, r["rank"])
                rows.append(dict(store=store, rank=r["rank"], share=share, peak_anon=r["peak_anon"],
                                 start_anon=r["start_anon"], opened_anon=r["opened_anon"], vm_hwm=r["vm_hwm"],
                                 peak_over_share=r["peak_anon"] / share["total"],
                                 growth_over_share=(r["peak_anon"] - r["start_anon"]) / share["total"]))
        with open(os.path.join(parts_dir, "meta.json")) as f:
            meta = json.load(f)
        res["memory"] = {"ranks": args.memory_ranks, "parts_dir": parts_dir, "rows": rows,
                         "graph": {k: meta.get(k) for k in ("num_nodes", "num_edges", "feature_dim", "feature_dtype",
                                                            "method", "edge_cut_fraction")}}
        print(f"memory per rank, {args.memory_ranks} ranks ({name}); MiB", flush=True)
        print(f"{'store':6} {'rank':>4} {'share':>8} {'start':>8} {'opened':>8} {'peak':>8} {'VmHWM':>8} "
              f"{'peak/share':>10} {'(peak-start)/share':>18}")
        mib = 1 << 20
        for row in rows:
            print(f"{row['store']:6} {row['rank']:>4} {row['share']['total'] / mib:8.1f} "
                  f"{row['start_anon'] / mib:8.1f} "
                  f"{row['opened_anon'] / mib:8.1f} {row['peak_anon'] / mib:8.1f} {row['vm_hwm'] / mib:8.1f} "
                  f"{row['peak_over_share']:10.2f} {row['growth_over_share']:18.2f}", flush=True)
    if "speed" in what:
        parts_dir = _partition(name, ddir, args.speed_ranks, args)
        runs: dict = {"own": [], "whole": []}
        for _ in range(args.repeats):
            for store in ("own", "whole"):
                got = _launch(parts_dir, args.speed_ranks, store, args)
                rate = sum(r["seeds"] for r in got) / max(max(r["loop_s"] for r in got), 1e-9)
                sent = {}
                for r in got:
                    for c, v in r["sent_per_batch"].items():
                        sent[c] = sent.get(c, 0.0) + v / len(got)
                runs[store].append(dict(seeds_per_s=rate, open_s=max(r["open_s"] for r in got),
                                        bytes_per_batch_per_rank=sent, graph_sent=[r["graph_sent"] for r in got]))
                print(f"speed {store:5}: {rate:9.1f} seeds/s (open {runs[store][-1]['open_s']:.1f} s); bytes sent per "
                      f"batch per rank: " + ", ".join(f"{c} {v / 1024:.1f} KiB" for c, v in sorted(sent.items())),
                      flush=True)
        best = {s: max(runs[s], key=lambda x: x["seeds_per_s"]) for s in runs}
        ratio = best["own"]["seeds_per_s"] / best["whole"]["seeds_per_s"]
        res["speed"] = {"ranks": args.speed_ranks, "parts_dir": parts_dir, "runs": runs, "best": best,
                        "own_over_whole": ratio}
        print(f"own / whole seeds per second: {ratio:.3f} (best of {args.repeats} each)", flush=True)
    with open(args.json, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {args.json}")
    return res


if __name__ == "__main__":
    main()
