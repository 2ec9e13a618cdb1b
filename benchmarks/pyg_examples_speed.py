"""Seconds per epoch: PyG's own examples on gnnscale.pyg against ``gnnscale train`` with the same
model, fan-outs, batch and data (issue 56, "What must be shown": PyG's examples).

Each case runs an ``examples/pyg_upstream`` script as a user runs it (a subprocess, its own
arguments) and ``gnnscale.train`` with the built-in model that matches it, back to back in one run:

- ``sage``: ``ogbn_train.py --model sage`` (Cora, PyG's ``GraphSAGE``: 3 layers, hidden 256,
  dropout 0.5, fan-out 10 per hop, batch 1024, Adam lr 0.003; each epoch trains and scores the
  validation nodes on sampled batches) against ``layer="sage"``, ``num_layers=3``, ``hidden=256``,
  ``fanouts=eval_fanouts=[10, 10, 10]``, ``batch_size=1024``, ``lr=0.003``, ``dropout=0.5``;
- ``hetero``: ``to_hetero_mag.py`` (ACM ``?split=20``, ``to_hetero`` of two ``SAGEConv(64)`` and a
  ``Linear``, fan-outs 10,10, batch 1024, lr 0.01, validation each epoch) against
  ``layer="rel:sage"``, ``num_layers=2``, ``hidden=64``, the same fan-outs, batch and lr, dropout 0;
- ``dist``: ``node_ogb_cpu.py`` on 2 processes under torchrun (Cora in 2 METIS parts by its
  ``partition_graph.py``; GraphSAGE hidden 256, fan-outs 10,5, batch 32 per rank, lr 0.0004)
  against ``workers=2`` with the same model, fan-outs, batch and lr (training time only: the
  example prints it per epoch).

Seconds per epoch, the median over the epochs after the first (which pays the compilations):
training only for ``sage`` and ``dist`` (the example's own printed training time per epoch, rank 0's
for ``dist``; the engine's ``epoch_seconds``); for ``hetero``, whose example prints no time, the
gap between its successive epoch lines (training and its validation pass) against the engine's
``epoch_seconds_with_eval`` (training and its evaluation of the train, validation and test nodes). The ratio is example / engine. Children get ``OMP_NUM_THREADS=1``;
the engine runs with ``threads=1``. Loose on a loaded machine: run it quiet.

    nice python benchmarks/pyg_examples_speed.py --json results/pyg_examples_speed.json
    python benchmarks/pyg_examples_speed.py --smoke      # sage, 3 epochs
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import REPO, SHARED, write_json  # noqa: E402

UPSTREAM = REPO / "examples" / "pyg_upstream"


def child_env() -> dict:
    return {k: v for k, v in os.environ.items() if k != "GNNSCALE_FAULT"} | {
        "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "GNNSCALE_SHARED_DATA": str(SHARED)}


def timed_lines(cmd: list[str], pattern: str, epochs: int, timeout: float, cwd: Path) -> tuple[list[float], str]:
    """Run ``cmd``; the time each of the first ``epochs`` lines matching ``pattern`` was printed
    (then the run is ended: an example with a fixed epoch count need not run to its end), and those lines."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env(),
                            cwd=cwd, start_new_session=True)
    stamps, tail, matched, t0 = [], [], [], time.monotonic()
    try:
        for line in proc.stdout:  # the example's lines as printed
            tail = (tail + [line])[-40:]
            if re.search(pattern, line):
                stamps.append(time.monotonic())
                matched.append(line)
                if len(stamps) >= epochs:
                    break
            if time.monotonic() - t0 > timeout:
                break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.wait()
    if len(stamps) < epochs:
        raise SystemExit(f"{' '.join(cmd)}: {len(stamps)} of {epochs} epoch lines:\n{''.join(tail)}")
    return stamps, "".join(matched)


def example(case: str, epochs: int, work: Path, timeout: float) -> dict:
    py = sys.executable
    if case == "sage":
        cmd = [py, "ogbn_train.py", "--model", "sage", "--dataset_dir", str(SHARED), "--num_workers", "0",
               "-e", str(epochs)]
        _, out = timed_lines(cmd, r"^Epoch \d+, Loss", epochs, timeout, UPSTREAM)
        times = [float(t) for t in re.findall(r"Train Time: ([\d.]+)s", out)]  # its own training time
        return {"s_per_epoch": statistics.median(times[1:] or times), "epochs": times}
    elif case == "hetero":
        stamps, _ = timed_lines([py, "to_hetero_mag.py"], r"^Epoch: \d+, Loss", epochs, timeout, UPSTREAM)
    else:
        r = subprocess.run([py, "partition_graph.py", "--dataset", "Cora", "--root_dir", str(work),
                            "--num_partitions", "2"], cwd=UPSTREAM, env=child_env(), capture_output=True, text=True,
                           timeout=timeout)
        if r.returncode:
            raise SystemExit(f"partition_graph.py failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
        parts = work / "partitions" / "Cora" / "2-parts"
        script = (f"exec {py} node_ogb_cpu.py --dataset Cora --dataset_root_dir {parts} --num_nodes 2 "
                  f"--node_rank $RANK --num_epochs {epochs} --batch_size 32 --num_neighbors 10,5 "
                  "--master_addr $MASTER_ADDR --ddp_port $MASTER_PORT")
        cmd = [py, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
               "--master-port", str(29600 + os.getpid() % 300), "--no-python", "sh", "-c", script]
        _, out = timed_lines(cmd, r"\[Node 1\] Train epoch \d+ END|\[Node 0\] Train epoch \d+ END", 2 * epochs,
                             timeout, UPSTREAM)
        times = [float(t) for t in re.findall(r"\[Node 0\] Train epoch \d+ END: loss=\S+ time=([\d.]+)", out)]
        return {"s_per_epoch": statistics.median(times[1:] or times), "epochs": times}
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    return {"s_per_epoch": statistics.median(gaps), "epochs": [round(g, 3) for g in gaps]}


def engine(case: str, epochs: int, work: Path) -> dict:
    import gnnscale

    common = dict(threads=1, verify=False, seed=0, epochs=epochs, cache_dir=str(work / "cache"), progress=False)
    if case == "sage":
        r = gnnscale.train("planetoid:cora", root=str(SHARED / "planetoid" / "raw"), layer="sage", num_layers=3,
                           hidden=256, fanouts=[10, 10, 10], eval_fanouts=[10, 10, 10], batch_size=1024, lr=0.003,
                           weight_decay=0.0, dropout=0.5, workers=1, **common)
    elif case == "hetero":
        r = gnnscale.train(f"acm:{SHARED / 'acm'}?split=20", layer="rel:sage", num_layers=2, hidden=64,
                           fanouts=[10, 10], eval_fanouts=[10, 10], batch_size=1024, lr=0.01, weight_decay=0.0,
                           dropout=0.0, workers=1, **common)
    else:
        r = gnnscale.train("planetoid:cora", root=str(SHARED / "planetoid" / "raw"), layer="sage", num_layers=2,
                           hidden=256, fanouts=[10, 5], eval_fanouts=[10, 5], batch_size=32, lr=0.0004,
                           weight_decay=0.0, dropout=0.0, workers=2, **common)
    key = "epoch_seconds_with_eval" if case == "hetero" else "epoch_seconds"
    times = [float(h[key]) for h in r["epochs"]]
    return {"s_per_epoch": statistics.median(times[1:] or times), "epochs": [round(t, 3) for t in times],
            "test_acc": r.get("test_acc")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--what", default="sage,hetero,dist", help="cases, comma-separated: sage, hetero, dist")
    ap.add_argument("--epochs", type=int, default=6, help="epochs of each run (the first left out of the median)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds one example run may take")
    ap.add_argument("--json", default=None)
    ap.add_argument("--smoke", action="store_true", help="sage only, 3 epochs")
    args = ap.parse_args()
    if args.smoke:
        args.what, args.epochs = "sage", 3
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.what.split(","):
            work = Path(tmp) / case
            work.mkdir()
            ex = example(case, args.epochs, work, args.timeout)
            en = engine(case, args.epochs, work)
            rows[case] = {"example": ex, "engine": en, "ratio": round(ex["s_per_epoch"] / en["s_per_epoch"], 3)}
            print(f"{case}: example {ex['s_per_epoch']:.3f} s/epoch, gnnscale train {en['s_per_epoch']:.3f} "
                  f"s/epoch, ratio {rows[case]['ratio']:.2f}", flush=True)
    print(f"\n{'case':7} {'example s/epoch':>16} {'engine s/epoch':>15} {'ratio':>6}")
    for case, row in rows.items():
        print(f"{case:7} {row['example']['s_per_epoch']:16.3f} {row['engine']['s_per_epoch']:15.3f} "
              f"{row['ratio']:6.2f}")
    write_json(args.json, {"epochs": args.epochs, "cases": rows})


if __name__ == "__main__":
    main()
