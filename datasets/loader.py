"""``load_dataset``: one entry point that dispatches a dataset name to its source module.

Names (options may follow as a URL query, ``NAME?key=value&key2=value2``; keyword
options override query options):

* ``planetoid:cora|citeseer|pubmed`` (or ``cora``, ``citeseer``, ``pubmed``) -> :mod:`.planetoid`
* ``npz:PATH`` -> :mod:`.npz`
* ``dir:PATH`` -> :mod:`.directory`
* ``humloc:PATH`` (or ``humloc``) -> :mod:`.humloc` (multilabel targets, edge features)
* ``ogbn-*`` -> :mod:`.ogb` (``ogbn-mag``: a typed graph)
* ``ogbl-collab|ppa|ddi|citation2`` -> :mod:`.ogb_link` (link prediction: ``data.link_split``)
* ``synthetic`` -> :mod:`.synthetic`
* typed (heterogeneous) graphs, docs/typed_graphs.md: ``acm:PATH`` -> :mod:`.acm`,
  ``hetero-dir:PATH`` -> :mod:`.hetero_dir`, ``synthetic-mag`` -> :mod:`.mag`

A ``root=...`` query item is accepted as the ``root`` argument (handy on a command line).
"""

from __future__ import annotations

import logging
import zipfile
from types import ModuleType
from typing import Any

from torch_geometric.data import Data

from gnnscale.datasets import (acm, directory, hetero_dir, humloc, mag, npz, ogb, ogb_link, planetoid, synthetic,
                               temporal)
from gnnscale.datasets._options import canonical_name, format_options, resolve_options
from gnnscale.datasets.inputs import VALID_NAMES, parse_name, unknown_name  # noqa: F401 (re-exported)
from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)

_SOURCES: dict[str, ModuleType] = {
    "planetoid": planetoid,
    "npz": npz,
    "dir": directory,
    "humloc": humloc,
    "ogbn": ogb,
    "ogbl": ogb_link,
    "synthetic": synthetic,
    "acm": acm,
    "hetero-dir": hetero_dir,
    "synthetic-mag": mag,
    "events": temporal,
    "jodie": temporal,
}


def _help() -> str:
    parts = [
        "Datasets: NAME or NAME?key=value&key2=value2 (values are parsed as int, float, true/false or "
        "text; root=DIR may be given the same way).",
        "Every dataset gives x float32 [N,F], y int64 [N] (-1 = unlabelled), edge_index int64 [2,E] "
        "(no duplicates), bool train/val/test masks.",
        "Other targets (docs/targets_and_edge_features.md): data.target_kind binary (int64 0/1), multilabel",
        "(y float32 [N,C] of 0/1: humloc, ogbn-proteins) or regression (float y); edge features as",
        "edge_attr float32 [E,De] aligned with edge_index (humloc, ogbn-proteins, dir: edge_attr.npy).",
        "Typed (heterogeneous) graphs (acm, hetero-dir, synthetic-mag, ogbn-mag) give instead node_types,",
        "edge_types [(src, rel, dst)], type_ptr, node_type, edge_type, x_dict {type: float32 [N_t,F_t]}, x=None,",
        "y (-1 off the target type), masks on target_type nodes (docs/typed_graphs.md).",
        "",
    ]
    for module in (planetoid, npz, directory, humloc, ogb, ogb_link, synthetic, acm, hetero_dir, mag, temporal):
        parts.append(module.HELP)
        if module.OPTIONS:
            parts.append(format_options(module.OPTIONS))
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"


DATASET_HELP: str = _help()


def check_dataset_name(name: str, **options: Any) -> None:
    """Check a dataset name and its options without reading any file (what :func:`load_dataset`
    checks first): DatasetError naming the valid names, or the valid options, if not."""
    source, _arg, _base, query = parse_name(name)
    query.pop("root", None)
    resolve_options(source, _SOURCES[source].OPTIONS, query, options)


def load_dataset(name: str, root: str | None = None, **options: Any) -> Data:
    """Load a dataset by name (see :data:`DATASET_HELP` for names and options).

    Args:
        name: e.g. ``planetoid:cora``, ``npz:/data/squirrel.npz?split=3``, ``dir:/data/g``,
            ``ogbn-arxiv``, ``ogbl-collab``, ``synthetic?num_nodes=1000000&avg_degree=20``; typed graphs
            ``acm:/data/acm?split=40``, ``hetero-dir:/data/g``, ``ogbn-mag``, ``synthetic-mag``.
        root: data folder (its meaning depends on the source; ``None`` = the source's default).
        **options: source options; they override options given in ``name``.

    Returns:
        ``Data`` with ``x`` float32 [N, F], ``y`` int64 [N] (-1 = unlabelled, in no mask),
        ``edge_index`` int64 [2, E] (row 0 source, row 1 target, no duplicate edges),
        bool ``train_mask``/``val_mask``/``test_mask`` [N], ``num_classes`` (int) and
        ``name`` (str: the canonical name, with the options that were given). Typed sources
        return the typed ``Data`` of docs/typed_graphs.md section 1 instead (``x`` None,
        features in ``x_dict``, ``node_types``, ``edge_types``, ``type_ptr``, ``node_type``,
        ``edge_type``, ``target_type``). Sources with other targets (``humloc``, ``ogbn-proteins``,
        ``.npz`` files judged by ROC-AUC, ``dir:`` with a multi-hot or float ``y.npy``) set
        ``target_kind`` and give ``y`` of that kind, and may give ``edge_attr`` float32 [E, De]
        (:mod:`gnnscale.datasets.targets`).

    Raises:
        DatasetError: unknown name or option, missing or malformed files.
    """
    source, arg, base, query = parse_name(name)
    if "root" in query:
        query_root = query.pop("root")
        if root is None:
            root = str(query_root)
    module = _SOURCES[source]
    resolved = resolve_options(source, module.OPTIONS, query, options)
    canonical = canonical_name(base, query, options)
    logger.debug("load_dataset(%r): source=%s arg=%r root=%r options=%s", name, source, arg, root, resolved)
    try:
        return module.load(arg, None if root is None else str(root), resolved, canonical)
    except DatasetError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, EOFError, OSError, zipfile.BadZipFile,
            RuntimeError) as exc:
        # A malformed file that a loader's own checks did not foresee: still one line naming it.
        where = arg or name
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise DatasetError(f"{where}: could not read dataset {name!r} ({type(exc).__name__}: {first[:300]}); "
                           "check the files against `gnnscale datasets`") from None
