"""Models on sampled blocks: the layer zoo (one module per layer, a registry), the layer stack, sparse ops;
for typed graphs, relation-aware layers (rgcn, hgt, rel:<spec>) and the typed input encoder."""
from __future__ import annotations

from gnnscale.lazy import lazy_exports

_EXPORTS = {"GNN": ".models", "GraphSAGE": ".models", "build_conv": ".layers", "ZOO": ".layers",
            "TYPED_ZOO": ".layers", "ModelSpec": ".spec", "TypedEncoder": ".typed_encoder", "TypedGNN": ".typed_model",
            "BlockRGCNConv": ".layers", "BlockHGTConv": ".layers", "RelationWise": ".layers"}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
