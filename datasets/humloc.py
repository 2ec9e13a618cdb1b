"""HumLoc: a human protein-protein interaction graph, multi-label, with edge features.

Name: ``humloc:PATH`` (a folder; a relative PATH is taken relative to ``root`` when given), or
plain ``humloc``: the folder ``humloc`` under ``root`` when given, else under ``$GNNSCALE_DATA``
when that folder exists, else ``../shared/data/humloc`` (relative to the working directory).

Files (MLGNC's ``data/HumanGo``; see ``shared/data/humloc/README.md``)::

    edge_list.csv   header row; prot1,prot2 (float-formatted 0-based node ids, e.g. 2746.0), then one
                    score column per interaction type (21 in HumLoc): the edge features
    features.csv    no header; N rows of node features (32 in HumLoc)
    labels.csv      no header; N rows of 0/1, one column per label (14 subcellular locations)
    split.pt        torch.save'd dict of int64 node-id tensors train_mask, val_mask, test_mask
                    (node indices despite the names; bool [N] masks are accepted too)

Result: ``x`` float32 [N, F]; ``y`` float32 [N, C] multi-hot, ``target_kind`` "multilabel",
``num_classes`` C; ``edge_index`` int64 [2, E] *as stored* (directed, self loops kept, in file
order) except exact duplicate ``(src, dst)`` rows, of which the first is kept (HumLoc has none:
18,496 edges, 530 self loops); ``edge_attr`` float32 [E, 21] aligned with ``edge_index``; masks
from ``split.pt`` (1675 / 187 / 1244).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

from gnnscale.datasets._data import make_data
from gnnscale.datasets._graph import check_edge_ids
from gnnscale.datasets._options import Option, data_folder
from gnnscale.datasets._splits import masks_from_indices
from gnnscale.datasets.inputs import HUMLOC_FILES, humloc_folder
from gnnscale.datasets.targets import attach_targets, dedupe_edges
from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)

OPTIONS: dict[str, Option] = {}
HELP = (
    "humloc:PATH | humloc\n"
    "    HumLoc protein graph (folder with edge_list.csv, features.csv, labels.csv, split.pt; plain\n"
    "    'humloc' = ROOT/humloc, $GNNSCALE_DATA/humloc or ../shared/data/humloc): 3,106 proteins,\n"
    "    32 features, 14 labels (multilabel: y float32 [N,14]), 18,496 directed edges as stored\n"
    "    (self loops kept, exact duplicates dropped) with edge_attr float32 [E,21]; split 1675/187/1244."
)

FILES = HUMLOC_FILES


def _read_csv(path: Path, header: bool) -> tuple[np.ndarray, list[str]]:
    import pandas as pd

    if not path.is_file():
        raise DatasetError(f"expected the file {path.name} in {path.parent}, found no such file; "
                           f"a HumLoc folder holds {', '.join(FILES)}")
    try:
        frame = pd.read_csv(path, header=0 if header else None)
    except (ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DatasetError(f"expected a CSV table in {path}, could not read it ({first}); restore the file") from None
    values = frame.to_numpy()
    if values.dtype.kind not in "iuf":
        raise DatasetError(f"expected numbers only in {path}, found non-numeric cells (dtype {values.dtype}); "
                           "restore the file")
    return values, [str(c) for c in frame.columns]


def _split(path: Path, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not path.is_file():
        raise DatasetError(f"expected the file {path.name} in {path.parent}, found no such file; "
                           f"a HumLoc folder holds {', '.join(FILES)}")
    try:
        raw = torch.load(path, weights_only=True)
    except Exception as exc:  # a corrupt or foreign pickle
        raise DatasetError(f"expected a torch.save'd dict of tensors in {path}, could not read it "
                           f"({type(exc).__name__}); restore the file") from None
    keys = ("train_mask", "val_mask", "test_mask")
    if not isinstance(raw, dict) or not all(k in raw for k in keys):
        found = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
        raise DatasetError(f"expected the keys {list(keys)} in {path}, found {found}; restore the file")
    parts = []
    for k in keys:
        t = torch.as_tensor(raw[k])
        if t.dtype == torch.bool:
            if t.shape != (n,):
                raise DatasetError(f"expected {k} as node ids or a bool [{n}] mask in {path}, found bool "
                                   f"{tuple(t.shape)}; restore the file")
            t = torch.nonzero(t).reshape(-1)
        parts.append(t.reshape(-1).numpy())
    train, val, test = masks_from_indices(n, *parts, where=str(path))
    overlap = int(((train & val) | (train & test) | (val & test)).sum())
    if overlap:
        raise DatasetError(f"expected disjoint train/val/test node sets in {path}, found {overlap} nodes in more "
                           "than one; fix the split")
    return train, val, test


def load(arg: str, root: str | None, options: dict, name: str) -> Data:
    """Load ``humloc:<arg>`` (or plain ``humloc`` when ``arg`` is empty); see the module docstring."""
    if arg:
        folder = data_folder(arg, root, "a HumLoc folder (edge_list.csv, features.csv, labels.csv, split.pt)",
                             "humloc")
    else:
        folder = humloc_folder(root)
    where = str(folder)
    x, _ = _read_csv(folder / "features.csv", header=False)
    n = x.shape[0]
    labels, _ = _read_csv(folder / "labels.csv", header=False)
    edges, columns = _read_csv(folder / "edge_list.csv", header=True)
    if edges.ndim != 2 or edges.shape[1] < 2:
        raise DatasetError(f"expected prot1,prot2 and score columns in {folder / 'edge_list.csv'}, found "
                           f"{edges.shape[1] if edges.ndim == 2 else 0} columns; restore the file")
    ends = edges[:, :2]
    if ends.size and not bool(np.all(ends == np.floor(ends))):
        row = int(np.flatnonzero(np.any(ends != np.floor(ends), axis=1))[0])
        raise DatasetError(f"expected whole-number node ids in the first two columns of {folder / 'edge_list.csv'}, "
                           f"found {ends[row].tolist()} in data row {row}; restore the file")
    src, dst = ends[:, 0].astype(np.int64), ends[:, 1].astype(np.int64)
    check_edge_ids(src, dst, n, str(folder / "edge_list.csv"))
    edge_index, edge_attr, counts = dedupe_edges(src, dst, n, edges[:, 2:].astype(np.float32))
    if counts["duplicates_dropped"]:
        logger.warning("%s: %d duplicate (prot1, prot2) rows dropped (the first of each kept)",
                       folder / "edge_list.csv", counts["duplicates_dropped"])
    train, val, test = _split(folder / "split.pt", n)
    data = make_data(x=x.astype(np.float32), y=np.zeros(n, dtype=np.int64), edge_index=edge_index,
                     train_mask=train, val_mask=val, test_mask=test, name=name, num_classes=1, where=where)
    if labels.ndim != 2 or labels.shape[0] != n:
        raise DatasetError(f"expected labels [{n}, C] (one row per row of features.csv) in {folder / 'labels.csv'}, "
                           f"found {labels.shape}; the files do not belong together")
    attach_targets(data, labels.astype(np.float32), kind="multilabel", where=where, edge_attr=edge_attr)
    logger.info(
        "loaded %s from %s: %d nodes, %d edges (%d self loops, %d duplicates dropped), %d features, "
        "%d edge features (%s), %d labels (%.3f per node)",
        name, folder, n, edge_index.shape[1], int((edge_index[0] == edge_index[1]).sum()),
        counts["duplicates_dropped"], x.shape[1], edge_attr.shape[1], ", ".join(columns[2:5]) + ", ...",
        data.num_classes, float(data.y.sum()) / max(n, 1),
    )
    return data
