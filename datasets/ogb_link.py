"""OGB link-property-prediction datasets (``ogbl-*``) through ``ogb.linkproppred`` (docs/link_prediction.md, section 1).

Names: ``ogbl-collab``, ``ogbl-ppa``, ``ogbl-ddi`` (undirected) and ``ogbl-citation2`` (directed).
The knowledge graphs (ogbl-wikikg2, ogbl-biokg) and ogbl-vessel are refused with an explanation.
``root`` (default ``$GNNSCALE_DATA``, else ``./data``) is the OGB root; the dataset lives in
``ROOT/<name with - replaced by _>/`` (``ROOT/ogbl_collab``).

Offline use works as for ``ogbn-*`` (:mod:`gnnscale.datasets.ogb`, whose helpers this module
imports): files already there are checked *before* ogb is called (``RELEASE_v<version>.txt``,
``raw/edge.csv.gz``, ``raw/num-node-list.csv.gz``, ``raw/num-edge-list.csv.gz``,
``raw/node-feat.csv.gz`` when master.csv says ``has_node_attr``, every "additional node/edge file"
of master.csv such as collab's ``raw/edge_weight.csv.gz`` and ``raw/edge_year.csv.gz``, and
``split/<split>/{train,valid,test}.pt``); a missing folder is downloaded by ogb (option
``download``) after a reachability probe; ogb's prompts, ``exit()`` and ``torch.load`` are guarded
the same way (ogb's cache files are pickles: do not put files from untrusted sources there).

Conversion (the contract's ``Data``, N nodes):

* ``x`` float32 [N, F]: ogb's ``node_feat``. ogbl-ddi has no node features: ``x`` is then the
  constant float32 [N, 1] of ones, because the homogeneous engine needs at least one input
  column (learned node embeddings exist only for the featureless types of typed graphs).
* ``y`` int64 [N] all -1, ``train_mask``/``val_mask``/``test_mask`` bool [N] all False,
  ``num_classes`` 0 (no node labels).
* ``edge_index`` int64 [2, E]: the **message-passing graph** = the train split's edges with their
  reverses, sorted, without duplicates or self loops (collab/ppa/ddi are undirected in OGB;
  citation2's directed train edges get their reverses for message passing).
* ``link_split`` (:class:`~gnnscale.datasets.link_split.LinkSplit`) from ``get_edge_split()``:
  collab/ppa/ddi: ``edge`` [n, 2] -> ``*_pos`` int64 [2, n], ``edge_neg`` [m, 2] -> ``val_neg`` /
  ``test_neg`` int64 [2, m]; ``train_pos`` = the train split's edges as stored (one direction;
  collab repeats a pair once per year it occurs, as OGB gives it). citation2: ``source_node`` /
  ``target_node`` -> ``*_pos``, ``target_node_neg`` [n, 1000] -> ``val_neg_dst`` / ``test_neg_dst``
  int64 [n, 1000]. ``metric``: master.csv's ``eval metric`` (``hits@50`` collab, ``hits@100`` ppa,
  ``hits@20`` ddi, ``mrr`` citation2; ``rocauc`` would read ``auc``). collab's per-edge ``weight``
  and ``year`` (and citation2's ``node_year``) are ignored for now (``info["ignored"]`` names them).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

from gnnscale.datasets._data import make_data
from gnnscale.datasets._graph import check_edge_ids, clean_edges
from gnnscale.datasets._options import Option
from gnnscale.datasets.link_split import LinkSplit
from gnnscale.datasets.ogb import _guarded, _import_ogb, _master, default_root, ready_folder
from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)

SUPPORTED = ("ogbl-collab", "ogbl-ppa", "ogbl-ddi", "ogbl-citation2")
OPTIONS: dict[str, Option] = {
    "download": Option(bool, True, "download through ogb when the dataset folder does not exist"),
    "download_timeout": Option(float, 10.0, "seconds to wait for the download server before giving up"),
}
HELP = (
    "ogbl-collab | ogbl-ppa | ogbl-ddi | ogbl-citation2\n"
    "    OGB link property prediction via ogb.linkproppred (pip install ogb); root = OGB root\n"
    "    (default $GNNSCALE_DATA or ./data), dataset folder ROOT/ogbl_<name>/; files already there are\n"
    "    used offline. edge_index = the train edges with their reverses (message passing); data.link_split\n"
    "    = OGB's split (hits@K negatives, or citation2's 1000 negatives per source for MRR); no node\n"
    "    labels (y = -1, num_classes 0); ogbl-ddi gets a constant 1-column x. Options:"
)


def _import_linkproppred():
    """``(linkproppred, its dataset module, ogb.utils.url)``; ogb's import-time version check is skipped
    by importing it through :func:`gnnscale.datasets.ogb._import_ogb` first."""
    try:
        _, _, ogb_url = _import_ogb()
        import ogb.linkproppred as linkproppred
        import ogb.linkproppred.dataset as ogbl_dataset
    except (DatasetError, ImportError) as exc:
        raise DatasetError(
            "expected the 'ogb' package for dataset names ogbl-*, found it is not importable "
            f"({str(exc).split(';')[0]}); install it with: pip install ogb (from a checkout: pip install -e '.[ogb]')"
        ) from None
    return linkproppred, ogbl_dataset, ogb_url


def _meta(name: str, master: dict[str, dict[str, str]]) -> tuple[str, dict[str, str]]:
    lookup = {k.lower(): k for k in master}
    key = lookup.get(name.lower())
    if key is None:
        raise DatasetError(f"expected an OGB link dataset name in {list(SUPPORTED)}, found {name!r}; fix the spelling")
    if key not in SUPPORTED:
        kind = ("a knowledge graph with relation types" if master[key]["task type"] == "KG completion"
                else "binary files with edge features")
        raise DatasetError(f"expected one of {list(SUPPORTED)}, found {key} ({kind}); it is not supported yet, "
                           "use ogbl-collab, ogbl-ppa, ogbl-ddi or ogbl-citation2")
    return key, master[key]


def expected_files(meta: dict[str, str]) -> tuple[list[str], list[str], list[str]]:
    """The files ogb needs, relative to the dataset folder: ``(always, raw, split)``; ``raw`` is not
    needed when ``processed/data_processed`` exists, ``split`` not when ``split/<split>/split_dict.pt`` does."""
    always = [f"RELEASE_v{meta['version']}.txt"]
    raw = ["raw/edge.csv.gz", "raw/num-node-list.csv.gz", "raw/num-edge-list.csv.gz"]
    if meta["has_node_attr"] == "True":
        raw.append("raw/node-feat.csv.gz")
    for key in ("additional node files", "additional edge files"):
        if meta[key] != "None":
            raw += [f"raw/{f}.csv.gz" for f in meta[key].split(",")]
    split = [f"split/{meta['split']}/{p}.pt" for p in ("train", "valid", "test")]
    return always, raw, split


def _missing(folder: Path, meta: dict[str, str]) -> list[str]:
    always, raw, split = expected_files(meta)
    missing = [f for f in always if not (folder / f).is_file()]
    if not (folder / "processed" / "data_processed").is_file():
        missing += [f for f in raw if not (folder / f).is_file()]
    if not (folder / "split" / meta["split"] / "split_dict.pt").is_file():
        missing += [f for f in split if not (folder / f).is_file()]
    return missing


def _describe_expected(folder: Path, meta: dict[str, str]) -> str:
    always, raw, split = expected_files(meta)
    return (f"{folder}/ should hold {', '.join(always + raw + split)} (or processed/data_processed instead of "
            "the raw/ files)")


def _open_dataset(name: str, root: Path, options: dict):
    """``(key, meta, folder, graph dict, split dict)`` read by ogb, offline when the files are there."""
    linkproppred, ogbl_dataset, ogb_url = _import_linkproppred()
    key, meta = _meta(name, _master(linkproppred))
    folder = root / "_".join(key.split("-"))
    ready_folder(key, root, folder, meta, options, lambda: _missing(folder, meta), _describe_expected(folder, meta))
    with _guarded(ogbl_dataset, ogb_url, key, folder, options["download"]):
        try:
            dataset = linkproppred.LinkPropPredDataset(name=key, root=str(root))
            graph = dataset[0]
            split = dataset.get_edge_split()
        except DatasetError:
            raise
        except Exception as exc:
            raise DatasetError(
                f"expected ogb to read {key} from {folder}/, found an error ({type(exc).__name__}: {exc}); "
                f"{_describe_expected(folder, meta)}. If processed/ holds a stale cache, delete "
                "processed/data_processed"
            ) from exc
    return key, meta, folder, graph, split


def _array(split: dict, part: str, field: str, where: str) -> np.ndarray:
    """``split[part][field]`` (numpy array or tensor in ogb's files) as int64 numpy."""
    value = split.get(part, {}).get(field) if isinstance(split.get(part), dict) else None
    if value is None:
        have = sorted(split[part]) if isinstance(split.get(part), dict) else sorted(split)
        raise DatasetError(f"expected {part}[{field!r}] in the split of {where}, found only {have}; "
                           "the split files do not belong to this dataset")
    arr = value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    if arr.dtype.kind not in "iu":
        raise DatasetError(f"expected integer node ids in {part}[{field!r}] of {where}, found dtype {arr.dtype}; "
                           "the split files are damaged")
    return arr.astype(np.int64)


def _pairs(split: dict, part: str, field: str, n: int, where: str) -> torch.Tensor:
    """``split[part][field]`` [m, 2] -> int64 [2, m] (ids checked)."""
    arr = _array(split, part, field, where)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise DatasetError(f"expected {part}[{field!r}] of shape [m, 2] in {where}, found {list(arr.shape)}; "
                           "the split files are damaged")
    check_edge_ids(arr[:, 0], arr[:, 1], n, f"{where} split {part}[{field!r}]")
    return torch.from_numpy(np.ascontiguousarray(arr.T))


def _source_target(split: dict, part: str, n: int, where: str) -> torch.Tensor:
    """citation2: ``source_node`` / ``target_node`` [m] -> int64 [2, m] (ids checked)."""
    src = _array(split, part, "source_node", where).reshape(-1)
    dst = _array(split, part, "target_node", where).reshape(-1)
    if src.shape != dst.shape:
        raise DatasetError(f"expected as many source_node as target_node in {part} of {where}, found "
                           f"{src.size} and {dst.size}; the split files are damaged")
    check_edge_ids(src, dst, n, f"{where} split {part}")
    return torch.from_numpy(np.stack([src, dst]))


def _neg_dst(split: dict, part: str, rows: int, n: int, where: str) -> torch.Tensor:
    """citation2: ``target_node_neg`` [rows, K] -> int64 [rows, K] (ids checked)."""
    arr = _array(split, part, "target_node_neg", where)
    if arr.ndim != 2 or arr.shape[0] != rows:
        raise DatasetError(f"expected {part}['target_node_neg'] of shape [{rows}, K] in {where}, found "
                           f"{list(arr.shape)}; the split files are damaged")
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        raise DatasetError(f"expected node ids in [0, {n}) in {part}['target_node_neg'] of {where}, found "
                           f"{int(arr.min())}..{int(arr.max())}; the split does not belong to this graph")
    return torch.from_numpy(np.ascontiguousarray(arr))


def _metric(eval_metric: str) -> str:
    return "auc" if eval_metric == "rocauc" else eval_metric


def load(arg: str, root: str | None, options: dict, name: str) -> Data:
    """Load ``ogbl-*`` (``arg`` is the ogbl name); see the module docstring."""
    base = Path(root if root is not None else default_root()).expanduser()
    key, meta, folder, graph, split = _open_dataset(arg, base, options)
    where = f"{key} ({folder})"
    n = int(graph["num_nodes"])
    if not isinstance(split, dict):
        raise DatasetError(f"expected a split dict in {where}, found {type(split).__name__}; "
                           "the split files are damaged")
    if key == "ogbl-citation2":
        train, val, test = (_source_target(split, p, n, where) for p in ("train", "valid", "test"))
        val_neg = test_neg = None
        val_neg_dst, test_neg_dst = _neg_dst(split, "valid", val.shape[1], n, where), \
            _neg_dst(split, "test", test.shape[1], n, where)
    else:
        train, val, test = (_pairs(split, p, "edge", n, where) for p in ("train", "valid", "test"))
        val_neg, test_neg = _pairs(split, "valid", "edge_neg", n, where), _pairs(split, "test", "edge_neg", n, where)
        val_neg_dst = test_neg_dst = None
    edge_index = clean_edges(train[0].numpy(), train[1].numpy(), n, undirected=True)
    feat = graph.get("node_feat")
    x = np.ones((n, 1), dtype=np.float32) if feat is None else np.asarray(feat)
    ignored = [k for k, v in graph.items() if k not in ("edge_index", "node_feat", "num_nodes") and v is not None]
    ignored += [f"train.{k}" for k in split.get("train", {}) if k in ("weight", "year")]
    del graph
    data = make_data(
        x=x, y=np.full(n, -1, dtype=np.int64), edge_index=edge_index, train_mask=np.zeros(n, dtype=bool),
        val_mask=np.zeros(n, dtype=bool), test_mask=np.zeros(n, dtype=bool), name=name, num_classes=0, where=where,
    )
    data.link_split = LinkSplit(
        train_pos=train, val_pos=val, test_pos=test, val_neg=val_neg, test_neg=test_neg,
        val_neg_dst=val_neg_dst, test_neg_dst=test_neg_dst, metric=_metric(meta["eval metric"]),
        info={"source": "ogb", "dataset": key, "split": meta["split"], "eval_metric": meta["eval metric"],
              "features": "node_feat" if feat is not None else "constant ones [N, 1]",
              "ignored": sorted(set(ignored))},
    )
    data.link_split.check(n)
    logger.info("loaded %s from %s: %d nodes, %d message-passing edges, %d features, split %s",
                name, folder, n, edge_index.shape[1], data.x.shape[1], data.link_split.counts())
    return data
