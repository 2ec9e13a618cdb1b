"""Two torch threads against one on typed graphs, quiet and loaded (issue 44, item 4c).

A lone worker training a typed graph with 2 threads was 50-100x slower per epoch than with
``--threads 1`` while another process kept the machine busy: its steps are hundreds of small
per-relation ops, each opening an OpenMP region whose second thread was off the core (and
spinning idle threads took the core from the one with work). The fix
(:mod:`gnnscale.process.threads`): a typed step runs its ops on one thread and gives the
worker's threads to the ops large enough to pay for them (the typed encoder's product over wide
bag-of-words rows); a typed run's idle OpenMP threads sleep (``OMP_WAIT_POLICY=PASSIVE``).

Graphs, each cut into 1 part by ``gnnscale partition``:

* ``dblp``: a generated DBLP-shaped graph (there is no DBLP file here): 4,057 authors (334-column
  0/1 bag of words, the target: 4 classes, 20 training seeds per class = 80), 14,328 papers
  (4,231-column 0/1 bag of words, ~8 words a row, stored dense float32 as the engine stores
  features), 7,723 terms (50 dense features), 20 conferences (no features: a learned
  embedding); relations author-paper (~19.6k), paper-term (~85.8k), paper-conference (14,328)
  and their reverses (``hetero-dir:...?undirected=true``); 26,128 nodes in all.
* ``acm``: ACM (/work/shared/data/acm, split 20: 60 training papers).

Each run: ``gnnscale train --workers 1 --layer rel:sage --fanouts -1,-1 --batch-size 80
--hidden 64 --eval-every 0 --threads T`` (every training seed in one step, full
neighbourhoods), compute seconds per epoch (``stage_seconds.compute`` of the metrics file,
median over the epochs after the first). Conditions: ``quiet`` (nothing started beside it; on
a shared machine other work may run) and ``loaded`` (a ``python -c "while True: pass"`` process
beside it, killed after). Threads 1 and 2 alternate within each condition (their order swapped
every repeat), so both see the same machine; the ratio is 2-thread / 1-thread of the medians
over repeats (<= ~1.0 expected), with each repeat's paired ratio beside it. ``--vs-checkout
DIR`` runs another checkout (e.g. ``git worktree add /tmp/old HEAD~3``) in the same rounds: the
before figures.

    python benchmarks/threads_typed.py --json results/threads_typed.json
    python benchmarks/threads_typed.py --smoke
    python benchmarks/threads_typed.py --vs-checkout /tmp/old --json results/threads_typed_vs.json
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import SHARED, write_json  # noqa: E402
from epoch import checkout_env  # noqa: E402

# DBLP's shapes (PyG's DBLP / HGB): nodes and feature widths per type, edges per relation
DBLP_NODES = {"author": 4057, "paper": 14328, "term": 7723, "conference": 20}
DBLP_FEATURES = {"author": 334, "paper": 4231, "term": 50}
DBLP_EDGES = {("author", "to", "paper"): 19645, ("paper", "to_term", "term"): 85810}
DBLP_CLASSES = 4
WORDS_PER_ROW = {"author": 12, "paper": 8}
GRAPHS = {"dblp": None, "acm": f"acm:{SHARED / 'acm'}?split=20"}
TRAIN = ["--workers", "1", "--layer", "rel:sage", "--fanouts", "-1,-1", "--eval-fanouts", "-1,-1",
         "--batch-size", "80", "--hidden", "64", "--eval-every", "0", "--no-progress", "--seed", "0",
         "--device", "cpu"]


def _bag_of_words(rng, rows: int, cols: int, words: int, topic: np.ndarray) -> np.ndarray:
    """float32 [rows, cols] 0/1, ``words`` draws a row (half of them from the row's topic's
    quarter of the columns, so that the features say something about the class)."""
    x = np.zeros((rows, cols), np.float32)
    r = np.repeat(np.arange(rows), words)
    block = cols // DBLP_CLASSES
    own = topic[r] * block + rng.integers(0, block, r.size)
    c = np.where(rng.random(r.size) < 0.5, own, rng.integers(0, cols, r.size))
    x[r, c] = 1.0
    return x


def make_dblp_like(folder: str | os.PathLike, seed: int = 0) -> str:
    """Write a DBLP-shaped typed graph as a ``hetero-dir:`` folder (see the module docstring);
    returns the dataset name that loads it with the reverse relations."""
    rng = np.random.default_rng(seed)
    folder = Path(folder)
    n = DBLP_NODES
    y = rng.integers(0, DBLP_CLASSES, n["author"])
    topic = rng.integers(0, DBLP_CLASSES, n["paper"])
    # authors write papers of their class 80% of the time; every paper has an author
    k = DBLP_EDGES[("author", "to", "paper")]
    paper = rng.integers(0, n["paper"], k)
    paper[: n["paper"]] = np.arange(n["paper"])
    cls = np.where(rng.random(k) < 0.8, topic[paper], rng.integers(0, DBLP_CLASSES, k))
    by_class = np.argsort(y, kind="stable")
    starts = np.searchsorted(y[by_class], np.arange(DBLP_CLASSES + 1))
    sizes = starts[1:] - starts[:-1]
    author = by_class[starts[cls] + (rng.random(k) * sizes[cls]).astype(np.int64)]
    k = DBLP_EDGES[("paper", "to_term", "term")]
    edges = {
        ("author", "to", "paper"): np.unique(np.stack([author, paper]), axis=1),
        ("paper", "to_term", "term"): np.unique(np.stack([rng.integers(0, n["paper"], k),
                                                          rng.integers(0, n["term"], k)]), axis=1),
        ("paper", "to_conf", "conference"): np.stack([np.arange(n["paper"]),
                                                      topic * 5 + rng.integers(0, 5, n["paper"])]),
    }
    x = {"paper": _bag_of_words(rng, n["paper"], DBLP_FEATURES["paper"], WORDS_PER_ROW["paper"], topic),
         "author": _bag_of_words(rng, n["author"], DBLP_FEATURES["author"], WORDS_PER_ROW["author"], y),
         "term": rng.standard_normal((n["term"], DBLP_FEATURES["term"])).astype(np.float32)}
    for t, count in n.items():
        d = folder / "nodes" / t
        d.mkdir(parents=True, exist_ok=True)
        (d / "num_nodes.txt").write_text(f"{count}\n")
        if t in x:
            np.save(d / "x.npy", x[t])
    np.save(folder / "nodes" / "author" / "y.npy", y.astype(np.int64))
    perm = rng.permutation(n["author"])
    train = np.concatenate([perm[y[perm] == c][:20] for c in range(DBLP_CLASSES)])
    rest = rng.permutation(np.setdiff1d(perm, train))
    np.savez(folder / "nodes" / "author" / "split.npz", train_idx=train, val_idx=rest[:400], test_idx=rest[400:])
    for (s, r, d), ei in edges.items():
        p = folder / "edges" / f"{s}__{r}__{d}"
        p.mkdir(parents=True, exist_ok=True)
        np.save(p / "edge_index.npy", ei.astype(np.int64))
    (folder / "meta.json").write_text(json.dumps({
        "target_type": "author", "node_types": list(n), "num_classes": DBLP_CLASSES,
        "edge_types": [list(et) for et in edges]}))
    return f"hetero-dir:{folder}?undirected=true"


def partition(dataset: str, out: Path) -> str:
    """``dataset`` cut into 1 part at ``out`` (kept when it is already there)."""
    meta = out / "meta.json"
    if not (meta.exists() and json.loads(meta.read_text()).get("dataset") == dataset):
        subprocess.run([sys.executable, "-m", "gnnscale", "partition", "--dataset", dataset, "--parts", "1",
                        "--out", str(out)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return str(out)


@contextlib.contextmanager
def burner(on: bool):
    """A process spinning one core for the block (``loaded``); always ended after it."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if on else None
    try:
        yield
    finally:
        if proc is not None:
            proc.kill()
            proc.wait(timeout=30)


def compute_per_epoch(parts: str, threads: int, epochs: int, metrics: Path, env: dict | None, cwd: str) -> dict:
    """One ``gnnscale train`` run: compute seconds per epoch (median after the first epoch)."""
    cmd = [sys.executable, "-m", "gnnscale", "train", "--parts-dir", parts, *TRAIN, "--epochs", str(epochs),
           "--threads", str(threads), "--metrics", str(metrics)]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    if r.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{(r.stdout + r.stderr)[-3000:]}")
    m = json.loads(metrics.read_text())
    compute = [e["stage_seconds"]["compute"] for e in m["epochs"]]
    return {"compute_s": statistics.median(compute[1:]), "per_epoch": compute, "wall_s": time.perf_counter() - t0,
            "threads_reported": m.get("threads")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", default="dblp,acm", help="comma-separated among: " + ", ".join(GRAPHS))
    ap.add_argument("--conditions", default="quiet,loaded")
    ap.add_argument("--repeats", type=int, default=3, help="rounds of (1 thread, 2 threads) per graph and condition")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--vs-checkout", metavar="DIR", help="also run this other checkout of gnnscale in each round")
    ap.add_argument("--work", default=None, help="scratch folder (graphs and partitions are kept there)")
    ap.add_argument("--json", default=None, help="write the figures here")
    ap.add_argument("--smoke", action="store_true", help="dblp only, 1 repeat of 2 epochs, quiet only "
                    "(the loaded condition's burner spins a core while its runs last)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout's TERM still ends the burner (finally)
    if args.smoke:
        args.graphs, args.repeats, args.epochs, args.conditions = "dblp", 1, 2, "quiet"
    work = Path(args.work or tempfile.mkdtemp(prefix="gnnscale-threads-typed-"))
    work.mkdir(parents=True, exist_ok=True)
    here = work / "here"
    here.mkdir(exist_ok=True)
    sides = {"this": (None, str(here))}
    if args.vs_checkout:
        sides["other"] = checkout_env(args.vs_checkout, str(work))
    parts = {}
    for g in args.graphs.split(","):
        dataset = GRAPHS[g] or make_dblp_like(work / "dblp")
        parts[g] = partition(dataset, work / f"{g}1")
    out: dict = {"graphs": {g: GRAPHS[g] or "dblp-shaped (make_dblp_like)" for g in parts}, "train_args": TRAIN,
                 "epochs": args.epochs, "repeats": args.repeats, "runs": [], "cpus": os.cpu_count(),
                 "baseline": os.path.abspath(args.vs_checkout) if args.vs_checkout else None}
    for rep in range(args.repeats):
        for g, pdir in parts.items():
            for cond in args.conditions.split(","):
                with burner(cond == "loaded"):
                    for side, (env, cwd) in sides.items():
                        for th in ((1, 2) if rep % 2 == 0 else (2, 1)):
                            r = compute_per_epoch(pdir, th, args.epochs, work / f"m-{g}-{cond}-{side}-{th}.json",
                                                  env, cwd)
                            r.update(graph=g, condition=cond, side=side, threads=th, repeat=rep,
                                     loadavg_1min=os.getloadavg()[0])
                            out["runs"].append(r)
                            print(f"  {g:5s} {cond:6s} {side:5s} threads {th}: compute {r['compute_s']:.4f} s/epoch "
                                  f"(load {r['loadavg_1min']:.1f})", flush=True)
    summary = {}
    print(f"\n{'graph':6s} {'cond':7s} {'side':6s} {'1 thread':>10s} {'2 threads':>10s} {'ratio':>6s}  paired ratios")
    for g in parts:
        for cond in args.conditions.split(","):
            for side in sides:
                runs = [r for r in out["runs"] if (r["graph"], r["condition"], r["side"]) == (g, cond, side)]
                by = {th: {r["repeat"]: r["compute_s"] for r in runs if r["threads"] == th} for th in (1, 2)}
                one, two = statistics.median(by[1].values()), statistics.median(by[2].values())
                paired = [by[2][k] / by[1][k] for k in sorted(by[1])]
                summary[f"{g}/{cond}/{side}"] = {"one_thread_s": one, "two_threads_s": two, "ratio": two / one,
                                                 "paired_ratios": paired}
                print(f"{g:6s} {cond:7s} {side:6s} {one:10.4f} {two:10.4f} {two / one:6.2f}  "
                      + " ".join(f"{p:.2f}" for p in paired))
    out["summary"] = summary
    mine = [v["ratio"] for k, v in summary.items() if k.endswith("/this")]
    out["max_ratio_this"] = max(mine)
    print(f"largest 2-thread / 1-thread ratio of this checkout: {max(mine):.2f}")
    write_json(args.json, out)


if __name__ == "__main__":
    main()
