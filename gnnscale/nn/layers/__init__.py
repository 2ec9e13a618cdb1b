"""Message-passing layers (one module per layer, each registering its zoo names) for sampled bipartite blocks, and how to pick one by name.

Blocks
------
A block has S source nodes and D destination nodes; the destinations are the first
D sources (``x_dst == x_src[:D]``). ``edge_index`` is int64 [2, M]: row 0 indexes
sources (0..S-1), row 1 indexes destinations (0..D-1); messages flow row 0 -> row 1
(PyG's ``source_to_target``). A block may hold a sampled subset of a node's in-edges
or its full neighborhood. It holds no self-loop edge unless the graph has one.

The layer contract
------------------
A layer is any ``nn.Module`` callable as::

    layer((x_src, x_dst), edge_index) -> Tensor[D, out_dim]

with ``x_src`` float32 [S, in_dim] and ``x_dst`` float32 [D, in_dim]. Every
torch_geometric conv that accepts a bipartite ``(x_src, x_dst)`` tuple follows it as
is (``SAGEConv``, ``GATConv``, ``GINConv``, ``GraphConv`` ...). A layer that needs the
initial representation (GCNII) sets the class attribute ``needs_x0 = True`` and is
called as ``layer((x_src, x_dst), edge_index, x0=x0_dst)`` with ``x0_dst`` float32
[D, dim]. The layers of this module also take an optional ``size=(S, D)`` keyword
(as the PyG convs do), so callers may pass it or not.

Picking a layer
---------------
:func:`build_conv` takes a *spec*:

* a zoo name (see :data:`ZOO`): ``sage``, ``sage-pyg``, ``gcn``, ``gat``, ``gat-pyg``, ``gin``,
  ``gcnii``. ``sage``, ``gcn``, ``gat`` and ``gcnii`` are this module's CSR layers
  (:class:`BlockSAGEConv`, :class:`BlockGCNConv`, :class:`BlockGATConv`,
  :class:`BlockGCN2Conv`); ``sage`` and ``gat`` equal PyG's ``SAGEConv`` / ``GATConv`` and
  build those instead (as ``sage-pyg`` / ``gat-pyg`` always do) when given an option only
  PyG's layer has;
* an import path ``"package.module:ClassName"``: the class is built as
  ``ClassName(in_dim, out_dim, **kwargs)`` and probed once by :func:`check_layer`;
* ``"dgl:ClassName"``: ``dgl.nn.ClassName(in_dim, out_dim, **kwargs)`` wrapped in
  :class:`DGLLayerAdapter` (DGL is optional: ``pip install 'gnnscale[dgl]'``).

Every bad spec raises :class:`LayerError` saying what was expected, what was found
and how to fix it.

Typed graphs
------------
Relation-aware layers (``needs_edge_type = True``, see :mod:`.typed` for their contract) are
built with the graph's ``num_relations``, ``num_node_types`` and ``relations`` and called with
``edge_type=`` and ``node_type=(src_type, dst_type)``. Their zoo (:data:`TYPED_ZOO`): ``rgcn``
(:class:`BlockRGCNConv`, equal to PyG's ``RGCNConv`` with mean aggregation) and ``hgt``
(:class:`BlockHGTConv`, equal to PyG's ``HGTConv``); and ``rel:<spec>`` makes any homogeneous
spec relation-wise (:class:`RelationWise`: one layer per relation, summed per destination type,
as PyG's ``to_hetero``), e.g. ``rel:sage``, ``rel:gat``, ``rel:mypkg.layers:MyConv``.
"""
from __future__ import annotations

from gnnscale.nn.layers.contract import LayerError, check_layer, load_layer_class
from gnnscale.nn.layers.registry import TYPED_ZOO, ZOO, build_conv, is_typed_spec, register, spec_help
from gnnscale.nn.layers import sage, gcn, gcnii, gat, gin, tgat, dgl  # noqa: E402,F401  (each registers its names)
from gnnscale.nn.layers import rgcn, hgt, relational  # noqa: E402,F401  (relation-aware: typed graphs)
from gnnscale.nn.layers.dgl import DGLLayerAdapter
from gnnscale.nn.layers.gat import BlockGATConv
from gnnscale.nn.layers.gcn import BlockGCNConv, block_gcn_norm, gcn_adjacency, graph_gcn_norm
from gnnscale.nn.layers.gcnii import BlockGCN2Conv
from gnnscale.nn.layers.sage import BlockSAGEConv
from gnnscale.nn.layers.hgt import BlockHGTConv
from gnnscale.nn.layers.relational import RelationWise
from gnnscale.nn.layers.rgcn import BlockRGCNConv
from gnnscale.nn.layers.typed import check_typed_layer

SPEC_HELP = spec_help()

__all__ = ["LayerError", "ZOO", "SPEC_HELP", "BlockSAGEConv", "BlockGCNConv", "BlockGCN2Conv", "BlockGATConv",
           "DGLLayerAdapter", "build_conv", "register", "load_layer_class", "check_layer", "block_gcn_norm",
           "graph_gcn_norm", "gcn_adjacency", "TYPED_ZOO", "BlockRGCNConv", "BlockHGTConv", "RelationWise",
           "is_typed_spec", "check_typed_layer"]
