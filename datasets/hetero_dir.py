"""A typed (heterogeneous) graph stored as plain ``.npy`` files in one folder.

Name: ``hetero-dir:PATH`` (a relative PATH is taken relative to ``root`` when given).

Folder format (per-type ids everywhere: the nodes of type t are numbered 0..N_t-1)::

    PATH/
      meta.json                      {"target_type": "paper"}  (required)
                                     optional: "node_types": [...] (id order; default: sorted folder
                                     names), "edge_types": [[src, rel, dst], ...] (relation order;
                                     default: sorted folder names), "num_classes": C
      nodes/<type>/x.npy             numeric [N_t, F_t] features (optional: a type without it has none)
      nodes/<type>/num_nodes.txt     N_t as text (required when the type has no x.npy)
      nodes/<target>/y.npy           integer [N_t] class ids 0..C-1, negative = unlabelled
      nodes/<target>/split.npz       optional: bool train_mask/val_mask/test_mask [N_t] or integer
                                     train_idx/val_idx/test_idx (per-type ids)
      edges/<src>__<rel>__<dst>/edge_index.npy    integer [2, E] (or [E, 2]): row 0 source ids of
                                     type src, row 1 target ids of type dst

Every type in ``nodes/`` is a node type, every folder in ``edges/`` a relation (relation names
unique). Without ``split.npz`` the labelled target nodes are split at random (``train_frac``
0.6 / ``val_frac`` 0.2 / rest, ``seed`` 0). Duplicate edges and self loops (in relations
between nodes of one type) are removed; option ``undirected=true`` adds ``rev_<rel>`` for
each relation that has no reverse (:func:`gnnscale.datasets.typed.add_reverse`).

:func:`write_hetero_dir` writes a typed ``Data`` in this format (with ``num_nodes.txt`` for
every type, masks in ``split.npz`` and the type and relation order in ``meta.json``).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
from torch_geometric.data import Data

from gnnscale.datasets._options import Option, data_folder
from gnnscale.datasets.directory import _edges, _load_npy, _split
from gnnscale.datasets.relations import add_reverse, relation_edges
from gnnscale.datasets.typed import check_typed, make_typed_data
from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)

SEP = "__"
OPTIONS: dict[str, Option] = {
    "undirected": Option(bool, False, "add a reverse relation rev_<rel> for each relation without one"),
    "seed": Option(int, 0, "seed of the random split (used only without nodes/<target>/split.npz)"),
    "train_frac": Option(float, 0.6, "train fraction of the random split"),
    "val_frac": Option(float, 0.2, "val fraction of the random split (test = the rest)"),
}
HELP = (
    "hetero-dir:PATH\n"
    "    A typed graph folder: meta.json {\"target_type\": T}, nodes/<type>/x.npy [N_t,F_t] (or\n"
    "    num_nodes.txt when the type has no features), nodes/<T>/y.npy [N_T] (negative = unlabelled),\n"
    "    optional nodes/<T>/split.npz, edges/<src>__<rel>__<dst>/edge_index.npy int [2,E] in per-type\n"
    "    ids. Without split.npz a seeded 60/20/20 split of the labelled target nodes. Options:"
)


def _meta(folder: Path) -> dict:
    path = folder / "meta.json"
    if not path.is_file():
        raise DatasetError(f"expected {path} naming the target type, found no such file; write "
                           '{"target_type": "<type>"} there (see the hetero-dir: format in `gnnscale datasets`)')
    try:
        meta = json.loads(path.read_text())
    except (ValueError, OSError) as exc:
        raise DatasetError(f"expected a JSON object in {path}, could not read it ({exc}); fix the file") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("target_type"), str):
        raise DatasetError(f"expected a JSON object with a string \"target_type\" in {path}, found {str(meta)[:200]}; "
                           'write {"target_type": "<type>"}')
    return meta


def _subfolders(path: Path, what: str) -> list[str]:
    if not path.is_dir():
        raise DatasetError(f"expected a folder {path} with one sub-folder per {what}, found "
                           f"{'a file' if path.exists() else 'nothing'}; see the hetero-dir: format in `gnnscale datasets`")
    return sorted(p.name for p in path.iterdir() if p.is_dir())


def _count(folder: Path, t: str) -> tuple[int, np.ndarray | None]:
    d = folder / "nodes" / t
    x = _load_npy(d / "x.npy", mmap=True) if (d / "x.npy").is_file() else None
    n_file = d / "num_nodes.txt"
    n = None
    if n_file.is_file():
        text = n_file.read_text().strip()
        try:
            n = int(text)
        except ValueError:
            raise DatasetError(f"expected one integer (the node count) in {n_file}, found {text[:50]!r}; "
                               "write the number of nodes of the type") from None
    if x is not None:
        if x.ndim != 2:
            raise DatasetError(f"expected features [N_t, F] in {d / 'x.npy'}, found shape {x.shape}; "
                               "store a 2-D array (reshape(-1, 1) for one feature)")
        if n is not None and n != x.shape[0]:
            raise DatasetError(f"expected {n} feature rows (num_nodes.txt) in {d / 'x.npy'}, found {x.shape[0]}; "
                               "make them agree or delete num_nodes.txt")
        n = x.shape[0]
    if n is None:
        raise DatasetError(f"expected x.npy or num_nodes.txt in {d}, found neither; write the features or the "
                           "node count of type " + repr(t))
    return n, x


def load(arg: str, root: str | None, options: dict, name: str) -> Data:
    """Load ``hetero-dir:<arg>``; see the module docstring."""
    folder = data_folder(arg, root, "a typed graph folder (meta.json, nodes/, edges/)", "hetero-dir")
    meta = _meta(folder)
    found_types = _subfolders(folder / "nodes", "node type")
    node_types = meta.get("node_types") or found_types
    if sorted(node_types) != found_types:
        raise DatasetError(f"expected the node types of meta.json {node_types} as the folders of {folder / 'nodes'}, "
                           f"found {found_types}; make them agree")
    found_rel = _subfolders(folder / "edges", "relation")
    if meta.get("edge_types") is not None:
        edge_types = [tuple(et) for et in meta["edge_types"]]
        for et in edge_types:
            if len(et) != 3 or SEP.join(et) not in found_rel:
                raise DatasetError(f"expected a folder {folder / 'edges' / SEP.join(map(str, et))} for relation {et} of "
                                   "meta.json, found none; write its edge_index.npy or fix meta.json")
    else:
        edge_types = []
        for sub in found_rel:  # loop over relation folders
            parts = sub.split(SEP)
            if len(parts) != 3 or not all(parts):
                raise DatasetError(f"expected relation folders named <src>__<rel>__<dst> in {folder / 'edges'}, found "
                                   f"{sub!r}; rename it (or list edge_types in meta.json)")
            edge_types.append(tuple(parts))
    counts, x_dict = {}, {}
    for t in node_types:  # loop over node types
        counts[t], x = _count(folder, t)
        if x is not None:
            x_dict[t] = x
    edges = []
    for et in edge_types:  # loop over relations
        path = folder / "edges" / SEP.join(et) / "edge_index.npy"
        src, dst = _edges(_load_npy(path), path)
        edges.append((et, np.stack([src, dst])))
    target = meta["target_type"]
    if target not in counts:
        raise DatasetError(f"expected the target type of {folder / 'meta.json'} among the node types {node_types}, "
                           f"found an unknown target type {target!r}; fix meta.json")
    y_path = folder / "nodes" / target / "y.npy"
    if not y_path.is_file():
        raise DatasetError(f"expected labels for the target type {target!r} in {y_path}, found no such file; "
                           "write np.save(y.npy, class ids) (-1 = unlabelled)")
    y = _load_npy(y_path)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.shape != (counts[target],) or not np.issubdtype(y.dtype, np.integer):
        raise DatasetError(f"expected integer labels [{counts[target]}] (one per {target!r} node) in {y_path}, found "
                           f"{y.dtype} {y.shape}; store class ids as integers, -1 for unlabelled nodes")
    y = y.astype(np.int64)
    train, val, test = _split(folder / "nodes" / target, y, options)
    data = make_typed_data(
        num_nodes=counts, edges=edges, target_type=target, y=y, x_dict=x_dict, train=train, val=val, test=test,
        name=name, num_classes=meta.get("num_classes"), drop_self_loops=True, where=str(folder),
    )
    if options["undirected"]:
        data = add_reverse(data)
    logger.info("loaded %s: %d nodes of %d types, %d edges of %d relations, target %s (%d classes)", name,
                data.num_nodes, len(data.node_types), data.edge_index.shape[1], len(data.edge_types), target,
                data.num_classes)
    return data


def write_hetero_dir(data: Data, path: str | os.PathLike) -> str:
    """Write a typed ``Data`` as a ``hetero-dir:`` folder (created; existing files are overwritten).

    Writes ``meta.json`` (target type, node and relation order, num_classes, name),
    ``nodes/<type>/num_nodes.txt`` for every type, ``x.npy`` (float32) for the types with
    features, ``y.npy`` (int64) and ``split.npz`` (bool masks) for the target type, and
    ``edges/<src>__<rel>__<dst>/edge_index.npy`` (int64 [2, E], per-type ids) per relation.

    Returns:
        The folder as a string; ``load_dataset("hetero-dir:" + folder)`` reads it back.
    """
    check_typed(data, getattr(data, "name", "typed graph"), check_duplicates=False)
    folder = Path(path)
    for t in data.node_types:
        if SEP in t or "/" in t or os.sep in t:
            raise DatasetError(f"expected node type names without '{SEP}' or '/' to write a hetero-dir folder, found "
                               f"{t!r}; rename the type")
    for et in data.edge_types:
        if any(SEP in s or "/" in s or os.sep in s for s in et):
            raise DatasetError(f"expected relation names without '{SEP}' or '/' to write a hetero-dir folder, found "
                               f"{et!r}; rename the relation")
    folder.mkdir(parents=True, exist_ok=True)
    meta = {
        "target_type": data.target_type,
        "node_types": list(data.node_types),
        "edge_types": [list(et) for et in data.edge_types],
        "num_classes": int(data.num_classes),
        "name": data.name,
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    for t, name in enumerate(data.node_types):  # loop over node types
        d = folder / "nodes" / name
        d.mkdir(parents=True, exist_ok=True)
        lo, hi = int(data.type_ptr[t]), int(data.type_ptr[t + 1])
        (d / "num_nodes.txt").write_text(f"{hi - lo}\n")
        if name in data.x_dict:
            np.save(d / "x.npy", data.x_dict[name].numpy().astype(np.float32, copy=False))
        if name == data.target_type:
            np.save(d / "y.npy", data.y[lo:hi].numpy().astype(np.int64))
            np.savez(d / "split.npz", **{k: data[k][lo:hi].numpy() for k in ("train_mask", "val_mask", "test_mask")})
    for et, ei in relation_edges(data).items():  # loop over relations
        d = folder / "edges" / SEP.join(et)
        d.mkdir(parents=True, exist_ok=True)
        np.save(d / "edge_index.npy", ei.numpy().astype(np.int64))
    return str(folder)
