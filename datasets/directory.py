"""A graph stored as plain ``.npy`` files in one folder.

Name: ``dir:PATH`` (a relative PATH is taken relative to ``root`` when given).

Folder format::

    PATH/
      edge_index.npy   integer [2, E] or [E, 2]; edge (u, v) = message u -> v; ids in 0..N-1
      x.npy            numeric [N, F] node features (stored as float32 after loading)
      y.npy            integer [N] (or [N, 1]) class ids 0..C-1; a negative id = unlabelled
      split.npz        optional; either bool masks   train_mask, val_mask, test_mask  [N]
                                or integer ids       train_idx,  val_idx,  test_idx   [k]

N is the number of rows of ``x.npy``. Edges are kept directed as given unless option
``undirected=true`` (then both directions are stored); duplicate edges and self loops
are always removed. Without ``split.npz`` the labelled nodes are split at random into
``train_frac`` (0.6) / ``val_frac`` (0.2) / the rest (test) with ``seed`` (0).
Unlabelled nodes are never in a mask. A square ``[2, 2]`` edge array is read as [2, E].

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
from torch_geometric.data import Data

from gnnscale.datasets._data import make_data
from gnnscale.datasets._graph import check_edge_ids, clean_edges
from gnnscale.datasets._options import Option, data_folder
from gnnscale.datasets._splits import masks_from_indices, random_split
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
    "    unlabelled) and optional split.npz (train_mask/val_mask/test_mask or train_idx/val_idx/\n"
    "    test_idx); without split.npz a seeded 60/20/20 random split. Options:"
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
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.shape != (n,) or not np.issubdtype(y.dtype, np.integer):
        raise DatasetError(
            f"expected integer labels [{n}] (one per row of x.npy) in {folder / 'y.npy'}, found "
            f"{y.dtype} {y.shape}; store class ids as integers, -1 for unlabelled nodes"
        )
    y = y.astype(np.int64)
    src, dst = _edges(raw_edges, folder / "edge_index.npy")
    check_edge_ids(src, dst, n, str(folder / "edge_index.npy"))
    edge_index = clean_edges(src, dst, n, undirected=options["undirected"])
    train, val, test = _split(folder, y, options)
    data = make_data(
        x=x, y=y, edge_index=edge_index, train_mask=train, val_mask=val, test_mask=test, name=name, where=str(folder)
    )
    logger.info(
        "loaded %s: %d nodes, %d edges, %d features, %d classes",
        name,
        n,
        edge_index.shape[1],
        x.shape[1],
        data.num_classes,
    )
    return data
