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
    from gnnscale.pyg import init_distributed

    t0 = time.perf_counter()
    run = init_distributed(parts_dir, timeout=1800, graph_store=graph_store)
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


def _partition(name: str, ddir: str, parts: int, args) -> str:
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


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
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
    name, ddir = _dataset(args)
    what = args.what.split(",")
    res = {"setup": {"graph": name, "nodes": args.nodes, "fanouts_from_seeds": args.fanouts,
                     "batch_size_per_rank": args.batch_size, "model": "PyG GraphSAGE, hidden 64, Adam 3e-3 (DDP)",
                     "memory": "RssAnon of /proc/self/status polled every 5 ms by a thread of each rank (peak); "
                               "VmHWM beside it (file pages included)",
                     "cpu_count": os.cpu_count(), "load_average": os.getloadavg()}}
    if "memory" in what:
        parts_dir = _partition(name, ddir, args.memory_ranks, args)
        rows = []
        for store in ("own", "whole"):
            mem = dict(vars(args), batches=args.memory_batches)
            for r in _launch(parts_dir, args.memory_ranks, store, argparse.Namespace(**mem)):
                share = _share(parts_dir, r["rank"])
                rows.append(dict(store=store, rank=r["rank"], share=share, peak_anon=r["peak_anon"],
                                 start_anon=r["start_anon"], opened_anon=r["opened_anon"], vm_hwm=r["vm_hwm"],
                                 peak_over_share=r["peak_anon"] / share["total"],
                                 growth_over_share=(r["peak_anon"] - r["start_anon"]) / share["total"]))
        res["memory"] = {"ranks": args.memory_ranks, "parts_dir": parts_dir, "rows": rows}
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
