"""PyG users' own graphs, models and loops on gnnscale's sampler (single process).

``from gnnscale.pyg import NeighborLoader`` is PyG's ``NeighborLoader`` (PyG's ``NodeLoader``, its
batches and argument names) with the draws of gnnscale's compiled keyed kernels, so it runs
where PyG's needs pyg-lib or torch-sparse, on a ``Data`` or a ``HeteroData``; ``LinkNeighborLoader``
likewise for links (``Data``). Imports
``samplers`` (and ``gnnscale.errors``) only, nothing of the engine above them.
"""
from gnnscale.pyg.hetero import HeteroGnnscaleSampler
from gnnscale.pyg.loaders import LinkNeighborLoader, NeighborLoader
from gnnscale.pyg.sampler import GnnscaleSampler

__all__ = ["GnnscaleSampler", "HeteroGnnscaleSampler", "LinkNeighborLoader", "NeighborLoader"]
