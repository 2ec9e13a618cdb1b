"""Typed graphs end to end (issue 27): accuracy on ACM beside PyG, and a generated ogbn-mag-shaped graph.

``--what acm`` (item 1): ACM's ``train_20`` split (60 labelled papers), a relation-wise GraphSAGE
(one SAGE layer per relation, summed per node type; 2 layers, hidden 64, dropout 0.5, Adam 0.01,
weight decay 5e-4, 200 full-batch epochs: fan-outs -1, every training node in one step), test
micro-F1 (= accuracy) and macro-F1 at the epoch of best validation accuracy, median over seeds:

* ``pyg``: PyG's ``HeteroConv`` of one ``SAGEConv`` per relation (sum), single process, on the raw
  features (subjects, which have none, through a learned embedding);
* ``gnnscale 1 / 2 / 4``: ``gnnscale train`` on ACM cut by METIS into 1, 2 and 4 parts, the same
  model through the engine (a typed input encoder, then ``rel:sage`` layers).

``--what mag`` (item 3): an ogbn-mag-shaped generated graph (``synthetic-mag?num_nodes=N``, 4 node
types, only papers with features, 8 relations with the reverses): generated and cut by METIS into
4 parts by ``gnnscale partition`` (generation seconds from its log; partition / write / total
seconds and peak RSS from the folder's meta.json, beside ``gnnscale info --json`` and the
command's own wall time and max RSS), then one epoch by 4 workers, one thread each: R-GCN
(``--layer rgcn``), 2 layers, hidden 64, fan-outs 10,10 for every relation (given through
``--relation-fanouts``, naming each relation), ``--eval-every 0``, batch ``--mag-batch-size`` per
worker and at most ``--mag-max-steps`` steps (0: the whole epoch). Reported: epoch seconds,
steps, start-up seconds, bytes sent by category, peak RSS per rank (the metrics file), and an
**estimate** of the traffic per relation: one batch per rank sampled with the Python API
(``NeighborSampler(typed=...)`` on the whole graph as one part, seeds among that rank's training
papers, requester = the rank: the draws the distributed sampler makes), its sampled edges per
relation and those whose destination another part owns (they come back in sample responses),
times the run's steps; the measured ``sample_response`` bytes are split in proportion.

``--what sampling`` (item 4): seeds per second of typed neighbour sampling on the same generated
graph, one process, the whole graph as one part (``gnnscale partition --parts 1``):
``NeighborSampler(indptr, indices, typed=typed_graph(part, fanouts))`` beside DGL 2.1
(``dgl.heterograph`` of the identical edges per relation, saved once as ``.npy``;
``NeighborSampler`` with the same fan-out for every edge type, ``DataLoader`` over the training
papers, ``num_workers=0``: ``benchmarks/dgl_hetero_sampling.py`` run by the DGL peer's Python),
batch 1024, fan-outs 15,10 from the seeds (DGL ``[10, 15]``), ``--threads`` threads each,
alternating runs (gnnscale, DGL, ...), ratio of medians; sampled edges per batch on both sides.

    python benchmarks/hetero.py --what acm --json results/hetero_acm.json
    python benchmarks/hetero.py --what mag,sampling --work /tmp/hetero --json results/hetero_mag.json
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (DGL_PYTHON, SHARED, dgl_python, gnnscale, in_process, run_gnnscale,  # noqa: E402
                     smoke_in_process, write_json)

ACM = f"acm:{SHARED / 'acm'}?split=20"
DGL_PY = Path(DGL_PYTHON)
HPARAMS = dict(hidden=64, layers=2, dropout=0.5, lr=0.01, weight_decay=5e-4, epochs=200)


def macro_f1(pred, true, num_classes: int) -> float:
    """scikit-learn's ``f1_score(average="macro")`` (classes present among labels or predictions)."""
    import torch

    tp = torch.bincount(true[pred == true], minlength=num_classes).double()
    npred = torch.bincount(pred, minlength=num_classes).double()
    ntrue = torch.bincount(true, minlength=num_classes).double()
    present = (npred + ntrue) > 0
    return float((2 * tp[present] / (npred[present] + ntrue[present])).mean())


def pyg_reference(seed: int, epochs: int) -> dict:
    """PyG ``HeteroConv`` (one ``SAGEConv`` per relation, summed), full batch, one process."""
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import HeteroConv, SAGEConv

    from gnnscale.datasets import load_dataset
    from gnnscale.datasets.typed import to_hetero_data

    data = load_dataset(ACM)
    hd = to_hetero_data(data)
    torch.manual_seed(seed)
    h, target = HPARAMS["hidden"], data.target_type
    featureless = [t for t in hd.node_types if "x" not in hd[t]]

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.ModuleDict({t: torch.nn.Embedding(hd[t].num_nodes, h) for t in featureless})
            self.convs = torch.nn.ModuleList(
                HeteroConv({et: SAGEConv((-1, -1), h if i == 0 else int(data.num_classes)) for et in hd.edge_types},
                           aggr="sum") for i in range(2))

        def forward(self, x_dict, ei_dict):
            x_dict = dict(x_dict, **{t: self.emb[t].weight for t in featureless})
            x_dict = self.convs[0](x_dict, ei_dict)
            x_dict = {t: F.dropout(F.relu(v), HPARAMS["dropout"], self.training) for t, v in x_dict.items()}
            return self.convs[1](x_dict, ei_dict)[target]

    net = Net()
    x_dict = {t: hd[t].x for t in hd.node_types if "x" in hd[t]}
    with torch.no_grad():
        net(x_dict, hd.edge_index_dict)  # lazy input sizes
    opt = torch.optim.Adam(net.parameters(), lr=HPARAMS["lr"], weight_decay=HPARAMS["weight_decay"])
    y = hd[target].y
    masks = {s: hd[target][f"{s}_mask"] for s in ("train", "val", "test")}
    best = (-1.0, None, None)
    t0 = time.perf_counter()
    for _ in range(epochs):
        net.train()
        opt.zero_grad()
        out = net(x_dict, hd.edge_index_dict)
        F.cross_entropy(out[masks["train"]], y[masks["train"]]).backward()
        opt.step()
        net.eval()
        with torch.no_grad():
            pred = net(x_dict, hd.edge_index_dict).argmax(1)
        val = float((pred[masks["val"]] == y[masks["val"]]).float().mean())
        if val > best[0]:
            test = pred[masks["test"]]
            best = (val, float((test == y[masks["test"]]).float().mean()),
                    macro_f1(test, y[masks["test"]], int(data.num_classes)))
    return {"seed": seed, "best_val_acc": best[0], "test_micro_f1": best[1], "test_macro_f1": best[2],
            "seconds": time.perf_counter() - t0}


def engine_run(parts_dir: str, workers: int, seed: int, epochs: int, work: Path) -> dict:
    """``gnnscale train`` of the same model; figures at the epoch of best validation accuracy."""
    metrics = work / f"acm-{workers}-{seed}.json"
    t0 = time.perf_counter()
    gnnscale("train", "--parts-dir", parts_dir, "--workers", str(workers), "--layer", "rel:sage",
             "--fanouts", "-1,-1", "--eval-fanouts", "-1,-1", "--batch-size", "64",
             "--hidden", str(HPARAMS["hidden"]), "--dropout", str(HPARAMS["dropout"]), "--lr", str(HPARAMS["lr"]),
             "--weight-decay", str(HPARAMS["weight_decay"]), "--epochs", str(epochs), "--eval-every", "1",
             "--seed", str(seed), "--no-progress", "--threads", "1", "--metrics", str(metrics))
    m = json.loads(metrics.read_text())
    ep = m["epochs"][m["best_epoch"]]
    return {"seed": seed, "best_val_acc": m["best_val_acc"], "test_micro_f1": m["test_acc_at_best_val"],
            "test_macro_f1": ep["evaluation"]["macro_f1"]["test"], "final_test_acc": m["test_acc"],
            "epoch_seconds": m["epoch_seconds"], "bytes_sent": m["bytes_sent"], "wall_seconds": time.perf_counter() - t0}


def acm(args, work: Path) -> dict:
    seeds = [int(s) for s in args.seeds.split(",")]
    out: dict = {"dataset": ACM, "hyperparameters": HPARAMS | {"epochs": args.epochs}, "seeds": seeds, "runs": {}}
    out["runs"]["pyg"] = [] if args.skip_pyg else [pyg_reference(s, args.epochs) for s in seeds]
    for r in out["runs"]["pyg"]:
        print(f"  pyg HeteroConv      seed={r['seed']} micro-F1 {r['test_micro_f1']:.4f} macro-F1 "
              f"{r['test_macro_f1']:.4f}", flush=True)
    for parts in (int(p) for p in args.workers.split(",")):
        pdir = work / f"acm{parts}"
        gnnscale("partition", "--dataset", ACM, "--parts", str(parts), "--out", str(pdir))
        runs = out["runs"][f"gnnscale_{parts}"] = []
        for s in seeds:
            r = engine_run(str(pdir), parts, s, args.epochs, work)
            runs.append(r)
            print(f"  gnnscale {parts} worker(s) seed={s} micro-F1 {r['test_micro_f1']:.4f} macro-F1 "
                  f"{r['test_macro_f1']:.4f} ({r['epoch_seconds']:.3f} s/epoch)", flush=True)
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("test_micro_f1", "test_macro_f1")}
           for k, v in out["runs"].items() if v}
    out["median"] = med
    one = med.get("gnnscale_1")
    if one:
        out["gap_points_vs_1_worker"] = {k: {m: 100 * (v[m] - one[m]) for m in v} for k, v in med.items()
                                         if k.startswith("gnnscale_")}
    print("\nrun              median micro-F1  median macro-F1  gap vs 1 worker (points)")
    for k, v in med.items():
        gap = out.get("gap_points_vs_1_worker", {}).get(k)
        g = f"{gap['test_micro_f1']:+.2f} / {gap['test_macro_f1']:+.2f}" if gap else "-"
        print(f"{k:16s} {v['test_micro_f1']:15.4f}  {v['test_macro_f1']:15.4f}  {g}")
    return out


# ----------------------------------------------------------------------------- mag and sampling (items 3, 4)
def mag_dataset(n: int) -> str:
    return f"synthetic-mag?num_nodes={n}"


def provenance() -> dict:
    """The checkout's commit and whether it had uncommitted changes (the figures' code)."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                    capture_output=True, text=True).stdout.strip())
    except OSError:
        head, dirty = None, None
    return {"commit": head, "uncommitted_changes": dirty, "loadavg_1_5_15_at_end": os.getloadavg(),
            "cpus": os.cpu_count()}


def timed_cli(*args: str, log: Path | None = None) -> dict:
    """``python -m gnnscale ARGS`` with its wall seconds and the child's own max RSS (``wait4``);
    stdout and stderr go to ``log`` (returned as text too). Exits with the tail on failure. In
    ``--smoke`` (:func:`_common.smoke_in_process`) the command runs in this process (no interpreter
    importing torch per command, its 2 workers forked): no RSS of its own then, its log on stderr."""
    if in_process():
        t0 = time.perf_counter()
        rc = run_gnnscale(list(args)).returncode
        if rc:
            raise SystemExit(f"gnnscale {' '.join(args)} failed (exit {rc}): its error is above")
        return {"wall_s": time.perf_counter() - t0, "max_rss_mb": None, "log": ""}
    out = open(log, "w+") if log else tempfile.TemporaryFile("w+")
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "gnnscale", *args], stdout=out, stderr=subprocess.STDOUT, text=True)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    text = out.read()
    out.close()
    if p.returncode:
        raise SystemExit(f"gnnscale {' '.join(args)} failed ({p.returncode}):\n{text[-3000:]}")
    return {"wall_s": wall, "max_rss_mb": ru.ru_maxrss / 1024, "log": text}


def partition_once(dataset: str, parts: int, out: Path) -> dict:
    """``gnnscale partition`` of ``dataset`` into ``parts`` (skipped when ``out`` already holds it:
    then the figures are those of the run that wrote it, kept in ``out/bench.json``)."""
    rec = out / "bench.json"
    meta_f = out / "meta.json"
    if meta_f.exists() and rec.exists():
        meta = json.loads(meta_f.read_text())
        if meta.get("dataset") == dataset and meta.get("num_parts") == parts:
            return json.loads(rec.read_text()) | {"reused": True}
    out.parent.mkdir(parents=True, exist_ok=True)
    r = timed_cli("partition", "--dataset", dataset, "--parts", str(parts), "--out", str(out),
                  log=out.parent / f"{out.name}.log")
    gen = re.search(r"generated .* in ([0-9.]+) s", r["log"])
    meta = json.loads(meta_f.read_text())
    if in_process():  # --smoke: the command in this process, as timed_cli's
        import contextlib
        import io

        from gnnscale.cli.main import main as cli

        with contextlib.redirect_stdout(io.StringIO()) as text:
            if cli(["info", str(out), "--json"]):
                raise SystemExit(f"gnnscale info {out} --json failed: its error is above")
        info = json.loads(text.getvalue())
    else:
        info = json.loads(subprocess.run([sys.executable, "-m", "gnnscale", "info", str(out), "--json"],
                                         capture_output=True, text=True, check=True).stdout)
    keys = ("partition_seconds", "write_seconds", "total_seconds", "partition_peak_rss_bytes", "peak_rss_bytes",
            "peak_rss_growth_bytes", "peak_rss_exact", "edge_cut_fraction", "replication_factor", "balance",
            "num_nodes", "num_edges")
    res = {"dataset": dataset, "parts": parts, "generate_seconds": float(gen.group(1)) if gen else None,
           "command_wall_s": r["wall_s"], "command_max_rss_mb": r["max_rss_mb"],
           "meta": {k: meta.get(k) for k in keys},
           "info": {k: info.get(k) for k in keys},
           "typed": {k: meta["typed"][k] for k in ("node_types", "edge_types", "num_nodes_per_type",
                                                   "edges_per_relation", "cut_per_relation", "balance_per_type")}}
    rec.write_text(json.dumps(res, indent=1))
    return res


def relation_names(parts_dir: Path) -> list[str]:
    return [r for _, r, _ in json.loads((parts_dir / "meta.json").read_text())["typed"]["edge_types"]]


def whole_graph_sampler(whole_dir: Path, fanouts: list[int], per_relation: dict | None, seed: int,
                        backend: str = "auto"):
    """(part, sampler) of a 1-part partition: ``NeighborSampler`` typed by relation, keyed by the
    nodes' original ids (as the engine's samplers are)."""
    from gnnscale.data.loader import typed_graph
    from gnnscale.partitioning.format import load_part
    from gnnscale.samplers import NeighborSampler

    part = load_part(str(whole_dir), 0, verify=False)
    tg = typed_graph(part, fanouts, per_relation) if per_relation else typed_graph(part, fanouts)
    sampler = NeighborSampler(part.indptr, part.indices, fanouts, seed=seed, node_keys=part.orig_ids,
                              backend=backend, typed=tg)
    return part, sampler


def relation_estimate(parts_dir: Path, whole_dir: Path, fanouts: list[int], per_relation: dict | None,
                      batch_size: int, steps: int, seeds_per_rank_step: float, seed: int, measured: dict) -> dict:
    """Sampled edges per relation of one batch per rank (an estimate of the epoch's, times ``steps``).

    Rank p's seeds: ``batch_size`` of part p's training nodes (a seeded shuffle), drawn on the
    whole graph with requester p at (epoch 0, step 0): the distributed sampler's draws. An edge
    whose destination another part owns is drawn by that owner and comes back in a sample
    response; remote paper inputs are fetched as feature rows."""
    import numpy as np
    import torch

    meta = json.loads((parts_dir / "meta.json").read_text())
    P, n = meta["num_parts"], meta["num_nodes"]
    names = [r for _, r, _ in meta["typed"]["edge_types"]]
    feat_types = [t for t, f in enumerate(meta["typed"]["feature_dims"]) if f]
    feat_bytes = {t: 4 * f for t, f in enumerate(meta["typed"]["feature_dims"])}
    owner = np.empty(n, dtype=np.int64)
    train_orig = []
    for p in range(P):
        orig = np.load(parts_dir / f"part{p}" / "orig_ids.npy")
        owner[orig] = p
        train_orig.append(orig[np.load(parts_dir / f"part{p}" / "train_mask.npy")])
    part, sampler = whole_graph_sampler(whole_dir, fanouts, per_relation, seed)
    orig1 = part.orig_ids.numpy()
    to_whole = np.empty(n, dtype=np.int64)
    to_whole[orig1] = np.arange(n)
    owner_w = torch.from_numpy(owner[orig1])  # owner (in the P-part cut) of each whole-graph id
    R = len(names)
    tot = torch.zeros(R, dtype=torch.int64)
    rem = torch.zeros(R, dtype=torch.int64)
    per_hop = []
    T = len(meta["typed"]["node_types"])
    remote_by_type = [0] * T
    rng = np.random.default_rng(seed)
    for p in range(P):
        seeds = torch.from_numpy(np.sort(to_whole[rng.permutation(train_orig[p])[:batch_size]]))
        mb = sampler.sample(seeds, epoch=0, step=0)
        hops = []
        for b in reversed(mb.blocks):  # hop 0 (at the seeds) first
            et = b.edge_type
            dst_owner = owner_w[b.dst_ids[b.edge_index[1]]]
            t = torch.bincount(et, minlength=R)
            r_ = torch.bincount(et[dst_owner != p], minlength=R)
            tot += t
            rem += r_
            hops.append(t.tolist())
        per_hop.append(hops)
        inp = mb.blocks[0].src_ids
        ntype = mb.blocks[0].node_type
        remote = owner_w[inp] != p
        for t in range(T):
            remote_by_type[t] += int((remote & (ntype == t)).sum())
    scale = seeds_per_rank_step / batch_size * steps  # one batch per rank (summed over ranks), times the steps
    types = meta["typed"]["node_types"]
    remote_rows = sum(remote_by_type[t] for t in feat_types)
    remote_feat_bytes = sum(remote_by_type[t] * feat_bytes[t] for t in feat_types)
    sr = measured.get("sample_response")
    total_rem = int(rem.sum())
    out = {"estimate": True,
           "how": f"one batch of {batch_size} seeds per rank (all {P} ranks) sampled on the whole graph, "
                  f"times {steps} steps of {seeds_per_rank_step:.1f} seeds per rank on average",
           "sampled_edges_per_batch_by_relation": {names[r]: int(tot[r]) / P for r in range(R)},
           "sampled_edges_per_hop_by_relation_rank0": [{names[r]: h[r] for r in range(R)} for h in per_hop[0]],
           "epoch_sampled_edges_by_relation": {names[r]: int(tot[r]) * scale for r in range(R)},
           "epoch_remote_sampled_edges_by_relation": {names[r]: int(rem[r]) * scale for r in range(R)},
           "epoch_remote_feature_rows": remote_rows * scale,
           "epoch_remote_feature_bytes": remote_feat_bytes * scale,
           "epoch_remote_input_rows_by_type": {types[t]: remote_by_type[t] * scale for t in range(T)},
           "epoch_remote_embedding_rows": sum(remote_by_type[t] for t in range(T) if t not in feat_types) * scale}
    if sr is not None and total_rem:
        out["epoch_sample_response_bytes_by_relation"] = {names[r]: sr * int(rem[r]) / total_rem for r in range(R)}
    return out


def per_relation_arg(spec: str, names: list[str], fanouts: list[int]) -> dict | None:
    if spec == "none":
        return None
    if spec == "all":
        return {r: list(fanouts) for r in names}
    return json.loads(spec)


def mag(args, work: Path) -> dict:
    """Item 3: generate, partition (4 parts), one epoch of R-GCN by 4 workers, bytes by category."""
    dataset = mag_dataset(args.mag_nodes)
    P = args.mag_workers
    pdir = work / f"mag{args.mag_nodes}_p{P}"
    print(f"[mag] {dataset}: generate + METIS into {P} parts ...", flush=True)
    part = partition_once(dataset, P, pdir)
    m = part["meta"]
    print(f"[mag] generated in {part['generate_seconds']} s; METIS {m['partition_seconds']:.1f} s, write "
          f"{m['write_seconds']:.1f} s, total {m['total_seconds']:.1f} s, peak RSS "
          f"{m['peak_rss_bytes'] / 2**30:.2f} GiB (command {part['command_wall_s']:.1f} s wall, max RSS "
          + ("-" if part["command_max_rss_mb"] is None else f"{part['command_max_rss_mb'] / 1024:.2f}")
          + f" GiB); edge cut {m['edge_cut_fraction']:.3f}", flush=True)
    fanouts = [int(f) for f in args.mag_fanouts.split(",")]
    names = relation_names(pdir)
    per_rel = per_relation_arg(args.mag_relation_fanouts, names, fanouts)
    metrics = work / f"mag{args.mag_nodes}_p{P}_metrics.json"
    cmd = ["train", "--parts-dir", str(pdir), "--workers", str(P), "--layer", "rgcn",
           "--fanouts", ",".join(map(str, fanouts)), "--num-layers", str(len(fanouts)), "--hidden", "64",
           "--epochs", "1", "--eval-every", "0", "--batch-size", str(args.mag_batch_size), "--threads", "1",
           "--device", "cpu", "--no-progress", "--seed", "0", "--metrics", str(metrics),
           "--no-host-features", "--no-host-graph"]  # bytes by category: every remote row asked for
    if per_rel:
        cmd += ["--relation-fanouts", json.dumps(per_rel, separators=(",", ":"))]
    if args.mag_max_steps:
        cmd += ["--max-steps", str(args.mag_max_steps)]
    print(f"[mag] gnnscale {' '.join(cmd)}", flush=True)
    load0 = os.getloadavg()[0]
    run = timed_cli(*cmd, log=work / f"mag{args.mag_nodes}_p{P}_train.log")
    met = json.loads(metrics.read_text())
    ep = met["epochs"][0]
    from gnnscale.samplers.seeds import epoch_steps

    counts = [pp["train"] for pp in json.loads((pdir / "meta.json").read_text())["parts"]]
    train_nodes = sum(counts)
    steps = ep["steps"]
    full_steps = epoch_steps(counts, args.mag_batch_size)
    # the engine's batches (samplers/seeds.py): a whole epoch covers every training node once;
    # a capped one takes batch_size seeds per rank per step (more where a rank has more nodes)
    seeds_in_epoch = train_nodes if steps >= full_steps else sum(
        min(c, steps * max(args.mag_batch_size, -(-c // full_steps))) for c in counts)
    out = {"dataset": dataset, "provenance": provenance(), "partition": part,
           "train": {"command": "gnnscale " + " ".join(cmd), "job_wall_s": run["wall_s"],
                     "loadavg_1min_before_after": [load0, os.getloadavg()[0]],
                     "training_papers": train_nodes, "seeds_in_epoch": seeds_in_epoch, "full_epoch_steps": full_steps,
                     "max_steps": args.mag_max_steps or None, "steps": steps, "epoch_seconds": ep["epoch_seconds"],
                     "startup_seconds": met["startup_seconds"],
                     "startup_phase_seconds_max_over_ranks": met.get("startup_phase_seconds_max_over_ranks"),
                     "stage_seconds_max_over_ranks": ep["stage_seconds_max_over_ranks"], "loss": ep["loss"],
                     "train_acc": ep["train_acc"], "bytes_sent": ep["bytes_sent"],
                     "bytes_sent_by_category": ep["bytes_sent_by_category"],
                     "peak_rss_mb_by_rank": ep["peak_rss_mb_by_rank"],
                     "startup_rss_mb_by_rank": met.get("startup_rss_mb_by_rank"),
                     "feature_rows_remote_fetched": ep.get("feature_rows_remote_fetched"),
                     "fanouts": fanouts, "relation_fanouts": per_rel, "batch_size_per_worker": args.mag_batch_size}}
    t = out["train"]
    print(f"\n[mag] epoch: {t['steps']} steps ({t['seeds_in_epoch']:,} of {train_nodes:,} training papers; a whole "
          f"epoch is {t['full_epoch_steps']} steps) in {t['epoch_seconds']:.1f} s; start-up {t['startup_seconds']:.1f} s; "
          f"job {t['job_wall_s']:.1f} s wall")
    print("category            MB sent (all ranks)")
    for k, v in t["bytes_sent_by_category"].items():
        print(f"  {k:18s} {v / 1e6:12.1f}")
    print(f"  {'total':18s} {t['bytes_sent'] / 1e6:12.1f}")
    print("rank  peak RSS (MB)  start-up RSS (MB)")
    for r, (pk, su) in enumerate(zip(t["peak_rss_mb_by_rank"], t["startup_rss_mb_by_rank"] or [None] * P)):
        print(f"  {r}   {pk:12.0f}  {su or float('nan'):16.0f}")
    # bytes per relation: an estimate from one sampled batch per rank (the whole graph as one part)
    whole = work / f"mag{args.mag_nodes}_p1"
    print("\n[mag] per-relation estimate: 1-part partition of the same graph ...", flush=True)
    out["whole_graph_partition"] = partition_once(dataset, 1, whole)
    est = relation_estimate(pdir, whole, fanouts, per_rel, args.mag_batch_size, steps, seeds_in_epoch / (steps * P), 0,
                            ep["bytes_sent_by_category"])
    out["per_relation_estimate"] = est
    print(f"relation             sampled edges/batch  epoch sampled edges  of which remote  sample_response MB "
          f"(ESTIMATE: {est['how']})")
    for r in names:
        srb = est.get("epoch_sample_response_bytes_by_relation", {}).get(r)
        print(f"  {r:20s} {est['sampled_edges_per_batch_by_relation'][r]:16,.0f} "
              f"{est['epoch_sampled_edges_by_relation'][r]:20,.0f} {est['epoch_remote_sampled_edges_by_relation'][r]:16,.0f} "
              f"{(srb or 0) / 1e6:18.2f}")
    print("  remote input rows by type (estimate): "
          + ", ".join(f"{k} {v:,.0f}" for k, v in est["epoch_remote_input_rows_by_type"].items()))
    print(f"  remote feature rows: estimated {est['epoch_remote_feature_rows']:,.0f}, measured "
          f"{t['feature_rows_remote_fetched']:,}; remote embedding rows: estimated "
          f"{est['epoch_remote_embedding_rows']:,.0f}")
    return out


def write_dgl_graph(part, out: Path) -> dict:
    """The 1-part graph's edges per relation (per-type ids, int64) and the training papers, for DGL."""
    import numpy as np
    import torch

    meta_f = out / "graph.json"
    if meta_f.exists():
        return json.loads(meta_f.read_text())
    out.mkdir(parents=True, exist_ok=True)
    typed = part.typed
    book = typed.book
    n = part.num_owned
    dst_all = torch.repeat_interleave(torch.arange(n, dtype=torch.int64) + part.offset, torch.diff(part.indptr),
                                      output_size=part.indices.numel())
    etype = typed.etype.to(torch.int64)
    for r in range(typed.num_relations):
        sel = etype == r
        _, s = book.map_to_per_ntype(part.indices[sel])
        _, d = book.map_to_per_ntype(dst_all[sel])
        np.save(out / f"rel{r}_src.npy", s.numpy())
        np.save(out / f"rel{r}_dst.npy", d.numpy())
    tt = typed.node_types.index(typed.target_type)
    seeds = part.owned_ids[part.train_mask]
    t, per = book.map_to_per_ntype(seeds)
    assert bool((t == tt).all())
    np.save(out / "seeds.npy", per.numpy())
    meta = {"node_types": typed.node_types, "num_nodes": typed.meta["num_nodes_per_type"],
            "edge_types": [list(e) for e in typed.edge_types], "target_type": typed.target_type,
            "num_edges": int(part.indices.numel()), "num_seeds": int(seeds.numel())}
    meta_f.write_text(json.dumps(meta))
    return meta


def run_gnnscale_sampling(part, sampler, seeds, batch_size: int, min_seeds: int, seed: int, names: list[str]) -> dict:
    import torch

    g = torch.Generator().manual_seed(seed)
    sampler.sample(seeds[:batch_size])  # warm-up (numba's compile / cache load)
    R = len(names)
    per_rel = torch.zeros(R, dtype=torch.int64)
    n_seeds = n_batches = n_edges = n_input = 0
    epoch = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    while n_seeds < min_seeds:
        perm = seeds[torch.randperm(seeds.numel(), generator=g)]
        for step, s in enumerate(torch.split(perm, batch_size)):
            mb = sampler.sample(s, epoch=epoch, step=step)
            n_seeds += s.numel()
            n_batches += 1
            for b in mb.blocks:
                per_rel += torch.bincount(b.edge_type, minlength=R)
                n_edges += b.num_edges
            n_input += mb.blocks[0].num_src
            if n_seeds >= min_seeds:
                break
        epoch += 1
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return {"system": "gnnscale", "time_s": dt, "cpu_s": cpu, "seeds": n_seeds, "batches": n_batches,
            "seeds_per_s": n_seeds / dt, "seeds_per_cpu_s": n_seeds / cpu,
            "mean_sampled_edges": n_edges / n_batches, "mean_input_nodes": n_input / n_batches,
            "mean_sampled_edges_per_relation": {names[r]: int(per_rel[r]) / n_batches for r in range(R)},
            "backend": sampler.kernels.name, "loadavg_1min_after": os.getloadavg()[0]}


def run_dgl_sampling(graph_dir: Path, fanouts: list[int], batch_size: int, min_seeds: int, threads: int,
                     seed: int) -> dict | None:
    if dgl_python()[0] is None:
        print(f"[sampling] {dgl_python()[1]}: gnnscale only",
              file=sys.stderr)
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "dgl.json"
        cmd = [str(DGL_PY), str(Path(__file__).with_name("dgl_hetero_sampling.py")), "--graph", str(graph_dir),
               "--fanouts", ",".join(map(str, fanouts)), "--batch-size", str(batch_size), "--min-seeds",
               str(min_seeds), "--threads", str(threads), "--seed", str(seed), "--out", str(out)]
        r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, DGLBACKEND="pytorch"))
        if r.returncode or not out.exists():
            print(f"[sampling] DGL run failed:\n{r.stdout[-1500:]}{r.stderr[-3000:]}", file=sys.stderr)
            return None
        return json.loads(out.read_text())


def sampling(args, work: Path) -> dict:
    """Item 4: typed neighbour sampling, gnnscale beside DGL 2.1, alternating, ratio of medians."""
    import torch

    torch.set_num_threads(args.threads)
    os.environ["GNNSCALE_WORKER_THREADS"] = str(args.threads)  # the engine workers' kernels (parallel)
    try:
        import numba

        numba.set_num_threads(args.threads)
    except ImportError:
        pass
    dataset = mag_dataset(args.mag_nodes)
    fanouts = [int(f) for f in args.sampling_fanouts.split(",")]
    whole = work / f"mag{args.mag_nodes}_p1"
    print(f"[sampling] {dataset} as one part ...", flush=True)
    part_rec = partition_once(dataset, 1, whole)
    part, sampler = whole_graph_sampler(whole, fanouts, None, seed=0)
    names = [r for _, r, _ in part.typed.edge_types]
    graph_dir = work / f"mag{args.mag_nodes}_dgl"
    gmeta = write_dgl_graph(part, graph_dir)
    seeds = part.owned_ids[part.train_mask]
    print(f"[sampling] {part.num_owned:,} nodes, {part.indices.numel():,} edges, {seeds.numel():,} training papers; "
          f"fan-outs {fanouts} per relation (DGL {list(reversed(fanouts))}), batch {args.sampling_batch_size}, "
          f"{args.threads} threads", flush=True)
    ours, dgl = [], []
    for r in range(args.repeats):
        ours.append(run_gnnscale_sampling(part, sampler, seeds, args.sampling_batch_size, args.min_seeds, r, names))
        print(f"[sampling] gnnscale run {r}: {ours[-1]['seeds_per_s']:,.0f} seeds/s, "
              f"{ours[-1]['seeds_per_cpu_s']:,.0f} per CPU s "
              f"({ours[-1]['mean_sampled_edges']:,.0f} edges/batch, {ours[-1]['backend']})", flush=True)
        if not args.no_dgl:
            d = run_dgl_sampling(graph_dir, fanouts, args.sampling_batch_size, args.min_seeds, args.threads, r)
            if d:
                d["loadavg_1min_after"] = os.getloadavg()[0]
                dgl.append(d)
                print(f"[sampling] DGL      run {r}: {d['seeds_per_s']:,.0f} seeds/s, "
                      f"{d['seeds_per_cpu_s']:,.0f} per CPU s "
                      f"({d['mean_sampled_edges']:,.0f} edges/batch)", flush=True)
    med = statistics.median(o["seeds_per_s"] for o in ours)
    cmed = statistics.median(o["seeds_per_cpu_s"] for o in ours)
    out = {"dataset": dataset, "provenance": provenance(), "graph": gmeta, "whole_graph_partition": part_rec,
           "fanouts_per_hop": fanouts, "dgl_fanouts": list(reversed(fanouts)), "batch_size": args.sampling_batch_size,
           "threads": args.threads, "min_seeds": args.min_seeds,
           "gnnscale": {"runs": ours, "median_seeds_per_s": med, "median_seeds_per_cpu_s": cmed,
                        "median_sampled_edges_per_batch": statistics.median(o["mean_sampled_edges"] for o in ours)}}
    if dgl:
        dmed = statistics.median(d["seeds_per_s"] for d in dgl)
        dcmed = statistics.median(d["seeds_per_cpu_s"] for d in dgl)
        out["dgl"] = {"runs": dgl, "median_seeds_per_s": dmed, "median_seeds_per_cpu_s": dcmed,
                      "median_sampled_edges_per_batch": statistics.median(d["mean_sampled_edges"] for d in dgl)}
        out["ratio_gnnscale_over_dgl"] = med / dmed
        out["ratio_gnnscale_over_dgl_cpu"] = cmed / dcmed
    print("\nsystem     seeds/s (median)  seeds per CPU s (median)  sampled edges/batch  input nodes/batch")
    for k in ("gnnscale", "dgl"):
        if k in out:
            runs = out[k]["runs"]
            print(f"{k:9s} {out[k]['median_seeds_per_s']:17,.0f} {out[k]['median_seeds_per_cpu_s']:25,.0f} "
                  f"{out[k]['median_sampled_edges_per_batch']:20,.0f} "
                  f"{statistics.median(x['mean_input_nodes'] for x in runs):18,.0f}")
    if dgl:
        print(f"ratio gnnscale / DGL (medians): {out['ratio_gnnscale_over_dgl']:.2f} wall, "
              f"{out['ratio_gnnscale_over_dgl_cpu']:.2f} per CPU second")
        print("relation             gnnscale edges/batch   DGL edges/batch")
        for n in names:
            a = statistics.median(o["mean_sampled_edges_per_relation"][n] for o in ours)
            b = statistics.median(d["mean_sampled_edges_per_relation"][n] for d in dgl)
            print(f"  {n:20s} {a:18,.0f} {b:17,.0f}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--what", default="acm", help="comma-separated among acm (item 1), mag (item 3), sampling (item 4)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--skip-pyg", action="store_true", help="acm: leave out the PyG reference (more seeds of the engine)")
    ap.add_argument("--epochs", type=int, default=HPARAMS["epochs"])
    ap.add_argument("--workers", default="1,2,4", help="worker counts of the engine's runs (parts = workers)")
    g = ap.add_argument_group("mag and sampling")
    g.add_argument("--mag-nodes", type=int, default=1_000_000, help="synthetic-mag num_nodes")
    g.add_argument("--mag-workers", type=int, default=4, help="parts = workers of the mag epoch")
    g.add_argument("--mag-batch-size", type=int, default=1024, help="seeds per step per worker")
    g.add_argument("--mag-max-steps", type=int, default=0, help="cap on the epoch's steps (0: whole epoch)")
    g.add_argument("--mag-fanouts", default="10,10", help="fan-outs per hop of every relation")
    g.add_argument("--mag-relation-fanouts", default="all",
                   help="JSON {relation: [fan-outs]} for --relation-fanouts; 'all': name every relation with "
                   "--mag-fanouts; 'none': leave the option out")
    g.add_argument("--sampling-fanouts", default="15,10", help="per hop from the seeds, every relation")
    g.add_argument("--sampling-batch-size", type=int, default=1024)
    g.add_argument("--repeats", type=int, default=2, help="alternating sampling runs per system")
    g.add_argument("--min-seeds", type=int, default=51200, help="seeds per timed sampling run")
    g.add_argument("--threads", type=int, default=2, help="threads of each sampling run")
    g.add_argument("--no-dgl", action="store_true", help="time gnnscale's sampling only")
    g.add_argument("--work", default=None, help="folder for partitions and the DGL graph (kept; reused by "
                   "sampling when mag made them); default: a temporary folder")
    ap.add_argument("--smoke", action="store_true", help="every item at its smallest: ACM 1 epoch, 1 seed, 2 "
                    "workers; a 5,000-node synthetic-mag, 2 workers, 2 steps; 512 seeds of sampling, 1 run")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.smoke:
        args.what, args.seeds, args.epochs, args.workers = "acm,mag,sampling", "0", 1, "2"
        args.mag_nodes, args.mag_workers, args.mag_batch_size, args.mag_max_steps = 5000, 2, 64, 2
        args.sampling_batch_size, args.min_seeds, args.repeats = 128, 512, 1
        smoke_in_process()  # gnnscale() in this process: torch imported once, 2-worker launches forked
    what = args.what.split(",")
    unknown = set(what) - {"acm", "mag", "sampling"}
    if unknown:
        raise SystemExit(f"--what: unknown {sorted(unknown)}; choose among acm, mag, sampling")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work) if args.work else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        if "acm" in what:
            results["acm"] = acm(args, work)
        if "mag" in what:
            results["mag"] = mag(args, work)
            if "sampling" in what:
                write_json(args.json, results)  # the epoch's figures even if sampling fails later
        if "sampling" in what:
            results["sampling"] = sampling(args, work)
    write_json(args.json, results)


if __name__ == "__main__":
    main()
