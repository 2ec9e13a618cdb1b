"""PyG users' own graphs, models and loops on gnnscale's sampler (single process).

``from gnnscale.pyg import NeighborLoader`` is PyG's ``NeighborLoader`` (PyG's ``NodeLoader``, its
batches and argument names) with the draws of gnnscale's compiled keyed kernels, so it runs
where PyG's needs pyg-lib or torch-sparse, on a ``Data`` or a ``HeteroData``; ``LinkNeighborLoader``
likewise for links (``Data``). PyG's ``FeatureStore``/``GraphStore`` over an in-memory graph or a
partition folder (:mod:`gnnscale.pyg.stores`; each rank its own part: :mod:`gnnscale.pyg.own_part`;
typed folders: :mod:`gnnscale.pyg.typed_stores`) feed
PyG's own ``NodeLoader``/``LinkLoader``;
:func:`init_distributed` runs a user's own loop under torchrun (:mod:`gnnscale.pyg.distributed`).
Imports the data side (``samplers``, ``partitioning``, ``data``), ``process``, ``gnnscale.errors`` and
the engine's link metrics (``gnnscale.tasks.scores``: torch and ``gnnscale.config`` only), nothing
else of the engine.
"""
from gnnscale.pyg.hetero import HeteroGnnscaleSampler
from gnnscale.pyg.loaders import LinkNeighborLoader, NeighborLoader
from gnnscale.pyg.sampler import GnnscaleSampler
from gnnscale.pyg.distributed import DistRun, init_distributed
from gnnscale.pyg.dropout import KeyedDropout, keyed_dropout
from gnnscale.pyg.memory_stores import MemoryFeatureStore, MemoryGraphStore, memory_stores
from gnnscale.pyg.own_part import OwnPartGraphStore, OwnPartSampler
from gnnscale.pyg.stores import PartitionFeatureStore, PartitionGraphStore, sampler_for
from gnnscale.pyg.typed_stores import TypedPartitionFeatureStore, TypedPartitionGraphStore

__all__ = ["DistRun", "GnnscaleSampler", "HeteroGnnscaleSampler", "KeyedDropout", "LinkNeighborLoader",
           "MemoryFeatureStore", "MemoryGraphStore", "NeighborLoader", "OwnPartGraphStore", "OwnPartSampler",
           "PartitionFeatureStore", "PartitionGraphStore",
           "TypedPartitionFeatureStore", "TypedPartitionGraphStore", "init_distributed", "keyed_dropout",
           "memory_stores", "sampler_for"]
