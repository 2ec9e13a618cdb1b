"""Link prediction benchmarks (issue 28). One function per ``--what``; ``--json FILE`` writes them all.

``--what cora`` (item 1) and ``--what memory`` (item 3): see ``benchmarks/link_quality.py``.

``--what throughput`` (item 4): seed edges per second of link-prediction training, gnnscale beside
DGL 2.1's edge prediction sampler, alternating, on the R-MAT graphs of ``../shared/peers``
(``graphgen.py``: degree 20, 128 features, the same arrays as ``epoch_vs_dgl.py``, written as a
``dir:`` dataset), for every size in ``--num-nodes`` (default 100k and 1M):

* the split: ``gnnscale partition --dataset dir:... --edge-split 0.85,0.05,0.10 --seed 0`` (pairs of
  the undirected graph; validation and test pairs leave message passing), METIS into 1 part and
  into 2 parts (the same split in both: seeded, made before the cut);
* DGL's inputs are read back from the 1-part folder (its CSC and its ``link_train`` in original
  ids: ``mp_edges.npy``, ``train_pos.npy``) so both systems sample the identical graph and seed
  edges, with the ``dir:`` dataset's ``x.npy`` as features;
* per repeat (``--repeats``, default 2), in this order: **gnnscale 1 process** (``gnnscale train
  --task link`` on the 1-part folder, 1 worker, ``--threads`` 2), **DGL** single process
  (``benchmarks/dgl_link.py`` in the DGL venv, 2 threads: ``as_edge_prediction_sampler`` over a
  ``NeighborSampler``, ``exclude="reverse_id"``, ``negative_sampler.Uniform(1)``, ``DataLoader``
  with ``num_workers=0``), **gnnscale 2 parts** exchanging features and samples through the
  communicator (2 workers on the 2-part folder, 1 thread each, ``--no-host-features
  --no-host-graph``: as workers on two hosts would), and the same with the default host reads
  (``host``: both workers on this host read each other's feature rows and sample each other's
  nodes from the partition folder, memory-mapped: the same draws, so the same loss);
* figure: seed (positive training) edges of the timed epoch / its seconds; ratio of medians
  gnnscale / DGL for 1 process and for 2 parts. There is no DistDGL link-prediction script
  here, so the 2-part figure is set beside DGL's **single-process** run (the same 2 cores).
  gnnscale's seed edges are the distinct training edges of the epoch's batches (a rank owning
  fewer training edges than the others starts over on its own ones in a whole epoch; those
  repeats are not counted, ``seed_edges_batched`` counts them).

Training edges belong to the part owning their source. With gnnscale's default METIS balance
(nodes, train nodes) the R-MAT graphs' 2 parts own very different numbers of training edges
(about 87% / 13% at 100k and 89% / 11% at 1M), so rank 0 takes ~1.75x ``--batch-size`` seed
edges per step and sets the epoch's time; ``--balance nodes,edges`` evens them out (at 20k
nodes: 48% / 52%, with the edge cut up from 21% to 36%). The table prints both ranks' batch sizes.

The same work on both sides:

* model: GraphSAGE (mean), ``--fanouts`` 10,5 per hop from the seeds (DGL ``NeighborSampler([5,
  10])``), 2 layers, hidden 128 (the embedding too), dropout 0.5 between layers, dot-product
  decoder, BCE with logits over positives and negatives, Adam lr 3e-3, batch 1024 seed edges
  per step (per worker). Chosen smaller than the node benchmarks' 3 layers / hidden 256 / 5,10,15:
  a seed-edge batch has up to 3x as many seed nodes as a node batch (two endpoints plus a
  negative's), so the 3-layer model's 1M-node run would be hours on 2 cores;
* negatives: one per positive, **each positive's source with a uniform destination** (DGL's
  ``negative_sampler.Uniform(1)``; gnnscale ``--neg-sampling per_source``), not filtered
  (``--neg-mode uniform``: both endpoints uniform on both sides);
* exclusion: every batch positive and its reverse is removed from the sampled blocks (gnnscale's
  ``LinkSampler`` always; DGL ``exclude="reverse_id"`` with the reverse of every edge);
* length: ``--max-steps`` (default 100) batches per epoch for the 1-process runs (gnnscale and
  DGL), ``ceil(max-steps / 2)`` steps per worker for the 2-part run, so every run trains on
  ``max-steps x batch`` seed edges (a whole epoch is ~830 steps at 100k and ~8300 at 1M);
  ``--max-steps 0``: whole epochs. Each run does ``--epochs`` (default 2) such epochs (DGL:
  passes after 3 warm-up batches) and the figure is the median over its epochs after the first.
  gnnscale's seed edges per epoch are computed from its seed schedule (``samplers.seeds``: the
  per-rank batches of the capped epoch), from the per-part training-edge counts;
* no evaluation (``--eval-every 0``), ``--no-progress``, ``--device cpu``.

Also reported per run: gnnscale's stage seconds (max over ranks), start-up seconds, bytes sent,
loss; DGL's sample / gather / compute seconds; per-batch seed nodes, input nodes and sampled edges
on both sides (gnnscale's from ``LinkSampler`` on the 1-part graph for a few batches, in this
process), and the CPU other processes used during each run: ``foreign_cpu`` (the peers'
``benchutil``) and ``machine_cpu`` (/proc/stat less this process tree's own, which also sees
processes that start and end within the run); the table shows the larger. Over 5% of the machine
is not a clean measurement: the 2-thread runs (1 process, gnnscale and DGL) slow down several
times when another process takes a core (every OpenMP region waits for a descheduled thread).

Duration (2 cores, quiet): preparing the graphs ~1 min (100k) and ~2.5 min (1M), kept in
``--work`` and reused; then about 1 min (100k) and 3-4 min (1M) per repeat.

    python benchmarks/link.py --what cora,memory --work /tmp/lq --json results/link_quality.json
    python benchmarks/link.py --what throughput --json results/link_throughput.json
    python benchmarks/link.py --what throughput --num-nodes 20000 --repeats 1 --max-steps 20   # a check
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import DGL_PYTHON, REPO, dgl_python, run_gnnscale, smoke_in_process, write_json  # noqa: E402

PEERS = Path(os.environ.get("GNNSCALE_PEERS", REPO.parent / "shared" / "peers"))
DGL_PY = Path(DGL_PYTHON)


def peers_modules():
    """``graphgen``, ``benchutil`` and ``epoch_vs_dgl`` of the peers' folder (numpy-only helpers)."""
    if str(PEERS) not in sys.path:
        sys.path.insert(0, str(PEERS))
    import benchutil  # noqa: E402
    import epoch_vs_dgl  # noqa: E402
    import graphgen  # noqa: E402

    return graphgen, benchutil, epoch_vs_dgl


def provenance() -> dict:
    """The checkout's commit and whether it had uncommitted changes (the figures' code)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                                    capture_output=True, text=True).stdout.strip())
    except OSError:
        head, dirty = None, None
    return {"commit": head, "uncommitted_changes": dirty, "cpus": os.cpu_count()}


def run_cmd(cmd: list[str], log: Path, env: dict | None = None) -> float:
    """Run ``cmd`` (output to ``log``); its wall seconds. Exits with the log's tail on failure."""
    t0 = time.perf_counter()
    with open(log, "w") as f:
        if env is None and cmd[:3] == [sys.executable, "-m", "gnnscale"]:  # --smoke: in this process
            p = run_gnnscale(cmd[3:], stdout=f, stderr=subprocess.STDOUT, cwd=REPO)
        else:
            p = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    wall = time.perf_counter() - t0
    if p.returncode:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(cmd)}\n{log.read_text()[-3000:]}")
    return wall


def _cpu_counters() -> tuple[float, float, float, float]:
    """(wall, machine busy CPU seconds from /proc/stat, steal seconds, this process's and its
    waited-for children's CPU seconds)."""
    hz = os.sysconf("SC_CLK_TCK")
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        busy = (v[0] + v[1] + v[2] + v[5] + v[6]) / hz  # user nice system irq softirq
        steal = v[7] / hz
    except (OSError, ValueError, IndexError):
        busy = steal = float("nan")
    t = os.times()
    return time.time(), busy, steal, t.user + t.system + t.children_user + t.children_system


def measured(fn, benchutil):
    """``fn()`` with what other processes used meanwhile: ``foreign_cpu`` (the peers' benchutil:
    per-process CPU times of the processes alive at the end, so it misses processes that start
    and end during the run) and ``machine_cpu`` (/proc/stat's busy time minus this process's and
    its children's: counts every process, plus the hypervisor's steal)."""
    snap = benchutil.cpu_snapshot()
    c0 = _cpu_counters()
    res = fn()
    c1 = _cpu_counters()
    res["foreign_cpu"] = benchutil.foreign_cpu(snap)
    wall = c1[0] - c0[0]
    other = max(0.0, (c1[1] - c0[1]) - (c1[3] - c0[3]))
    res["machine_cpu"] = {"wall_s": round(wall, 2), "other_busy_s": round(other, 2), "steal_s": round(c1[2] - c0[2], 2),
                          "other_busy_frac": round(other / max(1e-9, wall * (os.cpu_count() or 1)), 4)}
    res["loadavg_1min_after"] = os.getloadavg()[0]
    return res


def other_frac(rec: dict) -> float:
    """The larger of the two estimates of the machine's share other processes used during a run."""
    a = (rec.get("foreign_cpu") or {}).get("foreign_cpu_frac", 0.0)
    b = (rec.get("machine_cpu") or {}).get("other_busy_frac", 0.0)
    return max(a, b if b == b else 0.0)


# ----------------------------------------------------------------------------- throughput (item 4)
def prepare_graph(n: int, args, work: Path) -> dict:
    """The R-MAT graph of ``n`` nodes as a ``dir:`` dataset, its 1- and 2-part link partitions and
    DGL's inputs (read back from the 1-part folder, original ids). Reused when already there."""
    import torch

    from gnnscale.partitioning.format import load_part

    graphgen, _, evd = peers_modules()
    ga = graphgen.add_graph_args(argparse.ArgumentParser()).parse_args(["--num-nodes", str(n)])
    name, data = graphgen.load_graph(ga)
    ddir = work / name
    evd.write_dir_dataset(data, str(ddir))
    stats = graphgen.graph_stats(data)
    del data
    dataset = f"dir:{ddir}"
    tag = args.edge_split.replace(",", "_") + (f"-bal{args.balance.replace(',', '_')}" if args.balance else "")
    balance = ["--balance", args.balance] if args.balance else []
    parts, part_s = {}, {}
    for p in (1, 2):
        pdir = work / f"{name}-link{tag}-p{p}"
        if not (pdir / "meta.json").exists():
            part_s[p] = run_cmd([sys.executable, "-m", "gnnscale", "partition", "--dataset", dataset, "--parts", str(p),
                                 "--method", "metis", "--edge-split", args.edge_split, "--seed", "0", *balance, "--out", str(pdir)],
                                work / f"{pdir.name}.log")
            print(f"[{name}] partition into {p} part(s): {part_s[p]:.1f} s", flush=True)
        parts[p] = pdir
    metas = {p: json.loads((parts[p] / "meta.json").read_text()) for p in parts}
    counts = {p: [int(load_part(str(parts[p]), r, verify=False).link["train"].shape[1]) for r in range(p)]
              for p in parts}
    train_total = metas[1]["link"]["counts"]["train"]
    if any(sum(c) != train_total for c in counts.values()) or metas[2]["link"]["counts"] != metas[1]["link"]["counts"]:
        raise SystemExit(f"the 1- and 2-part folders hold different splits: {counts}, "
                         f"{metas[1]['link']['counts']} vs {metas[2]['link']['counts']}")
    gdir = work / f"{name}-link{tag}-dgl"
    if not (gdir / "graph.json").exists():
        gdir.mkdir(parents=True, exist_ok=True)
        part = load_part(str(parts[1]), 0, verify=False)
        orig = part.orig_ids
        dst = torch.repeat_interleave(torch.arange(part.num_owned, dtype=torch.int64), torch.diff(part.indptr),
                                      output_size=part.indices.numel())
        mp = torch.stack([orig[part.indices.to(torch.int64)], orig[dst]])
        train = orig[part.link["train"]]
        vt = metas[1]["link"]["counts"]["val"] + metas[1]["link"]["counts"]["test"]
        if mp.size(1) != stats["num_edges"] - 2 * vt:
            raise SystemExit(f"message-passing edges {mp.size(1)} != {stats['num_edges']} - 2 x {vt} (val + test pairs)")
        # the 2-part folder's training edges are the same pairs
        k1 = torch.sort(train[0] * n + train[1]).values
        # new global ids of the 2-part folder -> original ids (part p owns offsets[p] ..)
        p2 = [load_part(str(parts[2]), r, verify=False) for r in range(2)]
        new2orig = torch.cat([pr.orig_ids for pr in p2])
        t2 = new2orig[torch.cat([pr.link["train"] for pr in p2], 1)]
        k2 = t2[0] * n + t2[1]
        del p2, new2orig, t2
        if not torch.equal(k1, torch.sort(k2).values):
            raise SystemExit("the 1- and 2-part folders' training edges differ")
        np.save(gdir / "mp_edges.npy", mp.numpy())
        np.save(gdir / "train_pos.npy", train.numpy())
        (gdir / "graph.json").write_text(json.dumps({"num_nodes": n, "features": str(ddir / "x.npy"),
                                                      "num_edges": int(mp.size(1)), "train_edges": int(train.size(1)),
                                                      "from": str(parts[1])}))
        del part, mp, train, dst, orig
    keys = ("partition_seconds", "total_seconds", "edge_cut_fraction", "balance", "num_nodes", "num_edges")
    return {"name": name, "dataset": dataset, "graph_stats": stats, "parts": {p: str(v) for p, v in parts.items()},
            "dgl_dir": str(gdir), "train_edges": train_total, "link_counts": metas[1]["link"]["counts"],
            "train_edges_per_part": counts, "partition_wall_s_this_run": part_s,
            "partition_meta": {p: {k: metas[p].get(k) for k in keys} for p in parts}}


def seed_edges_in_epoch(counts: list[int], batch_size: int, max_steps: int) -> dict:
    """One gnnscale epoch's seed edges: the ranks' batches as the trainer cuts them
    (``samplers.seeds``), capped at ``max_steps`` (0: none). ``batched``: the batches' sizes summed;
    ``distinct``: the distinct edges among them (fewer where a rank with fewer training edges than
    the others starts over from its first ones); ``per_rank_per_step``: the first step's batch sizes."""
    import torch

    from gnnscale.samplers.seeds import cut_batches, epoch_steps

    full = epoch_steps(counts, batch_size)
    steps = min(full, max_steps) if max_steps else full
    batched = distinct = 0
    first = []
    for c in counts:
        sizes = [int(b.numel()) for b in cut_batches(torch.arange(c), batch_size, full, wrap=True)[:steps]]
        batched += sum(sizes)
        distinct += min(c, sum(sizes))
        first.append(sizes[0] if sizes else 0)
    return {"batched": batched, "distinct": distinct, "steps": steps, "full_epoch_steps": full,
            "per_rank_per_step": first}


def gnnscale_run(g: dict, parts: int, args, work: Path, tag: str, host: bool = False) -> dict:
    """``gnnscale train --task link`` on the ``parts``-part folder (one worker per part);
    ``host``: with the default host reads (the workers read each other's rows and CSCs from the
    folder); without, ``--no-host-features --no-host-graph`` (everything through the communicator)."""
    threads = args.threads if parts == 1 else max(1, args.threads // parts)
    steps_cap = args.max_steps if parts == 1 else math.ceil(args.max_steps / parts)
    m = work / f"m-{tag}.json"
    cmd = [sys.executable, "-m", "gnnscale", "train", "--parts-dir", g["parts"][parts], "--task", "link",
           "--workers", str(parts), "--threads", str(threads), "--device", "cpu", "--epochs", str(args.epochs),
           "--fanouts", args.fanouts, "--batch-size", str(args.batch_size), "--hidden", str(args.hidden),
           "--lr", str(args.lr), "--dropout", str(args.dropout), "--decoder", "dot", "--link-loss", "bce",
           "--neg-sampling", args.neg_mode, "--num-negatives", "1", "--no-filter-negatives", "--eval-every", "0",
           "--seed", "0", "--metrics", str(m), "--no-progress"]
    if steps_cap:
        cmd += ["--max-steps", str(steps_cap)]
    if not host:
        cmd += ["--no-host-features", "--no-host-graph"]
    wall = run_cmd(cmd, work / f"m-{tag}.log")
    met = json.loads(m.read_text())
    sched = seed_edges_in_epoch(g["train_edges_per_part"][parts], args.batch_size, steps_cap)
    edges, steps, full = sched["distinct"], sched["steps"], sched["full_epoch_steps"]
    eps = met["epochs"]
    if any(e["steps"] != steps for e in eps):
        raise SystemExit(f"gnnscale took {[e['steps'] for e in eps]} steps per epoch; the schedule says {steps}")
    sec = [e["epoch_seconds"] for e in eps]
    steady = sec[1:] if len(sec) > 1 else sec
    return {"system": f"gnnscale_{parts}" + ("_host" if host else ""), "workers": parts, "threads_per_worker": threads, "steps": steps,
            "full_epoch_steps": full, "seed_edges": edges, "seed_edges_batched": sched["batched"],
            "batch_per_rank": sched["per_rank_per_step"], "epoch_seconds": sec,
            "seed_edges_per_s": edges / statistics.median(steady),
            "loss": [e["loss"] for e in eps],
            "feature_bytes_fetched": [e.get("feature_bytes_fetched") for e in eps],
            "feature_bytes_host": [e.get("feature_bytes_host") for e in eps],
            "stage_seconds_max_over_ranks": [e["stage_seconds_max_over_ranks"] for e in eps],
            "bytes_sent": [e.get("bytes_sent") for e in eps], "peak_rss_mb_by_rank": eps[-1].get("peak_rss_mb_by_rank"),
            "startup_seconds": met.get("startup_seconds"), "job_wall_s": wall, "command": " ".join(cmd[1:])}


def dgl_run(g: dict, args, work: Path, tag: str) -> dict:
    out = work / f"dgl-{tag}.json"
    cmd = [str(DGL_PY), str(Path(__file__).with_name("dgl_link.py")), "--graph", g["dgl_dir"], "--fanouts", args.fanouts,
           "--batch-size", str(args.batch_size), "--hidden", str(args.hidden), "--dropout", str(args.dropout),
           "--lr", str(args.lr), "--neg", args.neg_mode, "--num-negatives", "1", "--exclude", "reverse_id",
           "--epochs", str(args.epochs), "--max-steps", str(args.max_steps), "--threads", str(args.threads),
           "--seed", "0", "--out", str(out)]
    wall = run_cmd(cmd, work / f"dgl-{tag}.log", env=dict(os.environ, DGLBACKEND="pytorch"))
    r = json.loads(out.read_text())
    eps = r["epochs"]
    steady = eps[1:] if len(eps) > 1 else eps
    t = statistics.median(e["time_s"] for e in steady)
    edges = steady[0]["seed_edges"]
    return {"system": "dgl", "threads": r["threads"], "steps": steady[0]["steps"], "full_epoch_steps": r["full_epoch_steps"],
            "seed_edges": edges, "epoch_seconds": [e["time_s"] for e in eps], "seed_edges_per_s": edges / t,
            "loss": [e["loss"] for e in eps],
            "stage_seconds": [{k: e[k + "_s"] for k in ("sample", "gather", "compute")} for e in eps],
            "per_batch": {k: statistics.median(e[k] for e in steady)
                          for k in ("mean_seed_nodes", "mean_input_nodes", "mean_sampled_edges")},
            "graph_build_s": r["graph_build_s"], "job_wall_s": wall, "dgl_version": r["dgl_version"],
            "torch_version": r["torch_version"], "command": " ".join(cmd[1:])}


def gnnscale_batch_stats(g: dict, args, batches: int = 5) -> dict:
    """Per-batch seed nodes, input nodes and sampled edges of gnnscale's seed-edge batches (after
    the exclusion), sampled in this process on the 1-part graph: the local sampler draws what a
    1-worker run draws."""
    import torch

    from gnnscale.partitioning.format import load_part
    from gnnscale.samplers import NeighborSampler
    from gnnscale.samplers.link import LinkSampler, NegativeSampler

    part = load_part(g["parts"][1], 0, verify=False)
    fanouts = [int(f) for f in args.fanouts.split(",")]
    ns = NeighborSampler(part.indptr, part.indices, fanouts, seed=0, node_keys=part.orig_ids)
    ls = LinkSampler(ns, part.link["train"], NegativeSampler(part.book.num_nodes, args.neg_mode, 1, seed=0), rank=0)
    perm = torch.randperm(part.link["train"].shape[1], generator=torch.Generator().manual_seed(0))
    rows = []
    for s in range(batches):
        mb = ls.sample(perm[s * args.batch_size:(s + 1) * args.batch_size], epoch=0, step=s)
        rows.append((mb.seeds.numel(), mb.blocks[0].num_src, sum(b.num_edges for b in mb.blocks),
                     mb.stats["excluded_edges"]))
    a = np.asarray(rows, dtype=np.float64).mean(0)
    return {"mean_seed_nodes": a[0], "mean_input_nodes": a[1], "mean_sampled_edges": a[2],
            "mean_excluded_edges": a[3], "batches": batches}


def throughput(args, work: Path) -> dict:
    """Item 4: seed edges per second, gnnscale (1 process; 2 parts) beside DGL's edge prediction sampler."""
    _, benchutil, _ = peers_modules()
    if not args.no_dgl and dgl_python()[0] is None:
        raise SystemExit(f"{dgl_python()[1]} (or --no-dgl: gnnscale's runs alone)")
    systems = [s for s in ("gnnscale_1", "dgl", "gnnscale_2", "gnnscale_2_host") if not (args.no_dgl and s == "dgl")
               and not (args.smoke and s == "gnnscale_2_host")]  # --smoke: the 2-part run once, host reads off
    snap0 = benchutil.cpu_snapshot()
    out = {"provenance": provenance(), "settings": {
        "fanouts_per_hop": args.fanouts, "dgl_neighbor_sampler": list(reversed([int(f) for f in args.fanouts.split(",")])),
        "num_layers": len(args.fanouts.split(",")), "hidden": args.hidden, "dropout": args.dropout, "lr": args.lr,
        "batch_size_per_worker": args.batch_size, "negatives": f"1 per positive, {args.neg_mode}, not filtered",
        "exclude": "batch positives and their reverses", "decoder": "dot", "loss": "bce",
        "max_steps_1proc": args.max_steps, "max_steps_per_worker_2parts": math.ceil(args.max_steps / 2),
        "epochs_per_run": args.epochs, "threads": args.threads, "edge_split": args.edge_split,
        "partition_balance": args.balance or "gnnscale default (nodes,train)",
        "note_2parts": "no DistDGL link-prediction script: gnnscale's 2-part run is set beside DGL's single process"},
        "graphs": {}}
    for n in [int(v) for v in args.num_nodes.split(",")]:
        g = prepare_graph(n, args, work)
        res = {"graph": g, "runs": {s: [] for s in systems}}
        out["graphs"][g["name"]] = res
        res["gnnscale_per_batch"] = gnnscale_batch_stats(g, args)
        print(f"[{g['name']}] {g['graph_stats']['num_nodes']:,} nodes, {g['graph_stats']['num_edges']:,} edges; "
              f"{g['train_edges']:,} training edges (per part of 2: {g['train_edges_per_part'][2]})", flush=True)
        for r in range(args.repeats):
            for what in systems:
                if what == "dgl":
                    rec = measured(lambda: dgl_run(g, args, work, f"{n}-{r}"), benchutil)
                else:
                    p, host = int(what.split("_")[1]), what.endswith("_host")
                    rec = measured(lambda: gnnscale_run(g, p, args, work, f"{n}-p{p}{'h' if host else ''}-{r}", host),
                                   benchutil)
                res["runs"][what].append(rec)
                print(f"[{g['name']}] repeat {r} {what:10s}: {rec['seed_edges_per_s']:9,.0f} seed edges/s "
                      f"({rec['seed_edges']:,} edges, {rec['steps']} steps, epochs "
                      f"{', '.join(f'{s:.2f}' for s in rec['epoch_seconds'])} s; loss {rec['loss'][-1]:.4f}; "
                      f"other processes {other_frac(rec):.1%} CPU)", flush=True)
        med = {k: statistics.median(x["seed_edges_per_s"] for x in v) for k, v in res["runs"].items()}
        res["median_seed_edges_per_s"] = med
        dgl = med.get("dgl")  # None with --no-dgl: no ratios
        res["ratio_gnnscale_1_over_dgl"] = med["gnnscale_1"] / dgl if dgl else None
        res["ratio_gnnscale_2_over_dgl_single_process"] = med["gnnscale_2"] / dgl if dgl else None
        res["ratio_gnnscale_2_host_over_dgl_single_process"] = (med["gnnscale_2_host"] / dgl
                                                                if dgl and "gnnscale_2_host" in med else None)
        res["max_foreign_cpu_frac"] = max(other_frac(x) for v in res["runs"].values() for x in v)
        write_json(args.json, {"throughput": out})  # this graph's figures even if a later one fails
    out["foreign_cpu"] = benchutil.foreign_cpu(snap0)
    print(f"\nlink-prediction training throughput (seed edges/s, median of {args.repeats}; fan-outs {args.fanouts}, "
          f"{out['settings']['num_layers']} layers, hidden {args.hidden}, batch {args.batch_size}, "
          f"{args.neg_mode} negatives)")
    print(f"{'graph':38s} {'gnnscale 1p':>12s} {'DGL 1p':>10s} {'ratio':>6s} {'gnnscale 2 parts':>17s} {'ratio*':>7s} "
          f"{'2 parts, host':>14s} {'ratio*':>7s} {'max foreign CPU':>16s}")
    def num(v, fmt: str, width: int) -> str:  # a figure, or '-' where there is no DGL run
        return format(v, fmt) if v is not None else "-".rjust(width)

    for name, res in out["graphs"].items():
        m = res["median_seed_edges_per_s"]
        print(f"{name:38s} {m['gnnscale_1']:12,.0f} {num(m.get('dgl'), '10,.0f', 10)} "
              f"{num(res['ratio_gnnscale_1_over_dgl'], '6.2f', 6)} "
              f"{m['gnnscale_2']:17,.0f} {num(res['ratio_gnnscale_2_over_dgl_single_process'], '7.2f', 7)} "
              f"{num(m.get('gnnscale_2_host'), '14,.0f', 14)} "
              f"{num(res['ratio_gnnscale_2_host_over_dgl_single_process'], '7.2f', 7)} "
              f"{res['max_foreign_cpu_frac']:15.1%}")
    print("* 2 parts (2 workers, 1 thread each) over DGL's single process (2 threads): there is no DistDGL "
          "link-prediction script here. '2 parts': --no-host-features --no-host-graph (features and samples through "
          "gloo, as on two hosts); 'host': the default on one host (the workers read each other's feature rows and "
          "sample each other's nodes from the partition folder instead of exchanging them).")
    for name, res in out["graphs"].items():
        r2 = res["runs"]["gnnscale_2"][0]
        print(f"{name}: training edges per part of 2 {res['graph']['train_edges_per_part'][2]}, seed edges per step "
              f"per rank {r2['batch_per_rank']} (the epoch's time is the slowest rank's)")
    print(f"{'graph':38s} {'per batch:':>10s} {'seed nodes':>11s} {'input nodes':>12s} {'sampled edges':>14s}")
    for name, res in out["graphs"].items():
        d = statistics.median
        gs = res["gnnscale_per_batch"]
        print(f"{name:38s} {'gnnscale':>10s} {gs['mean_seed_nodes']:11,.0f} {gs['mean_input_nodes']:12,.0f} "
              f"{gs['mean_sampled_edges']:14,.0f}")
        if "dgl" not in res["runs"]:
            continue
        dg = {k: d(x["per_batch"][k] for x in res["runs"]["dgl"]) for k in res["gnnscale_per_batch"] if k != "batches"
              and k != "mean_excluded_edges"}
        print(f"{'':38s} {'DGL':>10s} {dg['mean_seed_nodes']:11,.0f} {dg['mean_input_nodes']:12,.0f} "
              f"{dg['mean_sampled_edges']:14,.0f}")
    return out


def cora(args, work: Path) -> dict:
    """Item 1 (benchmarks/link_quality.py): the graph auto-encoder on Cora and CiteSeer, 1/2/4 workers."""
    from link_quality import run_cora

    return run_cora(args, work)


def memory(args, work: Path) -> dict:
    """Item 3 (benchmarks/link_quality.py): peak RSS of MRR evaluation beside training's, 1M nodes, 4 workers."""
    from link_quality import run_memory

    return run_memory(args, work)


WHATS = {"cora": cora, "memory": memory, "throughput": throughput}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--what", default="throughput", help=f"comma-separated among {', '.join(WHATS)}")
    ap.add_argument("--json", default=None, help="write every result here")
    ap.add_argument("--work", default="/tmp/gnnscale_link", help="folder for datasets, partitions, DGL inputs and "
                    "run logs (kept and reused)")
    g = ap.add_argument_group("throughput")
    g.add_argument("--num-nodes", default="100000,1000000", help="R-MAT sizes (graphgen; degree 20, 128 features)")
    g.add_argument("--repeats", type=int, default=2, help="alternating rounds (gnnscale 1p, DGL, gnnscale 2 parts)")
    g.add_argument("--max-steps", type=int, default=100,
                   help="batches per epoch of a 1-process run (2 parts: half per worker); 0: whole epochs")
    g.add_argument("--epochs", type=int, default=2, help="epochs per run; the figure is the median after the first")
    g.add_argument("--fanouts", default="10,5", help="per hop from the seeds; the number of layers")
    g.add_argument("--hidden", type=int, default=128)
    g.add_argument("--batch-size", type=int, default=1024, help="seed edges per step (per worker)")
    g.add_argument("--dropout", type=float, default=0.5)
    g.add_argument("--lr", type=float, default=3e-3)
    g.add_argument("--neg-mode", default="per_source", choices=["per_source", "uniform"],
                   help="per_source: DGL's negative_sampler.Uniform (a uniform destination per positive's source)")
    g.add_argument("--threads", type=int, default=2, help="threads of a 1-process run (2 parts: split over workers)")
    g.add_argument("--no-dgl", action="store_true", help="time gnnscale's runs only (no ratios); --smoke sets it "
                   "when DGL's environment is absent")
    g.add_argument("--edge-split", default="0.85,0.05,0.10")
    g.add_argument("--balance", default="", help="METIS balance constraints of both partitions (gnnscale partition "
                   "--balance, e.g. nodes,edges); default: gnnscale's (nodes,train)")
    c = ap.add_argument_group("cora (item 1)")
    c.add_argument("--graphs", default="cora,citeseer", type=lambda t: t.split(","), help="Planetoid graphs")
    c.add_argument("--seeds", default="0,1,2", type=lambda t: [int(v) for v in t.split(",")],
                   help="split and training seeds (the median over them)")
    c.add_argument("--workers", default="1,2,4", type=lambda t: [int(v) for v in t.split(",")],
                   help="worker counts; the first is the reference")
    c.add_argument("--cora-epochs", type=int, default=200)
    m = ap.add_argument_group("memory (item 3)")
    m.add_argument("--memory-nodes", type=int, default=1_000_000)
    m.add_argument("--memory-degree", type=int, default=10)
    m.add_argument("--memory-test-edges", type=int, default=100_000)
    m.add_argument("--memory-negatives", type=int, default=1000, help="fixed negatives per test source (MRR)")
    m.add_argument("--memory-steps", type=int, default=30, help="training steps before the evaluation")
    m.add_argument("--memory-workers", type=int, default=4, help="parts = workers of the memory run")
    ap.add_argument("--smoke", action="store_true", help="every item at its smallest: a 5,000-node R-MAT graph, "
                    "4 steps, 1 round, no host-reads run (gnnscale alone without DGL); Cora 1 epoch, 1 seed, 1 worker; memory on 5,000 "
                    "nodes, 2 workers, 2 steps")
    args = ap.parse_args()
    if args.smoke:
        args.what, args.num_nodes, args.repeats, args.max_steps, args.batch_size = "throughput,cora,memory", "5000", 1, 4, 128
        args.hidden, args.graphs, args.seeds, args.workers, args.cora_epochs = 16, ["cora"], [0], [1], 1
        args.memory_nodes, args.memory_test_edges, args.memory_negatives, args.memory_steps = 5000, 500, 20, 2
        args.memory_workers = 2
        if not args.no_dgl and dgl_python()[0] is None:  # gnnscale's side alone where DGL is absent or broken
            print(f"{dgl_python()[1]}: gnnscale's side alone", flush=True)
            args.no_dgl = True
        smoke_in_process()  # the gnnscale commands in this process: torch imported once, 2-worker runs forked
    what = args.what.split(",")
    unknown = set(what) - set(WHATS)
    if unknown:
        raise SystemExit(f"--what: unknown {sorted(unknown)}; choose among {', '.join(WHATS)}")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    results = {}
    for w in what:
        results[w] = WHATS[w](args, work)
    write_json(args.json, results)


if __name__ == "__main__":
    main()
