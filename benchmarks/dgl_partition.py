"""DGL's ``partition_graph`` (METIS) beside gnnscale's pipelines on the same graph: peak memory and seconds.

The graph is a ``dir:`` folder written by ``benchmarks/out_of_core.py``'s generator (planted
communities: ``edge_index.npy`` int32 [2, E], ``x.npy`` float16 [N, F], ``y.npy``, ``split.npz``).
Each side runs in a fresh child process whose ``ru_maxrss`` (``os.wait4``) is its whole peak:

- ``dgl``: in the peers' venv (``bash ../shared/peers/setup_peers.sh dgl``; DGL 2.1 on torch 2.2.1):
  the graph built as DGL holds it (``dgl.graph`` of int64 ids, float32 features, labels, train mask),
  then ``dgl.distributed.partition_graph(..., part_method="metis", balance_ntypes=train_mask,
  balance_edges=True)``, as DistDGL's users call it;
- ``gnnscale``: ``partition_graph`` on the loaded graph (METIS, the in-memory pipeline), and the
  out-of-core pipeline (``partition_on_disk``, LDG streamed, ``--memory-budget``).

A child that runs out of memory (``--mem-cap GB``: ``RLIMIT_AS`` for every child, so that one side's
failure does not take the machine down) is reported as such, with its size. Prints a table and
writes JSON.

    python benchmarks/dgl_partition.py --sizes 1000000:20000000,10000000:200000000 --json dgl_part.json
    python benchmarks/dgl_partition.py --smoke
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import DGL_PYTHON, dgl_python, write_json  # noqa: E402
from out_of_core import generate, parse_sizes  # noqa: E402


DGL_CHILD = r"""
import json, sys, time, numpy as np, torch, dgl
folder, out, parts = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = time.perf_counter()
ei = np.load(folder + "/edge_index.npy", mmap_mode="r")
g = dgl.graph((torch.from_numpy(np.asarray(ei[0], dtype=np.int64)), torch.from_numpy(np.asarray(ei[1], dtype=np.int64))),
              num_nodes=int(np.load(folder + "/y.npy", mmap_mode="r").shape[0]))
g.ndata["feat"] = torch.from_numpy(np.load(folder + "/x.npy").astype(np.float32))
g.ndata["label"] = torch.from_numpy(np.load(folder + "/y.npy"))
train = torch.zeros(g.num_nodes(), dtype=torch.bool)
train[torch.from_numpy(np.load(folder + "/split.npz")["train_idx"])] = True
g.ndata["train_mask"] = train
load = time.perf_counter() - t0
t0 = time.perf_counter()
dgl.distributed.partition_graph(g, "g", parts, out, part_method="metis", balance_ntypes=train, balance_edges=True)
print(json.dumps({"load_seconds": load, "partition_seconds": time.perf_counter() - t0}))
"""

MEM_CHILD = r"""
import json, sys, time
from gnnscale.datasets import load_dataset
from gnnscale.partitioning import partition_graph
folder, out, parts = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = time.perf_counter()
data = load_dataset("dir:" + folder)
load = time.perf_counter() - t0
meta = partition_graph(data, parts, out, method="metis")
print(json.dumps({"load_seconds": load, "partition_seconds": meta["partition_seconds"] + meta["write_seconds"],
                  "edge_cut_fraction": meta["edge_cut_fraction"]}))
"""

OOC_CHILD = r"""
import json, sys
from gnnscale.partitioning.out_of_core import partition_on_disk
folder, out, parts, budget = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
meta = partition_on_disk(folder, parts, out, method="ldg", memory_budget_gb=budget, show_progress=False)
print(json.dumps({"partition_seconds": meta["out_of_core"]["seconds"], "edge_cut_fraction": meta["edge_cut_fraction"]}))
"""


def run_child(python: str, code: str, args: list[str], cap_gb: float | None) -> dict:
    """``code`` in a fresh ``python``; its last JSON line, peak RSS (wait4) and seconds; an error
    (status, the tail of its stderr) instead when it fails (e.g. out of memory under the cap)."""
    t0 = time.perf_counter()
    err = tempfile.TemporaryFile()
    r_out, w_out = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: cap its address space, then exec
        os.close(r_out)
        os.dup2(w_out, 1)
        os.dup2(err.fileno(), 2)
        os.chdir(tempfile.gettempdir())  # METIS writes its input graph to the cwd when it fails
        if cap_gb:
            cap = int(cap_gb * 1e9)
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        os.execv(python, [python, "-c", code, *args])
    os.close(w_out)
    with os.fdopen(r_out) as fh:
        text = fh.read()
    _, status, usage = os.wait4(pid, 0)
    seconds = round(time.perf_counter() - t0, 2)
    peak = usage.ru_maxrss * 1024
    code_ = os.waitstatus_to_exitcode(status)
    if code_ != 0:
        err.seek(0)
        tail = err.read().decode(errors="replace").strip().splitlines()[-8:]
        return {"error": f"exit status {code_}", "stderr_tail": tail, "peak_rss_bytes": peak, "seconds": seconds}
    return {**json.loads(text.strip().splitlines()[-1]), "peak_rss_bytes": peak, "seconds": seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000000:20000000", help="N:E pairs, comma-separated")
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--sides", default="dgl,gnnscale-metis,gnnscale-ooc")
    ap.add_argument("--memory-budget", type=float, default=8.0, help="GB, the out-of-core pipeline's")
    ap.add_argument("--mem-cap", type=float, default=20.0, help="GB of address space per child (RLIMIT_AS)")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--smoke", action="store_true", help="a 20,000-node graph; DGL (when there) and gnnscale's METIS")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.smoke:
        args.sizes, args.parts, args.features, args.sides = "20000:200000", 2, 8, "dgl,gnnscale-metis"
    sides = [s for s in args.sides.split(",") if s]
    if "dgl" in sides and dgl_python()[0] is None:
        print(f"{dgl_python()[1]}: gnnscale's sides only")
        sides.remove("dgl")
    work = Path(args.workdir or tempfile.mkdtemp(prefix="gnnscale-dglpart-")).resolve()
    rows = []
    for n, e in parse_sizes(args.sizes):  # loop over sizes
        folder = work / f"g{n}_{e}"
        if not (folder / "split.npz").exists():
            generate(folder, n, e, args.features, 64, 0.9, seed=0)
        row = {"num_nodes": n, "num_edges": e}
        for side in sides:  # loop over the sides
            out = work / f"out-{side}"
            shutil.rmtree(out, ignore_errors=True)
            if side == "dgl":
                res = run_child(DGL_PYTHON, DGL_CHILD, [str(folder), str(out), str(args.parts)], args.mem_cap)
            elif side == "gnnscale-metis":
                res = run_child(sys.executable, MEM_CHILD, [str(folder), str(out), str(args.parts)], args.mem_cap)
            else:
                res = run_child(sys.executable, OOC_CHILD, [str(folder), str(out), str(args.parts),
                                                            str(args.memory_budget)], args.mem_cap)
            shutil.rmtree(out, ignore_errors=True)
            row[side] = res
            what = res.get("error") or f"{res['seconds']:.1f} s"
            print(f"N={n:,} E={e:,} {side}: peak {res['peak_rss_bytes'] / 1e9:.2f} GB, {what}", flush=True)
        rows.append(row)
    write_json(args.json, {"rows": rows, "args": vars(args)})
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
