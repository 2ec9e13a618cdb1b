"""Other ranks' parts read straight from the partition folder by ranks on the same host.

``--host-features`` (each part's ``x.npy``) and ``--host-graph`` (each part's CSC, its nodes'
stream keys and edge features): the files are memory-mapped, so the host's page cache holds
one copy however many ranks read them, and what a rank reads so is never asked of its owner.
Owners on other hosts still answer through the communicator. Rank r trains part r.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from gnnscale.planning.plan import host_reads
from gnnscale.partitioning.book import PartitionBook
from gnnscale.partitioning.feature_dtype import file_dtype, meta_feature_dtype
from gnnscale.errors import PartitionError
from gnnscale.partitioning.manifest import edge_feature_dim, load_meta, part_dir_name, part_files
from gnnscale.partitioning.validate import check_pointers, load_array
from gnnscale.samplers.distributed import HostGraph


@dataclass(frozen=True)
class HostRanks:
    """The other ranks whose parts this rank reads (``peers``, on its host), and whether every
    rank shares one host (``complete``: the same on every rank, from the same gathered names)."""

    peers: tuple[int, ...]
    complete: bool


def host_ranks(comm) -> HostRanks:
    """Gather every rank's host name once (one ``control`` exchange). Collective."""
    hosts = comm.all_gather_object(socket.gethostname())
    me = hosts[comm.rank]
    return HostRanks(tuple(k for k, h in enumerate(hosts) if k != comm.rank and h == me), len(set(hosts)) == 1)


@dataclass(frozen=True)
class HostReads:
    """What a rank reads from the partition folder instead of asking the owners: the other parts'
    feature rows (``features``), their graphs (``graph``), and the ranks on its host (None when
    it reads nothing)."""

    features: bool
    graph: bool
    hosts: HostRanks | None

    def info(self) -> dict:
        """The metrics' ``process.host_reads``: features, graph, how many other parts are read."""
        return {"features": self.features, "graph": self.graph, "parts": len(self.hosts.peers) if self.hosts else 0}


FEATURE_FILES = ("x.npy",)
GRAPH_FILES = ("indptr.npy", "indices.npy")


def present_parts(parts_dir, meta: dict) -> list[int]:
    """The parts whose every file (:func:`gnnscale.partitioning.manifest.part_files`) is in ``parts_dir``:
    all of them in a whole folder, this host's in a per-host one (meta.json and its ranks' parts)."""
    files = part_files(meta)
    return [p for p in range(int(meta["num_parts"])) if has_files(parts_dir, p, files)]


def has_files(parts_dir, part: int, files) -> bool:
    """Whether part ``part``'s folder in ``parts_dir`` holds every file of ``files``."""
    return all((Path(parts_dir) / part_dir_name(part) / f).is_file() for f in files)


def plan_host_reads(comm, parts_dir, wants, hosts: HostRanks | None = None) -> tuple[list[bool], HostRanks | None]:
    """The one host plan, for the engine's workers and the PyG stores alike: which kinds of the other
    parts' data this rank reads from its partition folder instead of asking their owners.

    ``wants``: per kind (feature rows, graphs, labels), ``(want, files)``: True (read; every part on
    this host must have ``files`` in the folder, else one line says so), False (ask the owners) or
    None (auto), and the files the kind reads in each part's folder. The parts read are those of the
    other ranks on this host (host names gathered once: :func:`host_ranks`). An auto kind stays on
    only if every rank finds, by the files present, every part on its host in its folder (one more
    gathered answer: the same on every rank); a folder holding only its host's parts, as on separate
    hosts, reads them; a folder lacking one of them asks the owners for all. Returns (per kind
    whether it is read, the ranks read or None when nothing is). Collective when anything is wanted,
    unless ``hosts`` is given: every rank's view is then taken to be this folder's (e.g. a PyG graph
    store opened without a communicator, which needs every part in the folder), nothing is gathered.
    """
    on = [w is not False for w, _ in wants]
    if not any(on):
        return on, None
    gather = hosts is None
    hosts = host_ranks(comm) if gather else hosts
    for (w, files) in wants:
        lacking = [k for k in hosts.peers if w and not has_files(parts_dir, k, files)]
        if lacking:
            raise PartitionError(f"rank {comm.rank} was asked to read the parts on its host from {parts_dir}, but it "
                                 f"lacks {part_dir_name(lacking[0])}'s {', '.join(files)}; copy that part there, or "
                                 "leave the host reads to auto (the missing parts are then asked of their owners).")
    auto = [i for i, (w, _) in enumerate(wants) if w is None]
    if auto:  # every kind's answer, gathered once
        found = tuple(all(has_files(parts_dir, k, files) for k in hosts.peers) for _, files in wants)
        ok = comm.all_gather_object(found) if gather else [found]
        for i in auto:
            on[i] = all(o[i] for o in ok)
    return on, hosts if any(on) else None


def host_setup(comm, parts_dir, cfg, mode: str, typed: dict | str | None = None) -> HostReads:
    """The host reads of a run of ``cfg`` in ``mode``, as :func:`gnnscale.planning.plan.host_reads`
    resolves them, decided by :func:`plan_host_reads` (an option left out is auto). Collective when
    anything is wanted."""
    features, graph = host_reads(cfg, mode, typed)
    want = [(False if not on else (None if given is None else True), files)
            for on, given, files in ((features, cfg.host_features, FEATURE_FILES), (graph, cfg.host_graph, GRAPH_FILES))]
    (features, graph), hosts = plan_host_reads(comm, parts_dir, want)
    return HostReads(features, graph, hosts)


def open_host_features(parts_dir, book: PartitionBook, hosts: HostRanks, feature_dim: int,
                       name: str = "x.npy", sizes=None) -> dict[int, np.ndarray]:
    """{rank: read-only memmap [n_rank, F]} of ``hosts.peers``' feature rows, as stored (float32, float16
    or bfloat16's bits: the folder's feature_dtype). ``name``/``sizes``: another file of rows and its
    row count per rank (a typed folder's ``x_t{i}.npy``, float32; default: the part's size)."""
    out = {}
    stored = file_dtype(meta_feature_dtype(load_meta(Path(parts_dir)))) if name == "x.npy" else np.float32
    for k in hosts.peers:
        n = book.part_size(k) if sizes is None else int(sizes[k])
        out[k] = load_array(Path(parts_dir) / part_dir_name(k) / name, stored, (n, int(feature_dim)), mmap="r")
    return out


def open_host_labels(parts_dir, hosts: HostRanks, rows: dict[int, tuple[int, int]] | None = None) -> dict[int, np.ndarray]:
    """{rank: read-only memmap} of ``hosts.peers``' labels (``y.npy``; ``rows``: per rank the
    ``[lo, hi)`` rows kept, e.g. a typed part's target type's)."""
    out = {}
    for k in hosts.peers:
        y = np.load(Path(parts_dir) / part_dir_name(k) / "y.npy", mmap_mode="r")
        out[k] = y if rows is None else y[rows[k][0]:rows[k][1]]
    return out


def open_host_graphs(parts_dir, book: PartitionBook, hosts: HostRanks, meta: dict,
                     edge_attr: bool = False) -> dict[int, HostGraph]:
    """{rank: :class:`~gnnscale.samplers.distributed.HostGraph`} of ``hosts.peers``' parts: their
    CSC (int64 ``indptr`` [n_k + 1], ``indices`` [E_k] global ids), the nodes' stream keys
    (``orig_ids``, int64 [n_k]) and, with ``edge_attr``, their in-edges' features (float32
    [E_k, De]); mapped copy-on-write as :func:`~gnnscale.partitioning.load_part` maps its own."""
    out = {}
    for k in hosts.peers:
        pdir = Path(parts_dir) / part_dir_name(k)
        n = book.part_size(k)
        indptr = load_array(pdir / "indptr.npy", np.int64, (n + 1,), mmap="c")
        indices = load_array(pdir / "indices.npy", np.int64, (None,), mmap="c")
        check_pointers(pdir / "indptr.npy", indptr, indices.shape[0])
        keys = load_array(pdir / "orig_ids.npy", np.int64, (n,), mmap="c")
        attr = None
        if edge_attr:
            attr = torch.from_numpy(load_array(pdir / "edge_attr.npy", np.float32,
                                               (indices.shape[0], edge_feature_dim(meta)), mmap="c"))
        out[k] = HostGraph(torch.from_numpy(indptr), torch.from_numpy(indices), torch.from_numpy(keys), attr)
    return out
