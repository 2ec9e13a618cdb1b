"""The step's hot operations, ours beside the baselines in the same run (issue 13).

Forward + backward, on blocks of the size the peers' epoch benchmark produces (R-MAT 100k,
batch 1024, fan-outs 5,10,15 per hop: the first layer's block has about 60,000 sources, 6,000
destinations and 90,000 edges). The first layer's input is the node features, which need no
gradient, so ``x_src`` requires grad only on the blocks of later layers (column "x grad"; the
first version of this script computed it on every block, which charged the first layer a
[S, in] input gradient no training step computes).

- GraphSAGE mean layer: ``gnnscale.nn.layers.BlockSAGEConv`` (CSR product, linear map first when
  it narrows) against ``torch_geometric.nn.SAGEConv`` with the same weights;
- GCN: ``gnnscale.nn.layers.BlockGCNConv`` (self loops as CSR entries, one compiled product)
  against two baselines: (a) the index_select/index_add formula it replaced (same function,
  a per-edge message tensor), and (b) ``torch_geometric.nn.GCNConv(cached=False)`` run as PyG's
  mini-batch GCN runs, on the sampled subgraph of S nodes (edge_index as is, S self loops,
  ``gcn_norm`` each call, [S, out] rows of which D are used): the same weights and edges but
  not the same normalization (PyG has no bipartite GCN), so (b) compares cost, (a) function;
- GAT (4 heads): ``gnnscale.nn.layers.BlockGATConv`` against ``torch_geometric.nn.GATConv`` with
  the same weights on the same bipartite block (equal outputs; tests/test_fast_layers.py);
- dropout: ``gnnscale.nn.dropout.dropout`` against ``torch.nn.functional.dropout``.

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

try:
    import numba
except ImportError:  # the ops fall back to torch
    numba = None
from torch_geometric.nn import GATConv, GCNConv, SAGEConv

from gnnscale.nn.layers import BlockGATConv, BlockGCNConv, BlockSAGEConv, block_gcn_norm
from gnnscale.nn.dropout import dropout

# (name, S, D, M, in, out, x grad): the three layers of the peers' 3-layer model, hidden 256;
# x grad: the layer's input needs a gradient (not the first layer's: node features).
BLOCKS = [
    ("layer1 60000x6000, 128->256", 60_000, 6_000, 90_000, 128, 256, False),
    ("layer2 6000x1024, 256->256", 6_000, 1_024, 10_240, 256, 256, True),
    ("wide-in 60000x6000, 256->64", 60_000, 6_000, 90_000, 256, 64, True),
]
GAT_HEADS = 4
DROPOUT_SHAPES = ((60_000, 128), (57_000, 256), (6_000, 256))
# --smoke: the same code on blocks a hundredth of the size, 1 repeat
SMOKE_BLOCKS = [("smoke 600x60, 16->32", 600, 60, 900, 16, 32, False), ("smoke 600x60, 32->16", 600, 60, 900, 32, 16, True)]


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


def _block(s: int, d: int, m: int, fi: int, x_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """A random block: edge_index int64 [2, m] grouped by destination (as sampled blocks are), x [s, fi]."""
    g = torch.Generator().manual_seed(0)
    dst = torch.sort(torch.randint(0, d, (m,), generator=g)).values
    src = torch.randint(0, s, (m,), generator=g)
    x = torch.randn(s, fi, generator=g, requires_grad=x_grad)
    return torch.stack([src, dst]), x


def _step(layer_call, x: torch.Tensor, layer: torch.nn.Module):
    """One forward + backward of ``layer_call()`` (weights' grads, and x's when it requires grad)."""
    def step():
        x.grad = None
        layer.zero_grad(set_to_none=True)
        layer_call().sum().backward()
    return step


def _row(op: str, name: str, x_grad: bool, baseline: str, t_ours: float, t_ref: float) -> dict:
    return {"op": op, "block": name, "x_grad": x_grad, "baseline": baseline, "ours_ms": 1e3 * t_ours,
            "baseline_ms": 1e3 * t_ref, "ratio": t_ours / t_ref}


def bench_sage(repeats: int) -> list[dict]:
    rows = []
    for name, s, d, m, fi, fo, x_grad in BLOCKS:
        ei, x = _block(s, d, m, fi, x_grad)
        torch.manual_seed(0)
        ours = BlockSAGEConv(fi, fo)
        ref = SAGEConv(fi, fo)
        ref.load_state_dict(ours.state_dict())
        t_ours, t_ref = _alternate(_step(lambda: ours((x, x[:d]), ei), x, ours),
                                   _step(lambda: ref((x, x[:d]), ei), x, ref), repeats)
        rows.append(_row("sage", name, x_grad, "pyg SAGEConv", t_ours, t_ref))
    return rows


def _gcn_index_add(layer: BlockGCNConv, x_src: torch.Tensor, ei: torch.Tensor, d: int) -> torch.Tensor:
    """BlockGCNConv's function as it was computed before the CSR product (index_select + index_add)."""
    edge_norm, self_norm = block_gcn_norm(ei, x_src.size(0), d)
    h = layer.lin(x_src) if layer.out_dim < layer.in_dim else x_src
    out = (h[:d] * self_norm.unsqueeze(-1)).index_add(0, ei[1], h.index_select(0, ei[0]) * edge_norm.unsqueeze(-1))
    out = out if layer.out_dim < layer.in_dim else layer.lin(out)
    return out + layer.bias


def bench_gcn(repeats: int) -> list[dict]:
    rows = []
    for name, s, d, m, fi, fo, x_grad in BLOCKS:
        ei, x = _block(s, d, m, fi, x_grad)
        torch.manual_seed(0)
        ours = BlockGCNConv(fi, fo)
        ref = GCNConv(fi, fo, cached=False)
        ref.load_state_dict(ours.state_dict())
        ours_step = _step(lambda: ours((x, x[:d]), ei), x, ours)
        t_ours, t_ref = _alternate(ours_step, _step(lambda: _gcn_index_add(ours, x, ei, d), x, ours), repeats)
        rows.append(_row("gcn", name, x_grad, "index_add formula", t_ours, t_ref))
        t_ours, t_ref = _alternate(ours_step, _step(lambda: ref(x, ei)[:d], x, ref), repeats)
        rows.append(_row("gcn", name, x_grad, "pyg GCNConv on S nodes", t_ours, t_ref))
    return rows


def bench_gat(repeats: int) -> list[dict]:
    rows = []
    for name, s, d, m, fi, fo, x_grad in BLOCKS:
        ei, x = _block(s, d, m, fi, x_grad)
        torch.manual_seed(0)
        ours = BlockGATConv(fi, fo // GAT_HEADS, heads=GAT_HEADS)
        ref = GATConv(fi, fo // GAT_HEADS, heads=GAT_HEADS)
        ref.load_state_dict(ours.state_dict())
        t_ours, t_ref = _alternate(_step(lambda: ours((x, x[:d]), ei), x, ours),
                                   _step(lambda: ref((x, x[:d]), ei), x, ref), repeats)
        rows.append(_row("gat", f"{name}, {GAT_HEADS} heads", x_grad, "pyg GATConv", t_ours, t_ref))
    return rows


def bench_dropout(repeats: int) -> list[dict]:
    rows = []
    for shape in DROPOUT_SHAPES:
        x = torch.randn(*shape, requires_grad=True)

        def ours():
            x.grad = None
            dropout(x, 0.5, True).sum().backward()

        def ref():
            x.grad = None
            F.dropout(x, 0.5, True).sum().backward()

        t_ours, t_ref = _alternate(ours, ref, repeats)
        rows.append(_row("dropout", f"{shape[0]}x{shape[1]}, p=0.5", True, "F.dropout", t_ours, t_ref))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7, help="alternating repeats per side (median)")
    ap.add_argument("--threads", type=int, default=2, help="torch and numba threads")
    ap.add_argument("--smoke", action="store_true", help="blocks of 600 sources, 1 repeat (checks that it runs)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if args.smoke:
        global BLOCKS, DROPOUT_SHAPES
        BLOCKS, DROPOUT_SHAPES, args.repeats = SMOKE_BLOCKS, ((600, 16),), 1
    torch.set_num_threads(args.threads)
    if numba is not None:
        numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    rows = bench_sage(args.repeats) + bench_gcn(args.repeats) + bench_gat(args.repeats) + bench_dropout(args.repeats)
    print(f"{'op':8s} {'case':42s} {'x grad':>6s} {'baseline':24s} {'ours ms':>9s} {'baseline ms':>12s} "
          f"{'ours/baseline':>14s}")
    for r in rows:
        print(f"{r['op']:8s} {r['block']:42s} {'yes' if r['x_grad'] else 'no':>6s} {r['baseline']:24s} "
              f"{r['ours_ms']:9.1f} {r['baseline_ms']:12.1f} {r['ratio']:14.2f}")
    print(f"forward + backward, median of {args.repeats} alternating repeats, {args.threads} threads")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "repeats": args.repeats, "rows": rows,
                       "torch": torch.__version__}, f, indent=2)
        print(f"written to {args.json}")


if __name__ == "__main__":
    main()
