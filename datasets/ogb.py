"""OGB node-property-prediction datasets (``ogbn-*``) through ``ogb.nodeproppred``.

Name: any single-task ``ogbn-*`` of ogb's master.csv: homogeneous ``ogbn-arxiv``,
``ogbn-products``, ``ogbn-papers100M``, and heterogeneous ``ogbn-mag`` (loaded as a typed
graph, below); and the multi-task binary ``ogbn-proteins`` (multilabel, below). Other multi-task
datasets are refused with an explanation. ``root`` (default
``$GNNSCALE_DATA``, else ``./data``) is the OGB root: the dataset lives in
``ROOT/<name with - replaced by _>/``.

Offline use: files already there are used. They are checked *before* ogb is called, so
ogb never reaches its interactive prompts: a folder that exists but misses files raises
:class:`~gnnscale.errors.DatasetError` naming the folder and the missing files; a
folder that does not exist is downloaded by ogb (option ``download``, default true) after
a reachability probe of the URL with a timeout (``download_timeout`` seconds), and a
failed probe raises DatasetError naming the folder and the files expected. While ogb runs,
``input()`` inside ogb answers "y" only to ogb's "This will download N GB" question (the
caller asked for the dataset) and raises DatasetError for any other question; ogb's
``exit()`` becomes a DatasetError too.

ogb caches the parsed raw files in ``processed/data_processed`` (a protocol-4 pickle of
numpy arrays that ``torch.load(weights_only=True)`` cannot read); ogb's own loads of that
file and of ``split/<split>/split_dict.pt`` use ``weights_only=False``, as PyG does for
files of this kind. These files are written by ogb in the user's data folder; do not
put files from untrusted sources there.

Conversion: ``x = node_feat`` as float32; labels ``[N, 1]`` squeezed to int64 ``[N]``
with NaN (papers100M's unlabelled nodes) -> -1; masks from ``get_idx_split()``
(train/valid/test); edges symmetrized (option ``undirected``, default true; arxiv and
papers100M are stored directed), duplicates and self loops removed.

Multi-task binary datasets (master.csv ``task type`` "binary classification" with several
tasks: ogbn-proteins, 112 tasks, ROC-AUC) load as multilabel targets
(docs/targets_and_edge_features.md): ``y`` float32 [N, T] of 0/1 (NaN labels would be an error on
split nodes), ``target_kind`` "multilabel", ``num_classes`` T; ``x`` float32 [N, 0] when the
dataset has no node features (proteins); ``edge_attr`` float32 [E, De] (proteins: 8) aligned with
``edge_index``. The edges are ogb's ``edge_index`` as ogb gives it: ogb reads each stored edge once
and, for ``add_inverse_edge`` datasets (proteins), inserts its reverse right after it with the same
features, so both directions are there and option ``undirected`` is not needed (not used); self
loops are kept and exact duplicate ``(src, dst)`` pairs are dropped keeping the first (its
features); the counts are logged. Additional node arrays of master.csv (proteins:
``node_species``) are kept as ``data.<name>`` int64 [N] (or [N, k]). Masks: ogb's split
(proteins: by species).

Heterogeneous datasets (master.csv ``is hetero``; ogbn-mag): ogb gives ``edge_index_dict``
``{(src, rel, dst): [2, E]}`` in per-type ids, ``num_nodes_dict``, ``node_feat_dict`` (the types
with features), labels ``{type: [N_t, 1]}`` and the split ``{train|valid|test: {type: ids}}``.
They become the typed ``Data`` of docs/typed_graphs.md section 1
(:func:`gnnscale.datasets.typed.make_typed_data`): node types in ogb's order (sorted by name:
author, field_of_study, institution, paper for mag), relations in ogb's order, target type =
the labelled type (paper), features float32 per type, duplicates and self loops removed; with
``undirected`` (default true) a reverse relation ``rev_<rel>`` is added for each relation
(:func:`gnnscale.datasets.typed.add_reverse`; ogbn-mag: 4 -> 8 relations).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
from torch_geometric.data import Data

from gnnscale.datasets._data import make_data
from gnnscale.datasets._graph import check_edge_ids, clean_edges
from gnnscale.datasets._options import Option
from gnnscale.datasets.inputs import ogb_root
from gnnscale.datasets.relations import add_reverse
from gnnscale.datasets.targets import attach_targets, check_edge_attr, dedupe_edges
from gnnscale.datasets.typed import make_typed_data
from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)

OPTIONS: dict[str, Option] = {
    "download": Option(bool, True, "download through ogb when the dataset folder does not exist"),
    "download_timeout": Option(float, 10.0, "seconds to wait for the download server before giving up"),
    "undirected": Option(bool, True, "store every edge in both directions (typed: add rev_<rel> relations)"),
}
HELP = (
    "ogbn-arxiv | ogbn-products | ogbn-papers100M | ogbn-mag | any single-task ogbn-*\n"
    "    OGB node property prediction via ogb.nodeproppred (pip install ogb); root = OGB\n"
    "    root (default $GNNSCALE_DATA or ./data), dataset folder ROOT/ogbn_<name>/; files already\n"
    "    there are used offline. Symmetrized; NaN labels -> -1; OGB split. Heterogeneous ones\n"
    "    (ogbn-mag) load as typed graphs: target = the labelled type (paper), reverse relations\n"
    "    rev_<rel> added when undirected. ogbn-proteins: multilabel y float32 [N,112], x [N,0],\n"
    "    edge_attr [E,8] (both directions as ogb gives them), node_species, species split. Options:"
)


def default_root() -> str:
    """``$GNNSCALE_DATA`` if set, else ``./data``."""
    return ogb_root(None)


def _import_ogb():
    """Import ``ogb.nodeproppred`` without ogb's background PyPI version check.

    ogb's ``__init__`` starts a (non-daemon) thread that asks PyPI for the latest version
    when the ``outdated`` package is installed; offline that is a network call at import
    and, with a hanging DNS, a hang at exit. Hiding ``outdated`` during the import skips it.
    """
    hide = "outdated" not in sys.modules and "ogb" not in sys.modules
    if hide:
        sys.modules["outdated"] = None  # type: ignore[assignment]  # makes `import outdated` fail
    try:
        import ogb.nodeproppred as nodeproppred
        import ogb.nodeproppred.dataset as ogb_dataset
        import ogb.utils.url as ogb_url
    except ImportError as exc:
        raise DatasetError(
            f"expected the 'ogb' package for dataset names ogbn-*, found it is not importable ({exc}); "
            "install it with: pip install ogb (from a checkout: pip install -e '.[ogb]')"
        ) from None
    finally:
        if hide:
            sys.modules.pop("outdated", None)
    return nodeproppred, ogb_dataset, ogb_url


def _master(nodeproppred) -> dict[str, dict[str, str]]:
    import pandas as pd

    path = os.path.join(os.path.dirname(nodeproppred.__file__), "master.csv")
    return pd.read_csv(path, index_col=0, keep_default_na=False).to_dict()


def _meta(name: str, master: dict[str, dict[str, str]]) -> tuple[str, dict[str, str]]:
    lookup = {k.lower(): k for k in master}
    key = lookup.get(name.lower())
    if key is None:
        raise DatasetError(
            f"expected an OGB node-property dataset name in {sorted(master)}, found {name!r}; "
            "fix the spelling"
        )
    meta = master[key]
    if not (_is_multilabel(meta) or (int(meta["num tasks"]) == 1 and "multiclass" in meta["task type"])):
        raise DatasetError(
            f"expected a single-label multiclass or a multi-task binary ogbn dataset, found {key} with "
            f"{meta['num tasks']} tasks ({meta['task type']}); it is not supported, use ogbn-arxiv, "
            "ogbn-products, ogbn-papers100M, ogbn-mag or ogbn-proteins"
        )
    return key, meta


def _is_multilabel(meta: dict[str, str]) -> bool:
    """Multi-task binary classification (ogbn-proteins): multilabel targets."""
    return meta["task type"] == "binary classification" and meta["is hetero"] != "True"


def expected_files(meta: dict[str, str]) -> tuple[list[str], list[str], list[str]]:
    """The files ogb needs, relative to the dataset folder.

    Returns ``(always, raw, split)``: ``always`` = the release marker; ``raw`` = the raw
    graph files (not needed when ``processed/data_processed`` exists); ``split`` = the split
    files (``split/<split>/split_dict.pt`` replaces them).
    """
    always = [f"RELEASE_v{meta['version']}.txt"]
    if meta["is hetero"] == "True":  # the relation and per-type files are listed inside these
        if meta["binary"] == "True":
            raw = ["raw/num_nodes_dict.npz", "raw/num_edges_dict.npz", "raw/edge_index_dict.npz", "raw/node-label.npz"]
        else:
            raw = ["raw/num-node-dict.csv.gz", "raw/triplet-type-list.csv.gz", "raw/nodetype-has-label.csv.gz"]
        return always, raw, [f"split/{meta['split']}/nodetype-has-split.csv.gz"]
    if meta["binary"] == "True":
        raw = ["raw/data.npz", "raw/node-label.npz"]
    else:
        raw = ["raw/edge.csv.gz"]
        if meta["has_node_attr"] == "True":
            raw.append("raw/node-feat.csv.gz")
        if meta.get("has_edge_attr") == "True":
            raw.append("raw/edge-feat.csv.gz")
        raw += ["raw/node-label.csv.gz", "raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz"]
        if meta["additional node files"] != "None":
            raw += [f"raw/{f}.csv.gz" for f in meta["additional node files"].split(",")]
    split = [f"split/{meta['split']}/{p}.csv.gz" for p in ("train", "valid", "test")]
    return always, raw, split


def _missing(folder: Path, meta: dict[str, str]) -> list[str]:
    """Files of ``expected_files`` absent from ``folder`` (alternatives taken into account)."""
    always, raw, split = expected_files(meta)
    missing = [f for f in always if not (folder / f).is_file()]
    if not (folder / "processed" / "data_processed").is_file():
        # ogb renames proteins' older raw/species.csv.gz to raw/node_species.csv.gz itself
        missing += [f for f in raw if not (folder / f).is_file()
                    and not (f == "raw/node_species.csv.gz" and (folder / "raw" / "species.csv.gz").is_file())]
    if not (folder / "split" / meta["split"] / "split_dict.pt").is_file():
        missing += [f for f in split if not (folder / f).is_file()]
    return missing


def _describe_expected(folder: Path, meta: dict[str, str]) -> str:
    always, raw, split = expected_files(meta)
    hetero = (
        " (heterogeneous layout: also raw/relations/<src>___<rel>___<dst>/edge.csv.gz and num-edge-list.csv.gz per "
        "relation, raw/node-feat/<type>/node-feat.csv.gz, raw/node-label/<type>/node-label.csv.gz, "
        f"split/{meta['split']}/<type>/train|valid|test.csv.gz)"
        if meta["is hetero"] == "True" and meta["binary"] != "True" else ""
    )
    return (
        f"{folder}/ should hold {', '.join(always + raw + split)}{hetero} (or processed/data_processed "
        "instead of the raw/ files)"
    )


def _has_data(folder: Path) -> bool:
    return folder.is_dir() and any(folder.iterdir())


def _probe(url: str, timeout: float) -> None:
    request = urllib.request.Request(url, method="HEAD")
    with urllib.request.urlopen(request, timeout=timeout):
        pass


class _TorchForOgb:
    """Stands in for the ``torch`` module inside ogb's dataset module: ``load`` reads ogb's
    own numpy-pickle caches (see the module docstring); everything else is torch."""

    def __getattr__(self, attr: str) -> Any:
        return getattr(torch, attr)

    @staticmethod
    def load(path, *args, **kwargs):
        kwargs["weights_only"] = False
        return torch.load(path, *args, **kwargs)


@contextlib.contextmanager
def _guarded(ogb_dataset, ogb_url, name: str, folder: Path, allow_download: bool) -> Iterator[io.StringIO]:
    """Run ogb with its prompts, ``exit()``, ``torch.load`` and prints under control."""

    def _input(prompt: str = "") -> str:
        if prompt.startswith("This will download") and allow_download:
            logger.warning("ogb: %s -> yes (download requested by loading %s)", prompt.strip(), name)
            return "y"
        raise DatasetError(
            f"expected ogb to load {name} from {folder} without questions, found it asking "
            f"{prompt.strip()!r} (stdin is not used); check the files in {folder} or remove the "
            "folder to download it again"
        )

    def _exit(code: Any = None) -> None:
        raise DatasetError(
            f"expected ogb to load {name} into {folder}, found it stopped (exit({code!r})); "
            "place the dataset files there by hand"
        )

    patched = [(ogb_dataset, "input", _input), (ogb_url, "input", _input), (ogb_dataset, "exit", _exit),
               (ogb_dataset, "torch", _TorchForOgb())]
    saved = [(mod, attr, mod.__dict__.get(attr, _MISSING)) for mod, attr, _ in patched]
    for mod, attr, value in patched:
        setattr(mod, attr, value)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            yield out
    finally:
        for mod, attr, value in saved:
            if value is _MISSING:
                delattr(mod, attr)
            else:
                setattr(mod, attr, value)
        if out.getvalue().strip():
            logger.debug("ogb output:\n%s", out.getvalue().strip())


_MISSING = object()



def ready_folder(key: str, root: Path, folder: Path, meta: dict, options: dict, missing, expected: str) -> None:
    """Make ``folder`` ready for ogb before it is called (ogbn-* and ogbl-* alike): files already
    there must be complete (``missing()``: the names that are not; ``expected``: what the folder
    should hold, for the message), else a download must be allowed and reachable; an empty
    folder is removed (ogb would ask whether to "update" it). Raises DatasetError (one line)."""
    if _has_data(folder):
        missing = missing()
        if missing:
            raise DatasetError(
                f"expected a complete {key} dataset in {folder}/, found these files missing: "
                f"{', '.join(missing)}; {expected}. Copy the missing files "
                f"(the RELEASE file marks the ogb data version; an empty file is enough if the data "
                f"is version {meta['version']}) or delete the folder to download it again"
            )
        (folder / "processed").mkdir(exist_ok=True)  # ogb saves its cache there
    else:
        reason = "download=false"
        if options["download"]:
            try:
                _probe(meta["url"], options["download_timeout"])
                reason = ""
            except Exception as exc:  # no network, DNS failure, timeout, HTTP error
                reason = f"the download of {meta['url']} failed ({type(exc).__name__}: {exc})"
        if reason:
            if (root / "raw").is_dir() or root.name == folder.name:
                reason += f"; note that {root} looks like a dataset folder itself: root must be its parent"
            raise DatasetError(
                f"expected the {key} dataset in {folder}/, found no files there and {reason}; "
                f"{expected}. Download {meta['url']} on a machine with "
                f"network access and unzip it into {root}/, renaming its top folder {meta['download_name']}/ to "
                f"{folder.name}/, "
                "or give the OGB root that holds it with --root DIR (root= in Python; or set $GNNSCALE_DATA)"
            )
        if folder.is_dir():
            folder.rmdir()  # empty: ogb would otherwise ask whether to "update" it
        logger.info("downloading %s into %s through ogb", key, root)


def _open_dataset(name: str, root: Path, options: dict):
    nodeproppred, ogb_dataset, ogb_url = _import_ogb()
    key, meta = _meta(name, _master(nodeproppred))
    folder = root / "_".join(key.split("-"))
    ready_folder(key, root, folder, meta, options, lambda: _missing(folder, meta), _describe_expected(folder, meta))
    with _guarded(ogb_dataset, ogb_url, key, folder, options["download"]):
        try:
            dataset = nodeproppred.NodePropPredDataset(name=key, root=str(root))
            graph, labels = dataset[0]
            split = dataset.get_idx_split()
        except DatasetError:
            raise
        except Exception as exc:
            raise DatasetError(
                f"expected ogb to read {key} from {folder}/, found an error ({type(exc).__name__}: "
                f"{exc}); {_describe_expected(folder, meta)}. If processed/ holds a stale cache, "
                "delete processed/data_processed"
            ) from exc
    return key, folder, graph, labels, split


def _load_hetero(key: str, folder: Path, graph: dict, labels: Any, split: Any, options: dict, name: str) -> Data:
    """The typed ``Data`` of a heterogeneous ogbn dataset (see the module docstring)."""
    where = f"{key} ({folder})"
    counts = {str(t): int(np.asarray(c).reshape(-1)[0]) for t, c in graph["num_nodes_dict"].items()}
    if not isinstance(labels, dict) or not labels:
        raise DatasetError(f"expected labels as a dict {{node type: [N_t, 1]}} in {where}, found "
                           f"{type(labels).__name__}; the files do not belong together")
    if len(labels) != 1:
        raise DatasetError(f"expected one labelled node type in {where}, found {sorted(labels)}; "
                           "only single-target heterogeneous datasets are supported")
    target = str(next(iter(labels)))
    parts = {}
    for part in ("train", "valid", "test"):
        by_type = split.get(part) if isinstance(split, dict) else None
        if not isinstance(by_type, dict) or target not in by_type:
            raise DatasetError(f"expected {part} ids of type {target!r} in {folder}/split, found "
                               f"{sorted(by_type) if isinstance(by_type, dict) else type(by_type).__name__}; "
                               "the split does not belong to this graph")
        parts[part] = np.asarray(by_type[target], dtype=np.int64).reshape(-1)
    feats = graph.get("node_feat_dict") or {}
    data = make_typed_data(
        num_nodes=counts,
        edges=[(tuple(str(s) for s in et), np.asarray(ei)) for et, ei in graph["edge_index_dict"].items()],
        target_type=target, y=np.asarray(labels[target]), x_dict={str(t): np.asarray(x) for t, x in feats.items()},
        train=parts["train"], val=parts["valid"], test=parts["test"], name=name, drop_self_loops=True, where=where,
    )
    if options["undirected"]:
        data = add_reverse(data)
    logger.info(
        "loaded %s from %s: %s nodes, %d edges in %d relations, features %s, target %s with %d classes",
        name, folder, counts, data.edge_index.shape[1], len(data.edge_types),
        {t: x.shape[1] for t, x in data.x_dict.items()}, target, data.num_classes,
    )
    return data


def _masks(split: Any, n: int, folder: Path) -> list[np.ndarray]:
    masks = []
    for part in ("train", "valid", "test"):
        idx = np.asarray(split[part], dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise DatasetError(
                f"expected {part} ids in [0, {n}) in {folder}/split, found {int(idx.min())}..{int(idx.max())}; "
                "the split does not belong to this graph"
            )
        m = np.zeros(n, dtype=bool)
        m[idx] = True
        masks.append(m)
    return masks


def _load_multilabel(key: str, folder: Path, graph: dict, labels: Any, split: Any, name: str) -> Data:
    """A multi-task binary ogbn dataset (ogbn-proteins) as multilabel targets (module docstring)."""
    where = f"{key} ({folder})"
    n = int(graph["num_nodes"])
    lab = np.asarray(labels)
    if lab.ndim != 2 or lab.shape[0] != n:
        raise DatasetError(f"expected labels [{n}, T] in {where}, found {lab.shape}; the files do not belong together")
    feat = graph.get("node_feat")
    x = np.zeros((n, 0), dtype=np.float32) if feat is None else np.asarray(feat)
    edges = np.asarray(graph["edge_index"])
    check_edge_ids(edges[0], edges[1], n, where)
    edge_feat = graph.get("edge_feat")
    if edge_feat is not None:
        edge_feat = np.asarray(edge_feat)
        if edge_feat.ndim == 1:
            edge_feat = edge_feat[:, None]
        check_edge_attr(edge_feat.astype(np.float32, copy=False), edges.shape[1], f"{where}: raw/edge-feat.csv.gz")
    edge_index, edge_attr, counts = dedupe_edges(edges[0], edges[1], n, edge_feat)  # as ogb gives them
    del edges, edge_feat
    if counts["duplicates_dropped"]:
        logger.warning("%s: %d duplicate (src, dst) edges dropped (the first of each and its features kept)",
                       where, counts["duplicates_dropped"])
    masks = _masks(split, n, folder)
    data = make_data(x=x, y=np.zeros(n, dtype=np.int64), edge_index=edge_index, train_mask=masks[0],
                     val_mask=masks[1], test_mask=masks[2], name=name, num_classes=1, where=where)
    attach_targets(data, lab.astype(np.float32), kind="multilabel", where=where, edge_attr=edge_attr)
    for extra, value in graph.items():  # additional node files (proteins: node_species)
        if extra.startswith("node_") and extra != "node_feat" and value is not None:
            arr = np.asarray(value)
            if arr.shape[0] == n:
                t = torch.from_numpy(np.ascontiguousarray(arr))
                setattr(data, extra, t.reshape(n) if t.dim() == 2 and t.shape[1] == 1 else t)
    logger.info(
        "loaded %s from %s: %d nodes, %d edges (%d self loops, %d duplicates dropped), %d features, %d edge "
        "features, %d labels (multilabel, %.3f positive per node)",
        name, folder, n, edge_index.shape[1], int((edge_index[0] == edge_index[1]).sum()),
        counts["duplicates_dropped"], data.x.shape[1], 0 if edge_attr is None else edge_attr.shape[1],
        data.num_classes, float(data.y.sum()) / max(n, 1),
    )
    return data


def load(arg: str, root: str | None, options: dict, name: str) -> Data:
    """Load ``ogbn-*`` (``arg`` is the ogbn name); see the module docstring."""
    base = Path(root if root is not None else default_root()).expanduser()
    key, folder, graph, labels, split = _open_dataset(arg, base, options)
    if "edge_index_dict" in graph:  # heterogeneous: a typed graph
        return _load_hetero(key, folder, graph, labels, split, options, name)
    if _is_multilabel(_meta(key, _master(_import_ogb()[0]))[1]):
        return _load_multilabel(key, folder, graph, labels, split, name)
    n = int(graph["num_nodes"])
    feat = graph.get("node_feat")
    if feat is None:
        raise DatasetError(f"expected node features in {key} ({folder}), found none; this dataset is not supported")
    lab = np.asarray(labels)
    lab = lab.reshape(lab.shape[0], -1) if lab.ndim else lab.reshape(1, 1)
    if lab.shape != (n, 1):
        raise DatasetError(f"expected labels [{n}, 1] in {key} ({folder}), found {lab.shape}; the files do not belong together")
    if lab.dtype.kind == "f":
        y = np.nan_to_num(lab[:, 0], nan=-1.0).astype(np.int64)  # NaN = unlabelled -> -1
    else:
        y = lab[:, 0].astype(np.int64)
    edges = np.asarray(graph["edge_index"])
    check_edge_ids(edges[0], edges[1], n, f"{key} ({folder})")
    edge_index = clean_edges(edges[0], edges[1], n, undirected=options["undirected"])
    del edges, graph
    masks = _masks(split, n, folder)
    data = make_data(
        x=np.asarray(feat), y=y, edge_index=edge_index, train_mask=masks[0], val_mask=masks[1],
        test_mask=masks[2], name=name, where=f"{key} ({folder})",
    )
    logger.info(
        "loaded %s from %s: %d nodes, %d edges, %d features, %d classes, %d unlabelled",
        name, folder, n, edge_index.shape[1], data.x.shape[1], data.num_classes, int((y < 0).sum()),
    )
    return data
