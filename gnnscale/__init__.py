"""gnnscale: distributed GNN training on partitioned graphs.

Public API (small on purpose):

- :func:`gnnscale.datasets.load_dataset` - datasets as ``torch_geometric.data.Data``;
- :func:`gnnscale.partitioning.partition_graph`, :func:`gnnscale.partitioning.load_part`;
- :class:`gnnscale.samplers.NeighborSampler`, :class:`gnnscale.samplers.DistNeighborSampler`;
- :class:`Communicator`, :class:`DistFeatureStore`, :class:`GraphSAGE`;
- :class:`TrainConfig`, :func:`train_worker`, :func:`launch_local`;
- :func:`train` - partition (cached) and train in one call; :class:`GNN` - the layer stack;
- :func:`load_model` - a model saved by ``gnnscale train --save-model`` as a plain module;
- :func:`load_embeddings` - the embeddings written by ``gnnscale embed``, in the dataset's node order.
- :func:`gnnscale.errors.run_main` - a script's main(): a user's error is one line and exit status 2.
"""
__version__ = "0.1.0"

from gnnscale.errors import GnnscaleError  # noqa: E402
from gnnscale.lazy import lazy_exports  # noqa: E402

__all__ = ["GnnscaleError", "__version__"]

_LAZY = {
    "Communicator": "gnnscale.process.comm",
    "DistFeatureStore": "gnnscale.data.feature_store",
    "GraphSAGE": "gnnscale.nn.models",
    "TrainConfig": "gnnscale.config",
    "train_worker": "gnnscale.training.trainer",
    "launch_local": "gnnscale.process.launch",
    "train": "gnnscale.api",
    "GNN": "gnnscale.nn.models",
    "init_distributed": "gnnscale.process.groups",
    "load_model": "gnnscale.training.model_io",
    "load_embeddings": "gnnscale.training.embed",
}
__all__ += list(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)  # so ``import gnnscale`` stays cheap
