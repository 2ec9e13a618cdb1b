"""Graphs stored in one ``.npz`` file, in either of two published layouts.

Name: ``npz:PATH`` (a relative PATH is taken relative to ``root`` when given).

Layout (a), gnn-benchmark (Shchur et al. 2018, ``shchur/gnn-benchmark``):
    ``adj_data, adj_indices, adj_indptr, adj_shape``   CSR adjacency [N, N]
    ``attr_data, attr_indices, attr_indptr, attr_shape`` CSR features [N, F]
    (or a dense ``attr_matrix`` [N, F]), ``labels`` int [N] (negative = unlabelled). The
    SparseGraph variant (the PPNP and G2G code: ``adj_matrix.data``, ``adj_matrix.indices``,
    ``adj_matrix.indptr``, ``adj_matrix.shape``, ``attr_matrix.*`` or a dense ``attr_matrix``,
    ``labels``) is read the same way.
    The graph is symmetrized; the split is the Shchur et al. one: per class
    ``train_per_class`` (20) random train nodes, ``val_per_class`` (30) val, the rest test,
    drawn with ``seed`` (0).

Layout (b), heterophilous-graphs (Platonov et al. 2023, ``yandex-research/heterophilous-graphs``):
    ``node_features`` [N, F], ``node_labels`` int [N], ``edges`` int [E, 2] (undirected,
    each edge once), ``train_masks``, ``val_masks``, ``test_masks`` bool [S, N].
    Both directions of every edge are stored; option ``split`` (0) picks row ``split``
    of the masks.

Duplicate edges and self loops are removed in both layouts.

Targets (docs/targets_and_edge_features.md section 1): the files keep the metric they are judged
by. The heterophilous-graphs benchmark judges Tolokers, Minesweeper and Questions by ROC-AUC (its
code picks the metric by dataset name; the ``.npz`` stores no metric), so a file whose name
(stem, case and ``-``/``_`` ignored) is ``tolokers``, ``minesweeper`` or ``questions`` loads with
``target_kind`` "binary" (``y`` int64 0/1, ``num_classes`` 2); every other file is "class"
(accuracy). Option ``target`` (auto, class, binary) overrides the name rule (a renamed copy).
"""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from torch_geometric.data import Data

from gnnscale.datasets._data import make_data
from gnnscale.datasets._graph import check_edge_ids, clean_edges
from gnnscale.datasets._options import Option
from gnnscale.datasets._splits import per_class_split
from gnnscale.datasets.inputs import npz_file
from gnnscale.datasets.targets import attach_targets
from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)

OPTIONS: dict[str, Option] = {
    "split": Option(int, 0, "heterophilous layout: which of the stored splits (row of *_masks)"),
    "seed": Option(int, 0, "gnn-benchmark layout: seed of the per-class random split"),
    "train_per_class": Option(int, 20, "gnn-benchmark layout: train nodes per class"),
    "val_per_class": Option(int, 30, "gnn-benchmark layout: val nodes per class"),
    "target": Option(str, "auto", "auto (binary for tolokers, minesweeper, questions: ROC-AUC), class or binary"),
}
HELP = (
    "npz:PATH\n"
    "    One .npz file, layout detected from its keys: gnn-benchmark (adj_*, attr_* or attr_matrix,\n"
    "    labels; symmetrized; Shchur split 20/30 per class, rest test) or heterophilous-graphs\n"
    "    (node_features, node_labels, edges [E,2], train/val/test_masks [S,N]). Files judged by ROC-AUC\n"
    "    (tolokers, minesweeper, questions) load as binary targets (target_kind binary). Options:"
)

_BENCH_KEYS = ("adj_data", "adj_indices", "adj_indptr", "adj_shape", "labels")
_HETERO_KEYS = ("node_features", "node_labels", "edges", "train_masks", "val_masks", "test_masks")
# heterophilous-graphs (Platonov et al. 2023) datasets judged by ROC-AUC: binary targets
ROC_AUC_NAMES = ("tolokers", "minesweeper", "questions")


def target_of(path: Path, option: str) -> str:
    """The target kind a file loads with: ``option`` unless ``auto``, else ``binary`` for the
    ROC-AUC datasets (by file name), else ``class``."""
    if option not in ("auto", "class", "binary"):
        raise DatasetError(f"expected option target among auto, class, binary for {path}, found {option!r}; "
                           "pass target=auto|class|binary")
    if option != "auto":
        return option
    return "binary" if path.stem.lower().replace("-", "_") in ROC_AUC_NAMES else "class"


def _labels(raw: np.ndarray, n: int, where: str) -> np.ndarray:
    lab = np.asarray(raw)
    if lab.ndim == 2 and lab.shape[1] == 1:
        lab = lab[:, 0]
    if lab.shape != (n,) or not (np.issubdtype(lab.dtype, np.integer) or np.issubdtype(lab.dtype, np.bool_)):
        raise DatasetError(
            f"expected integer labels of shape [{n}] in {where}, found {lab.dtype} {lab.shape}; "
            "store one class id per node (negative for unlabelled)"
        )
    return lab.astype(np.int64)


def _load_benchmark(z, where: str, options: dict, name: str) -> Data:
    for key in ("adj_indices", "adj_indptr", "adj_shape", "attr_indices", "attr_indptr", "attr_shape"):
        if key in z and np.asarray(z[key]).dtype.kind not in "iu":
            raise DatasetError(f"expected integer {key} in {where}, found dtype {np.asarray(z[key]).dtype}; "
                               "re-create the file")
    try:
        adj = sp.csr_matrix(
            (z["adj_data"], z["adj_indices"], z["adj_indptr"]), shape=tuple(int(s) for s in z["adj_shape"])
        )
        if "attr_data" in z:
            attr = sp.csr_matrix(
                (z["attr_data"], z["attr_indices"], z["attr_indptr"]),
                shape=tuple(int(s) for s in z["attr_shape"]),
            ).toarray()
        elif "attr_matrix" in z:
            attr = np.asarray(z["attr_matrix"])
        else:
            raise DatasetError(
                f"expected node features in {where} as attr_data/attr_indices/attr_indptr/attr_shape "
                f"or attr_matrix, found keys {sorted(z.files)}; add the features"
            )
    except ValueError as exc:
        raise DatasetError(f"expected a valid CSR matrix in {where}, found inconsistent arrays ({exc}); re-create the file") from None
    n = adj.shape[0]
    if adj.shape != (n, n) or attr.ndim != 2 or attr.shape[0] != n:
        raise DatasetError(
            f"expected a square adjacency [N, N] and features [N, F] in {where}, found adjacency "
            f"{adj.shape} and features {attr.shape}; re-create the file"
        )
    y = _labels(z["labels"], n, where)
    coo = adj.tocoo()
    check_edge_ids(coo.row, coo.col, n, where)
    edge_index = clean_edges(coo.row, coo.col, n, undirected=True)
    train, val, test = per_class_split(y, options["train_per_class"], options["val_per_class"], options["seed"])
    return make_data(x=attr, y=y, edge_index=edge_index, train_mask=train, val_mask=val, test_mask=test, name=name, where=where)


def _load_hetero(z, where: str, options: dict, name: str) -> Data:
    x = np.asarray(z["node_features"])
    if x.ndim != 2:
        raise DatasetError(f"expected node_features [N, F] in {where}, found shape {x.shape}; re-create the file")
    n = x.shape[0]
    y = _labels(z["node_labels"], n, where)
    edges = np.asarray(z["edges"])
    if edges.ndim != 2 or edges.shape[1] != 2 or not np.issubdtype(edges.dtype, np.integer):
        raise DatasetError(
            f"expected integer edges [E, 2] in {where}, found {edges.dtype} {edges.shape}; re-create the file"
        )
    check_edge_ids(edges[:, 0], edges[:, 1], n, where)
    edge_index = clean_edges(edges[:, 0], edges[:, 1], n, undirected=True)
    masks = []
    for key in ("train_masks", "val_masks", "test_masks"):
        m = np.asarray(z[key]).astype(bool)
        if m.ndim == 1:
            m = m[None, :]
        if m.ndim != 2 or m.shape[1] != n:
            raise DatasetError(f"expected {key} [S, {n}] in {where}, found {m.shape}; re-create the file")
        masks.append(m)
    num_splits = masks[0].shape[0]
    split = options["split"]
    if not 0 <= split < num_splits or any(m.shape[0] != num_splits for m in masks):
        raise DatasetError(
            f"expected split in [0, {num_splits}) for {where} (it stores {num_splits} splits), "
            f"found split={split}; pass split=0..{num_splits - 1}"
        )
    train, val, test = (m[split] for m in masks)
    return make_data(x=x, y=y, edge_index=edge_index, train_mask=train, val_mask=val, test_mask=test, name=name, where=where)


# The SparseGraph variant of the gnn-benchmark layout (the PPNP and G2G code's ``.npz``):
# ``adj_matrix.data`` ... and ``attr_matrix.*`` (CSR) or a dense ``attr_matrix``.
_SPARSEGRAPH = {"adj_matrix.data": "adj_data", "adj_matrix.indices": "adj_indices", "adj_matrix.indptr": "adj_indptr",
                "adj_matrix.shape": "adj_shape", "attr_matrix.data": "attr_data", "attr_matrix.indices": "attr_indices",
                "attr_matrix.indptr": "attr_indptr", "attr_matrix.shape": "attr_shape"}


class _Renamed:
    """The archive ``z`` seen through gnn-benchmark key names."""

    def __init__(self, z) -> None:
        self.z = z
        self.names = {_SPARSEGRAPH.get(k, k): k for k in z.files}
        self.files = list(self.names)

    def __contains__(self, key: str) -> bool:
        return key in self.names

    def __getitem__(self, key: str):
        return self.z[self.names[key]]


def load(arg: str, root: str | None, options: dict, name: str) -> Data:
    """Load ``npz:<arg>``; see the module docstring."""
    path = npz_file(arg, root)
    where = str(path)
    kind = target_of(path, options["target"])
    try:
        z = np.load(path, allow_pickle=False)
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise DatasetError(f"expected a NumPy .npz archive at {path}, could not read it ({exc}); re-create the file") from None
    with z:
        keys = set(z.files)
        if "adj_matrix.data" in keys:
            z = _Renamed(z)
            keys = set(z.files)
        if set(_HETERO_KEYS) <= keys:
            data = _load_hetero(z, where, options, name)
            layout = "heterophilous-graphs"
        elif set(_BENCH_KEYS) <= keys:
            data = _load_benchmark(z, where, options, name)
            layout = "gnn-benchmark"
        else:
            raise DatasetError(
                f"expected the keys of a known .npz layout in {path}, found {sorted(keys)}; expected "
                f"either gnn-benchmark {list(_BENCH_KEYS)} + attr_data/attr_indices/attr_indptr/"
                f"attr_shape or attr_matrix, or heterophilous-graphs {list(_HETERO_KEYS)}"
            )
    if kind == "binary":
        attach_targets(data, data.y, kind="binary", where=where)
    logger.info(
        "loaded %s (%s layout, %s targets): %d nodes, %d edges, %d features, %d classes",
        name,
        layout,
        kind,
        data.num_nodes,
        data.edge_index.shape[1],
        data.x.shape[1],
        data.num_classes,
    )
    return data
