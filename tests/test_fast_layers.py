"""The CSR GCN and GAT layers (issue 13) equal their references: outputs and every gradient.

GAT: ``BlockGATConv`` against ``torch_geometric.nn.GATConv`` with the same weights, on random
bipartite blocks (destinations without in-edges, duplicate edges, self-loop edges) and on Cora's
whole graph. GCN: ``BlockGCNConv`` against the index_select/index_add formula it replaced on
sampled blocks (PyG's GCNConv has no bipartite form) and against ``GCNConv`` on Cora's whole
graph (undirected, so the block's out-degrees equal PyG's in-degrees). Both: the compiled
(numba) path and the torch fallback agree.
"""
from __future__ import annotations

from typing import Optional

import pytest
import torch
from torch import Tensor, nn
from torch_geometric.nn import GATConv, GCNConv

import gnnscale.nn.sparse_ops as ops
from gnnscale.nn.layers import BlockGATConv, BlockGCNConv, LayerError, block_gcn_norm, build_conv, graph_gcn_norm
from gnnscale.nn.sparse_ops import BlockAdjacency, add_self_loops, block_matmul_heads

TOL = dict(atol=1e-5, rtol=1e-5)


def random_block(num_src: int, num_dst: int, m: int, seed: int) -> Tensor:
    """int64 [2, m + 10]: random edges into destinations 0..D-4 (the last 3 get none), plus 5
    duplicated edges and 5 self-loop edges (u == v < D), in random order."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_src, (m,), generator=g)
    dst = torch.randint(0, num_dst - 3, (m,), generator=g)
    loops = torch.randint(0, num_dst - 3, (5,), generator=g)
    ei = torch.cat([torch.stack([src, dst]), torch.stack([src[:5], dst[:5]]), torch.stack([loops, loops])], 1)
    return ei[:, torch.randperm(ei.size(1), generator=g)]


@pytest.fixture(scope="module")
def cora(shared_data) -> tuple[Tensor, Tensor]:
    """Cora's features float32 [2708, 1433] and edge_index int64 [2, 10556] (undirected, no self loops)."""
    from gnnscale.datasets import load_dataset

    data = load_dataset("planetoid:cora", root=str(shared_data / "planetoid" / "raw"))
    return data.x.float(), data.edge_index


def run(layer: nn.Module, inputs: list[Tensor], call, seed: int = 9) -> dict[str, Tensor]:
    """Output, input gradients and parameter gradients of ``call(layer, *inputs)`` under a
    random linear loss; inputs are cloned as fresh leaves."""
    leaves = [t.clone().requires_grad_(True) for t in inputs]
    layer.zero_grad()
    out = call(layer, *leaves)
    (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(seed))).sum().backward()
    got = {"out": out.detach()}
    got.update({f"input{i}": t.grad for i, t in enumerate(leaves)})
    got.update({f"grad {n}": p.grad for n, p in layer.named_parameters()})
    return got


def assert_same(a: dict[str, Tensor], b: dict[str, Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] is not None and b[key] is not None, key
        torch.testing.assert_close(a[key], b[key], **TOL, msg=lambda m: f"{key}: {m}")


def gat_pair(in_dim: int, out_dim: int, heads: int, concat: bool) -> tuple[BlockGATConv, GATConv]:
    torch.manual_seed(0)
    ref = GATConv(in_dim, out_dim, heads=heads, concat=concat, negative_slope=0.2, dropout=0.0,
                  add_self_loops=True, bias=True)
    nn.init.normal_(ref.bias)  # a non-zero bias
    ours = BlockGATConv(in_dim, out_dim, heads=heads, concat=concat)
    ours.load_state_dict(ref.state_dict())  # strict: the same names and shapes
    return ours, ref


def bipartite(layer: nn.Module, x_src: Tensor, x_dst: Tensor, edge_index: Tensor) -> Tensor:
    return layer((x_src, x_dst), edge_index)


# --------------------------------------------------------------------------- GAT


# in_dim <= H*C: the sources' logits come from x_src with att folded into the weight; else from xw.
@pytest.mark.parametrize("in_dim,heads", [(6, 3), (40, 2)])
@pytest.mark.parametrize("concat", [True, False])
def test_block_gat_equals_pyg_gat_on_sampled_blocks(in_dim: int, heads: int, concat: bool) -> None:
    num_src, num_dst = 70, 25
    ours, ref = gat_pair(in_dim, 5, heads, concat)
    g = torch.Generator().manual_seed(1)
    x_src, x_dst = torch.randn(num_src, in_dim, generator=g), torch.randn(num_dst, in_dim, generator=g)
    for seed in (2, 3):
        edge_index = random_block(num_src, num_dst, 300, seed)
        call = lambda layer, a, b: bipartite(layer, a, b, edge_index)  # noqa: E731
        assert_same(run(ours, [x_src, x_dst], call), run(ref, [x_src, x_dst], call))


def test_block_gat_equals_pyg_gat_on_whole_graph(cora) -> None:
    x, edge_index = cora
    x = x[:, :64] + 0.1 * torch.randn(x.size(0), 64, generator=torch.Generator().manual_seed(2))
    for concat in (True, False):
        ours, ref = gat_pair(64, 8, 4, concat)
        want = run(ref, [x], lambda l, a: l(a, edge_index))  # PyG's whole-graph call
        assert_same(run(ours, [x], lambda l, a: l((a, a), edge_index)), want)


def test_gat_state_dicts_load_both_ways_and_zoo_names() -> None:
    ours = BlockGATConv(6, 4, heads=2)
    ref = GATConv(6, 4, heads=2)
    ref.load_state_dict(ours.state_dict())
    ours.load_state_dict(ref.state_dict())
    assert {n: p.shape for n, p in ours.named_parameters()} == {n: p.shape for n, p in ref.named_parameters()}
    hidden = build_conv("gat", 6, 8, index=0, num_layers=2)
    assert isinstance(hidden, BlockGATConv) and hidden.heads == 4 and hidden.out_channels == 2 and hidden.concat
    last = build_conv("gat", 8, 3, index=1, num_layers=2, heads=2, negative_slope=0.1)
    assert isinstance(last, BlockGATConv) and not last.concat and last.negative_slope == 0.1
    # PyG's layer when named, or for what only it does (attention dropout, edge features).
    assert isinstance(build_conv("gat-pyg", 6, 8, index=0, num_layers=2), GATConv)
    assert isinstance(build_conv("gat", 6, 8, index=0, num_layers=2, dropout=0.5), GATConv)
    assert isinstance(build_conv("gat", 6, 8, index=0, num_layers=2, edge_dim=3), GATConv)
    assert isinstance(build_conv("gat", 6, 8, index=0, num_layers=2, dropout=0.0), BlockGATConv)
    with pytest.raises(LayerError, match=r"expected dropout=0.0, found 0.5.*'gat-pyg'"):
        BlockGATConv(6, 4, dropout=0.5)


# --------------------------------------------------------------------------- GCN


def gcn_by_index_add(layer: BlockGCNConv, x_src: Tensor, num_dst: int, edge_index: Tensor,
                     deg: Optional[Tensor]) -> Tensor:
    """The formula BlockGCNConv computed before the CSR product: a per-edge message tensor
    gathered with index_select and summed with index_add, self loops added as a dense term."""
    if deg is not None:
        edge_norm, self_norm = graph_gcn_norm(edge_index, deg, num_dst)
    else:
        edge_norm, self_norm = block_gcn_norm(edge_index, x_src.size(0), num_dst)
    h = layer.lin(x_src)
    src, dst = edge_index
    out = (h[:num_dst] * self_norm.unsqueeze(-1)).index_add(0, dst, h.index_select(0, src) * edge_norm.unsqueeze(-1))
    return out + layer.bias


@pytest.mark.parametrize("in_dim,out_dim", [(24, 8), (8, 24)])  # linear first / aggregation first
@pytest.mark.parametrize("with_deg", [False, True])
def test_block_gcn_equals_the_index_add_formula_on_sampled_blocks(in_dim: int, out_dim: int, with_deg: bool) -> None:
    num_src, num_dst = 70, 25
    torch.manual_seed(0)
    layer = BlockGCNConv(in_dim, out_dim)
    nn.init.normal_(layer.bias)
    g = torch.Generator().manual_seed(1)
    x_src = torch.randn(num_src, in_dim, generator=g)
    deg = torch.randint(1, 30, (num_src,), generator=g) if with_deg else None
    for seed in (2, 3):
        edge_index = random_block(num_src, num_dst, 300, seed)
        got = run(layer, [x_src], lambda l, a: l((a, a[:num_dst]), edge_index, deg=deg))
        want = run(layer, [x_src], lambda l, a: gcn_by_index_add(l, a, num_dst, edge_index, deg))
        assert_same(got, want)


@pytest.mark.parametrize("in_dim,out_dim", [(64, 16), (16, 64)])
def test_block_gcn_equals_pyg_gcn_on_whole_graph(cora, in_dim: int, out_dim: int) -> None:
    x, edge_index = cora
    x = x[:, :in_dim] + 0.1 * torch.randn(x.size(0), in_dim, generator=torch.Generator().manual_seed(2))
    torch.manual_seed(0)
    ref = GCNConv(in_dim, out_dim, cached=False)
    nn.init.normal_(ref.bias)
    ours = BlockGCNConv(in_dim, out_dim)
    ours.load_state_dict(ref.state_dict())
    # deg=None: the block's own degrees, on the whole graph those of PyG (in == out, undirected).
    assert_same(run(ours, [x], lambda l, a: l((a, a), edge_index)), run(ref, [x], lambda l, a: l(a, edge_index)))


# --------------------------------------------------------------------------- compiled == fallback


def test_compiled_and_torch_fallback_agree(monkeypatch) -> None:
    if ops.numba is None:
        pytest.skip("numba is not installed: only the fallback exists")
    num_src, num_dst = 70, 25
    edge_index = random_block(num_src, num_dst, 300, 4)
    g = torch.Generator().manual_seed(1)
    x_src, x_dst = torch.randn(num_src, 12, generator=g), torch.randn(num_dst, 12, generator=g)
    torch.manual_seed(0)
    gat, gcn = BlockGATConv(12, 5, heads=3), BlockGCNConv(12, 5)
    results = []
    for compiled in (True, False):
        monkeypatch.setattr(ops, "_compiled_ok", lambda t, c=compiled: c)
        assert BlockAdjacency(edge_index, num_src, num_dst).compiled == compiled
        results.append((run(gat, [x_src, x_dst], lambda l, a, b: bipartite(l, a, b, edge_index)),
                        run(gcn, [x_src], lambda l, a: l((a, a[:num_dst]), edge_index))))
    for a, b in zip(*results):
        assert_same(a, b)


def test_block_matmul_heads_and_add_self_loops_against_dense() -> None:
    # Unsorted edges (sorted first) and sorted ones (loops inserted in place) give the same CSR.
    ei = torch.tensor([[2, 0, 3, 1, 3], [1, 0, 2, 0, 0]])
    w = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    looped, lw = add_self_loops(ei, 3, w, torch.tensor([-1.0, -2.0, -3.0]))
    assert looped.tolist() == [[0, 0, 1, 3, 1, 2, 2, 3], [0, 0, 0, 0, 1, 1, 2, 2]]
    assert lw.tolist() == [-1.0, 2.0, 4.0, 5.0, -2.0, 1.0, -3.0, 3.0]
    order = torch.argsort(ei[1], stable=True)
    assert torch.equal(add_self_loops(ei[:, order], 3)[0], looped)
    adj = BlockAdjacency(looped, 4, 3)
    assert torch.equal(adj.row, looped[1]) and torch.equal(adj.val_t, adj.val[adj.perm_t])
    h = torch.randn(4, 2, 3, requires_grad=True)
    alpha = torch.randn(looped.size(1), 2, requires_grad=True)
    out = block_matmul_heads(adj, h, alpha)
    dense = torch.zeros(3, 4, 2).index_put((looped[1], looped[0]), alpha, accumulate=True)  # [D, S, H]
    want = torch.einsum("dsk,skc->dkc", dense, h)
    torch.testing.assert_close(out, want)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, (h, alpha), grad)
    ref = torch.autograd.grad(want, (h, alpha), grad)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b)
