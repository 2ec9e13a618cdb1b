"""A graph stored as plain ``.npy`` files in one folder.

Name: ``dir:PATH`` (a relative PATH is taken relative to ``root`` when given).

Folder format::

    PATH/
      edge_index.npy   integer [2, E] or [E, 2]; edge (u, v) = message u -> v; ids in 0..N-1
      x.npy            numeric [N, F] node features (stored as float32 after loading)
      y.npy            integer [N] (or [N, 1]) class ids 0..C-1; a negative id = unlabelled
                       (other targets, docs/targets_and_edge_features.md: an integer or bool [N, C]
                       multi-hot of 0/1 -> multilabel, a row with a negative value = unlabelled;
                       float [N, D] -> multilabel when its labelled rows are all 0/1, else
                       regression; float [N] -> regression (whole numbers only are refused as
                       ambiguous: store class ids as integers, real targets that happen to be whole
                       as [N, 1]); for float y a row with a NaN = unlabelled)
      edge_attr.npy    optional; float [E, De] edge features, row i = edge i of edge_index.npy
                       (stored as float32; they follow their edges through the cleaning below, a
                       duplicate keeps its first row, a reverse edge its edge's row)
      edge_time.npy    optional; int (or whole float) [E] the time of each edge: a temporal graph
                       (docs/temporal.md): every edge is then kept as an event (repeats and self
                       loops too), with its time; undirected=true stores each event both ways
      split.npz        optional; either bool masks   train_mask, val_mask, test_mask  [N]
                                or integer ids       train_idx,  val_idx,  test_idx   [k]

N is the number of rows of ``x.npy``. Edges are kept directed as given unless option
``undirected=true`` (then both directions are stored); duplicate edges and self loops
are always removed. Without ``split.npz`` the labelled nodes are split at random into
``train_frac`` (0.6) / ``val_frac`` (0.2) / the rest (test) with ``seed`` (0).
Unlabelled class / binary nodes are dropped from the split's masks; unlabelled rows of other
targets put in a mask by ``split.npz`` are an error (:func:`~gnnscale.datasets.targets.check_targets`).
A square ``[2, 2]`` edge array is read as [2, E].

Writing such a folder from numpy::

    np.save("g/edge_index.npy", edge_index)      # int64 [2, E]
    np.save("g/x.npy", x.astype(np.float32))     # [N, F]
    np.save("g/y.npy", y)                         # int64 [N]
    np.savez("g/split.npz", train_mask=tr, val_mask=va, test_mask=te)   # optional
"""

from __future__ import annotations

import logging
import zipfile
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

from gnnscale.datasets._data import make_data
from gnnscale.datasets._graph import check_edge_ids, clean_edges
from gnnscale.datasets._options import Option, data_folder
from gnnscale.datasets._splits import masks_from_indices, random_split
from gnnscale.datasets.targets import attach_targets, check_edge_attr, dedupe_edges
from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)

OPTIONS: dict[str, Option] = {
    "undirected": Option(bool, False, "store every edge in both directions"),
    "seed": Option(int, 0, "seed of the random split (used only without split.npz)"),
    "train_frac": Option(float, 0.6, "train fraction of the random split"),
    "val_frac": Option(float, 0.2, "val fraction of the random split (test = the rest)"),
}
HELP = (
    "dir:PATH\n"
    "    A folder with edge_index.npy (int [2,E] or [E,2]), x.npy [N,F], y.npy [N] (negative =\n"
    "    unlabelled; or a multi-hot int/float [N,C] -> multilabel, float [N,D] -> regression), optional\n"
    "    edge_attr.npy (float [E,De], row i = edge i), edge_time.npy (int [E]: a temporal graph,\n"
    "    docs/temporal.md) and split.npz (train_mask/val_mask/test_mask or\n"
    "    train_idx/val_idx/test_idx); without split.npz a seeded 60/20/20 random split. Options:"
)


def _load_npy(path: Path, mmap: bool = False) -> np.ndarray:
    """The array in ``path``; with ``mmap``, mapped copy-on-write when it is stored as float32
    (used as is: its pages stay the file's, so a graph's features need not fit in memory)."""
    if not path.is_file():
        raise DatasetError(
            f"expected the file {path.name} in {path.parent}, found no such file; "
            f"write it with np.save({str(path)!r}, array) (see the dir: format in --help)"
        )
    try:
        arr = np.load(path, mmap_mode="c" if mmap else None, allow_pickle=False)
        if mmap and arr.dtype != np.float32:
            arr = np.asarray(arr)  # converted on loading anyway: read it into memory
        return arr
    except (ValueError, OSError) as exc:
        raise DatasetError(
            f"expected a NumPy .npy array in {path}, could not read it ({exc}); write it with np.save"
        ) from None


def _edges(raw: np.ndarray, where: Path) -> tuple[np.ndarray, np.ndarray]:
    if raw.ndim != 2 or 2 not in raw.shape or not np.issubdtype(raw.dtype, np.integer):
        raise DatasetError(
            f"expected an integer array [2, E] or [E, 2] in {where}, found {raw.dtype} {raw.shape}; "
            "store source ids in row 0 and target ids in row 1 (np.int64)"
        )
    if raw.shape[0] == 2:
        return raw[0], raw[1]
    return raw[:, 0], raw[:, 1]


def _split(folder: Path, y: np.ndarray, options: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = y.shape[0]
    path = folder / "split.npz"
    if not path.exists():
        return random_split(y, options["train_frac"], options["val_frac"], options["seed"])
    try:
        z = np.load(path, allow_pickle=False)
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise DatasetError(f"expected a NumPy .npz archive at {path}, could not read it ({exc}); write it with np.savez") from None
    with z:
        keys = set(z.files)
        mask_keys = ("train_mask", "val_mask", "test_mask")
        idx_keys = ("train_idx", "val_idx", "test_idx")
        if set(mask_keys) <= keys:
            masks = []
            for k in mask_keys:
                m = np.asarray(z[k])
                if m.shape != (n,) or m.dtype != np.bool_:
                    raise DatasetError(
                        f"expected {k} to be bool [{n}] in {path}, found {m.dtype} {m.shape}; "
                        f"store one bool per node (N = rows of x.npy = {n})"
                    )
                masks.append(m)
            train, val, test = masks
        elif set(idx_keys) <= keys:
            train, val, test = masks_from_indices(n, *(np.asarray(z[k]).reshape(-1) for k in idx_keys), where=str(path))
        else:
            raise DatasetError(
                f"expected {list(mask_keys)} or {list(idx_keys)} in {path}, found {sorted(keys)}; "
                "rename the arrays or delete split.npz to get a random split"
            )
    overlap = int(((train & val) | (train & test) | (val & test)).sum())
    if overlap:
        raise DatasetError(
            f"expected disjoint train/val/test sets in {path}, found {overlap} nodes in more than one; "
            "fix the split"
        )
    return train, val, test


def _targets(y: np.ndarray, n: int, path: Path) -> tuple[np.ndarray, str, np.ndarray]:
    """``(y, kind, labelled bool [N])`` of a ``y.npy`` (see the module docstring)."""
    if y.ndim == 2 and y.shape[1] == 1 and y.dtype.kind in "biu":
        y = y[:, 0]
    whole_1d = False
    if y.ndim == 1 and y.dtype.kind == "f" and y.shape == (n,):
        finite = y[np.isfinite(y)]
        whole_1d = bool(np.all(finite == np.round(finite)))
    if y.ndim not in (1, 2) or y.shape[0] != n or y.dtype.kind not in "biuf" or whole_1d or 0 in y.shape[1:]:
        hint = (" (whole numbers stored as floats are taken for class ids stored in the wrong dtype: store them "
                "as integers, or real-valued targets as float [N, 1])" if whole_1d else "")
        raise DatasetError(
            f"expected integer labels [{n}] (one per row of x.npy) in {path}, found {y.dtype} {y.shape}{hint}; "
            "store class ids as integers, -1 for unlabelled nodes (or a multi-hot [N, C] of 0/1, or float "
            "targets [N, D]: docs/targets_and_edge_features.md)"
        )
    if y.dtype.kind in "biu":
        if y.ndim == 1:
            return y.astype(np.int64), "class", y >= 0
        return y.astype(np.float32), "multilabel", ~np.any(y < 0, axis=1)
    y = y.astype(np.float32)
    if y.ndim == 1:
        return y, "regression", ~np.isnan(y)
    labelled = ~np.any(np.isnan(y), axis=1)
    lab = y[labelled]
    kind = "multilabel" if bool(np.all((lab == 0) | (lab == 1))) else "regression"
    return y, kind, labelled


def _edge_attr(folder: Path, num_edges: int) -> np.ndarray | None:
    path = folder / "edge_attr.npy"
    if not path.exists():
        return None
    attr = _load_npy(path)
    check_edge_attr(attr, num_edges, str(path))
    return attr.astype(np.float32, copy=False)


def load(arg: str, root: str | None, options: dict, name: str) -> Data:
    """Load ``dir:<arg>``; see the module docstring."""
    folder = data_folder(arg, root, "a folder with edge_index.npy, x.npy, y.npy", "dir")
    x = _load_npy(folder / "x.npy", mmap=True)
    y = _load_npy(folder / "y.npy")
    raw_edges = _load_npy(folder / "edge_index.npy")
    if x.ndim != 2 or not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
        raise DatasetError(
            f"expected numeric features [N, F] in {folder / 'x.npy'}, found {x.dtype} {x.shape}; "
            "store a 2-D float array (reshape(-1, 1) for a single feature)"
        )
    n = x.shape[0]
    y, kind, labelled = _targets(y, n, folder / "y.npy")
    src, dst = _edges(raw_edges, folder / "edge_index.npy")
    check_edge_ids(src, dst, n, str(folder / "edge_index.npy"))
    attr = _edge_attr(folder, src.shape[0])
    edge_time = None
    if (folder / "edge_time.npy").exists():  # a temporal graph: every event kept, with its time
        from gnnscale.datasets.temporal import check_times

        edge_time = check_times(_load_npy(folder / "edge_time.npy"), src.shape[0], str(folder / "edge_time.npy"))
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        if options["undirected"]:
            src, dst, edge_time = np.concatenate([src, dst]), np.concatenate([dst, src]), edge_time.repeat(2)
            attr = None if attr is None else np.concatenate([attr, attr])
        edge_index = torch.from_numpy(np.stack([src, dst]))
    elif attr is None:
        edge_index = clean_edges(src, dst, n, undirected=options["undirected"])
    else:  # the same edges as clean_edges, with their rows of edge_attr
        edge_index, attr, counts = dedupe_edges(src, dst, n, attr, undirected=options["undirected"],
                                                drop_self_loops=True, sort=True)
        logger.debug("%s: edges with features %s", folder, counts)
    train, val, test = _split(folder, np.where(labelled, 0, -1), options)
    data = make_data(
        x=x, y=y if kind == "class" else np.zeros(n, dtype=np.int64), edge_index=edge_index, train_mask=train,
        val_mask=val, test_mask=test, name=name, where=str(folder), num_classes=None if kind == "class" else 1,
    )
    if kind != "class" or attr is not None:
        attach_targets(data, data.y if kind == "class" else y, kind=kind, where=str(folder),
                       num_classes=data.num_classes if kind == "class" else None, edge_attr=attr)
    if edge_time is not None:
        data.edge_time = edge_time
    logger.info(
        "loaded %s: %d nodes, %d edges, %d features, %s targets (%d outputs), %d edge features",
        name,
        n,
        edge_index.shape[1],
        x.shape[1],
        kind,
        data.num_classes,
        0 if attr is None else attr.shape[1],
    )
    return data
