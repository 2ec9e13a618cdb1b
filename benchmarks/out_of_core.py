"""The out-of-core partition pipeline at growing sizes: each stage's seconds and peak memory, disk used.

For each size ``N:E`` a planted-community graph is generated in chunks straight to disk (a ``dir:``
folder: ``edge_index.npy`` int32 [2, E] written through a mapping a slice at a time, ``x.npy`` float16
[N, F], ``y.npy``, ``split.npz`` with 1% training nodes; node v in community v % C, an edge stays
inside its community with probability ``--p-in``), then partitioned into ``--parts`` parts by
``partition_on_disk`` (LDG streamed from disk, ``--memory-budget``) IN A FRESH SUBPROCESS: the
child's ``ru_maxrss`` (``os.wait4``) is the whole pipeline's peak, and meta.json's ``out_of_core``
gives each stage's seconds and peak. The disk used is the input folder, the parts and the largest
spill (spill files are deleted as parts complete). The partition folder is deleted after each size.

The baseline in the same run: today's in-memory pipeline (``gnnscale partition --dataset dir:...``,
``partition_graph`` on the loaded graph) on the sizes named by ``--in-memory`` (its peak grows with E:
44 B per directed edge, docs/scaling.md), also in a fresh subprocess; the ratio of the peaks is printed.

The parts store the feature rows as ``--feature-dtype`` (default float16, as the input's; float32 doubles
the parts' x.npy).

Usage::

    nice -n 10 python benchmarks/out_of_core.py --sizes 1000000:10000000,1000000:20000000,1000000:40000000 \\
        --in-memory 1000000:20000000 --json ooc.json
    python benchmarks/out_of_core.py --smoke --json /tmp/ooc.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_json  # noqa: E402


def _gb(b) -> str:
    return "-" if b is None else f"{b / 1e9:.2f}"


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def generate(folder: Path, n: int, e: int, features: int, communities: int, p_in: float, seed: int,
             chunk: int = 1 << 22) -> dict:
    """Write the graph in chunks (memory: one chunk of edges, one slice of feature rows)."""
    import numpy as np

    t0 = time.perf_counter()
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    ei = np.lib.format.open_memmap(folder / "edge_index.npy", mode="w+", dtype=np.int32, shape=(2, e))
    for a in range(0, e, chunk):  # loop over chunks of edges
        k = min(chunk, e - a)
        src = rng.integers(0, n, k)
        dst = rng.integers(0, n, k)
        inside = rng.random(k) < p_in
        same = (rng.integers(0, max(1, n // communities), k) * communities + src % communities)
        same[same >= n] = src[same >= n]
        dst[inside] = same[inside]
        ei[0, a : a + k] = src
        ei[1, a : a + k] = dst
    ei.flush()
    del ei
    classes = 16
    x = np.lib.format.open_memmap(folder / "x.npy", mode="w+", dtype=np.float16, shape=(n, features))
    y = np.empty(n, dtype=np.int64)
    for a in range(0, n, chunk // 4):  # loop over slices of nodes
        b = min(n, a + chunk // 4)
        label = (np.arange(a, b) % communities) % classes
        rows = rng.standard_normal((b - a, features)).astype(np.float32)
        rows[np.arange(b - a), label % features] += 2.0
        x[a:b] = rows
        y[a:b] = label
    x.flush()
    del x
    np.save(folder / "y.npy", y)
    perm = rng.permutation(n)
    k = max(1, n // 100)
    np.savez(folder / "split.npz", train_idx=perm[:k], val_idx=perm[k : 2 * k], test_idx=perm[2 * k : 4 * k])
    return {"seconds": round(time.perf_counter() - t0, 2), "input_bytes": du(folder)}


CHILD = r"""
import json, resource, sys, time
from gnnscale.partitioning.out_of_core import partition_on_disk
folder, out, parts, budget, method, fdt = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6]
assign = None
if len(sys.argv) > 7:  # --merge-from: an existing partition's assignment, k adjacent parts merged
    import numpy as np
    from pathlib import Path
    src = Path(sys.argv[7])
    old = json.loads((src / "meta.json").read_text())
    k, method = old["num_parts"] // parts, old["method"]
    assign = np.empty(old["num_nodes"], dtype=np.int32)
    for p in range(old["num_parts"]):  # loop over the source's parts (8): each a vectorized scatter
        assign[np.load(src / f"part{p}" / "orig_ids.npy", mmap_mode="r")] = p // k
meta = partition_on_disk(folder, parts, out, method=method, parts=assign, memory_budget_gb=budget,
                         show_progress=False, feature_dtype=fdt)
print(json.dumps({"ooc": meta["out_of_core"], "edge_cut_fraction": meta["edge_cut_fraction"],
                  "balance": meta["balance"], "num_edges": meta["num_edges"]}))
"""

CHILD_MEM = r"""
import json, sys, time
from gnnscale.datasets import load_dataset
from gnnscale.partitioning import partition_graph
folder, out, parts, method, fdt = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
t0 = time.perf_counter()
data = load_dataset("dir:" + folder)
load = time.perf_counter() - t0
meta = partition_graph(data, parts, out, method=method, feature_dtype=fdt)
print(json.dumps({"load_seconds": load, "partition_seconds": meta["partition_seconds"],
                  "write_seconds": meta["write_seconds"], "edge_cut_fraction": meta["edge_cut_fraction"],
                  "balance": meta["balance"]}))
"""


def _peak_of_child(code: str, args: list[str], nice: int) -> tuple[dict, int, float]:
    """Run ``code`` in a fresh Python (niced); returns (its last JSON line, its peak RSS bytes from
    ``os.wait4``, seconds)."""
    t0 = time.perf_counter()
    r_out, w_out = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nice, then exec python with stdout to the pipe
        os.close(r_out)
        os.dup2(w_out, 1)
        if nice:
            os.nice(nice)
        os.execv(sys.executable, [sys.executable, "-c", code, *args])
    os.close(w_out)
    chunks = []
    with os.fdopen(r_out) as fh:
        chunks.append(fh.read())
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"child {args} failed with status {os.waitstatus_to_exitcode(status)}")
    return json.loads("".join(chunks).strip().splitlines()[-1]), usage.ru_maxrss * 1024, time.perf_counter() - t0


def parse_sizes(text: str) -> list[tuple[int, int]]:
    return [tuple(int(float(v)) for v in s.split(":")) for s in text.split(",") if s]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000000:10000000,1000000:20000000,1000000:40000000",
                    help="N:E pairs, comma-separated (E directed edges)")
    ap.add_argument("--in-memory", default="", help="sizes (N:E) also run through today's in-memory pipeline")
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--communities", type=int, default=64)
    ap.add_argument("--p-in", type=float, default=0.9)
    ap.add_argument("--method", default="ldg")
    ap.add_argument("--feature-dtype", default="float16", choices=["float32", "float16", "bfloat16"],
                    help="how the parts store the feature rows")
    ap.add_argument("--merge-from", default=None, metavar="DIR",
                    help="skip the assignment: write --parts parts from this partition folder's assignment (of the "
                         "same graph), merging each run of P_old / --parts adjacent parts into one (e.g. 8 -> 4 "
                         "for 4 workers)")
    ap.add_argument("--keep-parts", action="store_true", help="keep the last size's partition folder (to train on it)")
    ap.add_argument("--memory-budget", type=float, default=8.0, help="GB, the whole pipeline's")
    ap.add_argument("--nice", type=int, default=10)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep-input", action="store_true", help="keep the generated folders")
    ap.add_argument("--reuse-input", action="store_true", help="use a folder kept by --keep-input (same size, seed 0)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (a few seconds)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.smoke:
        args.sizes, args.in_memory, args.parts, args.features = "20000:100000,20000:200000,20000:400000", "20000:200000", 4, 8
        args.memory_budget = 2.0
    merge = []
    if args.merge_from:
        old = json.loads((Path(args.merge_from) / "meta.json").read_text())
        if old["num_parts"] % args.parts:
            raise SystemExit(f"--merge-from: expected --parts to divide the folder's {old['num_parts']} parts, "
                             f"found --parts {args.parts}; pick a divisor")
        merge = [str(Path(args.merge_from).resolve())]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="gnnscale-ooc-"))
    work.mkdir(parents=True, exist_ok=True)
    in_memory = set(parse_sizes(args.in_memory))
    rows = []
    for n, e in parse_sizes(args.sizes):  # loop over sizes
        folder, out = work / f"g{n}_{e}", work / (f"p{n}_{e}" + (f"_merged{args.parts}" if merge else ""))
        if args.reuse_input and (folder / "split.npz").exists():
            gen = {"seconds": None, "input_bytes": du(folder), "reused": True}
        else:
            gen = generate(folder, n, e, args.features, args.communities, args.p_in, seed=0)
        res, peak, secs = _peak_of_child(CHILD, [str(folder), str(out), str(args.parts), str(args.memory_budget),
                                                 args.method, args.feature_dtype, *merge], args.nice)
        parts_bytes = du(out)
        row = {"num_nodes": n, "num_edges": e, "generate": gen, "seconds": round(secs, 2), "peak_rss_bytes": peak,
               "stages": res["ooc"]["stages"], "plan": res["ooc"]["plan"], "spill_bytes": res["ooc"]["spill_bytes"],
               "parts_bytes": parts_bytes, "disk_bytes": gen["input_bytes"] + parts_bytes + res["ooc"]["spill_bytes"],
               "edge_cut_fraction": res["edge_cut_fraction"], "balance": res["balance"], "parts_dir": str(out)}
        if not args.keep_parts or (n, e) in in_memory:
            shutil.rmtree(out, ignore_errors=True)
            row["parts_dir"] = None
        if (n, e) in in_memory:
            mres, mpeak, msecs = _peak_of_child(CHILD_MEM, [str(folder), str(out), str(args.parts), args.method,
                                                            args.feature_dtype],
                                                args.nice)
            row["in_memory"] = {**mres, "seconds": round(msecs, 2), "peak_rss_bytes": mpeak}
            row["peak_ratio_in_memory_over_ooc"] = round(mpeak / peak, 3)
            shutil.rmtree(out, ignore_errors=True)
        if not args.keep_input:
            shutil.rmtree(folder, ignore_errors=True)
        rows.append(row)
        st = " ".join(f"{k} {v['seconds']:.1f}s/{_gb(v['peak_rss_bytes'])}GB" for k, v in row["stages"].items())
        mem = row.get("in_memory")
        print(f"N={n:,} E={e:,}: {row['seconds']:.1f} s, peak {_gb(peak)} GB, cut {row['edge_cut_fraction']:.4f}, "
              f"disk {_gb(row['disk_bytes'])} GB (spill {_gb(row['spill_bytes'])}), stages: {st}"
              + (f"; in-memory: {mem['seconds']:.1f} s, peak {_gb(mem['peak_rss_bytes'])} GB, cut "
                 f"{mem['edge_cut_fraction']:.4f} (peak x{row['peak_ratio_in_memory_over_ooc']:.2f})" if mem else ""),
              flush=True)
    peaks = [r["peak_rss_bytes"] for r in rows]
    summary = {"peak_min_bytes": min(peaks), "peak_max_bytes": max(peaks),
               "edges_min": min(r["num_edges"] for r in rows), "edges_max": max(r["num_edges"] for r in rows),
               "seconds_per_million_edges": [round(r["seconds"] / (r["num_edges"] / 1e6), 3) for r in rows]}
    print(f"peak over sizes: {_gb(summary['peak_min_bytes'])}-{_gb(summary['peak_max_bytes'])} GB for "
          f"{summary['edges_min']:,}-{summary['edges_max']:,} edges")
    write_json(args.json, {"rows": rows, "summary": summary, "args": vars(args),
                           "note": f"input x float16; parts store {args.feature_dtype} rows (the format's feature_dtype)"})
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
