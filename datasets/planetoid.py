"""Planetoid citation graphs (Cora, CiteSeer, PubMed) from the raw ``ind.<name>.*`` files.

Name: ``planetoid:cora`` | ``planetoid:citeseer`` | ``planetoid:pubmed`` (also plain
``cora``/``citeseer``/``pubmed``). ``root`` is the folder holding the eight files
``ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}``, or a folder whose ``raw/``
subfolder holds them; without ``root`` the loader looks in ``$GNNSCALE_DATA/planetoid``,
``$GNNSCALE_DATA``, ``./data/planetoid`` and ``./data`` (each also with ``raw/``).

The result equals PyG's ``Planetoid(root, name)`` with the public split: edges
symmetrized, duplicates and self loops removed; node ``i < len(allx)`` is row ``i``
of ``allx``/``ally``, test node ``test.index[j]`` is row ``j`` of ``tx``/``ty``; CiteSeer's
15 test-range gaps (ids without a ``tx`` row) get zero features and no label (they are not
isolated: they keep their 1-2 graph edges, as in PyG). Differences from PyG: nodes
without a label (all-zero one-hot row, e.g. CiteSeer's 15 gaps) get ``y = -1`` (PyG
gives 0) and are in no mask; edges are sorted by (source, target).
Public split: train = ``0 .. len(y)-1``, val = the next 500 nodes, test = ``test.index``.
Option ``normalize=row`` (``planetoid:cora?normalize=row``): each node's features divided by their
sum, as the GCN / GCNII reference code (``utils.normalize``) preprocesses them; default ``none``.
"""

from __future__ import annotations

import itertools
import logging
import pickle
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from torch_geometric.data import Data

from gnnscale.datasets._data import make_data
from gnnscale.datasets._graph import check_edge_ids, clean_edges
from gnnscale.datasets._options import Option
from gnnscale.datasets.inputs import PLANETOID_FILES, PLANETOID_NAMES
from gnnscale.datasets.inputs import planetoid_folder as find_folder
from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)

NAMES, FILES = PLANETOID_NAMES, PLANETOID_FILES
NORMALIZE = ("none", "row")
OPTIONS: dict[str, Option] = {
    "normalize": Option(str, "none", "none (PyG's raw 0/1 rows) or row: each node's features divided by their sum, "
                        "as the GCN and GCNII reference code preprocess them (rows of zeros stay zeros)"),
}
HELP = (
    "planetoid:cora | planetoid:citeseer | planetoid:pubmed (aliases cora, citeseer, pubmed)\n"
    "    Planetoid citation graphs with the public split (PyG Planetoid). root = folder with the raw\n"
    "    ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index} files (or its parent with raw/); default\n"
    "    $GNNSCALE_DATA/planetoid, $GNNSCALE_DATA, ./data/planetoid, ./data. Options:"
)
_VAL_SIZE = 500


class _Unpickler(pickle.Unpickler):
    """Unpickler for the Python-2 Planetoid pickles that survives SciPy 2.x.

    The matrix pickles reference ``scipy.sparse.csr.csr_matrix``; the private
    ``scipy.sparse.csr`` module is deprecated, so such names are looked up in ``scipy.sparse``.
    """

    def find_class(self, module: str, name: str):  # noqa: D401 - pickle API
        if module.startswith("scipy.sparse.") and hasattr(sp, name):
            module = "scipy.sparse"
        return super().find_class(module, name)


def _unpickle(path: Path):
    with open(path, "rb") as f, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return _Unpickler(f, encoding="latin1").load()
        except Exception as exc:  # corrupt / truncated file
            raise DatasetError(
                f"expected a Planetoid pickle in {path}, could not unpickle it ({type(exc).__name__}: "
                f"{exc}); re-copy the original file"
            ) from None


def _dense_rows(m, where: Path) -> np.ndarray:
    """A pickled matrix (scipy sparse or ndarray) as a dense 2-D float32 array."""
    if sp.issparse(m):
        return np.asarray(m.toarray(), dtype=np.float32)
    arr = np.asarray(m)
    if arr.ndim != 2:
        raise DatasetError(f"expected a 2-D matrix in {where}, found shape {arr.shape}; re-copy the file")
    return arr.astype(np.float32)


def _labels(onehot: np.ndarray) -> np.ndarray:
    """One-hot int rows [R, C] -> int64 [R] class ids, -1 for all-zero rows."""
    y = onehot.argmax(axis=1).astype(np.int64)
    y[onehot.max(axis=1) <= 0] = -1
    return y


def load(arg: str, root: str | None, options: dict, name: str) -> Data:
    """Load ``planetoid:<arg>``; see the module docstring."""
    key = arg.lower()
    if key not in NAMES:
        raise DatasetError(
            f"expected a Planetoid name in {list(NAMES)}, found {arg!r}; use e.g. planetoid:cora"
        )
    normalize = options.get("normalize", "none")
    if normalize not in NORMALIZE:
        raise DatasetError(f"expected normalize to be one of {', '.join(NORMALIZE)} for planetoid:{arg}, found "
                           f"{normalize!r}; use e.g. planetoid:{key}?normalize=row")
    folder = find_folder(key, root)
    path = {f: folder / f"ind.{key}.{f}" for f in FILES}
    x, tx, allx = (_dense_rows(_unpickle(path[f]), path[f]) for f in ("x", "tx", "allx"))
    y_tr, ty, ally = (np.asarray(_unpickle(path[f])) for f in ("y", "ty", "ally"))
    graph = _unpickle(path["graph"])
    try:
        test_index = np.loadtxt(path["test.index"], dtype=np.int64, ndmin=1)
    except ValueError as exc:
        raise DatasetError(
            f"expected one integer node id per line in {path['test.index']}, found unparsable text "
            f"({exc}); re-copy the file"
        ) from None
    if not isinstance(graph, dict):
        raise DatasetError(
            f"expected a dict {{node: [neighbours]}} in {path['graph']}, found {type(graph).__name__}; "
            "re-copy the file"
        )

    num_feat = allx.shape[1]
    if tx.shape[1] != num_feat or tx.shape[0] != test_index.size or ty.shape[0] != test_index.size:
        raise DatasetError(
            f"expected tx/ty to have one row per line of {path['test.index']} ({test_index.size}) "
            f"and {num_feat} feature columns, found tx {tx.shape}, ty {ty.shape}; the files do not belong together"
        )
    if ally.shape[0] != allx.shape[0]:
        raise DatasetError(
            f"expected ally rows == allx rows, found {ally.shape[0]} vs {allx.shape[0]} in {folder}; "
            "the files do not belong together"
        )

    # Node count: len(graph), but never fewer than allx rows + the (gap-padded) test range.
    num_nodes = max(len(graph), allx.shape[0], int(test_index.max()) + 1)
    features = np.zeros((num_nodes, num_feat), dtype=np.float32)
    features[: allx.shape[0]] = allx
    features[test_index] = tx
    if normalize == "row":  # the reference code's utils.normalize: r_inv of 0 sums set to 0
        sums = features.sum(1, keepdims=True)
        features = np.divide(features, sums, out=np.zeros_like(features), where=sums > 0)
    y = np.full(num_nodes, -1, dtype=np.int64)
    y[: ally.shape[0]] = _labels(ally)
    y[test_index] = _labels(ty)

    keys = np.fromiter(graph.keys(), dtype=np.int64, count=len(graph))
    degs = np.fromiter(map(len, graph.values()), dtype=np.int64, count=len(graph))
    src = np.repeat(keys, degs)
    dst = np.fromiter(itertools.chain.from_iterable(graph.values()), dtype=np.int64, count=int(degs.sum()))
    check_edge_ids(src, dst, num_nodes, str(path["graph"]))
    edge_index = clean_edges(src, dst, num_nodes, undirected=True)

    n_train = y_tr.shape[0]
    train = np.zeros(num_nodes, dtype=bool)
    train[:n_train] = True
    val = np.zeros(num_nodes, dtype=bool)
    val[n_train : n_train + _VAL_SIZE] = True
    test = np.zeros(num_nodes, dtype=bool)
    test[test_index] = True
    data = make_data(
        x=features,
        y=y,
        edge_index=edge_index,
        train_mask=train,
        val_mask=val,
        test_mask=test,
        name=name,
        num_classes=int(ally.shape[1]),
        where=str(folder),
    )
    logger.info(
        "loaded %s from %s: %d nodes, %d edges, %d features, %d classes, %d unlabelled",
        name,
        folder,
        num_nodes,
        edge_index.shape[1],
        num_feat,
        data.num_classes,
        int((y < 0).sum()),
    )
    return data
