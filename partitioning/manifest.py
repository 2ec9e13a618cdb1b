"""The partition folder's manifest: ``meta.json``, its checks, and the sha256 of each part's files.

Torch-free on purpose: the launcher (``gnnscale train``) reads and verifies the folder before
it starts any worker, and must not pay torch's import for that. The writer and loader of the
arrays are in :mod:`gnnscale.partitioning.format`.
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
_REQUIRED_META = (
    "format_version",
    "num_parts",
    "num_nodes",
    "offsets",
    "feature_dim",
    "files",
)
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
    if version != FORMAT_VERSION:
        raise PartitionError(
            f"expected partition format_version {FORMAT_VERSION} in {path}, found {version!r}; "
            f"{_RERUN_HINT} with this gnnscale version"
        )
    missing = [k for k in _REQUIRED_META if k not in meta]
    if missing:
        raise PartitionError(f"expected keys {missing} in {path}, found none; {_RERUN_HINT}")
    if len(meta["offsets"]) != int(meta["num_parts"]) + 1:
        raise PartitionError(
            f"expected {int(meta['num_parts']) + 1} offsets in {path}, found "
            f"{len(meta['offsets'])}; {_RERUN_HINT}"
        )
    return meta



def verify_part(part_dir: str | os.PathLike, part: int) -> None:
    """Check the sha256 of every file of ``part`` against meta.json (PartitionError if not)."""
    _verify_files(Path(part_dir), load_meta(part_dir), part)


def _verify_files(root: Path, meta: dict[str, Any], part: int) -> None:
    prefix = part_dir_name(part) + "/"
    expected = {k: v for k, v in meta["files"].items() if k.startswith(prefix)}
    for fname in PART_FILES:
        rel = prefix + fname
        if rel not in expected:
            raise PartitionError(
                f"expected a sha256 for {rel} in {root / META_FILE}, found none; {_RERUN_HINT}"
            )
        found = sha256_file(root / rel)
        if found != expected[rel]:
            raise PartitionError(
                f"expected {root / rel} to have sha256 {expected[rel]}, found {found} (the file "
                f"is corrupt or was changed after partitioning); {_RERUN_HINT}"
            )


def verify_parts(part_dir: str | os.PathLike, parts: list[int] | None = None) -> None:
    """Check the sha256 of every file of ``parts`` (default: all) against meta.json.

    Files hash in parallel threads (hashlib releases the GIL), one per core at most.

    Raises:
        PartitionError: the first part (lowest id) with a missing, changed or corrupt file.
    """
    root = Path(part_dir)
    meta = load_meta(root)
    parts = list(range(int(meta["num_parts"]))) if parts is None else [int(p) for p in parts]
    with ThreadPoolExecutor(max_workers=max(1, min(len(parts), os.cpu_count() or 1))) as pool:
        futures = [pool.submit(_verify_files, root, meta, p) for p in parts]
        for f in futures:  # in part order: the lowest failing part's error wins
            f.result()
