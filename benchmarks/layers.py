"""The step's hot operations, ours beside the baselines in the same run (issue 13, groundwork).

Forward + backward, on blocks of the size the peers' epoch benchmark produces (R-MAT 100k,
batch 1024, fan-outs 5,10,15 per hop: the first layer's block has about 60,000 sources, 6,000
destinations and 90,000 edges):

- GraphSAGE mean layer: ``gnnscale.layers.BlockSAGEConv`` (CSR product, linear map first when
  it narrows) against ``torch_geometric.nn.SAGEConv`` with the same weights;
- dropout: ``gnnscale.sparse_ops.dropout`` against ``torch.nn.functional.dropout``.

Runs alternate (ours, baseline, ours, ...) because the machine is noisy; each figure is the
median over repeats and the ratio is ours / baseline (below 1: ours is faster).

    python benchmarks/layers.py --json results/layers.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
from torch_geometric.nn import SAGEConv

from gnnscale.layers import BlockSAGEConv
from gnnscale.sparse_ops import dropout

# (name, S, D, M, in, out): the three layers of the peers' 3-layer model, hidden 256.
BLOCKS = [
    ("layer1 60000x6000, 128->256", 60_000, 6_000, 90_000, 128, 256),
    ("layer2 6000x1024, 256->256", 6_000, 1_024, 10_240, 256, 256),
    ("wide-in 60000x6000, 256->64", 60_000, 6_000, 90_000, 256, 64),
]


def _timed(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _alternate(a, b, repeats: int) -> tuple[float, float]:
    a()
    b()  # warm-up (numba compiles, allocator)
    ta, tb = [], []
    for _ in range(repeats):
        ta += _timed(a, 1)
        tb += _timed(b, 1)
    return statistics.median(ta), statistics.median(tb)


def bench_sage(repeats: int) -> list[dict]:
    rows = []
    for name, s, d, m, fi, fo in BLOCKS:
        g = torch.Generator().manual_seed(0)
        dst = torch.sort(torch.randint(0, d, (m,), generator=g)).values  # sampled blocks group edges by dst
        src = torch.randint(0, s, (m,), generator=g)
        ei = torch.stack([src, dst])
        x = torch.randn(s, fi, generator=g, requires_grad=True)
        torch.manual_seed(0)
        ours = BlockSAGEConv(fi, fo)
        ref = SAGEConv(fi, fo)
        ref.load_state_dict(ours.state_dict())

        def run(layer):
            def step():
                x.grad = None
                layer((x, x[:d]), ei).sum().backward()
            return step

        t_ours, t_ref = _alternate(run(ours), run(ref), repeats)
        rows.append({"op": "sage", "block": name, "ours_ms": 1e3 * t_ours, "pyg_ms": 1e3 * t_ref,
                     "ratio": t_ours / t_ref})
    return rows


def bench_dropout(repeats: int) -> list[dict]:
    rows = []
    for shape in ((60_000, 128), (57_000, 256), (6_000, 256)):
        x = torch.randn(*shape, requires_grad=True)

        def ours():
            x.grad = None
            dropout(x, 0.5, True).sum().backward()

        def ref():
            x.grad = None
            F.dropout(x, 0.5, True).sum().backward()

        t_ours, t_ref = _alternate(ours, ref, repeats)
        rows.append({"op": "dropout", "block": f"{shape[0]}x{shape[1]}, p=0.5", "ours_ms": 1e3 * t_ours,
                     "pyg_ms": 1e3 * t_ref, "ratio": t_ours / t_ref})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7, help="alternating repeats per side (median)")
    ap.add_argument("--threads", type=int, default=2, help="torch and numba threads")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rows = bench_sage(args.repeats) + bench_dropout(args.repeats)
    print(f"{'op':8s} {'case':32s} {'ours ms':>9s} {'baseline ms':>12s} {'ours/baseline':>14s}")
    for r in rows:
        print(f"{r['op']:8s} {r['block']:32s} {r['ours_ms']:9.1f} {r['pyg_ms']:12.1f} {r['ratio']:14.2f}")
    print("baseline: torch_geometric.nn.SAGEConv (sage), torch.nn.functional.dropout (dropout); "
          f"forward + backward, median of {args.repeats} alternating repeats, {args.threads} threads")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "repeats": args.repeats, "rows": rows,
                       "torch": torch.__version__}, f, indent=2)
        print(f"written to {args.json}")


if __name__ == "__main__":
    main()
