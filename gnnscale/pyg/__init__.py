"""PyG users' own graphs, models and loops on gnnscale's sampler (single process).

``from gnnscale.pyg import NeighborLoader`` is PyG's ``NeighborLoader`` (PyG's ``NodeLoader``, its
batches and argument names) with the draws of gnnscale's compiled keyed kernels, so it runs
where PyG's needs pyg-lib or torch-sparse, on a ``Data`` or a ``HeteroData``; ``LinkNeighborLoader``
likewise for links (``Data``). PyG's ``FeatureStore``/``GraphStore`` over an in-memory graph or a
partition folder (:mod:`gnnscale.pyg.stores`; each rank its own part: :mod:`gnnscale.pyg.own_part`;
typed folders: :mod:`gnnscale.pyg.typed_stores`) feed
PyG's own ``NodeLoader``/``LinkLoader``;
:func:`start_run` runs a user's own loop under torchrun (:mod:`gnnscale.pyg.run`);
:mod:`gnnscale.pyg.distributed` is PyG's deprecated ``torch_geometric.distributed`` API
(``DistContext``, ``LocalGraphStore``/``LocalFeatureStore.from_partition``, ``DistNeighborLoader``,
``DistLinkNeighborLoader``, ``Partitioner``) over the same machinery, for PyG's scripts.
``gnnscale.pyg.init_distributed`` is the old name of :func:`start_run` (deprecated: it warns once;
``gnnscale.init_distributed`` is the engine's: it joins the process group only).
Imports the data side (``samplers``, ``partitioning``, ``data``), ``process``, ``gnnscale.errors`` and
the engine's link metrics (``gnnscale.tasks.scores``: torch and ``gnnscale.config`` only), nothing
else of the engine.
"""
from gnnscale.pyg.hetero import HeteroGnnscaleSampler
from gnnscale.pyg.loaders import LinkNeighborLoader, NeighborLoader
from gnnscale.pyg.sampler import GnnscaleSampler
from gnnscale.pyg.run import DistRun, start_run
from gnnscale.pyg.dropout import KeyedDropout, keyed_dropout
from gnnscale.pyg.memory_stores import MemoryFeatureStore, MemoryGraphStore, memory_stores
from gnnscale.pyg.own_part import OwnPartGraphStore, OwnPartSampler
from gnnscale.pyg.stores import PartitionFeatureStore, PartitionGraphStore, sampler_for
from gnnscale.pyg.typed_own_part import TypedOwnPartGraphStore
from gnnscale.pyg.typed_stores import TypedPartitionFeatureStore, TypedPartitionGraphStore

__all__ = ["DistRun", "GnnscaleSampler", "HeteroGnnscaleSampler", "KeyedDropout", "LinkNeighborLoader",
           "MemoryFeatureStore", "MemoryGraphStore", "NeighborLoader", "OwnPartGraphStore", "OwnPartSampler",
           "PartitionFeatureStore", "PartitionGraphStore", "TypedOwnPartGraphStore",
           "TypedPartitionFeatureStore", "TypedPartitionGraphStore", "keyed_dropout", "memory_stores", "sampler_for",
           "start_run"]


_WARNED = {"init_distributed": False}


def __getattr__(name: str):
    """``gnnscale.pyg.init_distributed``: the old name of :func:`start_run`, kept for old scripts
    (one ``FutureWarning`` per process), so that one name has one meaning: ``gnnscale.init_distributed``
    joins the engine's process group, ``gnnscale.pyg.start_run`` runs a PyG loop over it."""
    if name == "init_distributed":
        if not _WARNED["init_distributed"]:
            import warnings

            _WARNED["init_distributed"] = True
            warnings.warn("gnnscale.pyg.init_distributed is now gnnscale.pyg.start_run (the same call); "
                          "gnnscale.init_distributed is the engine's process-group join. Rename the call; "
                          "the old name will be removed.", FutureWarning, stacklevel=2)
        return start_run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
