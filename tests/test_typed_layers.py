"""Typed (heterogeneous) graph models: R-GCN, rel:<spec>, HGT against PyG; the typed encoder; GNN and ModelSpec."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from torch import Tensor
from torch_geometric.nn import GATConv, HeteroConv, HGTConv, RGCNConv, SAGEConv

from gnnscale.nn.layers import (TYPED_ZOO, ZOO, BlockHGTConv, BlockRGCNConv, LayerError, RelationWise, build_conv,
                                check_typed_layer, is_typed_spec)
from gnnscale.nn.models import GNN, ModelError, layer_needs_x0
from gnnscale.nn.typed_model import TypedGNN
from gnnscale.nn.spec import ModelSpec
from gnnscale.nn.typed_encoder import TypedEncoder
from gnnscale.samplers.block import Block, MiniBatch, TypedInput

# --------------------------------------------------------------------------- a small typed graph

# paper (0, target, features), author (1, features), field (2, no features: learned embedding),
# venue (3, features; no relation reaches it).
NODE_TYPES = ["paper", "author", "field", "venue"]
COUNTS = [12, 9, 5, 3]
EDGE_TYPES = [("author", "writes", "paper"), ("paper", "cites", "paper"), ("paper", "rev_writes", "author"),
              ("field", "topic_of", "paper"), ("paper", "has_topic", "field"), ("venue", "hosts", "paper")]
FEATURE_DIMS = [6, 4, 0, 3]


def typed_graph(seed: int = 0, edges_per_relation: int = 25):
    """A random typed graph in the homogeneous view: type_ptr, node_type, edge_index, edge_type,
    x_dict (per-type features) and the HeteroData-style dicts of the same graph."""
    gen = torch.Generator().manual_seed(seed)
    type_ptr = torch.tensor([0] + COUNTS).cumsum(0)
    node_type = torch.repeat_interleave(torch.arange(len(COUNTS)), torch.tensor(COUNTS))
    idx = {n: i for i, n in enumerate(NODE_TYPES)}
    edge_index_dict, parts, types = {}, [], []
    for r, (s, rel, d) in enumerate(EDGE_TYPES):
        si, di = idx[s], idx[d]
        pairs = torch.stack([torch.randint(0, COUNTS[si], (edges_per_relation,), generator=gen),
                             torch.randint(0, COUNTS[di], (edges_per_relation,), generator=gen)])
        pairs = torch.unique(pairs, dim=1)  # no duplicate (src, dst, relation)
        if s == d:
            pairs = pairs[:, pairs[0] != pairs[1]]
        edge_index_dict[(s, rel, d)] = pairs
        parts.append(pairs + torch.tensor([[int(type_ptr[si])], [int(type_ptr[di])]]))
        types.append(torch.full((pairs.size(1),), r))
    x_dict = {NODE_TYPES[t]: torch.randn(COUNTS[t], f, generator=gen) for t, f in enumerate(FEATURE_DIMS) if f}
    return SimpleNamespace(type_ptr=type_ptr, node_type=node_type, edge_index=torch.cat(parts, 1),
                           edge_type=torch.cat(types), x_dict=x_dict, edge_index_dict=edge_index_dict,
                           relations=[(idx[s], r, idx[d]) for r, (s, _, d) in enumerate(EDGE_TYPES)],
                           num_nodes=int(type_ptr[-1]))


def typed_block(g, dst_ids: Tensor, src_extra: Tensor | None = None) -> Block:
    """The block of ``dst_ids`` with every in-edge (sources: dst_ids, then the other neighbours in
    id order, then ``src_extra``), with edge_type and node_type."""
    keep = torch.isin(g.edge_index[1], dst_ids)
    src_g, dst_g, et = g.edge_index[0, keep], g.edge_index[1, keep], g.edge_type[keep]
    others = torch.unique(src_g[~torch.isin(src_g, dst_ids)])
    if src_extra is not None:
        others = torch.unique(torch.cat([others, src_extra[~torch.isin(src_extra, dst_ids)]]))
    src_ids = torch.cat([dst_ids, others])
    local = torch.full((g.num_nodes,), -1, dtype=torch.long)
    local[src_ids] = torch.arange(src_ids.numel())
    return Block(src_ids, dst_ids, torch.stack([local[src_g], local[dst_g]]), edge_type=et,
                 node_type=g.node_type[src_ids])


def hetero_inputs(g, dim: int, seed: int = 1) -> tuple[Tensor, dict]:
    """The same random hidden rows as one [N, dim] matrix (homogeneous ids) and as a per-type dict."""
    h = torch.randn(g.num_nodes, dim, generator=torch.Generator().manual_seed(seed))
    return h, {n: h[int(g.type_ptr[t]):int(g.type_ptr[t + 1])] for t, n in enumerate(NODE_TYPES)}


def run_typed(conv, h: Tensor, block: Block) -> Tensor:
    x = h[block.src_ids]
    nt = block.node_type
    return conv((x, x[:block.num_dst]), block.edge_index, edge_type=block.edge_type, node_type=(nt, nt[:block.num_dst]))


def rows_of(g, t: int, out: Tensor, block: Block) -> Tensor:
    """The rows of ``out`` (one per destination of ``block``) of type t's nodes, in per-type id order."""
    ids = block.dst_ids
    sel = g.node_type[ids] == t
    order = torch.argsort(ids[sel])
    return out[sel][order]


RELS = [(0, r, 1) for r in range(4)] + [(1, 4, 0)]


def random_typed_block(seed: int = 0, num_src: int = 40, num_dst: int = 12, num_edges: int = 120):
    gen = torch.Generator().manual_seed(seed)
    nt = torch.randint(0, 2, (num_src,), generator=gen)
    et = torch.randint(0, 5, (num_edges,), generator=gen)
    # endpoints consistent with RELS: relations 0..3 go 0 -> 1, relation 4 goes 1 -> 0
    src_pool = {t: torch.nonzero(nt == t).squeeze(1) for t in (0, 1)}
    dst_pool = {t: torch.nonzero(nt[:num_dst] == t).squeeze(1) for t in (0, 1)}
    s_t, d_t = torch.where(et < 4, 0, 1), torch.where(et < 4, 1, 0)
    src = torch.stack([src_pool[int(a)][torch.randint(0, len(src_pool[int(a)]), (1,), generator=gen)]
                       for a in s_t]).view(-1)
    dst = torch.stack([dst_pool[int(b)][torch.randint(0, len(dst_pool[int(b)]), (1,), generator=gen)]
                       for b in d_t]).view(-1)
    return torch.randn(num_src, 8, generator=gen), torch.stack([src, dst]), et, nt


# --------------------------------------------------------------------------- R-GCN


@pytest.mark.parametrize("kw", [{}, {"num_bases": 3}, {"num_blocks": 2}, {"root_weight": False, "bias": False}],
                         ids=["plain", "bases", "blocks", "no-root-no-bias"])
def test_rgcn_equals_pyg_rgcnconv(kw: dict) -> None:
    torch.manual_seed(0)
    x, ei, et, nt = random_typed_block()
    d = 12
    ours = build_conv("rgcn", 8, 6, index=0, num_layers=1, num_relations=5, num_node_types=2, relations=RELS, **kw)
    assert isinstance(ours, BlockRGCNConv) and ours.needs_edge_type
    ref = RGCNConv((8, 8), 6, 5, aggr="mean", **kw)
    ref.load_state_dict(ours.state_dict())
    x = x.requires_grad_()
    a = ours((x, x[:d]), ei, edge_type=et, node_type=(nt, nt[:d]))
    b = ref((x, x[:d]), ei, et)
    assert a.shape == (d, 6) and torch.allclose(a, b, atol=1e-5)
    ga = torch.autograd.grad(a.pow(2).sum(), [x] + list(ours.parameters()))
    gb = torch.autograd.grad(b.pow(2).sum(), [x] + list(ref.parameters()))
    for u, v in zip(ga, gb):
        assert torch.allclose(u, v, atol=1e-5)
    # an edge-free block: root + bias only
    empty = ours((x, x[:d]), ei[:, :0], edge_type=et[:0], node_type=(nt, nt[:d]))
    assert torch.allclose(empty, ref((x, x[:d]), ei[:, :0], et[:0]), atol=1e-6)


def test_rgcn_errors() -> None:
    with pytest.raises(LayerError, match="num_bases or num_blocks, not both"):
        BlockRGCNConv(4, 4, 1, num_bases=2, num_blocks=2)
    with pytest.raises(LayerError, match="divisible by num_blocks.*jk='cat'"):
        BlockRGCNConv(6, 4, 1, num_blocks=4)
    with pytest.raises(LayerError, match=r"relations=\[\(src type, relation, dst type\)"):
        BlockRGCNConv(4, 4, num_relations=2, num_node_types=2)
    with pytest.raises(LayerError, match="one triple per relation 0..1"):
        BlockRGCNConv(4, 4, num_relations=2, num_node_types=1, relations=[(0, 0, 0), (0, 0, 0)])
    conv = BlockRGCNConv(4, 4, num_relations=2, num_node_types=1, relations=[(0, 0, 0), (0, 1, 0)])
    x, ei = torch.randn(3, 4), torch.tensor([[1, 2], [0, 0]])
    with pytest.raises(LayerError, match=r"edge types \(relations\) in 0..1, found 2"):
        conv((x, x[:1]), ei, edge_type=torch.tensor([0, 2]))
    with pytest.raises(LayerError, match="expected edge_type int64"):
        conv((x, x[:1]), ei)


# --------------------------------------------------------------------------- rel:<spec>


def _hetero_sage(ours: RelationWise, out_dim: int, g, x_dict) -> HeteroConv:
    hetero = HeteroConv({et: SAGEConv((-1, -1), out_dim) for et in EDGE_TYPES}, aggr="sum")
    hetero(x_dict, g.edge_index_dict)  # materializes the lazy weights
    for r, et in enumerate(EDGE_TYPES):
        hetero.convs[et].load_state_dict(ours.convs[r].state_dict())
    return hetero


@pytest.mark.parametrize("in_dim,out_dim", [(8, 5), (5, 8)])  # narrowing (map first) and widening
def test_rel_sage_equals_pyg_heteroconv(in_dim: int, out_dim: int) -> None:
    torch.manual_seed(0)
    g = typed_graph()
    h, x_dict = hetero_inputs(g, in_dim)
    ours = build_conv("rel:sage", in_dim, out_dim, index=0, num_layers=2, num_relations=len(EDGE_TYPES),
                      num_node_types=len(NODE_TYPES), relations=g.relations)
    assert isinstance(ours, RelationWise) and ours.unreached == [3] and list(ours.self_lins.keys()) == ["3"]
    ref = _hetero_sage(ours, out_dim, g, x_dict)(x_dict, g.edge_index_dict)
    assert set(ref) == {"paper", "author", "field"}  # PyG leaves the unreached type (venue) out
    # all nodes sources, the target type's nodes destinations
    papers = torch.arange(COUNTS[0])
    block = typed_block(g, papers, src_extra=torch.arange(g.num_nodes))
    assert block.num_src == g.num_nodes
    out = run_typed(ours, h, block)
    assert out.shape == (COUNTS[0], out_dim) and torch.allclose(out, ref["paper"], atol=1e-5)
    # every node a destination (shuffled, so types interleave): every reached type equals HeteroConv
    perm = torch.randperm(g.num_nodes, generator=torch.Generator().manual_seed(3))
    block = typed_block(g, perm)
    out = run_typed(ours, h, block)
    for t, name in enumerate(NODE_TYPES[:3]):
        assert torch.allclose(rows_of(g, t, out, block), ref[name], atol=1e-5), name
    venue = rows_of(g, 3, out, block)  # the unreached type: its self transform
    assert torch.allclose(venue, ours.self_lins[3](x_dict["venue"]), atol=1e-6)


def test_rel_layers_see_only_their_relation() -> None:
    """Each relation's layer gets its own edges and only its destination type's destinations."""
    seen = []

    class Spy(torch.nn.Module):
        def __init__(self, in_dim, out_dim):
            super().__init__()
            self.lin = torch.nn.Linear(in_dim, out_dim)

        def forward(self, x, edge_index):
            seen.append((x[0].size(0), x[1].size(0), edge_index.size(1)))
            return self.lin(x[1])

    g = typed_graph()
    h, _ = hetero_inputs(g, 4)
    conv = RelationWise(Spy, 4, 3, num_relations=len(EDGE_TYPES), num_node_types=4, relations=g.relations)
    seen.clear()  # the probe of the class
    papers = torch.arange(COUNTS[0])
    block = typed_block(g, papers)
    run_typed(conv, h, block)
    seen_by_rel = dict(zip([r for s, r, d in g.relations if d == 0], seen))
    for r, (s, _, d) in enumerate(g.relations):
        if d != 0:
            continue
        n_src, n_dst, m = seen_by_rel[r]
        edges = block.edge_type == r
        used = torch.unique(block.edge_index[0, edges])
        assert n_dst == COUNTS[0] and m == int(edges.sum())
        assert n_src == (torch.unique(torch.cat([used, papers])).numel() if s == d else COUNTS[0] + used.numel())


@pytest.mark.parametrize("spec", ["rel:gcn", "rel:gat", "rel:gat-pyg", "rel:gcnii", "rel:test_typed_layers:MeanConv"])
def test_rel_specs_run_with_grads(spec: str) -> None:
    torch.manual_seed(0)
    g = typed_graph()
    dim = 8
    h, _ = hetero_inputs(g, dim)
    conv = build_conv(spec, dim, dim, index=0, num_layers=2, num_relations=len(EDGE_TYPES),
                      num_node_types=4, relations=g.relations)
    block = typed_block(g, torch.tensor([0, 1, 2, 13, 14, 22, 26]))
    h = h.requires_grad_()
    x = h[block.src_ids]
    kw = {"x0": torch.randn(block.num_dst, dim)} if conv.needs_x0 else {}
    out = conv((x, x[:block.num_dst]), block.edge_index, edge_type=block.edge_type,
               node_type=(block.node_type, block.node_type[:block.num_dst]), **kw)
    assert out.shape == (block.num_dst, dim) and torch.isfinite(out).all()
    out.pow(2).sum().backward()
    assert h.grad.abs().sum() > 0
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in conv.parameters())
    assert layer_needs_x0(spec) == (spec == "rel:gcnii")


def test_rel_gat_equals_pyg_heteroconv_gat() -> None:
    """rel:gat's per-relation layers are PyG's GATConv function too (same-type relations, self loops)."""
    torch.manual_seed(0)
    dim = 8
    g = typed_graph()
    h, x_dict = hetero_inputs(g, dim)
    rels = [et for et in EDGE_TYPES if et[0] == et[2]]  # GATConv adds self loops only on one node type
    sel = [r for r, et in enumerate(EDGE_TYPES) if et[0] == et[2]]
    keep = torch.isin(g.edge_type, torch.tensor(sel))
    g1 = SimpleNamespace(**vars(g))
    g1.edge_index, g1.edge_type = g.edge_index[:, keep], torch.searchsorted(torch.tensor(sel), g.edge_type[keep])
    ours = build_conv("rel:gat", dim, dim, index=1, num_layers=2, heads=2, num_relations=1, num_node_types=4,
                      relations=[(0, 0, 0)])
    hetero = HeteroConv({et: GATConv(dim, dim, heads=2, concat=False) for et in rels}, aggr="sum")
    hetero.convs[rels[0]].load_state_dict(ours.convs[0].state_dict())
    ref = hetero({"paper": x_dict["paper"]}, {rels[0]: g.edge_index_dict[rels[0]]})["paper"]
    block = typed_block(g1, torch.arange(COUNTS[0]))
    assert torch.allclose(run_typed(ours, h, block), ref, atol=1e-5)


class MeanConv(torch.nn.Module):
    """A user layer by import path: mean of the in-neighbours plus a root term."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(in_dim, out_dim)
        self.root = torch.nn.Linear(in_dim, out_dim, bias=False)

    def forward(self, x, edge_index):
        x_src, x_dst = x
        agg = torch.zeros(x_dst.size(0), x_src.size(1)).index_add(0, edge_index[1], x_src[edge_index[0]])
        deg = torch.bincount(edge_index[1], minlength=x_dst.size(0)).clamp(min=1).unsqueeze(1)
        return self.lin(agg / deg) + self.root(x_dst)


def test_rel_errors_and_registry() -> None:
    assert "rgcn" in TYPED_ZOO and "hgt" in TYPED_ZOO and "rgcn" not in ZOO
    assert is_typed_spec("rgcn") and is_typed_spec("rel:sage") and is_typed_spec("REL:gat")
    assert not is_typed_spec("sage") and not is_typed_spec("test_typed_layers:MeanConv")
    with pytest.raises(LayerError, match="already relation-aware"):
        build_conv("rel:rgcn", 4, 4, index=0, num_layers=1)
    with pytest.raises(LayerError, match="expected a homogeneous layer spec after 'rel:'"):
        build_conv("rel:", 4, 4, index=0, num_layers=1)
    with pytest.raises(LayerError, match=r"unknown layer 'sgae' \(did you mean 'sage'\?\)"):
        build_conv("rel:sgae", 4, 4, index=0, num_layers=1)
    with pytest.raises(LayerError, match=r"unknown layer 'rgnc' \(did you mean 'rgcn'\?\)"):
        build_conv("rgnc", 4, 4, index=0, num_layers=1)
    # without the graph's types (the CLI's early check): one node type, one relation
    conv = build_conv("rel:sage", 8, 8, index=0, num_layers=2)
    check_typed_layer(conv, 8, 8, "rel:sage")


# --------------------------------------------------------------------------- HGT


def _copy_hgt(ours: BlockHGTConv, ref: HGTConv) -> None:
    with torch.no_grad():
        for t, name in enumerate(NODE_TYPES):
            ref.kqv_lin.lins[name].weight.copy_(ours.kqv[t].weight)
            ref.kqv_lin.lins[name].bias.copy_(ours.kqv[t].bias)
            ref.out_lin.lins[name].weight.copy_(ours.out_lin[t].weight)
            ref.out_lin.lins[name].bias.copy_(ours.out_lin[t].bias)
            ref.skip[name].copy_(ours.skip[t:t + 1])
        ref.k_rel.weight.copy_(ours.k_rel)
        ref.v_rel.weight.copy_(ours.v_rel)
        for r, et in enumerate(EDGE_TYPES):
            ref.p_rel["__".join(et)].copy_(ours.p_rel[r:r + 1])


@pytest.mark.parametrize("in_dim,heads", [(8, 2), (6, 1)])  # with the skip mix (in == out) and without
def test_hgt_equals_pyg_hgtconv(in_dim: int, heads: int) -> None:
    torch.manual_seed(0)
    out_dim = 8
    g = typed_graph()
    h, x_dict = hetero_inputs(g, in_dim)
    x_dict = {k: v.clone().requires_grad_() for k, v in x_dict.items()}
    ours = build_conv("hgt", in_dim, out_dim, index=0, num_layers=2, heads=heads, num_relations=len(EDGE_TYPES),
                      num_node_types=4, relations=g.relations)
    assert isinstance(ours, BlockHGTConv)
    with torch.no_grad():  # away from the initial values, so that every parameter matters
        ours.skip.uniform_(-1, 1)
        ours.p_rel.uniform_(0.5, 1.5)
    ref = HGTConv(in_dim, out_dim, (NODE_TYPES, EDGE_TYPES), heads=heads)
    _copy_hgt(ours, ref)
    want = ref(x_dict, g.edge_index_dict)
    perm = torch.randperm(g.num_nodes, generator=torch.Generator().manual_seed(5))
    block = typed_block(g, perm)
    hh = h.clone().requires_grad_()
    out = run_typed(ours, hh, block)
    assert out.shape == (g.num_nodes, out_dim)
    for t, name in enumerate(NODE_TYPES[:3]):
        assert torch.allclose(rows_of(g, t, out, block), want[name], atol=1e-5), name
    # gradients: the same loss on the reached types
    loss = sum(rows_of(g, t, out, block).pow(2).sum() for t in range(3))
    loss_ref = sum(want[n].pow(2).sum() for n in NODE_TYPES[:3])
    loss.backward()
    loss_ref.backward()
    for t, name in enumerate(NODE_TYPES[:3]):
        lo, hi = int(g.type_ptr[t]), int(g.type_ptr[t + 1])
        assert torch.allclose(hh.grad[lo:hi], x_dict[name].grad, atol=1e-5), name
    assert torch.allclose(ours.k_rel.grad, ref.k_rel.weight.grad, atol=1e-5)
    assert torch.allclose(ours.v_rel.grad, ref.v_rel.weight.grad, atol=1e-5)
    assert torch.allclose(ours.kqv[1].weight.grad, ref.kqv_lin.lins["author"].weight.grad, atol=1e-5)
    # a sampled block of a few papers: their rows still equal HGTConv's (full in-neighbourhoods)
    block = typed_block(g, torch.tensor([3, 0, 7]))
    assert torch.allclose(run_typed(ours, h, block), want["paper"][[3, 0, 7]], atol=1e-5)


def test_hgt_shapes_grads_and_errors() -> None:
    torch.manual_seed(0)
    x, ei, et, nt = random_typed_block()
    conv = BlockHGTConv(8, 8, num_relations=5, num_node_types=2, relations=RELS, heads=4)
    x = x.requires_grad_()
    out = conv((x, x[:12]), ei, edge_type=et, node_type=(nt, nt[:12]))
    assert out.shape == (12, 8)
    out.pow(2).sum().backward()
    assert x.grad.abs().sum() > 0 and all(p.grad is not None for p in conv.parameters())
    with pytest.raises(LayerError, match="heads must be a positive int dividing out_dim=8"):
        BlockHGTConv(8, 8, heads=3)
    with pytest.raises(LayerError, match=r"node_type=\(src_type \[S=40\], dst_type \[D=12\]\)"):
        conv((x, x[:12]), ei, edge_type=et, node_type=(nt[:5], nt[:12]))


# --------------------------------------------------------------------------- typed encoder


def typed_input(g, ids: Tensor) -> TypedInput:
    nt = g.node_type[ids]
    ti = ids - g.type_ptr[nt]
    rows = {t: g.x_dict[n][ti[nt == t]] for t, n in enumerate(NODE_TYPES) if n in g.x_dict}
    return TypedInput(nt, ti, rows)


def test_typed_encoder() -> None:
    torch.manual_seed(0)
    g = typed_graph()
    enc = TypedEncoder(FEATURE_DIMS, COUNTS, 16)
    assert list(enc.linears.keys()) == ["0", "1", "3"] and enc.embedding_types == [2]
    assert isinstance(enc.embeddings[2], torch.nn.Embedding) and enc.embeddings[2].weight.shape == (5, 16)
    ids = torch.randperm(g.num_nodes, generator=torch.Generator().manual_seed(2))[:20]
    x = typed_input(g, ids)
    out = enc(x)
    assert out.shape == (20, 16) and out.dtype == torch.float32
    for i, gid in enumerate(ids.tolist()):  # the reference, row by row
        t, k = int(g.node_type[gid]), gid - int(g.type_ptr[g.node_type[gid]])
        want = enc.embeddings[t](torch.tensor(k)) if t == 2 else enc.linears[t](g.x_dict[NODE_TYPES[t]][k])
        assert torch.allclose(out[i], want, atol=1e-6)
    out.sum().backward()
    assert enc.embeddings[2].weight.grad.abs().sum() > 0 and enc.linears[0].weight.grad.abs().sum() > 0
    with pytest.raises(ModelError, match=r"rows\[0\] must be"):
        enc(TypedInput(x.node_type, x.type_index, {k: v for k, v in x.rows.items() if k != 0}))
    bad = x.type_index.clone()
    bad[x.node_type == 2] = 99
    with pytest.raises(ModelError, match="type 2 has 5 nodes"):
        enc(TypedInput(x.node_type, bad, x.rows))


# --------------------------------------------------------------------------- GNN and ModelSpec

META_TYPED = {"node_types": NODE_TYPES, "edge_types": [list(e) for e in EDGE_TYPES], "target_type": "paper",
              "feature_dims": FEATURE_DIMS, "num_nodes_per_type": COUNTS}


def cfg(layer: str, **kw) -> SimpleNamespace:
    base = dict(hidden=16, layer=layer, layer_kwargs={}, dropout=0.0, norm="none", residual=False, jk="none")
    base.update(kw)
    return SimpleNamespace(**base, model_layers=lambda: 2)


def two_block_batch(g, seeds: Tensor) -> MiniBatch:
    b1 = typed_block(g, seeds)
    b0 = typed_block(g, b1.src_ids)
    return MiniBatch(seeds, [b0, b1], x=typed_input(g, b0.src_ids))


def test_model_spec_typed_fields_and_record() -> None:
    spec = ModelSpec.of(cfg("rgcn", layer_kwargs={"num_bases": 2}), None, 3, typed=META_TYPED)
    assert spec.typed and spec.relations == tuple(tuple(r) for r in typed_graph().relations)
    assert spec.node_types == tuple(NODE_TYPES) and spec.feature_dims == tuple(FEATURE_DIMS)
    rec = spec.record()
    assert json.loads(json.dumps(rec)) == rec and ModelSpec(**json.loads(json.dumps(rec))) == spec
    a, b = spec.build(seed=3), ModelSpec(**rec).build(seed=3)
    assert all(torch.equal(a.state_dict()[k], v) for k, v in b.state_dict().items())
    plain = ModelSpec.of(cfg("sage"), 7, 3)
    assert not plain.typed and not set(plain.record()) & {"node_types", "relations", "feature_dims",
                                                          "num_nodes_per_type"}
    with pytest.raises(ModelError, match="not among node_types"):
        ModelSpec.of(cfg("rgcn"), None, 3, typed=META_TYPED | {"edge_types": [["paper", "x", "book"]]})


def test_homogeneous_layer_on_typed_graph_is_rejected() -> None:
    for layer in ("sage", "gat", "test_typed_layers:MeanConv", MeanConv):
        with pytest.raises(ModelError, match=r"homogeneous but the graph is typed.*use layer='rel:.*'rgcn', 'hgt'"):
            ModelSpec.of(cfg(layer), None, 3, typed=META_TYPED).build()
    with pytest.raises(ModelError, match="relation-aware and needs a typed graph"):
        ModelSpec.of(cfg("rgcn"), 8, 3).build()
    with pytest.raises(ModelError, match="num_nodes_per_type missing"):
        TypedGNN(8, 3, layer="rgcn", relations=[(0, 0, 0)], feature_dims=[4])
    with pytest.raises(ModelError, match="leave them out of layer_kwargs"):
        ModelSpec.of(cfg("rgcn", layer_kwargs={"num_relations": 6}), None, 3, typed=META_TYPED).build()


@pytest.mark.parametrize("layer,kw", [("rgcn", {"num_bases": 3}), ("rel:sage", {}), ("hgt", {"heads": 2}),
                                      ("rel:gcnii", {})])
def test_typed_gnn_trains_on_a_two_block_batch(layer: str, kw: dict) -> None:
    torch.manual_seed(0)
    g = typed_graph()
    spec = ModelSpec.of(cfg(layer, layer_kwargs=kw), None, 3, typed=META_TYPED)
    model = spec.build(seed=0)
    assert model.typed_encoder is not None and model.encoder is None and model.dims[0] == 16
    assert all(model.needs_edge_type)
    seeds = torch.tensor([0, 2, 5, 7, 11])
    mb = two_block_batch(g, seeds)
    y = torch.tensor([0, 1, 2, 1, 0])
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(20):
        opt.zero_grad()
        logits = model(mb.x, mb.blocks)
        assert logits.shape == (5, 3)
        loss = torch.nn.functional.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0], losses
    emb = model.typed_encoder.embeddings[2].weight
    assert emb.grad is not None  # the learned table of the featureless type trains
    # the blocks must carry their types, and the input must be typed
    bare = [Block(b.src_ids, b.dst_ids, b.edge_index) for b in mb.blocks]
    with pytest.raises(ModelError, match="needs the block's edge_type and node_type"):
        model(mb.x, bare)
    with pytest.raises(ModelError, match="input is a TypedInput"):
        model(torch.randn(mb.blocks[0].num_src, 6), mb.blocks)


def test_untyped_model_is_unchanged_by_typed_support() -> None:
    """An untyped spec builds the same model as before (no typed encoder, same parameters)."""
    spec = ModelSpec(5, 8, 3, 2, "gcnii")
    model = spec.build(seed=0)
    assert model.typed is None and not hasattr(model, "typed_encoder") and model.encoder is not None
    assert [n for n, _ in model.named_parameters()][:2] == ["encoder.weight", "encoder.bias"]
    with pytest.raises(ModelError, match="model is untyped"):
        g = typed_graph()
        model(typed_input(g, torch.arange(4)), [typed_block(g, torch.arange(2))] * 2)


def test_typed_layer_by_import_path_and_class() -> None:
    g = typed_graph()
    kw = dict(num_relations=len(EDGE_TYPES), num_node_types=4, relations=g.relations)
    conv = build_conv("gnnscale.nn.layers.rgcn:BlockRGCNConv", 6, 4, index=0, num_layers=1, **kw)  # typed probe
    assert isinstance(conv, BlockRGCNConv) and is_typed_spec("gnnscale.nn.layers.rgcn:BlockRGCNConv")
    torch.manual_seed(0)
    model = TypedGNN(8, 3, num_layers=2, layer=BlockRGCNConv, layer_kwargs={"num_bases": 2}, dropout=0.0,
                     relations=g.relations, feature_dims=FEATURE_DIMS, num_nodes_per_type=COUNTS, node_types=NODE_TYPES)
    mb = two_block_batch(g, torch.tensor([1, 4]))
    assert model(mb.x, mb.blocks).shape == (2, 3)

    class Broken(torch.nn.Module):
        needs_edge_type = True

        def __init__(self, in_dim, out_dim, **kwargs):
            super().__init__()
            self.lin = torch.nn.Linear(in_dim, out_dim)

        def forward(self, x, edge_index):  # forgets edge_type / node_type
            return self.lin(x[1])

    with pytest.raises(LayerError, match="must take edge_type and node_type keywords"):
        TypedGNN(8, 3, layer=Broken, relations=g.relations, feature_dims=FEATURE_DIMS, num_nodes_per_type=COUNTS)
