"""gnnscale.datasets: load node-classification graphs in one common form.

Public API:

* :func:`load_dataset` ``(name, root=None, **options) -> torch_geometric.data.Data``
* :func:`generate_synthetic` ``(num_nodes=20000, avg_degree=10, ...) -> Data``
* :func:`generate_synthetic_mag` ``(num_nodes=100000, num_features=128, ...) -> Data`` (typed)
* :func:`write_hetero_dir` ``(data, path) -> str``: a typed ``Data`` as a ``hetero-dir:`` folder
* :mod:`gnnscale.datasets.typed`: ``make_typed_data``, ``check_typed``, ``add_reverse``,
  ``from_hetero_data``, ``to_hetero_data``, ``relation_edges`` (typed graphs)
* :data:`DATASET_HELP`: text describing every dataset name and option (for ``--help``).

The returned ``Data`` follows the dataset contract of ARCHITECTURE.md: ``x`` float32
[N, F], ``y`` int64 [N] (-1 = unlabelled, in no mask), ``edge_index`` int64 [2, E]
(row 0 source, row 1 target, no duplicates), bool ``train_mask``/``val_mask``/``test_mask``
[N], ``num_classes`` (int) and ``name`` (str).

Typed (heterogeneous) sources (``acm:PATH``, ``hetero-dir:PATH``, ``synthetic-mag``,
``ogbn-mag``) return the typed ``Data`` of docs/typed_graphs.md section 1 instead: ``x`` is
None, features per type in ``x_dict``, plus ``node_types``, ``edge_types``, ``type_ptr``,
``node_type``, ``edge_type`` and ``target_type``.
"""

from gnnscale.lazy import lazy_exports

# Public name -> the submodule that defines it, loaded on first use (PEP 562): the launcher reads a
# name's input files through the torch-free gnnscale.datasets.inputs without importing torch.
_EXPORTS = {
    "DATASET_HELP": ".loader",
    "load_dataset": ".loader",
    "generate_synthetic": ".synthetic",
    "generate_synthetic_mag": ".mag",
    "write_hetero_dir": ".hetero_dir",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
