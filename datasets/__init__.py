"""gnnscale.datasets: load node-classification graphs in one common form.

Public API:

* :func:`load_dataset` ``(name, root=None, **options) -> torch_geometric.data.Data``
* :func:`generate_synthetic` ``(num_nodes=20000, avg_degree=10, ...) -> Data``
* :data:`DATASET_HELP`: text describing every dataset name and option (for ``--help``).

The returned ``Data`` follows the dataset contract of ARCHITECTURE.md: ``x`` float32
[N, F], ``y`` int64 [N] (-1 = unlabelled, in no mask), ``edge_index`` int64 [2, E]
(row 0 source, row 1 target, no duplicates), bool ``train_mask``/``val_mask``/``test_mask``
[N], ``num_classes`` (int) and ``name`` (str).
"""

from gnnscale.datasets.loader import DATASET_HELP, load_dataset
from gnnscale.datasets.synthetic import generate_synthetic

__all__ = ["DATASET_HELP", "generate_synthetic", "load_dataset"]
