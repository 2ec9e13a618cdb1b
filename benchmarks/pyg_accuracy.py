"""Accuracy of the plain PyG loops on gnnscale's sampler: one process, 2 under torchrun, and
``gnnscale train`` with the matching built-in model (issue 46).

Three cases, each an example run as a user runs it (a subprocess; its printed test figure):

- ``node``: ``examples/pyg_loop_node.py`` (Cora, PyG's ``GraphSAGE``; test accuracy) against
  ``gnnscale.train("planetoid:cora", layer="sage")`` with its settings (30 epochs, fan-outs
  10,10, batch 32, hidden 64, lr 0.01, weight decay 5e-4, dropout 0.5);
- ``typed``: ``examples/pyg_loop_typed.py`` (ACM ``?split=20``; per-type Linear / learned rows to
  64, dropout, ``to_hetero(GraphSAGE)``) against ``layer="rel:sage"`` (the engine's typed encoder and
  relation-wise SAGE: the same parameters, and the engine's trained weights loaded into the
  example's model give the engine's test accuracy; 20 epochs, fan-outs 10,10 per relation,
  batch 16, lr 0.005, weight decay 5e-4, dropout 0.5). Left different: the engine trains the
  subject rows with a sparse Adam without weight decay, the example with its Adam;
- ``link``: ``examples/pyg_loop_link.py`` (Cora links: ``RandomLinkSplit`` 85/5/10, GraphSAGE
  encoder, dot decoder, one uniform negative per positive that is no edge of the graph; test AUC)
  against ``task="link"``, ``layer="sage"`` on the same split (the example's seeding: torch and
  ``random``), decoder dot, binary cross-entropy, ``filter_negatives=True`` and
  ``exclude_seed_edges=False`` (PyG's loader leaves a batch's own edges in its neighbourhoods),
  5 epochs, batch 256, hidden 64, lr 0.01, dropout 0.

The engine is run with ``workers=1, threads=1`` and ``eval_fanouts=[-1, -1]`` (the examples score
every neighbour); every figure compared is the final epoch's test figure (the engine's at its best validation
epoch is kept in the JSON beside it). One difference stays in ``link``:
the example scores test pairs on PyG's test graph (training and validation edges), the engine on
its training edges. Per case: seeds ``--seeds`` in one process and with the engine,
``--dist-seeds`` under ``torchrun --standalone --nproc-per-node 2``; the table gives the medians and
the differences in points (100 x the figure), and whether each is within 1 point.
Children run with ``OMP_NUM_THREADS=1``; one run at a time.

    nice -n 10 python benchmarks/pyg_accuracy.py --json results/pyg_accuracy.json
    python benchmarks/pyg_accuracy.py --what typed --seeds 0-6 --dist-seeds 0-2
    python benchmarks/pyg_accuracy.py --smoke     # typed and link: seed 0, 1 epoch (2 processes: typed)
"""
from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import REPO, SHARED, write_json  # noqa: E402

CASES = {
    "node": {"script": "pyg_loop_node.py", "pattern": r"test accuracy: (\S+)", "epochs": 30},
    "typed": {"script": "pyg_loop_typed.py", "pattern": r"test accuracy: (\S+)", "epochs": 20},
    "link": {"script": "pyg_loop_link.py", "pattern": r"test AUC: ([0-9.]+)", "epochs": 5},
}


def child_env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "GNNSCALE_FAULT"} | {"OMP_NUM_THREADS": "1"}


def loop(case: str, procs: int, seed: int, epochs: int, work: Path, timeout: float) -> dict:
    """Run the example (``procs`` > 1: under torchrun) and read its test figure."""
    cmd = [sys.executable]
    if procs > 1:
        cmd += ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(procs)]
    cmd += [str(REPO / "examples" / CASES[case]["script"]), "--seed", str(seed), "--epochs", str(epochs)]
    if case == "node":
        cmd += ["--parts", str(work / f"cora_parts_{procs}")]
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env=child_env(), cwd=work, timeout=timeout)
    found = re.findall(CASES[case]["pattern"], r.stdout)
    if r.returncode or len(found) != 1:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {r.returncode}):\n{r.stdout[-1500:]}\n{r.stderr[-3000:]}")
    return {"value": float(found[0]), "s": round(time.time() - t0, 1)}


def engine(case: str, seed: int, epochs: int, work: Path) -> dict:
    """``gnnscale.train`` with the built-in model matching the example, 1 worker, 1 thread."""
    import gnnscale

    common = dict(workers=1, threads=1, verify=False, seed=seed, epochs=epochs, fanouts=[10, 10],
                  eval_fanouts=[-1, -1], hidden=64, cache_dir=str(work / "cache"), progress=False)
    t0 = time.time()
    if case == "node":
        r = gnnscale.train("planetoid:cora", root=str(SHARED / "planetoid" / "raw"), layer="sage", batch_size=32,
                           lr=0.01, weight_decay=5e-4, dropout=0.5, **common)
        key = "test_acc"
    elif case == "typed":
        r = gnnscale.train(f"acm:{SHARED / 'acm'}?split=20", layer="rel:sage", batch_size=16, lr=0.005,
                           weight_decay=5e-4, dropout=0.5, **common)
        key = "test_acc"
    else:
        import torch
        import torch_geometric.transforms as T

        from gnnscale.datasets import load_dataset

        torch.manual_seed(seed)  # the example's split: RandomLinkSplit under the same seeds
        random.seed(seed)
        data = load_dataset("planetoid:cora", root=str(SHARED / "planetoid"))
        data = data.__class__(x=data.x, edge_index=data.edge_index, num_nodes=data.num_nodes)
        split = T.RandomLinkSplit(num_val=0.05, num_test=0.1, is_undirected=True,
                                  add_negative_train_samples=False)(data)
        r = gnnscale.train(split, task="link", layer="sage", decoder="dot", link_loss="bce", neg_sampling="uniform",
                           num_negatives=1, filter_negatives=True, exclude_seed_edges=False, batch_size=256,
                           lr=0.01, dropout=0.0, **common)
        key = "test_auc"
    # the figure compared is the final epoch's (as the loops print); the one at the best validation epoch beside it
    return {"value": float(r[key]), "at_best_val": r.get(f"{key}_at_best_val"), "s": round(time.time() - t0, 1)}


def seed_list(text: str) -> list[int]:
    """``0-6`` or ``0,1,2`` (or empty: none) -> ints."""
    out: list[int] = []
    for item in filter(None, text.split(",")):
        lo, _, hi = item.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def points(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(100 * (a - b), 2)


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def run_case(case: str, seeds: list[int], dist_seeds: list[int], epochs: int, work: Path, timeout: float) -> dict:
    runs: dict[str, dict[int, dict]] = {"one": {}, "two": {}, "engine": {}}
    for seed in seeds:
        runs["one"][seed] = loop(case, 1, seed, epochs, work, timeout)
        runs["engine"][seed] = engine(case, seed, epochs, work)
        print(f"  {case} seed {seed}: 1 process {runs['one'][seed]['value']:.4f}, "
              f"engine {runs['engine'][seed]['value']:.4f}", flush=True)
    for seed in dist_seeds:
        runs["two"][seed] = loop(case, 2, seed, epochs, work, timeout)
        if seed not in runs["one"]:
            runs["one"][seed] = loop(case, 1, seed, epochs, work, timeout)
        print(f"  {case} seed {seed}: 2 processes {runs['two'][seed]['value']:.4f}", flush=True)
    values = {k: {s: r["value"] for s, r in v.items()} for k, v in runs.items()}
    one = median([values["one"][s] for s in seeds])
    eng = median([values["engine"][s] for s in seeds])
    one_d = median([values["one"][s] for s in dist_seeds])
    two = median([values["two"][s] for s in dist_seeds])
    res = {"epochs": epochs, "seeds": seeds, "dist_seeds": dist_seeds, "runs": runs,
           "median_one_process": one, "median_engine": eng,
           "one_minus_engine_points": points(one, eng),
           "median_one_process_dist_seeds": one_d, "median_two_processes": two,
           "two_minus_one_points": points(two, one_d)}
    res["within_1_point"] = {k: (abs(res[k]) <= 1.0 if res[k] is not None else None)
                             for k in ("one_minus_engine_points", "two_minus_one_points")}
    return res


def fmt(v: float | None, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--what", default="node,typed,link", help="cases, comma-separated: node, typed, link")
    ap.add_argument("--seeds", default="0-6", help="seeds of the one-process loop and the engine (e.g. 0-6)")
    ap.add_argument("--dist-seeds", default="0-2", help="seeds of the 2-process runs (torchrun); empty: none")
    ap.add_argument("--epochs", type=int, default=None, help="every case's epochs (default: the example's)")
    ap.add_argument("--work", default=None, help="folder for partitions (default: a temporary one)")
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds one example run may take")
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true", help="typed and link, seed 0, 1 epoch, 2 processes on typed only")
    args = ap.parse_args()
    cases = [c.strip() for c in ("typed,link" if args.smoke else args.what).split(",") if c.strip()]
    bad = [c for c in cases if c not in CASES]
    if bad:
        raise SystemExit(f"--what: expected cases among {', '.join(CASES)}, found {', '.join(bad)}")
    seeds, dist_seeds = seed_list(args.seeds), seed_list(args.dist_seeds)
    work = Path(args.work or tempfile.mkdtemp(prefix="gnnscale-pyg-accuracy-"))
    work.mkdir(parents=True, exist_ok=True)
    out = {"commit": subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True).stdout.strip(), "cases": {}}
    for case in cases:
        epochs = 1 if args.smoke else (args.epochs or CASES[case]["epochs"])
        ds = ([0] if case == "typed" else []) if args.smoke else dist_seeds
        print(f"{case}: {epochs} epochs, seeds {[0] if args.smoke else seeds}, 2 processes: seeds {ds}", flush=True)
        out["cases"][case] = run_case(case, [0] if args.smoke else seeds, ds, epochs, work, args.timeout)

    print("\ncase  | 1 process (median) | engine (median) | 1p - engine (pt) | 1p, dist seeds | 2 processes | "
          "2p - 1p (pt)")
    for case, r in out["cases"].items():
        w = r["within_1_point"]
        e = "" if w["one_minus_engine_points"] is None else (" ok" if w["one_minus_engine_points"] else " NOT within 1")
        d = "" if w["two_minus_one_points"] is None else (" ok" if w["two_minus_one_points"] else " NOT within 1")
        print(f"{case:5} | {fmt(r['median_one_process']):18} | {fmt(r['median_engine']):15} | "
              f"{fmt(r['one_minus_engine_points'], 2) + e:16} | {fmt(r['median_one_process_dist_seeds']):14} | "
              f"{fmt(r['median_two_processes']):11} | {fmt(r['two_minus_one_points'], 2) + d}")
        for k in ("one", "engine", "two"):
            if r["runs"][k]:
                print(f"        {k:6}: " + " ".join(f"{s}:{v['value']:.4f}" for s, v in sorted(r["runs"][k].items())))
    write_json(args.json, out)


if __name__ == "__main__":
    main()
