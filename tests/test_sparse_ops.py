"""Fast block aggregation and dropout (gnnscale.nn.sparse_ops) and the CSR GraphSAGE layer."""
from __future__ import annotations

import math

import pytest
import torch
from torch_geometric.nn import SAGEConv

from gnnscale.nn.layers import BlockSAGEConv, build_conv
from gnnscale.samplers import NeighborSampler
from gnnscale.nn.dropout import dropout
from gnnscale.nn.sparse_ops import BlockAdjacency, add_rows_, block_matmul


def _graph(n: int = 300, m: int = 3000, seed: int = 3) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, m), generator=g)
    return ei[:, ei[0] != ei[1]]


def _sage_pair(in_dim: int, out_dim: int, seed: int = 0):
    torch.manual_seed(seed)
    ours = BlockSAGEConv(in_dim, out_dim)
    ref = SAGEConv(in_dim, out_dim)
    ref.load_state_dict(ours.state_dict())  # same parameter names and shapes
    return ours, ref


def _compare(ours, ref, x_src: torch.Tensor, num_dst: int, edge_index: torch.Tensor) -> None:
    """Outputs, input gradients and weight gradients of both layers within 1e-5."""
    outs, grads = [], []
    for layer in (ours, ref):
        x = x_src.clone().requires_grad_(True)
        layer.zero_grad()
        out = layer((x, x[:num_dst]), edge_index, size=(x.size(0), num_dst))
        g = torch.Generator().manual_seed(9)
        (out * torch.randn(out.shape, generator=g)).sum().backward()
        outs.append(out.detach())
        grads.append([x.grad] + [p.grad for p in layer.parameters()])
    torch.testing.assert_close(outs[0], outs[1], atol=1e-5, rtol=1e-5)
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("in_dim,out_dim", [(32, 8), (8, 32)])  # linear first / aggregation first
def test_block_sage_equals_pyg_sage_on_sampled_blocks(in_dim: int, out_dim: int) -> None:
    n = 300
    src, dst = _graph(n)
    indices = src[torch.argsort(dst, stable=True)]  # CSC: in-neighbors grouped by destination
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(torch.bincount(dst, minlength=n), 0)])
    sampler = NeighborSampler(indptr, indices, [5, 3], seed=1)
    mb = sampler.sample(torch.arange(0, 40))
    ours, ref = _sage_pair(in_dim, out_dim)
    x = torch.randn(n, in_dim, generator=torch.Generator().manual_seed(4))
    for block in mb.blocks:  # destinations with no sampled in-edge included
        _compare(ours, ref, x[block.src_ids], block.num_dst, block.edge_index)


def test_block_sage_equals_pyg_sage_on_whole_graph_and_unsorted_edges() -> None:
    n = 300
    ei = _graph(n)
    perm = torch.randperm(ei.size(1), generator=torch.Generator().manual_seed(5))
    ours, ref = _sage_pair(16, 8)
    x = torch.randn(n, 16, generator=torch.Generator().manual_seed(6))
    _compare(ours, ref, x, n, ei[:, perm])


@pytest.mark.parametrize("compiled", [True, False])  # numba kernels, or torch.sparse.mm
def test_block_matmul_is_the_dense_product_both_ways(compiled: bool, monkeypatch) -> None:
    import gnnscale.nn.sparse_ops as ops

    monkeypatch.setattr(ops, "_compiled_ok", lambda t: compiled and ops.numba is not None)
    ei = torch.tensor([[0, 2, 3, 3, 1], [0, 0, 1, 2, 2]])  # D = 3 (one destination per row), S = 4
    w = torch.tensor([0.5, 2.0, 1.0, 3.0, -1.0])
    adj = BlockAdjacency(ei, 4, 3, weight=w)
    assert adj.compiled == compiled
    dense = torch.zeros(3, 4)
    dense[ei[1], ei[0]] = w
    h = torch.randn(4, 5, requires_grad=True)
    out = block_matmul(adj, h)
    torch.testing.assert_close(out, dense @ h)
    g = torch.randn(3, 5)
    out.backward(g)
    torch.testing.assert_close(h.grad, dense.t() @ g)
    # Mean weights by default; an empty block gives zeros of the right shape.
    mean = BlockAdjacency(ei, 4, 3).matrix.to_dense()
    assert mean.sum(1).tolist() == [1.0, 1.0, 1.0]
    empty = BlockAdjacency(torch.zeros(2, 0, dtype=torch.int64), 4, 3)
    assert block_matmul(empty, h).abs().sum() == 0 and block_matmul(empty, h).shape == (3, 5)


def test_one_pass_mean_csr_equals_the_torch_build_and_transposes_on_demand(monkeypatch) -> None:
    """The compiled one-pass build (checks, degrees, CSR, 1 / in-degree) gives the torch path's
    arrays bit for bit on sampled (grouped) and unsorted edges; the transpose is built only when
    a backward into the sources asks for it; an id out of range raises the same message."""
    import gnnscale.nn.sparse_ops as ops

    n = 300
    src, dst = _graph(n)
    indices = src[torch.argsort(dst, stable=True)]
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(torch.bincount(dst, minlength=n), 0)])
    block = NeighborSampler(indptr, indices, [5], seed=1).sample(torch.arange(0, 60)).blocks[0]
    unsorted = _graph(n)[:, torch.randperm(_graph(n).size(1), generator=torch.Generator().manual_seed(2))]
    for ei, s_, d_ in ((block.edge_index, block.num_src, block.num_dst), (unsorted, n, n)):
        fast = BlockAdjacency(ei, s_, d_)
        assert fast.compiled and fast._t is None  # nothing transposed yet
        with monkeypatch.context() as m:
            m.setattr(ops, "_compiled_ok", lambda t: False)
            ref = BlockAdjacency(ei, s_, d_)
        for name in ("crow", "col", "val", "row", "crow_t", "col_t", "val_t", "perm_t"):
            assert torch.equal(getattr(fast, name), getattr(ref, name)), name
    h = torch.randn(block.num_src, 4)
    adj = BlockAdjacency(block.edge_index, block.num_src, block.num_dst)
    block_matmul(adj, h)  # features: no gradient, no transpose
    assert adj._t is None
    block_matmul(adj, h.requires_grad_(True)).sum().backward()
    assert adj._t is not None
    bad = block.edge_index.clone()
    bad[0, 3] = block.num_src
    with pytest.raises(ValueError, match=rf"expected sources in 0..{block.num_src - 1} .* found sources in \d+..{block.num_src} "):
        BlockAdjacency(bad, block.num_src, block.num_dst)


@pytest.mark.parametrize("needs_grad", [True, False])  # a hidden layer / the first layer (features)
def test_sage_as_one_autograd_node_equals_autograd_bit_for_bit(needs_grad: bool) -> None:
    """BlockSAGEConv given (x, x[:D]) runs _SageMean (one node, no slice gradient, products
    summed in place); given a copy of x[:D] it runs autograd's graph. Output, input and
    weight gradients equal exactly, at the layers' widths (aggregation first)."""
    import gnnscale.nn.layers.sage as sage

    n = 400
    src, dst = _graph(n, 6000)
    indices = src[torch.argsort(dst, stable=True)]
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(torch.bincount(dst, minlength=n), 0)])
    block = NeighborSampler(indptr, indices, [10], seed=1).sample(torch.arange(0, 120)).blocks[0]
    torch.manual_seed(0)
    layer = BlockSAGEConv(128, 256)
    x0 = torch.randn(block.num_src, 128, generator=torch.Generator().manual_seed(4))
    g = torch.randn(block.num_dst, 256, generator=torch.Generator().manual_seed(5))
    runs = []
    for fused in (True, False):
        x = x0.clone().requires_grad_(needs_grad)
        x_dst = x[:block.num_dst] if fused else x[:block.num_dst].clone()
        assert sage._is_head(x_dst, x) == fused
        layer.zero_grad()
        out = layer((x, x_dst), block.edge_index)
        assert (out.grad_fn.name() == "_SageMeanBackward") == fused
        out.backward(g)
        runs.append([out.detach(), x.grad] + [p.grad for p in layer.parameters()])
    for a, b in zip(*runs):
        assert (a is None and b is None) or torch.equal(a, b)
    assert (runs[0][1] is not None) == needs_grad


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_keeps_the_expected_fraction_and_scales(p: float) -> None:
    torch.manual_seed(0)
    x = torch.rand(2000, 250) + 0.5  # no zeros of its own
    out = dropout(x, p, training=True)
    kept = out != 0
    n = x.numel()
    frac = float(kept.float().mean())
    # Binomial(n, 1 - p): 6 standard deviations.
    assert abs(frac - (1 - p)) < 6 * math.sqrt(p * (1 - p) / n), frac
    torch.testing.assert_close(out[kept], x[kept] / (1 - p))
    # Rows and columns are not correlated: each row keeps about the same fraction.
    rows = kept.float().mean(1)
    assert float(rows.std()) < 6 * math.sqrt(p * (1 - p) / 250)


def test_dropout_backward_uses_the_forward_mask_and_is_seeded() -> None:
    x = torch.randn(500, 64, requires_grad=True)
    torch.manual_seed(1)
    out = dropout(x, 0.5)
    g = torch.randn_like(out)
    out.backward(g)
    mask = (out != 0) | (x == 0)
    torch.testing.assert_close(x.grad, torch.where(mask, g * 2.0, torch.zeros_like(g)))
    torch.manual_seed(1)
    again = dropout(x.detach(), 0.5)
    assert torch.equal(again, out.detach())  # torch.manual_seed makes it repeatable
    assert torch.equal(dropout(x, 0.5, training=False), x)
    assert torch.equal(dropout(x, 0.0), x)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        dropout(x, 1.5)


def test_sage_zoo_name_builds_ours_and_pyg_options_build_pyg() -> None:
    assert isinstance(build_conv("sage", 8, 4, index=0, num_layers=2), BlockSAGEConv)
    assert isinstance(build_conv("sage-pyg", 8, 4, index=0, num_layers=2), SAGEConv)
    layer = build_conv("sage", 8, 4, index=0, num_layers=2, aggr="max")
    assert isinstance(layer, SAGEConv) and "max" in repr(layer)


def test_relu_dropout_equals_dropout_of_relu_forward_and_backward() -> None:
    """The fused pass gives dropout(relu(x)) with the same mask (same seed stream), and the
    same gradient, although its backward reads the output instead of recomputing the mask."""
    from gnnscale.nn.dropout import dropout, relu_dropout

    x = torch.randn(3000, 64, generator=torch.Generator().manual_seed(0))
    g = torch.randn(3000, 64, generator=torch.Generator().manual_seed(1))
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    torch.manual_seed(5)
    fa = relu_dropout(a, 0.4)
    torch.manual_seed(5)
    fb = dropout(torch.relu(b), 0.4)
    assert torch.equal(fa, fb)
    (fa * g).sum().backward()
    (fb * g).sum().backward()
    assert torch.equal(a.grad, b.grad)
    assert torch.equal(relu_dropout(x, 0.4, training=False), torch.relu(x))


def test_model_fuses_relu_and_dropout_without_changing_results() -> None:
    """GNN.forward fuses a hidden layer's ReLU with the next layer's dropout when nothing reads
    the activation between them; asking for the emitted rows (which turns fusion off) gives
    the same logits and gradients."""
    from gnnscale.nn.models import GNN
    from gnnscale.samplers.block import Block

    g = torch.Generator().manual_seed(0)
    sizes = [(400, 120, 1500), (120, 30, 400), (30, 8, 90)]
    blocks = []
    for s, d, m in sizes:
        ei = torch.stack([torch.randint(0, s, (m,), generator=g), torch.randint(0, d, (m,), generator=g)])
        blocks.append(Block(torch.arange(s), torch.arange(d), ei))
    x = torch.randn(400, 16, generator=g)
    torch.manual_seed(0)
    model = GNN(16, 32, 5, num_layers=3, layer="sage", dropout=0.5).train()
    grads = []
    outs = []
    for emit in (None, []):
        model.zero_grad()
        torch.manual_seed(9)
        out = model(x, blocks, emit=emit)
        out.square().sum().backward()
        outs.append(out.detach())
        grads.append([p.grad.clone() for p in model.parameters()])
    assert torch.equal(outs[0], outs[1])
    for ga, gb in zip(*grads):
        assert torch.allclose(ga, gb, atol=1e-6, rtol=1e-5)


def test_add_rows_equals_index_add_with_repeats():
    g = torch.Generator().manual_seed(0)
    out = torch.randn(50, 8, generator=g)
    rows = torch.randint(0, 50, (200,), generator=g)  # many repeats
    src = torch.randn(200, 8, generator=g)
    want = out.clone().index_add_(0, rows, src)
    got = add_rows_(out, rows, src)
    assert got is out and torch.allclose(got, want, atol=1e-5)
    assert add_rows_(out, rows[:0], src[:0]) is out  # nothing to add


def test_a_claimed_relu_dropout_backward_gives_the_same_gradients_bit_for_bit(monkeypatch) -> None:
    """GraphSAGE 3 x 256: layer 2 (BlockSAGEConv, aggregation first) claims the backward of
    layer 1's ReLU-dropout and applies it in its own input gradient. Logits and every
    parameter's gradient equal those of the unclaimed backward exactly."""
    import torch.nn.functional as F

    import gnnscale.nn.layers.sage as sage
    from gnnscale.nn.models import GraphSAGE

    n = 400
    src, dst = _graph(n, 6000)
    indices = src[torch.argsort(dst, stable=True)]
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(torch.bincount(dst, minlength=n), 0)])
    blocks = NeighborSampler(indptr, indices, [5, 5, 5], seed=1).sample(torch.arange(0, 64)).blocks
    x = torch.randn(blocks[0].num_src, 128, generator=torch.Generator().manual_seed(4))
    y = torch.randint(0, 7, (blocks[-1].num_dst,), generator=torch.Generator().manual_seed(5))
    real, claims, runs = sage.claim_relu_dropout, [], []
    for claim in (True, False):
        monkeypatch.setattr(sage, "claim_relu_dropout",
                            (lambda t: claims.append(real(t)) or claims[-1]) if claim else (lambda t: None))
        torch.manual_seed(0)
        net = GraphSAGE(128, 256, 7, num_layers=3, dropout=0.5)
        net.train()
        torch.manual_seed(1)  # the same dropout seeds in both runs
        out = net(x, blocks)
        F.cross_entropy(out, y).backward()
        runs.append([out.detach()] + [p.grad for p in net.parameters()])
    assert len(claims) == 1 and claims[0] == 2.0  # layer 2 took layer 1's (scale 1 / (1 - 0.5))
    for a, b in zip(*runs):
        assert torch.equal(a, b)


def test_only_a_sole_consumers_relu_dropout_can_be_claimed_once() -> None:
    from gnnscale.nn.dropout import claim_relu_dropout, relu_dropout, relu_dropout_backward_

    x = torch.randn(50, 8, requires_grad=True)
    assert claim_relu_dropout(relu_dropout(x, 0.5)) is None  # the caller did not say "one consumer"
    h = relu_dropout(x, 0.5, sole_consumer=True)
    assert claim_relu_dropout(h[:10]) is None  # a view is not the output
    assert claim_relu_dropout(h) == 2.0
    assert claim_relu_dropout(h) is None  # claimed once
    with pytest.raises(ValueError, match=r"expected a contiguous gradient of the output's shape \(50, 8\), "
                                         r"found \(8, 50\) \(contiguous: False\)"):
        relu_dropout_backward_(torch.ones(50, 8).t(), h, 2.0)
    # the claimed node hands the gradient on as it is: the claimer masked it
    g = torch.ones(50, 8)
    h.backward(g)
    assert torch.equal(x.grad, g)


def test_an_aggregation_that_scales_where_positive_equals_the_two_passes_bit_for_bit() -> None:
    """``mm(..., scale_where_positive=(pos, scale, first))`` (the claimed ReLU-dropout's backward
    in the aggregation's own pass over rows first..) equals the product followed by the
    ReLU-dropout's backward on those rows, exactly, compiled and through torch.sparse."""
    import numpy as np

    from gnnscale.nn.dropout import _scale_where_positive

    n = 300
    src, dst = _graph(n, 4000)
    adj = BlockAdjacency(torch.stack([src, dst]), n, n)
    g = torch.Generator().manual_seed(6)
    h = torch.randn(n, 24, generator=g)
    pos = torch.randn(n, 24, generator=g).clamp(min=0)  # a ReLU-dropout's output: > 0 where kept
    for transpose in (True, False):
        for compiled in (True, False):
            adj.compiled = compiled
            plain = adj.mm(h, transpose=transpose)
            want = plain.clone()
            _scale_where_positive(pos[40:].numpy(), plain[40:].numpy(), want[40:].numpy(), np.float32(2.0))
            got = adj.mm(h, transpose=transpose, scale_where_positive=(pos, 2.0, 40))
            assert torch.equal(got, want), (transpose, compiled)
            assert torch.equal(got[:40], plain[:40]) and not torch.equal(got[40:], plain[40:])
        adj.compiled = True
    with pytest.raises(ValueError, match=r"expected scale_where_positive's tensor contiguous and of the output's "
                                         r"shape \(300, 24\), found \(24, 300\) \(contiguous: False\)"):
        adj.mm(h, transpose=True, scale_where_positive=(pos.t(), 2.0, 0))
