"""What a dataset name reads, torch-free: the name's parts (:func:`parse_name`), where its files
lie (:func:`input_location`: the file or folder a relative PATH, ``root`` and ``$GNNSCALE_DATA``
resolve to, made absolute against the working directory) and their identity
(:func:`input_identity`: that absolute location and each input file's size, modification time
and digest). The partition cache of ``--dataset`` runs keys its folders on the location and
re-cuts a graph whose files changed (:func:`identity_changes` says which, in words); a partition's
meta.json keeps the identity as ``input`` (``gnnscale info`` shows it).

The source modules take their folder rules from here (one copy): Planetoid's candidate folders,
the ``npz:`` file, plain ``humloc``'s folder, the OGB root.
"""
from __future__ import annotations

import hashlib
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gnnscale.datasets._options import split_spec
from gnnscale.errors import DatasetError

PLANETOID_NAMES = ("cora", "citeseer", "pubmed")
PLANETOID_FILES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
HUMLOC_FILES = ("edge_list.csv", "features.csv", "labels.csv", "split.pt")

# The input files of each folder source, as glob patterns relative to the folder (a folder may
# hold other files: those do not make a graph). OGB: the whole dataset folder (raw/, split/,
# mapping/ and ogb's processed/ cache, which a first load writes before the identity is taken).
FOLDER_FILES = {
    "dir": ("edge_index.npy", "edges/*.npy", "x.npy", "y.npy", "edge_attr.npy", "edge_time.npy", "split.npz"),
    "humloc": HUMLOC_FILES,
    "acm": ("labels.npy", "p_feat.npz", "a_feat.npz", "pa.txt", "ps.txt", "train_*.npy", "val_*.npy", "test_*.npy"),
    "hetero-dir": ("meta.json", "nodes/**/*", "edges/**/*"),
    "ogbn": ("**/*",),
    "ogbl": ("**/*",),
}

# A file up to this size is digested whole (its content decides); a larger one by its first
# HEAD_BYTES with its size and modification time (a rewrite changes the time).
FULL_DIGEST_BYTES = 16 << 20
HEAD_BYTES = 1 << 20

_ALIASES = {n: f"planetoid:{n}" for n in PLANETOID_NAMES}
VALID_NAMES = (
    "planetoid:cora",
    "planetoid:citeseer",
    "planetoid:pubmed",
    "cora",
    "citeseer",
    "pubmed",
    "npz:PATH",
    "dir:PATH",
    "humloc:PATH",
    "humloc",
    "ogbn-arxiv",
    "ogbn-products",
    "ogbn-papers100M",
    "ogbn-mag",
    "ogbn-proteins",
    "ogbn-<other>",
    "ogbl-collab",
    "ogbl-ppa",
    "ogbl-ddi",
    "ogbl-citation2",
    "synthetic",
    "acm:PATH",
    "hetero-dir:PATH",
    "synthetic-mag",
    "events:PATH",
    "jodie:PATH",
)


def unknown_name(name: str) -> DatasetError:
    return DatasetError(
        f"expected a dataset name among {', '.join(VALID_NAMES)}, found {name!r}; "
        "pick one of those (`gnnscale datasets` describes each)"
    )


def parse_name(name: str) -> tuple[str, str, str, dict[str, Any]]:
    """Split a dataset name into ``(source, arg, canonical base, query options)``.

    ``source`` is a key of the source table (``planetoid``, ``npz``, ``dir``, ``ogbn``, ``ogbl``,
    ``synthetic``, ``acm``, ``hetero-dir``, ``synthetic-mag``); ``arg`` is what follows
    ``source:`` (the ogbn / ogbl name for OGB).
    """
    base, query = split_spec(name)
    base = _ALIASES.get(base.lower(), base)
    if base.lower().startswith("ogbn-"):
        return "ogbn", base, base, query
    if base.lower().startswith("ogbl-"):
        return "ogbl", base, base, query
    if base.lower() in ("synthetic", "synthetic-mag", "humloc"):
        return base.lower(), "", base.lower(), query
    scheme, sep, arg = base.partition(":")
    scheme = scheme.lower()
    if not sep or scheme not in ("planetoid", "npz", "dir", "humloc", "synthetic", "synthetic-mag", "acm",
                                 "hetero-dir", "events", "jodie"):
        raise unknown_name(name)
    if scheme in ("synthetic", "synthetic-mag"):
        if arg:
            raise unknown_name(name)
        return scheme, "", scheme, query
    if not arg:
        raise DatasetError(
            f"expected {scheme}:<{'name' if scheme == 'planetoid' else 'path'}>, found {name!r} with nothing "
            f"after ':'; e.g. {'planetoid:cora' if scheme == 'planetoid' else scheme + ':/data/graph'}"
        )
    if scheme == "planetoid":
        arg = arg.lower()
    return scheme, arg, f"{scheme}:{arg}", query


# ---------------------------------------------------------------- where each source reads

def under_root(arg: str, root: str | None) -> Path:
    """``arg`` (a ``scheme:PATH``'s PATH) relative to ``root`` when given and ``arg`` is relative."""
    path = Path(arg).expanduser()
    if not path.is_absolute() and root is not None:
        path = Path(root).expanduser() / path
    return path


def _planetoid_candidates(root: str | None) -> list[Path]:
    if root is not None:
        bases = [Path(root).expanduser()]
    else:
        env = os.environ.get("GNNSCALE_DATA")
        bases = []
        if env:
            bases += [Path(env) / "planetoid", Path(env)]
        bases += [Path("data") / "planetoid", Path("data")]
    out: list[Path] = []
    for b in bases:
        out += [b, b / "raw"]
    return out


def _planetoid_best(name: str, root: str | None) -> tuple[Path, int, list[Path]]:
    candidates = _planetoid_candidates(root)
    best, best_have = candidates[0], -1
    for folder in candidates:
        have = sum((folder / f"ind.{name}.{f}").is_file() for f in PLANETOID_FILES)
        if have > best_have:
            best, best_have = folder, have
    return best, best_have, candidates


def planetoid_folder(name: str, root: str | None) -> Path:
    """The folder holding ``ind.<name>.*``: the candidate with the most of the 8 files (``root`` and
    its ``raw/``; without ``root``: ``$GNNSCALE_DATA/planetoid``, ``$GNNSCALE_DATA``,
    ``./data/planetoid``, ``./data``, each with its ``raw/``).

    Raises DatasetError if that folder misses any file, naming the missing files and the folder.
    """
    best, best_have, candidates = _planetoid_best(name, root)
    missing = [f"ind.{name}.{f}" for f in PLANETOID_FILES if not (best / f"ind.{name}.{f}").is_file()]
    if missing:
        looked = ", ".join(str(c) for c in candidates)
        if best_have == 0:
            raise DatasetError(
                f"expected the 8 raw Planetoid files ind.{name}.{{{','.join(PLANETOID_FILES)}}} in one folder, "
                f"found none of them in {looked}; give that folder (or its parent "
                "with a raw/ subfolder) with --root DIR (root= in Python), or set $GNNSCALE_DATA"
            )
        raise DatasetError(
            f"expected all 8 raw Planetoid files of {name!r} in {best.resolve()}, found "
            f"{best_have}; missing: {', '.join(missing)}. Copy the missing file(s) from "
            "https://github.com/kimiyoung/planetoid/tree/master/data into that folder"
        )
    return best


def npz_file(arg: str, root: str | None) -> Path:
    """The file ``npz:<arg>`` names; DatasetError if it is not one."""
    path = under_root(arg, root)
    if not path.is_file():
        raise DatasetError(
            f"expected an .npz file at {path}, found {'a folder' if path.is_dir() else 'nothing'}; "
            "pass npz:<path to the file> (relative paths are relative to root or the working directory)"
        )
    return path


def _humloc_candidates(root: str | None) -> list[Path]:
    if root is not None:
        return [Path(root).expanduser() / "humloc"]
    candidates = []
    if os.environ.get("GNNSCALE_DATA"):
        candidates.append(Path(os.environ["GNNSCALE_DATA"]).expanduser() / "humloc")
    return candidates + [Path("..") / "shared" / "data" / "humloc"]


def humloc_folder(root: str | None) -> Path:
    """The folder plain ``humloc`` names: ROOT/humloc, else $GNNSCALE_DATA/humloc when that
    folder exists, else ../shared/data/humloc; DatasetError if none exists."""
    candidates = _humloc_candidates(root)
    for folder in candidates:
        if folder.is_dir():
            return folder
    raise DatasetError(
        f"expected the HumLoc folder at {' or '.join(str(c) for c in candidates)}, found nothing; "
        "pass humloc:<folder with edge_list.csv, features.csv, labels.csv, split.pt>, or its parent with --root DIR "
        "(root= in Python)"
    )


def ogb_root(root: str | None) -> str:
    """The OGB root: ``root``, else ``$GNNSCALE_DATA``, else ``./data``."""
    return root if root is not None else (os.environ.get("GNNSCALE_DATA") or "data")


def _ogb_folder(name: str, root: str | None) -> Path:
    base = Path(ogb_root(root)).expanduser()
    folder = base / "_".join(name.split("-"))
    if not folder.is_dir() and base.is_dir():  # ogb's own spelling (ogbn-papers100M) given in another case
        try:
            same = [p for p in base.iterdir() if p.name.lower() == folder.name.lower() and p.is_dir()]
        except OSError:
            same = []
        folder = same[0] if len(same) == 1 else folder
    return folder


def input_location(name: str, root: str | None = None) -> tuple[Path, tuple[str, ...]] | None:
    """Where the dataset ``name`` reads: ``(absolute file or folder, its input files as glob patterns
    relative to a folder)``; None for a generated source (``synthetic``, ``synthetic-mag``), an
    unknown name, or Planetoid / plain ``humloc`` files found nowhere (the load then says so).
    Nothing is read; the location need not exist yet (an OGB download)."""
    try:
        source, arg, _, query = parse_name(name)
    except DatasetError:
        return None
    if root is None and "root" in query:  # as load_dataset takes it
        root = str(query["root"])
    if source == "planetoid":
        if arg not in PLANETOID_NAMES:
            return None
        folder, have, _ = _planetoid_best(arg, root)
        where = (folder, tuple(f"ind.{arg}.{f}" for f in PLANETOID_FILES)) if have > 0 else None
    elif source in ("npz", "events", "jodie"):
        where = (under_root(arg, root), ())
    elif source == "humloc" and not arg:
        folder = next((f for f in _humloc_candidates(root) if f.is_dir()), None)
        where = None if folder is None else (folder, FOLDER_FILES["humloc"])
    elif source in ("ogbn", "ogbl"):
        where = (_ogb_folder(arg, root), FOLDER_FILES[source])
    elif source in FOLDER_FILES:
        where = (under_root(arg, root), FOLDER_FILES[source])
    else:
        return None
    return None if where is None else (Path(os.path.abspath(where[0])), where[1])


# ---------------------------------------------------------------- identity

def file_identity(path: Path) -> dict[str, Any]:
    """``{"size", "mtime_ns"}`` and ``sha256`` of the whole file (up to FULL_DIGEST_BYTES) or
    ``head_sha256`` of its first HEAD_BYTES (a larger file)."""
    st = path.stat()
    out: dict[str, Any] = {"size": int(st.st_size), "mtime_ns": int(st.st_mtime_ns)}
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        if st.st_size <= FULL_DIGEST_BYTES:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
            out["sha256"] = digest.hexdigest()
        else:
            digest.update(f.read(HEAD_BYTES))
            out["head_sha256"] = digest.hexdigest()
    return out


def input_identity(name: str, root: str | None = None) -> dict[str, Any] | None:
    """The identity of what ``name`` reads: ``{"location": absolute path, "files": {path relative to
    a folder location (the file's name for a file): file_identity}}``; None where
    :func:`input_location` is None. Files that do not exist are left out."""
    where = input_location(name, root)
    if where is None:
        return None
    location, patterns = where
    if location.is_file():
        files = {location.name: location}
    else:
        files = {}
        for pattern in patterns:
            try:
                found = sorted(location.glob(pattern)) if location.is_dir() else []
            except OSError:  # an unreadable folder: the load says so in its own line
                found = []
            files.update((p.relative_to(location).as_posix(), p) for p in found if p.is_file())
    out = {}
    for rel, p in sorted(files.items()):
        try:
            out[rel] = file_identity(p)
        except OSError:  # unreadable: left out, as a missing file is (the load names it)
            pass
    return {"location": str(location), "files": out}


def _when(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _file_change(rel: str, old: dict, new: dict) -> str | None:
    if old.get("size") != new.get("size"):
        return f"{rel} changed (size {old.get('size', 0):,} -> {new['size']:,} bytes)"
    if "sha256" in old and "sha256" in new:  # the whole content decides (a touch is no change)
        return None if old["sha256"] == new["sha256"] else f"{rel} changed (same size, other content)"
    if old.get("head_sha256") != new.get("head_sha256") and "head_sha256" in new:
        return f"{rel} changed (same size, other content)"
    if old.get("mtime_ns") != new.get("mtime_ns"):
        return f"{rel} changed (modified {_when(new['mtime_ns'])}, was {_when(old.get('mtime_ns', 0))})"
    return None


def identity_changes(old: dict | None, new: dict | None) -> list[str]:
    """What differs between two :func:`input_identity` results, in words (``x.npy changed (size
    4,224 -> 6,272 bytes)``, ``split.npz is new``, ``y.npy is gone``); empty when they match."""
    if old == new:
        return []
    if old is None or new is None:
        return ["the cached partition records no input identity (made before it was recorded)" if old is None else
                "the input is no longer found"]
    if old.get("location") != new.get("location"):
        return [f"the input moved from {old.get('location')} to {new.get('location')}"]
    was, now = old.get("files", {}), new.get("files", {})
    out = []
    for rel in sorted(set(was) | set(now)):
        if rel not in now:
            out.append(f"{rel} is gone")
        elif rel not in was:
            out.append(f"{rel} is new")
        else:
            change = _file_change(rel, was[rel], now[rel])
            if change:
                out.append(change)
    return out


def describe_identity(identity: dict, limit: int = 8) -> list[str]:
    """Lines for ``gnnscale info``: the location, then a line per input file (its size, when it
    was modified, the start of its digest), at most ``limit`` of them."""
    files = identity.get("files", {})
    lines = [f"{identity.get('location')} ({len(files)} file(s), {sum(f['size'] for f in files.values()):,} bytes)"]
    for rel, f in list(files.items())[:limit]:
        digest = f"sha256 {f['sha256'][:12]}" if "sha256" in f else f"sha256 of the first {HEAD_BYTES:,} bytes " \
            f"{f.get('head_sha256', '?')[:12]}"
        lines.append(f"{rel}: {f['size']:,} bytes, modified {_when(f['mtime_ns'])}, {digest}")
    if len(files) > limit:
        lines.append(f"... and {len(files) - limit} more file(s)")
    return lines
