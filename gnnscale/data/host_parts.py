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
from gnnscale.partitioning.manifest import edge_feature_dim, load_meta, part_dir_name
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


def host_setup(comm, parts_dir, cfg, mode: str, typed: dict | str | None = None) -> HostReads:
    """The host reads of a run of ``cfg`` in ``mode``, as :func:`gnnscale.planning.plan.host_reads`
    resolves them; an auto one (not given) stays on only if every rank finds in its partition
    folder the files of every part on its host (one more gathered answer: the same on every
    rank). A folder holding only its host's parts, as on separate hosts, then exchanges as
    before. Collective when anything is wanted."""
    features, graph = host_reads(cfg, mode, typed)
    if not (features or graph):
        return HostReads(False, False, None)
    hosts = host_ranks(comm)
    if cfg.host_features is None or cfg.host_graph is None:
        found = {name: all((Path(parts_dir) / part_dir_name(k) / name).is_file() for k in hosts.peers)
                 for name in ("x.npy", "indptr.npy", "indices.npy")}
        ok = comm.all_gather_object((found["x.npy"], found["indptr.npy"] and found["indices.npy"]))
        features = features and (cfg.host_features is not None or all(f for f, _ in ok))
        graph = graph and (cfg.host_graph is not None or all(g for _, g in ok))
    return HostReads(features, graph, hosts if (features or graph) else None)


def open_host_features(parts_dir, book: PartitionBook, hosts: HostRanks, feature_dim: int) -> dict[int, np.ndarray]:
    """{rank: read-only memmap [n_rank, F]} of ``hosts.peers``' feature rows, as stored (float32, float16
    or bfloat16's bits: the folder's feature_dtype)."""
    out = {}
    stored = file_dtype(meta_feature_dtype(load_meta(Path(parts_dir))))
    for k in hosts.peers:
        out[k] = load_array(Path(parts_dir) / part_dir_name(k) / "x.npy", stored,
                            (book.part_size(k), int(feature_dim)), mmap="r")
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
