"""The partition folder's manifest: ``meta.json``, its checks, and the sha256 of each part's files.

Two format versions are read: 1 (untyped graphs, :data:`PART_FILES`) and 2 (typed graphs,
``docs/typed_graphs.md`` section 2: no ``x.npy``, an ``etype.npy`` per part and one
``x_t{t}.npy`` per node type with features, and a ``typed`` entry in meta.json). Either may
carry edge features (:data:`EDGE_FILES`, ``edge_feature_dim`` > 0) and targets of any kind
(``target``, :data:`TARGET_KINDS`). The files a part must have follow from its meta
(:func:`part_files`).

Torch-free on purpose: the launcher (``gnnscale train``) reads and verifies the folder before
it starts any worker, and must not pay torch's import for that. The writer of the arrays is
in :mod:`gnnscale.partitioning.format`, their loader in :mod:`gnnscale.partitioning.part`.
"""
from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gnnscale.errors import PartitionError

FORMAT_VERSION = 1
"""Format of untyped graphs (what ``partition_graph`` writes for a plain ``Data``)."""
TYPED_FORMAT_VERSION = 2
"""Format of typed (heterogeneous) graphs."""
SUPPORTED_VERSIONS = (FORMAT_VERSION, TYPED_FORMAT_VERSION)
TARGET_KINDS = ("class", "binary", "multilabel", "regression")
"""The kinds of meta's ``target`` entry (``docs/targets_and_edge_features.md`` section 1):
``y.npy`` is int64 [n] for class/binary, float32 [n, C] (multilabel) or [n] / [n, D] (regression)."""
META_FILE = "meta.json"
PART_FILES = (
    "indptr.npy",
    "indices.npy",
    "x.npy",
    "y.npy",
    "train_mask.npy",
    "val_mask.npy",
    "test_mask.npy",
    "orig_ids.npy",
)
EDGE_FILES = ("edge_attr.npy", "edge_ids.npy")
TIME_FILE = "edge_time.npy"  # int64 [E_p]: a temporal part's in-edge times, ascending within each node
"""A part's edge features (float32 [E_p, De], aligned with indices.npy) and their original edge
ids (int64 [E_p], columns of the dataset's edge_index): present when meta's ``edge_feature_dim`` > 0
(either format; ``docs/targets_and_edge_features.md`` section 3)."""
_MASKS = ("train_mask", "val_mask", "test_mask")  # the split masks of a part, {name}.npy bool [n_p]
_REQUIRED_META = (
    "format_version",
    "num_parts",
    "num_nodes",
    "offsets",
    "feature_dim",
    "files",
)
TYPED_KEYS = (
    "node_types",
    "edge_types",
    "target_type",
    "type_starts",
    "type_offsets",
    "num_nodes_per_type",
    "feature_dims",
    "edges_per_relation",
    "cut_per_relation",
    "balance_per_type",
)
"""The keys of meta.json's ``typed`` entry (format 2)."""
_HASH_CHUNK = 1 << 20
_RERUN_HINT = "re-run `gnnscale partition` to rewrite the partition folder"


def sha256_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks (bounded memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def part_dir_name(part: int) -> str:
    """Folder name of part ``part`` inside a partition folder (``part{p}``)."""
    return f"part{int(part)}"


def load_meta(part_dir: str | os.PathLike) -> dict[str, Any]:
    """Read and check ``part_dir/meta.json``.

    Raises:
        PartitionError: folder missing, meta.json missing or unreadable, wrong format_version,
            or required keys missing.
    """
    root = Path(part_dir)
    if not root.is_dir():
        raise PartitionError(
            f"expected a partition folder at {root}, found "
            f"{'a file' if root.exists() else 'nothing'}; run `gnnscale partition` first or "
            "fix the path"
        )
    path = root / META_FILE
    if not path.is_file():
        raise PartitionError(
            f"expected {path} in the partition folder, found none (the folder is not a "
            f"partition or its write did not finish); {_RERUN_HINT}"
        )
    try:
        with open(path, encoding="utf-8") as fh:
            meta = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PartitionError(
            f"expected {path} to be readable JSON, found an error: {exc}; {_RERUN_HINT}"
        ) from exc
    if not isinstance(meta, dict):
        raise PartitionError(
            f"expected a JSON object in {path}, found {type(meta).__name__}; {_RERUN_HINT}"
        )
    version = meta.get("format_version")
    if isinstance(version, bool) or version not in SUPPORTED_VERSIONS:
        raise PartitionError(
            f"expected partition format_version {FORMAT_VERSION} (untyped) or "
            f"{TYPED_FORMAT_VERSION} (typed) in {path}, found {version!r}; "
            f"{_RERUN_HINT} with this gnnscale version"
        )
    # typed folders keep features per type (typed.feature_dims): feature_dim (0) may be absent
    missing = [k for k in _REQUIRED_META if k not in meta and not (k == "feature_dim" and version == TYPED_FORMAT_VERSION)]
    if missing:
        raise PartitionError(f"expected keys {missing} in {path}, found none; {_RERUN_HINT}")
    if len(meta["offsets"]) != int(meta["num_parts"]) + 1:
        raise PartitionError(
            f"expected {int(meta['num_parts']) + 1} offsets in {path}, found "
            f"{len(meta['offsets'])}; {_RERUN_HINT}"
        )
    if version == TYPED_FORMAT_VERSION:
        _check_typed_meta(meta, path)
    _check_target_and_edges(meta, path)
    return meta


def _check_target_and_edges(meta: dict[str, Any], path: Path) -> None:
    """``edge_feature_dim`` (optional) an integer >= 0; ``target`` (optional) a known kind with an
    integer ``num_outputs`` >= 0 (what the loader needs to read ``edge_attr.npy`` and ``y.npy``;
    0: a class graph without labels, e.g. a link-prediction dataset)."""
    dim = meta.get("edge_feature_dim", 0)
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 0):
        raise PartitionError(f"expected edge_feature_dim to be an integer >= 0 in {path}, found {dim!r:.80}; "
                             f"{_RERUN_HINT}")
    target = meta.get("target")
    if target is None:
        return
    kind = target.get("kind") if isinstance(target, dict) else None
    outputs = target.get("num_outputs") if isinstance(target, dict) else None
    if kind not in TARGET_KINDS or isinstance(outputs, bool) or not isinstance(outputs, int) or outputs < 0:
        raise PartitionError(f"expected target as {{kind: one of {', '.join(TARGET_KINDS)}, num_outputs: an integer "
                             f">= 0}} in {path}, found {target!r:.160}; {_RERUN_HINT}")


def _check_typed_meta(meta: dict[str, Any], path: Path) -> None:
    """The ``typed`` entry of a format-2 meta.json: every key, list lengths that agree with
    the number of parts P, of node types T and of relations R, and per-part type counts that
    add up to the parts' sizes (pure Python over P * T numbers)."""
    typed = meta.get("typed")
    if not isinstance(typed, dict):
        raise PartitionError(
            f"expected a 'typed' object in {path} (format_version {TYPED_FORMAT_VERSION}), found "
            f"{type(typed).__name__}; {_RERUN_HINT}"
        )
    missing = [k for k in TYPED_KEYS if k not in typed]
    if missing:
        raise PartitionError(f"expected keys {missing} in 'typed' of {path}, found none; {_RERUN_HINT}")
    try:
        _check_typed_shapes(meta, typed, path)
    except (TypeError, ValueError, IndexError) as exc:  # a value of the wrong kind somewhere
        raise PartitionError(
            f"expected the 'typed' entry of {path} to hold names and integer tables, found a malformed "
            f"value ({type(exc).__name__}: {exc}); {_RERUN_HINT}"
        ) from None


def _check_typed_shapes(meta: dict[str, Any], typed: dict[str, Any], path: Path) -> None:
    num_parts = int(meta["num_parts"])
    ntypes, nrels = len(typed["node_types"]), len(typed["edge_types"])
    shapes = {
        "type_starts": (num_parts, ntypes + 1),
        "type_offsets": (ntypes, num_parts + 1),
        "num_nodes_per_type": (ntypes,),
        "feature_dims": (ntypes,),
        "edges_per_relation": (nrels,),
        "cut_per_relation": (nrels,),
        "balance_per_type": (ntypes,),
    }
    for key, shape in shapes.items():
        value = typed[key]
        ok = isinstance(value, list) and len(value) == shape[0]
        if ok and len(shape) == 2:
            ok = all(isinstance(row, list) and len(row) == shape[1] for row in value)
        if not ok:
            raise PartitionError(
                f"expected typed.{key} of shape {list(shape)} in {path} ({num_parts} parts, "
                f"{ntypes} node types, {nrels} relations), found {value!r:.120}; {_RERUN_HINT}"
            )
    for key in ("type_starts", "type_offsets", "num_nodes_per_type", "feature_dims", "edges_per_relation",
                "cut_per_relation"):
        flat = [v for row in typed[key] for v in row] if key.startswith("type_") else typed[key]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in flat):
            raise PartitionError(
                f"expected typed.{key} to hold integers >= 0 in {path}, found {typed[key]!r:.160}; {_RERUN_HINT}"
            )
    per_type = typed["num_nodes_per_type"]
    if sum(per_type) != int(meta["num_nodes"]) or per_type != [row[-1] for row in typed["type_offsets"]]:
        raise PartitionError(
            f"expected typed.num_nodes_per_type to add up to num_nodes={meta['num_nodes']} and to end "
            f"typed.type_offsets, found {per_type!r:.160}; {_RERUN_HINT}"
        )
    offsets = meta["offsets"]
    for p, row in enumerate(typed["type_starts"]):  # loop over parts
        size = int(offsets[p + 1]) - int(offsets[p])
        if row[0] != 0 or row[-1] != size or any(b < a for a, b in zip(row, row[1:])):
            raise PartitionError(
                f"expected typed.type_starts[{p}] rising from 0 to the part's {size} nodes in "
                f"{path}, found {row!r:.120}; {_RERUN_HINT}"
            )
    for t, row in enumerate(typed["type_offsets"]):  # loop over node types
        want = [0]
        for starts in typed["type_starts"]:  # loop over parts
            want.append(want[-1] + starts[t + 1] - starts[t])
        if row != want:
            raise PartitionError(
                f"expected typed.type_offsets[{t}] = {want!r:.120} (running sums of the parts' nodes of type "
                f"{t}) in {path}, found {row!r:.120}; {_RERUN_HINT}"
            )
    if ntypes and nrels and not all(
        isinstance(e, list) and len(e) == 3 and e[0] in typed["node_types"] and e[2] in typed["node_types"]
        for e in typed["edge_types"]
    ):
        raise PartitionError(
            f"expected typed.edge_types as [src type, relation, dst type] triples of known node "
            f"types in {path}, found {typed['edge_types']!r:.160}; {_RERUN_HINT}"
        )


def link_file(key: str) -> str:
    """The file of a part's link array ``key`` (:mod:`gnnscale.partitioning.link`)."""
    return f"link_{key}.npy"


def link_part_files(meta: dict[str, Any]) -> tuple[str, ...]:
    """The link files every part of a folder with this meta holds (none without a split)."""
    link = meta.get("link")
    return tuple(link_file(k) for k in link["arrays"]) if link else ()


def is_link_file(name: str) -> bool:
    return name.startswith("link_") and name.endswith(".npy")


def part_files(meta: dict[str, Any]) -> tuple[str, ...]:
    """The file names every part of a folder with this meta holds.

    Format 1: :data:`PART_FILES`. Format 2: those without ``x.npy``, plus ``etype.npy`` and
    ``x_t{t}.npy`` for every node type ``t`` with ``typed.feature_dims[t] > 0``. Either, with
    edge features (``edge_feature_dim`` > 0): :data:`EDGE_FILES`; with a link-prediction split:
    its ``link_{key}.npy`` files (:mod:`gnnscale.partitioning.link`).
    """
    edges = EDGE_FILES if edge_feature_dim(meta) > 0 else ()
    if meta.get("temporal"):  # a temporal graph: each in-edge's time (docs/temporal.md)
        edges = edges + (TIME_FILE,)
        if meta["temporal"].get("edge_ids") and not edge_feature_dim(meta):  # and its input column
            edges = edges + ("edge_ids.npy",)
    if meta.get("format_version") != TYPED_FORMAT_VERSION:
        return PART_FILES + edges + link_part_files(meta)
    dims = meta["typed"]["feature_dims"]
    return tuple(f for f in PART_FILES if f != "x.npy") + ("etype.npy",) + tuple(
        f"x_t{t}.npy" for t, d in enumerate(dims) if int(d) > 0
    ) + edges + link_part_files(meta)


def edge_feature_dim(meta: dict[str, Any]) -> int:
    """De, the edge features per edge of a folder (meta's ``edge_feature_dim``; 0 when absent)."""
    return int(meta.get("edge_feature_dim") or 0)


def target_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """meta's ``target`` entry, ``{"kind", "num_classes", "num_outputs"}``; folders written before
    it existed hold class ids: ``{"kind": "class", ...}`` from ``num_classes``."""
    target = meta.get("target")
    if isinstance(target, dict):
        return target
    classes = meta.get("num_classes")
    return {"kind": "class", "num_classes": classes, "num_outputs": classes}



def verify_part(part_dir: str | os.PathLike, part: int) -> None:
    """Check the sha256 of every file of ``part`` against meta.json (PartitionError if not)."""
    _verify_files(Path(part_dir), load_meta(part_dir), part)


def part_problems(root: Path, meta: dict[str, Any], part: int) -> list[str]:
    """What is wrong with part ``part``'s files, one "expected ..., found ..." phrase each (empty:
    every file is there and has meta.json's sha256): its folder missing, a file missing, a file
    without a recorded sha256, a file whose sha256 differs (truncated, corrupt or changed after
    partitioning)."""
    prefix = part_dir_name(part) + "/"
    pdir = root / part_dir_name(part)
    names = part_files(meta)
    if not pdir.is_dir():
        return [f"expected the folder {pdir} with part {part}'s {len(names)} files, found no such folder"]
    expected = {k: v for k, v in meta["files"].items() if k.startswith(prefix)}
    problems = []
    for fname in names:  # loop over the part's few files
        rel = prefix + fname
        if not (root / rel).is_file():
            problems.append(f"expected {root / rel}, found no such file")
        elif rel not in expected:
            problems.append(f"expected a sha256 for {rel} in {root / META_FILE}, found none")
        else:
            found = sha256_file(root / rel)
            if found != expected[rel]:
                problems.append(f"expected {root / rel} to have sha256 {expected[rel]}, found {found} "
                                f"({(root / rel).stat().st_size} bytes: the file is truncated, corrupt or was "
                                "changed after partitioning)")
    return problems


def _verify_files(root: Path, meta: dict[str, Any], part: int) -> None:
    problems = part_problems(root, meta, part)
    if problems:
        raise PartitionError(f"{'; '.join(problems)}; {_RERUN_HINT}")


def check_parts(part_dir: str | os.PathLike, parts: list[int] | None = None) -> dict[int, list[str]]:
    """``{part: problems}`` (:func:`part_problems`) for ``parts`` (default: all), the parts whose
    files are all there and intact left out. Files hash in parallel threads (hashlib releases the
    GIL), one per core at most.

    Raises:
        PartitionError: meta.json missing or malformed (:func:`load_meta`).
    """
    root = Path(part_dir)
    meta = load_meta(root)
    parts = list(range(int(meta["num_parts"]))) if parts is None else [int(p) for p in parts]
    with ThreadPoolExecutor(max_workers=max(1, min(len(parts), os.cpu_count() or 1))) as pool:
        found = list(pool.map(lambda p: part_problems(root, meta, p), parts))
    return {p: probs for p, probs in zip(parts, found) if probs}


def verify_parts(part_dir: str | os.PathLike, parts: list[int] | None = None) -> None:
    """Check the sha256 of every file of ``parts`` (default: all) against meta.json.

    Raises:
        PartitionError: the first part (lowest id) with a missing folder, a missing, changed or
            corrupt file, naming each of its files that fails (:func:`part_problems`).
    """
    root = Path(part_dir)
    bad = check_parts(root, parts)
    if bad:
        part = min(bad)
        more = f" (and {len(bad) - 1} other part(s) fail too: `gnnscale info {root}` lists them)" if len(bad) > 1 else ""
        raise PartitionError(f"{'; '.join(bad[part])}{more}; {_RERUN_HINT}")
